// Internal interface between the matvec dispatcher (matvec.cpp) and the SIMD row kernels
// (matvec_avx2.cpp, matvec_avx512.cpp). A kernel computes y[r] for a range of rows of W from
// an activation vector prepared once per call (f32 as given, or quantized to 8 bits).
#pragma once
#include <cstdint>

#include "cachet/dtype.h"
#include "cachet/kernels.h"

namespace cachet::kern {

// How a kernel wants the activation x.
enum class XKind {
  F32,       // x as given
  Q8_32,     // blocks of 32: int8 values, f32 scale, sum of the int8 values
  Q8_K,      // blocks of 256: int8 values, f32 scale, int16 sums of each 16 values
  BF16,      // x as given, and rounded to bf16 (for vdpbf16ps)
  BF16_F32,  // x rounded to bf16, as f32 values (FMA with bf16 arithmetic), and as bf16
};

// The prepared activation. Q8 values use a symmetric scale d = max|x| / 127 per block.
struct XPrep {
  const float* f32 = nullptr;      // n values
  const int8_t* qs = nullptr;      // n values (Q8_32, Q8_K)
  const float* d = nullptr;        // one per block
  const int32_t* isum = nullptr;   // Q8_32: sum of the block's qs
  const float* fsum = nullptr;     // Q8_32: d * isum
  const int16_t* bsums = nullptr;  // Q8_K: n / 16 sums of 16 consecutive qs
  const uint16_t* bf16 = nullptr;  // BF16: bf16(x), rounded to nearest even
};

// Computes y[r] for r in [r0, r1).
using RowsFn = void (*)(const MatView& w, const XPrep& x, float* y, int64_t r0, int64_t r1);

// Computes y[j * ldy + r] for r in [r0, r1) and each of the 2, 3 or 4 activation rows xs[j],
// decoding each weight block once for all of them; every output is computed exactly as the
// single-row kernel computes it.
using RowsMultiFn = void (*)(const MatView& w, const XPrep* xs, float* y, int64_t ldy, int64_t r0,
                             int64_t r1);

struct Kernel {
  RowsFn rows = nullptr;  // null: no SIMD kernel for this type
  XKind xkind = XKind::F32;
  RowsMultiFn multi[3] = {nullptr, nullptr, nullptr};  // 2, 3, 4 activation rows (optional)
};

// Rows [r0, r1) (whole groups of 16) of a matrix in one of the X16 layouts (MatLayout) for nx
// (1..4) activation rows prepared as the row kernel of its type wants them (avx512_kernel):
// y[j * ldy + r], streamed the given way (the outputs are the same for every way). AVX-512
// code: call only when active_isa() is Avx512. BF16 takes the arithmetic of `path`: the
// matrix_path() that chose the row kernel and so how xs was prepared.
void x16_rows_avx512(const MatView& w, const XPrep* xs, int nx, float* y, int64_t ldy, int64_t r0,
                     int64_t r1, StreamWay way, MatmulPath path);
// The same for stream_way_groups(way) lanes (`way` as x16_effective_way gives it): at each
// step i (a multiple of 16, below count) the groups at rows r0 + g * lane_rows + i, lane g
// being one stream from memory. The outputs are those of x16_rows_avx512.
void x16_lanes_avx512(const MatView& w, const XPrep* xs, int nx, float* y, int64_t ldy, int64_t r0,
                      int64_t lane_rows, int64_t count, StreamWay way, MatmulPath path);
// The way x16_rows_avx512 takes for a layout and nx when asked for `way` (two groups become
// one where the kernel's accumulators would not fit in registers), and the way a kernel uses
// before any has been measured. Compiled as AVX-512 code: the same condition.
StreamWay x16_effective_way(MatLayout layout, int nx, StreamWay way);
StreamWay x16_default_way(MatLayout layout, int nx);
// The groups of 16 rows a way reads side by side.
constexpr int64_t stream_way_groups(StreamWay way) {
  switch (way) {
    case StreamWay::Two:
    case StreamWay::TwoPrefetch:
    case StreamWay::TwoPrefetchFar:
    case StreamWay::TwoPrefetchNear:
      return 2;
    case StreamWay::Four:
      return 4;
    default:
      return 1;
  }
}

// x rounded to bf16, nearest even (XKind::BF16); and also the same values as f32
// (XKind::BF16_F32). AVX-512 code.
void round_x_bf16_avx512(const float* x, int64_t n, uint16_t* out);
void round_x_bf16_f32_avx512(const float* x, int64_t n, uint16_t* bf, float* out);

Kernel avx2_kernel(DType t);
// The kernel for rows of `cols` columns: BF16 takes the arithmetic of matrix_path(), as matmul
// does (or of the path given, a matrix_path() result).
Kernel avx512_kernel(DType t, int64_t cols);
Kernel avx512_kernel(DType t, MatmulPath path);

// Quantizes x (n a multiple of 32, resp. 256) into the given arrays (AVX2 code: call only
// when active_isa() >= Avx2).
void quantize_x_q8_32_avx2(const float* x, int64_t n, int8_t* qs, float* d, int32_t* isum,
                           float* fsum);
void quantize_x_q8_k_avx2(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums);
// Their scalar references, with the same results bit for bit: per block d = max|x| / 127, each
// q the nearest integer (ties to even) to x * (127 / max|x|) (0 for an all-zero block), isum /
// bsums the sums of the q of a block of 32 / of 16 values, fsum = d * isum.
void quantize_x_q8_32_ref(const float* x, int64_t n, int8_t* qs, float* d, int32_t* isum,
                          float* fsum);
void quantize_x_q8_k_ref(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums);

}  // namespace cachet::kern
