// MetaVoice stage 1: gpt-fast Transformer over the classifier-free-guidance batch of two rows.
//   x = tok_emb[token] + pos_emb[position] + (row 0 ? speaker_cond_pos(spk_emb) : 0)
//   per layer:  h = x + wo(Attn(RMSNorm_attn(x)))      (causal, scale 1/sqrt(head_dim))
//               x = h + w2(silu(w1 n) * w3 n),  n = RMSNorm_ffn(h)
//   logits = output(RMSNorm(x))
// wqkv rows are Q (n_head heads), K then V (n_local_heads heads each); query head h uses key
// head h / (n_head / n_local_heads). RMSNorm is x * rsqrt(mean(x^2) + eps) * w.
//
// The state (MvKvState, rows = 2) keeps the keys and values of every position of both rows:
// f32 for an f32/f16 model, bf16 for a bf16 one (what the attention reads per step halves), and
// int8 rows with a scale per head and position for a model of quantized blocks (a little over a
// quarter: at the positions of a long utterance the cache, more than the weights, is what a
// step reads). CACHET_MV_KV (f32, bf16 or i8) chooses another.
// A forward of T tokens per row runs the 2T rows through each linear layer as one matrix
// product, so the weights are read once for both rows.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>

#include "cachet/arena.h"
#include "cachet/error.h"
#include "cachet/metavoice_gpt.h"
#include "cachet/ops.h"
#include "cachet/profile.h"
#include "cachet/threadpool.h"
#include "mv_state.h"
#include "mv_util.h"
#include "rg_weights.h"

namespace cachet {

namespace {
constexpr char kArch[] = "metavoice_stage1";
constexpr int64_t kMaxTokens = 128;  // tokens per row and pass: bounds scratch memory

// The cache's element type for weights of type wt and heads of hd values.
DType kv_type_for(DType wt, int64_t hd) {
  if (const char* e = std::getenv("CACHET_MV_KV"); e && *e) {
    const std::string v(e);
    if (v == "f32") return DType::F32;
    if (v == "bf16") return DType::BF16;
    if (v == "i8" && hd <= ops::kMaxI8Row) return DType::I8;
    fail("CACHET_MV_KV='", v, "': expected f32, bf16 or i8 (i8 with heads of at most ",
         ops::kMaxI8Row, " values; this model's have ", hd, ")");
  }
  if (wt == DType::F32 || wt == DType::F16) return DType::F32;
  if (wt == DType::BF16 || hd > ops::kMaxI8Row) return DType::BF16;
  return DType::I8;
}
}  // namespace

using models::Linear;

struct MvStage1::Impl {
  struct Layer {
    std::vector<float> attn_norm, ffn_norm;
    Linear wqkv, wo, w2;
    models::FusedLinear w13;  // swiglu.w1, w3
  };

  ModelFiles files;
  ThreadPool* pool;
  MvStage1Args a;
  ModelInfo info;
  const Tensor* tok = nullptr;
  const Tensor* pos = nullptr;
  Linear spk, output;
  std::vector<float> norm;
  std::vector<Layer> layers;
  std::shared_ptr<const models::MvKvLayout> layout;
  Arena arena{1 << 20};
  // The speaker projection of the last embedding seen (recomputed only when it changes).
  std::vector<float> spk_in, spk_proj;

  Impl(ModelFiles f, const MvStage1Args& args, ThreadPool* p)
      : files(models::strip_orig_mod(std::move(f))), pool(p ? p : &default_pool()), a(args) {
    load();
    build_info();
    for (const Layer& L : layers) {
      models::release_packed_sources(files, {&L.wqkv, &L.wo, &L.w2});
      models::release_packed_sources(files, L.w13);
    }
    models::release_packed_sources(files, {&spk, &output});
  }

  int64_t qkv_dim() const { return (a.n_head + 2 * a.n_local_heads) * a.head_dim(); }
  int64_t kv_dim() const { return a.n_local_heads * a.head_dim(); }

  void load() {
    const ModelFiles& f = files;
    const int64_t d = a.dim, I = a.intermediate_size;
    tok = &models::need_tensor(f, "tok_embeddings.weight", {a.vocab_size, d});
    pos = &models::need_tensor(f, "pos_embeddings.weight", {a.block_size, d});
    spk = models::need_linear(f, "speaker_cond_pos", d, a.speaker_emb_dim, false);
    output = models::need_linear(f, "output", a.vocab_size, d, false);
    norm = models::to_f32(models::need_tensor(f, "norm.weight", {d}));
    for (int64_t i = 0; i < a.n_layer; ++i) {
      const std::string p = "layers." + std::to_string(i) + ".";
      Layer L;
      L.attn_norm = models::to_f32(models::need_tensor(f, p + "attention_norm.weight", {d}));
      L.ffn_norm = models::to_f32(models::need_tensor(f, p + "ffn_norm.weight", {d}));
      L.wqkv = models::need_linear(f, p + "attention.wqkv", qkv_dim(), d, false);
      L.wo = models::need_linear(f, p + "attention.wo", d, a.n_head * a.head_dim(), false);
      L.w13 = models::need_fused_linear(
          f, {{p + "feed_forward.swiglu.w1", I}, {p + "feed_forward.swiglu.w3", I}}, d, false);
      L.w2 = models::need_linear(f, p + "feed_forward.w2", d, I, false);
      layers.push_back(std::move(L));
    }
    models::reject_extra_layers(f, "layers.", a.n_layer, "n_layer");
  }

  void build_info() {
    info.arch = kArch;
    info.name = files.path;
    info.vocab_size = a.vocab_size;
    info.bos_id = info.eos_id = info.pad_id = -1;
    info.max_positions = a.block_size;
    info.fingerprint = models::fingerprint(kArch, a.to_json().dump(), files);
    // Per step (both rows): every matrix once, the norms, and two embedding rows per row.
    uint64_t b = output.bytes() + norm.size() * 4;
    b += 2 * (row_bytes(tok->dtype, a.dim) + row_bytes(pos->dtype, a.dim));
    for (const Layer& L : layers)
      b += L.wqkv.bytes() + L.wo.bytes() + L.w13.bytes() + L.w2.bytes() +
           (L.attn_norm.size() + L.ffn_norm.size()) * 4;
    info.weight_bytes = b;

    auto lay = std::make_shared<models::MvKvLayout>();
    lay->arch = kArch;
    lay->fingerprint = info.fingerprint;
    lay->layers = a.n_layer;
    lay->rows = 2;
    lay->kv_dim = kv_dim();
    lay->kv_heads = a.n_local_heads;
    const DType wt = layers.empty() ? DType::F32 : layers[0].wqkv.w.type;
    lay->kv_type = kv_type_for(wt, a.head_dim());
    lay->max_positions = a.block_size;
    models::set_kv_run(*lay);
    layout = std::move(lay);
  }

  models::MvKvState& own_state(State& s) const {
    return models::own_kv_state(s, *layout, "metavoice stage 1 forward");
  }

  void check_row(std::span<const int32_t> t, int row) const {
    for (size_t i = 0; i < t.size(); ++i)
      if (t[i] < 0 || t[i] >= a.vocab_size)
        fail("metavoice stage 1: token id ", t[i], " at index ", i, " of row ", row,
             " is outside the vocabulary (size ", a.vocab_size, ")");
  }

  const float* speaker_term(const float* spk_emb) {
    if (!spk_emb) return nullptr;
    const size_t n = static_cast<size_t>(a.speaker_emb_dim);
    for (size_t i = 0; i < n; ++i)
      if (!std::isfinite(spk_emb[i]))
        fail("metavoice stage 1: the speaker embedding holds a non-finite value at ", i);
    if (spk_in.size() != n || std::memcmp(spk_in.data(), spk_emb, n * sizeof(float)) != 0) {
      spk_in.assign(spk_emb, spk_emb + n);
      spk_proj.resize(static_cast<size_t>(a.dim));
      models::apply_linear(spk, spk_in.data(), 1, spk_proj.data(), *pool);
    }
    return spk_proj.data();
  }

  void forward(State& state, std::span<const int32_t> row0, std::span<const int32_t> row1,
               const float* spk_emb, std::vector<float>& logits, bool all_positions) {
    models::MvKvState& st = own_state(state);
    if (row0.empty()) fail("metavoice stage 1 forward: empty token list");
    if (row0.size() != row1.size())
      fail("metavoice stage 1 forward: the guidance rows have ", row0.size(), " and ", row1.size(),
           " tokens (they must be equal)");
    check_row(row0, 0);
    check_row(row1, 1);
    const int64_t T = static_cast<int64_t>(row0.size());
    if (st.pos + T > a.block_size)
      fail("metavoice stage 1 forward: ", T, " tokens at position ", st.pos, " exceed block_size ",
           a.block_size);
    const float* spk_term = speaker_term(spk_emb);
    const int64_t V = a.vocab_size;
    const size_t need = static_cast<size_t>(2 * (all_positions ? T : 1) * V);
    if (logits.size() != need) logits.resize(need);
    st.reserve_positions(st.pos + T);
    for (int64_t start = 0; start < T; start += kMaxTokens) {
      const int64_t n = std::min(kMaxTokens, T - start);
      float* out0 = nullptr;
      float* out1 = nullptr;
      if (all_positions) {
        out0 = logits.data() + start * V;
        out1 = logits.data() + (T + start) * V;
      } else if (start + n == T) {
        out0 = logits.data();
        out1 = logits.data() + V;
      }
      run(st, row0.data() + start, row1.data() + start, n, spk_term, all_positions, out0, out1);
    }
  }

  // Attention of query head h of row b at position p over the cached positions 0..p: scores
  // (a matrix-vector product with the head's keys), softmax, then the values weighted by them.
  // Steps and prefills both run it, so they give the same outputs. The cache's runs are taken
  // in order; each score is its own row's, and the weighted sum adds the rows in order across
  // runs, so how the positions fall into runs does not change the outputs.
  void attend_head(const models::MvKvState& st, int64_t l, int64_t b, int64_t h, int64_t p,
                   const float* q, float scale, float* sc, float* o) const {
    const int64_t hd = a.head_dim(), kh = h / (a.n_head / a.n_local_heads), nk = p + 1;
    const bool bf16 = st.layout->kv_type == DType::BF16;
    if (st.layout->kv_type == DType::I8) {
      st.for_runs<int8_t>(l, 0, b, kh, nk, [&](int64_t j, const int8_t* k, int64_t n) {
        ops::dot_rows_i8(q, k, st.scales(l, 0, b, kh, j), hd, n, hd, scale, sc + j);
      });
      ops::softmax(sc, nk);
      std::memset(o, 0, static_cast<size_t>(hd) * sizeof(float));
      st.for_runs<int8_t>(l, 1, b, kh, nk, [&](int64_t j, const int8_t* v, int64_t n) {
        ops::axpy_rows_i8(sc + j, v, st.scales(l, 1, b, kh, j), hd, n, hd, o);
      });
      return;
    }
    if (bf16) {
      st.for_runs<uint16_t>(l, 0, b, kh, nk, [&](int64_t j, const uint16_t* k, int64_t n) {
        ops::dot_rows_bf16(q, k, hd, n, hd, scale, sc + j);
      });
    } else {
      st.for_runs<float>(l, 0, b, kh, nk, [&](int64_t j, const float* k, int64_t n) {
        matvec(MatView{DType::F32, n, hd, k, static_cast<size_t>(hd) * sizeof(float)}, q, sc + j,
               serial_pool());
      });
      ops::scale(sc, scale, sc, nk);
    }
    ops::softmax(sc, nk);
    std::memset(o, 0, static_cast<size_t>(hd) * sizeof(float));
    if (bf16)
      st.for_runs<uint16_t>(l, 1, b, kh, nk, [&](int64_t j, const uint16_t* v, int64_t n) {
        ops::axpy_rows_bf16(sc + j, v, hd, n, hd, o);
      });
    else
      st.for_runs<float>(l, 1, b, kh, nk, [&](int64_t j, const float* v, int64_t n) {
        ops::axpy_rows(sc + j, v, hd, n, hd, o);
      });
  }

  // attend_head for query heads h and h + 1 of a bf16 or I8 cache, their keys and then their
  // values read side by side; q and o hold the two heads one after the other.
  void attend_two_heads(const models::MvKvState& st, int64_t l, int64_t b, int64_t h, int64_t p,
                        const float* q, float scale, float* sc0, float* sc1, float* o) const {
    const int64_t hd = a.head_dim(), group = a.n_head / a.n_local_heads, nk = p + 1;
    const int64_t kh0 = h / group, kh1 = (h + 1) / group;
    const float* qs[2] = {q, q + hd};
    float* os[2] = {o, o + hd};
    // Both heads' rows fall into the same runs.
    if (st.layout->kv_type == DType::I8) {
      auto both = [&](int kind, auto&& fn) {
        st.for_runs<int8_t>(l, kind, b, kh0, nk, [&](int64_t j, const int8_t* r0, int64_t n) {
          const int8_t* rs[2] = {r0, st.rows<int8_t>(l, kind, b, kh1, j)};
          const float* ss[2] = {st.scales(l, kind, b, kh0, j), st.scales(l, kind, b, kh1, j)};
          fn(j, rs, ss, n);
        });
      };
      both(0, [&](int64_t j, const int8_t* const* ks, const float* const* ss, int64_t n) {
        float* scs[2] = {sc0 + j, sc1 + j};
        ops::dot_rows_i8_x2(qs, ks, ss, hd, n, hd, scale, scs);
      });
      ops::softmax(sc0, nk);
      ops::softmax(sc1, nk);
      std::memset(o, 0, static_cast<size_t>(2 * hd) * sizeof(float));
      both(1, [&](int64_t j, const int8_t* const* vs, const float* const* ss, int64_t n) {
        const float* ws[2] = {sc0 + j, sc1 + j};
        ops::axpy_rows_i8_x2(ws, vs, ss, hd, n, hd, os);
      });
      return;
    }
    auto both = [&](int kind, auto&& fn) {
      st.for_runs<uint16_t>(l, kind, b, kh0, nk, [&](int64_t j, const uint16_t* r0, int64_t n) {
        fn(j, r0, st.rows<uint16_t>(l, kind, b, kh1, j), n);
      });
    };
    both(0, [&](int64_t j, const uint16_t* k0, const uint16_t* k1, int64_t n) {
      const uint16_t* ks[2] = {k0, k1};
      float* scs[2] = {sc0 + j, sc1 + j};
      ops::dot_rows_bf16_x2(qs, ks, hd, n, hd, scale, scs);
    });
    ops::softmax(sc0, nk);
    ops::softmax(sc1, nk);
    std::memset(o, 0, static_cast<size_t>(2 * hd) * sizeof(float));
    both(1, [&](int64_t j, const uint16_t* v0, const uint16_t* v1, int64_t n) {
      const uint16_t* vs[2] = {v0, v1};
      const float* ws[2] = {sc0 + j, sc1 + j};
      ops::axpy_rows_bf16_x2(ws, vs, hd, n, hd, os);
    });
  }

  // Runs n tokens of each row at positions st.pos ... st.pos + n - 1. Rows [0, n) of the pass
  // are guidance row 0, rows [n, 2n) row 1. With out0/out1 set, writes the logits of every
  // position (all) or of the last one of each row.
  void run(models::MvKvState& st, const int32_t* tok0, const int32_t* tok1, int64_t n,
           const float* spk_term, bool all, float* out0, float* out1) {
    ThreadPool& tp = *pool;
    const int64_t N = 2 * n, d = a.dim, I = a.intermediate_size, V = a.vocab_size;
    const int64_t H = a.n_head, hd = a.head_dim(), kvd = kv_dim(), qd = H * hd;
    const int64_t pos0 = st.pos;
    const float eps = static_cast<float>(a.norm_eps);

    arena.reset();
    auto buf = [&](int64_t k) { return arena.alloc<float>(static_cast<size_t>(k)); };
    float* x = buf(N * d);
    float* xn = buf(N * d);
    float* y = buf(N * d);
    float* qkv = buf(N * qkv_dim());
    float* att = buf(N * qd);
    float* g = buf(N * I);
    float* u = buf(N * I);
    const int64_t max_keys = pos0 + n;
    float* scores = buf(static_cast<int64_t>(tp.size()) * 2 * max_keys);

    // x = tok_emb + pos_emb (+ speaker term on row 0)
    std::optional<profile::Scope> ps(std::in_place, "embedding");
    std::vector<float>& tmp = row_tmp_;
    tmp.resize(static_cast<size_t>(d));
    for (int64_t r = 0; r < N; ++r) {
      const int64_t b = r / n, t = r % n;
      const int32_t token = b == 0 ? tok0[t] : tok1[t];
      float* xr = x + r * d;
      models::row_to_f32(tok->dtype, tok->row(token), xr, d);
      models::row_to_f32(pos->dtype, pos->row(pos0 + t), tmp.data(), d);
      ops::add(xr, tmp.data(), xr, d);
      if (b == 0 && spk_term) ops::add(xr, spk_term, xr, d);
    }

    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    for (size_t li = 0; li < layers.size(); ++li) {
      const Layer& L = layers[li];
      const int64_t l = static_cast<int64_t>(li);
      ps.reset();
      for (int64_t r = 0; r < N; ++r)
        ops::rmsnorm(x + r * d, L.attn_norm.data(), xn + r * d, d, eps, false);
      ps.emplace("attention wqkv", static_cast<double>(L.wqkv.bytes()));
      models::apply_linear(L.wqkv, xn, N, qkv, tp);
      ps.emplace("attention");

      // The new keys and values go to the cache first; position p then attends to 0..p. A
      // decoding step (one position per row) with a key head per query head puts each head in
      // its own attention item instead, before it attends: the threads share the rounding and
      // the first writes to the cache's new pages (page faults), which on one thread left the
      // other waiting for up to a tenth of a step.
      // The rows the items put go to lines in no cache: asked for all at once here, they come
      // in together rather than an item's at a time. Timed on one host (ad-hoc timers, steps
      // alternating with and without): a thread's puts went from 15 to 6-8 us of a layer's
      // attention at position 16, and the attention from 41-46 to 37-43 us; 4-8% less up to
      // position 450.
      const bool put_in_items = n == 1 && a.n_local_heads == H;
      for (int64_t r = 0; r < N; ++r) {
        const int64_t b = r / n, p = pos0 + r % n;
        if (put_in_items) {
          st.prefetch_put(l, p, b);
        } else {
          const float* kr = qkv + r * qkv_dim() + qd;
          st.put(l, p, b, kr, kr + kvd);
        }
      }
      auto put_heads = [&](int64_t r, int64_t h, int64_t count) {
        if (!put_in_items) return;
        const float* kr = qkv + r * qkv_dim() + qd;
        st.put_heads(l, pos0 + r % n, r / n, h, h + count, kr, kr + kvd);
      };
      // Every (row, head) on its own: each streams its head's keys and values in order.
      // With a bf16 cache, heads go in pairs whose keys, then values, are read side by side:
      // two streams from memory per thread. One stream per thread left the bandwidth unused
      // (`docs/performance-log.md`, "Prefetching a few lines at a time"); each head's outputs are
      // the same.
      auto attend = [&](int64_t item, int tid) {
        const int64_t r = item / H, h = item % H;
        put_heads(r, h, 1);
        attend_head(st, l, r / n, h, pos0 + r % n, qkv + r * qkv_dim() + h * hd, scale,
                    scores + static_cast<int64_t>(tid) * 2 * max_keys, att + r * qd + h * hd);
      };
      auto attend_pair = [&](int64_t pair, int tid) {
        const int64_t r = 2 * pair / H, h = 2 * pair % H;
        put_heads(r, h, 2);
        float* sc = scores + static_cast<int64_t>(tid) * 2 * max_keys;
        attend_two_heads(st, l, r / n, h, pos0 + r % n, qkv + r * qkv_dim() + h * hd, scale, sc,
                         sc + max_keys, att + r * qd + h * hd);
      };
      if ((st.layout->kv_type == DType::BF16 || st.layout->kv_type == DType::I8) && H % 2 == 0)
        tp.for_chunks_with_thread(N * H / 2, std::cref(attend_pair));
      else
        tp.for_chunks_with_thread(N * H, std::cref(attend));
      ps.emplace("attention wo", static_cast<double>(L.wo.bytes()));
      models::apply_linear(L.wo, att, N, y, tp);
      ps.reset();
      ops::add(x, y, x, N * d);

      for (int64_t r = 0; r < N; ++r)
        ops::rmsnorm(x + r * d, L.ffn_norm.data(), xn + r * d, d, eps, false);
      ps.emplace("mlp w1, w3", static_cast<double>(L.w13.bytes()));
      models::apply_fused(L.w13, xn, N, {g, u}, tp);
      ps.reset();
      ops::silu(g, g, N * I);
      ops::mul(g, u, g, N * I);
      ps.emplace("mlp w2", static_cast<double>(L.w2.bytes()));
      models::apply_linear(L.w2, g, N, y, tp);
      ps.reset();
      ops::add(x, y, x, N * d);
    }
    st.pos += n;

    if (!out0) return;
    ps.emplace("output head", static_cast<double>(output.bytes()));
    if (all) {
      for (int64_t r = 0; r < N; ++r)
        ops::rmsnorm(x + r * d, norm.data(), xn + r * d, d, eps, false);
      float* lg = buf(N * V);
      models::apply_linear(output, xn, N, lg, tp);
      std::memcpy(out0, lg, static_cast<size_t>(n * V) * sizeof(float));
      std::memcpy(out1, lg + n * V, static_cast<size_t>(n * V) * sizeof(float));
    } else {
      ops::rmsnorm(x + (n - 1) * d, norm.data(), xn, d, eps, false);
      ops::rmsnorm(x + (N - 1) * d, norm.data(), xn + d, d, eps, false);
      float* lg = buf(2 * V);
      models::apply_linear(output, xn, 2, lg, tp);
      std::memcpy(out0, lg, static_cast<size_t>(V) * sizeof(float));
      std::memcpy(out1, lg + V, static_cast<size_t>(V) * sizeof(float));
    }
  }

  std::vector<float> row_tmp_;
};

MvStage1::MvStage1(ModelFiles files, const MvStage1Args& args, ThreadPool* pool)
    : impl_(std::make_unique<Impl>(std::move(files), args, pool)) {}
MvStage1::~MvStage1() = default;

const MvStage1Args& MvStage1::args() const {
  return impl_->a;
}
const ModelInfo& MvStage1::info() const {
  return impl_->info;
}

State MvStage1::new_state() const {
  return State(std::make_unique<models::MvKvState>(impl_->layout));
}

State MvStage1::load_state(const std::string& path) const {
  return State(models::MvKvState::load(impl_->layout, path));
}

void MvStage1::forward(State& state, std::span<const int32_t> tokens_row0,
                       std::span<const int32_t> tokens_row1, const float* spk_emb,
                       std::vector<float>& logits, bool all_positions) {
  impl_->forward(state, tokens_row0, tokens_row1, spk_emb, logits, all_positions);
}

}  // namespace cachet
