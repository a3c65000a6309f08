// The decoding state of one RecurrentGemma sequence.
#pragma once
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cachet/state_impl.h"

namespace cachet::models {

// Where each layer's caches live in the state buffers (shared by all states of a model).
//   recurrent layer: conv window [conv_rows, lru_width] (oldest first), then h [lru_width]
//   attention layer: keys [window, kv_dim], then values [window, kv_dim] (slot = pos % window)
// The keys and values are f32 in a model of f32 or f16 matrices, else bf16 (what decoding reads
// per step from the window halves, as in a bf16 reference model): then they have a buffer of
// their own.
struct RgLayout {
  uint64_t fingerprint = 0;
  int64_t conv_rows = 0, lru_width = 0, window = 0, kv_dim = 0;
  bool kv_bf16 = false;
  std::vector<bool> attention;
  std::vector<size_t> offset;  // per layer, in elements of the buffer that holds it
  size_t total = 0;            // floats
  size_t total_bf16 = 0;       // bf16 values (keys and values when kv_bf16)
};

class RgState final : public StateImpl {
 public:
  explicit RgState(std::shared_ptr<const RgLayout> lay)
      : layout(std::move(lay)), buf(layout->total, 0.0f), kv16(layout->total_bf16, 0) {}

  std::unique_ptr<StateImpl> clone() const override { return std::make_unique<RgState>(*this); }
  int64_t position() const override { return pos; }
  void reset() override;
  size_t bytes() const override {
    return buf.size() * sizeof(float) + kv16.size() * sizeof(uint16_t) + sizeof(*this);
  }
  uint64_t model_fingerprint() const override { return layout->fingerprint; }
  void save(const std::string& path) const override;
  // Reads a state saved by save(); errors if the file is damaged or belongs to another model.
  static std::unique_ptr<RgState> load(std::shared_ptr<const RgLayout> lay,
                                       const std::string& path);

  float* conv(size_t layer) { return buf.data() + layout->offset[layer]; }
  float* h(size_t layer) { return conv(layer) + layout->conv_rows * layout->lru_width; }
  // The keys and values of an attention layer: f32 (!kv_bf16) or bf16 (kv_bf16).
  float* k(size_t layer) {
    assert(!layout->kv_bf16);
    return buf.data() + layout->offset[layer];
  }
  float* v(size_t layer) { return k(layer) + layout->window * layout->kv_dim; }
  uint16_t* k_bf16(size_t layer) {
    assert(layout->kv_bf16);
    return kv16.data() + layout->offset[layer];
  }
  uint16_t* v_bf16(size_t layer) { return k_bf16(layer) + layout->window * layout->kv_dim; }

  std::shared_ptr<const RgLayout> layout;
  std::vector<float> buf;
  std::vector<uint16_t> kv16;
  int64_t pos = 0;
  // The furthest position a state may reach: far past any real context, and far enough below
  // INT64_MAX that position arithmetic cannot overflow.
  static constexpr int64_t kMaxPosition = int64_t{1} << 40;
};

}  // namespace cachet::models
