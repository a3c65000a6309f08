#include "text_options.h"

#include "cachet/error.h"
#include "cli.h"

namespace cachet::cli {

void add_text_gen_options(CLI::App* sub, TextGenOptions& o) {
  sub->add_option("-m,--model", o.model,
                  "GGUF file or model directory (default: the embedded default model)");
  sub->add_option("-n,--n-predict", o.max_tokens,
                  "Tokens to generate at most (-1: until the end of text)")
      ->capture_default_str();
  sub->add_option("--temp", o.sampling.temperature, "Temperature (0: greedy)")
      ->capture_default_str();
  sub->add_option("--top-k", o.sampling.top_k, "Keep the K most likely tokens (0: all)")
      ->capture_default_str();
  sub->add_option("--top-p", o.sampling.top_p, "Nucleus sampling mass in (0, 1] (1: off)")
      ->capture_default_str();
  sub->add_option("--min-p", o.sampling.min_p,
                  "Drop tokens below P times the top probability (0: off)")
      ->capture_default_str();
  sub->add_option("--repeat-penalty", o.sampling.repeat_penalty,
                  "Penalty for tokens seen in the last --repeat-last-n (1: off)")
      ->capture_default_str();
  sub->add_option("--repeat-last-n", o.sampling.repeat_last_n,
                  "Tokens the penalties look back on (-1: all)")
      ->capture_default_str();
  sub->add_option("--presence-penalty", o.sampling.presence_penalty,
                  "Subtracted from the logits of tokens already seen (0: off)")
      ->capture_default_str();
  sub->add_option("--frequency-penalty", o.sampling.frequency_penalty,
                  "Subtracted once per occurrence of a token already seen (0: off)")
      ->capture_default_str();
  sub->add_option("--stop", o.stop, "Stop when the text contains STR (not printed); repeatable")
      ->take_all();
  sub->add_flag("--ignore-eos", o.ignore_eos,
                "Never end on EOS or <end_of_turn>: those tokens are not sampled");
  sub->add_option("--seed", o.seed, "Random seed (default: from the clock)");
  sub->add_flag("-v,--verbose", o.verbose, "Print the seed and more details on stderr");
  o.threads = add_threads_option(sub);
}

uint64_t finalize_text_gen_options(TextGenOptions& o) {
  o.sampling.validate();
  for (const auto& s : o.stop) CACHET_CHECK(!s.empty(), "--stop: a stop string must not be empty");
  CACHET_CHECK(o.max_tokens >= -1, "-n ", o.max_tokens,
               ": give the number of tokens to generate, or -1 for no limit");
  o.sampling.seed = seed_from(o.seed);
  apply_threads(o.threads ? *o.threads : 0);
  return o.sampling.seed;
}

}  // namespace cachet::cli
