// `cachet bench-codec` (EnCodec decoding speed) and `cachet codec-decode` (codes -> WAV).
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cachet/audio_ops.h"
#include "cachet/encodec.h"
#include "cachet/error.h"
#include "cachet/threadpool.h"
#include "cachet/wav.h"
#include "cli.h"

namespace cachet::cli {
namespace {

Register bench_codec_cmd{Command{
    "bench-codec", "Measure EnCodec decoding speed (real model or random weights)",
    [](CLI::App* sub) {
      struct Args {
        std::string model;
        bool random = false;
        double seconds = 10.0;
        int n_q = 8, reps = 3;
      };
      auto a = std::make_shared<Args>();
      int* threads = add_threads_option(sub);
      sub->add_option("-m,--model,--encodec", a->model,
                      "EnCodec directory (config.json + "
                      "model.safetensors)");
      sub->add_flag("--random", a->random,
                    "Random weights of facebook/encodec_24khz's shapes (the default without -m)");
      sub->add_option("--seconds", a->seconds, "Seconds of audio to decode (default 10)");
      sub->add_option("--codebooks", a->n_q, "Codebooks per frame (default 8)");
      sub->add_option("--reps", a->reps,
                      "Timed repetitions after the first decode; the best is reported (default 3)");
      return [a, threads]() -> int {
        apply_threads(*threads);
        CACHET_CHECK(a->seconds > 0 && a->seconds <= 3600, "bench-codec: --seconds ", a->seconds,
                     " is outside (0, 3600]");
        CACHET_CHECK(a->reps >= 1, "bench-codec: --reps must be at least 1");
        std::unique_ptr<EncodecDecoder> dec = (a->random || a->model.empty())
                                                  ? EncodecDecoder::random(EncodecConfig{})
                                                  : EncodecDecoder::load(a->model);
        const EncodecConfig& cfg = dec->config();
        const int frames = static_cast<int>(a->seconds * cfg.frame_rate() + 0.5);
        CACHET_CHECK(a->n_q >= 1 && a->n_q <= cfg.num_quantizers, "bench-codec: --codebooks ",
                     a->n_q, " is outside [1, ", cfg.num_quantizers, "]");
        std::vector<std::vector<int32_t>> codes(static_cast<size_t>(a->n_q),
                                                std::vector<int32_t>(static_cast<size_t>(frames)));
        uint64_t s = 12345;
        for (auto& row : codes)
          for (auto& c : row) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            c = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(cfg.codebook_size));
          }
        ThreadPool& pool = default_pool();
        int64_t samples = 0;
        auto timed_decode = [&]() {
          const auto t0 = std::chrono::steady_clock::now();
          const auto wav = dec->decode(codes, pool);
          samples = static_cast<int64_t>(wav[0].size());
          return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        };
        // The first decode of a process is what `cachet tts` pays once per utterance: it also
        // takes its buffers' pages from the kernel. The best of the repetitions after it is the
        // decoder's own speed.
        const double first = timed_decode();
        double best = 1e30;
        for (int r = 0; r < a->reps; ++r) best = std::min(best, timed_decode());
        const double audio = static_cast<double>(samples) / cfg.sampling_rate;
        std::printf("encodec first decode: %.1f s of audio in %.2f s (%.0fx real time)\n", audio,
                    first, audio / first);
        std::printf("encodec decode: %.1f s of audio in %.2f s (%.0fx real time)\n", audio, best,
                    audio / best);
        return 0;
      };
    }}};

Register codec_decode_cmd{Command{
    "codec-decode", "Decode EnCodec codes ({\"codes\": [[...], ...]}) to a WAV file",
    [](CLI::App* sub) {
      struct Args {
        std::string model, codes, out;
        bool raw = false;
      };
      auto a = std::make_shared<Args>();
      int* threads = add_threads_option(sub);
      sub->add_option("--encodec,-m", a->model, "EnCodec directory")->required();
      sub->add_option("--codes", a->codes, "JSON file with the codes")->required();
      sub->add_option("-o,--output", a->out,
                      "Output WAV file (16-bit as candle writes it, trunc(x * 32767); `cachet "
                      "tts --codes` rounds as the original does)")
          ->required();
      sub->add_flag("--raw", a->raw,
                    "Write the decoder output as float32 WAV, without loudness normalisation");
      return [a, threads]() -> int {
        apply_threads(*threads);
        check_output(a->out, {a->model, a->codes});
        const auto codes = read_codes_json(a->codes);
        CACHET_CHECK(!codes.empty() && !codes[0].empty(), a->codes, ": no codes to decode");
        const auto dec = EncodecDecoder::load(a->model);
        const EncodecConfig& cfg = dec->config();
        auto chans = dec->decode(codes, default_pool());
        Wav wav;
        wav.sample_rate = cfg.sampling_rate;
        wav.channels = cfg.audio_channels;
        const size_t n = chans[0].size();
        if (!a->raw)
          for (auto& ch : chans) ch = normalize_loudness(ch, cfg.sampling_rate);
        wav.samples.resize(n * chans.size());
        for (size_t c = 0; c < chans.size(); ++c)
          for (size_t i = 0; i < n; ++i) wav.samples[i * chans.size() + c] = chans[c][i];
        WavWriteOptions o;
        if (a->raw) {
          o.format = WavSampleFormat::Float32;
        } else {  // as candle's write_pcm_as_wav; `cachet tts --codes` rounds as the original
          o.format = WavSampleFormat::Pcm16;
          o.rounding = Pcm16Rounding::Truncate;
        }
        write_wav(a->out, wav, o);
        std::fprintf(stderr, "%s: %.2f s of audio, %d Hz, %d channel(s)\n", a->out.c_str(),
                     wav.seconds(), wav.sample_rate, wav.channels);
        return 0;
      };
    }}};

}  // namespace
}  // namespace cachet::cli
