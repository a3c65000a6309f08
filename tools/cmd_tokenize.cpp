// `cachet tokenize` and `cachet detokenize`.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cachet/error.h"
#include "cachet/file.h"
#include "cachet/metavoice_gpt.h"
#include "cachet/mv_tokenizer.h"
#include "cachet/tokenizer.h"
#include "cli.h"
#include "default_model.h"

namespace cachet::cli {
namespace {

void write_stdout(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

// A MetaVoice directory (with first_stage.meta.json) or a *.meta.json file.
bool is_metavoice(const std::string& model) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (model.empty()) return false;
  if (fs::is_directory(model, ec)) {
    if (fs::exists(fs::path(model) / "first_stage.meta.json", ec)) return true;
    // A METAVOICE_DIR without its tokenizer: say that, not that tokenizer.model is missing
    CACHET_CHECK(!is_metavoice_dir(model), model,
                 ": a MetaVoice directory without first_stage.meta.json (its tokenizer)");
    return false;
  }
  const std::string suffix = ".meta.json";
  return model.size() >= suffix.size() &&
         model.compare(model.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "1,2,3", "1 2 3" or a JSON array "[1, 2, 3]".
std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  const size_t first = s.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && s[first] == '[') {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(s);
    } catch (const std::exception& e) {
      fail("IDS is not a valid JSON array: ", e.what());
    }
    CACHET_CHECK(j.is_array(), "IDS must be a JSON array of integers");
    for (const auto& v : j) {
      CACHET_CHECK(v.is_number_integer(), "IDS: '", v.dump(), "' is not an integer token id");
      const int64_t x = v.get<int64_t>();
      CACHET_CHECK(x >= 0 && x <= INT32_MAX, "IDS: ", x, " is not a valid token id");
      ids.push_back(static_cast<int32_t>(x));
    }
    return ids;
  }
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() &&
           (s[i] == ',' || s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
      ++i;
    if (i >= s.size()) break;
    size_t j = i;
    while (j < s.size() && s[j] != ',' && s[j] != ' ' && s[j] != '\t' && s[j] != '\n' &&
           s[j] != '\r')
      ++j;
    const std::string tok = s.substr(i, j - i);
    bool digits = !tok.empty() && tok.size() <= 10;
    for (char c : tok) digits = digits && c >= '0' && c <= '9';
    CACHET_CHECK(digits, "IDS: '", tok,
                 "' is not a token id (give ids as 1,2,3 or as a JSON array [1, 2, 3])");
    const int64_t x = std::stoll(tok);
    CACHET_CHECK(x <= INT32_MAX, "IDS: ", x, " is not a valid token id");
    ids.push_back(static_cast<int32_t>(x));
    i = j;
  }
  return ids;
}

Register tokenize_cmd{Command{
    "tokenize", "Print the token ids of a text as a JSON array", [](CLI::App* sub) {
      struct Args {
        std::string model, file, text;
        bool bos = false, eos = false, pieces = false, split = false;
        int stage = 1;
      };
      auto a = std::make_shared<Args>();
      sub->add_option("-m,--model", a->model,
                      "GGUF file, model directory or tokenizer.model (default: the embedded "
                      "default model)");
      sub->add_option("-f,--file", a->file, "Read the text from FILE ('-' for stdin)");
      sub->add_option("text", a->text, "Text to tokenize");
      sub->add_flag("--bos", a->bos, "Prepend the BOS token");
      sub->add_flag("--eos", a->eos, "Append the EOS token");
      sub->add_flag("--pieces", a->pieces, "Print the pieces instead of the ids");
      sub->add_option("--stage", a->stage,
                      "MetaVoice: 1 = stage-1 prompt ids (offset 2049), 2 = stage-2 text ids "
                      "(offset 1025); both normalised, end-of-text appended")
          ->check(CLI::IsMember({1, 2}));
      sub->add_flag("--split", a->split,
                    "MetaVoice: print the pre-tokenization pieces (pat_str matches) of the text "
                    "as given, as a JSON array of strings");
      return [a, sub]() -> int {
        CACHET_CHECK(!(a->file.empty() && sub->count("text") == 0),
                     "tokenize: give the text as an argument or with -f FILE");
        CACHET_CHECK(a->file.empty() || sub->count("text") == 0,
                     "tokenize: give either TEXT or -f FILE, not both");
        if (is_metavoice(a->model)) {
          CACHET_CHECK(!a->bos && !a->eos && !a->pieces,
                       "tokenize: --bos, --eos and --pieces do not apply to a MetaVoice model "
                       "(its ids always end with end-of-text)");
          const MvTokenizer mv = MvTokenizer::from_file(a->model);
          const std::string text = a->file.empty() ? a->text : read_input(a->file, "the text");
          if (a->split) {
            write_stdout(nlohmann::json(mv.split(text)).dump() + "\n");
            return 0;
          }
          const auto ids = a->stage == 2 ? mv.stage2_ids(text) : mv.stage1_ids(text);
          write_stdout(nlohmann::json(ids).dump() + "\n");
          return 0;
        }
        CACHET_CHECK(sub->count("--stage") == 0 && !a->split,
                     "tokenize: --stage and --split apply to MetaVoice models only");
        const Tokenizer tok = Tokenizer::from_path(model_or_default(a->model));
        const std::string text = a->file.empty() ? a->text : read_input(a->file, "the text");
        std::vector<int32_t> ids;
        if (a->bos) {
          CACHET_CHECK(tok.bos_id() >= 0, tok.name(), ": the tokenizer has no BOS token");
          ids.push_back(tok.bos_id());
        }
        const auto body = tok.encode(text);
        ids.insert(ids.end(), body.begin(), body.end());
        if (a->eos) {
          CACHET_CHECK(tok.eos_id() >= 0, tok.name(), ": the tokenizer has no EOS token");
          ids.push_back(tok.eos_id());
        }
        nlohmann::json out = nlohmann::json::array();
        for (int32_t id : ids) {
          if (a->pieces)
            out.push_back(tok.id_to_piece(id));
          else
            out.push_back(id);
        }
        write_stdout(out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
        return 0;
      };
    }}};

Register detokenize_cmd{Command{
    "detokenize", "Print the text of token ids (1,2,3 or a JSON array)", [](CLI::App* sub) {
      struct Args {
        std::string model, file, ids;
        bool stream = false;
      };
      auto a = std::make_shared<Args>();
      sub->add_option("-m,--model", a->model,
                      "GGUF file, model directory or tokenizer.model (default: the embedded "
                      "default model)");
      sub->add_option("-f,--file", a->file, "Read the ids from FILE ('-' for stdin)");
      sub->add_option("ids", a->ids, "Token ids: 1,2,3 or [1, 2, 3]");
      sub->add_flag("--stream", a->stream,
                    "Decode one id at a time as generation does (same text)");
      return [a, sub]() -> int {
        CACHET_CHECK(!(a->file.empty() && sub->count("ids") == 0),
                     "detokenize: give the ids as an argument or with -f FILE");
        CACHET_CHECK(a->file.empty() || sub->count("ids") == 0,
                     "detokenize: give either IDS or -f FILE, not both");
        const auto ids = parse_ids(a->file.empty() ? a->ids : read_input(a->file, "the text"));
        if (is_metavoice(a->model)) {
          // Stage-1 ids (the file's offset); the end-of-text id renders as <|endoftext|>.
          CACHET_CHECK(!a->stream, "detokenize: --stream does not apply to a MetaVoice model");
          const MvTokenizer mv = MvTokenizer::from_file(a->model);
          write_stdout(mv.decode(ids, mv.offset()));
          return 0;
        }
        const Tokenizer tok = Tokenizer::from_path(model_or_default(a->model));
        if (a->stream) {
          StreamDecoder dec(tok);
          for (int32_t id : ids) write_stdout(dec.push(id));
          write_stdout(dec.finish());
        } else {
          write_stdout(tok.decode(ids));
        }
        return 0;
      };
    }}};

}  // namespace
}  // namespace cachet::cli
