#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cachet/error.h"
#include "cachet/gguf.h"
#include "cachet/model_files.h"
#include "cachet/safetensors.h"

using namespace cachet;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::path(::testing::TempDir()) / ("mf_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream(p) << s;
}

std::string error_of(const std::string& path) {
  try {
    ModelFiles::open(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void write_small_safetensors(const fs::path& p, const std::string& name, float v) {
  SafetensorsWriter w;
  float x[2] = {v, v + 1};
  w.add_tensor(name, DType::F32, {2}, x, sizeof x);
  w.write(p.string());
}

}  // namespace

TEST(ModelFiles, HfDirSingleFile) {
  const fs::path d = fresh_dir("single");
  write_text(d / "config.json", R"({"hidden_size": 8, "model_type": "recurrent_gemma"})");
  write_small_safetensors(d / "model.safetensors", "w", 1.0f);
  write_text(d / "tokenizer.model", "not really a tokenizer");
  auto m = ModelFiles::open(d.string());
  EXPECT_EQ(m.format, ModelFiles::Format::HfDir);
  EXPECT_EQ(m.config["hidden_size"], 8);
  EXPECT_EQ(m.tokenizer_model, (d / "tokenizer.model").string());
  EXPECT_EQ(m.get("w").as<float>()[1], 2.0f);
  EXPECT_EQ(m.find("nope"), nullptr);
  const std::string msg = [&] {
    try {
      m.get("nope");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  EXPECT_THAT(msg, HasSubstr(d.string()));
  EXPECT_THAT(msg, HasSubstr("missing tensor 'nope'"));
}

TEST(ModelFiles, HfDirSharded) {
  const fs::path d = fresh_dir("sharded");
  write_text(d / "config.json", "{}");
  write_small_safetensors(d / "model-00001-of-00002.safetensors", "a", 1.0f);
  write_small_safetensors(d / "model-00002-of-00002.safetensors", "b", 3.0f);
  write_text(d / "model.safetensors.index.json",
             R"({"weight_map":{"a":"model-00001-of-00002.safetensors",)"
             R"("b":"model-00002-of-00002.safetensors"}})");
  auto m = ModelFiles::open(d.string());
  EXPECT_EQ(m.tensors.size(), 2u);
  EXPECT_EQ(m.get("b").as<float>()[0], 3.0f);
  EXPECT_EQ(m.tokenizer_model, "");
}

TEST(ModelFiles, SafetensorsFile) {
  const fs::path d = fresh_dir("stfile");
  write_small_safetensors(d / "weights.safetensors", "w", 5.0f);
  auto m = ModelFiles::open((d / "weights.safetensors").string());
  EXPECT_EQ(m.format, ModelFiles::Format::Safetensors);
  EXPECT_TRUE(m.config.is_object());
  EXPECT_TRUE(m.config.empty());
  EXPECT_EQ(m.get("w").as<float>()[0], 5.0f);
}

TEST(ModelFiles, GgufConfigSources) {
  const fs::path d = fresh_dir("gguf");
  float x[4] = {1, 2, 3, 4};
  {
    GgufWriter w;
    w.add_string("general.architecture", "recurrentgemma");
    w.add_string("cachet.hf_config", R"({"vocab_size": 256})");
    w.add_tensor("w", DType::F32, {2, 2}, x, sizeof x);
    w.write((d / "embedded.gguf").string());
  }
  auto m = ModelFiles::open((d / "embedded.gguf").string());
  EXPECT_EQ(m.format, ModelFiles::Format::Gguf);
  ASSERT_TRUE(m.gguf);
  EXPECT_EQ(m.gguf->get_string("general.architecture"), "recurrentgemma");
  EXPECT_EQ(m.config["vocab_size"], 256);
  EXPECT_EQ(m.get("w").shape, (std::vector<int64_t>{2, 2}));

  // No embedded config: none, then the config.json beside the file.
  {
    GgufWriter w;
    w.add_tensor("w", DType::F32, {4}, x, sizeof x);
    w.write((d / "bare.bin").string());  // detected by magic, not by name
  }
  EXPECT_TRUE(ModelFiles::open((d / "bare.bin").string()).config.empty());
  write_text(d / "config.json", R"({"from": "sibling"})");
  EXPECT_EQ(ModelFiles::open((d / "bare.bin").string()).config["from"], "sibling");

  // Embedded config that is not JSON.
  {
    GgufWriter w;
    w.add_string("cachet.hf_config", "{oops");
    w.write((d / "badcfg.gguf").string());
  }
  const std::string msg = error_of((d / "badcfg.gguf").string());
  EXPECT_THAT(msg, HasSubstr("badcfg.gguf"));
  EXPECT_THAT(msg, HasSubstr("'cachet.hf_config' is not valid JSON"));
}

TEST(ModelFilesBad, Errors) {
  const fs::path d = fresh_dir("bad");
  std::string msg = error_of((d / "nothing_here").string());
  EXPECT_THAT(msg, HasSubstr((d / "nothing_here").string()));
  EXPECT_THAT(msg, HasSubstr("no such file or directory"));

  msg = error_of(d.string());
  EXPECT_THAT(msg, HasSubstr(d.string()));
  EXPECT_THAT(msg, HasSubstr("no config.json"));

  write_text(d / "config.json", "{\n  \"a\": 1,\n  \"b\": \n}");
  msg = error_of(d.string());
  EXPECT_THAT(msg, HasSubstr((d / "config.json").string()));
  EXPECT_THAT(msg, HasSubstr("not valid JSON"));
  EXPECT_THAT(msg, HasSubstr("line 4"));

  write_text(d / "config.json", "{}");
  msg = error_of(d.string());
  EXPECT_THAT(msg, HasSubstr("no weights"));

  write_text(d / "pytorch_model.bin", "x");
  msg = error_of(d.string());
  EXPECT_THAT(msg, HasSubstr("pytorch_model.bin is not supported"));

  write_text(d / "weights.txt", "hello");
  msg = error_of((d / "weights.txt").string());
  EXPECT_THAT(msg, HasSubstr("unrecognised format"));

  write_text(d / "fake.gguf", "GGUFxxxx");
  msg = error_of((d / "fake.gguf").string());
  EXPECT_THAT(msg, HasSubstr("fake.gguf"));
  EXPECT_THAT(msg, HasSubstr("unsupported GGUF version"));

  write_text(d / "notgguf.gguf", "hello world, this is text");
  msg = error_of((d / "notgguf.gguf").string());
  EXPECT_THAT(msg, HasSubstr("bad magic"));
}

TEST(ModelFiles, RealignsTensorsAtOddOffsets) {
  // safetensors stores tensors back to back: after a 3-byte U8 tensor an F32 tensor may sit at
  // an odd offset. ModelFiles hands out every tensor aligned for its type.
  SafetensorsWriter w;
  const uint8_t bytes[3] = {1, 2, 3};
  const float vals[2] = {1.5f, -2.25f};
  w.add_tensor("a", DType::U8, {3}, bytes, 3);
  w.add_tensor("b", DType::F32, {2}, vals, 8);
  const std::string path = (fs::path(::testing::TempDir()) / "mf_odd.safetensors").string();
  w.write(path);
  ModelFiles m = ModelFiles::open(path);
  const Tensor& b = m.get("b");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data) % 4, 0u);
  EXPECT_EQ(b.as<float>()[0], 1.5f);
  EXPECT_EQ(b.as<float>()[1], -2.25f);
}

// The one rule every JSON reader here uses for an integer field.
TEST(JsonInteger, WholeNumbersInRangeOnly) {
  using nlohmann::json;
  EXPECT_EQ(json_integer(json(5)), 5);
  EXPECT_EQ(json_integer(json(-3)), -3);
  EXPECT_EQ(json_integer(json::parse("2048.0")), 2048);
  EXPECT_EQ(json_integer(json::parse("-8.9e15")), int64_t{-8900000000000000});
  EXPECT_EQ(json_integer(json::parse("9223372036854775807")), INT64_MAX);
  EXPECT_FALSE(json_integer(json::parse("9223372036854775808")));  // unsigned past int64
  EXPECT_FALSE(json_integer(json::parse("2.5")));
  EXPECT_FALSE(json_integer(json::parse("1e300")));
  EXPECT_FALSE(json_integer(json::parse("9e15")));
  EXPECT_FALSE(json_integer(json("7")));
  EXPECT_FALSE(json_integer(json(true)));
  EXPECT_FALSE(json_integer(json(nullptr)));
}
