#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "cachet/arena.h"
#include "cachet/dtype.h"
#include "cachet/error.h"
#include "cachet/half.h"
#include "cachet/profile.h"
#include "cachet/tensor.h"
#include "cachet/threadpool.h"
#include "core/sanitizers.h"

using namespace cachet;

TEST(DType, InfoAndNames) {
  EXPECT_EQ(dtype_info(DType::Q4_K).block_bytes, 144);
  EXPECT_EQ(dtype_info(DType::Q6_K).block_elems, 256);
  EXPECT_EQ(dtype_from_name("q8_0"), DType::Q8_0);
  EXPECT_EQ(dtype_from_name("bf16"), DType::BF16);
  EXPECT_FALSE(dtype_from_name("Q9_X").has_value());
  EXPECT_EQ(dtype_from_ggml(12), DType::Q4_K);
  EXPECT_FALSE(dtype_from_ggml(4).has_value());  // removed Q4_2
  EXPECT_EQ(row_bytes(DType::Q8_0, 64), 68u);
  EXPECT_THROW(row_bytes(DType::Q4_K, 100), Error);
}

TEST(Half, RoundTripAndRounding) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = f16_to_f32(static_cast<uint16_t>(h));
    if (f != f) continue;  // NaN payloads
    EXPECT_EQ(f32_to_f16(f), h) << h;
  }
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  // 1 + 2^-8 is halfway between two bf16 values: ties to even (down to 1.0).
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3f82);
  // Signalling NaNs come out quiet, keeping sign and top payload bits; infinities stay; the
  // largest float rounds up to infinity.
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x7f800001)), 0x7fc0);
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0xff810000)), 0xffc1);
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x7fc00000)), 0x7fc0);
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0xff800000)), 0xff80);
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x7f7fffff)), 0x7f80);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // rounds to infinity
}

TEST(Tensor, ZerosAndShape) {
  Tensor t = Tensor::zeros(DType::F32, {3, 4}, "x");
  EXPECT_EQ(t.numel(), 12);
  EXPECT_EQ(t.rows(), 3);
  EXPECT_EQ(t.cols(), 4);
  EXPECT_EQ(t.nbytes, 48u);
  EXPECT_EQ(t.dim(-1), 4);
  EXPECT_THROW(t.dim(2), Error);
  EXPECT_EQ(t.shape_str(), "[3, 4]");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 64, 0u);
  EXPECT_THROW(tensor_bytes(DType::Q4_0, {2, 33}), Error);
}

// Resident memory of this process in KiB (VmRSS), or -1.
static long rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

// Under AddressSanitizer weight_buffer gives heap blocks of their own (red zones, quarantine).
constexpr bool kAsan = kAddressSanitizer;

TEST(WeightBuffer, BuffersLieBackToBack) {
  if (kAsan) GTEST_SKIP() << "AddressSanitizer: each buffer on the heap";
  // A matrix not a multiple of 2 MiB, then the next: no gap between them, so the first does
  // not end in a partial huge page of its own
  const size_t first = (size_t{3} << 20) + 100;
  auto a = weight_buffer(first);
  auto b = weight_buffer(1000);
  auto c = weight_buffer(64);
  const auto pa = reinterpret_cast<uintptr_t>(a.get()), pb = reinterpret_cast<uintptr_t>(b.get());
  EXPECT_EQ(pa % 64, 0u);
  EXPECT_EQ(pb, pa + (first + 63) / 64 * 64);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c.get()), pb + 1024);
  std::memset(a.get(), 1, first);  // writable, to the last byte
  std::memset(b.get(), 2, 1000);
  EXPECT_EQ(static_cast<const uint8_t*>(a.get())[first - 1], 1);
  EXPECT_EQ(static_cast<const uint8_t*>(b.get())[0], 2);
}

TEST(WeightBuffer, ReleasedBuffersGiveTheirMemoryBack) {
  if (kAsan) GTEST_SKIP() << "AddressSanitizer: released blocks wait in its quarantine";
  const long base = rss_kib();
  if (base < 0) GTEST_SKIP() << "no /proc/self/status";
  const size_t bytes = size_t{64} << 20;
  auto keep = weight_buffer(4096);  // the region outlives the buffer: its pages go back alone
  for (int round = 0; round < 2; ++round) {
    {
      auto w = weight_buffer(bytes);
      std::memset(w.get(), 7, bytes);
      EXPECT_GE(rss_kib(), base + 60 * 1024) << "round " << round;
    }
    EXPECT_LT(rss_kib(), base + 8 * 1024) << "round " << round;
    keep.reset();  // the second round: the last buffer of its region, which is unmapped
  }
}

TEST(WeightBuffer, BuffersFromSeveralThreadsNeverOverlap) {
  // Each thread fills its buffers with its own byte, then checks every byte once all threads
  // are done; released in a different order than taken.
  constexpr int kThreads = 4, kEach = 4000;
  std::vector<std::vector<std::pair<std::shared_ptr<void>, size_t>>> bufs(kThreads);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&bufs, t] {
      for (int i = 0; i < kEach; ++i) {
        const size_t n = 1 + static_cast<size_t>((i * 7919 + t * 104729) % 5000);
        auto b = weight_buffer(n);
        std::memset(b.get(), t + 1, n);
        bufs[static_cast<size_t>(t)].emplace_back(std::move(b), n);
      }
    });
  for (auto& th : ts) th.join();
  for (int t = 0; t < kThreads; ++t)
    for (const auto& [b, n] : bufs[static_cast<size_t>(t)]) {
      const auto* p = static_cast<const uint8_t*>(b.get());
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
      size_t bad = 0;
      for (size_t i = 0; i < n; ++i) bad += p[i] != t + 1;
      EXPECT_EQ(bad, 0u) << "thread " << t << ", a buffer of " << n << " bytes";
    }
  for (int i = kEach - 1; i >= 0; --i)
    for (auto& v : bufs) v[static_cast<size_t>(i)].first.reset();
}

TEST(Arena, NoHeapAfterFirstCycle) {
  Arena a(1024);
  for (int cycle = 0; cycle < 3; ++cycle) {
    a.reset();
    size_t before = a.heap_allocations();
    for (int i = 0; i < 10; ++i) {
      float* p = a.alloc<float>(1000);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
      p[999] = 1.0f;
    }
    if (cycle >= 2) {
      EXPECT_EQ(a.heap_allocations(), before);
    }
  }
}

// Off, scopes record nothing; on, each phase's calls, time and bytes add up, in the order the
// phases were first seen, and take() hands them over once.
TEST(Profile, RecordsPhasesOnlyWhileOn) {
  profile::take();
  profile::set_enabled(false);
  { profile::Scope s("off", 10); }
  EXPECT_TRUE(profile::take().empty());

  profile::set_enabled(true);
  {
    profile::Scope s("b", 100);
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  { profile::Scope s("a"); }
  { profile::Scope s("b", 50); }
  profile::set_enabled(false);
  { profile::Scope s("b", 1); }
  const std::vector<profile::Phase> got = profile::take();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].name, "b");
  EXPECT_EQ(got[0].calls, 2);
  EXPECT_EQ(got[0].bytes, 150.0);
  EXPECT_GE(got[0].seconds, 0.003);
  EXPECT_EQ(got[1].name, "a");
  EXPECT_EQ(got[1].calls, 1);
  EXPECT_EQ(got[1].bytes, 0.0);
  EXPECT_TRUE(profile::take().empty());

  // A scope begun while profiling was off stays unrecorded if it is turned on meanwhile.
  {
    profile::Scope s("late", 5);
    profile::set_enabled(true);
  }
  profile::set_enabled(false);
  EXPECT_TRUE(profile::take().empty());
}

TEST(ThreadPool, RunsEveryThreadAndSplitsExactly) {
  for (int n : {1, 2, 3, 8}) {
    ThreadPool pool(n);
    std::atomic<int> calls{0};
    pool.run([&](int i, int k) {
      EXPECT_EQ(k, n);
      EXPECT_LT(i, n);
      calls++;
    });
    EXPECT_EQ(calls.load(), n);
    std::vector<int> hit(1000, 0);
    for (int rep = 0; rep < 50; ++rep)
      pool.parallel_for(1000, 16, [&](int64_t b, int64_t e) {
        EXPECT_EQ(b % 16, 0);
        for (int64_t i = b; i < e; ++i) hit[i]++;
      });
    for (int h : hit) EXPECT_EQ(h, 50);
  }
}

TEST(ThreadPool, RunGivesEachIndexExactlyOnceWhileChunkJobsSkipLateWorkers) {
  // Alternating static runs (every index must run once) with chunk jobs that a worker may
  // miss entirely, many times, so that late workers meet the next job.
  for (int n : {2, 3, 5}) {
    ThreadPool pool(n);
    for (int rep = 0; rep < 300; ++rep) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      pool.run([&](int i, int k) {
        EXPECT_EQ(k, n);
        seen[static_cast<size_t>(i)]++;
      });
      for (auto& s : seen) ASSERT_EQ(s.load(), 1) << "threads " << n << " rep " << rep;
      const int64_t chunks = 1 + rep % 7;
      std::vector<std::atomic<int>> hit(static_cast<size_t>(chunks));
      pool.for_chunks(chunks, [&](int64_t c) {
        if (rep % 50 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
        hit[static_cast<size_t>(c)]++;
      });
      for (auto& h : hit) ASSERT_EQ(h.load(), 1) << "threads " << n << " rep " << rep;
    }
  }
}

TEST(ThreadPool, ChunkJobsWithThreadNeverShareAThreadIndex) {
  // Each chunk sees the index of the thread running it: no two chunks run at the same time
  // with the same index (per-thread scratch is safe), and every index is below size().
  for (int n : {1, 2, 3}) {
    ThreadPool pool(n);
    for (int rep = 0; rep < 200; ++rep) {
      const int64_t chunks = 1 + rep % 13;
      std::vector<std::atomic<int>> busy(static_cast<size_t>(n)), hit(static_cast<size_t>(chunks));
      std::atomic<int> clashes{0};
      pool.for_chunks_with_thread(chunks, [&](int64_t c, int tid) {
        ASSERT_GE(tid, 0);
        ASSERT_LT(tid, n);
        if (busy[static_cast<size_t>(tid)]++ != 0) clashes++;
        if (rep % 40 == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
        busy[static_cast<size_t>(tid)]--;
        hit[static_cast<size_t>(c)]++;
      });
      EXPECT_EQ(clashes.load(), 0);
      for (auto& h : hit) ASSERT_EQ(h.load(), 1) << "threads " << n << " rep " << rep;
    }
  }
}

TEST(ThreadPool, ChunkJobsPropagateExceptions) {
  ThreadPool pool(3);
  EXPECT_THROW(pool.for_chunks(10,
                               [](int64_t c) {
                                 if (c == 7) fail("chunk boom");
                               }),
               Error);
  std::atomic<int> c{0};
  pool.for_chunks(10, [&](int64_t) { c++; });
  EXPECT_EQ(c.load(), 10);
}

TEST(ThreadPool, PropagatesExceptions) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.run([](int i, int) {
    if (i == 1) fail("boom");
  }),
               Error);
  // still usable
  std::atomic<int> c{0};
  pool.run([&](int, int) { c++; });
  EXPECT_EQ(c.load(), 2);
}
