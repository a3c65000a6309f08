#include "cachet/threadpool.h"

#include <immintrin.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <system_error>

#include "cachet/error.h"

namespace cachet {
namespace {
inline void cpu_relax() {
  _mm_pause();
}
constexpr int kSpinIterations = 1 << 16;

// The pool whose job this thread is running, and its index in that job: a job that asks the
// same pool for more work runs that work itself, in order (the pool is busy with the job).
thread_local const ThreadPool* t_pool = nullptr;
thread_local int t_index = 0;
struct InPool {
  const ThreadPool* pool;
  int index;
  InPool(const ThreadPool* p, int i) : pool(t_pool), index(t_index) {
    t_pool = p;
    t_index = i;
  }
  ~InPool() {
    t_pool = pool;
    t_index = index;
  }
};
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::thread::hardware_concurrency());
  if (n_threads <= 0) n_threads = 1;
  n_threads_ = n_threads;
  try {
    threads_.reserve(static_cast<size_t>(n_threads_ - 1));
    for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this] { worker(); });
  } catch (const std::exception& e) {
    // The threads started so far are stopped and joined: a half-built pool is not left behind
    const int started = static_cast<int>(threads_.size()) + 1;
    stop_threads();
    fail("cannot start ", n_threads_, " threads (started ", started, "): ", e.what());
  }
}

void ThreadPool::stop_threads() {
  stop_.store(true);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

ThreadPool::~ThreadPool() {
  stop_threads();
}

void ThreadPool::worker() {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    for (int spin = 0; g == seen && spin < kSpinIterations; ++spin) {
      cpu_relax();
      g = generation_.load(std::memory_order_acquire);
    }
    while (g == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load()) return;
    // The ticket is this job's thread index; none left: the job is done or withdrawn.
    const int ticket = tickets_.fetch_sub(1, std::memory_order_acq_rel);
    if (ticket <= 0) continue;
    try {
      const InPool in(this, ticket);
      (*job_)(ticket, n_threads_);
    } catch (...) {
      bool expected = false;
      if (has_error_.compare_exchange_strong(expected, true)) error_ = std::current_exception();
    }
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::dispatch(const std::function<void(int, int)>& job, bool skippable) {
  job_ = &job;
  has_error_.store(false);
  error_ = nullptr;
  pending_.store(n_threads_ - 1, std::memory_order_release);
  tickets_.store(n_threads_ - 1, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  std::exception_ptr mine;
  try {
    const InPool in(this, 0);
    job(0, n_threads_);
  } catch (...) {
    mine = std::current_exception();
  }
  if (skippable) {
    const int unclaimed = tickets_.exchange(0, std::memory_order_acq_rel);
    if (unclaimed > 0) pending_.fetch_sub(unclaimed, std::memory_order_acq_rel);
  }
  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kSpinIterations)
      cpu_relax();
    else
      std::this_thread::yield();
  }
  job_ = nullptr;
  if (mine) std::rethrow_exception(mine);
  if (has_error_.load()) std::rethrow_exception(error_);
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  if (t_pool == this) {  // from inside one of this pool's jobs
    for (int i = 0; i < n_threads_; ++i) fn(i, n_threads_);
    return;
  }
  const std::lock_guard<std::mutex> lock(entry_mu_);  // one caller's job at a time
  dispatch(fn, false);
}

void ThreadPool::for_chunks(int64_t n_chunks, const std::function<void(int64_t)>& fn) {
  const auto with_thread = [&](int64_t c, int) { fn(c); };
  for_chunks_with_thread(n_chunks, std::cref(with_thread));
}

void ThreadPool::for_chunks_with_thread(int64_t n_chunks,
                                        const std::function<void(int64_t, int)>& fn) {
  if (n_chunks <= 0) return;
  if (n_threads_ == 1 || n_chunks == 1 || t_pool == this) {
    const int tid = t_pool == this ? t_index : 0;
    for (int64_t c = 0; c < n_chunks; ++c) fn(c, tid);
    return;
  }
  const std::lock_guard<std::mutex> lock(entry_mu_);  // one caller's job at a time
  next_chunk_.store(0, std::memory_order_relaxed);
  const auto job = [&](int tid, int) {
    for (int64_t c; (c = next_chunk_.fetch_add(1, std::memory_order_relaxed)) < n_chunks;)
      fn(c, tid);
  };
  dispatch(std::cref(job), true);
}

void ThreadPool::split(int64_t n, int64_t grain, int i, int k, int64_t* begin, int64_t* end) {
  if (grain < 1) grain = 1;
  const int64_t units = (n + grain - 1) / grain;
  const int64_t b = units * i / k, e = units * (i + 1) / k;
  *begin = b * grain < n ? b * grain : n;
  *end = e * grain < n ? e * grain : n;
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (n_threads_ == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  // A few chunks per thread, so that threads that run faster take more of them.
  const int64_t units = (n + grain - 1) / grain;
  const int64_t chunks = std::min<int64_t>(units, 4 * static_cast<int64_t>(n_threads_));
  const auto chunk = [&](int64_t c) {
    int64_t b, e;
    split(units, 1, static_cast<int>(c), static_cast<int>(chunks), &b, &e);
    b *= grain;
    e = std::min(n, e * grain);
    if (b < e) fn(b, e);
  };
  for_chunks(chunks, std::cref(chunk));  // by reference: no allocation per call
}

namespace {
std::mutex g_pool_mu;
int g_default_threads = 0;
std::unique_ptr<ThreadPool> g_pool;
}  // namespace

ThreadPool& default_pool() {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  if (!g_pool) g_pool = std::make_unique<ThreadPool>(g_default_threads);
  return *g_pool;
}

ThreadPool& serial_pool() {
  static ThreadPool pool(1);  // no worker threads: every job runs on the caller
  return pool;
}

void set_default_threads(int n) {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  if (g_pool &&
      (n <= 0 ? static_cast<int>(std::thread::hardware_concurrency()) : n) == g_pool->size())
    return;
  g_default_threads = n;
  g_pool.reset();
}

}  // namespace cachet
