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

using ByteSink = std::function<void(const void* data, size_t size)>;
using ByteWriter = std::function<void(const ByteSink& sink)>;

// Runs body with a sink into path, written whole or not at all (cachet::OutputFile); errors that
// do not name the path already are prefixed with it.
void write_file_atomically(const std::string& path, const ByteWriter& body);
// Everything body writes, in memory.
std::vector<uint8_t> collect_bytes(const ByteWriter& body);

}  // namespace cachet::formats
