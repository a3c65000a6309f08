#include "cachet/env.h"

#include <cstdlib>
#include <string_view>

namespace cachet {

bool env_switch_on(const char* name) {
  const char* v = std::getenv(name);
  return !(v && std::string_view(v) == "0");
}

}  // namespace cachet
