// The token-level steps of the MetaVoice pipeline (src/audio/tts_ops.h) against hand-worked
// cases of the original's rules.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "audio/tts_ops.h"
#include "cachet/error.h"
#include "cachet/metavoice.h"

namespace cachet::tts {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(TtsCfg, MixesConditionedAndUnconditioned) {
  const std::vector<float> cond{1.0f, -2.0f, 0.5f}, uncond{0.0f, 1.0f, 0.5f};
  std::vector<float> out(3);
  cfg_mix(cond, uncond, 3.0f, out);
  EXPECT_FLOAT_EQ(out[0], 3.0f);     // 3 * 1 - 2 * 0
  EXPECT_FLOAT_EQ(out[1], -8.0f);    // 3 * -2 - 2 * 1
  EXPECT_FLOAT_EQ(out[2], 0.5f);     // equal rows are unchanged
  cfg_mix(cond, uncond, 1.0f, out);  // g = 1: the conditioned row
  EXPECT_EQ(out, cond);
  cfg_mix(cond, uncond, 0.0f, out);  // g = 0: the unconditioned row
  EXPECT_EQ(out, uncond);
  std::vector<float> short_out(2);
  EXPECT_THROW(cfg_mix(cond, uncond, 3.0f, short_out), Error);
}

TEST(TtsTopP, KeepsSmallestSetReachingTopP) {
  // probabilities 0.5, 0.3, 0.15, 0.05 (as log-probabilities)
  const std::vector<double> p{0.5, 0.3, 0.15, 0.05};
  auto logits_of = [&] {
    std::vector<float> l;
    for (double x : p) l.push_back(static_cast<float>(std::log(x)));
    return l;
  };
  // top_p 0.7: ascending cumulative 0.05, 0.2, 0.5, 1.0; removed where <= 0.3.
  std::vector<float> l = logits_of();
  top_p_filter(l, 0.7f);
  EXPECT_TRUE(std::isfinite(l[0]));
  EXPECT_TRUE(std::isfinite(l[1]));
  EXPECT_EQ(l[2], -kInf);
  EXPECT_EQ(l[3], -kInf);
  // top_p 0.9: removed where <= 0.1 -> only the 0.05 token.
  l = logits_of();
  top_p_filter(l, 0.9f);
  EXPECT_TRUE(std::isfinite(l[2]));
  EXPECT_EQ(l[3], -kInf);
  // top_p tiny: the highest token always survives.
  l = logits_of();
  top_p_filter(l, 1e-6f);
  EXPECT_TRUE(std::isfinite(l[0]));
  for (int i = 1; i < 4; ++i) EXPECT_EQ(l[i], -kInf);
  // top_p 1: nothing removed.
  l = logits_of();
  top_p_filter(l, 1.0f);
  for (float x : l) EXPECT_TRUE(std::isfinite(x));
  EXPECT_THROW(top_p_filter(l, 0.0f), Error);
  EXPECT_THROW(top_p_filter(l, 1.5f), Error);
}

TEST(TtsTopP, SamplingFollowsTheFilteredDistribution) {
  const std::vector<float> l{std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  Rng rng(42);
  std::map<int32_t, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[sample_top_p(l, 1.0f, 0.7f, rng)];
  EXPECT_EQ(counts.count(2), 0u);
  EXPECT_EQ(counts.count(3), 0u);
  EXPECT_NEAR(counts[0] / static_cast<double>(n), 0.625, 0.02);  // 0.5 / 0.8
  EXPECT_NEAR(counts[1] / static_cast<double>(n), 0.375, 0.02);
  // Temperature 0 is the argmax, without touching the generator.
  Rng a(7), b(7);
  EXPECT_EQ(sample_top_p(l, 0.0f, 0.95f, a), 0);
  EXPECT_EQ(a.next(), b.next());
  // Same seed, same tokens; temperature sharpens.
  Rng r1(3), r2(3);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(sample_top_p(l, 1.0f, 1.0f, r1), sample_top_p(l, 1.0f, 1.0f, r2));
  Rng cold(5);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(sample_top_p(l, 0.01f, 1.0f, cold), 0);
  EXPECT_THROW(sample_top_p(l, -1.0f, 0.9f, cold), Error);
}

TEST(TtsTopK, KeepsTheKHighestWithTies) {
  const std::vector<float> l{0.0f, 3.0f, 1.0f, 3.0f, 2.0f};
  Rng rng(1);
  std::map<int32_t, int> counts;
  for (int i = 0; i < 5000; ++i) ++counts[sample_top_k(l, 1.0f, 2, rng)];
  EXPECT_EQ(counts.size(), 2u);  // tokens 1 and 3
  EXPECT_GT(counts[1], 2000);
  EXPECT_GT(counts[3], 2000);
  counts.clear();
  for (int i = 0; i < 5000; ++i) ++counts[sample_top_k(l, 1.0f, 3, rng)];
  EXPECT_EQ(counts.size(), 3u);  // 1, 3 and 4
  EXPECT_GT(counts[4], 0);
  EXPECT_EQ(counts.count(0), 0u);
  EXPECT_EQ(sample_top_k(l, 0.0f, 200, rng), 1);  // greedy: lowest id on ties
  EXPECT_THROW(sample_top_k(l, 1.0f, -1, rng), Error);
}

TEST(TtsSplit, RoutesByValueAndTruncates) {
  // prompt (text + EOT), then c0, c1+1024 pairs, then end of audio
  const std::vector<int32_t> seq{2153, 2154, 2561, 5, 1024 + 7, 9, 1024 + 1023, 0, 2048};
  SplitStream s = split_interleaved(seq);
  EXPECT_EQ(s.c0, (std::vector<int>{5, 9}));  // the third c0 has no c1 partner
  EXPECT_EQ(s.c1, (std::vector<int>{7, 1023}));
  EXPECT_EQ(s.text, (std::vector<int32_t>{2153, 2154, 2561}));
  // No alternation check: order does not matter, only values.
  s = split_interleaved(std::vector<int32_t>{1030, 1031, 3, 2049});
  EXPECT_EQ(s.c0, (std::vector<int>{3}));
  EXPECT_EQ(s.c1, (std::vector<int>{6}));
  EXPECT_EQ(s.text, (std::vector<int32_t>{2049}));
  s = split_interleaved(std::vector<int32_t>{2560, 2048});
  EXPECT_TRUE(s.c0.empty() && s.c1.empty());
}

TEST(TtsStage2Input, PadsAndCuts) {
  const std::vector<int32_t> text2{1129, 1130, 1537};
  const std::vector<int> c0{1, 2}, c1{3, 4};
  auto h = stage2_input(text2, c0, c1, 10);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0], (std::vector<int32_t>{1129, 1130, 1537, 1, 2, 1024, 1024, 1024, 1024, 1024}));
  EXPECT_EQ(h[1], (std::vector<int32_t>{1024, 1024, 1024, 3, 4, 1024, 1024, 1024, 1024, 1024}));
  h = stage2_input(text2, c0, c1, 4);
  EXPECT_EQ(h[0], (std::vector<int32_t>{1129, 1130, 1537, 1}));
  EXPECT_EQ(h[1], (std::vector<int32_t>{1024, 1024, 1024, 3}));
  EXPECT_THROW(stage2_input(text2, c0, std::vector<int>{1}, 10), Error);
}

TEST(TtsTilted, FiltersAndTruncates) {
  std::vector<std::vector<int32_t>> h(8);
  h[0] = {1129, 1537, 5, 6, 7, 1024, 1024};  // text and pad dropped
  h[1] = {1024, 1024, 8, 9, 10, 1024, 1024};
  for (int i = 2; i < 8; ++i) h[i] = {1024, 1024, 100 + i, 1024, 200 + i, 300 + i, 1024};
  auto c = tilted_filter(h);
  ASSERT_EQ(c.size(), 8u);
  EXPECT_EQ(c[0], (std::vector<int>{5, 6, 7}));
  EXPECT_EQ(c[1], (std::vector<int>{8, 9, 10}));
  EXPECT_EQ(c[2], (std::vector<int>{102, 202, 302}));
  // A head predicting a code at a text position shifts its codebook (as the original does),
  // and a head with fewer codes truncates all.
  h[7] = {1000, 1024, 1024, 1024, 1024, 1024, 1024};
  h[3] = {1, 2, 3, 4, 5, 6, 7};
  c = tilted_filter(h);
  for (const auto& x : c) EXPECT_EQ(x.size(), 1u);
  EXPECT_EQ(c[3][0], 1);
  EXPECT_EQ(c[7][0], 1000);
  EXPECT_THROW(tilted_filter({{1}}), Error);
}

TEST(TtsLoad, MissingPartsAreNamed) {
  const std::string dir = ::testing::TempDir() + "tts_load_missing";
  try {
    MetaVoice::load(dir);
    FAIL() << "loaded a missing directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir), std::string::npos) << e.what();
  }
  MetaVoiceLoadOptions o;
  o.codec_only = true;
  o.encodec_dir = dir + "/encodec";
  try {
    MetaVoice::load("", o);
    FAIL() << "loaded a missing EnCodec directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("encodec"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cachet::tts
