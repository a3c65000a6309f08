// `cachet serve`: the OpenAI-compatible HTTP server (see cachet/server.h).
#include <memory>
#include <string>

#include "cachet/error.h"
#include "cachet/server.h"
#include "cli.h"
#include "default_model.h"

namespace cachet::cli {
namespace {

Register serve_cmd{Command{
    "serve", "Serve the model over an OpenAI-compatible HTTP API", [](CLI::App* sub) {
      auto o = std::make_shared<ServerOptions>();
      auto cache_mb = std::make_shared<double>(256);
      auto body_kb = std::make_shared<double>(1024);
      sub->add_option("-m,--model", o->model_path,
                      "GGUF file or model directory (default: the embedded default model)");
      sub->add_option("--tts", o->tts_dir, "METAVOICE_DIR for POST /v1/audio/speech");
      sub->add_option("--host", o->host, "Address to listen on")->capture_default_str();
      sub->add_option("--port", o->port, "Port to listen on (0: any free port)")
          ->capture_default_str();
      sub->add_option("--api-key", o->api_key,
                      "Require 'Authorization: Bearer KEY' on /v1/* and /metrics");
      sub->add_option("--cors", o->cors_origin,
                      "Let pages from this origin (e.g. https://app.example, or *) call the API "
                      "from a browser: CORS headers and answers to OPTIONS preflights");
      sub->add_option("--parallel", o->parallel, "Requests decoded together")
          ->capture_default_str();
      sub->add_option("--ctx", o->ctx, "Positions per request (prompt + generated tokens)")
          ->capture_default_str();
      sub->add_option("--queue", o->queue_size, "Requests waiting for a slot before 503")
          ->capture_default_str();
      sub->add_option("--max-streams", o->max_streams, "Concurrent streamed responses")
          ->capture_default_str();
      sub->add_option("--max-tokens", o->max_tokens, "Largest max_tokens a request may ask for")
          ->capture_default_str();
      sub->add_option("--default-max-tokens", o->default_max_tokens,
                      "Tokens generated when a request gives no max_tokens")
          ->capture_default_str();
      sub->add_option("--timeout", o->request_timeout_s, "Seconds a request may take at most")
          ->capture_default_str();
      sub->add_option("--cache-mb", *cache_mb, "Prefix-cache budget in MiB (0: off)")
          ->capture_default_str();
      sub->add_option("--max-body-kb", *body_kb, "Largest request body in KiB")
          ->capture_default_str();
      sub->add_option("--shutdown-grace", o->shutdown_grace_s,
                      "Seconds requests in flight get to finish on SIGTERM")
          ->capture_default_str();
      sub->add_option("--name", o->model_name, "Model id shown in /v1/models");
      sub->add_flag(
          "--quiet", [o](int64_t) { o->log_requests = false; },
          "Do not log each request on stderr");
      int* threads = add_threads_option(sub);
      return [o, cache_mb, body_kb, threads]() -> int {
        CACHET_CHECK(*cache_mb >= 0 && *cache_mb < 1e7, "--cache-mb ", *cache_mb,
                     ": give a size in MiB");
        CACHET_CHECK(*body_kb >= 1 && *body_kb < 1e7, "--max-body-kb ", *body_kb,
                     ": give a size in KiB");
        CACHET_CHECK(o->queue_size <= 100000, "--queue ", o->queue_size, ": too large");
        CACHET_CHECK(o->max_streams >= 1, "--max-streams must be at least 1");
        o->cache_bytes = static_cast<size_t>(*cache_mb * 1024 * 1024);
        o->max_body_bytes = static_cast<size_t>(*body_kb * 1024);
        if (o->model_path.empty() && o->model_name.empty()) o->model_name = "default";
        o->model_path = model_or_default(o->model_path);
        apply_threads(*threads);
        o->tts_threads = *threads;
        return run_server(*o);
      };
    }}};

}  // namespace
}  // namespace cachet::cli
