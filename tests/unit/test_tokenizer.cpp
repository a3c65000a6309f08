// Tokenizer on a hand-built SentencePiece model: loading, GGUF round trip, streaming
// detokenizer, stop strings and the chat format.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "cachet/error.h"
#include "cachet/generate.h"
#include "cachet/gguf.h"
#include "cachet/tokenizer.h"
#include "text/spm_proto.h"

namespace cachet {
namespace {

// A small BPE vocabulary with byte fallback: controls, <unk>, chat tokens, 256 byte pieces and
// a few merges.
std::string test_model(bool dummy_prefix) {
  spm_proto::BuildSpec spec;
  auto add = [&](const std::string& p, float score, int32_t type) {
    spec.pieces.push_back({p, score, type});
  };
  add("<pad>", 0, spm_proto::kControl);
  add("<eos>", 0, spm_proto::kControl);
  add("<bos>", 0, spm_proto::kControl);
  add("<unk>", 0, spm_proto::kUnknown);
  add("<start_of_turn>", 0, spm_proto::kUserDefined);
  add("<end_of_turn>", 0, spm_proto::kUserDefined);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    add(buf, 0, spm_proto::kByte);
  }
  const char* normal[] = {"\xe2\x96\x81",
                          "a",
                          "b",
                          "c",
                          "\xe2\x96\x81"
                          "a",
                          "ab",
                          "abc",
                          "h",
                          "e",
                          "l",
                          "o",
                          "he",
                          "ll",
                          "llo",
                          "hello",
                          "\xe2\x96\x81"
                          "hello",
                          "\xe2\x96\x81\xe2\x96\x81",
                          "\xc3\xa9",
                          "\xe6\x97\xa5",
                          "\n",
                          "u",
                          "s",
                          "r",
                          "m",
                          "d",
                          "user",
                          "model",
                          "x"};
  float score = -1;
  for (const char* p : normal) add(p, score--, spm_proto::kNormal);
  spec.model_type = 2;
  spec.byte_fallback = true;
  spec.add_dummy_prefix = dummy_prefix;
  spec.pad_id = 0;
  spec.eos_id = 1;
  spec.bos_id = 2;
  spec.unk_id = 3;
  return spm_proto::build(spec);
}

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t j = 1; j < n; ++j)
      if ((static_cast<unsigned char>(s[i + j]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

TEST(Tokenizer, LoadsHandBuiltModel) {
  const Tokenizer tok = Tokenizer::from_model_proto(test_model(false), "test");
  EXPECT_EQ(tok.vocab_size(), 6 + 256 + 28);
  EXPECT_EQ(tok.pad_id(), 0);
  EXPECT_EQ(tok.eos_id(), 1);
  EXPECT_EQ(tok.bos_id(), 2);
  EXPECT_EQ(tok.unk_id(), 3);
  EXPECT_EQ(tok.start_of_turn_id(), 4);
  EXPECT_EQ(tok.end_of_turn_id(), 5);
  EXPECT_TRUE(tok.is_byte(6));
  EXPECT_EQ(tok.byte_value(6 + 0xE2), 0xE2);
  EXPECT_FALSE(tok.is_byte(4));
  EXPECT_TRUE(tok.is_control(2));
  EXPECT_EQ(tok.piece_to_id("hello"), tok.piece_to_id("hello"));
  EXPECT_GE(tok.piece_to_id("hello"), 262);
  EXPECT_EQ(tok.piece_to_id("not-a-piece"), -1);
  EXPECT_EQ(tok.id_to_piece(1), "<eos>");
  EXPECT_THROW(tok.id_to_piece(100000), Error);
}

TEST(Tokenizer, ControlTokensWrittenInAPrompt) {
  const Tokenizer tok = Tokenizer::from_model_proto(test_model(false), "test");
  auto cat = [](std::initializer_list<std::vector<int32_t>> parts) {
    std::vector<int32_t> v;
    for (const auto& p : parts) v.insert(v.end(), p.begin(), p.end());
    return v;
  };
  // <bos> and <eos> in the text are those tokens; what is between is encoded as before
  EXPECT_EQ(tok.encode_with_controls("<bos>hello<eos>\nabc"),
            cat({{2}, tok.encode("hello"), {1}, tok.encode("\nabc")}));
  EXPECT_EQ(tok.encode_with_controls("<bos><bos>"), (std::vector<int32_t>{2, 2}));
  // Text without them, or with a broken one, is what encode() gives
  for (const char* t : {"hello abc", "<bo s>hello", "<bos", "", "<unk>x"})
    EXPECT_EQ(tok.encode_with_controls(t), tok.encode(t)) << t;
  // encode() itself leaves the text to SentencePiece
  EXPECT_NE(tok.encode("<bos>hello"), tok.encode_with_controls("<bos>hello"));
}

TEST(Tokenizer, EncodeDecodeRoundTrip) {
  for (bool dummy : {false, true}) {
    const Tokenizer tok = Tokenizer::from_model_proto(test_model(dummy), "test");
    for (const std::string s : {"hello abc", "abc  hello\n", "\xe6\x97\xa5\xe6\x9c\xac",
                                "caf\xc3\xa9 \xf0\x9f\x98\x80!", "<start_of_turn>user\nx"}) {
      const auto ids = tok.encode(s);
      EXPECT_EQ(tok.decode(ids), s) << s;
    }
    // Characters outside the vocabulary use byte pieces.
    const auto ids = tok.encode("\xf0\x9f\x98\x80");
    ASSERT_FALSE(ids.empty());
    EXPECT_TRUE(tok.is_byte(ids.back()));
    // The chat marker is one token.
    const auto chat = tok.encode("<start_of_turn>");
    EXPECT_NE(std::find(chat.begin(), chat.end(), 4), chat.end());
  }
}

TEST(Tokenizer, DecodeRejectsBadIds) {
  const Tokenizer tok = Tokenizer::from_model_proto(test_model(false), "test");
  const int32_t bad[] = {5, -1};
  EXPECT_THROW(tok.decode(bad), Error);
  const int32_t big[] = {5, 1 << 20};
  EXPECT_THROW(tok.decode(big), Error);
  StreamDecoder dec(tok);
  EXPECT_THROW(dec.push(-3), Error);
}

TEST(Tokenizer, RejectsGarbage) {
  EXPECT_THROW(Tokenizer::from_model_proto("", "x"), Error);
  EXPECT_THROW(Tokenizer::from_model_proto(std::string("\x0a\xff\xff\xff\x0f", 5), "x"), Error);
  EXPECT_THROW(Tokenizer::from_path("/nonexistent/dir/tokenizer.model"), Error);
}

TEST(Tokenizer, StreamingMatchesDecodeOnRandomIds) {
  std::mt19937 rng(1234);
  for (bool dummy : {false, true}) {
    const Tokenizer tok = Tokenizer::from_model_proto(test_model(dummy), "test");
    const int32_t n = static_cast<int32_t>(tok.vocab_size());
    std::vector<int32_t> lead, cont;
    for (int b = 0xC0; b < 0x100; ++b) lead.push_back(6 + b);
    for (int b = 0x80; b < 0xC0; ++b) cont.push_back(6 + b);
    const int32_t space = tok.piece_to_id("\xe2\x96\x81");
    const int32_t space_a = tok.piece_to_id(
        "\xe2\x96\x81"
        "a");
    for (int trial = 0; trial < 2000; ++trial) {
      std::vector<int32_t> ids;
      const int len = 1 + static_cast<int>(rng() % 24);
      for (int i = 0; i < len; ++i) {
        const unsigned r = rng() % 100;
        if (r < 25) {
          ids.push_back(lead[rng() % lead.size()]);
          const int k = static_cast<int>(rng() % 4);
          for (int j = 0; j < k; ++j) ids.push_back(cont[rng() % cont.size()]);
        } else if (r < 35) {
          ids.push_back(6 + static_cast<int32_t>(rng() % 256));
        } else if (r < 50) {
          ids.push_back(rng() % 2 ? space : space_a);
        } else if (r < 58) {
          ids.push_back(static_cast<int32_t>(rng() % 4));
        } else {
          ids.push_back(static_cast<int32_t>(rng() % n));
        }
      }
      StreamDecoder dec(tok);
      std::string streamed;
      for (int32_t id : ids) {
        const std::string chunk = dec.push(id);
        ASSERT_TRUE(valid_utf8(chunk)) << "trial " << trial;
        streamed += chunk;
      }
      streamed += dec.finish();
      ASSERT_EQ(streamed, tok.decode(ids)) << "trial " << trial;
    }
  }
}

TEST(Tokenizer, StreamingHoldsIncompleteCharacters) {
  const Tokenizer tok = Tokenizer::from_model_proto(test_model(false), "test");
  StreamDecoder dec(tok);
  // U+20AC (euro sign) as three byte pieces.
  EXPECT_EQ(dec.push(6 + 0xE2), "");
  EXPECT_EQ(dec.push(6 + 0x82), "");
  EXPECT_EQ(dec.push(6 + 0xAC), "\xe2\x82\xac");
  EXPECT_EQ(dec.push(tok.piece_to_id("hello")), "hello");
  EXPECT_EQ(dec.push(6 + 0xF0), "");
  EXPECT_EQ(dec.finish(), "\xef\xbf\xbd");  // an incomplete character decodes to U+FFFD
}

TEST(Tokenizer, GgufRoundTrip) {
  const std::string proto = test_model(false);
  const Tokenizer ref = Tokenizer::from_model_proto(proto, "test");
  GgufWriter w;
  w.add_string("general.architecture", "recurrent_gemma");
  write_tokenizer_to_gguf(w, proto);
  const auto bytes = w.to_bytes();
  const auto g = GgufFile::from_memory(bytes.data(), bytes.size(), "mem.gguf");
  EXPECT_EQ(g->get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(g->get_int("tokenizer.ggml.bos_token_id"), 2);
  EXPECT_EQ(g->get_int("tokenizer.ggml.eos_token_id"), 1);
  EXPECT_EQ(g->get_int("tokenizer.ggml.padding_token_id"), 0);
  EXPECT_EQ(g->get_int("tokenizer.ggml.unknown_token_id"), 3);
  const auto tokens = g->get_strings("tokenizer.ggml.tokens");
  ASSERT_EQ(static_cast<int64_t>(tokens.size()), ref.vocab_size());
  EXPECT_EQ(tokens[6 + 0x41], "<0x41>");
  const auto types = g->get_i32_array("tokenizer.ggml.token_type");
  EXPECT_EQ(types[0], 3);
  EXPECT_EQ(types[3], 2);
  EXPECT_EQ(types[4], 4);
  EXPECT_EQ(types[6], 6);
  EXPECT_EQ(types[262], 1);

  const Tokenizer a = Tokenizer::from_gguf(*g);
  EXPECT_EQ(a.model_proto(), ref.model_proto());

  // Only the llama.cpp keys: the model is rebuilt from the vocabulary.
  GgufWriter w2;
  for (const auto& [k, v] : g->metadata())
    if (k != "tokenizer.sentencepiece.model") w2.add(k, v);
  const auto bytes2 = w2.to_bytes();
  const auto g2 = GgufFile::from_memory(bytes2.data(), bytes2.size(), "mem2.gguf");
  const Tokenizer b = Tokenizer::from_gguf(*g2);
  EXPECT_EQ(b.vocab_size(), ref.vocab_size());
  EXPECT_EQ(b.bos_id(), 2);
  EXPECT_EQ(b.eos_id(), 1);
  for (const std::string s : {"hello abc", "  hello\n\nab", "caf\xc3\xa9 \xf0\x9f\x98\x80",
                              "<start_of_turn>user\nx<end_of_turn>"}) {
    EXPECT_EQ(b.encode(s), ref.encode(s)) << s;
    EXPECT_EQ(a.encode(s), ref.encode(s)) << s;
  }

  // No tokenizer at all.
  GgufWriter w3;
  w3.add_string("general.architecture", "recurrent_gemma");
  const auto bytes3 = w3.to_bytes();
  const auto g3 = GgufFile::from_memory(bytes3.data(), bytes3.size(), "none.gguf");
  try {
    Tokenizer::from_gguf(*g3);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("none.gguf"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no tokenizer"), std::string::npos) << e.what();
  }
}

TEST(StopMatcher, HoldsPrefixesAndStops) {
  StopMatcher m({"</s>", "STOP"});
  EXPECT_EQ(m.push("hello <"), "hello ");
  EXPECT_EQ(m.push("/"), "");
  EXPECT_EQ(m.push("x"), "</x");
  EXPECT_EQ(m.push(" ST"), " ");
  EXPECT_EQ(m.push("OP and more"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), "STOP");
  EXPECT_EQ(m.push("later"), "");
  EXPECT_EQ(m.finish(), "");

  StopMatcher n({"abc"});
  EXPECT_EQ(n.push("xxab"), "xx");
  EXPECT_FALSE(n.stopped());
  EXPECT_EQ(n.finish(), "ab");

  StopMatcher none({});
  EXPECT_EQ(none.push("anything"), "anything");

  StopMatcher inside({"\n\n"});
  EXPECT_EQ(inside.push("a\n\nb"), "a");
  EXPECT_TRUE(inside.stopped());
}

TEST(ChatFormat, GemmaTurns) {
  const Tokenizer tok = Tokenizer::from_model_proto(test_model(false), "test");
  const auto first = chat_turn_tokens(tok, "hello", true);
  EXPECT_EQ(first.front(), tok.bos_id());
  EXPECT_EQ(first[1], tok.start_of_turn_id());
  EXPECT_EQ(tok.decode(first), "<start_of_turn>user\nhello<end_of_turn>\n<start_of_turn>model\n");
  const auto next = chat_turn_tokens(tok, "abc", false);
  EXPECT_EQ(next.front(), tok.end_of_turn_id());
  EXPECT_EQ(tok.decode(next),
            "<end_of_turn>\n<start_of_turn>user\nabc<end_of_turn>\n<start_of_turn>model\n");
  const auto stops = chat_stop_tokens(tok);
  EXPECT_EQ(stops, (std::vector<int32_t>{1, 5}));
}

}  // namespace
}  // namespace cachet
