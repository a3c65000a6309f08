// Text generation on a LanguageModel: the prefill/sample/stream loop shared by `cachet run`
// and `cachet chat`, stop strings, and the Gemma chat format.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cachet/model.h"
#include "cachet/sampler.h"
#include "cachet/tokenizer.h"

namespace cachet {

// Holds back text that could be the start of a stop string; reports the first stop string
// found. The stop string and everything after it are never returned.
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);
  // Text that is safe to show now.
  std::string push(std::string_view text);
  // What was held back (call at the end when no stop string was found).
  std::string finish();
  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
  std::string matched_;
};

struct GenerateOptions {
  int64_t max_tokens = 256;          // < 0: until a stop or the model's position limit
  std::vector<std::string> stop;     // stop strings
  std::vector<int32_t> stop_tokens;  // tokens that end generation (not shown), e.g. EOS
  // Called once the prompt has been fed, before the first token is sampled (a caller that
  // reports the prompt and the generation apart, as `cachet run --profile`).
  std::function<void()> after_prompt;
  // Leading prompt tokens the sampler has already recorded (a chat turn that starts with the
  // previous reply's pending token): not recorded for the penalties a second time.
  int64_t prompt_accepted = 0;
};

enum class FinishReason { Length, StopToken, StopString, Callback, PositionLimit };
const char* finish_reason_name(FinishReason r);

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated tokens shown (a stop token is not included)
  int64_t prompt_tokens = 0;
  int64_t sampled = 0;  // tokens sampled, a final stop token included
  double prompt_seconds = 0, generate_seconds = 0;
  FinishReason reason = FinishReason::Length;
  // The last token in `tokens` when it was not fed to the state (generation stopped right
  // after sampling it); -1 otherwise. A caller continuing the sequence feeds it first.
  int32_t pending = -1;
};

// Feeds prompt (at least one token) to state, then samples up to max_tokens tokens, feeding
// each one back; on_text receives the text as it becomes final (return false to stop). The
// prompt tokens are accepted by the sampler (penalties) before the first draw.
GenerateResult generate(LanguageModel& model, State& state, const Tokenizer& tok, Sampler& sampler,
                        std::span<const int32_t> prompt, const GenerateOptions& opts,
                        const std::function<bool(std::string_view)>& on_text);

// Gemma chat format. The first turn:
//   <bos><start_of_turn>user\n{msg}<end_of_turn>\n<start_of_turn>model\n
// and each later one, after the model's reply:
//   <end_of_turn>\n<start_of_turn>user\n{msg}<end_of_turn>\n<start_of_turn>model\n
// with {msg} trimmed of white space at both ends, as the models' chat template does (Jinja's
// `| trim`). Errors when the tokenizer lacks <start_of_turn> / <end_of_turn>.
std::vector<int32_t> chat_turn_tokens(const Tokenizer& tok, std::string_view message,
                                      bool first_turn);
// The chat template's `| trim`: the text without white space (space, tab, newlines, vertical
// tab, form feed) at either end.
std::string_view trim_chat_text(std::string_view s);
// EOS and <end_of_turn> (those the tokenizer defines).
std::vector<int32_t> chat_stop_tokens(const Tokenizer& tok);
// The tokens that end generation, as chat_stop_tokens; with ignore_eos (llama.cpp's) none, and
// those tokens are never sampled: sampling gets a -inf logit bias for each. Call before the
// Sampler is made from sampling.
std::vector<int32_t> end_tokens(const Tokenizer& tok, bool ignore_eos, SamplingParams& sampling);

}  // namespace cachet
