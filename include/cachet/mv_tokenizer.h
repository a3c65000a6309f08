// MetaVoice text front end: the original's text normalisation and its tiktoken-style BPE
// tokenizer, loaded from first_stage.meta.json.
//
// first_stage.meta.json is a JSON object whose key "tokenizer" holds
//   {"pat_str": REGEX, "offset": 2049, "mergeable_ranks": {TOKEN: RANK, ...},
//    "special_tokens": {"<|endoftext|>": 512} (optional), "name": ... (optional)}
// Ranks 0..255 are the single bytes (entries with a value below 256 are ignored); every other
// key's UTF-8 bytes are the bytes of the token of that rank. Encoding follows tiktoken:
// pre-tokenize with pat_str over Unicode code points, then per piece either the piece itself
// when it is a token, or byte-pair merging (lowest rank first, leftmost on ties).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cachet {

// The original's normalize_text on UTF-8 text: maps typographic quotes/dashes/ellipses (and
// code point 2122 decimal, U+084A, to "TM", as the original does), then fails on any code point
// >= 256 (naming the character and its position), replaces \t \n \r * with a space, strips
// Python whitespace at both ends and collapses every run of two or more Python-whitespace
// characters into one space. Returns UTF-8. Invalid UTF-8 is an error.
std::string mv_normalize_text(std::string_view utf8);

class MvTokenizer {
 public:
  // The "tokenizer" object of a meta JSON (given as text); name is used in error messages.
  static MvTokenizer from_json_text(const std::string& json_text, const std::string& name);
  // A first_stage.meta.json file, or a directory holding one.
  static MvTokenizer from_file(const std::string& path);

  const std::string& name() const { return name_; }
  int64_t offset() const { return offset_; }  // 2049 in the released files
  int32_t eot_id() const { return eot_; }     // raw id of <|endoftext|> (512)
  int64_t n_ranks() const { return static_cast<int64_t>(token_bytes_.size()); }

  // Raw BPE ids (no offset, no end-of-text) of text that is used as is (not normalised).
  // The literal "<|endoftext|>" (any special token) in the text is an error, as in tiktoken.
  std::vector<int32_t> encode_raw(std::string_view utf8) const;
  // The pre-tokenization pieces of text (pat_str matches, UTF-8), without normalisation.
  std::vector<std::string> split(std::string_view utf8) const;
  // The original's TrainedBPETokeniser.encode: encode_raw(text) + [eot], each id + offset.
  std::vector<int32_t> encode(std::string_view utf8, int64_t offset) const;

  // Stage-1 prompt: encode(normalize(text)) with the file's offset (2049; eot 2561).
  std::vector<int32_t> stage1_ids(std::string_view utf8) const;
  // Stage-2 text ids: encode(normalize(text)) with offset 1025 (eot 1537).
  std::vector<int32_t> stage2_ids(std::string_view utf8) const;

  // Bytes of raw ids (eot renders as "<|endoftext|>"); invalid UTF-8 sequences are replaced
  // by U+FFFD as Python's errors="replace". Ids out of range are an error.
  std::string decode_raw(std::span<const int32_t> ids) const;
  // Subtracts offset first.
  std::string decode(std::span<const int32_t> ids, int64_t offset) const;

  MvTokenizer(const MvTokenizer&) = default;
  MvTokenizer& operator=(const MvTokenizer&) = default;
  MvTokenizer(MvTokenizer&&) noexcept = default;
  MvTokenizer& operator=(MvTokenizer&&) noexcept = default;
  ~MvTokenizer();

  static constexpr int64_t kStage2Offset = 1025;

 private:
  MvTokenizer() = default;
  struct Impl;
  std::shared_ptr<const Impl> impl_;
  std::string name_;
  int64_t offset_ = 0;
  int32_t eot_ = 512;
  std::vector<std::string> token_bytes_;  // by rank
};

}  // namespace cachet
