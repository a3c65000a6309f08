// `cachet chat`: interactive conversation in the Gemma chat format. The decoding state keeps
// every earlier turn, so each new message only feeds its own tokens.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cachet/error.h"
#include "cachet/generate.h"
#include "cachet/model.h"
#include "cachet/tokenizer.h"
#include "cli.h"
#include "default_model.h"
#include "text_options.h"

namespace cachet::cli {
namespace {

Register chat_cmd{Command{
    "chat", "Chat with a model on stdin/stdout (/reset, /quit)", [](CLI::App* sub) {
      auto gen = std::make_shared<TextGenOptions>();
      gen->max_tokens = 1024;
      add_text_gen_options(sub, *gen);
      return [gen]() -> int {
        const uint64_t seed = finalize_text_gen_options(*gen);
        const std::string path = model_or_default(gen->model);
        auto model = load_model(path);
        const Tokenizer tok = Tokenizer::from_path(path);
        const ModelInfo& info = model->info();
        CACHET_CHECK(info.vocab_size <= 0 || tok.vocab_size() <= info.vocab_size, path,
                     ": the tokenizer has ", tok.vocab_size(),
                     " tokens but the model's vocabulary has ", info.vocab_size);
        (void)chat_turn_tokens(tok, "", true);  // fails early without the chat tokens
        const bool interactive = isatty(fileno(stdin)) && isatty(fileno(stdout));
        const std::string shown = is_default_model(path) ? "the embedded default model" : path;
        if (gen->verbose)
          std::fprintf(stderr, "model: %s (%s)\nseed: %llu\n", shown.c_str(), info.arch.c_str(),
                       static_cast<unsigned long long>(seed));
        if (interactive)
          std::fprintf(
              stderr,
              "Chatting with %s. /reset starts over, /quit or Ctrl-D ends, Ctrl-C stops a reply.\n",
              shown.c_str());

        GenerateOptions opts;
        opts.stop_tokens = end_tokens(tok, gen->ignore_eos, gen->sampling);
        Sampler sampler(gen->sampling);
        opts.max_tokens = gen->max_tokens;
        opts.stop = gen->stop;
        State state = model->new_state();
        // Ctrl-C during a reply ends the reply and the conversation goes on; at the prompt it
        // ends the chat
        InterruptGuard ctrl_c;
        bool first = true;
        int32_t pending = -1;
        std::string line;
        while (true) {
          if (interactive) {
            std::fputs("> ", stdout);
            std::fflush(stdout);
          }
          if (!std::getline(std::cin, line)) break;
          if (!line.empty() && line.back() == '\r') line.pop_back();
          if (line == "/quit" || line == "/exit") break;
          if (line == "/reset") {
            state.reset();
            sampler.reset();
            first = true;
            pending = -1;
            std::fprintf(stderr, "(conversation reset)\n");
            continue;
          }
          if (line.empty()) continue;
          std::vector<int32_t> turn;
          // The previous reply's last token, sampled (and so counted for the penalties) but not
          // yet fed
          opts.prompt_accepted = pending >= 0 ? 1 : 0;
          if (pending >= 0) turn.push_back(pending);
          const auto t = chat_turn_tokens(tok, line, first);
          turn.insert(turn.end(), t.begin(), t.end());
          GenerateResult res;
          try {
            InterruptGuard::clear();
            res = generate(*model, state, tok, sampler, turn, opts, [](std::string_view text) {
              std::fwrite(text.data(), 1, text.size(), stdout);
              std::fflush(stdout);
              return !InterruptGuard::interrupted();
            });
          } catch (const Error& e) {
            // The state is unchanged: the user can /reset or send something shorter.
            std::fflush(stdout);
            std::fprintf(stderr, "cachet: error: %s (type /reset to start over)\n", e.what());
            continue;
          }
          first = false;
          pending = res.pending;
          if (InterruptGuard::interrupted()) {
            std::fputs(" [interrupted]", stdout);
            InterruptGuard::clear();
          }
          std::fputc('\n', stdout);
          std::fflush(stdout);
          if (gen->verbose)
            std::fprintf(stderr, "[%lld new tokens, %lld generated, %s, position %lld]\n",
                         static_cast<long long>(res.prompt_tokens),
                         static_cast<long long>(res.tokens.size()), finish_reason_name(res.reason),
                         static_cast<long long>(state.position()));
        }
        if (interactive) std::fputc('\n', stdout);
        return 0;
      };
    }}};

}  // namespace
}  // namespace cachet::cli
