#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "cachet/error.h"
#include "cachet/gguf.h"
#include "cachet/half.h"

using namespace cachet;
using ::testing::HasSubstr;

namespace {

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "gguf_" + name;
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// Hand-built GGUF images for hostile inputs.
struct Bytes {
  std::vector<uint8_t> b;
  template <typename T>
  Bytes& pod(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof v);
    return *this;
  }
  Bytes& raw(const void* p, size_t n) {
    b.insert(b.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
    return *this;
  }
  Bytes& str(const std::string& s) {
    pod<uint64_t>(s.size());
    return raw(s.data(), s.size());
  }
  Bytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    raw("GGUF", 4);
    pod<uint32_t>(version);
    pod<uint64_t>(n_tensors);
    return pod<uint64_t>(n_kv);
  }
  Bytes& kv_u32(const std::string& key, uint32_t v) {
    str(key);
    pod<uint32_t>(4);
    return pod<uint32_t>(v);
  }
  // Tensor info with dims given innermost-first as in the file.
  Bytes& tinfo(const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t off) {
    str(name);
    pod<uint32_t>(static_cast<uint32_t>(dims.size()));
    for (auto d : dims) pod<uint64_t>(d);
    pod<uint32_t>(type);
    return pod<uint64_t>(off);
  }
  Bytes& pad(size_t align = 32) {
    while (b.size() % align) b.push_back(0);
    return *this;
  }
  Bytes& zeros(size_t n) {
    b.insert(b.end(), n, 0);
    return *this;
  }
};

std::string error_of(const std::vector<uint8_t>& bytes, const std::string& name) {
  const std::string path = temp_path(name);
  write_bytes(path, bytes);
  try {
    GgufFile::open(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_GGUF_ERROR(bytes, name, problem)            \
  do {                                                     \
    const std::string msg_ = error_of((bytes), (name));    \
    EXPECT_THAT(msg_, HasSubstr(temp_path(name))) << msg_; \
    EXPECT_THAT(msg_, HasSubstr(problem)) << msg_;         \
  } while (0)

}  // namespace

TEST(Gguf, RoundTripEveryValueType) {
  GgufWriter w;
  w.add("u8", GgufValue::u8(200));
  w.add("i8", GgufValue::i8(-100));
  w.add("u16", GgufValue::u16(60000));
  w.add("i16", GgufValue::i16(-30000));
  w.add_u32("u32", 4000000000u);
  w.add_i32("i32", -2000000000);
  w.add_u64("u64", 18000000000000000000ull);
  w.add_i64("i64", -9000000000000000000ll);
  w.add_f32("f32", 3.25f);
  w.add_f64("f64", -1e300);
  w.add_bool("bool_t", true);
  w.add_bool("bool_f", false);
  w.add_string("str", std::string("h\xc3\xa9llo\0x", 8));
  w.add("arr_u8", GgufValue::array_of(std::vector<uint8_t>{1, 2, 255}));
  w.add("arr_i8", GgufValue::array_of(std::vector<int8_t>{-1, 2}));
  w.add("arr_u16", GgufValue::array_of(std::vector<uint16_t>{65535}));
  w.add("arr_i16", GgufValue::array_of(std::vector<int16_t>{-5, 5}));
  w.add("arr_u32", GgufValue::array_of(std::vector<uint32_t>{7, 8}));
  std::vector<int32_t> big(70000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<int32_t>(i * 3) - 1000;
  w.add("arr_i32", GgufValue::array_of(big));
  w.add("arr_u64", GgufValue::array_of(std::vector<uint64_t>{1ull << 40}));
  w.add("arr_i64", GgufValue::array_of(std::vector<int64_t>{-(1ll << 40)}));
  std::vector<float> scores(1000);
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = -0.5f * static_cast<float>(i);
  w.add("arr_f32", GgufValue::array_of(scores));
  w.add("arr_f64", GgufValue::array_of(std::vector<double>{0.1, 0.2}));
  const uint8_t bools[] = {1, 0, 1};
  w.add("arr_bool", GgufValue::scalar_array(GgufType::BOOL, bools, 3));
  w.add("arr_str", GgufValue::string_array({"a", "", "<0x0A>"}));
  w.add("arr_empty", GgufValue::array_of(std::vector<float>{}));
  w.add("arr_nested",
        GgufValue::array_array(
            {GgufValue::array_of(std::vector<int32_t>{1, 2}), GgufValue::string_array({"x"}),
             GgufValue::array_array({GgufValue::array_of(std::vector<uint8_t>{9})})}));
  const std::string path = temp_path("values.gguf");
  w.write(path);

  auto f = GgufFile::open(path);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->get_int("u8"), 200);
  EXPECT_EQ(f->get("u8").type(), GgufType::UINT8);
  EXPECT_EQ(f->get_int("i8"), -100);
  EXPECT_EQ(f->get_int("u16"), 60000);
  EXPECT_EQ(f->get_int("i16"), -30000);
  EXPECT_EQ(f->get_int("u32"), 4000000000ll);
  EXPECT_EQ(f->get_int("i32"), -2000000000);
  EXPECT_EQ(f->get("u64").as_uint(), 18000000000000000000ull);
  EXPECT_EQ(f->get_int("i64"), -9000000000000000000ll);
  EXPECT_EQ(f->get_float("f32"), 3.25);
  EXPECT_EQ(f->get_float("f64"), -1e300);
  EXPECT_TRUE(f->get_bool("bool_t"));
  EXPECT_FALSE(f->get_bool("bool_f"));
  EXPECT_EQ(f->get_string("str"), std::string("h\xc3\xa9llo\0x", 8));
  EXPECT_EQ(f->get_u8_array("arr_u8"), (std::vector<uint8_t>{1, 2, 255}));
  EXPECT_EQ(f->get_int_array("arr_i8"), (std::vector<int64_t>{-1, 2}));
  EXPECT_EQ(f->get_int_array("arr_u16"), (std::vector<int64_t>{65535}));
  EXPECT_EQ(f->get_i32_array("arr_i16"), (std::vector<int32_t>{-5, 5}));
  EXPECT_EQ(f->get_i32_array("arr_u32"), (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(f->get_i32_array("arr_i32"), big);
  EXPECT_EQ(f->get_int_array("arr_u64"), (std::vector<int64_t>{1ll << 40}));
  EXPECT_EQ(f->get_int_array("arr_i64"), (std::vector<int64_t>{-(1ll << 40)}));
  EXPECT_EQ(f->get_f32_array("arr_f32"), scores);
  EXPECT_EQ(f->get_float_array("arr_f64"), (std::vector<double>{0.1, 0.2}));
  EXPECT_EQ(f->get_u8_array("arr_bool"), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_TRUE(f->get("arr_bool").at(0).as_bool());
  EXPECT_EQ(f->get_strings("arr_str"), (std::vector<std::string>{"a", "", "<0x0A>"}));
  EXPECT_EQ(f->get("arr_empty").size(), 0u);
  EXPECT_EQ(f->get("arr_empty").elem_type(), GgufType::FLOAT32);
  const auto& nested = f->get("arr_nested").arrays();
  ASSERT_EQ(nested.size(), 3u);
  EXPECT_EQ(nested[0].i32_vector(), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(nested[1].strings(), (std::vector<std::string>{"x"}));
  EXPECT_EQ(nested[2].arrays().at(0).u8_vector(), (std::vector<uint8_t>{9}));
  // Iteration in file order.
  ASSERT_EQ(f->metadata().size(), 27u);
  EXPECT_EQ(f->metadata()[0].first, "u8");
  EXPECT_EQ(f->metadata()[26].first, "arr_nested");
  EXPECT_TRUE(f->tensors().empty());
  // Summaries of long arrays.
  EXPECT_THAT(f->get("arr_i32").to_string(), HasSubstr("array<int32>[70000]"));
  // Defaults and typed-getter errors.
  EXPECT_EQ(f->get_int("absent", 7), 7);
  EXPECT_EQ(f->get_string("absent", "d"), "d");
  try {
    f->get_int("str");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(path));
    EXPECT_THAT(e.what(), HasSubstr("'str'"));
    EXPECT_THAT(e.what(), HasSubstr("expected an integer, found string"));
  }
  try {
    f->get_string("nope");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("missing metadata key 'nope'"));
  }
}

TEST(Gguf, RoundTripEveryTensorType) {
  GgufWriter w;
  std::vector<std::vector<uint8_t>> payloads;
  std::vector<DType> types;
  for (uint32_t id = 0; id < 64; ++id) {
    auto t = dtype_from_ggml(id);
    if (!t) continue;
    const auto& info = dtype_info(*t);
    const std::vector<int64_t> shape = {3, 2 * info.block_elems};
    std::vector<uint8_t> data(tensor_bytes(*t, shape));
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + id);
    w.add_tensor(std::string("t.") + std::string(info.name), *t, shape, data.data(), data.size());
    payloads.push_back(std::move(data));
    types.push_back(*t);
  }
  // A streamed tensor, produced in chunks.
  w.add_tensor("streamed", DType::F32, {4, 5}, [](const GgufWriter::Sink& sink) {
    for (int i = 0; i < 20; ++i) {
      float v = static_cast<float>(i) * 0.5f;
      sink(&v, 4);
    }
  });
  const std::string path = temp_path("tensors.gguf");
  w.write(path);
  auto f = GgufFile::open(path);
  ASSERT_EQ(f->tensors().size(), types.size() + 1);
  for (size_t i = 0; i < types.size(); ++i) {
    const Tensor& t = f->tensors()[i];
    EXPECT_EQ(t.dtype, types[i]);
    EXPECT_EQ(t.shape, (std::vector<int64_t>{3, 2 * dtype_info(types[i]).block_elems}));
    ASSERT_EQ(t.nbytes, payloads[i].size());
    EXPECT_EQ(std::memcmp(t.data, payloads[i].data(), t.nbytes), 0) << dtype_name(types[i]);
    EXPECT_EQ((f->data_offset() + f->tensor_infos()[i].offset) % 32, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 32, 0u);
  }
  const Tensor& s = f->tensor("streamed");
  EXPECT_EQ(s.shape, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(s.as<float>()[19], 9.5f);
  EXPECT_THAT([&] { f->tensor("nope"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("missing tensor 'nope'")));
}

TEST(Gguf, ShapesAreReversedFromFileOrder) {
  // A 3-D tensor written by hand: file dims innermost-first {4, 3, 2} -> shape [2, 3, 4].
  Bytes b;
  b.header(1, 0).tinfo("x", {4, 3, 2}, 0, 0).pad().zeros(24 * 4);
  auto f = GgufFile::from_memory(b.b.data(), b.b.size(), "mem.gguf");
  EXPECT_EQ(f->tensor("x").shape, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(f->tensor_infos()[0].nbytes, 96u);
}

TEST(Gguf, CustomAlignment) {
  GgufWriter w(64);
  std::vector<float> a(3, 1.0f), b(5, 2.0f);
  w.add_tensor("a", DType::F32, {3}, a.data(), 12);
  w.add_tensor("b", DType::F32, {5}, b.data(), 20);
  auto bytes = w.to_bytes();
  auto f = GgufFile::from_memory(bytes.data(), bytes.size(), "align.gguf");
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->get_int("general.alignment"), 64);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  EXPECT_EQ(f->tensor_infos()[1].offset, 64u);
  EXPECT_EQ(f->tensor("b").as<float>()[4], 2.0f);
}

TEST(Gguf, AcceptsVersion2) {
  Bytes b;
  b.header(0, 1, 2).kv_u32("k", 5);
  auto f = GgufFile::from_memory(b.b.data(), b.b.size(), "v2.gguf");
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->get_int("k"), 5);
}

TEST(Gguf, WriterRejectsBadInput) {
  GgufWriter w;
  w.add_u32("a", 1);
  EXPECT_THROW(w.add_u32("a", 2), Error);
  float x[4] = {};
  EXPECT_THROW(w.add_tensor("t", DType::F32, {4}, x, 8), Error);      // wrong size
  EXPECT_THROW(w.add_tensor("q", DType::Q4_K, {100}, x, 16), Error);  // not whole blocks
  EXPECT_THROW(w.add_tensor("u", DType::U8, {4}, x, 4), Error);       // no GGUF id
  w.add_tensor("t", DType::F32, {4}, x, 16);
  EXPECT_THROW(w.add_tensor("t", DType::F32, {4}, x, 16), Error);
  GgufWriter w2;
  w2.add_tensor("short", DType::F32, {4}, [](const GgufWriter::Sink& s) {
    float v = 0;
    s(&v, 4);
  });
  EXPECT_THAT([&] { w2.write(temp_path("short.gguf")); },
              ::testing::ThrowsMessage<Error>(HasSubstr("producer wrote 4 bytes")));
  EXPECT_FALSE(std::ifstream(temp_path("short.gguf")).good());  // nothing left behind
}

// ---- hostile files ----------------------------------------------------------------------------

TEST(GgufBad, Magic) {
  Bytes b;
  b.raw("GGUX", 4).pod<uint32_t>(3).pod<uint64_t>(0).pod<uint64_t>(0);
  EXPECT_GGUF_ERROR(b.b, "magic.gguf", "bad magic");
}

TEST(GgufBad, Version) {
  Bytes b;
  b.header(0, 0, 1);
  EXPECT_GGUF_ERROR(b.b, "version.gguf", "unsupported GGUF version 1");
  Bytes be;
  be.header(0, 0, 0x03000000);
  EXPECT_GGUF_ERROR(be.b, "bigendian.gguf", "big-endian");
}

TEST(GgufBad, TruncatedEverywhere) {
  // Every proper prefix of a valid file with metadata and tensors must fail cleanly.
  GgufWriter w;
  w.add_string("s", "hello");
  w.add("arr", GgufValue::string_array({"a", "bc"}));
  w.add("nest", GgufValue::array_array({GgufValue::array_of(std::vector<int16_t>{1, 2})}));
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  w.add_tensor("a", DType::F32, {2, 4}, x, sizeof x);
  w.add_tensor("b", DType::F32, {8}, x, sizeof x);
  const auto full = w.to_bytes();
  ASSERT_NO_THROW(GgufFile::from_memory(full.data(), full.size(), "full.gguf"));
  for (size_t n = 0; n < full.size(); ++n) {
    try {
      GgufFile::from_memory(full.data(), n, "cut.gguf");
      ADD_FAILURE() << "prefix of " << n << " bytes parsed";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("cut.gguf")) << n;
    }
  }
  EXPECT_GGUF_ERROR(std::vector<uint8_t>(full.begin(), full.begin() + 40), "trunc.gguf",
                    "truncated");
}

TEST(GgufBad, HugeCounts) {
  Bytes kv;
  kv.header(0, 1ull << 60);
  EXPECT_GGUF_ERROR(kv.b, "kvcount.gguf", "metadata count");
  Bytes tc;
  tc.header(1ull << 60, 0);
  EXPECT_GGUF_ERROR(tc.b, "tcount.gguf", "tensor count");
}

TEST(GgufBad, HugeStringLength) {
  Bytes b;
  b.header(0, 1).str("k").pod<uint32_t>(8).pod<uint64_t>(1ull << 62).raw("abc", 3);
  EXPECT_GGUF_ERROR(b.b, "strlen.gguf", "metadata key 'k' has length 4611686018427387904");
  Bytes key;
  key.header(0, 1).pod<uint64_t>(~0ull);
  EXPECT_GGUF_ERROR(key.b, "keylen.gguf", "truncated");
}

TEST(GgufBad, HugeArrayLength) {
  Bytes b;
  b.header(0, 1).str("arr").pod<uint32_t>(9).pod<uint32_t>(5).pod<uint64_t>(1ull << 61).zeros(16);
  EXPECT_GGUF_ERROR(b.b, "arrlen.gguf", "metadata key 'arr': array of 2305843009213693952 int32");
  Bytes s;
  s.header(0, 1).str("arr").pod<uint32_t>(9).pod<uint32_t>(8).pod<uint64_t>(1000).zeros(16);
  EXPECT_GGUF_ERROR(s.b, "arrstr.gguf", "array of 1000 string elements");
}

TEST(GgufBad, NestingDepth) {
  Bytes b;
  b.header(0, 1).str("deep").pod<uint32_t>(9);
  for (int i = 0; i < 100; ++i) b.pod<uint32_t>(9).pod<uint64_t>(1);
  b.pod<uint32_t>(0).pod<uint64_t>(0);
  EXPECT_GGUF_ERROR(b.b, "deep.gguf", "nested deeper than");
}

TEST(GgufBad, InvalidUtf8) {
  Bytes k;
  k.header(0, 1).str("bad\xff").pod<uint32_t>(0).pod<uint8_t>(1);
  EXPECT_GGUF_ERROR(k.b, "utf8key.gguf", "is not valid UTF-8");
  Bytes t;
  t.header(1, 0).tinfo("w\xc0\x80", {4}, 0, 0).pad().zeros(16);
  EXPECT_GGUF_ERROR(t.b, "utf8name.gguf", "tensor name 'w\\xc0\\x80' is not valid UTF-8");
}

TEST(GgufBad, Duplicates) {
  Bytes k;
  k.header(0, 2).kv_u32("k", 1).kv_u32("k", 2);
  EXPECT_GGUF_ERROR(k.b, "dupkey.gguf", "duplicate metadata key 'k'");
  Bytes t;
  t.header(2, 0).tinfo("w", {4}, 0, 0).tinfo("w", {4}, 0, 32).pad().zeros(64);
  EXPECT_GGUF_ERROR(t.b, "duptensor.gguf", "duplicate tensor 'w'");
}

TEST(GgufBad, UnknownValueType) {
  Bytes b;
  b.header(0, 1).str("k").pod<uint32_t>(13).pod<uint32_t>(0);
  EXPECT_GGUF_ERROR(b.b, "vtype.gguf", "metadata key 'k' value: unknown value type 13");
  Bytes a;
  a.header(0, 1).str("k").pod<uint32_t>(9).pod<uint32_t>(99).pod<uint64_t>(0);
  EXPECT_GGUF_ERROR(a.b, "atype.gguf", "unknown value type 99");
}

TEST(GgufBad, InvalidBool) {
  Bytes b;
  b.header(0, 1).str("flag").pod<uint32_t>(7).pod<uint8_t>(2);
  EXPECT_GGUF_ERROR(b.b, "bool.gguf", "metadata key 'flag': invalid bool value 2");
}

TEST(GgufBad, UnknownTensorType) {
  Bytes b;
  b.header(1, 0).tinfo("w", {4}, 4, 0).pad().zeros(64);  // 4 was Q4_2, removed
  EXPECT_GGUF_ERROR(b.b, "ttype.gguf", "tensor 'w': unknown tensor type 4");
}

TEST(GgufBad, NDims) {
  Bytes z;
  z.header(1, 0).tinfo("w", {}, 0, 0).pad().zeros(64);
  EXPECT_GGUF_ERROR(z.b, "ndims0.gguf", "tensor 'w': n_dims 0 out of range");
  Bytes f;
  f.header(1, 0).tinfo("w", {1, 1, 1, 1, 1}, 0, 0).pad().zeros(64);
  EXPECT_GGUF_ERROR(f.b, "ndims5.gguf", "tensor 'w': n_dims 5 out of range");
}

TEST(GgufBad, Dimensions) {
  Bytes z;
  z.header(1, 0).tinfo("w", {4, 0}, 0, 0).pad().zeros(64);
  EXPECT_GGUF_ERROR(z.b, "dim0.gguf", "tensor 'w': dimension 1 is zero");
  Bytes n;
  n.header(1, 0).tinfo("w", {~0ull}, 0, 0).pad().zeros(64);
  EXPECT_GGUF_ERROR(n.b, "dimneg.gguf", "is negative or too large");
  Bytes o;
  o.header(1, 0).tinfo("w", {1ull << 40, 1ull << 40}, 0, 0).pad().zeros(64);
  EXPECT_GGUF_ERROR(o.b, "dimovf.gguf", "tensor 'w': element count overflows");
}

TEST(GgufBad, BlockSize) {
  Bytes b;
  b.header(1, 0).tinfo("w", {100, 2}, 12, 0).pad().zeros(512);
  EXPECT_GGUF_ERROR(b.b, "block.gguf",
                    "tensor 'w': inner dimension 100 is not a multiple of the Q4_K block size 256");
}

TEST(GgufBad, MisalignedOffset) {
  Bytes b;
  b.header(1, 0).tinfo("w", {4}, 0, 8).pad().zeros(64);
  EXPECT_GGUF_ERROR(b.b, "misaligned.gguf",
                    "tensor 'w': data offset 8 is not a multiple of the alignment 32");
}

TEST(GgufBad, Alignment) {
  Bytes b;
  b.header(0, 1).kv_u32("general.alignment", 48);
  EXPECT_GGUF_ERROR(b.b, "align48.gguf", "general.alignment': 48 is not a power of two");
  Bytes z;
  z.header(0, 1).kv_u32("general.alignment", 0);
  EXPECT_GGUF_ERROR(z.b, "align0.gguf", "is not a power of two");
  Bytes s;
  s.header(0, 1).str("general.alignment").pod<uint32_t>(8).str("32");
  EXPECT_GGUF_ERROR(s.b, "alignstr.gguf", "general.alignment': expected an integer");
}

TEST(GgufBad, DataPastEnd) {
  Bytes b;
  b.header(1, 0).tinfo("w", {16}, 0, 0).pad().zeros(60);  // needs 64 bytes
  EXPECT_GGUF_ERROR(b.b, "pastend.gguf",
                    "tensor 'w': data (offset 0, 64 bytes) extends past the end");
  Bytes far;
  far.header(1, 0).tinfo("w", {4}, 0, 1ull << 62).pad().zeros(64);
  EXPECT_GGUF_ERROR(far.b, "faroff.gguf", "tensor 'w': data (offset 4611686018427387904");
}

TEST(GgufBad, Overlap) {
  Bytes b;
  b.header(2, 0).tinfo("a", {16}, 0, 0).tinfo("b", {16}, 0, 32).pad().zeros(128);
  EXPECT_GGUF_ERROR(b.b, "overlap.gguf", "tensor 'b' (offset 32) overlaps tensor 'a'");
}

TEST(GgufBad, MissingFile) {
  try {
    GgufFile::open(temp_path("does_not_exist.gguf"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(temp_path("does_not_exist.gguf")));
  }
}
