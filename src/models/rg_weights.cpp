#include "rg_weights.h"

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

void pack_linear(Linear& l) {
  PackedMat p = pack_matrix(l.w, &default_pool());
  if (!p.buf) return;
  release_pages(l.w.data, l.w.row_stride * static_cast<size_t>(l.w.rows));
  l.source = l.w.data;
  l.w = p.view;
  l.packed = std::move(p.buf);
}

void release_packed_sources(ModelFiles& files, std::initializer_list<const Linear*> layers) {
  for (const Linear* l : layers) {
    if (!l->source) continue;
    for (auto it = files.tensors.begin(); it != files.tensors.end(); ++it)
      if (it->second.data == l->source) {
        files.tensors.erase(it);
        break;
      }
  }
}

Linear need_linear(const ModelFiles& files, const std::string& prefix, int64_t out, int64_t in,
                   bool has_bias) {
  Linear l;
  const Tensor& w = need_tensor(files, prefix + ".weight", {out, in});
  l.w = MatView{w.dtype, out, in, w.data, row_bytes(w.dtype, in)};
  pack_linear(l);
  const std::string bname = prefix + ".bias";
  if (has_bias) {
    l.bias = to_f32(need_tensor(files, bname, {out}));
  } else if (files.tensors.count(bname)) {
    fail(files.path, ": unexpected tensor '", bname, "' (the config says this layer has no bias)");
  }
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

void Fnv64::add(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
}

}  // namespace cachet::models
