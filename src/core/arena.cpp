#include "cachet/arena.h"

#include "cachet/tensor.h"

namespace cachet {

Arena::Arena(size_t initial_bytes) {
  if (initial_bytes) {
    chunks_.push_back({aligned_buffer(initial_bytes), initial_bytes, 0});
    ++heap_allocations_;
  }
}

void* Arena::alloc_bytes(size_t bytes) {
  bytes = (bytes + 63) / 64 * 64;
  if (bytes == 0) bytes = 64;
  for (auto& c : chunks_) {
    if (c.size - c.used >= bytes) {
      void* p = static_cast<char*>(c.mem.get()) + c.used;
      c.used += bytes;
      used_total_ += bytes;
      return p;
    }
  }
  size_t size = bytes > (1u << 20) ? bytes : (1u << 20);
  chunks_.push_back({aligned_buffer(size), size, bytes});
  ++heap_allocations_;
  used_total_ += bytes;
  return chunks_.back().mem.get();
}

void Arena::reset() {
  if (used_total_ > high_water_) high_water_ = used_total_;
  if (chunks_.size() > 1) {
    // Merge into one chunk big enough for the largest cycle seen.
    chunks_.clear();
    chunks_.push_back({aligned_buffer(high_water_), high_water_, 0});
    ++heap_allocations_;
  }
  for (auto& c : chunks_) c.used = 0;
  used_total_ = 0;
}

size_t Arena::capacity() const {
  size_t n = 0;
  for (const auto& c : chunks_) n += c.size;
  return n;
}

}  // namespace cachet
