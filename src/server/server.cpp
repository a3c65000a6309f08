#include "cachet/server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <string_view>
#include <thread>

#include "cachet/error.h"
#include "cachet/generate.h"
#include "cachet/model.h"
#include "cachet/tokenizer.h"
#include "server/api.h"
#include "server/engine.h"
#include "server/metrics.h"
#include "server/speech.h"
#include "server/web_page.h"

namespace cachet {

namespace server {
namespace {

using httplib::Request;
using httplib::Response;

// ---------------------------------------------------------------------------------------------
// The connection of a request, to notice a client that went away while its answer is made.

std::string addr_string(const sockaddr_storage& ss, int* port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    *port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    *port = ntohs(a->sin6_port);
  } else {
    *port = -1;
  }
  return buf;
}

// The socket of this process whose peer is the request's remote address and port; -1 if none.
int find_connection_fd(const Request& req) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  int found = -1;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd < 0 || fd == dirfd(d)) continue;
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &len) != 0) continue;
    int pport = -1;
    const std::string paddr = addr_string(peer, &pport);
    if (pport != req.remote_port || paddr != req.remote_addr) continue;
    if (req.local_port > 0) {
      sockaddr_storage local{};
      len = sizeof local;
      if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &len) != 0)
        continue;
      int lport = -1;
      addr_string(local, &lport);
      if (lport != req.local_port) continue;
    }
    found = static_cast<int>(fd);
    break;
  }
  closedir(d);
  return found;
}

// Whether the peer closed its side of the connection.
bool peer_gone(int fd) {
  if (fd < 0) return false;
  pollfd p{fd, POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

// ---------------------------------------------------------------------------------------------

struct Context {
  ServerOptions opts;
  std::unique_ptr<LanguageModel> model;
  std::optional<Tokenizer> tok;
  std::string model_name, fingerprint;
  int64_t vocab = 0;
  size_t max_piece_bytes = 1;  // the longest piece of the vocabulary, in bytes
  Metrics metrics;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<SpeechBackend> speech;
  std::timed_mutex speech_mu;
  std::atomic<int> streams{0};
  std::atomic<int> speech_waiting{0};
  std::atomic<int> inflight{0};
  std::atomic<bool> stopping{false};
  std::atomic<bool> ending{false};  // the shutdown grace has run out: stop what still runs
  std::atomic<uint64_t> next_id{1};
  uint64_t id_salt = 0;
  Clock::time_point started = Clock::now();
};

// Counts a request in flight (and a stream) for as long as it lives.
struct InFlight {
  InFlight(Context& c, bool stream) : c(c), stream(stream) {
    ++c.inflight;
    if (stream) ++c.streams;
  }
  ~InFlight() {
    --c.inflight;
    if (stream) --c.streams;
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  Context& c;
  bool stream;
};

void send_json(Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(dump(j), "application/json");
}

void send_error(Response& res, const ApiError& e) {
  send_json(res, e.status, error_body(e));
  if (e.status == 503 || e.status == 429) res.set_header("Retry-After", "1");
}

std::string new_id(Context& c, const char* prefix) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s%016llx%08llx", prefix,
                static_cast<unsigned long long>(c.id_salt),
                static_cast<unsigned long long>(c.next_id++));
  return buf;
}

// Constant-time comparison of the Authorization header with the key.
void check_auth(const Context& c, const Request& req) {
  if (c.opts.api_key.empty()) return;
  const std::string want = "Bearer " + c.opts.api_key;
  const std::string got = req.get_header_value("Authorization");
  if (got.empty())
    throw ApiError(401,
                   "You didn't provide an API key: send it in an Authorization header as "
                   "'Bearer KEY'",
                   "invalid_request_error", "", "invalid_api_key");
  unsigned diff = got.size() == want.size() ? 0u : 1u;
  for (size_t i = 0; i < got.size(); ++i)
    diff |= static_cast<unsigned>(got[i] ^ want[i % want.size()]);
  if (diff != 0)
    throw ApiError(401, "Incorrect API key provided", "invalid_request_error", "",
                   "invalid_api_key");
}

// Runs a handler body, answering ApiErrors and other exceptions as OpenAI error objects.
template <typename F>
void guarded(Context& c, const Request& req, Response& res, bool auth, F&& f) {
  try {
    if (auth) check_auth(c, req);
    f();
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const Error& e) {
    send_error(res, ApiError(400, e.what(), "invalid_request_error"));
  } catch (const std::exception& e) {
    send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
  }
}

void handle_generate(Context& c, const Request& req, Response& res, bool chat) {
  if (c.stopping)
    throw ApiError(503, "the server is shutting down", "server_error", "", "shutting_down");
  RequestLimits limits;
  limits.max_tokens = c.opts.max_tokens;
  const GenRequest g = parse_gen_request(parse_body(req.body), chat, limits);
  const int64_t ctx = c.engine->options().ctx;
  // A text that cannot fit is turned away before it is tokenized (which takes memory in
  // proportion): no token covers more than the longest piece's bytes, and normalisation is
  // given four times that much room, so only texts far past the context end here.
  size_t text_bytes = g.prompt.size();
  for (const auto& m : g.messages) text_bytes += m.content.size();
  if (text_bytes / (4 * c.max_piece_bytes) >= static_cast<size_t>(ctx))
    throw ApiError(400,
                   "This model's maximum context length is " + std::to_string(ctx) +
                       " tokens; prompts of more than " +
                       std::to_string(4 * c.max_piece_bytes * static_cast<size_t>(ctx)) +
                       " bytes of text are refused without tokenizing them, and this one has " +
                       std::to_string(text_bytes) + ". Please shorten the prompt.",
                   "invalid_request_error", chat ? "messages" : "prompt",
                   "context_length_exceeded");
  const PromptTokens p =
      chat ? chat_prompt(*c.tok, g.messages) : completion_prompt(*c.tok, g, c.vocab);
  const int64_t n = static_cast<int64_t>(p.ids.size());
  if (n >= ctx)
    throw ApiError(400,
                   "This model's maximum context length is " + std::to_string(ctx) +
                       " tokens, but the prompt has " + std::to_string(n) +
                       " tokens. Please shorten the prompt.",
                   "invalid_request_error", chat ? "messages" : "prompt",
                   "context_length_exceeded");

  auto job = std::make_shared<Job>();
  job->prompt = p.ids;
  job->boundaries = p.boundaries;
  job->sampling = g.sampling;
  if (!g.has_seed) {
    std::random_device rd;
    job->sampling.seed = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                         static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  }
  try {
    job->sampling.validate();
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "invalid_request_error", "", "invalid_value");
  }
  for (const auto& [id, bias] : job->sampling.logit_bias)
    if (id >= c.vocab)
      throw ApiError(400,
                     "'logit_bias' names token " + std::to_string(id) +
                         ", outside the model's vocabulary of " + std::to_string(c.vocab),
                     "invalid_request_error", "logit_bias", "invalid_value");
  job->max_tokens = std::min(g.max_tokens > 0 ? g.max_tokens : c.opts.default_max_tokens, ctx - n);
  job->stop = g.stop;
  job->stop.insert(job->stop.end(), p.stop.begin(), p.stop.end());
  job->stop_tokens = end_tokens(*c.tok, g.ignore_eos, job->sampling);
  if (c.opts.request_timeout_s > 0)
    job->deadline = Clock::now() + std::chrono::milliseconds(
                                       static_cast<int64_t>(c.opts.request_timeout_s * 1000));

  if (g.stream && c.streams.load() >= c.opts.max_streams) {
    c.metrics.add("cachet_rejected_total", "reason=\"streams\"");
    throw ApiError(
        503,
        "too many concurrent streams (" + std::to_string(c.opts.max_streams) + "); retry later",
        "server_error", "", "too_many_streams");
  }
  auto guard = std::make_shared<InFlight>(c, g.stream);
  switch (c.engine->submit(job)) {
    case Engine::Admit::Ok:
      break;
    case Engine::Admit::QueueFull:
      c.metrics.add("cachet_rejected_total", "reason=\"queue_full\"");
      throw ApiError(503, "the server is busy (the request queue is full); retry later",
                     "server_error", "", "server_busy");
    case Engine::Admit::Stopping:
      throw ApiError(503, "the server is shutting down", "server_error", "", "shutting_down");
  }

  ResponseMeta meta;
  meta.id = new_id(c, chat ? "chatcmpl-" : "cmpl-");
  meta.created = static_cast<int64_t>(std::time(nullptr));
  meta.model = c.model_name;
  meta.fingerprint = c.fingerprint;
  const int fd = find_connection_fd(req);
  const auto usage = [job, n] {
    Usage u;
    u.prompt_tokens = n;
    u.completion_tokens = job->completion_tokens;
    u.cached_tokens = job->cached_tokens;
    return u;
  };

  if (!g.stream) {
    std::string text, chunk;
    while (job->wait_text(chunk, std::chrono::milliseconds(100))) {
      text += chunk;
      if (!job->cancelled && peer_gone(fd)) job->cancelled = true;
    }
    text += chunk;
    if (!job->error.empty()) {
      if (c.stopping.load()) throw ApiError(503, job->error, "server_error", "", "shutting_down");
      if (job->error_status == 504)  // the request's --timeout
        throw ApiError(504, job->error, "server_error", "", "timeout");
      if (job->error_status == 499)  // the client went away: nobody reads this, /metrics does
        throw ApiError(499, "the client closed the connection", "invalid_request_error", "",
                       "cancelled");
      throw ApiError(500, job->error, "server_error");
    }
    const Usage u = usage();
    send_json(res, 200,
              chat ? chat_response(meta, text, job->finish_reason, u)
                   : completion_response(meta, text, job->finish_reason, u));
    return;
  }

  const bool iu = g.include_usage;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider("text/event-stream", [job, meta, chat, iu, fd, guard, usage](
                                                            size_t, httplib::DataSink& sink) {
    auto send = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
    const std::string empty;
    bool ok = true;
    if (chat) ok = send(sse_event(chat_chunk(meta, "assistant", &empty, "", iu)));
    std::string chunk;
    while (ok) {
      const bool more = job->wait_text(chunk, std::chrono::milliseconds(100));
      if (!chunk.empty())
        ok = send(sse_event(chat ? chat_chunk(meta, "", &chunk, "", iu)
                                 : completion_chunk(meta, chunk, "", iu)));
      if (!more) break;
      if (ok && peer_gone(fd)) ok = false;
    }
    if (!ok) {
      job->cancelled = true;
      return false;
    }
    if (!job->error.empty()) {
      ok = send(sse_event(error_body(job->error, "server_error", "", "")));
    } else {
      ok = send(sse_event(chat ? chat_chunk(meta, "", nullptr, job->finish_reason, iu)
                               : completion_chunk(meta, "", job->finish_reason, iu)));
      if (ok && iu) ok = send(sse_event(usage_chunk(meta, chat, usage())));
    }
    if (ok) ok = send(kSseDone);
    if (!ok) return false;
    sink.done();
    return true;
  });
}

void handle_speech(Context& c, const Request& req, Response& res) {
  if (!c.speech)
    throw ApiError(404,
                   "text to speech is not loaded on this server: start it with "
                   "`cachet serve --tts METAVOICE_DIR`",
                   "invalid_request_error", "model", "tts_not_loaded");
  if (c.stopping)
    throw ApiError(503, "the server is shutting down", "server_error", "", "shutting_down");
  const json body = parse_body(req.body);
  SpeechRequest sr;
  auto str = [&](const char* name, bool required) -> std::optional<std::string> {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) {
      if (required)
        throw ApiError(400, std::string("'") + name + "' is required", "invalid_request_error",
                       name, "invalid_value");
      return std::nullopt;
    }
    if (!it->is_string())
      throw ApiError(400, std::string("'") + name + "' must be a string", "invalid_request_error",
                     name, "invalid_type");
    return it->get<std::string>();
  };
  sr.model = str("model", false).value_or("");
  sr.input = *str("input", true);
  if (sr.input.empty())
    throw ApiError(400, "'input' must not be empty", "invalid_request_error", "input",
                   "invalid_value");
  // Characters, as OpenAI counts them (the JSON parser has checked the UTF-8)
  const size_t chars = static_cast<size_t>(
      std::count_if(sr.input.begin(), sr.input.end(), [](char ch) { return (ch & 0xC0) != 0x80; }));
  if (chars > c.opts.max_speech_chars)
    throw ApiError(400,
                   "'input' has " + std::to_string(chars) + " characters; at most " +
                       std::to_string(c.opts.max_speech_chars) + " are accepted",
                   "invalid_request_error", "input", "invalid_value");
  // What would change the audio and is not implemented is refused, not ignored
  if (const auto ins = str("instructions", false); ins && !ins->empty())
    throw ApiError(400, "'instructions' is not supported (the voice comes from the speaker alone)",
                   "invalid_request_error", "instructions", "unsupported_parameter");
  if (const auto sf = str("stream_format", false); sf && *sf != "audio")
    throw ApiError(400, "stream_format '" + excerpt(*sf) + "' is not supported (use audio)",
                   "invalid_request_error", "stream_format", "unsupported_value");
  sr.voice = str("voice", false).value_or("");
  static const char* kVoices[] = {"",      "default", "alloy", "ash",   "ballad",
                                  "coral", "echo",    "fable", "onyx",  "nova",
                                  "sage",  "shimmer", "verse", "marin", "cedar"};
  if (std::find(std::begin(kVoices), std::end(kVoices), sr.voice) == std::end(kVoices))
    throw ApiError(400,
                   "voice '" + excerpt(sr.voice) +
                       "' is not available: this server speaks with its model's default "
                       "speaker (use 'default' or any of OpenAI's voice names)",
                   "invalid_request_error", "voice", "unsupported_value");
  sr.response_format = str("response_format", false).value_or("wav");
  if (sr.response_format != "wav" && sr.response_format != "pcm")
    throw ApiError(
        400,
        "response_format '" + excerpt(sr.response_format) + "' is not supported (use wav or pcm)",
        "invalid_request_error", "response_format", "unsupported_value");
  if (auto it = body.find("speed"); it != body.end() && !it->is_null()) {
    if (!it->is_number())
      throw ApiError(400, "'speed' must be a number", "invalid_request_error", "speed",
                     "invalid_type");
    if (it->get<double>() != 1.0)
      throw ApiError(400, "'speed' other than 1 is not supported", "invalid_request_error", "speed",
                     "unsupported_value");
  }
  std::optional<uint64_t> seed;
  if (auto it = body.find("seed"); it != body.end() && !it->is_null()) seed = get_seed(*it);
  if (seed) {
    sr.seed = *seed;
  } else {
    std::random_device rd;
    sr.seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }

  InFlight guard(c, false);
  struct Waiting {
    explicit Waiting(std::atomic<int>& n) : n(n) { ++n; }
    ~Waiting() { --n; }
    std::atomic<int>& n;
  } waiting(c.speech_waiting);
  if (c.speech_waiting.load() > c.opts.max_speech_waiting + 1) {
    c.metrics.add("cachet_rejected_total", "reason=\"speech_busy\"");
    throw ApiError(503, "the speech synthesizer is busy; retry later", "server_error", "",
                   "server_busy");
  }
  const int fd = find_connection_fd(req);
  const auto t0 = Clock::now();
  const auto deadline =
      t0 + std::chrono::milliseconds(static_cast<int64_t>(c.opts.request_timeout_s * 1000));
  // Why a request stops early: its client went away (499, counted as cancelled), its
  // --timeout passed (504), or the server's shutdown grace ran out (503). Checked while it
  // waits for the synthesizer too, so that requests nobody waits for do not hold places.
  enum class Stop { None, Gone, Late, Ending };
  Stop stop = Stop::None;
  const auto should_stop = [&] {
    if (peer_gone(fd))
      stop = Stop::Gone;
    else if (c.opts.request_timeout_s > 0 && Clock::now() > deadline)
      stop = Stop::Late;
    else if (c.ending.load())
      stop = Stop::Ending;
    return stop != Stop::None;
  };
  const auto stopped = [&] {
    switch (stop) {
      case Stop::Gone:
        c.metrics.add("cachet_cancelled_total", "");
        return ApiError(499, "the client closed the connection", "invalid_request_error", "",
                        "cancelled");
      case Stop::Late:
        c.metrics.add("cachet_timeouts_total", "");
        return ApiError(504, "the request ran out of time (--timeout)", "server_error", "",
                        "timeout");
      default:
        return ApiError(503, "the server is shutting down", "server_error", "", "shutting_down");
    }
  };
  std::vector<float> samples;
  {
    std::unique_lock<std::timed_mutex> lock(c.speech_mu, std::defer_lock);
    while (!lock.try_lock_for(std::chrono::milliseconds(50)))
      if (should_stop()) throw stopped();
    try {
      samples = c.speech->synthesize(sr, should_stop);
    } catch (const Error&) {
      if (stop != Stop::None) throw stopped();
      throw;
    }
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const int rate = c.speech->sample_rate();
  c.metrics.observe("cachet_speech_duration_seconds", secs);
  c.metrics.add("cachet_speech_requests_total", "");
  c.metrics.add("cachet_speech_audio_seconds_total", "",
                rate > 0 ? static_cast<double>(samples.size()) / rate : 0.0);
  res.status = 200;
  if (sr.response_format == "pcm") {
    res.set_content(encode_pcm16_raw(samples), "audio/pcm");
    res.set_header("X-Sample-Rate", std::to_string(rate));
  } else {
    res.set_content(encode_pcm16_wav(samples, rate), "audio/wav");
  }
}

std::string render_metrics(Context& c) {
  const PrefixCacheStats s = c.engine->cache().stats();
  std::vector<Metrics::Extra> x = {
      {"cachet_queue_depth", "Generation requests waiting for a slot", "gauge",
       static_cast<double>(c.engine->queue_depth())},
      {"cachet_active_requests", "Generation requests holding a decoding slot", "gauge",
       static_cast<double>(c.engine->active())},
      {"cachet_slots", "Decoding slots (--parallel)", "gauge",
       static_cast<double>(c.engine->options().parallel)},
      {"cachet_active_streams", "Streamed responses in progress", "gauge",
       static_cast<double>(c.streams.load())},
      {"cachet_prefix_cache_entries", "Prefix states held", "gauge",
       static_cast<double>(s.entries)},
      {"cachet_prefix_cache_bytes", "Bytes held by prefix states", "gauge",
       static_cast<double>(s.bytes)},
      {"cachet_prefix_cache_budget_bytes", "Byte budget of the prefix cache", "gauge",
       static_cast<double>(s.budget)},
      {"cachet_prefix_cache_hits_total", "Requests that started from a cached prefix state",
       "counter", static_cast<double>(s.hits)},
      {"cachet_prefix_cache_misses_total", "Requests that found no cached prefix state", "counter",
       static_cast<double>(s.misses)},
      {"cachet_prefix_cache_hit_tokens_total", "Prompt tokens served from cached prefix states",
       "counter", static_cast<double>(s.hit_tokens)},
      {"cachet_prefix_cache_inserts_total", "Prefix states stored", "counter",
       static_cast<double>(s.inserts)},
      {"cachet_prefix_cache_evictions_total", "Prefix states evicted to stay within the budget",
       "counter", static_cast<double>(s.evictions)},
      {"cachet_uptime_seconds", "Seconds since the server started", "gauge",
       std::chrono::duration<double>(Clock::now() - c.started).count()},
  };
  return c.metrics.render(x);
}

const char* endpoint_label(const std::string& path) {
  static const char* known[] = {"/",
                                "/health",
                                "/v1/models",
                                "/v1/completions",
                                "/v1/chat/completions",
                                "/v1/audio/speech",
                                "/metrics"};
  for (const char* k : known)
    if (path == k) return k;
  for (const char* k : known)  // the same routes without /v1, as llama.cpp's server takes them
    if (std::string_view(k).starts_with("/v1/") && path == std::string_view(k).substr(3)) return k;
  if (path.starts_with("/v1/models/") || path.starts_with("/models/")) return "/v1/models/:id";
  return "other";
}

void setup_routes(Context& c, httplib::Server& svr) {
  svr.Get("/", [&c](const Request&, Response& res) {
    res.set_content(web_page_html(), "text/html; charset=utf-8");
  });
  svr.Get("/health", [&c](const Request&, Response& res) {
    if (c.stopping)
      send_json(res, 503, json{{"status", "shutting_down"}});
    else
      send_json(res, 200,
                json{{"status", "ok"},
                     {"model", c.model_name},
                     {"tts", c.speech ? json(c.speech->name()) : json(nullptr)},
                     {"slots", c.engine->options().parallel},
                     {"active", c.engine->active()},
                     {"queued", c.engine->queue_depth()}});
  });
  auto models = [&c] {
    const int64_t created =
        static_cast<int64_t>(std::time(nullptr)) -
        static_cast<int64_t>(std::chrono::duration<double>(Clock::now() - c.started).count());
    json data = json::array();
    data.push_back(json{
        {"id", c.model_name}, {"object", "model"}, {"created", created}, {"owned_by", "cachet"}});
    if (c.speech)
      data.push_back(json{{"id", c.speech->name()},
                          {"object", "model"},
                          {"created", created},
                          {"owned_by", "cachet"}});
    return data;
  };
  // Each API route also without its /v1 prefix, as llama.cpp's server takes them
  for (const std::string v1 : {"/v1", ""}) {
    svr.Get(v1 + "/models", [&c, models](const Request& req, Response& res) {
      guarded(c, req, res, true, [&] {
        send_json(res, 200, json{{"object", "list"}, {"data", models()}});
      });
    });
    svr.Get(v1 + "/models/(.+)", [&c, models](const Request& req, Response& res) {
      guarded(c, req, res, true, [&] {
        const std::string id = req.matches[1];
        for (const json& m : models())
          if (m["id"] == id) return send_json(res, 200, m);
        throw ApiError(404, "The model '" + excerpt(id) + "' does not exist",
                       "invalid_request_error", "model", "model_not_found");
      });
    });
    svr.Post(v1 + "/completions", [&c](const Request& req, Response& res) {
      guarded(c, req, res, true, [&] { handle_generate(c, req, res, false); });
    });
    svr.Post(v1 + "/chat/completions", [&c](const Request& req, Response& res) {
      guarded(c, req, res, true, [&] { handle_generate(c, req, res, true); });
    });
    svr.Post(v1 + "/audio/speech", [&c](const Request& req, Response& res) {
      guarded(c, req, res, true, [&] { handle_speech(c, req, res); });
    });
  }
  svr.Get("/metrics", [&c](const Request& req, Response& res) {
    guarded(c, req, res, true, [&] {
      res.set_content(render_metrics(c), "text/plain; version=0.0.4; charset=utf-8");
    });
  });

  // Before any body is read: the HTTP layer holds only bodies with a Content-Length to
  // --max-body-kb, so a chunked body (411) or a compressed one (415, whatever it inflates to)
  // is turned away here, where it has cost nothing yet
  svr.set_pre_routing_handler([](const Request& req, Response& res) {
    const std::string te = req.get_header_value("Transfer-Encoding");
    const std::string ce = req.get_header_value("Content-Encoding");
    if (!te.empty() && te != "identity") {
      send_error(res, ApiError(411,
                               "send the request body with a Content-Length (Transfer-Encoding '" +
                                   excerpt(te) + "' is not accepted)",
                               "invalid_request_error", "", "length_required"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!ce.empty() && ce != "identity") {
      send_error(res, ApiError(415,
                               "send the request body uncompressed (Content-Encoding '" +
                                   excerpt(ce) + "' is not accepted)",
                               "invalid_request_error", "", "unsupported_encoding"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  // A known path asked with another method: 405 with the methods it takes, not 404
  auto allow_only = [&svr](const std::string& path, const std::string& allow) {
    const auto refuse = [allow](const Request& req, Response& res) {
      res.set_header("Allow", allow);
      send_error(res, ApiError(405, "Method " + req.method + " is not allowed on " + req.path +
                                        " (use " + allow + ")"));
    };
    if (allow != "GET") svr.Get(path, refuse);
    if (allow != "POST") svr.Post(path, refuse);
    svr.Put(path, refuse);
    svr.Delete(path, refuse);
    svr.Patch(path, refuse);
  };
  for (const char* p :
       {"/", "/health", "/v1/models", "/models", "/v1/models/(.+)", "/models/(.+)", "/metrics"})
    allow_only(p, "GET");
  for (const char* p : {"/v1/completions", "/v1/chat/completions", "/v1/audio/speech",
                        "/completions", "/chat/completions", "/audio/speech"})
    allow_only(p, "POST");

  // Browsers: with --cors, every answer names the origin allowed to read it, and preflights
  // (OPTIONS, which carry no credentials) are answered before any authentication
  if (!c.opts.cors_origin.empty()) {
    httplib::Headers h{{"Access-Control-Allow-Origin", c.opts.cors_origin}};
    if (c.opts.cors_origin != "*") h.emplace("Vary", "Origin");
    svr.set_default_headers(h);
    svr.Options(".*", [](const Request&, Response& res) {
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      res.set_header("Access-Control-Max-Age", "600");
    });
  }

  svr.set_error_handler(httplib::Server::HandlerWithResponse([](const Request& req, Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string msg;
    switch (res.status) {
      case 404:
        msg = "Unknown request URL: " + req.method + " " + req.path;
        break;
      case 405:
        msg = "Method " + req.method + " is not allowed on " + req.path;
        break;
      case 413:
        msg = "The request body is too large";
        if (req.get_header_value("Content-Type").find("x-www-form-urlencoded") != std::string::npos)
          msg += " (form-encoded bodies are limited to 8 KiB: send Content-Type: application/json)";
        break;
      default:
        msg = std::string("HTTP error ") + std::to_string(res.status);
    }
    res.set_content(
        dump(error_body(msg, res.status >= 500 ? "server_error" : "invalid_request_error", "", "")),
        "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  svr.set_exception_handler([](const Request&, Response& res, std::exception_ptr ep) {
    std::string msg = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      msg += std::string(": ") + e.what();
    } catch (...) {
    }
    send_json(res, 500, error_body(msg, "server_error", "", ""));
  });
  svr.set_logger([&c](const Request& req, const Response& res) {
    c.metrics.add("cachet_requests_total", std::string("endpoint=\"") + endpoint_label(req.path) +
                                               "\",status=\"" + std::to_string(res.status) + "\"");
    if (c.opts.log_requests)
      std::fprintf(stderr, "%s %s %d\n", req.method.c_str(), req.path.c_str(), res.status);
  });
}

std::string file_stem(const std::string& path) {
  std::filesystem::path p(path);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();
  std::string s = p.stem().string();
  return s.empty() ? "model" : s;
}

}  // namespace
}  // namespace server

int run_server(const ServerOptions& opts) {
  using namespace server;
  CACHET_CHECK(opts.parallel >= 1 && opts.parallel <= 256, "--parallel ", opts.parallel,
               ": give a number of slots between 1 and 256");
  CACHET_CHECK(opts.ctx >= 2, "--ctx ", opts.ctx, ": the context must hold at least 2 tokens");
  CACHET_CHECK(opts.port >= 0 && opts.port <= 65535, "--port ", opts.port,
               ": give a port between 0 and 65535");
  CACHET_CHECK(opts.max_tokens >= 1, "--max-tokens must be at least 1");

  // SIGTERM and SIGINT are taken by a thread of ours (sigwait): block them before any other
  // thread exists, so every thread inherits the mask. A write to a closed connection must not
  // kill the process.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Context c;
  c.opts = opts;
  c.model = load_model(opts.model_path);
  c.tok.emplace(Tokenizer::from_path(opts.model_path));
  const ModelInfo& info = c.model->info();
  CACHET_CHECK(info.vocab_size <= 0 || c.tok->vocab_size() <= info.vocab_size, opts.model_path,
               ": the tokenizer has ", c.tok->vocab_size(),
               " tokens but the model's vocabulary has ", info.vocab_size);
  c.vocab = info.vocab_size > 0 ? info.vocab_size : c.tok->vocab_size();
  for (int32_t id = 0; id < c.tok->vocab_size(); ++id)
    c.max_piece_bytes = std::max(c.max_piece_bytes, c.tok->id_to_piece(id).size());
  c.model_name = opts.model_name.empty() ? file_stem(opts.model_path) : opts.model_name;
  char fp[32];
  std::snprintf(fp, sizeof fp, "fp_%016llx", static_cast<unsigned long long>(info.fingerprint));
  c.fingerprint = fp;
  {
    std::random_device rd;
    c.id_salt = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }
  if (!opts.tts_dir.empty()) c.speech = load_speech_backend(opts.tts_dir, opts.tts_threads);

  EngineOptions eo;
  eo.parallel = opts.parallel;
  eo.queue_size = opts.queue_size;
  eo.ctx = opts.ctx;
  eo.cache_bytes = opts.cache_bytes;
  c.engine = std::make_unique<Engine>(*c.model, *c.tok, eo, c.metrics);

  httplib::Server svr;
  // One thread per open connection: at least 256, so that a few hundred clients that open a
  // connection and send nothing (or trickle their headers) do not lock everyone else out; an
  // idle thread costs little. Untrusted networks still want a reverse proxy in front.
  const size_t threads =
      opts.http_threads > 0
          ? static_cast<size_t>(opts.http_threads)
          : std::max<size_t>(256, static_cast<size_t>(opts.parallel) + opts.queue_size +
                                      static_cast<size_t>(std::max(0, opts.max_streams)) / 4 + 16);
  svr.new_task_queue = [threads] {
    return new httplib::ThreadPool(std::min<size_t>(threads, 1024));
  };
  svr.set_payload_max_length(opts.max_body_bytes);
  svr.set_keep_alive_timeout(5);
  svr.set_read_timeout(10);
  svr.set_write_timeout(30);
  svr.set_tcp_nodelay(true);
  // SO_REUSEADDR only: with SO_REUSEPORT a second server would silently share the port.
  svr.set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  setup_routes(c, svr);

  int port = opts.port;
  if (port == 0) {
    port = svr.bind_to_any_port(opts.host);
    CACHET_CHECK(port > 0, "cannot listen on ", opts.host, ": no free port");
  } else {
    CACHET_CHECK(svr.bind_to_port(opts.host, port), "cannot listen on ", opts.host, ":", port,
                 " (is the port in use?)");
  }

  std::atomic<bool> finished{false};
  std::thread signals([&] {
    int sig = 0;
    if (sigwait(&sigs, &sig) != 0 || finished) return;
    std::fprintf(
        stderr,
        "cachet serve: %s received, finishing %zu active and %zu queued requests and %d speech "
        "requests\n",
        sig == SIGTERM ? "SIGTERM" : "SIGINT", c.engine->active(), c.engine->queue_depth(),
        c.speech_waiting.load());
    c.stopping = true;
    c.engine->stop_accepting();
    const auto grace = Clock::now() + std::chrono::milliseconds(
                                          static_cast<int64_t>(opts.shutdown_grace_s * 1000));
    auto busy = [&] { return c.inflight.load() > 0 || !c.engine->idle(); };
    while (busy() && Clock::now() < grace)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (busy()) {
      c.ending = true;
      c.engine->end_all("the server is shutting down");
      const auto hard = Clock::now() + std::chrono::seconds(5);
      while (c.inflight.load() > 0 && Clock::now() < hard)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    svr.stop();
  });

  std::printf("cachet serve: listening on http://%s:%d (model %s, %d slots)\n", opts.host.c_str(),
              port, c.model_name.c_str(), opts.parallel);
  std::fflush(stdout);
  const bool ok = svr.listen_after_bind();
  finished = true;
  if (c.stopping.load() == false) {
    // listen failed on its own: wake the signal thread.
    pthread_kill(signals.native_handle(), SIGTERM);
  }
  signals.join();
  c.engine.reset();
  std::fprintf(stderr, "cachet serve: stopped\n");
  return ok || c.stopping ? 0 : 1;
}

}  // namespace cachet
