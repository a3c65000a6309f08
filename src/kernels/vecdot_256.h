// Row kernels on 256-bit vectors, shared by matvec_avx2.cpp and matvec_avx512.cpp. Each includes
// this header once, with CACHET_VECDOT_VNNI defined (AVX-512 VNNI dot products) or not (AVX2
// maddubs/madd); everything here has internal linkage so the two builds never mix.
//
// Integer kernels: x is quantized to 8 bits (Q8_32 or Q8_K, see vecdot.h); weights are unpacked
// to unsigned bytes u and multiplied with x by u8 x s8 products summed into int32 lanes; the
// offsets of the formats (-8, -16, -32, -4) are applied through the block sums of x.
#pragma once
#include <immintrin.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "cachet/quant.h"
#include "kernels/blocks.h"
#include "kernels/vecdot.h"

namespace cachet::kern {
namespace {

inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float hsum4(__m128 s) {
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float h2f(uint16_t h) {
  return _cvtsh_ss(h);
}
inline __m256i loadu256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}
inline __m128i loadu128(const void* p) {
  return _mm_loadu_si128(static_cast<const __m128i*>(p));
}
template <typename B>
inline const B* blocks(const uint8_t* row) {
  return reinterpret_cast<const B*>(row);
}

#ifdef CACHET_VECDOT_VNNI
// acc + sum of 4 adjacent u8 x s8 products per int32 lane.
inline __m256i dot_us(__m256i acc, __m256i u, __m256i s) {
  return _mm256_dpbusd_epi32(acc, u, s);
}
// acc + sum of 2 adjacent i16 x i16 products per int32 lane.
inline __m256i dot_ww(__m256i acc, __m256i a, __m256i b) {
  return _mm256_dpwssd_epi32(acc, a, b);
}
#else
inline __m256i dot_us(__m256i acc, __m256i u, __m256i s) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}
inline __m256i dot_ww(__m256i acc, __m256i a, __m256i b) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
}
#endif

// Byte j of the result is 0xFF where bit j of bits is set, else 0.
inline __m256i bits_to_bytes(uint32_t bits) {
  __m256i v = _mm256_set1_epi32(static_cast<int>(bits));
  v = _mm256_shuffle_epi8(v, _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                               0x0101010101010101, 0x0000000000000000));
  v = _mm256_or_si256(v, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
  return _mm256_cmpeq_epi8(v, _mm256_set1_epi64x(-1));
}

// Runs K::run<NR> on tiles of NR rows, then single rows.
template <typename K, int NR>
void rows_tiled(const MatView& w, const XPrep& x, float* y, int64_t r0, int64_t r1) {
  int64_t r = r0;
  for (; r + NR <= r1; r += NR) {
    const uint8_t* rp[NR];
    for (int i = 0; i < NR; ++i) rp[i] = w.row(r + i);
    K::template run<NR>(rp, x, w.cols, y + r);
  }
  for (; r < r1; ++r) {
    const uint8_t* rp[1] = {w.row(r)};
    K::template run<1>(rp, x, w.cols, y + r);
  }
}

// ---- plain element types: f32 FMA with the exact x --------------------------------------

struct LoadF32 {
  static constexpr int kSize = 4;
  static __m256 load(const uint8_t* p) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  }
  static float one(const uint8_t* p) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
};
struct LoadF16 {
  static constexpr int kSize = 2;
  static __m256 load(const uint8_t* p) { return _mm256_cvtph_ps(loadu128(p)); }
  static float one(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return h2f(h);
  }
};
struct LoadBF16 {
  static constexpr int kSize = 2;
  static __m256 load(const uint8_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(loadu128(p)), 16));
  }
  static float one(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

template <typename L>
struct KFloat {
  template <int NR>
  static void run(const uint8_t* const* rp, const XPrep& x, int64_t n, float* out) {
    const float* xf = x.f32;
    __m256 acc[NR][2];
    for (int r = 0; r < NR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m256 x0 = _mm256_loadu_ps(xf + i), x1 = _mm256_loadu_ps(xf + i + 8);
      for (int r = 0; r < NR; ++r) {
        acc[r][0] = _mm256_fmadd_ps(L::load(rp[r] + i * L::kSize), x0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(L::load(rp[r] + (i + 8) * L::kSize), x1, acc[r][1]);
      }
    }
    for (int r = 0; r < NR; ++r) {
      float s = hsum8(_mm256_add_ps(acc[r][0], acc[r][1]));
      for (int64_t j = i; j < n; ++j) s += L::one(rp[r] + j * L::kSize) * xf[j];
      out[r] = s;
    }
  }
};

// ---- 32-element block formats against Q8_32 x ------------------------------------------

struct KQ8_0 {
  template <int NR>
  static void run(const uint8_t* const* rp, const XPrep& x, int64_t n, float* out) {
    const int64_t nb = n / 32;
    __m256 acc[NR];
    for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const __m256i xv = loadu256(x.qs + 32 * b);
      const float dx = x.d[b];
      for (int r = 0; r < NR; ++r) {
        const block_q8_0* bl = blocks<block_q8_0>(rp[r]) + b;
        const __m256i wv = loadu256(bl->qs);
        const __m256i p =
            dot_us(_mm256_setzero_si256(), _mm256_sign_epi8(wv, wv), _mm256_sign_epi8(xv, wv));
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(h2f(bl->d) * dx), acc[r]);
      }
    }
    for (int r = 0; r < NR; ++r) out[r] = hsum8(acc[r]);
  }
};

inline __m256i nibbles16(const uint8_t* qs) {
  const __m128i q = loadu128(qs);
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
}

// Q4_0, Q4_1, Q5_0, Q5_1: w = d * u - off (Q4_0: off = 8d, Q5_0: 16d) or d * u + m.
template <typename B, int kBits, bool kMin>
struct KQ32 {
  static __m256i unpack(const B* bl) {
    __m256i u = nibbles16(bl->qs);
    if constexpr (kBits == 5) {
      uint32_t qh;
      std::memcpy(&qh, bl->qh, 4);
      u = _mm256_or_si256(u, _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10)));
    }
    return u;
  }
  template <int NR>
  static void run(const uint8_t* const* rp, const XPrep& x, int64_t n, float* out) {
    const int64_t nb = n / 32;
    constexpr int kOff = kMin ? 0 : (kBits == 4 ? 8 : 16);
    __m256 acc[NR];
    float macc[NR];
    for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps(), macc[r] = 0;
    for (int64_t b = 0; b < nb; ++b) {
      const __m256i xv = loadu256(x.qs + 32 * b);
      const float dx = x.d[b];
      const __m256i init = _mm256_zextsi128_si256(_mm_cvtsi32_si128(-kOff * x.isum[b]));
      for (int r = 0; r < NR; ++r) {
        const B* bl = blocks<B>(rp[r]) + b;
        const __m256i p = dot_us(init, unpack(bl), xv);
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(h2f(bl->d) * dx), acc[r]);
        if constexpr (kMin) macc[r] += h2f(bl->m) * x.fsum[b];
      }
    }
    for (int r = 0; r < NR; ++r) out[r] = hsum8(acc[r]) + macc[r];
  }
};

// ---- K-quants against Q8_K x -------------------------------------------------------------

// The 8 six-bit scales and mins of a Q4_K / Q5_K block (12 bytes at s, 16 readable): bytes
// 0..7 of the result are the scales, 8..15 the mins.
inline __m128i k4_scales(const uint8_t* s) {
  const __m128i a = loadu128(s);                 // a0 a1 a2 (a3 unused)
  const __m128i p = _mm_shuffle_epi32(a, 0x98);  // a0 a2 a1 a2
  const __m128i q = _mm_shuffle_epi32(a, 0x50);  // a0 a0 a1 a1
  const __m128i low = _mm_and_si128(_mm_srlv_epi32(p, _mm_setr_epi32(0, 0, 0, 4)),
                                    _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
  const __m128i high = _mm_and_si128(_mm_slli_epi32(_mm_srli_epi32(q, 6), 4),
                                     _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
  return _mm_or_si128(low, high);  // scales 0-3, 4-7, mins 0-3, 4-7
}

// Broadcast of 16-bit word k of each 128-bit lane.
inline __m256i bcast_word(__m256i v, int k) {
  return _mm256_shuffle_epi8(v,
                             _mm256_set1_epi16(static_cast<short>(((2 * k + 1) << 8) | (2 * k))));
}

// Q4_K (kBits 4) and Q5_K (kBits 5).
template <int kBits>
struct KQ45K {
  using B = std::conditional_t<kBits == 4, block_q4_K, block_q5_K>;
  template <int NR>
  static void run(const uint8_t* const* rp, const XPrep& x, int64_t n, float* out) {
    const int64_t nb = n / 256;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[NR];
    __m128 macc[NR];
    for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps(), macc[r] = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      const int8_t* xq = x.qs + 256 * i;
      const __m128i bs16 =
          _mm_hadd_epi16(loadu128(x.bsums + 16 * i), loadu128(x.bsums + 16 * i + 8));
      __m256i xv[8];
      for (int j = 0; j < 8; ++j) xv[j] = loadu256(xq + 32 * j);
      for (int r = 0; r < NR; ++r) {
        const B* bl = blocks<B>(rp[r]) + i;
        const __m128i sm = k4_scales(bl->scales);
        const __m128i mins = _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8));
        const __m128i sc128 = _mm_cvtepu8_epi16(sm);
        const __m256i sc = _mm256_set_m128i(sc128, sc128);
        __m256i hb;
        if constexpr (kBits == 5) hb = loadu256(bl->qh);
        __m256i isum = _mm256_setzero_si256();
        for (int j = 0; j < 4; ++j) {
          const __m256i q = loadu256(bl->qs + 32 * j);
          __m256i lo = _mm256_and_si256(q, m4);
          __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
          if constexpr (kBits == 5) {
            // bit 2j of qh -> bit 4 of the low values, bit 2j+1 -> bit 4 of the high values
            const __m256i m16 = _mm256_set1_epi8(0x10);
            __m256i hl, hh;
            if (j < 2) {
              hl = _mm256_sll_epi16(hb, _mm_cvtsi32_si128(4 - 2 * j));
              hh = _mm256_sll_epi16(hb, _mm_cvtsi32_si128(3 - 2 * j));
            } else {
              hl = _mm256_srl_epi16(hb, _mm_cvtsi32_si128(2 * j - 4));
              hh = _mm256_srl_epi16(hb, _mm_cvtsi32_si128(2 * j - 3));
            }
            lo = _mm256_or_si256(lo, _mm256_and_si256(hl, m16));
            hi = _mm256_or_si256(hi, _mm256_and_si256(hh, m16));
          }
          isum = dot_ww(isum, _mm256_maddubs_epi16(lo, xv[2 * j]), bcast_word(sc, 2 * j));
          isum = dot_ww(isum, _mm256_maddubs_epi16(hi, xv[2 * j + 1]), bcast_word(sc, 2 * j + 1));
        }
        const float dx = x.d[i];
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(h2f(bl->d) * dx), acc[r]);
        macc[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_madd_epi16(mins, bs16)),
                               _mm_set1_ps(h2f(bl->dmin) * dx), macc[r]);
      }
    }
    for (int r = 0; r < NR; ++r) out[r] = hsum8(acc[r]) - hsum4(macc[r]);
  }
};

// Two sub-block scales (int8 s[k], s[k+1]) as 16-bit words: 8 copies of each.
inline __m256i pair_scales(__m128i s8, int k) {
  const __m128i idx = _mm_set_epi64x(0x0101010101010101LL * (k + 1), 0x0101010101010101LL * k);
  return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(s8, idx));
}

struct KQ6K {
  template <int NR>
  static void run(const uint8_t* const* rp, const XPrep& x, int64_t n, float* out) {
    const int64_t nb = n / 256;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    __m256 acc[NR];
    for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      const int8_t* xq = x.qs + 256 * i;
      const __m256i bs = loadu256(x.bsums + 16 * i);
      for (int r = 0; r < NR; ++r) {
        const block_q6_K* bl = blocks<block_q6_K>(rp[r]) + i;
        const __m128i s8 = loadu128(bl->scales);
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h) {
          const __m256i qh = loadu256(bl->qh + 32 * h);
          const __m256i l0 = loadu256(bl->ql + 64 * h), l1 = loadu256(bl->ql + 64 * h + 32);
          const __m256i q1 = _mm256_or_si256(_mm256_and_si256(l0, m4),
                                             _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
          const __m256i q2 = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                             _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
          const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                             _mm256_and_si256(qh, m30));
          const __m256i q4 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                             _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
          const int8_t* xh = xq + 128 * h;
          isum = dot_ww(isum, _mm256_maddubs_epi16(q1, loadu256(xh)), pair_scales(s8, 8 * h + 0));
          isum =
              dot_ww(isum, _mm256_maddubs_epi16(q2, loadu256(xh + 32)), pair_scales(s8, 8 * h + 2));
          isum =
              dot_ww(isum, _mm256_maddubs_epi16(q3, loadu256(xh + 64)), pair_scales(s8, 8 * h + 4));
          isum =
              dot_ww(isum, _mm256_maddubs_epi16(q4, loadu256(xh + 96)), pair_scales(s8, 8 * h + 6));
        }
        // offset -32: subtract 32 * sum_s scale[s] * bsums[s]
        const __m256i corr = _mm256_madd_epi16(_mm256_cvtepi8_epi16(s8), bs);
        isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(corr, 5));
        acc[r] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(h2f(bl->d) * x.d[i]), acc[r]);
      }
    }
    for (int r = 0; r < NR; ++r) out[r] = hsum8(acc[r]);
  }
};

// Q2_K: 16 groups of 16 with 4-bit scales (low nibble) and mins (high nibble); the 2-bit values
// of elements 128h + 32j + k are bits 2j, 2j + 1 of qs[32h + k]. Group g = 8h + 2j + (k >= 16),
// so one 32-byte run of values holds two groups: lane 0 and lane 1 of the maddubs sums.
struct KQ2K {
  template <int NR>
  static void run(const uint8_t* const* rp, const XPrep& x, int64_t n, float* out) {
    const int64_t nb = n / 256;
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    __m256 acc[NR], macc[NR];
    for (int r = 0; r < NR; ++r) acc[r] = macc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      const int8_t* xq = x.qs + 256 * i;
      const __m256i bs = loadu256(x.bsums + 16 * i);
      for (int r = 0; r < NR; ++r) {
        const block_q2_K* bl = blocks<block_q2_K>(rp[r]) + i;
        const __m128i s = loadu128(bl->scales);
        const __m128i sc = _mm_and_si128(s, m4);
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), m4));
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h) {
          const __m256i q = loadu256(bl->qs + 32 * h);
          for (int j = 0; j < 4; ++j) {
            const __m256i u = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
            const __m256i p = _mm256_maddubs_epi16(u, loadu256(xq + 128 * h + 32 * j));
            isum = dot_ww(isum, p, pair_scales(sc, 8 * h + 2 * j));
          }
        }
        const float dx = x.d[i];
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(h2f(bl->d) * dx), acc[r]);
        macc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(mins, bs)),
                                  _mm256_set1_ps(h2f(bl->dmin) * dx), macc[r]);
      }
    }
    for (int r = 0; r < NR; ++r) out[r] = hsum8(acc[r]) - hsum8(macc[r]);
  }
};

// The sixteen 6-bit scales of a Q3_K block, bias 32 removed: low 4 bits from scale bytes 0-7
// (low nibbles for groups 0-7, high for 8-15), high 2 bits of group g from bits 2 (g / 4),
// 2 (g / 4) + 1 of scale byte 8 + g % 4. The 12 scale bytes sit at 96-107 of the 110-byte block;
// they are read as bytes 94-109, inside the block, and shifted down.
static_assert(offsetof(block_q3_K, scales) == 96 && sizeof(block_q3_K) == 110);
inline __m128i q3k_scales16(const block_q3_K* bl) {
  const __m128i a = _mm_srli_si128(loadu128(bl->scales - 2), 2);
  const __m128i m4 = _mm_set1_epi8(0x0F);
  const __m128i low =
      _mm_unpacklo_epi64(_mm_and_si128(a, m4), _mm_and_si128(_mm_srli_epi16(a, 4), m4));
  const __m128i hv = _mm_srlv_epi32(_mm_shuffle_epi32(a, 0xAA), _mm_setr_epi32(0, 2, 4, 6));
  const __m128i high = _mm_slli_epi16(_mm_and_si128(hv, _mm_set1_epi8(3)), 4);
  return _mm_sub_epi8(_mm_or_si128(low, high), _mm_set1_epi8(32));
}

// Q3_K: the 2 low bits of each value as in Q2_K, the third in hmask (bit j + 4h of byte k for
// element 128h + 32j + k); value = (low | third << 2) - 4, 16 groups with signed scales. The
// -4 is taken off through the block sums of x.
struct KQ3K {
  template <int NR>
  static void run(const uint8_t* const* rp, const XPrep& x, int64_t n, float* out) {
    const int64_t nb = n / 256;
    const __m256i m3 = _mm256_set1_epi8(3), m4 = _mm256_set1_epi8(4);
    __m256 acc[NR];
    for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      const int8_t* xq = x.qs + 256 * i;
      const __m256i bs = loadu256(x.bsums + 16 * i);
      for (int r = 0; r < NR; ++r) {
        const block_q3_K* bl = blocks<block_q3_K>(rp[r]) + i;
        const __m128i sc = q3k_scales16(bl);
        const __m256i hm = loadu256(bl->hmask);
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h) {
          const __m256i q = loadu256(bl->qs + 32 * h);
          for (int j = 0; j < 4; ++j) {
            const int bit = 4 * h + j;  // moved to bit 2 of each byte
            const __m256i hb =
                bit >= 2 ? _mm256_srli_epi16(hm, bit - 2) : _mm256_slli_epi16(hm, 2 - bit);
            const __m256i u = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3),
                                              _mm256_and_si256(hb, m4));
            const __m256i p = _mm256_maddubs_epi16(u, loadu256(xq + 128 * h + 32 * j));
            isum = dot_ww(isum, p, pair_scales(sc, 8 * h + 2 * j));
          }
        }
        // offset -4: subtract 4 * sum_g scale[g] * bsums[g]
        const __m256i corr = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc), bs);
        isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(corr, 2));
        acc[r] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(h2f(bl->d) * x.d[i]), acc[r]);
      }
    }
    for (int r = 0; r < NR; ++r) out[r] = hsum8(acc[r]);
  }
};

// ---- any other type: dequantize the row, then f32 FMA ------------------------------------

void rows_generic(const MatView& w, const XPrep& x, float* y, int64_t r0, int64_t r1) {
  thread_local std::vector<float> buf;
  if (buf.size() < static_cast<size_t>(w.cols)) buf.resize(static_cast<size_t>(w.cols));
  for (int64_t r = r0; r < r1; ++r) {
    dequantize_row(w.type, w.row(r), buf.data(), w.cols);
    const uint8_t* rp[1] = {reinterpret_cast<const uint8_t*>(buf.data())};
    KFloat<LoadF32>::run<1>(rp, x, w.cols, y + r);
  }
}

// The kernel table of this instruction set.
Kernel kernel_256(DType t) {
  switch (t) {
    case DType::F32:
      return {rows_tiled<KFloat<LoadF32>, 4>, XKind::F32};
    case DType::F16:
      return {rows_tiled<KFloat<LoadF16>, 4>, XKind::F32};
    case DType::BF16:
      return {rows_tiled<KFloat<LoadBF16>, 4>, XKind::F32};
    case DType::Q8_0:
      return {rows_tiled<KQ8_0, 2>, XKind::Q8_32};
    case DType::Q4_0:
      return {rows_tiled<KQ32<block_q4_0, 4, false>, 2>, XKind::Q8_32};
    case DType::Q4_1:
      return {rows_tiled<KQ32<block_q4_1, 4, true>, 2>, XKind::Q8_32};
    case DType::Q5_0:
      return {rows_tiled<KQ32<block_q5_0, 5, false>, 2>, XKind::Q8_32};
    case DType::Q5_1:
      return {rows_tiled<KQ32<block_q5_1, 5, true>, 2>, XKind::Q8_32};
    case DType::Q4_K:
      return {rows_tiled<KQ45K<4>, 2>, XKind::Q8_K};
    case DType::Q5_K:
      return {rows_tiled<KQ45K<5>, 2>, XKind::Q8_K};
    case DType::Q6_K:
      return {rows_tiled<KQ6K, 2>, XKind::Q8_K};
    case DType::Q2_K:
      return {rows_tiled<KQ2K, 2>, XKind::Q8_K};
    case DType::Q3_K:
      return {rows_tiled<KQ3K, 2>, XKind::Q8_K};
    case DType::Q8_1:
    case DType::Q8_K:
      return {rows_generic, XKind::F32};
    default:
      return {};
  }
}

}  // namespace
}  // namespace cachet::kern
