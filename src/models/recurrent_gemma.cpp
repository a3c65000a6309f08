// RecurrentGemma forward pass. For each block, with x the residual stream:
//   r   = x + Temporal(RMSNorm_t(x))      Temporal = RG-LRU recurrent block | local attention
//   out = r + MLP(RMSNorm_c(r))           MLP(x) = down(gelu(gate(x)) * up(x))
// Recurrent block:  yb = gelu(linear_y(x)); u = linear_x(x); c = conv1d(u) (causal, depthwise);
//   gx = sigmoid(c_h Wx_h + bx), ga = sigmoid(c_h Wa_h + ba) per head h;
//   log_a = -8 ga softplus(L); a = exp(log_a); m = sqrt(1 - exp(2 log_a)) (1 at position 0);
//   h_t = a h_{t-1} + c gx m (h_{t-1} = 0 at position 0); out = linear_out(h * yb).
// Attention block: q, k, v projections, RoPE (half-split) on the first rot_dim dims of each
//   head, MQA softmax(q k / sqrt(head_dim)) over the query itself and the W previous keys, o_proj.
// Head: logits = cap * tanh((RMSNorm_f(x) E^T) / cap).
//
// The state of a sequence (RgState) holds, per recurrent layer, the last conv1d_width - 1 conv
// inputs and the RG-LRU h, and per attention layer a ring of W post-RoPE keys and values
// (slot = position % W). A forward of T tokens runs the linear layers as matrix products over
// all rows; rows may belong to one state (a prefill chunk) or to several (a batched step).
#include "cachet/recurrent_gemma.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>

#include "cachet/arena.h"
#include "cachet/error.h"
#include "cachet/half.h"
#include "cachet/ops.h"
#include "cachet/profile.h"
#include "cachet/quant.h"
#include "cachet/state_impl.h"
#include "cachet/tensor.h"
#include "cachet/threadpool.h"
#include "rg_state.h"
#include "rg_weights.h"

namespace cachet {

namespace {

using models::Linear;

constexpr int64_t kMaxRows = 256;  // rows per pass: bounds scratch memory for long prompts

// Parts of its output columns each gate block of width bw is laid out in (Layer::gates_w): two
// halves where bw is even, else the whole block.
int64_t gate_halves(int64_t bw) {
  return bw % 2 == 0 ? 2 : 1;
}

struct Layer {
  bool attention = false;
  std::vector<float> temporal_norm, channel_norm;  // RMSNorm weights w (used as 1 + w)
  models::FusedLinear gate_up;                     // gate_proj, up_proj
  Linear down;                                     // MLP
  // Recurrent block.
  models::FusedLinear lin_xy;  // linear_x, linear_y
  Linear lin_out;
  std::vector<float> conv_w;    // [R, K], tap K-1 multiplies the newest input
  std::vector<float> conv_b;    // [R]
  std::vector<float> neg_c_sp;  // -8 * softplus(recurrent_param), [R]
  // Per head h, the input gate's and the recurrence gate's [bw, bw] blocks one after the other
  // (HF stores each as [in, out]), and their biases. A gate is then y = b + sum_i x_i W[i]: an
  // axpy over rows, with y in registers. Each block is split by its output columns into
  // gate_halves(bw) parts of [bw_in, bw_out / parts], each contiguous: the two halves of a
  // block are two streams from memory, read side by side (ops::axpy_rows_x2), where a whole
  // block was one stream per thread; every y[o] takes the same operations either way. 2 H bw
  // bw floats (RecurrentGemma-2B: 5 MiB a layer) in a weight region, as the matrices.
  Tensor gates_w;              // f32 [H, 2, gate_halves(bw), bw_in, bw_out / gate_halves(bw)]
  std::vector<float> gates_b;  // [H, 2, bw]
  // Attention block.
  models::FusedLinear qkv;  // q_proj, k_proj, v_proj
  Linear o;
};

// Rows of one pass that belong to one state: rows [row0, row0 + n) are tokens at positions
// pos0, pos0 + 1, ... of st.
struct Segment {
  models::RgState* st = nullptr;
  int64_t row0 = 0, n = 0, pos0 = 0;
};

template <typename F>
void par_for(ThreadPool& pool, int64_t n, int64_t grain, F& f) {
  // std::ref keeps std::function from allocating a copy of the closure.
  pool.parallel_for(n, grain, std::ref(f));
}

template <typename F>
void par_run(ThreadPool& pool, F& f) {
  pool.run(std::ref(f));
}

class RecurrentGemma final : public LanguageModel {
 public:
  RecurrentGemma(ModelFiles files, ThreadPool* pool)
      : files_(std::move(files)), pool_(pool ? pool : &default_pool()) {
    cfg_ = RecurrentGemmaConfig::from_json(files_.config, files_.path);
    load_weights();
    build_info();
    // The tied head's source is the embedding, which stays for the token lookups.
    for (const Layer& L : layers_) {
      models::release_packed_sources(files_, {&L.down, &L.lin_out, &L.o});
      for (const auto* f : {&L.gate_up, &L.lin_xy, &L.qkv})
        models::release_packed_sources(files_, *f);
    }
    if (head_.sources != std::vector<const void*>{embed_->data})
      models::release_packed_sources(files_, {&head_});
  }

  const ModelInfo& info() const override { return info_; }

  State new_state() const override { return State(std::make_unique<models::RgState>(layout_)); }

  State load_state(const std::string& path) const override {
    return State(models::RgState::load(layout_, path));
  }

  void forward(State& state, std::span<const int32_t> tokens, std::vector<float>& logits,
               bool all_positions) override {
    const std::lock_guard<std::mutex> lock(run_mu_);  // one pass at a time: shared scratch
    models::RgState& st = own_state(state, "forward");
    if (tokens.empty()) fail("forward: empty token list");
    check_tokens(tokens);
    const int64_t T = static_cast<int64_t>(tokens.size());
    if (T > models::RgState::kMaxPosition - st.pos)
      fail("forward: the state is at position ", st.pos, "; ", T, " more tokens pass the last ",
           "position a state may reach, ", models::RgState::kMaxPosition);
    const int64_t V = cfg_.vocab_size;
    const size_t need = static_cast<size_t>((all_positions ? T : 1) * V);
    if (logits.size() != need) logits.resize(need);
    for (int64_t start = 0; start < T; start += kMaxRows) {
      const int64_t n = std::min(kMaxRows, T - start);
      const Segment seg{&st, 0, n, st.pos};
      int64_t out_row0 = 0, n_out = 0;
      float* out = nullptr;
      if (all_positions) {
        n_out = n;
        out = logits.data() + start * V;
      } else if (start + n == T) {
        out_row0 = n - 1;
        n_out = 1;
        out = logits.data();
      }
      run(std::span<const Segment>(&seg, 1), tokens.data() + start, n, out_row0, n_out, out);
    }
  }

  void forward_batch(std::span<State* const> states, std::span<const int32_t> tokens,
                     std::vector<float>& logits) override {
    const std::lock_guard<std::mutex> lock(run_mu_);
    if (states.empty()) fail("forward_batch: no states");
    if (states.size() != tokens.size())
      fail("forward_batch: ", states.size(), " states but ", tokens.size(), " tokens");
    // Member buffers keep their capacity: a steady batch size allocates nothing.
    seen_.clear();
    for (size_t i = 0; i < states.size(); ++i) {
      if (!states[i]) fail("forward_batch: state ", i, " is null");
      const models::RgState& st = own_state(*states[i], "forward_batch");
      if (st.pos >= models::RgState::kMaxPosition)
        fail("forward_batch: state ", i, " is at the last position a state may reach, ",
             models::RgState::kMaxPosition);
      seen_.push_back(states[i]->impl());
    }
    std::sort(seen_.begin(), seen_.end());
    if (std::adjacent_find(seen_.begin(), seen_.end()) != seen_.end())
      fail("forward_batch: the same state appears more than once");
    check_tokens(tokens);
    const int64_t N = static_cast<int64_t>(states.size());
    const int64_t V = cfg_.vocab_size;
    if (logits.size() != static_cast<size_t>(N * V)) logits.resize(static_cast<size_t>(N * V));
    std::vector<Segment>& segs = segs_;
    for (int64_t start = 0; start < N; start += kMaxRows) {
      const int64_t n = std::min(kMaxRows, N - start);
      segs.clear();
      for (int64_t i = 0; i < n; ++i) {
        auto* st = static_cast<models::RgState*>(states[start + i]->impl());
        segs.push_back(Segment{st, i, 1, st->pos});
      }
      run(segs, tokens.data() + start, n, 0, n, logits.data() + start * V);
    }
  }

 private:
  // ---------------------------------------------------------------- loading
  void load_weights() {
    const ModelFiles& f = files_;
    const int64_t d = cfg_.hidden_size, V = cfg_.vocab_size, E = cfg_.mlp_width();
    const int64_t R = cfg_.lru_width, H = cfg_.num_attention_heads, bw = R / H;
    const int64_t hd = cfg_.head_dim, K = cfg_.conv1d_width;
    const int64_t qdim = H * hd, kvdim = cfg_.num_key_value_heads * hd;

    // HF checkpoints prefix every name with "model."; accept files without it.
    std::string p = "model.";
    if (!f.tensors.count(p + "embed_tokens.weight") && f.tensors.count("embed_tokens.weight"))
      p = "";
    embed_ = &models::need_tensor(f, p + "embed_tokens.weight", {V, d});
    if (f.tensors.count("lm_head.weight")) {
      head_ = models::need_linear(f, "lm_head", V, d, false);
    } else {
      // The lookups keep reading the embedding: its pages stay (released, every token's row
      // was read back from the file: 1.5 ms of a 36 ms RecurrentGemma-2B Q4_K step).
      head_.w = MatView{embed_->dtype, V, d, embed_->data, row_bytes(embed_->dtype, d)};
      models::pack_linear(head_, /*keep_source=*/true);
    }
    final_norm_ = models::to_f32(models::need_tensor(f, p + "final_norm.weight", {d}));

    for (int64_t i = 0; i < cfg_.num_hidden_layers; ++i) {
      const std::string lp = p + "layers." + std::to_string(i) + ".";
      Layer L;
      L.attention = cfg_.is_attention(i);
      L.temporal_norm =
          models::to_f32(models::need_tensor(f, lp + "temporal_pre_norm.weight", {d}));
      L.channel_norm = models::to_f32(models::need_tensor(f, lp + "channel_pre_norm.weight", {d}));
      L.gate_up = models::need_fused_linear(
          f, {{lp + "mlp_block.gate_proj", E}, {lp + "mlp_block.up_proj", E}}, d, true);
      L.down = models::need_linear(f, lp + "mlp_block.down_proj", d, E, true);
      const std::string tp = lp + "temporal_block.";
      const std::string other = L.attention ? "linear_x.weight" : "q_proj.weight";
      if (f.tensors.count(tp + other))
        fail(f.path, ": tensor '", tp + other, "' does not belong to layer ", i,
             ", which the config", " makes a", L.attention ? "n attention" : " recurrent",
             " block");
      if (L.attention) {
        const bool b = cfg_.attention_bias;
        L.qkv = models::need_fused_linear(
            f, {{tp + "q_proj", qdim}, {tp + "k_proj", kvdim}, {tp + "v_proj", kvdim}}, d, b);
        L.o = models::need_linear(f, tp + "o_proj", d, qdim, true);
      } else {
        L.lin_xy =
            models::need_fused_linear(f, {{tp + "linear_x", R}, {tp + "linear_y", R}}, d, true);
        L.lin_out = models::need_linear(f, tp + "linear_out", d, R, true);
        L.conv_w = models::to_f32(models::need_tensor(f, tp + "conv_1d.weight", {R, 1, K}));
        L.conv_b = models::to_f32(models::need_tensor(f, tp + "conv_1d.bias", {R}));
        const std::string gp = tp + "rg_lru.";
        std::vector<float> lam =
            models::to_f32(models::need_tensor(f, gp + "recurrent_param", {R}));
        L.neg_c_sp.resize(static_cast<size_t>(R));
        ops::softplus(lam.data(), L.neg_c_sp.data(), R);
        for (float& x : L.neg_c_sp) x *= -8.0f;
        // Read every step, as the matrices are: in a weight region (weight_buffer), one run of
        // huge pages with them. The gates read 27.2-27.6 GB/s there against 25.8-27.2 in a
        // buffer of their own, whose last partial 2 MiB is in 4 KiB pages (`cachet bench
        // --random recurrentgemma-2b --type Q4_K -t 2 --profile`, three runs each in turn).
        const size_t gate_bytes = static_cast<size_t>(H * 2 * bw * bw) * sizeof(float);
        auto gates = weight_buffer(gate_bytes);
        std::memset(gates.get(), 0, gate_bytes);
        L.gates_w = Tensor::view(DType::F32, {H, 2, bw, bw}, gates.get(), gates);
        float* gw = L.gates_w.as<float>();
        L.gates_b.resize(static_cast<size_t>(2 * H * bw));
        const char* gate[2] = {"input_gate", "recurrent_gate"};
        for (int64_t g = 0; g < 2; ++g)
          place_gate(f, gp + gate[g], H, bw, gate_halves(bw), gw + g * bw * bw,
                     L.gates_b.data() + g * bw);
      }
      layers_.push_back(std::move(L));
    }
    // Tensors of layers the config does not have mean the two disagree.
    const std::string extra = p + "layers." + std::to_string(cfg_.num_hidden_layers) + ".";
    for (const auto& [name, t] : f.tensors)
      if (name.rfind(extra, 0) == 0)
        fail(f.path, ": tensor '", name,
             "' belongs to a layer beyond num_hidden_layers = ", cfg_.num_hidden_layers);

    embed_scale_ = bf16_to_f32(f32_to_bf16(static_cast<float>(std::sqrt(static_cast<double>(d)))));
    const int64_t rd = cfg_.rot_dim();
    inv_freq_.resize(static_cast<size_t>(rd / 2));
    for (int64_t j = 0; j < rd / 2; ++j) {
      const float e = static_cast<float>(2 * j) / static_cast<float>(rd);
      inv_freq_[static_cast<size_t>(j)] = 1.0f / std::pow(static_cast<float>(cfg_.rope_theta), e);
    }
  }

  // One gate's weight (HF: [H, in, out]) and bias ([H, bw]) into the per-head layout of
  // Layer::gates_w / gates_b, whose heads are 2 bw rows apart: head h's block goes to
  // w + h * 2 bw * bw as it is, f32 [in, out].
  static void place_gate(const ModelFiles& f, const std::string& prefix, int64_t H, int64_t bw,
                         int64_t halves, float* w, float* b) {
    const std::vector<float> src =
        models::to_f32(models::need_tensor(f, prefix + "_weight", {H, bw, bw}));
    const std::vector<float> bias =
        models::to_f32(models::need_tensor(f, prefix + "_bias", {H, bw}));
    const int64_t hw = bw / halves;
    for (int64_t h = 0; h < H; ++h) {
      float* blk = w + h * 2 * bw * bw;
      for (int64_t k = 0; k < halves; ++k)
        for (int64_t i = 0; i < bw; ++i)
          std::copy_n(src.data() + (h * bw + i) * bw + k * hw, hw, blk + (k * bw + i) * hw);
      std::copy_n(bias.data() + h * bw, bw, b + h * 2 * bw);
    }
  }

  void build_info() {
    info_.arch = "recurrent_gemma";
    info_.name = files_.path;
    info_.vocab_size = cfg_.vocab_size;
    info_.bos_id = cfg_.bos_token_id;
    info_.eos_id = cfg_.eos_token_id;
    info_.pad_id = cfg_.pad_token_id;
    info_.max_positions = 0;

    info_.fingerprint = models::fingerprint("recurrent_gemma", cfg_.to_json().dump(), files_);

    // Bytes read per decoded token: every matrix once, the small f32 vectors, one embedding row.
    const int64_t d = cfg_.hidden_size;
    uint64_t b = head_.bytes() + row_bytes(embed_->dtype, d) + final_norm_.size() * 4;
    for (const Layer& L : layers_) {
      b += (L.temporal_norm.size() + L.channel_norm.size()) * 4;
      b += L.gate_up.bytes() + L.down.bytes();
      if (L.attention) {
        b += L.qkv.bytes() + L.o.bytes();
      } else {
        b += L.lin_xy.bytes() + L.lin_out.bytes();
        b += L.gates_w.nbytes;
        b += (L.conv_w.size() + L.conv_b.size() + L.neg_c_sp.size() + L.gates_b.size()) * 4;
      }
    }
    info_.weight_bytes = b;

    auto lay = std::make_shared<models::RgLayout>();
    lay->fingerprint = info_.fingerprint;
    lay->conv_rows = cfg_.conv1d_width - 1;
    lay->lru_width = cfg_.lru_width;
    lay->window = cfg_.attention_window_size;
    lay->kv_dim = cfg_.num_key_value_heads * cfg_.head_dim;
    lay->kv_bf16 = false;
    for (const Layer& L : layers_)
      if (L.attention)
        for (const models::Linear* l : L.qkv.layers())
          if (l->w.type != DType::F32 && l->w.type != DType::F16) lay->kv_bf16 = true;
    size_t off = 0, off16 = 0;
    for (const Layer& L : layers_) {
      lay->attention.push_back(L.attention);
      const size_t ring = static_cast<size_t>(2 * lay->window * lay->kv_dim);
      if (L.attention && lay->kv_bf16) {
        lay->offset.push_back(off16);
        off16 += ring;
      } else {
        lay->offset.push_back(off);
        off += L.attention ? ring : static_cast<size_t>((lay->conv_rows + 1) * lay->lru_width);
      }
    }
    lay->total = off;
    lay->total_bf16 = off16;
    layout_ = std::move(lay);
  }

  // ---------------------------------------------------------------- checks
  models::RgState& own_state(State& s, const char* what) const {
    if (!s.valid()) fail(what, ": the state is empty (create it with new_state())");
    auto* st = dynamic_cast<models::RgState*>(s.impl());
    if (!st) fail(what, ": the state belongs to another kind of model");
    if (st->layout->fingerprint != info_.fingerprint)
      fail(what, ": the state belongs to another model (state fingerprint ", std::hex,
           st->layout->fingerprint, ", model ", info_.fingerprint, ")");
    return *st;
  }

  void check_tokens(std::span<const int32_t> tokens) const {
    for (size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] < 0 || tokens[i] >= cfg_.vocab_size)
        fail("token id ", tokens[i], " at index ", i, " is outside the vocabulary (size ",
             cfg_.vocab_size, ")");
  }

  // ---------------------------------------------------------------- forward
  // Runs N rows (tokens) through the model for the given segments, advancing their states;
  // writes logits for rows [out_row0, out_row0 + n_out) to out.
  void run(std::span<const Segment> segs, const int32_t* tokens, int64_t N, int64_t out_row0,
           int64_t n_out, float* out) {
    ThreadPool& pool = *pool_;
    const int64_t d = cfg_.hidden_size;
    const int64_t R = cfg_.lru_width, E = cfg_.mlp_width();
    const int64_t qdim = cfg_.num_attention_heads * cfg_.head_dim;
    const int64_t kvdim = cfg_.num_key_value_heads * cfg_.head_dim;
    const float eps = static_cast<float>(cfg_.rms_norm_eps);

    arena_.reset();
    Scratch s;
    s.row_seg = arena_.alloc<int32_t>(static_cast<size_t>(N));
    s.row_pos = arena_.alloc<int64_t>(static_cast<size_t>(N));
    for (size_t si = 0; si < segs.size(); ++si)
      for (int64_t t = 0; t < segs[si].n; ++t) {
        s.row_seg[segs[si].row0 + t] = static_cast<int32_t>(si);
        s.row_pos[segs[si].row0 + t] = segs[si].pos0 + t;
      }
    auto buf = [&](int64_t n) { return arena_.alloc<float>(static_cast<size_t>(n)); };
    float* x = buf(N * d);
    float* xn = buf(N * d);
    float* y = buf(N * d);
    const int64_t wide = std::max({R, E, qdim});
    s.a = buf(N * wide);
    s.b = buf(N * wide);
    s.c = buf(N * std::max(R, kvdim));
    s.e = buf(N * std::max(R, kvdim));
    s.f = buf(N * R);
    s.rope = buf(N * cfg_.rot_dim());
    s.scores = buf(static_cast<int64_t>(pool.size()) * cfg_.num_attention_heads *
                   (cfg_.attention_window_size + 1));
    s.value_parts =
        buf(std::max<int64_t>(pool.size(), (cfg_.attention_window_size + kKeyBlock) / kKeyBlock) *
            (cfg_.num_attention_heads / cfg_.num_key_value_heads) * cfg_.head_dim);

    // x0 = E[token] * bf16(sqrt(d))
    {
      profile::Scope ps("embedding");
      for (int64_t r = 0; r < N; ++r) {
        float* xr = x + r * d;
        models::row_to_f32(embed_->dtype, embed_->row(tokens[r]), xr, d);
        ops::scale(xr, embed_scale_, xr, d);
      }
    }
    if (has_attention()) rope_table(s, N);

    for (size_t li = 0; li < layers_.size(); ++li) {
      const Layer& L = layers_[li];
      for (int64_t r = 0; r < N; ++r)
        ops::rmsnorm(x + r * d, L.temporal_norm.data(), xn + r * d, d, eps, true);
      if (L.attention)
        attention_block(L, li, segs, s, xn, N, y);
      else
        recurrent_block(L, li, segs, s, xn, N, y);
      ops::add(x, y, x, N * d);

      for (int64_t r = 0; r < N; ++r)
        ops::rmsnorm(x + r * d, L.channel_norm.data(), xn + r * d, d, eps, true);
      mlp(L, xn, N, s, y);
      ops::add(x, y, x, N * d);
    }

    if (n_out > 0) {
      for (int64_t r = 0; r < n_out; ++r)
        ops::rmsnorm(x + (out_row0 + r) * d, final_norm_.data(), xn + r * d, d, eps, true);
      {
        profile::Scope ps("output head", static_cast<double>(head_.bytes()));
        models::apply_linear(head_, xn, n_out, out, pool);
      }
      profile::Scope ps("logit soft-cap");
      soft_cap(out, n_out * cfg_.vocab_size);
    }
    for (const Segment& seg : segs) seg.st->pos += seg.n;
  }

  // Keys per block of the attention's weighted sum of values (attention_block)
  static constexpr int64_t kKeyBlock = 256;

  struct Scratch {
    int32_t* row_seg = nullptr;  // segment of each row
    int64_t* row_pos = nullptr;  // position of each row
    float *a = nullptr, *b = nullptr, *c = nullptr, *e = nullptr, *f = nullptr;
    float* rope = nullptr;    // [N, rot_dim]: cos then sin of each pair
    float* scores = nullptr;  // [threads, heads, W + 1]
    // [max(threads, value blocks of a window), heads of a KV group, head_dim]: the attention's
    // sums over blocks of values
    float* value_parts = nullptr;
  };

  bool has_attention() const {
    for (const Layer& L : layers_)
      if (L.attention) return true;
    return false;
  }

  void rope_table(Scratch& s, int64_t N) const {
    const int64_t half = cfg_.rot_dim() / 2;
    for (int64_t r = 0; r < N; ++r) {
      const float p = static_cast<float>(s.row_pos[r]);
      float* cs = s.rope + r * 2 * half;
      for (int64_t j = 0; j < half; ++j) {
        const float ang = p * inv_freq_[static_cast<size_t>(j)];
        cs[j] = std::cos(ang);
        cs[half + j] = std::sin(ang);
      }
    }
  }

  void apply_rope(const Scratch& s, int64_t r, float* v) const {
    const int64_t half = cfg_.rot_dim() / 2;
    const float* cs = s.rope + r * 2 * half;
    for (int64_t j = 0; j < half; ++j) {
      const float c = cs[j], sn = cs[half + j];
      const float a = v[j], b = v[j + half];
      v[j] = a * c - b * sn;
      v[j + half] = b * c + a * sn;
    }
  }

  void mlp(const Layer& L, const float* xn, int64_t N, Scratch& s, float* y) {
    const int64_t E = cfg_.mlp_width();
    {
      profile::Scope ps("mlp gate, up", static_cast<double>(L.gate_up.bytes()));
      models::apply_fused(L.gate_up, xn, N, {s.a, s.b}, *pool_);
    }
    ops::gelu_tanh(s.a, s.a, N * E);
    ops::mul(s.a, s.b, s.a, N * E);
    profile::Scope ps("mlp down", static_cast<double>(L.down.bytes()));
    models::apply_linear(L.down, s.a, N, y, *pool_);
  }

  void recurrent_block(const Layer& L, size_t li, std::span<const Segment> segs, Scratch& s,
                       const float* xn, int64_t N, float* y) {
    ThreadPool& pool = *pool_;
    const int64_t R = cfg_.lru_width, H = cfg_.num_attention_heads, bw = R / H;
    const int64_t K = cfg_.conv1d_width, hist = K - 1;
    float* yb = s.a;  // gelu(linear_y(x))
    float* u = s.b;   // linear_x(x), the conv input
    float* c = s.c;   // conv output, then h_t
    float* gx = s.e;  // input gate
    float* ga = s.f;  // recurrence gate
    {
      profile::Scope ps("linear_x, linear_y", static_cast<double>(L.lin_xy.bytes()));
      models::apply_fused(L.lin_xy, xn, N, {u, yb}, pool);
    }
    ops::gelu_tanh(yb, yb, N * R);

    // Causal depthwise conv over [state window ; new inputs], then the window moves on.
    std::optional<profile::Scope> ps(std::in_place, "conv1d");
    for (const Segment& seg : segs) {
      float* w = seg.st->conv(li);
      const float* us = u + seg.row0 * R;
      ops::conv1d_depthwise(w, us, L.conv_w.data(), L.conv_b.data(), c + seg.row0 * R, seg.n, R, K);
      if (hist == 0) continue;
      if (seg.n >= hist) {
        std::memcpy(w, us + (seg.n - hist) * R, static_cast<size_t>(hist * R) * sizeof(float));
      } else {
        const int64_t keep = hist - seg.n;
        std::memmove(w, w + seg.n * R, static_cast<size_t>(keep * R) * sizeof(float));
        std::memcpy(w + keep * R, us, static_cast<size_t>(seg.n * R) * sizeof(float));
      }
    }

    // Gates: block-diagonal per head, gx = sigmoid(bx_h + c_h Wx_h), ga likewise; per (head,
    // row) each is an axpy over Wx_h's rows, y starting at the bias. Items go head by head, so a
    // thread reuses a head's block across rows while it is in cache, and with several rows the
    // threads claim two long runs of items each rather than one item at a time: longer streams
    // from memory, and no thread waits for one that has not woken up yet. A decoding step's
    // items (one per head, each 2 bw^2 floats in a row) go as one run of heads per thread, each
    // block's two halves side by side (as the matrix products' shares, src/kernels/matvec.cpp:
    // two streams a thread). The halves read 29.3-29.6 GB/s against 27.1-27.8 for whole blocks,
    // one stream a thread (`cachet bench --random recurrentgemma-2b --type Q4_K -t 2 -p 16
    // --long-context 0 --decode-steps 64 --profile`, three runs each in turn). Against one head at
    // a time, alternating per token in one run: 103 and 112 us a layer against 107 and 121
    // (RecurrentGemma-2B, 2 threads). (Two runs per thread split 10 heads 2, 3, 2, 3, and one
    // thread took 6 while the other took 4.)
    ps.emplace("rg_lru gates", static_cast<double>(L.gates_w.nbytes));
    const int64_t items = N * H;
    const int64_t runs = std::min<int64_t>(items, (N == 1 ? 1 : 2) * int64_t{pool.size()});
    auto gates = [&](int64_t ri) {
      int64_t begin, end;
      ThreadPool::split(items, 1, static_cast<int>(ri), static_cast<int>(runs), &begin, &end);
      for (int64_t item = begin; item < end; ++item) {
        const int64_t h = item / N, r = item % N;
        const float* xh = c + r * R + h * bw;
        for (int64_t g = 0; g < 2; ++g) {
          float* y = (g == 0 ? gx : ga) + r * R + h * bw;
          std::copy_n(L.gates_b.data() + (2 * h + g) * bw, bw, y);
          const float* blk = L.gates_w.as<float>() + (2 * h + g) * bw * bw;
          if (gate_halves(bw) == 2) {
            const int64_t hw = bw / 2;
            const float* xs[2] = {xh, xh};
            const float* ws[2] = {blk, blk + bw * hw};
            float* ys[2] = {y, y + hw};
            ops::axpy_rows_x2(xs, ws, hw, bw, hw, ys);
          } else {
            ops::axpy_rows(xh, blk, bw, bw, bw, y);
          }
          ops::sigmoid(y, y, bw);
        }
      }
    };
    pool.for_chunks(runs, std::cref(gates));

    ps.emplace("rg_lru scan");
    // RG-LRU scan, sequential in time per state, parallel over channels, kB channels at a time:
    // log_a = -8 ga softplus(L), a = exp(log_a), m = sqrt(1 - exp(2 log_a)).
    auto scan = [&](int64_t begin, int64_t end) {
      constexpr int64_t kB = 64;
      float log_a[kB], a[kB], a2[kB];
      for (const Segment& seg : segs) {
        float* hs = seg.st->h(li);
        for (int64_t i0 = begin; i0 < end; i0 += kB) {
          const int64_t nb = std::min(kB, end - i0);
          for (int64_t t = 0; t < seg.n; ++t) {
            const int64_t at = (seg.row0 + t) * R + i0;
            float* ct = c + at;
            const float* gxt = gx + at;
            const float* gat = ga + at;
            float* h = hs + i0;
            if (seg.pos0 + t == 0) {  // reset: no carry-over, no normalisation
              for (int64_t j = 0; j < nb; ++j) ct[j] = h[j] = ct[j] * gxt[j];
              continue;
            }
            for (int64_t j = 0; j < nb; ++j) log_a[j] = L.neg_c_sp[i0 + j] * gat[j];
            ops::exp(log_a, a, nb);
            for (int64_t j = 0; j < nb; ++j) log_a[j] *= 2.0f;
            ops::exp(log_a, a2, nb);
            for (int64_t j = 0; j < nb; ++j)
              ct[j] = h[j] = a[j] * h[j] + ct[j] * gxt[j] * std::sqrt(1.0f - a2[j]);
          }
        }
      }
    };
    par_for(pool, R, 16, scan);

    ops::mul(c, yb, c, N * R);
    ps.emplace("linear_out", static_cast<double>(L.lin_out.bytes()));
    models::apply_linear(L.lin_out, c, N, y, pool);
  }

  void attention_block(const Layer& L, size_t li, std::span<const Segment> segs, Scratch& s,
                       const float* xn, int64_t N, float* y) {
    ThreadPool& pool = *pool_;
    const int64_t H = cfg_.num_attention_heads, hd = cfg_.head_dim;
    const int64_t group = H / cfg_.num_key_value_heads;
    const int64_t qdim = H * hd, kvdim = cfg_.num_key_value_heads * hd;
    const int64_t W = cfg_.attention_window_size;
    float* q = s.a;
    float* att = s.b;
    float* k = s.c;
    float* v = s.e;
    std::optional<profile::Scope> ps(std::in_place, "attention q, k, v",
                                     static_cast<double>(L.qkv.bytes()));
    models::apply_fused(L.qkv, xn, N, {q, k, v}, pool);
    ps.emplace("local attention");
    for (int64_t r = 0; r < N; ++r) {
      for (int64_t h = 0; h < H; ++h) apply_rope(s, r, q + r * qdim + h * hd);
      for (int64_t h = 0; h < cfg_.num_key_value_heads; ++h)
        apply_rope(s, r, k + r * kvdim + h * hd);
    }
    // A bf16 cache: this pass's keys and values are rounded as the ring will hold them, so a
    // position attends to the same values whether its keys come from the ring or this pass.
    const bool bf16 = layout_->kv_bf16;
    if (bf16)
      for (float* kv : {k, v})
        for (int64_t i = 0; i < N * kvdim; ++i) kv[i] = bf16_to_f32(f32_to_bf16(kv[i]));

    // Query at position p sees keys at positions max(0, p - W) .. p: those before the segment
    // come from the state's ring (slot = pos % W), the others from this pass. The heads of one
    // KV group are taken together, so each key and value row is read once for all of them.
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const int64_t kvh = cfg_.num_key_value_heads;
    struct Item {
      const Segment* seg;
      const float* q;
      float* out;
      int64_t g, p, lo, nk;
    };
    auto item_of = [&](int64_t r, int64_t g) {
      const Segment& seg = segs[static_cast<size_t>(s.row_seg[r])];
      const int64_t p = s.row_pos[r], lo = std::max<int64_t>(0, p - W);
      return Item{
          &seg,      q + r * qdim + g * group * hd, att + r * qdim + g * group * hd, g, p, lo,
          p - lo + 1};
    };
    // fn(j, f32 rows, bf16 rows, count) for the keys (values: !keys) at positions [a, b) of an
    // item, in order, as runs of contiguous rows (the ring from a slot to its end, its start,
    // then this pass's rows, f32); j = position - lo.
    auto key_runs = [&](const Item& it, bool keys, int64_t a, int64_t b, auto&& fn) {
      const Segment& seg = *it.seg;
      const int64_t col = it.g * hd;
      for (int64_t kp = a; kp < b;) {
        if (kp < seg.pos0) {
          const int64_t slot = kp % W;
          const int64_t n = std::min({seg.pos0, b, kp + (W - slot)}) - kp;
          const int64_t at = slot * kvdim + col;
          if (bf16)
            fn(kp - it.lo, nullptr, (keys ? seg.st->k_bf16(li) : seg.st->v_bf16(li)) + at, n);
          else
            fn(kp - it.lo, (keys ? seg.st->k(li) : seg.st->v(li)) + at, nullptr, n);
          kp += n;
        } else {
          const float* fresh = keys ? k : v;
          fn(kp - it.lo, fresh + (seg.row0 + kp - seg.pos0) * kvdim + col, nullptr, b - kp);
          kp = b;
        }
      }
    };
    auto scores = [&](const Item& it, float* sc, int64_t a, int64_t b) {
      key_runs(it, true, a, b, [&](int64_t j, const float* f, const uint16_t* h, int64_t n) {
        if (f)
          ops::dot_rows_heads(it.q, group, hd, f, kvdim, n, hd, scale, sc + j, W + 1);
        else
          ops::dot_rows_heads_bf16(it.q, group, hd, h, kvdim, n, hd, scale, sc + j, W + 1);
      });
    };
    auto softmax = [&](const Item& it, float* sc, int64_t h0, int64_t h1) {
      for (int64_t h = h0; h < h1; ++h) {
        ops::softmax(sc + h * (W + 1), it.nk);
        std::memset(it.out + h * hd, 0, static_cast<size_t>(hd) * sizeof(float));
      }
    };
    // The weighted sum of values runs over blocks of kKeyBlock keys counted from the window's
    // first key: each block's sum on its own (into part, group x hd), then the blocks' sums in
    // order. Decoding shares the blocks between the threads, so that each value row is read
    // once (split by columns, both cores pulled every row), and every path and thread count
    // adds the same numbers in the same order.
    const int64_t out_n = group * hd;
    auto block_sum = [&](const Item& it, const float* sc, int64_t blk, float* part) {
      const int64_t a = it.lo + blk * kKeyBlock, b = std::min(a + kKeyBlock, it.p + 1);
      std::fill(part, part + out_n, 0.0f);
      key_runs(it, false, a, b, [&](int64_t j, const float* f, const uint16_t* h, int64_t n) {
        if (f)
          ops::axpy_rows_heads(sc + j, group, W + 1, f, kvdim, n, hd, part, hd);
        else
          ops::axpy_rows_heads_bf16(sc + j, group, W + 1, h, kvdim, n, hd, part, hd);
      });
    };
    auto add_blocks = [&](const Item& it, const float* parts, int64_t n_blocks) {
      for (int64_t blk = 0; blk < n_blocks; ++blk)
        ops::add(it.out, parts + blk * out_n, it.out, out_n);
    };
    auto blocks_of = [&](const Item& it) { return (it.nk + kKeyBlock - 1) / kKeyBlock; };
    auto values = [&](const Item& it, const float* sc, float* part) {
      for (int64_t blk = 0; blk < blocks_of(it); ++blk) {
        block_sum(it, sc, blk, part);
        add_blocks(it, part, 1);
      }
    };
    if (N * kvh >= static_cast<int64_t>(pool.size())) {
      // A (row, group) per thread at a time.
      float* parts = s.value_parts;
      auto attend = [&](int tid, int nt) {
        float* sc = s.scores + static_cast<int64_t>(tid) * H * (W + 1);
        for (int64_t item = tid; item < N * kvh; item += nt) {
          const Item it = item_of(item / kvh, item % kvh);
          scores(it, sc, it.lo, it.p + 1);
          softmax(it, sc, 0, group);
          values(it, sc, parts + tid * out_n);
        }
      };
      par_run(pool, attend);
    } else {
      // Fewer (row, group) items than threads (decoding): the threads share each item, the
      // scores split by keys, the softmax by heads, the value blocks between them (so each
      // thread reads its part of the window once). Every value is computed as above.
      float* parts = s.value_parts;
      for (int64_t r = 0; r < N; ++r)
        for (int64_t g = 0; g < kvh; ++g) {
          const Item it = item_of(r, g);
          float* sc = s.scores;
          auto f1 = [&](int64_t a, int64_t b) { scores(it, sc, it.lo + a, it.lo + b); };
          par_for(pool, it.nk, 64, f1);
          auto f2 = [&](int64_t a, int64_t b) { softmax(it, sc, a, b); };
          par_for(pool, group, 1, f2);
          const int64_t nb = blocks_of(it);
          auto f3 = [&](int64_t a, int64_t b) {
            for (int64_t blk = a; blk < b; ++blk) block_sum(it, sc, blk, parts + blk * out_n);
          };
          par_for(pool, nb, 1, f3);
          add_blocks(it, parts, nb);
        }
    }

    // The newest min(n, W) keys and values of each segment go into its ring.
    for (const Segment& seg : segs) {
      for (int64_t t = std::max<int64_t>(0, seg.n - W); t < seg.n; ++t) {
        const int64_t slot = (seg.pos0 + t) % W;
        const int64_t at = slot * kvdim, row = (seg.row0 + t) * kvdim;
        // F32: a copy; BF16: rounded (as this pass's rows already are, so exactly)
        const DType type = bf16 ? DType::BF16 : DType::F32;
        quantize_row(type, k + row,
                     bf16 ? static_cast<void*>(seg.st->k_bf16(li) + at) : seg.st->k(li) + at,
                     kvdim);
        quantize_row(type, v + row,
                     bf16 ? static_cast<void*>(seg.st->v_bf16(li) + at) : seg.st->v(li) + at,
                     kvdim);
      }
    }
    ps.emplace("attention o", static_cast<double>(L.o.bytes()));
    models::apply_linear(L.o, att, N, y, pool);
  }

  void soft_cap(float* z, int64_t n) {
    const double capd = cfg_.logits_soft_cap;
    if (!(capd > 0)) return;
    const float cap = static_cast<float>(capd);
    auto f = [&](int64_t begin, int64_t end) {
      ops::softcap(z + begin, cap, z + begin, end - begin);
    };
    par_for(*pool_, n, 4096, f);
  }

  ModelFiles files_;
  ThreadPool* pool_;
  RecurrentGemmaConfig cfg_;
  const Tensor* embed_ = nullptr;
  Linear head_;
  std::vector<float> final_norm_;
  std::vector<Layer> layers_;
  std::vector<float> inv_freq_;
  float embed_scale_ = 1.0f;
  ModelInfo info_;
  std::shared_ptr<const models::RgLayout> layout_;
  Arena arena_{1 << 20};
  std::mutex run_mu_;  // forward and forward_batch share the scratch above
  std::vector<Segment> segs_;
  std::vector<const void*> seen_;
};

}  // namespace

std::unique_ptr<LanguageModel> make_recurrent_gemma(ModelFiles files, ThreadPool* pool) {
  return std::make_unique<RecurrentGemma>(std::move(files), pool);
}

}  // namespace cachet
