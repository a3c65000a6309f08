// Conversion between f32 and the weight types. The block formats follow ggml byte for byte.
//
// Dequantization evaluates every value with the same float operations in the same order as
// ggml's reference code, so the results are bit-identical. Quantization follows ggml's reference
// quantizers (the scale searches of the K formats included): same sums in the same order, same
// rounding rules (round-half-even via the 1.5 * 2^23 trick where ggml uses it, roundf elsewhere).
// No expression may be contracted into a fused multiply-add (the pragmas below), so the results
// stay the same when the file is built for an instruction set with FMA.
//
// Blocks are copied to and from locals with memcpy: rows need not be aligned.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "cachet/quant.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "cachet/error.h"
#include "cachet/half.h"
#include "cachet/threadpool.h"
#include "kernels/blocks.h"

namespace cachet {
namespace {

constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even, for |v| < 2^22 (adds 1.5 * 2^23 and reads the mantissa).
inline int nearest_int(float v) {
  const float t = v + 12582912.f;
  int32_t i;
  std::memcpy(&i, &t, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// Float to int truncation as C does it, for the values a quantizer can meet (|v| < 2^30);
// anything else (NaN, infinities from non-finite input) gives 0 instead of undefined behaviour.
inline int trunc_int(float v) {
  return static_cast<int>(v > -1073741824.f && v < 1073741824.f ? v : 0.f);
}

// roundf (ties away from zero) for |v| < 2^22: round to even, then move the exact halves away
// from zero. Branch-free, so the loops using it vectorize; NaN gives an arbitrary value.
inline int round_away(float v) {
  const int r = nearest_int(v);
  const float diff = v - static_cast<float>(r);
  return r + (static_cast<int>(diff == 0.5f) & static_cast<int>(v > 0)) -
         (static_cast<int>(diff == -0.5f) & static_cast<int>(v < 0));
}

inline float h2f(half_t h) {
  return f16_to_f32(h);
}
inline half_t f2h(float f) {
  return f32_to_f16(f);
}

template <typename B>
inline B load_block(const void* src, int64_t i) {
  B b;
  std::memcpy(&b, static_cast<const uint8_t*>(src) + i * static_cast<int64_t>(sizeof(B)),
              sizeof(B));
  return b;
}
template <typename B>
inline void store_block(void* dst, int64_t i, const B& b) {
  std::memcpy(static_cast<uint8_t*>(dst) + i * static_cast<int64_t>(sizeof(B)), &b, sizeof(B));
}

// 6-bit scale and min number j (0..7) of a Q4_K / Q5_K block.
inline void scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// The sixteen signed 6-bit scales of a Q3_K block (stored with a bias of 32).
inline void q3k_scales(const uint8_t* s, int8_t out[16]) {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
    const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

// ---------------------------------------------------------------------------------------------
// Dequantization

void deq_q4_0(const void* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK4_0) {
    const auto b = load_block<block_q4_0>(src, i);
    const float d = h2f(b.d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      const int x0 = (b.qs[j] & 0x0F) - 8;
      const int x1 = (b.qs[j] >> 4) - 8;
      y[j] = static_cast<float>(x0) * d;
      y[j + QK4_0 / 2] = static_cast<float>(x1) * d;
    }
  }
}

void deq_q4_1(const void* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK4_1) {
    const auto b = load_block<block_q4_1>(src, i);
    const float d = h2f(b.d), m = h2f(b.m);
    for (int j = 0; j < QK4_1 / 2; ++j) {
      y[j] = static_cast<float>(b.qs[j] & 0x0F) * d + m;
      y[j + QK4_1 / 2] = static_cast<float>(b.qs[j] >> 4) * d + m;
    }
  }
}

void deq_q5_0(const void* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK5_0) {
    const auto b = load_block<block_q5_0>(src, i);
    const float d = h2f(b.d);
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    for (int j = 0; j < QK5_0 / 2; ++j) {
      const int h0 = ((qh >> j) & 1) << 4;
      const int h1 = ((qh >> (j + 16)) & 1) << 4;
      const int x0 = ((b.qs[j] & 0x0F) | h0) - 16;
      const int x1 = ((b.qs[j] >> 4) | h1) - 16;
      y[j] = static_cast<float>(x0) * d;
      y[j + QK5_0 / 2] = static_cast<float>(x1) * d;
    }
  }
}

void deq_q5_1(const void* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK5_1) {
    const auto b = load_block<block_q5_1>(src, i);
    const float d = h2f(b.d), m = h2f(b.m);
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    for (int j = 0; j < QK5_1 / 2; ++j) {
      const int x0 = (b.qs[j] & 0x0F) | (((qh >> j) & 1) << 4);
      const int x1 = (b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      y[j] = static_cast<float>(x0) * d + m;
      y[j + QK5_1 / 2] = static_cast<float>(x1) * d + m;
    }
  }
}

void deq_q8_0(const void* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK8_0) {
    const auto b = load_block<block_q8_0>(src, i);
    const float d = h2f(b.d);
    for (int j = 0; j < QK8_0; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
  }
}

// ggml has no dequantizer for Q8_1 (an activation format); its values are qs * d, like Q8_0.
void deq_q8_1(const void* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK8_1) {
    const auto b = load_block<block_q8_1>(src, i);
    const float d = h2f(b.d);
    for (int j = 0; j < QK8_1; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
  }
}

// Q2_K: 16 groups of 16; group g has scale d * (sc & 15) and min dmin * (sc >> 4); value
// = dl * q - ml. Within each half (128 values) byte l of qs holds elements l, l+32, l+64, l+96
// in bits 0-1, 2-3, 4-5, 6-7.
void deq_q2_k(const void* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<block_q2_K>(src, i);
    const float d = h2f(b.d), dmin = h2f(b.dmin);
    const uint8_t* q = b.qs;
    int is = 0;
    for (int half = 0; half < 2; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int part = 0; part < 2; ++part) {
          const uint8_t sc = b.scales[is++];
          const float dl = d * static_cast<float>(sc & 0xF);
          const float ml = dmin * static_cast<float>(sc >> 4);
          for (int l = 0; l < 16; ++l)
            *y++ = dl * static_cast<float>((q[l + 16 * part] >> shift) & 3) - ml;
        }
      }
    }
  }
}

// Q3_K: 2 low bits as in Q2_K, the high bit in hmask (bit set: no -4 offset), 16 signed scales.
void deq_q3_k(const void* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<block_q3_K>(src, i);
    const float d_all = h2f(b.d);
    int8_t scales[16];
    q3k_scales(b.scales, scales);
    const uint8_t* q = b.qs;
    int is = 0;
    uint8_t m = 1;
    for (int half = 0; half < 2; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m = static_cast<uint8_t>(m << 1)) {
        for (int part = 0; part < 2; ++part) {
          const float dl = d_all * static_cast<float>(scales[is++]);
          for (int l = 0; l < 16; ++l) {
            const int k = l + 16 * part;
            const int v = ((q[k] >> shift) & 3) - ((b.hmask[k] & m) ? 0 : 4);
            *y++ = dl * static_cast<float>(v);
          }
        }
      }
    }
  }
}

// Q4_K: 8 groups of 32 with 6-bit scales and mins; value = d*sc * q - dmin*m.
void deq_q4_k(const void* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<block_q4_K>(src, i);
    const float d = h2f(b.d), dmin = h2f(b.dmin);
    const uint8_t* q = b.qs;
    for (int is = 0; is < 8; is += 2, q += 32) {
      uint8_t sc, m;
      scale_min_k4(is, b.scales, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      scale_min_k4(is + 1, b.scales, &sc, &m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

void deq_q5_k(const void* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<block_q5_K>(src, i);
    const float d = h2f(b.d), dmin = h2f(b.dmin);
    const uint8_t* ql = b.qs;
    uint8_t u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2, ql += 32) {
      uint8_t sc, m;
      scale_min_k4(is, b.scales, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      scale_min_k4(is + 1, b.scales, &sc, &m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l)
        *y++ = d1 * static_cast<float>((ql[l] & 0xF) + ((b.qh[l] & u1) ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l)
        *y++ = d2 * static_cast<float>((ql[l] >> 4) + ((b.qh[l] & u2) ? 16 : 0)) - m2;
      u1 = static_cast<uint8_t>(u1 << 2);
      u2 = static_cast<uint8_t>(u2 << 2);
    }
  }
}

// Q6_K: value = (d * scale) * q, evaluated left to right as in ggml.
void deq_q6_k(const void* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<block_q6_K>(src, i);
    const float d = h2f(b.d);
    const uint8_t* ql = b.ql;
    const uint8_t* qh = b.qh;
    const int8_t* sc = b.scales;
    for (int n = 0; n < QK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
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
    }
  }
}

void deq_q8_k(const void* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK_K) {
    const auto b = load_block<block_q8_K>(src, i);
    for (int j = 0; j < QK_K; ++j) y[j] = b.d * static_cast<float>(b.qs[j]);
  }
}

// ---------------------------------------------------------------------------------------------
// Quantization of the 32-element formats

void q_q4_0(const float* x, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK4_0) {
    float amax = 0.f, max = 0.f;
    for (int j = 0; j < QK4_0; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8;
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    block_q4_0 b;
    b.d = f2h(d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      const float x0 = x[j] * id;
      const float x1 = x[j + QK4_0 / 2] * id;
      const int q0 = std::min(15, trunc_int(x0 + 8.5f));
      const int q1 = std::min(15, trunc_int(x1 + 8.5f));
      b.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
    store_block(dst, i, b);
  }
}

void q_q4_1(const float* x, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK4_1) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < QK4_1; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / 15;
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    block_q4_1 b;
    b.d = f2h(d);
    b.m = f2h(min);
    for (int j = 0; j < QK4_1 / 2; ++j) {
      const float x0 = (x[j] - min) * id;
      const float x1 = (x[j + QK4_1 / 2] - min) * id;
      const int q0 = std::min(15, trunc_int(x0 + 0.5f));
      const int q1 = std::min(15, trunc_int(x1 + 0.5f));
      b.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
    store_block(dst, i, b);
  }
}

void q_q5_0(const float* x, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK5_0) {
    float amax = 0.f, max = 0.f;
    for (int j = 0; j < QK5_0; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -16;
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    block_q5_0 b;
    b.d = f2h(d);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_0 / 2; ++j) {
      const float x0 = x[j] * id;
      const float x1 = x[j + QK5_0 / 2] * id;
      const uint32_t q0 = static_cast<uint32_t>(std::min(31, trunc_int(x0 + 16.5f)));
      const uint32_t q1 = static_cast<uint32_t>(std::min(31, trunc_int(x1 + 16.5f)));
      b.qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= ((q0 >> 4) & 1) << j;
      qh |= ((q1 >> 4) & 1) << (j + QK5_0 / 2);
    }
    std::memcpy(b.qh, &qh, 4);
    store_block(dst, i, b);
  }
}

void q_q5_1(const float* x, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK5_1) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < QK5_1; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / 31;
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    block_q5_1 b;
    b.d = f2h(d);
    b.m = f2h(min);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_1 / 2; ++j) {
      const float x0 = (x[j] - min) * id;
      const float x1 = (x[j + QK5_1 / 2] - min) * id;
      const uint32_t q0 = static_cast<uint8_t>(trunc_int(x0 + 0.5f));
      const uint32_t q1 = static_cast<uint8_t>(trunc_int(x1 + 0.5f));
      b.qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= ((q0 >> 4) & 1) << j;
      qh |= ((q1 >> 4) & 1) << (j + QK5_1 / 2);
    }
    std::memcpy(b.qh, &qh, 4);
    store_block(dst, i, b);
  }
}

// Largest magnitude of 32 values (NaNs ignored), in independent lanes so it vectorizes; the
// maximum does not depend on the order of the comparisons.
inline float abs_max32(const float* x) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int j = 0; j < 32; j += 8) {
    for (int k = 0; k < 8; ++k) {
      const float ax = std::fabs(x[j + k]);
      lane[k] = ax > lane[k] ? ax : lane[k];
    }
  }
  float amax = 0;
  for (float v : lane) amax = v > amax ? v : amax;
  return amax;
}

void q_q8_0(const float* x, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK8_0) {
    const float amax = abs_max32(x);
    const float d = amax / 127;
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    block_q8_0 b;
    b.d = f2h(d);
    for (int j = 0; j < QK8_0; ++j) b.qs[j] = static_cast<int8_t>(round_away(x[j] * id));
    store_block(dst, i, b);
  }
}

void q_q8_1(const float* x, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK8_1) {
    const float amax = abs_max32(x);
    const float d = amax / 127;
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    block_q8_1 b;
    b.d = f2h(d);
    int sum = 0;
    for (int j = 0; j < QK8_1; ++j) {
      b.qs[j] = static_cast<int8_t>(round_away(x[j] * id));
      sum += b.qs[j];
    }
    b.s = f2h(static_cast<float>(sum) * d);
    store_block(dst, i, b);
  }
}

// ---------------------------------------------------------------------------------------------
// Scale searches of the K formats (ggml's make_qx_quants / make_q3_quants / make_qkx2_quants).

// Symmetric quantization of n values to [-nmax, nmax-1] (stored +nmax) with weights x^2
// (rmse_type 1, the only one used here): tries 19 candidate scales around nmax / max.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  float scale = suml2 != 0.f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * x[i]);
        L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Symmetric 3-bit quantization with iterative refinement of single values (do_rmse = true).
float make_q3_quants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (slx > 0) {
        float sl2 = suml2 - w * li * li;
        int new_l = nearest_int(x[i] * sl2 / slx);
        new_l = std::max(-nmax, std::min(nmax - 1, new_l));
        if (new_l != L[i]) {
          const float nl = static_cast<float>(new_l);
          slx += w * x[i] * nl;
          sl2 += w * nl * nl;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (!n_changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Asymmetric quantization to [0, nmax] with scale and min (x ~ scale * L - the_min), minimizing
// the weighted error (squared or absolute) over nstep+1 candidate scales.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep,
                       bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  const float fnmax = static_cast<float>(nmax);
  float iscale = fnmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + fnmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      const float fl = static_cast<float>(l);
      sum_l += w * fl;
      sum_l2 += w * fl * fl;
      sum_xl += w * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// Packs 2-bit values: within each 128-value half, byte l holds L[l], L[l+32], L[l+64], L[l+96].
template <typename T>
void pack_2bit(const T* L, uint8_t* qs) {
  for (int j = 0; j < QK_K; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                           (L[j + l + 96] << 6));
    }
  }
}

// Packs the 6-bit scales and mins of a Q4_K / Q5_K block.
void pack_scales_k4(const float* scales, const float* mins, float max_scale, float max_min,
                    uint8_t* out) {
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < QK_K / 32; ++j) {
    uint8_t ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
    uint8_t lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
    ls = std::min<uint8_t>(63, ls);
    lm = std::min<uint8_t>(63, lm);
    if (j < 4) {
      out[j] = ls;
      out[j + 4] = lm;
    } else {
      out[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      out[j - 4] = static_cast<uint8_t>(out[j - 4] | ((ls >> 4) << 6));
      out[j] = static_cast<uint8_t>(out[j] | ((lm >> 4) << 6));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Quantization of the K formats

void q_q2_k(const float* x, void* dst, int64_t nb) {
  uint8_t L[QK_K], Laux[16];
  float weights[16], mins[QK_K / 16], scales[QK_K / 16];
  const float q4scale = 15.f;
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    block_q2_K b;
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f,
                                   0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0) {
      const float iscale = q4scale / max_scale;
      for (int j = 0; j < QK_K / 16; ++j)
        b.scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
      b.d = f2h(max_scale / q4scale);
    } else {
      for (int j = 0; j < QK_K / 16; ++j) b.scales[j] = 0;
      b.d = f2h(0.f);
    }
    if (max_min > 0) {
      const float iscale = q4scale / max_min;
      for (int j = 0; j < QK_K / 16; ++j) {
        const int l = nearest_int(iscale * mins[j]);
        b.scales[j] = static_cast<uint8_t>(b.scales[j] | static_cast<uint8_t>(l << 4));
      }
      b.dmin = f2h(max_min / q4scale);
    } else {
      b.dmin = f2h(0.f);
    }
    for (int j = 0; j < QK_K / 16; ++j) {
      const float d = h2f(b.d) * static_cast<float>(b.scales[j] & 0xF);
      if (d == 0.f) continue;
      const float dm = h2f(b.dmin) * static_cast<float>(b.scales[j] >> 4);
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int((x[16 * j + ii] + dm) / d);
        L[16 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(3, l)));
      }
    }
    pack_2bit(L, b.qs);
    store_block(dst, i, b);
  }
}

void q_q3_k(const float* x, void* dst, int64_t nb) {
  int8_t L[QK_K];
  float scales[QK_K / 16];
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    block_q3_K b;
    float max_scale = 0, amax = 0;
    for (int j = 0; j < QK_K / 16; ++j) {
      scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
      const float scale = std::fabs(scales[j]);
      if (scale > amax) {
        amax = scale;
        max_scale = scales[j];
      }
    }
    std::memset(b.scales, 0, 12);
    if (max_scale != 0.f) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < QK_K / 16; ++j) {
        int l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
        l = std::max(-32, std::min(31, l)) + 32;
        if (j < 8) {
          b.scales[j] = static_cast<uint8_t>(l & 0xF);
        } else {
          b.scales[j - 8] = static_cast<uint8_t>(b.scales[j - 8] | ((l & 0xF) << 4));
        }
        l >>= 4;
        b.scales[j % 4 + 8] = static_cast<uint8_t>(b.scales[j % 4 + 8] | (l << (2 * (j / 4))));
      }
      b.d = f2h(1 / iscale);
    } else {
      b.d = f2h(0.f);
    }
    int8_t sc[16];
    q3k_scales(b.scales, sc);
    for (int j = 0; j < QK_K / 16; ++j) {
      const float d = h2f(b.d) * static_cast<float>(sc[j]);
      if (d == 0.f) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = static_cast<int8_t>(std::max(-4, std::min(3, l)) + 4);
      }
    }
    std::memset(b.hmask, 0, QK_K / 8);
    // The high bit of element j goes to bit j / 32 of hmask[j % 32].
    for (int j = 0; j < QK_K; ++j) {
      if (L[j] > 3) {
        b.hmask[j % 32] = static_cast<uint8_t>(b.hmask[j % 32] | (1 << (j / 32)));
        L[j] = static_cast<int8_t>(L[j] - 4);
      }
    }
    pack_2bit(L, b.qs);
    store_block(dst, i, b);
  }
}

// Shared by Q4_K (nmax 15) and Q5_K (nmax 31): per-group scale/min search, packed 6-bit
// scales, then the final levels L recomputed from the rounded scales.
template <typename B>
void k4_scales_and_levels(const float* x, B& b, int nmax, float rmin, int nstep, uint8_t* L) {
  uint8_t Laux[32];
  float weights[32], mins[QK_K / 32], scales[QK_K / 32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < QK_K / 32; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin,
                                 0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  std::memset(b.scales, 0, K_SCALE_SIZE);
  pack_scales_k4(scales, mins, max_scale, max_min, b.scales);
  b.d = f2h(max_scale / 63.f);
  b.dmin = f2h(max_min / 63.f);
  for (int j = 0; j < QK_K / 32; ++j) {
    uint8_t sc, m;
    scale_min_k4(j, b.scales, &sc, &m);
    const float d = h2f(b.d) * static_cast<float>(sc);
    if (d == 0.f) continue;
    const float dm = h2f(b.dmin) * static_cast<float>(m);
    for (int ii = 0; ii < 32; ++ii) {
      const int l = nearest_int((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    }
  }
}

void q_q4_k(const float* x, void* dst, int64_t nb) {
  uint8_t L[QK_K];
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    block_q4_K b;
    k4_scales_and_levels(x, b, 15, -1.f, 20, L);
    uint8_t* q = b.qs;
    for (int j = 0; j < QK_K; j += 64, q += 32) {
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    }
    store_block(dst, i, b);
  }
}

void q_q5_k(const float* x, void* dst, int64_t nb) {
  uint8_t L[QK_K];
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    block_q5_K b;
    k4_scales_and_levels(x, b, 31, -0.5f, 15, L);
    std::memset(b.qh, 0, QK_K / 8);
    uint8_t* ql = b.qs;
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < QK_K; n += 64, ql += 32) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[n + j], l2 = L[n + j + 32];
        if (l1 > 15) {
          l1 -= 16;
          b.qh[j] = static_cast<uint8_t>(b.qh[j] | m1);
        }
        if (l2 > 15) {
          l2 -= 16;
          b.qh[j] = static_cast<uint8_t>(b.qh[j] | m2);
        }
        ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
      }
      m1 = static_cast<uint8_t>(m1 << 2);
      m2 = static_cast<uint8_t>(m2 << 2);
    }
    store_block(dst, i, b);
  }
}

void q_q6_k(const float* x, void* dst, int64_t nb) {
  int8_t L[QK_K];
  float scales[QK_K / 16];
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    block_q6_K b;
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < QK_K / 16; ++ib) {
      const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
      scales[ib] = scale;
      if (std::fabs(scale) > max_abs_scale) {
        max_abs_scale = std::fabs(scale);
        max_scale = scale;
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&b, 0, sizeof(b));
      store_block(dst, i, b);
      continue;
    }
    const float iscale = -128.f / max_scale;
    b.d = f2h(1 / iscale);
    for (int ib = 0; ib < QK_K / 16; ++ib)
      b.scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    for (int j = 0; j < QK_K / 16; ++j) {
      const float d = h2f(b.d) * static_cast<float>(b.scales[j]);
      if (d == 0.f) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = static_cast<int8_t>(std::max(-32, std::min(31, l)) + 32);
      }
    }
    uint8_t* ql = b.ql;
    uint8_t* qh = b.qh;
    for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int v0 = L[j + l], v1 = L[j + l + 32], v2 = L[j + l + 64], v3 = L[j + l + 96];
        ql[l] = static_cast<uint8_t>((v0 & 0xF) | ((v2 & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((v1 & 0xF) | ((v3 & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((v0 >> 4) | ((v1 >> 4) << 2) | ((v2 >> 4) << 4) |
                                     ((v3 >> 4) << 6));
      }
    }
    store_block(dst, i, b);
  }
}

void q_q8_k(const float* x, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    block_q8_K b;
    // The value of largest magnitude (the first one on ties), found in two vectorizable passes.
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int j = 0; j < QK_K; j += 8) {
      for (int k = 0; k < 8; ++k) {
        const float ax = std::fabs(x[j + k]);
        lane[k] = ax > lane[k] ? ax : lane[k];
      }
    }
    float amax = 0, max = 0;
    for (float v : lane) amax = v > amax ? v : amax;
    for (int j = 0; j < QK_K; ++j) {
      if (std::fabs(x[j]) == amax) {
        max = x[j];
        break;
      }
    }
    if (amax == 0.f) {
      b.d = 0;
      std::memset(b.qs, 0, QK_K);
      std::memset(b.bsums, 0, sizeof(b.bsums));
      store_block(dst, i, b);
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < QK_K; ++j)
      b.qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    for (int j = 0; j < QK_K / 16; ++j) {
      int sum = 0;
      for (int ii = 0; ii < 16; ++ii) sum += b.qs[j * 16 + ii];
      b.bsums[j] = static_cast<int16_t>(sum);
    }
    b.d = 1 / iscale;
    store_block(dst, i, b);
  }
}

}  // namespace

bool is_weight_type(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::Q8_1:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::Q8_K:
      return true;
    default:
      return false;
  }
}

namespace {
int64_t block_count(const char* what, DType t, int64_t n) {
  CACHET_CHECK(is_weight_type(t), what, ": unsupported type ", dtype_name(t));
  const int64_t be = dtype_info(t).block_elems;
  CACHET_CHECK(n >= 0 && n % be == 0, what, ": ", n, " elements is not a whole number of ",
               dtype_name(t), " blocks (", be, " elements each)");
  return n / be;
}
}  // namespace

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  const int64_t nb = block_count("dequantize_row", t, n);
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::F16: {
      const auto* s = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        dst[i] = f16_to_f32(h);
      }
      return;
    }
    case DType::BF16: {
      const auto* s = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
      }
      return;
    }
    case DType::Q4_0:
      return deq_q4_0(src, dst, nb);
    case DType::Q4_1:
      return deq_q4_1(src, dst, nb);
    case DType::Q5_0:
      return deq_q5_0(src, dst, nb);
    case DType::Q5_1:
      return deq_q5_1(src, dst, nb);
    case DType::Q8_0:
      return deq_q8_0(src, dst, nb);
    case DType::Q8_1:
      return deq_q8_1(src, dst, nb);
    case DType::Q2_K:
      return deq_q2_k(src, dst, nb);
    case DType::Q3_K:
      return deq_q3_k(src, dst, nb);
    case DType::Q4_K:
      return deq_q4_k(src, dst, nb);
    case DType::Q5_K:
      return deq_q5_k(src, dst, nb);
    case DType::Q6_K:
      return deq_q6_k(src, dst, nb);
    case DType::Q8_K:
      return deq_q8_k(src, dst, nb);
    default:
      break;
  }
  fail("dequantize_row: unsupported type ", dtype_name(t));
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  const int64_t nb = block_count("quantize_row", t, n);
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::F16: {
      auto* d = static_cast<uint8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_f16(src[i]);
        std::memcpy(d + 2 * i, &h, 2);
      }
      return;
    }
    case DType::BF16: {
      auto* d = static_cast<uint8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {  // vectorized: f32_to_bf16 has no branch
        const uint16_t h = f32_to_bf16(src[i]);
        std::memcpy(d + 2 * i, &h, 2);
      }
      return;
    }
    case DType::Q4_0:
      return q_q4_0(src, dst, nb);
    case DType::Q4_1:
      return q_q4_1(src, dst, nb);
    case DType::Q5_0:
      return q_q5_0(src, dst, nb);
    case DType::Q5_1:
      return q_q5_1(src, dst, nb);
    case DType::Q8_0:
      return q_q8_0(src, dst, nb);
    case DType::Q8_1:
      return q_q8_1(src, dst, nb);
    case DType::Q2_K:
      return q_q2_k(src, dst, nb);
    case DType::Q3_K:
      return q_q3_k(src, dst, nb);
    case DType::Q4_K:
      return q_q4_k(src, dst, nb);
    case DType::Q5_K:
      return q_q5_k(src, dst, nb);
    case DType::Q6_K:
      return q_q6_k(src, dst, nb);
    case DType::Q8_K:
      return q_q8_k(src, dst, nb);
    default:
      break;
  }
  fail("quantize_row: unsupported type ", dtype_name(t));
}

void quantize_matrix(DType t, const float* src, void* dst, int64_t rows, int64_t cols,
                     ThreadPool* pool) {
  CACHET_CHECK(rows >= 0, "quantize_matrix: negative row count ", rows);
  block_count("quantize_matrix", t, cols);
  const size_t rb = row_bytes(t, cols);
  auto* out = static_cast<uint8_t*>(dst);
  auto body = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      quantize_row(t, src + r * cols, out + static_cast<size_t>(r) * rb, cols);
  };
  if (pool == nullptr || pool->size() <= 1 || rows < 2) {
    body(0, rows);
  } else {
    pool->parallel_for(rows, 1, body);
  }
}

}  // namespace cachet
