// RecurrentGemma on tiny random models built in memory: prefill / step / chunk agreement,
// forward_batch, error handling and config/weights validation.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cachet/error.h"
#include "cachet/gguf.h"
#include "cachet/half.h"
#include "cachet/quant.h"
#include "cachet/recurrent_gemma.h"
#include "cachet/threadpool.h"
#include "profile_check.h"

namespace cachet {
namespace {

RecurrentGemmaConfig tiny_config() {
  RecurrentGemmaConfig c;
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.intermediate_size = 96;
  c.num_hidden_layers = 4;  // recurrent, recurrent, attention, recurrent
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 16;
  c.lru_width = 32;
  c.attention_window_size = 5;
  c.conv1d_width = 4;
  c.block_types = {"recurrent", "recurrent", "attention"};
  return c;
}

std::unique_ptr<LanguageModel> tiny_model(const RecurrentGemmaConfig& c = tiny_config(),
                                          uint64_t seed = 1) {
  static ThreadPool pool(1);  // the machine running tests may be busy: no spinning workers
  return make_recurrent_gemma(random_recurrent_gemma_files(c, seed, 0.2f), &pool);
}

std::vector<int32_t> seq(int n, int vocab, int salt = 0) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 7 + 3 + salt * 13) % vocab);
  return t;
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// Logits of all positions, feeding tokens in chunks of `chunk` (0: all at once).
std::vector<float> run_chunks(LanguageModel& m, State& st, const std::vector<int32_t>& toks,
                              size_t chunk) {
  std::vector<float> all, part;
  if (chunk == 0) chunk = toks.size();
  for (size_t s = 0; s < toks.size(); s += chunk) {
    const size_t n = std::min(chunk, toks.size() - s);
    m.forward(st, std::span<const int32_t>(toks.data() + s, n), part, true);
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

// The largest difference between the logits of n tokens fed at once and fed in chunks of
// `chunk`, on a tiny model of config c; all_logits receives the former.
float chunked_diff(const RecurrentGemmaConfig& c, int n, size_t chunk,
                   std::vector<float>* all_logits = nullptr) {
  auto m = tiny_model(c);
  const auto toks = seq(n, 64);
  State a = m->new_state(), b = m->new_state();
  const auto all = run_chunks(*m, a, toks, 0);
  const float diff = max_diff(all, run_chunks(*m, b, toks, chunk));
  if (all_logits) *all_logits = all;
  return diff;
}

TEST(RecurrentGemma, PrefillStepAndChunksAgree) {
  auto m = tiny_model();
  const auto toks = seq(23, 64);  // longer than the window (5)
  State a = m->new_state();
  const auto ref = run_chunks(*m, a, toks, 0);
  EXPECT_EQ(a.position(), 23);
  ASSERT_EQ(ref.size(), 23u * 64u);
  for (size_t chunk : {1u, 2u, 3u, 5u, 6u, 7u, 22u}) {
    State b = m->new_state();
    const auto got = run_chunks(*m, b, toks, chunk);
    EXPECT_LE(max_diff(ref, got), 1e-4f) << "chunk " << chunk;
    EXPECT_EQ(b.position(), 23);
  }
  for (float z : ref) {
    ASSERT_TRUE(std::isfinite(z));
    ASSERT_LE(std::fabs(z), 30.0f);
  }
}

TEST(RecurrentGemma, SameLogitsAtAnyThreadCount) {
  // A window of several blocks of values (256 keys each), passed by the sequence: decoding
  // shares an item's blocks between the threads, prefill gives each thread whole items, and
  // both add the blocks in the same order, so every thread count gives the same logits
  RecurrentGemmaConfig c = tiny_config();
  c.attention_window_size = 600;
  ThreadPool p1(1), p2(2), p3(3);
  std::vector<std::vector<float>> got;
  for (ThreadPool* pool : {&p1, &p2, &p3}) {
    auto m = make_recurrent_gemma(random_recurrent_gemma_files(c, 3, 0.2f), pool);
    State st = m->new_state();
    std::vector<float> logits = run_chunks(*m, st, seq(650, 64), 0);
    std::vector<float> part;
    for (int32_t t : seq(40, 64, 5)) {  // decoding steps past the window
      m->forward(st, std::vector<int32_t>{t}, part);
      logits.insert(logits.end(), part.begin(), part.end());
    }
    got.push_back(std::move(logits));
  }
  EXPECT_EQ(got[0], got[1]);
  EXPECT_EQ(got[0], got[2]);
}

// A profiled step names the model's phases, and its products and gates read the weights the
// roofline counts: all of info().weight_bytes but the embedding row and the small f32 vectors.
TEST(RecurrentGemma, ProfiledStepReadsTheRooflineBytes) {
  auto m = tiny_model();
  State st = m->new_state();
  std::vector<float> logits;
  const auto toks = seq(4, 64);
  m->forward(st, toks, logits);
  expect_profiled_pass([&] { m->forward(st, std::span<const int32_t>(toks.data(), 1), logits); },
                       {"embedding", "linear_x, linear_y", "conv1d", "rg_lru gates", "rg_lru scan",
                        "linear_out", "attention q, k, v", "local attention", "attention o",
                        "mlp gate, up", "mlp down", "output head"},
                       m->info().weight_bytes);
}

// Gate blocks of an odd width (15) are read whole rather than as two halves of columns: the
// steps and chunks agree there too.
TEST(RecurrentGemma, OddGateBlocksAgreeAcrossChunks) {
  RecurrentGemmaConfig c = tiny_config();
  c.lru_width = 30;
  std::vector<float> all;
  EXPECT_LE(chunked_diff(c, 12, 1, &all), 1e-4f);
  for (float z : all) ASSERT_TRUE(std::isfinite(z));
}

TEST(RecurrentGemma, LastLogitsEqualLastRowOfAll) {
  auto m = tiny_model();
  const auto toks = seq(9, 64);
  State a = m->new_state(), b = m->new_state();
  std::vector<float> all, last;
  m->forward(a, toks, all, true);
  m->forward(b, toks, last, false);
  ASSERT_EQ(last.size(), 64u);
  EXPECT_LE(max_diff(std::vector<float>(all.end() - 64, all.end()), last), 1e-5f);
}

TEST(RecurrentGemma, LongPrefillBeyondInternalPassSize) {
  // More rows than one internal pass holds, window larger than the pass.
  auto c = tiny_config();
  c.attention_window_size = 300;
  EXPECT_LE(chunked_diff(c, 600, 97), 1e-4f);
}

TEST(RecurrentGemma, LongWindowStepsAgreeAcrossThreadCounts) {
  // A long window: decoding steps split a query's keys, heads and value columns over two
  // threads, so one and two threads must give the same floats, and steps agree with a prefill.
  auto c = tiny_config();
  c.attention_window_size = 600;
  const auto toks = seq(700, 64);
  ThreadPool two(2);
  auto m1 = tiny_model(c);
  auto m2 = make_recurrent_gemma(random_recurrent_gemma_files(c, 1, 0.2f), &two);
  State a = m1->new_state(), b = m2->new_state(), p = m2->new_state();
  const auto one_thread = run_chunks(*m1, a, toks, 1);
  const auto two_threads = run_chunks(*m2, b, toks, 1);
  EXPECT_EQ(one_thread, two_threads);
  EXPECT_LE(max_diff(run_chunks(*m2, p, toks, 0), two_threads), 1e-4f);
}

// Ten query heads on one KV head of 128 dims (as in the 2B: blocks of heads, tiles of 32 key
// rows, several 64-column blocks of values, the 4-vector loops) and three threads: the decoding
// split over keys, heads and columns gives the floats of one thread, f32 and bf16 caches alike,
// over a window of 300 keys that the ring wraps around.
TEST(RecurrentGemma, WideAttentionStepsAgreeAcrossThreadCounts) {
  auto c = tiny_config();
  c.num_attention_heads = 10;
  c.head_dim = 128;
  c.lru_width = 40;  // the RG-LRU gates are block-diagonal per head
  c.attention_window_size = 300;
  c.block_types = {"attention", "recurrent"};
  c.num_hidden_layers = 2;
  const auto toks = seq(400, 64);
  static ThreadPool one(1), three(3);
  for (bool quantized : {false, true}) {
    ModelFiles f = random_recurrent_gemma_files(c, 3, 0.2f);
    if (quantized)
      for (auto& [name, t] : f.tensors)
        if (name.find("self_attn") != std::string::npos && t.ndim() == 2) {
          Tensor q = Tensor::zeros(DType::BF16, t.shape, name);
          for (int64_t i = 0; i < t.numel(); ++i)
            reinterpret_cast<uint16_t*>(q.data)[i] = f32_to_bf16(t.as<float>()[i]);
          t = std::move(q);
        }
    auto m1 = make_recurrent_gemma(f, &one);
    auto m3 = make_recurrent_gemma(f, &three);
    State a = m1->new_state(), b = m3->new_state(), p = m3->new_state();
    const auto steps1 = run_chunks(*m1, a, toks, 1);
    EXPECT_EQ(steps1, run_chunks(*m3, b, toks, 1)) << (quantized ? "bf16" : "f32");
    EXPECT_LE(max_diff(run_chunks(*m3, p, toks, 0), steps1), quantized ? 0.1f : 1e-4f);
  }
}

TEST(RecurrentGemma, PositionDependence) {
  // The same token at different positions gives different logits (RoPE, recurrence).
  auto m = tiny_model();
  State st = m->new_state();
  std::vector<float> l1, l2;
  m->forward(st, std::vector<int32_t>{5}, l1);
  m->forward(st, std::vector<int32_t>{5}, l2);
  EXPECT_GT(max_diff(l1, l2), 1e-4f);
}

TEST(RecurrentGemma, ForkThenDiverge) {
  auto m = tiny_model();
  const auto prefix = seq(8, 64);
  const auto tail_a = seq(4, 64, 1), tail_b = seq(4, 64, 2);
  State st = m->new_state();
  std::vector<float> tmp;
  m->forward(st, prefix, tmp);
  State fork = st.fork();
  EXPECT_EQ(fork.position(), 8);
  std::vector<float> la, lb;
  m->forward(st, tail_a, la, true);
  m->forward(fork, tail_b, lb, true);
  EXPECT_EQ(st.position(), 12);
  EXPECT_EQ(fork.position(), 12);

  // Each equals a fresh run over its whole sequence.
  for (auto [tail, got] : {std::pair{&tail_a, &la}, std::pair{&tail_b, &lb}}) {
    std::vector<int32_t> full = prefix;
    full.insert(full.end(), tail->begin(), tail->end());
    State fresh = m->new_state();
    std::vector<float> all;
    m->forward(fresh, full, all, true);
    std::vector<float> want(all.end() - 4 * 64, all.end());
    EXPECT_LE(max_diff(want, *got), 1e-4f);
  }
  EXPECT_GT(max_diff(la, lb), 1e-3f);
}

TEST(RecurrentGemma, ResetEqualsFreshState) {
  auto m = tiny_model();
  const auto toks = seq(11, 64);
  State st = m->new_state();
  std::vector<float> first, again, tmp;
  m->forward(st, toks, first, true);
  m->forward(st, seq(3, 64, 5), tmp);
  st.reset();
  EXPECT_EQ(st.position(), 0);
  m->forward(st, toks, again, true);
  EXPECT_EQ(first, again);
}

TEST(RecurrentGemma, ForwardBatchEqualsSeparateSteps) {
  auto m = tiny_model();
  // Three states at different positions (one past the window).
  std::vector<State> states;
  for (int len : {0, 3, 9}) {
    State st = m->new_state();
    std::vector<float> tmp;
    if (len) m->forward(st, seq(len, 64, len), tmp);
    states.push_back(st);
  }
  std::vector<State> copies = states;
  const std::vector<int32_t> next = {4, 17, 60};
  std::vector<State*> ptrs;
  for (auto& s : states) ptrs.push_back(&s);
  std::vector<float> batch;
  m->forward_batch(ptrs, next, batch);
  ASSERT_EQ(batch.size(), 3u * 64u);
  for (size_t i = 0; i < 3; ++i) {
    std::vector<float> one;
    m->forward(copies[i], std::vector<int32_t>{next[i]}, one);
    std::vector<float> row(batch.begin() + i * 64, batch.begin() + (i + 1) * 64);
    EXPECT_LE(max_diff(one, row), 1e-4f) << "state " << i;
    EXPECT_EQ(states[i].position(), copies[i].position());
  }
  // Continue both ways for a few more steps.
  for (int step = 0; step < 6; ++step) {
    const std::vector<int32_t> tok = {static_cast<int32_t>(step), 33,
                                      static_cast<int32_t>(50 - step)};
    m->forward_batch(ptrs, tok, batch);
    for (size_t i = 0; i < 3; ++i) {
      std::vector<float> one;
      m->forward(copies[i], std::vector<int32_t>{tok[i]}, one);
      std::vector<float> row(batch.begin() + i * 64, batch.begin() + (i + 1) * 64);
      EXPECT_LE(max_diff(one, row), 1e-4f) << "state " << i << " step " << step;
    }
  }
}

TEST(RecurrentGemma, ForwardBatchRejectsBadInput) {
  auto m = tiny_model();
  State a = m->new_state(), b = m->new_state();
  std::vector<float> out;
  std::vector<State*> dup = {&a, &a};
  EXPECT_THROW(m->forward_batch(dup, std::vector<int32_t>{1, 2}, out), Error);
  std::vector<State*> two = {&a, &b};
  EXPECT_THROW(m->forward_batch(two, std::vector<int32_t>{1}, out), Error);
  EXPECT_THROW(m->forward_batch(two, std::vector<int32_t>{1, 64}, out), Error);
  EXPECT_EQ(a.position(), 0);
  EXPECT_EQ(b.position(), 0);
}

TEST(RecurrentGemma, BadTokensLeaveStateUnchanged) {
  auto m = tiny_model();
  State st = m->new_state();
  std::vector<float> tmp;
  m->forward(st, seq(6, 64), tmp);
  State before = st;
  try {
    m->forward(st, std::vector<int32_t>{1, 2, 64}, tmp);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("64"), std::string::npos) << msg;
    EXPECT_NE(msg.find("index 2"), std::string::npos) << msg;
    EXPECT_NE(msg.find("size 64"), std::string::npos) << msg;
  }
  EXPECT_THROW(m->forward(st, std::vector<int32_t>{-1}, tmp), Error);
  EXPECT_THROW(m->forward(st, std::vector<int32_t>{}, tmp), Error);
  EXPECT_EQ(st.position(), 6);
  std::vector<float> x, y;
  m->forward(st, std::vector<int32_t>{9}, x);
  m->forward(before, std::vector<int32_t>{9}, y);
  EXPECT_EQ(x, y);
}

TEST(RecurrentGemma, StateOfAnotherModelIsRejected) {
  auto m1 = tiny_model(tiny_config(), 1);
  auto c2 = tiny_config();
  c2.num_hidden_layers = 3;
  auto m2 = tiny_model(c2, 1);
  EXPECT_NE(m1->info().fingerprint, m2->info().fingerprint);
  State st = m2->new_state();
  std::vector<float> out;
  EXPECT_THROW(m1->forward(st, std::vector<int32_t>{1}, out), Error);
  State empty;
  EXPECT_THROW(m1->forward(empty, std::vector<int32_t>{1}, out), Error);
}

TEST(RecurrentGemma, InfoFingerprintIsStable) {
  auto a = tiny_model(tiny_config(), 1);
  auto again = tiny_model(tiny_config(), 1);  // the same weights, loaded again
  auto b = tiny_model(tiny_config(), 2);      // other values, same names/types/shapes
  EXPECT_EQ(a->info().fingerprint, again->info().fingerprint);
  EXPECT_NE(a->info().fingerprint, b->info().fingerprint);  // another checkpoint
  EXPECT_EQ(a->info().vocab_size, 64);
  EXPECT_EQ(a->info().arch, "recurrent_gemma");
  EXPECT_GT(a->info().weight_bytes, 64u * 32u * 4u);
}

TEST(RecurrentGemma, ThreadCountDoesNotChangeResults) {
  ThreadPool one(1), two(2);
  auto c = tiny_config();
  auto m1 = make_recurrent_gemma(random_recurrent_gemma_files(c, 3, 0.2f), &one);
  auto m2 = make_recurrent_gemma(random_recurrent_gemma_files(c, 3, 0.2f), &two);
  State s1 = m1->new_state(), s2 = m2->new_state();
  const auto toks = seq(13, 64);
  EXPECT_EQ(run_chunks(*m1, s1, toks, 4), run_chunks(*m2, s2, toks, 4));
}

// ---------------------------------------------------------------- config / weights errors

std::string load_error(ModelFiles f) {
  try {
    make_recurrent_gemma(std::move(f));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RecurrentGemmaConfig, MissingTensorIsNamed) {
  auto f = random_recurrent_gemma_files(tiny_config(), 1);
  f.tensors.erase("model.layers.2.temporal_block.k_proj.weight");
  const auto msg = load_error(std::move(f));
  EXPECT_NE(msg.find("missing tensor 'model.layers.2.temporal_block.k_proj.weight'"),
            std::string::npos)
      << msg;
}

TEST(RecurrentGemmaConfig, WrongShapeIsNamed) {
  auto f = random_recurrent_gemma_files(tiny_config(), 1);
  f.tensors["model.layers.1.temporal_block.rg_lru.input_gate_weight"] =
      Tensor::zeros(DType::F32, {2, 16, 8});
  const auto msg = load_error(std::move(f));
  EXPECT_NE(msg.find("input_gate_weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 16, 8]"), std::string::npos) << msg;
}

TEST(RecurrentGemmaConfig, UnknownBlockType) {
  auto f = random_recurrent_gemma_files(tiny_config(), 1);
  f.config["block_types"] = {"recurrent", "mamba", "attention"};
  const auto msg = load_error(std::move(f));
  EXPECT_NE(msg.find("mamba"), std::string::npos) << msg;
}

TEST(RecurrentGemmaConfig, BlockTypesDisagreeWithTensors) {
  auto f = random_recurrent_gemma_files(tiny_config(), 1);
  f.config["block_types"] = {"recurrent", "attention", "recurrent"};
  EXPECT_NE(load_error(std::move(f)), "");
}

TEST(RecurrentGemmaConfig, UnderscoreBlockTypesAccepted) {
  auto f = random_recurrent_gemma_files(tiny_config(), 1);
  f.config["_block_types"] = f.config["block_types"];
  f.config.erase("block_types");
  EXPECT_EQ(load_error(std::move(f)), "");
}

TEST(RecurrentGemmaConfig, RequiredFields) {
  for (const char* key :
       {"intermediate_size", "num_key_value_heads", "vocab_size", "hidden_size", "block_types"}) {
    auto f = random_recurrent_gemma_files(tiny_config(), 1);
    f.config.erase(key);
    const auto msg = load_error(std::move(f));
    EXPECT_NE(msg.find(key), std::string::npos) << key << ": " << msg;
  }
}

TEST(RecurrentGemmaConfig, VocabMismatchAndExtraLayers) {
  auto f = random_recurrent_gemma_files(tiny_config(), 1);
  f.config["vocab_size"] = 65;
  EXPECT_NE(load_error(std::move(f)).find("embed_tokens"), std::string::npos);
  auto g = random_recurrent_gemma_files(tiny_config(), 1);
  g.config["num_hidden_layers"] = 3;
  EXPECT_NE(load_error(std::move(g)).find("model.layers.3."), std::string::npos);
}

TEST(RecurrentGemmaConfig, BadValues) {
  for (auto [key, val] : {std::pair<const char*, nlohmann::json>{"hidden_activation", "relu"},
                          {"num_key_value_heads", 3},
                          {"lru_width", 33},
                          {"attention_window_size", 0},
                          {"model_type", "gemma"},
                          {"intermediate_size", "big"}}) {
    auto f = random_recurrent_gemma_files(tiny_config(), 1);
    f.config[key] = val;
    EXPECT_NE(load_error(std::move(f)), "") << key;
  }
}

TEST(RecurrentGemmaConfig, RoundTrip) {
  const auto c = tiny_config();
  const auto d = RecurrentGemmaConfig::from_json(c.to_json(), "test");
  EXPECT_EQ(d.to_json(), c.to_json());
  EXPECT_EQ(d.rot_dim(), 8);
  EXPECT_TRUE(d.is_attention(2));
  EXPECT_TRUE(d.is_attention(5));
  EXPECT_FALSE(d.is_attention(3));
}

}  // namespace
}  // namespace cachet

namespace cachet {
namespace {

// Every matrix converted to `type` (vectors and the 3-D gates stay F32, as converters write).
ModelFiles with_matrix_type(ModelFiles f, DType type) {
  for (auto& [name, t] : f.tensors) {
    if (t.ndim() != 2 || t.cols() % dtype_info(type).block_elems != 0) continue;
    Tensor q = Tensor::zeros(type, t.shape, name);
    quantize_matrix(type, t.as<float>(), q.data, t.rows(), t.cols());
    t = std::move(q);
  }
  return f;
}

RecurrentGemmaConfig q_config() {
  auto c = tiny_config();
  c.hidden_size = 64;
  c.lru_width = 64;
  c.intermediate_size = 128;
  c.head_dim = 32;
  return c;
}

// The weights of f as f32 (dequantized).
ModelFiles dequantized(const ModelFiles& f) {
  ModelFiles out = f;
  for (auto& [name, t] : out.tensors) {
    if (t.dtype == DType::F32) continue;
    Tensor d = Tensor::zeros(DType::F32, t.shape, name);
    for (int64_t r = 0; r < t.rows(); ++r)
      dequantize_row(t.dtype, t.row(r), d.as<float>() + r * t.cols(), t.cols());
    t = std::move(d);
  }
  return out;
}

TEST(RecurrentGemmaTypes, HalfAndQuantizedWeightsRunInPlace) {
  static ThreadPool pool(1);
  const auto c = q_config();
  auto f32 = make_recurrent_gemma(random_recurrent_gemma_files(c, 4, 0.2f), &pool);
  const auto toks = seq(12, 64);
  for (DType t : {DType::BF16, DType::F16, DType::Q8_0, DType::Q4_0}) {
    ModelFiles qf = with_matrix_type(random_recurrent_gemma_files(c, 4, 0.2f), t);
    auto m = make_recurrent_gemma(qf, &pool);
    auto ref_model = make_recurrent_gemma(dequantized(qf), &pool);
    EXPECT_LT(m->info().weight_bytes, f32->info().weight_bytes) << dtype_name(t);
    EXPECT_NE(m->info().fingerprint, f32->info().fingerprint);
    State a = m->new_state(), b = m->new_state(), r = ref_model->new_state();
    const auto ref = run_chunks(*ref_model, r, toks, 0);
    const auto pre = run_chunks(*m, a, toks, 0);
    const auto step = run_chunks(*m, b, toks, 1);
    // The kernels may round activations to 8 bits for quantized weights, and to bf16 in
    // the matrix products of a prefill with BF16 weights; keys and values are bf16 in the
    // state of a BF16 or quantized model (steps here: 0.18 from the reference with an f32
    // cache, 0.22 with bf16).
    const float tol = dtype_info(t).quantized || t == DType::BF16 ? 0.25f : 1e-4f;
    EXPECT_LE(max_diff(pre, ref), tol) << dtype_name(t);
    EXPECT_LE(max_diff(step, ref), tol) << dtype_name(t);
    EXPECT_LE(max_diff(pre, step), tol) << dtype_name(t);
  }
}

// A model of bf16 or quantized matrices keeps bf16 keys and values (half the state's window);
// an f32 or f16 model keeps f32. Steps on one and two threads, chunks and a state saved and
// loaded agree as with f32, and this pass's keys are rounded as the ring holds them (steps
// past the window give what a prefill gives, within the kernels' activation rounding).
TEST(RecurrentGemmaTypes, Bf16KeysAndValuesForBf16AndQuantizedModels) {
  auto c = q_config();
  c.attention_window_size = 40;
  const auto toks = seq(100, 64);
  static ThreadPool one(1), two(2);
  const size_t ring_f32 = 2 * 40 * 32 * sizeof(float);  // one attention layer (of four)
  auto f32 = make_recurrent_gemma(random_recurrent_gemma_files(c, 4, 0.2f), &one);
  auto f16 = make_recurrent_gemma(
      with_matrix_type(random_recurrent_gemma_files(c, 4, 0.2f), DType::F16), &one);
  EXPECT_EQ(f16->new_state().bytes(), f32->new_state().bytes());
  for (DType t : {DType::BF16, DType::Q8_0}) {
    const ModelFiles qf = with_matrix_type(random_recurrent_gemma_files(c, 4, 0.2f), t);
    auto m1 = make_recurrent_gemma(qf, &one);
    auto m2 = make_recurrent_gemma(qf, &two);
    EXPECT_EQ(f32->new_state().bytes() - m1->new_state().bytes(), ring_f32 / 2) << dtype_name(t);
    State a = m1->new_state(), b = m2->new_state(), p = m1->new_state();
    const auto steps1 = run_chunks(*m1, a, toks, 1);
    EXPECT_EQ(steps1, run_chunks(*m2, b, toks, 1)) << dtype_name(t);
    // (Q8_0: 0.28 with an f32 cache, 0.31 with bf16, the steps' activations being 8-bit)
    EXPECT_LE(max_diff(run_chunks(*m1, p, toks, 0), steps1), 0.4f) << dtype_name(t);

    // save after 60 tokens, load, and continue: the same floats as going on
    State s = m1->new_state();
    std::vector<int32_t> head(toks.begin(), toks.begin() + 60), tail(toks.begin() + 60, toks.end());
    run_chunks(*m1, s, head, 7);
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("cachet_rg_bf16kv_" + std::to_string(::getpid()) + ".state"))
                                 .string();
    s.save(path);
    State r = m1->load_state(path);
    std::filesystem::remove(path);
    EXPECT_EQ(run_chunks(*m1, s, tail, 1), run_chunks(*m1, r, tail, 1)) << dtype_name(t);
  }
}

TEST(RecurrentGemmaTypes, UnprefixedNamesAndSeparateHead) {
  static ThreadPool pool(1);
  const auto c = tiny_config();
  auto base = random_recurrent_gemma_files(c, 5, 0.2f);
  ModelFiles bare;
  bare.path = "bare";
  bare.config = base.config;
  for (auto& [name, t] : base.tensors) bare.tensors[name.substr(6)] = t;  // drop "model."
  auto m1 = make_recurrent_gemma(base, &pool);
  auto m2 = make_recurrent_gemma(bare, &pool);
  State a = m1->new_state(), b = m2->new_state();
  const auto toks = seq(7, 64);
  EXPECT_EQ(run_chunks(*m1, a, toks, 0), run_chunks(*m2, b, toks, 0));

  // An explicit lm_head.weight equal to the embedding gives the same logits; a different one
  // changes them.
  auto untied = base;
  untied.tensors["lm_head.weight"] = base.tensors.at("model.embed_tokens.weight");
  auto m3 = make_recurrent_gemma(untied, &pool);
  State s3 = m3->new_state(), s1 = m1->new_state();
  EXPECT_EQ(run_chunks(*m3, s3, toks, 0), run_chunks(*m1, s1, toks, 0));
  Tensor other = Tensor::zeros(DType::F32, {c.vocab_size, c.hidden_size});
  untied.tensors["lm_head.weight"] = other;
  auto m4 = make_recurrent_gemma(untied, &pool);
  State s4 = m4->new_state();
  for (float z : run_chunks(*m4, s4, toks, 0)) EXPECT_EQ(z, 0.0f);
}

}  // namespace
}  // namespace cachet

namespace cachet {
namespace {

// A GGUF laid out like candle's quantized RecurrentGemma files: HF tensor names, matrices
// quantized, vectors and 3-D tensors F32, no architecture metadata, config.json beside it.
TEST(RecurrentGemmaLoad, CandleStyleGgufWithSiblingConfig) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("cachet_rg_gguf_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto c = tiny_config();
  ModelFiles f = with_matrix_type(random_recurrent_gemma_files(c, 6, 0.2f), DType::Q8_0);
  GgufWriter w;
  for (const auto& [name, t] : f.tensors) w.add_tensor(name, t);
  const std::string path = (dir / "model-q8_0.gguf").string();
  w.write(path);
  nlohmann::json cj = f.config;
  cj["_block_types"] = cj["block_types"];
  cj.erase("block_types");
  std::ofstream((dir / "config.json").string()) << cj.dump(2);

  auto loaded = load_model(path);
  static ThreadPool pool(1);
  auto mem = make_recurrent_gemma(f, &pool);
  EXPECT_EQ(loaded->info().vocab_size, 64);
  State a = loaded->new_state(), b = mem->new_state();
  const auto toks = seq(9, 64);
  EXPECT_LE(max_diff(run_chunks(*loaded, a, toks, 0), run_chunks(*mem, b, toks, 0)), 1e-5f);

  // Without the config the architecture cannot be told.
  std::filesystem::remove(dir / "config.json");
  EXPECT_THROW(load_model(path), Error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cachet
