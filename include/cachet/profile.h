// Where a forward pass's time goes: named phases timed on the thread that runs the pass (the
// one that hands work to the pool), off unless asked for (`cachet bench --profile`). A model
// marks each phase of its pass with a Scope, giving the bytes of weights the phase reads where
// it reads any, so that a profile shows each matrix product's rate beside its share of the time.
// Off, a Scope costs one relaxed atomic load; on, two reads of the clock.
//
// Phases do not nest: a Scope inside another counts its time twice. The time a pass spends
// outside every phase is what a caller's own timing has beyond the phases' sum.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cachet::profile {

void set_enabled(bool on);
bool enabled();

struct Phase {
  std::string name;
  int64_t calls = 0;
  double seconds = 0;  // summed over the calls
  double bytes = 0;    // weight bytes the calls read, summed
};
// The phases recorded since the last take(), in the order each was first seen; forgets them.
std::vector<Phase> take();

// Times its own lifetime as one call of `phase` (a string that outlives the program, such as a
// literal) that reads `bytes` of weights.
class Scope {
 public:
  explicit Scope(const char* phase, double bytes = 0);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  const char* phase_;
  double bytes_;
  int64_t start_ns_;  // < 0: profiling was off when the scope began
};

}  // namespace cachet::profile
