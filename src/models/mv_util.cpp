#include "mv_util.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>

#include "cachet/error.h"
#include "cachet/metavoice_gpt.h"
#include "cachet/quant.h"
#include "rg_weights.h"

namespace cachet::models {

ModelFiles strip_orig_mod(ModelFiles files) {
  static const std::string kPrefix = "_orig_mod.";
  bool any = false;
  for (const auto& kv : files.tensors) any = any || kv.first.rfind(kPrefix, 0) == 0;
  if (!any) return files;
  std::map<std::string, Tensor> renamed;
  for (auto& [name, t] : files.tensors) {
    std::string n = name.rfind(kPrefix, 0) == 0 ? name.substr(kPrefix.size()) : name;
    if (renamed.count(n))
      fail(files.path, ": tensor '", n, "' appears both with and without the prefix '", kPrefix,
           "'");
    t.name = n;
    renamed.emplace(std::move(n), std::move(t));
  }
  files.tensors = std::move(renamed);
  return files;
}

void reject_extra_layers(const ModelFiles& files, const std::string& prefix, int64_t n_layer,
                         const char* field) {
  for (const auto& kv : files.tensors) {
    const std::string& name = kv.first;
    if (name.rfind(prefix, 0) != 0) continue;
    const char* s = name.c_str() + prefix.size();
    char* end = nullptr;
    const long long i = std::strtoll(s, &end, 10);
    if (end != s && *end == '.' && i >= n_layer)
      fail(files.path, ": tensor '", name, "' belongs to a layer beyond ", field, " = ", n_layer);
  }
}

MvKvState& own_kv_state(State& s, const MvKvLayout& layout, const char* what) {
  if (!s.valid()) fail(what, ": the state is empty (create it with new_state())");
  auto* st = dynamic_cast<MvKvState*>(s.impl());
  if (!st || st->layout->arch != layout.arch)
    fail(what, ": the state belongs to another kind of model");
  if (st->layout->fingerprint != layout.fingerprint)
    fail(what, ": the state belongs to another model (state fingerprint ", std::hex,
         st->layout->fingerprint, ", model ", layout.fingerprint, ")");
  return *st;
}

}  // namespace cachet::models

namespace cachet {

std::vector<float> mv_speaker_values(const Tensor& t, const std::string& name,
                                     const std::string& path, int64_t dim) {
  if (t.numel() != dim)
    fail(path, ": tensor '", name, "' has shape ", t.shape_str(), ", expected ", dim,
         " values (e.g. [1, ", dim, "])");
  if (!t.contiguous()) fail(path, ": tensor '", name, "' is not contiguous");
  std::vector<float> v(static_cast<size_t>(dim));
  if (t.dtype == DType::F64) {           // as the original saves it from numpy
    for (int64_t i = 0; i < dim; ++i) {  // the file gives no alignment: copied, not cast
      double x;
      std::memcpy(&x, t.bytes() + i * sizeof(double), sizeof x);
      v[i] = static_cast<float>(x);
    }
  } else {
    if (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16)
      fail(path, ": tensor '", name, "' has type ", dtype_name(t.dtype),
           "; a speaker embedding must be F32, F16, BF16 or F64");
    dequantize_row(t.dtype, t.data, v.data(), dim);
  }
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) fail(path, ": tensor '", name, "' holds a non-finite value at ", i);
  return v;
}

std::vector<float> mv_read_speaker_embedding(const std::string& path, int64_t dim) {
  ModelFiles f = ModelFiles::open(path);
  const Tensor* t = f.find("spk_emb");
  if (!t) fail(path, ": missing tensor 'spk_emb'");
  return mv_speaker_values(*t, "spk_emb", path, dim);
}

}  // namespace cachet
