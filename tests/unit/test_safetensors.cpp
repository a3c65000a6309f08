#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cachet/error.h"
#include "cachet/safetensors.h"

using namespace cachet;

namespace {
// Element i of a tensor read byte-wise: safetensors data need not be aligned for its type.
template <typename T>
T load(const Tensor& t, size_t i) {
  T v;
  std::memcpy(&v, t.bytes() + i * sizeof(T), sizeof(T));
  return v;
}
}  // namespace
using ::testing::HasSubstr;

namespace {

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "st_" + name;
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// A file from a raw header string and data bytes.
std::vector<uint8_t> image(const std::string& header, size_t data_bytes,
                           uint64_t hlen_override = 0) {
  std::vector<uint8_t> b(8 + header.size() + data_bytes, 0);
  const uint64_t n = hlen_override ? hlen_override : header.size();
  std::memcpy(b.data(), &n, 8);
  if (!header.empty()) std::memcpy(b.data() + 8, header.data(), header.size());
  return b;
}

std::string error_of(const std::vector<uint8_t>& bytes, const std::string& name) {
  const std::string path = temp_path(name);
  write_bytes(path, bytes);
  try {
    SafetensorsFile::open(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_ST_ERROR(bytes, name, problem)              \
  do {                                                     \
    const std::string msg_ = error_of((bytes), (name));    \
    EXPECT_THAT(msg_, HasSubstr(temp_path(name))) << msg_; \
    EXPECT_THAT(msg_, HasSubstr(problem)) << msg_;         \
  } while (0)

}  // namespace

TEST(Safetensors, DtypeNames) {
  const char* names[] = {"BOOL", "U8",  "I8",   "I16", "U16", "I32",     "U32",    "I64",
                         "U64",  "F16", "BF16", "F32", "F64", "F8_E4M3", "F8_E5M2"};
  for (const char* n : names) {
    auto t = dtype_from_safetensors(n);
    ASSERT_TRUE(t.has_value()) << n;
    EXPECT_EQ(safetensors_dtype_name(*t), n);
  }
  EXPECT_EQ(dtype_from_safetensors("U8"), DType::U8);
  EXPECT_EQ(dtype_from_safetensors("BF16"), DType::BF16);
  EXPECT_FALSE(dtype_from_safetensors("Q4_K").has_value());
  EXPECT_THROW(safetensors_dtype_name(DType::Q8_0), Error);
}

TEST(Safetensors, RoundTripEveryDtype) {
  SafetensorsWriter w;
  w.add_metadata("format", "pt");
  w.add_metadata("note", "x\"y");
  std::vector<std::vector<uint8_t>> payloads;
  const char* names[] = {"BOOL", "U8",  "I8",   "I16", "U16", "I32",     "U32",    "I64",
                         "U64",  "F16", "BF16", "F32", "F64", "F8_E4M3", "F8_E5M2"};
  for (const char* n : names) {
    const DType t = *dtype_from_safetensors(n);
    const size_t es = static_cast<size_t>(dtype_info(t).block_bytes);
    std::vector<uint8_t> data(2 * 3 * es);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i + es);
    if (t == DType::BOOL)
      for (auto& v : data) v &= 1;
    w.add_tensor(std::string("t.") + n, t, {2, 3}, data.data(), data.size());
    payloads.push_back(std::move(data));
  }
  w.add_tensor("scalar", DType::F32, {}, [](const SafetensorsWriter::Sink& s) {
    float v = 2.5f;
    s(&v, 4);
  });
  w.add_tensor("empty", DType::F32, {0, 4}, nullptr, 0);
  const std::string path = temp_path("all.safetensors");
  w.write(path);
  auto f = SafetensorsFile::open(path);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  EXPECT_EQ(f->metadata().at("note"), "x\"y");
  EXPECT_EQ(f->data_offset() % 8, 0u);
  ASSERT_EQ(f->tensors().size(), 17u);
  for (size_t i = 0; i < 15; ++i) {
    const Tensor& t = f->tensors()[i];
    EXPECT_EQ(t.name, std::string("t.") + names[i]);
    EXPECT_EQ(t.dtype, *dtype_from_safetensors(names[i]));
    EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 3}));
    ASSERT_EQ(t.nbytes, payloads[i].size());
    EXPECT_EQ(std::memcmp(t.data, payloads[i].data(), t.nbytes), 0) << names[i];
  }
  EXPECT_EQ(f->get("scalar").shape.size(), 0u);
  float scalar = 0;  // back to back in the file: not necessarily 4-byte aligned
  std::memcpy(&scalar, f->get("scalar").data, 4);
  EXPECT_EQ(scalar, 2.5f);
  EXPECT_EQ(f->get("empty").nbytes, 0u);
  try {
    f->get("missing");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(path));
    EXPECT_THAT(e.what(), HasSubstr("missing tensor 'missing'"));
  }
}

TEST(Safetensors, ReadsForeignLayout) {
  // Header written by hand in another key order, with padding spaces, as other writers do.
  const std::string h =
      R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
      R"("a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"k":"v"}}    )";
  auto bytes = image(h, 16);
  const float fv[2] = {1.5f, -2.0f};
  const int32_t iv[2] = {7, -7};
  std::memcpy(bytes.data() + 8 + h.size(), iv, 8);
  std::memcpy(bytes.data() + 8 + h.size() + 8, fv, 8);
  auto f = SafetensorsFile::from_memory(bytes.data(), bytes.size(), "mem.safetensors");
  EXPECT_EQ(f->tensors()[0].name, "b");  // header order kept
  EXPECT_EQ(load<int32_t>(f->get("a"), 1), -7);
  EXPECT_EQ(load<float>(f->get("b"), 0), 1.5f);
  EXPECT_EQ(f->metadata().at("k"), "v");
}

TEST(Safetensors, Sharded) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / "st_sharded";
  fs::remove_all(dir);
  fs::create_directories(dir);
  float a[4] = {1, 2, 3, 4}, b[2] = {5, 6};
  SafetensorsWriter s1, s2;
  s1.add_tensor("a", DType::F32, {2, 2}, a, sizeof a);
  s2.add_tensor("b", DType::F32, {2}, b, sizeof b);
  s1.write((dir / "model-00001-of-00002.safetensors").string());
  s2.write((dir / "model-00002-of-00002.safetensors").string());
  const std::string index = (dir / "model.safetensors.index.json").string();
  {
    std::ofstream(index) << R"({"metadata":{"total_size":24},"weight_map":{)"
                            R"("a":"model-00001-of-00002.safetensors",)"
                            R"("b":"model-00002-of-00002.safetensors"}})";
  }
  auto sh = ShardedSafetensors::open(index);
  EXPECT_EQ(sh.shards.size(), 2u);
  ASSERT_EQ(sh.tensors.size(), 2u);
  EXPECT_EQ(load<float>(sh.tensors.at("b"), 1), 6.0f);

  // A tensor listed in the wrong shard.
  { std::ofstream(index) << R"({"weight_map":{"a":"model-00002-of-00002.safetensors"}})"; }
  EXPECT_THAT([&] { ShardedSafetensors::open(index); },
              ::testing::ThrowsMessage<Error>(HasSubstr("tensor 'a' is listed in shard")));
  // A missing shard.
  { std::ofstream(index) << R"({"weight_map":{"a":"nope.safetensors"}})"; }
  EXPECT_THAT([&] { ShardedSafetensors::open(index); },
              ::testing::ThrowsMessage<Error>(HasSubstr("shard 'nope.safetensors'")));
  // A name escaping the directory.
  { std::ofstream(index) << R"({"weight_map":{"a":"../x.safetensors"}})"; }
  EXPECT_THAT([&] { ShardedSafetensors::open(index); },
              ::testing::ThrowsMessage<Error>(HasSubstr("plain file name")));
  // Not JSON.
  { std::ofstream(index) << "{\"weight_map\": "; }
  EXPECT_THAT([&] { ShardedSafetensors::open(index); },
              ::testing::ThrowsMessage<Error>(HasSubstr("not valid JSON")));
}

TEST(Safetensors, WriterRejectsBadInput) {
  SafetensorsWriter w;
  float x[4] = {};
  EXPECT_THROW(w.add_tensor("q", DType::Q4_K, {256}, x, 16), Error);
  EXPECT_THROW(w.add_tensor("t", DType::F32, {4}, x, 8), Error);
  SafetensorsWriter w2;
  w2.add_tensor("t", DType::F32, {4}, x, 16);
  EXPECT_THROW(w2.add_tensor("t", DType::F32, {4}, x, 16), Error);
}

// ---- hostile files ----------------------------------------------------------------------------

TEST(SafetensorsBad, TooShort) {
  EXPECT_ST_ERROR(std::vector<uint8_t>(5, 0), "short.safetensors", "too short");
}

TEST(SafetensorsBad, HeaderLength) {
  EXPECT_ST_ERROR(image("{}", 0, 1ull << 40), "huge.safetensors", "exceeds the limit");
  EXPECT_ST_ERROR(image("{}", 0, 100), "pastend.safetensors", "past the end");
}

TEST(SafetensorsBad, NotJson) {
  EXPECT_ST_ERROR(image("{\"a\": ", 0), "json.safetensors", "header is not valid JSON");
  EXPECT_ST_ERROR(image("[1, 2]", 0), "array.safetensors", "does not start with '{'");
}

TEST(SafetensorsBad, UnknownDtype) {
  EXPECT_ST_ERROR(image(R"({"w":{"dtype":"F24","shape":[1],"data_offsets":[0,3]}})", 3),
                  "dtype.safetensors", "tensor 'w': unknown dtype 'F24'");
}

TEST(SafetensorsBad, OffsetsPastEnd) {
  EXPECT_ST_ERROR(image(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8),
                  "offs.safetensors", "tensor 'w': data_offsets [0, 16] extend past the end");
}

TEST(SafetensorsBad, OffsetsReversed) {
  EXPECT_ST_ERROR(image(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8),
                  "rev.safetensors", "tensor 'w': data_offsets begin 8 is after end 0");
}

TEST(SafetensorsBad, SizeMismatch) {
  EXPECT_ST_ERROR(image(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", 16),
                  "size.safetensors",
                  "tensor 'w': data_offsets cover 16 bytes but F32 shape [3] needs 12");
}

TEST(SafetensorsBad, HugeShape) {
  EXPECT_ST_ERROR(
      image(
          R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,16]}})",
          16),
      "bigshape.safetensors", "tensor 'w': shape");
  EXPECT_ST_ERROR(image(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
                  "negshape.safetensors", "not a non-negative integer");
}

TEST(SafetensorsBad, Overlap) {
  EXPECT_ST_ERROR(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                        12),
                  "overlap.safetensors", "tensor 'b' (data_offsets [4, 12]) overlaps tensor 'a'");
}

TEST(SafetensorsBad, Duplicate) {
  EXPECT_ST_ERROR(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                        R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                        8),
                  "dup.safetensors", "duplicate tensor 'a'");
}

TEST(SafetensorsBad, BadMetadata) {
  EXPECT_ST_ERROR(image(R"({"__metadata__":{"k":1}})", 0), "meta.safetensors",
                  "__metadata__ key 'k' is not a string");
}

TEST(SafetensorsBad, MissingFields) {
  EXPECT_ST_ERROR(image(R"({"w":{"dtype":"F32","shape":[1]}})", 4), "nooff.safetensors",
                  "tensor 'w': data_offsets must be [begin, end]");
  EXPECT_ST_ERROR(image(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", 4), "nodtype.safetensors",
                  "tensor 'w': missing dtype");
  EXPECT_ST_ERROR(image(R"({"w":3})", 4), "notobj.safetensors",
                  "tensor 'w': entry is not an object");
}

TEST(SafetensorsBad, InvalidUtf8Name) {
  EXPECT_ST_ERROR(image("{\"w\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4),
                  "utf8.safetensors", "not valid JSON");
}
