// GGUF v3 writer.
#include <cstring>

#include "cachet/error.h"
#include "cachet/gguf.h"
#include "formats/io_util.h"

namespace cachet {

namespace {

bool power_of_two(size_t a) {
  return a != 0 && (a & (a - 1)) == 0;
}

struct Out {
  const GgufWriter::Sink& sink;
  uint64_t written = 0;
  void bytes(const void* p, size_t n) {
    if (n == 0) return;
    sink(p, n);
    written += n;
  }
  template <typename T>
  void pod(T v) {
    bytes(&v, sizeof v);
  }
  void str(const std::string& s) {
    pod<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void zeros(size_t n) {
    static const uint8_t z[256] = {};
    while (n) {
      const size_t k = n < sizeof z ? n : sizeof z;
      bytes(z, k);
      n -= k;
    }
  }
};

}  // namespace

GgufWriter::GgufWriter(size_t alignment) : alignment_(32) {
  set_alignment(alignment);
}

void GgufWriter::set_alignment(size_t alignment) {
  CACHET_CHECK(power_of_two(alignment), "GGUF writer: alignment ", alignment,
               " is not a power of two");
  CACHET_CHECK(tensors_.empty(), "GGUF writer: set the alignment before adding tensors");
  alignment_ = alignment;
}

bool GgufWriter::has(const std::string& key) const {
  for (const auto& kv : kv_)
    if (kv.first == key) return true;
  return false;
}

void GgufWriter::add(const std::string& key, GgufValue value) {
  CACHET_CHECK(!key.empty(), "GGUF writer: empty metadata key");
  CACHET_CHECK(formats::valid_utf8(key), "GGUF writer: metadata key '", formats::printable(key),
               "' is not valid UTF-8");
  CACHET_CHECK(!has(key), "GGUF writer: duplicate metadata key '", key, "'");
  if (key == "general.alignment") {
    CACHET_CHECK(gguf_type_is_integer(value.type()) && power_of_two(value.as_uint()),
                 "GGUF writer: general.alignment must be a power-of-two integer");
    CACHET_CHECK(value.as_uint() == alignment_, "GGUF writer: general.alignment ", value.as_uint(),
                 " differs from the writer's alignment ", alignment_, " (use set_alignment)");
  }
  kv_.emplace_back(key, std::move(value));
}

void GgufWriter::add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            const void* data, size_t size) {
  auto buf = std::make_shared<std::vector<uint8_t>>(static_cast<const uint8_t*>(data),
                                                    static_cast<const uint8_t*>(data) + size);
  const size_t expect = tensor_bytes(dtype, shape);
  CACHET_CHECK(size == expect, "GGUF writer: tensor '", name, "': ", size,
               " bytes given, shape needs ", expect);
  add_tensor(name, dtype, std::move(shape),
             [buf](const Sink& sink) { sink(buf->data(), buf->size()); });
}

void GgufWriter::add_tensor(const std::string& name, const Tensor& t) {
  CACHET_CHECK(t.contiguous(), "GGUF writer: tensor '", name, "' is not contiguous");
  const size_t n = tensor_bytes(t.dtype, t.shape);
  const void* p = t.data;
  auto owner = t.owner;
  add_tensor(name, t.dtype, t.shape, [p, n, owner](const Sink& sink) { sink(p, n); });
}

void GgufWriter::add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            Producer producer) {
  CACHET_CHECK(!name.empty(), "GGUF writer: empty tensor name");
  CACHET_CHECK(formats::valid_utf8(name), "GGUF writer: tensor name '", formats::printable(name),
               "' is not valid UTF-8");
  for (const auto& e : tensors_)
    CACHET_CHECK(e.name != name, "GGUF writer: duplicate tensor '", name, "'");
  CACHET_CHECK(dtype_info(dtype).in_gguf, "GGUF writer: tensor '", name, "': type ",
               dtype_name(dtype), " cannot be stored in GGUF");
  CACHET_CHECK(!shape.empty() && shape.size() <= 4, "GGUF writer: tensor '", name,
               "': ", shape.size(), " dimensions (GGUF holds 1 to 4)");
  for (int64_t d : shape)
    CACHET_CHECK(d > 0, "GGUF writer: tensor '", name, "': dimension ", d, " is not positive");
  size_t nbytes;
  try {
    nbytes = tensor_bytes(dtype, shape);
  } catch (const Error& e) {
    fail("GGUF writer: tensor '", name, "': ", e.what());
  }
  const uint64_t offset = (data_size_ + alignment_ - 1) / alignment_ * alignment_;
  tensors_.push_back(Entry{name, dtype, std::move(shape), nbytes, offset, std::move(producer)});
  data_size_ = offset + nbytes;
}

namespace {
void write_value(Out& o, const GgufValue& v, bool with_type) {
  if (with_type) o.pod<uint32_t>(static_cast<uint32_t>(v.type()));
  switch (v.type()) {
    case GgufType::UINT8:
      o.pod<uint8_t>(static_cast<uint8_t>(v.as_uint()));
      break;
    case GgufType::INT8:
      o.pod<int8_t>(static_cast<int8_t>(v.as_int()));
      break;
    case GgufType::UINT16:
      o.pod<uint16_t>(static_cast<uint16_t>(v.as_uint()));
      break;
    case GgufType::INT16:
      o.pod<int16_t>(static_cast<int16_t>(v.as_int()));
      break;
    case GgufType::UINT32:
      o.pod<uint32_t>(static_cast<uint32_t>(v.as_uint()));
      break;
    case GgufType::INT32:
      o.pod<int32_t>(static_cast<int32_t>(v.as_int()));
      break;
    case GgufType::UINT64:
      o.pod<uint64_t>(v.as_uint());
      break;
    case GgufType::INT64:
      o.pod<int64_t>(v.as_int());
      break;
    case GgufType::FLOAT32:
      o.pod<float>(static_cast<float>(v.as_float()));
      break;
    case GgufType::FLOAT64:
      o.pod<double>(v.as_float());
      break;
    case GgufType::BOOL:
      o.pod<uint8_t>(v.as_bool() ? 1 : 0);
      break;
    case GgufType::STRING:
      o.str(v.as_string());
      break;
    case GgufType::ARRAY: {
      o.pod<uint32_t>(static_cast<uint32_t>(v.elem_type()));
      o.pod<uint64_t>(v.size());
      if (v.elem_type() == GgufType::STRING) {
        for (const auto& s : v.strings()) o.str(s);
      } else if (v.elem_type() == GgufType::ARRAY) {
        for (const auto& a : v.arrays()) write_value(o, a, false);
      } else {
        o.bytes(v.raw_data(), v.size() * gguf_type_size(v.elem_type()));
      }
      break;
    }
  }
}
}  // namespace

void GgufWriter::write_to(const Sink& sink) const {
  Out o{sink};
  const bool auto_align = alignment_ != 32 && !has("general.alignment");
  o.bytes("GGUF", 4);
  o.pod<uint32_t>(3);
  o.pod<uint64_t>(tensors_.size());
  o.pod<uint64_t>(kv_.size() + (auto_align ? 1 : 0));
  for (const auto& [key, value] : kv_) {
    o.str(key);
    write_value(o, value, true);
  }
  if (auto_align) {
    o.str("general.alignment");
    write_value(o, GgufValue::u32(static_cast<uint32_t>(alignment_)), true);
  }
  for (const auto& e : tensors_) {
    o.str(e.name);
    o.pod<uint32_t>(static_cast<uint32_t>(e.shape.size()));
    for (size_t d = e.shape.size(); d-- > 0;) o.pod<uint64_t>(static_cast<uint64_t>(e.shape[d]));
    o.pod<uint32_t>(static_cast<uint32_t>(e.dtype));
    o.pod<uint64_t>(e.offset);
  }
  if (tensors_.empty()) return;
  o.zeros(static_cast<size_t>((alignment_ - o.written % alignment_) % alignment_));
  const uint64_t data_start = o.written;
  for (const auto& e : tensors_) {
    o.zeros(static_cast<size_t>(data_start + e.offset - o.written));
    uint64_t produced = 0;
    const Sink counting = [&](const void* p, size_t n) {
      produced += n;
      CACHET_CHECK(produced <= e.nbytes, "GGUF writer: tensor '", e.name,
                   "': producer wrote more than the ", e.nbytes, " bytes of its shape");
      o.bytes(p, n);
    };
    e.producer(counting);
    CACHET_CHECK(produced == e.nbytes, "GGUF writer: tensor '", e.name, "': producer wrote ",
                 produced, " bytes, the shape needs ", e.nbytes);
  }
}

void GgufWriter::write(const std::string& path) const {
  formats::write_file_atomically(path, [this](const Sink& sink) { write_to(sink); });
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  return formats::collect_bytes([this](const Sink& sink) { write_to(sink); });
}

}  // namespace cachet
