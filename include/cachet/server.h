// `cachet serve`: an OpenAI-compatible HTTP server.
//
// Endpoints: GET / (a chat and speech web page), GET /health, GET /v1/models,
// POST /v1/completions, POST /v1/chat/completions (both with "stream": true as server-sent
// events), POST /v1/audio/speech (when a MetaVoice directory is loaded), GET /metrics
// (Prometheus text format).
//
// Generation runs on one scheduler thread with continuous batching: up to `parallel` requests
// decode together in one batched forward pass per step, each with its own decoding state;
// further requests wait in a bounded queue (503 with Retry-After when it is full). Decoding
// states at prompt prefixes (a system prompt, earlier chat turns) are kept in a prefix cache
// under a byte budget with LRU eviction; reuse shows in usage.prompt_tokens_details.cached_tokens
// and in /metrics. A client that disconnects frees its slot at once. SIGTERM or SIGINT stops
// accepting requests, lets those in flight finish (ending them after shutdown_grace_s) and exits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace cachet {

struct ServerOptions {
  std::string model_path;  // GGUF file or model directory
  std::string model_name;  // id in /v1/models; "": the file name without extension
  std::string tts_dir;     // METAVOICE_DIR; "": no speech
  std::string host = "127.0.0.1";
  int port = 8080;                   // 0: any free port (the chosen one is printed)
  std::string api_key;               // "": no authentication
  std::string cors_origin;           // "": no CORS headers; "*" or one origin that browsers may
                                     // call the API from
  int parallel = 4;                  // requests decoded together
  int64_t ctx = 4096;                // positions per request: prompt + generated tokens
  size_t queue_size = 64;            // requests waiting for a slot
  int max_streams = 64;              // concurrent streamed responses
  int64_t max_tokens = 4096;         // the largest max_tokens a request may ask for
  int64_t default_max_tokens = 512;  // when a request gives none
  size_t max_body_bytes = 1u << 20;  // request body
  size_t max_speech_chars = 2000;    // input of /v1/audio/speech
  double request_timeout_s = 300;    // per generation request
  size_t cache_bytes = 256u << 20;   // prefix-cache budget
  double shutdown_grace_s = 30;      // time given to requests in flight on SIGTERM
  int http_threads = 0;              // 0: enough for parallel + queue + streams
  int tts_threads = 0;               // speech synthesis workers (<= 0: one per hardware thread)
  int max_speech_waiting = 4;        // speech requests waiting for the synthesizer before 503
  bool log_requests = true;          // one line per request on stderr
};

// Loads the model (and the MetaVoice directory), listens and serves until SIGTERM or SIGINT.
// Prints "cachet serve: listening on http://HOST:PORT" on stdout once ready. Returns the
// process exit code; load and bind errors are cachet::Error.
int run_server(const ServerOptions& opts);

}  // namespace cachet
