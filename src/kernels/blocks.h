// ggml block layouts, byte for byte. A row of n weights is n / block_elems consecutive blocks.
#pragma once
#include <cstdint>

namespace cachet {

constexpr int QK4_0 = 32, QK4_1 = 32, QK5_0 = 32, QK5_1 = 32, QK8_0 = 32, QK8_1 = 32;
constexpr int QK_K = 256;
constexpr int K_SCALE_SIZE = 12;

using half_t = uint16_t;  // IEEE binary16 bits

struct block_q4_0 {
  half_t d;
  uint8_t qs[QK4_0 / 2];
};
struct block_q4_1 {
  half_t d;
  half_t m;
  uint8_t qs[QK4_1 / 2];
};
struct block_q5_0 {
  half_t d;
  uint8_t qh[4];
  uint8_t qs[QK5_0 / 2];
};
struct block_q5_1 {
  half_t d;
  half_t m;
  uint8_t qh[4];
  uint8_t qs[QK5_1 / 2];
};
struct block_q8_0 {
  half_t d;
  int8_t qs[QK8_0];
};
struct block_q8_1 {
  half_t d;
  half_t s;
  int8_t qs[QK8_1];
};
struct block_q2_K {
  uint8_t scales[QK_K / 16];
  uint8_t qs[QK_K / 4];
  half_t d;
  half_t dmin;
};
struct block_q3_K {
  uint8_t hmask[QK_K / 8];
  uint8_t qs[QK_K / 4];
  uint8_t scales[12];
  half_t d;
};
struct block_q4_K {
  half_t d;
  half_t dmin;
  uint8_t scales[K_SCALE_SIZE];
  uint8_t qs[QK_K / 2];
};
struct block_q5_K {
  half_t d;
  half_t dmin;
  uint8_t scales[K_SCALE_SIZE];
  uint8_t qh[QK_K / 8];
  uint8_t qs[QK_K / 2];
};
struct block_q6_K {
  uint8_t ql[QK_K / 2];
  uint8_t qh[QK_K / 4];
  int8_t scales[QK_K / 16];
  half_t d;
};
struct block_q8_K {
  float d;
  int8_t qs[QK_K];
  int16_t bsums[QK_K / 16];
};

static_assert(sizeof(block_q4_0) == 18);
static_assert(sizeof(block_q4_1) == 20);
static_assert(sizeof(block_q5_0) == 22);
static_assert(sizeof(block_q5_1) == 24);
static_assert(sizeof(block_q8_0) == 34);
static_assert(sizeof(block_q8_1) == 36);
static_assert(sizeof(block_q2_K) == 84);
static_assert(sizeof(block_q3_K) == 110);
static_assert(sizeof(block_q4_K) == 144);
static_assert(sizeof(block_q5_K) == 176);
static_assert(sizeof(block_q6_K) == 210);
static_assert(sizeof(block_q8_K) == 292);

}  // namespace cachet
