// Read-only memory mapping of a whole file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace cachet {

class MappedFile {
 public:
  // Maps path read-only; throws cachet::Error naming the file on failure. Empty files map to
  // a null pointer with size 0.
  static std::shared_ptr<MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Hints that the pages wholly inside [p, p + n) will not be read soon: pages of a file
// mapping leave this process's resident set (they are read again from the file if touched);
// other memory is left as it is. Never changes what the memory holds.
void release_pages(const void* p, size_t n);

}  // namespace cachet
