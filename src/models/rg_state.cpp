#include "rg_state.h"

#include <algorithm>

#include "cachet/error.h"

namespace cachet::models {

void RgState::reset() {
  std::fill(buf.begin(), buf.end(), 0.0f);
  pos = 0;
}

void RgState::save(const std::string& path) const {
  fail(path, ": saving a state is not implemented yet");
}

std::unique_ptr<RgState> RgState::load(std::shared_ptr<const RgLayout> lay,
                                       const std::string& path) {
  (void)lay;
  fail(path, ": loading a state is not implemented yet");
}

}  // namespace cachet::models
