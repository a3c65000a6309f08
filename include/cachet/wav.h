// WAV files: RIFF/WAVE reading and writing, channel mix-down and resampling.
//
// Reading accepts PCM (format 1) with 8, 16, 24 or 32 bits per sample, IEEE float (format 3)
// with 32 or 64 bits, and WAVE_FORMAT_EXTENSIBLE (0xFFFE) with either subformat; any number of
// channels and any sample rate. Samples come back as f32 in [-1, 1) for integer PCM (s / 2^(b-1);
// 8-bit is unsigned with offset 128). Writing produces PCM16 or float32 files.
// Every problem (truncation, a missing chunk, an unsupported format, sizes that do not add up)
// is a cachet::Error naming the file and the problem; the samples are the only allocation, at
// most 4 floats per input byte.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cachet {

struct Wav {
  int sample_rate = 24000;
  int channels = 1;
  std::vector<float> samples;  // interleaved: frame f, channel c at samples[f * channels + c]

  int64_t frames() const {
    return channels > 0 ? static_cast<int64_t>(samples.size()) / channels : 0;
  }
  double seconds() const {
    return sample_rate > 0 ? static_cast<double>(frames()) / sample_rate : 0.0;
  }
  // The samples of one channel (0-based).
  std::vector<float> channel(int c) const;
  // Builds a mono Wav from a buffer.
  static Wav mono(std::vector<float> samples, int sample_rate);
};

// What the reader found besides the samples.
struct WavInfo {
  int format = 1;  // 1 = PCM, 3 = IEEE float (the subformat for an extensible file)
  int bits_per_sample = 16;
  bool extensible = false;
};

// Reads a WAV file; errors name path.
Wav read_wav(const std::string& path, WavInfo* info = nullptr);
// Parses a WAV image in memory; errors name `name`.
Wav parse_wav(const void* data, size_t size, const std::string& name, WavInfo* info = nullptr);

enum class WavSampleFormat { Pcm16, Float32 };

// How floats become 16-bit integers when writing PCM16.
enum class Pcm16Rounding {
  Round,     // round(x * 32768) clamped to [-32768, 32767]: exact inverse of the reader
  Truncate,  // trunc(clamp(x, -1, 1) * 32767), as candle's write_pcm_as_wav
};

struct WavWriteOptions {
  WavSampleFormat format = WavSampleFormat::Pcm16;
  Pcm16Rounding rounding = Pcm16Rounding::Round;
  bool extensible = false;  // write a WAVE_FORMAT_EXTENSIBLE header (40-byte fmt chunk)
};

// Encodes a Wav as a WAV image (RIFF header, fmt chunk, data chunk).
std::vector<uint8_t> encode_wav(const Wav& wav, const WavWriteOptions& opts = {});
// Writes a WAV file whole or not at all (cachet::OutputFile: symlinks followed, devices written
// in place).
void write_wav(const std::string& path, const Wav& wav, const WavWriteOptions& opts = {});

// The average of the channels, one value per frame.
std::vector<float> mix_to_mono(const Wav& wav);

// Band-limited resampling (Kaiser-windowed sinc, polyphase for rational ratios) of one channel
// from from_rate to to_rate. The output has ceil(n * to_rate / from_rate) samples; output sample
// j is the band-limited input evaluated at time j * from_rate / to_rate (input samples).
// Content above ~0.45 of the lower rate is attenuated (stop band from 0.5 of it, ~-80 dB).
// Reductions of more than 1024 times are refused.
std::vector<float> resample(const float* x, int64_t n, int from_rate, int to_rate);
inline std::vector<float> resample(const std::vector<float>& x, int from_rate, int to_rate) {
  return resample(x.data(), static_cast<int64_t>(x.size()), from_rate, to_rate);
}
// Every channel of wav resampled to rate (a copy when the rate already matches).
Wav resample(const Wav& wav, int rate);
// Mix-down to mono and resampling to rate, the usual preparation of an input file.
Wav to_mono(const Wav& wav, int rate);

}  // namespace cachet
