// The files a model comes in, opened uniformly: a GGUF file, a single safetensors file, or a
// Hugging Face model directory (config.json + model.safetensors or shards with
// model.safetensors.index.json + tokenizer.model). Tensors are views into mapped memory.
#pragma once
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cachet/tensor.h"

namespace cachet {

class GgufFile;

struct ModelFiles {
  enum class Format { Gguf, Safetensors, HfDir };

  std::string path;
  Format format = Format::HfDir;
  // config.json of an HF directory; for GGUF, the config stored by cachet (key
  // "cachet.hf_config") or one rebuilt from the architecture's metadata; {} if none.
  nlohmann::json config = nlohmann::json::object();
  std::shared_ptr<GgufFile> gguf;  // set for GGUF (metadata access)
  std::map<std::string, Tensor> tensors;
  std::string tokenizer_model;  // path of tokenizer.model in an HF dir, or "" if absent

  // Opens path (file or directory); throws cachet::Error naming the path and the problem.
  static ModelFiles open(const std::string& path);
  // The tensor, or an error "PATH: missing tensor 'NAME'".
  const Tensor& get(const std::string& name) const;
  const Tensor* find(const std::string& name) const;
};

// A JSON file (config.json and the like); errors name the file.
nlohmann::json read_json_file(const std::string& path);

// The integer a JSON number holds: a signed or unsigned integer within int64, or a float that
// is a whole number below 9e15 in magnitude (2048.0; beyond 2^53 floats are not exact);
// nothing for anything else. Readers name the field in their own errors.
std::optional<int64_t> json_integer(const nlohmann::json& v);

}  // namespace cachet
