// `cachet bench -m MODEL` / `cachet bench --random NAME --type T`: prefill and decode speed,
// decode speed as a share of the memory roofline, peak RSS and state size. For MetaVoice
// (`--random metavoice-1b` or `-m METAVOICE_DIR`): stage-1 steps per second, one step
// advancing both guidance rows by one token, after a short prompt.
#include "bench_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bandwidth.h"
#include "cachet/cpu.h"
#include "cachet/encodec.h"
#include "cachet/error.h"
#include "cachet/kernels.h"
#include "cachet/metavoice_gpt.h"
#include "cachet/model.h"
#include "cachet/profile.h"
#include "cachet/recurrent_gemma.h"
#include "cachet/threadpool.h"
#include "profile_print.h"
#include "random_model.h"

namespace cachet::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The upper median of a non-empty set
double median_of(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// The roofline: the higher probe over the weight bytes read per token or step.
double roofline_of(const Probes& p, uint64_t weight_bytes) {
  return p.best() * 1e9 / static_cast<double>(weight_bytes);
}

// The probes' lines, then `LABEL: R UNIT (P% of roofline, ROOF UNIT at B GB/s)`.
void print_roofline_share(const Probes& p, const std::string& label, double rate, const char* unit,
                          uint64_t weight_bytes) {
  print_probes(p, "the next figure");
  const double roofline = roofline_of(p, weight_bytes);
  std::printf("%s: %.1f %s (%.0f%% of roofline, %.1f %s at %.1f GB/s)\n", label.c_str(), rate, unit,
              100.0 * rate / roofline, roofline, unit, p.best());
  std::fflush(stdout);
}

// The lines every model benchmark starts with: what runs, where, and the bytes a step reads.
void print_header(const std::string& what, const ThreadPool& pool, uint64_t weight_bytes,
                  const char* unit) {
  std::printf("model: %s\n", what.c_str());
  std::printf("threads: %d\n", pool.size());
  std::printf("cpu: %s\n", cpu_summary().c_str());
  std::printf("weights read per %s: %.3f GiB\n", unit, weight_bytes / (1024.0 * 1024 * 1024));
}

// Resident memory in GiB, the bandwidth probes' buffer left out
double current_rss_gib() {
  std::ifstream in("/proc/self/statm");
  long pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * 4096.0 / (1024.0 * 1024.0 * 1024.0) - probe_buffer_gib();
}

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> dist(3, vocab - 1);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(dist(rng));
  return t;
}

// Untimed steps before a decode figure: one, and more (at most max_steps) while the kernels
// measure their stream ways for nx activation rows. The first tokens of a process try every
// way, some slower than the one kept; steady decoding is what is reported.
template <typename Step>
void warm_up(int nx, int max_steps, Step&& step) {
  step(0);
  for (int i = 1; i < max_steps && stream_ways_measuring(nx); ++i) step(i);
}
constexpr int kMaxWarmupSteps = 64;

// The stream way each interleaved layout chose by measurement for nx activation rows
// (docs/architecture.md, "Streams from memory"): `stream Q4_K, 1 row: 2 groups + prefetch`.
void print_stream_ways(int nx) {
  const MatLayout layouts[] = {MatLayout::Q4K_X16,  MatLayout::Q6K_X16,  MatLayout::Q8_0_X16,
                               MatLayout::BF16_X16, MatLayout::Q4_0_X16, MatLayout::Q4_1_X16,
                               MatLayout::Q5K_X16,  MatLayout::Q5_0_X16, MatLayout::Q5_1_X16};
  for (const MatLayout layout : layouts) {
    const StreamChoice c = stream_choice(layout, nx);
    if (c.measured)
      std::printf("stream %s, %d row%s: %s\n", std::string(dtype_name(layout_type(layout))).c_str(),
                  nx, nx == 1 ? "" : "s", std::string(stream_way_name(c.way)).c_str());
  }
}

// A mean hides the odd slow step (the host's steal): `LABEL: median M ms (P% of roofline),
// slowest S ms (position Q)`, the median step's rate as a share of the same roofline as the
// mean's (the steady state, apart from such steps; the targets are about the mean).
// first_pos: the position of ms[0].
void print_step_spread(const Probes& p, const std::string& label, const std::vector<double>& ms,
                       int64_t first_pos, uint64_t weight_bytes) {
  if (ms.empty()) return;
  const size_t slowest = static_cast<size_t>(std::max_element(ms.begin(), ms.end()) - ms.begin());
  const double median = median_of(ms);
  std::printf("%s: median %.2f ms (%.0f%% of roofline), slowest %.2f ms (position %lld)\n",
              label.c_str(), median, 100.0 * 1e3 / median / roofline_of(p, weight_bytes),
              ms[slowest], static_cast<long long>(first_pos + static_cast<int64_t>(slowest)));
}

// Each state's decoding steps: the mean rate, and each timed step's time and the position of
// the first.
struct DecodeTimes {
  std::vector<double> tps;
  std::vector<std::vector<double>> ms;
  std::vector<int64_t> first_pos;
};

// Decodes n tokens one at a time on each state, the states taking turns token by token, so
// that every speed is measured under the same load of the machine (on a shared host the
// bandwidth moves by a third within minutes: one after the other, the figures of two contexts
// differed by more than their own difference). Returns each state's tokens per second and step
// times. With with_profile, the phases of the first state's timed tokens are recorded
// (profile::take()).
DecodeTimes decode_speeds(LanguageModel& model, const std::vector<State*>& states, int n,
                          std::vector<float>& logits, bool with_profile = false) {
  const int64_t vocab = model.info().vocab_size;
  std::vector<std::vector<int32_t>> toks, warm;
  for (State* s : states) {
    toks.push_back(random_tokens(n, vocab, 7 + s->position()));
    warm.push_back(random_tokens(kMaxWarmupSteps, vocab, 5 + s->position()));
  }
  warm_up(1, kMaxWarmupSteps, [&](int i) {
    for (size_t k = 0; k < states.size(); ++k)
      model.forward(*states[k], std::span<const int32_t>(&warm[k][static_cast<size_t>(i)], 1),
                    logits);
  });
  DecodeTimes d;
  d.ms.resize(states.size());
  for (const State* s : states) d.first_pos.push_back(s->position());
  profile::take();
  for (int i = 1; i < n; ++i)
    for (size_t k = 0; k < states.size(); ++k) {
      profile::set_enabled(with_profile && k == 0);
      const auto t0 = Clock::now();
      model.forward(*states[k], std::span<const int32_t>(&toks[k][static_cast<size_t>(i)], 1),
                    logits);
      d.ms[k].push_back(1e3 * seconds_since(t0));
    }
  profile::set_enabled(false);
  for (const auto& ms : d.ms)
    d.tps.push_back((n - 1) * 1e3 / std::accumulate(ms.begin(), ms.end(), 0.0));
  return d;
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

// The work of `cachet tts` for `seconds` of audio, timed stage by stage: stage 1 prefills a
// text-length prompt and takes two steps per EnCodec frame (the two interleaved codebooks, both
// guidance rows at once), stage 2 (the released shapes, random weights) runs once over the
// frames, and EnCodec (random weights) decodes the eight codebooks. Tokens are drawn at random
// instead of sampled, which costs the same.
void bench_tts_pipeline(MvStage1& stage1, double seconds, const std::vector<float>& spk,
                        ThreadPool& pool) {
  const MvStage1Args& a = stage1.args();
  const auto codec = EncodecDecoder::random(EncodecConfig{});
  const int64_t frames = static_cast<int64_t>(seconds * codec->config().frame_rate());
  CACHET_CHECK(frames >= 1, "bench: --tts-seconds ", seconds, " is less than one audio frame (",
               1.0 / codec->config().frame_rate(), " s)");
  const int prompt = 32;
  CACHET_CHECK(prompt + 2 * frames <= a.block_size, "bench: ", seconds,
               " s of audio do not fit stage 1's context of ", a.block_size, " tokens");
  const MvStage2Args a2;
  MvStage2 stage2(random_mv_stage2_files(a2, 99), a2, &pool);
  std::vector<float> logits;

  const StealMark steal0 = steal_mark();
  auto t0 = Clock::now();
  State state = stage1.new_state();
  const auto text = random_tokens(prompt, a.vocab_size, 3);
  stage1.forward(state, text, text, spk.data(), logits);
  const auto toks = random_tokens(2 * frames, a.vocab_size, 5);
  for (int64_t i = 0; i < 2 * frames; ++i) {
    const std::span<const int32_t> t(&toks[static_cast<size_t>(i)], 1);
    stage1.forward(state, t, t, spk.data(), logits);
  }
  const double s1 = seconds_since(t0);

  std::vector<int32_t> in(static_cast<size_t>(a2.vocab_sizes.size() * frames));
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int32_t>(i * 7919 % 1024);
  t0 = Clock::now();
  stage2.forward(in, frames, stage2.has_speaker_projection() ? spk.data() : nullptr, logits);
  const double s2 = seconds_since(t0);

  std::vector<std::vector<int32_t>> codes(8, std::vector<int32_t>(static_cast<size_t>(frames)));
  for (size_t q = 0; q < codes.size(); ++q)
    for (int64_t t = 0; t < frames; ++t)
      codes[q][static_cast<size_t>(t)] = static_cast<int32_t>((q * 131 + t * 17) % 1024);
  t0 = Clock::now();
  const auto wav = codec->decode_mono(codes, pool);
  const double s3 = seconds_since(t0);

  const double audio = static_cast<double>(wav.size()) / codec->config().sampling_rate;
  const double total = s1 + s2 + s3;
  std::printf(
      "tts %.1f s of audio: %.2f s (stage 1 %.2f s, stage 2 %.2f s, EnCodec %.2f s), "
      "%.2fx real time\n",
      audio, total, s1, s2, s3, audio / total);
  print_steal(steal0, steal_mark(), "the pipeline ran");
}

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
  print_header(what, pool, info.weight_bytes, "step");
  std::fflush(stdout);

  const double bw = print_bandwidth(pool);
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
  double sps = 0;
  std::vector<double> ms;  // each timed step's time
  ms.reserve(static_cast<size_t>(steps));
  int64_t first_pos = 0;  // the position of the first timed step
  StealMark steal0, steal1;
  const Probes probes = between_probes(pool, [&] {
    // (the warm-up steps must leave room for the timed ones within the block size)
    const int room = static_cast<int>(a.block_size - state.position()) - steps;
    warm_up(2, std::clamp(room, 1, kMaxWarmupSteps), [&](int) { step(0); });
    first_pos = state.position();
    steal0 = steal_mark();
    profile::take();
    profile::set_enabled(args.profile);
    const auto t0 = Clock::now();
    for (int i = 1; i < steps; ++i) {
      const auto s0 = Clock::now();
      step(i);
      ms.push_back(1e3 * seconds_since(s0));
    }
    sps = (steps - 1) / seconds_since(t0);
    profile::set_enabled(false);
    steal1 = steal_mark();
  });
  print_roofline_share(probes, "stage1 step", sps, "steps/s", info.weight_bytes);
  if (args.profile) print_profile(stdout, profile::take(), (steps - 1) / sps, steps - 1, "step");
  print_step_spread(probes, "stage1 step time", ms, first_pos, info.weight_bytes);
  print_steal(steal0, steal1, "the steps were timed");
  print_stream_ways(2);
  std::printf("peak RSS: %.2f GiB\n", peak_rss_gib());
  std::printf("state: %.1f MiB after %lld positions\n", state.bytes() / (1024.0 * 1024.0),
              static_cast<long long>(state.position()));
  std::fflush(stdout);
  if (args.tts_seconds > 0) bench_tts_pipeline(*model, args.tts_seconds, spk, pool);
  return 0;
}

}  // namespace

int bench_model(const BenchModelArgs& args) {
  set_default_threads(args.threads);
  ThreadPool& pool = default_pool();
  CACHET_CHECK(args.model.empty() != args.random_name.empty(),
               "bench: give either -m MODEL or --random PRESET");
  const bool metavoice =
      args.random_name == kMetaVoicePreset || (!args.model.empty() && is_metavoice_dir(args.model));
  CACHET_CHECK(metavoice || args.tts_seconds == 0,
               "bench --tts-seconds: only MetaVoice has a text-to-speech pipeline to time ('",
               args.model.empty() ? args.random_name : args.model, "' is a text model)");
  if (metavoice) return bench_metavoice(args, pool);
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
  print_header(what, pool, info.weight_bytes, "token");
  std::fflush(stdout);

  const double bw = print_bandwidth(pool);
  const double roofline = bw * 1e9 / static_cast<double>(info.weight_bytes);
  std::printf("roofline: %.1f tok/s\n", roofline);
  std::fflush(stdout);

  std::vector<float> logits;
  std::optional<State> state(model->new_state());
  const int prompt = args.prompt > 0 ? args.prompt : 512;
  {
    auto toks = random_tokens(prompt, info.vocab_size, 1);
    // Warm-up pass on a separate state so that the timed prefill finds the caches sized.
    State warm = model->new_state();
    model->forward(warm, std::span<const int32_t>(toks.data(), std::min<size_t>(toks.size(), 16)),
                   logits);
    const auto t0 = Clock::now();
    model->forward(*state, toks, logits);
    std::printf("prefill %d: %.1f tok/s\n", prompt, prompt / seconds_since(t0));
    std::fflush(stdout);
  }
  const double rss_prompt = current_rss_gib();
  // The long context is a fork of the prompt's state fed on to long_context; both decode
  // figures then come from one run of turns (decode_speeds) between two bandwidth probes,
  // which each figure's roofline share uses (the higher of the two).
  std::optional<State> longer;
  if (args.long_context > state->position()) {
    longer.emplace(state->fork());
    advance_to(*model, *longer, args.long_context, 512, logits);
  }
  std::vector<State*> states = {&*state};
  if (longer) states.push_back(&*longer);
  DecodeTimes times;
  StealMark steal0, steal1;
  const Probes probes = between_probes(pool, [&] {
    steal0 = steal_mark();
    times = decode_speeds(*model, states, args.decode_steps, logits, args.profile);
    steal1 = steal_mark();
  });
  const std::vector<double>& tps = times.tps;
  print_roofline_share(probes, "decode after " + std::to_string(prompt), tps[0], "tok/s",
                       info.weight_bytes);
  if (args.profile)
    print_profile(stdout, profile::take(), (args.decode_steps - 1) / tps[0], args.decode_steps - 1,
                  "token");
  print_step_spread(probes, "decode step time after " + std::to_string(prompt), times.ms[0],
                    times.first_pos[0], info.weight_bytes);
  print_stream_ways(1);
  if (longer) {
    print_roofline_share(probes, "decode after " + std::to_string(args.long_context), tps[1],
                         "tok/s", info.weight_bytes);
    print_step_spread(probes, "decode step time after " + std::to_string(args.long_context),
                      times.ms[1], times.first_pos[1], info.weight_bytes);
    // The state is bounded: how much slower the long context decodes (its speed's shortfall),
    // by the means and by the median steps (negative: faster)
    auto shortfall = [](double pct) {
      char b[48];
      std::snprintf(b, sizeof b, "%.1f%% %s", std::fabs(pct), pct < 0 ? "faster" : "slower");
      return std::string(b);
    };
    std::printf("decode after %d against after %d: %s (median steps %s)\n", args.long_context,
                prompt, shortfall(100.0 * (1.0 - tps[1] / tps[0])).c_str(),
                shortfall(100.0 * (1.0 - median_of(times.ms[0]) / median_of(times.ms[1]))).c_str());
  }
  print_steal(steal0, steal1, "the tokens were decoded");
  if (longer) {
    state.reset();  // RSS with the long context's state alone, as with the prompt's above
    std::printf("RSS after %d: %.2f GiB, after %d: %.2f GiB\n", prompt, rss_prompt,
                args.long_context, current_rss_gib());
  }
  const State& last = longer ? *longer : *state;
  std::printf("peak RSS: %.2f GiB\n", peak_rss_gib());
  std::printf("state: %.1f MiB per sequence\n", last.bytes() / (1024.0 * 1024.0));
  return 0;
}

}  // namespace cachet::cli
