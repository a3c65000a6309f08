// Matrix-vector product: validation, the scalar reference and dispatch to the SIMD kernels.
//
// The scalar reference dequantizes one row at a time (dequantize_row) and forms the dot product
// with the exact f32 x, accumulating in double in index order. The SIMD kernels (AVX2, AVX-512)
// quantize x once per call to 8-bit blocks for the quantized weight types and use integer dot
// products with per-block f32 scales, like ggml. Rows are split over the pool in fixed chunks;
// each y[r] is computed by one thread with the same operations whatever the thread count.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "cachet/error.h"
#include "cachet/half.h"
#include "cachet/kernels.h"
#include "cachet/quant.h"
#include "cachet/tensor.h"
#include "cachet/threadpool.h"
#include "kernels/matmul_internal.h"
#include "kernels/stream_tuner.h"
#include "kernels/vecdot.h"

namespace cachet {

MatView MatView::of(const Tensor& t) {
  CACHET_CHECK(t.contiguous(), "matvec: tensor '", t.name, "' ", t.shape_str(),
               " is not contiguous");
  return MatView{t.dtype, t.rows(), t.cols(), t.data, row_bytes(t.dtype, t.cols())};
}

namespace {

constexpr int64_t kRowGrain = 16;              // rows per scheduling unit
constexpr size_t kMinParallelBytes = 1 << 16;  // smaller matrices run on the caller only
// Weight bytes per chunk a thread claims. Longer runs of one stream keep the hardware
// prefetcher going: 1 MiB instead of 256 KiB took Q4_K's mean over one token's worth of
// RecurrentGemma-2B's matrices (as `cachet bench kernels --token` measures it; 2 threads,
// alternating builds) from 55-58 to 61-65 GB/s; 2-4 MiB gained nothing more.
constexpr size_t kChunkBytes = 1 << 20;

// Every weight type of the block-format layer has a matvec path.
bool supported(DType t) {
  return is_weight_type(t);
}

// Grow-only scratch owned by the calling thread.
template <typename T>
T* scratch(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

void rows_scalar(const MatView& w, const float* x, float* y, int64_t r0, int64_t r1) {
  thread_local std::vector<float> buf;
  const int64_t n = w.cols;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    double acc = 0;
    switch (w.type) {
      case DType::F32: {
        for (int64_t c = 0; c < n; ++c) {
          float v;
          std::memcpy(&v, row + 4 * c, 4);
          acc += static_cast<double>(v) * x[c];
        }
        break;
      }
      case DType::F16:
      case DType::BF16: {
        for (int64_t c = 0; c < n; ++c) {
          uint16_t h;
          std::memcpy(&h, row + 2 * c, 2);
          const float v = w.type == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
          acc += static_cast<double>(v) * x[c];
        }
        break;
      }
      default: {
        float* b = scratch(buf, static_cast<size_t>(n));
        dequantize_row(w.type, row, b, n);
        for (int64_t c = 0; c < n; ++c) acc += static_cast<double>(b[c]) * x[c];
        break;
      }
    }
    y[r] = static_cast<float>(acc);
  }
}

// Runs fn(begin, end) over [0, rows) in chunks of whole kRowGrain units that the pool's running
// threads claim one at a time. Chunks start at about kChunkBytes of weights and shrink as the
// work left does (to a share of it per thread, down to a quarter of the first size), so the
// threads finish close together: the last chunk one thread takes while the other has nothing
// left is small. Chunks hold a multiple of `multiple` units (the groups an X16 kernel reads
// side by side), so that no group of a chunk is left to be read alone.
template <typename Fn>
void split_rows(const MatView& w, ThreadPool& pool, const Fn& fn, int64_t multiple = 1) {
  const size_t bytes = static_cast<size_t>(w.rows) * w.row_stride;
  if (pool.size() == 1 || w.rows <= kRowGrain || bytes < kMinParallelBytes) {
    fn(int64_t{0}, w.rows);
    return;
  }
  const int64_t units = (w.rows + kRowGrain - 1) / kRowGrain;
  const size_t unit_bytes = std::max<size_t>(1, static_cast<size_t>(kRowGrain) * w.row_stride);
  const int64_t per_chunk = std::max<int64_t>(1, static_cast<int64_t>(kChunkBytes / unit_bytes));
  const int64_t threads = static_cast<int64_t>(pool.size());
  auto whole = [multiple](int64_t u) { return std::max(multiple, u / multiple * multiple); };
  // At least two chunks per thread, so a slow thread can hand work over.
  const int64_t first = whole(std::min(per_chunk, std::max<int64_t>(1, units / (2 * threads))));
  const int64_t least = whole((first + 3) / 4);
  thread_local std::vector<int64_t> starts;  // grow-only: no allocation once warm
  starts.clear();
  for (int64_t u = 0; u < units;) {
    starts.push_back(u);
    u += std::clamp(whole((units - u) / (2 * threads)), least, first);
  }
  starts.push_back(units);
  const int64_t* s = starts.data();
  const auto chunk = [&](int64_t c) {
    fn(s[c] * kRowGrain, std::min(w.rows, s[c + 1] * kRowGrain));
  };
  pool.for_chunks(static_cast<int64_t>(starts.size()) - 1, std::cref(chunk));
}

}  // namespace

void matvec(const MatView& w, const float* x, float* y, ThreadPool& pool) {
  matvec_isa(active_isa(), w, x, y, pool);
}

void matvec_isa(Isa isa, const MatView& w, const float* x, float* y, ThreadPool& pool) {
  CACHET_CHECK(supported(w.type), "matvec: weight type ", dtype_name(w.type), " is not supported");
  CACHET_CHECK(w.rows >= 0 && w.cols >= 0, "matvec: bad shape [", w.rows, ", ", w.cols, "]");
  const DTypeInfo& info = dtype_info(w.type);
  CACHET_CHECK(w.cols % info.block_elems == 0, "matvec: ", dtype_name(w.type), " row of ", w.cols,
               " elements is not a whole number of ", info.block_elems, "-blocks");
  if (w.rows == 0) return;
  CACHET_CHECK(y != nullptr, "matvec: null output");
  if (w.cols == 0) {
    std::fill(y, y + w.rows, 0.0f);
    return;
  }
  CACHET_CHECK(w.data != nullptr && x != nullptr, "matvec: null weight or input");
  CACHET_CHECK(w.row_stride >= row_bytes(w.type, w.cols), "matvec: row stride ", w.row_stride,
               " is shorter than a ", dtype_name(w.type), " row of ", w.cols, " elements");
  const size_t align = dtype_alignment(w.type);
  CACHET_CHECK(reinterpret_cast<uintptr_t>(w.data) % align == 0 && w.row_stride % align == 0,
               "matvec: ", dtype_name(w.type), " weights must be ", align,
               "-byte aligned (data and row stride)");

  matvec_rows(isa, w, x, 1, y, pool);
}

namespace {

// Activation rows prepared for a kernel, in grow-only thread-local scratch of the caller.
struct XScratch {
  std::vector<int8_t> qs;
  std::vector<float> d, fsum;
  std::vector<int32_t> isum;
  std::vector<int16_t> bsums;
  std::vector<uint16_t> bf;
  std::vector<float> rounded;
  std::vector<kern::XPrep> preps;
};

void prepare_x(kern::XKind kind, const float* x, int64_t n_rows, int64_t cols, XScratch& s) {
  s.preps.assign(static_cast<size_t>(n_rows), kern::XPrep{});
  const size_t nx = static_cast<size_t>(n_rows), n = static_cast<size_t>(cols);
  if (kind == kern::XKind::Q8_32) {
    const size_t nb = n / 32;
    int8_t* qs = scratch(s.qs, nx * n);
    float* d = scratch(s.d, nx * nb);
    int32_t* is = scratch(s.isum, nx * nb);
    float* fs = scratch(s.fsum, nx * nb);
    for (size_t j = 0; j < nx; ++j) {
      kern::quantize_x_q8_32_avx2(x + j * n, cols, qs + j * n, d + j * nb, is + j * nb,
                                  fs + j * nb);
      s.preps[j] = {x + j * n, qs + j * n, d + j * nb, is + j * nb, fs + j * nb, nullptr};
    }
  } else if (kind == kern::XKind::Q8_K) {
    const size_t nb = n / 256, ns = n / 16;
    int8_t* qs = scratch(s.qs, nx * n);
    float* d = scratch(s.d, nx * nb);
    int16_t* bs = scratch(s.bsums, nx * ns);
    for (size_t j = 0; j < nx; ++j) {
      kern::quantize_x_q8_k_avx2(x + j * n, cols, qs + j * n, d + j * nb, bs + j * ns);
      s.preps[j] = {x + j * n, qs + j * n, d + j * nb, nullptr, nullptr, bs + j * ns};
    }
  } else if (kind == kern::XKind::BF16) {
    uint16_t* bf = scratch(s.bf, nx * n);
    for (size_t j = 0; j < nx; ++j) {
      kern::round_x_bf16_avx512(x + j * n, cols, bf + j * n);
      s.preps[j].f32 = x + j * n;
      s.preps[j].bf16 = bf + j * n;
    }
  } else if (kind == kern::XKind::BF16_F32) {
    float* r = scratch(s.rounded, nx * n);
    uint16_t* bf = scratch(s.bf, nx * n);
    for (size_t j = 0; j < nx; ++j) {
      kern::round_x_bf16_f32_avx512(x + j * n, cols, bf + j * n, r + j * n);
      s.preps[j].f32 = r + j * n;
      s.preps[j].bf16 = bf + j * n;  // rows n apart: the A tile of the AMX kernel
    }
  } else {
    for (size_t j = 0; j < nx; ++j) s.preps[j].f32 = x + j * n;
  }
}

}  // namespace

// matvec_rows for an X16 layout (MatLayout): its groups of 16 rows by the AVX-512 group kernel,
// the rows after the last group by the row kernel. Without AVX-512 (a lower ISA asked for), the
// matrix is unpacked to the row layout for the call: slow, but the same values.
static void matvec_rows_x16(Isa isa, const MatView& w, const float* x, int64_t n_rows, float* y,
                            ThreadPool& pool) {
  if (isa != Isa::Avx512) {
    const PackedMat rows = unpack_matrix(w);
    return matvec_rows(isa, rows.view, x, n_rows, y, pool);
  }
  thread_local XScratch xs;
  // One reading of the path decides both how x is prepared and which kernels run.
  const MatmulPath path = matmul_internal::matrix_path(w.type, w.cols);
  const kern::Kernel k = kern::avx512_kernel(w.type, path);  // rows after the last group
  prepare_x(k.xkind, x, n_rows, w.cols, xs);
  const kern::XPrep* preps = xs.preps.data();
  const int64_t packed = w.rows / 16 * 16;  // split_rows cuts at multiples of kRowGrain (16)
  const int nx = static_cast<int>(n_rows);
  const size_t bytes = static_cast<size_t>(w.rows) * w.row_stride;
  const kern::StreamPick pick = kern::pick_stream_way(w.layout, nx, bytes);
  const auto start =
      pick.measure ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  split_rows(
      w, pool,
      [&](int64_t b, int64_t e) {
        const int64_t pe = std::min(e, packed);
        if (b < pe) kern::x16_rows_avx512(w, preps, nx, y, w.rows, b, pe, pick.way, path);
        const int64_t t0 = std::max(b, pe);
        if (t0 >= e) return;
        if (n_rows == 1) return k.rows(w, preps[0], y, t0, e);
        if (k.multi[n_rows - 2]) return k.multi[n_rows - 2](w, preps, y, w.rows, t0, e);
        for (int64_t j = 0; j < n_rows; ++j) k.rows(w, preps[j], y + j * w.rows, t0, e);
      },
      kern::stream_way_groups(pick.way));
  if (pick.measure)
    kern::report_stream_time(
        w.layout, nx, pick.way, bytes,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// Y[j, r] for j < n_rows: the matvec of every activation row. Each thread takes chunks of
// a few weight rows and runs every activation row over a chunk while it is in cache, so the
// weights stream from memory once; each y[j, r] is computed exactly as matvec computes it.
void matvec_rows(Isa isa, const MatView& w, const float* x, int64_t n_rows, float* y,
                 ThreadPool& pool) {
  if (isa > best_isa()) isa = best_isa();
  if (w.layout != MatLayout::Rows) return matvec_rows_x16(isa, w, x, n_rows, y, pool);
  kern::Kernel k;
  if (isa == Isa::Avx512)
    k = kern::avx512_kernel(w.type, w.cols);
  else if (isa == Isa::Avx2)
    k = kern::avx2_kernel(w.type);
  if (!k.rows) {
    split_rows(w, pool, [&](int64_t b, int64_t e) {
      for (int64_t j = 0; j < n_rows; ++j) rows_scalar(w, x + j * w.cols, y + j * w.rows, b, e);
    });
    return;
  }
  thread_local XScratch xs;
  prepare_x(k.xkind, x, n_rows, w.cols, xs);
  const kern::XPrep* preps = xs.preps.data();
  // Weight rows per chunk: about 32 KiB, in whole tiles of 4 rows.
  const int64_t chunk = std::clamp<int64_t>(
      static_cast<int64_t>((32 << 10) / std::max<size_t>(w.row_stride, 1)) / 4 * 4, 4, 16);
  const kern::RowsMultiFn multi = n_rows >= 2 && n_rows <= 4 ? k.multi[n_rows - 2] : nullptr;
  split_rows(w, pool, [&](int64_t b, int64_t e) {
    if (n_rows == 1) return k.rows(w, preps[0], y, b, e);
    if (multi) return multi(w, preps, y, w.rows, b, e);
    for (int64_t c = b; c < e; c += chunk) {
      const int64_t ce = std::min(e, c + chunk);
      for (int64_t j = 0; j < n_rows; ++j) k.rows(w, preps[j], y + j * w.rows, c, ce);
    }
  });
}

}  // namespace cachet
