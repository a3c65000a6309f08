#include "server/prefix_cache.h"

#include <algorithm>

namespace cachet::server {

PrefixCache::PrefixCache(size_t budget_bytes, size_t max_entries)
    : budget_(budget_bytes), max_entries_(max_entries) {}

namespace {
bool is_prefix(const std::vector<int32_t>& p, std::span<const int32_t> tokens) {
  return p.size() <= tokens.size() && std::equal(p.begin(), p.end(), tokens.begin());
}
}  // namespace

PrefixCache::Hit PrefixCache::lookup(std::span<const int32_t> tokens, size_t max_len) {
  std::lock_guard<std::mutex> lock(mu_);
  auto best = lru_.end();
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    const size_t n = it->tokens.size();
    if (n > max_len || (best != lru_.end() && n <= best->tokens.size())) continue;
    if (is_prefix(it->tokens, tokens)) best = it;
  }
  Hit hit;
  if (best == lru_.end()) {
    ++misses_;
    return hit;
  }
  lru_.splice(lru_.begin(), lru_, best);
  hit.tokens = best->tokens.size();
  hit.state = best->state;  // a fork
  hit.logits = best->logits;
  ++hits_;
  hit_tokens_ += hit.tokens;
  return hit;
}

PrefixCache::List::const_iterator PrefixCache::find_exact(std::span<const int32_t> tokens) const {
  for (auto it = lru_.begin(); it != lru_.end(); ++it)
    if (it->tokens.size() == tokens.size() &&
        std::equal(it->tokens.begin(), it->tokens.end(), tokens.begin()))
      return it;
  return lru_.end();
}

bool PrefixCache::contains(std::span<const int32_t> tokens) const {
  std::lock_guard<std::mutex> lock(mu_);
  return find_exact(tokens) != lru_.end();
}

bool PrefixCache::insert(std::span<const int32_t> tokens, const State& state,
                         std::span<const float> logits) {
  if (tokens.empty() || !state.valid()) return false;
  const size_t bytes =
      state.bytes() + logits.size() * sizeof(float) + tokens.size() * sizeof(int32_t);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = find_exact(tokens); it != lru_.end()) {
    lru_.splice(lru_.begin(), lru_, it);
    return false;
  }
  if (bytes > budget_ || max_entries_ == 0) return false;
  evict_to(budget_ - bytes, max_entries_ - 1);
  Entry e;
  e.tokens.assign(tokens.begin(), tokens.end());
  e.state = state;  // a fork
  e.logits.assign(logits.begin(), logits.end());
  e.bytes = bytes;
  lru_.push_front(std::move(e));
  bytes_ += bytes;
  ++inserts_;
  return true;
}

void PrefixCache::evict_to(size_t budget, size_t max_entries) {
  while (!lru_.empty() && (bytes_ > budget || lru_.size() > max_entries)) {
    bytes_ -= lru_.back().bytes;
    lru_.pop_back();
    ++evictions_;
  }
}

void PrefixCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  lru_.clear();
  bytes_ = 0;
}

PrefixCacheStats PrefixCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  PrefixCacheStats s;
  s.entries = lru_.size();
  s.bytes = bytes_;
  s.budget = budget_;
  s.hits = hits_;
  s.misses = misses_;
  s.hit_tokens = hit_tokens_;
  s.inserts = inserts_;
  s.evictions = evictions_;
  return s;
}

}  // namespace cachet::server
