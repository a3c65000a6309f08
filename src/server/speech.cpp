#include "server/speech.h"

#include <algorithm>
#include <cmath>

#include "cachet/error.h"
#include "cachet/metavoice.h"
#include "cachet/threadpool.h"

namespace cachet::server {

namespace {

void put_u32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u16(std::string& s, uint16_t v) {
  s.push_back(static_cast<char>(v & 0xff));
  s.push_back(static_cast<char>(v >> 8));
}

}  // namespace

std::string encode_pcm16_raw(const std::vector<float>& samples) {
  std::string out;
  out.reserve(samples.size() * 2);
  for (float x : samples) {
    const float c = std::isfinite(x) ? std::clamp(x, -1.0f, 1.0f) : 0.0f;
    const long v = std::lround(c * 32767.0f);
    put_u16(out, static_cast<uint16_t>(static_cast<int16_t>(v)));
  }
  return out;
}

std::string encode_pcm16_wav(const std::vector<float>& samples, int sample_rate) {
  const std::string data = encode_pcm16_raw(samples);
  std::string out = "RIFF";
  put_u32(out, static_cast<uint32_t>(36 + data.size()));
  out += "WAVEfmt ";
  put_u32(out, 16);
  put_u16(out, 1);  // PCM
  put_u16(out, 1);  // mono
  put_u32(out, static_cast<uint32_t>(sample_rate));
  put_u32(out, static_cast<uint32_t>(sample_rate) * 2);
  put_u16(out, 2);
  put_u16(out, 16);
  out += "data";
  put_u32(out, static_cast<uint32_t>(data.size()));
  out += data;
  return out;
}

namespace {

class MetaVoiceBackend : public SpeechBackend {
 public:
  MetaVoiceBackend(const std::string& dir, int threads)
      : pool_(std::make_unique<ThreadPool>(threads)) {
    MetaVoiceLoadOptions o;
    o.pool = pool_.get();  // its own workers: the text scheduler runs at the same time
    mv_ = MetaVoice::load(dir, o);
  }
  std::string name() const override { return "metavoice"; }
  int sample_rate() const override { return mv_->sample_rate(); }
  std::vector<float> synthesize(const SpeechRequest& req,
                                const std::function<bool()>& cancelled) override {
    TtsOptions o;
    o.seed = req.seed;
    o.on_progress = [&](const TtsProgress&) { return !cancelled(); };
    return mv_->synthesize(req.input, o).samples;
  }

 private:
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<MetaVoice> mv_;
};

}  // namespace

std::unique_ptr<SpeechBackend> load_speech_backend(const std::string& dir, int threads) {
  return std::make_unique<MetaVoiceBackend>(dir, threads);
}

}  // namespace cachet::server
