// matvec: every SIMD path against the scalar reference, thread-count independence, bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cachet/cpu.h"
#include "cachet/error.h"
#include "cachet/kernels.h"
#include "cachet/quant.h"
#include "cachet/threadpool.h"
#include "kernels/vecdot.h"

using namespace cachet;

namespace {

const DType kTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                        DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q8_1, DType::Q2_K,
                        DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K};

std::vector<Isa> isas() {
  std::vector<Isa> v;
  for (Isa i : {Isa::Avx2, Isa::Avx512})
    if (i <= best_isa()) v.push_back(i);
  return v;
}

std::vector<float> random_vec(size_t n, uint32_t seed, float outlier_prob = 0.01f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& f : v) f = nd(rng) * (u(rng) < outlier_prob ? 8.0f : 1.0f);
  return v;
}

struct Mat {
  std::vector<uint8_t> bytes;
  std::vector<float> deq;  // dequantized values, rows * cols
  MatView view;
};

// A [rows, cols] matrix of type t with rows `pad` bytes longer than needed.
Mat make_mat(DType t, int64_t rows, int64_t cols, uint32_t seed, size_t pad = 0) {
  Mat m;
  const size_t rb = row_bytes(t, cols), stride = rb + pad;
  m.bytes.assign(stride * rows + 1, 0xAB);
  m.deq.resize(static_cast<size_t>(rows * cols));
  const auto src = random_vec(static_cast<size_t>(rows * cols), seed);
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row(t, src.data() + r * cols, m.bytes.data() + r * stride, cols);
    dequantize_row(t, m.bytes.data() + r * stride, m.deq.data() + r * cols, cols);
  }
  m.view = MatView{t, rows, cols, m.bytes.data(), stride};  // padded rows: stride != row size
  return m;
}

// Block size over which the SIMD kernels quantize x (0: x used exactly).
int64_t x_block(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
      return 0;
    default:
      return dtype_info(t).block_elems;
  }
}

// Bound on |y_simd - y_ref| for row r. Quantizing x in blocks with scale max|x|/127 and
// rounding to nearest moves each x_c by at most max_block|x| / 254 (BF16: see below); f32
// accumulation adds at most about (cols / 8 + 16) ulps of sum |w x| (8-lane partial sums, then a
// reduction).
double bound(DType t, const Mat& m, const std::vector<float>& x, int64_t r) {
  const int64_t cols = m.view.cols, qb = x_block(t);
  double quant = 0, mag = 0;
  for (int64_t c0 = 0; c0 < cols; c0 += (qb ? qb : cols)) {
    const int64_t c1 = qb ? c0 + qb : cols;
    double amax = 0;
    for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(double(x[c])));
    for (int64_t c = c0; c < c1; ++c) {
      const double w = std::fabs(double(m.deq[r * cols + c]));
      mag += w * std::fabs(double(x[c]));
      if (qb) quant += w * amax / 254.0;
    }
  }
  // BF16 on AVX-512 rounds x to bf16, within 2^-9 |x| of x.
  if (t == DType::BF16) quant += std::ldexp(mag, -9);
  return quant * 1.001 + (double(cols) / 8 + 16) * FLT_EPSILON * (mag + quant) + 1e-30;
}

}  // namespace

TEST(MatvecScalar, MatchesDequantizedDot) {
  ThreadPool pool(1);
  for (DType t : kTypes) {
    const int64_t be = dtype_info(t).block_elems;
    const int64_t rows = 7, cols = be == 1 ? 37 : 2 * be;
    Mat m = make_mat(t, rows, cols, 11, 4);
    const auto x = random_vec(static_cast<size_t>(cols), 12);
    std::vector<float> y(rows);
    matvec_isa(Isa::Scalar, m.view, x.data(), y.data(), pool);
    for (int64_t r = 0; r < rows; ++r) {
      double ref = 0, mag = 0;
      for (int64_t c = 0; c < cols; ++c) {
        ref += double(m.deq[r * cols + c]) * x[c];
        mag += std::fabs(double(m.deq[r * cols + c]) * x[c]);
      }
      EXPECT_NEAR(y[r], ref, 1e-6 * mag + 1e-30) << dtype_name(t) << " row " << r;
    }
  }
}

TEST(MatvecSimd, MatchesScalarAllTypes) {
  ThreadPool pool(2);
  const int64_t row_counts[] = {1, 2, 5, 37};
  for (Isa isa : isas()) {
    for (DType t : kTypes) {
      const int64_t be = dtype_info(t).block_elems;
      const std::vector<int64_t> col_counts = be == 1
                                                  ? std::vector<int64_t>{1, 7, 16, 40, 100, 1000}
                                                  : std::vector<int64_t>{be, 3 * be, 10 * be};
      uint32_t seed = 100;
      for (int64_t rows : row_counts) {
        for (int64_t cols : col_counts) {
          ++seed;
          Mat m = make_mat(t, rows, cols, seed, rows % 2 ? 8 : 0);
          const auto x = random_vec(static_cast<size_t>(cols), seed * 7 + 1, 0.05f);
          std::vector<float> ref(rows), y(rows, NAN);
          matvec_isa(Isa::Scalar, m.view, x.data(), ref.data(), pool);
          matvec_isa(isa, m.view, x.data(), y.data(), pool);
          for (int64_t r = 0; r < rows; ++r) {
            ASSERT_NEAR(y[r], ref[r], bound(t, m, x, r))
                << isa_name(isa) << " " << dtype_name(t) << " " << rows << "x" << cols << " row "
                << r;
          }
        }
      }
    }
  }
}

TEST(MatvecSimd, ZeroAndTinyActivations) {
  ThreadPool pool(1);
  for (Isa isa : isas()) {
    for (DType t : kTypes) {
      const int64_t be = dtype_info(t).block_elems;
      const int64_t rows = 3, cols = be == 1 ? 64 : 2 * be;
      Mat m = make_mat(t, rows, cols, 5);
      std::vector<float> x(cols, 0.0f), y(rows, NAN);
      matvec_isa(isa, m.view, x.data(), y.data(), pool);
      for (float v : y) EXPECT_EQ(v, 0.0f) << isa_name(isa) << " " << dtype_name(t);
      x[cols - 1] = 1e-30f;  // one tiny value: no NaN / inf from the scale
      matvec_isa(isa, m.view, x.data(), y.data(), pool);
      for (float v : y) EXPECT_TRUE(std::isfinite(v)) << isa_name(isa) << " " << dtype_name(t);
    }
  }
}

// The activation quantizers of the integer kernels (AVX2 code, also used by the AVX-512 build)
// give their scalar references' results bit for bit: finite values of many magnitudes, zeros of
// both signs, all-zero blocks and infinities. (Not NaN: whether a max sees it depends on the
// order the maxes take.)
TEST(MatvecSimd, ActivationQuantizersEqualTheirScalarReferences) {
  if (cachet::best_isa() < cachet::Isa::Avx2) GTEST_SKIP() << "no AVX2";
  std::mt19937 rng(9);
  for (int t = 0; t < 400; ++t) {
    const int64_t n = 256 * (1 + t % 5);
    std::vector<float> x(static_cast<size_t>(n));
    const float mag = std::ldexp(1.0f, static_cast<int>(rng() % 200) - 100);
    for (float& v : x) {
      v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng) * mag;
      if (rng() % 9 == 0) v = rng() % 2 ? 0.0f : -0.0f;
    }
    if (t % 20 == 0) std::fill(x.begin(), x.begin() + 256, 0.0f);
    if (t % 37 == 0) x[5] = INFINITY;
    std::vector<int8_t> q1(x.size()), q2(x.size());
    std::vector<float> d1(x.size() / 32), d2(x.size() / 32), f1(x.size() / 32), f2(x.size() / 32);
    std::vector<int32_t> i1(x.size() / 32), i2(x.size() / 32);
    std::vector<int16_t> b1(x.size() / 16), b2(x.size() / 16);
    cachet::kern::quantize_x_q8_k_ref(x.data(), n, q1.data(), d1.data(), b1.data());
    cachet::kern::quantize_x_q8_k_avx2(x.data(), n, q2.data(), d2.data(), b2.data());
    EXPECT_EQ(q1, q2) << "Q8_K q, case " << t;
    EXPECT_EQ(0, std::memcmp(d1.data(), d2.data(), static_cast<size_t>(n / 256) * 4)) << t;
    EXPECT_EQ(b1, b2) << "Q8_K bsums, case " << t;
    cachet::kern::quantize_x_q8_32_ref(x.data(), n, q1.data(), d1.data(), i1.data(), f1.data());
    cachet::kern::quantize_x_q8_32_avx2(x.data(), n, q2.data(), d2.data(), i2.data(), f2.data());
    EXPECT_EQ(q1, q2) << "Q8_32 q, case " << t;
    EXPECT_EQ(i1, i2) << "Q8_32 sums, case " << t;
    EXPECT_EQ(0, std::memcmp(d1.data(), d2.data(), d1.size() * 4)) << t;
    EXPECT_EQ(0, std::memcmp(f1.data(), f2.data(), f1.size() * 4)) << t;
  }
}

TEST(MatvecThreads, ResultsIndependentOfThreadCount) {
  ThreadPool p1(1), p2(2), p3(3);
  std::vector<Isa> all = isas();
  all.insert(all.begin(), Isa::Scalar);
  for (Isa isa : all) {
    for (DType t : kTypes) {
      const int64_t rows = 101, cols = 2048;
      Mat m = make_mat(t, rows, cols, 77);
      const auto x = random_vec(static_cast<size_t>(cols), 78);
      std::vector<float> y1(rows), y2(rows), y3(rows);
      matvec_isa(isa, m.view, x.data(), y1.data(), p1);
      matvec_isa(isa, m.view, x.data(), y2.data(), p2);
      matvec_isa(isa, m.view, x.data(), y3.data(), p3);
      EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), rows * sizeof(float)))
          << isa_name(isa) << " " << dtype_name(t);
      EXPECT_EQ(0, std::memcmp(y1.data(), y3.data(), rows * sizeof(float)))
          << isa_name(isa) << " " << dtype_name(t);
    }
  }
}

TEST(MatvecErrors, RejectsBadInput) {
  ThreadPool pool(1);
  std::vector<uint8_t> buf(4096);
  std::vector<float> x(512), y(4);
  EXPECT_THROW(matvec(MatView{DType::Q4_K, 2, 100, buf.data(), 144}, x.data(), y.data(), pool),
               Error);
  EXPECT_THROW(matvec(MatView{DType::I32, 2, 8, buf.data(), 32}, x.data(), y.data(), pool), Error);
  EXPECT_THROW(matvec(MatView{DType::Q8_0, 2, 64, buf.data(), 34}, x.data(), y.data(), pool),
               Error);  // stride shorter than a row
  EXPECT_THROW(matvec(MatView{DType::F32, 2, 8, nullptr, 32}, x.data(), y.data(), pool), Error);
  // Misaligned weights (data or row stride) are refused, not read through misaligned structs.
  EXPECT_THROW(matvec(MatView{DType::Q4_0, 2, 32, buf.data() + 1, 18}, x.data(), y.data(), pool),
               Error);
  EXPECT_THROW(matvec(MatView{DType::F32, 2, 8, buf.data(), 34}, x.data(), y.data(), pool), Error);
  EXPECT_THROW(matmul(MatView{DType::Q8_0, 2, 32, buf.data() + 1, 34}, x.data(), 1, y.data(), pool),
               Error);
  // Empty shapes are fine.
  matvec(MatView{DType::F32, 0, 8, nullptr, 32}, x.data(), y.data(), pool);
  y.assign(4, 1.0f);
  matvec(MatView{DType::F32, 4, 0, nullptr, 0}, x.data(), y.data(), pool);
  for (float v : y) EXPECT_EQ(v, 0.0f);
}
