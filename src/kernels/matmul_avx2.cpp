// AVX2 matrix-matrix product. Output rows are processed in panels of 16 (two ymm of 8 rows);
// each panel's weights (any type) are unpacked to f32 once per block of the contraction
// dimension into a transposed buffer and reused for every activation row, 6 activation rows at
// a time (12 accumulators), with f32 FMA. Each output element is always computed by the same
// instruction sequence, whatever the thread count or tiling.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "cachet/threadpool.h"
#include "kernels/matmul_dequant.h"
#include "kernels/matmul_internal.h"

namespace cachet::matmul_internal {
namespace {

constexpr int kPanel = 16;    // weight rows per panel
constexpr int kNb = 6;        // activation rows per micro-tile
constexpr int64_t kKc = 256;  // contraction block (16 KiB panels); multiple of 256

struct Scratch {
  std::vector<float> wf;   // f32 panel [kc][16]
  std::vector<float> row;  // one dequantized weight row (segment)
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}
template <class V>
void grow(V& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
}

// Lane mask (all-ones lanes below count) for maskload / maskstore.
inline __m256i lanes(int64_t count) {
  const int c = static_cast<int>(std::clamp<int64_t>(count, 0, 8));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

template <int NB>
void kern(const float* wp, const float* x, int64_t ldx, int64_t kc, float* y, int64_t ldy,
          int64_t nr, bool accumulate) {
  __m256 a0[NB], a1[NB];
#pragma GCC unroll 16
  for (int j = 0; j < NB; ++j) a0[j] = a1[j] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 w0 = _mm256_loadu_ps(wp + k * kPanel);
    const __m256 w1 = _mm256_loadu_ps(wp + k * kPanel + 8);
#pragma GCC unroll 16
    for (int j = 0; j < NB; ++j) {
      const __m256 xb = _mm256_broadcast_ss(x + j * ldx + k);
      a0[j] = _mm256_fmadd_ps(w0, xb, a0[j]);
      a1[j] = _mm256_fmadd_ps(w1, xb, a1[j]);
    }
  }
  const __m256i m0 = lanes(nr), m1 = lanes(nr - 8);
#pragma GCC unroll 16
  for (int j = 0; j < NB; ++j) {
    float* yj = y + j * ldy;
    if (accumulate) {
      a0[j] = _mm256_add_ps(_mm256_maskload_ps(yj, m0), a0[j]);
      a1[j] = _mm256_add_ps(_mm256_maskload_ps(yj + 8, m1), a1[j]);
    }
    _mm256_maskstore_ps(yj, m0, a0[j]);
    _mm256_maskstore_ps(yj + 8, m1, a1[j]);
  }
}

using Kern = void (*)(const float*, const float*, int64_t, int64_t, float*, int64_t, int64_t, bool);
template <int... I>
constexpr std::array<Kern, sizeof...(I)> table(std::integer_sequence<int, I...>) {
  return {&kern<I + 1>...};
}
constexpr auto kKernels = table(std::make_integer_sequence<int, kNb>());

// wp[k][rr] = W[r0 + rr, k0 + k] as f32, zero for rows past the end.
void pack(const MatView& w, int64_t r0, int64_t k0, int64_t kc, float* wp, float* tmp) {
  const int64_t nr = std::min<int64_t>(kPanel, w.rows - r0);
  for (int64_t rr = 0; rr < nr; ++rr) {
    const float* src;
    if (w.type == DType::F32) {
      src = reinterpret_cast<const float*>(w.row(r0 + rr)) + k0;
    } else {
      to_f32(w.type, w.row(r0 + rr), k0, kc, tmp);
      src = tmp;
    }
    for (int64_t k = 0; k < kc; ++k) wp[k * kPanel + rr] = src[k];
  }
  for (int64_t rr = nr; rr < kPanel; ++rr)
    for (int64_t k = 0; k < kc; ++k) wp[k * kPanel + rr] = 0.0f;
}

struct Plan {
  const MatView* w;
  const float* x;
  int64_t n;
  float* y;
  int64_t panels, chunk, nchunks;
};

void run_units(const Plan& p, int64_t u0, int64_t u1) {
  const MatView& w = *p.w;
  Scratch& s = scratch();
  const int64_t cols = w.cols;
  grow(s.row, kKc);
  grow(s.wf, kKc * kPanel);
  for (int64_t u = u0; u < u1; ++u) {
    const int64_t r0 = (u / p.nchunks) * kPanel;
    const int64_t n0 = (u % p.nchunks) * p.chunk, n1 = std::min(p.n, n0 + p.chunk);
    for (int64_t k0 = 0; k0 < cols; k0 += kKc) {
      const int64_t kc = std::min(kKc, cols - k0);
      pack(w, r0, k0, kc, s.wf.data(), s.row.data());
      for (int64_t j = n0; j < n1; j += kNb) {
        const int nb = static_cast<int>(std::min<int64_t>(kNb, n1 - j));
        kKernels[nb - 1](s.wf.data(), p.x + j * cols + k0, cols, kc, p.y + j * w.rows + r0, w.rows,
                         w.rows - r0, k0 > 0);
      }
    }
  }
}

}  // namespace

void matmul_avx2(const MatView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  // The pool's jobs capture only the plan (one reference), so no call allocates.
  Plan p{&w, x, n, y, (w.rows + kPanel - 1) / kPanel, n, 1};
  const int64_t threads = pool.size();
  if (p.panels < 4 * threads) {  // too few panels to share: also split the activation rows
    const int64_t want = (4 * threads + p.panels - 1) / p.panels;
    const int64_t most = std::max<int64_t>(1, n / (8 * kNb));
    const int64_t chunks = std::min(want, most);
    p.chunk = ((n + chunks - 1) / chunks + kNb - 1) / kNb * kNb;
    p.nchunks = (n + p.chunk - 1) / p.chunk;
  }
  // Units (a panel of weight rows x a chunk of activation rows) are claimed one at a time.
  pool.for_chunks(p.panels * p.nchunks, [&p](int64_t u) { run_units(p, u, u + 1); });
}

}  // namespace cachet::matmul_internal
