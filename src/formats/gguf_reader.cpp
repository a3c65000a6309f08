// GGUF reader: parses and validates the header, metadata and tensor infos of a mapped file.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "cachet/error.h"
#include "cachet/gguf.h"
#include "cachet/mmap.h"
#include "formats/io_util.h"

namespace cachet {

namespace {
constexpr uint32_t kMaxDims = 4;           // ggml tensors have at most four dimensions
constexpr int kMaxDepth = 8;               // nesting of arrays within arrays
constexpr uint64_t kMaxKeyLength = 65535;  // the spec's limit on key length
constexpr uint64_t kMaxAlignment = 1u << 30;
}  // namespace

// Cursor over the file image; every read is bounds-checked against the remaining bytes.
class GgufParser {
 public:
  explicit GgufParser(GgufFile& f) : f_(f), p_(f.data_), n_(f.size_) {}

  void run();

 private:
  template <typename... Args>
  [[noreturn]] void error(Args&&... args) const {
    fail(f_.path_, ": ", std::forward<Args>(args)...);
  }
  size_t remaining() const { return n_ - pos_; }
  void need(size_t bytes, const std::string& what) const {
    if (bytes > remaining())
      error("truncated: ", what, " needs ", bytes, " bytes at offset ", pos_, " but only ",
            remaining(), " remain");
  }
  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(const std::string& what) {
    const uint64_t len = read<uint64_t>(what + " length");
    if (len > remaining())
      error("truncated: ", what, " has length ", len, " but only ", remaining(),
            " bytes remain at offset ", pos_);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }
  GgufValue read_value(GgufType type, const std::string& what, int depth);
  GgufType read_type(const std::string& what) {
    const uint32_t t = read<uint32_t>(what + " type");
    if (t > static_cast<uint32_t>(GgufType::FLOAT64)) error(what, ": unknown value type ", t);
    return static_cast<GgufType>(t);
  }

  GgufFile& f_;
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

GgufValue GgufParser::read_value(GgufType type, const std::string& what, int depth) {
  GgufValue v;
  v.type_ = type;
  switch (type) {
    case GgufType::UINT8:
      v.num_.u = read<uint8_t>(what);
      break;
    case GgufType::INT8:
      v.num_.i = read<int8_t>(what);
      break;
    case GgufType::UINT16:
      v.num_.u = read<uint16_t>(what);
      break;
    case GgufType::INT16:
      v.num_.i = read<int16_t>(what);
      break;
    case GgufType::UINT32:
      v.num_.u = read<uint32_t>(what);
      break;
    case GgufType::INT32:
      v.num_.i = read<int32_t>(what);
      break;
    case GgufType::UINT64:
      v.num_.u = read<uint64_t>(what);
      break;
    case GgufType::INT64:
      v.num_.i = read<int64_t>(what);
      break;
    case GgufType::FLOAT32:
      v.num_.f = read<float>(what);
      break;
    case GgufType::FLOAT64:
      v.num_.f = read<double>(what);
      break;
    case GgufType::BOOL: {
      const uint8_t b = read<uint8_t>(what);
      if (b > 1) error(what, ": invalid bool value ", unsigned(b));
      v.num_.u = b;
      break;
    }
    case GgufType::STRING:
      v.str_ = read_string(what);
      break;
    case GgufType::ARRAY: {
      if (depth >= kMaxDepth) error(what, ": arrays nested deeper than ", kMaxDepth, " levels");
      const GgufType elem = read_type(what + " element");
      const uint64_t count = read<uint64_t>(what + " array length");
      v.elem_ = elem;
      // Smallest encoding of one element: check the count against the remaining bytes before
      // allocating anything.
      const size_t es = gguf_type_size(elem);
      const size_t min_elem = es ? es : elem == GgufType::STRING ? 8 : 12;
      if (count > remaining() / min_elem)
        error(what, ": array of ", count, " ", gguf_type_name(elem), " elements needs at least ",
              min_elem, " bytes each but only ", remaining(), " bytes remain at offset ", pos_);
      v.count_ = static_cast<size_t>(count);
      if (es) {
        v.raw_.assign(p_ + pos_, p_ + pos_ + v.count_ * es);
        if (elem == GgufType::BOOL)
          for (size_t i = 0; i < v.count_; ++i)
            if (v.raw_[i] > 1)
              error(what, ": invalid bool value ", unsigned(v.raw_[i]), " at array index ", i);
        pos_ += v.count_ * es;
      } else if (elem == GgufType::STRING) {
        v.strs_.reserve(v.count_);
        for (size_t i = 0; i < v.count_; ++i)
          v.strs_.push_back(read_string(what + "[" + std::to_string(i) + "]"));
      } else {
        v.arrs_.reserve(v.count_);
        for (size_t i = 0; i < v.count_; ++i)
          v.arrs_.push_back(
              read_value(GgufType::ARRAY, what + "[" + std::to_string(i) + "]", depth + 1));
      }
      break;
    }
  }
  return v;
}

void GgufParser::run() {
  // Header.
  if (n_ < 4) error("not a GGUF file: too short for the magic (", n_, " bytes)");
  if (std::memcmp(p_, "GGUF", 4) != 0)
    error("not a GGUF file: bad magic '",
          formats::printable(std::string_view(reinterpret_cast<const char*>(p_), 4)),
          "' (expected 'GGUF')");
  pos_ = 4;
  const uint32_t version = read<uint32_t>("header version");
  if (version != 2 && version != 3) {
    const uint32_t swapped = __builtin_bswap32(version);
    if (swapped == 2 || swapped == 3)
      error("unsupported GGUF version ", version,
            " (a big-endian file; only little-endian is supported)");
    error("unsupported GGUF version ", version, " (supported: 2, 3)");
  }
  f_.version_ = version;
  const uint64_t n_tensors = read<uint64_t>("header tensor count");
  const uint64_t n_kv = read<uint64_t>("header metadata count");
  // Each metadata pair takes at least 13 bytes (key length, type, a one-byte value); each
  // tensor info at least 32 (name length, n_dims, one dim, type, offset).
  if (n_kv > remaining() / 13)
    error("metadata count ", n_kv, " is larger than the ", remaining(),
          " remaining bytes could hold (truncated or corrupt file)");
  if (n_tensors > (remaining() - n_kv * 13) / 32)
    error("tensor count ", n_tensors, " is larger than the ", remaining(),
          " remaining bytes could hold (truncated or corrupt file)");

  // Metadata.
  f_.kv_.reserve(static_cast<size_t>(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string entry = "metadata entry " + std::to_string(i);
    std::string key = read_string(entry + " key");
    if (key.empty()) error(entry, ": empty key");
    if (key.size() > kMaxKeyLength) error(entry, ": key longer than ", kMaxKeyLength, " bytes");
    if (!formats::valid_utf8(key))
      error(entry, ": key '", formats::printable(key), "' is not valid UTF-8");
    const std::string what = "metadata key '" + key + "'";
    if (f_.kv_index_.count(key)) error("duplicate ", what);
    const GgufType type = read_type(what + " value");
    GgufValue v = read_value(type, what, 0);
    f_.kv_index_.emplace(key, f_.kv_.size());
    f_.kv_.emplace_back(std::move(key), std::move(v));
  }

  // Alignment.
  if (const GgufValue* a = f_.find("general.alignment")) {
    if (!gguf_type_is_integer(a->type()))
      error("metadata key 'general.alignment': expected an integer, found ",
            gguf_type_name(a->type()));
    const int64_t al =
        a->type() == GgufType::UINT64 && a->as_uint() > kMaxAlignment ? -1 : a->as_int();
    if (al <= 0 || static_cast<uint64_t>(al) > kMaxAlignment || (al & (al - 1)) != 0)
      error("metadata key 'general.alignment': ", a->to_string(),
            " is not a power of two between 1 and ", kMaxAlignment);
    f_.alignment_ = static_cast<size_t>(al);
  }
  const size_t align = f_.alignment_;

  // Tensor infos.
  f_.infos_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const std::string entry = "tensor info " + std::to_string(i);
    GgufTensorInfo info;
    info.name = read_string(entry + " name");
    if (info.name.empty()) error(entry, ": empty tensor name");
    if (!formats::valid_utf8(info.name))
      error(entry, ": tensor name '", formats::printable(info.name), "' is not valid UTF-8");
    const std::string what = "tensor '" + info.name + "'";
    if (f_.tensor_index_.count(info.name)) error("duplicate ", what);
    const uint32_t n_dims = read<uint32_t>(what + " n_dims");
    if (n_dims == 0 || n_dims > kMaxDims)
      error(what, ": n_dims ", n_dims, " out of range (1..", kMaxDims, ")");
    uint64_t dims[kMaxDims];
    unsigned __int128 numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      dims[d] = read<uint64_t>(what + " dimension " + std::to_string(d));
      if (dims[d] == 0) error(what, ": dimension ", d, " is zero");
      if (dims[d] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        error(what, ": dimension ", d, " = ", dims[d], " is negative or too large");
      numel *= dims[d];
      if (numel > (static_cast<unsigned __int128>(1) << 62))
        error(what, ": element count overflows (dimensions too large)");
    }
    const uint32_t type_id = read<uint32_t>(what + " type");
    const auto dtype = dtype_from_ggml(type_id);
    if (!dtype) error(what, ": unknown tensor type ", type_id);
    info.dtype = *dtype;
    const auto& ti = dtype_info(*dtype);
    if (dims[0] % static_cast<uint64_t>(ti.block_elems) != 0)
      error(what, ": inner dimension ", dims[0], " is not a multiple of the ", ti.name,
            " block size ", ti.block_elems);
    info.offset = read<uint64_t>(what + " offset");
    if (info.offset % align != 0)
      error(what, ": data offset ", info.offset, " is not a multiple of the alignment ", align);
    for (uint32_t d = n_dims; d-- > 0;) info.shape.push_back(static_cast<int64_t>(dims[d]));
    info.nbytes = static_cast<size_t>(numel / static_cast<uint64_t>(ti.block_elems)) *
                  static_cast<size_t>(ti.block_bytes);
    f_.tensor_index_.emplace(info.name, f_.infos_.size());
    f_.infos_.push_back(std::move(info));
  }

  // Data section: starts at the next multiple of the alignment.
  const size_t data_start = (pos_ + align - 1) / align * align;
  f_.data_offset_ = data_start;
  if (f_.infos_.empty()) return;
  if (data_start > n_)
    error("truncated: the data section would start at offset ", data_start, " past the end of the ",
          n_, "-byte file");
  const size_t data_size = n_ - data_start;
  for (const auto& info : f_.infos_) {
    if (info.offset > data_size || info.nbytes > data_size - info.offset)
      error("tensor '", info.name, "': data (offset ", info.offset, ", ", info.nbytes,
            " bytes) extends past the end of the file (data section holds ", data_size,
            " bytes): the file is truncated, e.g. an incomplete download");
  }
  std::vector<size_t> order(f_.infos_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return f_.infos_[a].offset < f_.infos_[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const auto& prev = f_.infos_[order[k - 1]];
    const auto& cur = f_.infos_[order[k]];
    if (cur.offset < prev.offset + prev.nbytes)
      error("tensor '", cur.name, "' (offset ", cur.offset, ") overlaps tensor '", prev.name,
            "' (offset ", prev.offset, ", ", prev.nbytes, " bytes)");
  }
  f_.tensors_.reserve(f_.infos_.size());
  for (const auto& info : f_.infos_) {
    Tensor t;
    t.name = info.name;
    t.dtype = info.dtype;
    t.shape = info.shape;
    t.strides = contiguous_strides(t.shape);
    t.data = const_cast<uint8_t*>(p_ + data_start + info.offset);
    t.nbytes = info.nbytes;
    t.owner = f_.owner_;
    f_.tensors_.push_back(std::move(t));
  }
}

void GgufFile::parse() {
  GgufParser(*this).run();
}

std::shared_ptr<GgufFile> GgufFile::open(const std::string& path) {
  auto m = MappedFile::open(path);
  std::shared_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  f->data_ = m->data();
  f->size_ = m->size();
  f->owner_ = std::shared_ptr<const void>(m, m->data());
  f->parse();
  return f;
}

std::shared_ptr<GgufFile> GgufFile::from_memory(const void* data, size_t size,
                                                const std::string& name) {
  std::shared_ptr<GgufFile> f(new GgufFile());
  f->path_ = name;
  f->owner_ = formats::copy_to_heap(data, size);
  f->data_ = static_cast<const uint8_t*>(f->owner_.get());
  f->size_ = size;
  f->parse();
  return f;
}

bool GgufFile::has_magic(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4];
  const ssize_t n = ::read(fd, buf, 4);
  ::close(fd);
  return n == 4 && std::memcmp(buf, "GGUF", 4) == 0;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufValue& GgufFile::get(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) fail(path_, ": missing metadata key '", key, "'");
  return *v;
}

namespace {
// Runs an accessor, prefixing its errors with the file and key.
template <typename F>
auto typed(const std::string& path, std::string_view key, F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const Error& e) {
    fail(path, ": metadata key '", key, "': ", e.what());
  }
}
}  // namespace

std::string GgufFile::get_string(std::string_view key) const {
  const auto& v = get(key);
  return typed(path_, key, [&] { return v.as_string(); });
}
std::string GgufFile::get_string(std::string_view key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}
int64_t GgufFile::get_int(std::string_view key) const {
  const auto& v = get(key);
  return typed(path_, key, [&] { return v.as_int(); });
}
int64_t GgufFile::get_int(std::string_view key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}
double GgufFile::get_float(std::string_view key) const {
  const auto& v = get(key);
  return typed(path_, key, [&] { return v.as_float(); });
}
double GgufFile::get_float(std::string_view key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}
bool GgufFile::get_bool(std::string_view key) const {
  const auto& v = get(key);
  return typed(path_, key, [&] { return v.as_bool(); });
}
bool GgufFile::get_bool(std::string_view key, bool fallback) const {
  return has(key) ? get_bool(key) : fallback;
}
std::vector<std::string> GgufFile::get_strings(std::string_view key) const {
  const auto& v = get(key);
  return typed(path_, key, [&] { return v.strings(); });
}
std::vector<uint8_t> GgufFile::get_u8_array(std::string_view key) const {
  const auto& v = get(key);
  return typed(path_, key, [&] { return v.u8_vector(); });
}
std::vector<int32_t> GgufFile::get_i32_array(std::string_view key) const {
  const auto& v = get(key);
  return typed(path_, key, [&] { return v.i32_vector(); });
}
std::vector<float> GgufFile::get_f32_array(std::string_view key) const {
  const auto& v = get(key);
  return typed(path_, key, [&] { return v.f32_vector(); });
}
std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const auto& v = get(key);
  return typed(path_, key, [&] { return v.int_vector(); });
}
std::vector<double> GgufFile::get_float_array(std::string_view key) const {
  const auto& v = get(key);
  return typed(path_, key, [&] { return v.float_vector(); });
}

const Tensor* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  if (it == tensor_index_.end() || tensors_.empty()) return nullptr;
  return &tensors_[it->second];
}

const Tensor& GgufFile::tensor(std::string_view name) const {
  const Tensor* t = find_tensor(name);
  if (!t) fail(path_, ": missing tensor '", name, "'");
  return *t;
}

}  // namespace cachet
