#include "bandwidth.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cachet/cpu.h"
#include "cachet/tensor.h"
#include "cachet/threadpool.h"

namespace cachet::cli {
namespace {

__attribute__((target("avx2"))) uint64_t sum_avx2(const uint8_t* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 128 <= n; i += 128) {
    a0 = _mm256_xor_si256(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_xor_si256(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_xor_si256(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_xor_si256(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  a0 = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
  return static_cast<uint64_t>(_mm256_extract_epi64(a0, 0) ^ _mm256_extract_epi64(a0, 3));
}

// Four streams at once, each a quarter of the range: the access pattern of matvec kernels that
// run four weight rows together, which keeps more of the hardware prefetchers busy.
__attribute__((target("avx2"))) uint64_t sum4_avx2(const uint8_t* p, size_t n) {
  const size_t q = n / 4 / 64 * 64;
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 64 <= q; i += 64) {
    const uint8_t* s = p + i;
    a0 = _mm256_xor_si256(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(s)));
    a0 = _mm256_xor_si256(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(s + 32)));
    a1 = _mm256_xor_si256(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(s + q)));
    a1 = _mm256_xor_si256(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(s + q + 32)));
    a2 = _mm256_xor_si256(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(s + 2 * q)));
    a2 = _mm256_xor_si256(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(s + 2 * q + 32)));
    a3 = _mm256_xor_si256(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(s + 3 * q)));
    a3 = _mm256_xor_si256(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(s + 3 * q + 32)));
  }
  a0 = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
  return static_cast<uint64_t>(_mm256_extract_epi64(a0, 0) ^ _mm256_extract_epi64(a0, 3));
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

}  // namespace

double measure_bandwidth_gbs(ThreadPool& pool, double gib) {
  // The buffer is cut into slices of kSlice bytes. Each timed call streams one slice with every
  // thread, the calls rotate over the slices (so each comes from memory, not cache), and the
  // fastest call counts: the same method as the matvec benchmark uses for weight matrices, so
  // the two figures compare like with like. Calls alternate between one stream and four
  // streams per thread; the result is the best of either.
  constexpr size_t kSlice = size_t{128} << 20;
  const size_t bytes = static_cast<size_t>(std::max(gib, 1.0) * (1ull << 30)) / kSlice * kSlice;
  const size_t slices = bytes / kSlice;
  auto buf = aligned_buffer(bytes);
  auto* p = static_cast<uint8_t*>(buf.get());
  pool.parallel_for(static_cast<int64_t>(bytes), 1 << 20, [&](int64_t b, int64_t e) {
    std::memset(p + b, 1, static_cast<size_t>(e - b));
  });
  const bool avx2 = cpu_features().avx2;
  std::vector<uint64_t> sink(pool.size());
  double best = 0;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  for (size_t call = 0; call < 4 * slices || elapsed() < 1.0; ++call) {
    const uint8_t* slice = p + (call % slices) * kSlice;
    const bool four = (call / slices) % 2 == 1;
    const auto t0 = std::chrono::steady_clock::now();
    pool.run([&](int i, int k) {
      int64_t b, e;
      ThreadPool::split(static_cast<int64_t>(kSlice), 4096, i, k, &b, &e);
      const uint8_t* q = slice + b;
      const size_t n = static_cast<size_t>(e - b);
      sink[i] += !avx2 ? sum_scalar(q, n) : four ? sum4_avx2(q, n) : sum_avx2(q, n);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(kSlice) / s / 1e9);
  }
  volatile uint64_t keep = 0;
  for (auto v : sink) keep = keep ^ v;
  (void)keep;
  return best;
}

}  // namespace cachet::cli
