// `cachet logits`: runs token ids through a model and prints the logits as JSON. For a
// METAVOICE_DIR: stage-1 logits of both guidance rows (conditional first; both rows get the
// tokens, only row 0 the speaker term, as in the original's classifier-free guidance), or with
// --stage 2 the six heads' logits of stage 2 over the hierarchies read from --in FILE.json.
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "cachet/error.h"
#include "cachet/metavoice_gpt.h"
#include "cachet/model.h"
#include "cachet/model_files.h"
#include "cli.h"

namespace cachet::cli {

namespace {

struct LogitsArgs {
  std::string model;
  std::string tokens;
  std::string tokens_file;  // --tokens-file
  std::string mode = "prefill";
  bool last = false;
  int stage = 1;      // METAVOICE_DIR only
  std::string input;  // METAVOICE_DIR stage 2: {"tokens": [[...], [...]]}
};

// A token id written as a whole number, or nothing
std::optional<int32_t> parse_id(const std::string& item) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(item.c_str(), &end, 10);
  if (item.empty() || *end != '\0' || errno == ERANGE || v < INT32_MIN || v > INT32_MAX)
    return std::nullopt;
  return static_cast<int32_t>(v);
}

// The ids of --tokens-file: whole numbers separated by commas, white space or both, with or
// without the brackets of a JSON array (cachet tokenize writes one)
std::vector<int32_t> parse_token_file(const std::string& path) {
  const std::string text = read_input(path, "the token file");
  std::vector<int32_t> out;
  size_t i = 0;
  const char* seps = ", \t\r\n[]";
  while ((i = text.find_first_not_of(seps, i)) != std::string::npos) {
    const size_t j = std::min(text.find_first_of(seps, i), text.size());
    const std::string item = text.substr(i, j - i);
    const auto id = parse_id(item);
    if (!id) fail(path, ": '", item.substr(0, 40), "' at index ", out.size(), " is not a token id");
    out.push_back(*id);
    i = j;
  }
  return out;
}

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
    const auto id = parse_id(item);
    if (!id) fail("--tokens: '", item, "' at index ", out.size(), " is not a token id");
    out.push_back(*id);
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

// One row of logits. JSON has no NaN or infinity, and such a logit means the model's weights
// (or a computation) went wrong: an error naming the row, not a number nobody can read back.
void print_row(const float* v, int64_t n, const std::string& what) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(v[i]))
      fail("the logit of token ", i, " at ", what, " is ", v[i],
           ": the model computes non-finite values (are its weights damaged?)");
  std::fputc('[', stdout);
  for (int64_t i = 0; i < n; ++i) std::printf(i ? ", %.9g" : "%.9g", static_cast<double>(v[i]));
  std::fputc(']', stdout);
}

void print_tokens(const std::vector<int32_t>& tokens) {
  std::printf("{\"tokens\": [");
  for (size_t i = 0; i < tokens.size(); ++i) std::printf(i ? ", %d" : "%d", tokens[i]);
  std::printf("], \"logits\": [");
}

// ------------------------------------------------------------------ METAVOICE_DIR

// The stage-2 weight file of a METAVOICE_DIR.
std::string stage2_file(const std::string& dir) {
  namespace fs = std::filesystem;
  for (const char* name : {"second_stage.safetensors", "second_stage.gguf"}) {
    const fs::path p = fs::path(dir) / name;
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  fail(dir, ": no second_stage.safetensors");
}

std::vector<float> dir_speaker(const std::string& dir, int64_t dim) {
  return mv_read_speaker_embedding((std::filesystem::path(dir) / "spk_emb.safetensors").string(),
                                   dim);
}

int run_metavoice_stage1(const LogitsArgs& a, int64_t chunk, const std::vector<int32_t>& tokens) {
  MvStage1 model(ModelFiles::open(mv_stage1_file(a.model)), mv_stage1_args(a.model));
  const std::vector<float> spk = dir_speaker(a.model, model.args().speaker_emb_dim);
  const int64_t V = model.args().vocab_size;
  const int64_t T = static_cast<int64_t>(tokens.size());
  State st = model.new_state();
  // The rows come out per chunk, both guidance rows together, and print guidance row first:
  // row 1's are kept until row 0's are printed (with --last, only the last position's)
  std::vector<float> row1;
  std::vector<float> part;
  const int64_t step = chunk == 0 ? T : chunk;
  print_tokens(tokens);
  std::printf("[");
  for (int64_t s = 0; s < T; s += step) {
    const int64_t n = std::min(step, T - s);
    const std::span<const int32_t> toks(tokens.data() + s, static_cast<size_t>(n));
    model.forward(st, toks, toks, spk.data(), part, !a.last);
    const int64_t rows = a.last ? 1 : n;
    if (a.last && s + n < T) continue;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t pos = a.last ? T - 1 : s + r;
      if (!a.last && pos > 0) std::printf(", ");
      print_row(part.data() + r * V, V, "guidance row 0, position " + std::to_string(pos));
    }
    row1.insert(row1.end(), part.begin() + rows * V, part.begin() + 2 * rows * V);
  }
  std::printf("], [");
  const int64_t kept = static_cast<int64_t>(row1.size()) / V;
  for (int64_t r = 0; r < kept; ++r) {
    const int64_t pos = a.last ? T - 1 : r;
    if (r > 0) std::printf(", ");
    print_row(row1.data() + r * V, V, "guidance row 1, position " + std::to_string(pos));
  }
  std::printf("]]}\n");
  return 0;
}

// {"tokens": [[...], [...]]}: one list per input hierarchy, all of one length.
std::vector<int32_t> read_stage2_tokens(const std::string& path, size_t hierarchies, int64_t* T) {
  const nlohmann::json j = read_json_file(path);
  if (!j.is_object() || !j.contains("tokens") || !j["tokens"].is_array())
    fail(path, ": expected {\"tokens\": [[...], ...]}");
  const auto& rows = j["tokens"];
  if (rows.size() != hierarchies)
    fail(path, ": \"tokens\" has ", rows.size(), " lists, the model has ", hierarchies,
         " input hierarchies");
  std::vector<int32_t> out;
  *T = -1;
  for (size_t h = 0; h < rows.size(); ++h) {
    if (!rows[h].is_array()) fail(path, ": \"tokens\"[", h, "] is not a list");
    if (*T < 0) *T = static_cast<int64_t>(rows[h].size());
    if (static_cast<int64_t>(rows[h].size()) != *T)
      fail(path, ": \"tokens\"[", h, "] has ", rows[h].size(), " tokens, \"tokens\"[0] has ", *T);
    for (size_t i = 0; i < rows[h].size(); ++i) {
      const auto& v = rows[h][i];
      if (!v.is_number_integer() || v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX)
        fail(path, ": \"tokens\"[", h, "][", i, "] is not a token id");
      out.push_back(static_cast<int32_t>(v.get<int64_t>()));
    }
  }
  if (*T <= 0) fail(path, ": the token lists are empty");
  return out;
}

int run_metavoice_stage2(const LogitsArgs& a, int64_t chunk) {
  if (a.input.empty()) fail("--stage 2 needs --in FILE.json with {\"tokens\": [[...], [...]]}");
  MvStage2 model(ModelFiles::open(stage2_file(a.model)), mv_stage2_args(a.model));
  const MvStage2Args& args = model.args();
  int64_t T = 0;
  const std::vector<int32_t> tokens = read_stage2_tokens(a.input, args.vocab_sizes.size(), &T);
  std::vector<float> spk;
  if (model.has_speaker_projection()) spk = dir_speaker(a.model, args.speaker_emb_dim);
  const float* sp = spk.empty() ? nullptr : spk.data();
  const std::vector<int64_t> heads = args.head_vocab_sizes();
  std::vector<float> all;
  if (chunk == 0) {
    model.forward(tokens, T, sp, all);
  } else {
    // Causal models with a KV cache: positions fed `chunk` at a time.
    if (!args.causal) fail("--mode ", a.mode, ": stage 2 is non-causal (only prefill applies)");
    State st = model.new_state();
    size_t total = 0;
    for (int64_t v : heads) total += static_cast<size_t>(v * T);
    all.resize(total);
    std::vector<float> part;
    std::vector<int32_t> sub;
    for (int64_t s = 0; s < T; s += chunk) {
      const int64_t n = std::min(chunk, T - s);
      sub.clear();
      for (size_t h = 0; h < args.vocab_sizes.size(); ++h)
        sub.insert(sub.end(), tokens.begin() + static_cast<int64_t>(h) * T + s,
                   tokens.begin() + static_cast<int64_t>(h) * T + s + n);
      model.forward(st, sub, n, sp, part, true);
      size_t off_all = 0, off_part = 0;
      for (int64_t v : heads) {
        std::copy(part.begin() + off_part, part.begin() + off_part + n * v,
                  all.begin() + off_all + s * v);
        off_part += n * v;
        off_all += T * v;
      }
    }
  }
  std::printf("{\"logits\": [");
  size_t off = 0;
  const int64_t first = a.last ? T - 1 : 0;
  for (size_t h = 0; h < heads.size(); ++h) {
    std::printf(h ? ", [" : "[");
    for (int64_t r = first; r < T; ++r) {
      if (r > first) std::printf(", ");
      print_row(all.data() + off + r * heads[h], heads[h],
                "head " + std::to_string(h) + ", position " + std::to_string(r));
    }
    std::printf("]");
    off += static_cast<size_t>(T * heads[h]);
  }
  std::printf("]}\n");
  return 0;
}

std::vector<int32_t> read_tokens(const LogitsArgs& a) {
  if (a.tokens_file.empty()) return parse_tokens(a.tokens);
  if (!a.tokens.empty()) fail("give either --tokens or --tokens-file, not both");
  return parse_token_file(a.tokens_file);
}

int run_logits(const LogitsArgs& a, int threads) {
  apply_threads(threads);
  const int64_t chunk = parse_mode(a.mode);
  if (is_metavoice_dir(a.model)) {
    if (a.stage == 2) {
      if (!a.tokens.empty() || !a.tokens_file.empty())
        fail("--tokens: stage 2 reads its input from --in FILE.json");
      return run_metavoice_stage2(a, chunk);
    }
    if (a.stage != 1) fail("--stage: ", a.stage, " is not 1 or 2");
    if (!a.input.empty()) fail("--in: stage 1 takes --tokens; --in is for --stage 2");
    const std::vector<int32_t> tokens = read_tokens(a);
    if (tokens.empty()) fail("--tokens: the token list is empty");
    return run_metavoice_stage1(a, chunk, tokens);
  }
  if (a.stage != 1 || !a.input.empty())
    fail(a.model, ": --stage and --in apply to a MetaVoice directory only");
  const std::vector<int32_t> tokens = read_tokens(a);
  if (tokens.empty()) fail("--tokens: the token list is empty");
  auto model = load_model(a.model);
  const int64_t V = model->info().vocab_size;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= V)
      fail("token id ", tokens[i], " at index ", i, " is outside the vocabulary (size ", V, ")");

  // Each chunk's rows print as they come; with --last, only the last position is computed
  State st = model->new_state();
  const int64_t T = static_cast<int64_t>(tokens.size());
  std::vector<float> part;
  const int64_t step = chunk == 0 ? T : chunk;
  print_tokens(tokens);
  for (int64_t s = 0; s < T; s += step) {
    const int64_t n = std::min(step, T - s);
    model->forward(st, std::span<const int32_t>(tokens.data() + s, static_cast<size_t>(n)), part,
                   !a.last);
    if (a.last) {
      if (s + n == T) print_row(part.data(), V, "position " + std::to_string(T - 1));
      continue;
    }
    for (int64_t r = 0; r < n; ++r) {
      if (s + r > 0) std::printf(", ");
      print_row(part.data() + r * V, V, "position " + std::to_string(s + r));
    }
  }
  std::printf("]}\n");
  return 0;
}

std::function<int()> setup(CLI::App* sub) {
  auto* a = new LogitsArgs();  // lives as long as the process
  sub->add_option("-m,--model", a->model, "Model: GGUF file or HF directory")->required();
  sub->add_option("--tokens", a->tokens, "Comma-separated token ids, e.g. 2,818,235");
  sub->add_option("--tokens-file", a->tokens_file,
                  "Read the ids from FILE ('-': standard input): separated by commas or white "
                  "space, or a JSON array");
  sub->add_option("--stage", a->stage, "MetaVoice directory: stage 1 (default) or 2");
  sub->add_option("--in", a->input,
                  "MetaVoice stage 2: JSON file {\"tokens\": [[...], [...]]} (one list per "
                  "input hierarchy)");
  sub->add_flag("--last", a->last, "Print only the logits of the last position");
  sub->add_option("--mode", a->mode, "prefill (one call), step (one token per call) or chunk:N");
  int* threads = add_threads_option(sub);
  return [a, threads] { return run_logits(*a, *threads); };
}

Register reg{{"logits", "Print the logits of a token sequence as JSON", setup}};

}  // namespace

}  // namespace cachet::cli
