// MetaVoice speaker encoder (a GE2E d-vector network): 16 kHz mono audio -> silence trim ->
// partial utterances of 160 mel frames -> 3-layer LSTM(40 -> 256) -> Linear(256, 256) -> ReLU
// -> L2 norm per partial -> mean -> L2 norm: a 256-d speaker embedding.
//
// Weights: a safetensors file with the original state-dict names (speaker_encoder.pt's
// "model_state", converted by `cachet convert`): lstm.weight_ih_l{0,1,2} [1024, 40|256],
// lstm.weight_hh_l{k} [1024, 256], lstm.bias_ih_l{k}, lstm.bias_hh_l{k} [1024],
// linear.weight [256, 256], linear.bias [256]. Other tensors are ignored. Any float dtype.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cachet/tensor.h"

namespace cachet {

class ThreadPool;

// Front-end pieces, exposed for tests.
namespace speaker_frontend {
constexpr int kSampleRate = 16000;
constexpr int kNfft = 400;
constexpr int kHop = 160;
constexpr int kMels = 40;
constexpr int kPartialFrames = 160;
// librosa.effects.trim(y, top_db) with frame 2048, hop 512, ref = max.
std::vector<float> trim_silence(std::span<const float> y, double top_db = 20.0);
// librosa.feature.melspectrogram(y, sr=16000, n_fft=400, hop_length=160, n_mels=40) transposed:
// [frames, 40] row-major with frames = 1 + len / 160 (power spectrum, Slaney mels, no log).
std::vector<float> mel_spectrogram(std::span<const float> y, int64_t* n_frames);
// librosa.filters.mel(sr=16000, n_fft=400, n_mels=40): [40, 201] row-major.
std::vector<float> mel_filterbank();
// compute_partial_slices(n, rate 1.3, min_coverage 0.75): start frame of each partial.
std::vector<int64_t> partial_starts(int64_t n_samples);
}  // namespace speaker_frontend

class SpeakerEncoder {
 public:
  // A safetensors file as above, or the original's speaker_encoder.pt (a path ending in .pt:
  // its "model_state" is read directly).
  static SpeakerEncoder load(const std::string& safetensors_path);

  // The longest reference audio taken, in seconds: every partial window goes through the LSTM
  // at once, about 1.9 MB of memory a second of audio. Longer audio is an error.
  static constexpr double kMaxSeconds = 300;
  // embed_utterance of the original on 16 kHz samples that are already loaded and trimmed.
  std::vector<float> embed_utterance(std::span<const float> wav16k, ThreadPool& pool) const;
  // Mono samples at any rate: resampled to 16 kHz (when needed), trimmed (top_db 20), embedded.
  std::vector<float> embed(std::span<const float> mono, int sample_rate, ThreadPool& pool) const;
  // The network on mel partials [n, 160, 40]: one L2-normalised 256-d row per partial.
  std::vector<float> forward(std::span<const float> mels, int64_t n_partials,
                             ThreadPool& pool) const;

  static constexpr int kEmbedDim = 256;

 private:
  SpeakerEncoder() = default;
  std::string path_;
  // f32 copies: per layer W_ih [1024, in], W_hh [1024, 256], b = b_ih + b_hh [1024].
  std::vector<Tensor> w_ih_, w_hh_;
  std::vector<std::vector<float>> bias_;
  Tensor lin_w_;
  std::vector<float> lin_b_;
};

}  // namespace cachet
