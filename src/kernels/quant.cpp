// Placeholder until the block-format implementation lands.
#include "cachet/quant.h"

#include "cachet/error.h"

namespace cachet {
bool is_weight_type(DType) { return false; }
void dequantize_row(DType t, const void*, float*, int64_t) { fail("dequantize_row: ", dtype_name(t), " not implemented yet"); }
void quantize_row(DType t, const float*, void*, int64_t) { fail("quantize_row: ", dtype_name(t), " not implemented yet"); }
void quantize_matrix(DType t, const float*, void*, int64_t, int64_t, ThreadPool*) { fail("quantize_matrix: ", dtype_name(t), " not implemented yet"); }
}  // namespace cachet
