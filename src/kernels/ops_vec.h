// The vectorized element-wise ops, written once over a few vector primitives (the traits class
// V: Avx2Vec in ops_avx2.cpp, Avx512Vec in ops_avx512.cpp) and instantiated per ISA. Everything
// here has internal linkage, so each including file gets its own copy built for its own ISA.
//
// Transcendentals:
//   exp:   n = round(x log2 e), r = x - n ln2 (two-part ln2, fused), e^r by its degree-7 Taylor
//          polynomial (|r| <= ln2/2, truncation < 1e-8), then scaled by 2^n in two halves so
//          results down to the denormal range are right. About 1-2 ulp.
//   erf:   |z| < 1: z P(z^2) (least-squares fit of erf(z)/z, degree 6 in z^2);
//          |z| >= 1: erfc(|z|) = e^(-z^2) Q(1 / (1 + |z|/2)) (fit of erfc(z) e^(z^2) on [1, 10],
//          degree 8); z^2 is carried with its rounding error into the exponential.
//          Relative error about 3e-7.
//   log1p: on [0, 1] via 2 atanh(s), s = y / (2 + y), series to s^17.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "cachet/half.h"

namespace cachet::ops {
namespace {

template <class V>
struct VecOps {
  using Vec = V;
  using F = typename V::F;
  static constexpr int W = V::W;

  static F vexp(F x) {
    // NaN passes through: max/min return their second operand when either is NaN.
    x = V::min(V::set1(88.8f), V::max(V::set1(-104.0f), x));
    const F n = V::round(V::mul(x, V::set1(1.44269504088896341f)));
    F r = V::fnmadd(n, V::set1(0.693359375f), x);
    r = V::fnmadd(n, V::set1(-2.12194440054690583e-4f), r);
    F p = V::set1(1.0f / 5040.0f);
    p = V::fmadd(p, r, V::set1(1.0f / 720.0f));
    p = V::fmadd(p, r, V::set1(1.0f / 120.0f));
    p = V::fmadd(p, r, V::set1(1.0f / 24.0f));
    p = V::fmadd(p, r, V::set1(1.0f / 6.0f));
    p = V::fmadd(p, r, V::set1(0.5f));
    p = V::fmadd(p, r, V::set1(1.0f));
    p = V::fmadd(p, r, V::set1(1.0f));
    return V::ldexp(p, n);
  }

  // log(1 + y) for y in [0, 1].
  static F vlog1p01(F y) {
    const F s = V::div(y, V::add(V::set1(2.0f), y));
    const F s2 = V::mul(s, s);
    F q = V::set1(1.0f / 17.0f);
    q = V::fmadd(q, s2, V::set1(1.0f / 15.0f));
    q = V::fmadd(q, s2, V::set1(1.0f / 13.0f));
    q = V::fmadd(q, s2, V::set1(1.0f / 11.0f));
    q = V::fmadd(q, s2, V::set1(1.0f / 9.0f));
    q = V::fmadd(q, s2, V::set1(1.0f / 7.0f));
    q = V::fmadd(q, s2, V::set1(1.0f / 5.0f));
    q = V::fmadd(q, s2, V::set1(1.0f / 3.0f));
    q = V::mul(q, s2);
    const F s_2 = V::add(s, s);
    return V::fmadd(s_2, q, s_2);
  }

  // erf(z) / z for |z| < 1, as a polynomial in z^2.
  static F erf_small(F z2) {
    F p = V::set1(7.898209878e-05f);
    p = V::fmadd(p, z2, V::set1(-8.024353883e-04f));
    p = V::fmadd(p, z2, V::set1(5.190053489e-03f));
    p = V::fmadd(p, z2, V::set1(-2.685480937e-02f));
    p = V::fmadd(p, z2, V::set1(1.128361225e-01f));
    p = V::fmadd(p, z2, V::set1(-3.761262894e-01f));
    p = V::fmadd(p, z2, V::set1(1.128379226e+00f));
    return p;
  }

  // erfc(a) for a >= 1 (a is clamped to 12, past which erfc is 0 in f32).
  static F erfc_large(F a) {
    a = V::min(V::set1(12.0f), a);
    const F t = V::div(V::set1(1.0f), V::fmadd(V::set1(0.5f), a, V::set1(1.0f)));
    F q = V::set1(8.426839113e-02f);
    q = V::fmadd(q, t, V::set1(-1.959076673e-01f));
    q = V::fmadd(q, t, V::set1(3.993413225e-02f));
    q = V::fmadd(q, t, V::set1(9.405429661e-02f));
    q = V::fmadd(q, t, V::set1(1.632276475e-01f));
    q = V::fmadd(q, t, V::set1(2.514926195e-01f));
    q = V::fmadd(q, t, V::set1(2.812439501e-01f));
    q = V::fmadd(q, t, V::set1(2.821754217e-01f));
    q = V::fmadd(q, t, V::set1(-3.144141374e-06f));
    const F a2 = V::mul(a, a);
    const F a2_lo = V::fmsub(a, a, a2);  // a*a - a2, exactly
    const F e = vexp(V::sub(V::zero(), a2));
    return V::mul(V::fnmadd(e, a2_lo, e), q);  // e^(-a2 - a2_lo) to first order
  }

  static F gelu1(F x) {
    const F half_x = V::mul(V::set1(0.5f), x);
    const F z = V::mul(x, V::set1(0.70710678118654752440f));
    const F a = V::abs(z);
    const F z2 = V::mul(z, z);
    const F erf_s = V::mul(z, erf_small(z2));
    const F small = V::mul(half_x, V::add(V::set1(1.0f), erf_s));
    const F ec = erfc_large(a);
    // z >= 1: 1 + erf(z) = 2 - erfc(z); z <= -1: 1 + erf(z) = erfc(-z).
    const F large = V::mul(half_x, V::select(V::lt(z, V::zero()), ec, V::sub(V::set1(2.0f), ec)));
    return V::select(V::lt(a, V::set1(1.0f)), small, large);
  }

  static F gelu_tanh1(F x) {
    // 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u)); u formed in the reference's order.
    const F u = V::mul(V::set1(0.79788456080286535588f),
                       V::add(x, V::mul(V::mul(V::mul(V::set1(0.044715f), x), x), x)));
    const F e = vexp(V::mul(V::set1(-2.0f), u));
    return V::div(x, V::add(V::set1(1.0f), e));
  }

  // cap * tanh(x / cap), tanh(u) = sign(u) (1 - e) / (1 + e) with e = e^(-2|u|): within a few
  // 1e-7 of tanh (absolute), and exactly +-1 where e underflows.
  static void softcap(const float* x, float cap, float* y, int64_t n) {
    const F c = V::set1(cap), ic = V::set1(1.0f / cap), one = V::set1(1.0f);
    map(x, y, n, [&](F v) {
      const F u = V::mul(v, ic);
      const F e = vexp(V::mul(V::set1(-2.0f), V::abs(u)));
      const F t = V::mul(c, V::div(V::sub(one, e), V::add(one, e)));
      return V::select(V::lt(u, V::zero()), V::sub(V::zero(), t), t);
    });
  }

  static F sigmoid1(F x) {
    return V::div(V::set1(1.0f), V::add(V::set1(1.0f), vexp(V::sub(V::zero(), x))));
  }
  static F silu1(F x) { return V::div(x, V::add(V::set1(1.0f), vexp(V::sub(V::zero(), x)))); }

  static F softplus1(F x) {
    // log(1 + e^x) = max(x, 0) + log1p(e^-|x|); x > 20 gives x.
    const F l = vlog1p01(vexp(V::sub(V::zero(), V::abs(x))));
    const F y = V::add(V::max(x, V::zero()), l);
    return V::select(V::gt(x, V::set1(20.0f)), x, y);
  }

  template <class Fn>
  static void map(const float* x, float* y, int64_t n, Fn f) {
    int64_t i = 0;
    for (; i + W <= n; i += W) V::store(y + i, f(V::load(x + i)));
    if (i < n) {
      const int r = static_cast<int>(n - i);
      V::store_n(y + i, f(V::load_n(x + i, r)), r);
    }
  }

  template <class Fn>
  static void map2(const float* a, const float* b, float* y, int64_t n, Fn f) {
    int64_t i = 0;
    for (; i + W <= n; i += W) V::store(y + i, f(V::load(a + i), V::load(b + i)));
    if (i < n) {
      const int r = static_cast<int>(n - i);
      V::store_n(y + i, f(V::load_n(a + i, r), V::load_n(b + i, r)), r);
    }
  }

  // sum of f(x[i]) over i, f32 in 4 x W partial sums. Tail lanes load as 0; f(0) must be 0.
  template <class Fn>
  static float reduce_sum(const float* x, int64_t n, Fn f) {
    F s0 = V::zero(), s1 = V::zero(), s2 = V::zero(), s3 = V::zero();
    int64_t i = 0;
    for (; i + 4 * W <= n; i += 4 * W) {
      s0 = V::add(s0, f(V::load(x + i)));
      s1 = V::add(s1, f(V::load(x + i + W)));
      s2 = V::add(s2, f(V::load(x + i + 2 * W)));
      s3 = V::add(s3, f(V::load(x + i + 3 * W)));
    }
    for (; i + W <= n; i += W) s0 = V::add(s0, f(V::load(x + i)));
    if (i < n) s1 = V::add(s1, f(V::load_n(x + i, static_cast<int>(n - i))));
    return V::hsum(V::add(V::add(s0, s1), V::add(s2, s3)));
  }

  static void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps,
                      bool one_plus) {
    const float ss = reduce_sum(x, n, [](F v) { return V::mul(v, v); });
    const float mean = n > 0 ? ss / static_cast<float>(n) : 0.0f;
    const F inv = V::set1(1.0f / std::sqrt(mean + eps));
    if (!w) {
      map(x, y, n, [&](F v) { return V::mul(v, inv); });
    } else if (one_plus) {
      map2(x, w, y, n, [&](F v, F g) { return V::mul(V::mul(v, inv), V::add(V::set1(1.0f), g)); });
    } else {
      map2(x, w, y, n, [&](F v, F g) { return V::mul(V::mul(v, inv), g); });
    }
  }

  static void layernorm(const float* x, const float* w, const float* b, float* y, int64_t n,
                        float eps) {
    if (n <= 0) return;
    const float mean = reduce_sum(x, n, [](F v) { return v; }) / static_cast<float>(n);
    const F m = V::set1(mean);
    int64_t i = 0;
    F acc = V::zero();
    for (; i + W <= n; i += W) {
      const F d = V::sub(V::load(x + i), m);
      acc = V::fmadd(d, d, acc);
    }
    if (i < n) {
      const int r = static_cast<int>(n - i);
      const F d = V::sub(V::load_n(x + i, r), m);
      acc = V::fmadd(V::mask_n(d, r), d, acc);
    }
    const float var = V::hsum(acc) / static_cast<float>(n);
    const F inv = V::set1(1.0f / std::sqrt(var + eps));
    for (i = 0; i + W <= n; i += W) {
      F t = V::mul(V::sub(V::load(x + i), m), inv);
      if (w) t = V::mul(t, V::load(w + i));
      if (b) t = V::add(t, V::load(b + i));
      V::store(y + i, t);
    }
    if (i < n) {
      const int r = static_cast<int>(n - i);
      F t = V::mul(V::sub(V::load_n(x + i, r), m), inv);
      if (w) t = V::mul(t, V::load_n(w + i, r));
      if (b) t = V::add(t, V::load_n(b + i, r));
      V::store_n(y + i, t, r);
    }
  }

  static void softmax(float* x, int64_t n) {
    if (n <= 0) return;
    const float ninf = -std::numeric_limits<float>::infinity();
    F mx = V::set1(ninf);
    int64_t i = 0;
    for (; i + W <= n; i += W) mx = V::max(mx, V::load(x + i));
    if (i < n) mx = V::max(mx, V::load_n_fill(x + i, static_cast<int>(n - i), ninf));
    const float m = V::hmax(mx);
    if (m == ninf) {
      for (i = 0; i < n; ++i) x[i] = 0.0f;
      return;
    }
    const F mv = V::set1(m);
    F s0 = V::zero(), s1 = V::zero();
    for (i = 0; i + W <= n; i += W) {
      const F e = vexp(V::sub(V::load(x + i), mv));
      V::store(x + i, e);
      s0 = V::add(s0, e);
    }
    if (i < n) {
      const int r = static_cast<int>(n - i);
      const F e = V::mask_n(vexp(V::sub(V::load_n(x + i, r), mv)), r);
      V::store_n(x + i, e, r);
      s1 = V::add(s1, e);
    }
    const F inv = V::set1(1.0f / V::hsum(V::add(s0, s1)));
    map(x, x, n, [&](F v) { return V::mul(v, inv); });
  }

  static float dot(const float* a, const float* b, int64_t n) {
    F s0 = V::zero(), s1 = V::zero(), s2 = V::zero(), s3 = V::zero();
    int64_t i = 0;
    for (; i + 4 * W <= n; i += 4 * W) {
      s0 = V::fmadd(V::load(a + i), V::load(b + i), s0);
      s1 = V::fmadd(V::load(a + i + W), V::load(b + i + W), s1);
      s2 = V::fmadd(V::load(a + i + 2 * W), V::load(b + i + 2 * W), s2);
      s3 = V::fmadd(V::load(a + i + 3 * W), V::load(b + i + 3 * W), s3);
    }
    for (; i + W <= n; i += W) s0 = V::fmadd(V::load(a + i), V::load(b + i), s0);
    if (i < n) {
      const int r = static_cast<int>(n - i);
      s1 = V::fmadd(V::load_n(a + i, r), V::load_n(b + i, r), s1);
    }
    return V::hsum(V::add(V::add(s0, s1), V::add(s2, s3)));
  }

  static void axpy(float a, const float* x, float* y, int64_t n) {
    const F av = V::set1(a);
    map2(x, y, y, n, [&](F xv, F yv) { return V::fmadd(av, xv, yv); });
  }

  // Attention over a cache of rows `stride` floats apart: each row is a short run, a whole
  // cache row from the next, which the hardware prefetcher does not follow, so the rows
  // kRowsAhead on are asked for. Both give exactly what the loops of dot / axpy give.
  static constexpr int64_t kRowsAhead = 8;
  // Int8 rows (128 bytes at MetaVoice's head size) are asked for further on: the scores 24 rows,
  // the weighted sum 32. Two heads' keys then values from memory, 2 threads (a program linking
  // the library, not kept): the weighted sum at 32 rows gave 51.8-52.9 GB/s against 50.5-51.3
  // at 8 for 1 024 positions, 31.8-33.0 against 29.6-31.0 for 80.
  static constexpr int64_t kI8RowsAhead = 24;
  static constexpr int64_t kI8AxpyAhead = 32;
  static void prefetch_run(const float* p, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) __builtin_prefetch(p + i);
  }
  static void dot_rows(const float* q, const float* k, int64_t stride, int64_t count, int64_t n,
                       float scale, float* out) {
    for (int64_t j = 0; j < count; ++j) {
      if (j + kRowsAhead < count) prefetch_run(k + (j + kRowsAhead) * stride, n);
      out[j] = dot(q, k + j * stride, n) * scale;
    }
  }
  // y += w[j] * v[j * stride] for j = 0, 1, ... in order; y is kept in registers, a tile of
  // columns at a time. The rows are f32, or bf16 (a bf16 cache) widened to f32 as they are loaded:
  // exactly what the f32 version gives on the widened rows.
  static F load_row(const float* p) { return V::load(p); }
  static F load_row(const uint16_t* p) { return V::load_bf16(p); }
  // Columns [c, c + U W) of axpy_rows_n, y kept in U registers per stream.
  template <int U, int NV, typename T>
  static void axpy_rows_tile(const float* const* wn, const T* const* vn, int64_t stride,
                             int64_t count, int64_t c, float* const* yn) {
    constexpr int64_t kFloatsPerRun = U * W * static_cast<int64_t>(sizeof(T)) / 4;
    // bf16 rows where V reads them as even and odd positions (acc[2u], acc[2u + 1]: the even
    // and odd values of y's u-th 2W): one load and one instruction per W values instead of a
    // widening load and a shift. Each y[i] takes the same fused multiply-adds in the same
    // order either way, so the outputs are the same.
    constexpr bool kPairs = std::is_same_v<T, uint16_t> && requires(const uint16_t* p, F a) {
      V::load_bf16_pairs(p, a, a);
    };
    F acc[NV][U];
    for (int a = 0; a < NV; ++a)
      for (int u = 0; u < U; ++u) {
        if constexpr (kPairs) {
          if (u % 2 == 0) V::load_pairs(yn[a] + c + u * W, acc[a][u], acc[a][u + 1]);
        } else {
          acc[a][u] = V::load(yn[a] + c + u * W);
        }
      }
    for (int64_t j = 0; j < count; ++j) {
      for (int a = 0; a < NV; ++a) {
        const T* v = vn[a];
        if (j + kRowsAhead < count)
          prefetch_run(reinterpret_cast<const float*>(v + (j + kRowsAhead) * stride + c),
                       kFloatsPerRun);
        const F wv = V::set1(wn[a][j]);
        const T* vr = v + j * stride + c;
        if constexpr (kPairs) {
          for (int u = 0; u < U; u += 2) {
            F ve, vo;
            V::load_bf16_pairs(vr + u * W, ve, vo);
            acc[a][u] = V::fmadd(wv, ve, acc[a][u]);
            acc[a][u + 1] = V::fmadd(wv, vo, acc[a][u + 1]);
          }
        } else {
          for (int u = 0; u < U; ++u) acc[a][u] = V::fmadd(wv, load_row(vr + u * W), acc[a][u]);
        }
      }
    }
    for (int a = 0; a < NV; ++a)
      for (int u = 0; u < U; ++u) {
        if constexpr (kPairs) {
          if (u % 2 == 0) V::store_pairs(yn[a] + c + u * W, acc[a][u], acc[a][u + 1]);
        } else {
          V::store(yn[a] + c + u * W, acc[a][u]);
        }
      }
  }
  // NV weight vectors over their own NV blocks of rows (the same count), in one pass: NV
  // streams at once, each y exactly what it gets alone. Columns go U vectors at a time: 16 for
  // one f32 stream with 32 registers (a row of 256 columns, as RecurrentGemma's gates, in one
  // pass: a contiguous stream), else 8; then 8, then the tail.
  template <int NV, typename T>
  static void axpy_rows_n(const float* const* wn, const T* const* vn, int64_t stride, int64_t count,
                          int64_t n, float* const* yn) {
    int64_t c = 0;
    if constexpr (NV == 1 && W == 16 && std::is_same_v<T, float>)
      for (; c + 16 * W <= n; c += 16 * W) axpy_rows_tile<16, NV>(wn, vn, stride, count, c, yn);
    for (; c + 8 * W <= n; c += 8 * W) axpy_rows_tile<8, NV>(wn, vn, stride, count, c, yn);
    if (c == n) return;
    for (int a = 0; a < NV; ++a)
      for (int64_t j = 0; j < count; ++j) {
        if constexpr (std::is_same_v<T, float>) {
          axpy(wn[a][j], vn[a] + j * stride + c, yn[a] + c, n - c);
        } else {
          float tail[8 * W];
          for (int64_t i = c; i < n; ++i) tail[i - c] = bf16_to_f32(vn[a][j * stride + i]);
          axpy(wn[a][j], tail, yn[a] + c, n - c);
        }
      }
  }
  template <typename T>
  static void axpy_rows_of(const float* w, const T* v, int64_t stride, int64_t count, int64_t n,
                           float* y) {
    axpy_rows_n<1>(&w, &v, stride, count, n, &y);
  }
  static void axpy_rows(const float* w, const float* v, int64_t stride, int64_t count, int64_t n,
                        float* y) {
    axpy_rows_of(w, v, stride, count, n, y);
  }
  static void axpy_rows_bf16(const float* w, const uint16_t* v, int64_t stride, int64_t count,
                             int64_t n, float* y) {
    axpy_rows_of(w, v, stride, count, n, y);
  }

  // x rounded to integers in [-limit, limit] at scale max|x| / limit (T: int8_t for limit 127,
  // int16_t for 32767): the same divisions and roundings (to nearest, ties to even) as the
  // reference, W values at a time. Returns the scale; where that would be 0 (x all zero, or
  // too small for a scale), returns 0 with every value 0.
  template <typename T>
  static float round_to_scale(const float* x, int64_t n, float limit, T* out) {
    F m = V::zero();
    int64_t i = 0;
    for (; i + W <= n; i += W) m = V::max(m, V::abs(V::load(x + i)));
    float mx = V::hmax(m);
    for (; i < n; ++i) mx = std::max(mx, std::fabs(x[i]));
    const float s = mx > 0.0f ? mx / limit : 0.0f;
    if (!(s > 0.0f)) {
      std::fill(out, out + n, T{0});
      return 0.0f;
    }
    const F sv = V::set1(s), hi = V::set1(limit), lo = V::set1(-limit);
    for (i = 0; i + W <= n; i += W) {
      const F r = V::min(V::max(V::round(V::div(V::load(x + i), sv)), lo), hi);
      if constexpr (sizeof(T) == 1)
        V::store_i8(out + i, r);
      else
        V::store_i16(out + i, r);
    }
    for (; i < n; ++i)
      out[i] = static_cast<T>(std::fmin(std::fmax(std::nearbyint(x[i] / s), -limit), limit));
    return s;
  }
  // ops::quantize_i8.
  static float quantize_i8(const float* x, int64_t n, int8_t* v) {
    return round_to_scale(x, n, 127.0f, v);
  }
  // Rows of int8 with a scale each (ops.h): the scores as exact integer dot products against q
  // rounded to 16 bits, kI16 products per vector instruction pair; the weighted sum widening each
  // row to f32, y kept in registers a tile of 8 W columns at a time. NV heads over their own
  // blocks of rows (the same count) are read side by side: NV streams from memory at once.
  // One row's integer dot product with q16 over the first nv (a multiple of kI16) values.
  // kNv > 0: nv is that compile-time count (a head size), and the loop is unrolled.
  template <int64_t kNv = 0>
  static typename V::I dot_row_i16(const int8_t* r, const int16_t* q16, int64_t nv) {
    constexpr int64_t L = V::kI16;
    if constexpr (kNv > 0) nv = kNv;
    typename V::I a0 = V::izero(), a1 = V::izero();
    int64_t i = 0;
    for (; i + 2 * L <= nv; i += 2 * L) {
      a0 = V::madd_i16(a0, V::widen_i8_i16(r + i), V::load_i16(q16 + i));
      a1 = V::madd_i16(a1, V::widen_i8_i16(r + i + L), V::load_i16(q16 + i + L));
    }
    if (i < nv) a0 = V::madd_i16(a0, V::widen_i8_i16(r + i), V::load_i16(q16 + i));
    return V::add_i32(a0, a1);
  }
  // For row r, the j-th of count in an int8 block: prefetch_i8_row asks for n bytes of the row
  // kAhead after it; dot_row_rest sums its products with q16 past the first nv values (what
  // dot_row_i16 leaves).
  template <int64_t kAhead = kI8RowsAhead>
  static void prefetch_i8_row(const int8_t* r, int64_t j, int64_t count, int64_t stride,
                              int64_t n) {
    if (j + kAhead < count)
      for (int64_t b = 0; b < n; b += 64) __builtin_prefetch(r + kAhead * stride + b);
  }
  static int32_t dot_row_rest(const int8_t* r, const int16_t* q16, int64_t nv, int64_t n) {
    int32_t sum = 0;
    for (int64_t i = nv; i < n; ++i) sum += int32_t{q16[i]} * r[i];
    return sum;
  }
  // The rows go W at a time: W rows' lane sums reduced together into one vector (integer sums:
  // the same whatever the order), then scaled as the reference scales them, W at a time; up to
  // the last whole W (returned). kN > 0: n == kN, known when compiled.
  template <int NV, int64_t kN>
  static int64_t dot_rows_i8_blocks(const int16_t (*q16)[kMaxI8Row], const float* c,
                                    const int8_t* const* k, const float* const* ks, int64_t stride,
                                    int64_t count, int64_t n, float* const* out) {
    if constexpr (kN > 0) n = kN;
    constexpr int64_t kNv = kN / V::kI16 * V::kI16;
    const int64_t nv = n / V::kI16 * V::kI16;
    int64_t j0 = 0;
    for (; j0 + W <= count; j0 += W)
      for (int a = 0; a < NV; ++a) {
        typename V::I acc[W];
        alignas(64) int32_t rest[W] = {};
        for (int u = 0; u < W; ++u) {
          const int8_t* r = k[a] + (j0 + u) * stride;
          prefetch_i8_row(r, j0 + u, count, stride, n);
          acc[u] = dot_row_i16<kNv>(r, q16[a], nv);
          if constexpr (kN == 0 || kNv < kN) rest[u] = dot_row_rest(r, q16[a], nv, n);
        }
        typename V::I sum = V::hsum_rows_i32(acc);
        if (nv < n) sum = V::add_i32(sum, V::load_i32(rest));
        V::store(out[a] + j0, V::mul(V::cvt_i32(sum), V::mul(V::load(ks[a] + j0), V::set1(c[a]))));
      }
    return j0;
  }
  // ops::dot_rows_i8 for NV heads side by side: whole blocks of W rows, then the rest one at a
  // time.
  template <int NV>
  static void dot_rows_i8_n(const float* const* q, const int8_t* const* k, const float* const* ks,
                            int64_t stride, int64_t count, int64_t n, float scale,
                            float* const* out) {
    alignas(64) int16_t q16[NV][kMaxI8Row];
    float c[NV];
    for (int a = 0; a < NV; ++a) c[a] = round_to_scale(q[a], n, 32767.0f, q16[a]) * scale;
    // Head sizes of the models here (128, 256) with the row loop unrolled; any other size as
    // it comes. The same integers either way.
    int64_t j0;
    if (n == 128)
      j0 = dot_rows_i8_blocks<NV, 128>(q16, c, k, ks, stride, count, n, out);
    else if (n == 256)
      j0 = dot_rows_i8_blocks<NV, 256>(q16, c, k, ks, stride, count, n, out);
    else
      j0 = dot_rows_i8_blocks<NV, 0>(q16, c, k, ks, stride, count, n, out);
    const int64_t nv = n / V::kI16 * V::kI16;
    for (int64_t j = j0; j < count; ++j)
      for (int a = 0; a < NV; ++a) {
        const int8_t* r = k[a] + j * stride;
        prefetch_i8_row(r, j, count, stride, n);
        const int32_t sum =
            V::hsum_i32(dot_row_i16(r, q16[a], nv)) + dot_row_rest(r, q16[a], nv, n);
        out[a][j] = static_cast<float>(sum) * (ks[a][j] * c[a]);
      }
  }
  template <int U, int NV>
  static void axpy_rows_i8_tile(const float* const* w, const int8_t* const* v,
                                const float* const* vs, int64_t stride, int64_t count, int64_t c0,
                                float* const* y) {
    F acc[NV][U];
    for (int a = 0; a < NV; ++a)
      for (int u = 0; u < U; ++u) acc[a][u] = V::load(y[a] + c0 + u * W);
    for (int64_t j = 0; j < count; ++j)
      for (int a = 0; a < NV; ++a) {
        const int8_t* r = v[a] + j * stride + c0;
        prefetch_i8_row<kI8AxpyAhead>(r, j, count, stride, U * W);
        const F cv = V::set1(w[a][j] * vs[a][j]);
        for (int u = 0; u < U; ++u) acc[a][u] = V::fmadd(cv, V::load_i8(r + u * W), acc[a][u]);
      }
    for (int a = 0; a < NV; ++a)
      for (int u = 0; u < U; ++u) V::store(y[a] + c0 + u * W, acc[a][u]);
  }
  template <int NV>
  static void axpy_rows_i8_n(const float* const* w, const int8_t* const* v, const float* const* vs,
                             int64_t stride, int64_t count, int64_t n, float* const* y) {
    constexpr int kU = NV == 1 || W == 16 ? 8 : 4;  // NV * kU accumulators fit the registers
    int64_t c0 = 0;
    for (; c0 + kU * W <= n; c0 += kU * W)
      axpy_rows_i8_tile<kU, NV>(w, v, vs, stride, count, c0, y);
    for (; c0 + W <= n; c0 += W) axpy_rows_i8_tile<1, NV>(w, v, vs, stride, count, c0, y);
    if (c0 == n) return;
    for (int a = 0; a < NV; ++a)
      for (int64_t j = 0; j < count; ++j) {
        const float cv = w[a][j] * vs[a][j];
        for (int64_t i = c0; i < n; ++i)
          y[a][i] = std::fma(cv, static_cast<float>(v[a][j * stride + i]), y[a][i]);
      }
  }
  static void dot_rows_i8(const float* q, const int8_t* k, const float* ks, int64_t stride,
                          int64_t count, int64_t n, float scale, float* out) {
    dot_rows_i8_n<1>(&q, &k, &ks, stride, count, n, scale, &out);
  }
  static void axpy_rows_i8(const float* w, const int8_t* v, const float* vs, int64_t stride,
                           int64_t count, int64_t n, float* y) {
    axpy_rows_i8_n<1>(&w, &v, &vs, stride, count, n, &y);
  }

  // dot_rows and axpy_rows for several heads over the same rows (multi-query attention): the
  // heads are taken kHeads at a time, so each key or value row is loaded once for all of them.
  // Each value is exactly what dot_rows / axpy_rows give for that head alone: the same sums in
  // the same order. kHeads heads and their accumulators fit the registers (16 on AVX2, 32 on
  // AVX-512) beside one row's four vectors. The rows are f32, or bf16 widened as they are
  // loaded (exactly the f32 results on the widened rows).
  static constexpr int kHeads = W == 16 ? 6 : 2;
  static F load_row_n(const float* p, int r) { return V::load_n(p, r); }
  static F load_row_n(const uint16_t* p, int r) {
    alignas(64) float t[W] = {};
    for (int l = 0; l < r; ++l) t[l] = bf16_to_f32(p[l]);
    return V::load(t);
  }
  // Rows j + kRowsAhead below `ahead` are asked for (rows past count may be the caller's next
  // tile). 32 rows ahead was slower: a RecurrentGemma-2B Q4_K decoding step's scores over a
  // full window of 2 049 keys took 96-97 us a layer against 85-89 (timers around the pass, not
  // kept).
  template <int HB, typename T>
  static void dot_rows_block(const float* q, int64_t q_stride, const T* k, int64_t stride,
                             int64_t count, int64_t n, float scale, float* out, int64_t out_stride,
                             int64_t ahead) {
    const int64_t run_floats = (n * static_cast<int64_t>(sizeof(T)) + 3) / 4;
    for (int64_t j = 0; j < count; ++j) {
      if (j + kRowsAhead < ahead)
        prefetch_run(reinterpret_cast<const float*>(k + (j + kRowsAhead) * stride), run_floats);
      const T* kr = k + j * stride;
      F s[HB][4];
      for (int h = 0; h < HB; ++h) s[h][0] = s[h][1] = s[h][2] = s[h][3] = V::zero();
      int64_t i = 0;
      for (; i + 4 * W <= n; i += 4 * W) {
        F kv[4];
        for (int u = 0; u < 4; ++u) kv[u] = load_row(kr + i + u * W);
        for (int h = 0; h < HB; ++h)
          for (int u = 0; u < 4; ++u)
            s[h][u] = V::fmadd(V::load(q + h * q_stride + i + u * W), kv[u], s[h][u]);
      }
      for (; i + W <= n; i += W) {
        const F kv = load_row(kr + i);
        for (int h = 0; h < HB; ++h) s[h][0] = V::fmadd(V::load(q + h * q_stride + i), kv, s[h][0]);
      }
      if (i < n) {
        const int r = static_cast<int>(n - i);
        const F kv = load_row_n(kr + i, r);
        for (int h = 0; h < HB; ++h)
          s[h][1] = V::fmadd(V::load_n(q + h * q_stride + i, r), kv, s[h][1]);
      }
      for (int h = 0; h < HB; ++h)
        out[h * out_stride + j] =
            V::hsum(V::add(V::add(s[h][0], s[h][1]), V::add(s[h][2], s[h][3]))) * scale;
    }
  }
  // Rows go in tiles of kTileRows (32 KiB of f32 at 256 columns), so the passes over a tile's
  // columns, and the blocks of heads after the first, find it in the nearest cache.
  static constexpr int64_t kTileRows = 32;
  // One tile: count (at most kTileRows) value rows. With `ahead` > 0, the columns [0, n) of the
  // rows kTileRows on, below `ahead`, are asked for as the first columns' pass goes (the
  // caller's next tile).
  template <int HB, typename T>
  static void axpy_rows_block(const float* w, int64_t w_stride, const T* v, int64_t stride,
                              int64_t count, int64_t n, float* y, int64_t y_stride, int64_t ahead) {
    const int64_t run_floats = (n * static_cast<int64_t>(sizeof(T)) + 3) / 4;
    int64_t c = 0;
    for (; c + 4 * W <= n; c += 4 * W) {
      F acc[HB][4];
      for (int h = 0; h < HB; ++h)
        for (int u = 0; u < 4; ++u) acc[h][u] = V::load(y + h * y_stride + c + u * W);
      for (int64_t j = 0; j < count; ++j) {
        if (c == 0 && j + kTileRows < ahead)
          prefetch_run(reinterpret_cast<const float*>(v + (j + kTileRows) * stride), run_floats);
        const T* vr = v + j * stride + c;
        F vv[4];
        for (int u = 0; u < 4; ++u) vv[u] = load_row(vr + u * W);
        for (int h = 0; h < HB; ++h) {
          const F wv = V::set1(w[h * w_stride + j]);
          for (int u = 0; u < 4; ++u) acc[h][u] = V::fmadd(wv, vv[u], acc[h][u]);
        }
      }
      for (int h = 0; h < HB; ++h)
        for (int u = 0; u < 4; ++u) V::store(y + h * y_stride + c + u * W, acc[h][u]);
    }
    if (c < n) {
      alignas(64) float tail[4 * W];
      for (int64_t j = 0; j < count; ++j) {
        const T* vr = v + j * stride + c;
        const float* row;
        if constexpr (std::is_same_v<T, float>) {
          row = vr;
        } else {
          for (int64_t i = 0; i < n - c; ++i) tail[i] = bf16_to_f32(vr[i]);
          row = tail;
        }
        for (int h = 0; h < HB; ++h) axpy(w[h * w_stride + j], row, y + h * y_stride + c, n - c);
      }
    }
  }
  // fn.template operator()<hb>(h0) for blocks of at most kHeads heads covering [0, nh).
  template <typename Fn>
  static void by_head_blocks(int64_t nh, Fn&& fn) {
    for (int64_t h0 = 0; h0 < nh;) {
      const int64_t hb = nh - h0 < kHeads ? nh - h0 : kHeads;
      [&]<int... I>(std::integer_sequence<int, I...>) {
        ((hb == I + 1 ? (fn.template operator()<I + 1>(h0), 0) : 0), ...);
      }
      (std::make_integer_sequence<int, kHeads>{});
      h0 += hb;
    }
  }
  // NQ queries over their own blocks of bf16 key rows (the same count), in one pass: NQ
  // streams at once, each output exactly what it gets alone. Where V reads 2W bf16 values as
  // their even and odd values (load_bf16_pairs), q is split the same way once per call, and
  // each row piece of 2W values takes one load, two instructions and two FMAs
  // (dot_rows_block: two widening loads, two shifts, two FMAs). Rows longer than kMaxSplit,
  // and ISAs without pairs, take dot_rows_block.
  static constexpr int64_t kMaxSplit = 1024;
  template <int NQ>
  static void dot_rows_bf16_n(const float* const* qn, const uint16_t* const* kn, int64_t stride,
                              int64_t count, int64_t n, float scale, float* const* outn) {
    constexpr bool kPairs = requires(const uint16_t* p, F a) {
      V::load_bf16_pairs(p, a, a);
    };
    const int64_t n2 = n / (2 * W) * (2 * W);
    if constexpr (kPairs) {
      if (n2 > 0 && n <= kMaxSplit) {
        alignas(64) float qs[NQ][kMaxSplit];  // per 2W columns: the even values, then the odd
        for (int a = 0; a < NQ; ++a)
          for (int64_t i = 0; i < n2; i += 2 * W) {
            F e, o;
            V::load_pairs(qn[a] + i, e, o);
            V::store(qs[a] + i, e);
            V::store(qs[a] + i + W, o);
          }
        const int64_t run_floats = (n + 1) / 2;
        for (int64_t j = 0; j < count; ++j)
          for (int a = 0; a < NQ; ++a) {
            if (j + kRowsAhead < count)
              prefetch_run(reinterpret_cast<const float*>(kn[a] + (j + kRowsAhead) * stride),
                           run_floats);
            const uint16_t* kr = kn[a] + j * stride;
            const float* qa = qs[a];
            F s0 = V::zero(), s1 = V::zero(), s2 = V::zero(), s3 = V::zero();
            int64_t i = 0;
            for (; i + 4 * W <= n2; i += 4 * W) {
              F e0, o0, e1, o1;
              V::load_bf16_pairs(kr + i, e0, o0);
              V::load_bf16_pairs(kr + i + 2 * W, e1, o1);
              s0 = V::fmadd(V::load(qa + i), e0, s0);
              s1 = V::fmadd(V::load(qa + i + W), o0, s1);
              s2 = V::fmadd(V::load(qa + i + 2 * W), e1, s2);
              s3 = V::fmadd(V::load(qa + i + 3 * W), o1, s3);
            }
            if (i < n2) {
              F e0, o0;
              V::load_bf16_pairs(kr + i, e0, o0);
              s0 = V::fmadd(V::load(qa + i), e0, s0);
              s1 = V::fmadd(V::load(qa + i + W), o0, s1);
            }
            float t = V::hsum(V::add(V::add(s0, s1), V::add(s2, s3)));
            for (int64_t c = n2; c < n; ++c) t += qn[a][c] * bf16_to_f32(kr[c]);
            outn[a][j] = t * scale;
          }
        return;
      }
    }
    for (int a = 0; a < NQ; ++a)
      dot_rows_block<1>(qn[a], n, kn[a], stride, count, n, scale, outn[a], count, count);
  }
  static void dot_rows_bf16(const float* q, const uint16_t* k, int64_t stride, int64_t count,
                            int64_t n, float scale, float* out) {
    dot_rows_bf16_n<1>(&q, &k, stride, count, n, scale, &out);
  }
  // Two heads' attention over their own bf16 rows: scores, then (after the caller's softmax)
  // the weighted values, each head exactly as dot_rows_bf16 / axpy_rows_bf16 give it alone.
  static void dot_rows_bf16_x2(const float* const* q, const uint16_t* const* k, int64_t stride,
                               int64_t count, int64_t n, float scale, float* const* out) {
    dot_rows_bf16_n<2>(q, k, stride, count, n, scale, out);
  }
  static void axpy_rows_bf16_x2(const float* const* w, const uint16_t* const* v, int64_t stride,
                                int64_t count, int64_t n, float* const* y) {
    axpy_rows_n<2>(w, v, stride, count, n, y);
  }
  static void axpy_rows_x2(const float* const* w, const float* const* v, int64_t stride,
                           int64_t count, int64_t n, float* const* y) {
    axpy_rows_n<2>(w, v, stride, count, n, y);
  }
  // fn.template operator()<hb>(h0, j0, rows, ahead) for each tile of kTileRows rows [j0, j0 +
  // rows) of [0, count) and, within it, each block of heads (by_head_blocks): every block over a
  // tile before the next tile, so that a row comes from memory once and from the nearest cache
  // for the other blocks. ahead is count - j0 for the first block, which asks for the rows
  // ahead, and 0 for the others.
  template <typename Fn>
  static void by_tiles_and_head_blocks(int64_t count, int64_t nh, Fn&& fn) {
    for (int64_t j0 = 0; j0 < count; j0 += kTileRows) {
      const int64_t rows = count - j0 < kTileRows ? count - j0 : kTileRows;
      by_head_blocks(nh, [&]<int HB>(int64_t h0) {
        fn.template operator()<HB>(h0, j0, rows, h0 == 0 ? count - j0 : 0);
      });
    }
  }
  // Each output takes the same operations in the same order as with the blocks of heads
  // outermost, so the values do not depend on the tiling.
  template <typename T>
  static void dot_rows_heads(const float* q, int64_t nh, int64_t q_stride, const T* k,
                             int64_t stride, int64_t count, int64_t n, float scale, float* out,
                             int64_t out_stride) {
    by_tiles_and_head_blocks(
        count, nh, [&]<int HB>(int64_t h0, int64_t j0, int64_t rows, int64_t ahead) {
          dot_rows_block<HB>(q + h0 * q_stride, q_stride, k + j0 * stride, stride, rows, n, scale,
                             out + h0 * out_stride + j0, out_stride, ahead);
        });
  }
  template <typename T>
  static void axpy_rows_heads(const float* w, int64_t nh, int64_t w_stride, const T* v,
                              int64_t stride, int64_t count, int64_t n, float* y,
                              int64_t y_stride) {
    by_tiles_and_head_blocks(
        count, nh, [&]<int HB>(int64_t h0, int64_t j0, int64_t rows, int64_t ahead) {
          axpy_rows_block<HB>(w + h0 * w_stride + j0, w_stride, v + j0 * stride, stride, rows, n,
                              y + h0 * y_stride, y_stride, ahead);
        });
  }

  // K at most kMaxTaps (callers check).
  static constexpr int64_t kMaxTaps = 16;
  static void conv1d_depthwise(const float* hist, const float* x, const float* w, const float* b,
                               float* y, int64_t T, int64_t C, int64_t K) {
    F wk[kMaxTaps];
    for (int64_t c = 0; c < C; c += W) {
      const int r = C - c >= W ? W : static_cast<int>(C - c);
      for (int64_t k = 0; k < K; ++k) {
        // Tap k of W channels, K apart: one gather. RecurrentGemma-2B's 2 560 channels of 4
        // taps took 2.5 us a step against 5.6 with the scalar copy below (8.6 against 10.5
        // from memory; an ad-hoc loop, one thread).
        if (r == W) {
          wk[k] = V::load_strided(w + c * K + k, static_cast<int>(K));
          continue;
        }
        alignas(64) float tmp[W] = {};
        for (int l = 0; l < r; ++l) tmp[l] = w[(c + l) * K + k];
        wk[k] = V::load(tmp);
      }
      const F bias = b ? V::load_n(b + c, r) : V::zero();
      for (int64_t t = 0; t < T; ++t) {
        F acc = V::zero();
        for (int64_t k = 0; k < K; ++k) {
          const int64_t s = t - (K - 1) + k;
          const float* src = s < 0 ? hist + (K - 1 + s) * C : x + s * C;
          acc = V::fmadd(wk[k], V::load_n(src + c, r), acc);
        }
        if (b) acc = V::add(acc, bias);
        V::store_n(y + t * C + c, acc, r);
      }
    }
  }
};

}  // namespace
}  // namespace cachet::ops
