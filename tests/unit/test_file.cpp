// cachet::OutputFile and read_file: what a write does to the path it is given.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "cachet/error.h"
#include "cachet/file.h"

namespace fs = std::filesystem;
using cachet::OutputFile;

namespace {

class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("cachet_output_file_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string contents(const std::string& p) { return cachet::read_file(p); }
  static void put(const std::string& p, const std::string& s) { std::ofstream(p) << s; }
  size_t entries() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), {}));
  }
  fs::path dir_;
};

TEST_F(OutputFileTest, NewFileAppearsOnlyOnCommit) {
  const std::string p = path("a.bin");
  {
    OutputFile f(p);
    f.write("abc", 3);
    EXPECT_FALSE(fs::exists(p));
    f.commit();
  }
  EXPECT_EQ(contents(p), "abc");
  EXPECT_EQ(entries(), 1u);  // no temporary left
}

TEST_F(OutputFileTest, WithoutCommitTheOldFileStays) {
  const std::string p = path("a.bin");
  put(p, "old");
  {
    OutputFile f(p);
    f.write("new bytes", 9);
  }  // an error on the way: never committed
  EXPECT_EQ(contents(p), "old");
  EXPECT_EQ(entries(), 1u);
}

TEST_F(OutputFileTest, ReplacedFileKeepsItsPermissions) {
  const std::string p = path("private.bin");
  put(p, "old");
  ASSERT_EQ(::chmod(p.c_str(), 0600), 0);
  cachet::write_file(p, "new", 3);
  EXPECT_EQ(contents(p), "new");
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST_F(OutputFileTest, SymlinkIsFollowedAndKept) {
  const std::string target = path("target.bin"), link = path("link.bin");
  put(target, "old");
  fs::create_symlink("target.bin", link);
  cachet::write_file(link, "through the link", 16);
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(contents(target), "through the link");
  EXPECT_EQ(entries(), 2u);
}

TEST_F(OutputFileTest, DanglingSymlinkGetsItsTarget) {
  const std::string link = path("latest.bin");
  fs::create_symlink("made.bin", link);
  cachet::write_file(link, "new", 3);
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(contents(path("made.bin")), "new");
}

// /dev/stdout and /proc/self/fd/N name whatever a descriptor holds (here a deleted file, as
// a test runner's captured output): written in place, the link never replaced.
TEST_F(OutputFileTest, DescriptorLinksAreWrittenInPlace) {
  const std::string p = path("held.bin");
  put(p, "old contents");
  const int fd = ::open(p.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  fs::remove(p);
  const std::string via = "/proc/self/fd/" + std::to_string(fd);
  cachet::write_file(via, "abc", 3);
  char buf[16] = {};
  EXPECT_EQ(::pread(fd, buf, sizeof buf, 0), 3);
  EXPECT_EQ(std::string(buf), "abc");
  ::close(fd);
  EXPECT_EQ(entries(), 0u);
}

TEST_F(OutputFileTest, NewFilesTakeTheUmask) {
  const mode_t old = ::umask(027);
  cachet::write_file(path("new.bin"), "x", 1);
  ::umask(old);
  struct stat st {};
  ASSERT_EQ(::stat(path("new.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
}

TEST_F(OutputFileTest, FifoIsWrittenInPlace) {
  const std::string p = path("out.fifo");
  ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = contents(p); });
  try {
    cachet::write_file(p, "to the reader", 13);
  } catch (...) {
    ::close(::open(p.c_str(), O_WRONLY));  // lets the reader's open return
    reader.join();
    throw;
  }
  reader.join();
  EXPECT_EQ(got, "to the reader");
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

TEST_F(OutputFileTest, LongNamesFitTheirTemporary) {
  const std::string p = path(std::string(250, 'n') + ".wav");
  cachet::write_file(p, "x", 1);
  EXPECT_EQ(contents(p), "x");
  EXPECT_EQ(entries(), 1u);
}

TEST_F(OutputFileTest, DirectoriesAndEmptyPathsAreErrors) {
  try {
    OutputFile f(dir_.string());
    FAIL() << "a directory was opened for writing";
  } catch (const cachet::Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
  EXPECT_THROW(OutputFile(""), cachet::Error);
  try {
    cachet::write_file(path("missing/dir/a.bin"), "x", 1);
    FAIL() << "wrote into a missing directory";
  } catch (const cachet::Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing/dir/a.bin"), std::string::npos) << e.what();
  }
}

TEST_F(OutputFileTest, ReadFileNamesADirectory) {
  try {
    cachet::read_file(dir_.string(), "the prompt file");
    FAIL() << "a directory read as a file";
  } catch (const cachet::Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory, not the prompt file"), std::string::npos)
        << e.what();
  }
}

}  // namespace
