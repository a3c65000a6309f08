// load_model: opens model files and picks the architecture.
#include "cachet/error.h"
#include "cachet/gguf.h"
#include "cachet/model.h"
#include "cachet/model_files.h"
#include "cachet/recurrent_gemma.h"

namespace cachet {

std::unique_ptr<LanguageModel> load_model(const std::string& path, const LoadOptions& opts) {
  ModelFiles files = ModelFiles::open(path);
  std::string arch;
  auto it = files.config.find("model_type");
  if (it != files.config.end() && it->is_string()) arch = it->get<std::string>();
  if (arch.empty() && files.gguf) arch = files.gguf->get_string("general.architecture", "");
  if (arch.empty())
    fail(path, ": cannot tell the model architecture (no model_type in config.json and no ",
         "general.architecture in the GGUF metadata)");
  if (arch == "recurrent_gemma" || arch == "recurrentgemma")
    return make_recurrent_gemma(std::move(files), opts.pool);
  fail(path, ": unsupported model architecture '", arch, "'");
}

}  // namespace cachet
