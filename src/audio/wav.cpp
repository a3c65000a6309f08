// WAV (RIFF/WAVE) reading and writing. The parser works on a byte image and checks every size
// against what is left before reading, so truncated or hostile files end in a cachet::Error.
// This file depends on the core layer only (error.h), so that the WAV fuzz target can compile
// it together with the parser libraries.
#include "cachet/wav.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <system_error>

#include "cachet/error.h"
#include "cachet/file.h"

namespace cachet {
namespace {

constexpr int kFormatPcm = 1;
constexpr int kFormatFloat = 3;
constexpr int kFormatExtensible = 0xFFFE;
constexpr int kMaxChannels = 1024;
// The tail of the KSDATAFORMAT_SUBTYPE_* GUIDs after the 16-bit format code (bytes 2..15).
constexpr uint8_t kGuidTail[14] = {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80,
                                   0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71};

uint16_t rd16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
uint32_t rd32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// A chunk id for messages: printable ASCII as is, other bytes as \xNN.
std::string fourcc(const uint8_t* p) {
  std::string s;
  for (int i = 0; i < 4; ++i) {
    if (p[i] >= 0x20 && p[i] < 0x7F) {
      s += static_cast<char>(p[i]);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", p[i]);
      s += buf;
    }
  }
  return s;
}

struct Fmt {
  int format = 0;  // after resolving the extensible subformat
  int channels = 0;
  uint32_t rate = 0;
  int block_align = 0;
  int bits = 0;
  bool extensible = false;
};

Fmt parse_fmt(const uint8_t* p, uint32_t size, const std::string& name) {
  CACHET_CHECK(size >= 16, name, ": 'fmt ' chunk of ", size, " bytes is too short (need 16)");
  Fmt f;
  f.format = rd16(p);
  f.channels = rd16(p + 2);
  f.rate = rd32(p + 4);
  f.block_align = rd16(p + 12);
  f.bits = rd16(p + 14);
  if (f.format == kFormatExtensible) {
    CACHET_CHECK(size >= 40, name, ": WAVE_FORMAT_EXTENSIBLE 'fmt ' chunk of ", size,
                 " bytes is too short (need 40)");
    const int cb = rd16(p + 16);
    CACHET_CHECK(cb >= 22, name, ": WAVE_FORMAT_EXTENSIBLE extension size ", cb,
                 " is too short (need 22)");
    const int valid_bits = rd16(p + 18);
    const uint8_t* guid = p + 24;
    CACHET_CHECK(std::memcmp(guid + 2, kGuidTail, sizeof(kGuidTail)) == 0, name,
                 ": WAVE_FORMAT_EXTENSIBLE subformat is not a standard PCM or IEEE float GUID");
    f.format = rd16(guid);
    f.extensible = true;
    CACHET_CHECK(valid_bits == 0 || valid_bits <= f.bits, name, ": ", valid_bits,
                 " valid bits per sample exceed the container's ", f.bits);
  }
  CACHET_CHECK(f.format == kFormatPcm || f.format == kFormatFloat, name,
               ": unsupported WAV sample format ", f.format,
               " (only PCM = 1 and IEEE float = 3, plain or WAVE_FORMAT_EXTENSIBLE)");
  CACHET_CHECK(f.channels >= 1 && f.channels <= kMaxChannels, name, ": invalid channel count ",
               f.channels);
  CACHET_CHECK(f.rate >= 1 && f.rate <= 10'000'000, name, ": invalid sample rate ", f.rate);
  if (f.format == kFormatPcm)
    CACHET_CHECK(f.bits == 8 || f.bits == 16 || f.bits == 24 || f.bits == 32, name,
                 ": unsupported PCM sample size of ", f.bits, " bits (8, 16, 24 or 32)");
  else
    CACHET_CHECK(f.bits == 32 || f.bits == 64, name, ": unsupported float sample size of ", f.bits,
                 " bits (32 or 64)");
  CACHET_CHECK(f.block_align == f.channels * (f.bits / 8), name, ": block align ", f.block_align,
               " does not match ", f.channels, " channels of ", f.bits, " bits");
  return f;
}

float sample_at(const uint8_t* p, const Fmt& f) {
  if (f.format == kFormatFloat) {
    if (f.bits == 32) {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    double v;
    std::memcpy(&v, p, 8);
    return static_cast<float>(v);
  }
  switch (f.bits) {
    case 8:
      return (static_cast<int>(p[0]) - 128) * (1.0f / 128.0f);
    case 16:
      return static_cast<float>(static_cast<int16_t>(rd16(p))) * (1.0f / 32768.0f);
    case 24: {
      int32_t v = static_cast<int32_t>(p[0] | (p[1] << 8) | (p[2] << 16));
      if (v & 0x800000) v -= 0x1000000;
      return static_cast<float>(v) * (1.0f / 8388608.0f);
    }
    default:
      return static_cast<float>(static_cast<double>(static_cast<int32_t>(rd32(p))) / 2147483648.0);
  }
}

void put16(std::vector<uint8_t>& b, uint32_t v) {
  b.push_back(static_cast<uint8_t>(v));
  b.push_back(static_cast<uint8_t>(v >> 8));
}
void put32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void puts4(std::vector<uint8_t>& b, const char* s) {
  b.insert(b.end(), s, s + 4);
}

int16_t to_i16(float x, Pcm16Rounding r) {
  if (!(x == x)) return 0;  // NaN
  if (r == Pcm16Rounding::Truncate) {
    const float c = std::clamp(x, -1.0f, 1.0f);
    return static_cast<int16_t>(c * 32767.0f);
  }
  const float v = std::nearbyint(x * 32768.0f);
  return static_cast<int16_t>(std::clamp(v, -32768.0f, 32767.0f));
}

}  // namespace

std::vector<float> Wav::channel(int c) const {
  CACHET_CHECK(c >= 0 && c < channels, "WAV: channel ", c, " out of range (", channels,
               " channels)");
  std::vector<float> out(static_cast<size_t>(frames()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = samples[i * channels + c];
  return out;
}

Wav Wav::mono(std::vector<float> samples, int sample_rate) {
  Wav w;
  w.sample_rate = sample_rate;
  w.channels = 1;
  w.samples = std::move(samples);
  return w;
}

Wav parse_wav(const void* data, size_t size, const std::string& name, WavInfo* info) {
  const uint8_t* b = static_cast<const uint8_t*>(data);
  CACHET_CHECK(size >= 12, name, ": not a WAV file (", size, " bytes, too short for a header)");
  CACHET_CHECK(std::memcmp(b, "RIFF", 4) == 0 && std::memcmp(b + 8, "WAVE", 4) == 0, name,
               ": not a WAV file (no RIFF/WAVE header)");
  size_t pos = 12;
  bool have_fmt = false;
  Fmt fmt;
  const uint8_t* pcm = nullptr;
  size_t pcm_bytes = 0;
  while (pos + 8 <= size) {
    const uint8_t* h = b + pos;
    const uint32_t csize = rd32(h + 4);
    const size_t avail = size - pos - 8;
    if (std::memcmp(h, "fmt ", 4) == 0) {
      CACHET_CHECK(!have_fmt, name, ": more than one 'fmt ' chunk");
      CACHET_CHECK(csize <= avail, name, ": truncated 'fmt ' chunk (", csize, " bytes declared, ",
                   avail, " present)");
      fmt = parse_fmt(h + 8, csize, name);
      have_fmt = true;
    } else if (std::memcmp(h, "data", 4) == 0) {
      CACHET_CHECK(have_fmt, name, ": 'data' chunk before the 'fmt ' chunk");
      size_t n = csize;
      if (csize == 0xFFFFFFFFu) n = avail;  // streamed file of unknown length
      CACHET_CHECK(n <= avail, name, ": truncated: the 'data' chunk declares ", csize,
                   " bytes but only ", avail, " follow");
      pcm = h + 8;
      pcm_bytes = n;
      break;
    }
    CACHET_CHECK(csize <= avail, name, ": truncated '", fourcc(h), "' chunk (", csize,
                 " bytes declared, ", avail, " present)");
    pos += 8 + static_cast<size_t>(csize) + (csize & 1u);
  }
  CACHET_CHECK(have_fmt, name, ": no 'fmt ' chunk");
  CACHET_CHECK(pcm != nullptr, name, ": no 'data' chunk");

  Wav w;
  w.sample_rate = static_cast<int>(fmt.rate);
  w.channels = fmt.channels;
  const size_t bytes = static_cast<size_t>(fmt.bits / 8);
  const size_t frames = pcm_bytes / static_cast<size_t>(fmt.block_align);  // drops a partial frame
  const size_t count = frames * static_cast<size_t>(fmt.channels);
  w.samples.resize(count);
  for (size_t i = 0; i < count; ++i) {
    const float v = sample_at(pcm + i * bytes, fmt);
    CACHET_CHECK(std::isfinite(v), name, ": sample ", i, " is not a finite number");
    w.samples[i] = v;
  }
  if (info) {
    info->format = fmt.format;
    info->bits_per_sample = fmt.bits;
    info->extensible = fmt.extensible;
  }
  return w;
}

Wav read_wav(const std::string& path, WavInfo* info) {
  std::error_code ec;
  CACHET_CHECK(!std::filesystem::is_directory(path, ec), path, ": is a directory, not a WAV file");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  CACHET_CHECK(in, path, ": cannot open file");
  const std::streamoff end = in.tellg();
  CACHET_CHECK(end >= 0, path, ": cannot determine the file size");
  std::vector<uint8_t> bytes(static_cast<size_t>(end));
  in.seekg(0);
  if (!bytes.empty())
    CACHET_CHECK(in.read(reinterpret_cast<char*>(bytes.data()), end), path, ": read error");
  return parse_wav(bytes.data(), bytes.size(), path, info);
}

std::vector<uint8_t> encode_wav(const Wav& wav, const WavWriteOptions& opts) {
  CACHET_CHECK(wav.channels >= 1 && wav.channels <= kMaxChannels, "WAV: invalid channel count ",
               wav.channels);
  CACHET_CHECK(wav.sample_rate >= 1, "WAV: invalid sample rate ", wav.sample_rate);
  CACHET_CHECK(wav.samples.size() % static_cast<size_t>(wav.channels) == 0,
               "WAV: ", wav.samples.size(), " samples are not a whole number of ", wav.channels,
               "-channel frames");
  const bool flt = opts.format == WavSampleFormat::Float32;
  const uint32_t bits = flt ? 32 : 16;
  const uint32_t align = static_cast<uint32_t>(wav.channels) * bits / 8;
  const uint64_t data_bytes = static_cast<uint64_t>(wav.samples.size()) * (bits / 8);
  const uint32_t fmt_size = opts.extensible ? 40 : (flt ? 18 : 16);
  const bool fact = flt || opts.extensible;
  const uint64_t riff = 4 + (8 + fmt_size) + (fact ? 12 : 0) + 8 + data_bytes + (data_bytes & 1);
  CACHET_CHECK(riff <= 0xFFFFFFFFull, "WAV: ", wav.samples.size(),
               " samples do not fit in a WAV file (4 GiB limit)");
  std::vector<uint8_t> b;
  b.reserve(static_cast<size_t>(riff + 8));
  puts4(b, "RIFF");
  put32(b, static_cast<uint32_t>(riff));
  puts4(b, "WAVE");
  puts4(b, "fmt ");
  put32(b, fmt_size);
  put16(b, opts.extensible ? kFormatExtensible : (flt ? kFormatFloat : kFormatPcm));
  put16(b, static_cast<uint32_t>(wav.channels));
  put32(b, static_cast<uint32_t>(wav.sample_rate));
  put32(b, static_cast<uint32_t>(wav.sample_rate) * align);
  put16(b, align);
  put16(b, bits);
  if (opts.extensible) {
    put16(b, 22);
    put16(b, bits);
    put32(b, wav.channels == 1 ? 0x4u : wav.channels == 2 ? 0x3u : 0u);  // speaker mask
    put16(b, flt ? kFormatFloat : kFormatPcm);
    b.insert(b.end(), kGuidTail, kGuidTail + sizeof(kGuidTail));
  } else if (flt) {
    put16(b, 0);
  }
  if (fact) {
    puts4(b, "fact");
    put32(b, 4);
    put32(b, static_cast<uint32_t>(wav.frames()));
  }
  puts4(b, "data");
  put32(b, static_cast<uint32_t>(data_bytes));
  if (flt) {
    for (float v : wav.samples) {
      uint32_t u;
      std::memcpy(&u, &v, 4);
      put32(b, u);
    }
  } else {
    for (float v : wav.samples) put16(b, static_cast<uint16_t>(to_i16(v, opts.rounding)));
  }
  if (data_bytes & 1) b.push_back(0);
  return b;
}

void write_wav(const std::string& path, const Wav& wav, const WavWriteOptions& opts) {
  const std::vector<uint8_t> bytes = encode_wav(wav, opts);
  write_file(path, bytes.data(), bytes.size());  // whole or not at all
}

std::vector<float> mix_to_mono(const Wav& wav) {
  CACHET_CHECK(wav.channels >= 1, "WAV: invalid channel count ", wav.channels);
  if (wav.channels == 1) return wav.samples;
  const int64_t n = wav.frames();
  std::vector<float> out(static_cast<size_t>(n));
  const float inv = 1.0f / static_cast<float>(wav.channels);
  for (int64_t i = 0; i < n; ++i) {
    float s = 0;
    for (int c = 0; c < wav.channels; ++c)
      s += wav.samples[static_cast<size_t>(i * wav.channels + c)];
    out[static_cast<size_t>(i)] = s * inv;
  }
  return out;
}

}  // namespace cachet
