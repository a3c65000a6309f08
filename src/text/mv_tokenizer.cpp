#include "cachet/mv_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "cachet/error.h"
#include "cachet/file.h"
#include "text/mini_regex.h"

namespace cachet {

namespace mr = mini_regex;

namespace {

std::string hex_cp(char32_t c) {
  std::ostringstream os;
  os << "U+" << std::uppercase << std::hex;
  os.width(4);
  os.fill('0');
  os << static_cast<uint32_t>(c);
  return os.str();
}

// The original's translation table (keys are decimal code points, as written there).
const char* translate(char32_t c) {
  switch (c) {
    case 8175:
    case 8189:
    case 8190:
    case 8216:
    case 8217:
    case 8242:
    case 8245:
    case 180:
      return "'";
    case 8208:
    case 8209:
    case 8210:
    case 8211:
    case 8212:
    case 8213:
      return "-";
    case 8214:
      return "||";
    case 8218:
      return ",";
    case 8219:
      return "`";
    case 8220:
    case 8221:
    case 8223:
    case 8243:
    case 8246:
      return "\"";
    case 8222:
      return ",,";
    case 8228:
      return ".";
    case 8229:
      return "..";
    case 8230:
      return "...";
    case 2122:
      return "TM";  // decimal 2122 (U+084A), not U+2122
    default:
      return nullptr;
  }
}

// Python's bytes.decode("utf-8", errors="replace"): each maximal invalid subpart -> U+FFFD.
std::string utf8_replace_invalid(const std::string& b) {
  std::string out;
  out.reserve(b.size());
  size_t i = 0;
  const size_t n = b.size();
  auto byte = [&](size_t k) { return static_cast<uint8_t>(b[k]); };
  while (i < n) {
    const uint8_t c = byte(i);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    int need = 0;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      need = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      need = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      need = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    size_t j = i + 1;
    int got = 0;
    while (got < need && j < n) {
      const uint8_t d = byte(j);
      const uint8_t l = got == 0 ? lo : 0x80, h = got == 0 ? hi : 0xBF;
      if (d < l || d > h) break;
      ++j, ++got;
    }
    if (got == need) {
      out.append(b, i, j - i);
    } else {
      out += "\xEF\xBF\xBD";
    }
    i = j;
  }
  return out;
}

}  // namespace

std::string mv_normalize_text(std::string_view utf8) {
  const std::u32string in = mr::utf8_to_u32(utf8, "normalize_text: input text");
  std::u32string t;
  t.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const char32_t c = in[i];
    if (const char* r = translate(c)) {
      for (const char* p = r; *p; ++p) t.push_back(static_cast<unsigned char>(*p));
      continue;
    }
    if (c >= 256) {
      std::string ch;
      mr::append_utf8(ch, c);
      fail("normalize_text: unsupported character '", ch, "' (", hex_cp(c), ", code point ",
           static_cast<uint32_t>(c), ") at character position ", i,
           ": only Latin-1 text (code points below 256) is accepted");
    }
    t.push_back((c == '\t' || c == '\n' || c == '\r' || c == '*') ? U' ' : c);
  }
  size_t b = 0, e = t.size();
  while (b < e && mr::is_python_space(t[b])) ++b;
  while (e > b && mr::is_python_space(t[e - 1])) --e;
  std::u32string out;
  out.reserve(e - b);
  for (size_t i = b; i < e;) {
    if (mr::is_python_space(t[i]) && i + 1 < e && mr::is_python_space(t[i + 1])) {
      size_t j = i;
      while (j < e && mr::is_python_space(t[j])) ++j;
      out.push_back(U' ');
      i = j;
    } else {
      out.push_back(t[i++]);
    }
  }
  return mr::u32_to_utf8(out);
}

struct MvTokenizer::Impl {
  explicit Impl(std::string_view pat) : re(pat) {}
  mr::Regex re;
  std::unordered_map<std::string, int32_t> ranks;
  std::map<std::string, int32_t> specials;
  std::map<int32_t, std::string> special_by_id;
};

MvTokenizer::~MvTokenizer() = default;

MvTokenizer MvTokenizer::from_json_text(const std::string& json_text, const std::string& name) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json_text);
  } catch (const std::exception& e) {
    fail(name, ": not valid JSON (", e.what(), ")");
  }
  CACHET_CHECK(doc.is_object(), name, ": the meta JSON must be an object");
  std::string prefix = "tokenizer.";
  const nlohmann::json* tok = &doc;
  if (doc.contains("tokenizer")) {
    tok = &doc["tokenizer"];
    CACHET_CHECK(tok->is_object(), name, ": key 'tokenizer' must be an object");
  } else if (!doc.contains("pat_str")) {
    fail(name, ": missing key 'tokenizer'");
  } else {
    prefix.clear();
  }
  auto need = [&](const char* key) -> const nlohmann::json& {
    auto it = tok->find(key);
    CACHET_CHECK(it != tok->end(), name, ": missing key '", prefix, key, "'");
    return *it;
  };
  const auto& pat = need("pat_str");
  CACHET_CHECK(pat.is_string(), name, ": key '", prefix, "pat_str' must be a string");
  const auto& off = need("offset");
  CACHET_CHECK(
      off.is_number_integer() && off.get<int64_t>() >= 0 && off.get<int64_t>() < (int64_t{1} << 30),
      name, ": key '", prefix, "offset' must be a non-negative integer");
  const auto& mrk = need("mergeable_ranks");
  CACHET_CHECK(mrk.is_object(), name, ": key '", prefix, "mergeable_ranks' must be an object");

  std::shared_ptr<Impl> impl;
  try {
    impl = std::make_shared<Impl>(pat.get<std::string>());
  } catch (const Error& e) {
    fail(name, ": key '", prefix, "pat_str': ", e.what());
  }
  MvTokenizer t;
  t.name_ = name;
  t.offset_ = off.get<int64_t>();
  std::vector<std::string> by_rank(256);
  for (int b = 0; b < 256; ++b) {
    by_rank[b] = std::string(1, static_cast<char>(b));
    impl->ranks.emplace(by_rank[b], b);
  }
  std::vector<bool> have(256, true);
  constexpr int64_t kMaxRanks = 1 << 22;
  for (const auto& [key, value] : mrk.items()) {
    CACHET_CHECK(value.is_number_integer() && value.get<int64_t>() >= 0, name, ": key '", prefix,
                 "mergeable_ranks': the rank of '", key, "' is not a non-negative integer");
    const int64_t r = value.get<int64_t>();
    if (r < 256) continue;  // the single bytes are implicit
    CACHET_CHECK(r < kMaxRanks, name, ": key '", prefix, "mergeable_ranks': rank ", r, " of '", key,
                 "' is too large");
    if (static_cast<size_t>(r) >= by_rank.size()) {
      by_rank.resize(r + 1);
      have.resize(r + 1, false);
    }
    CACHET_CHECK(!have[r], name, ": key '", prefix, "mergeable_ranks': rank ", r,
                 " is given twice");
    CACHET_CHECK(key.size() >= 2, name, ": key '", prefix, "mergeable_ranks': token '", key,
                 "' of rank ", r, " is a single byte, which has a rank below 256");
    CACHET_CHECK(impl->ranks.emplace(key, static_cast<int32_t>(r)).second, name, ": key '", prefix,
                 "mergeable_ranks': token '", key, "' has two ranks");
    have[r] = true;
    by_rank[r] = key;
  }
  for (size_t r = 256; r < have.size(); ++r)
    CACHET_CHECK(have[r], name, ": key '", prefix, "mergeable_ranks': rank ", r,
                 " is missing (ranks must be 0..", have.size() - 1, " without gaps)");
  const int64_t n_ranks = static_cast<int64_t>(by_rank.size());
  if (auto it = tok->find("special_tokens"); it != tok->end() && !it->is_null()) {
    CACHET_CHECK(it->is_object(), name, ": key '", prefix, "special_tokens' must be an object");
    for (const auto& [key, value] : it->items()) {
      CACHET_CHECK(value.is_number_integer() && value.get<int64_t>() >= n_ranks &&
                       value.get<int64_t>() < kMaxRanks,
                   name, ": key '", prefix, "special_tokens': the id of '", key,
                   "' must be an integer not below the number of ranks (", n_ranks, ")");
      CACHET_CHECK(!key.empty(), name, ": key '", prefix, "special_tokens': empty token");
      const auto id = static_cast<int32_t>(value.get<int64_t>());
      CACHET_CHECK(impl->special_by_id.emplace(id, key).second, name, ": key '", prefix,
                   "special_tokens': id ", id, " is given twice");
      impl->specials.emplace(key, id);
    }
  } else {
    impl->specials.emplace("<|endoftext|>", static_cast<int32_t>(n_ranks));
    impl->special_by_id.emplace(static_cast<int32_t>(n_ranks), "<|endoftext|>");
  }
  auto eot = impl->specials.find("<|endoftext|>");
  CACHET_CHECK(eot != impl->specials.end(), name, ": key '", prefix,
               "special_tokens' has no '<|endoftext|>'");
  t.eot_ = eot->second;
  t.token_bytes_ = std::move(by_rank);
  t.impl_ = std::move(impl);
  return t;
}

MvTokenizer MvTokenizer::from_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::string file = path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    file = (fs::path(path) / "first_stage.meta.json").string();
    CACHET_CHECK(fs::exists(file, ec), path,
                 ": directory has no first_stage.meta.json (the MetaVoice tokenizer)");
  }
  return from_json_text(read_file(file), file);
}

std::vector<int32_t> MvTokenizer::encode_raw(std::string_view utf8) const {
  for (const auto& [tok, id] : impl_->specials) {
    const size_t at = utf8.find(tok);
    CACHET_CHECK(at == std::string_view::npos, name_, ": the text contains the special token '",
                 tok, "' (at byte ", at, "), which is not allowed in input text");
  }
  const std::u32string text = mr::utf8_to_u32(utf8, name_ + ": input text");
  std::vector<int32_t> ids;
  std::vector<size_t> next, prev;
  std::vector<char> alive;
  for (const auto& [b, e] : impl_->re.find_all(text)) {
    const std::string piece = mr::u32_to_utf8(std::u32string_view(text).substr(b, e - b));
    if (auto it = impl_->ranks.find(piece); it != impl_->ranks.end()) {
      ids.push_back(it->second);
      continue;
    }
    // Byte-pair merging: repeatedly merge the adjacent pair whose bytes have the lowest rank
    // (leftmost on ties) until no adjacent pair is a token. The pairs wait in a heap ordered by
    // (rank, start), so a piece of n bytes takes O(n log n) rather than a scan per merge; an
    // entry whose parts have changed since it was pushed is dropped when it comes up.
    const size_t n = piece.size();
    constexpr int32_t kNone = std::numeric_limits<int32_t>::max();
    constexpr size_t kNil = std::numeric_limits<size_t>::max();
    // The parts as a list over their first bytes: part a is [a, next[a]); alive[a] while it is one
    next.resize(n);
    prev.resize(n);
    alive.assign(n, 1);
    for (size_t i = 0; i < n; ++i) {
      next[i] = i + 1;
      prev[i] = i == 0 ? kNil : i - 1;
    }
    using Pair = std::tuple<int32_t, size_t, size_t>;  // rank, first byte, end of the pair
    std::priority_queue<Pair, std::vector<Pair>, std::greater<Pair>> heap;
    auto push = [&](size_t a) {
      if (a == kNil || next[a] >= n) return;
      const size_t c = next[next[a]];
      auto it = impl_->ranks.find(piece.substr(a, c - a));
      if (it != impl_->ranks.end() && it->second != kNone) heap.emplace(it->second, a, c);
    };
    for (size_t a = 0; a < n; ++a) push(a);
    while (!heap.empty()) {
      const auto [rank, a, c] = heap.top();
      heap.pop();
      if (!alive[a] || next[a] >= n || next[next[a]] != c) continue;  // changed since pushed
      const size_t b = next[a];
      alive[b] = 0;
      next[a] = c;
      if (c < n) prev[c] = a;
      push(prev[a]);
      push(a);
    }
    for (size_t a = 0; a < n; a = next[a]) {
      auto it = impl_->ranks.find(piece.substr(a, next[a] - a));
      CACHET_CHECK(it != impl_->ranks.end(), name_, ": internal BPE error");
      ids.push_back(it->second);
    }
  }
  return ids;
}

std::vector<std::string> MvTokenizer::split(std::string_view utf8) const {
  const std::u32string text = mr::utf8_to_u32(utf8, name_ + ": input text");
  std::vector<std::string> out;
  for (const auto& [b, e] : impl_->re.find_all(text))
    out.push_back(mr::u32_to_utf8(std::u32string_view(text).substr(b, e - b)));
  return out;
}

std::vector<int32_t> MvTokenizer::encode(std::string_view utf8, int64_t offset) const {
  std::vector<int32_t> ids = encode_raw(utf8);
  ids.push_back(eot_);
  for (auto& id : ids) id = static_cast<int32_t>(id + offset);
  return ids;
}

std::vector<int32_t> MvTokenizer::stage1_ids(std::string_view utf8) const {
  return encode(mv_normalize_text(utf8), offset_);
}

std::vector<int32_t> MvTokenizer::stage2_ids(std::string_view utf8) const {
  return encode(mv_normalize_text(utf8), kStage2Offset);
}

std::string MvTokenizer::decode_raw(std::span<const int32_t> ids) const {
  return decode(ids, 0);
}

// Ids less the offset are ranks (or special tokens); errors name the id as given, with its
// rank when there is an offset.
std::string MvTokenizer::decode(std::span<const int32_t> ids, int64_t offset) const {
  std::string bytes;
  for (int32_t id : ids) {
    const int64_t r = static_cast<int64_t>(id) - offset;
    CACHET_CHECK(offset == 0 || (r >= 0 && r <= std::numeric_limits<int32_t>::max()), name_,
                 ": token id ", id, " is below the text offset ", offset);
    const int32_t rank = static_cast<int32_t>(r);
    if (rank >= 0 && static_cast<size_t>(rank) < token_bytes_.size()) {
      bytes += token_bytes_[static_cast<size_t>(rank)];
      continue;
    }
    auto it = impl_->special_by_id.find(rank);
    CACHET_CHECK(it != impl_->special_by_id.end(), name_, ": token id ", id,
                 offset == 0 ? std::string()
                             : " (rank " + std::to_string(rank) + " after the offset " +
                                   std::to_string(offset) + ")",
                 " is not in the vocabulary (", token_bytes_.size(), " ranks and ",
                 impl_->special_by_id.size(), " special tokens)");
    bytes += it->second;
  }
  return utf8_replace_invalid(bytes);
}

}  // namespace cachet
