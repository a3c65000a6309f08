// State files: round trip, and every kind of damage gives an error naming the file and the
// problem.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cachet/error.h"
#include "cachet/state_file.h"

namespace {

namespace fs = std::filesystem;
using cachet::StateReader;
using cachet::StateWriter;

class StateFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("cachet_state_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  static std::vector<uint8_t> slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  static void spit(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }

  // A typical state: floats, raw bytes, scalars, an empty section.
  std::string write_sample(const std::string& name) {
    StateWriter w("recurrent_gemma", 0x1234abcd5678ef00ull);
    floats_.resize(1000);
    for (size_t i = 0; i < floats_.size(); ++i) floats_[i] = static_cast<float>(i) * 0.25f - 7.0f;
    w.add_f32("layer0.rg_lru.h", floats_.data(), floats_.size());
    const char raw[5] = {'a', 'b', 'c', 'd', 'e'};
    w.add_section("blob", raw, sizeof raw);
    w.add_u64("position", 123456789012345ull);
    w.add_i64("offset", -42);
    w.add_section("empty", nullptr, 0);
    const std::string path = file(name);
    w.write(path);
    return path;
  }

  // Expects opening (and model checks) of path to throw with all of `parts` in the message.
  static void expect_error(const std::string& path, std::initializer_list<std::string> parts) {
    try {
      StateReader r = StateReader::open(path);
      r.expect_model("recurrent_gemma", 0x1234abcd5678ef00ull);
      FAIL() << "no error for " << path;
    } catch (const cachet::Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
      for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg << " / " << p;
    }
  }

  fs::path dir_;
  std::vector<float> floats_;
};

TEST_F(StateFileTest, RoundTrip) {
  const std::string path = write_sample("a.state");
  const StateReader r = StateReader::open(path);
  EXPECT_EQ(r.version(), cachet::kStateFormatVersion);
  EXPECT_EQ(r.arch(), "recurrent_gemma");
  EXPECT_EQ(r.fingerprint(), 0x1234abcd5678ef00ull);
  EXPECT_NO_THROW(r.expect_model("recurrent_gemma", 0x1234abcd5678ef00ull));
  EXPECT_EQ(r.section_names(),
            (std::vector<std::string>{"blob", "empty", "layer0.rg_lru.h", "offset", "position"}));
  const auto f = r.f32("layer0.rg_lru.h", floats_.size());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f.data()) % 16, 0u);
  EXPECT_EQ(std::vector<float>(f.begin(), f.end()), floats_);
  const auto blob = r.section("blob");
  EXPECT_EQ(std::string(blob.begin(), blob.end()), "abcde");
  EXPECT_EQ(r.section_dtype("blob"), cachet::DType::U8);
  EXPECT_EQ(r.u64("position"), 123456789012345ull);
  EXPECT_EQ(r.i64("offset"), -42);
  EXPECT_EQ(r.section("empty").size(), 0u);
  EXPECT_TRUE(r.has("blob"));
  EXPECT_FALSE(r.has("nope"));
  std::vector<float> copy(floats_.size());
  r.read_exact("layer0.rg_lru.h", copy.data(), copy.size() * sizeof(float));
  EXPECT_EQ(copy, floats_);
  // No temporary file left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(StateFileTest, OverwriteIsAtomicReplacement) {
  const std::string path = write_sample("a.state");
  StateWriter w("recurrent_gemma", 1);
  w.add_u64("position", 7);
  w.write(path);
  const StateReader r = StateReader::open(path);
  EXPECT_EQ(r.u64("position"), 7u);
  EXPECT_FALSE(r.has("blob"));
}

TEST_F(StateFileTest, ReaderOutlivesReplacementOfTheFile) {
  const std::string path = write_sample("a.state");
  const StateReader r = StateReader::open(path);
  StateWriter w("other", 2);
  w.add_u64("position", 1);
  w.write(path);
  EXPECT_EQ(r.u64("position"), 123456789012345ull);
}

TEST_F(StateFileTest, ChecksumIsWordwiseFnvWithLength) {
  // Every single-byte change and every length change gives a different checksum.
  std::vector<uint8_t> bytes(37);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7);
  const uint64_t base = cachet::state_checksum(bytes.data(), bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto b = bytes;
    b[i] ^= 0x01;
    EXPECT_NE(cachet::state_checksum(b.data(), b.size()), base) << i;
  }
  EXPECT_NE(cachet::state_checksum(bytes.data(), bytes.size() - 1), base);
  auto longer = bytes;
  longer.push_back(0);
  EXPECT_NE(cachet::state_checksum(longer.data(), longer.size()), base);
  // Streaming in odd pieces gives the same value as one call.
  cachet::StateChecksum c;
  c.update(bytes.data(), 3);
  c.update(bytes.data() + 3, 11);
  c.update(bytes.data() + 14, 23);
  EXPECT_EQ(c.finish(), base);
  EXPECT_EQ(cachet::state_checksum(nullptr, 0), cachet::state_checksum("", 0));
}

TEST_F(StateFileTest, TruncatedAnywhere) {
  const std::string path = write_sample("a.state");
  const auto bytes = slurp(path);
  ASSERT_GT(bytes.size(), 4000u);
  for (size_t keep : {size_t{0}, size_t{4}, size_t{8}, size_t{10}, size_t{20}, size_t{30},
                      size_t{45}, size_t{60}, size_t{100}, size_t{2000}, bytes.size() - 100,
                      bytes.size() - 9, bytes.size() - 8, bytes.size() - 1}) {
    std::string name = "t";  // (not "t" + to_string: GCC 12 warns falsely on that, -Wrestrict)
    name += std::to_string(keep);
    const std::string t = file(name);
    spit(t, std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(keep)));
    expect_error(t, {"truncated"});
  }
}

TEST_F(StateFileTest, FlippedPayloadByteFailsChecksum) {
  const std::string path = write_sample("a.state");
  const auto bytes = slurp(path);
  for (size_t at : {bytes.size() / 2, bytes.size() - 20, bytes.size() - 3}) {
    auto b = bytes;
    b[at] ^= 0x10;
    const std::string t = file("flip" + std::to_string(at));
    spit(t, b);
    expect_error(t, {"checksum mismatch"});
  }
}

TEST_F(StateFileTest, EveryFlippedByteIsAnError) {
  const std::string path = write_sample("a.state");
  const auto bytes = slurp(path);
  const std::string t = file("flip");
  // Header and section headers, then a stride through the rest.
  for (size_t at = 0; at < bytes.size(); at += at < 200 ? 1 : 97) {
    auto b = bytes;
    b[at] ^= 0x80;
    spit(t, b);
    bool threw = false;
    try {
      StateReader::open(t).expect_model("recurrent_gemma", 0x1234abcd5678ef00ull);
    } catch (const cachet::Error& e) {
      threw = true;
      EXPECT_NE(std::string(e.what()).find(t), std::string::npos) << e.what();
    }
    EXPECT_TRUE(threw) << "byte " << at;
  }
}

TEST_F(StateFileTest, WrongMagic) {
  const std::string path = write_sample("a.state");
  auto b = slurp(path);
  b[0] = 'X';
  spit(path, b);
  expect_error(path, {"not a cachet state file", "magic"});
  const std::string other = file("text.state");
  spit(other, std::vector<uint8_t>{'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'});
  expect_error(other, {"not a cachet state file"});
}

TEST_F(StateFileTest, NewerVersion) {
  const std::string path = write_sample("a.state");
  auto b = slurp(path);
  b[8] = static_cast<uint8_t>(cachet::kStateFormatVersion + 1);
  spit(path, b);
  expect_error(path, {"format version 2", "newer than this build supports (1)"});
}

TEST_F(StateFileTest, WrongModel) {
  const std::string path = write_sample("a.state");
  const StateReader r = StateReader::open(path);
  try {
    r.expect_model("recurrent_gemma", 0x99);
    FAIL();
  } catch (const cachet::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("state file " + path + " was saved from a different model"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("fingerprint 0x1234abcd5678ef00, this model 0x0000000000000099"),
              std::string::npos)
        << msg;
  }
  try {
    r.expect_model("metavoice", 0x1234abcd5678ef00ull);
    FAIL();
  } catch (const cachet::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("different model"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'metavoice'"), std::string::npos) << msg;
  }
}

TEST_F(StateFileTest, MissingSectionAndWrongSize) {
  const std::string path = write_sample("a.state");
  const StateReader r = StateReader::open(path);
  try {
    r.section("layer9.kv");
    FAIL();
  } catch (const cachet::Error& e) {
    EXPECT_EQ(std::string(e.what()), "state file " + path + ": missing section 'layer9.kv'");
  }
  try {
    r.section_exact("blob", 6);
    FAIL();
  } catch (const cachet::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "state file " + path + ": section 'blob' has 5 bytes, expected 6");
  }
  EXPECT_THROW(r.f32("layer0.rg_lru.h", 999), cachet::Error);
  EXPECT_THROW(r.f32("blob", 1), cachet::Error);  // not F32
  EXPECT_THROW(r.u64("offset"), cachet::Error);   // an I64
  EXPECT_THROW(r.i64("blob"), cachet::Error);
  std::vector<float> dst(10);
  EXPECT_THROW(r.read_exact("layer0.rg_lru.h", dst.data(), 40), cachet::Error);
}

TEST_F(StateFileTest, HugeLengthDoesNotAllocate) {
  const std::string path = write_sample("a.state");
  auto b = slurp(path);
  // The first section starts right after the fixed header and the architecture name:
  // 8 magic + 4 version + 4 reserved + 4 + 15 arch + 8 fingerprint + 4 count = 47.
  const size_t name_len_at = 47;
  ASSERT_EQ(b[name_len_at], 15u);  // "layer0.rg_lru.h"
  const size_t len_at = name_len_at + 4 + 15 + 4 + 4;
  for (int i = 0; i < 8; ++i) b[len_at + i] = 0xff;
  spit(path, b);
  expect_error(path, {"section 'layer0.rg_lru.h' payload", "truncated or corrupt"});
  // A huge name length is rejected before reading it.
  b = slurp(path);
  b[name_len_at + 3] = 0x7f;
  spit(path, b);
  expect_error(path, {"corrupt", "name length"});
}

TEST_F(StateFileTest, TrailingGarbage) {
  const std::string path = write_sample("a.state");
  auto b = slurp(path);
  b.push_back(0);
  spit(path, b);
  expect_error(path, {"unexpected bytes after the checksum"});
}

TEST_F(StateFileTest, MissingFile) {
  expect_error(file("nope.state"), {"cannot open"});
}

TEST_F(StateFileTest, WriterRejectsBadSections) {
  StateWriter w("x", 1);
  w.add_u64("a", 1);
  EXPECT_THROW(w.add_u64("a", 2), cachet::Error);
  EXPECT_THROW(w.add_section("", "x", 1), cachet::Error);
  const float f[3] = {1, 2, 3};
  EXPECT_THROW(w.add_section("odd", f, 6, cachet::DType::F32), cachet::Error);
  // Unwritable destination: error names the file, nothing left behind.
  const std::string bad = file("no_such_dir/x.state");
  try {
    w.write(bad);
    FAIL();
  } catch (const cachet::Error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
}

TEST_F(StateFileTest, SectionRefIsWrittenFromCallerMemory) {
  std::vector<float> big(4099);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i);
  StateWriter w("m", 5);
  w.add_section_ref("kv", big.data(), big.size() * sizeof(float), cachet::DType::F32);
  const std::string path = file("ref.state");
  w.write(path);
  const auto r = StateReader::open(path);
  const auto s = r.f32("kv", big.size());
  EXPECT_EQ(std::vector<float>(s.begin(), s.end()), big);
}

}  // namespace
