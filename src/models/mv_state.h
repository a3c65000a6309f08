// The KV-cache state shared by the MetaVoice GPT stages: per layer, the keys and values of every
// position consumed so far for `rows` sequences that advance together (the two guidance rows
// of stage 1; one sequence for stage 2).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cachet/state_impl.h"

namespace cachet::models {

struct MvKvLayout {
  std::string arch;  // "metavoice_stage1" | "metavoice_stage2"
  uint64_t fingerprint = 0;
  int64_t layers = 0, rows = 0, kv_dim = 0;
  int64_t max_positions = 0;  // block_size
};

class MvKvState final : public StateImpl {
 public:
  explicit MvKvState(std::shared_ptr<const MvKvLayout> lay);

  std::unique_ptr<StateImpl> clone() const override { return std::make_unique<MvKvState>(*this); }
  int64_t position() const override { return pos; }
  void reset() override;
  size_t bytes() const override;
  uint64_t model_fingerprint() const override { return layout->fingerprint; }
  void save(const std::string& path) const override;
  static std::unique_ptr<MvKvState> load(std::shared_ptr<const MvKvLayout> lay,
                                         const std::string& path);

  // Makes room for positions [0, n) (n <= max_positions); capacity grows geometrically, so
  // steps allocate only now and then.
  void reserve_positions(int64_t n);
  // Key / value row of sequence `row` at position p (p < the reserved count), [kv_dim] floats.
  float* k(int64_t layer, int64_t p, int64_t row) {
    return kv[2 * layer].data() + (p * layout->rows + row) * layout->kv_dim;
  }
  float* v(int64_t layer, int64_t p, int64_t row) {
    return kv[2 * layer + 1].data() + (p * layout->rows + row) * layout->kv_dim;
  }
  // Floats between the keys of consecutive positions of one row.
  int64_t pos_stride() const { return layout->rows * layout->kv_dim; }

  std::shared_ptr<const MvKvLayout> layout;
  std::vector<std::vector<float>> kv;  // per layer: keys, then values; [pos][rows][kv_dim]
  int64_t pos = 0;
  bool text_ended = false;  // stage 2, spk_emb_on_text == false: the end of text was seen
};

}  // namespace cachet::models
