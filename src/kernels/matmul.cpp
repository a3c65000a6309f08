// Matrix-matrix product: argument checks, instruction-set dispatch and the scalar reference.
// The reference dequantizes each weight row once (dequantize_row) and takes its dot product
// with every activation row, accumulating in double.
#include <cstring>
#include <vector>

#include "cachet/error.h"
#include "cachet/half.h"
#include "cachet/kernels.h"
#include "cachet/quant.h"
#include "cachet/threadpool.h"
#include "kernels/matmul_internal.h"

namespace cachet {
namespace {

bool matmul_type(DType t) {
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

void row_to_f32(const MatView& w, int64_t r, float* out) {
  const uint8_t* src = w.row(r);
  switch (w.type) {
    case DType::F32:
      std::memcpy(out, src, static_cast<size_t>(w.cols) * 4);
      return;
    case DType::F16:
      for (int64_t c = 0; c < w.cols; ++c) {
        uint16_t h;
        std::memcpy(&h, src + 2 * c, 2);
        out[c] = f16_to_f32(h);
      }
      return;
    case DType::BF16:
      for (int64_t c = 0; c < w.cols; ++c) {
        uint16_t h;
        std::memcpy(&h, src + 2 * c, 2);
        out[c] = bf16_to_f32(h);
      }
      return;
    default:
      dequantize_row(w.type, src, out, w.cols);
  }
}

struct ScalarJob {
  const MatView& w;
  const float* x;
  int64_t n;
  float* y;
};

void matmul_scalar(const MatView& w_, const float* x_, int64_t n_, float* y_, ThreadPool& pool) {
  const ScalarJob job{w_, x_, n_, y_};
  pool.run([&job](int i, int k) {  // one captured reference: no allocation per call
    const MatView& w = job.w;
    const float* x = job.x;
    const int64_t n = job.n;
    float* y = job.y;
    int64_t r0, r1;
    ThreadPool::split(w.rows, 1, i, k, &r0, &r1);
    if (r0 >= r1) return;
    thread_local std::vector<float> row;
    if (row.size() < static_cast<size_t>(w.cols)) row.resize(static_cast<size_t>(w.cols));
    for (int64_t r = r0; r < r1; ++r) {
      row_to_f32(w, r, row.data());
      for (int64_t j = 0; j < n; ++j) {
        const float* xj = x + j * w.cols;
        double s = 0;
        for (int64_t c = 0; c < w.cols; ++c)
          s += static_cast<double>(row[static_cast<size_t>(c)]) * static_cast<double>(xj[c]);
        y[j * w.rows + r] = static_cast<float>(s);
      }
    }
  });
}

}  // namespace

void matmul(const MatView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  matmul_isa(active_isa(), w, x, n, y, pool);
}

MatmulPath matmul_path() {
  return best_isa() == Isa::Avx512 ? matmul_internal::avx512_matmul_path() : MatmulPath::F32;
}

namespace matmul_internal {
MatmulPath matrix_path(DType t, int64_t cols) {
  if (t == DType::F32 || t == DType::F16 || cols % 32) return MatmulPath::F32;
  return matmul_path();
}
}  // namespace matmul_internal

void set_matmul_path(std::optional<MatmulPath> path) {
  if (best_isa() == Isa::Avx512) matmul_internal::avx512_set_matmul_path(path);
}

std::string_view matmul_path_name(MatmulPath path) {
  switch (path) {
    case MatmulPath::Bf16:
      return "bf16 dot products";
    case MatmulPath::Amx:
      return "AMX bf16 tiles";
    case MatmulPath::F32:
      break;
  }
  return "f32 FMA";
}

void matmul_isa(Isa isa, const MatView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  CACHET_CHECK(matmul_type(w.type), "matmul: weight type ", dtype_name(w.type),
               " is not supported");
  CACHET_CHECK(w.rows >= 0 && w.cols >= 0 && n >= 0, "matmul: negative size (rows ", w.rows,
               ", cols ", w.cols, ", n ", n, ")");
  const size_t rb = row_bytes(w.type, w.cols);  // throws unless cols holds whole blocks
  CACHET_CHECK(w.rows <= 1 || w.row_stride >= rb, "matmul: row stride ", w.row_stride,
               " is smaller than a ", dtype_name(w.type), " row of ", w.cols, " elements (", rb,
               " bytes)");
  if (n == 0 || w.rows == 0) return;
  CACHET_CHECK(y != nullptr, "matmul: null output");
  if (w.cols == 0) {
    std::memset(y, 0, static_cast<size_t>(n * w.rows) * sizeof(float));
    return;
  }
  CACHET_CHECK(w.data != nullptr && x != nullptr, "matmul: null weight or activation data");
  const size_t align = dtype_alignment(w.type);
  CACHET_CHECK(reinterpret_cast<uintptr_t>(w.data) % align == 0 &&
                   (w.rows <= 1 || w.row_stride % align == 0),
               "matmul: ", dtype_name(w.type), " weights must be ", align,
               "-byte aligned (data and row stride)");
  if (isa > best_isa()) isa = best_isa();
  if (w.layout != MatLayout::Rows && isa != Isa::Avx512 &&
      !(isa >= Isa::Avx2 && n <= matmul_internal::kMatvecRowsMax)) {
    // Only the AVX-512 code reads packed rows: the others get the row layout back (slow path,
    // for a lower ISA asked for after packing).
    const PackedMat rows = unpack_matrix(w);
    return matmul_isa(isa, rows.view, x, n, y, pool);
  }
  if (isa >= Isa::Avx2 && n <= matmul_internal::kMatvecRowsMax)
    return matvec_rows(isa, w, x, n, y, pool);
  if (isa == Isa::Avx512) return matmul_internal::matmul_avx512(w, x, n, y, pool);
  if (isa == Isa::Avx2) return matmul_internal::matmul_avx2(w, x, n, y, pool);
  matmul_scalar(w, x, n, y, pool);
}

}  // namespace cachet
