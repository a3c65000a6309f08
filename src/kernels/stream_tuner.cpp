// The StreamWay of each X16 layout, measured on the products themselves.
//
// A (layout, activation rows) slot starts with its kernel's default way. Its products of at
// least kMinBytes then take the ways that differ for that kernel in rounds: each round gives
// every way one product, in a new random order, timed by the caller. Once every way has
// kMinCalls products and kMinWayBytes, the way with the highest median rate per product is
// kept. Equal numbers of products per way, in random order, keep a model's repeating sequence
// of matrix shapes from favouring one way; the median per product keeps one large product (an
// output head) from outweighing the rest, and a few products slowed by other work on the
// machine from deciding. After kRetuneBytes more, the slot measures again, so
// a choice made while the machine was loaded differently does not stay for good. Nothing here
// changes a result: every way computes the same outputs.
#include "kernels/stream_tuner.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "cachet/cpu.h"
#include "cachet/error.h"
#include "kernels/vecdot.h"

namespace cachet {
namespace {

constexpr size_t kMinBytes = size_t{1} << 20;  // smaller products are not timed
// Per way. Bytes decide for most slots (RecurrentGemma-2B's matrices are 4-40 MB); two calls
// keep one call from deciding alone where the products are few and large (an output head of
// 0.5 GB, one call per token, measures in 8 tokens).
constexpr int kMinCalls = 2;
constexpr size_t kMinWayBytes = size_t{256} << 20;  // per way
constexpr size_t kRetuneBytes = size_t{64} << 30;   // streamed before measuring again
constexpr int kLayouts = 9, kMaxNx = 4;

constexpr int kMaxRates = 128;  // per way; calls past these count only their bytes

struct WayStats {
  double bytes = 0;
  float rates[kMaxRates];  // bytes per second of the first calls
  int calls = 0;

  // The median rate over the calls recorded (0 if none): on a machine shared with other
  // work, a few calls slowed by a neighbour move a mean but not the median.
  double median() {
    const int n = calls < kMaxRates ? calls : kMaxRates;
    if (n == 0) return 0;
    std::nth_element(rates, rates + n / 2, rates + n);
    return rates[n / 2];
  }
};

struct Slot {
  bool init = false;
  bool ways[kStreamWays] = {};  // the ways that differ for this kernel
  StreamWay way = StreamWay::One;
  bool measured = false;
  bool measuring = false;
  size_t since = 0;  // bytes streamed since the last choice
  WayStats stats[kStreamWays];
  int order[kStreamWays] = {};  // this round's ways, in random order
  int n_order = 0, pos = 0;
};

// Each way's CACHET_STREAM code and name, in StreamWay order.
constexpr struct {
  const char* code;
  const char* name;
} kWayNames[kStreamWays] = {{"1", "1 group"},
                            {"1p", "1 group + prefetch"},
                            {"2", "2 groups"},
                            {"2p", "2 groups + prefetch"},
                            {"4", "4 groups"},
                            {"1f", "1 group + far prefetch"},
                            {"2f", "2 groups + far prefetch"},
                            {"2n", "2 groups + near prefetch"}};

std::optional<StreamWay> parse_env() {
  const char* v = std::getenv("CACHET_STREAM");
  if (!v || !*v) return std::nullopt;
  const std::string s(v);
  if (s == "auto") return std::nullopt;
  for (int w = 0; w < kStreamWays; ++w)
    if (s == kWayNames[w].code) return static_cast<StreamWay>(w);
  fail("CACHET_STREAM='", s, "': expected 1, 1p, 2, 2p, 4, 1f, 2f, 2n or auto");
}

class Tuner {
 public:
  Tuner() : forced_(parse_env()) {
    const char* v = std::getenv("CACHET_STREAM_LOG");
    log_ = v && *v && std::string(v) != "0";
  }

  void force(std::optional<StreamWay> way) {
    std::lock_guard lock(mu_);
    forced_ = way;
    for (auto& row : slots_)
      for (Slot& s : row) s = Slot{};
  }

  kern::StreamPick pick(MatLayout layout, int nx, size_t bytes) {
    std::lock_guard lock(mu_);
    Slot& s = slot(layout, nx);
    if (forced_) return {kern::x16_effective_way(layout, nx, *forced_), false};
    if (bytes < kMinBytes) return {s.way, false};
    if (!s.measuring) {
      s.since += bytes;
      if (s.measured && s.since < kRetuneBytes) return {s.way, false};
      s.measuring = true;
      s.pos = s.n_order = 0;
      for (WayStats& w : s.stats) w = WayStats{};
    }
    if (s.pos == s.n_order) {  // a round is over: decide, or start another
      if (measured_enough(s)) {
        decide(s);
        if (log_) print_decision(s, layout, nx);
        return {s.way, false};
      }
      s.n_order = 0;
      for (int w = 0; w < kStreamWays; ++w)
        if (s.ways[w]) s.order[s.n_order++] = w;
      for (int k = s.n_order - 1; k > 0; --k) std::swap(s.order[k], s.order[next_random(k + 1)]);
      s.pos = 0;
    }
    return {static_cast<StreamWay>(s.order[s.pos++]), true};
  }

  void report(MatLayout layout, int nx, StreamWay way, size_t bytes, double seconds) {
    std::lock_guard lock(mu_);
    Slot& s = slot(layout, nx);
    if (!s.measuring) return;
    if (seconds <= 0) return;
    WayStats& w = s.stats[static_cast<int>(way)];
    w.bytes += static_cast<double>(bytes);
    if (w.calls < kMaxRates)
      w.rates[w.calls] = static_cast<float>(static_cast<double>(bytes) / seconds);
    ++w.calls;
  }

  bool measuring(int nx) {
    std::lock_guard lock(mu_);
    nx = nx < 1 ? 1 : (nx > kMaxNx ? kMaxNx : nx);
    for (const auto& row : slots_)
      if (row[nx - 1].measuring) return true;
    return false;
  }

  StreamChoice choice(MatLayout layout, int nx) {
    if (active_isa() != Isa::Avx512) return {StreamWay::One, false};  // no X16 kernels run
    std::lock_guard lock(mu_);
    if (forced_) return {kern::x16_effective_way(layout, nx, *forced_), false};
    const Slot& s = slot(layout, nx);
    return {s.way, s.measured};
  }

 private:
  Slot& slot(MatLayout layout, int nx) {
    const int l = static_cast<int>(layout) - 1;
    CACHET_CHECK(l >= 0 && l < kLayouts, "stream ways: layout ", l + 1, " is not an X16 layout");
    nx = nx < 1 ? 1 : (nx > kMaxNx ? kMaxNx : nx);
    Slot& s = slots_[l][nx - 1];
    if (!s.init) {
      s.init = true;
      s.way = kern::x16_default_way(layout, nx);
      for (int w = 0; w < kStreamWays; ++w)
        s.ways[static_cast<int>(kern::x16_effective_way(layout, nx, static_cast<StreamWay>(w)))] =
            true;
    }
    return s;
  }

  static bool measured_enough(const Slot& s) {
    for (int w = 0; w < kStreamWays; ++w)
      if (s.ways[w] && (s.stats[w].calls < kMinCalls || s.stats[w].bytes < kMinWayBytes))
        return false;
    return true;
  }

  // Keeps the way with the highest median rate over its calls (each call weighs the same, so
  // one large product does not outweigh the rest), or the current way if none has a time.
  static void decide(Slot& s) {
    int best = -1;
    double best_rate = 0;
    for (int w = 0; w < kStreamWays; ++w) {
      if (!s.ways[w] || s.stats[w].calls == 0) continue;
      const double rate = s.stats[w].median();
      if (rate > best_rate) best = w, best_rate = rate;
    }
    if (best >= 0) s.way = static_cast<StreamWay>(best);
    s.measured = best >= 0;
    s.measuring = false;
    s.since = 0;
  }

  // CACHET_STREAM_LOG=1: each decision's medians on stderr, the finest comparison of the ways
  // there is (taken in random order within the same seconds): `stream ways Q4_K, 1 row:
  // 1 22.0, 1p 30.0, ..., 2n 32.2 GB/s (median per product); keeps 2n`.
  static void print_decision(Slot& s, MatLayout layout, int nx) {
    std::string line = "stream ways ";
    line += dtype_name(layout_type(layout));
    line += ", " + std::to_string(nx) + (nx == 1 ? " row:" : " rows:");
    char buf[48];
    for (int w = 0; w < kStreamWays; ++w)
      if (s.ways[w] && s.stats[w].calls > 0) {
        std::snprintf(buf, sizeof buf, " %s %.2f,", kWayNames[w].code, s.stats[w].median() / 1e9);
        line += buf;
      }
    if (line.back() == ',') line.pop_back();
    line += " GB/s (median per product); keeps ";
    line += kWayNames[static_cast<int>(s.way)].code;
    std::fprintf(stderr, "%s\n", line.c_str());
  }

  // Uniform in [0, n).
  int next_random(int n) {
    rng_ = rng_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int>((rng_ >> 33) % static_cast<uint64_t>(n));
  }

  std::mutex mu_;
  std::optional<StreamWay> forced_;
  bool log_ = false;
  Slot slots_[kLayouts][kMaxNx];
  uint64_t rng_ = 0x853c49e6748fea9bull;
};

Tuner& tuner() {
  static Tuner t;
  return t;
}

}  // namespace

std::string_view stream_way_name(StreamWay way) {
  const int w = static_cast<int>(way);
  return w >= 0 && w < kStreamWays ? kWayNames[w].name : "?";
}

void set_stream_way(std::optional<StreamWay> way) {
  tuner().force(way);
}

StreamChoice stream_choice(MatLayout layout, int nx) {
  return tuner().choice(layout, nx);
}

bool stream_ways_measuring(int nx) {
  return tuner().measuring(nx);
}

namespace kern {

StreamPick pick_stream_way(MatLayout layout, int nx, size_t bytes) {
  return tuner().pick(layout, nx, bytes);
}

void report_stream_time(MatLayout layout, int nx, StreamWay way, size_t bytes, double seconds) {
  tuner().report(layout, nx, way, bytes, seconds);
}

}  // namespace kern
}  // namespace cachet
