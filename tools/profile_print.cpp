#include "profile_print.h"

#include <algorithm>

namespace cachet::cli {

void print_profile(std::FILE* out, std::vector<profile::Phase> phases, double seconds,
                   int64_t count, const char* unit) {
  std::stable_sort(
      phases.begin(), phases.end(),
      [](const profile::Phase& a, const profile::Phase& b) { return a.seconds > b.seconds; });
  const double n = static_cast<double>(std::max<int64_t>(count, 1));
  double inside = 0;
  for (const profile::Phase& p : phases) {
    inside += p.seconds;
    std::fprintf(out, "profile: %s: %.3f ms per %s (%.1f%%)", p.name.c_str(), 1e3 * p.seconds / n,
                 unit, 100.0 * p.seconds / seconds);
    if (p.bytes > 0) std::fprintf(out, ", %.1f GB/s", p.bytes / p.seconds / 1e9);
    std::fprintf(out, "\n");
  }
  const double outside = std::max(0.0, seconds - inside);
  std::fprintf(out, "profile: outside the phases: %.3f ms per %s (%.1f%%)\n", 1e3 * outside / n,
               unit, 100.0 * outside / seconds);
  std::fflush(out);
}

}  // namespace cachet::cli
