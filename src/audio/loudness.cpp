// BS.1770-4 integrated loudness and loudness normalisation, computed in the same f32 steps as
// candle's bs1770 module and audio::normalize_loudness (so results agree to the last bits of a
// float): direct-form-I biquads, compensated sums whose residue carries across windows, and
// gating on the 100 ms window powers.
#include <cmath>

#include "cachet/audio_ops.h"
#include "cachet/error.h"

namespace cachet {
namespace {

struct Biquad {
  float a1, a2, b0, b1, b2;
  float x1 = 0, x2 = 0, y1 = 0, y2 = 0;
  float apply(float x0) {
    const float y0 = 0.0f + b0 * x0 + b1 * x1 + b2 * x2 - a1 * y1 - a2 * y2;
    x2 = x1;
    x1 = x0;
    y2 = y1;
    y1 = y0;
    return y0;
  }
};

Biquad high_shelf(float fs) {
  const float gain_db = 3.9998438f, q = 0.70717525f, fc = 1681.9745f;
  const float k = std::tan(static_cast<float>(M_PI) * fc / fs);
  const float vh = std::pow(10.0f, gain_db / 20.0f);
  const float vb = std::pow(vh, 0.49966678f);
  const float a0 = 1.0f + k / q + k * k;
  return Biquad{2.0f * (k * k - 1.0f) / a0, (1.0f - k / q + k * k) / a0,
                (vh + vb * k / q + k * k) / a0, 2.0f * (k * k - vh) / a0,
                (vh - vb * k / q + k * k) / a0};
}

Biquad high_pass(float fs) {
  const float q = 0.50032705f, fc = 38.13547f;
  const float k = std::tan(static_cast<float>(M_PI) * fc / fs);
  return Biquad{2.0f * (k * k - 1.0f) / (1.0f + k / q + k * k),
                (1.0f - k / q + k * k) / (1.0f + k / q + k * k), 1.0f, -2.0f, 1.0f};
}

struct KahanSum {
  float sum = 0, residue = 0;
  void add(float x) {
    const float s = sum + (residue + x);
    residue = (residue + x) - (s - sum);
    sum = s;
  }
};

float power_from_lkfs(float l) {
  return std::pow(10.0f, (l + 0.691f) * 0.1f);
}
float lkfs(float p) {
  return -0.691f + 10.0f * std::log10(p);
}

}  // namespace

std::optional<double> loudness_lufs(const float* x, int64_t n, int sample_rate) {
  CACHET_CHECK(sample_rate >= 10, "loudness: invalid sample rate ", sample_rate);
  const uint32_t per_window = static_cast<uint32_t>(sample_rate) / 10;
  Biquad s1 = high_shelf(static_cast<float>(sample_rate));
  Biquad s2 = high_pass(static_cast<float>(sample_rate));
  const float normalizer = 1.0f / static_cast<float>(per_window);
  std::vector<float> windows;
  KahanSum sq;
  uint32_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float z = s2.apply(s1.apply(x[i]));
    sq.add(z * z);
    if (++count == per_window) {
      windows.push_back(sq.sum * normalizer);
      sq.sum = 0.0f;  // the residue carries over on purpose
      count = 0;
    }
  }
  const float absolute = power_from_lkfs(-70.0f);
  std::vector<float> blocks;
  for (size_t i = 0; i + 4 <= windows.size(); ++i) {
    float s = 0.0f;
    for (size_t k = 0; k < 4; ++k) s += windows[i + k];
    const float p = 0.25f * s;
    if (p > absolute) blocks.push_back(p);
  }
  if (blocks.empty()) return std::nullopt;
  KahanSum all;
  for (float p : blocks) all.add(p);
  const float abs_gated = all.sum / static_cast<float>(blocks.size());
  const float relative = power_from_lkfs(lkfs(abs_gated) - 10.0f);
  KahanSum kept;
  size_t n_kept = 0;
  for (float p : blocks)
    if (p > relative) {
      kept.add(p);
      ++n_kept;
    }
  if (n_kept == 0) return std::nullopt;
  return static_cast<double>(lkfs(kept.sum / static_cast<float>(n_kept)));
}

std::vector<float> normalize_loudness(const std::vector<float>& x, int sample_rate,
                                      const LoudnessOptions& opts) {
  if (x.empty()) return x;
  double sq = 0;
  for (float v : x) sq += static_cast<double>(v) * v;
  const double energy = std::sqrt(sq / static_cast<double>(x.size()));
  if (!(energy >= opts.min_energy)) return x;
  const auto l = loudness_lufs(x.data(), static_cast<int64_t>(x.size()), sample_rate);
  if (!l) return x;
  const float gain = static_cast<float>(std::pow(10.0, (opts.target_lufs - *l) / 20.0));
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float v = x[i] * gain;
    y[i] = opts.compressor ? std::tanh(v) : v;
  }
  return y;
}

int16_t pcm16_candle(float x) {
  if (!(x == x)) return 0;
  const float c = x < -1.0f ? -1.0f : (x > 1.0f ? 1.0f : x);
  return static_cast<int16_t>(c * 32767.0f);
}

std::vector<int16_t> to_pcm16_candle(const std::vector<float>& x) {
  std::vector<int16_t> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = pcm16_candle(x[i]);
  return y;
}

}  // namespace cachet
