// `cachet bench -m MODEL` / `cachet bench --random NAME --type T`: prefill and decode speed,
// decode speed as a share of the memory roofline, peak RSS and state size. For MetaVoice
// (`--random metavoice-1b` or `-m METAVOICE_DIR`): stage-1 steps per second, one step
// advancing both guidance rows by one token, after a short prompt.
#include "bench_model.h"

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bandwidth.h"
#include "cachet/error.h"
#include "cachet/metavoice_gpt.h"
#include "cachet/model.h"
#include "cachet/recurrent_gemma.h"
#include "cachet/threadpool.h"
#include "random_model.h"

namespace cachet::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double peak_rss_gib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / (1024.0 * 1024.0);  // ru_maxrss is in KiB
}

double current_rss_gib() {
  std::ifstream in("/proc/self/statm");
  long pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * 4096.0 / (1024.0 * 1024.0 * 1024.0);
}

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> dist(3, vocab - 1);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(dist(rng));
  return t;
}

// Decodes n tokens one at a time; returns tokens per second.
double decode_speed(LanguageModel& model, State& state, int n, std::vector<float>& logits) {
  auto toks = random_tokens(n, model.info().vocab_size, 7 + state.position());
  model.forward(state, std::span<const int32_t>(toks.data(), 1), logits);  // warm up
  const auto t0 = Clock::now();
  for (int i = 1; i < n; ++i) model.forward(state, std::span<const int32_t>(&toks[i], 1), logits);
  return (n - 1) / seconds_since(t0);
}

// Feeds tokens in chunks until the state reaches position target.
void advance_to(LanguageModel& model, State& state, int64_t target, int chunk,
                std::vector<float>& logits) {
  while (state.position() < target) {
    const int64_t n = std::min<int64_t>(chunk, target - state.position());
    auto toks = random_tokens(n, model.info().vocab_size, 11 + state.position());
    model.forward(state, toks, logits);
  }
}

constexpr char kMetaVoicePreset[] = "metavoice-1b";

// Stage 1 of MetaVoice: the released shapes with random weights, or a METAVOICE_DIR.
int bench_metavoice(const BenchModelArgs& args, ThreadPool& pool) {
  std::unique_ptr<MvStage1> model;
  std::string what;
  if (!args.model.empty()) {
    model = std::make_unique<MvStage1>(ModelFiles::open(mv_stage1_file(args.model)),
                                       mv_stage1_args(args.model), &pool);
    what = args.model + " (stage 1)";
  } else {
    auto type = dtype_from_name(args.type);
    CACHET_CHECK(type.has_value(), "bench: unknown weight type '", args.type, "'");
    std::fprintf(stderr, "building %s stage 1 with random %s weights in memory...\n",
                 args.random_name.c_str(), args.type.c_str());
    const MvStage1Args a;  // the released MetaVoice-1B
    model = std::make_unique<MvStage1>(random_mv_stage1_files(a, *type, 1234, &pool), a, &pool);
    what = args.random_name + " stage 1 " + args.type + " (random weights)";
  }
  const ModelInfo& info = model->info();
  const MvStage1Args& a = model->args();
  std::printf("model: %s\n", what.c_str());
  std::printf("threads: %d\n", pool.size());
  std::printf("weights read per step: %.3f GiB\n", info.weight_bytes / (1024.0 * 1024 * 1024));
  std::fflush(stdout);

  const double bw = measure_bandwidth_gbs(pool);
  std::printf("bandwidth: %.1f GB/s\n", bw);
  const double roofline = bw * 1e9 / static_cast<double>(info.weight_bytes);
  std::printf("roofline: %.1f steps/s\n", roofline);
  std::fflush(stdout);

  // A short prompt (text-like), then single steps with the same token on both rows.
  const int prompt =
      std::clamp<int>(args.prompt > 0 ? args.prompt : 16, 1, static_cast<int>(a.block_size) - 2);
  const int steps = std::clamp<int>(args.decode_steps, 2, static_cast<int>(a.block_size) - prompt);
  std::vector<float> spk(static_cast<size_t>(a.speaker_emb_dim), 0.0f);
  spk[0] = 1.0f;
  std::vector<float> logits;
  State state = model->new_state();
  {
    const auto toks = random_tokens(prompt, a.vocab_size, 1);
    const auto t0 = Clock::now();
    model->forward(state, toks, toks, spk.data(), logits);
    std::printf("prefill %d: %.1f tok/s per row\n", prompt, prompt / seconds_since(t0));
    std::fflush(stdout);
  }
  const auto toks = random_tokens(steps, a.vocab_size, 7);
  auto step = [&](int i) {
    const std::span<const int32_t> t(&toks[static_cast<size_t>(i)], 1);
    model->forward(state, t, t, spk.data(), logits);
  };
  step(0);  // warm up
  const auto t0 = Clock::now();
  for (int i = 1; i < steps; ++i) step(i);
  const double sps = (steps - 1) / seconds_since(t0);
  std::printf("stage1 step: %.1f steps/s (%.0f%% of roofline)\n", sps, 100.0 * sps / roofline);
  std::printf("peak RSS: %.2f GiB\n", peak_rss_gib());
  std::printf("state: %.1f MiB after %lld positions\n", state.bytes() / (1024.0 * 1024.0),
              static_cast<long long>(state.position()));
  return 0;
}

}  // namespace

int bench_model(const BenchModelArgs& args) {
  set_default_threads(args.threads);
  ThreadPool& pool = default_pool();
  CACHET_CHECK(args.model.empty() != args.random_name.empty(),
               "bench: give either -m MODEL or --random PRESET");
  if (args.random_name == kMetaVoicePreset || (!args.model.empty() && is_metavoice_dir(args.model)))
    return bench_metavoice(args, pool);
  std::unique_ptr<LanguageModel> model;
  std::string what;
  if (!args.model.empty()) {
    model = load_model(args.model, LoadOptions{&pool});
    what = args.model;
  } else {
    auto type = dtype_from_name(args.type);
    CACHET_CHECK(type.has_value(), "bench: unknown weight type '", args.type, "'");
    auto spec = random_model_spec(args.random_name, *type);
    std::fprintf(stderr, "building %s with random %s weights in memory...\n",
                 args.random_name.c_str(), args.type.c_str());
    model = make_recurrent_gemma(random_model_files(spec, 1234, pool), &pool);
    what = args.random_name + " " + args.type + " (random weights)";
  }
  const ModelInfo& info = model->info();
  std::printf("model: %s\n", what.c_str());
  std::printf("threads: %d\n", pool.size());
  std::printf("weights read per token: %.3f GiB\n", info.weight_bytes / (1024.0 * 1024 * 1024));
  std::fflush(stdout);

  const double bw = measure_bandwidth_gbs(pool);
  std::printf("bandwidth: %.1f GB/s\n", bw);
  const double roofline = bw * 1e9 / static_cast<double>(info.weight_bytes);
  std::printf("roofline: %.1f tok/s\n", roofline);
  std::fflush(stdout);

  std::vector<float> logits;
  State state = model->new_state();
  const int prompt = args.prompt > 0 ? args.prompt : 512;
  {
    auto toks = random_tokens(prompt, info.vocab_size, 1);
    // Warm-up pass on a separate state so that the timed prefill finds the caches sized.
    State warm = model->new_state();
    model->forward(warm, std::span<const int32_t>(toks.data(), std::min<size_t>(toks.size(), 16)),
                   logits);
    const auto t0 = Clock::now();
    model->forward(state, toks, logits);
    std::printf("prefill %d: %.1f tok/s\n", prompt, prompt / seconds_since(t0));
    std::fflush(stdout);
  }
  const int steps = args.decode_steps;
  const double d512 = decode_speed(*model, state, steps, logits);
  const double rss512 = current_rss_gib();
  std::printf("decode after %d: %.1f tok/s (%.0f%% of roofline)\n", prompt, d512,
              100.0 * d512 / roofline);
  std::fflush(stdout);
  if (args.long_context > state.position()) {
    advance_to(*model, state, args.long_context, 512, logits);
    const double dlong = decode_speed(*model, state, steps, logits);
    std::printf("decode after %d: %.1f tok/s (%.0f%% of roofline)\n", args.long_context, dlong,
                100.0 * dlong / roofline);
    std::printf("RSS after %d: %.2f GiB, after %d: %.2f GiB\n", prompt, rss512, args.long_context,
                current_rss_gib());
  }
  std::printf("peak RSS: %.2f GiB\n", peak_rss_gib());
  std::printf("state: %.1f MiB per sequence\n", state.bytes() / (1024.0 * 1024.0));
  return 0;
}

}  // namespace cachet::cli
