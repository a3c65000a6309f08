// Internal: the X16 layouts (repack.cpp describes them byte by byte).
#pragma once
#include <cstdint>

namespace cachet::kern {

constexpr int kX16Rows = 16;                // rows per group
constexpr int64_t kX16Chunk = 16 * 144;     // Q4K_X16: bytes per group and 256 columns
constexpr int64_t kQ8X16Chunk = 16 * 34;    // Q8_0_X16: bytes per group and 32 columns
constexpr int64_t kQ6X16Chunk = 16 * 210;   // Q6K_X16: bytes per group and 256 columns
constexpr int64_t kBf16X16Chunk = 16 * 64;  // BF16_X16: bytes per group and 32 columns
constexpr int64_t kQ40X16Chunk = 16 * 18;   // Q4_0_X16: bytes per group and 32 columns
constexpr int64_t kQ41X16Chunk = 16 * 20;   // Q4_1_X16: bytes per group and 32 columns
constexpr int64_t kQ5X16Chunk = 16 * 176;   // Q5K_X16: bytes per group and 256 columns
constexpr int64_t kQ50X16Chunk = 16 * 22;   // Q5_0_X16: bytes per group and 32 columns
constexpr int64_t kQ51X16Chunk = 16 * 24;   // Q5_1_X16: bytes per group and 32 columns

// 6-bit scales and mins of a Q4_K block from its 12 packed bytes, and back.
void q4k_scales_decode(const uint8_t* q, uint8_t sc[8], uint8_t m[8]);
void q4k_scales_encode(const uint8_t sc[8], const uint8_t m[8], uint8_t* q);

// One chunk from the Q4_K blocks of 16 rows at one column position, and row r's block back.
void q4k_x16_pack(const uint8_t* const rows[kX16Rows], uint8_t* out);
void q4k_x16_unpack_row(const uint8_t* chunk, int r, uint8_t* dst);
void q8_0_x16_pack(const uint8_t* const rows[kX16Rows], uint8_t* out);
void q8_0_x16_unpack_row(const uint8_t* chunk, int r, uint8_t* dst);
void q6k_x16_pack(const uint8_t* const rows[kX16Rows], uint8_t* out);
void q6k_x16_unpack_row(const uint8_t* chunk, int r, uint8_t* dst);
void bf16_x16_pack(const uint8_t* const rows[kX16Rows], uint8_t* out);
void bf16_x16_unpack_row(const uint8_t* chunk, int r, uint8_t* dst);
void q5k_x16_pack(const uint8_t* const rows[kX16Rows], uint8_t* out);
void q5k_x16_unpack_row(const uint8_t* chunk, int r, uint8_t* dst);
void q5_0_x16_pack(const uint8_t* const rows[kX16Rows], uint8_t* out);
void q5_0_x16_unpack_row(const uint8_t* chunk, int r, uint8_t* dst);
void q5_1_x16_pack(const uint8_t* const rows[kX16Rows], uint8_t* out);
void q5_1_x16_unpack_row(const uint8_t* chunk, int r, uint8_t* dst);
void q4_0_x16_pack(const uint8_t* const rows[kX16Rows], uint8_t* out);
void q4_0_x16_unpack_row(const uint8_t* chunk, int r, uint8_t* dst);
void q4_1_x16_pack(const uint8_t* const rows[kX16Rows], uint8_t* out);
void q4_1_x16_unpack_row(const uint8_t* chunk, int r, uint8_t* dst);

}  // namespace cachet::kern
