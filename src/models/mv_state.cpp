#include "mv_state.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "cachet/error.h"
#include "cachet/quant.h"
#include "cachet/state_file.h"

namespace cachet::models {

namespace {
// The first `bytes` of each of `blocks` head blocks, from blocks src_stride bytes apart to blocks
// dst_stride apart (growing, forking, saving and loading a cache all move its heads this way).
void copy_heads(uint8_t* dst, size_t dst_stride, const uint8_t* src, size_t src_stride,
                int64_t blocks, size_t bytes) {
  if (bytes == 0) return;
  for (int64_t b = 0; b < blocks; ++b)
    std::memcpy(dst + b * dst_stride, src + b * src_stride, bytes);
}
}  // namespace

MvKvState::MvKvState(std::shared_ptr<const MvKvLayout> lay)
    : layout(std::move(lay)), kv_(static_cast<size_t>(2 * layout->layers)) {
  CACHET_CHECK(layout->kv_type == DType::F32 || layout->kv_type == DType::BF16,
               "metavoice: KV cache type must be F32 or BF16");
  CACHET_CHECK(layout->kv_heads > 0 && layout->kv_dim % layout->kv_heads == 0, "metavoice: kv_dim ",
               layout->kv_dim, " is not a multiple of ", layout->kv_heads, " heads");
}

MvKvState::MvKvState(const MvKvState& o) : StateImpl(o), layout(o.layout), kv_(o.kv_.size()) {
  reserve_positions(o.pos);
  for (size_t i = 0; i < kv_.size(); ++i)
    copy_heads(kv_[i].data(), head_bytes(capacity_), o.kv_[i].data(), o.head_bytes(o.capacity_),
               layout->rows * layout->kv_heads, o.used_bytes());
  pos = o.pos;
  text_ended = o.text_ended;
}

void MvKvState::reset() {
  for (auto& c : kv_) c.p.reset();
  capacity_ = 0;
  pos = 0;
  text_ended = false;
}

size_t MvKvState::bytes() const {
  // What the positions in use take (pages past them are not touched until written).
  return sizeof(*this) +
         static_cast<size_t>(layout->layers * layout->rows * layout->kv_heads) * 2 * used_bytes();
}

void MvKvState::reserve_positions(int64_t n) {
  if (n > layout->max_positions)
    fail("metavoice: ", n, " positions exceed block_size ", layout->max_positions);
  if (n <= capacity_) return;
  const int64_t cap = std::max(n, std::min(2 * capacity_, layout->max_positions));
  const int64_t blocks = layout->rows * layout->kv_heads;
  const size_t old_block = head_bytes(capacity_), new_block = head_bytes(cap);
  for (Bytes& c : kv_) {
    Bytes grown{std::unique_ptr<uint8_t[]>(new uint8_t[static_cast<size_t>(blocks) * new_block])};
    copy_heads(grown.data(), new_block, c.data(), old_block, blocks, used_bytes());
    c = std::move(grown);
  }
  capacity_ = cap;
}

void MvKvState::put(int64_t layer, int64_t p, int64_t row, const float* k, const float* v) {
  put_heads(layer, p, row, 0, layout->kv_heads, k, v);
}

void MvKvState::put_heads(int64_t layer, int64_t p, int64_t row, int64_t h0, int64_t h1,
                          const float* k, const float* v) {
  const int64_t hd = layout->head_dim();
  for (int64_t h = h0; h < h1; ++h) {
    uint8_t* kd = block(layer, 0, row, h) + head_bytes(p);
    uint8_t* vd = block(layer, 1, row, h) + head_bytes(p);
    quantize_row(layout->kv_type, k + h * hd, kd, hd);  // F32: a copy; BF16: rounded
    quantize_row(layout->kv_type, v + h * hd, vd, hd);
  }
}

MatView MvKvState::keys(int64_t layer, int64_t row, int64_t h, int64_t n) const {
  return MatView{layout->kv_type, n, layout->head_dim(), block(layer, 0, row, h), head_bytes(1)};
}

const float* MvKvState::values_f32(int64_t layer, int64_t row, int64_t h) const {
  return reinterpret_cast<const float*>(block(layer, 1, row, h));
}

const uint16_t* MvKvState::values_bf16(int64_t layer, int64_t row, int64_t h) const {
  return reinterpret_cast<const uint16_t*>(block(layer, 1, row, h));
}

// Sections: "position", "text_ended", the layout sizes (checked on load) and per layer
// "k.N" / "v.N" ([rows][kv_heads][position][head_dim] in the cache's type, F32 or BF16).
void MvKvState::save(const std::string& path) const {
  StateWriter w(layout->arch, layout->fingerprint);
  w.add_i64("position", pos);
  w.add_i64("text_ended", text_ended ? 1 : 0);
  w.add_i64("layers", layout->layers);
  w.add_i64("rows", layout->rows);
  w.add_i64("kv_dim", layout->kv_dim);
  w.add_i64("kv_heads", layout->kv_heads);
  const int64_t blocks = layout->rows * layout->kv_heads;
  const size_t used = used_bytes();
  std::vector<uint8_t> packed(static_cast<size_t>(blocks) * used);
  for (int64_t l = 0; l < layout->layers; ++l)
    for (int kind = 0; kind < 2; ++kind) {
      copy_heads(packed.data(), used, kv_[2 * l + kind].data(), head_bytes(capacity_), blocks,
                 used);
      w.add_section((kind == 0 ? "k." : "v.") + std::to_string(l), packed.data(), packed.size(),
                    layout->kv_type);
    }
  w.write(path);
}

std::unique_ptr<MvKvState> MvKvState::load(std::shared_ptr<const MvKvLayout> lay,
                                           const std::string& path) {
  StateReader r = StateReader::open(path);
  r.expect_model(lay->arch, lay->fingerprint);
  auto check = [&](const char* name, int64_t want) {
    const int64_t got = r.i64(name);
    if (got != want)
      fail(path, ": state section '", name, "' is ", got, ", this model needs ", want);
  };
  check("layers", lay->layers);
  check("rows", lay->rows);
  check("kv_dim", lay->kv_dim);
  check("kv_heads", lay->kv_heads);
  const int64_t pos = r.i64("position");
  if (pos < 0 || pos > lay->max_positions)
    fail(path, ": state position ", pos, " is outside [0, ", lay->max_positions, "]");
  const int64_t te = r.i64("text_ended");
  if (te != 0 && te != 1) fail(path, ": state section 'text_ended' is ", te, ", not 0 or 1");
  auto st = std::make_unique<MvKvState>(lay);
  st->reserve_positions(pos);
  const int64_t blocks = lay->rows * lay->kv_heads;
  const size_t used = st->head_bytes(pos);
  for (int64_t l = 0; l < lay->layers; ++l)
    for (int kind = 0; kind < 2; ++kind) {
      const std::string name = (kind == 0 ? "k." : "v.") + std::to_string(l);
      if (r.section_dtype(name) != lay->kv_type)
        fail(path, ": state section '", name, "' holds ", dtype_name(r.section_dtype(name)),
             ", this model's cache is ", dtype_name(lay->kv_type));
      const auto data = r.section_exact(name, static_cast<size_t>(blocks) * used);
      copy_heads(st->kv_[2 * l + kind].data(), st->head_bytes(st->capacity_), data.data(), used,
                 blocks, used);
    }
  st->pos = pos;
  st->text_ended = te == 1;
  return st;
}

}  // namespace cachet::models
