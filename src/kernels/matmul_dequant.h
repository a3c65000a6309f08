// Weight rows to f32, written as plain loops so that each instruction-set translation unit
// that includes this header gets its own vectorized copy (internal linkage: no clash between
// the copies built with different flags). Values equal dequantize_row's.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cachet/dtype.h"
#include "cachet/half.h"
#include "kernels/blocks.h"

namespace cachet::matmul_internal {
namespace {

inline float h2f(half_t h) {
  return f16_to_f32(h);
}

// 6-bit scale and min j (0..7) of a Q4_K / Q5_K block.
inline void scale_min_k4(int j, const uint8_t* q, int* d, int* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

inline void dq_q4_0(const block_q4_0* b, float* y) {
  const float d = h2f(b->d);
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((b->qs[j] & 0xF) - 8) * d;
    y[j + 16] = static_cast<float>((b->qs[j] >> 4) - 8) * d;
  }
}
inline void dq_q4_1(const block_q4_1* b, float* y) {
  const float d = h2f(b->d), m = h2f(b->m);
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(b->qs[j] & 0xF) * d + m;
    y[j + 16] = static_cast<float>(b->qs[j] >> 4) * d + m;
  }
}
inline void dq_q5_0(const block_q5_0* b, float* y) {
  const float d = h2f(b->d);
  uint32_t qh;
  std::memcpy(&qh, b->qh, 4);
  for (int j = 0; j < 16; ++j) {
    const int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
    y[j] = static_cast<float>(((b->qs[j] & 0xF) | h0) - 16) * d;
    y[j + 16] = static_cast<float>(((b->qs[j] >> 4) | h1) - 16) * d;
  }
}
inline void dq_q5_1(const block_q5_1* b, float* y) {
  const float d = h2f(b->d), m = h2f(b->m);
  uint32_t qh;
  std::memcpy(&qh, b->qh, 4);
  for (int j = 0; j < 16; ++j) {
    const int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
    y[j] = static_cast<float>((b->qs[j] & 0xF) | h0) * d + m;
    y[j + 16] = static_cast<float>((b->qs[j] >> 4) | h1) * d + m;
  }
}
inline void dq_q8_0(const block_q8_0* b, float* y) {
  const float d = h2f(b->d);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(b->qs[j]) * d;
}
inline void dq_q2_k(const block_q2_K* b, float* y) {
  const float d = h2f(b->d), mn = h2f(b->dmin);
  const uint8_t* q = b->qs;
  int is = 0;
  for (int n = 0; n < QK_K; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const uint8_t sc = b->scales[is++];
        const float dl = d * static_cast<float>(sc & 0xF), ml = mn * static_cast<float>(sc >> 4);
        const uint8_t* qq = q + 16 * half;
        for (int l = 0; l < 16; ++l) y[l] = dl * static_cast<float>((qq[l] >> shift) & 3) - ml;
        y += 16;
      }
    }
    q += 32;
  }
}
inline void dq_q3_k(const block_q3_K* b, float* y) {
  constexpr uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  uint32_t aux[4];
  std::memcpy(aux, b->scales, 12);
  const uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  int8_t scales[16];
  std::memcpy(scales, aux, 16);
  const float d_all = h2f(b->d);
  const uint8_t* q = b->qs;
  const uint8_t* hm = b->hmask;
  uint8_t m = 1;
  int is = 0;
  for (int n = 0; n < QK_K; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const float dl = d_all * static_cast<float>(scales[is++] - 32);
        const uint8_t* qq = q + 16 * half;
        const uint8_t* hh = hm + 16 * half;
        for (int l = 0; l < 16; ++l)
          y[l] = dl * static_cast<float>(((qq[l] >> shift) & 3) - ((hh[l] & m) ? 0 : 4));
        y += 16;
      }
      m = static_cast<uint8_t>(m << 1);
    }
    q += 32;
  }
}
inline void dq_q4_k(const block_q4_K* b, float* y) {
  const float d = h2f(b->d), mn = h2f(b->dmin);
  const uint8_t* q = b->qs;
  for (int j = 0, is = 0; j < QK_K; j += 64, is += 2) {
    int sc, m;
    scale_min_k4(is, b->scales, &sc, &m);
    const float d1 = d * static_cast<float>(sc), m1 = mn * static_cast<float>(m);
    scale_min_k4(is + 1, b->scales, &sc, &m);
    const float d2 = d * static_cast<float>(sc), m2 = mn * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) y[l] = d1 * static_cast<float>(q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) y[l + 32] = d2 * static_cast<float>(q[l] >> 4) - m2;
    y += 64;
    q += 32;
  }
}
inline void dq_q5_k(const block_q5_K* b, float* y) {
  const float d = h2f(b->d), mn = h2f(b->dmin);
  const uint8_t* ql = b->qs;
  const uint8_t* qh = b->qh;
  int u1 = 1, u2 = 2;
  for (int j = 0, is = 0; j < QK_K; j += 64, is += 2) {
    int sc, m;
    scale_min_k4(is, b->scales, &sc, &m);
    const float d1 = d * static_cast<float>(sc), m1 = mn * static_cast<float>(m);
    scale_min_k4(is + 1, b->scales, &sc, &m);
    const float d2 = d * static_cast<float>(sc), m2 = mn * static_cast<float>(m);
    for (int l = 0; l < 32; ++l)
      y[l] = d1 * static_cast<float>((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l)
      y[l + 32] = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
    y += 64;
    ql += 32;
    u1 <<= 2;
    u2 <<= 2;
  }
}
inline void dq_q6_k(const block_q6_K* b, float* y) {
  const float d = h2f(b->d);
  const uint8_t* ql = b->ql;
  const uint8_t* qh = b->qh;
  const int8_t* sc = b->scales;
  for (int n = 0; n < QK_K; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

template <typename Block, void (*F)(const Block*, float*), int kElems>
inline void dq_blocks(const uint8_t* src, int64_t nblocks, float* y) {
  const Block* b = reinterpret_cast<const Block*>(src);
  for (int64_t i = 0; i < nblocks; ++i) F(b + i, y + i * kElems);
}

// Whether to_f32 handles the type.
inline bool dequant_supported(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      return true;
    default:
      return false;
  }
}

// out[0..n) = elements [k0, k0 + n) of a weight row (k0 and n multiples of the block size).
inline void to_f32(DType t, const uint8_t* row, int64_t k0, int64_t n, float* out) {
  const DTypeInfo& info = dtype_info(t);
  const uint8_t* src = row + (k0 / info.block_elems) * info.block_bytes;
  const int64_t nb = n / info.block_elems;
  switch (t) {
    case DType::F32:
      std::memcpy(out, src, static_cast<size_t>(n) * 4);
      return;
    case DType::F16: {
      const uint16_t* h = reinterpret_cast<const uint16_t*>(src);
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i,
                         _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
      for (; i < n; ++i) out[i] = f16_to_f32(h[i]);
      return;
    }
    case DType::BF16: {
      const uint16_t* h = reinterpret_cast<const uint16_t*>(src);
      uint32_t* o = reinterpret_cast<uint32_t*>(out);
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<uint32_t>(h[i]) << 16;
      return;
    }
    case DType::Q4_0:
      return dq_blocks<block_q4_0, dq_q4_0, 32>(src, nb, out);
    case DType::Q4_1:
      return dq_blocks<block_q4_1, dq_q4_1, 32>(src, nb, out);
    case DType::Q5_0:
      return dq_blocks<block_q5_0, dq_q5_0, 32>(src, nb, out);
    case DType::Q5_1:
      return dq_blocks<block_q5_1, dq_q5_1, 32>(src, nb, out);
    case DType::Q8_0:
      return dq_blocks<block_q8_0, dq_q8_0, 32>(src, nb, out);
    case DType::Q2_K:
      return dq_blocks<block_q2_K, dq_q2_k, 256>(src, nb, out);
    case DType::Q3_K:
      return dq_blocks<block_q3_K, dq_q3_k, 256>(src, nb, out);
    case DType::Q4_K:
      return dq_blocks<block_q4_K, dq_q4_k, 256>(src, nb, out);
    case DType::Q5_K:
      return dq_blocks<block_q5_K, dq_q5_k, 256>(src, nb, out);
    case DType::Q6_K:
      return dq_blocks<block_q6_K, dq_q6_k, 256>(src, nb, out);
    default:
      return;
  }
}

}  // namespace
}  // namespace cachet::matmul_internal
