// EnCodec decoder: config parsing, weight-norm folding at load, structural properties of the
// decoder (length, causality, thread-count and workspace independence) and error paths. The
// numerical comparison with PyTorch is tests/py/test_encodec.py.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cachet/dtype.h"
#include "cachet/encodec.h"
#include "cachet/error.h"
#include "cachet/half.h"
#include "cachet/safetensors.h"
#include "cachet/threadpool.h"

namespace {

namespace fs = std::filesystem;
using cachet::EncodecConfig;
using cachet::EncodecDecoder;
using Codes = std::vector<std::vector<int32_t>>;

EncodecConfig tiny_config() {
  EncodecConfig c;
  c.hidden_size = c.codebook_dim = 8;
  c.codebook_size = 16;
  c.num_filters = 4;
  c.upsampling_ratios = {3, 2};
  c.num_residual_layers = 2;
  c.kernel_size = 5;
  c.num_quantizers = 4;
  return c;
}

Codes random_codes(int n_q, int T, int size, uint32_t seed) {
  std::mt19937 rng(seed);
  Codes c(static_cast<size_t>(n_q), std::vector<int32_t>(static_cast<size_t>(T)));
  for (auto& r : c)
    for (auto& v : r) v = static_cast<int32_t>(rng() % static_cast<uint32_t>(size));
  return c;
}

fs::path temp_dir(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / ("cachet_encodec_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Writes the tiny config's model twice: with weight_g / weight_v pairs (in dir_wn, as bf16 when
// asked) and with the folded plain weights (in dir_plain).
void write_tiny(const EncodecConfig& c, const fs::path& dir_wn, const fs::path& dir_plain,
                bool bf16 = false) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  cachet::SafetensorsWriter wn, plain;
  auto rnd = [&](size_t n, float a) {
    std::vector<float> v(n);
    for (auto& x : v) x = a * u(rng);
    if (bf16)
      for (auto& x : v) x = cachet::bf16_to_f32(cachet::f32_to_bf16(x));
    return v;
  };
  auto put = [&](cachet::SafetensorsWriter& w, const std::string& name, std::vector<int64_t> shape,
                 const std::vector<float>& v, bool as_bf16) {
    if (as_bf16) {
      std::vector<uint16_t> h(v.size());
      for (size_t i = 0; i < v.size(); ++i) h[i] = cachet::f32_to_bf16(v[i]);
      w.add_tensor(name, cachet::DType::BF16, std::move(shape), h.data(), h.size() * 2);
    } else {
      w.add_tensor(name, cachet::DType::F32, std::move(shape), v.data(), v.size() * 4);
    }
  };
  auto both = [&](const std::string& name, std::vector<int64_t> shape,
                  const std::vector<float>& v) {
    put(wn, name, shape, v, bf16);
    put(plain, name, shape, v, false);
  };
  // PyTorch layout [a][b][k]: [cout][cin][k] for a conv, [cin][cout][k] for a transposed one.
  auto conv = [&](const std::string& p, int64_t a, int64_t b, int64_t k, bool transposed) {
    const size_t n = static_cast<size_t>(a * b * k);
    const int64_t fan_in = (transposed ? a : b) * k;
    const auto v = rnd(n, std::sqrt(3.0f / static_cast<float>(fan_in)));
    std::vector<float> g = rnd(static_cast<size_t>(a), 0.5f);
    for (auto& x : g) x = 1.0f + x;
    if (bf16)
      for (auto& x : g) x = cachet::bf16_to_f32(cachet::f32_to_bf16(x));
    std::vector<float> w(n);
    const size_t per = n / static_cast<size_t>(a);
    for (size_t o = 0; o < static_cast<size_t>(a); ++o) {
      double ss = 0;
      for (size_t i = 0; i < per; ++i) ss += double(v[o * per + i]) * v[o * per + i];
      for (size_t i = 0; i < per; ++i)
        w[o * per + i] = static_cast<float>(g[o] * v[o * per + i] / std::sqrt(ss));
    }
    put(wn, p + ".conv.weight_v", {a, b, k}, v, bf16);
    put(wn, p + ".conv.weight_g", {a, 1, 1}, g, bf16);
    put(plain, p + ".conv.weight", {a, b, k}, w, false);
    const int64_t cout = transposed ? b : a;
    both(p + ".conv.bias", {cout}, rnd(static_cast<size_t>(cout), 0.1f));
  };
  for (int q = 0; q < c.num_quantizers; ++q)
    both("quantizer.layers." + std::to_string(q) + ".codebook.embed",
         {c.codebook_size, c.codebook_dim},
         rnd(static_cast<size_t>(c.codebook_size * c.codebook_dim), 1.0f));
  const int64_t F = c.num_filters;
  int64_t cur = F << c.upsampling_ratios.size();
  auto name = [](int i) { return "decoder.layers." + std::to_string(i); };
  int idx = 0;
  conv(name(idx++), cur, c.hidden_size, c.kernel_size, false);
  for (int l = 0; l < c.num_lstm_layers; ++l) {
    const std::string s = name(idx) + ".lstm.", sfx = "_l" + std::to_string(l);
    const float a = 1.0f / std::sqrt(static_cast<float>(cur));
    const size_t n = static_cast<size_t>(4 * cur * cur);
    both(s + "weight_ih" + sfx, {4 * cur, cur}, rnd(n, a));
    both(s + "weight_hh" + sfx, {4 * cur, cur}, rnd(n, a));
    both(s + "bias_ih" + sfx, {4 * cur}, rnd(static_cast<size_t>(4 * cur), a));
    both(s + "bias_hh" + sfx, {4 * cur}, rnd(static_cast<size_t>(4 * cur), a));
  }
  ++idx;
  for (int r : c.upsampling_ratios) {
    ++idx;  // ELU
    conv(name(idx++), cur, cur / 2, 2 * r, true);
    cur /= 2;
    for (int j = 0; j < c.num_residual_layers; ++j) {
      const std::string p = name(idx++);
      const int64_t hid = cur / c.compress;
      conv(p + ".block.1", hid, cur, c.residual_kernel_size, false);
      conv(p + ".block.3", cur, hid, 1, false);
      conv(p + ".shortcut", cur, cur, 1, false);
    }
  }
  ++idx;  // ELU
  conv(name(idx++), c.audio_channels, F, c.last_kernel_size, false);
  nlohmann::json j = {{"model_type", "encodec"},
                      {"hidden_size", c.hidden_size},
                      {"codebook_size", c.codebook_size},
                      {"num_filters", c.num_filters},
                      {"upsampling_ratios", c.upsampling_ratios},
                      {"num_residual_layers", c.num_residual_layers},
                      {"kernel_size", c.kernel_size},
                      {"target_bandwidths", {c.num_quantizers * c.frame_rate() / 100.0}}};
  for (const fs::path& d : {dir_wn, dir_plain}) std::ofstream(d / "config.json") << j.dump(2);
  wn.write((dir_wn / "model.safetensors").string());
  plain.write((dir_plain / "model.safetensors").string());
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const cachet::Error& e) {
    return e.what();
  }
  return "";
}

TEST(EncodecTest, ConfigDefaultsAreEncodec24khz) {
  const EncodecConfig c = EncodecConfig::from_json(nlohmann::json::object(), "config.json");
  EXPECT_EQ(c.hop_length(), 320);
  EXPECT_EQ(c.frame_rate(), 75);
  EXPECT_EQ(c.num_quantizers, 32);
  EXPECT_EQ(c.codebook_dim, 128);
  EXPECT_TRUE(c.use_causal_conv);
  EXPECT_TRUE(c.use_conv_shortcut);
  EXPECT_EQ(c.pad_mode, "reflect");
  const auto j = nlohmann::json{{"target_bandwidths", {1.5, 6.0}}, {"hidden_size", 64}};
  const EncodecConfig d = EncodecConfig::from_json(j, "config.json");
  EXPECT_EQ(d.num_quantizers, 8);
  EXPECT_EQ(d.codebook_dim, 64);
}

TEST(EncodecTest, ConfigErrorsNameTheField) {
  auto bad = [](nlohmann::json j) {
    return error_of([&] { EncodecConfig::from_json(j, "dir/config.json"); });
  };
  EXPECT_NE(bad({{"pad_mode", "circular"}}).find("pad_mode 'circular'"), std::string::npos);
  EXPECT_NE(bad({{"upsampling_ratios", {8, 0}}}).find("upsampling_ratios"), std::string::npos);
  EXPECT_NE(bad({{"num_filters", -3}}).find("num_filters"), std::string::npos);
  EXPECT_NE(bad({{"norm_type", "spectral"}}).find("norm_type"), std::string::npos);
  EXPECT_NE(bad({{"hidden_size", "big"}}).find("dir/config.json"), std::string::npos);
  EXPECT_NE(bad({{"use_causal_conv", false}, {"trim_right_ratio", 0.5}}).find("trim_right_ratio"),
            std::string::npos);
}

TEST(EncodecTest, WeightNormFoldedAtLoad) {
  const EncodecConfig c = tiny_config();
  const fs::path a = temp_dir("wn"), b = temp_dir("plain");
  write_tiny(c, a, b);
  const auto dwn = EncodecDecoder::load(a.string());
  const auto dpl = EncodecDecoder::load(b.string());
  EXPECT_EQ(dwn->config().num_quantizers, 4);
  cachet::ThreadPool pool(2);
  const Codes codes = random_codes(4, 21, c.codebook_size, 1);
  const auto x = dwn->decode_mono(codes, pool), y = dpl->decode_mono(codes, pool);
  ASSERT_EQ(x.size(), 21u * 6);
  ASSERT_EQ(y.size(), x.size());
  float peak = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(x[i], y[i], 2e-5f) << i;
    peak = std::max(peak, std::fabs(x[i]));
  }
  EXPECT_GT(peak, 0.01f);
  // bf16 weight-norm pairs load too, and agree with f32 weights of the same (rounded) values.
  const fs::path c1 = temp_dir("bf16"), c2 = temp_dir("bf16plain");
  write_tiny(c, c1, c2, true);
  const auto z1 = EncodecDecoder::load(c1.string())->decode_mono(codes, pool);
  const auto z2 = EncodecDecoder::load(c2.string())->decode_mono(codes, pool);
  for (size_t i = 0; i < z1.size(); ++i) EXPECT_NEAR(z1[i], z2[i], 2e-5f) << i;
  for (const auto& d : {a, b, c1, c2}) fs::remove_all(d);
}

TEST(EncodecTest, CausalPrefixAndThreadIndependence) {
  const EncodecConfig c = tiny_config();
  const auto dec = EncodecDecoder::random(c, 3);
  cachet::ThreadPool one(1), two(2);
  const Codes codes = random_codes(4, 40, c.codebook_size, 2);
  const auto full = dec->decode_mono(codes, two);
  ASSERT_EQ(full.size(), 40u * 6);
  EXPECT_EQ(dec->decode_mono(codes, one), full);  // bit-identical for any thread count
  // Causal convs, causal LSTM and right-trimmed transposed convs: a prefix of the codes gives
  // a prefix of the audio (past the reflect-padding rule for very short inputs).
  Codes prefix = codes;
  for (auto& r : prefix) r.resize(25);
  const auto part = dec->decode_mono(prefix, two);
  ASSERT_EQ(part.size(), 25u * 6);
  for (size_t i = 0; i < part.size(); ++i) EXPECT_NEAR(part[i], full[i], 1e-5f) << i;
  // Workspace reuse: decoding again after a different length gives the same result.
  EXPECT_EQ(dec->decode_mono(codes, two), full);
  // Non-causal: no prefix property, but the length rule holds.
  EncodecConfig nc = c;
  nc.use_causal_conv = false;
  EXPECT_EQ(EncodecDecoder::random(nc, 3)->decode_mono(codes, two).size(), full.size());
}

TEST(EncodecTest, RealShapeRandomWeights) {
  const auto dec = EncodecDecoder::random(EncodecConfig{}, 1);
  cachet::ThreadPool pool(2);
  const Codes codes = random_codes(8, 3, 1024, 4);
  const auto y = dec->decode_mono(codes, pool);
  ASSERT_EQ(y.size(), 3u * 320);
  for (float v : y) ASSERT_TRUE(std::isfinite(v));
  const auto e = dec->embed(codes);
  EXPECT_EQ(e.size(), 3u * 128);
  EXPECT_TRUE(dec->decode_mono(random_codes(8, 0, 1024, 4), pool).empty());
  // A non-causal decoder takes the whole input at once: half an hour of codes would need tens
  // of GiB of activations, refused before allocating. (The causal one decodes in pieces.)
  EncodecConfig nc;
  nc.use_causal_conv = false;
  const std::string err = error_of(
      [&] { EncodecDecoder::random(nc, 1)->decode(random_codes(1, 135000, 1024, 4), pool); });
  EXPECT_NE(err.find("decode shorter pieces"), std::string::npos) << err;
}

// An environment variable set while it lives: CACHET_ENCODEC_PIECE, the most frames a causal
// decode takes through its upsampling layers at a time, or CACHET_ENCODEC_GROUP, the pieces
// its first convolution and LSTM take at a time.
struct EnvVar {
  EnvVar(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~EnvVar() { unsetenv(name_); }
  EnvVar(const EnvVar&) = delete;
  EnvVar& operator=(const EnvVar&) = delete;

 private:
  const char* name_;
};

// A causal decoder runs a piece of frames at a time (its LSTM carrying its state, its
// convolutions taking the rows before the piece that they reach back to): every way of cutting
// the input gives the samples of a decode in one piece, bit for bit.
TEST(EncodecTest, PiecesGiveTheWholeDecode) {
  EncodecConfig c = tiny_config();
  c.num_lstm_layers = 2;
  for (const bool shortcut : {true, false}) {
    c.use_conv_shortcut = shortcut;
    const auto dec = EncodecDecoder::random(c, 5);
    cachet::ThreadPool two(2);
    const Codes codes = random_codes(4, 61, c.codebook_size, 7);
    std::vector<float> whole;
    {
      EnvVar env("CACHET_ENCODEC_PIECE", "1000");
      whole = dec->decode_mono(codes, two);
    }
    ASSERT_EQ(whole.size(), 61u * 6);
    // At most this many frames a piece, in pieces of about equal size. 1 is below the fewest
    // a piece may have (a convolution's padding plus one) and is raised to that.
    for (const char* frames : {"1", "5", "6", "7", "13", "32", "60", "61"})
      for (const char* group : {"1", "2", "3", "100"}) {
        EnvVar p("CACHET_ENCODEC_PIECE", frames), g("CACHET_ENCODEC_GROUP", group);
        EXPECT_EQ(dec->decode_mono(codes, two), whole)
            << frames << " frames a piece, " << group << " pieces a group";
      }
  }
  // By default the 24 kHz model's shape decodes at most 96 frames at a time: 200 frames are
  // three pieces (66, 67 and 67 frames), in one group.
  const auto big = EncodecDecoder::random(EncodecConfig{}, 2);
  cachet::ThreadPool pool(2);
  const Codes codes = random_codes(2, 200, 1024, 8);
  const auto pieces = big->decode_mono(codes, pool);
  {
    EnvVar g("CACHET_ENCODEC_GROUP", "2");
    EXPECT_EQ(big->decode_mono(codes, pool), pieces);
  }
  EnvVar env("CACHET_ENCODEC_PIECE", "200");
  EXPECT_EQ(big->decode_mono(codes, pool), pieces);
  for (const char* name : {"CACHET_ENCODEC_PIECE", "CACHET_ENCODEC_GROUP"}) {
    EnvVar bad(name, "0");
    EXPECT_NE(error_of([&] { big->decode_mono(codes, pool); }).find(name), std::string::npos);
  }
}

TEST(EncodecTest, BadCodesAndFiles) {
  const auto dec = EncodecDecoder::random(tiny_config(), 3);
  cachet::ThreadPool pool(1);
  EXPECT_NE(error_of([&] {
              dec->decode({{1, 2}, {3}}, pool);
            }).find("codebook 1 has 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] { dec->decode({{16}}, pool); }).find("outside [0, 16)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { dec->decode(random_codes(5, 2, 16, 1), pool); }).find("5 codebooks"),
            std::string::npos);
  EXPECT_NE(error_of([&] { dec->decode({}, pool); }).find("no codebooks"), std::string::npos);
  EXPECT_NE(error_of([] { EncodecDecoder::load("/nonexistent/encodec"); }).find("/nonexistent"),
            std::string::npos);
  const fs::path d = temp_dir("codes");
  auto codes_err = [&](const std::string& text) {
    std::ofstream(d / "c.json") << text;
    return error_of([&] { cachet::read_codes_json((d / "c.json").string()); });
  };
  EXPECT_NE(codes_err("{\"codes\": [[1, 2], [3]]}").find("row 1"), std::string::npos);
  EXPECT_NE(codes_err("{\"codes\": [[1, -2]]}").find("codes[0][1]"), std::string::npos);
  EXPECT_NE(codes_err("{\"tokens\": [[1]]}").find("no \"codes\""), std::string::npos);
  EXPECT_NE(codes_err("[[1, 2").find("not valid JSON"), std::string::npos);
  EXPECT_EQ(codes_err("[[1, 2], [3, 4]]"), "");
  std::ofstream(d / "c.json") << "{\"codes\": [[5, 6, 7], [8, 9, 10]]}";
  EXPECT_EQ(cachet::read_codes_json((d / "c.json").string()), (Codes{{5, 6, 7}, {8, 9, 10}}));
  fs::remove_all(d);
}

}  // namespace
