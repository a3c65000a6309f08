// AVX2 + FMA versions of the element-wise ops (entered only when active_isa() allows AVX2).
#include <immintrin.h>

#include "cachet/ops.h"
#include "kernels/ops_simd.h"
#include "kernels/ops_vec.h"

namespace cachet::ops::avx2 {
namespace {

struct Avx2Vec {
  using F = __m256;
  using M = __m256;
  static constexpr int W = 8;

  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float a) { return _mm256_set1_ps(a); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  // p[0], p[stride], ..., p[7 stride]
  static F load_strided(const float* p, int stride) {
    const __m256i i =
        _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(stride));
    return _mm256_i32gather_ps(p, i, 4);
  }
  // W bf16 values widened to f32 (exact).
  static F load_bf16(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  // W int8 values widened to f32 (exact).
  static F load_i8(const int8_t* p) {
    return _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  // W floats holding integers in [-127, 127], stored as int8.
  static void store_i8(int8_t* p, F v) {
    const __m256i i = _mm256_cvtps_epi32(v);
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packs_epi16(w, w));
  }
  // Integer vectors of kI16 int16 lanes (products summed in int32 pairs).
  using I = __m256i;
  static constexpr int kI16 = 16;
  static I izero() { return _mm256_setzero_si256(); }
  static I load_i16(const int16_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  static I widen_i8_i16(const int8_t* p) {
    return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static I madd_i16(I acc, I a, I b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
  static I add_i32(I a, I b) { return _mm256_add_epi32(a, b); }
  static int32_t hsum_i32(I v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
  }
  // Lane j: the sum of the lanes of a[j], for W vectors (a transposing tree of adds).
  static I hsum_rows_i32(const I* a) {
    I t[4], u[2];
    for (int i = 0; i < 4; ++i)
      t[i] = _mm256_add_epi32(_mm256_unpacklo_epi32(a[2 * i], a[2 * i + 1]),
                              _mm256_unpackhi_epi32(a[2 * i], a[2 * i + 1]));
    // per 128 bits: rows (4i, 4i + 1, 4i + 2, 4i + 3), that half's sums
    for (int i = 0; i < 2; ++i)
      u[i] = _mm256_add_epi32(_mm256_unpacklo_epi64(t[2 * i], t[2 * i + 1]),
                              _mm256_unpackhi_epi64(t[2 * i], t[2 * i + 1]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(u[0], u[1], 0x20),
                            _mm256_permute2x128_si256(u[0], u[1], 0x31));
  }
  static I load_i32(const int32_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  static F cvt_i32(I v) { return _mm256_cvtepi32_ps(v); }
  // W floats holding integers in [-32767, 32767], stored as int16.
  static void store_i16(int16_t* p, F v) {
    const __m256i i = _mm256_cvtps_epi32(v);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1)));
  }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static __m256i tail(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  // The first n lanes from p, the rest 0 (lanes past n are not read).
  static F load_n(const float* p, int n) { return _mm256_maskload_ps(p, tail(n)); }
  static F load_n_fill(const float* p, int n, float fill) {
    return _mm256_blendv_ps(_mm256_set1_ps(fill), load_n(p, n), _mm256_castsi256_ps(tail(n)));
  }
  static void store_n(float* p, F v, int n) { _mm256_maskstore_ps(p, tail(n), v); }
  static F mask_n(F v, int n) { return _mm256_and_ps(v, _mm256_castsi256_ps(tail(n))); }

  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }    // a b + c
  static F fnmadd(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }  // c - a b
  static F fmsub(F a, F b, F c) { return _mm256_fmsub_ps(a, b, c); }    // a b - c
  // Return b when either is NaN.
  static F min(F a, F b) { return _mm256_min_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F abs(F a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  static F round(F a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static M lt(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static M gt(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
  static F select(M m, F a, F b) { return _mm256_blendv_ps(b, a, m); }  // m ? a : b
  // p * 2^n for integral n in [-150, 128], in two halves so neither factor leaves the normals.
  static F ldexp(F p, F n) {
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i n1 = _mm256_srai_epi32(ni, 1);
    const __m256i n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const F s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const F s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  }
  static float hsum(F v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float hmax(F v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

using K = VecOps<Avx2Vec>;

}  // namespace

#include "kernels/ops_wrappers.h"

}  // namespace cachet::ops::avx2
