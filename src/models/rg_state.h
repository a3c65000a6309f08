// The decoding state of one RecurrentGemma sequence.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cachet/state_impl.h"

namespace cachet::models {

// Where each layer's caches live in the state buffer (shared by all states of a model).
//   recurrent layer: conv window [conv_rows, lru_width] (oldest first), then h [lru_width]
//   attention layer: keys [window, kv_dim], then values [window, kv_dim] (slot = pos % window)
struct RgLayout {
  uint64_t fingerprint = 0;
  int64_t conv_rows = 0, lru_width = 0, window = 0, kv_dim = 0;
  std::vector<bool> attention;
  std::vector<size_t> offset;  // per layer, in floats
  size_t total = 0;            // floats
};

class RgState final : public StateImpl {
 public:
  explicit RgState(std::shared_ptr<const RgLayout> lay)
      : layout(std::move(lay)), buf(layout->total, 0.0f) {}

  std::unique_ptr<StateImpl> clone() const override { return std::make_unique<RgState>(*this); }
  int64_t position() const override { return pos; }
  void reset() override;
  size_t bytes() const override { return buf.size() * sizeof(float) + sizeof(*this); }
  uint64_t model_fingerprint() const override { return layout->fingerprint; }
  void save(const std::string& path) const override;
  // Reads a state saved by save(); errors if the file is damaged or belongs to another model.
  static std::unique_ptr<RgState> load(std::shared_ptr<const RgLayout> lay,
                                       const std::string& path);

  float* conv(size_t layer) { return buf.data() + layout->offset[layer]; }
  float* h(size_t layer) { return conv(layer) + layout->conv_rows * layout->lru_width; }
  float* k(size_t layer) { return buf.data() + layout->offset[layer]; }
  float* v(size_t layer) { return k(layer) + layout->window * layout->kv_dim; }

  std::shared_ptr<const RgLayout> layout;
  std::vector<float> buf;
  int64_t pos = 0;
};

}  // namespace cachet::models
