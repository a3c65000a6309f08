#include "cachet/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "cachet/error.h"

namespace cachet {

namespace fs = std::filesystem;

std::string read_file(const std::string& path, std::string_view what) {
  std::error_code ec;
  CACHET_CHECK(!fs::is_directory(path, ec), path, ": is a directory, not ", what);
  std::ifstream in(path, std::ios::binary);
  CACHET_CHECK(in, path, ": cannot open ", what);
  std::ostringstream os;
  os << in.rdbuf();
  CACHET_CHECK(!in.bad(), path, ": read error");
  return os.str();
}

namespace {

constexpr size_t kOutputBuffer = size_t{1} << 20;

void write_all(int fd, const std::string& path, const unsigned char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail(path, ": write failed: ", std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

namespace {

// Where a write to path lands: the file at the end of its chain of symlinks (each resolved
// against its own directory), or "" when the chain leads through /proc (/dev/stdout and
// /proc/self/fd/N name whatever a descriptor holds: a pipe, a deleted file), loops, or cannot
// be read; those are written in place.
std::string resolve_links(const std::string& path) {
  fs::path p(path);
  if (path.rfind("/proc/", 0) == 0) return "";
  for (int hops = 0; hops < 40; ++hops) {
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(p, ec);
    if (st.type() == fs::file_type::not_found) return p.string();  // a new file (or dangling)
    if (ec) return "";
    if (!fs::is_symlink(st)) return p.string();
    const fs::path to = fs::read_symlink(p, ec);
    if (ec) return "";
    p = to.is_absolute() ? to : p.parent_path() / to;
    if (p.string().rfind("/proc/", 0) == 0) return "";
  }
  return "";
}

}  // namespace

OutputFile::OutputFile(const std::string& path) : path_(path) {
  CACHET_CHECK(!path.empty(), "the output path is empty");
  target_ = resolve_links(path);
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;  // what the path leads to
  CACHET_CHECK(!(exists && S_ISDIR(st.st_mode)), path, ": is a directory");
  bool in_place = target_.empty();
  if (exists && !in_place) {
    // A device or FIFO, or a file the link chain does not lead to by name (a descriptor's
    // deleted file behind /dev/fd/N): renaming over the name would not reach it
    struct stat at {};
    in_place = !S_ISREG(st.st_mode) || ::stat(target_.c_str(), &at) != 0 ||
               at.st_dev != st.st_dev || at.st_ino != st.st_ino;
  }
  if (in_place) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd_ < 0) fail(path, ": cannot open for writing: ", std::strerror(errno));
    return;
  }
  // Beside the target, named after it unless that would pass the usual 255-byte name limit.
  // Created 0666 so that the kernel applies the umask (reading it would change it for every
  // thread); a file it replaces gives it its own mode at commit.
  if (exists) mode_ = static_cast<int>(st.st_mode & 07777);
  const fs::path t(target_);
  const std::string stem = t.filename().string().size() + 16 <= 255
                               ? target_ + ".tmp."
                               : (t.parent_path() / ".cachet.tmp.").string();
  std::random_device rd;
  for (int attempt = 0; fd_ < 0; ++attempt) {
    char suffix[17];
    std::snprintf(suffix, sizeof suffix, "%08x%08x", rd(), rd());
    tmp_ = stem + suffix;
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && (errno != EEXIST || attempt >= 100)) {
      tmp_.clear();
      fail(path, ": cannot create a temporary file to write: ", std::strerror(errno));
    }
  }
  buf_.reserve(kOutputBuffer);
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!done_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

void OutputFile::flush() {
  if (!buf_.empty()) write_all(fd_, path_, buf_.data(), buf_.size());
  buf_.clear();
}

void OutputFile::write(const void* data, size_t size) {
  CACHET_CHECK(fd_ >= 0 && !done_, path_, ": written after it was closed");
  const auto* p = static_cast<const unsigned char*>(data);
  if (buf_.size() + size > kOutputBuffer) flush();
  if (size >= kOutputBuffer) {
    write_all(fd_, path_, p, size);
    return;
  }
  buf_.insert(buf_.end(), p, p + size);
}

void OutputFile::commit() {
  CACHET_CHECK(fd_ >= 0 && !done_, path_, ": committed twice");
  flush();
  if (tmp_.empty()) {  // in place: a device or a FIFO, nothing to sync or rename
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail(path_, ": close failed: ", std::strerror(errno));
    done_ = true;
    return;
  }
  if (::fsync(fd_) != 0) fail(path_, ": sync failed: ", std::strerror(errno));
  // A file it replaces keeps its permissions (a new one has 0666 less the umask)
  if (mode_ >= 0 && ::fchmod(fd_, static_cast<mode_t>(mode_)) != 0)
    fail(path_, ": cannot set permissions: ", std::strerror(errno));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail(path_, ": close failed: ", std::strerror(errno));
  if (std::rename(tmp_.c_str(), target_.c_str()) != 0)
    fail(path_, ": cannot rename the temporary file into place: ", std::strerror(errno));
  done_ = true;
}

void write_file(const std::string& path, const void* data, size_t size) {
  OutputFile f(path);
  f.write(data, size);
  f.commit();
}

}  // namespace cachet
