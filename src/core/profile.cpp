#include "cachet/profile.h"

#include <atomic>
#include <chrono>
#include <mutex>

namespace cachet::profile {
namespace {

std::atomic<bool> g_on{false};
std::mutex g_mu;
std::vector<Phase> g_phases;  // under g_mu

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void record(const char* phase, double seconds, double bytes) {
  std::lock_guard<std::mutex> lock(g_mu);
  Phase* p = nullptr;
  for (Phase& q : g_phases)
    if (q.name == phase) {
      p = &q;
      break;
    }
  if (!p) {
    g_phases.push_back(Phase{phase});
    p = &g_phases.back();
  }
  ++p->calls;
  p->seconds += seconds;
  p->bytes += bytes;
}

}  // namespace

void set_enabled(bool on) {
  g_on.store(on, std::memory_order_relaxed);
}

bool enabled() {
  return g_on.load(std::memory_order_relaxed);
}

std::vector<Phase> take() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<Phase> out;
  out.swap(g_phases);
  return out;
}

Scope::Scope(const char* phase, double bytes)
    : phase_(phase), bytes_(bytes), start_ns_(enabled() ? now_ns() : -1) {}

Scope::~Scope() {
  if (start_ns_ < 0) return;
  record(phase_, static_cast<double>(now_ns() - start_ns_) * 1e-9, bytes_);
}

}  // namespace cachet::profile
