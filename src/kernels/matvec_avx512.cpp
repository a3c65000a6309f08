// AVX-512 matvec kernels: 512-bit kernels for the most used weight types (F32, F16, BF16, Q8_0,
// Q4_K, Q6_K); the other types use the 256-bit kernels built with VNNI dot products.
#define CACHET_VECDOT_VNNI 1
#include <cstring>
#include <type_traits>

#include "kernels/matmul_dequant.h"
#include "kernels/matmul_internal.h"
#include "kernels/repack.h"
#include "kernels/vecdot_256.h"

namespace cachet::kern {
namespace {

inline float hsum16(__m512 v) {
  return hsum8(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}
inline __m512i loadu512(const void* p) {
  return _mm512_loadu_si512(p);
}
// 64 bits at p as a byte mask.
inline __mmask64 load_mask64(const uint8_t* p) {
  uint64_t m;
  std::memcpy(&m, p, 8);
  return _cvtu64_mask64(m);
}
// [a | b] from two 256-bit loads.
inline __m512i load2x256(const void* a, const void* b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(loadu256(a)), loadu256(b), 1);
}

// The lines `ahead` bytes past [p, p + n) of a weight row, which the kernel reads n bytes
// at a time: the hardware prefetcher alone keeps too few lines in flight for the 2 to 4
// streams per thread of these kernels. Prefetches past the matrix are harmless.
// 2 KiB ahead: 20 to 30% more throughput for Q6_K and Q8_0 at 4096x14336 on 2 threads.
constexpr int64_t kAhead = 2048;
inline void prefetch_ahead(const void* p, int64_t n) {
  const char* a = static_cast<const char*>(p) + kAhead;
  for (int64_t l = 0; l < n; l += 64) _mm_prefetch(a + l, _MM_HINT_T0);
}

// The lines of bytes [p, p + N), for the interleaved kernels: a chunk's lines some chunks ahead
// (run_groups, in the ways that prefetch), or a few lines at a time between a large chunk's
// loads (SpreadPrefetch). Past the matrix is harmless; pieces that do not start lines ask for a
// line twice now and then. N is a compile-time constant: GCC 12 dropped such a loop with a
// run-time count from the inlined kernels.
// The kernels' PF parameter multiplies their prefetch distance: 0 (no software prefetching),
// kNear (the distance each kernel gives) or kFar (three times it: StreamWay::OnePrefetchFar
// and TwoPrefetchFar, for hosts whose cores each stream faster or wait longer for memory).
// The kernels that prefetch a few lines at a time (SpreadPrefetch) also take kHalf: half the
// distance (StreamWay::TwoPrefetchNear).
constexpr int kNear = 1, kFar = 3, kHalf = 16;
// The bytes ahead of the way PF for a kernel whose own distance is `bytes` (SpreadPrefetch).
constexpr int64_t spread_ahead(int pf, int64_t bytes) {
  return pf & kHalf ? bytes / 2 : bytes * pf;
}

template <int64_t N>
[[gnu::always_inline]] inline void prefetch_lines(const uint8_t* p) {
  for (int64_t l = 0; l < N; l += 64)
    _mm_prefetch(reinterpret_cast<const char*>(p + l), _MM_HINT_T0);
}

// acc plus the dot products of w's byte quadruples with the four bytes at p, broadcast: one
// vpdpbusd with its broadcast from memory folded in. GCC 12 loads such a broadcast apart, and
// on some cores (Zen 5) that second instruction takes a slot of the two vector pipes the dot
// products need: a zmm broadcast load and a vpdpbusd each issue two per cycle there, and six
// of each took as long as eight dot products (an ad-hoc loop, not kept).
[[gnu::always_inline]] inline __m512i dpbusd_bcast(__m512i acc, __m512i w, const int32_t* p) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*p));
  return acc;
}

// *p in every lane, in a register: GCC would otherwise fold the load into each use.
[[gnu::always_inline]] inline __m512i broadcast32(const int32_t* p) {
  __m512i r;
  asm("vpbroadcastd %1, %0" : "=v"(r) : "m"(*p));
  return r;
}

// The low and high nibbles of v's bytes as two byte vectors: with four bits, the high ones left
// in place (16 times their value: one instruction each); with five, both at their value plus
// 16 where the fifth bit is set in the two 64-bit byte masks at h5 (low, then high nibbles).
template <bool kFive>
[[gnu::always_inline]] inline void split_nibbles(__m512i v, const uint8_t* h5, __m512i& lo,
                                                 __m512i& hi) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  // v in a register: GCC 12 folds its load into both instructions below, reading it twice
  asm("" : "+v"(v));
  lo = _mm512_and_si512(v, m4);
  if constexpr (kFive) {
    const __m512i c16 = _mm512_set1_epi8(16);
    lo = _mm512_mask_add_epi8(lo, load_mask64(h5), lo, c16);
    hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    hi = _mm512_mask_add_epi8(hi, load_mask64(h5 + 8), hi, c16);
  } else {
    (void)h5;
    hi = _mm512_andnot_si512(m4, v);
  }
}

// Every kernel here is written for NX activation rows at once (run<NR, NX>): a weight block
// is loaded and decoded once, then multiplied with each activation row by the same instruction
// sequence as with one row, so the outputs do not depend on NX.

// ---- plain element types ------------------------------------------------------------------

// 512-bit vectors of streamed weights are loaded as two 256-bit halves in the kernels that do
// little arithmetic per byte (F32 here, Q8_0_X16): on the host measured, a stream read by
// 256-bit loads ran up to a quarter faster than by 512-bit ones (bench_stream_overlap, Loads/),
// and F32 and Q8_0 matvecs gained 1-5%. The kernels with more arithmetic per byte (Q4_K, Q6_K,
// the BF16 FMA kernel) lost more to the added inserts than they gained.
struct L512F32 {
  static constexpr int kSize = 4;
  static __m512 load(const uint8_t* p) {
    return _mm512_insertf32x8(
        _mm512_castps256_ps512(_mm256_loadu_ps(reinterpret_cast<const float*>(p))),
        _mm256_loadu_ps(reinterpret_cast<const float*>(p + 32)), 1);
  }
};
struct L512F16 {
  static constexpr int kSize = 2;
  static __m512 load(const uint8_t* p) { return _mm512_cvtph_ps(loadu256(p)); }
};
struct L512BF16 {
  static constexpr int kSize = 2;
  static __m512 load(const uint8_t* p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(loadu256(p)), 16));
  }
};

// L512 for the 16-wide body, L256 for the rest (the same per-element values).
template <typename L512, typename L256>
struct KFloat512 {
  template <int NR, int NX>
  static void run(const uint8_t* const* rp, const XPrep* xs, int64_t n, float* out, int64_t ldo) {
    __m512 acc[NR][NX][2];
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < NX; ++j) acc[r][j][0] = acc[r][j][1] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      __m512 x0[NX], x1[NX];
      for (int j = 0; j < NX; ++j)
        x0[j] = _mm512_loadu_ps(xs[j].f32 + i), x1[j] = _mm512_loadu_ps(xs[j].f32 + i + 16);
      for (int r = 0; r < NR; ++r) {
        prefetch_ahead(rp[r] + i * L512::kSize, 32 * L512::kSize);
        const __m512 w0 = L512::load(rp[r] + i * L512::kSize);
        const __m512 w1 = L512::load(rp[r] + (i + 16) * L512::kSize);
        for (int j = 0; j < NX; ++j) {
          acc[r][j][0] = _mm512_fmadd_ps(w0, x0[j], acc[r][j][0]);
          acc[r][j][1] = _mm512_fmadd_ps(w1, x1[j], acc[r][j][1]);
        }
      }
    }
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < NX; ++j) {
        const float* xf = xs[j].f32;
        float s = hsum16(_mm512_add_ps(acc[r][j][0], acc[r][j][1]));
        for (int64_t c = i; c < n; ++c) s += L256::one(rp[r] + c * L256::kSize) * xf[c];
        out[j * ldo + r] = s;
      }
  }
};

// ---- BF16: vdpbf16ps on pairs, x rounded to bf16 ---------------------------------------------
//
// Where matmul_path() is Bf16 and rows are whole 32-blocks (else BF16 takes the FMA kernels,
// KFloat512 and KBF16F_X16, on x as given or rounded to bf16). x is rounded to bf16 (nearest even,
// within 2^-9 |x| of x: finer than the 8-bit activations of the quantized types, and what ggml and
// a bf16 PyTorch model do); products of bf16 values are exact in f32, so one vdpbf16ps per 32
// weights and activation row does the work. Columns past the last 32 use x as is.

void round_bf16(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x + i)));
  for (; i < n; ++i)  // the same rounding, one value at a time
    out[i] = static_cast<uint16_t>(
        _mm256_extract_epi16((__m256i)_mm512_cvtneps_pbh(_mm512_set1_ps(x[i])), 0));
}

struct KBF16_512 {
  template <int NR, int NX>
  static void run(const uint8_t* const* rp, const XPrep* xs, int64_t n, float* out, int64_t ldo) {
    __m512 acc[NR][NX];
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < NX; ++j) acc[r][j] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      __m512bh xb[NX];
      for (int j = 0; j < NX; ++j) xb[j] = (__m512bh)loadu512(xs[j].bf16 + i);
      for (int r = 0; r < NR; ++r) {
        prefetch_ahead(rp[r] + 2 * i, 64);
        const __m512bh w = (__m512bh)loadu512(rp[r] + 2 * i);
        for (int j = 0; j < NX; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], w, xb[j]);
      }
    }
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < NX; ++j) {
        const float* xf = xs[j].f32;
        float s = hsum16(acc[r][j]);
        for (int64_t c = i; c < n; ++c) s += LoadBF16::one(rp[r] + c * 2) * xf[c];
        out[j * ldo + r] = s;
      }
  }
};

// ---- Q8_0: two blocks per 512-bit vector ---------------------------------------------------

struct KQ8_0_512 {
  template <int NR, int NX>
  static void run(const uint8_t* const* rp, const XPrep* xs, int64_t n, float* out, int64_t ldo) {
    const int64_t nb = n / 32;
    const __m512i k80 = _mm512_set1_epi8(static_cast<char>(0x80));
    // words 0 and 17 of a 64-byte load at a block pair: the two f16 scales
    const __m512i didx = _mm512_set_epi16(17, 17, 17, 17, 17, 17, 17, 17, 0, 0, 0, 0, 0, 0, 0, 0,
                                          17, 17, 17, 17, 17, 17, 17, 17, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512 acc[NR][NX];
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < NX; ++j) acc[r][j] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      __m512i xv[NX], corr[NX];
      __m512 dx[NX];
      for (int j = 0; j < NX; ++j) {
        const XPrep& x = xs[j];
        xv[j] = loadu512(x.qs + 32 * b);
        // (w + 128) * x summed, minus 128 * sum(x) per block (lanes 0 and 8)
        corr[j] = _mm512_inserti32x4(_mm512_zextsi128_si512(_mm_cvtsi32_si128(-128 * x.isum[b])),
                                     _mm_cvtsi32_si128(-128 * x.isum[b + 1]), 2);
        dx[j] = _mm512_insertf32x8(_mm512_set1_ps(x.d[b]), _mm256_set1_ps(x.d[b + 1]), 1);
      }
      for (int r = 0; r < NR; ++r) {
        const block_q8_0* bl = blocks<block_q8_0>(rp[r]) + b;
        prefetch_ahead(bl, 2 * sizeof(block_q8_0));
        const __m512i w = _mm512_xor_si512(load2x256(bl[0].qs, bl[1].qs), k80);
        const __m512 dw =
            _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(didx, loadu512(bl))));
        for (int j = 0; j < NX; ++j) {
          const __m512i p = _mm512_dpbusd_epi32(corr[j], w, xv[j]);
          acc[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw, dx[j]), acc[r][j]);
        }
      }
    }
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < NX; ++j) {
        const XPrep& x = xs[j];
        float s = hsum16(acc[r][j]);
        if (b < nb) {  // odd last block
          const block_q8_0* bl = blocks<block_q8_0>(rp[r]) + b;
          const __m256i wv = loadu256(bl->qs), xv = loadu256(x.qs + 32 * b);
          const __m256i p =
              dot_us(_mm256_setzero_si256(), _mm256_sign_epi8(wv, wv), _mm256_sign_epi8(xv, wv));
          s += hsum8(_mm256_cvtepi32_ps(p)) * (h2f(bl->d) * x.d[b]);
        }
        out[j * ldo + r] = s;
      }
  }
};

// ---- Q4_K ---------------------------------------------------------------------------------

struct KQ4K_512 {
  template <int NR, int NX>
  static void run(const uint8_t* const* rp, const XPrep* xs, int64_t n, float* out, int64_t ldo) {
    const int64_t nb = n / 256;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    // Byte shuffles (within 128-bit lanes holding the 8 scales as words) that spread the scale
    // of each product word: low nibbles of 64 bytes hold sub-blocks 4c+0 | 4c+2, high nibbles
    // 4c+1 | 4c+3 (256-bit halves).
    __m512i sidx[4];
    for (int c = 0; c < 2; ++c)
      for (int h = 0; h < 2; ++h) {
        const int a = 4 * c + h, b = a + 2;
        const short wa = static_cast<short>(((2 * a + 1) << 8) | (2 * a));
        const short wb = static_cast<short>(((2 * b + 1) << 8) | (2 * b));
        sidx[2 * c + h] = _mm512_inserti64x4(_mm512_set1_epi16(wa), _mm256_set1_epi16(wb), 1);
      }
    __m512 acc[NR][NX];
    __m128 macc[NR][NX];
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < NX; ++j) acc[r][j] = _mm512_setzero_ps(), macc[r][j] = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      __m512i xv[NX][4];
      __m128i bs16[NX];
      __m128 dx[NX];
      for (int j = 0; j < NX; ++j) {
        const int8_t* xq = xs[j].qs + 256 * i;
        for (int c = 0; c < 2; ++c) {
          xv[j][2 * c] = load2x256(xq + 128 * c, xq + 128 * c + 64);
          xv[j][2 * c + 1] = load2x256(xq + 128 * c + 32, xq + 128 * c + 96);
        }
        bs16[j] =
            _mm_hadd_epi16(loadu128(xs[j].bsums + 16 * i), loadu128(xs[j].bsums + 16 * i + 8));
        dx[j] = _mm_set1_ps(xs[j].d[i]);
      }
      for (int r = 0; r < NR; ++r) {
        const block_q4_K* bl = blocks<block_q4_K>(rp[r]) + i;
        prefetch_ahead(bl, sizeof(block_q4_K));
        const __m128i sc_mn = k4_scales(bl->scales);
        const __m512i sc = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(sc_mn));
        const __m128i mins = _mm_cvtepu8_epi16(_mm_srli_si128(sc_mn, 8));
        __m512i isum[NX];
        for (int j = 0; j < NX; ++j) isum[j] = _mm512_setzero_si512();
        for (int c = 0; c < 2; ++c) {
          const __m512i q = loadu512(bl->qs + 64 * c);
          const __m512i lo = _mm512_and_si512(q, m4);
          const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
          const __m512i slo = _mm512_shuffle_epi8(sc, sidx[2 * c]);
          const __m512i shi = _mm512_shuffle_epi8(sc, sidx[2 * c + 1]);
          for (int j = 0; j < NX; ++j) {
            isum[j] = _mm512_dpwssd_epi32(isum[j], _mm512_maddubs_epi16(lo, xv[j][2 * c]), slo);
            isum[j] = _mm512_dpwssd_epi32(isum[j], _mm512_maddubs_epi16(hi, xv[j][2 * c + 1]), shi);
          }
        }
        uint32_t dm;
        std::memcpy(&dm, &bl->d, 4);  // d, dmin
        const __m128 dmf = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(dm)));
        for (int j = 0; j < NX; ++j) {
          const __m128 s = _mm_mul_ps(dmf, dx[j]);
          acc[r][j] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]), _mm512_broadcastss_ps(s), acc[r][j]);
          macc[r][j] = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_madd_epi16(mins, bs16[j])),
                                    _mm_shuffle_ps(s, s, 0x55), macc[r][j]);
        }
      }
    }
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < NX; ++j) out[j * ldo + r] = hsum16(acc[r][j]) - hsum4(macc[r][j]);
  }
};

// ---- Q6_K ---------------------------------------------------------------------------------

struct KQ6K_512 {
  template <int NR, int NX>
  static void run(const uint8_t* const* rp, const XPrep* xs, int64_t n, float* out, int64_t ldo) {
    const int64_t nb = n / 256;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    // qh bits for the low nibbles: bytes 0..31 bits 0-1, bytes 32..63 bits 2-3 -> bits 4-5
    const __m512i sh_lo = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    // for the high nibbles: bits 4-5 stay, bits 6-7 -> bits 4-5
    const __m512i sh_hi = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
    // 16-value sub-block k of a 64-value product uses scale 4 * part + k
    __m512i sidx[4];
    for (int part = 0; part < 4; ++part) {
      alignas(64) int16_t idx[32];
      for (int w = 0; w < 32; ++w) idx[w] = static_cast<int16_t>(4 * part + w / 8);
      sidx[part] = _mm512_load_si512(idx);
    }
    __m512 acc[NR][NX];
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < NX; ++j) acc[r][j] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      for (int r = 0; r < NR; ++r) {
        const block_q6_K* bl = blocks<block_q6_K>(rp[r]) + i;
        prefetch_ahead(bl, sizeof(block_q6_K));
        const __m256i sc16 = _mm256_cvtepi8_epi16(loadu128(bl->scales));
        const __m512i sc = _mm512_castsi256_si512(sc16);
        __m512i isum[NX];
        for (int j = 0; j < NX; ++j) isum[j] = _mm512_setzero_si512();
        for (int h = 0; h < 2; ++h) {
          const __m512i ql = loadu512(bl->ql + 64 * h);
          const __m512i qh = _mm512_broadcast_i64x4(loadu256(bl->qh + 32 * h));
          // (A & 0x0F already) | (B & C): ternary logic 0xF8
          const __m512i lo = _mm512_ternarylogic_epi32(_mm512_and_si512(ql, m4),
                                                       _mm512_sllv_epi16(qh, sh_lo), m30, 0xF8);
          const __m512i hi =
              _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                        _mm512_srlv_epi16(qh, sh_hi), m30, 0xF8);
          const __m512i slo = _mm512_permutexvar_epi16(sidx[2 * h], sc);
          const __m512i shi = _mm512_permutexvar_epi16(sidx[2 * h + 1], sc);
          for (int j = 0; j < NX; ++j) {
            const int8_t* xq = xs[j].qs + 256 * i;
            isum[j] =
                _mm512_dpwssd_epi32(isum[j], _mm512_maddubs_epi16(lo, loadu512(xq + 128 * h)), slo);
            isum[j] = _mm512_dpwssd_epi32(
                isum[j], _mm512_maddubs_epi16(hi, loadu512(xq + 128 * h + 64)), shi);
          }
        }
        const float d = h2f(bl->d);
        for (int j = 0; j < NX; ++j) {
          // offset -32: subtract 32 * sum_s scale[s] * bsums[s]
          const __m256i bs = loadu256(xs[j].bsums + 16 * i);
          const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs), 5);
          const __m512i t = _mm512_sub_epi32(isum[j], _mm512_zextsi256_si512(corr));
          acc[r][j] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_set1_ps(d * xs[j].d[i]), acc[r][j]);
        }
      }
    }
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < NX; ++j) out[j * ldo + r] = hsum16(acc[r][j]);
  }
};

// ---- Q4_K, 16 interleaved rows (MatLayout::Q4K_X16, repack.cpp) ------------------------------
//
// Each 512-bit lane is one row: vpdpbusd multiplies four columns of 16 rows by four activation
// bytes broadcast from memory, so a chunk of 16 rows x 256 columns takes 64 dot products, and
// its scales and mins are decoded once for the 16 rows. The high nibbles are dotted at 16 times
// their value (one instruction to isolate them) and their sum shifted down exactly. Two
// sub-blocks' sums share a lane as words, so one vpdpwssd applies both scales (instead of a
// vpmulld, two micro-ops, per sub-block); the integers are the same as multiplying each sum
// by its scale: over 8 sub-blocks at most 8 * 63 * 2 * 16 * 15 * 128, inside int32.

template <bool kFive>
struct KQ45K_X16 {
  static constexpr int64_t kChunkCols = 256, kChunkBytes = kFive ? kQ5X16Chunk : kX16Chunk;
  static constexpr int kAcc = 1;
  // Four groups side by side (one activation row): at 4096x14336, 2 threads, alternating runs
  // over 1 GiB of copies, 29.5-29.7 GB/s against 26.0-26.5 with two; 2560x7680 and 7680x2560
  // 26.5 against 24.5-25. (Eight: 30.4 at 4096x14336 but slower at the smaller shapes.) With
  // two activation rows (MetaVoice's guidance rows), four groups gained nothing on one host and
  // 3% on another: stage 1 at 30.9-31.4 steps/s against 29.9-30.5 with two (`cachet bench
  // --random metavoice-1b --type Q4_K -t 2 --decode-steps 128`, CACHET_STREAM=4 and 2 in turn).
  template <int NX>
  static constexpr int kMaxGroups = NX <= 2 ? 4 : 2;
  template <int NX>
  static constexpr StreamWay kDefaultWay = StreamWay::TwoPrefetch;
  static constexpr int64_t kPrefetchBytes = 2048;
  // Groups read side by side share the activation quadruples: G groups load each quadruple
  // once into a register (vpbroadcastd) where one group alone folds it into its dot product.
  // A Zen 5 core issues two loads a cycle, of any width, and with one group the broadcasts are
  // most of a chunk's loads (eight per 64 bytes of weights and activation row: with two rows
  // 168 loads a chunk, 84 cycles, against 105 cycles for its bytes from memory at 70 GB/s).
  // Shared, 2 threads, alternating builds: at 4096x14336 two groups streamed 61-63 GB/s
  // against 53-57 and four 59 against 28-30; 7680x2560, two groups 55-59 against 46-48; two
  // activation rows at 8192x2048, two groups 56-58 against 43-46. One group stays where it
  // was (55-59 GB/s at 7680x2560), and on that host the fastest way, whichever the tuner
  // picks, was no faster than before: `cachet bench --random metavoice-1b --type Q4_K -t 2
  // --decode-steps 128`, alternating builds at a 70 GB/s probe, 63.7 and 65.1 steps/s
  // against 63.8 and 67.0. What changed is that two groups no longer lose when picked.
  // In L2 (512x2560, one thread) two groups computed at 102-106 GB/s-equivalent against 97-99.
  // With two rows and four groups the accumulators do not fit: those take the groups apart.
  // The integers are the same either way, and so are the outputs.
  template <int G, int NX>
  static constexpr bool kShareX = G >= 2 && (NX == 1 || (NX == 2 && G == 2));
  template <int G, int NX, int PF>
  [[gnu::always_inline]] static inline void chunks(const uint8_t* const* cs, int64_t i,
                                                   const XPrep* xs, __m512 (*acc0)[kAcc][NX]) {
    constexpr bool kEachSubBlock = kFive || (G > 1 && NX > 1);
    constexpr int64_t kAhead = spread_ahead(PF, kPrefetchBytes);
    const __m512i m6w = _mm512_set1_epi16(0x3F);
    const __m512i mhi = _mm512_set1_epi32(0x003C003C), low_words = _mm512_set1_epi32(0xFFFF);
    __m512i iacc[G][NX], imin[G][NX];
    alignas(16) int32_t bpair[NX][4];  // (sum of x over sub-block 2k, over 2k + 1) as words
    for (int j = 0; j < NX; ++j) {
      for (int g = 0; g < G; ++g) iacc[g][j] = imin[g][j] = _mm512_setzero_si512();
      const int16_t* bs = xs[j].bsums + 16 * i;
      _mm_store_si128(reinterpret_cast<__m128i*>(bpair[j]),
                      _mm_hadd_epi16(loadu128(bs), loadu128(bs + 8)));
    }
    for (int k = 0; k < 4; ++k) {
      __m512i sc[G];
      for (int g = 0; g < G; ++g) {
        const uint8_t* c = cs[g];
        if constexpr (kAhead)  // a quarter of a chunk's lines (Q4_K 36, Q5_K 44) per sub-block pair
          prefetch_lines<kChunkBytes / 4>(c + kAhead + kChunkBytes / 4 * k);
        // A bytes as words: lane r = (byte of sub-block 2k, byte of 2k + 1) of row r
        const __m512i a = _mm512_cvtepu8_epi16(loadu256(c + 64 + 32 * k));
        const __m512i b = _mm512_cvtepu8_epi32(loadu128(c + 192 + 16 * k));
        sc[g] = _mm512_and_si512(a, m6w);  // words (scale[2k], scale[2k + 1])
        // mins as words (m[2k], m[2k + 1]): high 4 bits from B, low 2 bits from A
        const __m512i mins = _mm512_ternarylogic_epi32(
            _mm512_or_si512(_mm512_slli_epi32(b, 2), _mm512_slli_epi32(b, 14)), mhi,
            _mm512_srli_epi16(a, 6), 0xEA);  // (A & B) | C
        for (int j = 0; j < NX; ++j)
          imin[g][j] = _mm512_dpwssd_epi32(imin[g][j], mins, _mm512_set1_epi32(bpair[j][k]));
      }
      // The sums of sub-blocks 2k and 2k + 1 (h), low and high nibbles apart
      __m512i dlo[2][G][NX], dhi[2][G][NX];
      for (int h = 0; h < 2; ++h) {
        const int s = 2 * k + h;
        for (int g = 0; g < G; ++g)
          for (int j = 0; j < NX; ++j) dlo[h][g][j] = dhi[h][g][j] = _mm512_setzero_si512();
        if constexpr (G == 1) {
          const uint8_t* q = cs[0] + 256 + 256 * s;
          // low nibbles as they are, high nibbles left in place (16 times their value): one
          // instruction each, and two independent chains of dot products
          __m512i lo[4], hi[4];
          for (int t = 0; t < 4; ++t)
            split_nibbles<kFive>(loadu512(q + 64 * t), cs[0] + kX16Chunk + 64 * s + 16 * t, lo[t],
                                 hi[t]);
          for (int j = 0; j < NX; ++j) {
            const int32_t* xq = reinterpret_cast<const int32_t*>(xs[j].qs + 256 * i + 32 * s);
            for (int t = 0; t < 4; ++t) {
              dlo[h][0][j] = dpbusd_bcast(dlo[h][0][j], lo[t], xq + t);
              dhi[h][0][j] = dpbusd_bcast(dhi[h][0][j], hi[t], xq + 4 + t);
            }
          }
        } else {
          for (int t = 0; t < 4; ++t) {
            __m512i xlo[NX], xhi[NX];
            for (int j = 0; j < NX; ++j) {
              const int32_t* xq = reinterpret_cast<const int32_t*>(xs[j].qs + 256 * i + 32 * s);
              xlo[j] = broadcast32(xq + t);
              xhi[j] = broadcast32(xq + 4 + t);
            }
            for (int g = 0; g < G; ++g) {
              __m512i lo, hi;
              split_nibbles<kFive>(loadu512(cs[g] + 256 + 256 * s + 64 * t),
                                   cs[g] + kX16Chunk + 64 * s + 16 * t, lo, hi);
              for (int j = 0; j < NX; ++j) {
                dlo[h][g][j] = _mm512_dpbusd_epi32(dlo[h][g][j], lo, xlo[j]);
                dhi[h][g][j] = _mm512_dpbusd_epi32(dhi[h][g][j], hi, xhi[j]);
              }
            }
          }
        }
        // Each sub-block's sum into iacc at once, as int32 products with its scale (word h of
        // sc's lanes): with five bits a sum is up to 32 * 31 * 128, past a word (at most
        // 8 * 63 * 32 * 31 * 128 in all); with two groups of two activation rows, so that
        // only one sub-block's sums need registers. The same integers as the pairs below.
        if constexpr (kEachSubBlock)
          for (int g = 0; g < G; ++g) {
            const __m512i sch =
                h == 0 ? _mm512_and_si512(sc[g], low_words) : _mm512_srli_epi32(sc[g], 16);
            for (int j = 0; j < NX; ++j) {
              const __m512i hs = kFive ? dhi[h][g][j] : _mm512_srai_epi32(dhi[h][g][j], 4);
              iacc[g][j] = _mm512_add_epi32(
                  iacc[g][j], _mm512_mullo_epi32(_mm512_add_epi32(dlo[h][g][j], hs), sch));
            }
          }
      }
      // Otherwise each sum is at most 16 * 15 * 128 in magnitude (dhi: once shifted down,
      // exactly, as it is 16 times the high nibbles' sum), so the sums of 2k and 2k + 1 fit as
      // the two words of a lane, and vpdpwssd multiplies them by their scales and adds both
      if constexpr (!kEachSubBlock)
        for (int g = 0; g < G; ++g)
          for (int j = 0; j < NX; ++j) {
            const __m512i lo_pair = _mm512_ternarylogic_epi32(
                dlo[0][g][j], _mm512_slli_epi32(dlo[1][g][j], 16), low_words, 0xE4);  // C ? A : B
            const __m512i hi_pair =
                _mm512_ternarylogic_epi32(_mm512_srai_epi32(dhi[0][g][j], 4),
                                          _mm512_slli_epi32(dhi[1][g][j], 12), low_words, 0xE4);
            iacc[g][j] = _mm512_dpwssd_epi32(iacc[g][j], lo_pair, sc[g]);
            iacc[g][j] = _mm512_dpwssd_epi32(iacc[g][j], hi_pair, sc[g]);
          }
    }
    for (int g = 0; g < G; ++g) {
      const __m512 d = _mm512_cvtph_ps(loadu256(cs[g]));
      const __m512 dmin = _mm512_cvtph_ps(loadu256(cs[g] + 32));
      for (int j = 0; j < NX; ++j) {
        __m512(&acc)[NX] = acc0[g][0];
        const __m512 dx = _mm512_set1_ps(xs[j].d[i]);
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc[g][j]), _mm512_mul_ps(d, dx), acc[j]);
        acc[j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(imin[g][j]), _mm512_mul_ps(dmin, dx), acc[j]);
      }
    }
  }
};
using KQ4K_X16 = KQ45K_X16<false>;
using KQ5K_X16 = KQ45K_X16<true>;

// ---- Q8_0, 16 interleaved rows (MatLayout::Q8_0_X16, repack.cpp) -----------------------------
//
// Each lane is one row; the weights are stored plus 128 (unsigned), so vpdpbusd takes four
// columns of 16 rows against four broadcast activation bytes, and 128 * (sum of the
// activation block) is taken off once per block.

struct KQ8_0_X16 {
  static constexpr int64_t kChunkCols = 32, kChunkBytes = kQ8X16Chunk;
  template <int G>
  static constexpr int64_t kPrefetchChunks = 2;
  static constexpr int kAcc = 1;
  template <int NX>
  static constexpr int kMaxGroups = 2;
  template <int NX>
  static constexpr StreamWay kDefaultWay = StreamWay::Two;
  template <int NX>
  [[gnu::always_inline]] static inline void chunk(const uint8_t* c, int64_t b, const XPrep* xs,
                                                  __m512 (&acc0)[kAcc][NX]) {
    __m512(&acc)[NX] = acc0[0];
    __m512i w[8];
    for (int q = 0; q < 8; ++q) w[q] = load2x256(c + 32 + 64 * q, c + 64 + 64 * q);
    const __m512 d = _mm512_cvtph_ps(loadu256(c));
    for (int j = 0; j < NX; ++j) {
      const XPrep& x = xs[j];
      const int32_t* xq = reinterpret_cast<const int32_t*>(x.qs + 32 * b);
      __m512i d0 = _mm512_set1_epi32(-128 * x.isum[b]), d1 = _mm512_setzero_si512();
      for (int q = 0; q < 8; q += 2) {
        d0 = _mm512_dpbusd_epi32(d0, w[q], _mm512_set1_epi32(xq[q]));
        d1 = _mm512_dpbusd_epi32(d1, w[q + 1], _mm512_set1_epi32(xq[q + 1]));
      }
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(d0, d1)),
                               _mm512_mul_ps(d, _mm512_set1_ps(x.d[b])), acc[j]);
    }
  }
};

// ---- Q4_0, Q4_1, Q5_0, Q5_1, 16 interleaved rows (MatLayout::Q4_0_X16 ..., repack.cpp) ------
//
// The blocks' nibble bytes as stored, four columns of 16 rows per lane group. With four bits
// the low nibbles (columns 4k..4k+3) are dotted as they are, the high ones (16 + 4k..) at 16
// times their value and shifted down exactly, as in Q4_K; with five, both at their value plus
// 16 where the fifth bit's mask is set (a masked byte add). The offset of Q4_0 (-8) and Q5_0
// (-16) enters as the offset times the sum of the activation block, the start of the low sum;
// Q4_1 and Q5_1 add m * (sum of the activation block) in f32.

template <bool kMin, bool kFive>
struct KQ32_X16 {
  static constexpr int64_t kChunkCols = 32,
                           kChunkBytes = kFive ? (kMin ? kQ51X16Chunk : kQ50X16Chunk)
                                               : (kMin ? kQ41X16Chunk : kQ40X16Chunk);
  static constexpr int64_t kQ = kMin ? 64 : 32;  // where the nibbles start
  static constexpr int kOffset = kMin ? 0 : (kFive ? 16 : 8);
  template <int G>
  static constexpr int64_t kPrefetchChunks = 4;
  static constexpr int kAcc = 1;
  template <int NX>
  static constexpr int kMaxGroups = NX <= 2 ? 4 : 2;
  template <int NX>
  static constexpr StreamWay kDefaultWay = StreamWay::Two;
  template <int NX>
  [[gnu::always_inline]] static inline void chunk(const uint8_t* c, int64_t b, const XPrep* xs,
                                                  __m512 (&acc0)[kAcc][NX]) {
    __m512(&acc)[NX] = acc0[0];
    __m512i lo[4], hi[4];
    for (int k = 0; k < 4; ++k) {
      split_nibbles<kFive>(loadu512(c + kQ + 64 * k), c + kQ + 256 + 16 * k, lo[k], hi[k]);
    }
    const __m512 d = _mm512_cvtph_ps(loadu256(c));
    for (int j = 0; j < NX; ++j) {
      const XPrep& x = xs[j];
      const int32_t* xq = reinterpret_cast<const int32_t*>(x.qs + 32 * b);
      __m512i dlo = kOffset ? _mm512_set1_epi32(-kOffset * x.isum[b]) : _mm512_setzero_si512();
      __m512i dhi = _mm512_setzero_si512();
      for (int k = 0; k < 4; ++k) {
        dlo = _mm512_dpbusd_epi32(dlo, lo[k], _mm512_set1_epi32(xq[k]));
        dhi = _mm512_dpbusd_epi32(dhi, hi[k], _mm512_set1_epi32(xq[4 + k]));
      }
      const __m512i sum = _mm512_add_epi32(dlo, kFive ? dhi : _mm512_srai_epi32(dhi, 4));
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(d, _mm512_set1_ps(x.d[b])),
                               acc[j]);
      if constexpr (kMin)
        acc[j] =
            _mm512_fmadd_ps(_mm512_cvtph_ps(loadu256(c + 32)), _mm512_set1_ps(x.fsum[b]), acc[j]);
    }
  }
};

// ---- Q6_K, 16 interleaved rows (MatLayout::Q6K_X16, repack.cpp) ------------------------------
//
// Per 16-column sub-block, three vectors hold the 6-bit weights of columns 0-11 in bits 0-5
// and those of columns 12-15 in their bits 6-7; vpdpbusd takes four columns of 16 rows at a
// time. The -32 offset enters as -32 * (sum of the activation sub-block), the start of each
// sub-block's sum; sums times the int8 scale over 16 sub-blocks stay inside int32 (at most
// 16 * 128 * 16 * (63 + 32) * 128).

struct KQ6K_X16 {
  static constexpr int64_t kChunkCols = 256, kChunkBytes = kQ6X16Chunk;
  static constexpr int kAcc = 1;
  template <int NX>
  static constexpr int kMaxGroups = 2;
  template <int NX>
  static constexpr StreamWay kDefaultWay = StreamWay::TwoPrefetch;
  static constexpr int64_t kPrefetchBytes = 2048;
  // Two groups side by side share the activation broadcasts, as in KQ45K_X16. At 4096x14336
  // (2 threads, alternating builds) two groups streamed 58-61 GB/s against 44-55; two
  // activation rows at 8192x2048, 59 against 50. `cachet bench kernels -t 2 --types Q6_K`,
  // alternating builds: 80-88% of the probe against 80-85%, within the host's noise.
  template <int G, int NX>
  static constexpr bool kShareX = G >= 2 && NX <= 2;
  template <int G, int NX, int PF>
  [[gnu::always_inline]] static inline void chunks(const uint8_t* const* cs, int64_t i,
                                                   const XPrep* xs, __m512 (*acc0)[kAcc][NX]) {
    constexpr int64_t kAhead = spread_ahead(PF, kPrefetchBytes);
    const __m512i m6 = _mm512_set1_epi8(0x3F), m03 = _mm512_set1_epi8(0x03);
    const __m512i m0f = _mm512_set1_epi8(0x0F);
    __m512i iacc[G][NX];
    for (int g = 0; g < G; ++g)
      for (int j = 0; j < NX; ++j) iacc[g][j] = _mm512_setzero_si512();
    for (int t = 0; t < 16; ++t) {
      __m512i xb[NX][4], off[NX];
      for (int j = 0; j < NX; ++j) {
        const int32_t* xq = reinterpret_cast<const int32_t*>(xs[j].qs + 256 * i + 16 * t);
        off[j] = _mm512_set1_epi32(-32 * xs[j].bsums[16 * i + t]);
        for (int q = 0; q < 4; ++q)
          xb[j][q] = G == 1 ? _mm512_set1_epi32(xq[q]) : broadcast32(xq + q);
      }
      for (int g = 0; g < G; ++g) {
        const uint8_t* c = cs[g];
        if constexpr (kAhead)  // the lines of a 16th of the chunk per sub-block
          prefetch_lines<kChunkBytes / 16>(c + kAhead + kChunkBytes / 16 * t);
        const uint8_t* wp = c + 288 + 192 * t;
        const __m512i a = loadu512(wp), b = loadu512(wp + 64), e = loadu512(wp + 128);
        __m512i w[4];
        w[0] = _mm512_and_si512(a, m6);
        w[1] = _mm512_and_si512(b, m6);
        w[2] = _mm512_and_si512(e, m6);
        // bits 6-7 of a, b, e are bits 0-1, 2-3, 4-5 of the fourth column group
        const __m512i u = _mm512_ternarylogic_epi32(
            _mm512_srli_epi16(a, 6), _mm512_srli_epi16(b, 4), m03, 0xE4);  // (A & C) | (B & ~C)
        w[3] =
            _mm512_and_si512(_mm512_ternarylogic_epi32(u, _mm512_srli_epi16(e, 2), m0f, 0xE4), m6);
        const __m512i sc = _mm512_cvtepi8_epi32(loadu128(c + 32 + 16 * t));
        for (int j = 0; j < NX; ++j) {
          __m512i dot = off[j];
          for (int q = 0; q < 4; ++q) dot = _mm512_dpbusd_epi32(dot, w[q], xb[j][q]);
          iacc[g][j] = _mm512_add_epi32(iacc[g][j], _mm512_mullo_epi32(dot, sc));
        }
      }
    }
    for (int g = 0; g < G; ++g) {
      const __m512 d = _mm512_cvtph_ps(loadu256(cs[g]));
      __m512(&acc)[NX] = acc0[g][0];
      for (int j = 0; j < NX; ++j)
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc[g][j]),
                                 _mm512_mul_ps(d, _mm512_set1_ps(xs[j].d[i])), acc[j]);
    }
  }
};

// ---- BF16, 16 interleaved rows (MatLayout::BF16_X16, repack.cpp) -----------------------------
//
// Each lane is one row's pair of columns: vdpbf16ps against the activation pair broadcast from
// memory (x rounded to bf16, see KBF16_512).

// The chunk shape and streaming of both BF16 interleaved kernels (KBF16_X16, KBF16F_X16).
struct BF16X16Stream {
  static constexpr int64_t kChunkCols = 32, kChunkBytes = kBf16X16Chunk;
  // Two groups (NX = 1) prefetch 4 KiB ahead in each: at 4096x14336 (2 threads, alternating
  // builds, sustained rates) they streamed 93-99% of the bandwidth with it against 87-94%
  // without when the machine was loaded, 81-88% against 76-82% when it was not. One group
  // (several activation rows) prefetches 2 KiB ahead.
  template <int G>
  static constexpr int64_t kPrefetchChunks = G == 1 ? 2 : 4;
  // A chain of vdpbf16ps (or FMA) waits for each result: kAcc accumulators per activation row
  // hide that. The same for every NX (outputs must not depend on it). Eight: with four,
  // 4096x14336 streamed at 50-52 GB/s against 58 with eight (alternating runs, one group).
  static constexpr int kAcc = 8;
  // Two groups for one activation row, and for two (MetaVoice's guidance rows) although their
  // 32 accumulators leave no register for the weights: GCC keeps them in memory, a load and a
  // store per vdpbf16ps, and the two streams still won. Stage 1 BF16 steps alternating the ways
  // (set_stream_way, one host, 120 steps): median 53.1 ms with two groups and prefetching
  // against 57.4 with one and far prefetching, the way measured fastest when two groups were
  // not allowed; 2048x5632 and 11264x2048 products of two rows, 44.8-45.2 GB/s against
  // 40.8-42.4.
  template <int NX>
  static constexpr int kMaxGroups = NX <= 2 ? 2 : 1;
  template <int NX>
  static constexpr StreamWay kDefaultWay =
      NX == 1 ? StreamWay::TwoPrefetch : StreamWay::OnePrefetch;
};

struct KBF16_X16 : BF16X16Stream {
  template <int NX>
  [[gnu::always_inline]] static inline void chunk(const uint8_t* c, int64_t b, const XPrep* xs,
                                                  __m512 (&acc)[kAcc][NX]) {
    for (int k = 0; k < 16; ++k) {
      const __m512bh w = (__m512bh)loadu512(c + 64 * k);
      for (int j = 0; j < NX; ++j) {
        const __m512i h = _mm512_broadcastd_epi32(_mm_loadu_si32(xs[j].bf16 + 32 * b + 2 * k));
        acc[k % kAcc][j] = _mm512_dpbf16_ps(acc[k % kAcc][j], w, (__m512bh)h);
      }
    }
  }
};

// ---- BF16 with f32 activations, 16 interleaved rows (the same layout) ---------------------
//
// For the f32 and AMX matmul paths (matmul_path in kernels.h): each bf16 pair is split into
// its two f32 values (a bf16 is the high half of its f32) and multiplied by FMA with x as given
// (f32 path) or rounded to bf16 (AMX: products of bf16 values are exact in f32, as on the
// tiles), so decoding steps compute what a prefill does. Two vector ops and two FMAs per 64
// bytes: on a core that issues vdpbf16ps at a quarter of the FMA rate, faster than KBF16_X16.

struct KBF16F_X16 : BF16X16Stream {
  // With two or more activation rows, the chunk's 16 steps and the groups unrolled: GCC left
  // both in loops, with the accumulators in memory (eight a row, two groups and MetaVoice's two
  // rows: 32 of them) and their slots computed at each step. The same operations in the same
  // order, so the same floats. On a host without AMX, `cachet bench --random metavoice-1b
  // --type BF16 -t 2 --decode-steps 128`: see docs/performance-log.md, "A host without AMX".
  template <int NX>
  static constexpr bool kUnrollGroups = NX >= 2;
  template <int NX>
  [[gnu::always_inline]] static inline void chunk(const uint8_t* c, int64_t b, const XPrep* xs,
                                                  __m512 (&acc)[kAcc][NX]) {
    const __m512i hi = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
    auto step = [&](int k) __attribute__((always_inline)) {
      const __m512i v = loadu512(c + 64 * k);
      const __m512 w0 = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));  // column 2k
      const __m512 w1 = _mm512_castsi512_ps(_mm512_and_si512(v, hi));   // column 2k + 1
      for (int j = 0; j < NX; ++j) {
        const float* x = xs[j].f32 + 32 * b + 2 * k;
        acc[(2 * k) % kAcc][j] = _mm512_fmadd_ps(w0, _mm512_set1_ps(x[0]), acc[(2 * k) % kAcc][j]);
        acc[(2 * k + 1) % kAcc][j] =
            _mm512_fmadd_ps(w1, _mm512_set1_ps(x[1]), acc[(2 * k + 1) % kAcc][j]);
      }
    };
    if constexpr (NX >= 2) {
#pragma GCC unroll 16
      for (int k = 0; k < 16; ++k) step(k);
    } else {
      for (int k = 0; k < 16; ++k) step(k);
    }
  }
};

// ---- BF16 on AMX tiles, 16 interleaved rows (the same layout) -------------------------------
//
// For the AMX matmul path: a 32-column chunk of a group is, as it lies, the B tile that the
// prefill's TDPBF16PS reads (matmul_avx512.cpp), and the activation rows, rounded to bf16,
// are an A tile of NX rows. Each output is then the prefill's bit for bit: the same bf16
// products, summed chunk by chunk in the same order into one f32 C tile. The tiles do the
// arithmetic, so the vector units have nothing to do but wait for the weights.

// Tiles 0-1: C (NX rows of 16 f32), 2: A (NX rows of 32 bf16), 3-4: B (16 rows of 16 pairs).
using matmul_internal::tile_config;
constexpr matmul_internal::TileConfig kMvTileConfig[4] = {
    tile_config(5, 3, 1), tile_config(5, 3, 2), tile_config(5, 3, 3), tile_config(5, 3, 4)};

struct KBF16_AMX : BF16X16Stream {
  static constexpr bool kTiles = true;
  // No vector registers to run out of: two groups for every NX.
  template <int NX>
  static constexpr int kMaxGroups = 2;
  template <int NX>
  static constexpr StreamWay kDefaultWay = StreamWay::TwoPrefetch;
  // The ways that prefetch ask for a chunk's 16 lines just before its tile load, which
  // otherwise seems to keep few of them in flight. At 4096x14336 (2 threads, alternating
  // runs) two groups streamed 33-35 GB/s so, against 30-31 with the chunk one ahead, 28-29
  // with it four ahead and 31 for the FMA kernel; two activation rows (2048x8192) 33-34
  // against 25 for FMA.
  template <int G>
  static constexpr int64_t kPrefetchChunks = 0;
  // G groups (one or two) of rows: C tile g accumulates group g.
  template <int G, int PF>
  static void run(const uint8_t* const* groups, const XPrep* xs, int64_t lda, int64_t nb,
                  float* const* outs, int64_t ldo) {
    // GCC 12's tile loads and stores are asm statements that do not tell the compiler they
    // touch memory: barriers keep the activations' stores before them and y's reads after.
    asm volatile("" ::: "memory");
    _tile_zero(0);
    if constexpr (G == 2) _tile_zero(1);
    const uint16_t* xb = xs[0].bf16;
    for (int64_t i = 0; i < nb; ++i) {
      _tile_loadd(2, xb + 32 * i, lda);
      const uint8_t* c0 = groups[0] + i * kChunkBytes;
      if constexpr (PF) prefetch_lines<kChunkBytes>(c0 + kPrefetchChunks<G> * PF * kChunkBytes);
      _tile_loadd(3, c0, 64);
      _tile_dpbf16ps(0, 2, 3);
      if constexpr (G == 2) {
        const uint8_t* c1 = groups[1] + i * kChunkBytes;
        if constexpr (PF) prefetch_lines<kChunkBytes>(c1 + kPrefetchChunks<G> * PF * kChunkBytes);
        _tile_loadd(4, c1, 64);
        _tile_dpbf16ps(1, 2, 4);
      }
    }
    _tile_stored(0, outs[0], ldo * 4);
    if constexpr (G == 2) _tile_stored(1, outs[1], ldo * 4);
    asm volatile("" ::: "memory");
  }
};

template <typename K>
concept TileKernel = requires {
  K::kTiles;
};

// A kernel with large chunks prefetches inside chunks<G, NX, PF>(), a few lines at a time
// between its own loads, kPrefetchBytes ahead; the others take the lines of a chunk some
// chunks ahead at once (run_groups). chunks() reads G groups in one call, sharing what they
// have in common, where the kernel's kShareX<G, NX> says so, and one group otherwise.
template <typename K>
concept SpreadPrefetch = requires {
  K::kPrefetchBytes;
};
// A kernel whose groups GCC would leave in a loop for NX rows, their accumulators in memory
// (kUnrollGroups<NX>).
template <typename K, int NX>
concept UnrolledGroups = requires {
  requires K::template kUnrollGroups<NX>;
};

// An interleaved kernel K gives kChunkCols and kChunkBytes (one chunk of a group of 16 rows),
// kAcc accumulators per activation row, kMaxGroups<NX> (groups it can read side by side: its
// accumulators must fit in registers), kDefaultWay<NX> (the StreamWay used until one has been
// measured), and chunk<NX>(), which adds one chunk's products to the accumulators. When a way
// prefetches, kPrefetchChunks<G> says how many chunks ahead a chunk's lines are asked for, all
// at once; a kernel with large chunks gives kPrefetchBytes and chunks<G, NX, PF>() instead,
// which asks for them a few at a time between its loads (SpreadPrefetch). Spread out, 2 KiB ahead,
// Q4_K streamed 33.5-34.3 GB/s at 4096x14336 with two groups against 30.6-31.7 without
// prefetching and 29.3-30.4 with the same lines asked for at each chunk's start, 1-3 KiB
// ahead (2 threads, `cachet bench kernels --quick --types Q4_K` with CACHET_STREAM=2 and a
// build that read the distance and the way from the environment, not kept).
//
// G groups of 16 rows at once with kernel K: chunk by chunk, each group with its own
// accumulators and the same instruction sequence as alone, so a group's outputs do not depend
// on G, nor on prefetching, nor on how the threads' ranges fall. Each group is a stream from
// memory. Whether two streams per thread or one, and software prefetching or the hardware's
// alone, stream faster depends on the kernel and on the machine (docs/architecture.md,
// "Streams from memory"): one host measured Q4_K fastest with one group and prefetching,
// another 20% faster with neither, so the matvec dispatcher measures the ways (StreamTuner).
template <typename K, int G, int PF, int NX>
void run_groups(const uint8_t* const* groups, const XPrep* xs, int64_t nb, float* const* outs,
                int64_t ldo) {
  __m512 acc[G][K::kAcc][NX];
  for (int g = 0; g < G; ++g)
    for (int a = 0; a < K::kAcc; ++a)
      for (int j = 0; j < NX; ++j) acc[g][a][j] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    if constexpr (SpreadPrefetch<K>) {
      const uint8_t* cs[G];
      for (int g = 0; g < G; ++g) cs[g] = groups[g] + i * K::kChunkBytes;
      if constexpr (K::template kShareX<G, NX>)
        K::template chunks<G, NX, PF>(cs, i, xs, acc);
      else
        for (int g = 0; g < G; ++g) K::template chunks<1, NX, PF>(cs + g, i, xs, acc + g);
    } else {
      auto one = [&](int g) __attribute__((always_inline)) {
        const uint8_t* c = groups[g] + i * K::kChunkBytes;
        if constexpr (PF)
          prefetch_lines<K::kChunkBytes>(c + K::template kPrefetchChunks<G> * PF * K::kChunkBytes);
        K::template chunk<NX>(c, i, xs, acc[g]);
      };
      if constexpr (UnrolledGroups<K, NX>) {
#pragma GCC unroll 4
        for (int g = 0; g < G; ++g) one(g);
      } else {
        for (int g = 0; g < G; ++g) one(g);
      }
    }
  }
  for (int g = 0; g < G; ++g)
    for (int j = 0; j < NX; ++j) {
      __m512 sum = acc[g][0][j];
      for (int a = 1; a < K::kAcc; ++a) sum = _mm512_add_ps(sum, acc[g][a][j]);
      _mm512_storeu_ps(outs[g] + j * ldo, sum);
    }
}

// G lanes of groups read side by side: at each step i (a multiple of 16, below count) the
// groups at rows r0 + g * lane_rows + i for g < G. Each lane is one stream from memory, so a
// caller that hands a lane's rows over in consecutive spans keeps that stream going.
// Tile kernels (TileKernel) hold the tile configuration of NX rows for the call: the
// activation rows' bf16 values lie one after another, w.cols apart (prepare_x).
template <typename K, int NX, int G, int PF>
void x16_lanes_of(const MatView& w, const XPrep* xs, float* y, int64_t ldy, int64_t r0,
                  int64_t lane_rows, int64_t count) {
  if (count <= 0) return;
  const int64_t nb = w.cols / K::kChunkCols;
  const size_t group_bytes = w.row_stride * kX16Rows;
  const auto* base = static_cast<const uint8_t*>(w.data);
  if constexpr (TileKernel<K>) _tile_loadconfig(&kMvTileConfig[NX - 1]);
  for (int64_t i = 0; i < count; i += kX16Rows) {
    const uint8_t* gs[G];
    float* outs[G];
    for (int g = 0; g < G; ++g) {
      const int64_t r = r0 + g * lane_rows + i;
      gs[g] = base + (r / kX16Rows) * group_bytes;
      outs[g] = y + r;
    }
    if constexpr (TileKernel<K>)
      K::template run<G, PF>(gs, xs, w.cols * 2, nb, outs, ldy);
    else
      run_groups<K, G, PF, NX>(gs, xs, nb, outs, ldy);
  }
  if constexpr (TileKernel<K>) _tile_release();
}

// Rows [r0, r1) (whole groups) as G parts read side by side, then the groups left.
template <typename K, int NX, int G, int PF>
void x16_groups_of(const MatView& w, const XPrep* xs, float* y, int64_t ldy, int64_t r0,
                   int64_t r1) {
  const int64_t part = (r1 - r0) / kX16Rows / G * kX16Rows;
  x16_lanes_of<K, NX, G, PF>(w, xs, y, ldy, r0, part, part);
  x16_lanes_of<K, NX, 1, PF>(w, xs, y, ldy, r0 + G * part, 0, r1 - r0 - G * part);
}

// The way kernel K takes for NX activation rows when asked for `way`: two or four groups only
// where its accumulators fit (four falls back to two, two to one); the far ways as the near
// ones where the kernel prefetches at no distance (the AMX kernel: a chunk just before it).
template <typename K, int NX>
constexpr StreamWay effective_way(StreamWay way) {
  constexpr int g = K::template kMaxGroups<NX>;
  if constexpr (TileKernel<K>) {
    if (way == StreamWay::OnePrefetchFar) way = StreamWay::OnePrefetch;
    if (way == StreamWay::TwoPrefetchFar) way = StreamWay::TwoPrefetch;
  }
  if (way == StreamWay::Four && g < 4) way = StreamWay::Two;
  if (way == StreamWay::TwoPrefetchNear && (!SpreadPrefetch<K> || g < 2))
    way = StreamWay::TwoPrefetch;
  if (g >= 2) return way;
  switch (way) {
    case StreamWay::Two:
      return StreamWay::One;
    case StreamWay::TwoPrefetch:
      return StreamWay::OnePrefetch;
    case StreamWay::TwoPrefetchFar:
      return StreamWay::OnePrefetchFar;
    default:
      return way;
  }
}

// Rows [r0, r1) the way asked for (lane_rows < 0), or the lanes of x16_lanes_of (r0,
// lane_rows, count) with as many lanes as the way reads groups side by side.
template <typename K, int NX>
void x16_rows_nx(const MatView& w, const XPrep* xs, float* y, int64_t ldy, int64_t r0, int64_t r1,
                 int64_t lane_rows, StreamWay way) {
  // G groups, PF times the kernel's prefetch distance; effective_way leaves only G the kernel
  // can read, so the fallback is not reached.
  auto go = [&]<int G, int PF>() {
    if constexpr (K::template kMaxGroups<NX> >= G) {
      if (lane_rows < 0)
        x16_groups_of<K, NX, G, PF>(w, xs, y, ldy, r0, r1);
      else
        x16_lanes_of<K, NX, G, PF>(w, xs, y, ldy, r0, lane_rows, r1);
    } else if (lane_rows < 0) {
      x16_groups_of<K, NX, 1, 0>(w, xs, y, ldy, r0, r1);
    } else {
      for (int g = 0; g < G; ++g)
        x16_lanes_of<K, NX, 1, 0>(w, xs, y, ldy, r0 + g * lane_rows, 0, r1);
    }
  };
  switch (effective_way<K, NX>(way)) {
    case StreamWay::One:
      return go.template operator()<1, 0>();
    case StreamWay::OnePrefetch:
      return go.template operator()<1, kNear>();
    case StreamWay::OnePrefetchFar:
      return go.template operator()<1, kFar>();
    case StreamWay::Two:
      return go.template operator()<2, 0>();
    case StreamWay::TwoPrefetch:
      return go.template operator()<2, kNear>();
    case StreamWay::TwoPrefetchFar:
      return go.template operator()<2, kFar>();
    case StreamWay::TwoPrefetchNear:
      if constexpr (SpreadPrefetch<K>) return go.template operator()<2, kHalf>();
      return go.template operator()<2, kNear>();  // not reached: effective_way
    case StreamWay::Four:
      return go.template operator()<4, 0>();
  }
}

// fn.template operator()<NX>() for nx (1..4; more counts as 4) activation rows.
template <typename Fn>
auto with_nx(int nx, Fn&& fn) {
  switch (nx) {
    case 1:
      return fn.template operator()<1>();
    case 2:
      return fn.template operator()<2>();
    case 3:
      return fn.template operator()<3>();
    default:
      return fn.template operator()<4>();
  }
}

// fn.template operator()<K>() for the kernel of an X16 layout (K = void for Rows); BF16 by the
// arithmetic of `path`.
template <typename Fn>
auto with_x16_kernel(MatLayout layout, MatmulPath path, Fn&& fn) {
  switch (layout) {
    case MatLayout::Q4K_X16:
      return fn.template operator()<KQ4K_X16>();
    case MatLayout::Q6K_X16:
      return fn.template operator()<KQ6K_X16>();
    case MatLayout::Q8_0_X16:
      return fn.template operator()<KQ8_0_X16>();
    case MatLayout::Q4_0_X16:
      return fn.template operator()<KQ32_X16<false, false>>();
    case MatLayout::Q4_1_X16:
      return fn.template operator()<KQ32_X16<true, false>>();
    case MatLayout::Q5K_X16:
      return fn.template operator()<KQ5K_X16>();
    case MatLayout::Q5_0_X16:
      return fn.template operator()<KQ32_X16<false, true>>();
    case MatLayout::Q5_1_X16:
      return fn.template operator()<KQ32_X16<true, true>>();
    case MatLayout::BF16_X16:  // the arithmetic of the matmul path, so steps equal prefills
      switch (path) {
        case MatmulPath::Bf16:
          return fn.template operator()<KBF16_X16>();
        case MatmulPath::Amx:
          return fn.template operator()<KBF16_AMX>();
        case MatmulPath::F32:
          break;
      }
      return fn.template operator()<KBF16F_X16>();
    case MatLayout::Rows:
      break;
  }
  return fn.template operator()<void>();
}

// Tiles of NR rows, then single rows, for NX activation rows.
template <typename K, int NR, int NX>
void rows_nx(const MatView& w, const XPrep* xs, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  int64_t r = r0;
  for (; r + NR <= r1; r += NR) {
    const uint8_t* rp[NR];
    for (int i = 0; i < NR; ++i) rp[i] = w.row(r + i);
    K::template run<NR, NX>(rp, xs, w.cols, y + r, ldy);
  }
  for (; r < r1; ++r) {
    const uint8_t* rp[1] = {w.row(r)};
    K::template run<1, NX>(rp, xs, w.cols, y + r, ldy);
  }
}
template <typename K, int NR>
void rows_one(const MatView& w, const XPrep& x, float* y, int64_t r0, int64_t r1) {
  rows_nx<K, NR, 1>(w, &x, y, 0, r0, r1);
}
// NR rows per tile for one activation row, MR for several (fewer: registers).
template <typename K, int NR, int MR>
Kernel kernel_nx(XKind xk) {
  Kernel k{rows_one<K, NR>, xk};
  k.multi[0] = rows_nx<K, MR, 2>;
  k.multi[1] = rows_nx<K, MR, 3>;
  k.multi[2] = rows_nx<K, MR, 4>;
  return k;
}

}  // namespace

void round_x_bf16_avx512(const float* x, int64_t n, uint16_t* out) {
  round_bf16(x, n, out);
}

void round_x_bf16_f32_avx512(const float* x, int64_t n, uint16_t* bf, float* out) {
  round_bf16(x, n, bf);
  matmul_internal::to_f32(DType::BF16, reinterpret_cast<const uint8_t*>(bf), 0, n, out);
}

void x16_rows_avx512(const MatView& w, const XPrep* xs, int nx, float* y, int64_t ldy, int64_t r0,
                     int64_t r1, StreamWay way, MatmulPath path) {
  with_x16_kernel(w.layout, path, [&]<typename K>() {
    if constexpr (!std::is_void_v<K>)
      with_nx(nx, [&]<int NX>() { x16_rows_nx<K, NX>(w, xs, y, ldy, r0, r1, -1, way); });
  });
}

void x16_lanes_avx512(const MatView& w, const XPrep* xs, int nx, float* y, int64_t ldy, int64_t r0,
                      int64_t lane_rows, int64_t count, StreamWay way, MatmulPath path) {
  with_x16_kernel(w.layout, path, [&]<typename K>() {
    if constexpr (!std::is_void_v<K>)
      with_nx(nx, [&]<int NX>() { x16_rows_nx<K, NX>(w, xs, y, ldy, r0, count, lane_rows, way); });
  });
}

StreamWay x16_effective_way(MatLayout layout, int nx, StreamWay way) {
  return with_x16_kernel(layout, matmul_path(), [&]<typename K>() {
    if constexpr (std::is_void_v<K>)
      return way;
    else
      return with_nx(nx, [&]<int NX>() { return effective_way<K, NX>(way); });
  });
}

StreamWay x16_default_way(MatLayout layout, int nx) {
  return with_x16_kernel(layout, matmul_path(), [&]<typename K>() {
    if constexpr (std::is_void_v<K>)
      return StreamWay::One;
    else
      return with_nx(nx, [&]<int NX>() { return K::template kDefaultWay<NX>; });
  });
}

Kernel avx512_kernel(DType t, int64_t cols) {
  return avx512_kernel(t, matmul_internal::matrix_path(t, cols));
}

Kernel avx512_kernel(DType t, MatmulPath path) {
  switch (t) {
    case DType::F32:
      return kernel_nx<KFloat512<L512F32, LoadF32>, 4, 2>(XKind::F32);
    case DType::F16:
      return kernel_nx<KFloat512<L512F16, LoadF16>, 4, 2>(XKind::F32);
    case DType::BF16:
      switch (path) {
        case MatmulPath::Bf16:
          return kernel_nx<KBF16_512, 4, 2>(XKind::BF16);
        case MatmulPath::Amx:  // FMA on bf16-rounded x: the arithmetic of the tiles
          return kernel_nx<KFloat512<L512BF16, LoadBF16>, 4, 2>(XKind::BF16_F32);
        case MatmulPath::F32:
          break;
      }
      return kernel_nx<KFloat512<L512BF16, LoadBF16>, 4, 2>(XKind::F32);
    case DType::Q8_0:
      return kernel_nx<KQ8_0_512, 4, 2>(XKind::Q8_32);
    case DType::Q4_K:
      return kernel_nx<KQ4K_512, 4, 2>(XKind::Q8_K);
    case DType::Q6_K:
      return kernel_nx<KQ6K_512, 2, 1>(XKind::Q8_K);
    default:
      return kernel_256(t);
  }
}

}  // namespace cachet::kern
