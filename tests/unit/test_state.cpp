// cachet::State on RecurrentGemma: value semantics, save / load.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "cachet/error.h"
#include "cachet/recurrent_gemma.h"
#include "cachet/state_file.h"
#include "cachet/threadpool.h"

namespace cachet {
namespace {

RecurrentGemmaConfig cfg() {
  RecurrentGemmaConfig c;
  c.vocab_size = 50;
  c.hidden_size = 16;
  c.intermediate_size = 64;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 8;
  c.lru_width = 16;
  c.attention_window_size = 4;
  c.conv1d_width = 3;
  c.block_types = {"recurrent", "attention"};
  return c;
}

std::unique_ptr<LanguageModel> model(const RecurrentGemmaConfig& c = cfg(), uint64_t seed = 1) {
  static ThreadPool pool(1);
  return make_recurrent_gemma(random_recurrent_gemma_files(c, seed, 0.3f), &pool);
}

struct TempDir {
  std::filesystem::path dir;
  TempDir() {
    dir = std::filesystem::temp_directory_path() /
          ("cachet_state_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
  }
  ~TempDir() { std::filesystem::remove_all(dir); }
  std::string file(const std::string& name) const { return (dir / name).string(); }
};

std::vector<int32_t> toks(int n, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 11 + salt) % 50);
  return t;
}

TEST(State, EmptyStateBehaviour) {
  State s;
  EXPECT_FALSE(s.valid());
  EXPECT_EQ(s.bytes(), 0u);
  EXPECT_THROW(s.position(), Error);
  EXPECT_THROW(s.reset(), Error);
  EXPECT_THROW(s.save("x"), Error);
  State t = s;  // copying an empty state is fine
  EXPECT_FALSE(t.valid());
}

TEST(State, ForkIsIndependentCopy) {
  auto m = model();
  State a = m->new_state();
  EXPECT_TRUE(a.valid());
  EXPECT_EQ(a.position(), 0);
  EXPECT_GT(a.bytes(), 0u);
  EXPECT_EQ(a.model_fingerprint(), m->info().fingerprint);
  std::vector<float> out;
  m->forward(a, toks(5, 1), out);
  State b = a.fork();
  State c;
  c = a;
  m->forward(a, toks(3, 2), out);
  EXPECT_EQ(a.position(), 8);
  EXPECT_EQ(b.position(), 5);
  EXPECT_EQ(c.position(), 5);
  std::vector<float> lb, lc;
  m->forward(b, toks(2, 3), lb);
  m->forward(c, toks(2, 3), lc);
  EXPECT_EQ(lb, lc);
  State moved = std::move(b);
  EXPECT_EQ(moved.position(), 7);
}

TEST(State, SaveLoadRoundTrip) {
  TempDir tmp;
  auto m = model();
  State a = m->new_state();
  std::vector<float> out;
  m->forward(a, toks(9, 4), out);  // past the window
  const std::string path = tmp.file("a.state");
  a.save(path);
  State b = m->load_state(path);
  EXPECT_EQ(b.position(), 9);
  std::vector<float> la, lb;
  for (int step = 0; step < 5; ++step) {
    const std::vector<int32_t> t = {static_cast<int32_t>(step * 3 + 1)};
    m->forward(a, t, la);
    m->forward(b, t, lb);
    ASSERT_EQ(la, lb) << "step " << step;
  }
  // A fresh state also round-trips.
  State z = m->new_state();
  z.save(tmp.file("z.state"));
  State z2 = m->load_state(tmp.file("z.state"));
  EXPECT_EQ(z2.position(), 0);
}

TEST(State, LoadIntoAnotherModelFails) {
  TempDir tmp;
  auto m = model();
  auto c2 = cfg();
  c2.attention_window_size = 5;  // another fingerprint
  auto other = model(c2);
  ASSERT_NE(m->info().fingerprint, other->info().fingerprint);
  State a = m->new_state();
  std::vector<float> out;
  m->forward(a, toks(3, 1), out);
  a.save(tmp.file("a.state"));
  EXPECT_THROW(other->load_state(tmp.file("a.state")), Error);
  EXPECT_THROW(m->load_state(tmp.file("missing.state")), Error);
}

// A state file written with its sections renamed or dropped: `edit` maps a section name to
// the name to write it under ("" drops it), and `extra` sections are added.
void rewrite_state(const std::string& from, const std::string& to,
                   const std::function<std::string(const std::string&)>& edit,
                   const std::vector<std::pair<std::string, int64_t>>& extra = {}) {
  const StateReader r = StateReader::open(from);
  StateWriter w(r.arch(), r.fingerprint());
  for (const std::string& name : r.section_names()) {
    const std::string out = edit(name);
    if (out.empty()) continue;
    const auto bytes = r.section(name);
    w.add_section(out, bytes.data(), bytes.size(), r.section_dtype(name));
  }
  for (const auto& [name, v] : extra) w.add_i64(name, v);
  w.write(to);
}

// States saved before keys and values could be bf16 carry no kv_bits: an f32 model loads them
// as they are; a kv_bits that does not match the model is refused.
TEST(State, KeyValueBitsOfOlderAndOtherFiles) {
  TempDir tmp;
  auto m = model();
  State a = m->new_state();
  std::vector<float> out, la, lb;
  m->forward(a, toks(9, 3), out);
  a.save(tmp.file("a.state"));
  rewrite_state(tmp.file("a.state"), tmp.file("old.state"),
                [](const std::string& n) { return n == "kv_bits" ? std::string() : n; });
  State b = m->load_state(tmp.file("old.state"));
  m->forward(a, toks(3, 9), la);
  m->forward(b, toks(3, 9), lb);
  EXPECT_EQ(la, lb);
  rewrite_state(tmp.file("a.state"), tmp.file("bits16.state"),
                [](const std::string& n) { return n == "kv_bits" ? std::string() : n; },
                {{"kv_bits", 16}});
  try {
    m->load_state(tmp.file("bits16.state"));
    ADD_FAILURE() << "a 16-bit cache loaded into an f32 model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kv_bits"), std::string::npos) << e.what();
  }
}

TEST(State, DamagedFileFails) {
  TempDir tmp;
  auto m = model();
  State a = m->new_state();
  std::vector<float> out;
  m->forward(a, toks(6, 2), out);
  const std::string path = tmp.file("a.state");
  a.save(path);
  std::vector<char> bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(bytes.size(), 200u);
  // Flip one byte in the payload.
  {
    auto damaged = bytes;
    damaged[damaged.size() / 2] ^= 0x40;
    std::ofstream o(tmp.file("flip.state"), std::ios::binary);
    o.write(damaged.data(), static_cast<std::streamsize>(damaged.size()));
  }
  EXPECT_THROW(m->load_state(tmp.file("flip.state")), Error);
  // Truncated.
  {
    std::ofstream o(tmp.file("short.state"), std::ios::binary);
    o.write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 9));
  }
  EXPECT_THROW(m->load_state(tmp.file("short.state")), Error);
  // Not a state file at all.
  {
    std::ofstream o(tmp.file("junk.state"), std::ios::binary);
    o << "hello";
  }
  EXPECT_THROW(m->load_state(tmp.file("junk.state")), Error);
}

TEST(State, ResetClearsEverything) {
  auto m = model();
  State a = m->new_state();
  std::vector<float> out, fresh_out, reset_out;
  m->forward(a, toks(7, 5), out);
  a.reset();
  EXPECT_EQ(a.position(), 0);
  State f = m->new_state();
  m->forward(f, toks(4, 6), fresh_out, true);
  m->forward(a, toks(4, 6), reset_out, true);
  EXPECT_EQ(fresh_out, reset_out);
}

// Two checkpoints of the same shape (a base model and its fine-tune): their states do not mix.
TEST(State, AnotherCheckpointOfTheSameShapeIsRefused) {
  TempDir tmp;
  auto m = model(cfg(), 1);
  auto other = model(cfg(), 2);
  ASSERT_NE(m->info().fingerprint, other->info().fingerprint);
  ASSERT_EQ(model(cfg(), 1)->info().fingerprint, m->info().fingerprint);  // the same weights
  State a = m->new_state();
  std::vector<float> out;
  m->forward(a, toks(3, 1), out);
  a.save(tmp.file("a.state"));
  EXPECT_THROW(other->load_state(tmp.file("a.state")), Error);
  EXPECT_THROW(other->forward(a, toks(1, 2), out), Error);
  State b = other->new_state();
  State* both[] = {&a, &b};
  EXPECT_THROW(other->forward_batch(both, std::vector<int32_t>{1, 2}, out), Error);
}

// A saved position past what a state may reach is refused on load, and a state at the last
// one cannot be advanced (the position arithmetic would overflow).
TEST(State, PositionsPastTheLimitAreRefused) {
  TempDir tmp;
  auto m = model();
  State a = m->new_state();
  std::vector<float> out;
  m->forward(a, toks(3, 1), out);
  a.save(tmp.file("a.state"));
  const auto with_position = [&](int64_t pos, const std::string& to) {
    rewrite_state(tmp.file("a.state"), tmp.file(to),
                  [](const std::string& name) { return name == "position" ? std::string() : name; },
                  {{"position", pos}});
  };
  const int64_t limit = int64_t{1} << 40;
  with_position(limit + 1, "past.state");
  EXPECT_THROW(m->load_state(tmp.file("past.state")), Error);
  with_position(std::numeric_limits<int64_t>::max() - 1, "huge.state");
  EXPECT_THROW(m->load_state(tmp.file("huge.state")), Error);
  with_position(limit, "last.state");
  State last = m->load_state(tmp.file("last.state"));
  EXPECT_THROW(m->forward(last, toks(1, 1), out), Error);
  EXPECT_EQ(last.position(), limit);  // unchanged by the refused call
}

// Threads that share a model, or models that share a pool, take turns and each get the logits
// they get alone.
TEST(State, ThreadsSharingAModelOrAPoolGetTheirOwnLogits) {
  static ThreadPool pool(2);
  auto shared = make_recurrent_gemma(random_recurrent_gemma_files(cfg(), 1, 0.3f), &pool);
  auto second = make_recurrent_gemma(random_recurrent_gemma_files(cfg(), 3, 0.3f), &pool);
  const auto alone = [](LanguageModel& lm, int salt) {
    State s = lm.new_state();
    std::vector<float> out, all;
    for (int i = 0; i < 40; ++i) {
      lm.forward(s, toks(3, salt + i), out);
      all.insert(all.end(), out.begin(), out.end());
    }
    return all;
  };
  const std::vector<float> want_a = alone(*shared, 1), want_b = alone(*shared, 7),
                           want_c = alone(*second, 5);
  for (int round = 0; round < 3; ++round) {
    std::vector<float> got_a, got_b, got_c;
    std::thread ta([&] { got_a = alone(*shared, 1); });
    std::thread tb([&] { got_b = alone(*shared, 7); });
    std::thread tc([&] { got_c = alone(*second, 5); });
    ta.join();
    tb.join();
    tc.join();
    EXPECT_EQ(got_a, want_a);
    EXPECT_EQ(got_b, want_b);
    EXPECT_EQ(got_c, want_c);
  }
}

}  // namespace
}  // namespace cachet
