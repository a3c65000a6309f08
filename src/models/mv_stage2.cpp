// MetaVoice stage 2: the nanoGPT "GPT" of MetaVoice.
//   x = sum_i wtes[i][tokens[i]] + wpe[position] + speaker_cond_pos(spk_emb)
//   per block:  x += c_proj(Attn(ln_1(x)));  x += MLP(ln_2(x))
//   logits_h = lm_heads[h](ln_f(x)) for every head h
// Norms: LayerNorm (eps 1e-5, bias when config.bias) or RMSNorm (rmsnorm_eps). MLP: GELU (exact
// erf) c_proj(gelu(c_fc x)), or SwiGLU c_proj(silu(w1 x) * w3 x). c_attn rows are Q | K | V,
// n_head heads each; attention scale 1/sqrt(head_dim).
// Non-causal models (the released one) attend over every position with no mask. Causal models
// mask the future; they also run incrementally over an MvKvState (rows = 1), which equals the
// full causal pass. With spk_emb_on_text == false the speaker term is added only from the first
// position whose hierarchy-0 token is the end of text (1537), a fact the state remembers.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "cachet/arena.h"
#include "cachet/error.h"
#include "cachet/metavoice_gpt.h"
#include "cachet/ops.h"
#include "cachet/threadpool.h"
#include "mv_state.h"
#include "mv_util.h"
#include "rg_weights.h"

namespace cachet {

namespace {
constexpr char kArch[] = "metavoice_stage2";
}  // namespace

using models::Linear;

struct MvStage2::Impl {
  struct Norm {
    std::vector<float> w, b;  // b empty: no bias (and always for RMSNorm)
  };
  struct Layer {
    Norm ln1, ln2;
    Linear c_attn, c_proj;
    Linear fc, w3, mlp_proj;  // fc: c_fc (gelu) or swiglu.w1; w3 only for swiglu
  };

  ModelFiles files;
  ThreadPool* pool;
  MvStage2Args a;
  ModelInfo info;
  std::vector<const Tensor*> wtes;
  const Tensor* wpe = nullptr;
  bool has_spk = false;
  Linear spk;
  Norm ln_f;
  std::vector<Layer> layers;
  std::vector<Linear> heads;
  std::vector<int64_t> head_vocab;
  std::shared_ptr<const models::MvKvLayout> layout;
  Arena arena{1 << 20};

  Impl(ModelFiles f, const MvStage2Args& args, ThreadPool* p)
      : files(models::strip_orig_mod(std::move(f))), pool(p ? p : &default_pool()), a(args) {
    if (!a.causal && a.kv_cache_enabled)
      fail(files.path, ": kv_cache_enabled = true is not supported for non-causal models");
    if (!a.causal && a.target_vocab_sizes.empty())
      fail(files.path, ": a non-causal model needs target_vocab_sizes");
    if (a.causal && !a.target_vocab_sizes.empty())
      fail(files.path, ": target_vocab_sizes requires causal = false");
    load();
    build_info();
  }

  bool rms() const { return a.norm_type == "rmsnorm"; }
  bool swiglu() const { return a.nonlinearity_type == "swiglu"; }

  Norm need_norm(const std::string& prefix) const {
    Norm n;
    n.w = models::to_f32(models::need_tensor(files, prefix + ".weight", {a.n_embd}));
    const bool has_bias = !rms() && a.bias;
    if (has_bias)
      n.b = models::to_f32(models::need_tensor(files, prefix + ".bias", {a.n_embd}));
    else if (files.tensors.count(prefix + ".bias"))
      fail(files.path, ": unexpected tensor '", prefix, ".bias' (the config says this norm has no ",
           "bias)");
    return n;
  }

  void apply_norm(const Norm& nm, const float* x, float* y, int64_t rows) const {
    const int64_t d = a.n_embd;
    for (int64_t r = 0; r < rows; ++r) {
      if (rms())
        ops::rmsnorm(x + r * d, nm.w.data(), y + r * d, d, static_cast<float>(a.rmsnorm_eps),
                     false);
      else
        ops::layernorm(x + r * d, nm.w.data(), nm.b.empty() ? nullptr : nm.b.data(), y + r * d, d,
                       1e-5f);
    }
  }

  void load() {
    const ModelFiles& f = files;
    const int64_t d = a.n_embd, M = a.mlp_hidden();
    for (size_t i = 0; i < a.vocab_sizes.size(); ++i)
      wtes.push_back(&models::need_tensor(f, "transformer.wtes." + std::to_string(i) + ".weight",
                                          {a.vocab_sizes[i], d}));
    models::reject_extra_layers(f, "transformer.wtes.", static_cast<int64_t>(wtes.size()),
                                "len(vocab_sizes)");
    wpe = &models::need_tensor(f, "transformer.wpe.weight", {a.block_size, d});
    has_spk = f.tensors.count("speaker_cond_pos.weight") > 0;
    if (has_spk) spk = models::need_linear(f, "speaker_cond_pos", d, a.speaker_emb_dim, false);
    for (int64_t i = 0; i < a.n_layer; ++i) {
      const std::string p = "transformer.h." + std::to_string(i) + ".";
      Layer L;
      L.ln1 = need_norm(p + "ln_1");
      L.ln2 = need_norm(p + "ln_2");
      L.c_attn = models::need_linear(f, p + "attn.c_attn", 3 * d, d, a.bias);
      L.c_proj = models::need_linear(f, p + "attn.c_proj", d, d, a.bias);
      if (swiglu()) {
        L.fc = models::need_linear(f, p + "mlp.swiglu.w1", M, d, a.bias);
        L.w3 = models::need_linear(f, p + "mlp.swiglu.w3", M, d, a.bias);
      } else {
        L.fc = models::need_linear(f, p + "mlp.c_fc", M, d, a.bias);
      }
      L.mlp_proj = models::need_linear(f, p + "mlp.c_proj", d, M, a.bias);
      layers.push_back(std::move(L));
    }
    models::reject_extra_layers(f, "transformer.h.", a.n_layer, "n_layer");
    ln_f = need_norm("transformer.ln_f");
    head_vocab = a.head_vocab_sizes();
    for (size_t h = 0; h < head_vocab.size(); ++h) {
      const std::string name = "lm_heads." + std::to_string(h);
      if (a.target_vocab_sizes.empty() && !f.tensors.count(name + ".weight")) {
        // Tied to the input embedding of the same hierarchy.
        Linear l;
        const Tensor& e = *wtes[h];
        l.w = MatView{e.dtype, head_vocab[h], d, e.data, row_bytes(e.dtype, d)};
        heads.push_back(std::move(l));
      } else {
        heads.push_back(models::need_linear(f, name, head_vocab[h], d, false));
      }
    }
    models::reject_extra_layers(f, "lm_heads.", static_cast<int64_t>(heads.size()), "heads");
  }

  void build_info() {
    info.arch = kArch;
    info.name = files.path;
    info.vocab_size = *std::max_element(head_vocab.begin(), head_vocab.end());
    info.bos_id = info.eos_id = info.pad_id = -1;
    info.max_positions = a.block_size;
    info.fingerprint = models::fingerprint(kArch, a.to_json().dump(), files);
    uint64_t b = 0;
    for (const Layer& L : layers)
      b += L.c_attn.bytes() + L.c_proj.bytes() + L.fc.bytes() + L.w3.bytes() + L.mlp_proj.bytes();
    for (const Linear& h : heads) b += h.bytes();
    info.weight_bytes = b;

    auto lay = std::make_shared<models::MvKvLayout>();
    lay->arch = kArch;
    lay->fingerprint = info.fingerprint;
    lay->layers = a.n_layer;
    lay->rows = 1;
    lay->kv_dim = a.n_embd;
    lay->kv_heads = a.n_head;  // f32 keys and values: stage 2 runs once per utterance
    lay->max_positions = a.block_size;
    models::set_kv_run(*lay);
    layout = std::move(lay);
  }

  void check_tokens(std::span<const int32_t> tokens, int64_t T) const {
    const int64_t nh = static_cast<int64_t>(a.vocab_sizes.size());
    if (T < 1) fail("metavoice stage 2 forward: empty token list");
    if (static_cast<int64_t>(tokens.size()) != nh * T)
      fail("metavoice stage 2 forward: ", tokens.size(), " tokens given, expected ", nh,
           " hierarchies x ", T, " positions");
    for (int64_t i = 0; i < nh; ++i)
      for (int64_t t = 0; t < T; ++t) {
        const int32_t v = tokens[static_cast<size_t>(i * T + t)];
        if (v < 0 || v >= a.vocab_sizes[static_cast<size_t>(i)])
          fail("metavoice stage 2: token id ", v, " at position ", t, " of hierarchy ", i,
               " is outside its vocabulary (size ", a.vocab_sizes[static_cast<size_t>(i)], ")");
      }
  }

  std::vector<float> speaker_term(const float* spk_emb) {
    if (!spk_emb) return {};
    if (!has_spk)
      fail(files.path, ": a speaker embedding was given but the model has no ",
           "'speaker_cond_pos.weight'");
    for (int64_t i = 0; i < a.speaker_emb_dim; ++i)
      if (!std::isfinite(spk_emb[i]))
        fail("metavoice stage 2: the speaker embedding holds a non-finite value at ", i);
    std::vector<float> out(static_cast<size_t>(a.n_embd));
    models::apply_linear(spk, spk_emb, 1, out.data(), *pool);
    return out;
  }

  size_t logits_size(int64_t rows) const {
    size_t n = 0;
    for (int64_t v : head_vocab) n += static_cast<size_t>(v * rows);
    return n;
  }

  void forward_full(std::span<const int32_t> tokens, int64_t T, const float* spk_emb,
                    std::vector<float>& logits) {
    if (a.causal) {
      State st = State(std::make_unique<models::MvKvState>(layout));
      forward_state(st, tokens, T, spk_emb, logits, true);
      return;
    }
    check_tokens(tokens, T);
    if (T > a.block_size)
      fail("metavoice stage 2 forward: ", T, " positions exceed block_size ", a.block_size);
    const std::vector<float> spk_term = speaker_term(spk_emb);
    if (logits.size() != logits_size(T)) logits.resize(logits_size(T));
    run(tokens.data(), T, nullptr, spk_term, true, logits.data());
  }

  void forward_state(State& state, std::span<const int32_t> tokens, int64_t T, const float* spk_emb,
                     std::vector<float>& logits, bool all) {
    if (!a.causal)
      fail("metavoice stage 2: a non-causal model has no incremental state (use the full forward)");
    models::MvKvState& st = models::own_kv_state(state, *layout, "metavoice stage 2 forward");
    check_tokens(tokens, T);
    if (st.pos + T > a.block_size)
      fail("metavoice stage 2 forward: ", T, " positions at position ", st.pos,
           " exceed block_size ", a.block_size);
    const std::vector<float> spk_term = speaker_term(spk_emb);
    const int64_t rows = all ? T : 1;
    if (logits.size() != logits_size(rows)) logits.resize(logits_size(rows));
    st.reserve_positions(st.pos + T);
    run(tokens.data(), T, &st, spk_term, all, logits.data());
  }

  // Runs T positions. st == nullptr: non-causal, every position sees every other one; else
  // causal, the positions st->pos ... st->pos + T - 1 with the cached prefix. Writes the logits
  // of every position (all) or of the last one, heads one after another.
  void run(const int32_t* tokens, int64_t T, models::MvKvState* st,
           const std::vector<float>& spk_term, bool all, float* out) {
    ThreadPool& tp = *pool;
    const int64_t d = a.n_embd, H = a.n_head, hd = a.head_dim(), M = a.mlp_hidden();
    const int64_t pos0 = st ? st->pos : 0;
    const int64_t n_keys_max = pos0 + T;

    arena.reset();
    auto buf = [&](int64_t k) { return arena.alloc<float>(static_cast<size_t>(k)); };
    float* x = buf(T * d);
    float* xn = buf(T * d);
    float* y = buf(T * d);
    float* qkv = buf(T * 3 * d);
    float* att = buf(T * d);
    float* g = buf(T * M);
    float* u = swiglu() ? buf(T * M) : nullptr;
    float* scores = buf(static_cast<int64_t>(tp.size()) * n_keys_max);
    std::vector<float> tmp(static_cast<size_t>(d));

    // x = sum of the hierarchies' embeddings + position + speaker term
    const bool masked = !a.spk_emb_on_text;
    bool text_ended = st ? st->text_ended : false;
    for (int64_t t = 0; t < T; ++t) {
      float* xr = x + t * d;
      std::fill(xr, xr + d, 0.0f);
      for (size_t i = 0; i < wtes.size(); ++i) {
        const int32_t tok = tokens[static_cast<int64_t>(i) * T + t];
        models::row_to_f32(wtes[i]->dtype, wtes[i]->row(tok), tmp.data(), d);
        ops::add(xr, tmp.data(), xr, d);
      }
      models::row_to_f32(wpe->dtype, wpe->row(pos0 + t), tmp.data(), d);
      ops::add(xr, tmp.data(), xr, d);
      if (tokens[t] == kMvStage2EndOfText) text_ended = true;
      if (!spk_term.empty() && (!masked || text_ended)) ops::add(xr, spk_term.data(), xr, d);
    }

    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    for (size_t li = 0; li < layers.size(); ++li) {
      const Layer& L = layers[li];
      const int64_t l = static_cast<int64_t>(li);
      apply_norm(L.ln1, x, xn, T);
      models::apply_linear(L.c_attn, xn, T, qkv, tp);
      // Keys and values: from the cache (causal, after appending this pass) or from this pass.
      if (st)
        for (int64_t t = 0; t < T; ++t)
          st->put(l, pos0 + t, 0, qkv + t * 3 * d + d, qkv + t * 3 * d + 2 * d);
      auto attend = [&](int tid, int nt) {
        float* sc = scores + static_cast<int64_t>(tid) * n_keys_max;
        for (int64_t item = tid; item < T * H; item += nt) {
          const int64_t t = item / H, h = item % H;
          const int64_t nk = st ? pos0 + t + 1 : T;
          const float* q = qkv + t * 3 * d + h * hd;
          // Head h's keys and values: the cache's (runs of rows hd apart, in order) or this
          // pass's (3d apart).
          if (st)
            st->for_runs<float>(l, 0, 0, h, nk, [&](int64_t j, const float* k, int64_t n) {
              ops::dot_rows(q, k, hd, n, hd, scale, sc + j);
            });
          else
            ops::dot_rows(q, qkv + d + h * hd, 3 * d, nk, hd, scale, sc);
          ops::softmax(sc, nk);
          float* o = att + t * d + h * hd;
          std::memset(o, 0, static_cast<size_t>(hd) * sizeof(float));
          if (st)
            st->for_runs<float>(l, 1, 0, h, nk, [&](int64_t j, const float* v, int64_t n) {
              ops::axpy_rows(sc + j, v, hd, n, hd, o);
            });
          else
            ops::axpy_rows(sc, qkv + 2 * d + h * hd, 3 * d, nk, hd, o);
        }
      };
      tp.run(std::ref(attend));
      models::apply_linear(L.c_proj, att, T, y, tp);
      ops::add(x, y, x, T * d);

      apply_norm(L.ln2, x, xn, T);
      models::apply_linear(L.fc, xn, T, g, tp);
      if (swiglu()) {
        models::apply_linear(L.w3, xn, T, u, tp);
        ops::silu(g, g, T * M);
        ops::mul(g, u, g, T * M);
      } else {
        ops::gelu(g, g, T * M);
      }
      models::apply_linear(L.mlp_proj, g, T, y, tp);
      ops::add(x, y, x, T * d);
    }
    if (st) {
      st->pos += T;
      st->text_ended = text_ended;
    }

    const int64_t rows = all ? T : 1;
    apply_norm(ln_f, x + (T - rows) * d, xn, rows);
    for (size_t h = 0; h < heads.size(); ++h) {
      models::apply_linear(heads[h], xn, rows, out, tp);
      out += rows * head_vocab[h];
    }
  }
};

MvStage2::MvStage2(ModelFiles files, const MvStage2Args& args, ThreadPool* pool)
    : impl_(std::make_unique<Impl>(std::move(files), args, pool)) {}
MvStage2::~MvStage2() = default;

const MvStage2Args& MvStage2::args() const {
  return impl_->a;
}
const ModelInfo& MvStage2::info() const {
  return impl_->info;
}
bool MvStage2::has_speaker_projection() const {
  return impl_->has_spk;
}

void MvStage2::forward(std::span<const int32_t> tokens, int64_t T, const float* spk_emb,
                       std::vector<float>& logits) {
  impl_->forward_full(tokens, T, spk_emb, logits);
}

State MvStage2::new_state() const {
  if (!impl_->a.causal)
    fail("metavoice stage 2: a non-causal model has no incremental state (use the full forward)");
  return State(std::make_unique<models::MvKvState>(impl_->layout));
}

State MvStage2::load_state(const std::string& path) const {
  if (!impl_->a.causal)
    fail("metavoice stage 2: a non-causal model has no incremental state (use the full forward)");
  return State(models::MvKvState::load(impl_->layout, path));
}

void MvStage2::forward(State& state, std::span<const int32_t> tokens, int64_t T,
                       const float* spk_emb, std::vector<float>& logits, bool all_positions) {
  impl_->forward_state(state, tokens, T, spk_emb, logits, all_positions);
}

}  // namespace cachet
