#include "default_model.h"

#include <unistd.h>

#include <filesystem>
#include <vector>

#include "cachet/error.h"

namespace cachet::cli {

namespace {

std::string executable_dir() {
  std::vector<char> buf(4096);
  const ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return "";
  return std::filesystem::path(std::string(buf.data(), static_cast<size_t>(n)))
      .parent_path()
      .string();
}

}  // namespace

std::string default_model_path() {
  namespace fs = std::filesystem;
  std::vector<std::string> tried;
#ifdef CACHET_SOURCE_DIR
  tried.push_back((fs::path(CACHET_SOURCE_DIR) / "models" / "default.gguf").string());
#endif
  const std::string exe = executable_dir();
  if (!exe.empty())
    tried.push_back((fs::path(exe) / ".." / "models" / "default.gguf").lexically_normal().string());
  std::error_code ec;
  for (const auto& p : tried)
    if (fs::is_regular_file(p, ec)) return p;
  std::string where;
  for (const auto& p : tried) where += (where.empty() ? "" : " or ") + p;
  fail("no model given (-m MODEL) and the default model was not found at ",
       where.empty() ? std::string("models/default.gguf") : where,
       ": pass -m with a GGUF file or a model directory");
}

std::string model_or_default(const std::string& model) {
  return model.empty() ? default_model_path() : model;
}

}  // namespace cachet::cli
