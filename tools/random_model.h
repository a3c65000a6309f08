// Random-weight models with the real shapes, for benchmarks that need no download.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cachet/dtype.h"
#include "cachet/model_files.h"

namespace cachet {
class ThreadPool;
}

namespace cachet::cli {

struct RandomTensor {
  enum class Kind { Matrix, Embedding, Norm, Bias, ConvWeight, Lambda, Gate };
  std::string name;
  DType type;
  std::vector<int64_t> shape;  // row-major
  Kind kind;
};

struct RandomModelSpec {
  std::string preset;
  nlohmann::json config;  // HF config.json
  std::vector<RandomTensor> tensors;
};

// Names of the presets ("recurrentgemma-2b", "recurrentgemma-9b", "recurrentgemma-tiny").
std::vector<std::string> random_presets();
// The config and tensor list of a preset, matrices in type (rows that are not whole blocks of
// type fall back to Q8_0, then F32); vectors, conv taps and RG-LRU gates stay F32.
RandomModelSpec random_model_spec(const std::string& preset, DType type);
// The tensors, built in memory.
ModelFiles random_model_files(const RandomModelSpec& spec, uint64_t seed, ThreadPool& pool);
// Streams the model to a GGUF file.
void write_random_model(const RandomModelSpec& spec, uint64_t seed, const std::string& path,
                        ThreadPool& pool);

// The weight type used for a matrix of `cols` columns when `want` is asked for.
DType matrix_type_for(DType want, int64_t cols);

}  // namespace cachet::cli
