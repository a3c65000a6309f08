#include "random_model.h"

#include <cmath>
#include <cstring>
#include <random>

#include "cachet/error.h"
#include "cachet/gguf.h"
#include "cachet/hash.h"
#include "cachet/quant.h"
#include "cachet/tensor.h"
#include "cachet/threadpool.h"

namespace cachet::cli {
namespace {

nlohmann::json preset_config(const std::string& preset) {
  nlohmann::json c = {{"model_type", "recurrent_gemma"},
                      {"architectures", {"RecurrentGemmaForCausalLM"}},
                      {"attention_bias", false},
                      {"block_types", {"recurrent", "recurrent", "attention"}},
                      {"conv1d_width", 4},
                      {"logits_soft_cap", 30.0},
                      {"partial_rotary_factor", 0.5},
                      {"rms_norm_eps", 1e-6},
                      {"rope_theta", 10000.0},
                      {"attention_window_size", 2048},
                      {"num_key_value_heads", 1},
                      {"head_dim", 256},
                      {"vocab_size", 256000},
                      {"bos_token_id", 2},
                      {"eos_token_id", 1},
                      {"pad_token_id", 0},
                      {"tie_word_embeddings", true}};
  if (preset == "recurrentgemma-2b") {
    c["hidden_size"] = 2560;
    c["lru_width"] = 2560;
    c["intermediate_size"] = 15360;
    c["num_hidden_layers"] = 26;
    c["num_attention_heads"] = 10;
  } else if (preset == "recurrentgemma-9b") {
    c["hidden_size"] = 4096;
    c["lru_width"] = 4096;
    c["intermediate_size"] = 24576;
    c["num_hidden_layers"] = 38;
    c["num_attention_heads"] = 16;
  } else if (preset == "recurrentgemma-tiny") {
    c["hidden_size"] = 256;
    c["lru_width"] = 256;
    c["intermediate_size"] = 1024;
    c["num_hidden_layers"] = 6;
    c["num_attention_heads"] = 4;
    c["head_dim"] = 64;
    c["attention_window_size"] = 64;
    c["vocab_size"] = 2048;
  } else {
    std::string names;
    for (const auto& p : random_presets()) names += (names.empty() ? "" : ", ") + p;
    fail("unknown random model preset '", preset, "' (known: ", names, ")");
  }
  return c;
}

// Fills f32 values for a non-matrix tensor.
void fill_small(const RandomTensor& t, uint64_t seed, float* out, int64_t n) {
  std::mt19937_64 rng(seed ^ fnv1a64(t.name));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  for (int64_t i = 0; i < n; ++i) {
    switch (t.kind) {
      case RandomTensor::Kind::Norm:
        out[i] = 0.1f * normal(rng);
        break;
      case RandomTensor::Kind::Bias:
        out[i] = 0.02f * normal(rng);
        break;
      case RandomTensor::Kind::ConvWeight:
        out[i] = 0.5f * normal(rng);
        break;
      case RandomTensor::Kind::Lambda: {
        // a = sigmoid(-lambda)^8 in (0.9, 0.999), as at initialisation of the reference.
        const float a = 0.9f + 0.099f * uni(rng);
        const float sp = -std::log(a) / 8.0f;  // softplus(lambda)
        out[i] = std::log(std::expm1(sp));
        break;
      }
      case RandomTensor::Kind::Gate: {
        const float s = 1.0f / std::sqrt(static_cast<float>(t.shape.back()));
        out[i] = s * normal(rng);
        break;
      }
      default:
        out[i] = 0.02f * normal(rng);
        break;
    }
  }
}

// A matrix is built from a pool of random rows (quantized once), each row picked by a hash, so
// that multi-gigabyte models are made quickly yet hold realistic values.
struct RowPool {
  size_t row_bytes = 0;
  int64_t rows = 0;
  std::vector<uint8_t> data;
};

RowPool make_pool(const RandomTensor& t, uint64_t seed) {
  RowPool p;
  const int64_t cols = t.shape.back();
  p.rows = 61;
  p.row_bytes = row_bytes(t.type, cols);
  p.data.resize(p.row_bytes * p.rows);
  std::mt19937_64 rng(seed ^ fnv1a64(t.name));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float s =
      t.kind == RandomTensor::Kind::Embedding ? 0.02f : 1.0f / std::sqrt(static_cast<float>(cols));
  std::vector<float> row(cols);
  for (int64_t r = 0; r < p.rows; ++r) {
    for (auto& v : row) v = s * normal(rng);
    quantize_row(t.type, row.data(), p.data.data() + r * p.row_bytes, cols);
  }
  return p;
}

const uint8_t* pool_row(const RowPool& p, uint64_t seed, int64_t r) {
  return p.data.data() + (splitmix64_mix(seed + static_cast<uint64_t>(r)) % p.rows) * p.row_bytes;
}

int64_t rows_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) n *= shape[i];
  return n;
}

}  // namespace

std::vector<std::string> random_presets() {
  return {"recurrentgemma-2b", "recurrentgemma-9b", "recurrentgemma-tiny"};
}

DType matrix_type_for(DType want, int64_t cols) {
  const auto& info = dtype_info(want);
  if (cols % info.block_elems == 0) return want;
  if (info.quantized && cols % 32 == 0) return DType::Q8_0;
  if (info.quantized) return DType::F16;
  return want;
}

RandomModelSpec random_model_spec(const std::string& preset, DType type) {
  CACHET_CHECK(is_weight_type(type) || type == DType::F32, "type ", dtype_name(type),
               " cannot hold weights");
  RandomModelSpec s;
  s.preset = preset;
  s.config = preset_config(preset);
  const auto& c = s.config;
  const int64_t d = c["hidden_size"], R = c["lru_width"],
                E = c["intermediate_size"].get<int64_t>() / 2;
  const int64_t H = c["num_attention_heads"], hd = c["head_dim"], kv = c["num_key_value_heads"];
  const int64_t V = c["vocab_size"], L = c["num_hidden_layers"], K = c["conv1d_width"];
  using Kind = RandomTensor::Kind;
  auto mat = [&](const std::string& name, int64_t rows, int64_t cols, Kind kind = Kind::Matrix) {
    s.tensors.push_back({name, matrix_type_for(type, cols), {rows, cols}, kind});
  };
  auto vec = [&](const std::string& name, std::vector<int64_t> shape, Kind kind) {
    s.tensors.push_back({name, DType::F32, std::move(shape), kind});
  };
  mat("model.embed_tokens.weight", V, d, Kind::Embedding);
  vec("model.final_norm.weight", {d}, Kind::Norm);
  for (int64_t i = 0; i < L; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    vec(p + "temporal_pre_norm.weight", {d}, Kind::Norm);
    vec(p + "channel_pre_norm.weight", {d}, Kind::Norm);
    mat(p + "mlp_block.gate_proj.weight", E, d);
    vec(p + "mlp_block.gate_proj.bias", {E}, Kind::Bias);
    mat(p + "mlp_block.up_proj.weight", E, d);
    vec(p + "mlp_block.up_proj.bias", {E}, Kind::Bias);
    mat(p + "mlp_block.down_proj.weight", d, E);
    vec(p + "mlp_block.down_proj.bias", {d}, Kind::Bias);
    const std::string t = p + "temporal_block.";
    if (i % 3 == 2) {
      mat(t + "q_proj.weight", H * hd, d);
      mat(t + "k_proj.weight", kv * hd, d);
      mat(t + "v_proj.weight", kv * hd, d);
      mat(t + "o_proj.weight", d, H * hd);
      vec(t + "o_proj.bias", {d}, Kind::Bias);
    } else {
      for (const char* n : {"linear_x", "linear_y"}) {
        mat(t + n + ".weight", R, d);
        vec(t + n + ".bias", {R}, Kind::Bias);
      }
      mat(t + "linear_out.weight", d, R);
      vec(t + "linear_out.bias", {d}, Kind::Bias);
      vec(t + "conv_1d.weight", {R, 1, K}, Kind::ConvWeight);
      vec(t + "conv_1d.bias", {R}, Kind::Bias);
      vec(t + "rg_lru.recurrent_param", {R}, Kind::Lambda);
      vec(t + "rg_lru.input_gate_weight", {H, R / H, R / H}, Kind::Gate);
      vec(t + "rg_lru.input_gate_bias", {H, R / H}, Kind::Bias);
      vec(t + "rg_lru.recurrent_gate_weight", {H, R / H, R / H}, Kind::Gate);
      vec(t + "rg_lru.recurrent_gate_bias", {H, R / H}, Kind::Bias);
    }
  }
  return s;
}

namespace {
void fill_tensor(const RandomTensor& t, uint64_t seed, uint8_t* dst, ThreadPool& pool) {
  const int64_t rows = rows_of(t.shape), cols = t.shape.back();
  if (t.kind == RandomTensor::Kind::Matrix || t.kind == RandomTensor::Kind::Embedding) {
    const RowPool p = make_pool(t, seed);
    const uint64_t s = seed ^ fnv1a64(t.name);
    pool.parallel_for(rows, 64, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r)
        std::memcpy(dst + r * p.row_bytes, pool_row(p, s, r), p.row_bytes);
    });
  } else {
    fill_small(t, seed, reinterpret_cast<float*>(dst), rows * cols);
  }
}
}  // namespace

ModelFiles random_model_files(const RandomModelSpec& spec, uint64_t seed, ThreadPool& pool) {
  ModelFiles m;
  m.path = "random:" + spec.preset;
  m.format = ModelFiles::Format::Gguf;
  m.config = spec.config;
  for (const auto& t : spec.tensors) {
    Tensor x = Tensor::zeros(t.type, t.shape, t.name);
    fill_tensor(t, seed, static_cast<uint8_t*>(x.data), pool);
    m.tensors.emplace(t.name, std::move(x));
  }
  return m;
}

void write_random_model(const RandomModelSpec& spec, uint64_t seed, const std::string& path,
                        ThreadPool& pool) {
  GgufWriter w;
  w.add_string("general.architecture", "recurrent_gemma");
  w.add_string("general.name", spec.preset + " (random weights)");
  w.add_string("cachet.hf_config", spec.config.dump());
  for (const auto& t : spec.tensors) {
    const RandomTensor* tp = &t;
    w.add_tensor(t.name, t.type, t.shape, [tp, seed, &pool](const GgufWriter::Sink& sink) {
      const RandomTensor& t = *tp;
      const int64_t rows = rows_of(t.shape), cols = t.shape.back();
      if (t.kind == RandomTensor::Kind::Matrix || t.kind == RandomTensor::Kind::Embedding) {
        const RowPool p = make_pool(t, seed);
        const uint64_t s = seed ^ fnv1a64(t.name);
        for (int64_t r = 0; r < rows; ++r) sink(pool_row(p, s, r), p.row_bytes);
      } else {
        std::vector<float> v(rows * cols);
        fill_small(t, seed, v.data(), rows * cols);
        sink(v.data(), v.size() * sizeof(float));
      }
    });
  }
  w.write(path);
}

}  // namespace cachet::cli
