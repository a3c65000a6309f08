// BS.1770 loudness as candle computes it, normalisation and PCM16 conversion.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cachet/audio_ops.h"

namespace {

std::vector<float> sine(double amp, double freq, int rate, double seconds) {
  std::vector<float> x(static_cast<size_t>(seconds * rate));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(amp * std::sin(2 * M_PI * freq * static_cast<double>(i) / rate));
  return x;
}

TEST(LoudnessTest, FullScaleSineIsMinus3Lufs) {
  // BS.1770: a 0 dBFS 997 Hz sine in one channel measures -3.01 LKFS (the K-filter is ~0 dB
  // near 1 kHz). candle's coefficients are recomputed for the actual rate.
  for (int rate : {24000, 48000, 44100}) {
    const auto x = sine(1.0, 997.0, rate, 3.0);
    const auto l = cachet::loudness_lufs(x.data(), static_cast<int64_t>(x.size()), rate);
    ASSERT_TRUE(l.has_value());
    EXPECT_NEAR(*l, -3.01, 0.05) << rate;
  }
}

TEST(LoudnessTest, ScalesWithGainAndGates) {
  const auto x = sine(0.1, 997.0, 24000, 2.0);
  const auto l = cachet::loudness_lufs(x.data(), static_cast<int64_t>(x.size()), 24000);
  ASSERT_TRUE(l.has_value());
  EXPECT_NEAR(*l, -23.01, 0.05);  // -20 dB
  // Silence and audio shorter than one 400 ms block are not measurable.
  std::vector<float> zeros(48000, 0.0f);
  EXPECT_FALSE(cachet::loudness_lufs(zeros.data(), 48000, 24000).has_value());
  EXPECT_FALSE(cachet::loudness_lufs(x.data(), 9599, 24000).has_value());
  EXPECT_TRUE(cachet::loudness_lufs(x.data(), 9600, 24000).has_value());
  // A loud second followed by a quiet one (-40 dB): the relative gate drops the quiet blocks.
  // Of the 10 blocks kept, 7 are all loud and 3 straddle the change with 3, 2 and 1 loud
  // windows of 4: mean power 8.5 / 10 of the loud one.
  auto y = sine(0.5, 997.0, 24000, 1.0);
  const auto q = sine(0.005, 997.0, 24000, 1.0);
  y.insert(y.end(), q.begin(), q.end());
  const auto ly = cachet::loudness_lufs(y.data(), static_cast<int64_t>(y.size()), 24000);
  ASSERT_TRUE(ly.has_value());
  EXPECT_NEAR(*ly, -3.01 - 6.02 + 10 * std::log10(0.85), 0.05);
}

TEST(LoudnessTest, NormalizeToMinus14) {
  const auto x = sine(0.05, 440.0, 24000, 2.0);
  cachet::LoudnessOptions o;
  o.compressor = false;
  const auto y = cachet::normalize_loudness(x, 24000, o);
  const auto l = cachet::loudness_lufs(y.data(), static_cast<int64_t>(y.size()), 24000);
  ASSERT_TRUE(l.has_value());
  EXPECT_NEAR(*l, -14.0, 0.02);
  // With the compressor: tanh of the same scaled signal.
  const auto z = cachet::normalize_loudness(x, 24000);
  const float gain = y[100] / x[100];
  for (size_t i = 0; i < x.size(); i += 97) EXPECT_FLOAT_EQ(z[i], std::tanh(x[i] * gain));
  // Quiet input (RMS < 2e-3) is returned as is.
  const auto quiet = sine(0.002, 440.0, 24000, 1.0);
  EXPECT_EQ(cachet::normalize_loudness(quiet, 24000), quiet);
  EXPECT_TRUE(cachet::normalize_loudness({}, 24000).empty());
}

TEST(LoudnessTest, Pcm16Candle) {
  EXPECT_EQ(cachet::pcm16_candle(0.0f), 0);
  EXPECT_EQ(cachet::pcm16_candle(1.0f), 32767);
  EXPECT_EQ(cachet::pcm16_candle(-1.0f), -32767);
  EXPECT_EQ(cachet::pcm16_candle(3.0f), 32767);
  EXPECT_EQ(cachet::pcm16_candle(-3.0f), -32767);
  EXPECT_EQ(cachet::pcm16_candle(0.5f), 16383);    // 16383.5 truncated
  EXPECT_EQ(cachet::pcm16_candle(-0.5f), -16383);  // toward zero
  EXPECT_EQ(cachet::pcm16_candle(NAN), 0);
  const auto v = cachet::to_pcm16_candle({0.25f, -0.25f});
  EXPECT_EQ(v, (std::vector<int16_t>{8191, -8191}));
}

}  // namespace
