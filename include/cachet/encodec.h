// EnCodec decoder (facebook/encodec_24khz and any config of the same family), as Hugging Face
// transformers' EncodecModel.decode computes it: residual vector quantizer decode of the codes
// (sum of the codebook rows) followed by the SEANet decoder (conv, LSTM with skip, per ratio
// ELU + transposed conv + residual blocks, ELU + conv).
//
// Weights come from an HF EnCodec directory (config.json + model.safetensors); weight-norm
// pairs (weight_g / weight_v, or parametrizations.weight.original0 / original1) are folded at
// load into plain f32 weights, which are accepted too. Activations are time-major [L][C] and
// every convolution runs as a GEMM through cachet::matmul on the thread pool. A causal decoder
// (the 24 kHz model) runs a piece of frames at a time and gives the samples of a decode in one
// piece, bit for bit, with working memory of the size of a piece whatever the input's length.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cachet {

class ThreadPool;

struct EncodecConfig {
  int sampling_rate = 24000;
  int audio_channels = 1;
  int hidden_size = 128;
  int codebook_dim = 128;
  int codebook_size = 1024;
  int num_quantizers = 32;  // 1000 * target_bandwidths[-1] // (frame_rate * 10)
  int num_filters = 32;
  int num_residual_layers = 1;
  std::vector<int> upsampling_ratios{8, 5, 4, 2};
  int kernel_size = 7;
  int last_kernel_size = 7;
  int residual_kernel_size = 3;
  int dilation_growth_rate = 2;
  bool use_causal_conv = true;
  std::string pad_mode = "reflect";  // reflect, constant (zeros) or replicate
  int compress = 2;
  int num_lstm_layers = 2;
  std::string norm_type = "weight_norm";  // or "time_group_norm" (GroupNorm(1, C) after each conv)
  double trim_right_ratio = 1.0;
  bool use_conv_shortcut = true;  // a missing key means true (older configs lack it)
  std::vector<double> target_bandwidths{1.5, 3.0, 6.0, 12.0, 24.0};

  int hop_length() const;  // product of upsampling_ratios
  int frame_rate() const;  // ceil(sampling_rate / hop_length)

  // Reads the fields of an HF config.json (missing keys keep the defaults above, which are
  // facebook/encodec_24khz's); `where` names the file in errors.
  static EncodecConfig from_json(const nlohmann::json& j, const std::string& where);
};

class EncodecDecoder {
 public:
  // Loads DIR/config.json and DIR/model.safetensors (or a sharded index).
  static std::unique_ptr<EncodecDecoder> load(const std::string& dir);
  // Random weights of the shapes of cfg (for benchmarks), deterministic in seed.
  static std::unique_ptr<EncodecDecoder> random(const EncodecConfig& cfg, uint64_t seed = 1);
  ~EncodecDecoder();

  const EncodecConfig& config() const;

  // codes[q][t] for q < n_q <= num_quantizers, every row of the same length T, each code in
  // [0, codebook_size). Returns the waveform, channel-major: audio_channels rows of
  // T * hop_length samples (one row for the 24 kHz model), at config().sampling_rate.
  std::vector<std::vector<float>> decode(const std::vector<std::vector<int32_t>>& codes,
                                         ThreadPool& pool) const;
  // decode() for a mono model: the single channel.
  std::vector<float> decode_mono(const std::vector<std::vector<int32_t>>& codes,
                                 ThreadPool& pool) const;
  // The summed quantizer embeddings, time-major [T][codebook_dim] (HF quantizer.decode).
  std::vector<float> embed(const std::vector<std::vector<int32_t>>& codes) const;

  struct Impl;

 private:
  EncodecDecoder();
  std::unique_ptr<Impl> impl_;
};

// Reads {"codes": [[...], ...]} (or a bare [[...], ...]) from a JSON file: n_q rows of T codes.
std::vector<std::vector<int32_t>> read_codes_json(const std::string& path);
// The same from a parsed JSON value; `where` names its source in errors.
std::vector<std::vector<int32_t>> codes_from_json(const nlohmann::json& j,
                                                  const std::string& where);

}  // namespace cachet
