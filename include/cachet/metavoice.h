// MetaVoice-1B text to speech: a METAVOICE_DIR loaded once, then text -> 8 x T EnCodec codes ->
// 24 kHz mono samples.
//
// The flow follows the original fast path (metavoice-src fam/llm/fast_inference.py):
//   normalize_text + BPE (+2049, EOT 2561)
//   -> stage 1: causal GPT over a batch of two rows (speaker-conditioned and unconditioned),
//      logits mixed as g * cond + (1 - g) * uncond, temperature, top-p, one token for both rows,
//      until end of audio (2048) or the block size;
//   -> the flattened interleaved stream routed by value into codebooks 0 and 1 (equal length);
//   -> stage 2: one non-causal pass over [text + c0 + 1024 | 1024.. + c1 + 1024] padded or cut
//      to its block size, six heads sampled with temperature and top-k 200;
//   -> TiltedEncodec filter (codes < 1024 per hierarchy, all truncated to the shortest);
//   -> EnCodec 24 kHz decoder -> loudness normalisation (-14 LUFS, tanh).
//
// A METAVOICE_DIR holds first_stage.safetensors or first_stage*.gguf, first_stage.meta.json,
// second_stage.safetensors, spk_emb.safetensors and encodec_24khz/ (config.json and
// model.safetensors); optionally speaker_encoder.safetensors (for --speaker WAV) and
// config.json {"first_stage": {"model_args": {...}}, "second_stage": {"model_args": {...}}}
// overriding the released hyper-parameters.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cachet {

class ThreadPool;

struct MetaVoiceLoadOptions {
  std::string encodec_dir;     // "": METAVOICE_DIR/encodec_24khz
  bool codec_only = false;     // load only EnCodec: decode_codes() works, synthesize() fails
  ThreadPool* pool = nullptr;  // nullptr: default_pool()
};

// Reported while synthesizing. Stage1 reports after every stage-1 token: step = tokens
// generated so far, total = the token budget (generation usually ends earlier, at the
// end-of-audio token). The other stages report once when they start (step 0, total 1) and once
// when they end (step 1, total 1).
struct TtsProgress {
  enum class Stage { Stage1, Stage2, Decode };
  Stage stage = Stage::Stage1;
  int64_t step = 0;
  int64_t total = 0;
};

struct TtsOptions {
  // The voice, in this order of precedence: speaker_embedding (speaker_dim floats, used as
  // given), speaker_path (a .wav file through the speaker encoder, or a
  // .safetensors file holding one tensor, "spk_emb" or the only tensor, of speaker_dim floats),
  // else the directory's spk_emb.safetensors.
  std::vector<float> speaker_embedding;
  std::string speaker_path;
  float guidance = 3.0f;            // g in g * cond + (1 - g) * uncond; 1: no guidance
  float temperature = 1.0f;         // stage 1; 0: greedy in both stages (fully deterministic)
  float top_p = 0.95f;              // stage 1, in (0, 1]
  float stage2_temperature = 1.0f;  // the original hard-codes 1.0; 0: greedy
  int32_t stage2_top_k = 200;       // 0: no limit
  uint64_t seed = 0;                // stage 1 draws from Rng(seed), stage 2 from Rng(seed + 1337)
  int64_t max_tokens = -1;  // stage-1 tokens to generate at most (>= 1); < 0: up to the block size
  bool normalize_loudness = true;
  // Return false to cancel (synthesize then throws cachet::Error "cancelled").
  std::function<bool(const TtsProgress&)> on_progress;
};

struct TtsResult {
  std::vector<std::vector<int>> codes;  // 8 x T EnCodec codes, each in [0, 1024)
  std::vector<float> samples;           // mono, hop * T samples (hop 320 at 24 kHz)
  int sample_rate = 24000;

  std::vector<int32_t> stage1_tokens;  // the whole stage-1 sequence, prompt first
  int64_t prompt_tokens = 0;
  bool reached_end_of_audio = false;  // false: stopped by max_tokens or the block size
  double stage1_seconds = 0, stage2_seconds = 0, decode_seconds = 0;

  double audio_seconds() const {
    return sample_rate > 0 ? static_cast<double>(samples.size()) / sample_rate : 0.0;
  }
};

// Every method may be called from any thread; synthesize, decode_codes and speaker_embedding
// run one at a time (they share the thread pool).
class MetaVoice {
 public:
  // Loads dir; every missing or malformed file is a cachet::Error naming it.
  static std::unique_ptr<MetaVoice> load(const std::string& dir,
                                         const MetaVoiceLoadOptions& opts = {});
  ~MetaVoice();
  MetaVoice(const MetaVoice&) = delete;
  MetaVoice& operator=(const MetaVoice&) = delete;

  // Text to codes and samples. Errors: empty text (after normalisation), text outside Latin-1,
  // text too long for the stage-1 or stage-2 context, bad speaker file or embedding, bad
  // sampling parameters. Calls from several threads are serialised.
  TtsResult synthesize(std::string_view text, const TtsOptions& opts = {}) const;

  // EnCodec decode of 8 x T codes (each in [0, 1024), T >= 1), then loudness normalisation when
  // asked. Errors name the codebook and frame of a bad code.
  std::vector<float> decode_codes(const std::vector<std::vector<int>>& codes,
                                  bool normalize_loudness = true) const;

  // The speaker embedding of a .wav or .safetensors file (see TtsOptions::speaker_path).
  std::vector<float> speaker_embedding(const std::string& path) const;
  // The directory's spk_emb.safetensors embedding.
  const std::vector<float>& default_speaker() const;

  // Stage-1 prompt of text: normalised, BPE + 2049, EOT 2561 appended.
  std::vector<int32_t> tokenize(std::string_view text) const;

  int sample_rate() const { return 24000; }
  int num_codebooks() const { return 8; }
  int64_t stage1_block_size() const;
  int64_t stage2_block_size() const;
  int64_t speaker_dim() const;
  const std::string& path() const;

  struct Impl;

 private:
  explicit MetaVoice(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cachet
