// ModelFiles: one entry point for GGUF files, safetensors files and Hugging Face directories.
#include "cachet/model_files.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <system_error>

#include "cachet/error.h"
#include "cachet/file.h"
#include "cachet/gguf.h"
#include "cachet/safetensors.h"

namespace cachet {

namespace {
namespace fs = std::filesystem;

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

void add_tensors(ModelFiles& m, const std::vector<Tensor>& ts, const std::string& from) {
  for (const auto& t : ts) {
    auto [it, inserted] = m.tensors.emplace(t.name, t);
    if (!inserted) fail(m.path, ": tensor '", t.name, "' appears twice (again in ", from, ")");
  }
}

void open_dir(ModelFiles& m) {
  const fs::path dir(m.path);
  const fs::path config = dir / "config.json";
  if (!is_file(config))
    fail(m.path,
         ": not a model directory: no config.json (expected a Hugging Face layout with "
         "config.json and model.safetensors)");
  m.config = read_json_file(config.string());
  if (!m.config.is_object()) fail(config.string(), ": not a JSON object");

  const fs::path index = dir / "model.safetensors.index.json";
  const fs::path single = dir / "model.safetensors";
  if (is_file(index)) {
    auto sharded = ShardedSafetensors::open(index.string());
    m.tensors = std::move(sharded.tensors);
  } else if (is_file(single)) {
    auto f = SafetensorsFile::open(single.string());
    add_tensors(m, f->tensors(), f->path());
  } else {
    // Other *.safetensors files without an index: load them all.
    std::vector<std::string> files;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".safetensors" && is_file(e.path()))
        files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    if (files.empty()) {
      if (is_file(dir / "pytorch_model.bin"))
        fail(m.path,
             ": no safetensors weights (pytorch_model.bin is not supported; convert the "
             "checkpoint to safetensors)");
      fail(m.path, ": no weights: expected model.safetensors or model.safetensors.index.json");
    }
    for (const auto& p : files) {
      auto f = SafetensorsFile::open(p);
      add_tensors(m, f->tensors(), p);
    }
  }
  const fs::path tok = dir / "tokenizer.model";
  if (is_file(tok)) m.tokenizer_model = tok.string();
}

void open_gguf(ModelFiles& m) {
  m.format = ModelFiles::Format::Gguf;
  m.gguf = GgufFile::open(m.path);
  add_tensors(m, m.gguf->tensors(), m.path);
  if (const GgufValue* v = m.gguf->find("cachet.hf_config")) {
    if (v->type() != GgufType::STRING)
      fail(m.path, ": metadata key 'cachet.hf_config': expected a string, found ",
           gguf_type_name(v->type()));
    try {
      m.config = nlohmann::json::parse(v->as_string());
    } catch (const nlohmann::json::exception& e) {
      fail(m.path, ": metadata key 'cachet.hf_config' is not valid JSON: ", e.what());
    }
    if (!m.config.is_object())
      fail(m.path, ": metadata key 'cachet.hf_config' is not a JSON object");
    return;
  }
  const fs::path sibling = fs::path(m.path).parent_path() / "config.json";
  if (is_file(sibling)) {
    m.config = read_json_file(sibling.string());
    if (!m.config.is_object()) fail(sibling.string(), ": not a JSON object");
  }
}

void open_safetensors(ModelFiles& m) {
  m.format = ModelFiles::Format::Safetensors;
  auto f = SafetensorsFile::open(m.path);
  add_tensors(m, f->tensors(), m.path);
  const fs::path dir = fs::path(m.path).parent_path();
  if (is_file(dir / "config.json")) {
    m.config = read_json_file((dir / "config.json").string());
    if (!m.config.is_object()) fail((dir / "config.json").string(), ": not a JSON object");
  }
  if (is_file(dir / "tokenizer.model")) m.tokenizer_model = (dir / "tokenizer.model").string();
}

}  // namespace

std::optional<int64_t> json_integer(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15)
      return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

nlohmann::json read_json_file(const std::string& path) {
  const std::string text = read_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": not valid JSON: ", e.what());
  }
}

namespace {
// safetensors places tensors back to back, so a file may hold an F32 tensor at an odd offset.
// Such a tensor is copied once into aligned memory so that kernels can read it as its type.
void align_tensors(ModelFiles& m) {
  for (auto& [name, t] : m.tensors) {
    if (t.data == nullptr || reinterpret_cast<uintptr_t>(t.data) % dtype_alignment(t.dtype) == 0)
      continue;
    auto buf = aligned_buffer(t.nbytes);
    std::memcpy(buf.get(), t.data, t.nbytes);
    t.data = buf.get();
    t.owner = std::move(buf);
  }
}

ModelFiles open_any(const std::string& path);
}  // namespace

ModelFiles ModelFiles::open(const std::string& path) {
  ModelFiles m = open_any(path);
  align_tensors(m);
  return m;
}

namespace {
ModelFiles open_any(const std::string& path) {
  ModelFiles m;
  m.path = path;
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) fail(path, ": no such file or directory");
  if (fs::is_directory(st)) {
    m.format = ModelFiles::Format::HfDir;
    open_dir(m);
    return m;
  }
  if (!fs::is_regular_file(st)) fail(path, ": not a regular file or directory");
  if (GgufFile::has_magic(path)) {
    open_gguf(m);
    return m;
  }
  if (fs::path(path).extension() == ".safetensors") {
    open_safetensors(m);
    return m;
  }
  if (fs::path(path).extension() == ".gguf") {
    GgufFile::open(path);  // reports the bad magic
  }
  fail(path,
       ": unrecognised format (expected a GGUF file, a .safetensors file or a model "
       "directory with config.json)");
}
}  // namespace

const Tensor* ModelFiles::find(const std::string& name) const {
  auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}

const Tensor& ModelFiles::get(const std::string& name) const {
  const Tensor* t = find(name);
  if (!t) fail(path, ": missing tensor '", name, "'");
  return *t;
}

}  // namespace cachet
