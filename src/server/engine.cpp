#include "server/engine.h"

#include <algorithm>
#include <optional>
#include <set>

#include "cachet/error.h"
#include "cachet/generate.h"

namespace cachet::server {

bool Job::wait_text(std::string& out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait_for(lock, timeout, [&] { return !pending.empty() || done; });
  out.clear();
  out.swap(pending);
  return !(done && out.empty());
}

struct Engine::Slot {
  std::shared_ptr<Job> job;
  enum class Phase { Start, Prefill, Decode } phase = Phase::Start;
  State state;
  std::optional<Sampler> sampler;
  std::optional<StreamDecoder> dec;
  std::optional<StopMatcher> stop;
  std::vector<float> logits;
  size_t cursor = 0;         // prompt tokens in the state
  std::set<size_t> snap_at;  // prompt lengths to snapshot
  std::vector<int32_t> fed;  // generated tokens fed to the state
  int64_t shown = 0;         // generated tokens (stop tokens excluded)
  int64_t sampled = 0;       // tokens sampled
  int64_t cached = 0;        // prompt tokens from the prefix cache
  int32_t next = -1;         // token to feed in this step's batch
  bool first = true;
  bool finished = false;
  Clock::time_point admitted;
};

Engine::Engine(LanguageModel& model, const Tokenizer& tok, const EngineOptions& opts,
               Metrics& metrics)
    : model_(model), tok_(tok), opts_(opts), metrics_(metrics), cache_(opts.cache_bytes) {
  vocab_ = model.info().vocab_size > 0 ? model.info().vocab_size : tok.vocab_size();
  if (model.info().max_positions > 0) opts_.ctx = std::min(opts_.ctx, model.info().max_positions);
  opts_.parallel = std::max(1, opts_.parallel);
  opts_.prefill_chunk = std::max<int64_t>(1, opts_.prefill_chunk);
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    accepting_ = false;
    quit_ = true;
    end_all_ = true;
    end_reason_ = "the server stopped";
  }
  cv_.notify_all();
  thread_.join();
}

Engine::Admit Engine::submit(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!accepting_) return Admit::Stopping;
    const size_t free =
        static_cast<size_t>(opts_.parallel) - std::min<size_t>(active_, opts_.parallel);
    if (queue_.size() >= opts_.queue_size + free) return Admit::QueueFull;
    job->submitted = Clock::now();
    queue_.push_back(job);
  }
  cv_.notify_all();
  return Admit::Ok;
}

void Engine::stop_accepting() {
  std::lock_guard<std::mutex> lock(mu_);
  accepting_ = false;
}

void Engine::end_all(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    accepting_ = false;
    end_all_ = true;
    end_reason_ = why;
  }
  cv_.notify_all();
}

bool Engine::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.empty() && active_ == 0;
}

size_t Engine::queue_depth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

size_t Engine::active() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_;
}

void Engine::emit(Slot& s, const std::string& text) {
  if (text.empty()) return;
  {
    std::lock_guard<std::mutex> lock(s.job->mu);
    s.job->pending += text;
  }
  s.job->cv.notify_all();
}

void Engine::flush(Slot& s) {
  emit(s, s.stop->push(s.dec->finish()));
  emit(s, s.stop->finish());
}

void Engine::finish(Slot& s, const std::string& reason) {
  Job& j = *s.job;
  const double secs = std::chrono::duration<double>(Clock::now() - j.submitted).count();
  metrics_.observe("cachet_request_duration_seconds", secs);
  metrics_.add("cachet_prompt_tokens_total", "", static_cast<double>(j.prompt.size()));
  metrics_.add("cachet_generated_tokens_total", "", static_cast<double>(s.sampled));
  // The state after the prompt and the generated tokens: a later turn of the same
  // conversation starts with these tokens.
  if (!s.fed.empty() && s.state.valid() && !s.logits.empty()) {
    try {
      std::vector<int32_t> all = j.prompt;
      all.insert(all.end(), s.fed.begin(), s.fed.end());
      cache_.insert(all, s.state, s.logits);
    } catch (const std::exception&) {
      // The snapshot is an optimisation: the request itself has finished.
    }
  }
  {
    std::lock_guard<std::mutex> lock(j.mu);
    j.done = true;
    j.finish_reason = reason;
    j.cached_tokens = s.cached;
    j.completion_tokens = s.sampled;
  }
  j.cv.notify_all();
  s.finished = true;
}

void Engine::fail(Slot& s, const std::string& error, int status) {
  Job& j = *s.job;
  {
    std::lock_guard<std::mutex> lock(j.mu);
    j.done = true;
    j.error = error;
    j.error_status = status;
    j.cached_tokens = s.cached;
    j.completion_tokens = s.sampled;
  }
  j.cv.notify_all();
  s.finished = true;
}

void Engine::start(Slot& s) {
  Job& j = *s.job;
  const size_t n = j.prompt.size();
  PrefixCache::Hit hit = cache_.lookup(j.prompt, n);
  if (hit.tokens > 0 && hit.state.valid() && static_cast<int64_t>(hit.logits.size()) == vocab_) {
    s.state = std::move(hit.state);
    s.logits = std::move(hit.logits);
    s.cursor = hit.tokens;
  } else {
    s.state = model_.new_state();
    s.cursor = 0;
  }
  s.cached = static_cast<int64_t>(s.cursor);
  // Snapshots: the first boundary (a system prompt) and the last few.
  std::vector<size_t> cand;
  for (size_t b : j.boundaries)
    if (b > s.cursor && b <= n) cand.push_back(b);
  const size_t keep = opts_.max_snapshots_per_request;
  if (!cand.empty() && keep > 0) {
    s.snap_at.insert(cand.front());
    for (size_t i = cand.size() > keep - 1 ? cand.size() - (keep - 1) : 0; i < cand.size(); ++i)
      s.snap_at.insert(cand[i]);
  }
  s.sampler.emplace(j.sampling);
  // The prompt counts for the repetition penalty, not for presence and frequency: OpenAI's
  // API defines those over the tokens sampled so far
  s.sampler->accept(j.prompt, false);
  s.dec.emplace(tok_);
  s.stop.emplace(j.stop);
  s.phase = s.cursor == n ? Slot::Phase::Decode : Slot::Phase::Prefill;
}

void Engine::prefill(Slot& s, int64_t& budget) {
  Job& j = *s.job;
  const size_t n = j.prompt.size();
  while (budget > 0 && s.cursor < n) {
    auto it = s.snap_at.upper_bound(s.cursor);
    const size_t nb = it == s.snap_at.end() ? n : std::min(*it, n);
    const size_t end = std::min(s.cursor + static_cast<size_t>(budget), nb);
    const std::span<const int32_t> chunk(j.prompt.data() + s.cursor, end - s.cursor);
    model_.forward(s.state, chunk, s.logits);
    budget -= static_cast<int64_t>(chunk.size());
    metrics_.add("cachet_prompt_tokens_prefilled_total", "", static_cast<double>(chunk.size()));
    s.cursor = end;
    if (s.snap_at.count(end))
      cache_.insert(std::span<const int32_t>(j.prompt.data(), end), s.state, s.logits);
  }
  if (s.cursor == n) s.phase = Slot::Phase::Decode;
}

bool Engine::decode_sample(Slot& s) {
  Job& j = *s.job;
  if (s.first) {
    s.first = false;
    metrics_.observe("cachet_time_to_first_token_seconds",
                     std::chrono::duration<double>(Clock::now() - j.submitted).count());
  }
  const int32_t id = s.sampler->sample(s.logits);
  ++s.sampled;
  if (std::find(j.stop_tokens.begin(), j.stop_tokens.end(), id) != j.stop_tokens.end()) {
    flush(s);
    finish(s, "stop");
    return false;
  }
  s.sampler->accept(id);
  ++s.shown;
  emit(s, s.stop->push(s.dec->push(id)));
  if (s.stop->stopped()) {
    finish(s, "stop");
    return false;
  }
  if (s.shown >= j.max_tokens || s.state.position() >= opts_.ctx) {
    flush(s);
    finish(s, s.stop->stopped() ? "stop" : "length");
    return false;
  }
  s.next = id;
  return true;
}

void Engine::loop() {
  std::vector<float> batch_logits;
  while (true) {
    bool ending = false;
    std::string why;
    std::deque<std::shared_ptr<Job>> dropped;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return quit_ || end_all_ || !slots_.empty() || !queue_.empty(); });
      if (end_all_) {
        ending = true;
        why = end_reason_;
        dropped.swap(queue_);
        end_all_ = false;
      } else {
        if (quit_ && slots_.empty() && queue_.empty()) return;
        while (slots_.size() < static_cast<size_t>(opts_.parallel) && !queue_.empty()) {
          auto s = std::make_unique<Slot>();
          s->job = std::move(queue_.front());
          queue_.pop_front();
          s->admitted = Clock::now();
          metrics_.observe("cachet_queue_wait_seconds",
                           std::chrono::duration<double>(s->admitted - s->job->submitted).count());
          slots_.push_back(std::move(s));
        }
        active_ = slots_.size();
      }
    }
    if (ending) {
      for (auto& j : dropped) {
        {
          std::lock_guard<std::mutex> lock(j->mu);
          j->done = true;
          j->error = why;
        }
        j->cv.notify_all();
      }
      for (auto& s : slots_) {
        if (s->phase == Slot::Phase::Decode) {
          flush(*s);
          finish(*s, "length");
        } else {
          fail(*s, why);
        }
      }
      slots_.clear();
      std::lock_guard<std::mutex> lock(mu_);
      active_ = 0;
      if (quit_ && queue_.empty()) return;
      continue;
    }

    try {
      // Clients that went away and requests past their time.
      const auto now = Clock::now();
      for (auto& s : slots_) {
        if (s->job->cancelled.load()) {
          metrics_.add("cachet_cancelled_total", "");
          fail(*s, "cancelled", 499);
        } else if (now > s->job->deadline) {
          metrics_.add("cachet_timeouts_total", "");
          if (s->phase == Slot::Phase::Decode) {
            flush(*s);
            finish(*s, "length");
          } else {
            fail(*s, "the request ran out of time before its prompt was processed", 504);
          }
        }
      }

      // New requests: start from the longest cached prefix.
      for (auto& s : slots_) {
        if (s->finished || s->phase != Slot::Phase::Start) continue;
        try {
          start(*s);
        } catch (const std::exception& e) {
          fail(*s, e.what());
        }
      }

      // Prefill: a bounded number of prompt tokens per step, shared round-robin.
      int64_t budget = opts_.prefill_chunk;
      const size_t ns = slots_.size();
      for (size_t k = 0; k < ns && budget > 0; ++k) {
        Slot& s = *slots_[(prefill_rr_ + k) % ns];
        if (s.finished || s.phase != Slot::Phase::Prefill) continue;
        try {
          prefill(s, budget);
        } catch (const std::exception& e) {
          fail(s, e.what());
        }
      }
      if (ns > 0) prefill_rr_ = (prefill_rr_ + 1) % ns;

      // One decoding step for every request that has its logits.
      std::vector<Slot*> batch;
      for (auto& s : slots_) {
        if (s->finished || s->phase != Slot::Phase::Decode) continue;
        try {
          if (decode_sample(*s)) batch.push_back(s.get());
        } catch (const std::exception& e) {
          fail(*s, e.what());
        }
      }
      if (!batch.empty()) {
        std::vector<State*> states;
        std::vector<int32_t> tokens;
        for (Slot* s : batch) {
          states.push_back(&s->state);
          tokens.push_back(s->next);
        }
        try {
          if (batch.size() == 1) {
            model_.forward(batch[0]->state, tokens, batch[0]->logits);
          } else {
            model_.forward_batch(states, tokens, batch_logits);
            for (size_t i = 0; i < batch.size(); ++i)
              batch[i]->logits.assign(
                  batch_logits.begin() + static_cast<ptrdiff_t>(i * vocab_),
                  batch_logits.begin() + static_cast<ptrdiff_t>((i + 1) * vocab_));
          }
          for (Slot* s : batch) s->fed.push_back(s->next);
          metrics_.add("cachet_decode_steps_total", "");
          metrics_.add("cachet_decode_rows_total", "", static_cast<double>(batch.size()));
        } catch (const std::exception& e) {
          for (Slot* s : batch) fail(*s, e.what());
        }
      }

    } catch (const std::exception& e) {
      // Anything unexpected ends the requests in flight with an error, never the server.
      for (auto& s : slots_)
        if (!s->finished) fail(*s, std::string("internal error: ") + e.what());
    }
    std::erase_if(slots_, [](const std::unique_ptr<Slot>& s) { return s->finished; });
    std::lock_guard<std::mutex> lock(mu_);
    active_ = slots_.size();
  }
}

}  // namespace cachet::server
