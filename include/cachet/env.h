// Switches read from the environment.
#pragma once

namespace cachet {

// Whether the switch `name` (CACHET_HUGE_PAGES, CACHET_REPACK, ...) is on: unset, or set to
// anything but "0". Read on every call: callers keep the answer.
bool env_switch_on(const char* name);

}  // namespace cachet
