// GgufValue: construction, typed access and rendering of GGUF metadata values.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "cachet/error.h"
#include "cachet/gguf.h"

namespace cachet {

std::string_view gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::UINT8:
      return "uint8";
    case GgufType::INT8:
      return "int8";
    case GgufType::UINT16:
      return "uint16";
    case GgufType::INT16:
      return "int16";
    case GgufType::UINT32:
      return "uint32";
    case GgufType::INT32:
      return "int32";
    case GgufType::FLOAT32:
      return "float32";
    case GgufType::BOOL:
      return "bool";
    case GgufType::STRING:
      return "string";
    case GgufType::ARRAY:
      return "array";
    case GgufType::UINT64:
      return "uint64";
    case GgufType::INT64:
      return "int64";
    case GgufType::FLOAT64:
      return "float64";
  }
  return "unknown";
}

size_t gguf_type_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::BOOL:
      return 1;
    case GgufType::UINT16:
    case GgufType::INT16:
      return 2;
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::FLOAT32:
      return 4;
    case GgufType::UINT64:
    case GgufType::INT64:
    case GgufType::FLOAT64:
      return 8;
    default:
      return 0;
  }
}

bool gguf_type_is_integer(GgufType t) {
  switch (t) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::UINT16:
    case GgufType::INT16:
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::UINT64:
    case GgufType::INT64:
      return true;
    default:
      return false;
  }
}

namespace {

bool is_signed(GgufType t) {
  return t == GgufType::INT8 || t == GgufType::INT16 || t == GgufType::INT32 ||
         t == GgufType::INT64;
}
bool is_float(GgufType t) {
  return t == GgufType::FLOAT32 || t == GgufType::FLOAT64;
}

// Reads element i of a fixed-size array (little-endian host) widened to 64 bits.
struct Scalar {
  uint64_t u = 0;  // raw unsigned or sign-extended signed bits
  double f = 0;
};
Scalar load(GgufType t, const uint8_t* p) {
  Scalar s;
  switch (t) {
    case GgufType::UINT8:
    case GgufType::BOOL:
      s.u = p[0];
      break;
    case GgufType::INT8:
      s.u = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int8_t>(p[0])));
      break;
    case GgufType::UINT16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      s.u = v;
      break;
    }
    case GgufType::INT16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      s.u = static_cast<uint64_t>(static_cast<int64_t>(v));
      break;
    }
    case GgufType::UINT32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      s.u = v;
      break;
    }
    case GgufType::INT32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      s.u = static_cast<uint64_t>(static_cast<int64_t>(v));
      break;
    }
    case GgufType::UINT64:
    case GgufType::INT64:
      std::memcpy(&s.u, p, 8);
      break;
    case GgufType::FLOAT32: {
      float v;
      std::memcpy(&v, p, 4);
      s.f = v;
      break;
    }
    case GgufType::FLOAT64:
      std::memcpy(&s.f, p, 8);
      break;
    default:
      break;
  }
  return s;
}

std::string fmt_double(double v, bool single) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, single ? "%.9g" : "%.17g", v);
  return buf;
}

std::string quote(const std::string& s, size_t max_len = 200) {
  std::string out = "\"";
  size_t n = 0;
  for (unsigned char c : s) {
    if (n++ >= max_len) {
      out += "...";
      break;
    }
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

}  // namespace

#define CACHET_GGUF_SCALAR(fn, ctype, gtype, member, conv) \
  GgufValue GgufValue::fn(ctype v) {                       \
    GgufValue r;                                           \
    r.type_ = GgufType::gtype;                             \
    r.num_.member = conv(v);                               \
    return r;                                              \
  }
#define CACHET_U(v) static_cast<uint64_t>(v)
#define CACHET_I(v) static_cast<int64_t>(v)
#define CACHET_F(v) static_cast<double>(v)
CACHET_GGUF_SCALAR(u8, uint8_t, UINT8, u, CACHET_U)
CACHET_GGUF_SCALAR(u16, uint16_t, UINT16, u, CACHET_U)
CACHET_GGUF_SCALAR(u32, uint32_t, UINT32, u, CACHET_U)
CACHET_GGUF_SCALAR(u64, uint64_t, UINT64, u, CACHET_U)
CACHET_GGUF_SCALAR(i8, int8_t, INT8, i, CACHET_I)
CACHET_GGUF_SCALAR(i16, int16_t, INT16, i, CACHET_I)
CACHET_GGUF_SCALAR(i32, int32_t, INT32, i, CACHET_I)
CACHET_GGUF_SCALAR(i64, int64_t, INT64, i, CACHET_I)
CACHET_GGUF_SCALAR(f32, float, FLOAT32, f, CACHET_F)
CACHET_GGUF_SCALAR(f64, double, FLOAT64, f, CACHET_F)
CACHET_GGUF_SCALAR(boolean, bool, BOOL, u, CACHET_U)
#undef CACHET_GGUF_SCALAR
#undef CACHET_U
#undef CACHET_I
#undef CACHET_F

GgufValue GgufValue::string(std::string v) {
  GgufValue r;
  r.type_ = GgufType::STRING;
  r.str_ = std::move(v);
  return r;
}

GgufValue GgufValue::scalar_array(GgufType elem, const void* data, size_t count) {
  const size_t es = gguf_type_size(elem);
  CACHET_CHECK(es != 0, "GGUF array: element type ", gguf_type_name(elem),
               " is not a fixed-size scalar type");
  GgufValue r;
  r.type_ = GgufType::ARRAY;
  r.elem_ = elem;
  r.count_ = count;
  r.raw_.resize(count * es);
  if (count) std::memcpy(r.raw_.data(), data, count * es);
  return r;
}

GgufValue GgufValue::string_array(std::vector<std::string> v) {
  GgufValue r;
  r.type_ = GgufType::ARRAY;
  r.elem_ = GgufType::STRING;
  r.count_ = v.size();
  r.strs_ = std::move(v);
  return r;
}

GgufValue GgufValue::array_array(std::vector<GgufValue> v) {
  for (const auto& e : v)
    CACHET_CHECK(e.is_array(), "GGUF array of arrays: element of type ", gguf_type_name(e.type()),
                 " is not an array");
  GgufValue r;
  r.type_ = GgufType::ARRAY;
  r.elem_ = GgufType::ARRAY;
  r.count_ = v.size();
  r.arrs_ = std::move(v);
  return r;
}

int64_t GgufValue::as_int() const {
  if (type_ == GgufType::BOOL) return static_cast<int64_t>(num_.u);
  CACHET_CHECK(gguf_type_is_integer(type_), "expected an integer, found ", gguf_type_name(type_));
  if (type_ == GgufType::UINT64)
    CACHET_CHECK(num_.u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), "value ",
                 num_.u, " does not fit in int64");
  return is_signed(type_) ? num_.i : static_cast<int64_t>(num_.u);
}

uint64_t GgufValue::as_uint() const {
  CACHET_CHECK(gguf_type_is_integer(type_), "expected an integer, found ", gguf_type_name(type_));
  if (is_signed(type_)) {
    CACHET_CHECK(num_.i >= 0, "expected a non-negative integer, found ", num_.i);
    return static_cast<uint64_t>(num_.i);
  }
  return num_.u;
}

double GgufValue::as_float() const {
  if (is_float(type_)) return num_.f;
  CACHET_CHECK(gguf_type_is_integer(type_), "expected a number, found ", gguf_type_name(type_));
  return is_signed(type_) ? static_cast<double>(num_.i) : static_cast<double>(num_.u);
}

bool GgufValue::as_bool() const {
  CACHET_CHECK(type_ == GgufType::BOOL, "expected a bool, found ", gguf_type_name(type_));
  return num_.u != 0;
}

const std::string& GgufValue::as_string() const {
  CACHET_CHECK(type_ == GgufType::STRING, "expected a string, found ", gguf_type_name(type_));
  return str_;
}

GgufValue GgufValue::at(size_t i) const {
  CACHET_CHECK(is_array(), "expected an array, found ", gguf_type_name(type_));
  CACHET_CHECK(i < count_, "array index ", i, " out of range (", count_, " elements)");
  if (elem_ == GgufType::STRING) return string(strs_[i]);
  if (elem_ == GgufType::ARRAY) return arrs_[i];
  const Scalar s = load(elem_, raw_.data() + i * gguf_type_size(elem_));
  GgufValue r;
  r.type_ = elem_;
  if (is_float(elem_))
    r.num_.f = s.f;
  else
    r.num_.u = s.u;
  return r;
}

const std::vector<std::string>& GgufValue::strings() const {
  CACHET_CHECK(is_array() && elem_ == GgufType::STRING, "expected an array of strings, found ",
               is_array() ? "an array of " : "", gguf_type_name(is_array() ? elem_ : type_));
  return strs_;
}

const std::vector<GgufValue>& GgufValue::arrays() const {
  CACHET_CHECK(is_array() && elem_ == GgufType::ARRAY, "expected an array of arrays, found ",
               is_array() ? "an array of " : "", gguf_type_name(is_array() ? elem_ : type_));
  return arrs_;
}

namespace {
[[noreturn]] void wrong_array(const GgufValue& v, const char* want) {
  if (v.is_array())
    fail("expected an array of ", want, ", found an array of ", gguf_type_name(v.elem_type()));
  fail("expected an array of ", want, ", found ", gguf_type_name(v.type()));
}
}  // namespace

std::vector<uint8_t> GgufValue::u8_vector() const {
  if (!is_array() ||
      (elem_ != GgufType::UINT8 && elem_ != GgufType::INT8 && elem_ != GgufType::BOOL))
    wrong_array(*this, "uint8");
  return raw_;
}

std::vector<int32_t> GgufValue::i32_vector() const {
  if (!is_array() || !gguf_type_is_integer(elem_) || elem_ == GgufType::UINT64 ||
      elem_ == GgufType::INT64)
    wrong_array(*this, "int32");
  std::vector<int32_t> out(count_);
  if (elem_ == GgufType::INT32) {
    if (count_) std::memcpy(out.data(), raw_.data(), count_ * 4);
    return out;
  }
  const size_t es = gguf_type_size(elem_);
  for (size_t i = 0; i < count_; ++i) {
    const Scalar s = load(elem_, raw_.data() + i * es);
    if (elem_ == GgufType::UINT32)
      CACHET_CHECK(s.u <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max()),
                   "array element ", i, " = ", s.u, " does not fit in int32");
    out[i] = static_cast<int32_t>(static_cast<int64_t>(s.u));
  }
  return out;
}

std::vector<float> GgufValue::f32_vector() const {
  if (!is_array() || !is_float(elem_)) wrong_array(*this, "float32");
  std::vector<float> out(count_);
  if (elem_ == GgufType::FLOAT32) {
    if (count_) std::memcpy(out.data(), raw_.data(), count_ * 4);
  } else {
    for (size_t i = 0; i < count_; ++i)
      out[i] = static_cast<float>(load(elem_, raw_.data() + i * 8).f);
  }
  return out;
}

std::vector<int64_t> GgufValue::int_vector() const {
  if (!is_array() || !gguf_type_is_integer(elem_)) wrong_array(*this, "integers");
  std::vector<int64_t> out(count_);
  const size_t es = gguf_type_size(elem_);
  for (size_t i = 0; i < count_; ++i) {
    const Scalar s = load(elem_, raw_.data() + i * es);
    if (elem_ == GgufType::UINT64)
      CACHET_CHECK(s.u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                   "array element ", i, " = ", s.u, " does not fit in int64");
    out[i] = static_cast<int64_t>(s.u);
  }
  return out;
}

std::vector<double> GgufValue::float_vector() const {
  if (!is_array() || !(is_float(elem_) || gguf_type_is_integer(elem_)))
    wrong_array(*this, "numbers");
  std::vector<double> out(count_);
  const size_t es = gguf_type_size(elem_);
  for (size_t i = 0; i < count_; ++i) {
    const Scalar s = load(elem_, raw_.data() + i * es);
    if (is_float(elem_))
      out[i] = s.f;
    else if (is_signed(elem_))
      out[i] = static_cast<double>(static_cast<int64_t>(s.u));
    else
      out[i] = static_cast<double>(s.u);
  }
  return out;
}

std::string GgufValue::to_string(size_t max_items) const {
  switch (type_) {
    case GgufType::STRING:
      return quote(str_);
    case GgufType::BOOL:
      return num_.u ? "true" : "false";
    case GgufType::FLOAT32:
      return fmt_double(num_.f, true);
    case GgufType::FLOAT64:
      return fmt_double(num_.f, false);
    case GgufType::ARRAY: {
      std::string out;
      const bool summarise = count_ > max_items;
      if (summarise) {
        out += "array<";
        out += gguf_type_name(elem_);
        out += ">[" + std::to_string(count_) + "] ";
      }
      out += '[';
      const size_t shown = summarise ? std::min<size_t>(max_items, 8) : count_;
      for (size_t i = 0; i < shown; ++i) {
        if (i) out += ", ";
        out += at(i).to_string(max_items);
      }
      if (summarise) out += ", ...";
      out += ']';
      return out;
    }
    default:
      if (is_signed(type_)) return std::to_string(num_.i);
      return std::to_string(num_.u);
  }
}

}  // namespace cachet
