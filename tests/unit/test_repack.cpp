// Weights rearranged for the kernels (pack_matrix, MatLayout::Q4K_X16 and Q8_0_X16): the bytes
// come back exactly, and every product on the packed matrix matches the one on the rows as
// stored.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "cachet/cpu.h"
#include "cachet/kernels.h"
#include "cachet/quant.h"
#include "cachet/threadpool.h"
#include "kernels/repack.h"

using namespace cachet;

namespace {

const DType kPacked[] = {DType::Q4_K, DType::Q8_0, DType::Q6_K, DType::BF16, DType::Q4_0,
                         DType::Q4_1, DType::Q5_K, DType::Q5_0, DType::Q5_1};

struct Mat {
  std::vector<uint8_t> bytes;
  MatView view;
};

// Random matrix of type t; heavy-tailed values so that scales and mins use all their bits.
Mat make_mat(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> src(static_cast<size_t>(rows * cols));
  for (auto& v : src) v = nd(rng) * (u(rng) < 0.05f ? 10.0f : 1.0f) + (u(rng) < 0.5f ? 0.7f : 0);
  Mat m;
  const size_t rb = row_bytes(t, cols);
  m.bytes.resize(rb * static_cast<size_t>(rows));
  quantize_matrix(t, src.data(), m.bytes.data(), rows, cols, nullptr);
  m.view = MatView{t, rows, cols, m.bytes.data(), rb};
  return m;
}

std::vector<float> random_x(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = nd(rng);
  return x;
}

bool avx512() {
  return best_isa() >= Isa::Avx512;
}

}  // namespace

TEST(Repack, Q4KScalesEncodeIsTheInverseOfDecode) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    uint8_t q[12], sc[8], m[8], back[12];
    for (auto& b : q) b = static_cast<uint8_t>(rng());
    kern::q4k_scales_decode(q, sc, m);
    kern::q4k_scales_encode(sc, m, back);
    ASSERT_EQ(0, std::memcmp(q, back, 12)) << "trial " << trial;
  }
}

TEST(Repack, UnpackGivesBackEveryBlockByteForByte) {
  if (!avx512()) GTEST_SKIP() << "no AVX-512: matrices stay in row layout";
  for (DType t : kPacked)
    for (int64_t rows : {16, 37, 64}) {
      SCOPED_TRACE(dtype_name(t));
      Mat m = make_mat(t, rows, 768, 5);
      ThreadPool pool(2);
      PackedMat p = pack_matrix(m.view, &pool);
      ASSERT_EQ(p.view.layout, t == DType::Q4_K   ? MatLayout::Q4K_X16
                               : t == DType::Q8_0 ? MatLayout::Q8_0_X16
                               : t == DType::BF16 ? MatLayout::BF16_X16
                               : t == DType::Q4_0 ? MatLayout::Q4_0_X16
                               : t == DType::Q4_1 ? MatLayout::Q4_1_X16
                               : t == DType::Q5_K ? MatLayout::Q5K_X16
                               : t == DType::Q5_0 ? MatLayout::Q5_0_X16
                               : t == DType::Q5_1 ? MatLayout::Q5_1_X16
                                                  : MatLayout::Q6K_X16);
      EXPECT_EQ(layout_type(p.view.layout), t);  // each layout names the type it holds
      ASSERT_NE(p.view.data, m.view.data);
      EXPECT_NE(0, std::memcmp(p.view.data, m.view.data, m.bytes.size()));  // really rearranged
      std::vector<uint8_t> row(m.view.row_stride);
      const int64_t nb = 768 / dtype_info(t).block_elems;
      const size_t bb = m.view.row_stride / static_cast<size_t>(nb);
      for (int64_t r = 0; r < rows; ++r) {
        unpack_row_blocks(p.view, r, 0, nb, row.data());
        ASSERT_EQ(0, std::memcmp(row.data(), m.view.row(r), row.size())) << "row " << r;
        const int64_t c = t == DType::BF16 ? 32 : 1;  // blocks per chunk (BF16: values)
        unpack_row_blocks(p.view, r, c, 2 * c, row.data());
        ASSERT_EQ(0, std::memcmp(row.data(), m.view.row(r) + c * bb, 2 * c * bb)) << "row " << r;
      }
    }
}

TEST(Repack, OnlyWhatPaysIsPacked) {
  Mat small = make_mat(DType::Q4_K, 15, 256, 1);  // not one whole group of 16 rows
  EXPECT_EQ(preferred_layout(small.view), MatLayout::Rows);
  EXPECT_FALSE(pack_matrix(small.view).buf);
  std::vector<uint8_t> f(16 * 256 * 4);
  EXPECT_EQ(preferred_layout(MatView{DType::F32, 16, 256, f.data(), 1024}), MatLayout::Rows);
}

// The packed kernel computes the same integer sums per block as the row kernel; only the f32
// order of accumulation differs, so the outputs agree to a few ulps of sum |w x|.
TEST(Repack, PackedMatvecMatchesRowMatvec) {
  if (!avx512()) GTEST_SKIP() << "no AVX-512";
  for (DType t : kPacked)
    for (int threads : {1, 2}) {
      SCOPED_TRACE(dtype_name(t));
      ThreadPool pool(threads);
      const int64_t rows = 100, cols = 1024;  // 6 groups and 4 rows in row layout
      Mat m = make_mat(t, rows, cols, 9);
      PackedMat p = pack_matrix(m.view, &pool);
      const auto x = random_x(cols, 10);
      std::vector<float> yr(rows), yp(rows), deq(static_cast<size_t>(cols));
      matvec(m.view, x.data(), yr.data(), pool);
      matvec(p.view, x.data(), yp.data(), pool);
      for (int64_t r = 0; r < rows; ++r) {
        dequantize_row(t, m.view.row(r), deq.data(), cols);
        double mag = 0;
        for (int64_t c = 0; c < cols; ++c) mag += std::fabs(double(deq[c]) * x[c]);
        EXPECT_NEAR(yp[r], yr[r], 2e-6 * mag) << "row " << r << ", " << threads << " threads";
      }
    }
}

// Several activation rows at once (batched decoding) give each row's matvec bit for bit, and
// a lower instruction set reads the packed matrix as it read the rows.
TEST(Repack, PackedRowsBatchAndLowerIsaAreExact) {
  if (!avx512()) GTEST_SKIP() << "no AVX-512";
  ThreadPool pool(2);
  for (DType t : kPacked) {
    SCOPED_TRACE(dtype_name(t));
    const int64_t rows = 53, cols = 512;
    Mat m = make_mat(t, rows, cols, 21);
    PackedMat p = pack_matrix(m.view, &pool);
    for (int64_t n = 1; n <= 4; ++n) {
      const auto x = random_x(n * cols, 30 + static_cast<uint32_t>(n));
      std::vector<float> y(static_cast<size_t>(n * rows)), y1(static_cast<size_t>(rows));
      matmul(p.view, x.data(), n, y.data(), pool);
      for (int64_t j = 0; j < n; ++j) {
        matvec(p.view, x.data() + j * cols, y1.data(), pool);
        for (int64_t r = 0; r < rows; ++r)
          ASSERT_EQ(y[j * rows + r], y1[r]) << "n " << n << " activation row " << j << " row " << r;
      }
    }
    const auto x = random_x(cols, 40);
    for (Isa isa : {Isa::Scalar, Isa::Avx2}) {
      std::vector<float> yr(rows), yp(rows);
      matvec_isa(isa, m.view, x.data(), yr.data(), pool);
      matvec_isa(isa, p.view, x.data(), yp.data(), pool);
      EXPECT_EQ(yr, yp) << isa_name(isa);
    }
  }
}

// The packed kernels read several groups of 16 rows side by side (one stream each) where that
// pays; how a thread's range is cut into such parts depends on the thread count, so each
// group's outputs must not depend on its partners: 1, 2 and 3 threads agree bit for bit, for
// one activation row and for two.
TEST(Repack, PackedResultsIndependentOfThreadCount) {
  if (!avx512()) GTEST_SKIP() << "no AVX-512";
  ThreadPool p1(1), p2(2), p3(3);
  for (DType t : kPacked) {
    SCOPED_TRACE(dtype_name(t));
    const int64_t rows = 16 * 45 + 3, cols = 1024;  // 45 groups: the threads' ranges differ
    Mat m = make_mat(t, rows, cols, 51);
    PackedMat p = pack_matrix(m.view, &p1);
    ASSERT_NE(p.view.layout, MatLayout::Rows);
    for (int64_t n = 1; n <= 2; ++n) {
      const auto x = random_x(n * cols, 52);
      std::vector<float> y1(static_cast<size_t>(n * rows)), y2(y1.size()), y3(y1.size());
      matmul(p.view, x.data(), n, y1.data(), p1);
      matmul(p.view, x.data(), n, y2.data(), p2);
      matmul(p.view, x.data(), n, y3.data(), p3);
      EXPECT_EQ(y1, y2) << n << " activation rows";
      EXPECT_EQ(y1, y3) << n << " activation rows";
    }
  }
}

// A product large enough that each thread's share is read in rounds of several groups, then
// rounds of one, and threads that finish early take rounds from the back of another's share
// (or a whole share, when its thread has not started: more threads than cores make that
// happen). Whatever the thread count and however the rounds fall, every row is computed once
// and equals the one-thread result bit for bit (the outputs start as NaN, so a row left out
// shows). Every way, one to four activation rows.
TEST(Repack, PackedSharesCoverEveryRowForAnyThreadCount) {
  if (!avx512()) GTEST_SKIP() << "no AVX-512";
  ThreadPool p1(1);
  for (DType t : {DType::Q4_K, DType::BF16, DType::Q8_0}) {
    SCOPED_TRACE(dtype_name(t));
    const int64_t rows = 16 * 301 + 7, cols = 1024;
    Mat m = make_mat(t, rows, cols, 71);
    PackedMat p = pack_matrix(m.view, &p1);
    ASSERT_NE(p.view.layout, MatLayout::Rows);
    for (int64_t n : {1, 2, 4}) {
      const auto x = random_x(n * cols, 72 + static_cast<uint32_t>(n));
      std::vector<float> ref(static_cast<size_t>(n * rows));
      matmul(p.view, x.data(), n, ref.data(), p1);
      for (int threads : {2, 3, 4, 7}) {
        ThreadPool pool(threads);
        for (int w = 0; w < kStreamWays; ++w) {
          set_stream_way(static_cast<StreamWay>(w));
          std::vector<float> y(ref.size(), std::nanf(""));
          matmul(p.view, x.data(), n, y.data(), pool);
          EXPECT_EQ(y, ref) << threads << " threads, " << n << " activation rows, "
                            << stream_way_name(static_cast<StreamWay>(w));
        }
      }
    }
  }
  set_stream_way(std::nullopt);
}

// Prefill (matmul with many activation rows) dequantizes the packed rows to the same values.
TEST(Repack, PackedMatmulEqualsRowMatmul) {
  if (!avx512()) GTEST_SKIP() << "no AVX-512";
  ThreadPool pool(2);
  for (DType t : kPacked) {
    SCOPED_TRACE(dtype_name(t));
    const int64_t rows = 70, cols = 768, n = 9;
    Mat m = make_mat(t, rows, cols, 44);
    PackedMat p = pack_matrix(m.view, &pool);
    const auto x = random_x(n * cols, 45);
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
      std::vector<float> yr(static_cast<size_t>(n * rows)), yp(yr.size());
      matmul_isa(isa, m.view, x.data(), n, yr.data(), pool);
      matmul_isa(isa, p.view, x.data(), n, yp.data(), pool);
      EXPECT_EQ(yr, yp) << isa_name(isa);
    }
  }
}

// Every StreamWay (one, two or four groups side by side, with or without prefetching) computes the
// same outputs bit for bit, for one to four activation rows; and a way that a kernel cannot
// take (two groups where its accumulators would not fit) falls back to one it can.
TEST(Repack, EveryStreamWayGivesTheSameOutputs) {
  if (!avx512()) GTEST_SKIP() << "no AVX-512";
  ThreadPool pool(2);
  for (DType t : kPacked) {
    SCOPED_TRACE(dtype_name(t));
    const int64_t rows = 16 * 37 + 5, cols = 512;
    Mat m = make_mat(t, rows, cols, 61);
    PackedMat p = pack_matrix(m.view, &pool);
    ASSERT_NE(p.view.layout, MatLayout::Rows);
    for (int64_t n = 1; n <= 4; ++n) {
      const auto x = random_x(n * cols, 62 + static_cast<uint32_t>(n));
      std::vector<float> ref;
      for (int w = 0; w < kStreamWays; ++w) {
        const auto way = static_cast<StreamWay>(w);
        set_stream_way(way);
        EXPECT_FALSE(stream_choice(p.view.layout, static_cast<int>(n)).measured);
        std::vector<float> y(static_cast<size_t>(n * rows));
        matmul(p.view, x.data(), n, y.data(), pool);
        if (ref.empty())
          ref = y;
        else
          EXPECT_EQ(y, ref) << stream_way_name(way) << ", " << n << " activation rows";
      }
    }
  }
  set_stream_way(std::nullopt);
}

// With no way set, a layout's large products measure the ways and keep one: the choice is
// reported as measured, and outputs are the same as with any way set.
TEST(Repack, StreamWayIsChosenByMeasurement) {
  if (!avx512()) GTEST_SKIP() << "no AVX-512";
  if (std::getenv("CACHET_STREAM")) GTEST_SKIP() << "CACHET_STREAM set in the environment";
  ThreadPool pool(2);
  const int64_t rows = 512, cols = 4096;  // 1.125 MiB of Q4_K: every call is timed
  Mat m = make_mat(DType::Q4_K, rows, cols, 71);
  PackedMat p = pack_matrix(m.view, &pool);
  ASSERT_EQ(p.view.layout, MatLayout::Q4K_X16);
  const auto x = random_x(cols, 72);
  set_stream_way(StreamWay::One);
  std::vector<float> ref(rows), y(rows);
  matvec(p.view, x.data(), ref.data(), pool);
  set_stream_way(std::nullopt);
  EXPECT_FALSE(stream_choice(p.view.layout, 1).measured);
  EXPECT_FALSE(stream_ways_measuring(1));
  // 5 ways x 256 MiB (about 1140 calls) are measured before the choice; meanwhile the tuner
  // says it is measuring
  int calls = 0;
  for (; calls < 2000 && !stream_choice(p.view.layout, 1).measured; ++calls) {
    matvec(p.view, x.data(), y.data(), pool);
    ASSERT_EQ(y, ref) << "call " << calls;
    if (calls == 0) {
      EXPECT_TRUE(stream_ways_measuring(1));
      EXPECT_FALSE(stream_ways_measuring(2));
    }
  }
  EXPECT_TRUE(stream_choice(p.view.layout, 1).measured);
  EXPECT_FALSE(stream_ways_measuring(1)) << "after " << calls << " calls";
  EXPECT_FALSE(stream_choice(p.view.layout, 2).measured);  // each slot measures its own
}
