#include "default_model.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "cachet/error.h"

// models/default.gguf, placed in the executable when it is built (CMake passes the file's path
// and makes this file depend on it), so that an installed or copied cachet needs no other file.
#ifndef CACHET_DEFAULT_MODEL_FILE
#error "CACHET_DEFAULT_MODEL_FILE must name models/default.gguf"
#endif
extern "C" const unsigned char cachet_default_model_begin[];
extern "C" const unsigned char cachet_default_model_end[];
asm(".section .rodata.cachet_default_model,\"a\",@progbits\n"
    ".balign 64\n"
    ".globl cachet_default_model_begin\n"
    "cachet_default_model_begin:\n"
    ".incbin \"" CACHET_DEFAULT_MODEL_FILE
    "\"\n"
    ".globl cachet_default_model_end\n"
    "cachet_default_model_end:\n"
    ".previous\n");

namespace cachet::cli {

namespace {
// The in-memory file's path once default_model_path() has made it, else empty
std::string& made_path() {
  static std::string path;
  return path;
}
}  // namespace

std::string default_model_path() {
  // The loaders take paths: the bytes go once into an anonymous in-memory file, which stays
  // open for the life of the process.
  static std::once_flag once;
  std::string& path = made_path();
  static std::string error;
  std::call_once(once, [&path] {
    const size_t size = static_cast<size_t>(cachet_default_model_end - cachet_default_model_begin);
    const int fd = ::memfd_create("default.gguf", MFD_CLOEXEC);
    if (fd < 0) {
      error = std::string("memfd_create: ") + std::strerror(errno);
      return;
    }
    for (size_t done = 0; done < size;) {
      const ssize_t w = ::write(fd, cachet_default_model_begin + done, size - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        error = std::string("write: ") + std::strerror(errno);
        ::close(fd);
        return;
      }
      done += static_cast<size_t>(w);
    }
    path = "/proc/self/fd/" + std::to_string(fd);
  });
  CACHET_CHECK(error.empty(), "the embedded default model could not be made readable (", error,
               "): pass -m with a GGUF file or a model directory");
  return path;
}

std::string model_or_default(const std::string& model) {
  return model.empty() ? default_model_path() : model;
}

std::string name_default_model(std::string message) {
  const std::string& p = made_path();
  if (p.empty()) return message;
  for (size_t at; (at = message.find(p)) != std::string::npos;)
    message.replace(at, p.size(), "the embedded default model");
  return message;
}

bool is_default_model(const std::string& path) {
  return !path.empty() && path == made_path();
}

}  // namespace cachet::cli
