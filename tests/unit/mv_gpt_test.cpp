// MetaVoice GPT stages on tiny random models built in memory: prefill / step / chunk agreement,
// guidance rows, fork / reset / save / load of the state, stage-2 causal cache against the full
// causal pass, config parsing and error handling.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cachet/cpu.h"
#include "cachet/error.h"
#include "cachet/metavoice_gpt.h"
#include "cachet/threadpool.h"
#include "profile_check.h"

namespace cachet {
namespace {

ThreadPool& test_pool() {
  static ThreadPool pool(1);  // the machine running tests may be busy: no spinning workers
  return pool;
}

MvStage1Args tiny1() {
  MvStage1Args a;
  a.block_size = 40;
  a.vocab_size = 70;
  a.n_layer = 2;
  a.n_head = 4;
  a.n_local_heads = 2;  // grouped-query: two query heads per key/value head
  a.dim = 32;
  a.intermediate_size = 64;
  a.speaker_emb_dim = 16;
  return a;
}

MvStage2Args tiny2(bool causal) {
  MvStage2Args a;
  a.block_size = 24;
  a.vocab_sizes = {1600, 30};  // hierarchy 0 holds the end of text (1537)
  a.n_layer = 2;
  a.n_head = 2;
  a.n_embd = 32;
  a.speaker_emb_dim = 16;
  if (causal) {
    a.causal = true;
    a.target_vocab_sizes.clear();  // tied heads
    a.kv_cache_enabled = true;
    a.bias = true;
    a.norm_type = "rmsnorm";
    a.rmsnorm_eps = 1e-5;
    a.nonlinearity_type = "swiglu";
    a.swiglu_multiple_of = 16;
    a.spk_emb_on_text = false;
  } else {
    a.target_vocab_sizes = {30, 30, 25};
  }
  return a;
}

std::vector<int32_t> seq(int n, int vocab, int salt = 0) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 7 + 3 + salt * 13) % vocab);
  return t;
}

std::vector<float> speaker(int64_t n, float s = 1.0f) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(s * std::sin(0.7f * static_cast<float>(i) + 0.3f));
  return v;
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// Stage-1 logits [2][T][V] of both rows fed `chunk` tokens at a time (0: all at once).
std::vector<float> run1(MvStage1& m, State& st, const std::vector<int32_t>& r0,
                        const std::vector<int32_t>& r1, const float* spk, size_t chunk) {
  const size_t T = r0.size(), V = static_cast<size_t>(m.args().vocab_size);
  std::vector<float> all(2 * T * V), part;
  if (chunk == 0) chunk = T;
  for (size_t s = 0; s < T; s += chunk) {
    const size_t n = std::min(chunk, T - s);
    m.forward(st, std::span<const int32_t>(r0.data() + s, n),
              std::span<const int32_t>(r1.data() + s, n), spk, part, true);
    for (size_t b = 0; b < 2; ++b)
      std::copy(part.begin() + b * n * V, part.begin() + (b + 1) * n * V,
                all.begin() + (b * T + s) * V);
  }
  return all;
}

std::unique_ptr<MvStage1> model1(const MvStage1Args& a = tiny1(), uint64_t seed = 1,
                                 DType type = DType::F32) {
  return std::make_unique<MvStage1>(random_mv_stage1_files(a, type, seed, &test_pool()), a,
                                    &test_pool());
}

std::unique_ptr<MvStage2> model2(const MvStage2Args& a, uint64_t seed = 1) {
  return std::make_unique<MvStage2>(random_mv_stage2_files(a, seed), a, &test_pool());
}

// CACHET_KV_RUN set while it lives: the models built meanwhile keep their cache's positions in
// runs of that many (by default one run holds every position of these tiny models).
struct KvRunEnv {
  explicit KvRunEnv(const char* run) { setenv("CACHET_KV_RUN", run, 1); }
  ~KvRunEnv() { unsetenv("CACHET_KV_RUN"); }
  KvRunEnv(const KvRunEnv&) = delete;
  KvRunEnv& operator=(const KvRunEnv&) = delete;
};

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("cachet_mvgpt_" + std::to_string(getpid()) + "_" + name))
      .string();
}

// ------------------------------------------------------------------ stage 1

TEST(MvGptStage1, PrefillStepAndChunksAgree) {
  auto m = model1();
  const auto r0 = seq(33, 70), r1 = seq(33, 70, 1);
  const auto spk = speaker(16);
  State a = m->new_state();
  const auto ref = run1(*m, a, r0, r1, spk.data(), 0);
  EXPECT_EQ(a.position(), 33);
  for (size_t chunk : {1u, 2u, 5u, 16u, 32u}) {
    State b = m->new_state();
    EXPECT_LE(max_diff(ref, run1(*m, b, r0, r1, spk.data(), chunk)), 1e-4f) << "chunk " << chunk;
  }
}

// A profiled step names stage 1's phases, and its products read the weights the roofline counts:
// all of info().weight_bytes but the embedding rows and the norms.
TEST(MvGptStage1, ProfiledStepReadsTheRooflineBytes) {
  auto m = model1();
  const auto r0 = seq(5, 70), r1 = seq(5, 70, 1);
  const auto spk = speaker(16);
  State st = m->new_state();
  std::vector<float> logits;
  m->forward(st, std::span<const int32_t>(r0.data(), 4), std::span<const int32_t>(r1.data(), 4),
             spk.data(), logits);
  auto step = [&] {
    m->forward(st, std::span<const int32_t>(r0.data() + 4, 1),
               std::span<const int32_t>(r1.data() + 4, 1), spk.data(), logits);
  };
  expect_profiled_pass(step,
                       {"embedding", "attention wqkv", "attention", "attention wo", "mlp w1, w3",
                        "mlp w2", "output head"},
                       m->info().weight_bytes);
}

TEST(MvGptStage1, LongPrefillBeyondInternalPassSize) {
  MvStage1Args a = tiny1();
  a.block_size = 300;
  auto m = model1(a);
  const auto r0 = seq(290, 70);
  State s1 = m->new_state(), s2 = m->new_state();
  const auto ref = run1(*m, s1, r0, r0, nullptr, 0);
  EXPECT_LE(max_diff(ref, run1(*m, s2, r0, r0, nullptr, 37)), 1e-4f);
}

TEST(MvGptStage1, LastLogitsEqualLastRowOfAll) {
  auto m = model1();
  const auto r0 = seq(9, 70);
  const auto spk = speaker(16);
  State a = m->new_state(), b = m->new_state();
  const auto all = run1(*m, a, r0, r0, spk.data(), 0);
  std::vector<float> last;
  m->forward(b, r0, r0, spk.data(), last, false);
  ASSERT_EQ(last.size(), 2u * 70u);
  for (size_t r = 0; r < 2; ++r)
    for (size_t v = 0; v < 70; ++v)
      EXPECT_NEAR(last[r * 70 + v], all[(r * 9 + 8) * 70 + v], 1e-5f);  // matmul n = 2 vs 18
}

TEST(MvGptStage1, SpeakerTermOnlyOnRowZero) {
  auto m = model1();
  const auto r0 = seq(6, 70);
  const auto spk = speaker(16), spk2 = speaker(16, -2.0f);
  State a = m->new_state(), b = m->new_state(), c = m->new_state();
  const auto with = run1(*m, a, r0, r0, spk.data(), 0);
  const auto other = run1(*m, b, r0, r0, spk2.data(), 0);
  const auto none = run1(*m, c, r0, r0, nullptr, 0);
  const size_t half = with.size() / 2;
  const std::vector<float> w0(with.begin(), with.begin() + half),
      w1(with.begin() + half, with.end());
  const std::vector<float> o0(other.begin(), other.begin() + half),
      o1(other.begin() + half, other.end());
  const std::vector<float> n0(none.begin(), none.begin() + half),
      n1(none.begin() + half, none.end());
  EXPECT_EQ(max_diff(w1, n1), 0.0f);  // row 1 never sees the speaker
  EXPECT_EQ(max_diff(o1, n1), 0.0f);
  EXPECT_EQ(max_diff(n0, n1), 0.0f);  // same tokens, no speaker: identical rows
  EXPECT_GT(max_diff(w0, n0), 1e-3f);
  EXPECT_GT(max_diff(w0, o0), 1e-3f);
}

TEST(MvGptStage1, RowsAreIndependent) {
  // Row 1's tokens do not affect row 0's logits.
  auto m = model1();
  const auto r0 = seq(7, 70), r1a = seq(7, 70, 2), r1b = seq(7, 70, 5);
  State a = m->new_state(), b = m->new_state();
  const auto x = run1(*m, a, r0, r1a, nullptr, 0), y = run1(*m, b, r0, r1b, nullptr, 0);
  const size_t half = x.size() / 2;
  EXPECT_EQ(max_diff({x.begin(), x.begin() + half}, {y.begin(), y.begin() + half}), 0.0f);
  EXPECT_GT(max_diff({x.begin() + half, x.end()}, {y.begin() + half, y.end()}), 1e-3f);
}

TEST(MvGptStage1, ForkResetSaveLoad) {
  auto m = model1();
  const auto spk = speaker(16);
  const auto p = seq(8, 70), cont = seq(5, 70, 3);
  State a = m->new_state();
  std::vector<float> lg;
  m->forward(a, p, p, spk.data(), lg, false);
  State f = a.fork();
  const std::string path = temp_path("s1.state");
  a.save(path);
  const auto ref = run1(*m, a, cont, cont, spk.data(), 1);
  EXPECT_EQ(a.position(), 13);
  EXPECT_EQ(f.position(), 8);
  EXPECT_LE(max_diff(ref, run1(*m, f, cont, cont, spk.data(), 0)), 1e-4f);
  State l = m->load_state(path);
  EXPECT_EQ(l.position(), 8);
  EXPECT_LE(max_diff(ref, run1(*m, l, cont, cont, spk.data(), 2)), 1e-4f);
  // reset equals a fresh state
  State fresh = m->new_state();
  l.reset();
  EXPECT_EQ(l.position(), 0);
  EXPECT_EQ(max_diff(run1(*m, l, p, p, spk.data(), 0), run1(*m, fresh, p, p, spk.data(), 0)), 0.0f);
  // A damaged file is rejected.
  {
    std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(200);
    char c = 0x5a;
    io.write(&c, 1);
  }
  EXPECT_THROW(m->load_state(path), Error);
  std::filesystem::remove(path);
}

TEST(MvGptStage1, QuantizedModelsCacheInt8ForkSaveLoad) {
  // Models with quantized matrices keep keys and values as int8 rows with a scale each (132
  // bytes per 128 values against 512 in an f32 model's cache), and forks and saved states
  // continue exactly as the original.
  MvStage1Args a = tiny1();
  a.block_size = 64;
  a.dim = 256;
  a.intermediate_size = 256;
  a.speaker_emb_dim = 256;
  auto f32 = model1(a, 3, DType::F32);
  auto q = model1(a, 3, DType::Q8_0);
  const auto spk = speaker(256, 0.1f);
  const auto p = seq(48, 70), cont = seq(5, 70, 3);
  std::vector<float> lg;
  State sf = f32->new_state(), sq = q->new_state();
  f32->forward(sf, p, p, spk.data(), lg, false);
  q->forward(sq, p, p, spk.data(), lg, false);
  const size_t kv_f32 = 2 * 2 * 48 * 2 * 128 * 4;  // layers, k/v, positions, rows, kv_dim, f32
  EXPECT_GE(sf.bytes(), kv_f32);
  EXPECT_LT(sq.bytes(), sf.bytes() * 3 / 10);
  EXPECT_GE(sq.bytes(), sf.bytes() / 4);
  {
    // A bf16 model keeps bf16 keys and values (half), and CACHET_MV_KV chooses another type;
    // a state saved from one cache type does not load into a model with another.
    auto b = model1(a, 3, DType::BF16);
    State sb = b->new_state();
    b->forward(sb, p, p, spk.data(), lg, false);
    EXPECT_GE(sb.bytes(), sf.bytes() / 2);
    EXPECT_LT(sb.bytes(), sf.bytes() * 6 / 10);
    setenv("CACHET_MV_KV", "bf16", 1);
    auto qb = model1(a, 3, DType::Q8_0);
    State sqb = qb->new_state();
    qb->forward(sqb, p, p, spk.data(), lg, false);
    EXPECT_EQ(sqb.bytes(), sb.bytes());
    const std::string pb = temp_path("s1qb.state");
    sqb.save(pb);
    EXPECT_THROW(q->load_state(pb), Error);
    std::filesystem::remove(pb);
    setenv("CACHET_MV_KV", "q4", 1);
    EXPECT_THROW(model1(a, 3, DType::Q8_0), Error);
    unsetenv("CACHET_MV_KV");
  }

  State fork = sq.fork();
  const std::string path = temp_path("s1q.state");
  sq.save(path);
  const auto ref = run1(*q, sq, cont, cont, spk.data(), 1);
  EXPECT_EQ(max_diff(ref, run1(*q, fork, cont, cont, spk.data(), 1)), 0.0f);
  State l = q->load_state(path);
  EXPECT_EQ(l.position(), 48);
  EXPECT_EQ(max_diff(ref, run1(*q, l, cont, cont, spk.data(), 1)), 0.0f);
  // The f32 model refuses it (another model).
  EXPECT_THROW(f32->load_state(path), Error);
  // A state file does not depend on the CPU: the same model built for AVX2 loads the file and
  // saves the same bytes, and the AVX-512 model continues from that file exactly as from its
  // own.
  if (cachet::best_isa() >= cachet::Isa::Avx512) {
    const std::string path2 = temp_path("s1q2.state");
    cachet::set_isa(cachet::Isa::Avx2);
    {
      auto q2 = model1(a, 3, DType::Q8_0);
      State l2 = q2->load_state(path);
      EXPECT_EQ(l2.position(), 48);
      l2.save(path2);
      // It continues as after its own prefill, within the two ISAs' rounding of the first 48
      // positions (~0.06; keys misplaced among positions or columns give ~1.6).
      State own = q2->new_state();
      q2->forward(own, p, p, spk.data(), lg, false);
      const auto want = run1(*q2, own, cont, cont, spk.data(), 1);
      const float d = max_diff(want, run1(*q2, l2, cont, cont, spk.data(), 1));
      EXPECT_LE(d, 0.3f);
    }
    cachet::set_isa(cachet::best_isa());
    auto bytes_of = [](const std::string& f) {
      std::ifstream in(f, std::ios::binary);
      return std::string(std::istreambuf_iterator<char>(in), {});
    };
    EXPECT_EQ(bytes_of(path), bytes_of(path2));
    State l3 = q->load_state(path2);
    EXPECT_EQ(max_diff(ref, run1(*q, l3, cont, cont, spk.data(), 1)), 0.0f);
    std::filesystem::remove(path2);
  }
  std::filesystem::remove(path);
}

// The cache holds positions in runs (2 MiB of a layer's keys each at the released shape).
// Runs of 3 positions and of 1 give the very logits of one run, fed at once or a step at a
// time, after a fork and after a save and load in either direction (the run is not saved).
TEST(MvGptStage1, CacheRunsDoNotChangeLogits) {
  // f32, bf16 and int8 caches (the last two with heads in pairs)
  for (DType type : {DType::F32, DType::BF16, DType::Q8_0}) {
    SCOPED_TRACE(dtype_name(type));
    auto whole = model1(tiny1(), 5, type);
    std::unique_ptr<MvStage1> three, one;
    {
      KvRunEnv env("3");
      three = model1(tiny1(), 5, type);
    }
    {
      KvRunEnv env("1");
      one = model1(tiny1(), 5, type);
    }
    const auto r0 = seq(17, 70), r1 = seq(17, 70, 2), more = seq(6, 70, 4);
    const auto spk = speaker(16);
    for (size_t chunk : {0u, 1u, 4u}) {
      State a = whole->new_state(), b = three->new_state(), c = one->new_state();
      const auto want = run1(*whole, a, r0, r1, spk.data(), chunk);
      EXPECT_EQ(max_diff(want, run1(*three, b, r0, r1, spk.data(), chunk)), 0.0f) << chunk;
      EXPECT_EQ(max_diff(want, run1(*one, c, r0, r1, spk.data(), chunk)), 0.0f) << chunk;
      State fb = b.fork();  // position 17: runs 0-5 of three positions and the first of run 6
      const auto next = run1(*whole, a, more, more, spk.data(), 1);
      EXPECT_EQ(max_diff(next, run1(*three, fb, more, more, spk.data(), 1)), 0.0f) << chunk;
      const std::string p3 = temp_path("run3.state");
      b.save(p3);
      State lw = whole->load_state(p3), l1 = one->load_state(p3);
      std::filesystem::remove(p3);
      EXPECT_EQ(max_diff(next, run1(*whole, lw, more, more, spk.data(), 1)), 0.0f) << chunk;
      EXPECT_EQ(max_diff(next, run1(*one, l1, more, more, spk.data(), 1)), 0.0f) << chunk;
      EXPECT_EQ(l1.bytes(), lw.bytes());
    }
  }
}

TEST(MvGptStage1, StateOfAnotherModelIsRejected) {
  auto m = model1(tiny1(), 1), other = model1(tiny1(), 2);
  MvStage1Args a2 = tiny1();
  a2.n_layer = 1;
  auto smaller = model1(a2, 1);
  const auto t = seq(3, 70);
  std::vector<float> lg;
  State s = smaller->new_state();
  try {
    m->forward(s, t, t, nullptr, lg, false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another model"), std::string::npos) << e.what();
  }
  State empty;
  EXPECT_THROW(m->forward(empty, t, t, nullptr, lg, false), Error);
  // Same shapes but other weights: the fingerprint includes only names, types and shapes, so
  // the saved state of the smaller model is what must be refused on load.
  const std::string path = temp_path("other.state");
  smaller->forward(s, t, t, nullptr, lg, false);
  s.save(path);
  EXPECT_THROW(m->load_state(path), Error);
  std::filesystem::remove(path);
  (void)other;
}

TEST(MvGptStage1, BadInputErrorsLeaveStateUnchanged) {
  auto m = model1();
  State s = m->new_state();
  std::vector<float> lg;
  const auto t = seq(4, 70);
  m->forward(s, t, t, nullptr, lg, false);
  const auto expect_error = [&](auto&& fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_EQ(s.position(), 4);
  };
  std::vector<int32_t> bad = {1, 70, 2};
  expect_error([&] { m->forward(s, bad, bad, nullptr, lg, false); }, "70");
  std::vector<int32_t> neg = {1, -1};
  expect_error([&] { m->forward(s, neg, neg, nullptr, lg, false); }, "-1");
  std::vector<int32_t> empty;
  expect_error([&] { m->forward(s, empty, empty, nullptr, lg, false); }, "empty");
  std::vector<int32_t> two = {1, 2}, three = {1, 2, 3};
  expect_error([&] { m->forward(s, two, three, nullptr, lg, false); }, "rows");
  const auto long_seq = seq(37, 70);  // 4 + 37 > block_size 40
  expect_error([&] { m->forward(s, long_seq, long_seq, nullptr, lg, false); }, "block_size");
  std::vector<float> nan_spk(16, 0.0f);
  nan_spk[3] = NAN;
  expect_error([&] { m->forward(s, t, t, nan_spk.data(), lg, false); }, "non-finite");
  // Exactly filling the block is fine, one more is not.
  const auto fill = seq(36, 70);
  m->forward(s, fill, fill, nullptr, lg, false);
  EXPECT_EQ(s.position(), 40);
  std::vector<int32_t> one = {5};
  EXPECT_THROW(m->forward(s, one, one, nullptr, lg, false), Error);
}

TEST(MvGptStage1, MissingTensorAndWrongShapeAreNamed) {
  const MvStage1Args a = tiny1();
  {
    ModelFiles f = random_mv_stage1_files(a, DType::F32, 1);
    f.tensors.erase("layers.1.feed_forward.swiglu.w3.weight");
    try {
      MvStage1 m(std::move(f), a, &test_pool());
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("layers.1.feed_forward.swiglu.w3.weight"),
                std::string::npos)
          << e.what();
    }
  }
  {
    MvStage1Args wrong = a;
    wrong.intermediate_size = 96;
    ModelFiles f = random_mv_stage1_files(a, DType::F32, 1);
    try {
      MvStage1 m(std::move(f), wrong, &test_pool());
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("layers.0.feed_forward.swiglu.w1.weight"),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("shape"), std::string::npos) << e.what();
    }
  }
  {
    MvStage1Args fewer = a;
    fewer.n_layer = 1;
    EXPECT_THROW(MvStage1(random_mv_stage1_files(a, DType::F32, 1), fewer, &test_pool()), Error);
  }
}

TEST(MvGptStage1, OrigModPrefixIsStripped) {
  const MvStage1Args a = tiny1();
  ModelFiles f = random_mv_stage1_files(a, DType::F32, 1), g;
  g.path = f.path;
  for (auto& [name, t] : f.tensors) g.tensors.emplace("_orig_mod." + name, t);
  MvStage1 plain(std::move(f), a, &test_pool()), prefixed(std::move(g), a, &test_pool());
  const auto t = seq(5, 70);
  State s1 = plain.new_state(), s2 = prefixed.new_state();
  EXPECT_EQ(max_diff(run1(plain, s1, t, t, nullptr, 0), run1(prefixed, s2, t, t, nullptr, 0)),
            0.0f);
}

TEST(MvGptStage1, QuantizedWeightsRun) {
  MvStage1Args a = tiny1();
  a.dim = 256;
  a.intermediate_size = 256;
  a.speaker_emb_dim = 256;
  auto f32 = model1(a, 3, DType::F32);
  for (DType t : {DType::Q8_0, DType::Q4_K, DType::BF16}) {
    auto q = model1(a, 3, t);
    const auto toks = seq(6, 70);
    const auto spk = speaker(256, 0.1f);
    State s1 = q->new_state(), s2 = q->new_state();
    const auto pre = run1(*q, s1, toks, toks, spk.data(), 0);
    const auto step = run1(*q, s2, toks, toks, spk.data(), 1);
    for (float v : pre) ASSERT_TRUE(std::isfinite(v));
    // The multi-row and one-row kernel paths round activations differently (bf16 / 8-bit
    // blocks): up to ~0.07 here.
    EXPECT_LE(max_diff(pre, step), 0.2f) << dtype_name(t);
    EXPECT_LT(q->info().weight_bytes, f32->info().weight_bytes) << dtype_name(t);
  }
}

TEST(MvGptStage1, ThreadCountDoesNotChangeResults) {
  const MvStage1Args a = tiny1();
  ThreadPool p3(3);
  MvStage1 m1(random_mv_stage1_files(a, DType::F32, 4), a, &test_pool());
  MvStage1 m3(random_mv_stage1_files(a, DType::F32, 4), a, &p3);
  const auto t = seq(11, 70);
  const auto spk = speaker(16);
  State s1 = m1.new_state(), s3 = m3.new_state();
  EXPECT_EQ(max_diff(run1(m1, s1, t, t, spk.data(), 0), run1(m3, s3, t, t, spk.data(), 0)), 0.0f);
}

// ------------------------------------------------------------------ stage 2

TEST(MvGptStage2, NonCausalShapesAndBidirectional) {
  auto m = model2(tiny2(false));
  const int64_t T = 10;
  std::vector<int32_t> toks = seq(10, 1600);
  const auto h1 = seq(10, 30, 1);
  toks.insert(toks.end(), h1.begin(), h1.end());
  const auto spk = speaker(16);
  std::vector<float> a, b;
  m->forward(toks, T, spk.data(), a);
  ASSERT_EQ(a.size(), static_cast<size_t>(T * (30 + 30 + 25)));
  // Changing the last position changes the logits of the first (no causal mask).
  auto toks2 = toks;
  toks2[9] = (toks2[9] + 1) % 1600;
  m->forward(toks2, T, spk.data(), b);
  float d0 = 0;
  for (int v = 0; v < 30; ++v) d0 = std::max(d0, std::fabs(a[v] - b[v]));
  EXPECT_GT(d0, 1e-4f);
  EXPECT_THROW(m->new_state(), Error);
}

TEST(MvGptStage2, CausalCacheEqualsFullCausalPass) {
  const MvStage2Args args = tiny2(true);
  auto m = model2(args);
  const int64_t T = 20;
  // Hierarchy 0 reaches the end of text (1537) at position 6: the speaker term starts there.
  std::vector<int32_t> h0 = seq(20, 1600), h1 = seq(20, 30, 1);
  for (auto& v : h0)
    if (v == kMvStage2EndOfText) v = 5;
  h0[6] = kMvStage2EndOfText;
  std::vector<int32_t> toks = h0;
  toks.insert(toks.end(), h1.begin(), h1.end());
  const auto spk = speaker(16);
  std::vector<float> full;
  m->forward(toks, T, spk.data(), full);
  ASSERT_EQ(full.size(), static_cast<size_t>(T * (1600 + 30)));
  for (int64_t chunk : {1, 3, 7, 20}) {
    State st = m->new_state();
    std::vector<float> got(full.size()), part;
    for (int64_t s = 0; s < T; s += chunk) {
      const int64_t n = std::min(chunk, T - s);
      std::vector<int32_t> sub(h0.begin() + s, h0.begin() + s + n);
      sub.insert(sub.end(), h1.begin() + s, h1.begin() + s + n);
      m->forward(st, sub, n, spk.data(), part, true);
      std::copy(part.begin(), part.begin() + n * 1600, got.begin() + s * 1600);
      std::copy(part.begin() + n * 1600, part.end(), got.begin() + T * 1600 + s * 30);
    }
    EXPECT_LE(max_diff(full, got), 1e-4f) << "chunk " << chunk;
    EXPECT_EQ(st.position(), T);
  }
  // The speaker term does not reach positions before the end of text.
  std::vector<float> none;
  m->forward(toks, T, nullptr, none);
  for (int64_t t = 0; t < T; ++t) {
    float d = 0;
    for (int v = 0; v < 1600; ++v)
      d = std::max(d, std::fabs(full[t * 1600 + v] - none[t * 1600 + v]));
    if (t < 6)
      EXPECT_EQ(d, 0.0f) << "position " << t;
    else
      EXPECT_GT(d, 1e-4f) << "position " << t;
  }
}

TEST(MvGptStage2, CacheRunsDoNotChangeLogits) {
  auto whole = model2(tiny2(true), 3);
  std::unique_ptr<MvStage2> two;
  {
    KvRunEnv env("2");
    two = model2(tiny2(true), 3);
  }
  std::vector<int32_t> h0 = seq(9, 1600), h1 = seq(9, 30, 1);
  h0[2] = kMvStage2EndOfText;
  State a = whole->new_state(), b = two->new_state();
  const auto spk = speaker(16);
  for (int64_t t = 0; t < 9; ++t) {
    const std::vector<int32_t> one = {h0[t], h1[t]};
    std::vector<float> la, lb;
    whole->forward(a, one, 1, spk.data(), la, false);
    two->forward(b, one, 1, spk.data(), lb, false);
    EXPECT_EQ(max_diff(la, lb), 0.0f) << "position " << t;
  }
}

TEST(MvGptStage2, CausalStateSaveLoadAndBounds) {
  auto m = model2(tiny2(true));
  State st = m->new_state();
  std::vector<int32_t> toks = {1537, 4, 9, 2, 3, 4};  // 3 positions x 2 hierarchies
  std::vector<float> lg, a, b;
  m->forward(st, toks, 3, speaker(16).data(), lg, false);
  EXPECT_EQ(lg.size(), 1600u + 30u);
  const std::string path = temp_path("s2.state");
  st.save(path);
  State l = m->load_state(path);
  std::filesystem::remove(path);
  EXPECT_EQ(l.position(), 3);
  std::vector<int32_t> one = {7, 8};
  m->forward(st, one, 1, speaker(16).data(), a, false);
  m->forward(l, one, 1, speaker(16).data(), b, false);
  EXPECT_EQ(max_diff(a, b), 0.0f);
  // Past block_size (24).
  std::vector<int32_t> many(2 * 21, 1);
  EXPECT_THROW(m->forward(st, many, 21, nullptr, lg, false), Error);
  EXPECT_EQ(st.position(), 4);
  // Out-of-range token of hierarchy 1 names the hierarchy.
  std::vector<int32_t> bad = {1, 30};
  try {
    m->forward(st, bad, 1, nullptr, lg, false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("hierarchy 1"), std::string::npos) << e.what();
  }
  // A stage-1 state is not a stage-2 state.
  auto s1 = model1();
  State other = s1->new_state();
  EXPECT_THROW(m->forward(other, one, 1, nullptr, lg, false), Error);
}

TEST(MvGptStage2, BadInputAndMissingTensor) {
  const MvStage2Args a = tiny2(false);
  auto m = model2(a);
  std::vector<float> lg;
  std::vector<int32_t> odd = {1, 2, 3};
  EXPECT_THROW(m->forward(odd, 2, nullptr, lg), Error);  // 3 tokens for 2 x 2
  std::vector<int32_t> empty;
  EXPECT_THROW(m->forward(empty, 0, nullptr, lg), Error);
  std::vector<int32_t> too_long(2 * 25, 1);
  EXPECT_THROW(m->forward(too_long, 25, nullptr, lg), Error);
  ModelFiles f = random_mv_stage2_files(a, 1);
  f.tensors.erase("lm_heads.2.weight");
  try {
    MvStage2 bad(std::move(f), a, &test_pool());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lm_heads.2.weight"), std::string::npos) << e.what();
  }
  // Without speaker_cond_pos a speaker embedding is refused, no embedding is fine.
  ModelFiles g = random_mv_stage2_files(a, 1);
  g.tensors.erase("speaker_cond_pos.weight");
  MvStage2 nospk(std::move(g), a, &test_pool());
  EXPECT_FALSE(nospk.has_speaker_projection());
  std::vector<int32_t> ok = {1, 2, 3, 4};
  EXPECT_NO_THROW(nospk.forward(ok, 2, nullptr, lg));
  EXPECT_THROW(nospk.forward(ok, 2, speaker(16).data(), lg), Error);
}

// ------------------------------------------------------------------ configs

TEST(MvGptConfig, DefaultsAreTheReleasedModel) {
  const MvStage1Args a = MvStage1Args::from_json(nlohmann::json::object(), "test");
  EXPECT_EQ(a.dim, 2048);
  EXPECT_EQ(a.n_layer, 24);
  EXPECT_EQ(a.intermediate_size, 5632);
  EXPECT_EQ(a.head_dim(), 128);
  EXPECT_EQ(a.vocab_size, 2562);
  EXPECT_EQ(a.block_size, 2048);
  const MvStage2Args b = MvStage2Args::from_json({{"model_args", nlohmann::json::object()}}, "t");
  EXPECT_EQ(b.n_embd, 384);
  EXPECT_EQ(b.mlp_hidden(), 1536);
  EXPECT_EQ(b.head_vocab_sizes(), std::vector<int64_t>(6, 1025));
  EXPECT_FALSE(b.causal);
}

TEST(MvGptConfig, ParsingDerivesAndIgnoresUnknown) {
  const auto a = MvStage1Args::from_json({{"model_args",
                                           {{"dim", 256},
                                            {"n_head", 4},
                                            {"n_local_heads", -1},
                                            {"something", "x"},
                                            {"head_dim", 999},
                                            {"intermediate_size", nullptr}}}},
                                         "test");
  EXPECT_EQ(a.intermediate_size, 768);  // find_multiple(int(8 * 256 / 3) = 682, 256)
  EXPECT_EQ(a.n_local_heads, 4);
  EXPECT_EQ(a.head_dim(), 64);
  EXPECT_EQ(MvStage1Args::from_json(a.to_json(), "rt").to_json(), a.to_json());
  const auto b = MvStage2Args::from_json({{"model_args",
                                           {{"causal", true},
                                            {"nonlinearity_type", "swiglu"},
                                            {"swiglu_multiple_of", 256},
                                            {"norm_type", "rmsnorm"},
                                            {"rmsnorm_eps", 1e-6},
                                            {"kv_cache_enabled", true},
                                            {"attn_kernel_type", "fa2"},
                                            {"dropout", 0.0}}}},
                                         "test");
  EXPECT_TRUE(b.target_vocab_sizes.empty());
  EXPECT_EQ(b.head_vocab_sizes(), (std::vector<int64_t>{1538, 1025}));
  EXPECT_EQ(b.mlp_hidden(), 1024);  // 256 * ceil(int(2 * 1536 / 3) / 256)
  EXPECT_EQ(MvStage2Args::from_json(b.to_json(), "rt").to_json(), b.to_json());
}

TEST(MvGptConfig, BadValuesNameTheField) {
  auto err1 = [](const nlohmann::json& j) {
    try {
      MvStage1Args::from_json({{"model_args", j}}, "cfg.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(err1({{"dim", -4}}).find("dim"), std::string::npos);
  EXPECT_NE(err1({{"dim", 100}, {"n_head", 3}}).find("n_head"), std::string::npos);
  EXPECT_NE(err1({{"n_layer", "two"}}).find("n_layer"), std::string::npos);
  EXPECT_NE(err1({{"n_local_heads", 5}}).find("n_local_heads"), std::string::npos);
  // Integers written as floats are read when whole and in range; 1e300 (past int64) and an
  // unsigned past int64 are errors, not an overflow (found by fuzz_configs).
  EXPECT_EQ(MvStage1Args::from_json({{"model_args", {{"n_layer", 12.0}}}}, "c").n_layer, 12);
  EXPECT_NE(err1({{"n_layer", 1e300}}).find("n_layer"), std::string::npos);
  EXPECT_NE(err1({{"n_layer", 2.5}}).find("n_layer"), std::string::npos);
  EXPECT_NE(err1({{"dim", 18446744073709551615ull}}).find("dim"), std::string::npos);
  auto err2 = [](const nlohmann::json& j) {
    try {
      MvStage2Args::from_json({{"model_args", j}}, "cfg.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(err2({{"kv_cache_enabled", true}}).find("kv_cache_enabled"), std::string::npos);
  EXPECT_NE(err2({{"norm_type", "batchnorm"}}).find("norm_type"), std::string::npos);
  EXPECT_NE(err2({{"norm_type", "rmsnorm"}}).find("rmsnorm_eps"), std::string::npos);
  EXPECT_NE(err2({{"nonlinearity_type", "swiglu"}}).find("swiglu_multiple_of"), std::string::npos);
  EXPECT_NE(err2({{"target_vocab_sizes", nullptr}}).find("target_vocab_sizes"), std::string::npos);
  EXPECT_NE(err2({{"spk_emb_on_text", false}}).find("spk_emb_on_text"), std::string::npos);
  EXPECT_NE(err2({{"causal", true}, {"target_vocab_sizes", {5}}}).find("target_vocab_sizes"),
            std::string::npos);
  EXPECT_EQ(err2({{"unknown_field", 1}}), "");
}

TEST(MvGptConfig, DirectoryHelpers) {
  const std::filesystem::path dir = temp_path("dir");
  std::filesystem::create_directories(dir);
  EXPECT_FALSE(is_metavoice_dir(dir.string()));
  std::ofstream(dir / "first_stage_custom.gguf") << "x";
  EXPECT_EQ(mv_stage1_file(dir.string()), (dir / "first_stage_custom.gguf").string());
  std::ofstream(dir / "first_stage_q4k.gguf") << "x";
  EXPECT_EQ(mv_stage1_file(dir.string()), (dir / "first_stage_q4k.gguf").string());
  std::ofstream(dir / "first_stage.safetensors") << "x";
  EXPECT_EQ(mv_stage1_file(dir.string()), (dir / "first_stage.safetensors").string());
  EXPECT_TRUE(is_metavoice_dir(dir.string()));
  EXPECT_EQ(mv_stage1_args(dir.string()).dim, 2048);  // no config.json: released values
  std::ofstream(dir / "config.json")
      << R"({"first_stage": {"model_args": {"dim": 256, "n_head": 4}}, "other": 1})";
  EXPECT_EQ(mv_stage1_args(dir.string()).dim, 256);
  EXPECT_EQ(mv_stage2_args(dir.string()).n_embd, 384);
  std::ofstream(dir / "config.json") << "{not json";
  EXPECT_THROW(mv_stage1_args(dir.string()), Error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cachet
