// Internal entry points of the matrix-matrix product: one per instruction set, each compiled
// in its own translation unit with that set's flags and entered only after a CPU check.
#pragma once
#include <cstdint>
#include <optional>

#include "cachet/dtype.h"
#include "cachet/kernels.h"

namespace cachet::matmul_internal {

// Arguments are validated by matmul_isa; n >= 1, rows >= 1, cols >= 1.
void matmul_avx2(const MatView& w, const float* x, int64_t n, float* y, ThreadPool& pool);
void matmul_avx512(const MatView& w, const float* x, int64_t n, float* y, ThreadPool& pool);
// matmul_path() on a CPU with AVX-512 (see kernels.h).
MatmulPath avx512_matmul_path();
void avx512_set_matmul_path(std::optional<MatmulPath> path);
// The arithmetic the AVX-512 matmul and matvec both use for a matrix of type t with rows of
// `cols` values, so that steps equal prefills: F32 for F32 and F16 weights and for rows that
// are not whole 32-blocks (the bf16 kernels take pairs in 32-blocks), else matmul_path().
MatmulPath matrix_path(DType t, int64_t cols);

// An AMX tile configuration (palette 1): tile t has rows[t] rows of colsb[t] bytes. The
// kernels keep theirs as constants in memory (GCC 12 drops stores to a local configuration
// before _tile_loadconfig as if they were dead).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
// Tiles [0, n) of 64-byte rows: `rows` rows for tiles [0, short_tiles), 16 for the others.
constexpr TileConfig tile_config(int n, int short_tiles, int rows) {
  TileConfig c;
  for (int t = 0; t < n; ++t) {
    c.colsb[t] = 64;
    c.rows[t] = static_cast<uint8_t>(t < short_tiles ? rows : 16);
  }
  return c;
}

// Few activation rows (n <= kMatvecRowsMax) on a SIMD path run as matvecs that share each
// chunk of weight rows while it is in cache (matvec.cpp): the weights stream from memory once
// and every output equals matvec's for that activation row. Arguments as for matmul_isa.
constexpr int64_t kMatvecRowsMax = 4;

}  // namespace cachet::matmul_internal

namespace cachet {
void matvec_rows(Isa isa, const MatView& w, const float* x, int64_t n_rows, float* y,
                 ThreadPool& pool);
}  // namespace cachet
