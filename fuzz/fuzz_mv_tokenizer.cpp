// libFuzzer target: MetaVoice's BPE tokenizer (first_stage.meta.json) and the regular
// expression engine behind its pre-tokenization pattern, on arbitrary bytes; each must succeed
// or throw cachet::Error. Inputs starting with an even byte are a pattern and a text split at
// the first zero byte: the matches must be non-empty, in order, inside the text, and each
// found again by match_at. Inputs starting with an odd byte are a meta JSON: a tokenizer it
// gives must encode a fixed text to ids in its vocabulary that decode back to the pieces of
// the text its pattern matched.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "cachet/error.h"
#include "cachet/mv_tokenizer.h"
#include "text/mini_regex.h"

namespace mr = cachet::mini_regex;

namespace {

void regex_case(std::string_view in) {
  const size_t zero = in.find('\0');
  const std::string_view pattern = in.substr(0, zero);
  const std::string_view text = zero == std::string_view::npos ? "" : in.substr(zero + 1);
  try {
    const mr::Regex re(pattern);
    const std::u32string t = mr::utf8_to_u32(text, "fuzz text");
    size_t prev = 0;
    for (const auto& [b, e] : re.find_all(t)) {
      if (b < prev || e <= b || e > t.size()) std::abort();
      size_t end = 0;
      if (!re.match_at(t, b, &end) || end != e) std::abort();
      prev = e;
    }
  } catch (const cachet::Error&) {
  }
}

void meta_case(std::string_view in) {
  try {
    const cachet::MvTokenizer tok = cachet::MvTokenizer::from_json_text(std::string(in), "fuzz");
    const std::string text = "Hello, world! It's 12:30 -- caf\xc3\xa9 ok?  Yes.\n";
    const std::vector<int32_t> ids = tok.encode_raw(text);
    for (int32_t id : ids)
      if (id < 0 || id >= tok.n_ranks()) std::abort();
    std::string pieces;  // what the pattern matched of the text, which BPE encodes
    for (const std::string& p : tok.split(text)) pieces += p;
    if (tok.decode_raw(ids) != pieces) std::abort();
  } catch (const cachet::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0)
    regex_case(in);
  else
    meta_case(in);
  return 0;
}
