// Random-weight MetaVoice stage tensors built in memory (tests, benchmarks).
#include <cmath>
#include <cstring>
#include <random>

#include "cachet/error.h"
#include "cachet/hash.h"
#include "cachet/metavoice_gpt.h"
#include "cachet/quant.h"
#include "cachet/threadpool.h"

namespace cachet {

namespace {

DType matrix_type(DType want, int64_t cols) {
  const auto& info = dtype_info(want);
  if (cols % info.block_elems == 0) return want;
  if (info.quantized && cols % 32 == 0) return DType::Q8_0;
  return DType::F32;
}

// A [rows, cols] matrix of N(0, std^2) values. Large matrices are built from a pool of random
// rows (quantized once), each row picked by a hash, so that a 1B model is made in seconds.
Tensor random_matrix(const std::string& name, DType want, int64_t rows, int64_t cols, float std,
                     uint64_t seed, ThreadPool* pool) {
  const DType type = matrix_type(want, cols);
  Tensor t = Tensor::zeros(type, {rows, cols}, name);
  const size_t rb = row_bytes(type, cols);
  const int64_t pool_rows = std::min<int64_t>(rows, 61);
  std::mt19937_64 rng(seed ^ fnv1a64(name));
  std::normal_distribution<float> normal(0.0f, std);
  std::vector<float> src(static_cast<size_t>(cols));
  std::vector<uint8_t> rowpool(rb * static_cast<size_t>(pool_rows));
  for (int64_t r = 0; r < pool_rows; ++r) {
    for (auto& v : src) v = normal(rng);
    quantize_row(type, src.data(), rowpool.data() + rb * r, cols);
  }
  auto* dst = static_cast<uint8_t*>(t.data);
  if (rows == pool_rows) {
    std::memcpy(dst, rowpool.data(), rowpool.size());
    return t;
  }
  const uint64_t s = seed ^ fnv1a64(name);
  auto fill = [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      std::memcpy(dst + rb * r, rowpool.data() + rb * (splitmix64_mix(s + r) % pool_rows), rb);
  };
  if (pool)
    pool->parallel_for(rows, 64, fill);
  else
    fill(0, rows);
  return t;
}

Tensor random_vector(const std::string& name, int64_t n, float mean, float std, uint64_t seed) {
  Tensor t = Tensor::zeros(DType::F32, {n}, name);
  std::mt19937_64 rng(seed ^ fnv1a64(name));
  std::normal_distribution<float> normal(mean, std);
  for (int64_t i = 0; i < n; ++i) t.as<float>()[i] = normal(rng);
  return t;
}

}  // namespace

ModelFiles random_mv_stage1_files(const MvStage1Args& a, DType type, uint64_t seed,
                                  ThreadPool* pool) {
  CACHET_CHECK(is_weight_type(type) || type == DType::F32, "type ", dtype_name(type),
               " cannot hold weights");
  ModelFiles f;
  f.path = "<random metavoice stage 1>";
  f.format = ModelFiles::Format::Gguf;
  f.config = a.to_json();
  const int64_t d = a.dim, I = a.intermediate_size, hd = a.head_dim();
  auto mat = [&](const std::string& name, int64_t rows, int64_t cols, float std) {
    f.tensors.emplace(name, random_matrix(name, type, rows, cols, std, seed, pool));
  };
  auto vec = [&](const std::string& name) {
    f.tensors.emplace(name, random_vector(name, d, 1.0f, 0.1f, seed));
  };
  const float sd = 1.0f / std::sqrt(static_cast<float>(d));
  mat("tok_embeddings.weight", a.vocab_size, d, 0.5f);
  mat("pos_embeddings.weight", a.block_size, d, 0.5f);
  mat("speaker_cond_pos.weight", d, a.speaker_emb_dim,
      1.0f / std::sqrt(static_cast<float>(a.speaker_emb_dim)));
  for (int64_t i = 0; i < a.n_layer; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    mat(p + "attention.wqkv.weight", (a.n_head + 2 * a.n_local_heads) * hd, d, sd);
    mat(p + "attention.wo.weight", d, a.n_head * hd, sd);
    mat(p + "feed_forward.swiglu.w1.weight", I, d, sd);
    mat(p + "feed_forward.swiglu.w3.weight", I, d, sd);
    mat(p + "feed_forward.w2.weight", d, I, 1.0f / std::sqrt(static_cast<float>(I)));
    vec(p + "attention_norm.weight");
    vec(p + "ffn_norm.weight");
  }
  vec("norm.weight");
  mat("output.weight", a.vocab_size, d, sd);
  return f;
}

ModelFiles random_mv_stage2_files(const MvStage2Args& a, uint64_t seed) {
  ModelFiles f;
  f.path = "<random metavoice stage 2>";
  f.format = ModelFiles::Format::Safetensors;
  f.config = a.to_json();
  const int64_t d = a.n_embd, M = a.mlp_hidden();
  const float sd = 1.0f / std::sqrt(static_cast<float>(d));
  auto mat = [&](const std::string& name, int64_t rows, int64_t cols, float std) {
    f.tensors.emplace(name, random_matrix(name, DType::F32, rows, cols, std, seed, nullptr));
  };
  auto vec = [&](const std::string& name, float mean, float std, int64_t n) {
    f.tensors.emplace(name, random_vector(name, n, mean, std, seed));
  };
  auto norm = [&](const std::string& prefix) {
    vec(prefix + ".weight", 1.0f, 0.1f, d);
    if (a.bias && a.norm_type == "layernorm") vec(prefix + ".bias", 0.0f, 0.1f, d);
  };
  auto linear = [&](const std::string& prefix, int64_t out, int64_t in) {
    mat(prefix + ".weight", out, in, 1.0f / std::sqrt(static_cast<float>(in)));
    if (a.bias) vec(prefix + ".bias", 0.0f, 0.1f, out);
  };
  for (size_t i = 0; i < a.vocab_sizes.size(); ++i)
    mat("transformer.wtes." + std::to_string(i) + ".weight", a.vocab_sizes[i], d, 0.5f);
  mat("transformer.wpe.weight", a.block_size, d, 0.5f);
  mat("speaker_cond_pos.weight", d, a.speaker_emb_dim,
      1.0f / std::sqrt(static_cast<float>(a.speaker_emb_dim)));
  for (int64_t i = 0; i < a.n_layer; ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    norm(p + "ln_1");
    norm(p + "ln_2");
    linear(p + "attn.c_attn", 3 * d, d);
    linear(p + "attn.c_proj", d, d);
    if (a.nonlinearity_type == "swiglu") {
      linear(p + "mlp.swiglu.w1", M, d);
      linear(p + "mlp.swiglu.w3", M, d);
    } else {
      linear(p + "mlp.c_fc", M, d);
    }
    linear(p + "mlp.c_proj", d, M);
  }
  norm("transformer.ln_f");
  const auto hv = a.head_vocab_sizes();
  if (!a.target_vocab_sizes.empty())
    for (size_t h = 0; h < hv.size(); ++h)
      mat("lm_heads." + std::to_string(h) + ".weight", hv[h], d, sd);
  return f;
}

}  // namespace cachet
