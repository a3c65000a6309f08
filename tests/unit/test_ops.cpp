// Element-wise ops: every ISA level against the scalar reference, odd lengths, saturating
// inputs, and closed-form / PyTorch-computed values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cachet/cpu.h"
#include "cachet/error.h"
#include "cachet/half.h"
#include "cachet/ops.h"

namespace {

using cachet::Isa;

// Forces an ISA level for a scope and restores the previous one.
class IsaScope {
 public:
  explicit IsaScope(Isa isa) : saved_(cachet::active_isa()) { cachet::set_isa(isa); }
  ~IsaScope() { cachet::set_isa(saved_); }
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;

 private:
  Isa saved_;
};

std::vector<Isa> isas() {
  std::vector<Isa> v{Isa::Scalar};
  if (cachet::best_isa() >= Isa::Avx2) v.push_back(Isa::Avx2);
  if (cachet::best_isa() >= Isa::Avx512) v.push_back(Isa::Avx512);
  return v;
}

const int64_t kLengths[] = {1, 7, 33, 1000};

std::vector<float> random_vec(int64_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Inputs where exponentials saturate or functions switch branches.
std::vector<float> extreme_inputs() {
  return {0.0f,  -0.0f,  1e-30f, -1e-30f, 1e-6f,   -1e-6f,   0.5f,    -0.5f,   1.0f,
          -1.0f, 1.41f,  1.42f,  -1.41f,  -1.42f,  5.0f,     -5.0f,   19.9f,   20.0f,
          20.1f, -20.0f, 30.0f,  -30.0f,  80.0f,   -80.0f,   88.0f,   88.7f,   88.75f,
          89.0f, -87.0f, -87.5f, -88.0f,  -100.0f, -103.0f,  -104.0f, -110.0f, 100.0f,
          1e10f, -1e10f, 1e30f,  -1e30f,  FLT_MAX, -FLT_MAX, 3.0f,    -3.0f,   7.5f,
          -7.5f, 12.0f,  -12.0f, 14.0f,   -14.0f,  -0.999f,  0.999f,  2.0f,    -2.0f};
}

// |got - want| <= atol + rtol |want|, and no NaN unless the reference has one.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double atol,
                  double rtol, const std::vector<float>& in, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) continue;
    ASSERT_FALSE(std::isnan(got[i])) << what << " i=" << i << " x=" << in[i];
    if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << what << " i=" << i << " x=" << in[i];
      continue;
    }
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    EXPECT_LE(err, atol + rtol * std::fabs(want[i]))
        << what << " i=" << i << " x=" << in[i] << " got=" << got[i] << " want=" << want[i];
  }
}

struct Unary {
  const char* name;
  void (*fn)(const float*, float*, int64_t);
  void (*ref)(const float*, float*, int64_t);
  double atol, rtol;
};

const Unary kUnary[] = {
    {"gelu", cachet::ops::gelu, cachet::ops::ref::gelu, 2e-6, 2e-6},
    {"gelu_tanh", cachet::ops::gelu_tanh, cachet::ops::ref::gelu_tanh, 2e-6, 2e-6},
    {"silu", cachet::ops::silu, cachet::ops::ref::silu, 2e-6, 2e-6},
    {"softplus", cachet::ops::softplus, cachet::ops::ref::softplus, 1e-37, 2e-6},
    {"sigmoid", cachet::ops::sigmoid, cachet::ops::ref::sigmoid, 1e-37, 2e-6},
    {"exp", cachet::ops::exp, cachet::ops::ref::exp, 1e-37, 1e-6},
};

TEST(OpsUnary, MatchesReferenceAllIsasAndLengths) {
  for (const auto& u : kUnary) {
    for (Isa isa : isas()) {
      IsaScope scope(isa);
      for (int64_t n : kLengths) {
        auto x = random_vec(n, -12.0f, 12.0f, static_cast<uint32_t>(n * 31 + 7));
        std::vector<float> got(n), want(n);
        u.fn(x.data(), got.data(), n);
        u.ref(x.data(), want.data(), n);
        expect_close(got, want, u.atol, u.rtol, x,
                     std::string(u.name) + " " + std::string(cachet::isa_name(isa)) +
                         " n=" + std::to_string(n));
      }
    }
  }
}

TEST(OpsUnary, ExtremeInputsSaturateWithoutNaN) {
  const auto x = extreme_inputs();
  const int64_t n = static_cast<int64_t>(x.size());
  for (const auto& u : kUnary) {
    for (Isa isa : isas()) {
      IsaScope scope(isa);
      std::vector<float> got(n), want(n);
      u.fn(x.data(), got.data(), n);
      u.ref(x.data(), want.data(), n);
      expect_close(got, want, u.atol, u.rtol, x,
                   std::string(u.name) + " extreme " + std::string(cachet::isa_name(isa)));
    }
  }
}

// Dense sweep of each vector path against double-precision truth.
TEST(OpsUnary, AccuracyAgainstDoubleTruth) {
  std::vector<float> x;
  for (float v = -100.0f; v <= 89.0f; v += 0.0137f) x.push_back(v);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> y(n);
  for (Isa isa : isas()) {
    IsaScope scope(isa);
    const std::string tag(cachet::isa_name(isa));
    cachet::ops::exp(x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double t = std::exp(static_cast<double>(x[i]));
      if (t < FLT_MIN || t > FLT_MAX) continue;
      ASSERT_LE(std::fabs(y[i] - t), 1e-6 * t) << tag << " exp x=" << x[i];
    }
    cachet::ops::gelu(x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double xd = x[i];
      const double t = 0.5 * xd * std::erfc(-xd / std::sqrt(2.0));
      // The reference form 1 + erf(z) loses low bits where erf(z) is near -1.
      ASSERT_LE(std::fabs(y[i] - t), 1e-6 * std::fabs(t) + 1e-7 * std::fabs(xd))
          << tag << " gelu x=" << x[i];
    }
    cachet::ops::softplus(x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double xd = x[i];
      const double t = xd > 20 ? xd : std::log1p(std::exp(xd));
      if (t < FLT_MIN) continue;
      ASSERT_LE(std::fabs(y[i] - t), 1e-6 * t) << tag << " softplus x=" << x[i];
    }
    cachet::ops::sigmoid(x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double t = 1.0 / (1.0 + std::exp(-static_cast<double>(x[i])));
      if (t < FLT_MIN) continue;
      ASSERT_LE(std::fabs(y[i] - t), 1e-6 * t) << tag << " sigmoid x=" << x[i];
    }
  }
}

TEST(OpsUnary, ClosedFormValues) {
  const std::vector<float> x = {1.0f, 0.0f, -1.0f, 100.0f, -100.0f};
  std::vector<float> y(x.size());
  for (Isa isa : isas()) {
    IsaScope scope(isa);
    const int64_t n = static_cast<int64_t>(x.size());
    cachet::ops::gelu(x.data(), y.data(), n);
    EXPECT_NEAR(y[0], 0.8413447460685429, 1e-6);
    EXPECT_EQ(y[1], 0.0f);
    EXPECT_NEAR(y[2], -0.15865525393145707, 1e-6);
    EXPECT_NEAR(y[3], 100.0f, 1e-4);
    EXPECT_NEAR(y[4], 0.0f, 1e-30);
    cachet::ops::gelu_tanh(x.data(), y.data(), n);
    EXPECT_NEAR(y[0], 0.8411919906082768, 1e-6);
    EXPECT_EQ(y[1], 0.0f);
    cachet::ops::silu(x.data(), y.data(), n);
    EXPECT_NEAR(y[0], 0.7310585786300049, 1e-6);
    EXPECT_NEAR(y[2], -0.2689414213699951, 1e-6);
    EXPECT_NEAR(y[3], 100.0f, 1e-4);
    cachet::ops::sigmoid(x.data(), y.data(), n);
    EXPECT_EQ(y[1], 0.5f);
    EXPECT_EQ(y[3], 1.0f);
    EXPECT_GE(y[4], 0.0f);  // e^100 overflows f32, so 1 / (1 + e^100) is 0
    EXPECT_LT(y[4], 1e-40f);
    cachet::ops::softplus(x.data(), y.data(), n);
    EXPECT_NEAR(y[0], 1.3132616875182228, 1e-6);
    EXPECT_NEAR(y[1], 0.6931471805599453, 1e-6);
    EXPECT_EQ(y[3], 100.0f);
    EXPECT_GE(y[4], 0.0f);
    EXPECT_LT(y[4], 1e-40f);
    cachet::ops::exp(x.data(), y.data(), n);
    EXPECT_NEAR(y[0], 2.718281828459045, 3e-7);
    EXPECT_EQ(y[1], 1.0f);
    EXPECT_TRUE(std::isinf(y[3]));
    EXPECT_NEAR(y[4], 3.720075976020836e-44, 1e-44);  // denormal, not flushed
  }
}

TEST(OpsNorm, RmsNormMatchesReference) {
  for (Isa isa : isas()) {
    IsaScope scope(isa);
    for (int64_t n : kLengths) {
      const auto x = random_vec(n, -3.0f, 3.0f, 11 + static_cast<uint32_t>(n));
      const auto w = random_vec(n, -1.0f, 1.0f, 12 + static_cast<uint32_t>(n));
      for (int mode = 0; mode < 3; ++mode) {
        const float* wp = mode == 0 ? nullptr : w.data();
        const bool one_plus = mode == 2;
        std::vector<float> got(n), want(n);
        cachet::ops::rmsnorm(x.data(), wp, got.data(), n, 1e-6f, one_plus);
        cachet::ops::ref::rmsnorm(x.data(), wp, want.data(), n, 1e-6f, one_plus);
        expect_close(got, want, 1e-6, 2e-6, x,
                     "rmsnorm " + std::string(cachet::isa_name(isa)) + " mode " +
                         std::to_string(mode) + " n=" + std::to_string(n));
      }
    }
  }
}

TEST(OpsNorm, RmsNormClosedForm) {
  // x = (3, 4): mean square 12.5, so y = x / sqrt(12.5); with one_plus and w = 1, doubled.
  const float x[2] = {3.0f, 4.0f}, w[2] = {1.0f, 1.0f};
  float y[2];
  for (Isa isa : isas()) {
    IsaScope scope(isa);
    cachet::ops::rmsnorm(x, w, y, 2, 0.0f, true);
    EXPECT_NEAR(y[0], 2 * 3 / std::sqrt(12.5), 1e-6);
    EXPECT_NEAR(y[1], 2 * 4 / std::sqrt(12.5), 1e-6);
    cachet::ops::rmsnorm(x, nullptr, y, 2, 0.0f, false);
    EXPECT_NEAR(y[0], 3 / std::sqrt(12.5), 1e-6);
  }
}

TEST(OpsNorm, LayerNormMatchesReference) {
  for (Isa isa : isas()) {
    IsaScope scope(isa);
    for (int64_t n : kLengths) {
      const auto x = random_vec(n, 2.0f, 6.0f, 21 + static_cast<uint32_t>(n));
      const auto w = random_vec(n, -1.0f, 1.0f, 22 + static_cast<uint32_t>(n));
      const auto b = random_vec(n, -1.0f, 1.0f, 23 + static_cast<uint32_t>(n));
      for (int mode = 0; mode < 2; ++mode) {
        const float* wp = mode ? w.data() : nullptr;
        const float* bp = mode ? b.data() : nullptr;
        std::vector<float> got(n), want(n);
        cachet::ops::layernorm(x.data(), wp, bp, got.data(), n, 1e-5f);
        cachet::ops::ref::layernorm(x.data(), wp, bp, want.data(), n, 1e-5f);
        expect_close(got, want, 1e-5, 1e-5, x,
                     "layernorm " + std::string(cachet::isa_name(isa)) + " n=" + std::to_string(n));
      }
    }
  }
}

TEST(OpsNorm, LayerNormClosedForm) {
  const float x[4] = {1.0f, 2.0f, 3.0f, 4.0f};  // mean 2.5, variance 1.25
  float y[4];
  for (Isa isa : isas()) {
    IsaScope scope(isa);
    cachet::ops::layernorm(x, nullptr, nullptr, y, 4, 0.0f);
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], (x[i] - 2.5) / std::sqrt(1.25), 1e-6);
  }
}

TEST(OpsSoftmax, MatchesReferenceAndSumsToOne) {
  for (Isa isa : isas()) {
    IsaScope scope(isa);
    for (int64_t n : kLengths) {
      for (float range : {1.0f, 30.0f, 1e4f}) {
        auto x = random_vec(n, -range, range, 31 + static_cast<uint32_t>(n));
        auto got = x, want = x;
        cachet::ops::softmax(got.data(), n);
        cachet::ops::ref::softmax(want.data(), n);
        expect_close(got, want, 1e-7, 4e-6, x,
                     "softmax " + std::string(cachet::isa_name(isa)) + " n=" + std::to_string(n));
        double s = 0;
        for (float v : got) s += v;
        EXPECT_NEAR(s, 1.0, 1e-5);
      }
    }
  }
}

TEST(OpsSoftmax, MaskedEntries) {
  const float ninf = -std::numeric_limits<float>::infinity();
  for (Isa isa : isas()) {
    IsaScope scope(isa);
    std::vector<float> x(19, ninf);
    x[3] = 0.0f;
    x[17] = 0.0f;
    cachet::ops::softmax(x.data(), 19);
    for (int i = 0; i < 19; ++i) EXPECT_EQ(x[i], (i == 3 || i == 17) ? 0.5f : 0.0f) << i;
    std::vector<float> all(9, ninf);
    cachet::ops::softmax(all.data(), 9);
    for (float v : all) EXPECT_EQ(v, 0.0f);
  }
}

TEST(OpsBlas, ElementwiseExactAndDotAxpyClose) {
  for (Isa isa : isas()) {
    IsaScope scope(isa);
    const std::string tag(cachet::isa_name(isa));
    for (int64_t n : kLengths) {
      const auto a = random_vec(n, -2.0f, 2.0f, 41 + static_cast<uint32_t>(n));
      const auto b = random_vec(n, -2.0f, 2.0f, 42 + static_cast<uint32_t>(n));
      std::vector<float> got(n), want(n);
      cachet::ops::add(a.data(), b.data(), got.data(), n);
      cachet::ops::ref::add(a.data(), b.data(), want.data(), n);
      EXPECT_EQ(got, want) << tag << " add n=" << n;
      cachet::ops::mul(a.data(), b.data(), got.data(), n);
      cachet::ops::ref::mul(a.data(), b.data(), want.data(), n);
      EXPECT_EQ(got, want) << tag << " mul n=" << n;
      cachet::ops::scale(a.data(), -0.37f, got.data(), n);
      cachet::ops::ref::scale(a.data(), -0.37f, want.data(), n);
      EXPECT_EQ(got, want) << tag << " scale n=" << n;
      // In place is allowed for the element-wise ops.
      auto inplace = a;
      cachet::ops::add(inplace.data(), b.data(), inplace.data(), n);
      cachet::ops::ref::add(a.data(), b.data(), want.data(), n);
      EXPECT_EQ(inplace, want) << tag << " add in place n=" << n;

      got = b;
      want = b;
      cachet::ops::axpy(0.73f, a.data(), got.data(), n);
      cachet::ops::ref::axpy(0.73f, a.data(), want.data(), n);
      expect_close(got, want, 1e-6, 1e-6, a, tag + " axpy n=" + std::to_string(n));

      double mag = 0;
      for (int64_t i = 0; i < n; ++i) mag += std::fabs(static_cast<double>(a[i]) * b[i]);
      const float d = cachet::ops::dot(a.data(), b.data(), n);
      const float dr = cachet::ops::ref::dot(a.data(), b.data(), n);
      EXPECT_NEAR(d, dr, 1e-6 * mag + 1e-7) << tag << " dot n=" << n;
    }
  }
  const float a[3] = {1, 2, 3}, b[3] = {4, 5, 6};
  EXPECT_EQ(cachet::ops::dot(a, b, 3), 32.0f);
}

// Values from PyTorch: inv_freq = 1 / (theta ** (arange(0, rot, 2).float() / rot)), angles
// pos * inv_freq, x * cos + rotate_half(x) * sin (neox); pairs (2j, 2j+1) for interleaved.
// Input x[i] = i * 0.1 - 0.7 (f32), 16 dims.
std::vector<float> rope_input() {
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i) * 0.1f - 0.7f;
  return x;
}

void expect_rope(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-6) << what << " " << i;
}

TEST(OpsRope, NeoxMatchesPytorch) {
  for (Isa isa : isas()) {
    IsaScope scope(isa);
    auto x = rope_input();
    cachet::ops::rope_neox(x.data(), 16, 7, 10000.0f);
    expect_rope(x,
                {-5.934302807e-01f, 1.995781213e-01f, -5.756863952e-01f, -4.780623913e-01f,
                 -3.342367113e-01f, -2.132314742e-01f, -1.048974693e-01f, -1.770874136e-03f,
                 -3.845003545e-01f, -6.001404524e-01f, -9.265616536e-02f, 3.024175465e-01f,
                 4.777927101e-01f, 5.954262614e-01f, 6.992828250e-01f, 7.999980450e-01f},
                "neox pos 7");
    x = rope_input();
    cachet::ops::rope_neox(x.data(), 8, 123, 10000.0f);  // partial: dims 8..15 untouched
    expect_rope(x,
                {4.836071730e-01f, -6.314859390e-01f, -7.287001610e-02f, -3.969779909e-01f,
                 5.883231163e-01f, -3.500756621e-02f, -5.046681762e-01f, -4.907603562e-02f,
                 1.000000238e-01f, 2.000000477e-01f, 3.000000119e-01f, 4.000000358e-01f,
                 5.000000596e-01f, 6.000000834e-01f, 6.999999881e-01f, 8.000000119e-01f},
                "neox partial pos 123");
    x = rope_input();
    cachet::ops::rope_neox(x.data(), 16, 4095, 500000.0f);
    expect_rope(x,
                {1.459653378e-01f, 3.250665963e-01f, 5.167248845e-01f, 3.925995529e-01f,
                 -2.823297679e-02f, -6.274418235e-01f, -2.488845289e-01f, -3.377660736e-02f,
                 6.918772459e-01f, -5.425234437e-01f, -2.701765895e-01f, 4.072659910e-01f,
                 5.824113488e-01f, 7.947844267e-02f, 6.618583202e-01f, 7.992866635e-01f},
                "neox pos 4095 theta 5e5");
  }
}

TEST(OpsRope, InterleavedMatchesPytorch) {
  auto x = rope_input();
  cachet::ops::rope_interleaved(x.data(), 16, 1000, 10000.0f);
  expect_rope(x,
              {1.024623513e-01f, -9.162430763e-01f, 5.901738405e-01f, -2.483844459e-01f,
               -3.599687517e-01f, -2.055406570e-02f, -9.786820412e-02f, -2.053793706e-02f,
               2.489707619e-02f, -2.222164720e-01f, -2.916623354e-01f, -4.061196148e-01f,
               -2.347314358e-01f, 7.449169755e-01f, 4.165037274e-01f, 9.780207872e-01f},
              "interleaved pos 1000");
}

TEST(OpsRope, PositionZeroIsIdentityAndNormPreserved) {
  auto x = rope_input();
  const auto x0 = x;
  cachet::ops::rope_neox(x.data(), 16, 0, 10000.0f);
  EXPECT_EQ(x, x0);
  cachet::ops::rope_interleaved(x.data(), 16, 0, 10000.0f);
  EXPECT_EQ(x, x0);
  cachet::ops::rope_interleaved(x.data(), 16, 77, 10000.0f);
  for (int j = 0; j < 8; ++j) {
    const double r0 = std::hypot(x0[2 * j], x0[2 * j + 1]);
    EXPECT_NEAR(std::hypot(x[2 * j], x[2 * j + 1]), r0, 1e-6);
  }
  for (Isa isa : isas()) {
    IsaScope scope(isa);
    auto y = rope_input(), z = rope_input();
    cachet::ops::rope_neox(y.data(), 16, 31, 10000.0f);
    cachet::ops::ref::rope_neox(z.data(), 16, 31, 10000.0f);
    EXPECT_EQ(y, z);
  }
}

TEST(OpsConv, DepthwiseMatchesReferenceAndDefinition) {
  for (Isa isa : isas()) {
    IsaScope scope(isa);
    for (int64_t C : kLengths) {
      for (int64_t K : {1, 4, 5}) {
        for (int64_t T : {1, 6}) {
          const uint32_t seed = static_cast<uint32_t>(C * 100 + K * 10 + T);
          const auto hist = random_vec((K - 1) * C, -1.0f, 1.0f, seed);
          const auto x = random_vec(T * C, -1.0f, 1.0f, seed + 1);
          const auto w = random_vec(C * K, -1.0f, 1.0f, seed + 2);
          const auto b = random_vec(C, -1.0f, 1.0f, seed + 3);
          for (bool with_bias : {false, true}) {
            const float* bp = with_bias ? b.data() : nullptr;
            std::vector<float> got(T * C), want(T * C);
            cachet::ops::conv1d_depthwise(hist.data(), x.data(), w.data(), bp, got.data(), T, C, K);
            cachet::ops::ref::conv1d_depthwise(hist.data(), x.data(), w.data(), bp, want.data(), T,
                                               C, K);
            expect_close(got, want, 1e-6, 1e-6, x,
                         "conv " + std::string(cachet::isa_name(isa)) + " C=" + std::to_string(C) +
                             " K=" + std::to_string(K));
            // Straight from the definition, in double.
            for (int64_t t = 0; t < T; ++t) {
              for (int64_t c = 0; c < C; ++c) {
                double s = with_bias ? b[c] : 0.0;
                for (int64_t k = 0; k < K; ++k) {
                  const int64_t src = t - (K - 1) + k;
                  const double u = src < 0 ? hist[(K - 1 + src) * C + c] : x[src * C + c];
                  s += w[c * K + k] * u;
                }
                ASSERT_NEAR(got[t * C + c], s, 1e-5) << "t=" << t << " c=" << c;
              }
            }
          }
        }
      }
    }
  }
}

TEST(OpsConv, HistoryFeedsFirstSteps) {
  // K = 3, C = 1: y[0] = w0 h0 + w1 h1 + w2 x0; y[1] = w0 h1 + w1 x0 + w2 x1.
  const float hist[2] = {1.0f, 2.0f}, x[2] = {3.0f, 4.0f}, w[3] = {10.0f, 100.0f, 1000.0f};
  float y[2];
  for (Isa isa : isas()) {
    IsaScope scope(isa);
    cachet::ops::conv1d_depthwise(hist, x, w, nullptr, y, 2, 1, 3);
    EXPECT_EQ(y[0], 10.0f + 200.0f + 3000.0f);
    EXPECT_EQ(y[1], 20.0f + 300.0f + 4000.0f);
  }
}

TEST(OpsIsa, SetIsaRestores) {
  const Isa before = cachet::active_isa();
  {
    IsaScope scope(Isa::Scalar);
    EXPECT_EQ(cachet::active_isa(), Isa::Scalar);
  }
  EXPECT_EQ(cachet::active_isa(), before);
}

}  // namespace

// Attention over a strided cache: dot_rows and axpy_rows give exactly what the loops of dot
// and axpy give on each path (so models may use either), and stay close to the reference.
TEST(OpsBlas, DotRowsAndAxpyRowsEqualTheirLoops) {
  for (Isa isa : isas()) {
    IsaScope scope(isa);
    const std::string tag(cachet::isa_name(isa));
    for (int64_t n : {1, 17, 64, 128, 200, 256}) {
      const int64_t count = 37, stride = n + 23;
      const auto q = random_vec(n, -2.0f, 2.0f, 7 + static_cast<uint32_t>(n));
      const auto cache = random_vec(count * stride, -2.0f, 2.0f, 8 + static_cast<uint32_t>(n));
      const auto w = random_vec(count, 0.0f, 1.0f, 9);
      std::vector<float> got(count), want(count), ref(count);
      cachet::ops::dot_rows(q.data(), cache.data(), stride, count, n, 0.25f, got.data());
      cachet::ops::ref::dot_rows(q.data(), cache.data(), stride, count, n, 0.25f, ref.data());
      for (int64_t j = 0; j < count; ++j) {
        want[j] = cachet::ops::dot(q.data(), cache.data() + j * stride, n) * 0.25f;
        EXPECT_NEAR(got[j], ref[j], 1e-5 * n) << tag << " dot_rows n=" << n << " j=" << j;
      }
      EXPECT_EQ(got, want) << tag << " dot_rows n=" << n;

      std::vector<float> y1(q), y2(q), yr(q);
      cachet::ops::axpy_rows(w.data(), cache.data(), stride, count, n, y1.data());
      cachet::ops::ref::axpy_rows(w.data(), cache.data(), stride, count, n, yr.data());
      for (int64_t j = 0; j < count; ++j)
        cachet::ops::axpy(w[j], cache.data() + j * stride, y2.data(), n);
      EXPECT_EQ(y1, y2) << tag << " axpy_rows n=" << n;
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y1[i], yr[i], 1e-4) << tag << " axpy_rows";
    }
  }
}

// The multi-head forms give each head exactly what dot_rows / axpy_rows give it alone, for
// head counts below, at and past a block of heads, with tails of columns and of tiles of rows.
TEST(OpsBlas, RowsForSeveralHeadsEqualOneHeadAtATime) {
  // got equals want exactly, and the reference within tol.
  auto check = [](const std::vector<float>& got, const std::vector<float>& want,
                  const std::vector<float>& ref, double tol, const std::string& what) {
    EXPECT_EQ(got, want) << what;
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], ref[i], tol) << what << " i=" << i;
  };
  for (Isa isa : isas()) {
    IsaScope scope(isa);
    for (int64_t n : {1, 17, 64, 200, 256}) {
      for (int64_t nh : {1, 2, 3, 5, 7, 10, 13}) {
        const std::string tag = std::string(cachet::isa_name(isa)) + " n=" + std::to_string(n) +
                                " heads=" + std::to_string(nh);
        const int64_t count = 71, stride = n + 5, q_stride = n + 3, o_stride = count + 2;
        const uint32_t seed = static_cast<uint32_t>(100 * n + nh);
        const auto q = random_vec(nh * q_stride, -2.0f, 2.0f, seed);
        const auto cache = random_vec(count * stride, -2.0f, 2.0f, seed + 1);
        const auto w = random_vec(nh * o_stride, 0.0f, 1.0f, seed + 2);
        const auto y0 = random_vec(nh * q_stride, -1.0f, 1.0f, seed + 3);
        std::vector<float> got(nh * o_stride, -7.0f), want(got), ref(got);
        cachet::ops::dot_rows_heads(q.data(), nh, q_stride, cache.data(), stride, count, n, 0.5f,
                                    got.data(), o_stride);
        cachet::ops::ref::dot_rows_heads(q.data(), nh, q_stride, cache.data(), stride, count, n,
                                         0.5f, ref.data(), o_stride);
        for (int64_t h = 0; h < nh; ++h)
          cachet::ops::dot_rows(q.data() + h * q_stride, cache.data(), stride, count, n, 0.5f,
                                want.data() + h * o_stride);
        check(got, want, ref, 1e-5 * n, tag + " dot_rows_heads");

        std::vector<float> y1(y0), y2(y0), yr(y0);
        cachet::ops::axpy_rows_heads(w.data(), nh, o_stride, cache.data(), stride, count, n,
                                     y1.data(), q_stride);
        cachet::ops::ref::axpy_rows_heads(w.data(), nh, o_stride, cache.data(), stride, count, n,
                                          yr.data(), q_stride);
        for (int64_t h = 0; h < nh; ++h)
          cachet::ops::axpy_rows(w.data() + h * o_stride, cache.data(), stride, count, n,
                                 y2.data() + h * q_stride);
        check(y1, y2, yr, 1e-4, tag + " axpy_rows_heads");

        // bf16 rows: exactly the f32 forms on the widened rows
        std::vector<uint16_t> bf(cache.size());
        std::vector<float> widened(cache.size());
        for (size_t i = 0; i < cache.size(); ++i) {
          bf[i] = cachet::f32_to_bf16(cache[i]);
          widened[i] = cachet::bf16_to_f32(bf[i]);
        }
        std::vector<float> gb(got.size(), -7.0f), wb(gb), rb(gb);
        cachet::ops::dot_rows_heads_bf16(q.data(), nh, q_stride, bf.data(), stride, count, n, 0.5f,
                                         gb.data(), o_stride);
        cachet::ops::dot_rows_heads(q.data(), nh, q_stride, widened.data(), stride, count, n, 0.5f,
                                    wb.data(), o_stride);
        cachet::ops::ref::dot_rows_heads_bf16(q.data(), nh, q_stride, bf.data(), stride, count, n,
                                              0.5f, rb.data(), o_stride);
        check(gb, wb, rb, 1e-5 * n, tag + " dot_rows_heads_bf16");
        std::vector<float> z1(y0), z2(y0), zr(y0);
        cachet::ops::axpy_rows_heads_bf16(w.data(), nh, o_stride, bf.data(), stride, count, n,
                                          z1.data(), q_stride);
        cachet::ops::axpy_rows_heads(w.data(), nh, o_stride, widened.data(), stride, count, n,
                                     z2.data(), q_stride);
        cachet::ops::ref::axpy_rows_heads_bf16(w.data(), nh, o_stride, bf.data(), stride, count, n,
                                               zr.data(), q_stride);
        check(z1, z2, zr, 1e-4, tag + " axpy_rows_heads_bf16");
      }
    }
  }
}

TEST(OpsBlas, AxpyRowsBf16EqualsAxpyRowsOnWidenedRows) {
  for (Isa isa : isas()) {
    IsaScope scope(isa);
    const std::string tag(cachet::isa_name(isa));
    for (int64_t n : {1, 17, 64, 128, 200, 256}) {
      const int64_t count = 37, stride = n + 23;
      const auto f = random_vec(count * stride, -2.0f, 2.0f, 18 + static_cast<uint32_t>(n));
      std::vector<uint16_t> bf(f.size());
      std::vector<float> widened(f.size());
      for (size_t i = 0; i < f.size(); ++i) {
        bf[i] = cachet::f32_to_bf16(f[i]);
        widened[i] = cachet::bf16_to_f32(bf[i]);
      }
      const auto w = random_vec(count, 0.0f, 1.0f, 19);
      const auto y0 = random_vec(n, -1.0f, 1.0f, 20);
      std::vector<float> got(y0), want(y0), ref(y0);
      cachet::ops::axpy_rows_bf16(w.data(), bf.data(), stride, count, n, got.data());
      cachet::ops::axpy_rows(w.data(), widened.data(), stride, count, n, want.data());
      cachet::ops::ref::axpy_rows_bf16(w.data(), bf.data(), stride, count, n, ref.data());
      EXPECT_EQ(got, want) << tag << " axpy_rows_bf16 n=" << n;
      for (int64_t i = 0; i < n; ++i)
        EXPECT_NEAR(got[i], ref[i], 1e-4) << tag << " axpy_rows_bf16 n=" << n << " i=" << i;
    }
  }
}

// Int8 rows with a scale each (MetaVoice's 8-bit cache): every ISA gives exactly the
// reference's outputs (exact integer scores, the same fused multiply-adds), for rows of one
// vector to several tiles and with tails; both stay close to the f32 forms on the dequantized
// rows, and quantize_i8 rounds each value to within half a step.
TEST(OpsBlas, Int8RowsMatchReferenceAndDequantizedRows) {
  for (Isa isa : isas()) {
    IsaScope scope(isa);
    const std::string tag(cachet::isa_name(isa));
    for (int64_t n : {1, 8, 17, 64, 100, 128, 256, 300, 512}) {
      const int64_t count = 43, stride = n + 9;
      const auto f = random_vec(count * stride, -3.0f, 3.0f, 41 + static_cast<uint32_t>(n));
      std::vector<int8_t> rows(static_cast<size_t>(count * stride), 0);
      std::vector<float> scales(static_cast<size_t>(count)), deq(f.size(), 0.0f);
      for (int64_t j = 0; j < count; ++j) {
        const float* x = f.data() + j * stride;
        const float s = cachet::ops::quantize_i8(x, n, rows.data() + j * stride);
        scales[static_cast<size_t>(j)] = s;
        std::vector<int8_t> rq(static_cast<size_t>(n));
        ASSERT_EQ(cachet::ops::ref::quantize_i8(x, n, rq.data()), s) << tag << " n=" << n;
        ASSERT_TRUE(std::equal(rq.begin(), rq.end(), rows.begin() + j * stride))
            << tag << " quantize_i8 n=" << n << " row " << j;
        for (int64_t i = 0; i < n; ++i) {
          deq[static_cast<size_t>(j * stride + i)] = s * rows[static_cast<size_t>(j * stride + i)];
          ASSERT_LE(std::fabs(deq[static_cast<size_t>(j * stride + i)] - x[i]), 0.5f * s * 1.0001f)
              << "quantize_i8 n=" << n;
        }
      }
      const auto q = random_vec(n, -2.0f, 2.0f, 42);
      std::vector<float> got(static_cast<size_t>(count)), ref(got), want(got);
      cachet::ops::dot_rows_i8(q.data(), rows.data(), scales.data(), stride, count, n, 0.25f,
                               got.data());
      cachet::ops::ref::dot_rows_i8(q.data(), rows.data(), scales.data(), stride, count, n, 0.25f,
                                    ref.data());
      cachet::ops::dot_rows(q.data(), deq.data(), stride, count, n, 0.25f, want.data());
      EXPECT_EQ(got, ref) << tag << " dot_rows_i8 n=" << n;
      for (int64_t j = 0; j < count; ++j)
        EXPECT_NEAR(got[j], want[j], 1e-4 * n) << tag << " dot_rows_i8 n=" << n << " j=" << j;

      const auto w = random_vec(count, 0.0f, 1.0f, 43);
      const auto y0 = random_vec(n, -1.0f, 1.0f, 44);
      std::vector<float> y(y0), yr(y0), yw(y0);
      cachet::ops::axpy_rows_i8(w.data(), rows.data(), scales.data(), stride, count, n, y.data());
      cachet::ops::ref::axpy_rows_i8(w.data(), rows.data(), scales.data(), stride, count, n,
                                     yr.data());
      cachet::ops::axpy_rows(w.data(), deq.data(), stride, count, n, yw.data());
      EXPECT_EQ(y, yr) << tag << " axpy_rows_i8 n=" << n;
      for (int64_t i = 0; i < n; ++i)
        EXPECT_NEAR(y[i], yw[i], 1e-4) << tag << " axpy_rows_i8 n=" << n << " i=" << i;

      // Two heads side by side (the second over the rows from the second on): each exactly
      // what the one-head forms give.
      const int64_t c2 = count - 1;
      const auto q2 = random_vec(n, -2.0f, 2.0f, 45);
      const float* qs[2] = {q.data(), q2.data()};
      const int8_t* rs[2] = {rows.data(), rows.data() + stride};
      const float* ss[2] = {scales.data(), scales.data() + 1};
      std::vector<float> o0(static_cast<size_t>(c2)), o1(o0), s0(o0), s1(o0);
      float* os[2] = {o0.data(), o1.data()};
      cachet::ops::dot_rows_i8_x2(qs, rs, ss, stride, c2, n, 0.25f, os);
      cachet::ops::dot_rows_i8(qs[0], rs[0], ss[0], stride, c2, n, 0.25f, s0.data());
      cachet::ops::dot_rows_i8(qs[1], rs[1], ss[1], stride, c2, n, 0.25f, s1.data());
      EXPECT_EQ(o0, s0) << tag << " dot_rows_i8_x2 n=" << n;
      EXPECT_EQ(o1, s1) << tag << " dot_rows_i8_x2 n=" << n;
      const float* ws[2] = {w.data(), w.data() + 1};
      std::vector<float> z0(y0), z1(y0), u0(y0), u1(y0);
      float* zs[2] = {z0.data(), z1.data()};
      cachet::ops::axpy_rows_i8_x2(ws, rs, ss, stride, c2, n, zs);
      cachet::ops::axpy_rows_i8(ws[0], rs[0], ss[0], stride, c2, n, u0.data());
      cachet::ops::axpy_rows_i8(ws[1], rs[1], ss[1], stride, c2, n, u1.data());
      EXPECT_EQ(z0, u0) << tag << " axpy_rows_i8_x2 n=" << n;
      EXPECT_EQ(z1, u1) << tag << " axpy_rows_i8_x2 n=" << n;
    }
    // A zero query gives zero scores; a zero row quantizes to zeros with scale 0.
    std::vector<float> zq(64, 0.0f), out(2, 1.0f), zs(2, 1.0f);
    std::vector<int8_t> r(128, 5);
    cachet::ops::dot_rows_i8(zq.data(), r.data(), zs.data(), 64, 2, 64, 1.0f, out.data());
    EXPECT_EQ(out, std::vector<float>(2, 0.0f)) << tag;
    EXPECT_EQ(cachet::ops::quantize_i8(zq.data(), 64, r.data()), 0.0f);
    EXPECT_EQ(r[0], 0);
  }
  std::vector<float> big(513, 1.0f), out(1);
  std::vector<int8_t> r(513, 1);
  EXPECT_THROW(
      cachet::ops::dot_rows_i8(big.data(), r.data(), big.data(), 513, 1, 513, 1.0f, out.data()),
      cachet::Error);
}

// One query over bf16 key rows (MetaVoice's attention scores): its own order of summation, so
// close to the reference and to one head of dot_rows_heads_bf16, for rows shorter than a
// vector, with tails, and longer than the split q it keeps on the stack.
TEST(OpsBlas, DotRowsBf16CloseToReference) {
  for (Isa isa : isas()) {
    IsaScope scope(isa);
    const std::string tag(cachet::isa_name(isa));
    for (int64_t n : {1, 17, 32, 64, 96, 128, 200, 256, 1000, 1100}) {
      const int64_t count = 37, stride = n + 23;
      const auto q = random_vec(n, -2.0f, 2.0f, 27 + static_cast<uint32_t>(n));
      const auto f = random_vec(count * stride, -2.0f, 2.0f, 28 + static_cast<uint32_t>(n));
      std::vector<uint16_t> bf(f.size());
      for (size_t i = 0; i < f.size(); ++i) bf[i] = cachet::f32_to_bf16(f[i]);
      std::vector<float> got(count + 1, -7.0f), heads(count), ref(count);
      cachet::ops::dot_rows_bf16(q.data(), bf.data(), stride, count, n, 0.25f, got.data());
      cachet::ops::dot_rows_heads_bf16(q.data(), 1, n, bf.data(), stride, count, n, 0.25f,
                                       heads.data(), count);
      cachet::ops::ref::dot_rows_bf16(q.data(), bf.data(), stride, count, n, 0.25f, ref.data());
      EXPECT_EQ(got[count], -7.0f) << tag << " wrote past count";
      for (int64_t j = 0; j < count; ++j) {
        double mag = 0;
        for (int64_t i = 0; i < n; ++i)
          mag += std::fabs(double(q[i]) * cachet::bf16_to_f32(bf[j * stride + i]));
        // f32 rounding of differently ordered sums: a few ulps of sum |q k| per 8 terms
        const double tol = 0.25 * mag * (double(n) / 8 + 16) * FLT_EPSILON + 1e-30;
        EXPECT_NEAR(got[j], ref[j], tol) << tag << " n=" << n << " j=" << j;
        EXPECT_NEAR(got[j], heads[j], tol) << tag << " n=" << n << " j=" << j;
      }
    }
  }
}

// Two heads over their own rows in one pass give each head exactly what it gets alone.
TEST(OpsBlas, TwoHeadsSideBySideEqualOneAtATime) {
  for (Isa isa : isas()) {
    IsaScope scope(isa);
    const std::string tag(cachet::isa_name(isa));
    for (int64_t n : {1, 17, 64, 128, 200, 256}) {
      const int64_t count = 37, stride = n + 23;
      std::vector<uint16_t> k[2], v[2];
      std::vector<float> q[2], w[2], vf32[2];
      for (int a = 0; a < 2; ++a) {
        const uint32_t seed = 40 + 10 * static_cast<uint32_t>(a) + static_cast<uint32_t>(n);
        const auto kf = random_vec(count * stride, -2.0f, 2.0f, seed);
        const auto vf = random_vec(count * stride, -2.0f, 2.0f, seed + 1);
        for (float f : kf) k[a].push_back(cachet::f32_to_bf16(f));
        for (float f : vf) v[a].push_back(cachet::f32_to_bf16(f));
        vf32[a] = vf;
        q[a] = random_vec(n, -2.0f, 2.0f, seed + 2);
        w[a] = random_vec(count, 0.0f, 1.0f, seed + 3);
      }
      std::vector<float> s2[2], s1[2], y2[2], y1[2], f2[2], f1[2];
      for (int a = 0; a < 2; ++a) {
        s2[a].assign(count, -7.0f), s1[a] = s2[a];
        y2[a] = random_vec(n, -1.0f, 1.0f, 60 + static_cast<uint32_t>(a)), y1[a] = y2[a];
        f2[a] = y2[a], f1[a] = y2[a];
        cachet::ops::axpy_rows(w[a].data(), vf32[a].data(), stride, count, n, f1[a].data());
        cachet::ops::dot_rows_bf16(q[a].data(), k[a].data(), stride, count, n, 0.5f, s1[a].data());
        cachet::ops::axpy_rows_bf16(w[a].data(), v[a].data(), stride, count, n, y1[a].data());
      }
      const float* qp[2] = {q[0].data(), q[1].data()};
      const uint16_t* kp[2] = {k[0].data(), k[1].data()};
      const uint16_t* vp[2] = {v[0].data(), v[1].data()};
      const float* wp[2] = {w[0].data(), w[1].data()};
      float* sp[2] = {s2[0].data(), s2[1].data()};
      float* yp[2] = {y2[0].data(), y2[1].data()};
      cachet::ops::dot_rows_bf16_x2(qp, kp, stride, count, n, 0.5f, sp);
      cachet::ops::axpy_rows_bf16_x2(wp, vp, stride, count, n, yp);
      const float* vfp[2] = {vf32[0].data(), vf32[1].data()};
      float* fp[2] = {f2[0].data(), f2[1].data()};
      cachet::ops::axpy_rows_x2(wp, vfp, stride, count, n, fp);
      for (int a = 0; a < 2; ++a) {
        EXPECT_EQ(s2[a], s1[a]) << tag << " dot_rows_bf16_x2 n=" << n << " head " << a;
        EXPECT_EQ(y2[a], y1[a]) << tag << " axpy_rows_bf16_x2 n=" << n << " head " << a;
        EXPECT_EQ(f2[a], f1[a]) << tag << " axpy_rows_x2 n=" << n << " head " << a;
      }
    }
  }
}

TEST(OpsMath, SoftcapCloseToTanh) {
  for (Isa isa : isas()) {
    IsaScope scope(isa);
    const auto x = random_vec(1000, -400.0f, 400.0f, 77);
    std::vector<float> got(x.size()), want(x.size());
    for (float cap : {30.0f, 50.0f}) {
      cachet::ops::softcap(x.data(), cap, got.data(), 1000);
      cachet::ops::ref::softcap(x.data(), cap, want.data(), 1000);
      for (size_t i = 0; i < x.size(); ++i) {
        EXPECT_NEAR(got[i], want[i], 1e-6 * cap) << cachet::isa_name(isa) << " x=" << x[i];
        EXPECT_LE(std::fabs(got[i]), cap);
      }
    }
  }
}
