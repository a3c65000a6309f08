// `cachet perplexity`: exp(mean negative log-likelihood) of a text under a model.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cachet/error.h"
#include "cachet/file.h"
#include "cachet/model.h"
#include "cachet/tokenizer.h"
#include "cli.h"
#include "default_model.h"

namespace cachet::cli {
namespace {

Register perplexity_cmd{Command{
    "perplexity", "Perplexity of a text file under a model", [](CLI::App* sub) {
      struct Args {
        std::string model, file;
        bool bos = true;
        int64_t chunk = 512;
        bool verbose = false;
        int* threads = nullptr;
      };
      auto a = std::make_shared<Args>();
      sub->add_option("-m,--model", a->model,
                      "GGUF file or model directory (default: the embedded default model)");
      sub->add_option("-f,--file", a->file, "Text file to score ('-': standard input)")->required();
      sub->add_flag("--bos,!--no-bos", a->bos,
                    "Start the sequence with BOS and score the first token given it (default)");
      sub->add_option("--chunk", a->chunk, "Tokens per forward call (at most)")
          ->capture_default_str();
      sub->add_flag("-v,--verbose", a->verbose, "Print progress on stderr");
      a->threads = add_threads_option(sub);
      return [a]() -> int {
        apply_threads(*a->threads);
        CACHET_CHECK(a->chunk >= 1, "--chunk ", a->chunk, ": must be at least 1");
        const std::string path = model_or_default(a->model);
        const std::string text = read_input(a->file, "the text file");

        auto model = load_model(path);
        const Tokenizer tok = Tokenizer::from_path(path);
        const ModelInfo& info = model->info();
        const int64_t vocab = info.vocab_size > 0 ? info.vocab_size : tok.vocab_size();
        CACHET_CHECK(tok.vocab_size() <= vocab, path, ": the tokenizer has ", tok.vocab_size(),
                     " tokens but the model's vocabulary has ", vocab);

        std::vector<int32_t> tokens;
        if (a->bos) {
          CACHET_CHECK(tok.bos_id() >= 0, tok.name(), ": the tokenizer has no BOS token");
          tokens.push_back(tok.bos_id());
        }
        const auto body = tok.encode(text);
        tokens.insert(tokens.end(), body.begin(), body.end());
        CACHET_CHECK(tokens.size() >= 2, a->file, ": the text has ", body.size(),
                     " tokens; perplexity needs at least one token to score",
                     a->bos ? "" : " after the first (or use --bos)");
        if (info.max_positions > 0)
          CACHET_CHECK(static_cast<int64_t>(tokens.size()) <= info.max_positions, a->file, ": ",
                       tokens.size(), " tokens but ", path, " takes at most ", info.max_positions,
                       " positions: use a shorter text");

        // Keep the logits buffer (chunk x vocab floats) near 256 MiB at most.
        const int64_t cap = std::max<int64_t>(1, (int64_t{64} << 20) / std::max<int64_t>(vocab, 1));
        const int64_t chunk = std::min(a->chunk, cap);
        const int64_t n = static_cast<int64_t>(tokens.size());
        State state = model->new_state();
        std::vector<float> logits;
        double nll = 0.0;
        int64_t scored = 0;
        const auto t0 = std::chrono::steady_clock::now();
        // Positions 0..n-2 predict tokens 1..n-1; the last token is never fed.
        for (int64_t start = 0; start < n - 1; start += chunk) {
          const int64_t len = std::min(chunk, n - 1 - start);
          model->forward(state, std::span<const int32_t>(tokens.data() + start, len), logits,
                         /*all_positions=*/true);
          CACHET_CHECK(static_cast<int64_t>(logits.size()) == len * vocab, "model returned ",
                       logits.size(), " logits for ", len, " positions of ", vocab);
          for (int64_t t = 0; t < len; ++t) {
            const float* row = logits.data() + t * vocab;
            for (int64_t v = 0; v < vocab; ++v)
              CACHET_CHECK(std::isfinite(row[v]), path, ": the logit of token ", v, " at position ",
                           start + t, " is ", row[v],
                           ": the model computes non-finite values (are its weights damaged?)");
            float mx = row[0];
            for (int64_t v = 1; v < vocab; ++v) mx = std::max(mx, row[v]);
            double sum = 0.0;
            for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v] - mx));
            const int32_t target = tokens[start + t + 1];
            nll += static_cast<double>(mx) + std::log(sum) - static_cast<double>(row[target]);
            ++scored;
          }
          if (a->verbose)
            std::fprintf(stderr, "[%lld/%lld] running perplexity %.4f\n",
                         static_cast<long long>(start + len), static_cast<long long>(n - 1),
                         std::exp(nll / static_cast<double>(scored)));
        }
        const double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double mean = nll / static_cast<double>(scored);
        std::fprintf(stderr, "%lld tokens in %.2f s (%.1f tok/s)\n", static_cast<long long>(scored),
                     secs, secs > 0 ? static_cast<double>(scored) / secs : 0.0);
        std::printf("tokens: %lld\n", static_cast<long long>(scored));
        std::printf("mean nll: %.6f\n", mean);
        std::printf("perplexity: %.4f\n", std::exp(mean));
        return 0;
      };
    }}};

}  // namespace
}  // namespace cachet::cli
