#include "server/metrics.h"

#include <cmath>
#include <cstdio>

namespace cachet::server {

namespace {

std::string num(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

const std::vector<double> kSeconds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                      1,     2.5,  5,     10,   30,  60,   120};

struct CounterDef {
  const char* name;
  const char* help;
};
const CounterDef kCounters[] = {
    {"cachet_requests_total", "HTTP requests answered, by endpoint and status"},
    {"cachet_prompt_tokens_total", "Prompt tokens of finished generation requests"},
    {"cachet_prompt_tokens_prefilled_total", "Prompt tokens run through the model (not cached)"},
    {"cachet_generated_tokens_total", "Tokens sampled for finished generation requests"},
    {"cachet_rejected_total", "Requests refused before generation, by reason"},
    {"cachet_cancelled_total", "Generations ended because the client went away"},
    {"cachet_timeouts_total", "Generations ended by the per-request time limit"},
    {"cachet_decode_steps_total", "Batched decoding steps"},
    {"cachet_decode_rows_total", "Sequences advanced by batched decoding steps"},
    {"cachet_speech_requests_total", "Speech syntheses finished"},
    {"cachet_speech_audio_seconds_total", "Seconds of audio synthesized"},
};

struct HistDef {
  const char* name;
  const char* help;
};
const HistDef kHists[] = {
    {"cachet_request_duration_seconds", "Time from accepting a generation request to its end"},
    {"cachet_queue_wait_seconds", "Time a generation request waited for a slot"},
    {"cachet_time_to_first_token_seconds", "Time from accepting a request to its first token"},
    {"cachet_speech_duration_seconds", "Time to synthesize one speech request"},
};

}  // namespace

std::string label_escape(const std::string& v) {
  std::string o;
  for (char c : v) {
    if (c == '\\')
      o += "\\\\";
    else if (c == '"')
      o += "\\\"";
    else if (c == '\n')
      o += "\\n";
    else
      o += c;
  }
  return o;
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name) const {
  uint64_t cum = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    cum += counts_[i];
    const std::string le = i < bounds_.size() ? num(bounds_[i]) : "+Inf";
    out += name + "_bucket{le=\"" + le + "\"} " + num(static_cast<double>(cum)) + "\n";
  }
  out += name + "_sum " + num(sum_) + "\n";
  out += name + "_count " + num(static_cast<double>(count_)) + "\n";
}

Metrics::Metrics() {
  for (const auto& c : kCounters) counters_[c.name].help = c.help;
  for (const auto& h : kHists)
    histograms_.emplace(h.name, std::make_pair(h.help, Histogram(kSeconds)));
}

void Metrics::add(const std::string& name, const std::string& labels, double v) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_[name].values[labels] += v;
}

void Metrics::observe(const std::string& name, double v) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = histograms_.find(name);
  if (it != histograms_.end()) it->second.second.observe(v);
}

double Metrics::get(const std::string& name, const std::string& labels) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = counters_.find(name);
  if (it == counters_.end()) return 0;
  auto v = it->second.values.find(labels);
  return v == it->second.values.end() ? 0 : v->second;
}

std::string Metrics::render(const std::vector<Extra>& extras) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& [name, fam] : counters_) {
    out += "# HELP " + name + " " + fam.help + "\n# TYPE " + name + " counter\n";
    if (fam.values.empty()) out += name + " 0\n";
    for (const auto& [labels, v] : fam.values)
      out += name + (labels.empty() ? "" : "{" + labels + "}") + " " + num(v) + "\n";
  }
  for (const auto& [name, h] : histograms_) {
    out += "# HELP " + name + " " + h.first + "\n# TYPE " + name + " histogram\n";
    h.second.render(out, name);
  }
  for (const auto& g : extras) {
    out += "# HELP " + g.name + " " + g.help + "\n# TYPE " + g.name + " " + g.type + "\n";
    out += g.name + " " + num(g.value) + "\n";
  }
  return out;
}

}  // namespace cachet::server
