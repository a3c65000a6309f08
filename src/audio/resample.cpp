// Band-limited resampling with a Kaiser-windowed sinc. For a rate ratio L/M (reduced), output
// sample j sits at input time t = j * M / L; its value is sum_i x[i] * h(t - i), where h is a
// low-pass at 0.475 of the lower of the two rates (pass band to ~0.45, stop band from 0.5 of
// it, Kaiser beta 7.86 for ~80 dB) spanning 48 zero crossings each side at the lower rate.
// Only L distinct fractional offsets occur, so their taps are tabulated once (polyphase); each
// phase's taps are normalised to sum to 1 so that DC passes exactly.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "cachet/error.h"
#include "cachet/wav.h"

namespace cachet {
namespace {

constexpr double kHalfWidth = 48.0;  // zero crossings (lower-rate samples) each side
constexpr double kCutoff = 0.475;    // cycles per lower-rate sample
constexpr double kBeta = 7.857;      // Kaiser window shape, ~80 dB stop band
constexpr int64_t kMaxTable = 1 << 22;

double bessel_i0(double x) {
  double sum = 1.0, term = 1.0;
  const double q = x * x / 4.0;
  for (int k = 1; k < 200; ++k) {
    term *= q / (static_cast<double>(k) * k);
    sum += term;
    if (term < 1e-17 * sum) break;
  }
  return sum;
}

struct Kernel {
  double scale;  // min(1, to / from): time compression of the kernel in input samples
  double inv_i0_beta;
  double operator()(double d) const {  // d = t - i in input samples
    const double u = d * scale;        // in lower-rate samples
    if (std::fabs(u) >= kHalfWidth) return 0.0;
    const double r = u / kHalfWidth;
    const double w = bessel_i0(kBeta * std::sqrt(std::max(0.0, 1.0 - r * r))) * inv_i0_beta;
    const double a = 2.0 * kCutoff * u;
    const double s = a == 0.0 ? 1.0 : std::sin(M_PI * a) / (M_PI * a);
    return 2.0 * kCutoff * scale * s * w;
  }
};

// Taps for fractional offset frac: coef[k] multiplies x[ti - K + 1 + k], k < 2K.
void phase_taps(const Kernel& h, double frac, int64_t K, float* coef) {
  double sum = 0;
  std::vector<double> c(static_cast<size_t>(2 * K));
  for (int64_t k = 0; k < 2 * K; ++k) {
    c[static_cast<size_t>(k)] = h(frac + static_cast<double>(K - 1 - k));
    sum += c[static_cast<size_t>(k)];
  }
  for (int64_t k = 0; k < 2 * K; ++k)
    coef[k] = static_cast<float>(sum != 0.0 ? c[static_cast<size_t>(k)] / sum : 0.0);
}

}  // namespace

std::vector<float> resample(const float* x, int64_t n, int from_rate, int to_rate) {
  CACHET_CHECK(from_rate > 0 && to_rate > 0, "resample: invalid rates ", from_rate, " -> ",
               to_rate);
  CACHET_CHECK(n >= 0, "resample: negative length");
  if (from_rate == to_rate || n == 0) return std::vector<float>(x, x + n);
  const int64_t g = std::gcd(from_rate, to_rate);
  const int64_t L = to_rate / g, M = from_rate / g;
  const int64_t out_n = (n * L + M - 1) / M;
  Kernel h{std::min(1.0, static_cast<double>(to_rate) / from_rate), 1.0 / bessel_i0(kBeta)};
  CACHET_CHECK(from_rate <= 1024LL * to_rate, "resample: ", from_rate, " Hz -> ", to_rate,
               " Hz is a reduction of more than 1024 times");
  const int64_t K = static_cast<int64_t>(std::ceil(kHalfWidth / h.scale));
  const bool table = L * 2 * K <= kMaxTable;
  std::vector<float> coefs(static_cast<size_t>((table ? L : 1) * 2 * K));
  if (table)
    for (int64_t p = 0; p < L; ++p)
      phase_taps(h, static_cast<double>(p) / L, K, coefs.data() + p * 2 * K);

  std::vector<float> y(static_cast<size_t>(out_n));
  for (int64_t j = 0; j < out_n; ++j) {
    const int64_t num = j * M;
    const int64_t ti = num / L, p = num % L;
    const float* c;
    if (table) {
      c = coefs.data() + p * 2 * K;
    } else {
      phase_taps(h, static_cast<double>(p) / L, K, coefs.data());
      c = coefs.data();
    }
    const int64_t i0 = ti - K + 1;
    const int64_t k0 = std::max<int64_t>(0, -i0), k1 = std::min<int64_t>(2 * K, n - i0);
    double s = 0;
    for (int64_t k = k0; k < k1; ++k) s += static_cast<double>(c[k]) * x[i0 + k];
    y[static_cast<size_t>(j)] = static_cast<float>(s);
  }
  return y;
}

Wav resample(const Wav& wav, int rate) {
  CACHET_CHECK(rate > 0, "resample: invalid target rate ", rate);
  if (wav.sample_rate == rate) return wav;
  Wav out;
  out.sample_rate = rate;
  out.channels = wav.channels;
  for (int c = 0; c < wav.channels; ++c) {
    const std::vector<float> ch = resample(wav.channel(c), wav.sample_rate, rate);
    if (c == 0) out.samples.resize(ch.size() * static_cast<size_t>(wav.channels));
    for (size_t i = 0; i < ch.size(); ++i) out.samples[i * wav.channels + c] = ch[i];
  }
  return out;
}

Wav to_mono(const Wav& wav, int rate) {
  Wav m = Wav::mono(mix_to_mono(wav), wav.sample_rate);
  return resample(m, rate);
}

}  // namespace cachet
