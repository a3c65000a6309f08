// The vectorized element-wise ops, one namespace per instruction set. Only ops.cpp calls these,
// after checking cachet::active_isa(); their definitions are compiled for that ISA alone.
#pragma once
#include <cstdint>

#define CACHET_OPS_SIMD_DECLS                                                                      \
  void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps, bool one_plus);     \
  void layernorm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps);  \
  void softmax(float* x, int64_t n);                                                               \
  void gelu(const float* x, float* y, int64_t n);                                                  \
  void gelu_tanh(const float* x, float* y, int64_t n);                                             \
  void silu(const float* x, float* y, int64_t n);                                                  \
  void softplus(const float* x, float* y, int64_t n);                                              \
  void sigmoid(const float* x, float* y, int64_t n);                                               \
  void exp(const float* x, float* y, int64_t n);                                                   \
  void add(const float* a, const float* b, float* y, int64_t n);                                   \
  void mul(const float* a, const float* b, float* y, int64_t n);                                   \
  void scale(const float* x, float s, float* y, int64_t n);                                        \
  float dot(const float* a, const float* b, int64_t n);                                            \
  void axpy(float a, const float* x, float* y, int64_t n);                                         \
  void softcap(const float* x, float cap, float* y, int64_t n);                                    \
  void dot_rows(const float* q, const float* k, int64_t stride, int64_t count, int64_t n,          \
                float scale, float* out);                                                          \
  void axpy_rows(const float* w, const float* v, int64_t stride, int64_t count, int64_t n,         \
                 float* y);                                                                        \
  void axpy_rows_bf16(const float* w, const uint16_t* v, int64_t stride, int64_t count, int64_t n, \
                      float* y);                                                                   \
  void dot_rows_i8(const float* q, const int8_t* k, const float* k_scale, int64_t stride,          \
                   int64_t count, int64_t n, float scale, float* out);                             \
  void axpy_rows_i8(const float* w, const int8_t* v, const float* v_scale, int64_t stride,         \
                    int64_t count, int64_t n, float* y);                                           \
  void dot_rows_i8_x2(const float* const* q, const int8_t* const* k, const float* const* k_scale,  \
                      int64_t stride, int64_t count, int64_t n, float scale, float* const* out);   \
  void axpy_rows_i8_x2(const float* const* w, const int8_t* const* v, const float* const* v_scale, \
                       int64_t stride, int64_t count, int64_t n, float* const* y);                 \
  float quantize_i8(const float* x, int64_t n, int8_t* v);                                         \
  void dot_rows_heads(const float* q, int64_t nh, int64_t q_stride, const float* k,                \
                      int64_t stride, int64_t count, int64_t n, float scale, float* out,           \
                      int64_t out_stride);                                                         \
  void axpy_rows_heads(const float* w, int64_t nh, int64_t w_stride, const float* v,               \
                       int64_t stride, int64_t count, int64_t n, float* y, int64_t y_stride);      \
  void dot_rows_heads_bf16(const float* q, int64_t nh, int64_t q_stride, const uint16_t* k,        \
                           int64_t stride, int64_t count, int64_t n, float scale, float* out,      \
                           int64_t out_stride);                                                    \
  void dot_rows_bf16_x2(const float* const* q, const uint16_t* const* k, int64_t stride,           \
                        int64_t count, int64_t n, float scale, float* const* out);                 \
  void axpy_rows_bf16_x2(const float* const* w, const uint16_t* const* v, int64_t stride,          \
                         int64_t count, int64_t n, float* const* y);                               \
  void axpy_rows_x2(const float* const* w, const float* const* v, int64_t stride, int64_t count,   \
                    int64_t n, float* const* y);                                                   \
  void dot_rows_bf16(const float* q, const uint16_t* k, int64_t stride, int64_t count, int64_t n,  \
                     float scale, float* out);                                                     \
  void axpy_rows_heads_bf16(const float* w, int64_t nh, int64_t w_stride, const uint16_t* v,       \
                            int64_t stride, int64_t count, int64_t n, float* y, int64_t y_stride); \
  void conv1d_depthwise(const float* hist, const float* x, const float* w, const float* b,         \
                        float* y, int64_t T, int64_t C, int64_t K);

namespace cachet::ops::avx2 {
CACHET_OPS_SIMD_DECLS
}  // namespace cachet::ops::avx2

namespace cachet::ops::avx512 {
CACHET_OPS_SIMD_DECLS
}  // namespace cachet::ops::avx512
