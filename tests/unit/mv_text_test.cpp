// MetaVoice front ends: normalize_text, the BPE tokenizer and its regex engine, the speaker
// encoder's audio front end, and the PyTorch checkpoint reader.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cachet/error.h"
#include "cachet/mv_tokenizer.h"
#include "cachet/speaker_encoder.h"
#include "cachet/torch_checkpoint.h"
#include "text/mini_regex.h"

namespace cachet {
namespace {

namespace mr = mini_regex;

constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kCl100k =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::vector<std::string> split(const char* pattern, const std::string& text) {
  mr::Regex re(pattern);
  const std::u32string t = mr::utf8_to_u32(text, "text");
  std::vector<std::string> out;
  for (const auto& [b, e] : re.find_all(t)) out.push_back(mr::u32_to_utf8(t.substr(b, e - b)));
  return out;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Expected pieces below come from Python's regex module.
TEST(MiniRegex, Gpt2Pattern) {
  EXPECT_EQ(split(kGpt2, "Hello world's  123 !!  \n x"),
            (std::vector<std::string>{"Hello", " world", "'s", " ", " 123", " !!", "  \n", " x"}));
  EXPECT_EQ(split(kGpt2, "I'LL go\u00a0\u00a0now, caf\u00e9 12345678\r\n\r\n  end  "),
            (std::vector<std::string>{"I", "'", "LL", " go", "\u00a0", "\u00a0", "now", ",",
                                      " caf\u00e9", " 12345678", "\r\n\r\n ", " end", "  "}));
}

TEST(MiniRegex, Cl100kPattern) {
  EXPECT_EQ(
      split(kCl100k, "Hello world's  123 !!  \n x"),
      (std::vector<std::string>{"Hello", " world", "'s", " ", " ", "123", " !!", "  \n", " x"}));
  EXPECT_EQ(split(kCl100k, "I'LL go\u00a0\u00a0now, caf\u00e9 12345678\r\n\r\n  end  "),
            (std::vector<std::string>{"I", "'LL", " go", "\u00a0", "\u00a0now", ",", " caf\u00e9",
                                      " ", "123", "456", "78", "\r\n\r\n", " ", " end", "  "}));
}

TEST(MiniRegex, QuantifiersAndGroups) {
  EXPECT_EQ(split("a+?b|a{2,3}|x*+x", "aaab aaaa xxx"), (std::vector<std::string>{"aaab", "aaa"}));
  EXPECT_EQ(split("(?:ab)+|c{2}", "ababab ccc"), (std::vector<std::string>{"ababab", "cc"}));
  EXPECT_EQ(split("(?>a+)b|a+", "aaab aa"), (std::vector<std::string>{"aaab", "aa"}));
  EXPECT_EQ(split("a(?=b)|c(?!d)", "ab ac cd ce"), (std::vector<std::string>{"a", "c", "c"}));
  EXPECT_EQ(split("^a|b$", "aab ab"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(split("\\bx\\w*", "xa yx x1"), (std::vector<std::string>{"xa", "x1"}));
  EXPECT_EQ(split("a.c", "abc a\nc"), (std::vector<std::string>{"abc"}));
  EXPECT_EQ(split("(?s)a.c", "a\nc"), (std::vector<std::string>{"a\nc"}));
  EXPECT_EQ(split("[^a-c\\d]+", "abxy12z"), (std::vector<std::string>{"xy", "z"}));
  EXPECT_EQ(split("[\\p{N}]+|\\P{L}", "a\u00b2\u0663x!"),
            (std::vector<std::string>{"\u00b2\u0663", "!"}));
  EXPECT_EQ(split("\\x41\\u0042\\x{43}", "ABC"), (std::vector<std::string>{"ABC"}));
  EXPECT_EQ(split("a{,2}", "a{,2}"), (std::vector<std::string>{"a{,2}"}));  // literal brace
}

TEST(MiniRegex, CaseInsensitive) {
  EXPECT_EQ(split("(?i:'re|ab)", "'RE 'Re aB AB"),
            (std::vector<std::string>{"'RE", "'Re", "aB", "AB"}));
  EXPECT_EQ(split("(?i)\u00e9[a-c]", "\u00c9B \u00e9c"),
            (std::vector<std::string>{"\u00c9B", "\u00e9c"}));
  EXPECT_EQ(split("(?i:a)b", "Ab AB"), (std::vector<std::string>{"Ab"}));
}

TEST(MiniRegex, UnicodeProperties) {
  using mr::general_category;
  EXPECT_EQ(general_category(U'A'), mr::Lu);
  EXPECT_EQ(general_category(U'\u00aa'), mr::Lo);
  EXPECT_EQ(general_category(U'\u00b2'), mr::No);
  EXPECT_EQ(general_category(U'\u00b5'), mr::Ll);
  EXPECT_EQ(general_category(U'\u3000'), mr::Zs);
  EXPECT_EQ(general_category(U'\u0663'), mr::Nd);
  EXPECT_EQ(general_category(U'\u216b'), mr::Nl);
  // Regex \s (White_Space) excludes U+001C..U+001F; Python's isspace includes them.
  for (char32_t c : {0x1Cu, 0x1Du, 0x1Eu, 0x1Fu}) {
    EXPECT_FALSE(mr::is_white_space(c));
    EXPECT_TRUE(mr::is_python_space(c));
  }
  for (char32_t c : {0x09u, 0x0Bu, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2000u, 0x200Au, 0x2028u, 0x2029u,
                     0x202Fu, 0x205Fu, 0x3000u}) {
    EXPECT_TRUE(mr::is_white_space(c)) << static_cast<uint32_t>(c);
    EXPECT_TRUE(mr::is_python_space(c));
  }
  EXPECT_FALSE(mr::is_white_space(0x200B));
  EXPECT_FALSE(mr::is_white_space(0x180E));
}

TEST(MiniRegex, ErrorsNamePosition) {
  EXPECT_NE(error_of([] { mr::Regex r("(?<=a)b"); }).find("position"), std::string::npos);
  EXPECT_NE(error_of([] { mr::Regex r("ab\\1"); }).find("position 2"), std::string::npos);
  EXPECT_NE(error_of([] { mr::Regex r("[a-"); }).find("position"), std::string::npos);
  EXPECT_NE(error_of([] { mr::Regex r("(ab"); }).find("position 0"), std::string::npos);
  EXPECT_NE(error_of([] { mr::Regex r("ab)"); }).find("position 2"), std::string::npos);
  EXPECT_NE(error_of([] { mr::Regex r("\\p{Foo}"); }).find("Foo"), std::string::npos);
  EXPECT_NE(error_of([] { mr::Regex r("*a"); }).find("position 0"), std::string::npos);
  EXPECT_NE(error_of([] { mr::Regex r("a{3,1}"); }).find("position"), std::string::npos);
}

TEST(MiniRegex, Utf8) {
  EXPECT_EQ(mr::utf8_to_u32("a\u00e9\u20ac\U0001F600", "t"), U"a\u00e9\u20ac\U0001F600");
  EXPECT_THROW(mr::utf8_to_u32("\xc3", "t"), Error);
  EXPECT_THROW(mr::utf8_to_u32("\xc0\x80", "t"), Error);
  EXPECT_THROW(mr::utf8_to_u32("\xed\xa0\x80", "t"), Error);
  EXPECT_EQ(mr::u32_to_utf8(U"a\u00e9\U0001F600"), "a\u00e9\U0001F600");
}

TEST(MvText, Normalize) {
  EXPECT_EQ(mv_normalize_text("  Hello\t\tworld*  "), "Hello world");
  EXPECT_EQ(mv_normalize_text("It\u2019s \u201cok\u201d \u2014 fine\u2026"),
            "It's \"ok\" - fine...");
  EXPECT_EQ(mv_normalize_text("a\u2016b\u201ec\u2025d\u00b4"), "a||b,,c..d'");
  EXPECT_EQ(mv_normalize_text("\u084a"), "TM");           // decimal 2122 in the original's table
  EXPECT_EQ(mv_normalize_text("a\u00a0b"), "a\u00a0b");   // a single NBSP survives
  EXPECT_EQ(mv_normalize_text("a\u00a0\u00a0b"), "a b");  // a run collapses
  EXPECT_EQ(mv_normalize_text("a\x1c"
                              "b"),
            "a\x1c"
            "b");  // single U+001C survives
  EXPECT_EQ(mv_normalize_text("a\x1c\x1d"
                              "b"),
            "a b");
  EXPECT_EQ(mv_normalize_text("a\x0b"
                              "b\x0c\x0c"
                              "c"),
            "a\x0b"
            "b c");
  EXPECT_EQ(mv_normalize_text("\u0085\u00a0x\u0085"), "x");  // strip uses Python whitespace
  EXPECT_EQ(mv_normalize_text("a\r\nb"), "a b");
  EXPECT_EQ(mv_normalize_text(""), "");
}

TEST(MvText, NormalizeRejectsNonLatin1) {
  const std::string e = error_of([] { mv_normalize_text("brand\u2122 x"); });
  EXPECT_NE(e.find("U+2122"), std::string::npos) << e;
  EXPECT_NE(e.find("position 5"), std::string::npos) << e;
  EXPECT_NE(e.find("\u2122"), std::string::npos) << e;
  EXPECT_THROW(mv_normalize_text("\u65e5"), Error);
  EXPECT_THROW(mv_normalize_text("\xff"), Error);  // invalid UTF-8
}

std::string meta(const nlohmann::json& ranks, const char* pat = kGpt2) {
  nlohmann::json mr = ranks;
  int r = 256;
  for (const auto& [k, v] : ranks.items()) r = std::max(r, v.get<int>() + 1);
  for (int i = 0; r < 512; ++i, ++r) mr["QZ" + std::to_string(i)] = r;
  nlohmann::json j = {{"tokenizer", {{"pat_str", pat}, {"offset", 2049}, {"mergeable_ranks", mr}}}};
  return j.dump();
}

TEST(MvText, BpeMerges) {
  // Merges: "ab" first, then "abc" via "ab"+"c"; " x" and " xab".
  const auto tok = MvTokenizer::from_json_text(
      meta({{"ab", 256}, {"abc", 257}, {" x", 258}, {"bc", 259}, {" xab", 260}}), "meta");
  EXPECT_EQ(tok.n_ranks(), 512);
  EXPECT_EQ(tok.eot_id(), 512);
  EXPECT_EQ(tok.offset(), 2049);
  EXPECT_EQ(tok.encode_raw("abc"), (std::vector<int32_t>{257}));
  EXPECT_EQ(tok.encode_raw("abcd"), (std::vector<int32_t>{257, 'd'}));
  EXPECT_EQ(tok.encode_raw("xbcab xab"), (std::vector<int32_t>{'x', 259, 256, 260}));
  EXPECT_EQ(tok.encode("ab", 2049), (std::vector<int32_t>{256 + 2049, 512 + 2049}));
  EXPECT_EQ(tok.stage1_ids("  ab  "), (std::vector<int32_t>{256 + 2049, 2561}));
  EXPECT_EQ(tok.stage2_ids("ab"), (std::vector<int32_t>{256 + 1025, 1537}));
  EXPECT_EQ(tok.stage1_ids(""), (std::vector<int32_t>{2561}));
  // Latin-1 characters are two UTF-8 bytes.
  EXPECT_EQ(tok.encode_raw("\u00e9"), (std::vector<int32_t>{0xC3, 0xA9}));
  const std::vector<int32_t> ids = tok.stage1_ids("xbcab xab \u00e9!");
  EXPECT_EQ(tok.decode(ids, 2049), "xbcab xab \u00e9!<|endoftext|>");
  const std::vector<int32_t> half = {0xC3, 'a'};
  EXPECT_EQ(tok.decode_raw(half),
            "\ufffd"
            "a");
  EXPECT_THROW(tok.decode_raw(std::vector<int32_t>{513}), Error);
}

TEST(MvText, WholePieceLookupFirst) {
  // "abcd" cannot be reached by merging ("bc" merges, then nothing), but it is a token.
  const auto tok = MvTokenizer::from_json_text(meta({{"bc", 256}, {"abcd", 257}}), "meta");
  EXPECT_EQ(tok.encode_raw("abcd"), (std::vector<int32_t>{257}));
  EXPECT_EQ(tok.encode_raw("abcde"), (std::vector<int32_t>{'a', 256, 'd', 'e'}));
}

TEST(MvText, RefusesSpecialTokenInText) {
  const auto tok = MvTokenizer::from_json_text(meta(nlohmann::json::object()), "meta");
  const std::string e = error_of([&] { tok.stage1_ids("hi <|endoftext|>"); });
  EXPECT_NE(e.find("<|endoftext|>"), std::string::npos) << e;
}

TEST(MvText, BrokenMetaNamesKey) {
  auto err = [](const std::string& text) {
    return error_of([&] { MvTokenizer::from_json_text(text, "first_stage.meta.json"); });
  };
  EXPECT_NE(err("{\"x\": 1}").find("'tokenizer'"), std::string::npos);
  EXPECT_NE(err("{\"tokenizer\": {\"offset\": 1, \"mergeable_ranks\": {}}}").find("pat_str"),
            std::string::npos);
  EXPECT_NE(err("{\"tokenizer\": {\"pat_str\": \"a\", \"mergeable_ranks\": {}}}").find("offset"),
            std::string::npos);
  EXPECT_NE(err("{\"tokenizer\": {\"pat_str\": \"a\", \"offset\": 1}}").find("mergeable_ranks"),
            std::string::npos);
  EXPECT_NE(err("{\"tokenizer\": {\"pat_str\": \"a\", \"offset\": 1, \"mergeable_ranks\": "
                "{\"ab\": 256, \"cd\": 258}}}")
                .find("rank 257 is missing"),
            std::string::npos);
  EXPECT_NE(err("{\"tokenizer\": {\"pat_str\": \"(?<=a)\", \"offset\": 1, \"mergeable_ranks\": "
                "{}}}")
                .find("pat_str"),
            std::string::npos);
  EXPECT_NE(err("{\"tokenizer\": ").find("JSON"), std::string::npos);
  EXPECT_NE(err("{\"tokenizer\": {\"pat_str\": \"a\", \"offset\": -1, \"mergeable_ranks\": {}}}")
                .find("offset"),
            std::string::npos);
}

}  // namespace
}  // namespace cachet

// ---------------------------------------------------------------------------------------------
// Speaker encoder front end and the torch checkpoint reader.

namespace cachet {
namespace {

namespace sf = speaker_frontend;

TEST(MvTextSpeaker, PartialSlices) {
  // 31000 samples: the second partial would cover 73% < 75% and is dropped.
  EXPECT_EQ(sf::partial_starts(31000), (std::vector<int64_t>{0}));
  EXPECT_EQ(sf::partial_starts(32000), (std::vector<int64_t>{0, 77}));
  EXPECT_EQ(sf::partial_starts(100), (std::vector<int64_t>{0}));
  const auto s = sf::partial_starts(16000 * 10);
  ASSERT_FALSE(s.empty());
  for (size_t i = 0; i < s.size(); ++i) EXPECT_EQ(s[i], static_cast<int64_t>(77 * i));
}

TEST(MvTextSpeaker, MelFilterbank) {
  const std::vector<float> fb = sf::mel_filterbank();
  ASSERT_EQ(fb.size(), 40u * 201u);
  // Slaney-normalised triangles: non-negative and every band non-empty.
  for (int m = 0; m < 40; ++m) {
    float mx = 0;
    for (int k = 0; k < 201; ++k) {
      EXPECT_GE(fb[m * 201 + k], 0.0f);
      mx = std::max(mx, fb[m * 201 + k]);
    }
    EXPECT_GT(mx, 0.0f) << m;
  }
  EXPECT_EQ(fb[0], 0.0f);  // 0 Hz lies at the lower edge of the first triangle
}

TEST(MvTextSpeaker, MelOfSine) {
  // A 1 kHz sine: the energy lands in the mel bands around 1 kHz; frames = 1 + n / 160.
  std::vector<float> y(16000);
  for (size_t i = 0; i < y.size(); ++i)
    y[i] = 0.5f * static_cast<float>(std::sin(2 * 3.14159265358979 * 1000.0 * i / 16000.0));
  int64_t frames = 0;
  const auto mel = sf::mel_spectrogram(y, &frames);
  EXPECT_EQ(frames, 101);
  const float* row = &mel[50 * 40];
  int best = 0;
  for (int m = 1; m < 40; ++m)
    if (row[m] > row[best]) best = m;
  EXPECT_GE(best, 13);
  EXPECT_LE(best, 16);
}

TEST(MvTextSpeaker, TrimSilence) {
  std::vector<float> y(16000 * 3, 0.0f);
  for (size_t i = 16000; i < 32000; ++i) y[i] = (i % 50 < 25) ? 0.3f : -0.3f;
  const auto t = sf::trim_silence(y, 20.0);
  // Frames of 2048 centred every 512 samples: the kept region starts one frame-half early.
  EXPECT_LT(t.size(), y.size());
  EXPECT_GE(t.size(), 16000u);
  EXPECT_LE(t.size(), 16000u + 2 * 2048u);
  EXPECT_TRUE(sf::trim_silence(std::vector<float>{}, 20.0).empty());
}

// A stored zip archive of the given entries, as torch.save writes (no CRC check needed).
std::string zip_of(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string out, cd;
  auto u16 = [](std::string& s, uint32_t v) {
    s.push_back(static_cast<char>(v & 0xFF));
    s.push_back(static_cast<char>((v >> 8) & 0xFF));
  };
  auto u32 = [&](std::string& s, uint32_t v) {
    u16(s, v & 0xFFFF);
    u16(s, v >> 16);
  };
  for (const auto& [name, data] : entries) {
    const auto off = static_cast<uint32_t>(out.size());
    u32(out, 0x04034b50);
    u16(out, 20), u16(out, 0), u16(out, 0), u16(out, 0), u16(out, 0);
    u32(out, 0), u32(out, static_cast<uint32_t>(data.size())),
        u32(out, static_cast<uint32_t>(data.size()));
    u16(out, static_cast<uint32_t>(name.size())), u16(out, 0);
    out += name;
    out += data;
    u32(cd, 0x02014b50);
    u16(cd, 20), u16(cd, 20), u16(cd, 0), u16(cd, 0), u16(cd, 0), u16(cd, 0);
    u32(cd, 0), u32(cd, static_cast<uint32_t>(data.size())),
        u32(cd, static_cast<uint32_t>(data.size()));
    u16(cd, static_cast<uint32_t>(name.size())), u16(cd, 0), u16(cd, 0), u16(cd, 0), u16(cd, 0);
    u32(cd, 0), u32(cd, off);
    cd += name;
  }
  const auto cd_off = static_cast<uint32_t>(out.size());
  out += cd;
  u32(out, 0x06054b50);
  u16(out, 0), u16(out, 0), u16(out, static_cast<uint32_t>(entries.size())),
      u16(out, static_cast<uint32_t>(entries.size()));
  u32(out, static_cast<uint32_t>(cd.size())), u32(out, cd_off), u16(out, 0);
  return out;
}

std::string bin_unicode(const std::string& s) {
  std::string o = "X";
  const auto n = static_cast<uint32_t>(s.size());
  for (int i = 0; i < 4; ++i) o.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  return o + s;
}

// {"w": _rebuild_tensor_v2(storage('0', numel), offset, (a, b), (s0, s1), False, OrderedDict())}
std::string tensor_pickle(int numel, int offset, int a, int b, int s0, int s1) {
  auto k = [](int v) { return std::string("K") + static_cast<char>(v); };
  std::string p = "\x80\x02}(";
  p += bin_unicode("w");
  p += "ctorch._utils\n_rebuild_tensor_v2\n((";
  p += bin_unicode("storage") + "ctorch\nFloatStorage\n" + bin_unicode("0") + bin_unicode("cpu") +
       k(numel) + "tQ";
  p += k(offset) + k(a) + k(b) + "\x86" + k(s0) + k(s1) + "\x86" + "\x89" +
       "ccollections\nOrderedDict\n)Rt" + "R" + "u.";
  return p;
}

std::string floats(std::initializer_list<float> v) {
  std::string s;
  for (float f : v) s.append(reinterpret_cast<const char*>(&f), 4);
  return s;
}

std::vector<Tensor> read_pt(const std::string& image, const std::string& key = "") {
  return read_torch_checkpoint_memory(image.data(), image.size(), "test.pt", key);
}

TEST(MvTextTorch, ReadsHandmadeCheckpoint) {
  const std::string data = floats({1, 2, 3, 4, 5, 6});
  // Transposed view [2, 2] with strides (1, 2) from offset 1: [[2, 4], [3, 5]].
  const auto ts = read_pt(zip_of({{"archive/data.pkl", tensor_pickle(6, 1, 2, 2, 1, 2)},
                                  {"archive/data/0", data},
                                  {"archive/byteorder", "little"}}));
  ASSERT_EQ(ts.size(), 1u);
  EXPECT_EQ(ts[0].name, "w");
  EXPECT_EQ(ts[0].shape, (std::vector<int64_t>{2, 2}));
  const float* f = ts[0].as<float>();
  EXPECT_EQ(f[0], 2);
  EXPECT_EQ(f[1], 4);
  EXPECT_EQ(f[2], 3);
  EXPECT_EQ(f[3], 5);
}

TEST(MvTextTorch, HostileCheckpointsFailClearly) {
  const std::string data = floats({1, 2, 3, 4});
  auto err = [&](const std::string& image, const std::string& key = "") {
    return error_of([&] { read_pt(image, key); });
  };
  // Shape past the end of the storage.
  EXPECT_NE(
      err(zip_of({{"archive/data.pkl", tensor_pickle(4, 0, 3, 2, 2, 1)}, {"archive/data/0", data}}))
          .find("past the end"),
      std::string::npos);
  // Storage claims more elements than its entry holds.
  EXPECT_NE(
      err(zip_of({{"archive/data.pkl", tensor_pickle(8, 0, 2, 2, 2, 1)}, {"archive/data/0", data}}))
          .find("less than 8"),
      std::string::npos);
  // Missing storage entry.
  EXPECT_NE(err(zip_of({{"archive/data.pkl", tensor_pickle(4, 0, 2, 2, 2, 1)}})).find("data/0"),
            std::string::npos);
  // Missing key.
  EXPECT_NE(
      err(zip_of({{"archive/data.pkl", tensor_pickle(4, 0, 2, 2, 2, 1)}, {"archive/data/0", data}}),
          "model_state")
          .find("no key 'model_state'"),
      std::string::npos);
  // Truncated pickle, unknown opcode, stack underflow.
  std::string p = tensor_pickle(4, 0, 2, 2, 2, 1);
  EXPECT_NE(err(zip_of({{"archive/data.pkl", p.substr(0, p.size() / 2)}, {"archive/data/0", data}}))
                .find("data.pkl"),
            std::string::npos);
  EXPECT_NE(err(zip_of({{"archive/data.pkl", "\x80\x02\xff."}})).find("opcode"), std::string::npos);
  EXPECT_NE(err(zip_of({{"archive/data.pkl", "\x80\x02u."}})).find("MARK"), std::string::npos);
  // Not a zip at all, and an archive without data.pkl.
  EXPECT_NE(err("hello world, this is not a zip archive").find("test.pt"), std::string::npos);
  EXPECT_NE(err(zip_of({{"archive/version", "3"}})).find("data.pkl"), std::string::npos);
  // A list that contains itself does not loop forever.
  EXPECT_NE(err(zip_of({{"archive/data.pkl",
                         "\x80\x02]q\x00h\x00"
                         "a."}}))
                .find("test.pt"),
            std::string::npos);
}

}  // namespace
}  // namespace cachet

namespace cachet {
namespace {

TEST(MiniRegex, DeepGroupRepetitionIsAnErrorNotACrash) {
  std::string s;
  for (int i = 0; i < 100000; ++i) s += "ab";
  EXPECT_THROW(split("(?:ab)+", s), Error);
  // The bound is 1 MiB of stack (about 200 levels in a sanitizer build, thousands in a
  // release build): 150 repetitions of a group always match.
  std::string t;
  for (int i = 0; i < 150; ++i) t += "ab";
  EXPECT_EQ(split("(?:ab)+", t).size(), 1u);
  // Single-character repetition has no such limit.
  EXPECT_EQ(split("\\s+|a+", std::string(200000, 'a')).size(), 1u);
}

TEST(MiniRegex, ExponentialBacktrackingIsAnError) {
  // (a+)+b on 40 a's and no b: 2^40 ways to cut the a's before giving up at each start.
  // A search stops after a number of steps bounded by the text's length, naming where the
  // match it was trying began.
  try {
    split("(a+)+b", std::string(40, 'a'));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("backtracks too much"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("at code point 0"), std::string::npos) << e.what();
  }
  // Each start a little expensive, the search as a whole too much: (a+)+b tried at every one
  // of 3000 starts of runs of 16 a's.
  std::string runs;
  for (int i = 0; i < 200; ++i) runs += std::string(16, 'a') + " ";
  EXPECT_THROW(split("(a+)+b", runs), Error);
  // Short enough, the same pattern is fine: 2^12 ways.
  EXPECT_TRUE(split("(a+)+b", std::string(12, 'a')).empty());
  EXPECT_EQ(split("(a+)+b", std::string(12, 'a') + "b").size(), 1u);
}

}  // namespace
}  // namespace cachet
