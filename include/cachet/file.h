// Whole-file reads with errors that name the file.
#pragma once
#include <string>
#include <string_view>

namespace cachet {

// The bytes of path. Errors read "PATH: cannot open WHAT" and "PATH: read error".
std::string read_file(const std::string& path, std::string_view what = "file");

}  // namespace cachet
