// Scratch arena: bump allocation of 64-byte aligned blocks. Reset between steps; after the
// first step has sized it, a decoding step allocates nothing from the heap.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

namespace cachet {

class Arena {
 public:
  explicit Arena(size_t initial_bytes = 1 << 20);
  // Aligned storage for n objects of T (uninitialised).
  template <typename T>
  T* alloc(size_t n) {
    return static_cast<T*>(alloc_bytes(n * sizeof(T)));
  }
  void* alloc_bytes(size_t bytes);
  // Frees everything allocated since construction (keeps the memory). If the last cycle needed
  // more than one chunk, the chunks are merged into one big enough for the whole cycle.
  void reset();
  size_t capacity() const;
  size_t used() const { return used_total_; }
  size_t heap_allocations() const { return heap_allocations_; }

 private:
  struct Chunk {
    std::shared_ptr<void> mem;
    size_t size = 0;
    size_t used = 0;
  };
  std::vector<Chunk> chunks_;
  size_t used_total_ = 0;
  size_t high_water_ = 0;
  size_t heap_allocations_ = 0;
};

}  // namespace cachet
