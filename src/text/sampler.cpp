#include "cachet/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "cachet/error.h"
#include "cachet/hash.h"

namespace cachet {

void SamplingParams::validate() const {
  CACHET_CHECK(std::isfinite(temperature) && temperature >= 0.0f, "invalid temperature ",
               temperature, ": it must be a finite number >= 0 (0 picks the most likely token)");
  CACHET_CHECK(top_k >= 0, "invalid top-k ", top_k, ": it must be >= 0 (0 disables it)");
  CACHET_CHECK(std::isfinite(top_p) && top_p > 0.0f && top_p <= 1.0f, "invalid top-p ", top_p,
               ": it must be in (0, 1] (1 disables it)");
  CACHET_CHECK(std::isfinite(min_p) && min_p >= 0.0f && min_p <= 1.0f, "invalid min-p ", min_p,
               ": it must be in [0, 1] (0 disables it)");
  CACHET_CHECK(std::isfinite(repeat_penalty) && repeat_penalty > 0.0f, "invalid repeat penalty ",
               repeat_penalty, ": it must be > 0 (1 disables it)");
  CACHET_CHECK(repeat_last_n >= -1, "invalid repeat-last-n ", repeat_last_n,
               ": it must be >= 0, or -1 for the whole sequence");
  CACHET_CHECK(std::isfinite(presence_penalty), "invalid presence penalty ", presence_penalty,
               ": it must be a finite number (0 disables it)");
  CACHET_CHECK(std::isfinite(frequency_penalty), "invalid frequency penalty ", frequency_penalty,
               ": it must be a finite number (0 disables it)");
  for (const auto& [tok, bias] : logit_bias) {
    CACHET_CHECK(tok >= 0, "invalid logit bias: token ", tok, " is negative");
    CACHET_CHECK(std::isfinite(bias) || bias == -std::numeric_limits<float>::infinity(),
                 "invalid logit bias ", bias, " for token ", tok,
                 ": it must be a finite number or -inf");
  }
}

// ---------------------------------------------------------------------------------------------

namespace {
inline uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}
}  // namespace

void Rng::seed_with(uint64_t seed) {
  uint64_t x = seed;
  for (auto& s : s_) s = splitmix64_next(x);
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

// ---------------------------------------------------------------------------------------------

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  params_.validate();
}

void Sampler::reset() {
  recent_.clear();
  counts_.clear();
  counted_.clear();
  rng_.seed_with(params_.seed);
}

void Sampler::accept(int32_t token, bool presence) {
  if (params_.repeat_last_n == 0) return;
  recent_.emplace_back(token, presence);
  ++counts_[token];
  if (presence) ++counted_[token];
  if (params_.repeat_last_n > 0 && recent_.size() > static_cast<size_t>(params_.repeat_last_n)) {
    const auto [old, was_counted] = recent_.front();
    recent_.pop_front();
    if (--counts_[old] == 0) counts_.erase(old);
    if (was_counted && --counted_[old] == 0) counted_.erase(old);
  }
}

void Sampler::accept(std::span<const int32_t> tokens, bool presence) {
  for (int32_t t : tokens) accept(t, presence);
}

std::vector<TokenProb> Sampler::distribution(std::span<const float> logits) const {
  const size_t n = logits.size();
  CACHET_CHECK(n > 0, "sampler: empty logits");
  std::vector<float> l(logits.begin(), logits.end());
  for (size_t i = 0; i < n; ++i)
    CACHET_CHECK(!std::isnan(l[i]), "sampler: logit of token ", i, " is NaN");

  // 0. Biases.
  for (const auto& [tok, bias] : params_.logit_bias) {
    CACHET_CHECK(static_cast<size_t>(tok) < n, "sampler: logit bias for token ", tok,
                 " outside the vocabulary of ", n);
    l[static_cast<size_t>(tok)] += bias;
  }

  // 1. Penalties.
  if (params_.repeat_penalty != 1.0f) {
    for (const auto& [tok, count] : counts_) {
      if (tok < 0 || static_cast<size_t>(tok) >= n) continue;
      float& x = l[tok];
      x = x > 0.0f ? x / params_.repeat_penalty : x * params_.repeat_penalty;
    }
  }
  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) {
    for (const auto& [tok, count] : counted_) {
      if (tok < 0 || static_cast<size_t>(tok) >= n) continue;
      l[tok] -= params_.presence_penalty + params_.frequency_penalty * static_cast<float>(count);
    }
  }

  // 2. Greedy.
  if (params_.temperature == 0.0f) {
    size_t best = 0;
    for (size_t i = 1; i < n; ++i)
      if (l[i] > l[best]) best = i;
    CACHET_CHECK(l[best] > -std::numeric_limits<float>::infinity(), "sampler: every logit is -inf");
    return {{static_cast<int32_t>(best), 1.0}};
  }

  // 3-4. Temperature and top-k (ordering by logit is the same before and after scaling).
  std::vector<int32_t> idx(n);
  for (size_t i = 0; i < n; ++i) idx[i] = static_cast<int32_t>(i);
  auto better = [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
  size_t keep = n;
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    keep = static_cast<size_t>(params_.top_k);
    std::nth_element(idx.begin(), idx.begin() + keep, idx.end(), better);
    idx.resize(keep);
  }
  std::sort(idx.begin(), idx.end(), better);
  const double inv_t = 1.0 / static_cast<double>(params_.temperature);
  const double top = static_cast<double>(l[idx[0]]) * inv_t;
  CACHET_CHECK(std::isfinite(top), "sampler: the highest logit (token ", idx[0], ") is ", l[idx[0]],
               "; logits must be finite and not all -inf");

  // 5. Softmax and top-p.
  std::vector<TokenProb> out;
  out.reserve(keep);
  double sum = 0.0;
  for (int32_t i : idx) {
    const double e = std::exp(static_cast<double>(l[i]) * inv_t - top);
    if (!(e > 0.0)) break;  // sorted: the rest underflow to 0 as well
    out.push_back({i, e});
    sum += e;
  }
  for (auto& c : out) c.p /= sum;
  if (params_.top_p < 1.0f) {
    double cum = 0.0;
    size_t m = 0;
    while (m < out.size()) {
      cum += out[m].p;
      ++m;
      if (cum >= static_cast<double>(params_.top_p)) break;
    }
    out.resize(m);
  }
  // 6. Min-p.
  if (params_.min_p > 0.0f) {
    const double floor = static_cast<double>(params_.min_p) * out[0].p;
    size_t m = 1;
    while (m < out.size() && out[m].p >= floor) ++m;
    out.resize(m);
  }
  // 7. Renormalise.
  double total = 0.0;
  for (const auto& c : out) total += c.p;
  for (auto& c : out) c.p /= total;
  return out;
}

int32_t Sampler::sample(std::span<const float> logits) {
  const std::vector<TokenProb> dist = distribution(logits);
  if (dist.size() == 1) return dist[0].id;
  const double u = rng_.uniform();
  double cum = 0.0;
  for (const auto& c : dist) {
    cum += c.p;
    if (u < cum) return c.id;
  }
  return dist.back().id;  // rounding: u at the very top
}

}  // namespace cachet
