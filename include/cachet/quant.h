// Conversion between f32 and every weight type: F32, F16, BF16 and the ggml block formats
// (Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q8_1 Q2_K Q3_K Q4_K Q5_K Q6_K Q8_K). Dequantization is bit-exact with
// ggml (the same bytes give the same floats); quantization follows ggml's reference quantizers.
#pragma once
#include <cstdint>

#include "cachet/dtype.h"

namespace cachet {

class ThreadPool;

// Whether t can be dequantized / quantized by the functions below.
bool is_weight_type(DType t);

// dst[0..n) = values of the n elements stored at src (n a multiple of the block size).
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
// Writes n elements (n a multiple of the block size) of type t to dst (row_bytes(t, n) bytes).
void quantize_row(DType t, const float* src, void* dst, int64_t n);
// Quantizes a [rows, cols] f32 matrix row by row, split over the pool when given.
void quantize_matrix(DType t, const float* src, void* dst, int64_t rows, int64_t cols,
                     ThreadPool* pool = nullptr);

}  // namespace cachet
