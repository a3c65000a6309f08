#include "bandwidth.h"

#include <immintrin.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cachet/cpu.h"
#include "cachet/error.h"
#include "cachet/tensor.h"
#include "cachet/threadpool.h"

namespace cachet::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// XOR of [p, p + n) read as S streams at once, each a contiguous 1/S of the range (rounded
// down to 64 bytes): the access pattern of kernels that read several weight rows or groups of
// rows side by side.
template <int S>
__attribute__((target("avx2"))) uint64_t sum_avx2(const uint8_t* p, size_t n) {
  const size_t q = n / S / 64 * 64;
  __m256i a[S][2];
  for (int s = 0; s < S; ++s) a[s][0] = a[s][1] = _mm256_setzero_si256();
  for (size_t i = 0; i + 64 <= q; i += 64)
    for (int s = 0; s < S; ++s)
      for (int h = 0; h < 2; ++h)
        a[s][h] = _mm256_xor_si256(
            a[s][h], _mm256_load_si256(reinterpret_cast<const __m256i*>(p + s * q + i + 32 * h)));
  __m256i x = _mm256_setzero_si256();
  for (int s = 0; s < S; ++s) x = _mm256_xor_si256(x, _mm256_xor_si256(a[s][0], a[s][1]));
  return static_cast<uint64_t>(_mm256_extract_epi64(x, 0) ^ _mm256_extract_epi64(x, 3));
}

uint64_t sum_scalar(const uint8_t* p, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    s ^= v;
  }
  return s;
}

uint64_t sum(int streams, const uint8_t* p, size_t n) {
  if (!cpu_features().avx2) return sum_scalar(p, n);
  switch (streams) {
    case 1:
      return sum_avx2<1>(p, n);
    case 2:
      return sum_avx2<2>(p, n);
    default:
      return sum_avx2<4>(p, n);
  }
}

// The probes' buffer, made once and kept to the end of the process. Freed after each probe, it
// went back to the kernel just before the figure that follows, and a host that takes back the
// free memory of its guests (virtio-balloon free page reporting, in passes two seconds apart)
// then slowed that figure's steps: RecurrentGemma-2B Q4_K steps of 80-97 ms among steps of
// 51 ms, 2 s, 4 s and 6 s into each timed figure, and none with the buffer kept
// (docs/performance-log.md).
size_t g_probe_bytes = 0;

void* probe_buffer(size_t bytes) {
  static std::shared_ptr<void> buf;
  if (!buf) {
    buf = aligned_buffer(bytes);
    g_probe_bytes = bytes;
  }
  CACHET_CHECK(g_probe_bytes == bytes, "bandwidth probe: one buffer size per process");
  return buf.get();
}

Bandwidth measure(ThreadPool& pool, double seconds, bool bursts) {
  constexpr size_t kSlice = size_t{128} << 20;
  constexpr size_t kChunk = size_t{1} << 20;
  const size_t bytes = size_t{1} << 30;
  const size_t slices = bytes / kSlice;
  auto* p = static_cast<uint8_t*>(probe_buffer(bytes));
  pool.parallel_for(static_cast<int64_t>(bytes), 1 << 20, [&](int64_t b, int64_t e) {
    std::memset(p + b, 1, static_cast<size_t>(e - b));
  });
  std::vector<uint64_t> sink(static_cast<size_t>(pool.size()));
  Bandwidth bw;

  // Whole passes over the buffer, in turn: (0) threads claim 1 MiB chunks one at a time, as
  // matvec splits a matrix, and read each as two streams; (1) likewise as one stream; (2) each
  // thread reads its contiguous share as four streams. Which is fastest varies between
  // machines and runs (docs/architecture.md, "Streams from memory").
  auto pass = [&](int pattern) {
    const auto t0 = Clock::now();
    if (pattern < 2) {
      const int streams = pattern == 0 ? 2 : 1;
      pool.for_chunks_with_thread(static_cast<int64_t>(bytes / kChunk), [&](int64_t c, int tid) {
        sink[static_cast<size_t>(tid)] += sum(streams, p + static_cast<size_t>(c) * kChunk, kChunk);
      });
    } else {
      pool.run([&](int i, int k) {
        int64_t b, e;
        ThreadPool::split(static_cast<int64_t>(bytes), 4096, i, k, &b, &e);
        sink[static_cast<size_t>(i)] += sum(4, p + b, static_cast<size_t>(e - b));
      });
    }
    return static_cast<double>(bytes) / seconds_since(t0) / 1e9;
  };
  const auto start = Clock::now();
  for (int i = 0; i < 12 || seconds_since(start) < seconds; ++i)
    bw.sustained_gbs = std::max(bw.sustained_gbs, pass(i % 3));

  // Bursts: one 128 MiB slice per call, rotating over the slices (so each comes from memory).
  for (size_t call = 0; bursts && call < 4 * slices; ++call) {
    const uint8_t* slice = p + (call % slices) * kSlice;
    const int streams = (call / slices) % 2 == 1 ? 4 : 1;
    const auto t0 = Clock::now();
    pool.run([&](int i, int k) {
      int64_t b, e;
      ThreadPool::split(static_cast<int64_t>(kSlice), 4096, i, k, &b, &e);
      sink[static_cast<size_t>(i)] += sum(streams, slice + b, static_cast<size_t>(e - b));
    });
    bw.burst_gbs = std::max(bw.burst_gbs, static_cast<double>(kSlice) / seconds_since(t0) / 1e9);
  }
  volatile uint64_t keep = 0;
  for (auto v : sink) keep = keep ^ v;
  (void)keep;
  return bw;
}

// VmHWM of /proc/self/status in KiB (0 when unreadable).
long vm_hwm_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atol(line.c_str() + 6);
  return 0;
}

long g_peak_before_probes_kib = 0;

}  // namespace

double probe_buffer_gib() {
  return static_cast<double>(g_probe_bytes) / (1024.0 * 1024.0 * 1024.0);
}

double peak_rss_gib() {
  const long probe_kib = static_cast<long>(g_probe_bytes / 1024);
  return static_cast<double>(std::max(g_peak_before_probes_kib, vm_hwm_kib() - probe_kib)) /
         (1024.0 * 1024.0);
}

Bandwidth measure_bandwidth(ThreadPool& pool, double seconds, bool bursts) {
  g_peak_before_probes_kib =
      std::max(g_peak_before_probes_kib, vm_hwm_kib() - static_cast<long>(g_probe_bytes / 1024));
  Bandwidth bw = measure(pool, seconds, bursts);
  std::ofstream("/proc/self/clear_refs") << "5";  // high-water mark back to the current RSS
  return bw;
}

double print_bandwidth(ThreadPool& pool) {
  const Bandwidth bw = measure_bandwidth(pool);
  std::printf("bandwidth: %.1f GB/s\n", bw.sustained_gbs);
  std::printf("burst bandwidth: %.1f GB/s (fastest 128 MiB read; not the roofline)\n",
              bw.burst_gbs);
  std::fflush(stdout);
  return bw.sustained_gbs;
}

StealMark steal_mark() {
  StealMark m;
  m.wall = std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  std::ifstream in("/proc/stat");
  std::string cpu;
  // cpu  user nice system idle iowait irq softirq steal ... (in clock ticks)
  unsigned long long v[8] = {};
  if (!(in >> cpu) || cpu != "cpu") return m;
  for (unsigned long long& x : v)
    if (!(in >> x)) return m;
  const long hz = sysconf(_SC_CLK_TCK);
  if (hz > 0) m.steal = static_cast<double>(v[7]) / static_cast<double>(hz);
  return m;
}

void print_steal(const StealMark& from, const StealMark& to, const char* label) {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (from.steal < 0 || to.steal < 0 || cpus <= 0) return;
  const double total = (to.wall - from.wall) * static_cast<double>(cpus);
  const double stolen = to.steal - from.steal;
  std::printf("host steal: %.1f%% of the CPU time while %s (%.2f of %.1f CPU-seconds)\n",
              total > 0 ? 100.0 * stolen / total : 0.0, label, stolen, total);
  std::fflush(stdout);
}

void print_probes(const Probes& p, const char* what) {
  std::printf(
      "bandwidth: %.1f GB/s (the higher of the probes just before and after %s: %.1f, "
      "%.1f GB/s)\n",
      p.best(), what, p.before, p.after);
  std::fflush(stdout);
}

}  // namespace cachet::cli
