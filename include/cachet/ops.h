// Element-wise and small ops used by the models, on f32. Each has a scalar reference
// (cachet::ops::ref) and AVX2 / AVX-512 versions chosen at run time; tests hold them together.
#pragma once
#include <cstdint>

namespace cachet::ops {

// y = x * rsqrt(mean(x^2) + eps) * (one_plus ? (1 + w) : w); w may be null (no scale).
void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps, bool one_plus);
// LayerNorm: y = (x - mean) / sqrt(var + eps) * w + b (w, b may be null).
void layernorm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps);
// In-place softmax over n values (max-subtracted, f32 accumulation).
void softmax(float* x, int64_t n);
void gelu(const float* x, float* y, int64_t n);       // exact: 0.5 x (1 + erf(x / sqrt 2))
void gelu_tanh(const float* x, float* y, int64_t n);  // tanh approximation
void silu(const float* x, float* y, int64_t n);
void softplus(const float* x, float* y, int64_t n);  // log(1 + e^x), stable; x > 20 gives x
void sigmoid(const float* x, float* y, int64_t n);
void exp(const float* x, float* y, int64_t n);  // e^x; 0 below about -104, inf above 88.7
void add(const float* a, const float* b, float* y, int64_t n);
void mul(const float* a, const float* b, float* y, int64_t n);
void scale(const float* x, float s, float* y, int64_t n);
float dot(const float* a, const float* b, int64_t n);
// y += a * x
void axpy(float a, const float* x, float* y, int64_t n);
// y = cap * tanh(x / cap) (logit soft-capping), within a few 1e-7 * cap of it.
void softcap(const float* x, float cap, float* y, int64_t n);
// Attention over cached rows `stride` floats apart: out[j] = scale * dot(q, k + j * stride, n)
// for j < count, and y += w[j] * (v + j * stride) for j = 0, 1, ... in order. The same values
// as the loops of dot and axpy, with the rows fetched ahead.
void dot_rows(const float* q, const float* k, int64_t stride, int64_t count, int64_t n, float scale,
              float* out);
void axpy_rows(const float* w, const float* v, int64_t stride, int64_t count, int64_t n, float* y);
// axpy_rows over rows of bf16 values (stride in values), widened to f32: the same as axpy_rows
// on the widened rows.
void axpy_rows_bf16(const float* w, const uint16_t* v, int64_t stride, int64_t count, int64_t n,
                    float* y);
// Attention over a cache of int8 rows, each with one f32 scale (row j holds k_scale[j] * k_j),
// rows `stride` values apart, n <= kMaxI8Row (the integer sums stay within int32):
//   dot_rows_i8: out[j] = float(sum_i q16_i k_ji) * (k_scale[j] * (sq * scale)), with q rounded
//     to 16 bits: sq = max|q| / 32767, q16 = nearbyint(q / sq) (0 for q = 0). The sums are exact
//     integers, so every ISA gives the same outputs.
//   axpy_rows_i8: y[i] += (w[j] * v_scale[j]) * v_ji for j = 0, 1, ... in order, each a fused
//     multiply-add.
// quantize_i8 writes such a row: scale = max|x| / 127, v = nearbyint(x / scale); returns scale.
inline constexpr int64_t kMaxI8Row = 512;
void dot_rows_i8(const float* q, const int8_t* k, const float* k_scale, int64_t stride,
                 int64_t count, int64_t n, float scale, float* out);
void axpy_rows_i8(const float* w, const int8_t* v, const float* v_scale, int64_t stride,
                  int64_t count, int64_t n, float* y);
// The same for two heads over their own blocks of rows (the same count), read side by side:
// each output exactly what the one-head form gives.
void dot_rows_i8_x2(const float* const* q, const int8_t* const* k, const float* const* k_scale,
                    int64_t stride, int64_t count, int64_t n, float scale, float* const* out);
void axpy_rows_i8_x2(const float* const* w, const int8_t* const* v, const float* const* v_scale,
                     int64_t stride, int64_t count, int64_t n, float* const* y);
float quantize_i8(const float* x, int64_t n, int8_t* v);
// dot_rows and axpy_rows for nh heads over the same rows (multi-query attention): head h
// reads q + h * q_stride and writes out + h * out_stride (weights w + h * w_stride into
// y + h * y_stride). Each head's values are exactly those of dot_rows / axpy_rows; the rows
// are read once for several heads.
void dot_rows_heads(const float* q, int64_t nh, int64_t q_stride, const float* k, int64_t stride,
                    int64_t count, int64_t n, float scale, float* out, int64_t out_stride);
void axpy_rows_heads(const float* w, int64_t nh, int64_t w_stride, const float* v, int64_t stride,
                     int64_t count, int64_t n, float* y, int64_t y_stride);
// The same over rows of bf16 values (stride in values), widened to f32: exactly the f32
// forms' values on the widened rows.
void dot_rows_heads_bf16(const float* q, int64_t nh, int64_t q_stride, const uint16_t* k,
                         int64_t stride, int64_t count, int64_t n, float scale, float* out,
                         int64_t out_stride);
void axpy_rows_heads_bf16(const float* w, int64_t nh, int64_t w_stride, const uint16_t* v,
                          int64_t stride, int64_t count, int64_t n, float* y, int64_t y_stride);
// One query over rows of bf16 keys (stride in values): out[j] = scale * dot(q, k_j) for j <
// count, in a summation order of its own (on AVX-512 each 64-byte row piece is read as its
// even and odd values, one instruction each, against q split the same way once per call), so
// within rounding of dot_rows_heads_bf16 with one head rather than equal to it.
void dot_rows_bf16(const float* q, const uint16_t* k, int64_t stride, int64_t count, int64_t n,
                   float scale, float* out);
// The same for two queries (heads) over their own blocks of rows, of the same count, read side
// by side (two streams from memory at once): q[0], k[0], out[0] and q[1], k[1], out[1]. Each
// output is exactly what dot_rows_bf16 / axpy_rows_bf16 give alone.
void dot_rows_bf16_x2(const float* const* q, const uint16_t* const* k, int64_t stride,
                      int64_t count, int64_t n, float scale, float* const* out);
void axpy_rows_bf16_x2(const float* const* w, const uint16_t* const* v, int64_t stride,
                       int64_t count, int64_t n, float* const* y);
// axpy_rows for two weight vectors over their own blocks of f32 rows, of the same count, read
// side by side (two streams from memory): each y[a] exactly what axpy_rows gives it alone.
void axpy_rows_x2(const float* const* w, const float* const* v, int64_t stride, int64_t count,
                  int64_t n, float* const* y);

// Rotary embedding of one head vector, in place, on its first rot_dim dims.
// neox (half-split) pairs (j, j + rot_dim/2); interleaved pairs (2j, 2j+1).
// Angle for pair j: pos * theta^(-2j/rot_dim), computed in f32.
void rope_neox(float* x, int64_t rot_dim, int64_t pos, float theta);
void rope_interleaved(float* x, int64_t rot_dim, int64_t pos, float theta);

// Causal depthwise conv1d over T steps and C channels with K taps:
//   y[t, c] = b[c] + sum_k w[c * K + k] * u[t - (K - 1) + k, c]
// where u[-j] for j = 1..K-1 are the rows of hist ([K-1, C], oldest first). b may be null.
void conv1d_depthwise(const float* hist, const float* x, const float* w, const float* b, float* y,
                      int64_t T, int64_t C, int64_t K);

namespace ref {
void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps, bool one_plus);
void layernorm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps);
void softmax(float* x, int64_t n);
void gelu(const float* x, float* y, int64_t n);
void gelu_tanh(const float* x, float* y, int64_t n);
void silu(const float* x, float* y, int64_t n);
void softplus(const float* x, float* y, int64_t n);
void sigmoid(const float* x, float* y, int64_t n);
void exp(const float* x, float* y, int64_t n);
void add(const float* a, const float* b, float* y, int64_t n);
void mul(const float* a, const float* b, float* y, int64_t n);
void scale(const float* x, float s, float* y, int64_t n);
float dot(const float* a, const float* b, int64_t n);
void axpy(float a, const float* x, float* y, int64_t n);
void softcap(const float* x, float cap, float* y, int64_t n);
void dot_rows(const float* q, const float* k, int64_t stride, int64_t count, int64_t n, float scale,
              float* out);
void axpy_rows(const float* w, const float* v, int64_t stride, int64_t count, int64_t n, float* y);
void axpy_rows_bf16(const float* w, const uint16_t* v, int64_t stride, int64_t count, int64_t n,
                    float* y);
void dot_rows_i8(const float* q, const int8_t* k, const float* k_scale, int64_t stride,
                 int64_t count, int64_t n, float scale, float* out);
void axpy_rows_i8(const float* w, const int8_t* v, const float* v_scale, int64_t stride,
                  int64_t count, int64_t n, float* y);
void dot_rows_i8_x2(const float* const* q, const int8_t* const* k, const float* const* k_scale,
                    int64_t stride, int64_t count, int64_t n, float scale, float* const* out);
void axpy_rows_i8_x2(const float* const* w, const int8_t* const* v, const float* const* v_scale,
                     int64_t stride, int64_t count, int64_t n, float* const* y);
float quantize_i8(const float* x, int64_t n, int8_t* v);
void dot_rows_heads(const float* q, int64_t nh, int64_t q_stride, const float* k, int64_t stride,
                    int64_t count, int64_t n, float scale, float* out, int64_t out_stride);
void axpy_rows_heads(const float* w, int64_t nh, int64_t w_stride, const float* v, int64_t stride,
                     int64_t count, int64_t n, float* y, int64_t y_stride);
void dot_rows_heads_bf16(const float* q, int64_t nh, int64_t q_stride, const uint16_t* k,
                         int64_t stride, int64_t count, int64_t n, float scale, float* out,
                         int64_t out_stride);
void axpy_rows_heads_bf16(const float* w, int64_t nh, int64_t w_stride, const uint16_t* v,
                          int64_t stride, int64_t count, int64_t n, float* y, int64_t y_stride);
void dot_rows_bf16(const float* q, const uint16_t* k, int64_t stride, int64_t count, int64_t n,
                   float scale, float* out);
void dot_rows_bf16_x2(const float* const* q, const uint16_t* const* k, int64_t stride,
                      int64_t count, int64_t n, float scale, float* const* out);
void axpy_rows_bf16_x2(const float* const* w, const uint16_t* const* v, int64_t stride,
                       int64_t count, int64_t n, float* const* y);
void axpy_rows_x2(const float* const* w, const float* const* v, int64_t stride, int64_t count,
                  int64_t n, float* const* y);
void rope_neox(float* x, int64_t rot_dim, int64_t pos, float theta);
void rope_interleaved(float* x, int64_t rot_dim, int64_t pos, float theta);
void conv1d_depthwise(const float* hist, const float* x, const float* w, const float* b, float* y,
                      int64_t T, int64_t C, int64_t K);
}  // namespace ref

}  // namespace cachet::ops
