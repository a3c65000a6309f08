// Token sampling: greedy, temperature, top-k, top-p, min-p, repetition / presence / frequency
// penalties, with a seeded generator of our own: a seed gives the same draws everywhere, so the
// same logits give the same tokens. (The logits of BF16 and quantized models depend on the
// kernels a machine runs — its instruction set, the product path chosen at start-up — so across
// machines their sampled text can differ; on one machine it is the same at any thread count.)
//
// Temperature comes before top-k, top-p and min-p, as in Hugging Face transformers; llama.cpp's
// default chain applies it after them, so at a temperature other than 1 the same top-p or min-p
// keeps a different set of tokens there.
//
// Order of operations on the logits of one step:
//   0. logit_bias: each listed token's bias added to its logit (OpenAI's `logit_bias`; -inf
//      bans the token);
//   1. penalties over the last repeat_last_n accepted tokens: repetition over all of them
//      (llama.cpp / HF semantics: a positive logit is divided by the penalty, a negative one
//      multiplied); presence (minus presence_penalty once per token) and frequency (minus
//      frequency_penalty times the token's count) over those accepted as counted for them
//      (accept's `presence`; OpenAI's server counts the generated tokens only);
//   2. temperature 0: the highest logit (lowest id on ties), nothing else applies;
//   3. logits divided by the temperature;
//   4. top-k: the k highest logits (k = 0: all);
//   5. softmax; top-p: the smallest set of most probable tokens whose mass reaches top_p;
//   6. min-p: drop tokens whose probability is below min_p times the highest one;
//   7. renormalise and draw one token.
#pragma once
#include <cstdint>
#include <deque>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

namespace cachet {

struct SamplingParams {
  float temperature = 0.8f;     // 0: greedy
  int32_t top_k = 40;           // 0: no limit
  float top_p = 0.95f;          // in (0, 1]; 1: off
  float min_p = 0.0f;           // in [0, 1]; 0: off
  float repeat_penalty = 1.0f;  // > 0; 1: off
  int32_t repeat_last_n = 64;   // tokens the penalties look back on; -1: all, 0: none
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token, bias); bias finite or -inf
  uint64_t seed = 0;

  // Throws cachet::Error naming the parameter, its value and the allowed range.
  void validate() const;
};

// xoshiro256** seeded through splitmix64.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { seed_with(seed); }
  void seed_with(uint64_t seed);
  uint64_t next();
  double uniform();  // [0, 1) with 53 random bits

 private:
  uint64_t s_[4];
};

struct TokenProb {
  int32_t id;
  double p;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);  // validates

  const SamplingParams& params() const { return params_; }

  // Draws the next token from logits (one per vocabulary entry). Does not accept it.
  int32_t sample(std::span<const float> logits);
  // Records tokens of the sequence (prompt and generated) for the penalties. The repetition
  // penalty counts every recorded token in the window; presence and frequency those recorded
  // with presence = true (the CLI counts the prompt, as llama.cpp does; the server only what
  // it generated, as OpenAI's API defines them).
  void accept(int32_t token, bool presence = true);
  void accept(std::span<const int32_t> tokens, bool presence = true);
  // Clears the history and restarts the generator from the seed.
  void reset();

  // The distribution sample() draws from: the surviving tokens with probabilities summing
  // to 1, most probable first (ties: lower id first). Greedy gives one token with p = 1.
  std::vector<TokenProb> distribution(std::span<const float> logits) const;

 private:
  SamplingParams params_;
  Rng rng_;
  std::deque<std::pair<int32_t, bool>> recent_;   // (token, counted for presence/frequency)
  std::unordered_map<int32_t, int32_t> counts_;   // occurrences within recent_
  std::unordered_map<int32_t, int32_t> counted_;  // those counted for presence/frequency
};

}  // namespace cachet
