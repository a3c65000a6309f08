// Text to speech behind POST /v1/audio/speech.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace cachet::server {

struct SpeechRequest {
  std::string model;
  std::string input;
  std::string voice;                    // "" or a known voice name
  std::string response_format = "wav";  // wav or pcm
  double speed = 1.0;
  uint64_t seed = 0;
};

class SpeechBackend {
 public:
  virtual ~SpeechBackend() = default;
  virtual std::string name() const = 0;  // the model id in /v1/models
  virtual int sample_rate() const = 0;
  // Mono samples in [-1, 1]; cancelled() is polled and ends the synthesis with an error.
  virtual std::vector<float> synthesize(const SpeechRequest& req,
                                        const std::function<bool()>& cancelled) = 0;
};

// Loads a METAVOICE_DIR (MetaVoice-1B) with its own pool of `threads` workers (<= 0: one per
// hardware thread); a cachet::Error when it cannot. Voices: the directory's speaker.
std::unique_ptr<SpeechBackend> load_speech_backend(const std::string& dir, int threads);

// 16-bit PCM: a RIFF/WAVE file, or the raw little-endian samples.
std::string encode_pcm16_wav(const std::vector<float>& samples, int sample_rate);
std::string encode_pcm16_raw(const std::vector<float>& samples);

}  // namespace cachet::server
