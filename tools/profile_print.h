// The lines of a profile (include/cachet/profile.h) as `cachet bench --profile` and `cachet run
// --profile` print them.
#pragma once
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cachet/profile.h"

namespace cachet::cli {

// `profile: PHASE: T ms per UNIT (S%)[, R GB/s]` for each of `phases` (as profile::take() gives
// them), slowest first, over `count` calls taking `seconds` in all, then the time outside every
// phase. R is the weight bytes a phase read over its time.
void print_profile(std::FILE* out, std::vector<profile::Phase> phases, double seconds,
                   int64_t count, const char* unit);

}  // namespace cachet::cli
