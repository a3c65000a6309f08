// Matrix-vector product: validation, the scalar reference and dispatch to the SIMD kernels.
//
// The scalar reference dequantizes one row at a time (dequantize_row) and forms the dot product
// with the exact f32 x, accumulating in double in index order. The SIMD kernels (AVX2, AVX-512)
// quantize x once per call to 8-bit blocks for the quantized weight types and use integer dot
// products with per-block f32 scales, like ggml. Rows are split over the pool (split_rows,
// LaneShares); each y[r] is computed by one thread with the same operations whatever the
// thread count.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <memory>
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

// Whether a product of w runs on the calling thread alone: a pool of one, or too little work
// to share.
bool runs_alone(const MatView& w, const ThreadPool& pool) {
  const size_t bytes = static_cast<size_t>(w.rows) * w.row_stride;
  return pool.size() == 1 || w.rows <= kRowGrain || bytes < kMinParallelBytes;
}

// Runs fn(begin, end) over [0, rows) in chunks of whole kRowGrain units that the pool's running
// threads claim one at a time. Chunks start at about kChunkBytes of weights and shrink as the
// work left does (to a share of it per thread, down to a quarter of the first size), so the
// threads finish close together: the last chunk one thread takes while the other has nothing
// left is small. (The X16 layouts split their products by LaneShares instead.)
template <typename Fn>
void split_rows(const MatView& w, ThreadPool& pool, const Fn& fn) {
  if (runs_alone(w, pool)) {
    fn(int64_t{0}, w.rows);
    return;
  }
  const int64_t units = (w.rows + kRowGrain - 1) / kRowGrain;
  const size_t unit_bytes = std::max<size_t>(1, static_cast<size_t>(kRowGrain) * w.row_stride);
  const int64_t per_chunk = std::max<int64_t>(1, static_cast<int64_t>(kChunkBytes / unit_bytes));
  const int64_t threads = static_cast<int64_t>(pool.size());
  // At least two chunks per thread, so a slow thread can hand work over.
  const int64_t first = std::min(per_chunk, std::max<int64_t>(1, units / (2 * threads)));
  const int64_t least = (first + 3) / 4;
  thread_local std::vector<int64_t> starts;  // grow-only: no allocation once warm
  starts.clear();
  for (int64_t u = 0; u < units;) {
    starts.push_back(u);
    u += std::clamp((units - u) / (2 * threads), least, first);
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

namespace kern {
namespace {

// What cvtps_epi32 gives: the nearest integer, ties to even (the default rounding mode), and
// INT32_MIN for a value out of range or NaN.
int32_t round_like_cvt(float v) {
  if (!(v >= -2147483648.0f && v < 2147483648.0f)) return INT32_MIN;
  return static_cast<int32_t>(std::nearbyint(v));
}
// The kernels' packs: to int16, then int8, each saturating.
int8_t saturate_i8(int32_t v) {
  return static_cast<int8_t>(std::clamp<int32_t>(std::clamp<int32_t>(v, -32768, 32767), -128, 127));
}
// One block of `len` values: its scale, its q, and the sums of its q by `part` values.
template <typename Sum>
void quantize_block_ref(const float* x, int64_t len, int64_t part, int8_t* q, float* d, Sum* sums) {
  float mx = 0;
  for (int64_t j = 0; j < len; ++j) mx = std::max(mx, std::fabs(x[j]));
  *d = mx / 127.0f;
  const float id = mx > 0 ? 127.0f / mx : 0.0f;
  for (int64_t p = 0; p < len / part; ++p) {
    uint32_t s = 0;  // wrapping, as the kernels' 32-bit lanes
    for (int64_t j = p * part; j < (p + 1) * part; ++j) {
      const int32_t v = round_like_cvt(x[j] * id);
      s += static_cast<uint32_t>(v);
      q[j] = saturate_i8(v);
    }
    sums[p] = static_cast<Sum>(static_cast<int32_t>(s));
  }
}

}  // namespace

void quantize_x_q8_32_ref(const float* x, int64_t n, int8_t* qs, float* d, int32_t* isum,
                          float* fsum) {
  for (int64_t b = 0; b < n / 32; ++b) {
    quantize_block_ref(x + 32 * b, 32, 32, qs + 32 * b, d + b, isum + b);
    fsum[b] = d[b] * static_cast<float>(isum[b]);
  }
}

void quantize_x_q8_k_ref(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums) {
  for (int64_t b = 0; b < n / 256; ++b)
    quantize_block_ref(x + 256 * b, 256, 16, qs + 256 * b, d + b, bsums + 16 * b);
}

}  // namespace kern

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

// The split of an X16 product over the pool (matvec_rows_x16). Each thread owns an equal,
// contiguous share of the matrix's whole groups and reads it as lanes (as many as its stream
// way reads groups side by side), front to back, a round of a few groups per lane at a time: a
// lane is one stream from memory from its first group to its last. Each new stream costs the
// time the prefetchers take to get going (several microseconds a product when the threads took
// chunks from a common queue, as split_rows does). A thread done with its share takes rounds
// from the back of another's, half of what is left at a time, and a share whose thread has
// not started (a descheduled worker) is taken over whole. Each output is computed by the same
// instructions whoever computes it.
class LaneShares {
 public:
  // process(r0, lane_rows, count): the lanes of x16_lanes_avx512; rest(r0, r1): rows [r0, r1)
  // any way (the groups left after the lanes, and the rows after the last whole group).
  template <typename Lanes, typename Rest>
  static void run(const MatView& w, ThreadPool& pool, int64_t lanes, const Lanes& process,
                  const Rest& rest) {
    const int64_t threads = pool.size();
    const int64_t groups = w.rows / kRowGrain;
    const size_t group_bytes = static_cast<size_t>(kRowGrain) * w.row_stride;
    const int64_t round_groups =
        std::max<int64_t>(1, static_cast<int64_t>(kRoundBytes / (group_bytes * lanes)));
    // The caller's, grow-only: a product allocates nothing once warm
    thread_local std::unique_ptr<Share[]> buf;
    thread_local int64_t capacity = 0;
    if (capacity < threads) {
      buf = std::make_unique<Share[]>(static_cast<size_t>(threads));
      capacity = threads;
    }
    Share* const shares = buf.get();
    const int64_t n = threads;
    for (int64_t t = 0; t < n; ++t) {
      Share& s = shares[t];
      s.owned.store(false, std::memory_order_relaxed);
      const int64_t g0 = groups * t / n, g1 = groups * (t + 1) / n;
      const int64_t per_lane = (g1 - g0) / lanes;
      s.r0 = g0 * kRowGrain;
      s.lane_rows = per_lane * kRowGrain;
      s.round_groups = round_groups;
      // The last whole round's worth of groups (or fewer) as rounds of one group each
      s.big = per_lane > round_groups ? (per_lane - round_groups) / round_groups : 0;
      s.rounds = s.big + (per_lane - s.big * round_groups);
      s.rest0 = (g0 + lanes * per_lane) * kRowGrain;
      s.rest1 = t + 1 == n ? w.rows : g1 * kRowGrain;
      const int64_t items = s.rounds + (s.rest0 < s.rest1 ? 1 : 0);
      s.span.store(static_cast<uint64_t>(items), std::memory_order_relaxed);
    }
    auto items = [&](const Share& s, int64_t i0, int64_t i1) {
      const int64_t j1 = std::min(i1, s.rounds);
      if (i0 < j1) {
        const int64_t a = s.group_of(i0), b = s.group_of(j1);
        process(s.r0 + a * kRowGrain, s.lane_rows, (b - a) * kRowGrain);
      }
      if (i1 > s.rounds) rest(s.rest0, s.rest1);
    };
    auto own = [&](Share& s) {
      for (int64_t i0, i1; s.claim(false, &i0, &i1);) items(s, i0, i1);
    };
    auto job = [&](int64_t c, int) {
      for (int64_t k = 0; k < n; ++k) {
        Share& s = shares[(c + k) % n];
        if (!s.owned.exchange(true, std::memory_order_relaxed)) {
          own(s);
        } else {
          for (int64_t i0, i1; s.claim(true, &i0, &i1);) items(s, i0, i1);
        }
      }
    };
    pool.for_chunks_with_thread(n, std::cref(job));
  }

 private:
  // Weight bytes per round over all lanes. A thread claims half of the rounds left in its
  // share at a time (a claim is a locked instruction, which waits for the loads in flight:
  // one per round cost 0.5 us each), and the last round's worth of groups is in rounds of one
  // group each, so that the threads finish close together.
  static constexpr size_t kRoundBytes = size_t{256} << 10;

  struct Share {
    int64_t r0 = 0, lane_rows = 0, round_groups = 0, big = 0, rounds = 0, rest0 = 0, rest1 = 0;
    // The first group of a lane's round i (or, for i = rounds, its end)
    int64_t group_of(int64_t i) const {
      return i <= big ? i * round_groups : big * round_groups + (i - big);
    }
    // The items not yet claimed, [front, back), as front << 32 | back: rounds 0..rounds - 1,
    // then the rest if there is one.
    std::atomic<uint64_t> span{0};
    std::atomic<bool> owned{false};

    // Half of the items left (at least one), from the front (the owner) or the back.
    bool claim(bool back_end, int64_t* i0, int64_t* i1) {
      uint64_t cur = span.load(std::memory_order_relaxed);
      for (;;) {
        const uint64_t f = cur >> 32, b = cur & 0xFFFFFFFFu;
        if (f >= b) return false;
        const uint64_t k = std::max<uint64_t>(1, (b - f) / 2);
        const uint64_t next = back_end ? (f << 32) | (b - k) : ((f + k) << 32) | b;
        if (span.compare_exchange_weak(cur, next, std::memory_order_relaxed)) {
          *i0 = static_cast<int64_t>(back_end ? b - k : f);
          *i1 = *i0 + static_cast<int64_t>(k);
          return true;
        }
      }
    }
  };
};

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
  const int64_t packed = w.rows / 16 * 16;  // shares cut at multiples of kRowGrain (16)
  const int nx = static_cast<int>(n_rows);
  const size_t bytes = static_cast<size_t>(w.rows) * w.row_stride;
  const kern::StreamPick pick = kern::pick_stream_way(w.layout, nx, bytes);
  const auto start =
      pick.measure ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  auto rest = [&](int64_t b, int64_t e) {
    const int64_t pe = std::min(e, packed);
    if (b < pe) kern::x16_rows_avx512(w, preps, nx, y, w.rows, b, pe, pick.way, path);
    const int64_t t0 = std::max(b, pe);
    if (t0 >= e) return;
    if (n_rows == 1) return k.rows(w, preps[0], y, t0, e);
    if (k.multi[n_rows - 2]) return k.multi[n_rows - 2](w, preps, y, w.rows, t0, e);
    for (int64_t j = 0; j < n_rows; ++j) k.rows(w, preps[j], y + j * w.rows, t0, e);
  };
  if (runs_alone(w, pool)) {
    rest(0, w.rows);
  } else {
    LaneShares::run(
        w, pool, kern::stream_way_groups(pick.way),
        [&](int64_t r0, int64_t lane_rows, int64_t count) {
          kern::x16_lanes_avx512(w, preps, nx, y, w.rows, r0, lane_rows, count, pick.way, path);
        },
        rest);
  }
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
