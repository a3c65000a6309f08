#include "server/api.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "cachet/generate.h"
#include "cachet/model_files.h"
#include "cachet/tokenizer.h"

namespace cachet::server {

json error_body(const std::string& message, const std::string& type, const std::string& param,
                const std::string& code) {
  json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) e["param"] = param;
  if (!code.empty()) e["code"] = code;
  return json{{"error", std::move(e)}};
}

json error_body(const ApiError& e) {
  return error_body(e.message, e.type, e.param, e.code);
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string excerpt(const std::string& s) {
  constexpr size_t kMax = 40;
  if (s.size() <= kMax) return s;
  size_t n = kMax;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // whole characters
  return s.substr(0, n) + "... (" + std::to_string(s.size()) + " bytes)";
}

json parse_body(const std::string& body) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {  // a syntax error, or a number past a double
    throw ApiError(400,
                   std::string("the request body is not valid JSON (") + e.what() +
                       "); send a JSON object with Content-Type: application/json",
                   "invalid_request_error", "", "invalid_json");
  }
  if (!j.is_object())
    throw ApiError(400, "the request body must be a JSON object", "invalid_request_error", "",
                   "invalid_json");
  return j;
}

namespace {

[[noreturn]] void bad_type(const std::string& param, const char* want) {
  throw ApiError(400, "'" + param + "' must be " + want, "invalid_request_error", param,
                 "invalid_type");
}
[[noreturn]] void bad_value(const std::string& param, const std::string& why) {
  throw ApiError(400, "'" + param + "' " + why, "invalid_request_error", param, "invalid_value");
}

// The field when present and not null, else nullptr.
const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

double get_number(const json& v, const std::string& param) {
  if (!v.is_number()) bad_type(param, "a number");
  const double d = v.get<double>();
  if (!std::isfinite(d)) bad_value(param, "must be finite");
  return d;
}

int64_t get_int(const json& v, const std::string& param) {
  if (const auto n = json_integer(v)) return *n;
  if (v.is_number_unsigned()) bad_value(param, "is too large");
  bad_type(param, "an integer");
}

bool get_bool(const json& v, const std::string& param) {
  if (!v.is_boolean()) bad_type(param, "a boolean");
  return v.get<bool>();
}

const std::string& get_string(const json& v, const std::string& param) {
  if (!v.is_string()) bad_type(param, "a string");
  return v.get_ref<const std::string&>();
}

double in_range(double d, double lo, double hi, const std::string& param) {
  if (d < lo || d > hi)
    bad_value(param, "must be between " + json(lo).dump() + " and " + json(hi).dump() + " (got " +
                         json(d).dump() + ")");
  return d;
}

// Message content: a string, or an array of {"type": "text", "text": ...} parts.
std::string content_text(const json& v, const std::string& param) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) bad_type(param, "a string or an array of content parts");
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = param + "[" + std::to_string(i) + "]";
    const json& part = v[i];
    if (!part.is_object()) bad_type(p, "an object");
    const json* type = field(part, "type");
    if (!type) bad_value(p + ".type", "is required");
    const std::string& t = get_string(*type, p + ".type");
    if (t != "text")
      throw ApiError(400, "content part type '" + excerpt(t) + "' is not supported (only 'text')",
                     "invalid_request_error", p + ".type", "unsupported_value");
    const json* text = field(part, "text");
    if (!text) bad_value(p + ".text", "is required");
    if (i > 0) out += '\n';  // parts are lines of one text, as llama.cpp and vLLM join them
    out += get_string(*text, p + ".text");
  }
  return out;
}

}  // namespace

std::optional<uint64_t> get_seed(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (const auto n = json_integer(v)) {
    if (*n == -1) return std::nullopt;  // -1: a random seed, as llama.cpp's server takes it
    if (*n < 0)
      bad_value("seed", "must be a whole number from 0 to 18446744073709551615 (or -1: random)");
    return static_cast<uint64_t>(*n);
  }
  bad_type("seed", "an integer");
}

GenRequest parse_gen_request(const json& body, bool chat, const RequestLimits& limits) {
  GenRequest r;
  r.chat = chat;
  // OpenAI's defaults.
  r.sampling.temperature = 1.0f;
  r.sampling.top_p = 1.0f;
  r.sampling.top_k = 0;
  r.sampling.min_p = 0.0f;
  r.sampling.repeat_penalty = 1.0f;
  r.sampling.repeat_last_n = -1;

  if (const json* v = field(body, "model")) r.model = get_string(*v, "model");

  if (chat) {
    const json* msgs = field(body, "messages");
    if (!msgs) bad_value("messages", "is required");
    if (!msgs->is_array()) bad_type("messages", "an array");
    if (msgs->empty()) bad_value("messages", "must contain at least one message");
    if (msgs->size() > limits.max_messages)
      bad_value("messages", "has " + std::to_string(msgs->size()) + " messages; at most " +
                                std::to_string(limits.max_messages) + " are accepted");
    for (size_t i = 0; i < msgs->size(); ++i) {
      const std::string p = "messages[" + std::to_string(i) + "]";
      const json& m = (*msgs)[i];
      if (!m.is_object()) bad_type(p, "an object");
      const json* role = field(m, "role");
      if (!role) bad_value(p + ".role", "is required");
      std::string rs = get_string(*role, p + ".role");
      if (rs == "developer") rs = "system";
      if (rs != "system" && rs != "user" && rs != "assistant")
        throw ApiError(400,
                       "role '" + excerpt(rs) +
                           "' is not supported (use system, developer, user or " + "assistant)",
                       "invalid_request_error", p + ".role", "unsupported_value");
      auto c = m.find("content");
      if (c == m.end() && rs != "assistant") bad_value(p + ".content", "is required");
      ChatMessage cm;
      cm.role = rs;
      if (c != m.end()) cm.content = content_text(*c, p + ".content");
      r.messages.push_back(std::move(cm));
    }
    if (r.messages.back().role != "user")
      throw ApiError(400, "the last message must have role 'user'", "invalid_request_error",
                     "messages", "invalid_value");
  } else {
    const json* p = field(body, "prompt");
    if (!p) bad_value("prompt", "is required");
    auto ids_of = [&](const json& a, const std::string& param) {
      std::vector<int32_t> ids;
      for (const auto& e : a) {
        const int64_t id = get_int(e, param + "[]");
        if (id < 0 || id > std::numeric_limits<int32_t>::max())
          bad_value(param, "holds token id " + std::to_string(id) + " outside the vocabulary");
        ids.push_back(static_cast<int32_t>(id));
      }
      if (ids.empty()) bad_value(param, "must not be an empty list of tokens");
      return ids;
    };
    if (p->is_string()) {
      r.prompt = p->get<std::string>();
    } else if (p->is_array()) {
      if (p->empty()) bad_value("prompt", "must not be empty");
      const json& first = (*p)[0];
      if (first.is_string()) {
        if (p->size() != 1)
          bad_value("prompt", "holds several prompts; one prompt per request is supported");
        r.prompt = first.get<std::string>();
      } else if (first.is_number()) {
        r.prompt_ids = ids_of(*p, "prompt");
        r.prompt_is_ids = true;
      } else if (first.is_array()) {
        if (p->size() != 1)
          bad_value("prompt", "holds several prompts; one prompt per request is supported");
        r.prompt_ids = ids_of(first, "prompt[0]");
        r.prompt_is_ids = true;
      } else {
        bad_type("prompt", "a string, an array of strings or an array of token ids");
      }
    } else {
      bad_type("prompt", "a string, an array of strings or an array of token ids");
    }
    if (const json* v = field(body, "echo"); v && get_bool(*v, "echo"))
      bad_value("echo", "is not supported");
    if (const json* v = field(body, "best_of"); v && get_int(*v, "best_of") != 1)
      bad_value("best_of", "must be 1");
    if (const json* v = field(body, "suffix"); v && !get_string(*v, "suffix").empty())
      bad_value("suffix", "is not supported");
  }

  if (const json* v = field(body, "temperature"))
    r.sampling.temperature =
        static_cast<float>(in_range(get_number(*v, "temperature"), 0, 2, "temperature"));
  if (const json* v = field(body, "top_p")) {
    const double tp = get_number(*v, "top_p");
    if (!(tp > 0 && tp <= 1)) bad_value("top_p", "must be in (0, 1]");
    r.sampling.top_p = static_cast<float>(tp);
  }
  if (const json* v = field(body, "top_k")) {
    const int64_t k = get_int(*v, "top_k");
    if (k < 0 || k > std::numeric_limits<int32_t>::max()) bad_value("top_k", "must be >= 0");
    r.sampling.top_k = static_cast<int32_t>(k);
  }
  if (const json* v = field(body, "min_p"))
    r.sampling.min_p = static_cast<float>(in_range(get_number(*v, "min_p"), 0, 1, "min_p"));
  // (repeat_penalty: llama.cpp's name for it)
  for (const char* name : {"repetition_penalty", "repeat_penalty"}) {
    if (const json* v = field(body, name)) {
      const double rp = get_number(*v, name);
      if (!(rp > 0 && rp <= 100)) bad_value(name, "must be in (0, 100]");
      r.sampling.repeat_penalty = static_cast<float>(rp);
    }
  }
  if (const json* v = field(body, "presence_penalty"))
    r.sampling.presence_penalty =
        static_cast<float>(in_range(get_number(*v, "presence_penalty"), -2, 2, "presence_penalty"));
  if (const json* v = field(body, "frequency_penalty"))
    r.sampling.frequency_penalty = static_cast<float>(
        in_range(get_number(*v, "frequency_penalty"), -2, 2, "frequency_penalty"));
  if (const json* v = field(body, "seed")) {
    if (const auto seed = get_seed(*v)) {
      r.sampling.seed = *seed;
      r.has_seed = true;
    }
  }
  if (const json* v = field(body, "n"); v && get_int(*v, "n") != 1)
    bad_value("n", "must be 1 (one choice per request is supported)");
  // logprobs: a boolean in chat; in completions an integer, whose 0 still asks for the
  // sampled token's log probability
  if (const json* v = field(body, "logprobs")) {
    const bool on = v->is_boolean() ? v->get<bool>() : (get_int(*v, "logprobs"), true);
    if (on) bad_value("logprobs", "is not supported");
  }
  if (const json* v = field(body, "logit_bias")) {
    if (!v->is_object()) bad_type("logit_bias", "an object mapping token ids to biases");
    if (v->size() > 300) bad_value("logit_bias", "may hold at most 300 tokens");
    for (const auto& [key, bias] : v->items()) {
      const std::string p = "logit_bias." + excerpt(key);
      int64_t id = -1;
      const bool digits =
          !key.empty() && key.size() <= 10 &&
          std::all_of(key.begin(), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
      if (digits) id = std::stoll(key);
      if (id < 0 || id > std::numeric_limits<int32_t>::max())
        bad_value("logit_bias",
                  "keys must be token ids (whole numbers as strings), not '" + excerpt(key) + "'");
      const double b = in_range(get_number(bias, p), -100, 100, p);
      r.sampling.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(b));
    }
  }

  // Fields that would change the output and that this server does not implement are refused
  // rather than ignored (the others unknown to it are ignored)
  auto refuse = [&](const char* name, const std::string& why) {
    throw ApiError(400, "'" + std::string(name) + "' " + why, "invalid_request_error", name,
                   "unsupported_parameter");
  };
  if (const json* v = field(body, "response_format")) {
    if (!v->is_object()) bad_type("response_format", "an object");
    const json* t = field(*v, "type");
    if (!t || get_string(*t, "response_format.type") != "text")
      refuse("response_format", "is not supported beyond {\"type\": \"text\"}");
  }
  // Tools and the older functions: accepted only when none are given or none may be called
  for (const char* list : {"tools", "functions"})
    if (const json* v = field(body, list); v && !(v->is_array() && v->empty()))
      refuse(list, "is not supported (no tool or function calls)");
  for (const char* choice : {"tool_choice", "function_call"}) {
    const json* v = field(body, choice);
    const bool harmless =
        !v ||
        (v->is_string() && (v->get<std::string>() == "none" || v->get<std::string>() == "auto"));
    if (!harmless) refuse(choice, "is not supported (no tool or function calls)");
  }
  if (const json* v = field(body, "modalities")) {
    if (!v->is_array()) bad_type("modalities", "an array");
    for (const auto& m : *v)
      if (!m.is_string() || m.get<std::string>() != "text")
        refuse("modalities", "is not supported beyond [\"text\"]");
  }
  if (field(body, "audio")) refuse("audio", "output is not supported by this endpoint");
  if (field(body, "prediction")) refuse("prediction", "is not supported");
  // llama.cpp's own sampling fields: refused unless they ask for what happens anyway
  for (const char* name :
       {"grammar", "json_schema", "n_probs", "dry_multiplier", "xtc_probability"}) {
    const json* v = field(body, name);
    const bool off =
        v && ((v->is_string() && v->get<std::string>().empty()) ||
              (v->is_number() && v->get<double>() == 0) || (v->is_object() && v->empty()));
    if (v && !off) refuse(name, "is not supported");
  }
  if (const json* v = field(body, "mirostat"); v && get_int(*v, "mirostat") != 0)
    refuse("mirostat", "is not supported");
  if (const json* v = field(body, "typical_p"); v && get_number(*v, "typical_p") != 1)
    refuse("typical_p", "is not supported");
  if (const json* v = field(body, "ignore_eos")) r.ignore_eos = get_bool(*v, "ignore_eos");
  if (field(body, "n_predict")) refuse("n_predict", "is llama.cpp's name: use max_tokens");
  if (const json* v = field(body, "top_logprobs"); v && get_int(*v, "top_logprobs") > 0)
    bad_value("top_logprobs", "is not supported");

  auto read_max = [&](const char* name) {
    const json* v = field(body, name);
    if (!v) return;
    const int64_t n = get_int(*v, name);
    if (n < 1) bad_value(name, "must be at least 1");
    if (n > limits.max_tokens)
      bad_value(name, "is " + std::to_string(n) + " but this server generates at most " +
                          std::to_string(limits.max_tokens) + " tokens per request");
    r.max_tokens = n;
  };
  read_max("max_tokens");
  if (chat) read_max("max_completion_tokens");

  if (const json* v = field(body, "stop")) {
    if (v->is_string()) {
      r.stop.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      for (const auto& s : *v) r.stop.push_back(get_string(s, "stop[]"));
    } else {
      bad_type("stop", "a string or an array of strings");
    }
    if (r.stop.size() > limits.max_stop)
      bad_value("stop", "has " + std::to_string(r.stop.size()) + " strings; at most " +
                            std::to_string(limits.max_stop) + " are accepted");
    for (const auto& s : r.stop) {
      if (s.empty()) bad_value("stop", "must not contain empty strings");
      if (s.size() > limits.max_stop_bytes)
        bad_value("stop",
                  "strings must be at most " + std::to_string(limits.max_stop_bytes) + " bytes");
    }
  }

  if (const json* v = field(body, "stream")) r.stream = get_bool(*v, "stream");
  if (const json* v = field(body, "stream_options")) {
    if (!v->is_object()) bad_type("stream_options", "an object");
    if (!r.stream) bad_value("stream_options", "is only allowed when 'stream' is true");
    if (const json* u = field(*v, "include_usage"))
      r.include_usage = get_bool(*u, "stream_options.include_usage");
  }
  return r;
}

PromptTokens chat_prompt(const Tokenizer& tok, const std::vector<ChatMessage>& messages) {
  const int32_t sot = tok.start_of_turn_id(), eot = tok.end_of_turn_id();
  PromptTokens p;
  auto text = [&](const std::string& s) {
    if (s.empty()) return;
    const auto v = tok.encode(s);
    p.ids.insert(p.ids.end(), v.begin(), v.end());
  };
  if (tok.bos_id() >= 0) p.ids.push_back(tok.bos_id());
  if (sot < 0 || eot < 0) {
    // Plain-text turns for models trained without chat tokens.
    std::string system;
    for (const auto& m : messages) {
      if (m.role == "system") {
        system += m.content;
        system += "\n\n";
        continue;
      }
      if (!system.empty()) {
        text(system);
        p.boundaries.push_back(p.ids.size());
        system.clear();
      }
      // "Assistant:" is followed by the reply as generated (which starts with its own space),
      // so a conversation continues with the very tokens of the earlier answer.
      if (m.role == "user") {
        text("User: ");
        text(m.content);
      } else {
        text("Assistant:");
        const bool spaced = !m.content.empty() && (m.content[0] == ' ' || m.content[0] == '\n');
        text(spaced || m.content.empty() ? m.content : " " + m.content);
      }
      text("\n");
      p.boundaries.push_back(p.ids.size());
    }
    text("Assistant:");
    p.boundaries.push_back(p.ids.size());
    p.stop.push_back("\nUser:");
    if (p.ids.empty())
      throw ApiError(400, "the chat prompt is empty", "invalid_request_error", "messages",
                     "invalid_value");
    return p;
  }
  std::string system;
  for (const auto& m : messages) {
    if (m.role == "system") {
      system += trim_chat_text(m.content);
      system += "\n\n";
      continue;
    }
    p.ids.push_back(sot);
    if (m.role == "user") {
      text("user\n");
      if (!system.empty()) {
        text(system);
        p.boundaries.push_back(p.ids.size());
        system.clear();
      }
    } else {
      text("model\n");
    }
    // User and system texts are trimmed as the chat template does; a reply stays as generated,
    // so that a conversation continues with the very tokens of the earlier answer
    text(m.role == "user" ? std::string(trim_chat_text(m.content)) : m.content);
    p.ids.push_back(eot);
    text("\n");
    p.boundaries.push_back(p.ids.size());
  }
  p.ids.push_back(sot);
  text("model\n");
  p.boundaries.push_back(p.ids.size());
  return p;
}

PromptTokens completion_prompt(const Tokenizer& tok, const GenRequest& req, int64_t vocab) {
  PromptTokens p;
  if (req.prompt_is_ids) {
    for (int32_t id : req.prompt_ids)
      if (id < 0 || id >= vocab)
        throw ApiError(400,
                       "'prompt' holds token id " + std::to_string(id) +
                           " outside the model's vocabulary of " + std::to_string(vocab),
                       "invalid_request_error", "prompt", "invalid_value");
    p.ids = req.prompt_ids;
  } else {
    // Control tokens written in the prompt are those tokens, as llama.cpp's server reads a
    // prompt; one that starts with <bos> gets no second one
    const auto v = tok.encode_with_controls(req.prompt);
    if (tok.bos_id() >= 0 && (v.empty() || v.front() != tok.bos_id()))
      p.ids.push_back(tok.bos_id());
    p.ids.insert(p.ids.end(), v.begin(), v.end());
    if (p.ids.empty())
      throw ApiError(400, "'prompt' is empty and the tokenizer has no BOS token",
                     "invalid_request_error", "prompt", "invalid_value");
  }
  p.boundaries.push_back(p.ids.size());
  return p;
}

json usage_json(const Usage& u) {
  return json{{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
              {"completion_tokens_details", {{"reasoning_tokens", 0}}}};
}

namespace {

json finish_value(const std::string& finish) {
  return finish.empty() ? json(nullptr) : json(finish);
}

json head(const ResponseMeta& m, const char* object) {
  return json{{"id", m.id},
              {"object", object},
              {"created", m.created},
              {"model", m.model},
              {"system_fingerprint", m.fingerprint}};
}

}  // namespace

json chat_response(const ResponseMeta& m, const std::string& text, const std::string& finish,
                   const Usage& u) {
  json j = head(m, "chat.completion");
  j["choices"] = json::array(
      {json{{"index", 0},
            {"message", {{"role", "assistant"}, {"content", text}, {"refusal", nullptr}}},
            {"logprobs", nullptr},
            {"finish_reason", finish_value(finish)}}});
  j["usage"] = usage_json(u);
  return j;
}

json completion_response(const ResponseMeta& m, const std::string& text, const std::string& finish,
                         const Usage& u) {
  json j = head(m, "text_completion");
  j["choices"] = json::array({json{{"index", 0},
                                   {"text", text},
                                   {"logprobs", nullptr},
                                   {"finish_reason", finish_value(finish)}}});
  j["usage"] = usage_json(u);
  return j;
}

json chat_chunk(const ResponseMeta& m, const std::string& role, const std::string* content,
                const std::string& finish, bool with_usage) {
  json j = head(m, "chat.completion.chunk");
  json delta = json::object();
  if (!role.empty()) delta["role"] = role;
  if (content) delta["content"] = *content;
  j["choices"] = json::array({json{{"index", 0},
                                   {"delta", std::move(delta)},
                                   {"logprobs", nullptr},
                                   {"finish_reason", finish_value(finish)}}});
  if (with_usage) j["usage"] = nullptr;
  return j;
}

json completion_chunk(const ResponseMeta& m, const std::string& text, const std::string& finish,
                      bool with_usage) {
  json j = head(m, "text_completion");
  j["choices"] = json::array({json{{"index", 0},
                                   {"text", text},
                                   {"logprobs", nullptr},
                                   {"finish_reason", finish_value(finish)}}});
  if (with_usage) j["usage"] = nullptr;
  return j;
}

json usage_chunk(const ResponseMeta& m, bool chat, const Usage& u) {
  json j = head(m, chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = json::array();
  j["usage"] = usage_json(u);
  return j;
}

std::string sse_event(const json& j) {
  return "data: " + dump(j) + "\n\n";
}

}  // namespace cachet::server
