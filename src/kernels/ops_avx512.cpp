// AVX-512 versions of the element-wise ops (entered only when active_isa() allows AVX-512).
// GCC 12's intrinsic headers build "undefined" vectors by self-initialization, which trips
// -Wmaybe-uninitialized once inlined at -O3; the values are fully overwritten.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "cachet/ops.h"
#include "kernels/ops_simd.h"
#include "kernels/ops_vec.h"

namespace cachet::ops::avx512 {
namespace {

struct Avx512Vec {
  using F = __m512;
  using M = __mmask16;
  static constexpr int W = 16;

  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float a) { return _mm512_set1_ps(a); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  // p[0], p[stride], ..., p[15 stride]
  static F load_strided(const float* p, int stride) {
    const __m512i i =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32(stride));
    return _mm512_i32gather_ps(i, p, 4);
  }
  // W bf16 values widened to f32 (exact).
  static F load_bf16(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  // 2W bf16 values widened to f32 as two vectors: those at even and at odd positions (exact;
  // one load and one instruction each).
  static void load_bf16_pairs(const uint16_t* p, F& even, F& odd) {
    const __m512i v = _mm512_loadu_si512(p);
    even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    odd = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xFFFF0000))));
  }
  // 2W floats from p as the vectors of their even and odd positions, and back.
  static void load_pairs(const float* p, F& even, F& odd) {
    const F a = _mm512_loadu_ps(p), b = _mm512_loadu_ps(p + W);
    const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    even = _mm512_permutex2var_ps(a, ie, b);
    odd = _mm512_permutex2var_ps(a, _mm512_add_epi32(ie, _mm512_set1_epi32(1)), b);
  }
  static void store_pairs(float* p, F even, F odd) {
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    _mm512_storeu_ps(p, _mm512_permutex2var_ps(even, lo, odd));
    _mm512_storeu_ps(p + W,
                     _mm512_permutex2var_ps(even, _mm512_add_epi32(lo, _mm512_set1_epi32(8)), odd));
  }
  // W int8 values widened to f32 (exact).
  static F load_i8(const int8_t* p) {
    return _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  // W floats holding integers in [-127, 127], stored as int8.
  static void store_i8(int8_t* p, F v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v)));
  }
  // Integer vectors of kI16 int16 lanes (products summed in int32 pairs).
  using I = __m512i;
  static constexpr int kI16 = 32;
  static I izero() { return _mm512_setzero_si512(); }
  static I load_i16(const int16_t* p) { return _mm512_loadu_si512(p); }
  static I widen_i8_i16(const int8_t* p) {
    return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  // acc + the pairs' sums of products: one vpdpwssd (VNNI: this path requires it), the same
  // integers as vpmaddwd then vpaddd (the products fit: |a| <= 127, |b| <= 32767).
  static I madd_i16(I acc, I a, I b) { return _mm512_dpwssd_epi32(acc, a, b); }
  static I add_i32(I a, I b) { return _mm512_add_epi32(a, b); }
  static int32_t hsum_i32(I v) { return _mm512_reduce_add_epi32(v); }
  // Lane j: the sum of the lanes of a[j], for W vectors (a transposing tree of adds).
  static I hsum_rows_i32(const I* a) {
    I t[8], u[4], v[2];
    for (int i = 0; i < 8; ++i)
      t[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(a[2 * i], a[2 * i + 1]),
                              _mm512_unpackhi_epi32(a[2 * i], a[2 * i + 1]));
    // per 128 bits: rows (4i, 4i + 1, 4i + 2, 4i + 3), that quarter's sums
    for (int i = 0; i < 4; ++i)
      u[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(t[2 * i], t[2 * i + 1]),
                              _mm512_unpackhi_epi64(t[2 * i], t[2 * i + 1]));
    for (int i = 0; i < 2; ++i)
      v[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(u[2 * i], u[2 * i + 1], 0x88),
                              _mm512_shuffle_i32x4(u[2 * i], u[2 * i + 1], 0xDD));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(v[0], v[1], 0x88),
                            _mm512_shuffle_i32x4(v[0], v[1], 0xDD));
  }
  static I load_i32(const int32_t* p) { return _mm512_loadu_si512(p); }
  static F cvt_i32(I v) { return _mm512_cvtepi32_ps(v); }
  // W floats holding integers in [-32767, 32767], stored as int16.
  static void store_i16(int16_t* p, F v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(v)));
  }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static __mmask16 tail(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
  // The first n lanes from p, the rest 0 (lanes past n are not read).
  static F load_n(const float* p, int n) { return _mm512_maskz_loadu_ps(tail(n), p); }
  static F load_n_fill(const float* p, int n, float fill) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), tail(n), p);
  }
  static void store_n(float* p, F v, int n) { _mm512_mask_storeu_ps(p, tail(n), v); }
  static F mask_n(F v, int n) { return _mm512_maskz_mov_ps(tail(n), v); }

  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }    // a b + c
  static F fnmadd(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }  // c - a b
  static F fmsub(F a, F b, F c) { return _mm512_fmsub_ps(a, b, c); }    // a b - c
  // Return b when either is NaN.
  static F min(F a, F b) { return _mm512_min_ps(a, b); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static F abs(F a) { return _mm512_abs_ps(a); }
  static F round(F a) {
    return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static M lt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static M gt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
  static F select(M m, F a, F b) { return _mm512_mask_blend_ps(m, b, a); }  // m ? a : b
  // p * 2^n for integral n in [-150, 128], in two halves so neither factor leaves the normals.
  static F ldexp(F p, F n) {
    const __m512i ni = _mm512_cvtps_epi32(n);
    const __m512i n1 = _mm512_srai_epi32(ni, 1);
    const __m512i n2 = _mm512_sub_epi32(ni, n1);
    const __m512i bias = _mm512_set1_epi32(127);
    const F s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
    const F s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
    return _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
  }
  static float hsum(F v) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float hmax(F v) {
    const __m256 h = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

using K = VecOps<Avx512Vec>;

}  // namespace

#include "kernels/ops_wrappers.h"

}  // namespace cachet::ops::avx512
