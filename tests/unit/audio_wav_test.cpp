// WAV reading / writing (every format, bad files) and the resampler (sine accuracy).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "cachet/error.h"
#include "cachet/wav.h"

namespace {

using cachet::Wav;
using cachet::WavInfo;
using cachet::WavSampleFormat;
using cachet::WavWriteOptions;

Wav noise(int channels, int frames, int rate, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Wav w;
  w.channels = channels;
  w.sample_rate = rate;
  w.samples.resize(static_cast<size_t>(channels) * frames);
  for (auto& s : w.samples) s = u(rng);
  return w;
}

void put16(std::vector<uint8_t>& b, uint32_t v) {
  b.push_back(static_cast<uint8_t>(v));
  b.push_back(static_cast<uint8_t>(v >> 8));
}
void put32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// A minimal WAV image with a 16-byte fmt chunk and the given data bytes.
std::vector<uint8_t> make_wav(int format, int channels, int rate, int bits,
                              const std::vector<uint8_t>& data) {
  std::vector<uint8_t> b = {'R', 'I', 'F', 'F'};
  put32(b, static_cast<uint32_t>(4 + 24 + 8 + data.size()));
  b.insert(b.end(), {'W', 'A', 'V', 'E', 'f', 'm', 't', ' '});
  put32(b, 16);
  put16(b, static_cast<uint32_t>(format));
  put16(b, static_cast<uint32_t>(channels));
  put32(b, static_cast<uint32_t>(rate));
  put32(b, static_cast<uint32_t>(rate * channels * bits / 8));
  put16(b, static_cast<uint32_t>(channels * bits / 8));
  put16(b, static_cast<uint32_t>(bits));
  b.insert(b.end(), {'d', 'a', 't', 'a'});
  put32(b, static_cast<uint32_t>(data.size()));
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

std::string error_of(const std::vector<uint8_t>& bytes) {
  try {
    cachet::parse_wav(bytes.data(), bytes.size(), "bad.wav");
  } catch (const cachet::Error& e) {
    return e.what();
  }
  return "";
}

TEST(WavTest, RoundTripEveryFormat) {
  for (int channels : {1, 2}) {
    for (int rate : {8000, 24000, 44100, 48000}) {
      for (bool extensible : {false, true}) {
        for (auto fmt : {WavSampleFormat::Pcm16, WavSampleFormat::Float32}) {
          Wav w = noise(channels, 1001, rate, static_cast<uint32_t>(rate + channels));
          if (fmt == WavSampleFormat::Pcm16)  // exactly representable values
            for (auto& s : w.samples) s = std::round(s * 32767.0f) / 32768.0f;
          WavWriteOptions o;
          o.format = fmt;
          o.extensible = extensible;
          const auto bytes = cachet::encode_wav(w, o);
          WavInfo info;
          const Wav r = cachet::parse_wav(bytes.data(), bytes.size(), "mem.wav", &info);
          EXPECT_EQ(r.channels, channels);
          EXPECT_EQ(r.sample_rate, rate);
          EXPECT_EQ(info.extensible, extensible);
          EXPECT_EQ(info.format, fmt == WavSampleFormat::Pcm16 ? 1 : 3);
          EXPECT_EQ(info.bits_per_sample, fmt == WavSampleFormat::Pcm16 ? 16 : 32);
          ASSERT_EQ(r.samples.size(), w.samples.size());
          for (size_t i = 0; i < w.samples.size(); ++i) ASSERT_EQ(r.samples[i], w.samples[i]) << i;
        }
      }
    }
  }
}

TEST(WavTest, FileRoundTripAndChannels) {
  const auto path = (std::filesystem::temp_directory_path() /
                     ("cachet_wav_test_" + std::to_string(::getpid()) + ".wav"))
                        .string();
  Wav w = noise(2, 500, 22050, 5);
  WavWriteOptions o;
  o.format = WavSampleFormat::Float32;
  cachet::write_wav(path, w, o);
  const Wav r = cachet::read_wav(path);
  std::filesystem::remove(path);
  ASSERT_EQ(r.samples, w.samples);
  EXPECT_EQ(r.frames(), 500);
  const auto left = r.channel(0), right = r.channel(1);
  const auto mono = cachet::mix_to_mono(r);
  for (int i = 0; i < 500; ++i) {
    EXPECT_EQ(left[i], w.samples[2 * i]);
    EXPECT_EQ(right[i], w.samples[2 * i + 1]);
    EXPECT_FLOAT_EQ(mono[i], 0.5f * (left[i] + right[i]));
  }
  EXPECT_THROW(cachet::read_wav(path), cachet::Error);  // gone
}

TEST(WavTest, Pcm16Conversions) {
  Wav w = Wav::mono({0.0f, 1.0f, -1.0f, 0.5f, 2.0f, -2.0f, 0.99999f, NAN}, 24000);
  WavWriteOptions o;  // Round
  auto b = cachet::encode_wav(w, o);
  auto r = cachet::parse_wav(b.data(), b.size(), "x");
  const std::vector<float> round = {0,  32767 / 32768.0f, -1, 0.5f, 32767 / 32768.0f,
                                    -1, 32767 / 32768.0f, 0};
  EXPECT_EQ(r.samples, round);
  o.rounding = cachet::Pcm16Rounding::Truncate;  // candle: trunc(clamp(x) * 32767)
  b = cachet::encode_wav(w, o);
  r = cachet::parse_wav(b.data(), b.size(), "x");
  const std::vector<float> trunc = {0,
                                    32767 / 32768.0f,
                                    -32767 / 32768.0f,
                                    16383 / 32768.0f,
                                    32767 / 32768.0f,
                                    -32767 / 32768.0f,
                                    32766 / 32768.0f,
                                    0};
  EXPECT_EQ(r.samples, trunc);
  // The header is the canonical 44 bytes for PCM16 mono.
  EXPECT_EQ(b.size(), 44u + 2 * w.samples.size());
}

TEST(WavTest, OtherPcmDepthsAndFloat64) {
  // 8-bit unsigned, 24-bit and 32-bit signed, float64.
  auto r8 = make_wav(1, 1, 8000, 8, {0, 128, 255});
  auto w8 = cachet::parse_wav(r8.data(), r8.size(), "8.wav");
  EXPECT_EQ(w8.samples, (std::vector<float>{-1.0f, 0.0f, 127 / 128.0f}));
  auto r24 = make_wav(1, 1, 8000, 24, {0x00, 0x00, 0x80, 0xFF, 0xFF, 0x7F});
  auto w24 = cachet::parse_wav(r24.data(), r24.size(), "24.wav");
  EXPECT_EQ(w24.samples, (std::vector<float>{-1.0f, 8388607 / 8388608.0f}));
  auto r32 = make_wav(1, 1, 8000, 32, {0x00, 0x00, 0x00, 0x40});
  auto w32 = cachet::parse_wav(r32.data(), r32.size(), "32.wav");
  EXPECT_EQ(w32.samples, (std::vector<float>{0.5f}));
  std::vector<uint8_t> d(8);
  const double v = -0.25;
  std::memcpy(d.data(), &v, 8);
  auto r64 = make_wav(3, 1, 8000, 64, d);
  auto w64 = cachet::parse_wav(r64.data(), r64.size(), "64.wav");
  EXPECT_EQ(w64.samples, (std::vector<float>{-0.25f}));
}

TEST(WavTest, SkipsOtherChunksAndPartialFrames) {
  Wav w = noise(2, 10, 16000, 9);
  auto b = cachet::encode_wav(w);
  // Insert a LIST chunk of odd size (padded) after the fmt chunk.
  std::vector<uint8_t> list = {'L', 'I', 'S', 'T', 3, 0, 0, 0, 'a', 'b', 'c', 0};
  b.insert(b.begin() + 36, list.begin(), list.end());
  auto r = cachet::parse_wav(b.data(), b.size(), "list.wav");
  EXPECT_EQ(r.frames(), 10);
  // A data chunk with a trailing partial frame drops it.
  auto p = make_wav(1, 2, 8000, 16, {1, 0, 2, 0, 3});
  auto rp = cachet::parse_wav(p.data(), p.size(), "partial.wav");
  EXPECT_EQ(rp.frames(), 1);
}

TEST(WavTest, BadFilesGiveClearErrors) {
  const auto good = cachet::encode_wav(noise(1, 100, 24000, 1));
  EXPECT_NE(error_of({}).find("bad.wav"), std::string::npos);
  EXPECT_NE(error_of({'R', 'I', 'F', 'F', 0, 0, 0, 0, 'A', 'V', 'I', ' '}).find("RIFF/WAVE"),
            std::string::npos);
  // Truncated data chunk.
  std::vector<uint8_t> t(good.begin(), good.end() - 10);
  EXPECT_NE(error_of(t).find("truncated"), std::string::npos);
  // Truncated inside the fmt chunk.
  std::vector<uint8_t> tf(good.begin(), good.begin() + 30);
  EXPECT_NE(error_of(tf).find("fmt"), std::string::npos);
  // No data chunk at all.
  std::vector<uint8_t> nd(good.begin(), good.begin() + 36);
  EXPECT_NE(error_of(nd).find("no 'data' chunk"), std::string::npos);
  // Unsupported codecs and sizes.
  EXPECT_NE(error_of(make_wav(2, 1, 8000, 4, {0, 0})).find("unsupported WAV sample format 2"),
            std::string::npos);
  EXPECT_NE(error_of(make_wav(1, 1, 8000, 12, {0, 0})).find("12 bits"), std::string::npos);
  EXPECT_NE(error_of(make_wav(3, 1, 8000, 16, {0, 0})).find("float"), std::string::npos);
  EXPECT_NE(error_of(make_wav(1, 0, 8000, 16, {0, 0})).find("channel count"), std::string::npos);
  EXPECT_NE(error_of(make_wav(1, 1, 0, 16, {0, 0})).find("sample rate"), std::string::npos);
  // Block align that does not match.
  auto ba = make_wav(1, 2, 8000, 16, {0, 0, 0, 0});
  ba[32] = 2;
  EXPECT_NE(error_of(ba).find("block align"), std::string::npos);
  // A chunk claiming 4 GiB.
  auto big = good;
  big[40] = big[41] = big[42] = 0xFF;
  big[43] = 0x7F;
  EXPECT_NE(error_of(big).find("truncated"), std::string::npos);
  // Non-finite float samples.
  std::vector<uint8_t> nan(4);
  const float n = NAN;
  std::memcpy(nan.data(), &n, 4);
  EXPECT_NE(error_of(make_wav(3, 1, 8000, 32, nan)).find("finite"), std::string::npos);
  // Every truncation of a valid file either parses or throws cachet::Error.
  for (size_t len = 0; len < good.size(); ++len) {
    try {
      cachet::parse_wav(good.data(), len, "cut.wav");
    } catch (const cachet::Error&) {
    }
  }
}

double sine_error(int from, int to, double freq, int n) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(0.8 * std::sin(2 * M_PI * freq * i / from));
  const auto y = cachet::resample(x, from, to);
  EXPECT_EQ(static_cast<int64_t>(y.size()), (static_cast<int64_t>(n) * to + from - 1) / from);
  // Away from the edges (the filter spans ~48 lower-rate samples each side).
  const int margin = 200 * std::max(1, to / std::min(from, to));
  double err = 0;
  for (int j = margin; j + margin < static_cast<int>(y.size()); ++j)
    err = std::max(err, std::fabs(y[j] - 0.8 * std::sin(2 * M_PI * freq * j / to)));
  return err;
}

TEST(ResampleTest, SineAccuracy) {
  EXPECT_LT(sine_error(44100, 24000, 1000.0, 44100), 2e-3);
  EXPECT_LT(sine_error(24000, 48000, 3000.0, 24000), 2e-3);
  EXPECT_LT(sine_error(16000, 24000, 440.0, 16000), 2e-3);
  EXPECT_LT(sine_error(48000, 16000, 5000.0, 48000), 2e-3);
  EXPECT_LT(sine_error(22050, 24000, 7000.0, 22050), 2e-3);
  EXPECT_LT(sine_error(24001, 24000, 1000.0, 24001), 2e-3);  // co-prime rates (no table)
}

TEST(ResampleTest, RemovesContentAboveTheNewNyquist) {
  // 15 kHz at 48 kHz cannot exist at 16 kHz (Nyquist 8 kHz): it must vanish, not alias.
  const int n = 48000;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(std::sin(2 * M_PI * 15000.0 * i / 48000));
  const auto y = cachet::resample(x, 48000, 16000);
  double peak = 0;
  for (size_t j = 200; j + 200 < y.size(); ++j) peak = std::max(peak, std::fabs(double(y[j])));
  EXPECT_LT(peak, 1e-3);
}

TEST(ResampleTest, IdentityDcAndWav) {
  std::vector<float> x = {0.1f, 0.2f, -0.3f};
  EXPECT_EQ(cachet::resample(x, 24000, 24000), x);
  std::vector<float> dc(4800, 0.5f);
  const auto y = cachet::resample(dc, 48000, 24000);
  ASSERT_EQ(y.size(), 2400u);
  for (size_t j = 100; j + 100 < y.size(); ++j) ASSERT_NEAR(y[j], 0.5f, 1e-5);
  Wav st = noise(2, 4410, 44100, 3);
  Wav r = cachet::resample(st, 24000);
  EXPECT_EQ(r.channels, 2);
  EXPECT_EQ(r.sample_rate, 24000);
  EXPECT_EQ(r.frames(), 2400);
  const auto left = cachet::resample(st.channel(0), 44100, 24000);
  EXPECT_EQ(r.channel(0), left);
  Wav m = cachet::to_mono(st, 16000);
  EXPECT_EQ(m.channels, 1);
  EXPECT_EQ(m.frames(), 1600);
  EXPECT_THROW(cachet::resample(x, 0, 24000), cachet::Error);
  EXPECT_THROW(cachet::resample(x, 10'000'000, 8000), cachet::Error);  // no 10 GB filter table
}

}  // namespace
