// Scalar references for the element-wise ops: plain loops in f32, following the math in order.
// Reductions accumulate in double so the references are a stable yardstick for the SIMD paths.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "cachet/half.h"
#include "cachet/ops.h"

namespace cachet::ops::ref {

void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps, bool one_plus) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double mean = n > 0 ? ss / static_cast<double>(n) : 0.0;
  const float inv = static_cast<float>(1.0 / std::sqrt(mean + static_cast<double>(eps)));
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] * inv;
    if (!w) {
      y[i] = v;
    } else {
      y[i] = v * (one_plus ? 1.0f + w[i] : w[i]);
    }
  }
}

void layernorm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps) {
  if (n <= 0) return;
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  const double mean = s / static_cast<double>(n);
  double v = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = x[i] - mean;
    v += d * d;
  }
  const double var = v / static_cast<double>(n);
  const float inv = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(eps)));
  const float m = static_cast<float>(mean);
  for (int64_t i = 0; i < n; ++i) {
    float t = (x[i] - m) * inv;
    if (w) t *= w[i];
    if (b) t += b[i];
    y[i] = t;
  }
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) mx = std::fmax(mx, x[i]);
  if (mx == -std::numeric_limits<float>::infinity()) {
    // Every entry masked out: no mass anywhere rather than NaN.
    for (int64_t i = 0; i < n; ++i) x[i] = 0.0f;
    return;
  }
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void gelu(const float* x, float* y, int64_t n) {
  const float r2 = 0.70710678118654752440f;
  for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * r2));
}

void gelu_tanh(const float* x, float* y, int64_t n) {
  const float k = 0.79788456080286535588f;  // sqrt(2 / pi)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v)));
  }
}

void silu(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
}

void softplus(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 20.0f ? x[i] : std::log1p(std::exp(x[i]));
}

void sigmoid(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));
}

void exp(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}

void add(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void mul(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}

void scale(const float* x, float s, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
}

float dot(const float* a, const float* b, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(s);
}

void axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void softcap(const float* x, float cap, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = cap * std::tanh(x[i] / cap);
}

void dot_rows(const float* q, const float* k, int64_t stride, int64_t count, int64_t n, float scale,
              float* out) {
  for (int64_t j = 0; j < count; ++j) out[j] = dot(q, k + j * stride, n) * scale;
}

void axpy_rows(const float* w, const float* v, int64_t stride, int64_t count, int64_t n, float* y) {
  for (int64_t j = 0; j < count; ++j) axpy(w[j], v + j * stride, y, n);
}

void dot_rows_heads(const float* q, int64_t nh, int64_t q_stride, const float* k, int64_t stride,
                    int64_t count, int64_t n, float scale, float* out, int64_t out_stride) {
  for (int64_t h = 0; h < nh; ++h)
    dot_rows(q + h * q_stride, k, stride, count, n, scale, out + h * out_stride);
}

void axpy_rows_heads(const float* w, int64_t nh, int64_t w_stride, const float* v, int64_t stride,
                     int64_t count, int64_t n, float* y, int64_t y_stride) {
  for (int64_t h = 0; h < nh; ++h)
    axpy_rows(w + h * w_stride, v, stride, count, n, y + h * y_stride);
}

void dot_rows_bf16(const float* q, const uint16_t* k, int64_t stride, int64_t count, int64_t n,
                   float scale, float* out) {
  dot_rows_heads_bf16(q, 1, n, k, stride, count, n, scale, out, count);
}

void dot_rows_bf16_x2(const float* const* q, const uint16_t* const* k, int64_t stride,
                      int64_t count, int64_t n, float scale, float* const* out) {
  for (int a = 0; a < 2; ++a) dot_rows_bf16(q[a], k[a], stride, count, n, scale, out[a]);
}

void axpy_rows_bf16_x2(const float* const* w, const uint16_t* const* v, int64_t stride,
                       int64_t count, int64_t n, float* const* y) {
  for (int a = 0; a < 2; ++a) axpy_rows_bf16(w[a], v[a], stride, count, n, y[a]);
}

void axpy_rows_x2(const float* const* w, const float* const* v, int64_t stride, int64_t count,
                  int64_t n, float* const* y) {
  for (int a = 0; a < 2; ++a) axpy_rows(w[a], v[a], stride, count, n, y[a]);
}

void dot_rows_heads_bf16(const float* q, int64_t nh, int64_t q_stride, const uint16_t* k,
                         int64_t stride, int64_t count, int64_t n, float scale, float* out,
                         int64_t out_stride) {
  std::vector<float> row(static_cast<size_t>(n));
  for (int64_t j = 0; j < count; ++j) {
    for (int64_t i = 0; i < n; ++i) row[static_cast<size_t>(i)] = bf16_to_f32(k[j * stride + i]);
    for (int64_t h = 0; h < nh; ++h)
      out[h * out_stride + j] = dot(q + h * q_stride, row.data(), n) * scale;
  }
}

void axpy_rows_heads_bf16(const float* w, int64_t nh, int64_t w_stride, const uint16_t* v,
                          int64_t stride, int64_t count, int64_t n, float* y, int64_t y_stride) {
  for (int64_t h = 0; h < nh; ++h)
    axpy_rows_bf16(w + h * w_stride, v, stride, count, n, y + h * y_stride);
}

void axpy_rows_bf16(const float* w, const uint16_t* v, int64_t stride, int64_t count, int64_t n,
                    float* y) {
  for (int64_t j = 0; j < count; ++j)
    for (int64_t i = 0; i < n; ++i) y[i] += w[j] * bf16_to_f32(v[j * stride + i]);
}

namespace {
// x rounded to integers in [-limit, limit] at scale max|x| / limit; where that scale would be
// 0, returns 0 with every value 0 (ops.h: quantize_i8, and dot_rows_i8's query).
template <typename T>
float round_to_scale(const float* x, int64_t n, float limit, T* out) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  const float s = m > 0.0f ? m / limit : 0.0f;
  if (!(s > 0.0f)) {
    std::fill(out, out + n, T{0});
    return 0.0f;
  }
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<T>(std::fmin(std::fmax(std::nearbyint(x[i] / s), -limit), limit));
  return s;
}
}  // namespace

void dot_rows_i8(const float* q, const int8_t* k, const float* k_scale, int64_t stride,
                 int64_t count, int64_t n, float scale, float* out) {
  std::vector<int16_t> q16(static_cast<size_t>(n));
  const float c = round_to_scale(q, n, 32767.0f, q16.data()) * scale;
  for (int64_t j = 0; j < count; ++j) {
    int64_t s = 0;
    for (int64_t i = 0; i < n; ++i) s += int64_t{q16[static_cast<size_t>(i)]} * k[j * stride + i];
    out[j] = static_cast<float>(s) * (k_scale[j] * c);
  }
}

void axpy_rows_i8(const float* w, const int8_t* v, const float* v_scale, int64_t stride,
                  int64_t count, int64_t n, float* y) {
  for (int64_t j = 0; j < count; ++j) {
    const float c = w[j] * v_scale[j];
    for (int64_t i = 0; i < n; ++i) y[i] = std::fma(c, static_cast<float>(v[j * stride + i]), y[i]);
  }
}

float quantize_i8(const float* x, int64_t n, int8_t* v) {
  return round_to_scale(x, n, 127.0f, v);
}
void dot_rows_i8_x2(const float* const* q, const int8_t* const* k, const float* const* k_scale,
                    int64_t stride, int64_t count, int64_t n, float scale, float* const* out) {
  for (int a = 0; a < 2; ++a) dot_rows_i8(q[a], k[a], k_scale[a], stride, count, n, scale, out[a]);
}

void axpy_rows_i8_x2(const float* const* w, const int8_t* const* v, const float* const* v_scale,
                     int64_t stride, int64_t count, int64_t n, float* const* y) {
  for (int a = 0; a < 2; ++a) axpy_rows_i8(w[a], v[a], v_scale[a], stride, count, n, y[a]);
}

namespace {

// inv_freq[j] = 1 / theta^((2j) / rot_dim), each step rounded to f32.
float inv_freq(int64_t j, int64_t rot_dim, float theta) {
  const float e = static_cast<float>(2 * j) / static_cast<float>(rot_dim);
  return 1.0f / std::pow(theta, e);
}

}  // namespace

void rope_neox(float* x, int64_t rot_dim, int64_t pos, float theta) {
  const int64_t half = rot_dim / 2;
  const float p = static_cast<float>(pos);
  for (int64_t j = 0; j < half; ++j) {
    const float ang = p * inv_freq(j, rot_dim, theta);
    const float c = std::cos(ang), s = std::sin(ang);
    const float a = x[j], b = x[j + half];
    x[j] = a * c - b * s;
    x[j + half] = b * c + a * s;
  }
}

void rope_interleaved(float* x, int64_t rot_dim, int64_t pos, float theta) {
  const int64_t half = rot_dim / 2;
  const float p = static_cast<float>(pos);
  for (int64_t j = 0; j < half; ++j) {
    const float ang = p * inv_freq(j, rot_dim, theta);
    const float c = std::cos(ang), s = std::sin(ang);
    const float a = x[2 * j], b = x[2 * j + 1];
    x[2 * j] = a * c - b * s;
    x[2 * j + 1] = b * c + a * s;
  }
}

void conv1d_depthwise(const float* hist, const float* x, const float* w, const float* b, float* y,
                      int64_t T, int64_t C, int64_t K) {
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t c = 0; c < C; ++c) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t s = t - (K - 1) + k;  // source step; negative steps come from hist
        const float u = s < 0 ? hist[(K - 1 + s) * C + c] : x[s * C + c];
        acc += w[c * K + k] * u;
      }
      y[t * C + c] = b ? acc + b[c] : acc;
    }
  }
}

}  // namespace cachet::ops::ref
