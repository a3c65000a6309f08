#include "rg_weights.h"

#include <algorithm>
#include <cstring>

#include "cachet/error.h"
#include "cachet/half.h"
#include "cachet/mmap.h"
#include "cachet/ops.h"
#include "cachet/quant.h"
#include "cachet/threadpool.h"

namespace cachet::models {

namespace {

std::string shape_string(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

bool weight_type(DType t) {
  if (t == DType::F32 || t == DType::F16 || t == DType::BF16) return true;
  const auto& info = dtype_info(t);
  return info.quantized && t != DType::Q8_1 && t != DType::Q8_K;
}

}  // namespace

const Tensor& need_tensor(const ModelFiles& files, const std::string& name,
                          const std::vector<int64_t>& shape) {
  auto it = files.tensors.find(name);
  if (it == files.tensors.end()) fail(files.path, ": missing tensor '", name, "'");
  const Tensor& t = it->second;
  if (t.shape != shape)
    fail(files.path, ": tensor '", name, "' has shape ", t.shape_str(), ", expected ",
         shape_string(shape));
  if (!t.contiguous()) fail(files.path, ": tensor '", name, "' is not contiguous");
  if (!weight_type(t.dtype))
    fail(files.path, ": tensor '", name, "' has type ", dtype_name(t.dtype),
         ", which is not a weight type");
  if (t.data == nullptr && t.numel() > 0) fail(files.path, ": tensor '", name, "' has no data");
  if (t.nbytes < tensor_bytes(t.dtype, t.shape))
    fail(files.path, ": tensor '", name, "' holds ", t.nbytes, " bytes, less than its shape needs");
  return t;
}

void row_to_f32(DType type, const void* src, float* dst, int64_t n) {
  switch (type) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::BF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::F16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    default:
      dequantize_row(type, src, dst, n);
  }
}

std::vector<float> to_f32(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  const int64_t cols = t.cols(), rows = t.rows();
  const size_t rb = row_bytes(t.dtype, cols);
  for (int64_t r = 0; r < rows; ++r)
    row_to_f32(t.dtype, t.bytes() + static_cast<size_t>(r) * rb, out.data() + r * cols, cols);
  return out;
}

uint64_t Linear::bytes() const {
  return static_cast<uint64_t>(w.row_stride) * static_cast<uint64_t>(w.rows) +
         bias.size() * sizeof(float);
}

void pack_linear(Linear& l, bool keep_source) {
  PackedMat p = pack_matrix(l.w, &default_pool());
  if (!p.buf) return;
  if (!keep_source) release_pages(l.w.data, l.w.row_stride * static_cast<size_t>(l.w.rows));
  if (l.sources.empty()) l.sources = {l.w.data};
  l.w = p.view;
  l.packed = std::move(p.buf);
}

void release_packed_sources(ModelFiles& files, std::initializer_list<const Linear*> layers) {
  for (const Linear* l : layers)
    for (const void* src : l->sources)
      for (auto it = files.tensors.begin(); it != files.tensors.end(); ++it)
        if (it->second.data == src) {
          files.tensors.erase(it);
          break;
        }
}

void release_packed_sources(ModelFiles& files, const FusedLinear& f) {
  for (const Linear* l : f.layers()) release_packed_sources(files, {l});
}

namespace {

// need_linear without the rearrangement.
Linear load_linear(const ModelFiles& files, const std::string& prefix, int64_t out, int64_t in,
                   bool has_bias) {
  Linear l;
  const Tensor& w = need_tensor(files, prefix + ".weight", {out, in});
  l.w = MatView{w.dtype, out, in, w.data, row_bytes(w.dtype, in)};
  const std::string bname = prefix + ".bias";
  if (has_bias) {
    l.bias = to_f32(need_tensor(files, bname, {out}));
  } else if (files.tensors.count(bname)) {
    fail(files.path, ": unexpected tensor '", bname, "' (the config says this layer has no bias)");
  }
  return l;
}

}  // namespace

uint64_t FusedLinear::bytes() const {
  uint64_t b = all.w.data ? all.bytes() : 0;
  for (const Linear& l : each) b += l.bytes();
  return b;
}

std::vector<const Linear*> FusedLinear::layers() const {
  std::vector<const Linear*> v;
  if (all.w.data) v.push_back(&all);
  for (const Linear& l : each) v.push_back(&l);
  return v;
}

FusedLinear need_fused_linear(const ModelFiles& files, std::initializer_list<LinearPart> parts,
                              int64_t in, bool has_bias) {
  FusedLinear f;
  for (const LinearPart& p : parts) {
    f.each.push_back(load_linear(files, p.prefix, p.out, in, has_bias));
    f.outs.push_back(p.out);
  }
  bool same = true;
  for (const Linear& l : f.each) same = same && l.w.type == f.each.front().w.type;
  if (!same) {  // e.g. a file quantized with a different type per layer: each apart
    for (Linear& l : f.each) pack_linear(l);
    return f;
  }
  const DType t = f.each.front().w.type;
  const size_t rb = row_bytes(t, in);
  int64_t rows = 0;
  for (int64_t o : f.outs) rows += o;
  auto buf = aligned_buffer(rb * static_cast<size_t>(rows));
  auto* dst = static_cast<uint8_t*>(buf.get());
  for (const Linear& l : f.each) {
    std::memcpy(dst, l.w.data, rb * static_cast<size_t>(l.w.rows));
    dst += rb * static_cast<size_t>(l.w.rows);
    f.all.bias.insert(f.all.bias.end(), l.bias.begin(), l.bias.end());
    f.all.sources.push_back(l.w.data);
    release_pages(l.w.data, rb * static_cast<size_t>(l.w.rows));
  }
  f.all.w = MatView{t, rows, in, buf.get(), rb};
  f.all.packed = std::move(buf);  // replaced by the rearranged copy, if there is one
  pack_linear(f.all);
  f.each.clear();
  return f;
}

void apply_fused(const FusedLinear& f, const float* x, int64_t n, std::initializer_list<float*> ys,
                 ThreadPool& pool) {
  if (!f.all.w.data) {
    size_t i = 0;
    for (float* y : ys) apply_linear(f.each[i++], x, n, y, pool);
    return;
  }
  thread_local std::vector<float> tmp;
  const int64_t total = f.all.out();
  tmp.resize(static_cast<size_t>(n * total));
  apply_linear(f.all, x, n, tmp.data(), pool);
  int64_t off = 0;
  size_t i = 0;
  for (float* y : ys) {
    const int64_t o = f.outs[i++];
    for (int64_t r = 0; r < n; ++r)
      std::memcpy(y + r * o, tmp.data() + r * total + off, static_cast<size_t>(o) * sizeof(float));
    off += o;
  }
}

Linear need_linear(const ModelFiles& files, const std::string& prefix, int64_t out, int64_t in,
                   bool has_bias) {
  Linear l = load_linear(files, prefix, out, in, has_bias);
  pack_linear(l);
  return l;
}

void apply_linear(const Linear& l, const float* x, int64_t n, float* y, ThreadPool& pool) {
  if (n == 1)
    matvec(l.w, x, y, pool);
  else
    matmul(l.w, x, n, y, pool);
  if (!l.bias.empty()) {
    const int64_t o = l.out();
    for (int64_t r = 0; r < n; ++r) ops::add(y + r * o, l.bias.data(), y + r * o, o);
  }
}

uint64_t fingerprint(const std::string& arch, const std::string& config, const ModelFiles& files) {
  Fnv64 fp;
  fp.add(arch);
  fp.add(config);
  for (const auto& [name, t] : files.tensors) {  // std::map: sorted by name
    fp.add(name);
    fp.add_u64(static_cast<uint64_t>(t.dtype));
    fp.add_u64(t.shape.size());
    for (int64_t s : t.shape) fp.add_u64(static_cast<uint64_t>(s));
    // A few bytes of the values (start, middle, end): checkpoints of one shape (a base model
    // and its fine-tune) differ there, and reading them costs three pages a tensor
    const size_t n = t.nbytes;
    if (!t.data || n == 0) continue;
    for (size_t at : {size_t{0}, n / 2 / 64 * 64, n > 64 ? n - 64 : 0})
      fp.add(static_cast<const uint8_t*>(t.data) + at, std::min<size_t>(64, n - at));
  }
  return fp.h;
}

void Fnv64::add(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
}

}  // namespace cachet::models
