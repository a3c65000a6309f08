// Sampler: parameter checks, exact distributions, empirical frequencies, reproducibility.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "cachet/error.h"
#include "cachet/sampler.h"

namespace cachet {
namespace {

SamplingParams plain(float temp = 1.0f) {
  SamplingParams p;
  p.temperature = temp;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 42;
  return p;
}

// The truncated, renormalised distribution computed independently of the sampler.
std::map<int32_t, double> expected(const std::vector<float>& logits, double temp, int top_k,
                                   double top_p, double min_p) {
  std::vector<int32_t> idx(logits.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  if (top_k > 0 && static_cast<size_t>(top_k) < idx.size()) idx.resize(top_k);
  double z = 0;
  for (int i : idx) z += std::exp(logits[i] / temp);
  std::vector<double> p;
  for (int i : idx) p.push_back(std::exp(logits[i] / temp) / z);
  size_t keep = p.size();
  double cum = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    cum += p[i];
    if (cum >= top_p) {
      keep = i + 1;
      break;
    }
  }
  size_t keep2 = 1;
  while (keep2 < keep && p[keep2] >= min_p * p[0]) ++keep2;
  double s = 0;
  for (size_t i = 0; i < keep2; ++i) s += p[i];
  std::map<int32_t, double> out;
  for (size_t i = 0; i < keep2; ++i) out[idx[i]] = p[i] / s;
  return out;
}

TEST(Sampler, ValidatesParameters) {
  auto bad = [](auto mutate) {
    SamplingParams p;
    mutate(p);
    EXPECT_THROW(Sampler{p}, Error);
  };
  bad([](SamplingParams& p) { p.temperature = -0.1f; });
  bad([](SamplingParams& p) { p.temperature = std::numeric_limits<float>::quiet_NaN(); });
  bad([](SamplingParams& p) { p.top_k = -1; });
  bad([](SamplingParams& p) { p.top_p = 0.0f; });
  bad([](SamplingParams& p) { p.top_p = 1.5f; });
  bad([](SamplingParams& p) { p.min_p = -0.1f; });
  bad([](SamplingParams& p) { p.min_p = 1.1f; });
  bad([](SamplingParams& p) { p.repeat_penalty = 0.0f; });
  bad([](SamplingParams& p) { p.repeat_last_n = -2; });
  bad([](SamplingParams& p) { p.presence_penalty = std::numeric_limits<float>::infinity(); });
  try {
    SamplingParams p;
    p.top_p = 2.0f;
    p.validate();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("top-p"), std::string::npos) << e.what();
  }
  SamplingParams ok;
  EXPECT_NO_THROW(ok.validate());
}

TEST(Sampler, RngIsUniformAndSeeded) {
  Rng a(7), b(7), c(8);
  double sum = 0;
  bool differs = false;
  for (int i = 0; i < 100000; ++i) {
    const double u = a.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    EXPECT_EQ(u, b.uniform());
    differs = differs || u != c.uniform();
    sum += u;
  }
  EXPECT_TRUE(differs);
  EXPECT_NEAR(sum / 100000, 0.5, 0.01);
  // Fixed output: the same seed gives the same numbers on every platform.
  Rng d(0);
  const uint64_t first = d.next();
  Rng e(0);
  EXPECT_EQ(e.next(), first);
}

TEST(Sampler, GreedyAndTopK1PickTheMaximum) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  SamplingParams g = plain(0.0f);
  SamplingParams k1 = plain(1.3f);
  k1.top_k = 1;
  Sampler sg(g), sk(k1);
  for (int t = 0; t < 200; ++t) {
    std::vector<float> l(1000);
    for (auto& x : l) x = nd(rng);
    const auto best = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    EXPECT_EQ(sg.sample(l), best);
    EXPECT_EQ(sk.sample(l), best);
  }
  // Ties go to the lower id.
  std::vector<float> tie = {1.0f, 3.0f, 3.0f, 0.0f};
  EXPECT_EQ(sg.sample(tie), 1);
  EXPECT_EQ(sk.sample(tie), 1);
}

TEST(Sampler, DistributionMatchesExactTruncation) {
  const std::vector<float> logits = {2.0f, 1.5f, 0.3f, -1.0f, 1.9f, 0.0f, -3.0f, 1.0f, 0.7f};
  struct Case {
    float temp;
    int k;
    float p, min_p;
  } cases[] = {{1.0f, 0, 1.0f, 0.0f},  {0.7f, 5, 1.0f, 0.0f},  {1.0f, 0, 0.8f, 0.0f},
               {1.3f, 0, 1.0f, 0.2f},  {0.9f, 6, 0.9f, 0.05f}, {2.0f, 3, 0.5f, 0.0f},
               {1.0f, 0, 0.01f, 0.0f}, {0.5f, 0, 1.0f, 0.9f}};
  for (const auto& c : cases) {
    SamplingParams sp = plain(c.temp);
    sp.top_k = c.k;
    sp.top_p = c.p;
    sp.min_p = c.min_p;
    Sampler s(sp);
    const auto dist = s.distribution(logits);
    const auto want = expected(logits, c.temp, c.k, c.p, c.min_p);
    ASSERT_EQ(dist.size(), want.size()) << c.temp << " " << c.k << " " << c.p << " " << c.min_p;
    double total = 0;
    for (const auto& tp : dist) {
      ASSERT_TRUE(want.count(tp.id)) << tp.id;
      EXPECT_NEAR(tp.p, want.at(tp.id), 1e-6);
      total += tp.p;
    }
    EXPECT_NEAR(total, 1.0, 1e-9);
    for (size_t i = 1; i < dist.size(); ++i) EXPECT_GE(dist[i - 1].p, dist[i].p);
  }
}

// 100k draws; Pearson chi-square against the exact probabilities. With a fixed seed the
// statistic is a fixed number; the bound is far above the 99.99% quantile for these degrees
// of freedom, so a correct sampler passes and a biased one (e.g. off-by-one truncation,
// temperature applied twice) fails.
TEST(Sampler, FrequenciesMatchProbabilities) {
  const std::vector<float> logits = {2.0f, 1.5f, 0.3f, -1.0f, 1.9f, 0.0f, -3.0f, 1.0f, 0.7f};
  struct Case {
    float temp;
    int k;
    float p, min_p;
  } cases[] = {{1.0f, 0, 1.0f, 0.0f}, {0.8f, 6, 0.95f, 0.0f}, {1.5f, 0, 0.9f, 0.1f}};
  for (const auto& c : cases) {
    SamplingParams sp = plain(c.temp);
    sp.top_k = c.k;
    sp.top_p = c.p;
    sp.min_p = c.min_p;
    sp.seed = 2024;
    Sampler s(sp);
    const auto want = expected(logits, c.temp, c.k, c.p, c.min_p);
    std::map<int32_t, int> counts;
    const int n = 100000;
    for (int i = 0; i < n; ++i) ++counts[s.sample(logits)];
    double chi2 = 0;
    for (const auto& [id, p] : want) {
      const double e = p * n;
      const double d = counts[id] - e;
      chi2 += d * d / e;
    }
    for (const auto& [id, cnt] : counts) EXPECT_TRUE(want.count(id)) << "drew excluded " << id;
    EXPECT_LT(chi2, 40.0) << "temp " << c.temp << " k " << c.k << " p " << c.p;
  }
}

TEST(Sampler, SameSeedSameSequence) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<std::vector<float>> steps(300, std::vector<float>(500));
  for (auto& l : steps)
    for (auto& x : l) x = nd(rng);
  SamplingParams p;  // defaults: temp 0.8, top-k 40, top-p 0.95
  p.seed = 123;
  auto run = [&](SamplingParams q) {
    Sampler s(q);
    std::vector<int32_t> out;
    for (const auto& l : steps) {
      out.push_back(s.sample(l));
      s.accept(out.back());
    }
    return out;
  };
  const auto a = run(p), b = run(p);
  EXPECT_EQ(a, b);
  SamplingParams q = p;
  q.seed = 124;
  EXPECT_NE(run(q), a);
  // reset() restarts the sequence.
  Sampler s(p);
  std::vector<int32_t> first;
  for (int i = 0; i < 20; ++i) first.push_back(s.sample(steps[i]));
  s.reset();
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s.sample(steps[i]), first[i]);
}

TEST(Sampler, RepetitionPenaltySemantics) {
  const std::vector<float> logits = {2.0f, -1.0f, 0.5f, 1.0f};
  SamplingParams p = plain(1.0f);
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 3;
  Sampler s(p);
  s.accept(0);  // positive logit: divided -> 1.0
  s.accept(1);  // negative logit: multiplied -> -2.0
  const std::vector<float> pen = {1.0f, -2.0f, 0.5f, 1.0f};
  auto want = expected(pen, 1.0, 0, 1.0, 0.0);
  for (const auto& tp : s.distribution(logits)) EXPECT_NEAR(tp.p, want[tp.id], 1e-6) << tp.id;
  // Seen twice: penalised once (a set, not a count).
  s.accept(0);
  for (const auto& tp : s.distribution(logits)) EXPECT_NEAR(tp.p, want[tp.id], 1e-6) << tp.id;
  // Outside the window of 3: token 0 and 1 drop out after three other tokens.
  s.accept(2);
  s.accept(2);
  s.accept(2);
  const std::vector<float> pen2 = {2.0f, -1.0f, 0.25f, 1.0f};
  want = expected(pen2, 1.0, 0, 1.0, 0.0);
  for (const auto& tp : s.distribution(logits)) EXPECT_NEAR(tp.p, want[tp.id], 1e-6) << tp.id;
}

TEST(Sampler, PresenceAndFrequencyPenalties) {
  const std::vector<float> logits = {2.0f, 1.0f, 0.5f};
  SamplingParams p = plain(1.0f);
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  Sampler s(p);
  s.accept(0);
  s.accept(0);
  s.accept(2);
  const std::vector<float> pen = {2.0f - 0.5f - 0.5f, 1.0f, 0.5f - 0.5f - 0.25f};
  const auto want = expected(pen, 1.0, 0, 1.0, 0.0);
  for (const auto& tp : s.distribution(logits)) EXPECT_NEAR(tp.p, want.at(tp.id), 1e-6);
  // Greedy sees penalties too.
  SamplingParams g = plain(0.0f);
  g.presence_penalty = 5.0f;
  Sampler sg(g);
  EXPECT_EQ(sg.sample(logits), 0);
  sg.accept(0);
  EXPECT_EQ(sg.sample(logits), 1);
}

TEST(Sampler, PresenceAndFrequencyCountOnlyTokensAcceptedForThem) {
  // The server records the prompt for the repetition penalty only (OpenAI's presence and
  // frequency penalties count the sampled tokens)
  const std::vector<float> logits = {2.0f, 1.0f, 0.5f};
  SamplingParams p = plain(1.0f);
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 3;
  Sampler s(p);
  const std::vector<int32_t> prompt = {0, 0};
  s.accept(prompt, false);
  s.accept(2);
  // token 0: repetition only (2 / 2); token 2: repetition, presence and one count
  std::vector<float> pen = {1.0f, 1.0f, 0.25f - 0.5f - 0.25f};
  auto want = expected(pen, 1.0, 0, 1.0, 0.0);
  for (const auto& tp : s.distribution(logits)) EXPECT_NEAR(tp.p, want.at(tp.id), 1e-6);
  // The window drops a prompt token and a counted one alike
  s.accept(1);
  s.accept(1);
  pen = {2.0f, 0.5f - 0.5f - 0.5f, 0.25f - 0.5f - 0.25f};
  want = expected(pen, 1.0, 0, 1.0, 0.0);
  for (const auto& tp : s.distribution(logits)) EXPECT_NEAR(tp.p, want.at(tp.id), 1e-6);
  // The first token is free of presence and frequency
  SamplingParams g = plain(0.0f);
  g.presence_penalty = 2.0f;
  Sampler sg(g);
  const std::vector<int32_t> seen = {0};
  sg.accept(seen, false);
  EXPECT_EQ(sg.sample(logits), 0);
}

TEST(Sampler, LogitBias) {
  const std::vector<float> logits = {2.0f, 1.0f, 0.5f};
  SamplingParams p = plain(1.0f);
  p.logit_bias = {{2, 1.5f}, {0, -1.0f}};
  Sampler s(p);
  const auto want = expected({1.0f, 1.0f, 2.0f}, 1.0, 0, 1.0, 0.0);
  for (const auto& tp : s.distribution(logits)) EXPECT_NEAR(tp.p, want.at(tp.id), 1e-6);
  // -inf bans a token, even the greedy choice
  SamplingParams g = plain(0.0f);
  g.logit_bias = {{0, -std::numeric_limits<float>::infinity()}};
  EXPECT_EQ(Sampler(g).sample(logits), 1);
  // A token past the vocabulary, a NaN or +inf bias: errors
  SamplingParams far = plain(0.0f);
  far.logit_bias = {{3, 1.0f}};
  EXPECT_THROW(Sampler(far).sample(logits), Error);
  SamplingParams nan = plain(0.0f);
  nan.logit_bias = {{0, std::nanf("")}};
  EXPECT_THROW(Sampler{nan}, Error);
  SamplingParams inf = plain(0.0f);
  inf.logit_bias = {{0, std::numeric_limits<float>::infinity()}};
  EXPECT_THROW(Sampler{inf}, Error);
}

TEST(Sampler, RejectsBadLogits) {
  Sampler s(plain(1.0f));
  std::vector<float> nan = {0.0f, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_THROW(s.sample(nan), Error);
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> all_inf = {ninf, ninf};
  EXPECT_THROW(s.sample(all_inf), Error);
  Sampler g(plain(0.0f));
  EXPECT_THROW(g.sample(all_inf), Error);
  EXPECT_THROW(s.sample(std::vector<float>{}), Error);
  // -inf entries are simply never drawn.
  std::vector<float> some = {ninf, 0.0f, ninf};
  for (int i = 0; i < 100; ++i) EXPECT_EQ(s.sample(some), 1);
}

}  // namespace
}  // namespace cachet
