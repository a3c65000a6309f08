// The token-level steps of the MetaVoice pipeline, as in the original (metavoice-src
// fam/llm/fast_inference_utils.py, adapters/flattened_encodec.py, adapters/tilted_encodec.py,
// inference.py::non_causal_sample, mixins/non_causal.py): classifier-free guidance, top-p and
// top-k sampling, the interleaved stream split, the stage-2 input and the TiltedEncodec filter.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "cachet/sampler.h"

namespace cachet::tts {

constexpr int kCodebookSize = 1024;    // EnCodec codes are 0..1023
constexpr int kNumCodebooks = 8;       // 6 kbps: the first 8 quantizers
constexpr int32_t kEndOfAudio = 2048;  // stage-1 end of audio (2 * codebook size)
constexpr int32_t kStage1TextOffset = 2049;
constexpr int32_t kStage2TextOffset = 1025;
constexpr int32_t kStage2Pad = 1024;  // stage-2 pad / "not audio"

// out[i] = g * cond[i] + (1 - g) * uncond[i] (float arithmetic, in this order).
void cfg_mix(std::span<const float> cond, std::span<const float> uncond, float guidance,
             std::span<float> out);

// The original's top-p on logits already divided by the temperature: sort ascending, cumulative
// softmax, remove every token whose cumulative probability is <= 1 - top_p, always keeping the
// highest one. Removed logits become -inf.
void top_p_filter(std::span<float> logits, float top_p);

// Stage-1 draw from the mixed logits: temperature 0 is the argmax (lowest id on ties);
// otherwise logits / temperature, top-p, softmax and one categorical draw from rng.
int32_t sample_top_p(std::span<const float> logits, float temperature, float top_p, Rng& rng);

// Stage-2 draw of one position: temperature 0 is the argmax; otherwise logits / temperature,
// keep logits >= the k-th highest (ties kept, k = 0: all), softmax, one draw.
int32_t sample_top_k(std::span<const float> logits, float temperature, int32_t top_k, Rng& rng);

// The flattened interleaved two-codebook stream routed by value: t < 1024 -> c0,
// 1024 <= t < 2048 -> c1 (t - 1024), 2048 dropped, t > 2048 -> text. c0 and c1 are truncated
// to the shorter one.
struct SplitStream {
  std::vector<int> c0, c1;
  std::vector<int32_t> text;
};
SplitStream split_interleaved(std::span<const int32_t> tokens);

// The two stage-2 input hierarchies, each exactly block_size long:
//   h0 = text2 + c0 + [1024], h1 = [1024] * len(text2) + c1 + [1024], right-padded with 1024 or
// cut to block_size. c0 and c1 must have the same length.
std::vector<std::vector<int32_t>> stage2_input(std::span<const int32_t> text2,
                                               std::span<const int> c0, std::span<const int> c1,
                                               int64_t block_size);

// TiltedEncodec decode of the 8 hierarchies (the 2 inputs then the 6 sampled heads): keep the
// tokens < 1024 of each, then truncate all to the shortest.
std::vector<std::vector<int>> tilted_filter(const std::vector<std::vector<int32_t>>& hierarchies);

}  // namespace cachet::tts
