// Run-time dispatch of the element-wise ops to AVX-512, AVX2 or the scalar reference.
#include "cachet/ops.h"

#include "cachet/cpu.h"
#include "cachet/error.h"
#include "kernels/ops_simd.h"

namespace cachet::ops {

#define CACHET_OPS_DISPATCH(fn, ...)  \
  switch (active_isa()) {             \
    case Isa::Avx512:                 \
      return avx512::fn(__VA_ARGS__); \
    case Isa::Avx2:                   \
      return avx2::fn(__VA_ARGS__);   \
    default:                          \
      return ref::fn(__VA_ARGS__);    \
  }

void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps, bool one_plus) {
  CACHET_OPS_DISPATCH(rmsnorm, x, w, y, n, eps, one_plus)
}
void layernorm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps) {
  CACHET_OPS_DISPATCH(layernorm, x, w, b, y, n, eps)
}
void softmax(float* x, int64_t n) {
  CACHET_OPS_DISPATCH(softmax, x, n)
}
void gelu(const float* x, float* y, int64_t n) {
  CACHET_OPS_DISPATCH(gelu, x, y, n)
}
void gelu_tanh(const float* x, float* y, int64_t n) {
  CACHET_OPS_DISPATCH(gelu_tanh, x, y, n)
}
void silu(const float* x, float* y, int64_t n) {
  CACHET_OPS_DISPATCH(silu, x, y, n)
}
void softplus(const float* x, float* y, int64_t n) {
  CACHET_OPS_DISPATCH(softplus, x, y, n)
}
void sigmoid(const float* x, float* y, int64_t n) {
  CACHET_OPS_DISPATCH(sigmoid, x, y, n)
}
void exp(const float* x, float* y, int64_t n) {
  CACHET_OPS_DISPATCH(exp, x, y, n)
}
void add(const float* a, const float* b, float* y, int64_t n) {
  CACHET_OPS_DISPATCH(add, a, b, y, n)
}
void mul(const float* a, const float* b, float* y, int64_t n) {
  CACHET_OPS_DISPATCH(mul, a, b, y, n)
}
void scale(const float* x, float s, float* y, int64_t n) {
  CACHET_OPS_DISPATCH(scale, x, s, y, n)
}
float dot(const float* a, const float* b, int64_t n) {
  CACHET_OPS_DISPATCH(dot, a, b, n)
}
void axpy(float a, const float* x, float* y, int64_t n) {
  CACHET_OPS_DISPATCH(axpy, a, x, y, n)
}
void softcap(const float* x, float cap, float* y, int64_t n) {
  CACHET_OPS_DISPATCH(softcap, x, cap, y, n)
}
void dot_rows(const float* q, const float* k, int64_t stride, int64_t count, int64_t n, float scale,
              float* out) {
  CACHET_OPS_DISPATCH(dot_rows, q, k, stride, count, n, scale, out)
}
void axpy_rows(const float* w, const float* v, int64_t stride, int64_t count, int64_t n, float* y) {
  CACHET_OPS_DISPATCH(axpy_rows, w, v, stride, count, n, y)
}
void axpy_rows_bf16(const float* w, const uint16_t* v, int64_t stride, int64_t count, int64_t n,
                    float* y) {
  CACHET_OPS_DISPATCH(axpy_rows_bf16, w, v, stride, count, n, y)
}
void dot_rows_i8(const float* q, const int8_t* k, const float* k_scale, int64_t stride,
                 int64_t count, int64_t n, float scale, float* out) {
  CACHET_CHECK(n >= 0 && n <= kMaxI8Row, "dot_rows_i8: rows of ", n, " values (at most ", kMaxI8Row,
               ")");
  CACHET_OPS_DISPATCH(dot_rows_i8, q, k, k_scale, stride, count, n, scale, out)
}
void axpy_rows_i8(const float* w, const int8_t* v, const float* v_scale, int64_t stride,
                  int64_t count, int64_t n, float* y) {
  CACHET_OPS_DISPATCH(axpy_rows_i8, w, v, v_scale, stride, count, n, y)
}
void dot_rows_i8_x2(const float* const* q, const int8_t* const* k, const float* const* k_scale,
                    int64_t stride, int64_t count, int64_t n, float scale, float* const* out) {
  CACHET_CHECK(n >= 0 && n <= kMaxI8Row, "dot_rows_i8_x2: rows of ", n, " values (at most ",
               kMaxI8Row, ")");
  CACHET_OPS_DISPATCH(dot_rows_i8_x2, q, k, k_scale, stride, count, n, scale, out)
}
void axpy_rows_i8_x2(const float* const* w, const int8_t* const* v, const float* const* v_scale,
                     int64_t stride, int64_t count, int64_t n, float* const* y) {
  CACHET_OPS_DISPATCH(axpy_rows_i8_x2, w, v, v_scale, stride, count, n, y)
}
float quantize_i8(const float* x, int64_t n, int8_t* v) {
  CACHET_OPS_DISPATCH(quantize_i8, x, n, v)
}
void dot_rows_heads(const float* q, int64_t nh, int64_t q_stride, const float* k, int64_t stride,
                    int64_t count, int64_t n, float scale, float* out, int64_t out_stride) {
  CACHET_OPS_DISPATCH(dot_rows_heads, q, nh, q_stride, k, stride, count, n, scale, out, out_stride)
}
void axpy_rows_heads(const float* w, int64_t nh, int64_t w_stride, const float* v, int64_t stride,
                     int64_t count, int64_t n, float* y, int64_t y_stride) {
  CACHET_OPS_DISPATCH(axpy_rows_heads, w, nh, w_stride, v, stride, count, n, y, y_stride)
}
void dot_rows_heads_bf16(const float* q, int64_t nh, int64_t q_stride, const uint16_t* k,
                         int64_t stride, int64_t count, int64_t n, float scale, float* out,
                         int64_t out_stride) {
  CACHET_OPS_DISPATCH(dot_rows_heads_bf16, q, nh, q_stride, k, stride, count, n, scale, out,
                      out_stride)
}
void dot_rows_bf16_x2(const float* const* q, const uint16_t* const* k, int64_t stride,
                      int64_t count, int64_t n, float scale, float* const* out) {
  CACHET_OPS_DISPATCH(dot_rows_bf16_x2, q, k, stride, count, n, scale, out)
}
void axpy_rows_bf16_x2(const float* const* w, const uint16_t* const* v, int64_t stride,
                       int64_t count, int64_t n, float* const* y) {
  CACHET_OPS_DISPATCH(axpy_rows_bf16_x2, w, v, stride, count, n, y)
}
void axpy_rows_x2(const float* const* w, const float* const* v, int64_t stride, int64_t count,
                  int64_t n, float* const* y) {
  CACHET_OPS_DISPATCH(axpy_rows_x2, w, v, stride, count, n, y)
}
void dot_rows_bf16(const float* q, const uint16_t* k, int64_t stride, int64_t count, int64_t n,
                   float scale, float* out) {
  CACHET_OPS_DISPATCH(dot_rows_bf16, q, k, stride, count, n, scale, out)
}
void axpy_rows_heads_bf16(const float* w, int64_t nh, int64_t w_stride, const uint16_t* v,
                          int64_t stride, int64_t count, int64_t n, float* y, int64_t y_stride) {
  CACHET_OPS_DISPATCH(axpy_rows_heads_bf16, w, nh, w_stride, v, stride, count, n, y, y_stride)
}

// Rotary embeddings are small and must match the reference bit for bit: one implementation.
void rope_neox(float* x, int64_t rot_dim, int64_t pos, float theta) {
  ref::rope_neox(x, rot_dim, pos, theta);
}
void rope_interleaved(float* x, int64_t rot_dim, int64_t pos, float theta) {
  ref::rope_interleaved(x, rot_dim, pos, theta);
}

void conv1d_depthwise(const float* hist, const float* x, const float* w, const float* b, float* y,
                      int64_t T, int64_t C, int64_t K) {
  CACHET_OPS_DISPATCH(conv1d_depthwise, hist, x, w, b, y, T, C, K)
}

}  // namespace cachet::ops
