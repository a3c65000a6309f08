// Tensor: a typed, shaped view of memory that it may own (heap) or borrow (a mapped file).
// Shapes are outermost-first (row-major, as in PyTorch and safetensors). GGUF lists dimensions
// innermost-first; the GGUF reader reverses them.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cachet/dtype.h"

namespace cachet {

struct Tensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;    // outermost first
  std::vector<int64_t> strides;  // in elements, outermost first; block types are contiguous only
  void* data = nullptr;
  size_t nbytes = 0;
  std::shared_ptr<const void> owner;  // keeps the memory (heap buffer or mapping) alive

  int64_t ndim() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const;
  // dim(i): size of dimension i; negative i counts from the end.
  int64_t dim(int i) const;
  // For matrices: cols = innermost dimension, rows = product of the others.
  int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
  int64_t rows() const { return cols() == 0 ? 0 : numel() / cols(); }
  bool contiguous() const;
  std::string shape_str() const;  // "[2560, 7680]"

  template <typename T>
  T* as() {
    return static_cast<T*>(data);
  }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data);
  }
  const uint8_t* bytes() const { return static_cast<const uint8_t*>(data); }
  // Pointer to row r of a contiguous tensor viewed as [rows(), cols()].
  const uint8_t* row(int64_t r) const;

  // A new zero-filled, 64-byte aligned tensor that owns its memory.
  static Tensor zeros(DType dtype, std::vector<int64_t> shape, std::string name = {});
  // A view over memory owned elsewhere (owner may be null if the caller keeps it alive).
  static Tensor view(DType dtype, std::vector<int64_t> shape, const void* data,
                     std::shared_ptr<const void> owner = {}, std::string name = {});
};

// Contiguous strides for a shape.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);
// Bytes of a contiguous tensor of this type and shape; throws if the inner dimension does not
// hold whole blocks or the size overflows.
size_t tensor_bytes(DType dtype, const std::vector<int64_t>& shape);

// 64-byte aligned heap buffer.
std::shared_ptr<void> aligned_buffer(size_t bytes);

// A 64-byte aligned buffer for weights that a model keeps for its life (its matrices in the
// kernels' layouts). Such buffers are laid one after another in large regions of address
// space that ask for transparent huge pages, so a matrix whose size is not a multiple of 2 MiB
// does not end in small pages: a product reads those 10-20% slower (a TLB miss and a restart
// of the hardware prefetcher at every 4 KiB), and the thread whose share they are finishes
// last. A region goes back to the system when its last buffer is released; a buffer released
// before the others gives back the whole pages it alone covers.
std::shared_ptr<void> weight_buffer(size_t bytes);

// `bytes` of page-aligned, zeroed address space whose pages take memory only once written or
// backed: for a cache that reserves its largest size up front and fills it a little at a time,
// so that it never moves. Asks for no swap reservation. huge: starts on a 2 MiB boundary and
// asks for transparent huge pages (for regions filled 2 MiB at a time); else asks for none (a
// huge page would make up to 2 MiB resident for one written byte). Throws, naming the size, if
// the address space cannot be had.
std::shared_ptr<void> reserved_pages(size_t bytes, bool huge);
// Gives memory to [p, p + bytes) of reserved pages now, in one call into the kernel rather than
// a fault per page as they are first written. A hint: where the kernel cannot, nothing changes.
void back_pages(void* p, size_t bytes);

}  // namespace cachet
