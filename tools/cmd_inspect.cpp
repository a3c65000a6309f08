// `cachet inspect`: lists the metadata and tensors of a GGUF file, a safetensors file or a
// Hugging Face model directory, or prints one tensor's values as JSON.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cachet/error.h"
#include "cachet/gguf.h"
#include "cachet/half.h"
#include "cachet/metavoice_gpt.h"
#include "cachet/model_files.h"
#include "cachet/quant.h"
#include "cachet/safetensors.h"
#include "cli.h"

namespace cachet::cli {
namespace {

namespace fs = std::filesystem;

struct Args {
  std::string path;
  std::string tensor;
  bool values = false;
  bool json = false;
};

struct Row {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t offset;  // relative to the data section of its file
  uint64_t nbytes;
  std::string file;  // shard file (directories only)
};

struct Listing {
  std::string format;
  std::string path;
  std::vector<std::string> notes;                              // "version 3", ...
  std::vector<std::pair<std::string, std::string>> meta_type;  // key, type
  std::vector<std::string> meta_text;                          // rendered value
  nlohmann::ordered_json meta_json = nlohmann::ordered_json::object();
  std::vector<Row> rows;
};

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::string value_type(const GgufValue& v) {
  if (!v.is_array()) return std::string(gguf_type_name(v.type()));
  return "array<" + std::string(gguf_type_name(v.elem_type())) + ">";
}

nlohmann::ordered_json value_json(const GgufValue& v, size_t max_items) {
  switch (v.type()) {
    case GgufType::STRING: {
      // Keep the JSON valid even for byte strings that are not UTF-8.
      const std::string& s = v.as_string();
      nlohmann::ordered_json j = s;
      try {
        (void)j.dump();
      } catch (const nlohmann::json::exception&) {
        j = v.to_string();
      }
      return j;
    }
    case GgufType::BOOL:
      return v.as_bool();
    case GgufType::FLOAT32:
    case GgufType::FLOAT64: {
      const double d = v.as_float();
      if (std::isfinite(d)) return d;
      return v.to_string();
    }
    case GgufType::ARRAY: {
      nlohmann::ordered_json items = nlohmann::ordered_json::array();
      const size_t shown = v.size() > max_items ? std::min<size_t>(max_items, 8) : v.size();
      for (size_t i = 0; i < shown; ++i) items.push_back(value_json(v.at(i), max_items));
      if (v.size() <= max_items) return items;
      return {{"type", value_type(v)}, {"length", v.size()}, {"head", items}};
    }
    default:
      if (v.type() == GgufType::UINT64) return v.as_uint();
      return v.as_int();
  }
}

void add_safetensors(Listing& l, const SafetensorsFile& f, const std::string& file_label) {
  for (const auto& [k, v] : f.metadata()) {
    const std::string key = file_label.empty() ? k : file_label + ": " + k;
    l.meta_type.emplace_back(key, "string");
    l.meta_text.push_back(GgufValue::string(v).to_string());
    l.meta_json[key] = v;
  }
  for (const auto& info : f.infos())
    l.rows.push_back(
        Row{info.name, info.dtype, info.shape, info.begin, info.end - info.begin, file_label});
}

Listing list(const std::string& path) {
  Listing l;
  l.path = path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    CACHET_CHECK(!is_metavoice_dir(path), path,
                 ": a MetaVoice directory holds several models; inspect its files one at a time "
                 "(e.g. ",
                 (fs::path(path) / "first_stage.safetensors").string(), ")");
    // Validate the whole directory first (config, shards, index) with the loader itself.
    auto m = ModelFiles::open(path);
    l.format = "Hugging Face directory";
    if (!m.tokenizer_model.empty()) l.notes.push_back("tokenizer " + m.tokenizer_model);
    l.meta_type.emplace_back("config.json", "json");
    l.meta_text.push_back(m.config.dump());
    l.meta_json["config.json"] = nlohmann::ordered_json::parse(m.config.dump());
    const fs::path dir(path);
    std::vector<std::string> files;
    if (fs::exists(dir / "model.safetensors.index.json")) {
      auto sh = ShardedSafetensors::open((dir / "model.safetensors.index.json").string());
      l.notes.push_back(std::to_string(sh.shards.size()) + " shards");
      for (const auto& s : sh.shards)
        add_safetensors(l, *s, fs::path(s->path()).filename().string());
      return l;
    }
    if (fs::exists(dir / "model.safetensors")) {
      files.push_back((dir / "model.safetensors").string());
    } else {
      for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".safetensors") files.push_back(e.path().string());
      std::sort(files.begin(), files.end());
    }
    for (const auto& p : files) {
      auto f = SafetensorsFile::open(p);
      add_safetensors(l, *f, files.size() > 1 ? fs::path(p).filename().string() : "");
    }
    return l;
  }
  if (GgufFile::has_magic(path)) {
    auto g = GgufFile::open(path);
    l.format = "GGUF";
    l.notes.push_back("version " + std::to_string(g->version()));
    l.notes.push_back("alignment " + std::to_string(g->alignment()));
    l.notes.push_back("data at offset " + std::to_string(g->data_offset()));
    l.notes.push_back(std::to_string(g->file_size()) + " bytes");
    for (const auto& [k, v] : g->metadata()) {
      l.meta_type.emplace_back(k, value_type(v));
      l.meta_text.push_back(v.to_string(16));
      l.meta_json[k] = value_json(v, 16);
    }
    for (const auto& t : g->tensor_infos())
      l.rows.push_back(Row{t.name, t.dtype, t.shape, t.offset, t.nbytes, ""});
    return l;
  }
  (void)ModelFiles::open(path);  // reports unrecognised formats
  auto f = SafetensorsFile::open(path);
  l.format = "safetensors";
  l.notes.push_back("header " + std::to_string(f->header_size()) + " bytes");
  l.notes.push_back(std::to_string(f->file_size()) + " bytes");
  add_safetensors(l, *f, "");
  return l;
}

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

int print_listing(const Listing& l, bool json) {
  uint64_t total_bytes = 0;
  int64_t total_params = 0;
  for (const auto& r : l.rows) {
    total_bytes += r.nbytes;
    total_params += numel(r.shape);
  }
  if (json) {
    nlohmann::ordered_json j;
    j["path"] = l.path;
    j["format"] = l.format;
    j["info"] = l.notes;
    j["metadata"] = l.meta_json;
    auto ts = nlohmann::ordered_json::array();
    for (const auto& r : l.rows) {
      nlohmann::ordered_json t = {{"name", r.name},
                                  {"type", std::string(dtype_name(r.dtype))},
                                  {"shape", r.shape},
                                  {"offset", r.offset},
                                  {"bytes", r.nbytes}};
      if (!r.file.empty()) t["file"] = r.file;
      ts.push_back(t);
    }
    j["tensors"] = ts;
    j["totals"] = {
        {"tensors", l.rows.size()}, {"parameters", total_params}, {"bytes", total_bytes}};
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("%s: %s", l.path.c_str(), l.format.c_str());
  for (size_t i = 0; i < l.notes.size(); ++i)
    std::printf("%s%s", i ? ", " : " (", l.notes[i].c_str());
  std::printf("%s\n", l.notes.empty() ? "" : ")");
  std::printf("\nmetadata: %zu entries\n", l.meta_type.size());
  size_t kw = 0;
  for (const auto& [k, t] : l.meta_type) kw = std::max(kw, k.size());
  for (size_t i = 0; i < l.meta_type.size(); ++i)
    std::printf("  %-*s  %-14s  %s\n", static_cast<int>(kw), l.meta_type[i].first.c_str(),
                l.meta_type[i].second.c_str(), l.meta_text[i].c_str());
  std::printf("\ntensors: %zu\n", l.rows.size());
  size_t nw = 4;
  for (const auto& r : l.rows) nw = std::max(nw, r.name.size());
  std::printf("  %-*s  %-8s  %-22s  %14s  %14s%s\n", static_cast<int>(nw), "name", "type", "shape",
              "offset", "bytes", l.rows.empty() || l.rows[0].file.empty() ? "" : "  file");
  for (const auto& r : l.rows)
    std::printf("  %-*s  %-8s  %-22s  %14llu  %14llu%s%s\n", static_cast<int>(nw), r.name.c_str(),
                std::string(dtype_name(r.dtype)).c_str(), shape_str(r.shape).c_str(),
                static_cast<unsigned long long>(r.offset),
                static_cast<unsigned long long>(r.nbytes), r.file.empty() ? "" : "  ",
                r.file.c_str());
  std::printf("\ntotal: %zu tensors, %lld parameters, %llu bytes (%.2f MiB)\n", l.rows.size(),
              static_cast<long long>(total_params), static_cast<unsigned long long>(total_bytes),
              static_cast<double>(total_bytes) / (1024.0 * 1024.0));
  return 0;
}

float f8_e4m3_to_f32(uint8_t b) {
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  const int exp = (b >> 3) & 15, mant = b & 7;
  if (exp == 15 && mant == 7) return std::nanf("");
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -9);
  return sign * std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, exp - 7);
}

float f8_e5m2_to_f32(uint8_t b) {
  return f16_to_f32(static_cast<uint16_t>(b) << 8);
}

// Writes one tensor's values to stdout as JSON numbers, a buffer at a time, so that a tensor of
// any size prints in bounded memory. Integers print exactly, F64 with 17 digits, the other
// float types as their f32 value with 9; NaN and the infinities, which JSON has no numbers for,
// as the strings "NaN", "Infinity" and "-Infinity" (protobuf's JSON mapping does the same).
class ValueWriter {
 public:
  void sep() {
    if (n_++) buf_ += ", ";
    if (buf_.size() > (1u << 20)) flush();
  }
  void f64(double v, int digits) {
    sep();
    if (std::isnan(v)) {
      buf_ += "\"NaN\"";
    } else if (std::isinf(v)) {
      buf_ += v > 0 ? "\"Infinity\"" : "\"-Infinity\"";
    } else if (v == 0.0 && std::signbit(v)) {
      buf_ += "-0.0";  // "-0" would read back as the integer 0
    } else {
      char b[40];
      std::snprintf(b, sizeof b, "%.*g", digits, v);
      buf_ += b;
    }
  }
  void f32(float v) { f64(static_cast<double>(v), 9); }
  template <typename Int>
  void integer(Int v) {
    sep();
    buf_ += std::to_string(v);
  }
  void raw(const std::string& s) { buf_ += s; }
  void flush() {
    if (!buf_.empty()) std::fwrite(buf_.data(), 1, buf_.size(), stdout);
    buf_.clear();
  }

 private:
  std::string buf_;
  size_t n_ = 0;
};

void write_values(const Tensor& t, ValueWriter& w) {
  const int64_t n = t.numel();
  const uint8_t* p = t.bytes();
  auto each = [&](size_t es, auto put) {
    for (int64_t i = 0; i < n; ++i) put(p + static_cast<size_t>(i) * es);
  };
  auto rd = [](const uint8_t* q, auto zero) {
    decltype(zero) v;
    std::memcpy(&v, q, sizeof v);
    return v;
  };
  auto as_int = [&](auto zero) {
    each(sizeof zero, [&](const uint8_t* q) { w.integer(rd(q, zero)); });
  };
  switch (t.dtype) {
    case DType::F32:
      each(4, [&](const uint8_t* q) { w.f32(rd(q, 0.0f)); });
      break;
    case DType::F64:
      each(8, [&](const uint8_t* q) { w.f64(rd(q, 0.0), 17); });
      break;
    case DType::F16:
      each(2, [&](const uint8_t* q) { w.f32(f16_to_f32(rd(q, uint16_t{}))); });
      break;
    case DType::BF16:
      each(2, [&](const uint8_t* q) { w.f32(bf16_to_f32(rd(q, uint16_t{}))); });
      break;
    case DType::F8_E4M3:
      each(1, [&](const uint8_t* q) { w.f32(f8_e4m3_to_f32(*q)); });
      break;
    case DType::F8_E5M2:
      each(1, [&](const uint8_t* q) { w.f32(f8_e5m2_to_f32(*q)); });
      break;
    case DType::I8:
      as_int(int8_t{});
      break;
    case DType::I16:
      as_int(int16_t{});
      break;
    case DType::I32:
      as_int(int32_t{});
      break;
    case DType::I64:
      as_int(int64_t{});
      break;
    case DType::BOOL:
    case DType::U8:
      as_int(uint8_t{});
      break;
    case DType::U16:
      as_int(uint16_t{});
      break;
    case DType::U32:
      as_int(uint32_t{});
      break;
    case DType::U64:
      as_int(uint64_t{});
      break;
    default: {  // block formats: a row at a time
      const int64_t cols = t.cols(), rows = t.rows();
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        dequantize_row(t.dtype, t.row(r), row.data(), cols);
        for (float v : row) w.f32(v);
      }
    }
  }
}

int print_tensor(const Args& a) {
  auto m = ModelFiles::open(a.path);
  const Tensor& t = m.get(a.tensor);
  ValueWriter w;
  w.raw("{\"name\": " + nlohmann::json(t.name).dump() + ", \"type\": \"" +
        std::string(dtype_name(t.dtype)) + "\", \"shape\": " + nlohmann::json(t.shape).dump());
  if (a.values) {
    w.raw(", \"values\": [");
    write_values(t, w);
    w.raw("]");
  } else {
    w.raw(", \"bytes\": " + std::to_string(t.nbytes));
  }
  w.raw("}\n");
  w.flush();
  CACHET_CHECK(std::fflush(stdout) == 0 && !std::ferror(stdout),
               "inspect: could not write the values to standard output");
  return 0;
}

int run(const Args& a) {
  CACHET_CHECK(!a.values || !a.tensor.empty(), "--values needs --tensor NAME");
  if (!a.tensor.empty()) return print_tensor(a);
  return print_listing(list(a.path), a.json);
}

static Register reg{
    {"inspect", "Show the metadata and tensors of a GGUF, safetensors or HF model",
     [](CLI::App* sub) -> std::function<int()> {
       auto a = std::make_shared<Args>();
       sub->add_option("path", a->path, "GGUF file, .safetensors file or model directory")
           ->required();
       sub->add_option("--tensor", a->tensor, "Show only this tensor");
       sub->add_flag("--values", a->values,
                     "With --tensor: print its values in one JSON object (integers exactly, floats "
                     "as f32 or f64; NaN and infinities as strings)");
       sub->add_flag("--json", a->json, "Print the listing as JSON");
       return [a] { return run(*a); };
     }}};

}  // namespace
}  // namespace cachet::cli
