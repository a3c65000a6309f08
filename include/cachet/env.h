// Switches read from the environment.
#pragma once
#include <cstdint>

namespace cachet {

// Whether the switch `name` (CACHET_HUGE_PAGES, CACHET_REPACK, ...) is on: unset, or set to
// anything but "0". Read on every call: callers keep the answer.
bool env_switch_on(const char* name);

// The positive count the variable `name` holds (CACHET_KV_RUN, CACHET_ENCODEC_PIECE, ...), or
// `otherwise` when it is unset or empty; anything but a positive integer is an error naming
// the variable. Read on every call.
int64_t env_count(const char* name, int64_t otherwise);

}  // namespace cachet
