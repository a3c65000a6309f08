// The model used when a command is given no -m: models/default.gguf of the source tree,
// embedded in the executable when it is built.
#pragma once
#include <string>

namespace cachet::cli {

// A path from which the embedded default model reads like a file (an in-memory file of this
// process); an error when it cannot be made.
std::string default_model_path();

// model if not empty, else default_model_path().
std::string model_or_default(const std::string& model);

// message with the in-memory file's path (once made) named "the embedded default model".
std::string name_default_model(std::string message);

// Whether path is default_model_path() (for names shown to users: "default").
bool is_default_model(const std::string& path);

}  // namespace cachet::cli
