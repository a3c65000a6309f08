// MetaVoice: the pipeline from text to samples (see include/cachet/metavoice.h).
#include <chrono>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <optional>

#include "audio/tts_ops.h"
#include "cachet/audio_ops.h"
#include "cachet/encodec.h"
#include "cachet/error.h"
#include "cachet/metavoice.h"
#include "cachet/metavoice_gpt.h"
#include "cachet/model_files.h"
#include "cachet/mv_tokenizer.h"
#include "cachet/quant.h"
#include "cachet/safetensors.h"
#include "cachet/speaker_encoder.h"
#include "cachet/threadpool.h"
#include "cachet/wav.h"

namespace cachet {

namespace fs = std::filesystem;

struct MetaVoice::Impl {
  std::string dir;
  ThreadPool* pool = nullptr;
  std::unique_ptr<EncodecDecoder> encodec;
  // Absent when loaded codec-only.
  std::unique_ptr<MvStage1> stage1;
  std::unique_ptr<MvStage2> stage2;
  std::optional<MvTokenizer> tokenizer;
  std::vector<float> spk_emb;
  int64_t speaker_dim = 256;
  // Loaded on first use of a .wav speaker.
  mutable std::optional<SpeakerEncoder> speaker_encoder;
  mutable std::mutex mu;

  ThreadPool& threads() const { return pool ? *pool : default_pool(); }
  void require_stages() const {
    CACHET_CHECK(stage1 && stage2 && tokenizer, dir,
                 ": loaded for decoding codes only; load it without codec_only to synthesize");
  }
  // The calls below run on the pool: callers hold mu.
  std::vector<float> speaker_from_file(const std::string& path) const;
  std::vector<float> decode(const std::vector<std::vector<int>>& codes, bool normalize) const;
};

namespace {

std::string join(const std::string& dir, const char* name) {
  return (fs::path(dir) / name).string();
}

void require_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  CACHET_CHECK(fs::is_regular_file(path, ec), path, ": missing ", what);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool has_ext(const std::string& path, const char* ext) {
  std::string e = fs::path(path).extension().string();
  for (auto& c : e) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return e == ext;
}

// A speaker .safetensors file: tensor "spk_emb", or its only tensor, of dim values.
std::vector<float> read_speaker_safetensors(const std::string& path, int64_t dim) {
  auto file = SafetensorsFile::open(path);
  if (file->find("spk_emb") || file->tensors().size() != 1)
    return mv_read_speaker_embedding(path, dim);
  const Tensor& t = file->tensors().front();
  return mv_speaker_values(t, t.name, path, dim);
}

void check_codes(const std::vector<std::vector<int>>& codes, const EncodecConfig& cfg) {
  CACHET_CHECK(!codes.empty(), "codes: no codebooks given");
  CACHET_CHECK(static_cast<int>(codes.size()) <= cfg.num_quantizers, "codes: ", codes.size(),
               " codebooks, but the codec has ", cfg.num_quantizers);
  const size_t T = codes[0].size();
  CACHET_CHECK(T > 0, "codes: no frames (codebook 0 is empty)");
  for (size_t q = 0; q < codes.size(); ++q) {
    CACHET_CHECK(codes[q].size() == T, "codes: codebook ", q, " has ", codes[q].size(),
                 " frames, codebook 0 has ", T);
    for (size_t t = 0; t < T; ++t)
      CACHET_CHECK(codes[q][t] >= 0 && codes[q][t] < cfg.codebook_size, "codes: codebook ", q,
                   ", frame ", t, ": code ", codes[q][t], " is outside [0, ", cfg.codebook_size,
                   ")");
  }
}

bool report(const TtsOptions& o, TtsProgress::Stage stage, int64_t step, int64_t total) {
  if (!o.on_progress) return true;
  TtsProgress p;
  p.stage = stage;
  p.step = step;
  p.total = total;
  return o.on_progress(p);
}

void check_options(const TtsOptions& o) {
  // Bounds far past any useful value that keep the mixed and scaled logits finite
  CACHET_CHECK(std::isfinite(o.guidance) && std::fabs(o.guidance) <= 100.0f, "invalid guidance ",
               o.guidance, ": it must be a number from -100 to 100 (1: no guidance)");
  CACHET_CHECK(std::isfinite(o.temperature) && (o.temperature == 0.0f || o.temperature >= 1e-4f),
               "invalid temperature ", o.temperature, ": it must be 0 (greedy) or at least 0.0001");
  CACHET_CHECK(std::isfinite(o.top_p) && o.top_p > 0.0f && o.top_p <= 1.0f, "invalid top-p ",
               o.top_p, ": it must be in (0, 1]");
  CACHET_CHECK(std::isfinite(o.stage2_temperature) && o.stage2_temperature >= 0.0f,
               "invalid stage-2 temperature ", o.stage2_temperature, ": it must be >= 0");
  CACHET_CHECK(o.stage2_top_k >= 0, "invalid stage-2 top-k ", o.stage2_top_k,
               ": it must be >= 0 (0 disables it)");
  CACHET_CHECK(o.max_tokens != 0, "invalid max tokens 0: give at least 1, or -1 for no limit");
}

}  // namespace

std::vector<float> MetaVoice::Impl::speaker_from_file(const std::string& path) const {
  std::error_code ec;
  CACHET_CHECK(fs::is_regular_file(path, ec), path, ": speaker file not found");
  if (has_ext(path, ".safetensors")) return read_speaker_safetensors(path, speaker_dim);
  CACHET_CHECK(has_ext(path, ".wav"), path,
               ": unsupported speaker file (give a .wav recording or a .safetensors embedding)");
  CACHET_CHECK(speaker_dim == SpeakerEncoder::kEmbedDim, path, ": the speaker encoder gives ",
               SpeakerEncoder::kEmbedDim, "-d embeddings but the model takes ", speaker_dim);
  const Wav wav = read_wav(path);
  CACHET_CHECK(wav.frames() > 0, path, ": no audio samples");
  const std::vector<float> mono = mix_to_mono(wav);
  for (size_t i = 0; i < mono.size(); ++i)
    CACHET_CHECK(std::isfinite(mono[i]), path, ": sample ", i, " is not a finite number");
  if (!speaker_encoder) {
    const std::string enc = join(dir, "speaker_encoder.safetensors");
    std::error_code ec2;
    CACHET_CHECK(fs::is_regular_file(enc, ec2), enc,
                 ": missing; a .wav speaker needs the speaker encoder (convert the original's "
                 "speaker_encoder.pt with `cachet convert speaker_encoder.pt -o ",
                 enc, "`)");
    speaker_encoder = SpeakerEncoder::load(enc);
  }
  try {
    return speaker_encoder->embed(mono, wav.sample_rate, threads());
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
}

MetaVoice::MetaVoice(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetaVoice::~MetaVoice() = default;

std::unique_ptr<MetaVoice> MetaVoice::load(const std::string& dir,
                                           const MetaVoiceLoadOptions& opts) {
  auto m = std::make_unique<Impl>();
  m->dir = dir;
  m->pool = opts.pool;
  std::error_code ec;
  if (!opts.codec_only || opts.encodec_dir.empty())
    CACHET_CHECK(fs::is_directory(dir, ec), dir, ": not a directory (expected a METAVOICE_DIR)");

  const std::string encodec_dir =
      opts.encodec_dir.empty() ? join(dir, "encodec_24khz") : opts.encodec_dir;
  CACHET_CHECK(fs::is_directory(encodec_dir, ec), encodec_dir,
               ": missing EnCodec directory (facebook/encodec_24khz's config.json and "
               "model.safetensors; or pass --encodec DIR)");
  require_file(join(encodec_dir, "config.json"), "EnCodec config (facebook/encodec_24khz)");
  if (!fs::is_regular_file(join(encodec_dir, "model.safetensors"), ec))
    require_file(join(encodec_dir, "model.safetensors.index.json"),
                 "EnCodec weights model.safetensors (facebook/encodec_24khz)");
  m->encodec = EncodecDecoder::load(encodec_dir);
  const EncodecConfig& ec_cfg = m->encodec->config();
  CACHET_CHECK(ec_cfg.audio_channels == 1, encodec_dir, ": a mono EnCodec is needed, this one has ",
               ec_cfg.audio_channels, " channels");
  CACHET_CHECK(
      ec_cfg.num_quantizers >= tts::kNumCodebooks && ec_cfg.codebook_size == tts::kCodebookSize,
      encodec_dir, ": MetaVoice needs at least ", tts::kNumCodebooks, " quantizers of ",
      tts::kCodebookSize, " codes (this codec has ", ec_cfg.num_quantizers, " of ",
      ec_cfg.codebook_size, ")");

  if (!opts.codec_only) {
    const std::string s1 = mv_stage1_file(dir);
    CACHET_CHECK(!s1.empty(), join(dir, "first_stage.safetensors"),
                 ": missing stage-1 weights (first_stage.safetensors or first_stage*.gguf)");
    const std::string meta = join(dir, "first_stage.meta.json");
    const std::string s2 = join(dir, "second_stage.safetensors");
    const std::string spk = join(dir, "spk_emb.safetensors");
    require_file(meta, "tokenizer (first_stage.meta.json)");
    require_file(s2, "stage-2 weights (second_stage.safetensors)");
    require_file(spk, "speaker embedding (spk_emb.safetensors)");

    const MvStage1Args a1 = mv_stage1_args(dir);
    const MvStage2Args a2 = mv_stage2_args(dir);
    CACHET_CHECK(a1.vocab_size > tts::kEndOfAudio, s1, ": stage-1 vocab_size ", a1.vocab_size,
                 " has no end-of-audio token ", tts::kEndOfAudio);
    CACHET_CHECK(a2.vocab_sizes.size() == 2, s2,
                 ": stage 2 must take 2 input hierarchies, its "
                 "config has ",
                 a2.vocab_sizes.size());
    CACHET_CHECK(a2.head_vocab_sizes().size() == tts::kNumCodebooks - 2, s2, ": stage 2 must have ",
                 tts::kNumCodebooks - 2, " output heads, its config has ",
                 a2.head_vocab_sizes().size());
    m->tokenizer = MvTokenizer::from_file(meta);
    CACHET_CHECK(m->tokenizer->offset() == tts::kStage1TextOffset, meta, ": tokenizer offset ",
                 m->tokenizer->offset(), ", expected ", tts::kStage1TextOffset);
    CACHET_CHECK(m->tokenizer->offset() + m->tokenizer->eot_id() < a1.vocab_size, meta,
                 ": end-of-text id ", m->tokenizer->offset() + m->tokenizer->eot_id(),
                 " is outside the stage-1 vocabulary (", a1.vocab_size, ")");
    CACHET_CHECK(tts::kStage2TextOffset + m->tokenizer->eot_id() < a2.vocab_sizes[0], meta,
                 ": stage-2 end-of-text id ", tts::kStage2TextOffset + m->tokenizer->eot_id(),
                 " is outside the stage-2 text vocabulary (", a2.vocab_sizes[0], ")");
    m->speaker_dim = a1.speaker_emb_dim;
    m->stage1 = std::make_unique<MvStage1>(ModelFiles::open(s1), a1, opts.pool);
    m->stage2 = std::make_unique<MvStage2>(ModelFiles::open(s2), a2, opts.pool);
    CACHET_CHECK(!m->stage2->has_speaker_projection() || a2.speaker_emb_dim == a1.speaker_emb_dim,
                 s2, ": speaker_emb_dim ", a2.speaker_emb_dim, " differs from stage 1's ",
                 a1.speaker_emb_dim);
    m->spk_emb = mv_read_speaker_embedding(spk, m->speaker_dim);
  }
  return std::unique_ptr<MetaVoice>(new MetaVoice(std::move(m)));
}

const std::string& MetaVoice::path() const {
  return impl_->dir;
}
int64_t MetaVoice::speaker_dim() const {
  return impl_->speaker_dim;
}
int64_t MetaVoice::stage1_block_size() const {
  impl_->require_stages();
  return impl_->stage1->args().block_size;
}
int64_t MetaVoice::stage2_block_size() const {
  impl_->require_stages();
  return impl_->stage2->args().block_size;
}
const std::vector<float>& MetaVoice::default_speaker() const {
  impl_->require_stages();
  return impl_->spk_emb;
}

std::vector<float> MetaVoice::speaker_embedding(const std::string& path) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->speaker_from_file(path);
}

std::vector<int32_t> MetaVoice::tokenize(std::string_view text) const {
  impl_->require_stages();
  return impl_->tokenizer->stage1_ids(text);
}

std::vector<float> MetaVoice::Impl::decode(const std::vector<std::vector<int>>& codes,
                                           bool normalize) const {
  const EncodecConfig& cfg = encodec->config();
  check_codes(codes, cfg);
  std::vector<std::vector<int32_t>> c(codes.size());
  for (size_t q = 0; q < codes.size(); ++q) c[q].assign(codes[q].begin(), codes[q].end());
  std::vector<float> y = encodec->decode_mono(c, threads());
  if (normalize) y = normalize_loudness(y, cfg.sampling_rate);
  return y;
}

std::vector<float> MetaVoice::decode_codes(const std::vector<std::vector<int>>& codes,
                                           bool normalize) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->decode(codes, normalize);
}

TtsResult MetaVoice::synthesize(std::string_view text, const TtsOptions& o) const {
  Impl& m = *impl_;
  m.require_stages();
  check_options(o);
  std::lock_guard<std::mutex> lock(m.mu);
  using Clock = std::chrono::steady_clock;
  TtsResult res;
  res.sample_rate = m.encodec->config().sampling_rate;

  // Text.
  const std::string norm = mv_normalize_text(text);
  CACHET_CHECK(!norm.empty(), "the text is empty (nothing to say after normalisation)");
  const std::vector<int32_t> prompt = m.tokenizer->stage1_ids(norm);
  const std::vector<int32_t> text2 = m.tokenizer->stage2_ids(norm);
  const int64_t block1 = m.stage1->args().block_size, block2 = m.stage2->args().block_size;
  const int64_t T = static_cast<int64_t>(prompt.size());
  CACHET_CHECK(T < block1, "the text is too long: ", T, " tokens, but stage 1 (block size ", block1,
               ") takes at most ", block1 - 1, " to leave room for audio");
  CACHET_CHECK(static_cast<int64_t>(text2.size()) < block2, "the text is too long: ", text2.size(),
               " tokens, but stage 2 (block size ", block2, ") takes at most ", block2 - 1,
               " to leave room for audio");

  // Voice.
  std::vector<float> spk;
  if (!o.speaker_embedding.empty()) {
    CACHET_CHECK(static_cast<int64_t>(o.speaker_embedding.size()) == m.speaker_dim,
                 "speaker embedding: ", o.speaker_embedding.size(), " values, expected ",
                 m.speaker_dim);
    for (size_t i = 0; i < o.speaker_embedding.size(); ++i)
      CACHET_CHECK(std::isfinite(o.speaker_embedding[i]), "speaker embedding: value ", i,
                   " is not a finite number");
    spk = o.speaker_embedding;
  } else if (!o.speaker_path.empty()) {
    spk = m.speaker_from_file(o.speaker_path);
  } else {
    spk = m.spk_emb;
  }

  // Stage 1: both guidance rows take the same tokens; row 0 gets the speaker term.
  auto t0 = Clock::now();
  int64_t budget = block1 - T;
  if (o.max_tokens > 0) budget = std::min(budget, o.max_tokens);
  res.prompt_tokens = T;
  res.stage1_tokens = prompt;
  Rng rng1(o.seed);
  {
    State state = m.stage1->new_state();
    std::vector<float> logits;
    const int64_t vocab = m.stage1->args().vocab_size;
    std::vector<float> mixed(static_cast<size_t>(vocab));
    auto next_token = [&] {
      CACHET_CHECK(static_cast<int64_t>(logits.size()) == 2 * vocab,
                   "stage 1: unexpected logits size ", logits.size());
      std::span<const float> all(logits);
      tts::cfg_mix(all.subspan(0, vocab), all.subspan(vocab, vocab), o.guidance, mixed);
      return tts::sample_top_p(mixed, o.temperature, o.top_p, rng1);
    };
    m.stage1->forward(state, prompt, prompt, spk.data(), logits);
    int32_t tok = next_token();
    res.stage1_tokens.push_back(tok);
    int64_t n = 1;
    CACHET_CHECK(report(o, TtsProgress::Stage::Stage1, n, budget), "cancelled");
    while (tok != tts::kEndOfAudio && n < budget) {
      const int32_t in[1] = {tok};
      m.stage1->forward(state, in, in, spk.data(), logits);
      tok = next_token();
      res.stage1_tokens.push_back(tok);
      ++n;
      CACHET_CHECK(report(o, TtsProgress::Stage::Stage1, n, budget), "cancelled");
    }
    res.reached_end_of_audio = tok == tts::kEndOfAudio;
  }
  res.stage1_seconds = seconds_since(t0);

  const tts::SplitStream split = tts::split_interleaved(res.stage1_tokens);
  CACHET_CHECK(!split.c0.empty(), "stage 1 produced no audio (", res.stage1_tokens.size() - T,
               " tokens generated, none forming a frame of codebooks 0 and 1)");

  // Stage 2: one pass over the padded window, six heads sampled per position.
  t0 = Clock::now();
  CACHET_CHECK(report(o, TtsProgress::Stage::Stage2, 0, 1), "cancelled");
  std::vector<std::vector<int32_t>> hier = tts::stage2_input(text2, split.c0, split.c1, block2);
  {
    std::vector<int32_t> flat;
    flat.reserve(static_cast<size_t>(2 * block2));
    for (const auto& h : hier) flat.insert(flat.end(), h.begin(), h.end());
    std::vector<float> logits;
    m.stage2->forward(flat, block2, m.stage2->has_speaker_projection() ? spk.data() : nullptr,
                      logits);
    const std::vector<int64_t> vocabs = m.stage2->args().head_vocab_sizes();
    const float temp2 = o.temperature == 0.0f ? 0.0f : o.stage2_temperature;
    Rng rng2(o.seed + 1337);
    size_t off = 0;
    for (int64_t v : vocabs) {
      CACHET_CHECK(logits.size() >= off + static_cast<size_t>(block2 * v),
                   "stage 2: unexpected logits size ", logits.size());
      std::vector<int32_t> out(static_cast<size_t>(block2));
      for (int64_t p = 0; p < block2; ++p) {
        std::span<const float> row(logits.data() + off + p * v, static_cast<size_t>(v));
        out[p] = tts::sample_top_k(row, temp2, o.stage2_top_k, rng2);
      }
      off += static_cast<size_t>(block2 * v);
      hier.push_back(std::move(out));
    }
  }
  res.codes = tts::tilted_filter(hier);
  res.stage2_seconds = seconds_since(t0);
  CACHET_CHECK(report(o, TtsProgress::Stage::Stage2, 1, 1), "cancelled");
  CACHET_CHECK(!res.codes[0].empty(),
               "stage 2 left no audio frame (every codebook must hold "
               "at least one code below ",
               tts::kCodebookSize, ")");

  // Waveform.
  t0 = Clock::now();
  CACHET_CHECK(report(o, TtsProgress::Stage::Decode, 0, 1), "cancelled");
  res.samples = m.decode(res.codes, o.normalize_loudness);
  res.decode_seconds = seconds_since(t0);
  report(o, TtsProgress::Stage::Decode, 1, 1);
  return res;
}

}  // namespace cachet
