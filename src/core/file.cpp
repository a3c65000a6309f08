#include "cachet/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
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

OutputFile::OutputFile(const std::string& path) : path_(path) {
  CACHET_CHECK(!path.empty(), "the output path is empty");
  std::error_code ec;
  // Symlinks followed, so that the link survives and its target is what gets replaced
  target_ =
      fs::is_symlink(fs::symlink_status(path, ec)) ? fs::weakly_canonical(path, ec).string() : path;
  if (target_.empty()) target_ = path;
  struct stat st {};
  const bool exists = ::stat(target_.c_str(), &st) == 0;
  CACHET_CHECK(!(exists && S_ISDIR(st.st_mode)), path, ": is a directory");
  if (exists && !S_ISREG(st.st_mode)) {
    fd_ = ::open(target_.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd_ < 0) fail(path, ": cannot open for writing: ", std::strerror(errno));
  } else {
    if (exists) {
      mode_ = st.st_mode & 07777;
    } else {
      const mode_t mask = ::umask(0);
      ::umask(mask);
      mode_ = 0666 & ~mask;
    }
    // Beside the target, named after it unless that would pass the usual 255-byte name limit
    const fs::path t(target_);
    std::string tmpl = t.filename().string().size() + 11 <= 255
                           ? target_ + ".tmp.XXXXXX"
                           : (t.parent_path() / ".cachet.tmp.XXXXXX").string();
    fd_ = ::mkstemp(tmpl.data());
    if (fd_ < 0) fail(path, ": cannot create a temporary file to write: ", std::strerror(errno));
    tmp_ = tmpl;
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
  // mkstemp creates files with mode 0600: give the result the permissions it had, or the usual
  if (::fchmod(fd_, static_cast<mode_t>(mode_)) != 0)
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
