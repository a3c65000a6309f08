// `cachet logits`: runs token ids through a model and prints the logits as JSON.
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "cachet/error.h"
#include "cachet/model.h"
#include "cli.h"

namespace cachet::cli {

namespace {

struct LogitsArgs {
  std::string model;
  std::string tokens;
  std::string mode = "prefill";
  bool last = false;
};

std::vector<int32_t> parse_tokens(const std::string& s) {
  std::vector<int32_t> out;
  size_t i = 0;
  while (i <= s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    std::string item = s.substr(i, j - i);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.erase(0, 1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.pop_back();
    if (item.empty()) {
      if (s.find_first_not_of(" \t") == std::string::npos) break;  // "" or blanks: no tokens
      fail("--tokens: empty item at index ", out.size(), " in '", s, "'");
    }
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (*end != '\0' || errno == ERANGE || v < INT32_MIN || v > INT32_MAX)
      fail("--tokens: '", item, "' at index ", out.size(), " is not a token id");
    out.push_back(static_cast<int32_t>(v));
    i = j + 1;
  }
  return out;
}

// Chunk size of a mode: 0 = whole sequence (prefill), 1 = one token at a time (step).
int64_t parse_mode(const std::string& mode) {
  if (mode == "prefill") return 0;
  if (mode == "step") return 1;
  if (mode.rfind("chunk:", 0) == 0) {
    const std::string n = mode.substr(6);
    char* end = nullptr;
    errno = 0;
    const long long v = n.empty() ? 0 : std::strtoll(n.c_str(), &end, 10);
    if (!n.empty() && *end == '\0' && errno == 0 && v >= 1) return v;
  }
  fail("--mode: '", mode, "' is not prefill, step or chunk:N (N >= 1)");
}

void print_row(const float* v, int64_t n) {
  std::fputc('[', stdout);
  for (int64_t i = 0; i < n; ++i) std::printf(i ? ", %.9g" : "%.9g", static_cast<double>(v[i]));
  std::fputc(']', stdout);
}

int run_logits(const LogitsArgs& a, int threads) {
  apply_threads(threads);
  const int64_t chunk = parse_mode(a.mode);
  const std::vector<int32_t> tokens = parse_tokens(a.tokens);
  if (tokens.empty()) fail("--tokens: the token list is empty");
  auto model = load_model(a.model);
  const int64_t V = model->info().vocab_size;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= V)
      fail("token id ", tokens[i], " at index ", i, " is outside the vocabulary (size ", V, ")");

  State st = model->new_state();
  const int64_t T = static_cast<int64_t>(tokens.size());
  std::vector<float> all(static_cast<size_t>(T * V));
  std::vector<float> part;
  const int64_t step = chunk == 0 ? T : chunk;
  for (int64_t s = 0; s < T; s += step) {
    const int64_t n = std::min(step, T - s);
    model->forward(st, std::span<const int32_t>(tokens.data() + s, static_cast<size_t>(n)), part,
                   true);
    std::copy(part.begin(), part.end(), all.begin() + s * V);
  }

  std::printf("{\"tokens\": [");
  for (size_t i = 0; i < tokens.size(); ++i) std::printf(i ? ", %d" : "%d", tokens[i]);
  std::printf("], \"logits\": [");
  const int64_t first = a.last ? T - 1 : 0;
  for (int64_t r = first; r < T; ++r) {
    if (r > first) std::printf(", ");
    print_row(all.data() + r * V, V);
  }
  std::printf("]}\n");
  return 0;
}

std::function<int()> setup(CLI::App* sub) {
  auto* a = new LogitsArgs();  // lives as long as the process
  sub->add_option("-m,--model", a->model, "Model: GGUF file or HF directory")->required();
  sub->add_option("--tokens", a->tokens, "Comma-separated token ids, e.g. 2,818,235")->required();
  sub->add_flag("--last", a->last, "Print only the logits of the last position");
  sub->add_option("--mode", a->mode, "prefill (one call), step (one token per call) or chunk:N");
  int* threads = add_threads_option(sub);
  return [a, threads] { return run_logits(*a, *threads); };
}

Register reg{{"logits", "Print the logits of a token sequence as JSON", setup}};

}  // namespace

}  // namespace cachet::cli
