// libFuzzer target: the saved-state reader on arbitrary bytes must either accept the file or
// throw cachet::Error. Every input is also read with its last 8 bytes replaced by the checksum
// of the rest, so that mutations reach the sections rather than stopping at a checksum
// mismatch. An accepted file's sections must be readable, and writing them again must give a
// file that reads back with the same architecture, fingerprint, names, types and bytes.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cachet/error.h"
#include "cachet/state_file.h"

namespace {

std::string temp_path(const char* suffix) {
  return (std::filesystem::temp_directory_path() /
          ("cachet_fuzz_state_" + std::to_string(::getpid()) + suffix))
      .string();
}

void write_all(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  if (std::fclose(f) != 0) std::abort();
}

void check(const std::string& path, const std::string& again) {
  try {
    const cachet::StateReader r = cachet::StateReader::open(path);
    cachet::StateWriter w(r.arch(), r.fingerprint());
    const std::vector<std::string> names = r.section_names();
    for (const std::string& name : names) {
      const auto s = r.section(name);
      if (!s.empty()) {
        volatile uint8_t ends = s.front() ^ s.back();
        (void)ends;
      }
      w.add_section(name, s.data(), s.size(), r.section_dtype(name));
    }
    w.write(again);
    const cachet::StateReader r2 = cachet::StateReader::open(again);
    if (r2.arch() != r.arch() || r2.fingerprint() != r.fingerprint() || r2.section_names() != names)
      std::abort();
    for (const std::string& name : names) {
      const auto a = r.section(name), b = r2.section(name);
      if (r2.section_dtype(name) != r.section_dtype(name) || a.size() != b.size() ||
          (!a.empty() && std::memcmp(a.data(), b.data(), a.size()) != 0))
        std::abort();
    }
  } catch (const cachet::Error&) {
  }
}

}  // namespace

// The two files an input is written to, removed when the process exits.
struct TempFiles {
  std::string path = temp_path(".state"), again = temp_path(".again.state");
  ~TempFiles() {
    std::remove(path.c_str());
    std::remove(again.c_str());
  }
};

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const TempFiles files;
  const std::string& path = files.path;
  const std::string& again = files.again;
  write_all(path, data, size);
  check(path, again);
  if (size >= 8) {
    std::vector<uint8_t> fixed(data, data + size);
    const uint64_t sum = cachet::state_checksum(fixed.data(), size - 8);
    for (int i = 0; i < 8; ++i) fixed[size - 8 + i] = static_cast<uint8_t>(sum >> (8 * i));
    write_all(path, fixed.data(), size);
    check(path, again);
  }
  return 0;
}
