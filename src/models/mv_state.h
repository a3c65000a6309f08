// The KV-cache state shared by the MetaVoice GPT stages: per layer, the keys and values of every
// position consumed so far for `rows` sequences that advance together (the two guidance rows
// of stage 1; one sequence for stage 2).
//
// Each (layer, row, head) has its keys and its values as one contiguous [capacity, head_dim]
// block, so that attending a head streams its cache from memory in order. The elements are f32,
// or bf16 (half the bytes to read per step) when the model's matrices are not full precision.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cachet/dtype.h"
#include "cachet/kernels.h"
#include "cachet/state_impl.h"

namespace cachet::models {

struct MvKvLayout {
  std::string arch;  // "metavoice_stage1" | "metavoice_stage2"
  uint64_t fingerprint = 0;
  int64_t layers = 0, rows = 0, kv_dim = 0;
  int64_t kv_heads = 1;        // kv_dim = kv_heads * head_dim
  DType kv_type = DType::F32;  // F32 or BF16
  int64_t max_positions = 0;   // block_size

  int64_t head_dim() const { return kv_dim / kv_heads; }
  size_t elem_bytes() const { return kv_type == DType::BF16 ? 2 : 4; }
};

class MvKvState final : public StateImpl {
 public:
  explicit MvKvState(std::shared_ptr<const MvKvLayout> lay);

  MvKvState(const MvKvState& o);  // copies the positions in use only
  MvKvState& operator=(const MvKvState&) = delete;

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
  // Stores the key and value rows ([kv_dim] f32 each, all heads) of sequence `row` at position p
  // (p < the reserved count), rounded to bf16 in a bf16 cache.
  void put(int64_t layer, int64_t p, int64_t row, const float* k, const float* v);
  // put for heads [h0, h1) only (k and v still hold every head): callers that split the heads
  // over threads.
  void put_heads(int64_t layer, int64_t p, int64_t row, int64_t h0, int64_t h1, const float* k,
                 const float* v);
  // The keys of head h of sequence `row`, positions [0, n), as an [n, head_dim] matrix.
  MatView keys(int64_t layer, int64_t row, int64_t h, int64_t n) const;
  // The values of head h of sequence `row` from position 0 on, rows head_dim apart: f32 (an F32
  // cache) or bf16 bits (a BF16 cache).
  const float* values_f32(int64_t layer, int64_t row, int64_t h) const;
  const uint16_t* values_bf16(int64_t layer, int64_t row, int64_t h) const;

  std::shared_ptr<const MvKvLayout> layout;
  int64_t pos = 0;
  bool text_ended = false;  // stage 2, spk_emb_on_text == false: the end of text was seen

 private:
  // kind 0: keys, 1: values.
  const uint8_t* block(int64_t layer, int kind, int64_t row, int64_t h) const {
    return kv_[2 * layer + kind].data() +
           static_cast<size_t>((row * layout->kv_heads + h) * capacity_ * layout->head_dim()) *
               layout->elem_bytes();
  }
  uint8_t* block(int64_t layer, int kind, int64_t row, int64_t h) {
    return const_cast<uint8_t*>(std::as_const(*this).block(layer, kind, row, h));
  }
  // Bytes of a head block that hold positions [0, pos).
  size_t used_bytes() const { return head_bytes(pos); }
  // Bytes of one head's first n positions.
  size_t head_bytes(int64_t n) const {
    return static_cast<size_t>(n * layout->head_dim()) * layout->elem_bytes();
  }

  // Storage that is not zeroed when allocated: only positions written are ever read, and pages
  // are touched as positions fill them.
  struct Bytes {
    std::unique_ptr<uint8_t[]> p;
    uint8_t* data() const { return p.get(); }
  };
  std::vector<Bytes> kv_;  // per layer: keys, then values; [rows][heads][capacity][head_dim]
  int64_t capacity_ = 0;   // positions per head block
};

}  // namespace cachet::models
