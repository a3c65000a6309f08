// Audio post-processing: BS.1770 loudness (as candle's bs1770 / normalize_loudness computes it)
// and float -> 16-bit PCM conversion.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

namespace cachet {

// Integrated loudness in LUFS of one channel, BS.1770-4 as candle's bs1770 module computes it:
// K-weighting with two f32 biquads (coefficients from pyloudnorm's formulas for sample_rate),
// mean square over non-overlapping 100 ms windows (compensated f32 sums), 400 ms gating blocks
// every 100 ms, absolute gate at -70 LUFS and relative gate at -10 LU. nullopt when no block
// passes the gates (silence, or shorter than 400 ms).
std::optional<double> loudness_lufs(const float* x, int64_t n, int sample_rate);

struct LoudnessOptions {
  double target_lufs = -14.0;
  bool compressor = true;    // y = tanh(gain * x) instead of gain * x
  float min_energy = 2e-3f;  // below this RMS the input is returned unchanged
};

// candle's normalize_loudness: when the RMS is at least min_energy and the loudness is
// measurable, scales x to target_lufs (gain 10^((target - L) / 20)) and applies tanh when
// compressor is set; otherwise returns x unchanged.
std::vector<float> normalize_loudness(const std::vector<float>& x, int sample_rate,
                                      const LoudnessOptions& opts = {});

// Float sample -> int16 as candle's write_pcm_as_wav: trunc(clamp(x, -1, 1) * 32767).
int16_t pcm16_candle(float x);
std::vector<int16_t> to_pcm16_candle(const std::vector<float>& x);

}  // namespace cachet
