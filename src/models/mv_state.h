// The KV-cache state shared by the MetaVoice GPT stages: per layer, the keys and values of every
// position consumed so far for `rows` sequences that advance together (the two guidance rows
// of stage 1; one sequence for stage 2). The elements are f32, bf16 (half the bytes to read
// per step), or int8 with an f32 scale per row of a head (I8: a little over a quarter), as the
// model chooses.
//
// Positions go in runs of layout.run (about 2 MiB of one layer's keys, or values, for every row
// and head: 256 positions of stage 1). Within a run, each (layer, row, head) has its rows
// contiguous (then, in an I8 cache, the rows' scales), so attending a head streams its cache in
// long pieces; a run of every layer is one contiguous region. The whole cache is one reservation of
// address space, made at the first use for every position (reserved_pages), so it never moves; the
// next run's region is given memory a piece a step (back_pages) while the positions fill the
// current one, in 2 MiB pages where the regions fill them. (docs/architecture.md, "Attention
// caches": what the earlier layouts, a cache grown by copying and whole-head blocks, cost per
// step.)
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "cachet/dtype.h"
#include "cachet/state_impl.h"

namespace cachet::models {

struct MvKvLayout {
  std::string arch;  // "metavoice_stage1" | "metavoice_stage2"
  uint64_t fingerprint = 0;
  int64_t layers = 0, rows = 0, kv_dim = 0;
  int64_t kv_heads = 1;        // kv_dim = kv_heads * head_dim
  DType kv_type = DType::F32;  // F32, BF16 or I8 (rows of int8 with an f32 scale each)
  int64_t max_positions = 0;   // block_size
  int64_t run = 0;             // positions per run: set_kv_run

  int64_t head_dim() const { return kv_dim / kv_heads; }
  // Bytes of one head's row (head_dim values) of keys or values, and of its scale.
  size_t row_bytes() const {
    return static_cast<size_t>(head_dim()) * (kv_type == DType::BF16 ? 2
                                              : kv_type == DType::I8 ? 1
                                                                     : 4);
  }
  size_t scale_bytes() const { return kv_type == DType::I8 ? sizeof(float) : 0; }
  // Bytes of one head's keys (or values) at one position: the row and its scale.
  size_t entry_bytes() const { return row_bytes() + scale_bytes(); }
};

// Sets lay.run: the positions whose keys (or values) of every row and head fill 2 MiB, at most
// max_positions, or CACHET_KV_RUN positions where the environment sets it (tests use short
// runs). The run is not part of a saved state: states load whatever the run.
void set_kv_run(MvKvLayout& lay);

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

  // Makes room for positions [0, n): checks n <= max_positions, reserves the cache at the first
  // use and gives memory to the runs up to n.
  void reserve_positions(int64_t n);
  // Stores the key and value rows ([kv_dim] f32 each, all heads) of sequence `row` at position p
  // (p < the reserved count), rounded to bf16 in a bf16 cache, to int8 rows in an I8 one
  // (ops::quantize_i8).
  void put(int64_t layer, int64_t p, int64_t row, const float* k, const float* v);
  // put for heads [h0, h1) only (k and v still hold every head): callers that split the heads
  // over threads.
  void put_heads(int64_t layer, int64_t p, int64_t row, int64_t h0, int64_t h1, const float* k,
                 const float* v);
  // Asks the caches for the key and value rows of every head of sequence `row` at position p
  // (reserved) of a layer, ahead of a put_heads there.
  void prefetch_put(int64_t layer, int64_t p, int64_t row) const;
  // fn(j, rows, count) over the keys (kind 0) or values (kind 1) of head h of sequence `row` at
  // positions [0, n) (n <= the reserved count), in order, a run at a time: rows holds positions
  // j .. j + count - 1, head_dim elements apart. T is float (an F32 cache), uint16_t (bf16) or
  // int8_t (I8; their scales: scales()).
  template <typename T, typename Fn>
  void for_runs(int64_t layer, int kind, int64_t row, int64_t h, int64_t n, Fn&& fn) const {
    for (int64_t j = 0; j < n; j += layout->run)
      fn(j, rows<T>(layer, kind, row, h, j), std::min(layout->run, n - j));
  }
  // The row of position p (reserved) of that head, and after it those of the rest of p's run.
  template <typename T>
  const T* rows(int64_t layer, int kind, int64_t row, int64_t h, int64_t p) const {
    return reinterpret_cast<const T*>(at(layer, kind, row, h, p));
  }
  // In an I8 cache, the scale of that row, and after it those of the rest of p's run.
  const float* scales(int64_t layer, int kind, int64_t row, int64_t h, int64_t p) const {
    return reinterpret_cast<const float*>(scale_at(layer, kind, row, h, p));
  }

  std::shared_ptr<const MvKvLayout> layout;
  int64_t pos = 0;
  bool text_ended = false;  // stage 2, spk_emb_on_text == false: the end of text was seen

 private:
  // The start of the block of head h of sequence `row` in p's run.
  const uint8_t* block_at(int64_t layer, int kind, int64_t row, int64_t h, int64_t p) const {
    const int64_t block = ((2 * layer + kind) * layout->rows + row) * layout->kv_heads + h;
    return static_cast<const uint8_t*>(kv_.get()) +
           static_cast<size_t>(p / layout->run) * run_bytes() +
           static_cast<size_t>(block) * block_bytes();
  }
  // The row of position p of head h of sequence `row`, kind 0 keys, 1 values (reserved only).
  const uint8_t* at(int64_t layer, int kind, int64_t row, int64_t h, int64_t p) const {
    return block_at(layer, kind, row, h, p) + head_bytes(p % layout->run);
  }
  uint8_t* at(int64_t layer, int kind, int64_t row, int64_t h, int64_t p) {
    return const_cast<uint8_t*>(std::as_const(*this).at(layer, kind, row, h, p));
  }
  // Its scale (I8 only).
  const uint8_t* scale_at(int64_t layer, int kind, int64_t row, int64_t h, int64_t p) const {
    return block_at(layer, kind, row, h, p) + head_bytes(layout->run) +
           static_cast<size_t>(p % layout->run) * layout->scale_bytes();
  }
  uint8_t* scale_at(int64_t layer, int kind, int64_t row, int64_t h, int64_t p) {
    return const_cast<uint8_t*>(std::as_const(*this).scale_at(layer, kind, row, h, p));
  }
  // Bytes of n rows of one head (their scales apart).
  size_t head_bytes(int64_t n) const { return static_cast<size_t>(n) * layout->row_bytes(); }
  // Bytes of a head's block of a run: its rows, then their scales, then up to a 4 KiB multiple
  // where that adds at most 1/64: so that a run of int8 rows (132 bytes a position) still
  // fills whole 2 MiB pages. Without them a step of stage 1 reads its int8 cache through
  // thousands of 4 KiB pages, and a miss in the TLB is a page walk (two levels of tables in a
  // virtual machine): per pair of heads (ad-hoc counters, positions 80-207, Q4_K), writing
  // the step's keys and values took 4 300 cycles against 1 500 in 2 MiB pages, the scores
  // 6 400 against 4 500, the weighted sum 3 800 against 2 800.
  size_t block_bytes() const {
    const size_t raw = static_cast<size_t>(layout->run) * layout->entry_bytes();
    const size_t padded = (raw + 4095) / 4096 * 4096;
    return (padded - raw) * 64 <= raw ? padded : raw;
  }
  // Head blocks of a run: layers, keys and values, rows, heads.
  int64_t blocks() const { return 2 * layout->layers * layout->rows * layout->kv_heads; }
  // Bytes of a run of every layer.
  size_t run_bytes() const { return static_cast<size_t>(blocks()) * block_bytes(); }
  int64_t runs_for(int64_t n) const { return (n + layout->run - 1) / layout->run; }
  // Bytes of the whole reservation: the runs of max_positions (throws if past size_t).
  size_t cache_bytes() const;
  // Copies positions [0, n) of every head from `o`'s cache into this one (reserved for n).
  void copy_positions(const MvKvState& o, int64_t n);
  // fn(rows, bytes) over the keys (kind 0) or values of a layer at positions [0, pos), in the
  // order of a saved section ([rows][heads][position][head_dim]): a head's run at a time; with
  // `scales`, over their scales instead ([rows][heads][position]).
  // Self: MvKvState (rows to write) or const MvKvState (rows to read).
  // The saved sections, in order: fn(layer, kind, scales, name, bytes) for the rows ("k.N",
  // "v.N") and, in an I8 cache, their scales ("ks.N", "vs.N"), with the bytes of n positions.
  template <typename Fn>
  static void each_section(const MvKvLayout& lay, int64_t n, Fn&& fn) {
    const size_t heads = static_cast<size_t>(lay.rows * lay.kv_heads);
    for (int64_t l = 0; l < lay.layers; ++l)
      for (int kind = 0; kind < 2; ++kind)
        for (bool scales : {false, true}) {
          if (scales && !lay.scale_bytes()) continue;
          fn(l, kind, scales,
             std::string(kind == 0 ? "k" : "v") + (scales ? "s." : ".") + std::to_string(l),
             heads * static_cast<size_t>(n) * (scales ? lay.scale_bytes() : lay.row_bytes()));
        }
  }
  template <typename Self, typename Fn>
  static void for_section(Self& self, int64_t layer, int kind, bool scales, Fn&& fn) {
    const MvKvLayout& lay = *self.layout;
    for (int64_t r = 0; r < lay.rows; ++r)
      for (int64_t h = 0; h < lay.kv_heads; ++h)
        for (int64_t j = 0; j < self.pos; j += lay.run) {
          const int64_t n = std::min(lay.run, self.pos - j);
          if (scales)
            fn(self.scale_at(layer, kind, r, h, j), static_cast<size_t>(n) * lay.scale_bytes());
          else
            fn(self.at(layer, kind, r, h, j), self.head_bytes(n));
        }
  }

  // [runs][layers][keys, values][rows][heads]([run][head_dim], then I8's [run] scales), or null
  // until first used.
  std::shared_ptr<void> kv_;
  size_t backed_ = 0;  // bytes from the start given memory so far
};

}  // namespace cachet::models
