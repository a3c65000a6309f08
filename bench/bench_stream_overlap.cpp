// How far vector work per 64-byte line slows a streaming read: each thread reads its own
// 512 MiB (or, with /cache, the same 512 KiB again and again) in S streams side by side, one
// vpdpbusd per line on the loaded bytes plus K more on registers (independent chains), and
// reports bytes read per second. A kernel that needs w ops per line and runs at c GB/s from
// cache reads memory at about what K = w - 1 gives here, not at min(c, bandwidth).
//   bench_stream_overlap --benchmark_filter='Stream/' --benchmark_min_time=1
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

template <int S, int K>
void Stream(benchmark::State& state) {
  if (!cachet::cpu_features().avx512vnni) {
    state.SkipWithError("needs AVX-512 VNNI");
    return;
  }
  const bool cache = state.range(0) != 0;
  const size_t bytes = cache ? kCacheBytes : kMemBytes;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(size_t{2} << 20, bytes));
  madvise(p, bytes, MADV_HUGEPAGE);
  std::memset(p, 1, bytes);
  for (auto _ : state) benchmark::DoNotOptimize(read_lines<S, K>(p, bytes));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(bytes));
  std::free(p);
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

}  // namespace
