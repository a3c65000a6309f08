#include "cachet/tensor.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <sstream>

#include "cachet/env.h"
#include "cachet/error.h"
#include "core/sanitizers.h"

namespace cachet {

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t Tensor::dim(int i) const {
  const int n = static_cast<int>(shape.size());
  const int j = i < 0 ? n + i : i;
  CACHET_CHECK(j >= 0 && j < n, "tensor '", name, "': no dimension ", i, " in shape ", shape_str());
  return shape[j];
}

bool Tensor::contiguous() const {
  return strides.empty() || strides == contiguous_strides(shape);
}

std::string Tensor::shape_str() const {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

const uint8_t* Tensor::row(int64_t r) const {
  return bytes() + static_cast<size_t>(r) * row_bytes(dtype, cols());
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

size_t tensor_bytes(DType dtype, const std::vector<int64_t>& shape) {
  const auto& info = dtype_info(dtype);
  if (shape.empty()) return row_bytes(dtype, 1);
  unsigned __int128 n = 1;
  for (int64_t d : shape) {
    CACHET_CHECK(d >= 0, "negative dimension ", d);
    n *= static_cast<uint64_t>(d);
    CACHET_CHECK(n <= (static_cast<unsigned __int128>(1) << 62), "tensor size overflows");
  }
  const int64_t inner = shape.back();
  CACHET_CHECK(inner % info.block_elems == 0, "inner dimension ", inner,
               " is not a multiple of the ", info.name, " block size ", info.block_elems);
  return static_cast<size_t>(n / info.block_elems) * static_cast<size_t>(info.block_bytes);
}

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

// CACHET_HUGE_PAGES=0 turns huge pages off (to compare); anything else, or unset, leaves them on.
bool huge_pages_wanted() {
  static const bool on = env_switch_on("CACHET_HUGE_PAGES");
  return on;
}

}  // namespace

// Buffers of 2 MiB and more start on a 2 MiB boundary and ask the kernel for transparent huge
// pages (where it grants them only on request, as Debian's default "madvise" does). Weights
// are read once per token from end to end: with 4 KiB pages every 4 KiB of a stream costs a
// TLB miss, and a page walk is dear in a virtual machine. Measured on one host (2 threads,
// `cachet bench kernels`, with and without CACHET_HUGE_PAGES=0): the streaming-read probe went
// from 31.7 to 35.7 GB/s, Q6_K's matvec at 4096x14336 from 23.2 to 29.2 GB/s, the other
// types' by 1-2 GB/s.
std::shared_ptr<void> aligned_buffer(size_t bytes) {
  const bool huge = bytes >= kHugePage && huge_pages_wanted();
  const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = nullptr;
  if (posix_memalign(&p, huge ? kHugePage : 64, rounded) != 0 || !p)
    fail("out of memory allocating ", bytes, " bytes");
#ifdef MADV_HUGEPAGE
  // Only the whole huge pages: a partial one at the end would be made resident in full.
  if (huge) madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice: may be refused
#endif
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

namespace {

// A region of weight buffers: reserved address space (reserved_pages, asking for huge pages),
// filled front to back. Unmapped when the last buffer in it is released (each holds a
// reference to the region).
struct WeightRegion {
  std::shared_ptr<void> mem;
  size_t size = 0, used = 0;

  // The next `bytes` (a multiple of 64), or null when they do not fit.
  char* take(size_t bytes) {
    if (size - used < bytes) return nullptr;
    char* p = static_cast<char*>(mem.get()) + used;
    used += bytes;
    return p;
  }
};

// Address space per region: untouched pages cost nothing, so a region holds a whole model's
// matrices; one larger matrix gets a region of its own size, as does each buffer where the
// system will not reserve that much.
constexpr size_t kWeightRegionBytes = size_t{1} << 32;

std::mutex g_weight_mu;
std::weak_ptr<WeightRegion> g_weight_region;  // the region being filled

std::shared_ptr<WeightRegion> new_weight_region(size_t need) {
  auto r = std::make_shared<WeightRegion>();
  r->size = std::max(need, kWeightRegionBytes);
  try {
    r->mem = reserved_pages(r->size, true);
  } catch (const Error&) {
    r->size = need;
    r->mem = reserved_pages(need, true);
  }
  return r;
}

}  // namespace

std::shared_ptr<void> weight_buffer(size_t bytes) {
  // Under AddressSanitizer each buffer is a heap block of its own, whose red zones catch a
  // read past its end (in a region it would read the next buffer's bytes unnoticed).
  if constexpr (kAddressSanitizer) return aligned_buffer(bytes);
  CACHET_CHECK(bytes <= (size_t{1} << 62), "weight buffer of ", bytes, " bytes is too large");
  const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  std::shared_ptr<WeightRegion> region;
  char* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_weight_mu);
    region = g_weight_region.lock();
    if (region) p = region->take(rounded);
    if (!p) {
      region = new_weight_region(rounded);
      p = region->take(rounded);
      g_weight_region = region;
    }
  }
  // Released before the rest of its region: the whole pages inside [p, p + rounded) go back
  // to the system (a neighbour's bytes are never in them).
  return std::shared_ptr<void>(p, [region, rounded](void* q) {
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t a = (reinterpret_cast<uintptr_t>(q) + page - 1) / page * page;
    const uintptr_t b = (reinterpret_cast<uintptr_t>(q) + rounded) / page * page;
    if (region.use_count() > 1 && b > a) madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);
  });
}

std::shared_ptr<void> reserved_pages(size_t bytes, bool huge) {
  const size_t len = std::max<size_t>(bytes, 1) + (huge ? kHugePage : 0);
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED)
    fail("cannot reserve ", bytes, " bytes of address space: ", std::strerror(errno));
  auto* start = static_cast<char*>(p);
  if (huge) start += (kHugePage - reinterpret_cast<uintptr_t>(p) % kHugePage) % kHugePage;
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
  // Advice: may be refused (or, for NOHUGEPAGE, overridden by a host that always uses them).
  madvise(start, len - static_cast<size_t>(start - static_cast<char*>(p)),
          huge && huge_pages_wanted() ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#endif
  return std::shared_ptr<void>(start, [p, len](void*) { munmap(p, len); });
}

void back_pages(void* p, size_t bytes) {
  if (bytes == 0) return;
#ifdef MADV_POPULATE_WRITE
  constexpr int kPopulateWrite = MADV_POPULATE_WRITE;
#else
  constexpr int kPopulateWrite = 23;  // Linux 5.14 on; older kernels answer EINVAL
#endif
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t a = reinterpret_cast<uintptr_t>(p) / page * page;
  madvise(reinterpret_cast<void*>(a), reinterpret_cast<uintptr_t>(p) + bytes - a, kPopulateWrite);
}

Tensor Tensor::zeros(DType dtype, std::vector<int64_t> shape, std::string name) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.nbytes = tensor_bytes(dtype, shape);
  t.shape = std::move(shape);
  t.strides = contiguous_strides(t.shape);
  auto buf = aligned_buffer(t.nbytes);
  std::memset(buf.get(), 0, t.nbytes);
  t.data = buf.get();
  t.owner = std::move(buf);
  return t;
}

Tensor Tensor::view(DType dtype, std::vector<int64_t> shape, const void* data,
                    std::shared_ptr<const void> owner, std::string name) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.nbytes = tensor_bytes(dtype, shape);
  t.shape = std::move(shape);
  t.strides = contiguous_strides(t.shape);
  t.data = const_cast<void*>(data);
  t.owner = std::move(owner);
  return t;
}

}  // namespace cachet
