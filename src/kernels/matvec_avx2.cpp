// AVX2 matvec kernels (256-bit, maddubs/madd integer dot products) and the activation
// quantizers shared with the AVX-512 build.
#include "kernels/vecdot_256.h"

namespace cachet::kern {
namespace {

// The largest of v's eight values.
inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// Quantizes 32 floats with scale d = max|v| / 127 (0 for an all-zero block); returns sum of q.
inline int quantize32(const float* x, int8_t* q, float* d) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps();
  for (int k = 0; k < 4; ++k) {
    v[k] = _mm256_loadu_ps(x + 8 * k);
    amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[k]));
  }
  const float mx = hmax(amax);
  *d = mx / 127.0f;
  const __m256 id = _mm256_set1_ps(mx > 0 ? 127.0f / mx : 0.0f);
  __m256i i[4];
  for (int k = 0; k < 4; ++k) i[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], id));
  const __m256i s = _mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3]));
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
  const __m256i w01 = _mm256_packs_epi32(i[0], i[1]), w23 = _mm256_packs_epi32(i[2], i[3]);
  const __m256i b = _mm256_packs_epi16(w01, w23);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                      _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  return _mm_cvtsi128_si32(s4);
}

}  // namespace

void quantize_x_q8_32_avx2(const float* x, int64_t n, int8_t* qs, float* d, int32_t* isum,
                           float* fsum) {
  for (int64_t b = 0; b < n / 32; ++b) {
    isum[b] = quantize32(x + 32 * b, qs + 32 * b, d + b);
    fsum[b] = d[b] * static_cast<float>(isum[b]);
  }
}

void quantize_x_q8_k_avx2(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / 256; ++b) {
    const float* xb = x + 256 * b;
    // max|x| over the block in four independent chains (a max is exact in any order): one
    // chain of 32 dependent maxes took most of the call.
    __m256 am[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                    _mm256_setzero_ps()};
    for (int k = 0; k < 32; ++k)
      am[k % 4] = _mm256_max_ps(am[k % 4], _mm256_andnot_ps(sign, _mm256_loadu_ps(xb + 8 * k)));
    const __m256 amax = _mm256_max_ps(_mm256_max_ps(am[0], am[1]), _mm256_max_ps(am[2], am[3]));
    const float mx = hmax(amax);
    d[b] = mx / 127.0f;
    const __m256 id = _mm256_set1_ps(mx > 0 ? 127.0f / mx : 0.0f);
    for (int c = 0; c < 8; ++c) {
      __m256i i[4];
      for (int k = 0; k < 4; ++k)
        i[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + 32 * c + 8 * k), id));
      for (int h = 0; h < 2; ++h) {
        const __m256i s = _mm256_add_epi32(i[2 * h], i[2 * h + 1]);
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
        bsums[16 * b + 2 * c + h] = static_cast<int16_t>(_mm_cvtsi128_si32(s4));
      }
      const __m256i w01 = _mm256_packs_epi32(i[0], i[1]), w23 = _mm256_packs_epi32(i[2], i[3]);
      const __m256i q = _mm256_packs_epi16(w01, w23);
      _mm256_storeu_si256(
          reinterpret_cast<__m256i*>(qs + 256 * b + 32 * c),
          _mm256_permutevar8x32_epi32(q, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    }
  }
}

Kernel avx2_kernel(DType t) {
  return kernel_256(t);
}

}  // namespace cachet::kern
