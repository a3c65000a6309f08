// Snapshots of decoding states at token prefixes (a system prompt, the end of earlier turns), so
// a request that starts with a stored prefix forks the snapshot instead of prefilling it again.
// Each entry keeps the state after its tokens and the logits of its last token, so even a prompt
// that is entirely cached can sample at once. Entries are bounded by a byte budget (state bytes +
// logits + tokens) and evicted least recently used first. Thread-safe.
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <span>
#include <vector>

#include "cachet/model.h"

namespace cachet::server {

struct PrefixCacheStats {
  size_t entries = 0;
  size_t bytes = 0;
  size_t budget = 0;
  uint64_t hits = 0, misses = 0, hit_tokens = 0, inserts = 0, evictions = 0;
};

class PrefixCache {
 public:
  explicit PrefixCache(size_t budget_bytes, size_t max_entries = 4096);

  struct Hit {
    size_t tokens = 0;  // 0: nothing matched (state and logits are empty)
    State state;        // a fork of the stored state
    std::vector<float> logits;
  };
  // The longest stored entry whose tokens are a prefix of tokens, at most max_len long; the
  // entry becomes the most recently used. Counts a hit or a miss.
  Hit lookup(std::span<const int32_t> tokens, size_t max_len);

  // Stores a fork of state after tokens (non-empty) with the logits of the last token. An
  // existing entry for the same tokens is only touched. Entries that alone exceed the budget
  // are not stored. Evicts least recently used entries to stay within the budget. Returns
  // whether a new entry was stored.
  bool insert(std::span<const int32_t> tokens, const State& state, std::span<const float> logits);

  // Whether an entry for exactly these tokens exists (does not touch it).
  bool contains(std::span<const int32_t> tokens) const;

  void clear();
  PrefixCacheStats stats() const;

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    State state;
    std::vector<float> logits;
    size_t bytes = 0;
  };
  using List = std::list<Entry>;  // most recently used first
  void evict_to(size_t budget, size_t max_entries);
  List::const_iterator find_exact(std::span<const int32_t> tokens) const;

  mutable std::mutex mu_;
  List lru_;
  size_t budget_, max_entries_;
  size_t bytes_ = 0;
  uint64_t hits_ = 0, misses_ = 0, hit_tokens_ = 0, inserts_ = 0, evictions_ = 0;
};

}  // namespace cachet::server
