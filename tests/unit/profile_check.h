// A profiled forward pass, checked the same way for every model: the phases it names, and the
// weight bytes they read against the bytes the model's roofline counts.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include "cachet/profile.h"

namespace cachet {

// Runs pass() with profiling on and expects each of `want` among the phases it recorded, and
// their bytes between 90% and all of `weight_bytes` (what they leave out: embedding rows and
// small f32 vectors).
template <typename Pass>
void expect_profiled_pass(Pass&& pass, std::initializer_list<const char*> want,
                          uint64_t weight_bytes) {
  profile::take();
  profile::set_enabled(true);
  pass();
  profile::set_enabled(false);
  double bytes = 0;
  std::vector<std::string> names;
  for (const profile::Phase& p : profile::take()) {
    EXPECT_GT(p.calls, 0) << p.name;
    bytes += p.bytes;
    names.push_back(p.name);
  }
  for (const char* w : want)
    EXPECT_NE(std::find(names.begin(), names.end(), w), names.end()) << "no phase " << w;
  EXPECT_LE(bytes, static_cast<double>(weight_bytes));
  EXPECT_GE(bytes, 0.9 * static_cast<double>(weight_bytes));
}

}  // namespace cachet
