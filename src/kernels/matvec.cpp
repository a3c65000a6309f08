// Matrix-vector product: validation, the scalar reference and dispatch to the SIMD kernels.
//
// The scalar reference dequantizes one row at a time (dequantize_row) and forms the dot product
// with the exact f32 x, accumulating in double in index order. The SIMD kernels (AVX2, AVX-512)
// quantize x once per call to 8-bit blocks for the quantized weight types and use integer dot
// products with per-block f32 scales, like ggml. Rows are split over the pool in fixed chunks;
// each y[r] is computed by one thread with the same operations whatever the thread count.
#include <algorithm>
#include <cstring>
#include <vector>

#include "cachet/error.h"
#include "cachet/half.h"
#include "cachet/kernels.h"
#include "cachet/quant.h"
#include "cachet/tensor.h"
#include "cachet/threadpool.h"
#include "kernels/vecdot.h"

namespace cachet {

MatView MatView::of(const Tensor& t) {
  CACHET_CHECK(t.contiguous(), "matvec: tensor '", t.name, "' ", t.shape_str(),
               " is not contiguous");
  return MatView{t.dtype, t.rows(), t.cols(), t.data, row_bytes(t.dtype, t.cols())};
}

namespace {

constexpr int64_t kRowGrain = 16;              // rows per scheduling unit
constexpr size_t kMinParallelBytes = 1 << 16;  // smaller matrices run on the caller only

// Every weight type of the block-format layer has a matvec path.
bool supported(DType t) { return is_weight_type(t); }

// Grow-only scratch owned by the calling thread.
template <typename T>
T* scratch(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

void rows_scalar(const MatView& w, const float* x, float* y, int64_t r0, int64_t r1) {
  thread_local std::vector<float> buf;
  const int64_t n = w.cols;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    double acc = 0;
    switch (w.type) {
      case DType::F32: {
        for (int64_t c = 0; c < n; ++c) {
          float v;
          std::memcpy(&v, row + 4 * c, 4);
          acc += static_cast<double>(v) * x[c];
        }
        break;
      }
      case DType::F16:
      case DType::BF16: {
        for (int64_t c = 0; c < n; ++c) {
          uint16_t h;
          std::memcpy(&h, row + 2 * c, 2);
          const float v = w.type == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
          acc += static_cast<double>(v) * x[c];
        }
        break;
      }
      default: {
        float* b = scratch(buf, static_cast<size_t>(n));
        dequantize_row(w.type, row, b, n);
        for (int64_t c = 0; c < n; ++c) acc += static_cast<double>(b[c]) * x[c];
        break;
      }
    }
    y[r] = static_cast<float>(acc);
  }
}

template <typename Fn>
void split_rows(const MatView& w, ThreadPool& pool, const Fn& fn) {
  const size_t bytes = static_cast<size_t>(w.rows) * w.row_stride;
  if (pool.size() == 1 || w.rows <= kRowGrain || bytes < kMinParallelBytes) {
    fn(int64_t{0}, w.rows);
    return;
  }
  pool.run([&](int i, int k) {
    int64_t b, e;
    ThreadPool::split(w.rows, kRowGrain, i, k, &b, &e);
    if (b < e) fn(b, e);
  });
}

}  // namespace

void matvec(const MatView& w, const float* x, float* y, ThreadPool& pool) {
  matvec_isa(active_isa(), w, x, y, pool);
}

void matvec_isa(Isa isa, const MatView& w, const float* x, float* y, ThreadPool& pool) {
  CACHET_CHECK(supported(w.type), "matvec: weight type ", dtype_name(w.type), " is not supported");
  CACHET_CHECK(w.rows >= 0 && w.cols >= 0, "matvec: bad shape [", w.rows, ", ", w.cols, "]");
  const DTypeInfo& info = dtype_info(w.type);
  CACHET_CHECK(w.cols % info.block_elems == 0, "matvec: ", dtype_name(w.type), " row of ", w.cols,
               " elements is not a whole number of ", info.block_elems, "-blocks");
  if (w.rows == 0) return;
  CACHET_CHECK(y != nullptr, "matvec: null output");
  if (w.cols == 0) {
    std::fill(y, y + w.rows, 0.0f);
    return;
  }
  CACHET_CHECK(w.data != nullptr && x != nullptr, "matvec: null weight or input");
  CACHET_CHECK(w.row_stride >= row_bytes(w.type, w.cols), "matvec: row stride ", w.row_stride,
               " is shorter than a ", dtype_name(w.type), " row of ", w.cols, " elements");
  const size_t align = dtype_alignment(w.type);
  CACHET_CHECK(reinterpret_cast<uintptr_t>(w.data) % align == 0 && w.row_stride % align == 0,
               "matvec: ", dtype_name(w.type), " weights must be ", align,
               "-byte aligned (data and row stride)");

  if (isa > best_isa()) isa = best_isa();
  kern::Kernel k;
  if (isa == Isa::Avx512)
    k = kern::avx512_kernel(w.type);
  else if (isa == Isa::Avx2)
    k = kern::avx2_kernel(w.type);
  if (!k.rows) {
    split_rows(w, pool, [&](int64_t b, int64_t e) { rows_scalar(w, x, y, b, e); });
    return;
  }

  // Activation prepared once on the calling thread, into grow-only thread-local scratch.
  thread_local std::vector<int8_t> qs_buf;
  thread_local std::vector<float> d_buf, fsum_buf;
  thread_local std::vector<int32_t> isum_buf;
  thread_local std::vector<int16_t> bsum_buf;
  const int64_t n = w.cols;
  kern::XPrep xp;
  xp.f32 = x;
  if (k.xkind == kern::XKind::Q8_32) {
    const size_t nb = static_cast<size_t>(n / 32);
    int8_t* qs = scratch(qs_buf, static_cast<size_t>(n));
    float* d = scratch(d_buf, nb);
    int32_t* is = scratch(isum_buf, nb);
    float* fs = scratch(fsum_buf, nb);
    kern::quantize_x_q8_32_avx2(x, n, qs, d, is, fs);
    xp.qs = qs;
    xp.d = d;
    xp.isum = is;
    xp.fsum = fs;
  } else if (k.xkind == kern::XKind::Q8_K) {
    int8_t* qs = scratch(qs_buf, static_cast<size_t>(n));
    float* d = scratch(d_buf, static_cast<size_t>(n / 256));
    int16_t* bs = scratch(bsum_buf, static_cast<size_t>(n / 16));
    kern::quantize_x_q8_k_avx2(x, n, qs, d, bs);
    xp.qs = qs;
    xp.d = d;
    xp.bsums = bs;
  }
  split_rows(w, pool, [&](int64_t b, int64_t e) { k.rows(w, xp, y, b, e); });
}

}  // namespace cachet
