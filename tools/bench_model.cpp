// `cachet bench -m MODEL` / `cachet bench --random NAME --type T`: prefill and decode speed,
// decode speed as a share of the memory roofline, peak RSS and state size.
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

}  // namespace

int bench_model(const BenchModelArgs& args) {
  set_default_threads(args.threads);
  ThreadPool& pool = default_pool();
  CACHET_CHECK(args.model.empty() != args.random_name.empty(),
               "bench: give either -m MODEL or --random PRESET");
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
  {
    auto toks = random_tokens(args.prompt, info.vocab_size, 1);
    // Warm-up pass on a separate state so that the timed prefill finds the caches sized.
    State warm = model->new_state();
    model->forward(warm, std::span<const int32_t>(toks.data(), std::min<size_t>(toks.size(), 16)),
                   logits);
    const auto t0 = Clock::now();
    model->forward(state, toks, logits);
    std::printf("prefill %d: %.1f tok/s\n", args.prompt, args.prompt / seconds_since(t0));
    std::fflush(stdout);
  }
  const int steps = args.decode_steps;
  const double d512 = decode_speed(*model, state, steps, logits);
  const double rss512 = current_rss_gib();
  std::printf("decode after %d: %.1f tok/s (%.0f%% of roofline)\n", args.prompt, d512,
              100.0 * d512 / roofline);
  std::fflush(stdout);
  if (args.long_context > state.position()) {
    advance_to(*model, state, args.long_context, 512, logits);
    const double dlong = decode_speed(*model, state, steps, logits);
    std::printf("decode after %d: %.1f tok/s (%.0f%% of roofline)\n", args.long_context, dlong,
                100.0 * dlong / roofline);
    std::printf("RSS after %d: %.2f GiB, after %d: %.2f GiB\n", args.prompt, rss512,
                args.long_context, current_rss_gib());
  }
  std::printf("peak RSS: %.2f GiB\n", peak_rss_gib());
  std::printf("state: %.1f MiB per sequence\n", state.bytes() / (1024.0 * 1024.0));
  return 0;
}

}  // namespace cachet::cli
