// safetensors reader, sharded checkpoints and writer.
#include "cachet/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cachet/error.h"
#include "cachet/mmap.h"
#include "formats/io_util.h"

namespace cachet {

namespace {

constexpr uint64_t kMaxHeader = 100u << 20;  // the reference implementation's limit
constexpr size_t kMaxDims = 16;

// A short description of a JSON value for error messages (never a recursive dump, which a
// deeply nested hostile header could turn into a stack overflow).
std::string brief(const nlohmann::ordered_json& v) {
  if (v.is_number_integer() || v.is_number_float() || v.is_boolean() || v.is_null())
    return v.dump();
  return std::string("(") + v.type_name() + ")";
}

struct StName {
  const char* name;
  DType type;
};
constexpr StName kStTypes[] = {
    {"BOOL", DType::BOOL}, {"U8", DType::U8},           {"I8", DType::I8},
    {"I16", DType::I16},   {"U16", DType::U16},         {"I32", DType::I32},
    {"U32", DType::U32},   {"I64", DType::I64},         {"U64", DType::U64},
    {"F16", DType::F16},   {"BF16", DType::BF16},       {"F32", DType::F32},
    {"F64", DType::F64},   {"F8_E4M3", DType::F8_E4M3}, {"F8_E5M2", DType::F8_E5M2},
};

}  // namespace

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  for (const auto& t : kStTypes)
    if (name == t.name) return t.type;
  return std::nullopt;
}

std::string_view safetensors_dtype_name(DType t) {
  for (const auto& s : kStTypes)
    if (s.type == t) return s.name;
  fail("type ", dtype_name(t), " cannot be stored in safetensors");
}

void SafetensorsFile::parse() {
  using nlohmann::ordered_json;
  const std::string& P = path_;
  if (size_ < 8)
    fail(P, ": not a safetensors file: ", size_, " bytes is too short for the header length");
  uint64_t hlen;
  std::memcpy(&hlen, data_, 8);
  if (hlen > kMaxHeader)
    fail(P, ": header length ", hlen, " exceeds the limit of ", kMaxHeader, " bytes");
  if (hlen > size_ - 8)
    fail(P, ": truncated: header length ", hlen, " is past the end of the ", size_, "-byte file");
  if (hlen < 2) fail(P, ": header length ", hlen, " is too short for a JSON object");
  header_size_ = static_cast<size_t>(hlen);
  const char* h = reinterpret_cast<const char*>(data_ + 8);
  if (h[0] != '{') fail(P, ": header does not start with '{' (not a safetensors file)");
  ordered_json j;
  // The JSON parser keeps only the last of duplicate keys: catch duplicate tensor names here.
  std::set<std::string> top_keys;
  std::string duplicate;
  const auto check_keys = [&](int depth, nlohmann::json::parse_event_t event,
                              ordered_json& parsed) {
    if (depth == 1 && event == nlohmann::json::parse_event_t::key && parsed.is_string() &&
        !top_keys.insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  try {
    j = ordered_json::parse(h, h + header_size_, check_keys);
  } catch (const nlohmann::json::exception& e) {
    fail(P, ": header is not valid JSON: ", e.what());
  }
  if (!duplicate.empty())
    fail(P, ": duplicate tensor '", formats::printable(duplicate), "' in header");
  if (!j.is_object()) fail(P, ": header is not a JSON object");
  const size_t data_start = 8 + header_size_;
  const uint64_t data_size = size_ - data_start;

  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const auto& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) fail(P, ": __metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) fail(P, ": __metadata__ key '", m.key(), "' is not a string");
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string what = "tensor '" + formats::printable(name) + "'";
    if (name.empty()) fail(P, ": empty tensor name");
    if (!v.is_object()) fail(P, ": ", what, ": entry is not an object");
    if (index_.count(name)) fail(P, ": duplicate ", what);  // JSON parser keeps duplicates
    for (auto f = v.begin(); f != v.end(); ++f)
      if (f.key() != "dtype" && f.key() != "shape" && f.key() != "data_offsets")
        fail(P, ": ", what, ": unexpected field '", formats::printable(f.key()), "'");
    SafetensorsInfo info;
    info.name = name;
    if (!v.contains("dtype") || !v["dtype"].is_string()) fail(P, ": ", what, ": missing dtype");
    const std::string ds = v["dtype"].get<std::string>();
    auto dt = dtype_from_safetensors(ds);
    if (!dt) fail(P, ": ", what, ": unknown dtype '", formats::printable(ds), "'");
    info.dtype = *dt;
    if (!v.contains("shape") || !v["shape"].is_array()) fail(P, ": ", what, ": missing shape");
    const auto& sh = v["shape"];
    if (sh.size() > kMaxDims)
      fail(P, ": ", what, ": ", sh.size(), " dimensions (limit ", kMaxDims, ")");
    for (const auto& d : sh) {
      if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0))
        fail(P, ": ", what, ": shape entry ", brief(d), " is not a non-negative integer");
      const uint64_t x = d.get<uint64_t>();
      if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail(P, ": ", what, ": dimension ", x, " too large");
      info.shape.push_back(static_cast<int64_t>(x));
    }
    unsigned __int128 numel = 1;
    if (std::find(info.shape.begin(), info.shape.end(), 0) != info.shape.end()) numel = 0;
    for (int64_t x : info.shape) {
      if (numel == 0) break;
      numel *= static_cast<uint64_t>(x);
      if (numel > data_size)
        fail(P, ": ", what, ": shape ", sh.dump(),
             " needs more bytes than the data section holds (", data_size, ")");
    }
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2)
      fail(P, ": ", what, ": data_offsets must be [begin, end]");
    const auto& off = v["data_offsets"];
    for (const auto& o : off)
      if (!o.is_number_unsigned() && !(o.is_number_integer() && o.get<int64_t>() >= 0))
        fail(P, ": ", what, ": data_offsets entry ", brief(o), " is not a non-negative integer");
    info.begin = off[0].get<uint64_t>();
    info.end = off[1].get<uint64_t>();
    if (info.begin > info.end)
      fail(P, ": ", what, ": data_offsets begin ", info.begin, " is after end ", info.end);
    if (info.end > data_size)
      fail(P, ": ", what, ": data_offsets [", info.begin, ", ", info.end,
           "] extend past the end of the file (data section holds ", data_size, " bytes)");
    const uint64_t es = static_cast<uint64_t>(dtype_info(info.dtype).block_bytes);
    const unsigned __int128 want = numel * es;
    if (want != info.end - info.begin)
      fail(P, ": ", what, ": data_offsets cover ", info.end - info.begin, " bytes but ", ds,
           " shape ", sh.dump(), " needs ", static_cast<uint64_t>(want));
    index_.emplace(name, infos_.size());
    infos_.push_back(std::move(info));
  }

  // No two tensors may share bytes.
  std::vector<size_t> order(infos_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return infos_[a].begin != infos_[b].begin ? infos_[a].begin < infos_[b].begin
                                              : infos_[a].end < infos_[b].end;
  });
  for (size_t k = 1; k < order.size(); ++k) {
    const auto& prev = infos_[order[k - 1]];
    const auto& cur = infos_[order[k]];
    if (cur.begin < prev.end)
      fail(P, ": tensor '", formats::printable(cur.name), "' (data_offsets [", cur.begin, ", ",
           cur.end, "]) overlaps tensor '", formats::printable(prev.name), "' ([", prev.begin, ", ",
           prev.end, "])");
  }

  tensors_.reserve(infos_.size());
  for (const auto& info : infos_) {
    Tensor t;
    t.name = info.name;
    t.dtype = info.dtype;
    t.shape = info.shape;
    t.strides = contiguous_strides(t.shape);
    t.data = const_cast<uint8_t*>(data_ + data_start + info.begin);
    t.nbytes = static_cast<size_t>(info.end - info.begin);
    t.owner = owner_;
    tensors_.push_back(std::move(t));
  }
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto m = MappedFile::open(path);
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->data_ = m->data();
  f->size_ = m->size();
  f->owner_ = std::shared_ptr<const void>(m, m->data());
  f->parse();
  return f;
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::from_memory(const void* data, size_t size,
                                                              const std::string& name) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = name;
  f->owner_ = formats::copy_to_heap(data, size);
  f->data_ = static_cast<const uint8_t*>(f->owner_.get());
  f->size_ = size;
  f->parse();
  return f;
}

const Tensor* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const Tensor& SafetensorsFile::get(std::string_view name) const {
  const Tensor* t = find(name);
  if (!t) fail(path_, ": missing tensor '", name, "'");
  return *t;
}

// ---------------------------------------------------------------------------------------------

ShardedSafetensors ShardedSafetensors::open(const std::string& index_path) {
  namespace fs = std::filesystem;
  ShardedSafetensors r;
  r.index_path = index_path;
  const std::string& P = index_path;
  std::ifstream in(index_path, std::ios::binary);
  if (!in) fail(P, ": cannot open");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(P, ": not valid JSON: ", e.what());
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    fail(P, ": no \"weight_map\" object");
  const fs::path dir = fs::path(index_path).parent_path();
  std::map<std::string, std::shared_ptr<SafetensorsFile>> by_file;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it.value().is_string()) fail(P, ": weight_map entry '", it.key(), "' is not a file name");
    const std::string file = it.value().get<std::string>();
    if (file.empty() || fs::path(file).is_absolute() || file.find("..") != std::string::npos)
      fail(P, ": weight_map entry '", it.key(), "': shard name '", file,
           "' must be a plain file name beside the index");
    if (!by_file.count(file)) {
      const std::string shard_path = (dir / file).string();
      if (!fs::exists(shard_path))
        fail(P, ": shard '", file, "' (for tensor '", it.key(), "') does not exist: ", shard_path);
      auto shard = SafetensorsFile::open(shard_path);
      by_file[file] = shard;
      r.shards.push_back(shard);
    }
  }
  // Every listed tensor must be in its shard.
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    const auto& shard = by_file[it.value().get<std::string>()];
    if (!shard->find(it.key()))
      fail(P, ": tensor '", it.key(), "' is listed in shard '", it.value().get<std::string>(),
           "' but missing from ", shard->path());
  }
  // Collect every tensor of every shard; a name in two shards is an error.
  for (const auto& shard : r.shards) {
    for (const auto& t : shard->tensors()) {
      auto [pos, inserted] = r.tensors.emplace(t.name, t);
      if (!inserted)
        fail(P, ": tensor '", t.name, "' appears in more than one shard (", shard->path(), ")");
    }
  }
  return r;
}

// ---------------------------------------------------------------------------------------------

void SafetensorsWriter::add_metadata(const std::string& key, const std::string& value) {
  metadata_[key] = value;
}

void SafetensorsWriter::add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                                   const void* data, size_t size) {
  auto buf = std::make_shared<std::vector<uint8_t>>(static_cast<const uint8_t*>(data),
                                                    static_cast<const uint8_t*>(data) + size);
  add_tensor(name, dtype, std::move(shape),
             [buf](const Sink& sink) { sink(buf->data(), buf->size()); });
  CACHET_CHECK(tensors_.back().nbytes == size, "safetensors writer: tensor '", name, "': ", size,
               " bytes given, shape needs ", tensors_.back().nbytes);
}

void SafetensorsWriter::add_tensor(const std::string& name, const Tensor& t) {
  CACHET_CHECK(t.contiguous(), "safetensors writer: tensor '", name, "' is not contiguous");
  const void* p = t.data;
  auto owner = t.owner;
  add_tensor(name, t.dtype, t.shape, [p, owner, n = t.nbytes](const Sink& sink) { sink(p, n); });
}

void SafetensorsWriter::add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                                   Producer producer) {
  CACHET_CHECK(!name.empty() && name != "__metadata__", "safetensors writer: invalid tensor name '",
               name, "'");
  for (const auto& e : tensors_)
    CACHET_CHECK(e.name != name, "safetensors writer: duplicate tensor '", name, "'");
  (void)safetensors_dtype_name(dtype);
  uint64_t n = static_cast<uint64_t>(dtype_info(dtype).block_bytes);
  for (int64_t d : shape) {
    CACHET_CHECK(d >= 0, "safetensors writer: tensor '", name, "': negative dimension ", d);
    n *= static_cast<uint64_t>(d);
  }
  tensors_.push_back(
      Entry{name, dtype, std::move(shape), static_cast<size_t>(n), std::move(producer)});
}

void SafetensorsWriter::write_to(const Sink& sink) const {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata_.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata_) m[k] = v;
    h["__metadata__"] = m;
  }
  uint64_t off = 0;
  for (const auto& e : tensors_) {
    h[e.name] = {{"dtype", safetensors_dtype_name(e.dtype)},
                 {"shape", e.shape},
                 {"data_offsets", {off, off + e.nbytes}}};
    off += e.nbytes;
  }
  std::string js = h.dump();
  while (js.size() % 8) js += ' ';  // keeps the data 8-byte aligned
  const uint64_t n = js.size();
  sink(&n, 8);
  sink(js.data(), js.size());
  for (const auto& e : tensors_) {
    uint64_t produced = 0;
    const Sink counting = [&](const void* p, size_t k) {
      produced += k;
      CACHET_CHECK(produced <= e.nbytes, "safetensors writer: tensor '", e.name,
                   "': producer wrote more than the ", e.nbytes, " bytes of its shape");
      if (k) sink(p, k);
    };
    e.producer(counting);
    CACHET_CHECK(produced == e.nbytes, "safetensors writer: tensor '", e.name, "': producer wrote ",
                 produced, " bytes, the shape needs ", e.nbytes);
  }
}

void SafetensorsWriter::write(const std::string& path) const {
  formats::write_file_atomically(path, [this](const Sink& sink) { write_to(sink); });
}

std::vector<uint8_t> SafetensorsWriter::to_bytes() const {
  return formats::collect_bytes([this](const Sink& sink) { write_to(sink); });
}

}  // namespace cachet
