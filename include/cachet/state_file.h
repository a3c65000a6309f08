// Saved decoding states: a versioned, checksummed container of named byte sections. The model
// code decides what goes in; this file only fixes the format and validates it on load.
//
// Layout (version 1), all integers little-endian:
//   char[8]  magic "CACHETST"
//   u32      format version (kStateFormatVersion)
//   u32      reserved, 0
//   u32      architecture name length A (<= kStateMaxNameBytes), then A bytes (no terminator)
//   u64      model fingerprint
//   u32      section count N
//   N times:
//     u32    name length L (1..kStateMaxNameBytes), then L bytes
//     u32    element type (cachet::DType value)
//     u32    element size in bytes (one block for block formats)
//     u64    payload length B (a multiple of the element size)
//            zero padding up to the next multiple of 16 from the start of the file
//     B      payload bytes (the host's little-endian representation)
//   u64      checksum of every byte before it (state_checksum below)
//
// Payloads start 16-byte aligned within the file, and a StateReader maps the file, so a
// section's bytes may be read in place as floats or 64-bit integers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cachet/dtype.h"

namespace cachet {

class MappedFile;

inline constexpr char kStateMagic[8] = {'C', 'A', 'C', 'H', 'E', 'T', 'S', 'T'};
inline constexpr uint32_t kStateFormatVersion = 1;
inline constexpr uint32_t kStateMaxNameBytes = 4096;

// 64-bit FNV-1a taken over 8-byte little-endian words (the last partial word zero-padded),
// then over the total byte count as one more word. A change to any single word always
// changes the result.
class StateChecksum {
 public:
  void update(const void* data, size_t bytes);
  uint64_t finish() const;

 private:
  void mix(uint64_t word);
  uint64_t h_ = 0xcbf29ce484222325ull;
  uint64_t total_ = 0;
  uint8_t pending_[8] = {};
  size_t npending_ = 0;
};
uint64_t state_checksum(const void* data, size_t bytes);

class StateWriter {
 public:
  StateWriter(std::string arch, uint64_t fingerprint);

  // A section holding a copy of bytes. Names are unique and non-empty; dtype records what the
  // bytes are (U8 for opaque data). Throws on a duplicate or invalid name.
  void add_section(std::string name, const void* data, size_t bytes, DType dtype = DType::U8);
  // The same without a copy: data must stay valid and unchanged until write() returns.
  void add_section_ref(std::string name, const void* data, size_t bytes, DType dtype = DType::U8);
  void add_f32(std::string name, const float* data, size_t count);
  void add_u64(std::string name, uint64_t value);
  void add_i64(std::string name, int64_t value);

  // Writes the file atomically: to a temporary file beside path, synced, then renamed over
  // path. On failure path is left as it was and the error names the file.
  void write(const std::string& path) const;

 private:
  struct Section {
    std::string name;
    DType dtype;
    uint32_t elem_size;
    const uint8_t* data;
    size_t bytes;
    std::shared_ptr<std::vector<uint8_t>> owned;
  };
  void add(std::string name, const void* data, size_t bytes, DType dtype, bool copy);

  std::string arch_;
  uint64_t fingerprint_;
  std::vector<Section> sections_;
};

class StateReader {
 public:
  // Maps and validates path: magic, version, every length against the file size, element
  // types, unique names and the checksum. Every error names the file and the problem.
  static StateReader open(const std::string& path);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  const std::string& arch() const { return arch_; }
  uint64_t fingerprint() const { return fingerprint_; }

  // Throws "state file X was saved from a different model (...)" when arch or fingerprint
  // differ from the model that is loading it.
  void expect_model(std::string_view arch, uint64_t fingerprint) const;

  bool has(std::string_view name) const;
  std::vector<std::string> section_names() const;
  DType section_dtype(std::string_view name) const;
  // The section's bytes (valid while this reader or a copy of it lives); throws naming the
  // file and the section when it is missing.
  std::span<const uint8_t> section(std::string_view name) const;
  // The same, also throwing unless the section has exactly `bytes` bytes.
  std::span<const uint8_t> section_exact(std::string_view name, size_t bytes) const;
  // Copies a section of exactly `bytes` bytes into dst.
  void read_exact(std::string_view name, void* dst, size_t bytes) const;
  // F32 sections of exactly count values.
  std::span<const float> f32(std::string_view name, size_t count) const;
  uint64_t u64(std::string_view name) const;
  int64_t i64(std::string_view name) const;

 private:
  struct Entry {
    DType dtype;
    uint32_t elem_size;
    size_t offset;
    size_t bytes;
  };
  const Entry& entry(std::string_view name) const;

  std::string path_;
  std::shared_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  std::string arch_;
  uint64_t fingerprint_ = 0;
  std::map<std::string, Entry, std::less<>> sections_;
};

}  // namespace cachet
