// AVX-512 matrix-matrix product. Output rows are processed in panels of 32 (two zmm of 16
// rows); each panel's weights are unpacked once per block of the contraction dimension into a
// transposed buffer and reused for every activation row, 12 activation rows at a time
// (24 accumulators). The activations are first copied into tiles of 12 rows, column by column,
// so that a micro-kernel reads them from one contiguous run (12 rows cols apart would fall in
// the same few L1 sets). Two arithmetic paths:
//  - f32: weights unpacked to f32 (exact for F32, F16, BF16; dequantized for block types) and
//    multiplied with the f32 activations by FMA;
//  - bf16: weights as bf16 pairs, activations rounded to bf16, multiplied by vdpbf16ps (f32
//    accumulation), as a bf16 GEMM does.
// vdpbf16ps does twice the work of an FMA per instruction, but some cores issue it at a
// quarter of the FMA rate, so the faster path is measured once per process (matmul_path) for
// the weights that can take either (F32 and F16 always take f32). Each output element is
// always computed by the same instruction sequence, whatever the thread count or tiling.
// GCC 12's AVX-512 intrinsics initialise "undefined" vectors from themselves, which
// -Wmaybe-uninitialized reports wherever they are inlined; the values are never read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "cachet/cpu.h"
#include "cachet/error.h"
#include "cachet/threadpool.h"
#include "kernels/matmul_dequant.h"
#include "kernels/matmul_internal.h"
#include "kernels/vecdot.h"

namespace cachet::matmul_internal {
namespace {

constexpr int kPanel = 32;        // weight rows per panel
constexpr int kNb = 12;           // activation rows per micro-tile
constexpr int64_t kKcF32 = 256;   // contraction block, f32 panels (32 KiB)
constexpr int64_t kKcBf16 = 512;  // contraction block, bf16 panels (32 KiB); multiple of 256

struct Scratch {
  std::vector<float> wf;     // f32 panel [kc][32]
  std::vector<uint32_t> wb;  // bf16-pair panel [kc / 2][32]
  std::vector<float> row;    // one dequantized weight row segment
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}
template <class V>
void grow(V& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
}

inline __mmask16 lanes(int64_t count) {
  if (count >= 16) return 0xFFFF;
  if (count <= 0) return 0;
  return static_cast<__mmask16>((1u << count) - 1);
}

// ---- micro-kernels ----------------------------------------------------------------------

// xt: the activation tile from column k0 of the block on, xt[k * kNb + j] (f32) or pair
// xt[p * kNb + j] (bf16).
template <int NB>
void kern_f32(const float* wp, const float* xt, int64_t kc, float* y, int64_t ldy, __mmask16 m0,
              __mmask16 m1, bool accumulate) {
  __m512 a0[NB], a1[NB];
#pragma GCC unroll 16
  for (int j = 0; j < NB; ++j) a0[j] = a1[j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 w0 = _mm512_loadu_ps(wp + k * kPanel);
    const __m512 w1 = _mm512_loadu_ps(wp + k * kPanel + 16);
#pragma GCC unroll 16
    for (int j = 0; j < NB; ++j) {
      const __m512 xb = _mm512_set1_ps(xt[k * kNb + j]);
      a0[j] = _mm512_fmadd_ps(w0, xb, a0[j]);
      a1[j] = _mm512_fmadd_ps(w1, xb, a1[j]);
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < NB; ++j) {
    float* yj = y + j * ldy;
    if (accumulate) {
      a0[j] = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, yj), a0[j]);
      a1[j] = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, yj + 16), a1[j]);
    }
    _mm512_mask_storeu_ps(yj, m0, a0[j]);
    _mm512_mask_storeu_ps(yj + 16, m1, a1[j]);
  }
}

template <int NB>
void kern_bf16(const uint32_t* wp, const uint32_t* xt, int64_t kc, float* y, int64_t ldy,
               __mmask16 m0, __mmask16 m1, bool accumulate) {
  __m512 a0[NB], a1[NB];
#pragma GCC unroll 16
  for (int j = 0; j < NB; ++j) a0[j] = a1[j] = _mm512_setzero_ps();
  const int64_t pairs = kc / 2;
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512bh w0 = (__m512bh)_mm512_loadu_si512(wp + p * kPanel);
    const __m512bh w1 = (__m512bh)_mm512_loadu_si512(wp + p * kPanel + 16);
#pragma GCC unroll 16
    for (int j = 0; j < NB; ++j) {
      const __m512bh xb = (__m512bh)_mm512_set1_epi32(static_cast<int>(xt[p * kNb + j]));
      a0[j] = _mm512_dpbf16_ps(a0[j], w0, xb);
      a1[j] = _mm512_dpbf16_ps(a1[j], w1, xb);
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < NB; ++j) {
    float* yj = y + j * ldy;
    if (accumulate) {
      a0[j] = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, yj), a0[j]);
      a1[j] = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, yj + 16), a1[j]);
    }
    _mm512_mask_storeu_ps(yj, m0, a0[j]);
    _mm512_mask_storeu_ps(yj + 16, m1, a1[j]);
  }
}

using KernF32 = void (*)(const float*, const float*, int64_t, float*, int64_t, __mmask16, __mmask16,
                         bool);
using KernBf16 = void (*)(const uint32_t*, const uint32_t*, int64_t, float*, int64_t, __mmask16,
                          __mmask16, bool);

template <int... I>
constexpr std::array<KernF32, sizeof...(I)> f32_table(std::integer_sequence<int, I...>) {
  return {&kern_f32<I + 1>...};
}
template <int... I>
constexpr std::array<KernBf16, sizeof...(I)> bf16_table(std::integer_sequence<int, I...>) {
  return {&kern_bf16<I + 1>...};
}
constexpr auto kF32Kernels = f32_table(std::make_integer_sequence<int, kNb>());
constexpr auto kBf16Kernels = bf16_table(std::make_integer_sequence<int, kNb>());

// ---- vectorized dequantization of the most used block types -----------------------------

inline __m512 u8x16_to_ps(__m128i v) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v));
}

void dq_q8_0_simd(const block_q8_0* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const __m512 d = _mm512_set1_ps(h2f(b[i].d));
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qs));
    _mm512_storeu_ps(
        y, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q))), d));
    _mm512_storeu_ps(
        y + 16,
        _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1))), d));
  }
}

void dq_q4_k_simd(const block_q4_K* b, int64_t nb, float* y) {
  const __m256i low = _mm256_set1_epi8(0x0F);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = h2f(b[i].d), mn = h2f(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int is = 0; is < 8; is += 2, q += 32, y += 64) {
      int sc, m;
      scale_min_k4(is, b[i].scales, &sc, &m);
      const __m512 d1 = _mm512_set1_ps(d * static_cast<float>(sc));
      const __m512 m1 = _mm512_set1_ps(mn * static_cast<float>(m));
      scale_min_k4(is + 1, b[i].scales, &sc, &m);
      const __m512 d2 = _mm512_set1_ps(d * static_cast<float>(sc));
      const __m512 m2 = _mm512_set1_ps(mn * static_cast<float>(m));
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
      const __m256i lo = _mm256_and_si256(v, low);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
      _mm512_storeu_ps(y, _mm512_fmsub_ps(u8x16_to_ps(_mm256_castsi256_si128(lo)), d1, m1));
      _mm512_storeu_ps(y + 16,
                       _mm512_fmsub_ps(u8x16_to_ps(_mm256_extracti128_si256(lo, 1)), d1, m1));
      _mm512_storeu_ps(y + 32, _mm512_fmsub_ps(u8x16_to_ps(_mm256_castsi256_si128(hi)), d2, m2));
      _mm512_storeu_ps(y + 48,
                       _mm512_fmsub_ps(u8x16_to_ps(_mm256_extracti128_si256(hi, 1)), d2, m2));
    }
  }
}

void dq_q6_k_simd(const block_q6_K* b, int64_t nb, float* y) {
  const __m256i low = _mm256_set1_epi8(0x0F), two = _mm256_set1_epi8(0x30);
  const __m512i off = _mm512_set1_epi32(32);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = h2f(b[i].d);
    const uint8_t* ql = b[i].ql;
    const uint8_t* qh = b[i].qh;
    const int8_t* sc = b[i].scales;
    for (int n = 0; n < 2; ++n, ql += 64, qh += 32, sc += 8, y += 128) {
      const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh));
      __m256i q[4];
      q[0] = _mm256_or_si256(_mm256_and_si256(l0, low),
                             _mm256_and_si256(_mm256_slli_epi16(h, 4), two));
      q[1] = _mm256_or_si256(_mm256_and_si256(l1, low),
                             _mm256_and_si256(_mm256_slli_epi16(h, 2), two));
      q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low),
                             _mm256_and_si256(h, two));
      q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low),
                             _mm256_and_si256(_mm256_srli_epi16(h, 2), two));
      for (int g = 0; g < 4; ++g) {
        const __m512 s0 = _mm512_set1_ps(d * static_cast<float>(sc[2 * g]));
        const __m512 s1 = _mm512_set1_ps(d * static_cast<float>(sc[2 * g + 1]));
        const __m512i a = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(q[g])), off);
        const __m512i c =
            _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(q[g], 1)), off);
        _mm512_storeu_ps(y + 32 * g, _mm512_mul_ps(s0, _mm512_cvtepi32_ps(a)));
        _mm512_storeu_ps(y + 32 * g + 16, _mm512_mul_ps(s1, _mm512_cvtepi32_ps(c)));
      }
    }
  }
}

// to_f32 with hand-vectorized paths for Q8_0, Q4_K and Q6_K (values equal up to rounding).
void to_f32_fast(DType t, const uint8_t* row, int64_t k0, int64_t n, float* out) {
  switch (t) {
    case DType::Q8_0:
      return dq_q8_0_simd(reinterpret_cast<const block_q8_0*>(row) + k0 / 32, n / 32, out);
    case DType::Q4_K:
      return dq_q4_k_simd(reinterpret_cast<const block_q4_K*>(row) + k0 / 256, n / 256, out);
    case DType::Q6_K:
      return dq_q6_k_simd(reinterpret_cast<const block_q6_K*>(row) + k0 / 256, n / 256, out);
    default:
      return to_f32(t, row, k0, n, out);
  }
}

// ---- packing ----------------------------------------------------------------------------

// Bytes of the row-layout blocks of one row over a contraction block, for the packed layouts
// (Q8_0 is the larger: 34 bytes per 32 columns).
constexpr size_t kUnpackBytes = kKcBf16 / 32 * sizeof(block_q8_0);
static_assert(kUnpackBytes >= kKcBf16 / 256 * sizeof(block_q4_K) &&
              kUnpackBytes >= kKcBf16 / 256 * sizeof(block_q6_K));

// wp[k][rr] = W[r0 + rr, k0 + k] as f32, zero for rows past the end.
void pack_f32(const MatView& w, int64_t r0, int64_t k0, int64_t kc, float* wp, float* tmp) {
  const int64_t nr = std::min<int64_t>(kPanel, w.rows - r0);
  if (w.layout == MatLayout::BF16_X16 && r0 + kPanel <= w.rows / 16 * 16) {
    // Two whole groups: pair p of a 32-column chunk holds the 16 rows' (k, k + 1) as words;
    // a bf16 is the high half of its f32.
    const __m512i hi = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
    for (int64_t half = 0; half < 2; ++half) {
      const uint8_t* group = w.row(r0 + 16 * half);
      for (int64_t k = 0; k < kc; k += 2) {
        const __m512i v = _mm512_loadu_si512(group + ((k0 + k) / 32) * 1024 + ((k0 + k) % 32) * 32);
        _mm512_storeu_ps(wp + k * kPanel + 16 * half,
                         _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
        _mm512_storeu_ps(wp + (k + 1) * kPanel + 16 * half,
                         _mm512_castsi512_ps(_mm512_and_si512(v, hi)));
      }
    }
    return;
  }
  for (int64_t rr = 0; rr < nr; ++rr) {
    const float* src;
    if (w.type == DType::F32) {
      src = reinterpret_cast<const float*>(w.row(r0 + rr)) + k0;
    } else if (w.layout != MatLayout::Rows) {
      const int64_t be = dtype_info(w.type).block_elems;
      alignas(64) uint8_t blk[kUnpackBytes];
      unpack_row_blocks(w, r0 + rr, k0 / be, kc / be, blk);
      to_f32_fast(w.type, blk, 0, kc, tmp);
      src = tmp;
    } else {
      to_f32_fast(w.type, w.row(r0 + rr), k0, kc, tmp);
      src = tmp;
    }
    for (int64_t k = 0; k < kc; ++k) wp[k * kPanel + rr] = src[k];
  }
  for (int64_t rr = nr; rr < kPanel; ++rr)
    for (int64_t k = 0; k < kc; ++k) wp[k * kPanel + rr] = 0.0f;
}

// wp[p][rr] = bf16 pair (W[r0 + rr, k0 + 2p], W[r0 + rr, k0 + 2p + 1]); kc a multiple of 32.
void pack_bf16(const MatView& w, int64_t r0, int64_t k0, int64_t kc, uint32_t* wp, float* tmp) {
  const int64_t nr = std::min<int64_t>(kPanel, w.rows - r0);
  alignas(64) uint32_t pairs[16];
  if (w.layout == MatLayout::BF16_X16) {  // already pairs of 16 rows, as the panel holds them
    const int64_t packed = w.rows / 16 * 16;
    for (int64_t half = 0; half < 2; ++half) {
      const int64_t g0 = r0 + 16 * half;
      if (g0 >= w.rows) {
        for (int64_t p = 0; p < kc / 2; ++p) std::memset(wp + p * kPanel + 16 * half, 0, 64);
      } else if (g0 < packed) {
        const uint8_t* group = static_cast<const uint8_t*>(w.data) + g0 * w.row_stride;
        for (int64_t p = 0; p < kc / 2; ++p)  // pair p of the block: chunk (k0 + 2p) / 32
          std::memcpy(wp + p * kPanel + 16 * half,
                      group + ((k0 + 2 * p) / 32) * 1024 + ((k0 / 2 + p) % 16) * 64, 64);
      } else {  // rows after the last group, in row layout
        for (int64_t rr = g0; rr < std::min(g0 + 16, w.rows); ++rr) {
          const uint8_t* src = w.row(rr) + 2 * k0;
          for (int64_t p = 0; p < kc / 2; ++p)
            std::memcpy(wp + p * kPanel + (rr - r0), src + 4 * p, 4);
        }
        for (int64_t rr = w.rows; rr < g0 + 16; ++rr)
          for (int64_t p = 0; p < kc / 2; ++p) wp[p * kPanel + (rr - r0)] = 0;
      }
    }
    return;
  }
  if (w.type == DType::BF16) {  // already bf16: a pair is two adjacent values
    for (int64_t rr = 0; rr < nr; ++rr) {
      const uint8_t* src = w.row(r0 + rr) + 2 * k0;
      for (int64_t p = 0; p < kc / 2; ++p) std::memcpy(wp + p * kPanel + rr, src + 4 * p, 4);
    }
    for (int64_t rr = nr; rr < kPanel; ++rr)
      for (int64_t p = 0; p < kc / 2; ++p) wp[p * kPanel + rr] = 0;
    return;
  }
  for (int64_t rr = 0; rr < nr; ++rr) {
    if (w.layout != MatLayout::Rows) {  // X16: this row's blocks back in row layout
      const int64_t be = dtype_info(w.type).block_elems;
      alignas(64) uint8_t blk[kUnpackBytes];
      unpack_row_blocks(w, r0 + rr, k0 / be, kc / be, blk);
      to_f32_fast(w.type, blk, 0, kc, tmp);
    } else {
      to_f32_fast(w.type, w.row(r0 + rr), k0, kc, tmp);
    }
    for (int64_t k = 0; k < kc; k += 32) {
      const __m512bh v =
          _mm512_cvtne2ps_pbh(_mm512_loadu_ps(tmp + k + 16), _mm512_loadu_ps(tmp + k));
      _mm512_store_si512(pairs, (__m512i)v);
      uint32_t* dst = wp + (k / 2) * kPanel + rr;
      for (int p = 0; p < 16; ++p) dst[p * kPanel] = pairs[p];
    }
  }
  for (int64_t rr = nr; rr < kPanel; ++rr)
    for (int64_t p = 0; p < kc / 2; ++p) wp[p * kPanel + rr] = 0;
}

// ---- drivers ----------------------------------------------------------------------------

// Activation rows per unit of work: all n when the panels alone give every thread at least four
// units, else n cut into chunks of whole `unit`s (at most n / (min_units unit) chunks), so that
// there are about that many units.
struct Chunks {
  int64_t chunk, count;
};
Chunks activation_chunks(int64_t panels, int64_t threads, int64_t n, int64_t unit,
                         int64_t min_units) {
  if (panels >= 4 * threads) return {n, 1};
  const int64_t want = (4 * threads + panels - 1) / panels;
  const int64_t chunks = std::min(want, std::max<int64_t>(1, n / (min_units * unit)));
  const int64_t chunk = ((n + chunks - 1) / chunks + unit - 1) / unit * unit;
  return {chunk, (n + chunk - 1) / chunk};
}

struct Plan {
  const MatView* w;
  float* xt;     // f32 activation tiles (f32 path), else null
  uint32_t* xb;  // bf16-pair activation tiles (bf16 path), else null
  int64_t n;
  float* y;
  int64_t panels, chunk, nchunks;
  const float* x = nullptr;  // the activations, while the tiles are made
  int64_t tiles = 0;
};

void run_units(const Plan& p, int64_t u0, int64_t u1) {
  const MatView& w = *p.w;
  Scratch& s = scratch();
  const bool bf = p.xb != nullptr;
  const int64_t cols = w.cols, kcmax = bf ? kKcBf16 : kKcF32;
  grow(s.row, kcmax);
  if (bf)
    grow(s.wb, kcmax / 2 * kPanel);
  else
    grow(s.wf, kcmax * kPanel);
  for (int64_t u = u0; u < u1; ++u) {
    const int64_t r0 = (u / p.nchunks) * kPanel;
    const int64_t n0 = (u % p.nchunks) * p.chunk, n1 = std::min(p.n, n0 + p.chunk);
    const __mmask16 m0 = lanes(w.rows - r0), m1 = lanes(w.rows - r0 - 16);
    for (int64_t k0 = 0; k0 < cols; k0 += kcmax) {
      const int64_t kc = std::min(kcmax, cols - k0);
      if (bf)
        pack_bf16(w, r0, k0, kc, s.wb.data(), s.row.data());
      else
        pack_f32(w, r0, k0, kc, s.wf.data(), s.row.data());
      for (int64_t j = n0; j < n1; j += kNb) {  // n0 is a multiple of kNb: j starts a tile
        const int nb = static_cast<int>(std::min<int64_t>(kNb, n1 - j));
        float* yt = p.y + j * w.rows + r0;
        if (bf)
          kBf16Kernels[nb - 1](s.wb.data(), p.xb + (j * cols + k0 * kNb) / 2, kc, yt, w.rows, m0,
                               m1, k0 > 0);
        else
          kF32Kernels[nb - 1](s.wf.data(), p.xt + j * cols + k0 * kNb, kc, yt, w.rows, m0, m1,
                              k0 > 0);
      }
    }
  }
}

// Tile t holds activation rows [kNb t, kNb t + kNb) column by column: xt[t cols kNb + k kNb +
// j] = x[kNb t + j, k], zero past the last row (those lanes are never stored).
void to_f32_tiles(const float* x, int64_t n, int64_t cols, float* xt, int64_t t0, int64_t t1) {
  for (int64_t t = t0; t < t1; ++t) {
    float* dst = xt + t * cols * kNb;
    for (int j = 0; j < kNb; ++j) {
      const int64_t r = t * kNb + j;
      if (r >= n) {
        for (int64_t k = 0; k < cols; ++k) dst[k * kNb + j] = 0.0f;
        continue;
      }
      const float* src = x + r * cols;
      for (int64_t k = 0; k < cols; ++k) dst[k * kNb + j] = src[k];
    }
  }
}

// The same as bf16 pairs: xb[t (cols / 2) kNb + p kNb + j] = (x[.., 2p], x[.., 2p + 1]) rounded
// to bf16; cols is a multiple of 32 here.
void to_bf16_tiles(const float* x, int64_t n, int64_t cols, uint32_t* xb, int64_t t0, int64_t t1) {
  alignas(64) uint32_t pairs[16];
  for (int64_t t = t0; t < t1; ++t) {
    uint32_t* dst = xb + t * (cols / 2) * kNb;
    for (int j = 0; j < kNb; ++j) {
      const int64_t r = t * kNb + j;
      if (r >= n) {
        for (int64_t q = 0; q < cols / 2; ++q) dst[q * kNb + j] = 0;
        continue;
      }
      const float* src = x + r * cols;
      for (int64_t k = 0; k < cols; k += 32) {
        const __m512bh v =
            _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + k + 16), _mm512_loadu_ps(src + k));
        _mm512_store_si512(pairs, (__m512i)v);
        for (int q = 0; q < 16; ++q) dst[(k / 2 + q) * kNb + j] = pairs[q];
      }
    }
  }
}

// ---- AMX tiles (bf16) ----------------------------------------------------------------------
//
// TDPBF16PS multiplies a 16x32 bf16 tile A by a 32x16 tile B held as 16 rows of 16 bf16 pairs
// and adds to a 16x16 f32 tile C: 8192 multiply-adds in one instruction, the same arithmetic
// as vdpbf16ps (bf16 products, f32 sums). A is 16 activation rows of X in bf16 as they lie in
// memory; B is a 32-column chunk of a group of 16 weight rows in the BF16_X16 layout as it
// lies (pair p of the chunk = the 16 rows' (k, k + 1)), or the same cut from a panel that
// pack_bf16 made. A unit is a panel of 32 weight rows x a chunk of activation rows, in blocks
// of 32 x 32 outputs: four C tiles, two A and two B tiles per 32 columns.

constexpr int64_t kAmxRows = 32;  // activation rows per block (two A tiles)

// Eight tiles of 16 rows of 64 bytes (TileConfig).
constexpr TileConfig kTileConfig = tile_config(8, 0, 16);

// The configuration is per thread: loaded for each unit of work and released after it, so
// that no other user of the tiles on the thread is disturbed and idle threads carry no tile
// state.
void amx_configure() {
  _tile_loadconfig(&kTileConfig);
}

// Where B tiles come from: chunk c of the panel's two 16-row halves.
struct AmxB {
  const uint8_t* half[2];
  int64_t chunk_bytes;  // from one 32-column chunk to the next
  int64_t stride;       // between the 16 pair-rows of a tile
};

// Outputs [t0, t0 + 32) x [r0, r0 + 32) of Y, rows of Y ldy apart; rows past n or columns past
// the matrix's rows go to a scratch block and are dropped.
void amx_block(const AmxB& b, const uint16_t* xb, int64_t cols, int64_t t0, int64_t n, float* y,
               int64_t ldy, int64_t r0, int64_t nrows) {
  // GCC 12's tile loads and stores are asm statements that do not tell the compiler they
  // touch memory: barriers keep the panel's stores before them and the reads of tmp after.
  asm volatile("" ::: "memory");
  const int64_t lda = cols * 2;
  const uint16_t* a0 = xb + t0 * cols;
  const uint16_t* a1 = a0 + 16 * cols;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const int64_t chunks = cols / 32;
  for (int64_t c = 0; c < chunks; ++c) {
    _tile_loadd(4, a0 + 32 * c, lda);
    _tile_loadd(5, a1 + 32 * c, lda);
    _tile_loadd(6, b.half[0] + c * b.chunk_bytes, b.stride);
    _tile_loadd(7, b.half[1] + c * b.chunk_bytes, b.stride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  if (t0 + kAmxRows <= n && r0 + kPanel <= nrows) {
    float* yb = y + t0 * ldy + r0;
    const int64_t ldb = ldy * 4;
    _tile_stored(0, yb, ldb);
    _tile_stored(1, yb + 16, ldb);
    _tile_stored(2, yb + 16 * ldy, ldb);
    _tile_stored(3, yb + 16 * ldy + 16, ldb);
    asm volatile("" ::: "memory");
    return;
  }
  alignas(64) float tmp[kAmxRows][kPanel];
  _tile_stored(0, &tmp[0][0], kPanel * 4);
  _tile_stored(1, &tmp[0][16], kPanel * 4);
  _tile_stored(2, &tmp[16][0], kPanel * 4);
  _tile_stored(3, &tmp[16][16], kPanel * 4);
  asm volatile("" ::: "memory");
  const int64_t nt = std::min(kAmxRows, n - t0), nr = std::min<int64_t>(kPanel, nrows - r0);
  for (int64_t i = 0; i < nt; ++i) std::memcpy(y + (t0 + i) * ldy + r0, tmp[i], nr * 4);
}

struct AmxPlan {
  const MatView* w;
  const uint16_t* xb;  // X in bf16, row-major, zero rows up to a multiple of kAmxRows
  int64_t n;
  float* y;
  int64_t nchunks, chunk;  // activation rows per unit: a multiple of kAmxRows
};

void amx_unit(const AmxPlan& p, int64_t u) {
  const MatView& w = *p.w;
  amx_configure();
  const int64_t r0 = (u / p.nchunks) * kPanel;
  const int64_t n0 = (u % p.nchunks) * p.chunk, n1 = std::min(p.n, n0 + p.chunk);
  AmxB b;
  if (w.layout == MatLayout::BF16_X16 && r0 + kPanel <= w.rows / 16 * 16) {
    b = {{w.row(r0), w.row(r0 + 16)}, 1024, 64};  // the weights as they lie
  } else {  // unpacked to bf16 pairs, [cols / 2][32], by blocks of kKcBf16 columns
    Scratch& s = scratch();
    grow(s.wb, w.cols / 2 * kPanel);
    grow(s.row, kKcBf16);
    for (int64_t k0 = 0; k0 < w.cols; k0 += kKcBf16)
      pack_bf16(w, r0, k0, std::min(kKcBf16, w.cols - k0), s.wb.data() + k0 / 2 * kPanel,
                s.row.data());
    const auto* wb = reinterpret_cast<const uint8_t*>(s.wb.data());
    b = {{wb, wb + 64}, 16 * kPanel * 4, kPanel * 4};
  }
  for (int64_t t0 = n0; t0 < n1; t0 += kAmxRows)
    amx_block(b, p.xb, w.cols, t0, p.n, p.y, w.rows, r0, w.rows);
  _tile_release();
}

void to_bf16_rows(const float* x, int64_t cols, uint16_t* xb, int64_t j0, int64_t j1, int64_t n) {
  for (int64_t j = j0; j < j1; ++j) {
    uint16_t* dst = xb + j * cols;
    if (j >= n) {
      std::memset(dst, 0, static_cast<size_t>(cols) * 2);
      continue;
    }
    kern::round_x_bf16_avx512(x + j * cols, cols, dst);
  }
}

void matmul_amx(const MatView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  const int64_t padded = (n + kAmxRows - 1) / kAmxRows * kAmxRows;
  thread_local std::vector<uint16_t> xb;
  grow(xb, padded * w.cols);
  const int64_t panels = (w.rows + kPanel - 1) / kPanel;
  const Chunks c = activation_chunks(panels, pool.size(), padded, kAmxRows, 1);
  AmxPlan p{&w, xb.data(), n, y, c.count, c.chunk};
  // One reference captured (no allocation); xb.data() is the caller's buffer, as xb names each
  // thread's own.
  const struct {
    const float* x;
    uint16_t* xb;
    int64_t cols, n, padded;
  } a{x, xb.data(), w.cols, n, padded};
  pool.run([&a](int i, int k) {
    int64_t j0, j1;
    ThreadPool::split(a.padded, 1, i, k, &j0, &j1);
    to_bf16_rows(a.x, a.cols, a.xb, j0, j1, a.n);
  });
  pool.for_chunks(panels * p.nchunks, [&p](int64_t u) { amx_unit(p, u); });
}

// Multiply-adds per second of amx_block on data in L1 and L2.
double amx_rate(int calls) {
  constexpr int64_t cols = 512;
  alignas(64) static uint16_t xb[kAmxRows * cols];
  alignas(64) static uint32_t wb[cols / 2 * kPanel];
  alignas(64) static float y[kAmxRows * kPanel];
  amx_configure();
  const auto* wp = reinterpret_cast<const uint8_t*>(wb);
  const AmxB b{{wp, wp + 64}, 16 * kPanel * 4, kPanel * 4};
  const auto t0 = std::chrono::steady_clock::now();
  for (int c = 0; c < calls; ++c) amx_block(b, xb, cols, 0, kAmxRows, y, kPanel, 0, kPanel);
  _tile_release();
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(calls) * cols * kPanel * kAmxRows / std::max(sec, 1e-9);
}

// ---- which path -------------------------------------------------------------------------

// Multiply-adds per second of the full micro-kernel of a path on data in L1 (best of rounds,
// the two paths alternating).
double kernel_rate(bool bf16, int calls) {
  constexpr int64_t kc = 256;
  alignas(64) static float wf[kc * kPanel], xt[kc * kNb], y[kNb * kPanel];
  alignas(64) static uint32_t wb[kc / 2 * kPanel], xb[kc / 2 * kNb];
  const auto t0 = std::chrono::steady_clock::now();
  for (int c = 0; c < calls; ++c) {
    if (bf16)
      kern_bf16<kNb>(wb, xb, kc, y, kPanel, 0xFFFF, 0xFFFF, c > 0);
    else
      kern_f32<kNb>(wf, xt, kc, y, kPanel, 0xFFFF, 0xFFFF, c > 0);
  }
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(calls) * kc * kPanel * kNb / std::max(sec, 1e-9);
}

MatmulPath measure_path() {
  const bool amx = amx_bf16_usable();
  double f32 = 0, bf16 = 0, tiles = 0;
  for (int round = 0; round < 5; ++round) {  // a few ms in all
    f32 = std::max(f32, kernel_rate(false, 100));
    bf16 = std::max(bf16, kernel_rate(true, 100));
    if (amx) tiles = std::max(tiles, amx_rate(100));
  }
  // Clear margins, so that a noisy measurement does not flip a host's choice (and with it
  // the last bits of BF16 results) from run to run.
  if (tiles > 1.5 * std::max(f32, bf16)) return MatmulPath::Amx;
  return bf16 > 1.25 * f32 ? MatmulPath::Bf16 : MatmulPath::F32;
}

std::atomic<int> g_path_set{-1};  // set_matmul_path: -1 none, else the path

// The environment's or the measured path, decided on first use. A static initialised by a
// lambda, not std::call_once: when the lambda throws (a bad CACHET_MATMUL), the next call
// tries again instead of blocking (libstdc++'s call_once stays locked after an exception).
MatmulPath chosen_path() {
  static const MatmulPath path = [] {
    const char* env = std::getenv("CACHET_MATMUL");
    const std::string_view v = env ? env : "auto";
    if (v == "f32") return MatmulPath::F32;
    if (v == "bf16") return MatmulPath::Bf16;
    if (v == "amx") {
      CACHET_CHECK(amx_bf16_usable(), "CACHET_MATMUL=amx: this CPU (or OS) has no AMX-BF16");
      return MatmulPath::Amx;
    }
    if (v == "auto") return measure_path();
    fail("CACHET_MATMUL='", v, "': expected f32, bf16, amx or auto");
  }();
  return path;
}

}  // namespace

void avx512_set_matmul_path(std::optional<MatmulPath> path) {
  if (path == MatmulPath::Amx && !amx_bf16_usable()) path = MatmulPath::Bf16;  // the same sums
  g_path_set.store(path ? static_cast<int>(*path) : -1, std::memory_order_relaxed);
}

MatmulPath avx512_matmul_path() {
  const int set = g_path_set.load(std::memory_order_relaxed);
  if (set >= 0) return static_cast<MatmulPath>(set);
  return chosen_path();
}

void matmul_avx512(const MatView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  // The pool's jobs capture only the plan (one reference), so no call allocates.
  const MatmulPath path = matrix_path(w.type, w.cols);
  if (path == MatmulPath::Amx) return matmul_amx(w, x, n, y, pool);
  Plan p{&w, nullptr, nullptr, n, y, (w.rows + kPanel - 1) / kPanel, n, 1};
  const Chunks c = activation_chunks(p.panels, pool.size(), n, kNb, 4);
  p.chunk = c.chunk;
  p.nchunks = c.count;
  const int64_t tiles = (n + kNb - 1) / kNb;
  const bool bf = path == MatmulPath::Bf16;
  thread_local std::vector<float> xt;
  thread_local std::vector<uint32_t> xb;
  if (bf) {
    grow(xb, tiles * kNb * (w.cols / 2));
    p.xb = xb.data();
  } else {
    grow(xt, tiles * kNb * w.cols);
    p.xt = xt.data();
  }
  p.x = x;
  p.tiles = tiles;
  pool.run([&p](int i, int k) {
    int64_t t0, t1;
    ThreadPool::split(p.tiles, 1, i, k, &t0, &t1);
    if (p.xb)
      to_bf16_tiles(p.x, p.n, p.w->cols, p.xb, t0, t1);
    else
      to_f32_tiles(p.x, p.n, p.w->cols, p.xt, t0, t1);
  });
  // Units (a panel of weight rows x a chunk of activation rows) are claimed one at a time.
  pool.for_chunks(p.panels * p.nchunks, [&p](int64_t u) { run_units(p, u, u + 1); });
}

}  // namespace cachet::matmul_internal
