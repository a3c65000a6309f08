// Matrix-matrix product: every weight type on every instruction set the CPU has, held to the
// scalar reference (dequantize_row + double accumulation), and bit-identical for any thread
// count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cachet/cpu.h"
#include "cachet/dtype.h"
#include "cachet/error.h"
#include "cachet/half.h"
#include "cachet/kernels.h"
#include "cachet/quant.h"
#include "cachet/threadpool.h"
#include "kernels/blocks.h"

using namespace cachet;

namespace {

const DType kTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                        DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                        DType::Q4_K, DType::Q5_K, DType::Q6_K};

bool float_type(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

void put_half(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

// Random weights: every quant byte random, block scales set to sane finite values so that the
// dequantized weights are of order one.
std::vector<uint8_t> random_weights(DType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  const size_t rb = row_bytes(t, cols);
  std::vector<uint8_t> w(rb * static_cast<size_t>(rows));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f), pos(0.5f, 1.5f);
  for (auto& b : w) b = static_cast<uint8_t>(byte(rng));
  const int64_t n = rows * cols;
  if (t == DType::F32) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = u(rng);
      std::memcpy(w.data() + 4 * i, &v, 4);
    }
    return w;
  }
  if (t == DType::F16 || t == DType::BF16) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = u(rng);
      const uint16_t h = t == DType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
      std::memcpy(w.data() + 2 * i, &h, 2);
    }
    return w;
  }
  const auto& info = dtype_info(t);
  const int64_t blocks = n / info.block_elems;
  for (int64_t i = 0; i < blocks; ++i) {
    uint8_t* b = w.data() + i * info.block_bytes;
    switch (t) {
      case DType::Q4_0:
        put_half(b + offsetof(block_q4_0, d), pos(rng) / 8);
        break;
      case DType::Q5_0:
        put_half(b + offsetof(block_q5_0, d), pos(rng) / 16);
        break;
      case DType::Q8_0:
        put_half(b + offsetof(block_q8_0, d), pos(rng) / 128);
        break;
      case DType::Q4_1:
        put_half(b + offsetof(block_q4_1, d), pos(rng) / 8);
        put_half(b + offsetof(block_q4_1, m), -pos(rng));
        break;
      case DType::Q5_1:
        put_half(b + offsetof(block_q5_1, d), pos(rng) / 16);
        put_half(b + offsetof(block_q5_1, m), -pos(rng));
        break;
      case DType::Q2_K:
        put_half(b + offsetof(block_q2_K, d), pos(rng) / 32);
        put_half(b + offsetof(block_q2_K, dmin), pos(rng) / 16);
        break;
      case DType::Q3_K:
        put_half(b + offsetof(block_q3_K, d), pos(rng) / 64);
        break;
      case DType::Q4_K:
        put_half(b + offsetof(block_q4_K, d), pos(rng) / 256);
        put_half(b + offsetof(block_q4_K, dmin), pos(rng) / 64);
        break;
      case DType::Q5_K:
        put_half(b + offsetof(block_q5_K, d), pos(rng) / 512);
        put_half(b + offsetof(block_q5_K, dmin), pos(rng) / 64);
        break;
      case DType::Q6_K:
        put_half(b + offsetof(block_q6_K, d), pos(rng) / 2048);
        break;
      default:
        break;
    }
  }
  return w;
}

std::vector<float> random_x(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = u(rng);
  return x;
}

std::vector<float> dequant(DType t, const uint8_t* row, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) {
    uint16_t h;
    if (t == DType::F32) {
      std::memcpy(&out[c], row + 4 * c, 4);
    } else if (t == DType::F16 || t == DType::BF16) {
      std::memcpy(&h, row + 2 * c, 2);
      out[c] = t == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
  }
  if (!float_type(t)) dequantize_row(t, row, out.data(), cols);
  return out;
}

std::vector<Isa> simd_isas() {
  std::vector<Isa> v;
  if (best_isa() >= Isa::Avx2) v.push_back(Isa::Avx2);
  if (best_isa() >= Isa::Avx512) v.push_back(Isa::Avx512);
  return v;
}

// Products of bf16-rounded weights and activations (the AVX-512 path for BF16 and
// block-quantized weights) have a relative error of at most 2^-8 each, independent from one term to
// the next; f32 paths only see accumulation rounding. Whether matmul multiplies in bf16 here (see
// matmul_path in kernels.h).
bool bf16_path(Isa isa, DType t, int64_t cols) {
  return isa == Isa::Avx512 && t != DType::F32 && t != DType::F16 && cols % 32 == 0 &&
         matmul_path() != MatmulPath::F32;
}

// Puts the matmul path back to the default choice when it goes out of scope.
struct RestoreMatmulPath {
  ~RestoreMatmulPath() { set_matmul_path(std::nullopt); }
};

// Runs body() with each matmul path set in turn (once where the CPU has only f32), then goes
// back to the default choice.
template <typename Fn>
void for_each_path(Fn&& body) {
  const RestoreMatmulPath restore;
  for (MatmulPath path : {MatmulPath::F32, MatmulPath::Bf16, MatmulPath::Amx}) {
    set_matmul_path(path);  // Amx without AMX runs as Bf16
    SCOPED_TRACE(std::string(matmul_path_name(matmul_path())));
    body();
    if (best_isa() != Isa::Avx512) break;
  }
}

void check_case(DType t, int64_t rows, int64_t cols, int64_t n, ThreadPool& pool, uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<uint8_t> wb = random_weights(t, rows, cols, rng);
  const std::vector<float> x = random_x(n * cols, rng);
  MatView w{t, rows, cols, wb.data(), row_bytes(t, cols)};

  std::vector<float> ref(static_cast<size_t>(n * rows), -1.0f);
  matmul_isa(Isa::Scalar, w, x.data(), n, ref.data(), pool);

  // Tolerances from the dequantized weights.
  std::vector<double> absum(ref.size()), sqsum(ref.size());
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> wr = dequant(t, w.row(r), cols);
    for (int64_t j = 0; j < n; ++j) {
      double a = 0, s = 0, e = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double p = static_cast<double>(wr[c]) * x[j * cols + c];
        a += std::fabs(p);
        s += p * p;
        e += p;
      }
      absum[j * rows + r] = a;
      sqsum[j * rows + r] = s;
      // The scalar path accumulates in double: it must match to f32 rounding.
      ASSERT_NEAR(ref[j * rows + r], e, 1e-6 * a + 1e-30) << dtype_name(t) << " scalar";
    }
  }

  for (Isa isa : simd_isas()) {
    std::vector<float> y(ref.size(), -1.0f);
    matmul_isa(isa, w, x.data(), n, y.data(), pool);
    if (n <= 4) {
      // Few rows run as matvecs that share the weight stream: each output row is exactly the
      // matvec of its activation row (matvec's own tests bound that against the reference).
      std::vector<float> yv(static_cast<size_t>(rows));
      for (int64_t j = 0; j < n; ++j) {
        matvec_isa(isa, w, x.data() + j * cols, yv.data(), pool);
        EXPECT_EQ(0, std::memcmp(yv.data(), y.data() + j * rows, yv.size() * sizeof(float)))
            << dtype_name(t) << " " << isa_name(isa) << " rows " << rows << " cols " << cols
            << " n " << n << " activation row " << j;
      }
      continue;
    }
    int bad = 0;
    for (size_t i = 0; i < y.size() && bad < 5; ++i) {
      const double tol = bf16_path(isa, t, cols)
                             ? 6.0 * std::ldexp(1.0, -8) * std::sqrt(sqsum[i]) + 1e-5 * absum[i]
                             : 1e-5 * absum[i] + 1e-30;
      if (!(std::fabs(y[i] - ref[i]) <= tol)) {
        ++bad;
        ADD_FAILURE() << dtype_name(t) << " " << isa_name(isa) << " rows " << rows << " cols "
                      << cols << " n " << n << ": element (" << i / rows << ", " << i % rows
                      << ") = " << y[i] << ", reference " << ref[i] << ", tolerance " << tol;
      }
    }
  }
}

std::vector<int64_t> test_cols(DType t) {
  const int64_t be = dtype_info(t).block_elems;
  if (t == DType::BF16) return {5, 300, 1030, 64, 544};  // whole 32-blocks take bf16 paths
  if (be == 1) return {5, 300, 1030};
  if (be == 32) return {32, 96, 544};
  return {256, 768};
}

}  // namespace

class MatmulTypes : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulTypes, MatchesScalarReference) {
  const DType t = GetParam();
  ThreadPool pool(2);
  uint32_t seed = 1;
  for_each_path([&] {
    for (int64_t cols : test_cols(t))
      for (int64_t rows : {1, 33, 70})
        for (int64_t n : {1, 2, 3, 4, 17, 64}) check_case(t, rows, cols, n, pool, seed++);
  });
}

TEST_P(MatmulTypes, ThreadCountIndependent) {
  const DType t = GetParam();
  std::mt19937 rng(7);
  const int64_t rows = 100, cols = test_cols(t).back(), n = 29;
  const std::vector<uint8_t> wb = random_weights(t, rows, cols, rng);
  const std::vector<float> x = random_x(n * cols, rng);
  MatView w{t, rows, cols, wb.data(), row_bytes(t, cols)};
  std::vector<Isa> isas = simd_isas();
  isas.push_back(Isa::Scalar);
  for_each_path([&] {
    for (Isa isa : isas) {
      for (int64_t nn : {n, int64_t{2}}) {
        std::vector<float> first;
        for (int threads : {1, 2, 3}) {
          ThreadPool pool(threads);
          std::vector<float> y(static_cast<size_t>(nn * rows));
          matmul_isa(isa, w, x.data(), nn, y.data(), pool);
          if (first.empty())
            first = y;
          else
            EXPECT_EQ(0, std::memcmp(first.data(), y.data(), y.size() * sizeof(float)))
                << dtype_name(t) << " " << isa_name(isa) << " n " << nn << " threads " << threads;
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(All, MatmulTypes, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<DType>& i) {
                           return std::string(dtype_name(i.param));
                         });

// BF16 matvecs take the arithmetic of the matmul path, so a decoding step computes what a
// prefill does: on every path, packed (BF16_X16, read as AMX tiles as they lie) or in rows,
// each activation row's matvec equals its row of the matmul to f32 rounding, and the matmul
// is held to the scalar reference.
TEST(Matmul, Bf16MatvecFollowsTheMatmulPath) {
  ThreadPool pool(2);
  std::mt19937 rng(11);
  const int64_t rows = 70, n = 9;  // 4 groups of 16 and 6 rows after them
  for (int64_t cols : {int64_t{544}, int64_t{300}}) {
    const std::vector<uint8_t> wb = random_weights(DType::BF16, rows, cols, rng);
    const std::vector<float> x = random_x(n * cols, rng);
    const MatView rows_view{DType::BF16, rows, cols, wb.data(), row_bytes(DType::BF16, cols)};
    const PackedMat packed = pack_matrix(rows_view, &pool);
    std::vector<float> ref(static_cast<size_t>(n * rows));
    matmul_isa(Isa::Scalar, rows_view, x.data(), n, ref.data(), pool);
    for_each_path([&] {
      for (const MatView& w : {rows_view, packed.view}) {
        std::vector<float> y(ref.size()), yv(static_cast<size_t>(rows));
        matmul(w, x.data(), n, y.data(), pool);
        const bool bf = bf16_path(active_isa(), DType::BF16, cols);
        for (int64_t j = 0; j < n; ++j) {
          matvec(w, x.data() + j * cols, yv.data(), pool);
          for (int64_t r = 0; r < rows; ++r) {
            const std::vector<float> wr = dequant(
                DType::BF16, w.layout == MatLayout::Rows ? w.row(r) : rows_view.row(r), cols);
            double mag = 0, sq = 0;
            for (int64_t c = 0; c < cols; ++c) {
              const double p = static_cast<double>(wr[c]) * x[j * cols + c];
              mag += std::fabs(p);
              sq += p * p;
            }
            const size_t i = static_cast<size_t>(j * rows + r);
            ASSERT_NEAR(yv[r], y[i], 1e-6 * mag + 1e-30)
                << "cols " << cols << " layout " << static_cast<int>(w.layout) << " activation "
                << j << " row " << r;
            const double tol =
                bf ? 6.0 * std::ldexp(1.0, -8) * std::sqrt(sq) + 1e-5 * mag : 1e-5 * mag + 1e-30;
            ASSERT_NEAR(y[i], ref[i], tol)
                << "cols " << cols << " activation " << j << " row " << r;
          }
        }
      }
    });
  }
}

// On the AMX path, the rows of whole BF16_X16 groups go through the prefill's tiles in
// decoding steps too (1 to 4 activation rows at once): the same products summed in the same
// order, so each output equals the matmul's bit for bit.
TEST(Matmul, AmxBf16StepsEqualPrefillExactly) {
  if (!amx_bf16_usable() || best_isa() != Isa::Avx512) GTEST_SKIP() << "no AMX-BF16";
  const RestoreMatmulPath restore;
  set_matmul_path(MatmulPath::Amx);
  ThreadPool pool(2);
  std::mt19937 rng(12);
  const int64_t rows = 70, cols = 544, n = 40;  // 4 groups of 16 rows; n > kMatvecRowsMax
  const std::vector<uint8_t> wb = random_weights(DType::BF16, rows, cols, rng);
  const std::vector<float> x = random_x(n * cols, rng);
  const MatView rows_view{DType::BF16, rows, cols, wb.data(), row_bytes(DType::BF16, cols)};
  const PackedMat packed = pack_matrix(rows_view, &pool);
  ASSERT_EQ(packed.view.layout, MatLayout::BF16_X16);
  std::vector<float> y(static_cast<size_t>(n * rows));
  matmul(packed.view, x.data(), n, y.data(), pool);
  for (int64_t nx = 1; nx <= 4; ++nx) {
    std::vector<float> ys(static_cast<size_t>(nx * rows));
    for (int64_t j0 = 0; j0 + nx <= n; j0 += 7) {
      matmul(packed.view, x.data() + j0 * cols, nx, ys.data(), pool);
      for (int64_t j = 0; j < nx; ++j)
        for (int64_t r = 0; r < rows / 16 * 16; ++r)
          ASSERT_EQ(ys[j * rows + r], y[(j0 + j) * rows + r])
              << nx << " rows at once, activation " << j0 + j << " row " << r;
    }
  }
}

TEST(Matmul, PaddedRowStrideAndLargeN) {
  // Rows with padding between them, many activation rows (several micro-tiles and chunks).
  ThreadPool pool(2);
  std::mt19937 rng(3);
  const int64_t rows = 40, cols = 64, n = 150;
  const size_t stride = row_bytes(DType::F32, cols) + 64;
  std::vector<uint8_t> wb(stride * rows);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float v = u(rng);
      std::memcpy(wb.data() + r * stride + 4 * c, &v, 4);
    }
  const std::vector<float> x = random_x(n * cols, rng);
  MatView w{DType::F32, rows, cols, wb.data(), stride};
  std::vector<float> ref(static_cast<size_t>(n * rows));
  matmul_isa(Isa::Scalar, w, x.data(), n, ref.data(), pool);
  for (Isa isa : simd_isas()) {
    std::vector<float> y(ref.size());
    matmul_isa(isa, w, x.data(), n, y.data(), pool);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 1e-4) << isa_name(isa);
  }
}

TEST(Matmul, RejectsBadArguments) {
  ThreadPool pool(1);
  std::vector<uint8_t> wb(1024);
  std::vector<float> x(64), y(64);
  MatView bad_cols{DType::Q4_K, 1, 100, wb.data(), 1024};
  EXPECT_THROW(matmul(bad_cols, x.data(), 1, y.data(), pool), Error);
  MatView bad_type{DType::Q8_K, 1, 256, wb.data(), 292};
  EXPECT_THROW(matmul(bad_type, x.data(), 1, y.data(), pool), Error);
  MatView bad_stride{DType::F32, 2, 16, wb.data(), 8};
  EXPECT_THROW(matmul(bad_stride, x.data(), 1, y.data(), pool), Error);
  MatView empty{DType::F32, 3, 0, wb.data(), 0};
  matmul(empty, x.data(), 2, y.data(), pool);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], 0.0f);
}
