// Placeholder until the kernels land.
#include "cachet/error.h"
#include "cachet/kernels.h"

namespace cachet {
void matmul(const MatView& w, const float* x, int64_t n, float* y, ThreadPool& pool) { matmul_isa(active_isa(), w, x, n, y, pool); }
void matmul_isa(Isa, const MatView&, const float*, int64_t, float*, ThreadPool&) { fail("matmul not implemented yet"); }
}  // namespace cachet
