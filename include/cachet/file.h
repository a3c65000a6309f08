// Whole-file reads, and files written so that a failure never leaves a partial one, with errors
// that name the file.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace cachet {

// The bytes of path. Errors read "PATH: cannot open WHAT", "PATH: is a directory, not WHAT"
// and "PATH: read error".
std::string read_file(const std::string& path, std::string_view what = "file");

// A file written whole or not at all. The bytes go to a temporary file beside the target, which
// commit() syncs and renames over it; without commit() (an error on the way) the temporary is
// removed and whatever was at the path before is untouched. The target:
// - a symlink is followed: the file it points to is replaced (or created), the link stays;
//   one that leads through /proc (/dev/stdout), loops or cannot be read is written in place;
// - an existing file keeps its permissions (a new one gets 0666 less the umask);
// - an existing file that is not a regular file (/dev/null, a FIFO) is written in place,
//   since renaming over it would replace the device;
// - an existing directory, or an empty path, is an error before anything is written.
// Errors read "PATH: ...".
class OutputFile {
 public:
  explicit OutputFile(const std::string& path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, size_t size);
  void commit();
  const std::string& path() const { return path_; }

 private:
  void flush();

  std::string path_;    // as given, for messages
  std::string target_;  // where the bytes end up (symlinks followed)
  std::string tmp_;     // empty when writing in place
  int fd_ = -1;
  int mode_ = -1;  // the permissions of the file replaced; -1: a new file
  bool done_ = false;
  std::vector<unsigned char> buf_;
};

// Writes bytes to path as an OutputFile.
void write_file(const std::string& path, const void* data, size_t size);

}  // namespace cachet
