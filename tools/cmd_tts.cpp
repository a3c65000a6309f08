// `cachet tts`: MetaVoice text to speech into a WAV file, or EnCodec decoding of given codes.
//
//   cachet tts -m METAVOICE_DIR -p TEXT -o out.wav [--speaker FILE] [--guidance 3.0] [--temp 1.0]
//              [--top-p 0.95] [--seed N] [-t N] [--encodec DIR] [--dump-codes FILE.json]
//   cachet tts -m METAVOICE_DIR --codes FILE.json -o out.wav     (or --encodec DIR instead of -m)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cachet/encodec.h"
#include "cachet/error.h"
#include "cachet/file.h"
#include "cachet/metavoice.h"
#include "cachet/profile.h"
#include "cachet/wav.h"
#include "cli.h"
#include "profile_print.h"

namespace cachet::cli {
namespace {

struct TtsArgs {
  std::string model, prompt, prompt_file, out, speaker, encodec, dump_codes, codes;
  float guidance = 3.0f, temperature = 1.0f, top_p = 0.95f;
  std::string seed;  // empty: from the clock
  int64_t max_tokens = -1;
  bool no_loudness = false, float_wav = false, verbose = false, profile = false;
};

void write_codes_json(const std::string& path, const std::vector<std::vector<int>>& codes) {
  const std::string text = nlohmann::json{{"codes", codes}}.dump() + "\n";
  write_file(path, text.data(), text.size());
}

void write_output(const TtsArgs& a, std::vector<float> samples, int rate) {
  WavWriteOptions wo;
  wo.format = a.float_wav ? WavSampleFormat::Float32 : WavSampleFormat::Pcm16;
  write_wav(a.out, Wav::mono(std::move(samples), rate), wo);
}

void print_summary(double audio_s, double wall_s) {
  std::fprintf(stderr, "audio: %.1f s in %.1f s (%.1fx real time)\n", audio_s, wall_s,
               wall_s > 0 ? audio_s / wall_s : 0.0);
}

// One status line on a terminal, rewritten in place.
class StatusLine {
 public:
  StatusLine() : enabled_(isatty(2) != 0) {}
  void show(const TtsProgress& p) {
    if (!enabled_) return;
    switch (p.stage) {
      case TtsProgress::Stage::Stage1:
        std::fprintf(stderr, "\rstage 1: %lld tokens (%.1f s of audio, at most %lld)   ",
                     static_cast<long long>(p.step), static_cast<double>(p.step) / 150.0,
                     static_cast<long long>(p.total));
        break;
      case TtsProgress::Stage::Stage2:
        if (p.step == 0) std::fprintf(stderr, "\rstage 2 ...%40s", "");
        break;
      case TtsProgress::Stage::Decode:
        if (p.step == 0) std::fprintf(stderr, "\rEnCodec decoding ...%40s", "");
        break;
    }
    std::fflush(stderr);
    dirty_ = true;
  }
  void clear() {
    if (enabled_ && dirty_) std::fprintf(stderr, "\r%70s\r", "");
    dirty_ = false;
  }

 private:
  bool enabled_;
  bool dirty_ = false;
};

int run_decode_codes(const TtsArgs& a) {
  CACHET_CHECK(!a.model.empty() || !a.encodec.empty(),
               "tts: --codes needs -m METAVOICE_DIR or --encodec DIR");
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::vector<int32_t>> raw = read_codes_json(a.codes);
  std::vector<std::vector<int>> codes(raw.size());
  for (size_t q = 0; q < raw.size(); ++q) codes[q].assign(raw[q].begin(), raw[q].end());
  MetaVoiceLoadOptions lo;
  lo.encodec_dir = a.encodec;
  lo.codec_only = true;
  auto mv = MetaVoice::load(a.model, lo);
  std::vector<float> y;
  try {
    y = mv->decode_codes(codes, !a.no_loudness);
  } catch (const Error& e) {
    fail(a.codes, ": ", e.what());
  }
  const double audio_s = static_cast<double>(y.size()) / mv->sample_rate();
  write_output(a, std::move(y), mv->sample_rate());
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (a.verbose)
    std::fprintf(stderr, "decoded %zu x %zu codes into %s\n", codes.size(), codes[0].size(),
                 a.out.c_str());
  print_summary(audio_s, wall);
  return 0;
}

int run_tts(TtsArgs& a, bool has_prompt) {
  const bool has_file = !a.prompt_file.empty();
  check_output(a.out, {a.model, a.encodec, a.speaker, a.prompt_file, a.codes});
  if (!a.dump_codes.empty()) {
    std::error_code ec;
    CACHET_CHECK(std::filesystem::weakly_canonical(a.dump_codes, ec) !=
                     std::filesystem::weakly_canonical(a.out, ec),
                 a.out, ": given both as -o and as --dump-codes");
    check_output(a.dump_codes, {a.model, a.encodec, a.speaker, a.prompt_file, a.codes, a.out});
  }
  if (!a.codes.empty()) {
    CACHET_CHECK(!has_prompt && !has_file, "tts: give either a text (-p) or --codes, not both");
    CACHET_CHECK(a.dump_codes.empty(), "tts: --dump-codes does not go with --codes");
    return run_decode_codes(a);
  }
  CACHET_CHECK(!a.model.empty(), "tts: give the model directory with -m METAVOICE_DIR");
  CACHET_CHECK(has_prompt || has_file, "tts: give a text with -p TEXT or --prompt-file FILE");
  CACHET_CHECK(!(has_prompt && has_file), "tts: give either -p or --prompt-file, not both");
  const std::string text = has_file ? read_input(a.prompt_file, "the prompt file") : a.prompt;
  const uint64_t seed = seed_from(a.seed);

  const auto t0 = std::chrono::steady_clock::now();
  MetaVoiceLoadOptions lo;
  lo.encodec_dir = a.encodec;
  auto mv = MetaVoice::load(a.model, lo);
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  TtsOptions o;
  o.speaker_path = a.speaker;
  o.guidance = a.guidance;
  o.temperature = a.temperature;
  o.top_p = a.top_p;
  o.seed = seed;
  o.max_tokens = a.max_tokens;
  o.normalize_loudness = !a.no_loudness;
  StatusLine status;
  o.on_progress = [&status](const TtsProgress& p) {
    status.show(p);
    return true;
  };
  if (a.verbose)
    std::fprintf(stderr, "model: %s (loaded in %.2f s)\nseed: %llu\n", a.model.c_str(), load_s,
                 static_cast<unsigned long long>(seed));
  const auto t1 = std::chrono::steady_clock::now();
  TtsResult r;
  if (a.profile) {  // stage 1 marks its phases; stage 2 and EnCodec do not
    profile::take();
    profile::set_enabled(true);
  }
  try {
    r = mv->synthesize(text, o);
  } catch (...) {
    status.clear();
    throw;
  }
  profile::set_enabled(false);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  status.clear();
  if (!a.dump_codes.empty()) write_codes_json(a.dump_codes, r.codes);
  const double audio_s = r.audio_seconds();
  const size_t frames = r.codes.empty() ? 0 : r.codes[0].size();
  write_output(a, std::move(r.samples), r.sample_rate);
  if (a.verbose) {
    const int64_t generated = static_cast<int64_t>(r.stage1_tokens.size()) - r.prompt_tokens;
    std::fprintf(stderr,
                 "prompt: %lld tokens; stage 1: %lld tokens in %.2f s (%.1f tok/s, %s); "
                 "stage 2: %.2f s; EnCodec: %.2f s; %zu frames\n",
                 static_cast<long long>(r.prompt_tokens), static_cast<long long>(generated),
                 r.stage1_seconds, r.stage1_seconds > 0 ? generated / r.stage1_seconds : 0.0,
                 r.reached_end_of_audio ? "end of audio" : "token limit", r.stage2_seconds,
                 r.decode_seconds, frames);
  }
  if (!r.reached_end_of_audio)
    std::fprintf(stderr, "note: stage 1 stopped at its token limit before the end of audio\n");
  if (a.profile) {
    const int64_t steps = static_cast<int64_t>(r.stage1_tokens.size()) - r.prompt_tokens;
    std::fprintf(stderr, "profile of stage 1 (%lld steps, the prompt's pass included):\n",
                 static_cast<long long>(steps));
    print_profile(stderr, profile::take(), r.stage1_seconds, steps, "step");
  }
  print_summary(audio_s, wall);
  return 0;
}

const Register reg_tts{Command{
    "tts", "MetaVoice text to speech into a WAV file (or decode EnCodec codes)",
    [](CLI::App* sub) -> std::function<int()> {
      auto a = std::make_shared<TtsArgs>();
      sub->add_option("-m,--model", a->model, "METAVOICE_DIR");
      sub->add_option("-p,--prompt", a->prompt, "Text to speak");
      sub->add_option("--prompt-file", a->prompt_file,
                      "Read the text from FILE ('-': standard input)");
      sub->add_option("-o,--output", a->out, "Output WAV file (24 kHz mono)")->required();
      sub->add_option("--speaker", a->speaker,
                      "Voice: a .wav recording or a .safetensors embedding (default: the "
                      "directory's spk_emb.safetensors)");
      sub->add_option("--guidance", a->guidance, "Classifier-free guidance scale (default 3.0)");
      sub->add_option("--temp,--temperature", a->temperature,
                      "Stage-1 temperature (default 1.0; 0: greedy, deterministic)");
      sub->add_option("--top-p", a->top_p, "Stage-1 top-p (default 0.95)");
      sub->add_option("--seed", a->seed, "Random seed (default: from the clock)");
      sub->add_option("-n,--max-tokens", a->max_tokens,
                      "Stage-1 tokens to generate at most (default: up to the context)");
      sub->add_option("--encodec", a->encodec,
                      "EnCodec directory (default: METAVOICE_DIR/encodec_24khz)");
      sub->add_option("--dump-codes", a->dump_codes, "Save the 8 x T EnCodec codes as JSON");
      sub->add_option("--codes", a->codes,
                      "Decode the codes of a JSON file {\"codes\": [[...], ...]} instead of "
                      "running the stages");
      sub->add_flag("--no-loudness", a->no_loudness, "Skip loudness normalisation");
      sub->add_flag("--float", a->float_wav, "Write 32-bit float samples instead of 16-bit PCM");
      sub->add_flag("-v,--verbose", a->verbose, "Print the seed and timings on stderr");
      sub->add_flag("--profile", a->profile,
                    "Print where stage 1's steps spend their time, phase by phase");
      int* threads = add_threads_option(sub);
      return [a, sub, threads]() -> int {
        apply_threads(*threads);
        return run_tts(*a, sub->count("--prompt") > 0);
      };
    }}};

}  // namespace
}  // namespace cachet::cli
