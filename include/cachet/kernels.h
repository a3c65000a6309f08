// Matrix-vector and matrix-matrix products of a weight matrix (any weight type) with f32
// activations. Each has a scalar reference and AVX2 / AVX-512 versions picked at run time
// (cachet::active_isa()); tests hold every SIMD path to the reference. Work is split over the
// pool by output rows, so results do not depend on the thread count.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "cachet/cpu.h"
#include "cachet/dtype.h"

namespace cachet {

class ThreadPool;
struct Tensor;

// A weight matrix W[rows, cols] stored row by row; the product contracts over cols.
// How the bytes of a MatView are arranged.
enum class MatLayout : uint8_t {
  Rows,  // row r at data + r * row_stride
  // Rows in groups of 16 whose blocks are interleaved for the AVX-512 kernels (see
  // pack_matrix); the rows past the last whole group follow in row layout at their usual
  // offset. One layout per weight type:
  Q4K_X16,   // Q4_K
  Q8_0_X16,  // Q8_0
  Q6K_X16,   // Q6_K
  BF16_X16,  // BF16
  Q4_0_X16,  // Q4_0
  Q4_1_X16,  // Q4_1
  Q5K_X16,   // Q5_K
  Q5_0_X16,  // Q5_0
  Q5_1_X16,  // Q5_1
};

struct MatView {
  DType type = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;
  size_t row_stride = 0;  // bytes between rows (row_bytes(type, cols) when packed)
  MatLayout layout = MatLayout::Rows;

  static MatView of(const Tensor& t);  // a contiguous tensor viewed as [rows(), cols()]
  const uint8_t* row(int64_t r) const { return static_cast<const uint8_t*>(data) + r * row_stride; }
};

// How the AVX-512 kernels of the X16 layouts read a matrix's groups of 16 rows from memory:
// one group at a time, two side by side (with software prefetching or with the hardware
// prefetcher alone) or four side by side (kernels with few accumulators). Which streams fastest
// depends on the kernel and on the machine and its load, so by default each (layout, number of
// activation rows) measures its ways on its first large products, keeps the fastest and measures
// again now and then. The outputs are the same whatever the way.
// The far ways prefetch three times as far ahead as the others: on one host 2 KiB ahead was
// best, on another 6 KiB, and on a third 1 KiB (docs/architecture.md, "Streams from memory").
// The near way prefetches half as far ahead as TwoPrefetch, for the kernels that prefetch a
// few lines at a time between their loads (Q4_K, Q5_K, Q6_K; the others take it as
// TwoPrefetch).
enum class StreamWay : uint8_t {
  One,
  OnePrefetch,
  Two,
  TwoPrefetch,
  Four,
  OnePrefetchFar,
  TwoPrefetchFar,
  TwoPrefetchNear
};
constexpr int kStreamWays = 8;
std::string_view stream_way_name(StreamWay way);  // "1 group", "1 group + prefetch", ...
// Every later product uses `way` (where its kernel can: see x16 kernels), or, with nullopt,
// measures as described above. The environment can set it too: CACHET_STREAM=1, 1p, 2, 2p, 4,
// 1f, 2f, 2n or auto (the default). CACHET_STREAM_LOG=1 prints each measured choice on stderr,
// with every way's median rate.
void set_stream_way(std::optional<StreamWay> way);
// The way products of this layout with nx activation rows take now, and whether it was chosen
// by measurement (false: the kernel's default, or a way set by set_stream_way / CACHET_STREAM).
struct StreamChoice {
  StreamWay way;
  bool measured;
};
StreamChoice stream_choice(MatLayout layout, int nx);
// Whether some layout's products with nx activation rows are measuring their ways now: trying
// each way in turn, some slower than the one kept (benchmarks warm up until they are not).
bool stream_ways_measuring(int nx);

// y[r] = sum_c W[r, c] * x[c]
void matvec(const MatView& w, const float* x, float* y, ThreadPool& pool);
// Y[n, r] = sum_c W[r, c] * X[n, c] for n < N; X is [N, cols], Y is [N, rows], both row-major.
void matmul(const MatView& w, const float* x, int64_t n, float* y, ThreadPool& pool);

// How the AVX-512 matmul multiplies weights that can go either way (BF16 and the block types;
// F32 and F16 are always f32): F32, dequantized to f32 and FMA with the f32 activations; Bf16,
// as bf16 pairs against bf16-rounded activations by vdpbf16ps; Amx, the same bf16 arithmetic
// on AMX tiles (16x16 outputs per instruction). vdpbf16ps does twice the work of an FMA per
// instruction but some cores issue it at a quarter of the FMA rate, so by default the path is
// measured once per process on first use; CACHET_MATMUL=f32, bf16, amx or auto sets it
// (anything else, or amx without AMX, is an error). Without AVX-512 the answer is F32. BF16
// matvecs follow it (f32 or bf16 arithmetic), so decoding steps compute what prefills do.
enum class MatmulPath : uint8_t { F32, Bf16, Amx };
MatmulPath matmul_path();
// Every later matmul takes `path` (nullopt: back to the measured or CACHET_MATMUL choice); Amx
// where the CPU has none is Bf16.
void set_matmul_path(std::optional<MatmulPath> path);
// "f32 FMA", "bf16 dot products" or "AMX bf16 tiles"
std::string_view matmul_path_name(MatmulPath path);

// The same with a chosen instruction set (for tests and benchmarks); an isa the CPU lacks
// is lowered to the best it has.
void matvec_isa(Isa isa, const MatView& w, const float* x, float* y, ThreadPool& pool);
void matmul_isa(Isa isa, const MatView& w, const float* x, int64_t n, float* y, ThreadPool& pool);

// ---- weights rearranged for this CPU's kernels -------------------------------------------
//
// A model's matrices can be rearranged once at load so that the matvec kernels of the active
// instruction set decode many rows with one instruction: Q4_K, Q6_K, Q8_0 and BF16 on AVX-512 are
// stored as groups of 16 rows whose blocks are interleaved (the X16 layouts: each chunk
// of a group holds the 16 rows' blocks at one column position, in as many bytes). Nothing is
// lost: the matrix dequantizes exactly as before, and matvec/matmul accept either layout.

struct PackedMat {
  std::shared_ptr<void> buf;  // owns the rearranged bytes (empty: view is the input as given)
  MatView view;
};

// The layout pack_matrix would choose for w on this CPU (Rows when there is nothing to gain,
// or when CACHET_REPACK=0 is set in the environment).
MatLayout preferred_layout(const MatView& w);
// The weight type a layout holds (F32 for Rows, which holds any).
DType layout_type(MatLayout layout);
// w rearranged into preferred_layout(w) (a copy, in a weight_buffer: for weights a model keeps
// for its life), or w itself when that is Rows. The pool, if given, packs in parallel.
PackedMat pack_matrix(const MatView& w, ThreadPool* pool = nullptr);
// w back in the row layout (a copy), or w itself when it is in the row layout already.
PackedMat unpack_matrix(const MatView& w);
// Blocks [b0, b0 + nb) of row r, in the row layout, written to dst (nb * block bytes).
void unpack_row_blocks(const MatView& w, int64_t r, int64_t b0, int64_t nb, uint8_t* dst);

}  // namespace cachet
