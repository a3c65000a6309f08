// GGUF (versions 2 and 3): reader over a read-only mapping and a streaming writer.
//
// Layout: "GGUF", uint32 version, uint64 tensor count, uint64 metadata count, the metadata
// key/value pairs, the tensor infos, padding to general.alignment (default 32), then the tensor
// data. All integers little-endian; strings are a uint64 length followed by UTF-8 bytes.
// GGUF lists dimensions innermost-first; the Tensors exposed here are outermost-first.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "cachet/dtype.h"
#include "cachet/tensor.h"

namespace cachet {

class MappedFile;

// Metadata value type ids as stored in the file.
enum class GgufType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

// "uint8", "string", "array", ...; "unknown" for other values.
std::string_view gguf_type_name(GgufType t);
// Size in bytes of a fixed-size value type (0 for STRING, ARRAY and unknown types).
size_t gguf_type_size(GgufType t);
bool gguf_type_is_integer(GgufType t);

// One metadata value: a scalar, a string, or an array (of scalars, strings or arrays).
// Arrays of fixed-size scalars are stored as one contiguous little-endian block, so large
// arrays (token scores, token types) are cheap to hold and to copy out.
class GgufValue {
 public:
  GgufValue() = default;

  // Constructors for each type.
  static GgufValue u8(uint8_t v);
  static GgufValue i8(int8_t v);
  static GgufValue u16(uint16_t v);
  static GgufValue i16(int16_t v);
  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue u64(uint64_t v);
  static GgufValue i64(int64_t v);
  static GgufValue f32(float v);
  static GgufValue f64(double v);
  static GgufValue boolean(bool v);
  static GgufValue string(std::string v);
  // An array of fixed-size scalars of elem type (not STRING/ARRAY): count elements read from
  // data (host byte order == little-endian).
  static GgufValue scalar_array(GgufType elem, const void* data, size_t count);
  template <typename T>
  static GgufValue array_of(const std::vector<T>& v);  // T: uint8_t..double, see below
  static GgufValue string_array(std::vector<std::string> v);
  // An array whose elements are arrays (all elements must have type ARRAY).
  static GgufValue array_array(std::vector<GgufValue> v);

  GgufType type() const { return type_; }
  bool is_array() const { return type_ == GgufType::ARRAY; }

  // Scalars. as_int() accepts every integer type (a uint64 above INT64_MAX is an error) and
  // bool; as_float() accepts float32, float64 and integers. Wrong types throw cachet::Error
  // naming the actual type (callers prefix the file and key).
  int64_t as_int() const;
  uint64_t as_uint() const;  // integer types; negative values are an error
  double as_float() const;
  bool as_bool() const;
  const std::string& as_string() const;

  // Arrays.
  GgufType elem_type() const { return elem_; }  // element type of an array
  size_t size() const { return count_; }        // element count of an array
  // Contiguous elements of a fixed-size scalar array (elem_type() not STRING/ARRAY).
  const void* raw_data() const { return raw_.data(); }
  // Element i of any array as a standalone value.
  GgufValue at(size_t i) const;
  const std::vector<std::string>& strings() const;  // elem STRING
  const std::vector<GgufValue>& arrays() const;     // elem ARRAY
  // Copies of scalar arrays. Each accepts exactly the element types named; the wider ones
  // convert: int_vector() any integer type, float_vector() float32/float64/integers.
  std::vector<uint8_t> u8_vector() const;   // uint8 / int8 / bool
  std::vector<int32_t> i32_vector() const;  // int32 / uint32 (values must fit) / smaller ints
  std::vector<float> f32_vector() const;    // float32 (float64 is narrowed)
  std::vector<int64_t> int_vector() const;
  std::vector<double> float_vector() const;

  // Human-readable rendering; arrays longer than max_items show the type, length and first
  // elements.
  std::string to_string(size_t max_items = 16) const;

 private:
  friend class GgufParser;
  friend class GgufWriter;
  GgufType type_ = GgufType::UINT8;
  union {
    uint64_t u;
    int64_t i;
    double f;
  } num_{0};
  std::string str_;
  GgufType elem_ = GgufType::UINT8;
  size_t count_ = 0;
  std::vector<uint8_t> raw_;       // fixed-size elements
  std::vector<std::string> strs_;  // string elements
  std::vector<GgufValue> arrs_;    // array elements
};

struct GgufTensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // outermost first (the file's dims reversed)
  uint64_t offset = 0;         // relative to the data section
  size_t nbytes = 0;
};

class GgufFile {
 public:
  // Maps and parses path; every problem is a cachet::Error naming the path and the problem.
  static std::shared_ptr<GgufFile> open(const std::string& path);
  // Parses a copy of an in-memory image; name is used in error messages.
  static std::shared_ptr<GgufFile> from_memory(const void* data, size_t size,
                                               const std::string& name);
  // Quick check of the first four bytes of a file ("GGUF"); false if unreadable.
  static bool has_magic(const std::string& path);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }  // file offset of the data section
  size_t file_size() const { return size_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;
  // Throws "PATH: missing metadata key 'KEY'".
  const GgufValue& get(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters: errors name the file, the key, and the expected and actual types.
  std::string get_string(std::string_view key) const;
  std::string get_string(std::string_view key, const std::string& fallback) const;
  int64_t get_int(std::string_view key) const;
  int64_t get_int(std::string_view key, int64_t fallback) const;
  double get_float(std::string_view key) const;
  double get_float(std::string_view key, double fallback) const;
  bool get_bool(std::string_view key) const;
  bool get_bool(std::string_view key, bool fallback) const;
  std::vector<std::string> get_strings(std::string_view key) const;
  std::vector<uint8_t> get_u8_array(std::string_view key) const;
  std::vector<int32_t> get_i32_array(std::string_view key) const;
  std::vector<float> get_f32_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;
  std::vector<double> get_float_array(std::string_view key) const;

  // Tensors in file order: views into the mapping (owner keeps it alive).
  const std::vector<GgufTensorInfo>& tensor_infos() const { return infos_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }
  const Tensor* find_tensor(std::string_view name) const;
  // Throws "PATH: missing tensor 'NAME'".
  const Tensor& tensor(std::string_view name) const;

 private:
  friend class GgufParser;
  GgufFile() = default;
  void parse();

  std::string path_;
  std::shared_ptr<const void> owner_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GgufTensorInfo> infos_;
  std::vector<Tensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// Builds a GGUF v3 file. Tensors may be given as bytes, as a Tensor (kept alive until written)
// or as a callback that streams the bytes, so large files never need to be held in memory.
class GgufWriter {
 public:
  // Receives consecutive chunks of a tensor's data.
  using Sink = std::function<void(const void* data, size_t size)>;
  // Produces exactly the tensor's byte size through the sink (checked).
  using Producer = std::function<void(const Sink& sink)>;

  explicit GgufWriter(size_t alignment = 32);

  // Alignment of the data section and of every tensor (a power of two). When not 32, the
  // general.alignment key is written automatically unless added explicitly.
  void set_alignment(size_t alignment);
  size_t alignment() const { return alignment_; }

  // Metadata; duplicate keys are an error.
  void add(const std::string& key, GgufValue value);
  void add_string(const std::string& key, std::string v) {
    add(key, GgufValue::string(std::move(v)));
  }
  void add_u32(const std::string& key, uint32_t v) { add(key, GgufValue::u32(v)); }
  void add_i32(const std::string& key, int32_t v) { add(key, GgufValue::i32(v)); }
  void add_u64(const std::string& key, uint64_t v) { add(key, GgufValue::u64(v)); }
  void add_i64(const std::string& key, int64_t v) { add(key, GgufValue::i64(v)); }
  void add_f32(const std::string& key, float v) { add(key, GgufValue::f32(v)); }
  void add_f64(const std::string& key, double v) { add(key, GgufValue::f64(v)); }
  void add_bool(const std::string& key, bool v) { add(key, GgufValue::boolean(v)); }
  bool has(const std::string& key) const;

  // Tensors, shape outermost-first (row-major). Duplicate names are an error; data size must be
  // tensor_bytes(dtype, shape).
  void add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                  const void* data, size_t size);             // copies the bytes
  void add_tensor(const std::string& name, const Tensor& t);  // borrows t's memory (keeps owner)
  void add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                  Producer producer);

  // Writes the file atomically (a temporary beside it, then rename).
  void write(const std::string& path) const;
  // The whole file in memory (small files: tests, seeds).
  std::vector<uint8_t> to_bytes() const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    size_t nbytes;
    uint64_t offset;
    Producer producer;
  };
  void write_to(const Sink& out) const;
  size_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Entry> tensors_;
  uint64_t data_size_ = 0;
};

template <typename T>
GgufValue GgufValue::array_of(const std::vector<T>& v) {
  GgufType t;
  if constexpr (std::is_same_v<T, uint8_t>)
    t = GgufType::UINT8;
  else if constexpr (std::is_same_v<T, int8_t>)
    t = GgufType::INT8;
  else if constexpr (std::is_same_v<T, uint16_t>)
    t = GgufType::UINT16;
  else if constexpr (std::is_same_v<T, int16_t>)
    t = GgufType::INT16;
  else if constexpr (std::is_same_v<T, uint32_t>)
    t = GgufType::UINT32;
  else if constexpr (std::is_same_v<T, int32_t>)
    t = GgufType::INT32;
  else if constexpr (std::is_same_v<T, uint64_t>)
    t = GgufType::UINT64;
  else if constexpr (std::is_same_v<T, int64_t>)
    t = GgufType::INT64;
  else if constexpr (std::is_same_v<T, float>)
    t = GgufType::FLOAT32;
  else if constexpr (std::is_same_v<T, double>)
    t = GgufType::FLOAT64;
  else
    static_assert(sizeof(T) == 0, "unsupported GGUF array element type");
  return scalar_array(t, v.data(), v.size());
}

}  // namespace cachet
