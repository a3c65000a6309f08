// The OpenAI-compatible request and response formats of `cachet serve`: parsing and validation
// of completion and chat requests, prompt building in the Gemma chat format, response bodies,
// server-sent-event framing and error objects.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cachet/sampler.h"

namespace cachet {
class Tokenizer;
}

namespace cachet::server {

using json = nlohmann::json;

// An error answered to the client as {"error": {"message", "type", "param", "code"}}.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string type = "invalid_request_error",
           std::string param = "", std::string code = "")
      : std::runtime_error(message),
        message(message),
        status(status),
        type(std::move(type)),
        param(std::move(param)),
        code(std::move(code)) {}
  std::string message;  // whole: what() ends at the first NUL a client's value may hold
  int status;
  std::string type, param, code;
};

// A request's "seed": a whole number from 0 to 2^64 - 1 (an integral float too), or -1 for a
// random one (nullopt); anything else is a 400 naming the parameter.
std::optional<uint64_t> get_seed(const json& v);

// {"error": {...}}; empty param / code become null.
json error_body(const std::string& message, const std::string& type, const std::string& param,
                const std::string& code);
json error_body(const ApiError& e);

// Parses a request body; malformed JSON or a body that is not an object is a 400.
json parse_body(const std::string& body);

struct ChatMessage {
  std::string role;  // system (developer maps here), user, assistant
  std::string content;
};

struct RequestLimits {
  int64_t max_tokens = 4096;     // largest max_tokens accepted
  size_t max_stop = 4;           // stop strings
  size_t max_stop_bytes = 1024;  // bytes of one stop string
  size_t max_messages = 4096;    // chat messages
};

struct GenRequest {
  bool chat = false;
  std::string model;
  // completions: the prompt text, or token ids when prompt_is_ids
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  bool prompt_is_ids = false;
  std::vector<ChatMessage> messages;  // chat
  SamplingParams sampling;
  bool has_seed = false;
  int64_t max_tokens = -1;  // -1: not given
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  bool ignore_eos = false;  // llama.cpp's: EOS and <end_of_turn> are never sampled
};

// Validates and reads a /v1/completions (chat = false) or /v1/chat/completions body. Wrong
// types and values are ApiErrors (400) naming the parameter. Fields that would change the
// output and are not implemented (tools, response_format beyond text, logprobs, n > 1, echo,
// llama.cpp's grammar and mirostat, ...) are refused; other unknown fields are ignored.
GenRequest parse_gen_request(const json& body, bool chat, const RequestLimits& limits);

struct PromptTokens {
  std::vector<int32_t> ids;
  // Token counts at which the prompt reaches a natural boundary (end of the system text, end
  // of each turn, end of the prompt), ascending; the last one is ids.size().
  std::vector<size_t> boundaries;
  // Stop strings the format itself needs (the plain-text chat format stops at a new turn).
  std::vector<std::string> stop;
};

// Gemma chat format: <bos>, then per user turn
//   <start_of_turn>user\n{system text}\n\n{content}<end_of_turn>\n
// (system and developer messages are put at the start of the next user turn), per assistant turn
//   <start_of_turn>model\n{content}<end_of_turn>\n
// and finally <start_of_turn>model\n. Each segment is tokenized on its own so that shared leading
// messages give the same leading tokens. The last message must be a user message.
// Tokenizers without <start_of_turn>/<end_of_turn> get a plain-text format instead:
//   <bos>{system}\n\nUser: {content}\nAssistant: {content}\n ... User: {content}\nAssistant:
// (an assistant's content is appended to "Assistant:" as given when it starts with a space or a
// newline, else after one space)
// with "\nUser:" as a stop string.
PromptTokens chat_prompt(const Tokenizer& tok, const std::vector<ChatMessage>& messages);
// <bos> + the text, or the given ids (checked against vocab).
PromptTokens completion_prompt(const Tokenizer& tok, const GenRequest& req, int64_t vocab);

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
};
json usage_json(const Usage& u);

// Identity of one response: id, creation time, model name, system fingerprint.
struct ResponseMeta {
  std::string id;
  int64_t created = 0;
  std::string model;
  std::string fingerprint;
};

// A full (non-streamed) response.
json chat_response(const ResponseMeta& m, const std::string& text, const std::string& finish,
                   const Usage& u);
json completion_response(const ResponseMeta& m, const std::string& text, const std::string& finish,
                         const Usage& u);

// One streamed chunk. role: the first chat chunk's role ("" for none); finish: "" for null.
// with_usage: adds "usage": null (stream_options.include_usage asks every chunk to carry it).
json chat_chunk(const ResponseMeta& m, const std::string& role, const std::string* content,
                const std::string& finish, bool with_usage);
json completion_chunk(const ResponseMeta& m, const std::string& text, const std::string& finish,
                      bool with_usage);
// The final usage chunk: empty choices and the counts.
json usage_chunk(const ResponseMeta& m, bool chat, const Usage& u);

// "data: {json}\n\n" (invalid UTF-8 in strings is replaced by U+FFFD).
std::string sse_event(const json& j);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";
// JSON text with invalid UTF-8 replaced.
std::string dump(const json& j);
// A value quoted back in an error message, cut to 40 bytes of whole characters (a request may
// send megabytes where a word belongs)
std::string excerpt(const std::string& s);

}  // namespace cachet::server
