// Random-weight RecurrentGemma tensors built in memory (tests, benchmarks).
#include <cmath>
#include <cstring>

#include "cachet/hash.h"
#include "cachet/recurrent_gemma.h"

namespace cachet {

namespace {

struct Rng {
  uint64_t s;
  uint64_t next() { return splitmix64_next(s); }
  float uniform(float lo, float hi) {  // [lo, hi)
    return lo + (hi - lo) * static_cast<float>(next() >> 40) * (1.0f / 16777216.0f);
  }
};

}  // namespace

ModelFiles random_recurrent_gemma_files(const RecurrentGemmaConfig& cfg, uint64_t seed,
                                        float scale) {
  ModelFiles f;
  f.path = "<random recurrent_gemma>";
  f.format = ModelFiles::Format::HfDir;
  f.config = cfg.to_json();
  Rng rng{seed};
  const float a = scale * std::sqrt(3.0f);  // uniform with standard deviation `scale`
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float lo, float hi) {
    Tensor t = Tensor::zeros(DType::F32, std::move(shape), name);
    float* p = t.as<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = rng.uniform(lo, hi);
    f.tensors[name] = std::move(t);
  };
  const int64_t d = cfg.hidden_size, E = cfg.mlp_width(), R = cfg.lru_width;
  const int64_t H = cfg.num_attention_heads, bw = R / H, hd = cfg.head_dim;
  const int64_t qd = H * hd, kvd = cfg.num_key_value_heads * hd;
  add("model.embed_tokens.weight", {cfg.vocab_size, d}, -a, a);
  add("model.final_norm.weight", {d}, -0.1f, 0.1f);
  for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    add(p + "temporal_pre_norm.weight", {d}, -0.1f, 0.1f);
    add(p + "channel_pre_norm.weight", {d}, -0.1f, 0.1f);
    add(p + "mlp_block.gate_proj.weight", {E, d}, -a, a);
    add(p + "mlp_block.gate_proj.bias", {E}, -a, a);
    add(p + "mlp_block.up_proj.weight", {E, d}, -a, a);
    add(p + "mlp_block.up_proj.bias", {E}, -a, a);
    add(p + "mlp_block.down_proj.weight", {d, E}, -a, a);
    add(p + "mlp_block.down_proj.bias", {d}, -a, a);
    const std::string t = p + "temporal_block.";
    if (cfg.is_attention(i)) {
      add(t + "q_proj.weight", {qd, d}, -a, a);
      add(t + "k_proj.weight", {kvd, d}, -a, a);
      add(t + "v_proj.weight", {kvd, d}, -a, a);
      if (cfg.attention_bias) {
        add(t + "q_proj.bias", {qd}, -a, a);
        add(t + "k_proj.bias", {kvd}, -a, a);
        add(t + "v_proj.bias", {kvd}, -a, a);
      }
      add(t + "o_proj.weight", {d, qd}, -a, a);
      add(t + "o_proj.bias", {d}, -a, a);
    } else {
      add(t + "linear_x.weight", {R, d}, -a, a);
      add(t + "linear_x.bias", {R}, -a, a);
      add(t + "linear_y.weight", {R, d}, -a, a);
      add(t + "linear_y.bias", {R}, -a, a);
      add(t + "linear_out.weight", {d, R}, -a, a);
      add(t + "linear_out.bias", {d}, -a, a);
      add(t + "conv_1d.weight", {R, 1, cfg.conv1d_width}, -0.5f, 0.5f);
      add(t + "conv_1d.bias", {R}, -0.1f, 0.1f);
      add(t + "rg_lru.recurrent_param", {R}, -6.9f, -2.2f);
      add(t + "rg_lru.input_gate_weight", {H, bw, bw}, -a, a);
      add(t + "rg_lru.input_gate_bias", {H, bw}, -0.1f, 0.1f);
      add(t + "rg_lru.recurrent_gate_weight", {H, bw, bw}, -a, a);
      add(t + "rg_lru.recurrent_gate_bias", {H, bw}, -0.1f, 0.1f);
    }
  }
  return f;
}

}  // namespace cachet
