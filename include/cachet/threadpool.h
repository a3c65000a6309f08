// A persistent pool of worker threads with a low-latency barrier. The calling thread takes
// part as worker 0. Work is split by index ranges, so results never depend on the thread count
// as long as each output is computed by one thread in a fixed order. Any thread may hand a pool
// work: callers on different threads take turns (one job at a time), and a job that hands its
// own pool more work runs that work itself.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cachet {

class ThreadPool {
 public:
  // n_threads <= 0: one per hardware thread.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Runs fn(thread_index, n_threads) once on every thread; returns when all have finished.
  // Exceptions thrown by fn are rethrown on the caller (the first one wins).
  void run(const std::function<void(int, int)>& fn);
  // Splits [0, n) into ranges with boundaries at multiples of grain and runs fn(begin, end)
  // on each, from whichever threads are running (see for_chunks).
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
  // Runs fn(c) for every c in [0, n_chunks), each once, on the threads that are running: the
  // caller and the workers claim chunks from a shared counter, and a worker that has not woken
  // up by the time every chunk is claimed is not waited for. So a descheduled worker (a busy
  // machine) costs at most the chunk it holds. fn must not depend on which thread runs it.
  void for_chunks(int64_t n_chunks, const std::function<void(int64_t)>& fn);
  // The same with the index of the thread running each chunk (< size()), for per-thread scratch.
  void for_chunks_with_thread(int64_t n_chunks, const std::function<void(int64_t, int)>& fn);

  // Range of [0, n) for thread i of k, boundaries rounded to grain.
  static void split(int64_t n, int64_t grain, int i, int k, int64_t* begin, int64_t* end);

 private:
  void worker();
  void stop_threads();
  // Starts job on the workers, runs job(0, n) on the caller and waits. A worker claims a
  // ticket (its index 1..n-1) before it starts; when skippable, tickets still unclaimed once
  // the caller is done are withdrawn instead of waited for.
  void dispatch(const std::function<void(int, int)>& job, bool skippable);
  int n_threads_;
  std::mutex entry_mu_;  // held while a caller's job runs: callers on other threads wait
  std::vector<std::thread> threads_;
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> tickets_{0};
  std::atomic<int64_t> next_chunk_{0};
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;
  std::atomic<bool> has_error_{false};
};

// Process-wide pool used by the CLI and by code that is not handed one. Sized on first use
// from set_default_threads (or all hardware threads).
ThreadPool& default_pool();
void set_default_threads(int n);
// A pool of one thread (the caller's): kernels called with it run on the calling thread only,
// for work that is already split over a pool at a coarser grain.
ThreadPool& serial_pool();

}  // namespace cachet
