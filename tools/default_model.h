// The model used when a command is given no -m: models/default.gguf of the source tree.
#pragma once
#include <string>

namespace cachet::cli {

// Path of the default model: CACHET_SOURCE_DIR/models/default.gguf, else
// ../models/default.gguf next to the executable; an error naming both places when absent.
std::string default_model_path();

// model if not empty, else default_model_path().
std::string model_or_default(const std::string& model);

}  // namespace cachet::cli
