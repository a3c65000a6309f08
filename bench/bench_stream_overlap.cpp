// How far vector work per 64-byte line slows a streaming read, with 2 threads each reading its
// own 512 MiB (or, with cache:1, the same 512 KiB again and again):
// - Stream<S, K>: S streams side by side, one vpdpbusd per line on the loaded bytes plus K
//   more on registers (independent chains). A kernel that needs w ops per line and runs at
//   c GB/s from cache reads memory at about what K = w - 1 gives here, not at
//   min(c, bandwidth).
// - Stream256<S, K>: the same with 256-bit loads and vpdpbusd (two per line, 2K more), and
//   StreamMixed<S, K>: 256-bit loads and vpdpbusd on the loaded bytes, K 512-bit vpdpbusd
//   on registers. On the host measured both streamed 8-10% faster than Stream<1, 4> (32 against
//   29.5 GiB/s): the load width mattered, not the width of the arithmetic. A Q4_K kernel
//   reading its nibbles by 256-bit loads did not gain, though (docs/architecture.md).
// - Loads/...: one stream read by 256- or 512-bit loads, with adds or vpdpbusd.
//   bench_stream_overlap --benchmark_min_time=1
// GCC 12's AVX-512 intrinsic headers trip -Wmaybe-uninitialized once inlined (as in the
// kernels' AVX-512 files); the values are never read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cachet/cpu.h"

namespace {

constexpr size_t kMemBytes = size_t{512} << 20, kCacheBytes = size_t{512} << 10;

template <int S, int K>
[[gnu::target("avx512f,avx512bw,avx512vnni"), gnu::noinline]] int read_lines(const uint8_t* p,
                                                                             size_t n) {
  __m512i a[S], r[8];
  for (int s = 0; s < S; ++s) a[s] = _mm512_setzero_si512();
  for (int i = 0; i < 8; ++i) r[i] = _mm512_set1_epi32(i + 1);
  const __m512i x = _mm512_set1_epi32(0x01020304), y = _mm512_set1_epi32(0x05060708);
  const size_t per = n / S;
  int rr = 0;
  for (size_t i = 0; i < per; i += 64)
    for (int s = 0; s < S; ++s) {
      a[s] = _mm512_dpbusd_epi32(a[s], _mm512_load_si512(p + s * per + i), x);
      for (int k = 0; k < K; ++k) {
        r[rr] = _mm512_dpbusd_epi32(r[rr], x, y);
        rr = (rr + 1) & 7;
      }
    }
  __m512i t = r[0];
  for (int s = 0; s < S; ++s) t = _mm512_add_epi32(t, a[s]);
  for (int i = 1; i < 8; ++i) t = _mm512_add_epi32(t, r[i]);
  alignas(64) int32_t v[16];
  _mm512_store_si512(v, t);
  int sum = 0;
  for (int32_t e : v) sum += e;
  return sum;
}

// The register type of read_lines256's extra work.
template <bool Wide>
struct RegOf {
  using T = __m256i;
};
template <>
struct RegOf<true> {
  using T = __m512i;
};

// read_lines with 256-bit loads and vpdpbusd on the loaded bytes (two per line), plus 2K more
// 256-bit vpdpbusd on registers per line, or (Wide) K 512-bit ones.
template <int S, int K, bool Wide>
[[gnu::target("avx512f,avx512bw,avx512vl,avx512vnni"), gnu::noinline]] int read_lines256(
    const uint8_t* p, size_t n) {
  using Reg = typename RegOf<Wide>::T;
  __m256i a[S];
  Reg r[8];
  for (int s = 0; s < S; ++s) a[s] = _mm256_setzero_si256();
  for (int i = 0; i < 8; ++i) {
    if constexpr (Wide)
      r[i] = _mm512_set1_epi32(i + 1);
    else
      r[i] = _mm256_set1_epi32(i + 1);
  }
  const __m256i x = _mm256_set1_epi32(0x01020304), y = _mm256_set1_epi32(0x05060708);
  const __m512i x5 = _mm512_set1_epi32(0x01020304), y5 = _mm512_set1_epi32(0x05060708);
  const size_t per = n / S;
  int rr = 0;
  for (size_t i = 0; i < per; i += 64)
    for (int s = 0; s < S; ++s) {
      const uint8_t* q = p + s * per + i;
      a[s] = _mm256_dpbusd_epi32(a[s], _mm256_load_si256(reinterpret_cast<const __m256i*>(q)), x);
      a[s] =
          _mm256_dpbusd_epi32(a[s], _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 32)), x);
      for (int k = 0; k < (Wide ? K : 2 * K); ++k) {
        if constexpr (Wide)
          r[rr] = _mm512_dpbusd_epi32(r[rr], x5, y5);
        else
          r[rr] = _mm256_dpbusd_epi32(r[rr], x, y);
        rr = (rr + 1) & 7;
      }
    }
  alignas(64) int32_t v[sizeof(Reg) / 4];
  alignas(32) int32_t w[8];
  Reg t = r[0];
  for (int i = 1; i < 8; ++i) {
    if constexpr (Wide)
      t = _mm512_add_epi32(t, r[i]);
    else
      t = _mm256_add_epi32(t, r[i]);
  }
  std::memcpy(v, &t, sizeof t);
  __m256i u = a[0];
  for (int s = 1; s < S; ++s) u = _mm256_add_epi32(u, a[s]);
  _mm256_store_si256(reinterpret_cast<__m256i*>(w), u);
  int sum = 0;
  for (int32_t e : v) sum += e;
  for (int32_t e : w) sum += e;
  return sum;
}

[[gnu::target("avx512f")]] inline __m256i l256(const uint8_t* p, size_t i) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i));
}
[[gnu::target("avx512f")]] inline __m512i join(const uint8_t* p, size_t i) {
  return _mm512_inserti64x4(_mm512_zextsi256_si512(l256(p, i)), l256(p, i + 32), 1);
}

// One stream read 128 bytes at a time in one of four ways: 0: 256-bit loads and adds,
// 1: 512-bit loads and adds, 2: 512-bit loads and vpdpbusd, 3: pairs of 256-bit loads joined
// into 512-bit vectors and vpdpbusd.
template <int Way>
[[gnu::target("avx512f,avx512bw,avx512vnni"), gnu::noinline]] int read_way(const uint8_t* p,
                                                                           size_t n) {
  __m512i a = _mm512_setzero_si512(), b = a;
  __m256i c = _mm256_setzero_si256(), d = c, e = c, f = c;
  const __m512i x = _mm512_set1_epi32(0x01020304);
  for (size_t i = 0; i < n; i += 128) {
    if constexpr (Way == 0) {
      c = _mm256_add_epi32(c, l256(p, i));
      d = _mm256_add_epi32(d, l256(p, i + 32));
      e = _mm256_add_epi32(e, l256(p, i + 64));
      f = _mm256_add_epi32(f, l256(p, i + 96));
    } else if constexpr (Way == 1) {
      a = _mm512_add_epi32(a, _mm512_load_si512(p + i));
      b = _mm512_add_epi32(b, _mm512_load_si512(p + i + 64));
    } else if constexpr (Way == 2) {
      a = _mm512_dpbusd_epi32(a, _mm512_load_si512(p + i), x);
      b = _mm512_dpbusd_epi32(b, _mm512_load_si512(p + i + 64), x);
    } else {
      a = _mm512_dpbusd_epi32(a, join(p, i), x);
      b = _mm512_dpbusd_epi32(b, join(p, i + 64), x);
    }
  }
  alignas(64) int32_t v[16];
  _mm512_store_si512(v, _mm512_add_epi32(a, b));
  alignas(32) int32_t w[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(w),
                     _mm256_add_epi32(_mm256_add_epi32(c, d), _mm256_add_epi32(e, f)));
  int sum = 0;
  for (int32_t q : v) sum += q;
  for (int32_t q : w) sum += q;
  return sum;
}

template <typename Fn>
void stream_bytes(benchmark::State& state, size_t bytes, Fn read) {
  if (!cachet::cpu_features().avx512vnni) {
    state.SkipWithError("needs AVX-512 VNNI");
    return;
  }
  constexpr size_t kAlign = size_t{2} << 20;  // huge pages; aligned_alloc wants a multiple
  auto* p =
      static_cast<uint8_t*>(std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign));
  if (!p) {
    state.SkipWithError("out of memory");
    return;
  }
  madvise(p, bytes, MADV_HUGEPAGE);
  std::memset(p, 1, bytes);
  for (auto _ : state) benchmark::DoNotOptimize(read(p, bytes));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
  std::free(p);
}

template <int Way>
void Loads(benchmark::State& state) {
  stream_bytes(state, kMemBytes, read_way<Way>);
}
BENCHMARK(Loads<0>)->Name("Loads/add256")->Threads(2)->UseRealTime();
BENCHMARK(Loads<1>)->Name("Loads/add512")->Threads(2)->UseRealTime();
BENCHMARK(Loads<2>)->Name("Loads/dpbusd512")->Threads(2)->UseRealTime();
BENCHMARK(Loads<3>)->Name("Loads/2x256_dpbusd512")->Threads(2)->UseRealTime();

template <int S, int K>
void Stream(benchmark::State& state) {
  stream_bytes(state, state.range(0) != 0 ? kCacheBytes : kMemBytes, read_lines<S, K>);
}

#define CACHET_STREAM(S, K) \
  BENCHMARK(Stream<S, K>)->ArgName("cache")->Arg(0)->Arg(1)->Threads(2)->UseRealTime();
CACHET_STREAM(1, 0)
CACHET_STREAM(4, 0)
CACHET_STREAM(1, 4)
CACHET_STREAM(4, 4)
CACHET_STREAM(8, 4)
CACHET_STREAM(4, 8)
CACHET_STREAM(8, 8)

template <int S, int K, bool Wide>
void Stream256(benchmark::State& state) {
  stream_bytes(state, state.range(0) != 0 ? kCacheBytes : kMemBytes, read_lines256<S, K, Wide>);
}
#define CACHET_STREAM256(S, K) \
  BENCHMARK(Stream256<S, K, false>)->ArgName("cache")->Arg(0)->Arg(1)->Threads(2)->UseRealTime();
CACHET_STREAM256(1, 0)
CACHET_STREAM256(4, 0)
CACHET_STREAM256(1, 4)
CACHET_STREAM256(4, 4)
CACHET_STREAM256(4, 8)
BENCHMARK(Stream256<1, 4, true>)
    ->Name("StreamMixed<1, 4>")
    ->ArgName("cache")
    ->Arg(0)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(Stream256<1, 1, true>)
    ->Name("StreamMixed<1, 1>")
    ->ArgName("cache")
    ->Arg(0)
    ->Threads(2)
    ->UseRealTime();

}  // namespace
