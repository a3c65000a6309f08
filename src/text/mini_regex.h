// A small backtracking regular-expression engine over Unicode code points, for the
// pre-tokenization patterns of tiktoken-style BPE tokenizers (pat_str).
//
// Supported: literals and escapes (\n \t \r \f \v \xHH \x{H..} \uHHHH, escaped punctuation),
// '.', alternation, groups ( ), (?: ), (?P<n> ), (?<n> ), atomic (?> ), flags (?i) (?s) (?m)
// (?-i) and scoped (?i: ), character classes with ranges, negation and the escapes below,
// \s \S (Unicode White_Space) \d \D (\p{Nd}) \w \W (letters, marks, Nd, Nl, Pc, ZWJ/ZWNJ),
// \p{..} \P{..} \pL with general categories (L Lu Ll Lt Lm Lo M Mn Mc Me N Nd Nl No P Pc Pd Ps
// Pe Pi Pf Po S Sm Sc Sk So Z Zs Zl Zp C Cc Cf Cs Co Cn, also spelled Letter, Number, ...),
// quantifiers ? * + {m} {m,} {m,n} (greedy, lazy with '?', possessive with '+'), lookahead
// (?= ) (?! ), anchors ^ $ \A \z \b \B. Matching is leftmost-first (backtracking priority) as
// in fancy-regex and Python's regex module. Case-insensitive matching uses simple case
// mappings of Latin, Greek and Cyrillic letters (plus U+017F and U+212A).
// Anything else (backreferences, lookbehind, nested classes, ...) is an error naming the
// pattern position (in code points).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cachet::mini_regex {

// Unicode general category (14.0) and properties.
enum Category : uint8_t {
  Cn,
  Lu,
  Ll,
  Lt,
  Lm,
  Lo,
  Mn,
  Mc,
  Me,
  Nd,
  Nl,
  No,
  Pc,
  Pd,
  Ps,
  Pe,
  Pi,
  Pf,
  Po,
  Sm,
  Sc,
  Sk,
  So,
  Zs,
  Zl,
  Zp,
  Cc,
  Cf,
  Cs,
  Co,
  kCategoryCount
};
Category general_category(char32_t c);
bool is_white_space(char32_t c);   // the Unicode White_Space property (regex \s)
bool is_python_space(char32_t c);  // Python str.isspace (adds U+001C..U+001F)
bool is_word(char32_t c);          // regex \w

// UTF-8 <-> code points. Invalid UTF-8 is an error naming `what` and the byte offset.
std::u32string utf8_to_u32(std::string_view s, std::string_view what);
std::string u32_to_utf8(std::u32string_view s);
void append_utf8(std::string& out, char32_t c);

class Regex {
 public:
  // Compiles pattern (UTF-8); errors name the position.
  explicit Regex(std::string_view pattern);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  // The match that starts first at or after `from`; false when none.
  bool search(std::u32string_view text, size_t from, size_t* begin, size_t* end) const;
  // Whether the pattern matches at exactly `at`; *end receives the end.
  bool match_at(std::u32string_view text, size_t at, size_t* end) const;
  // Successive non-overlapping, non-empty matches as [begin, end) code-point offsets (empty
  // matches are skipped: they carry no text).
  std::vector<std::pair<size_t, size_t>> find_all(std::u32string_view text) const;

  const std::string& pattern() const { return pattern_; }

  struct Node;

 private:
  std::string pattern_;
  std::unique_ptr<Node> root_;
};

}  // namespace cachet::mini_regex
