// Helpers for reading model weights: tensor lookup with shape checks, conversion of small
// tensors to f32, linear layers over weights used in place.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "cachet/kernels.h"
#include "cachet/model_files.h"
#include "cachet/tensor.h"

namespace cachet::models {

// The tensor `name` of files with exactly `shape`; errors name the source, the tensor and
// the problem (missing, wrong shape, not contiguous).
const Tensor& need_tensor(const ModelFiles& files, const std::string& name,
                          const std::vector<int64_t>& shape);

// All elements of t as f32 (F32, F16, BF16 and the block formats).
std::vector<float> to_f32(const Tensor& t);
// n elements of type `type` at src, converted to f32.
void row_to_f32(DType type, const void* src, float* dst, int64_t n);

// y = x W^T + b over a weight matrix of any weight type, used in place.
struct Linear {
  MatView w;
  std::shared_ptr<void> packed;      // owns w's bytes when they were rearranged (pack_linear)
  std::vector<const void*> sources;  // then: where the weights were read from
  std::vector<float> bias;           // empty: no bias
  int64_t in() const { return w.cols; }
  int64_t out() const { return w.rows; }
  // Bytes read by one product.
  uint64_t bytes() const;
};

// Rearranges l.w for this CPU's kernels when that pays (cachet::pack_matrix); the source
// bytes are then released from memory where they are a file mapping, unless the model still
// reads them (keep_source: a tied head's embedding, whose rows the token lookups read).
void pack_linear(Linear& l, bool keep_source = false);

// Once a model is built: drops from `files` the tensors that these layers rearranged, so
// that weights built in memory are not held twice (the model no longer reads them).
void release_packed_sources(ModelFiles& files, std::initializer_list<const Linear*> layers);

// A [out, in] linear layer `prefix`.weight (+ `prefix`.bias when has_bias).
Linear need_linear(const ModelFiles& files, const std::string& prefix, int64_t out, int64_t in,
                   bool has_bias);

// Y[n, out] = X[n, in] W^T + b (matvec when n == 1).
void apply_linear(const Linear& l, const float* x, int64_t n, float* y, ThreadPool& pool);

// Linear layers over the same input (q, k, v; gate and up): when their weights share a type,
// their rows are stored one after the other as one matrix, so that a step streams them in one
// product instead of several (each output is the same as from its own layer).
struct FusedLinear {
  Linear all;                // the layers as one, when fused
  std::vector<Linear> each;  // the layers apart, when not
  std::vector<int64_t> outs;
  uint64_t bytes() const;
  std::vector<const Linear*> layers() const;  // for release_packed_sources
};
struct LinearPart {
  std::string prefix;
  int64_t out;
};
FusedLinear need_fused_linear(const ModelFiles& files, std::initializer_list<LinearPart> parts,
                              int64_t in, bool has_bias);
void release_packed_sources(ModelFiles& files, const FusedLinear& f);
// ys[i][n, outs[i]] = X[n, in] W_i^T + b_i.
void apply_fused(const FusedLinear& f, const float* x, int64_t n, std::initializer_list<float*> ys,
                 ThreadPool& pool);

// 64-bit FNV-1a.
struct Fnv64 {
  uint64_t h = 1469598103934665603ull;
  void add(const void* data, size_t n);
  void add(const std::string& s) {
    add_u64(s.size());
    add(s.data(), s.size());
  }
  void add_u64(uint64_t v) { add(&v, sizeof v); }
};

// A model's fingerprint (ModelInfo::fingerprint): the architecture, the config, and every
// tensor's name, type, shape and 64 bytes each from the start, middle and end of its values.
uint64_t fingerprint(const std::string& arch, const std::string& config, const ModelFiles& files);

}  // namespace cachet::models
