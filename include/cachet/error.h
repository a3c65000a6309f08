// Errors: every failure cachet reports is a cachet::Error whose message names what and where.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace cachet {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
}  // namespace detail

// fail("file.gguf: tensor '", name, "': offset past end of file")
template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  throw Error(detail::concat(std::forward<Args>(args)...));
}

#define CACHET_CHECK(cond, ...)                                      \
  do {                                                               \
    if (!(cond)) ::cachet::fail(__VA_ARGS__);                        \
  } while (0)

}  // namespace cachet
