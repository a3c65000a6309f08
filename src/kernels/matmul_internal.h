// Internal entry points of the matrix-matrix product: one per instruction set, each compiled
// in its own translation unit with that set's flags and entered only after a CPU check.
#pragma once
#include <cstdint>

#include "cachet/dtype.h"
#include "cachet/kernels.h"

namespace cachet::matmul_internal {

// Arguments are validated by matmul_isa; n >= 1, rows >= 1, cols >= 1.
void matmul_avx2(const MatView& w, const float* x, int64_t n, float* y, ThreadPool& pool);
void matmul_avx512(const MatView& w, const float* x, int64_t n, float* y, ThreadPool& pool);

}  // namespace cachet::matmul_internal
