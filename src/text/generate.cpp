#include "cachet/generate.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "cachet/error.h"

namespace cachet {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopMatcher::push(std::string_view text) {
  if (stopped_) return {};
  held_.append(text);
  size_t best = std::string::npos;
  for (const auto& s : stops_) {
    const size_t pos = held_.find(s);
    if (pos < best) {
      best = pos;
      matched_ = s;
    }
  }
  if (best != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, best);
    held_.clear();
    return out;
  }
  // Keep the longest tail that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const auto& s : stops_) {
    for (size_t k = std::min(s.size() - 1, held_.size()); k > hold; --k) {
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string StopMatcher::finish() {
  std::string out;
  if (!stopped_) out.swap(held_);
  held_.clear();
  return out;
}

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Length:
      return "length";
    case FinishReason::StopToken:
      return "stop token";
    case FinishReason::StopString:
      return "stop string";
    case FinishReason::Callback:
      return "stopped";
    case FinishReason::PositionLimit:
      return "position limit";
  }
  return "?";
}

GenerateResult generate(LanguageModel& model, State& state, const Tokenizer& tok, Sampler& sampler,
                        std::span<const int32_t> prompt, const GenerateOptions& opts,
                        const std::function<bool(std::string_view)>& on_text) {
  using Clock = std::chrono::steady_clock;
  CACHET_CHECK(!prompt.empty(), "generate: the prompt has no tokens");
  const ModelInfo& info = model.info();
  const int64_t vocab = info.vocab_size > 0 ? info.vocab_size : tok.vocab_size();
  for (int32_t id : prompt)
    CACHET_CHECK(id >= 0 && id < vocab, "prompt token id ", id,
                 " is outside the model's vocabulary of ", vocab);
  const int64_t limit = info.max_positions;
  if (limit > 0) {
    const int64_t need = state.position() + static_cast<int64_t>(prompt.size());
    CACHET_CHECK(need <= limit, "the prompt has ", prompt.size(), " tokens",
                 state.position() > 0
                     ? " (after " + std::to_string(state.position()) + " earlier tokens)"
                     : std::string(),
                 " but the model takes at most ", limit, " positions: shorten the prompt");
  }

  GenerateResult res;
  res.prompt_tokens = static_cast<int64_t>(prompt.size());
  std::vector<float> logits;
  const auto t0 = Clock::now();
  model.forward(state, prompt, logits);
  const auto t1 = Clock::now();
  res.prompt_seconds = std::chrono::duration<double>(t1 - t0).count();
  CACHET_CHECK(static_cast<int64_t>(logits.size()) == vocab, "model returned ", logits.size(),
               " logits for a vocabulary of ", vocab);
  const size_t known = static_cast<size_t>(
      std::clamp<int64_t>(opts.prompt_accepted, 0, static_cast<int64_t>(prompt.size())));
  sampler.accept(prompt.subspan(known));
  if (opts.after_prompt) opts.after_prompt();

  StreamDecoder dec(tok);
  StopMatcher stop(opts.stop);
  bool keep_going = true;
  auto emit = [&](const std::string& text) {
    if (!keep_going) return;
    const std::string shown = stop.push(text);
    if (!shown.empty() && on_text && !on_text(shown)) keep_going = false;
  };
  auto is_stop_token = [&](int32_t id) {
    return std::find(opts.stop_tokens.begin(), opts.stop_tokens.end(), id) !=
           opts.stop_tokens.end();
  };

  bool flush = true;
  if (opts.max_tokens == 0) {
    res.reason = FinishReason::Length;
  } else {
    while (true) {
      const int32_t id = sampler.sample(logits);
      ++res.sampled;
      if (is_stop_token(id)) {
        res.reason = FinishReason::StopToken;
        break;
      }
      sampler.accept(id);
      res.tokens.push_back(id);
      emit(dec.push(id));
      if (stop.stopped()) {
        res.reason = FinishReason::StopString;
        res.pending = id;
        flush = false;
        break;
      }
      if (!keep_going) {
        res.reason = FinishReason::Callback;
        res.pending = id;
        flush = false;
        break;
      }
      if (opts.max_tokens > 0 && static_cast<int64_t>(res.tokens.size()) >= opts.max_tokens) {
        res.reason = FinishReason::Length;
        res.pending = id;
        break;
      }
      if (limit > 0 && state.position() >= limit) {
        res.reason = FinishReason::PositionLimit;
        res.pending = id;
        break;
      }
      const int32_t one[1] = {id};
      model.forward(state, one, logits);
    }
  }
  if (flush) {
    emit(dec.finish());
    const std::string rest = stop.finish();
    if (!rest.empty() && keep_going && on_text) on_text(rest);
    if (stop.stopped() && res.reason != FinishReason::StopToken)
      res.reason = FinishReason::StopString;
  }
  res.generate_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  return res;
}

std::string_view trim_chat_text(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

std::vector<int32_t> chat_turn_tokens(const Tokenizer& tok, std::string_view message,
                                      bool first_turn) {
  const int32_t sot = tok.start_of_turn_id(), eot = tok.end_of_turn_id();
  CACHET_CHECK(sot >= 0 && eot >= 0, tok.name(),
               ": the tokenizer has no <start_of_turn>/<end_of_turn> tokens, so it cannot ",
               "use the Gemma chat format: use `cachet run` with a plain prompt");
  std::vector<int32_t> ids;
  auto text = [&](std::string_view s) {
    const auto v = tok.encode(s);
    ids.insert(ids.end(), v.begin(), v.end());
  };
  if (first_turn) {
    CACHET_CHECK(tok.bos_id() >= 0, tok.name(), ": the tokenizer has no BOS token");
    ids.push_back(tok.bos_id());
  } else {
    ids.push_back(eot);
    text("\n");
  }
  ids.push_back(sot);
  text("user\n" + std::string(trim_chat_text(message)));
  ids.push_back(eot);
  text("\n");
  ids.push_back(sot);
  text("model\n");
  return ids;
}

std::vector<int32_t> chat_stop_tokens(const Tokenizer& tok) {
  std::vector<int32_t> v;
  if (tok.eos_id() >= 0) v.push_back(tok.eos_id());
  if (tok.end_of_turn_id() >= 0) v.push_back(tok.end_of_turn_id());
  return v;
}

std::vector<int32_t> end_tokens(const Tokenizer& tok, bool ignore_eos, SamplingParams& sampling) {
  std::vector<int32_t> stops = chat_stop_tokens(tok);
  if (!ignore_eos) return stops;
  for (int32_t id : stops)
    sampling.logit_bias.emplace_back(id, -std::numeric_limits<float>::infinity());
  return {};
}

}  // namespace cachet
