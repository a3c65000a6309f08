// cachet serve internals: request parsing and validation, response and SSE formatting, chat
// prompts, the prefix cache (longest prefix, LRU, byte budget), metrics rendering, and the
// scheduler (batched decoding equals decoding alone, cache reuse, cancellation, full queue).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cachet/error.h"
#include "cachet/generate.h"
#include "cachet/recurrent_gemma.h"
#include "cachet/state_impl.h"
#include "cachet/threadpool.h"
#include "cachet/tokenizer.h"
#include "server/api.h"
#include "server/engine.h"
#include "server/metrics.h"
#include "server/prefix_cache.h"
#include "server/speech.h"
#include "text/spm_proto.h"

namespace cachet::server {
namespace {

// ---------------------------------------------------------------------------------------------
// Request parsing

ApiError parse_error(const std::string& body, bool chat, const RequestLimits& lim = {}) {
  try {
    parse_gen_request(parse_body(body), chat, lim);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(0, "");
}

TEST(ServerApi, MalformedBodies) {
  for (const char* b : {"", "{", "{\"a\":}", "nul", "\"text\"", "[1,2]", "42"}) {
    try {
      parse_body(b);
      ADD_FAILURE() << "accepted " << b;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400);
      EXPECT_EQ(e.type, "invalid_request_error");
      EXPECT_EQ(e.code, "invalid_json");
    }
  }
  // Invalid UTF-8 inside a string is malformed JSON too.
  EXPECT_THROW(parse_body("{\"prompt\": \"\xff\xfe\"}"), ApiError);
  EXPECT_TRUE(parse_body("{}").is_object());
}

TEST(ServerApi, CompletionDefaultsAndValues) {
  const auto r = parse_gen_request(parse_body(R"({"model":"m","prompt":"hi"})"), false, {});
  EXPECT_FALSE(r.chat);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt, "hi");
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_EQ(r.max_tokens, -1);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.has_seed);

  const auto s = parse_gen_request(
      parse_body(
          R"({"prompt":["x"],"temperature":0.5,"top_p":0.9,"max_tokens":7,"seed":18446744073709551615,
                    "stop":"END","presence_penalty":1.5,"frequency_penalty":-0.5,"n":1,
                    "stream":true,"stream_options":{"include_usage":true},"logprobs":null,
                    "user":"ignored","max_tokens_extra":{"x":1}})"),
      false, {});
  EXPECT_EQ(s.prompt, "x");
  EXPECT_FLOAT_EQ(s.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(s.sampling.top_p, 0.9f);
  EXPECT_EQ(s.max_tokens, 7);
  EXPECT_TRUE(s.has_seed);
  EXPECT_EQ(s.sampling.seed, 18446744073709551615u);
  // -1 asks for a random seed, as llama.cpp's server takes it
  EXPECT_FALSE(parse_gen_request(parse_body(R"({"prompt":"x","seed":-1})"), false, {}).has_seed);
  EXPECT_EQ(s.stop, std::vector<std::string>{"END"});
  EXPECT_FLOAT_EQ(s.sampling.presence_penalty, 1.5f);
  EXPECT_FLOAT_EQ(s.sampling.frequency_penalty, -0.5f);
  EXPECT_TRUE(s.stream);
  EXPECT_TRUE(s.include_usage);

  const auto ids = parse_gen_request(parse_body(R"({"prompt":[5,6,7]})"), false, {});
  EXPECT_TRUE(ids.prompt_is_ids);
  EXPECT_EQ(ids.prompt_ids, (std::vector<int32_t>{5, 6, 7}));
  const auto nested = parse_gen_request(parse_body(R"({"prompt":[[9]]})"), false, {});
  EXPECT_EQ(nested.prompt_ids, std::vector<int32_t>{9});
}

TEST(ServerApi, LogitBiasAliasesAndFieldsThatChangeNothing) {
  const auto r = parse_gen_request(
      parse_body(R"({"prompt":"x","logit_bias":{"4":-100,"17":2.5},"repeat_penalty":1.3,
                    "response_format":{"type":"text"},"tools":[],"tool_choice":"none",
                    "modalities":["text"],"mirostat":0,"typical_p":1,"ignore_eos":false,
                    "grammar":"","logprobs":false,"user":"u","store":false})"),
      false, {});
  auto bias = r.sampling.logit_bias;
  std::sort(bias.begin(), bias.end());
  ASSERT_EQ(bias.size(), 2u);
  EXPECT_EQ(bias[0], (std::pair<int32_t, float>{4, -100.0f}));
  EXPECT_EQ(bias[1], (std::pair<int32_t, float>{17, 2.5f}));
  EXPECT_FLOAT_EQ(r.sampling.repeat_penalty, 1.3f);
  EXPECT_FALSE(r.ignore_eos);
  EXPECT_TRUE(
      parse_gen_request(parse_body(R"({"prompt":"x","ignore_eos":true})"), false, {}).ignore_eos);
}

TEST(ServerApi, WrongTypesAndValuesNameTheParameter) {
  struct Case {
    const char* body;
    bool chat;
    const char* param;
    const char* code;
  };
  const Case cases[] = {
      {R"({})", false, "prompt", "invalid_value"},
      {R"({"prompt":5})", false, "prompt", "invalid_type"},
      {R"({"prompt":["a","b"]})", false, "prompt", "invalid_value"},
      {R"({"prompt":[]})", false, "prompt", "invalid_value"},
      {R"({"prompt":[1,-2]})", false, "prompt", "invalid_value"},
      {R"({"prompt":[1,"a"]})", false, "prompt[]", "invalid_type"},
      {R"({"prompt":"x","temperature":"hot"})", false, "temperature", "invalid_type"},
      {R"({"prompt":"x","temperature":2.5})", false, "temperature", "invalid_value"},
      {R"({"prompt":"x","top_p":0})", false, "top_p", "invalid_value"},
      {R"({"prompt":"x","max_tokens":0})", false, "max_tokens", "invalid_value"},
      {R"({"prompt":"x","max_tokens":1.5})", false, "max_tokens", "invalid_type"},
      {R"({"prompt":"x","max_tokens":100000})", false, "max_tokens", "invalid_value"},
      {R"({"prompt":"x","n":2})", false, "n", "invalid_value"},
      {R"({"prompt":"x","stream":1})", false, "stream", "invalid_type"},
      {R"({"prompt":"x","stream_options":{"include_usage":true}})", false, "stream_options",
       "invalid_value"},
      {R"({"prompt":"x","stop":["a","b","c","d","e"]})", false, "stop", "invalid_value"},
      {R"({"prompt":"x","stop":[""]})", false, "stop", "invalid_value"},
      {R"({"prompt":"x","stop":{}})", false, "stop", "invalid_type"},
      {R"({"prompt":"x","seed":"1"})", false, "seed", "invalid_type"},
      {R"({"prompt":"x","seed":-3})", false, "seed", "invalid_value"},
      {R"({"prompt":"x","presence_penalty":3})", false, "presence_penalty", "invalid_value"},
      {R"({"prompt":"x","logprobs":3})", false, "logprobs", "invalid_value"},
      // 0 still asks for the sampled token's log probability
      {R"({"prompt":"x","logprobs":0})", false, "logprobs", "invalid_value"},
      {R"({"prompt":"x","logit_bias":[1]})", false, "logit_bias", "invalid_type"},
      {R"({"prompt":"x","logit_bias":{"a":1}})", false, "logit_bias", "invalid_value"},
      {R"({"prompt":"x","logit_bias":{"-1":1}})", false, "logit_bias", "invalid_value"},
      {R"({"prompt":"x","logit_bias":{"4":101}})", false, "logit_bias.4", "invalid_value"},
      {R"({"prompt":"x","logit_bias":{"4":"up"}})", false, "logit_bias.4", "invalid_type"},
      // what would change the output and is not implemented is refused, not ignored
      {R"({"prompt":"x","response_format":{"type":"json_object"}})", false, "response_format",
       "unsupported_parameter"},
      {R"({"prompt":"x","tools":[{"type":"function"}]})", false, "tools", "unsupported_parameter"},
      {R"({"prompt":"x","tool_choice":"required"})", false, "tool_choice", "unsupported_parameter"},
      {R"({"prompt":"x","functions":[{}]})", false, "functions", "unsupported_parameter"},
      {R"({"prompt":"x","modalities":["text","audio"]})", false, "modalities",
       "unsupported_parameter"},
      {R"({"prompt":"x","grammar":"root ::= x"})", false, "grammar", "unsupported_parameter"},
      {R"({"prompt":"x","mirostat":2})", false, "mirostat", "unsupported_parameter"},
      {R"({"prompt":"x","typical_p":0.5})", false, "typical_p", "unsupported_parameter"},
      {R"({"prompt":"x","ignore_eos":1})", false, "ignore_eos", "invalid_type"},
      {R"({"prompt":"x","n_predict":5})", false, "n_predict", "unsupported_parameter"},
      {R"({"prompt":"x","repeat_penalty":0})", false, "repeat_penalty", "invalid_value"},
      {R"({"prompt":"x","echo":true})", false, "echo", "invalid_value"},
      {R"({"prompt":"x","model":7})", false, "model", "invalid_type"},
      {R"({})", true, "messages", "invalid_value"},
      {R"({"messages":{}})", true, "messages", "invalid_type"},
      {R"({"messages":[]})", true, "messages", "invalid_value"},
      {R"({"messages":["hi"]})", true, "messages[0]", "invalid_type"},
      {R"({"messages":[{"content":"x"}]})", true, "messages[0].role", "invalid_value"},
      {R"({"messages":[{"role":"tool","content":"x"}]})", true, "messages[0].role",
       "unsupported_value"},
      {R"({"messages":[{"role":"user","content":5}]})", true, "messages[0].content",
       "invalid_type"},
      {R"({"messages":[{"role":"user"}]})", true, "messages[0].content", "invalid_value"},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", true,
       "messages[0].content[0].type", "unsupported_value"},
      {R"({"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]})", true,
       "messages", "invalid_value"},
      {R"({"messages":[{"role":"user","content":"a"}],"max_completion_tokens":-1})", true,
       "max_completion_tokens", "invalid_value"},
  };
  RequestLimits lim;
  lim.max_tokens = 1000;
  for (const auto& c : cases) {
    const ApiError e = parse_error(c.body, c.chat, lim);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << ": " << e.what();
    EXPECT_EQ(e.code, c.code) << c.body << ": " << e.what();
    EXPECT_EQ(e.type, "invalid_request_error") << c.body;
  }
}

TEST(ServerApi, ChatMessages) {
  const auto r = parse_gen_request(parse_body(R"({"messages":[
      {"role":"developer","content":"be brief"},
      {"role":"user","content":[{"type":"text","text":"he"},{"type":"text","text":"llo"}]},
      {"role":"assistant","content":null},
      {"role":"user","content":"again"}],"max_completion_tokens":9})"),
                                   true, {});
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "he\nllo");  // text parts are lines of one text
  EXPECT_EQ(r.messages[2].role, "assistant");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_EQ(r.max_tokens, 9);
}

TEST(ServerApi, ErrorBody) {
  const json e =
      error_body(ApiError(401, "bad key", "invalid_request_error", "", "invalid_api_key"));
  ASSERT_TRUE(e.contains("error"));
  EXPECT_EQ(e["error"]["message"], "bad key");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(e["error"]["param"].is_null());
  EXPECT_EQ(e["error"]["code"], "invalid_api_key");
}

// ---------------------------------------------------------------------------------------------
// Responses and server-sent events

ResponseMeta meta() {
  return ResponseMeta{"chatcmpl-1", 1700000000, "tiny", "fp_0"};
}

TEST(ServerSse, EventFraming) {
  const std::string ev = sse_event(json{{"a", 1}});
  EXPECT_EQ(ev, "data: {\"a\":1}\n\n");
  EXPECT_STREQ(kSseDone, "data: [DONE]\n\n");
  // Invalid UTF-8 in generated text is replaced, not thrown.
  const std::string bad = "ok\xe2\x82";
  const std::string out = sse_event(chat_chunk(meta(), "", &bad, "", false));
  EXPECT_NE(out.find("ok\xef\xbf\xbd"), std::string::npos) << out;
  EXPECT_EQ(out.substr(out.size() - 2), "\n\n");
  EXPECT_EQ(out.find('\n'), out.size() - 2);  // one line of data
}

TEST(ServerSse, ChatChunks) {
  const std::string empty;
  const json first = chat_chunk(meta(), "assistant", &empty, "", true);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["id"], "chatcmpl-1");
  EXPECT_EQ(first["created"], 1700000000);
  EXPECT_EQ(first["model"], "tiny");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(first["choices"][0]["delta"]["content"], "");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(first.contains("usage"));
  EXPECT_TRUE(first["usage"].is_null());

  const std::string t = "hi";
  const json mid = chat_chunk(meta(), "", &t, "", false);
  EXPECT_FALSE(mid["choices"][0]["delta"].contains("role"));
  EXPECT_EQ(mid["choices"][0]["delta"]["content"], "hi");
  EXPECT_FALSE(mid.contains("usage"));

  const json last = chat_chunk(meta(), "", nullptr, "length", false);
  EXPECT_TRUE(last["choices"][0]["delta"].is_object());
  EXPECT_TRUE(last["choices"][0]["delta"].empty());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");

  Usage u;
  u.prompt_tokens = 10;
  u.completion_tokens = 3;
  u.cached_tokens = 8;
  const json uc = usage_chunk(meta(), true, u);
  EXPECT_TRUE(uc["choices"].is_array());
  EXPECT_TRUE(uc["choices"].empty());
  EXPECT_EQ(uc["usage"]["total_tokens"], 13);
  EXPECT_EQ(uc["usage"]["prompt_tokens_details"]["cached_tokens"], 8);
}

TEST(ServerSse, FullResponses) {
  Usage u;
  u.prompt_tokens = 4;
  u.completion_tokens = 2;
  const json c = chat_response(meta(), "yo", "stop", u);
  EXPECT_EQ(c["object"], "chat.completion");
  EXPECT_EQ(c["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(c["choices"][0]["message"]["content"], "yo");
  EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(c["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(c["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  const json t = completion_response(meta(), "yo", "length", u);
  EXPECT_EQ(t["object"], "text_completion");
  EXPECT_EQ(t["choices"][0]["text"], "yo");
  const json tc = completion_chunk(meta(), "a", "", true);
  EXPECT_EQ(tc["choices"][0]["text"], "a");
  EXPECT_TRUE(tc["usage"].is_null());
}

// ---------------------------------------------------------------------------------------------
// Chat prompts

std::string tokenizer_proto(bool chat_tokens) {
  spm_proto::BuildSpec spec;
  auto add = [&](const std::string& p, float score, int32_t type) {
    spec.pieces.push_back({p, score, type});
  };
  add("<pad>", 0, spm_proto::kControl);
  add("<eos>", 0, spm_proto::kControl);
  add("<bos>", 0, spm_proto::kControl);
  add("<unk>", 0, spm_proto::kUnknown);
  if (chat_tokens) {
    add("<start_of_turn>", 0, spm_proto::kUserDefined);
    add("<end_of_turn>", 0, spm_proto::kUserDefined);
  }
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    add(buf, 0, spm_proto::kByte);
  }
  float score = -1;
  for (const char* p : {"e",  "t",  "a",     "o",
                        "s",  "r",  "u",     "m",
                        "d",  "l",  "\n",    "\xe2\x96\x81",
                        "er", "us", "user",  "model",
                        "he", "ll", "hello", "\xe2\x96\x81w",
                        "or", "ld"})
    add(p, score--, spm_proto::kNormal);
  spec.model_type = 2;
  spec.byte_fallback = true;
  spec.add_dummy_prefix = false;
  spec.pad_id = 0;
  spec.eos_id = 1;
  spec.bos_id = 2;
  spec.unk_id = 3;
  return spm_proto::build(spec);
}

const Tokenizer& gemma_tok() {
  static const Tokenizer t = Tokenizer::from_model_proto(tokenizer_proto(true), "gemma-test");
  return t;
}
const Tokenizer& plain_tok() {
  static const Tokenizer t = Tokenizer::from_model_proto(tokenizer_proto(false), "plain-test");
  return t;
}

bool starts_with(const std::vector<int32_t>& a, const std::vector<int32_t>& prefix) {
  return prefix.size() <= a.size() && std::equal(prefix.begin(), prefix.end(), a.begin());
}

TEST(ServerChatPrompt, GemmaFormatMatchesTheChatTurns) {
  const Tokenizer& tok = gemma_tok();
  const PromptTokens p = chat_prompt(tok, {{"user", "hello"}});
  // The same tokens as `cachet chat` feeds for a first turn.
  EXPECT_EQ(p.ids, chat_turn_tokens(tok, "hello", true));
  ASSERT_FALSE(p.boundaries.empty());
  EXPECT_EQ(p.boundaries.back(), p.ids.size());
  EXPECT_TRUE(p.stop.empty());
  EXPECT_EQ(tok.decode(p.ids), "<start_of_turn>user\nhello<end_of_turn>\n<start_of_turn>model\n");
  // Messages are trimmed, as the chat template's `| trim` does, here and in `cachet chat`
  const PromptTokens padded = chat_prompt(tok, {{"user", " \n hello\t \n"}});
  EXPECT_EQ(padded.ids, p.ids);
  EXPECT_EQ(chat_turn_tokens(tok, "  hello\n", true), p.ids);
  EXPECT_EQ(trim_chat_text(" \t\r\n\f\v"), "");
  EXPECT_EQ(trim_chat_text(" a b "), "a b");
}

TEST(ServerChatPrompt, SharedSystemPromptGivesSharedPrefix) {
  const Tokenizer& tok = gemma_tok();
  const PromptTokens a = chat_prompt(tok, {{"system", "be terse"}, {"user", "hello"}});
  const PromptTokens b = chat_prompt(tok, {{"system", "be terse"}, {"user", "world"}});
  ASSERT_GE(a.boundaries.size(), 2u);
  const size_t sys_end = a.boundaries[0];
  EXPECT_EQ(sys_end, b.boundaries[0]);
  EXPECT_TRUE(
      std::equal(a.ids.begin(), a.ids.begin() + static_cast<ptrdiff_t>(sys_end), b.ids.begin()));
  EXPECT_NE(a.ids, b.ids);
  for (size_t i = 1; i < a.boundaries.size(); ++i) EXPECT_LT(a.boundaries[i - 1], a.boundaries[i]);
}

TEST(ServerChatPrompt, LaterTurnsExtendEarlierPrompts) {
  for (const Tokenizer* tok : {&gemma_tok(), &plain_tok()}) {
    const PromptTokens one = chat_prompt(*tok, {{"user", "hello"}});
    const PromptTokens two =
        chat_prompt(*tok, {{"user", "hello"}, {"assistant", " world"}, {"user", "more"}});
    // The second prompt starts with the first one, then the answer as generated.
    EXPECT_TRUE(starts_with(two.ids, one.ids)) << tok->name();
    std::vector<int32_t> with_answer = one.ids;
    const auto ans = tok->encode(" world");
    with_answer.insert(with_answer.end(), ans.begin(), ans.end());
    EXPECT_TRUE(starts_with(two.ids, with_answer)) << tok->name();
  }
}

TEST(ServerChatPrompt, PlainFormatWithoutChatTokens) {
  const Tokenizer& tok = plain_tok();
  const PromptTokens p =
      chat_prompt(tok, {{"system", "sys"}, {"user", "hello"}, {"assistant", "ok"}, {"user", "x"}});
  EXPECT_EQ(tok.decode(p.ids), "sys\n\nUser: hello\nAssistant: ok\nUser: x\nAssistant:");
  EXPECT_EQ(p.ids.front(), tok.bos_id());
  EXPECT_EQ(p.stop, std::vector<std::string>{"\nUser:"});
  EXPECT_EQ(p.boundaries.back(), p.ids.size());
  EXPECT_EQ(tok.decode(std::vector<int32_t>(
                p.ids.begin(), p.ids.begin() + static_cast<ptrdiff_t>(p.boundaries[0]))),
            "sys\n\n");
}

TEST(ServerChatPrompt, CompletionPrompt) {
  const Tokenizer& tok = gemma_tok();
  GenRequest r;
  r.prompt = "hello";
  const PromptTokens p = completion_prompt(tok, r, tok.vocab_size());
  EXPECT_EQ(p.ids.front(), tok.bos_id());
  EXPECT_EQ(tok.decode(p.ids), "hello");
  r.prompt_is_ids = true;
  r.prompt_ids = {5, 6};
  EXPECT_EQ(completion_prompt(tok, r, tok.vocab_size()).ids, (std::vector<int32_t>{5, 6}));
  r.prompt_ids = {5, static_cast<int32_t>(tok.vocab_size())};
  EXPECT_THROW(completion_prompt(tok, r, tok.vocab_size()), ApiError);
}

// ---------------------------------------------------------------------------------------------
// Prefix cache

class FakeState : public StateImpl {
 public:
  FakeState(int64_t pos, size_t bytes) : pos_(pos), bytes_(bytes) {}
  std::unique_ptr<StateImpl> clone() const override { return std::make_unique<FakeState>(*this); }
  int64_t position() const override { return pos_; }
  void reset() override { pos_ = 0; }
  size_t bytes() const override { return bytes_; }
  uint64_t model_fingerprint() const override { return 7; }
  void save(const std::string&) const override {}
  int64_t pos_;
  size_t bytes_;
};

State fake(int64_t pos, size_t bytes = 1000) {
  return State(std::make_unique<FakeState>(pos, bytes));
}

std::vector<int32_t> toks(std::initializer_list<int32_t> v) {
  return v;
}

TEST(ServerPrefixCache, LongestPrefixWins) {
  PrefixCache c(1 << 20);
  const std::vector<float> lg = {1, 2, 3};
  EXPECT_TRUE(c.insert(toks({1, 2}), fake(2), lg));
  EXPECT_TRUE(c.insert(toks({1, 2, 3, 4}), fake(4), lg));
  EXPECT_TRUE(c.insert(toks({1, 9, 9}), fake(3), lg));
  auto h = c.lookup(toks({1, 2, 3, 4, 5}), 5);
  EXPECT_EQ(h.tokens, 4u);
  EXPECT_EQ(h.state.position(), 4);
  EXPECT_EQ(h.logits, lg);
  h = c.lookup(toks({1, 2, 3, 7}), 4);
  EXPECT_EQ(h.tokens, 2u);
  // max_len bounds the match.
  h = c.lookup(toks({1, 2, 3, 4}), 3);
  EXPECT_EQ(h.tokens, 2u);
  // An exact full match is allowed.
  h = c.lookup(toks({1, 2, 3, 4}), 4);
  EXPECT_EQ(h.tokens, 4u);
  h = c.lookup(toks({5, 1, 2}), 3);
  EXPECT_EQ(h.tokens, 0u);
  EXPECT_FALSE(h.state.valid());
  const auto s = c.stats();
  EXPECT_EQ(s.hits, 4u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hit_tokens, 4u + 2 + 2 + 4);
  EXPECT_EQ(s.entries, 3u);
}

TEST(ServerPrefixCache, LookupReturnsAFork) {
  PrefixCache c(1 << 20);
  c.insert(toks({1, 2}), fake(2), std::vector<float>{0});
  auto h = c.lookup(toks({1, 2}), 2);
  ASSERT_TRUE(h.state.valid());
  h.state.reset();
  EXPECT_EQ(c.lookup(toks({1, 2}), 2).state.position(), 2);
}

TEST(ServerPrefixCache, BudgetAndLruEviction) {
  // Each entry: 1000 state bytes + 4 logit bytes + 4 bytes per token.
  const std::vector<float> lg = {0};
  const size_t entry = 1000 + 4 + 2 * 4;
  PrefixCache c(3 * entry);
  c.insert(toks({1, 1}), fake(2), lg);
  c.insert(toks({2, 2}), fake(2), lg);
  c.insert(toks({3, 3}), fake(2), lg);
  EXPECT_EQ(c.stats().entries, 3u);
  EXPECT_EQ(c.stats().bytes, 3 * entry);
  // Touch {1,1}: {2,2} becomes the least recently used and goes first.
  EXPECT_EQ(c.lookup(toks({1, 1, 5}), 3).tokens, 2u);
  c.insert(toks({4, 4}), fake(2), lg);
  EXPECT_EQ(c.stats().entries, 3u);
  EXPECT_EQ(c.stats().evictions, 1u);
  EXPECT_TRUE(c.contains(toks({1, 1})));
  EXPECT_FALSE(c.contains(toks({2, 2})));
  EXPECT_TRUE(c.contains(toks({3, 3})));
  EXPECT_TRUE(c.contains(toks({4, 4})));
  EXPECT_LE(c.stats().bytes, 3 * entry);
  // Re-inserting existing tokens only touches the entry: {3,3} survives the next insert.
  EXPECT_FALSE(c.insert(toks({3, 3}), fake(2), lg));
  c.insert(toks({5, 5}), fake(2), lg);
  EXPECT_FALSE(c.contains(toks({1, 1})));
  EXPECT_TRUE(c.contains(toks({3, 3})));
  // A big entry evicts as many as needed; one larger than the budget is refused.
  EXPECT_TRUE(c.insert(toks({6, 6}), fake(2, 2 * 1000 + 500), lg));
  EXPECT_LE(c.stats().bytes, 3 * entry);
  EXPECT_EQ(c.stats().entries, 1u);
  EXPECT_FALSE(c.insert(toks({7, 7}), fake(2, 4 * entry), lg));
  EXPECT_FALSE(c.contains(toks({7, 7})));
  EXPECT_TRUE(c.contains(toks({6, 6})));
}

TEST(ServerPrefixCache, EntryLimitAndZeroBudget) {
  PrefixCache c(1 << 20, 2);
  const std::vector<float> lg = {0};
  c.insert(toks({1}), fake(1), lg);
  c.insert(toks({2}), fake(1), lg);
  c.insert(toks({3}), fake(1), lg);
  EXPECT_EQ(c.stats().entries, 2u);
  EXPECT_FALSE(c.contains(toks({1})));
  PrefixCache off(0);
  EXPECT_FALSE(off.insert(toks({1}), fake(1), lg));
  EXPECT_EQ(off.lookup(toks({1}), 1).tokens, 0u);
  EXPECT_FALSE(off.insert(toks({}), fake(1), lg));
}

// ---------------------------------------------------------------------------------------------
// Metrics

TEST(ServerMetrics, PrometheusText) {
  Metrics m;
  m.add("cachet_requests_total", "endpoint=\"/health\",status=\"200\"");
  m.add("cachet_requests_total", "endpoint=\"/health\",status=\"200\"");
  m.add("cachet_generated_tokens_total", "", 5);
  m.observe("cachet_request_duration_seconds", 0.003);
  m.observe("cachet_request_duration_seconds", 0.2);
  m.observe("cachet_request_duration_seconds", 1000);
  EXPECT_EQ(m.get("cachet_requests_total", "endpoint=\"/health\",status=\"200\""), 2);
  const std::string t = m.render({{"cachet_queue_depth", "waiting", "gauge", 3}});
  EXPECT_NE(t.find("# TYPE cachet_requests_total counter\n"), std::string::npos);
  EXPECT_NE(t.find("cachet_requests_total{endpoint=\"/health\",status=\"200\"} 2\n"),
            std::string::npos);
  EXPECT_NE(t.find("cachet_generated_tokens_total 5\n"), std::string::npos);
  EXPECT_NE(t.find("# TYPE cachet_request_duration_seconds histogram\n"), std::string::npos);
  EXPECT_NE(t.find("cachet_request_duration_seconds_bucket{le=\"0.005\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("cachet_request_duration_seconds_bucket{le=\"0.25\"} 2\n"), std::string::npos);
  EXPECT_NE(t.find("cachet_request_duration_seconds_bucket{le=\"120\"} 2\n"), std::string::npos);
  EXPECT_NE(t.find("cachet_request_duration_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(t.find("cachet_request_duration_seconds_count 3\n"), std::string::npos);
  EXPECT_NE(t.find("# TYPE cachet_queue_depth gauge\ncachet_queue_depth 3\n"), std::string::npos);
  EXPECT_EQ(label_escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(ServerSpeech, WavEncoding) {
  const std::vector<float> s = {0.0f, 1.0f, -1.0f, 0.5f, 2.0f};
  const std::string raw = encode_pcm16_raw(s);
  ASSERT_EQ(raw.size(), 10u);
  auto at = [&](const std::string& b, size_t i) {
    return static_cast<int16_t>(static_cast<uint8_t>(b[i]) | (static_cast<uint8_t>(b[i + 1]) << 8));
  };
  EXPECT_EQ(at(raw, 0), 0);
  EXPECT_EQ(at(raw, 2), 32767);
  EXPECT_EQ(at(raw, 4), -32767);
  EXPECT_EQ(at(raw, 6), 16384);
  EXPECT_EQ(at(raw, 8), 32767);  // clamped
  const std::string wav = encode_pcm16_wav(s, 24000);
  ASSERT_EQ(wav.size(), 44u + 10);
  EXPECT_EQ(wav.substr(0, 4), "RIFF");
  EXPECT_EQ(wav.substr(8, 8), "WAVEfmt ");
  EXPECT_EQ(wav.substr(36, 4), "data");
  EXPECT_EQ(wav.substr(44), raw);
}

// ---------------------------------------------------------------------------------------------
// Scheduler

struct Tiny {
  Tiny() : tok(gemma_tok()) {
    static ThreadPool pool(1);
    RecurrentGemmaConfig c;
    c.vocab_size = tok.vocab_size();
    c.hidden_size = 32;
    c.intermediate_size = 96;
    c.num_hidden_layers = 3;
    c.num_attention_heads = 2;
    c.num_key_value_heads = 1;
    c.head_dim = 16;
    c.lru_width = 32;
    c.attention_window_size = 6;
    c.conv1d_width = 4;
    c.block_types = {"recurrent", "attention", "recurrent"};
    model = make_recurrent_gemma(random_recurrent_gemma_files(c, 5, 0.3f), &pool);
  }
  const Tokenizer& tok;
  std::unique_ptr<LanguageModel> model;
};

std::string reference_text(Tiny& t, const std::vector<int32_t>& prompt, int64_t n) {
  State st = t.model->new_state();
  SamplingParams sp;
  sp.temperature = 0;
  Sampler sampler(sp);
  GenerateOptions o;
  o.max_tokens = n;
  std::string out;
  generate(*t.model, st, t.tok, sampler, prompt, o, [&](std::string_view s) {
    out += s;
    return true;
  });
  return out;
}

TEST(Generate, AChatTurnCountsThePendingTokenOnceForThePenalties) {
  // A reply cut short leaves its last token pending; the next turn starts with it. The
  // sampler recorded it when it was drawn, so it must not record it again.
  Tiny t;
  SamplingParams sp;
  sp.temperature = 1;
  sp.top_k = 0;
  sp.top_p = 1;
  sp.frequency_penalty = 0.7f;
  sp.repeat_last_n = -1;
  sp.seed = 1;
  Sampler sampler(sp);
  State st = t.model->new_state();
  std::vector<int32_t> seq = {t.tok.bos_id()};
  for (int32_t id : t.tok.encode("hello")) seq.push_back(id);
  GenerateOptions o;
  o.max_tokens = 3;
  const GenerateResult r = generate(*t.model, st, t.tok, sampler, seq, o, nullptr);
  ASSERT_GE(r.pending, 0);
  seq.insert(seq.end(), r.tokens.begin(), r.tokens.end());
  std::vector<int32_t> turn = {r.pending};
  for (int32_t id : t.tok.encode("user")) turn.push_back(id);
  o.max_tokens = 0;
  o.prompt_accepted = 1;
  generate(*t.model, st, t.tok, sampler, turn, o, nullptr);
  seq.insert(seq.end(), turn.begin() + 1, turn.end());
  Sampler once(sp);  // every token of the conversation recorded once
  once.accept(seq);
  std::vector<float> logits(static_cast<size_t>(t.tok.vocab_size()));
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = 0.01f * static_cast<float>(i % 7);
  const auto got = sampler.distribution(logits), want = once.distribution(logits);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].id, want[i].id) << i;
    EXPECT_EQ(got[i].p, want[i].p) << i;
  }
}

std::shared_ptr<Job> greedy_job(const std::vector<int32_t>& prompt, int64_t n) {
  auto j = std::make_shared<Job>();
  j->prompt = prompt;
  j->boundaries = {prompt.size()};
  j->sampling.temperature = 0;
  j->max_tokens = n;
  return j;
}

std::string collect(Job& j) {
  std::string text, chunk;
  while (j.wait_text(chunk, std::chrono::milliseconds(1000))) text += chunk;
  return text + chunk;
}

TEST(ServerEngine, BatchedDecodingEqualsDecodingAlone) {
  Tiny t;
  Metrics m;
  EngineOptions o;
  o.parallel = 4;
  o.prefill_chunk = 5;  // several steps of prefill, interleaved with decoding
  Engine e(*t.model, t.tok, o, m);
  std::vector<std::vector<int32_t>> prompts;
  for (const char* s : {"hello world", "user model", "a", "the rest of it all"}) {
    std::vector<int32_t> p = {t.tok.bos_id()};
    const auto v = t.tok.encode(s);
    p.insert(p.end(), v.begin(), v.end());
    prompts.push_back(p);
  }
  // The model's forward must not run on two threads at once: the references come first,
  // while the engine is idle.
  std::vector<std::string> refs;
  for (size_t i = 0; i < prompts.size(); ++i)
    refs.push_back(reference_text(t, prompts[i], 10 + static_cast<int64_t>(i) * 3));
  const std::string ref_again = reference_text(t, prompts[3], 12);
  std::vector<std::shared_ptr<Job>> jobs;
  for (size_t i = 0; i < prompts.size(); ++i) {
    jobs.push_back(greedy_job(prompts[i], 10 + static_cast<int64_t>(i) * 3));
    ASSERT_EQ(e.submit(jobs.back()), Engine::Admit::Ok);
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string text = collect(*jobs[i]);
    EXPECT_TRUE(jobs[i]->error.empty()) << jobs[i]->error;
    EXPECT_EQ(jobs[i]->finish_reason, "length");
    EXPECT_EQ(jobs[i]->completion_tokens, 10 + static_cast<int64_t>(i) * 3);
    EXPECT_FALSE(text.empty()) << i;
    EXPECT_EQ(text, refs[i]) << i;
  }
  // Whether steps were shared depends on timing (a tiny model may finish a job before the
  // next is submitted), so only the accounting is checked here.
  EXPECT_GE(m.get("cachet_decode_rows_total"), m.get("cachet_decode_steps_total"));

  // The same prompt again starts from the cached state and gives the same text.
  auto again = greedy_job(prompts[3], 12);
  ASSERT_EQ(e.submit(again), Engine::Admit::Ok);
  EXPECT_EQ(collect(*again), ref_again);
  EXPECT_EQ(again->cached_tokens, static_cast<int64_t>(prompts[3].size()));
  EXPECT_GE(e.cache().stats().hits, 1u);

  // A longer prompt that extends a finished generation reuses its final state.
  std::vector<int32_t> longer = prompts[0];
  longer.push_back(7);
  const std::string ref_ext = reference_text(t, longer, 4);
  auto ext = greedy_job(longer, 4);
  ASSERT_EQ(e.submit(ext), Engine::Admit::Ok);
  EXPECT_EQ(collect(*ext), ref_ext);
  EXPECT_EQ(ext->cached_tokens, static_cast<int64_t>(prompts[0].size()));
}

TEST(ServerEngine, StopStrings) {
  Tiny t;
  Metrics m;
  Engine e(*t.model, t.tok, EngineOptions{}, m);
  const std::vector<int32_t> prompt = {t.tok.bos_id(), 20, 21};
  const std::string full = reference_text(t, prompt, 30);
  ASSERT_GE(full.size(), 4u);
  auto j = greedy_job(prompt, 30);
  j->stop = {full.substr(2, 2)};
  ASSERT_EQ(e.submit(j), Engine::Admit::Ok);
  const std::string text = collect(*j);
  EXPECT_EQ(j->finish_reason, "stop");
  EXPECT_EQ(text, full.substr(0, full.find(j->stop[0])));
}

TEST(ServerEngine, CancelFreesTheSlotAndFullQueueRefuses) {
  Tiny t;
  Metrics m;
  EngineOptions o;
  o.parallel = 1;
  o.queue_size = 1;
  o.ctx = 1 << 20;
  Engine e(*t.model, t.tok, o, m);
  auto long1 = greedy_job({t.tok.bos_id(), 9}, 1 << 20);
  auto long2 = greedy_job({t.tok.bos_id(), 10}, 1 << 20);
  auto third = greedy_job({t.tok.bos_id(), 11}, 3);
  ASSERT_EQ(e.submit(long1), Engine::Admit::Ok);
  // Wait until it holds the slot and produces text.
  std::string chunk;
  while (chunk.empty()) ASSERT_TRUE(long1->wait_text(chunk, std::chrono::seconds(10)));
  ASSERT_EQ(e.submit(long2), Engine::Admit::Ok);  // waits in the queue
  EXPECT_EQ(e.submit(third), Engine::Admit::QueueFull);
  EXPECT_EQ(e.queue_depth(), 1u);
  long1->cancelled = true;
  collect(*long1);
  EXPECT_EQ(long1->error, "cancelled");
  // long2 gets the slot.
  chunk.clear();
  while (chunk.empty()) ASSERT_TRUE(long2->wait_text(chunk, std::chrono::seconds(10)));
  EXPECT_EQ(e.queue_depth(), 0u);
  EXPECT_EQ(m.get("cachet_cancelled_total"), 1);
  // Ending everything finishes the active request cleanly and refuses new ones.
  e.end_all("stopping");
  collect(*long2);
  EXPECT_EQ(long2->finish_reason, "length");
  EXPECT_TRUE(long2->error.empty());
  EXPECT_EQ(e.submit(third), Engine::Admit::Stopping);
  for (int i = 0; i < 200 && !e.idle(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(e.idle());
}

TEST(ServerEngine, RequestTimeLimit) {
  Tiny t;
  Metrics m;
  EngineOptions o;
  o.ctx = 1 << 20;
  Engine e(*t.model, t.tok, o, m);
  auto j = greedy_job({t.tok.bos_id(), 20}, 1 << 20);
  j->deadline = Clock::now() + std::chrono::milliseconds(50);
  ASSERT_EQ(e.submit(j), Engine::Admit::Ok);
  collect(*j);
  // Ended by the deadline, as a clean "length" finish (or before its first token, an error).
  EXPECT_TRUE(j->finish_reason == "length" || !j->error.empty());
  EXPECT_LT(j->completion_tokens, 1 << 20);
  EXPECT_EQ(m.get("cachet_timeouts_total"), 1);
}

TEST(ServerEngine, ContextLimitEndsWithLength) {
  Tiny t;
  Metrics m;
  EngineOptions o;
  o.ctx = 8;
  Engine e(*t.model, t.tok, o, m);
  auto j = greedy_job({t.tok.bos_id(), 20, 21}, 100);
  ASSERT_EQ(e.submit(j), Engine::Admit::Ok);
  collect(*j);
  EXPECT_EQ(j->finish_reason, "length");
  // 3 prompt tokens + 5 fed generated tokens fill 8 positions; one more is sampled.
  EXPECT_EQ(j->completion_tokens, 6);
}

}  // namespace
}  // namespace cachet::server
