#include "mv_state.h"

#include <algorithm>

#include "cachet/error.h"
#include "cachet/state_file.h"

namespace cachet::models {

MvKvState::MvKvState(std::shared_ptr<const MvKvLayout> lay)
    : layout(std::move(lay)), kv(static_cast<size_t>(2 * layout->layers)) {}

void MvKvState::reset() {
  for (auto& c : kv) c.clear();
  pos = 0;
  text_ended = false;
}

size_t MvKvState::bytes() const {
  size_t b = sizeof(*this);
  for (const auto& c : kv) b += c.capacity() * sizeof(float);
  return b;
}

void MvKvState::reserve_positions(int64_t n) {
  if (n > layout->max_positions)
    fail("metavoice: ", n, " positions exceed block_size ", layout->max_positions);
  const size_t need = static_cast<size_t>(n * pos_stride());
  for (auto& c : kv) {
    if (c.size() >= need) continue;
    if (c.capacity() < need) {
      const size_t cap = std::max(
          need,
          std::min(2 * c.capacity(), static_cast<size_t>(layout->max_positions * pos_stride())));
      c.reserve(cap);
    }
    c.resize(need);
  }
}

// Sections: "position", "text_ended", the layout sizes (checked on load) and per layer
// "k.N" / "v.N" (f32, [position][rows][kv_dim]).
void MvKvState::save(const std::string& path) const {
  StateWriter w(layout->arch, layout->fingerprint);
  w.add_i64("position", pos);
  w.add_i64("text_ended", text_ended ? 1 : 0);
  w.add_i64("layers", layout->layers);
  w.add_i64("rows", layout->rows);
  w.add_i64("kv_dim", layout->kv_dim);
  const size_t n = static_cast<size_t>(pos * pos_stride());
  for (int64_t l = 0; l < layout->layers; ++l) {
    w.add_section_ref("k." + std::to_string(l), kv[2 * l].data(), n * sizeof(float), DType::F32);
    w.add_section_ref("v." + std::to_string(l), kv[2 * l + 1].data(), n * sizeof(float),
                      DType::F32);
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
  const int64_t pos = r.i64("position");
  if (pos < 0 || pos > lay->max_positions)
    fail(path, ": state position ", pos, " is outside [0, ", lay->max_positions, "]");
  const int64_t te = r.i64("text_ended");
  if (te != 0 && te != 1) fail(path, ": state section 'text_ended' is ", te, ", not 0 or 1");
  auto st = std::make_unique<MvKvState>(lay);
  st->reserve_positions(pos);
  const size_t n = static_cast<size_t>(pos * st->pos_stride());
  for (int64_t l = 0; l < lay->layers; ++l) {
    r.read_exact("k." + std::to_string(l), st->kv[2 * l].data(), n * sizeof(float));
    r.read_exact("v." + std::to_string(l), st->kv[2 * l + 1].data(), n * sizeof(float));
  }
  st->pos = pos;
  st->text_ended = te == 1;
  return st;
}

}  // namespace cachet::models
