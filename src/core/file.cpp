#include "cachet/file.h"

#include <fstream>
#include <sstream>

#include "cachet/error.h"

namespace cachet {

std::string read_file(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  CACHET_CHECK(in, path, ": cannot open ", what);
  std::ostringstream os;
  os << in.rdbuf();
  CACHET_CHECK(!in.bad(), path, ": read error");
  return os.str();
}

}  // namespace cachet
