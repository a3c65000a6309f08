// The state file container: writing (atomic, streamed with its checksum) and validated reading.
#include "cachet/state_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <utility>

#include "cachet/error.h"
#include "cachet/file.h"
#include "cachet/mmap.h"

namespace cachet {

namespace {

constexpr uint64_t kFnvPrime = 0x100000001b3ull;
constexpr size_t kPayloadAlign = 16;

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
  return buf;
}

uint64_t load_le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

size_t pad_to(size_t offset) {
  return (kPayloadAlign - offset % kPayloadAlign) % kPayloadAlign;
}

// Bytes of one element (one block for block formats) of t; throws for an unknown type.
uint32_t elem_size_of(DType t) {
  return static_cast<uint32_t>(dtype_info(t).block_bytes);
}

}  // namespace

// ---------------------------------------------------------------- checksum

void StateChecksum::mix(uint64_t word) {
  h_ ^= word;
  h_ *= kFnvPrime;
}

void StateChecksum::update(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  total_ += bytes;
  if (npending_ > 0) {
    while (bytes > 0 && npending_ < 8) {
      pending_[npending_++] = *p++;
      --bytes;
    }
    if (npending_ < 8) return;
    mix(load_le(pending_, 8));
    npending_ = 0;
  }
  for (; bytes >= 8; bytes -= 8, p += 8) mix(load_le(p, 8));
  for (size_t i = 0; i < bytes; ++i) pending_[npending_++] = p[i];
}

uint64_t StateChecksum::finish() const {
  StateChecksum c = *this;
  if (c.npending_ > 0) {
    for (size_t i = c.npending_; i < 8; ++i) c.pending_[i] = 0;
    c.mix(load_le(c.pending_, 8));
  }
  c.mix(total_);
  return c.h_;
}

uint64_t state_checksum(const void* data, size_t bytes) {
  StateChecksum c;
  c.update(data, bytes);
  return c.finish();
}

// ---------------------------------------------------------------- writer

namespace {

// Buffered writes to a file descriptor, feeding the checksum and counting bytes.
class Sink {
 public:
  explicit Sink(OutputFile& out) : out_(out) { buf_.reserve(kBuf); }

  void put(const void* data, size_t bytes) {
    const auto* p = static_cast<const uint8_t*>(data);
    sum_.update(p, bytes);
    offset_ += bytes;
    if (bytes >= kBuf) {
      flush();
      raw_write(p, bytes);
      return;
    }
    if (buf_.size() + bytes > kBuf) flush();
    buf_.insert(buf_.end(), p, p + bytes);
  }
  void put_u32(uint32_t v) { put_le(v, 4); }
  void put_u64(uint64_t v) { put_le(v, 8); }
  void put_str(const std::string& s) {
    put_u32(static_cast<uint32_t>(s.size()));
    put(s.data(), s.size());
  }
  void put_zeros(size_t n) {
    static const uint8_t zeros[kPayloadAlign] = {};
    put(zeros, n);
  }
  // The checksum goes out unhashed.
  void put_checksum() {
    uint8_t b[8];
    const uint64_t v = sum_.finish();
    for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
    flush();
    raw_write(b, 8);
  }
  size_t offset() const { return offset_; }
  void flush() {
    if (!buf_.empty()) raw_write(buf_.data(), buf_.size());
    buf_.clear();
  }

 private:
  static constexpr size_t kBuf = 1 << 20;

  void put_le(uint64_t v, int n) {
    uint8_t b[8];
    for (int i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
    put(b, static_cast<size_t>(n));
  }
  void raw_write(const uint8_t* p, size_t n) { out_.write(p, n); }

  OutputFile& out_;
  std::vector<uint8_t> buf_;
  StateChecksum sum_;
  size_t offset_ = 0;
};

}  // namespace

StateWriter::StateWriter(std::string arch, uint64_t fingerprint)
    : arch_(std::move(arch)), fingerprint_(fingerprint) {
  CACHET_CHECK(arch_.size() <= kStateMaxNameBytes, "state file: architecture name of ",
               arch_.size(), " bytes is longer than ", kStateMaxNameBytes);
}

void StateWriter::add(std::string name, const void* data, size_t bytes, DType dtype, bool copy) {
  CACHET_CHECK(!name.empty() && name.size() <= kStateMaxNameBytes,
               "state file: invalid section name '", name, "' (1 to ", kStateMaxNameBytes,
               " bytes)");
  for (const auto& s : sections_)
    CACHET_CHECK(s.name != name, "state file: section '", name, "' added twice");
  const uint32_t es = elem_size_of(dtype);
  CACHET_CHECK(es > 0 && bytes % es == 0, "state file: section '", name, "' has ", bytes,
               " bytes, not a whole number of ", dtype_name(dtype), " elements");
  CACHET_CHECK(bytes == 0 || data != nullptr, "state file: section '", name, "' has no data");
  Section s{std::move(name), dtype, es, static_cast<const uint8_t*>(data), bytes, nullptr};
  if (copy && bytes > 0) {
    s.owned = std::make_shared<std::vector<uint8_t>>(s.data, s.data + bytes);
    s.data = s.owned->data();
  }
  sections_.push_back(std::move(s));
}

void StateWriter::add_section(std::string name, const void* data, size_t bytes, DType dtype) {
  add(std::move(name), data, bytes, dtype, true);
}

void StateWriter::add_section_ref(std::string name, const void* data, size_t bytes, DType dtype) {
  add(std::move(name), data, bytes, dtype, false);
}

void StateWriter::add_f32(std::string name, const float* data, size_t count) {
  add(std::move(name), data, count * sizeof(float), DType::F32, true);
}

void StateWriter::add_u64(std::string name, uint64_t value) {
  uint8_t b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(value >> (8 * i));
  add(std::move(name), b, 8, DType::U64, true);
}

void StateWriter::add_i64(std::string name, int64_t value) {
  uint8_t b[8];
  const auto u = static_cast<uint64_t>(value);
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(u >> (8 * i));
  add(std::move(name), b, 8, DType::I64, true);
}

void StateWriter::write(const std::string& path) const {
  try {
    OutputFile file(path);
    Sink out(file);
    out.put(kStateMagic, sizeof kStateMagic);
    out.put_u32(kStateFormatVersion);
    out.put_u32(0);
    out.put_str(arch_);
    out.put_u64(fingerprint_);
    out.put_u32(static_cast<uint32_t>(sections_.size()));
    for (const auto& s : sections_) {
      out.put_str(s.name);
      out.put_u32(static_cast<uint32_t>(s.dtype));
      out.put_u32(s.elem_size);
      out.put_u64(s.bytes);
      out.put_zeros(pad_to(out.offset()));
      out.put(s.data, s.bytes);
    }
    out.put_checksum();
    out.flush();
    file.commit();
  } catch (const Error& e) {
    fail("state file ", e.what());
  }
}

// ---------------------------------------------------------------- reader

namespace {

class Cursor {
 public:
  Cursor(const uint8_t* p, size_t size, const std::string& path)
      : p_(p), size_(size), path_(path) {}

  // Throws unless n more bytes are there.
  void need(uint64_t n, const std::string& what) const {
    if (n > size_ - pos_)
      fail("state file ", path_, " is truncated or corrupt: ", what, " needs ", n,
           " bytes at offset ", pos_, " but the file has ", size_, " bytes");
  }
  uint32_t u32(const char* what) {
    need(4, what);
    const auto v = static_cast<uint32_t>(load_le(p_ + pos_, 4));
    pos_ += 4;
    return v;
  }
  uint64_t u64(const char* what) {
    need(8, what);
    const uint64_t v = load_le(p_ + pos_, 8);
    pos_ += 8;
    return v;
  }
  std::string str(uint32_t len, const std::string& what) {
    need(len, what);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return s;
  }
  void skip(uint64_t n, const std::string& what) {
    need(n, what);
    pos_ += static_cast<size_t>(n);
  }
  size_t pos() const { return pos_; }

 private:
  const uint8_t* p_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& path_;
};

}  // namespace

StateReader StateReader::open(const std::string& path) {
  StateReader r;
  r.path_ = path;
  try {
    r.file_ = MappedFile::open(path);
  } catch (const Error& e) {
    fail("state file ", e.what());
  }
  const uint8_t* p = r.file_->data();
  const size_t size = r.file_->size();
  if (size < sizeof kStateMagic)
    fail("state file ", path, " is truncated or not a cachet state file (", size, " bytes)");
  if (std::memcmp(p, kStateMagic, sizeof kStateMagic) != 0)
    fail("state file ", path, " is not a cachet state file (bad magic)");

  Cursor c(p, size, r.path_);
  c.skip(sizeof kStateMagic, "magic");
  r.version_ = c.u32("format version");
  if (r.version_ == 0) fail("state file ", path, " has invalid format version 0");
  if (r.version_ > kStateFormatVersion)
    fail("state file ", path, " has format version ", r.version_,
         ", newer than this build supports (", kStateFormatVersion, ")");
  const uint32_t reserved = c.u32("reserved header field");
  if (reserved != 0) fail("state file ", path, " is corrupt: reserved header field is ", reserved);
  const uint32_t arch_len = c.u32("architecture name length");
  if (arch_len > kStateMaxNameBytes)
    fail("state file ", path, " is corrupt: architecture name length ", arch_len, " exceeds ",
         kStateMaxNameBytes);
  r.arch_ = c.str(arch_len, "architecture name");
  r.fingerprint_ = c.u64("model fingerprint");
  const uint32_t count = c.u32("section count");

  for (uint32_t i = 0; i < count; ++i) {
    const std::string idx = "section #" + std::to_string(i);
    const uint32_t name_len = c.u32((idx + " name length").c_str());
    if (name_len == 0 || name_len > kStateMaxNameBytes)
      fail("state file ", path, " is corrupt: ", idx, " has name length ", name_len);
    std::string name = c.str(name_len, idx + " name");
    const std::string what = "section '" + name + "'";
    const uint32_t type = c.u32((what + " element type").c_str());
    const uint32_t elem = c.u32((what + " element size").c_str());
    const uint64_t bytes = c.u64((what + " length").c_str());
    DType dtype = static_cast<DType>(type);
    uint32_t expect_elem = 0;
    try {
      expect_elem = elem_size_of(dtype);
    } catch (const Error&) {
      fail("state file ", path, " is corrupt: ", what, " has unknown element type ", type);
    }
    if (elem != expect_elem)
      fail("state file ", path, " is corrupt: ", what, " has element size ", elem, " for type ",
           dtype_name(dtype), " (expected ", expect_elem, ")");
    c.skip(pad_to(c.pos()), what + " padding");
    c.need(bytes, what + " payload");
    if (bytes % elem != 0)
      fail("state file ", path, " is corrupt: ", what, " has ", bytes,
           " bytes, not a whole number of ", dtype_name(dtype), " elements");
    const size_t offset = c.pos();
    c.skip(bytes, what + " payload");
    if (r.sections_.count(name)) fail("state file ", path, " is corrupt: ", what, " appears twice");
    r.sections_.emplace(std::move(name), Entry{dtype, elem, offset, static_cast<size_t>(bytes)});
  }
  const size_t body = c.pos();
  const uint64_t stored = c.u64("checksum");
  if (c.pos() != size)
    fail("state file ", path, " is corrupt: ", size - c.pos(),
         " unexpected bytes after the checksum");
  const uint64_t computed = state_checksum(p, body);
  if (stored != computed)
    fail("state file ", path, " is damaged: checksum mismatch (stored ", hex64(stored),
         ", computed ", hex64(computed), ")");
  return r;
}

void StateReader::expect_model(std::string_view arch, uint64_t fingerprint) const {
  if (arch != arch_)
    fail("state file ", path_, " was saved from a different model (architecture '", arch_,
         "', this model '", arch, "')");
  if (fingerprint != fingerprint_)
    fail("state file ", path_, " was saved from a different model (fingerprint ",
         hex64(fingerprint_), ", this model ", hex64(fingerprint),
         "; states saved by builds before fingerprints covered the weights' values do not load "
         "either)");
}

bool StateReader::has(std::string_view name) const {
  return sections_.find(name) != sections_.end();
}

std::vector<std::string> StateReader::section_names() const {
  std::vector<std::string> v;
  for (const auto& [k, e] : sections_) v.push_back(k);
  return v;
}

const StateReader::Entry& StateReader::entry(std::string_view name) const {
  auto it = sections_.find(name);
  if (it == sections_.end()) fail("state file ", path_, ": missing section '", name, "'");
  return it->second;
}

DType StateReader::section_dtype(std::string_view name) const {
  return entry(name).dtype;
}

std::span<const uint8_t> StateReader::section(std::string_view name) const {
  const Entry& e = entry(name);
  return {file_->data() + e.offset, e.bytes};
}

std::span<const uint8_t> StateReader::section_exact(std::string_view name, size_t bytes) const {
  const Entry& e = entry(name);
  if (e.bytes != bytes)
    fail("state file ", path_, ": section '", name, "' has ", e.bytes, " bytes, expected ", bytes);
  return {file_->data() + e.offset, e.bytes};
}

void StateReader::read_exact(std::string_view name, void* dst, size_t bytes) const {
  const auto s = section_exact(name, bytes);
  if (bytes > 0) std::memcpy(dst, s.data(), bytes);
}

std::span<const float> StateReader::f32(std::string_view name, size_t count) const {
  const Entry& e = entry(name);
  if (e.dtype != DType::F32)
    fail("state file ", path_, ": section '", name, "' holds ", dtype_name(e.dtype),
         ", expected F32");
  const auto s = section_exact(name, count * sizeof(float));
  return {reinterpret_cast<const float*>(s.data()), count};
}

uint64_t StateReader::u64(std::string_view name) const {
  const Entry& e = entry(name);
  if (e.dtype != DType::U64 || e.bytes != 8)
    fail("state file ", path_, ": section '", name, "' is not a U64 scalar (", dtype_name(e.dtype),
         ", ", e.bytes, " bytes)");
  return load_le(file_->data() + e.offset, 8);
}

int64_t StateReader::i64(std::string_view name) const {
  const Entry& e = entry(name);
  if (e.dtype != DType::I64 || e.bytes != 8)
    fail("state file ", path_, ": section '", name, "' is not an I64 scalar (", dtype_name(e.dtype),
         ", ", e.bytes, " bytes)");
  return static_cast<int64_t>(load_le(file_->data() + e.offset, 8));
}

}  // namespace cachet
