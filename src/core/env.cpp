#include "cachet/env.h"

#include <cstdlib>
#include <string_view>

#include "cachet/error.h"

namespace cachet {

bool env_switch_on(const char* name) {
  const char* v = std::getenv(name);
  return !(v && std::string_view(v) == "0");
}

int64_t env_count(const char* name, int64_t otherwise) {
  const char* v = std::getenv(name);
  if (!v || !*v) return otherwise;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  if (*end != '\0' || n <= 0) fail(name, "='", v, "': expected a positive count");
  return static_cast<int64_t>(n);
}

}  // namespace cachet
