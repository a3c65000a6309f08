// Placeholder until the kernels land.
#include "cachet/error.h"
#include "cachet/kernels.h"
#include "cachet/tensor.h"

namespace cachet {
MatView MatView::of(const Tensor& t) {
  return MatView{t.dtype, t.rows(), t.cols(), t.data, row_bytes(t.dtype, t.cols())};
}
void matvec(const MatView& w, const float* x, float* y, ThreadPool& pool) { matvec_isa(active_isa(), w, x, y, pool); }
void matvec_isa(Isa, const MatView&, const float*, float*, ThreadPool&) { fail("matvec not implemented yet"); }
}  // namespace cachet
