#include "audio/tts_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "cachet/error.h"

namespace cachet::tts {

void cfg_mix(std::span<const float> cond, std::span<const float> uncond, float guidance,
             std::span<float> out) {
  CACHET_CHECK(cond.size() == uncond.size() && out.size() == cond.size(),
               "guidance: logit rows of different sizes (", cond.size(), ", ", uncond.size(), ", ",
               out.size(), ")");
  const float a = guidance, b = 1.0f - guidance;
  for (size_t i = 0; i < cond.size(); ++i) {
    const float x = a * cond[i];
    const float y = b * uncond[i];
    out[i] = x + y;
  }
}

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int32_t argmax(std::span<const float> l) {
  CACHET_CHECK(!l.empty(), "sampler: empty logits");
  size_t best = 0;
  for (size_t i = 0; i < l.size(); ++i) {
    CACHET_CHECK(!std::isnan(l[i]), "sampler: logit of token ", i, " is NaN");
    if (l[i] > l[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

// Softmax of l (some entries may be -inf) and one categorical draw.
int32_t draw(std::span<const float> l, Rng& rng) {
  const int32_t top = argmax(l);
  const double m = l[top];
  CACHET_CHECK(std::isfinite(m), "sampler: the highest logit (token ", top, ") is ", m,
               "; logits must be finite and not all -inf");
  std::vector<double> p(l.size());
  double sum = 0.0;
  for (size_t i = 0; i < l.size(); ++i) {
    p[i] = l[i] == kNegInf ? 0.0 : std::exp(static_cast<double>(l[i]) - m);
    sum += p[i];
  }
  const double u = rng.uniform() * sum;
  double cum = 0.0;
  int32_t last = top;
  for (size_t i = 0; i < l.size(); ++i) {
    if (p[i] <= 0.0) continue;
    cum += p[i];
    last = static_cast<int32_t>(i);
    if (u < cum) return last;
  }
  return last;  // rounding: u at the very top
}

void check_temperature(float t) {
  CACHET_CHECK(std::isfinite(t) && t >= 0.0f, "invalid temperature ", t,
               ": it must be >= 0 (0 picks the most likely token)");
}

}  // namespace

void top_p_filter(std::span<float> logits, float top_p) {
  CACHET_CHECK(std::isfinite(top_p) && top_p > 0.0f && top_p <= 1.0f, "invalid top-p ", top_p,
               ": it must be in (0, 1]");
  const size_t n = logits.size();
  if (n == 0) return;
  std::vector<int32_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  // Ascending; ties broken so that the lower id counts as the more probable one.
  std::sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) {
    return logits[a] < logits[b] || (logits[a] == logits[b] && a > b);
  });
  const double m = logits[idx[n - 1]];
  if (!std::isfinite(m)) return;
  std::vector<double> e(n);
  double sum = 0.0;
  for (size_t k = 0; k < n; ++k) {
    const float x = logits[idx[k]];
    e[k] = x == kNegInf ? 0.0 : std::exp(static_cast<double>(x) - m);
    sum += e[k];
  }
  const double limit = 1.0 - static_cast<double>(top_p);
  double cum = 0.0;
  for (size_t k = 0; k + 1 < n; ++k) {  // the highest (k = n - 1) is always kept
    cum += e[k] / sum;
    if (cum <= limit) logits[idx[k]] = kNegInf;
  }
}

int32_t sample_top_p(std::span<const float> logits, float temperature, float top_p, Rng& rng) {
  check_temperature(temperature);
  if (temperature == 0.0f) return argmax(logits);
  std::vector<float> l(logits.begin(), logits.end());
  for (auto& x : l) x /= temperature;
  top_p_filter(l, top_p);
  return draw(l, rng);
}

int32_t sample_top_k(std::span<const float> logits, float temperature, int32_t top_k, Rng& rng) {
  check_temperature(temperature);
  CACHET_CHECK(top_k >= 0, "invalid top-k ", top_k, ": it must be >= 0 (0 disables it)");
  if (temperature == 0.0f) return argmax(logits);
  std::vector<float> l(logits.begin(), logits.end());
  for (auto& x : l) x /= temperature;
  if (top_k > 0 && static_cast<size_t>(top_k) < l.size()) {
    std::vector<float> s(l);
    std::nth_element(s.begin(), s.begin() + (top_k - 1), s.end(), std::greater<float>());
    const float pivot = s[top_k - 1];
    for (auto& x : l)
      if (x < pivot) x = kNegInf;
  }
  return draw(l, rng);
}

SplitStream split_interleaved(std::span<const int32_t> tokens) {
  SplitStream s;
  for (int32_t t : tokens) {
    if (t < kCodebookSize) {
      CACHET_CHECK(t >= 0, "stage 1: negative token ", t);
      s.c0.push_back(t);
    } else if (t < 2 * kCodebookSize) {
      s.c1.push_back(t - kCodebookSize);
    } else if (t > kEndOfAudio) {
      s.text.push_back(t);
    }
  }
  const size_t n = std::min(s.c0.size(), s.c1.size());
  s.c0.resize(n);
  s.c1.resize(n);
  return s;
}

std::vector<std::vector<int32_t>> stage2_input(std::span<const int32_t> text2,
                                               std::span<const int> c0, std::span<const int> c1,
                                               int64_t block_size) {
  CACHET_CHECK(c0.size() == c1.size(), "stage 2: codebooks 0 and 1 differ in length (", c0.size(),
               " and ", c1.size(), ")");
  CACHET_CHECK(block_size > 0, "stage 2: block size ", block_size);
  std::vector<std::vector<int32_t>> h(2);
  h[0].assign(text2.begin(), text2.end());
  h[0].insert(h[0].end(), c0.begin(), c0.end());
  h[0].push_back(kStage2Pad);
  h[1].assign(text2.size(), kStage2Pad);
  h[1].insert(h[1].end(), c1.begin(), c1.end());
  h[1].push_back(kStage2Pad);
  for (auto& x : h) x.resize(static_cast<size_t>(block_size), kStage2Pad);
  return h;
}

std::vector<std::vector<int>> tilted_filter(const std::vector<std::vector<int32_t>>& hierarchies) {
  CACHET_CHECK(hierarchies.size() > 1, "TiltedEncodec: needs more than one hierarchy, got ",
               hierarchies.size());
  std::vector<std::vector<int>> out(hierarchies.size());
  size_t n = std::numeric_limits<size_t>::max();
  for (size_t i = 0; i < hierarchies.size(); ++i) {
    for (int32_t t : hierarchies[i])
      if (t < kCodebookSize && t >= 0) out[i].push_back(t);
    n = std::min(n, out[i].size());
  }
  for (auto& x : out) x.resize(n);
  return out;
}

}  // namespace cachet::tts
