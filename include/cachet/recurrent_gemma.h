// RecurrentGemma (Griffin): residual blocks of RMSNorm + (RG-LRU recurrent block | local MQA
// attention) + gated GeLU MLP, tied LM head with a tanh soft cap. Numerics follow Google
// DeepMind's reference: the embedding is scaled by sqrt(d) rounded to bf16, RMSNorm uses (1 + w),
// the RG-LRU runs in f32 with c = 8 and resets at position 0, attention sees the query itself
// plus the W previous keys.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cachet/model.h"
#include "cachet/model_files.h"

namespace cachet {

struct RecurrentGemmaConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;        // d
  int64_t intermediate_size = 0;  // 2 x MLP branch width (HF convention)
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;  // query heads and RG-LRU gate blocks
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t lru_width = 0;
  int64_t attention_window_size = 0;  // W: a query sees itself and W previous keys
  int64_t conv1d_width = 0;
  double logits_soft_cap = 30.0;  // <= 0: no cap
  double rms_norm_eps = 1e-6;
  double partial_rotary_factor = 0.5;
  double rope_theta = 10000.0;
  bool attention_bias = false;
  std::vector<std::string> block_types;  // the repeating pattern: "recurrent" / "attention"
  int32_t bos_token_id = 2, eos_token_id = 1, pad_token_id = 0;

  // Parses an HF config.json of model_type "recurrent_gemma"; where names the source in errors.
  static RecurrentGemmaConfig from_json(const nlohmann::json& j, const std::string& where);
  // The values above as an HF-style config (round-trips through from_json).
  nlohmann::json to_json() const;

  int64_t mlp_width() const { return intermediate_size / 2; }
  int64_t rot_dim() const;
  bool is_attention(int64_t layer) const;
};

// Builds the model over the tensors of files (weights are used in place: files keeps them alive).
// pool: threads for the kernels (nullptr: default_pool()).
std::unique_ptr<LanguageModel> make_recurrent_gemma(ModelFiles files, ThreadPool* pool = nullptr);

// In-memory HF-named tensors with random values (f32) for a config: for tests and benchmarks.
// scale: standard deviation of the matrix weights.
ModelFiles random_recurrent_gemma_files(const RecurrentGemmaConfig& cfg, uint64_t seed,
                                        float scale = 0.05f);

}  // namespace cachet
