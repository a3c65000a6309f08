// The generation scheduler of `cachet serve`: one thread owns the model and runs continuous
// batching. Requests wait in a bounded queue; up to `parallel` of them are active, each with
// its own State and Sampler. Prompts are prefilled in chunks (starting from the longest cached
// prefix state), and every step advances all decoding requests together with one
// LanguageModel::forward_batch. A cancelled request leaves its slot at the next step.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cachet/model.h"
#include "cachet/sampler.h"
#include "cachet/tokenizer.h"
#include "server/metrics.h"
#include "server/prefix_cache.h"

namespace cachet::server {

using Clock = std::chrono::steady_clock;

// One generation request, shared by the HTTP thread that answers it and the scheduler.
struct Job {
  // Set before submit(), then read-only.
  std::vector<int32_t> prompt;
  std::vector<size_t> boundaries;  // prompt lengths worth a prefix-cache snapshot
  SamplingParams sampling;
  int64_t max_tokens = 256;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_tokens;
  Clock::time_point deadline = Clock::time_point::max();

  // Set by the HTTP side when the client went away; the scheduler drops the job.
  std::atomic<bool> cancelled{false};

  // Output, under mu.
  std::mutex mu;
  std::condition_variable cv;
  std::string pending;  // text produced and not yet taken
  bool done = false;
  std::string finish_reason;  // "stop" or "length" when done without error
  std::string error;          // non-empty: the generation failed
  // Why, as an HTTP status: 499 the client went away, 504 out of time, 500 anything else
  int error_status = 500;
  int64_t cached_tokens = 0;
  int64_t completion_tokens = 0;

  Clock::time_point submitted{};

  // Waits up to timeout for text or the end; moves the pending text into out. Returns false
  // once the job is done and everything was taken.
  bool wait_text(std::string& out, std::chrono::milliseconds timeout);
};

struct EngineOptions {
  int parallel = 4;        // requests decoded together
  size_t queue_size = 64;  // requests waiting for a slot
  int64_t ctx = 4096;      // positions per request (prompt + generated)
  size_t cache_bytes = 256u << 20;
  int64_t prefill_chunk = 256;  // prompt tokens per scheduler step (all slots together)
  size_t max_snapshots_per_request = 4;
};

class Engine {
 public:
  Engine(LanguageModel& model, const Tokenizer& tok, const EngineOptions& opts, Metrics& metrics);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  enum class Admit { Ok, QueueFull, Stopping };
  Admit submit(const std::shared_ptr<Job>& job);

  // Refuses new jobs from now on.
  void stop_accepting();
  // Ends every job now: active ones finish with "length", queued ones with an error.
  void end_all(const std::string& why);
  // No active and no queued jobs.
  bool idle() const;

  size_t queue_depth() const;
  size_t active() const;
  PrefixCache& cache() { return cache_; }
  const EngineOptions& options() const { return opts_; }

 private:
  struct Slot;
  void loop();
  void start(Slot& s);
  void prefill(Slot& s, int64_t& budget);
  bool decode_sample(Slot& s);  // false: the slot finished
  void finish(Slot& s, const std::string& reason);
  void fail(Slot& s, const std::string& error, int status = 500);
  void emit(Slot& s, const std::string& text);
  void flush(Slot& s);

  LanguageModel& model_;
  const Tokenizer& tok_;
  EngineOptions opts_;
  Metrics& metrics_;
  PrefixCache cache_;
  int64_t vocab_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  size_t active_ = 0;  // mirrors slots_.size() for other threads
  bool accepting_ = true;
  bool quit_ = false;
  bool end_all_ = false;
  std::string end_reason_;

  std::vector<std::unique_ptr<Slot>> slots_;  // scheduler thread only
  size_t prefill_rr_ = 0;
  std::thread thread_;
};

}  // namespace cachet::server
