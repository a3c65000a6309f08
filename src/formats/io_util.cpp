#include "formats/io_util.h"

#include <cstring>

#include "cachet/error.h"
#include "cachet/file.h"
#include "cachet/tensor.h"

namespace cachet::formats {

bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (n - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      const unsigned cc = p[i + k];
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return false;
    if (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return false;
    i += len;
  }
  return true;
}

std::string printable(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  const size_t limit = 80;
  for (size_t i = 0; i < s.size(); ++i) {
    if (out.size() >= limit) {
      out += "...";
      break;
    }
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::shared_ptr<const void> copy_to_heap(const void* data, size_t size) {
  auto buf = aligned_buffer(size == 0 ? 1 : size);
  if (size) std::memcpy(buf.get(), data, size);
  return buf;
}

void write_file_atomically(const std::string& path, const ByteWriter& body) {
  OutputFile f(path);
  try {
    body([&](const void* p, size_t n) { f.write(p, n); });
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.rfind(path, 0) == 0) throw;
    fail(path, ": ", msg);
  }
  f.commit();
}

std::vector<uint8_t> collect_bytes(const ByteWriter& body) {
  std::vector<uint8_t> out;
  body([&](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  });
  return out;
}

}  // namespace cachet::formats
