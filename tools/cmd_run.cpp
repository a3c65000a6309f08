// `cachet run`: generate text from a prompt, streamed to stdout.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cachet/error.h"
#include "cachet/file.h"
#include "cachet/generate.h"
#include "cachet/model.h"
#include "cachet/profile.h"
#include "cachet/tokenizer.h"
#include "cli.h"
#include "default_model.h"
#include "profile_print.h"
#include "text_options.h"

namespace cachet::cli {
namespace {

double rate(double n, double seconds) {
  return seconds > 0 ? n / seconds : 0.0;
}

Register run_cmd{Command{
    "run", "Generate text from a prompt", [](CLI::App* sub) {
      struct Args {
        TextGenOptions gen;
        std::string prompt, prompt_file;
        bool no_bos = false;
        bool profile = false;
      };
      auto a = std::make_shared<Args>();
      sub->add_option("-p,--prompt", a->prompt, "Prompt text");
      sub->add_option("--prompt-file", a->prompt_file,
                      "Read the prompt from FILE ('-': standard input), less the newline that "
                      "ends its last line");
      sub->add_flag("--no-bos", a->no_bos, "Do not start the sequence with BOS");
      sub->add_flag("--profile", a->profile,
                    "Print where the prompt's and the generation's time goes, phase by phase");
      add_text_gen_options(sub, a->gen);
      return [a, sub]() -> int {
        const bool has_prompt = sub->count("--prompt") > 0;
        const bool has_file = !a->prompt_file.empty();
        CACHET_CHECK(has_prompt || has_file,
                     "run: give a prompt with -p TEXT or --prompt-file FILE");
        CACHET_CHECK(!(has_prompt && has_file), "run: give either -p or --prompt-file, not both");
        const uint64_t seed = finalize_text_gen_options(a->gen);
        const std::string path = model_or_default(a->gen.model);
        std::string prompt = a->prompt;
        if (has_file) {
          // The newline that ends a file's last line is not part of the prompt (llama.cpp's -f
          // drops it too)
          prompt = read_input(a->prompt_file, "the prompt file");
          if (!prompt.empty() && prompt.back() == '\n') prompt.pop_back();
        }

        auto model = load_model(path);
        const Tokenizer tok = Tokenizer::from_path(path);
        const ModelInfo& info = model->info();
        CACHET_CHECK(info.vocab_size <= 0 || tok.vocab_size() <= info.vocab_size, path,
                     ": the tokenizer has ", tok.vocab_size(),
                     " tokens but the model's vocabulary has ", info.vocab_size);

        // Control tokens written in the prompt (<bos>, <eos>) are those tokens, as llama.cpp
        // reads prompts; a prompt that starts with <bos> (a chat template's rendering) gets no
        // second one
        std::vector<int32_t> tokens;
        const auto body = tok.encode_with_controls(prompt);
        if (!a->no_bos && (body.empty() || body.front() != tok.bos_id())) {
          CACHET_CHECK(tok.bos_id() >= 0, tok.name(), ": the tokenizer has no BOS token");
          tokens.push_back(tok.bos_id());
        }
        tokens.insert(tokens.end(), body.begin(), body.end());
        CACHET_CHECK(!tokens.empty(), "run: the prompt is empty (and --no-bos was given)");
        if (info.max_positions > 0)
          CACHET_CHECK(static_cast<int64_t>(tokens.size()) <= info.max_positions, "the prompt has ",
                       tokens.size(), " tokens but ", path, " takes at most ", info.max_positions,
                       " positions: shorten the prompt");

        if (a->gen.verbose) {
          std::fprintf(stderr, "model: %s (%s)\nseed: %llu\nprompt tokens: %zu\n",
                       (is_default_model(path) ? "the embedded default model" : path.c_str()),
                       info.arch.c_str(), static_cast<unsigned long long>(seed), tokens.size());
        }
        GenerateOptions opts;
        opts.stop_tokens = end_tokens(tok, a->gen.ignore_eos, a->gen.sampling);
        Sampler sampler(a->gen.sampling);
        opts.max_tokens = a->gen.max_tokens;
        opts.stop = a->gen.stop;
        // --profile: the prompt's phases are printed once it has been fed (its time is only
        // known after generate returns: they are kept until then), the generation's at the end.
        std::vector<profile::Phase> prompt_phases;
        if (a->profile) {
          profile::take();
          profile::set_enabled(true);
          opts.after_prompt = [&] { prompt_phases = profile::take(); };
        }
        State state = model->new_state();
        bool ends_newline = true;
        InterruptGuard ctrl_c;  // Ctrl-C: the text so far and the speed line, then status 130
        const auto res =
            generate(*model, state, tok, sampler, tokens, opts, [&](std::string_view text) {
              std::fwrite(text.data(), 1, text.size(), stdout);
              std::fflush(stdout);
              if (!text.empty()) ends_newline = text.back() == '\n';
              return !InterruptGuard::interrupted();
            });
        if (!ends_newline && isatty(fileno(stdout))) std::fputc('\n', stdout);
        std::fflush(stdout);
        const double n_gen = static_cast<double>(res.tokens.size());
        if (a->gen.verbose) std::fprintf(stderr, "finished: %s\n", finish_reason_name(res.reason));
        if (a->profile) {
          profile::set_enabled(false);
          std::fprintf(stderr, "profile of the prompt (%lld tokens, one pass):\n",
                       static_cast<long long>(res.prompt_tokens));
          print_profile(stderr, std::move(prompt_phases), res.prompt_seconds, 1, "pass");
          std::fprintf(stderr, "profile of the generation (%lld tokens):\n",
                       static_cast<long long>(res.sampled));
          print_profile(stderr, profile::take(), res.generate_seconds, res.sampled, "token");
        }
        std::fprintf(stderr,
                     "prompt: %lld tokens, %.1f tok/s; generation: %lld tokens, %.1f tok/s\n",
                     static_cast<long long>(res.prompt_tokens),
                     rate(static_cast<double>(res.prompt_tokens), res.prompt_seconds),
                     static_cast<long long>(res.tokens.size()), rate(n_gen, res.generate_seconds));
        return InterruptGuard::interrupted() ? 130 : 0;
      };
    }}};

}  // namespace
}  // namespace cachet::cli
