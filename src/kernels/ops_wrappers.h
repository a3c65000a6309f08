// The public entry points of one ISA namespace, forwarding to VecOps. Included (without
// include guard) inside cachet::ops::avx2 / cachet::ops::avx512 after `using K = VecOps<...>`.

void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps, bool one_plus) {
  K::rmsnorm(x, w, y, n, eps, one_plus);
}
void layernorm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps) {
  K::layernorm(x, w, b, y, n, eps);
}
void softmax(float* x, int64_t n) {
  K::softmax(x, n);
}
void gelu(const float* x, float* y, int64_t n) {
  K::map(x, y, n, K::gelu1);
}
void gelu_tanh(const float* x, float* y, int64_t n) {
  K::map(x, y, n, K::gelu_tanh1);
}
void silu(const float* x, float* y, int64_t n) {
  K::map(x, y, n, K::silu1);
}
void softplus(const float* x, float* y, int64_t n) {
  K::map(x, y, n, K::softplus1);
}
void sigmoid(const float* x, float* y, int64_t n) {
  K::map(x, y, n, K::sigmoid1);
}
void exp(const float* x, float* y, int64_t n) {
  K::map(x, y, n, K::vexp);
}
void add(const float* a, const float* b, float* y, int64_t n) {
  K::map2(a, b, y, n, [](K::F u, K::F v) { return K::Vec::add(u, v); });
}
void mul(const float* a, const float* b, float* y, int64_t n) {
  K::map2(a, b, y, n, [](K::F u, K::F v) { return K::Vec::mul(u, v); });
}
void scale(const float* x, float s, float* y, int64_t n) {
  const K::F sv = K::Vec::set1(s);
  K::map(x, y, n, [sv](K::F u) { return K::Vec::mul(u, sv); });
}
float dot(const float* a, const float* b, int64_t n) {
  return K::dot(a, b, n);
}
void axpy(float a, const float* x, float* y, int64_t n) {
  K::axpy(a, x, y, n);
}
void softcap(const float* x, float cap, float* y, int64_t n) {
  K::softcap(x, cap, y, n);
}
void dot_rows(const float* q, const float* k, int64_t stride, int64_t count, int64_t n, float scale,
              float* out) {
  K::dot_rows(q, k, stride, count, n, scale, out);
}
void axpy_rows(const float* w, const float* v, int64_t stride, int64_t count, int64_t n, float* y) {
  K::axpy_rows(w, v, stride, count, n, y);
}
void axpy_rows_bf16(const float* w, const uint16_t* v, int64_t stride, int64_t count, int64_t n,
                    float* y) {
  K::axpy_rows_bf16(w, v, stride, count, n, y);
}
void dot_rows_i8(const float* q, const int8_t* k, const float* k_scale, int64_t stride,
                 int64_t count, int64_t n, float scale, float* out) {
  K::dot_rows_i8(q, k, k_scale, stride, count, n, scale, out);
}
void axpy_rows_i8(const float* w, const int8_t* v, const float* v_scale, int64_t stride,
                  int64_t count, int64_t n, float* y) {
  K::axpy_rows_i8(w, v, v_scale, stride, count, n, y);
}
void dot_rows_i8_x2(const float* const* q, const int8_t* const* k, const float* const* k_scale,
                    int64_t stride, int64_t count, int64_t n, float scale, float* const* out) {
  K::dot_rows_i8_n<2>(q, k, k_scale, stride, count, n, scale, out);
}
void axpy_rows_i8_x2(const float* const* w, const int8_t* const* v, const float* const* v_scale,
                     int64_t stride, int64_t count, int64_t n, float* const* y) {
  K::axpy_rows_i8_n<2>(w, v, v_scale, stride, count, n, y);
}
float quantize_i8(const float* x, int64_t n, int8_t* v) {
  return K::quantize_i8(x, n, v);
}
void conv1d_depthwise(const float* hist, const float* x, const float* w, const float* b, float* y,
                      int64_t T, int64_t C, int64_t K_) {
  if (K_ > K::kMaxTaps) return ref::conv1d_depthwise(hist, x, w, b, y, T, C, K_);
  K::conv1d_depthwise(hist, x, w, b, y, T, C, K_);
}
void dot_rows_heads(const float* q, int64_t nh, int64_t q_stride, const float* k, int64_t stride,
                    int64_t count, int64_t n, float scale, float* out, int64_t out_stride) {
  K::dot_rows_heads(q, nh, q_stride, k, stride, count, n, scale, out, out_stride);
}
void axpy_rows_heads(const float* w, int64_t nh, int64_t w_stride, const float* v, int64_t stride,
                     int64_t count, int64_t n, float* y, int64_t y_stride) {
  K::axpy_rows_heads(w, nh, w_stride, v, stride, count, n, y, y_stride);
}
void dot_rows_heads_bf16(const float* q, int64_t nh, int64_t q_stride, const uint16_t* k,
                         int64_t stride, int64_t count, int64_t n, float scale, float* out,
                         int64_t out_stride) {
  K::dot_rows_heads(q, nh, q_stride, k, stride, count, n, scale, out, out_stride);
}
void dot_rows_bf16_x2(const float* const* q, const uint16_t* const* k, int64_t stride,
                      int64_t count, int64_t n, float scale, float* const* out) {
  K::dot_rows_bf16_x2(q, k, stride, count, n, scale, out);
}
void axpy_rows_bf16_x2(const float* const* w, const uint16_t* const* v, int64_t stride,
                       int64_t count, int64_t n, float* const* y) {
  K::axpy_rows_bf16_x2(w, v, stride, count, n, y);
}
void axpy_rows_x2(const float* const* w, const float* const* v, int64_t stride, int64_t count,
                  int64_t n, float* const* y) {
  K::axpy_rows_x2(w, v, stride, count, n, y);
}
void dot_rows_bf16(const float* q, const uint16_t* k, int64_t stride, int64_t count, int64_t n,
                   float scale, float* out) {
  K::dot_rows_bf16(q, k, stride, count, n, scale, out);
}
void axpy_rows_heads_bf16(const float* w, int64_t nh, int64_t w_stride, const uint16_t* v,
                          int64_t stride, int64_t count, int64_t n, float* y, int64_t y_stride) {
  K::axpy_rows_heads(w, nh, w_stride, v, stride, count, n, y, y_stride);
}
