// Helpers shared by the format readers and writers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cachet::formats {

// Whether s is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool valid_utf8(std::string_view s);

// A printable rendering of a possibly binary name for error messages (at most ~80 bytes,
// non-printable bytes as \xNN).
std::string printable(std::string_view s);

// A 64-byte aligned heap copy of size bytes (at least one byte is allocated).
std::shared_ptr<const void> copy_to_heap(const void* data, size_t size);

// Writes a file atomically: bytes go to a temporary file in the same directory, which commit()
// flushes, syncs and renames over path. Without commit() the temporary is removed.
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void write(const void* data, size_t size);
  void commit();

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  bool done_ = false;
};

using ByteSink = std::function<void(const void* data, size_t size)>;
using ByteWriter = std::function<void(const ByteSink& sink)>;

// Runs body with a sink into path, written atomically (AtomicFile); errors that do not name the
// path already are prefixed with it.
void write_file_atomically(const std::string& path, const ByteWriter& body);
// Everything body writes, in memory.
std::vector<uint8_t> collect_bytes(const ByteWriter& body);

}  // namespace cachet::formats
