// Matrix-vector and matrix-matrix products of a weight matrix (any weight type) with f32
// activations. Each has a scalar reference and AVX2 / AVX-512 versions picked at run time
// (cachet::active_isa()); tests hold every SIMD path to the reference. Work is split over the
// pool by output rows, so results do not depend on the thread count.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cachet/cpu.h"
#include "cachet/dtype.h"

namespace cachet {

class ThreadPool;
struct Tensor;

// A weight matrix W[rows, cols] stored row by row; the product contracts over cols.
struct MatView {
  DType type = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;
  size_t row_stride = 0;  // bytes between rows (row_bytes(type, cols) when packed)

  static MatView of(const Tensor& t);  // a contiguous tensor viewed as [rows(), cols()]
  const uint8_t* row(int64_t r) const { return static_cast<const uint8_t*>(data) + r * row_stride; }
};

// y[r] = sum_c W[r, c] * x[c]
void matvec(const MatView& w, const float* x, float* y, ThreadPool& pool);
// Y[n, r] = sum_c W[r, c] * X[n, c] for n < N; X is [N, cols], Y is [N, rows], both row-major.
void matmul(const MatView& w, const float* x, int64_t n, float* y, ThreadPool& pool);

// The same with a chosen instruction set (for tests and benchmarks); an isa the CPU lacks
// is lowered to the best it has.
void matvec_isa(Isa isa, const MatView& w, const float* x, float* y, ThreadPool& pool);
void matmul_isa(Isa isa, const MatView& w, const float* x, int64_t n, float* y, ThreadPool& pool);

}  // namespace cachet
