#include "mv_state.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "cachet/env.h"
#include "cachet/error.h"
#include "cachet/ops.h"
#include "cachet/quant.h"
#include "cachet/state_file.h"
#include "cachet/tensor.h"

namespace cachet::models {

namespace {
constexpr size_t kRunTarget = size_t{2} << 20;  // bytes of a layer's keys (or values) per run
}  // namespace

void set_kv_run(MvKvLayout& lay) {
  const size_t per_position = static_cast<size_t>(lay.rows * lay.kv_heads) * lay.entry_bytes();
  const int64_t run = env_count(
      "CACHET_KV_RUN", static_cast<int64_t>(kRunTarget / std::max<size_t>(per_position, 1)));
  lay.run = std::clamp<int64_t>(run, 1, std::max<int64_t>(lay.max_positions, 1));
}

MvKvState::MvKvState(std::shared_ptr<const MvKvLayout> lay) : layout(std::move(lay)) {
  CACHET_CHECK(layout->kv_type == DType::F32 || layout->kv_type == DType::BF16 ||
                   layout->kv_type == DType::I8,
               "metavoice: KV cache type must be F32, BF16 or I8");
  CACHET_CHECK(layout->kv_heads > 0 && layout->kv_dim % layout->kv_heads == 0, "metavoice: kv_dim ",
               layout->kv_dim, " is not a multiple of ", layout->kv_heads, " heads");
  CACHET_CHECK(layout->run > 0, "metavoice: KV cache layout without a run length");
}

MvKvState::MvKvState(const MvKvState& o) : StateImpl(o), layout(o.layout) {
  reserve_positions(o.pos);
  copy_positions(o, o.pos);
  pos = o.pos;
  text_ended = o.text_ended;
}

void MvKvState::copy_positions(const MvKvState& o, int64_t n) {
  if (n <= 0) return;
  // Whole runs are one region each; of the last, partial run, each head's first rows.
  const int64_t whole = n / layout->run;
  std::memcpy(kv_.get(), o.kv_.get(), static_cast<size_t>(whole) * run_bytes());
  const int64_t rest = n - whole * layout->run;
  if (rest == 0) return;
  const size_t block = block_bytes(), used = head_bytes(rest), rows = head_bytes(layout->run),
               scales = static_cast<size_t>(rest) * layout->scale_bytes();
  uint8_t* dst = static_cast<uint8_t*>(kv_.get()) + static_cast<size_t>(whole) * run_bytes();
  const uint8_t* src =
      static_cast<const uint8_t*>(o.kv_.get()) + static_cast<size_t>(whole) * run_bytes();
  for (int64_t b = 0; b < blocks(); ++b) {
    std::memcpy(dst + b * block, src + b * block, used);
    if (scales) std::memcpy(dst + b * block + rows, src + b * block + rows, scales);
  }
}

void MvKvState::reset() {
  kv_.reset();
  backed_ = 0;
  pos = 0;
  text_ended = false;
}

size_t MvKvState::bytes() const {
  // What the positions in use take.
  return sizeof(*this) +
         static_cast<size_t>(blocks()) * static_cast<size_t>(pos) * layout->entry_bytes();
}

size_t MvKvState::cache_bytes() const {
  size_t total = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(runs_for(layout->max_positions)), run_bytes(),
                             &total))
    fail("metavoice: a KV cache of ", layout->max_positions, " positions of ", blocks(),
         " head blocks does not fit in memory");
  return total;
}

void MvKvState::reserve_positions(int64_t n) {
  if (n > layout->max_positions)
    fail("metavoice: ", n, " positions exceed block_size ", layout->max_positions);
  if (n <= 0) return;
  if (!kv_) {
    kv_ = reserved_pages(cache_bytes(), run_bytes() % kRunTarget == 0);
    backed_ = 0;
  }
  // The runs up to n, and as much of the next as the share of its own run that n has reached:
  // the next run has memory before its first position comes, a piece a step rather than all
  // at one step (96 MiB at stage 1's shape; first writes to fresh memory are slow in some
  // virtual machines: 0.2 s for a run, one test host).
  const int64_t into = (n - 1) % layout->run + 1;  // positions of n's run up to n
  const size_t run = run_bytes();
  size_t want = static_cast<size_t>(runs_for(n)) * run +
                run / static_cast<size_t>(layout->run) * static_cast<size_t>(into);
  want = std::min((want + kRunTarget - 1) / kRunTarget * kRunTarget, cache_bytes());
  if (want <= backed_) return;
  back_pages(static_cast<uint8_t*>(kv_.get()) + backed_, want - backed_);
  backed_ = want;
}

void MvKvState::prefetch_put(int64_t layer, int64_t p, int64_t row) const {
  const size_t bytes = head_bytes(1);
  for (int kind = 0; kind < 2; ++kind)
    for (int64_t h = 0; h < layout->kv_heads; ++h) {
      const uint8_t* r = at(layer, kind, row, h, p);
      for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(r + b);
      if (layout->scale_bytes()) __builtin_prefetch(scale_at(layer, kind, row, h, p));
    }
}

void MvKvState::put(int64_t layer, int64_t p, int64_t row, const float* k, const float* v) {
  put_heads(layer, p, row, 0, layout->kv_heads, k, v);
}

void MvKvState::put_heads(int64_t layer, int64_t p, int64_t row, int64_t h0, int64_t h1,
                          const float* k, const float* v) {
  const int64_t hd = layout->head_dim();
  for (int64_t h = h0; h < h1; ++h)
    for (int kind = 0; kind < 2; ++kind) {
      const float* x = (kind == 0 ? k : v) + h * hd;
      if (layout->kv_type == DType::I8) {
        const float s =
            ops::quantize_i8(x, hd, reinterpret_cast<int8_t*>(at(layer, kind, row, h, p)));
        std::memcpy(scale_at(layer, kind, row, h, p), &s, sizeof s);
      } else {  // F32: a copy; BF16: rounded
        quantize_row(layout->kv_type, x, at(layer, kind, row, h, p), hd);
      }
    }
}

// Sections: "position", "text_ended", the layout sizes (checked on load) and per layer
// "k.N" / "v.N" ([rows][kv_heads][position][head_dim] in the cache's type, F32, BF16 or I8), and
// for I8 "ks.N" / "vs.N" (the rows' F32 scales, [rows][kv_heads][position]).
void MvKvState::save(const std::string& path) const {
  StateWriter w(layout->arch, layout->fingerprint);
  w.add_i64("position", pos);
  w.add_i64("text_ended", text_ended ? 1 : 0);
  w.add_i64("layers", layout->layers);
  w.add_i64("rows", layout->rows);
  w.add_i64("kv_dim", layout->kv_dim);
  w.add_i64("kv_heads", layout->kv_heads);
  std::vector<uint8_t> packed;
  each_section(
      *layout, pos, [&](int64_t l, int kind, bool scales, const std::string& name, size_t bytes) {
        packed.resize(bytes);
        uint8_t* out = packed.data();
        for_section(*this, l, kind, scales, [&](const uint8_t* rows, size_t b) {
          std::memcpy(out, rows, b);
          out += b;
        });
        w.add_section(name, packed.data(), packed.size(), scales ? DType::F32 : layout->kv_type);
      });
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
  st->pos = pos;
  each_section(
      *lay, pos, [&](int64_t l, int kind, bool scales, const std::string& name, size_t bytes) {
        const DType want = scales ? DType::F32 : lay->kv_type;
        if (r.section_dtype(name) != want)
          fail(path, ": state section '", name, "' holds ", dtype_name(r.section_dtype(name)),
               ", this model's cache needs ", dtype_name(want));
        const auto data = r.section_exact(name, bytes);
        const uint8_t* in = data.data();
        for_section(*st, l, kind, scales, [&](uint8_t* rows, size_t b) {
          std::memcpy(rows, in, b);
          in += b;
        });
      });
  st->text_ended = te == 1;
  return st;
}

}  // namespace cachet::models
