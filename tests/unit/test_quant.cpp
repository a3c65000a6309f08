// Block formats: round-trip accuracy of every quantizer, hand-built blocks decoded from the
// format definitions, argument checks, idempotence and threaded quantization.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cachet/dtype.h"
#include "cachet/error.h"
#include "cachet/half.h"
#include "cachet/quant.h"
#include "cachet/threadpool.h"
#include "kernels/blocks.h"

using namespace cachet;

namespace {

const DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                           DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q8_1, DType::Q2_K,
                           DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K};

std::vector<float> normal_data(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = nd(rng);
  return x;
}

// Student-t with 3 degrees of freedom (normal / sqrt(chi2_3 / 3)), plus a few large outliers.
std::vector<float> heavy_data(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) {
    const float a = nd(rng), b = nd(rng), c = nd(rng);
    v = nd(rng) / std::sqrt((a * a + b * b + c * c) / 3.f);
  }
  for (int64_t i = 37; i < n; i += 1001) x[static_cast<size_t>(i)] *= 25.f;
  return x;
}

std::vector<float> round_trip(DType t, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(row_bytes(t, n));
  quantize_row(t, x.data(), q.data(), n);
  std::vector<float> y(x.size());
  dequantize_row(t, q.data(), y.data(), n);
  return y;
}

// RMS error of the round trip relative to the RMS of the data.
double relative_rmse(DType t, const std::vector<float>& x) {
  const auto y = round_trip(t, x);
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    ref += double(x[i]) * x[i];
  }
  return std::sqrt(err / ref);
}

struct Bound {
  DType t;
  double normal, heavy;  // bounds on the relative RMSE
};

// Measured values (8192 values, fixed seeds) times about 1.3.
const Bound kBounds[] = {
    {DType::F32, 0.0, 0.0},      {DType::F16, 2.8e-4, 2.9e-4},  {DType::BF16, 2.2e-3, 2.2e-3},
    {DType::Q4_0, 0.111, 0.172}, {DType::Q4_1, 0.101, 0.131},   {DType::Q5_0, 0.056, 0.090},
    {DType::Q5_1, 0.049, 0.067}, {DType::Q8_0, 0.0070, 0.0125}, {DType::Q8_1, 0.0070, 0.0125},
    {DType::Q2_K, 0.384, 0.43},  {DType::Q3_K, 0.194, 0.226},   {DType::Q4_K, 0.092, 0.122},
    {DType::Q5_K, 0.047, 0.064}, {DType::Q6_K, 0.0231, 0.0367}, {DType::Q8_K, 0.0090, 0.029},
};

uint16_t h(float f) {
  return f32_to_f16(f);
}

template <typename B>
std::vector<float> decode(DType t, const B& b) {
  std::vector<float> y(static_cast<size_t>(dtype_info(t).block_elems));
  dequantize_row(t, &b, y.data(), static_cast<int64_t>(y.size()));
  return y;
}

}  // namespace

TEST(Quant, IsWeightType) {
  for (DType t : kAllTypes) EXPECT_TRUE(is_weight_type(t)) << dtype_name(t);
  EXPECT_FALSE(is_weight_type(DType::I8));
  EXPECT_FALSE(is_weight_type(DType::I32));
  EXPECT_FALSE(is_weight_type(DType::F64));
  EXPECT_FALSE(is_weight_type(DType::U8));
}

TEST(Quant, RoundTripErrorNormal) {
  const auto x = normal_data(8192, 1);
  for (const auto& b : kBounds) {
    const double e = relative_rmse(b.t, x);
    EXPECT_LE(e, b.normal) << dtype_name(b.t);
    if (b.t != DType::F32) {
      EXPECT_GT(e, b.normal / 4) << dtype_name(b.t) << " suspiciously exact";
    }
  }
}

TEST(Quant, RoundTripErrorHeavyTailed) {
  const auto x = heavy_data(8192, 2);
  for (const auto& b : kBounds) {
    const double e = relative_rmse(b.t, x);
    EXPECT_LE(e, b.heavy) << dtype_name(b.t);
    if (b.t != DType::F32) {
      EXPECT_GT(e, b.heavy / 4) << dtype_name(b.t) << " suspiciously exact";
    }
  }
}

TEST(Quant, ScaledAndShiftedData) {
  // Errors scale with the data; asymmetric formats handle an offset.
  auto x = normal_data(4096, 3);
  for (auto& v : x) v = v * 1e-3f + 5e-3f;
  for (DType t : {DType::Q4_1, DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_0}) {
    EXPECT_LE(relative_rmse(t, x), 0.05) << dtype_name(t);
  }
}

TEST(Quant, ZerosStayZero) {
  std::vector<float> x(512, 0.f);
  for (DType t : kAllTypes) {
    const auto y = round_trip(t, x);
    for (float v : y) ASSERT_EQ(v, 0.f) << dtype_name(t);
  }
}

TEST(Quant, NonFiniteInputDoesNotCrash) {
  // Garbage in, garbage out, but no crash or out-of-bounds write; finite blocks stay intact.
  auto x = normal_data(1024, 9);
  x[3] = std::nanf("");
  x[300] = INFINITY;
  x[600] = -INFINITY;
  for (DType t : kAllTypes) {
    std::vector<uint8_t> q(row_bytes(t, 1024) + 16, 0xAB);
    quantize_row(t, x.data(), q.data(), 1024);
    for (size_t i = q.size() - 16; i < q.size(); ++i) ASSERT_EQ(q[i], 0xAB) << dtype_name(t);
    std::vector<float> y(1024);
    dequantize_row(t, q.data(), y.data(), 1024);
    EXPECT_NEAR(y[1023], x[1023], 0.5f) << dtype_name(t);  // last block is finite
  }
}

TEST(Quant, RejectsPartialBlocksAndOtherTypes) {
  std::vector<float> x(300, 1.f);
  std::vector<uint8_t> buf(4096);
  EXPECT_THROW(quantize_row(DType::Q4_K, x.data(), buf.data(), 100), Error);
  EXPECT_THROW(dequantize_row(DType::Q4_K, buf.data(), x.data(), 100), Error);
  EXPECT_THROW(quantize_row(DType::Q8_0, x.data(), buf.data(), 33), Error);
  EXPECT_THROW(dequantize_row(DType::Q5_0, buf.data(), x.data(), 48), Error);
  EXPECT_THROW(dequantize_row(DType::Q6_K, buf.data(), x.data(), -256), Error);
  EXPECT_THROW(quantize_row(DType::I8, x.data(), buf.data(), 32), Error);
  EXPECT_THROW(dequantize_row(DType::I32, buf.data(), x.data(), 32), Error);
  EXPECT_THROW(quantize_matrix(DType::Q4_0, x.data(), buf.data(), 2, 40), Error);
  try {
    quantize_row(DType::Q4_K, x.data(), buf.data(), 100);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Q4_K"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// Hand-built blocks.

TEST(QuantKnown, Q4_0) {
  block_q4_0 b;
  b.d = h(0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = decode(DType::Q4_0, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f);
    EXPECT_EQ(y[j + 16], (7 - j) * 0.5f);
  }
  EXPECT_EQ(y[0], -4.f);
  EXPECT_EQ(y[16], 3.5f);
}

TEST(QuantKnown, Q4_1) {
  block_q4_1 b;
  b.d = h(0.25f);
  b.m = h(-1.f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (3 << 4));
  const auto y = decode(DType::Q4_1, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.25f - 1.f);
    EXPECT_EQ(y[j + 16], -0.25f);
  }
}

TEST(QuantKnown, Q5_0AndQ5_1) {
  block_q5_0 b;
  b.d = h(2.f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (j << 4));
  // High bits: element j has bit j of qh (little-endian 32-bit).
  const uint32_t qh = 0xA5A50F0Fu;
  std::memcpy(b.qh, &qh, 4);
  auto y = decode(DType::Q5_0, b);
  for (int e = 0; e < 32; ++e) {
    const int q = (e % 16) | (((qh >> e) & 1) << 4);
    EXPECT_EQ(y[e], (q - 16) * 2.f) << e;
  }
  EXPECT_EQ(y[0], 2.f * (16 - 16));  // low 0, high bit set
  EXPECT_EQ(y[4], 2.f * (4 - 16));   // low 4, high bit clear

  block_q5_1 c;
  c.d = h(0.5f);
  c.m = h(3.f);
  std::memcpy(c.qs, b.qs, 16);
  std::memcpy(c.qh, b.qh, 4);
  y = decode(DType::Q5_1, c);
  for (int e = 0; e < 32; ++e) {
    const int q = (e % 16) | (((qh >> e) & 1) << 4);
    EXPECT_EQ(y[e], q * 0.5f + 3.f) << e;
  }
  EXPECT_EQ(y[31], 31 * 0.5f + 3.f);  // 15 with the high bit
}

TEST(QuantKnown, Q8_0AndQ8_1) {
  block_q8_0 b;
  b.d = h(0.125f);
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j * 8 - 128);
  auto y = decode(DType::Q8_0, b);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j * 8 - 128) * 0.125f);
  block_q8_1 c;
  c.d = b.d;
  c.s = h(123.f);  // the sum field does not enter the values
  std::memcpy(c.qs, b.qs, 32);
  y = decode(DType::Q8_1, c);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j * 8 - 128) * 0.125f);
}

// The K formats: element e of a 256-block decoded from the layout description, with values
// exactly representable so the order of operations does not matter.
TEST(QuantKnown, Q2_K) {
  block_q2_K b;
  b.d = h(0.5f);
  b.dmin = h(0.25f);
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<uint8_t>((g % 16) | ((15 - g) << 4));
  for (int i = 0; i < 64; ++i) b.qs[i] = static_cast<uint8_t>(i * 37 + 11);
  const auto y = decode(DType::Q2_K, b);
  for (int e = 0; e < 256; ++e) {
    // Half e/128; within it, byte (e%32) holds elements at offsets 0, 32, 64, 96 in bit pairs.
    const int q = (b.qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
    const int g = e / 16;
    const float expect = 0.5f * (b.scales[g] & 15) * q - 0.25f * (b.scales[g] >> 4);
    ASSERT_EQ(y[e], expect) << e;
  }
  // Element 0: qs[0] = 11 -> low bits 3, group 0 scale 0, min 15: 0 - 3.75.
  EXPECT_EQ(y[0], -3.75f);
  // Element 33: qs[1] = 48 -> bits 2-3 = 0; group 2: scale 2, min 13 -> -3.25.
  EXPECT_EQ(y[33], -3.25f);
}

TEST(QuantKnown, Q3_K) {
  block_q3_K b;
  b.d = h(0.25f);
  for (int i = 0; i < 32; ++i) b.hmask[i] = static_cast<uint8_t>(i * 53 + 7);
  for (int i = 0; i < 64; ++i) b.qs[i] = static_cast<uint8_t>(i * 29 + 3);
  // Scales 0..15 chosen as 6-bit values s[j]; stored low nibbles in bytes 0-7 (j<8 low nibble,
  // j>=8 high nibble of byte j-8), high 2 bits in bytes 8-11 (byte 8 + j%4, bits 2*(j/4)).
  int s[16];
  for (int j = 0; j < 16; ++j) s[j] = (j * 7 + 5) % 64;
  std::memset(b.scales, 0, 12);
  for (int j = 0; j < 16; ++j) {
    if (j < 8)
      b.scales[j] |= static_cast<uint8_t>(s[j] & 15);
    else
      b.scales[j - 8] |= static_cast<uint8_t>((s[j] & 15) << 4);
    b.scales[8 + j % 4] |= static_cast<uint8_t>((s[j] >> 4) << (2 * (j / 4)));
  }
  const auto y = decode(DType::Q3_K, b);
  for (int e = 0; e < 256; ++e) {
    const int low = (b.qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
    const bool high = (b.hmask[e % 32] >> (e / 32)) & 1;
    const int q = low - (high ? 0 : 4);
    const float expect = 0.25f * (s[e / 16] - 32) * q;
    ASSERT_EQ(y[e], expect) << e;
  }
  // Element 0: qs[0]=3 -> 3, hmask[0]=7 bit0 set -> q=3; scale s[0]=5 -> (5-32)*0.25*3.
  EXPECT_EQ(y[0], -20.25f);
}

namespace {
// 6-bit scale / min pairs of Q4_K and Q5_K: groups 0-3 in the low 6 bits of bytes 0-3 (scale)
// and 4-7 (min); groups 4-7 have low 4 bits in bytes 8-11 (scale low nibble, min high nibble)
// and their top 2 bits in the top 2 bits of bytes 0-3 (scale) and 4-7 (min).
void pack_k4(const int* sc, const int* mn, uint8_t* out) {
  std::memset(out, 0, 12);
  for (int g = 0; g < 8; ++g) {
    if (g < 4) {
      out[g] |= static_cast<uint8_t>(sc[g]);
      out[g + 4] |= static_cast<uint8_t>(mn[g]);
    } else {
      out[g + 4] = static_cast<uint8_t>((sc[g] & 15) | ((mn[g] & 15) << 4));
      out[g - 4] |= static_cast<uint8_t>((sc[g] >> 4) << 6);
      out[g] |= static_cast<uint8_t>((mn[g] >> 4) << 6);
    }
  }
}
}  // namespace

TEST(QuantKnown, Q4_K) {
  block_q4_K b;
  b.d = h(0.5f);
  b.dmin = h(0.125f);
  int sc[8], mn[8];
  for (int g = 0; g < 8; ++g) {
    sc[g] = (g * 13 + 9) % 64;
    mn[g] = (g * 23 + 50) % 64;
  }
  pack_k4(sc, mn, b.scales);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>(i * 71 + 5);
  const auto y = decode(DType::Q4_K, b);
  for (int e = 0; e < 256; ++e) {
    // 64-element chunk c uses bytes 32c..32c+31: low nibbles first (group 2c), then high.
    const int c = e / 64, r = e % 64;
    const uint8_t byte = b.qs[32 * c + r % 32];
    const int q = r < 32 ? (byte & 15) : (byte >> 4);
    const int g = e / 32;
    const float expect = 0.5f * sc[g] * q - 0.125f * mn[g];
    ASSERT_EQ(y[e], expect) << e;
  }
  // Element 0: byte 5 -> q 5; group 0 scale 9, min 50: 0.5*9*5 - 0.125*50.
  EXPECT_EQ(y[0], 22.5f - 6.25f);
}

TEST(QuantKnown, Q5_K) {
  block_q5_K b;
  b.d = h(0.25f);
  b.dmin = h(0.5f);
  int sc[8], mn[8];
  for (int g = 0; g < 8; ++g) {
    sc[g] = (g * 29 + 3) % 64;
    mn[g] = (g * 11 + 60) % 64;
  }
  pack_k4(sc, mn, b.scales);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>(i * 97 + 1);
  for (int i = 0; i < 32; ++i) b.qh[i] = static_cast<uint8_t>(i * 45 + 17);
  const auto y = decode(DType::Q5_K, b);
  for (int e = 0; e < 256; ++e) {
    const int c = e / 64, r = e % 64;
    const uint8_t byte = b.qs[32 * c + r % 32];
    const int low = r < 32 ? (byte & 15) : (byte >> 4);
    // The fifth bit of element e is bit e/32 of qh[e%32].
    const int q = low | (((b.qh[e % 32] >> (e / 32)) & 1) << 4);
    const int g = e / 32;
    const float expect = 0.25f * sc[g] * q - 0.5f * mn[g];
    ASSERT_EQ(y[e], expect) << e;
  }
}

TEST(QuantKnown, Q6_K) {
  block_q6_K b;
  b.d = h(0.0625f);
  for (int i = 0; i < 128; ++i) b.ql[i] = static_cast<uint8_t>(i * 59 + 13);
  for (int i = 0; i < 64; ++i) b.qh[i] = static_cast<uint8_t>(i * 83 + 2);
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<int8_t>(g * 17 - 128);
  const auto y = decode(DType::Q6_K, b);
  for (int e = 0; e < 256; ++e) {
    // Half e/128 uses ql[64h..64h+63] and qh[32h..32h+31]; within it, offset r: quarter r/32,
    // lane l=r%32. Low 4 bits: ql[l + 32*(quarter%2)], nibble quarter/2. High 2 bits: qh[l] at
    // bits 2*quarter.
    const int half = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
    const uint8_t lb = b.ql[64 * half + l + 32 * (quarter % 2)];
    const int low = quarter < 2 ? (lb & 15) : (lb >> 4);
    const int high = (b.qh[32 * half + l] >> (2 * quarter)) & 3;
    const int q = (low | (high << 4)) - 32;
    const float expect = 0.0625f * b.scales[e / 16] * q;
    ASSERT_EQ(y[e], expect) << e;
  }
}

TEST(QuantKnown, Q8_K) {
  block_q8_K b;
  b.d = 0.375f;
  for (int i = 0; i < 256; ++i) b.qs[i] = static_cast<int8_t>(i - 128);
  std::memset(b.bsums, 0, sizeof(b.bsums));
  const auto y = decode(DType::Q8_K, b);
  for (int e = 0; e < 256; ++e) ASSERT_EQ(y[e], 0.375f * (e - 128));
}

TEST(QuantKnown, FloatTypes) {
  const uint16_t f16[4] = {0x3c00, 0xc000, 0x0001, 0x7bff};  // 1, -2, smallest subnormal, max
  float y[4];
  dequantize_row(DType::F16, f16, y, 4);
  EXPECT_EQ(y[0], 1.f);
  EXPECT_EQ(y[1], -2.f);
  EXPECT_EQ(y[2], std::ldexp(1.f, -24));
  EXPECT_EQ(y[3], 65504.f);
  const uint16_t bf[2] = {0x3f80, 0xc140};  // 1, -12
  dequantize_row(DType::BF16, bf, y, 2);
  EXPECT_EQ(y[0], 1.f);
  EXPECT_EQ(y[1], -12.f);
  uint16_t out[4];
  const float src[4] = {1.f, -2.f, 0.1f, 1e6f};
  quantize_row(DType::F16, src, out, 4);
  EXPECT_EQ(out[0], 0x3c00);
  EXPECT_EQ(out[1], 0xc000);
  EXPECT_EQ(out[2], 0x2e66);  // 0.1 rounds to 0x2e66
  EXPECT_EQ(out[3], 0x7c00);  // overflow to infinity
}

// quantize_row to BF16 (a loop over the branch-free f32_to_bf16, vectorized) gives f32_to_bf16's
// bits for every kind of value: ties both ways, subnormals, infinities, NaNs of either sign and
// payload, and rounding up into the exponent and to infinity; at every length, so the vector body
// and its remainder both run.
TEST(QuantKnown, Bf16RowMatchesScalarRounding) {
  std::vector<uint32_t> bits = {0x3f800000, 0x3f808000, 0x3f818000, 0x3f807fff, 0x3f808001,
                                0x00000001, 0x807fffff, 0x00008000, 0x7f800000, 0xff800000,
                                0x7fc00000, 0xffc00001, 0x7f800001, 0xff800001, 0x7f7fffff,
                                0x3fffffff, 0x80000000, 0x00000000};
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) bits.push_back(static_cast<uint32_t>(rng()));
  std::vector<float> src(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) std::memcpy(&src[i], &bits[i], 4);
  for (size_t n = 1; n <= src.size(); n += 7) {
    std::vector<uint16_t> out(n);
    quantize_row(DType::BF16, src.data(), out.data(), static_cast<int64_t>(n));
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(out[i], f32_to_bf16(src[i])) << "value bits " << std::hex << bits[i] << ", n " << n;
  }
}

// ---------------------------------------------------------------------------------------------
// Quantizer specifics.

TEST(Quant, Q8_0PicksScaleFromAbsMax) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = (j - 16) * 0.25f;  // abs max 4 at j = 0
  block_q8_0 b;
  quantize_row(DType::Q8_0, x.data(), &b, 32);
  EXPECT_EQ(b.d, f32_to_f16(4.f / 127));
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[16], 0);
  // roundf: 0.25 * 127 / 4 = 7.9375 -> 8.
  EXPECT_EQ(b.qs[17], 8);
}

TEST(Quant, TieRounding) {
  // Scale of magnitude 1: Q8_0 rounds halves away from zero (roundf), Q8_K to even (ggml's
  // nearest_int).
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[i] = static_cast<float>(i % 16) - 7.5f;
  x[0] = 127.f;
  block_q8_0 a;
  quantize_row(DType::Q8_0, x.data(), &a, 32);
  EXPECT_EQ(a.d, f32_to_f16(1.f));
  EXPECT_EQ(a.qs[1], -7);  // -6.5
  EXPECT_EQ(a.qs[2], -6);  // -5.5
  EXPECT_EQ(a.qs[8], 1);   // 0.5
  EXPECT_EQ(a.qs[9], 2);   // 1.5
  // Q8_K: iscale = -127 / max, so a positive extreme gives a negative scale.
  block_q8_K k;
  quantize_row(DType::Q8_K, x.data(), &k, 256);
  EXPECT_EQ(k.d, -1.f);
  EXPECT_EQ(k.qs[0], -127);
  EXPECT_EQ(k.qs[1], 6);   // 6.5 -> even
  EXPECT_EQ(k.qs[2], 6);   // 5.5 -> even
  EXPECT_EQ(k.qs[8], 0);   // -0.5 -> even
  EXPECT_EQ(k.qs[9], -2);  // -1.5 -> even
  x[0] = -127.f;
  quantize_row(DType::Q8_K, x.data(), &k, 256);
  EXPECT_EQ(k.d, 1.f);
  EXPECT_EQ(k.qs[0], -127);
  EXPECT_EQ(k.qs[9], 2);
}

TEST(Quant, Q8_1SumAndQ8_KBlockSums) {
  const auto x = normal_data(256, 5);
  block_q8_1 a[8];
  quantize_row(DType::Q8_1, x.data(), a, 256);
  for (const auto& b : a) {
    int sum = 0;
    for (int8_t q : b.qs) sum += q;
    // s is the sum times the scale before its rounding to f16.
    EXPECT_NEAR(f16_to_f32(b.s), sum * f16_to_f32(b.d), std::abs(f16_to_f32(b.s)) * 2e-3 + 1e-6);
  }
  block_q8_K k;
  quantize_row(DType::Q8_K, x.data(), &k, 256);
  int maxq = 0;
  for (int g = 0; g < 16; ++g) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += k.qs[16 * g + i];
    EXPECT_EQ(k.bsums[g], sum);
  }
  for (int8_t q : k.qs) maxq = std::max(maxq, std::abs(int(q)));
  EXPECT_EQ(maxq, 127);
  for (int i = 0; i < 256; ++i) EXPECT_NEAR(k.d * k.qs[i], x[i], std::abs(k.d) * 0.5f + 1e-7f);
}

TEST(Quant, IdempotentWhereExact) {
  // Re-quantizing dequantized values reproduces the blocks for these formats. (Not Q8_1, whose
  // sum field uses the unrounded scale, nor Q8_K, whose f32 scale may move by one ulp.)
  const auto x = normal_data(4096, 6);
  for (DType t : {DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q5_0}) {
    const int64_t n = static_cast<int64_t>(x.size());
    std::vector<uint8_t> q1(row_bytes(t, n)), q2(q1.size());
    quantize_row(t, x.data(), q1.data(), n);
    std::vector<float> y(x.size());
    dequantize_row(t, q1.data(), y.data(), n);
    quantize_row(t, y.data(), q2.data(), n);
    EXPECT_TRUE(q1 == q2) << dtype_name(t);
  }
}

TEST(Quant, MatrixMatchesRowsWithAndWithoutPool) {
  const int64_t rows = 13, cols = 512;
  const auto x = heavy_data(rows * cols, 7);
  ThreadPool pool(3);
  for (DType t : kAllTypes) {
    const size_t rb = row_bytes(t, cols);
    std::vector<uint8_t> ref(rb * rows), a(rb * rows), b(rb * rows);
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(t, x.data() + r * cols, ref.data() + r * rb, cols);
    quantize_matrix(t, x.data(), a.data(), rows, cols);
    quantize_matrix(t, x.data(), b.data(), rows, cols, &pool);
    EXPECT_EQ(a, ref) << dtype_name(t);
    EXPECT_EQ(b, ref) << dtype_name(t);
  }
}

TEST(Quant, UnalignedRows) {
  // Rows may start at any byte: results do not depend on the address.
  const auto x = normal_data(512, 8);
  for (DType t : kAllTypes) {
    const size_t rb = row_bytes(t, 512);
    std::vector<uint8_t> a(rb), buf(rb + 1);
    quantize_row(t, x.data(), a.data(), 512);
    quantize_row(t, x.data(), buf.data() + 1, 512);
    EXPECT_EQ(0, std::memcmp(a.data(), buf.data() + 1, rb)) << dtype_name(t);
    std::vector<float> ya(512), yb(512);
    dequantize_row(t, a.data(), ya.data(), 512);
    dequantize_row(t, buf.data() + 1, yb.data(), 512);
    EXPECT_EQ(ya, yb) << dtype_name(t);
  }
}
