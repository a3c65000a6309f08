// `cachet speaker-embed`: the MetaVoice speaker embedding of a reference WAV.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cachet/error.h"
#include "cachet/safetensors.h"
#include "cachet/speaker_encoder.h"
#include "cachet/threadpool.h"
#include "cachet/wav.h"
#include "cli.h"

namespace cachet::cli {
namespace {

Register speaker_embed_cmd{Command{
    "speaker-embed",
    "Compute a MetaVoice speaker embedding from a WAV file (JSON on stdout, or spk_emb file)",
    [](CLI::App* sub) {
      struct Args {
        std::string model, wav, out;
        bool no_trim = false;
      };
      auto a = std::make_shared<Args>();
      int* threads = add_threads_option(sub);
      sub->add_option("-m,--model", a->model,
                      "Speaker encoder weights (safetensors converted from speaker_encoder.pt)")
          ->required();
      sub->add_option("wav", a->wav, "Reference audio (WAV, any rate; mixed down to mono)")
          ->required();
      sub->add_option("-o,--output", a->out,
                      "Write a spk_emb.safetensors ([1, 256] tensor 'spk_emb') instead of JSON");
      sub->add_flag("--no-trim", a->no_trim,
                    "Skip silence trimming (the input must then be 16 kHz)");
      return [a, threads]() -> int {
        apply_threads(*threads);
        const SpeakerEncoder enc = SpeakerEncoder::load(a->model);
        if (!a->out.empty()) check_output(a->out, {a->model, a->wav});
        const Wav wav = read_wav(a->wav);
        CACHET_CHECK(wav.frames() > 0, a->wav, ": no audio samples");
        const std::vector<float> mono = mix_to_mono(wav);
        std::vector<float> e;
        try {
          if (a->no_trim) {
            CACHET_CHECK(wav.sample_rate == speaker_frontend::kSampleRate,
                         "--no-trim needs 16 kHz audio, the file is ", wav.sample_rate, " Hz");
            e = enc.embed_utterance(mono, default_pool());
          } else {
            e = enc.embed(mono, wav.sample_rate, default_pool());
          }
        } catch (const Error& err) {
          fail(a->wav, ": ", err.what());
        }
        if (!a->out.empty()) {
          SafetensorsWriter w;
          w.add_tensor("spk_emb", DType::F32, {1, SpeakerEncoder::kEmbedDim}, e.data(),
                       e.size() * sizeof(float));
          w.write(a->out);
        } else {
          const std::string s = nlohmann::json(e).dump() + "\n";
          std::fwrite(s.data(), 1, s.size(), stdout);
        }
        return 0;
      };
    }}};

}  // namespace
}  // namespace cachet::cli
