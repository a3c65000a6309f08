#include "rg_state.h"

#include <algorithm>

#include "cachet/error.h"
#include "cachet/state_file.h"

namespace cachet::models {

namespace {
constexpr char kArch[] = "recurrent_gemma";
}  // namespace

void RgState::reset() {
  std::fill(buf.begin(), buf.end(), 0.0f);
  std::fill(kv16.begin(), kv16.end(), uint16_t{0});
  pos = 0;
}

// Sections: "position" (i64), the layout sizes (i64, checked on load), "caches" (f32, the
// state buffer in layout order) and, with bf16 keys and values, "kv_bf16" (their buffer).
void RgState::save(const std::string& path) const {
  StateWriter w(kArch, layout->fingerprint);
  w.add_i64("position", pos);
  w.add_i64("layers", static_cast<int64_t>(layout->offset.size()));
  w.add_i64("conv_rows", layout->conv_rows);
  w.add_i64("lru_width", layout->lru_width);
  w.add_i64("window", layout->window);
  w.add_i64("kv_dim", layout->kv_dim);
  w.add_i64("kv_bits", layout->kv_bf16 ? 16 : 32);
  w.add_section_ref("caches", buf.data(), buf.size() * sizeof(float), DType::F32);
  if (layout->kv_bf16)
    w.add_section_ref("kv_bf16", kv16.data(), kv16.size() * sizeof(uint16_t), DType::BF16);
  w.write(path);
}

std::unique_ptr<RgState> RgState::load(std::shared_ptr<const RgLayout> lay,
                                       const std::string& path) {
  StateReader r = StateReader::open(path);
  r.expect_model(kArch, lay->fingerprint);
  auto check = [&](const char* name, int64_t want) {
    const int64_t got = r.i64(name);
    if (got != want)
      fail(path, ": state section '", name, "' is ", got, ", this model needs ", want);
  };
  check("layers", static_cast<int64_t>(lay->offset.size()));
  check("conv_rows", lay->conv_rows);
  check("lru_width", lay->lru_width);
  check("window", lay->window);
  check("kv_dim", lay->kv_dim);
  // Files from before bf16 caches have no kv_bits: theirs were f32.
  const int64_t kv_bits = r.has("kv_bits") ? r.i64("kv_bits") : 32;
  if (kv_bits != (lay->kv_bf16 ? 16 : 32))
    fail(path, ": state section 'kv_bits' is ", kv_bits, ", this model needs ",
         lay->kv_bf16 ? 16 : 32);
  const int64_t pos = r.i64("position");
  if (pos < 0 || pos > RgState::kMaxPosition)
    fail(path, ": state position ", pos, " is outside [0, ", RgState::kMaxPosition, "]");
  auto st = std::make_unique<RgState>(lay);
  r.read_exact("caches", st->buf.data(), st->buf.size() * sizeof(float));
  if (lay->kv_bf16) r.read_exact("kv_bf16", st->kv16.data(), st->kv16.size() * sizeof(uint16_t));
  st->pos = pos;
  return st;
}

}  // namespace cachet::models
