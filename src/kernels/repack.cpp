// Weights rearranged at load for the kernels of the active instruction set.
//
// Q4K_X16: the 16 Q4_K blocks of 16 consecutive rows at one 256-column position become one
// 2304-byte chunk, and a group of 16 rows is its chunks in column order:
//
//   [0, 32)      d of rows 0..15 (f16, as stored)
//   [32, 64)     dmin of rows 0..15
//   [64, 192)    A: for sub-block pair k (0..3), 32 bytes; byte 2r + h is
//                sc[2k + h] of row r (6 bits) | (low 2 bits of m[2k + h]) << 6
//   [192, 256)   B: for pair k, 16 bytes; byte r is (m[2k] >> 2) | (m[2k + 1] >> 2) << 4
//   [256, 2304)  Q: for sub-block s (0..7) and q (0..3), 64 bytes; bytes 4r..4r+3 hold, for
//                i = 0..3, the weights of row r at columns 32s + 4q + i (low nibble) and
//                32s + 16 + 4q + i (high nibble)
//
// Q8_0_X16: the 16 Q8_0 blocks of 16 rows at one 32-column position become one 544-byte
// chunk:
//
//   [0, 32)      d of rows 0..15 (f16, as stored)
//   [32, 544)    for q (0..7), 64 bytes; bytes 4r..4r+3 are the weights of row r at columns
//                4q..4q+3, plus 128 (stored as unsigned bytes: w ^ 0x80)
//
// Q6K_X16: the 16 Q6_K blocks of 16 rows at one 256-column position become one 3360-byte
// chunk. With v the 6-bit unsigned weight (the value is d * scale * (v - 32)):
//
//   [0, 32)      d of rows 0..15 (f16, as stored)
//   [32, 288)    for 16-column sub-block t (0..15), 16 bytes: the int8 scale of each row
//   [288, 3360)  for sub-block t, three 64-byte vectors W0, W1, W2; bytes 4r..4r+3 of Wq hold,
//                for i = 0..3, v of row r at column 16t + 4q + i in bits 0-5, and bits
//                2q..2q+1 of v at column 16t + 12 + i in bits 6-7
//
// BF16_X16: 16 rows x 32 columns become one 1024-byte chunk: for the column pair k (0..15),
// 64 bytes; bytes 4r..4r+3 are row r's values at columns 2k and 2k + 1 (the operand layout of
// vdpbf16ps, and of the bf16 panels of matmul).
//
// Q5K_X16: the 16 Q5_K blocks of 16 rows at one 256-column position become one 2816-byte
// chunk: [0, 2304) as in Q4K_X16 (d, dmin, scales and mins, the low four bits of each value),
// then for sub-block s (0..7) and q (0..3), 16 bytes: a 64-bit mask whose bit 4r + i is the
// fifth bit of row r's value at column 32s + 4q + i, and one for column 32s + 16 + 4q + i.
//
// Q4_0_X16, Q4_1_X16, Q5_0_X16 and Q5_1_X16: the 16 blocks of 16 rows at one 32-column
// position become one chunk of 288 (Q4_0), 320 (Q4_1), 352 (Q5_0) or 384 (Q5_1) bytes:
//
//   [0, 32)      d of rows 0..15 (f16, as stored)
//   [32, 64)     Q4_1 and Q5_1 only: m of rows 0..15 (f16, as stored)
//   then 256     for q (0..3), 64 bytes; bytes 4r..4r+3 are row r's qs[4q..4q+3] as stored
//                (columns 4q + i in the low nibbles, 16 + 4q + i in the high ones)
//   then 64      Q5_0 and Q5_1 only: for q, two 64-bit masks whose bit 4r + i is the fifth bit
//                (from qh) of row r's value at column 4q + i, and at column 16 + 4q + i
//
// sc and m are the 6-bit sub-block scales and mins of the Q4_K block. Nothing is lost or
// rounded: unpacking gives back the original blocks byte for byte. The layout lets a 512-bit
// integer dot product (vpdpbusd) take four columns of 16 rows against four broadcast
// activation bytes, and applies each scale to 16 rows at once (matvec_avx512.cpp).
#include "kernels/repack.h"

#include <cstdlib>
#include <cstring>

#include "cachet/env.h"
#include "cachet/error.h"
#include "cachet/kernels.h"
#include "cachet/tensor.h"
#include "cachet/threadpool.h"
#include "kernels/blocks.h"

namespace cachet {
namespace kern {

void q4k_scales_decode(const uint8_t* q, uint8_t sc[8], uint8_t m[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = q[j] & 63;
    m[j] = q[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    m[j] = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void q4k_scales_encode(const uint8_t sc[8], const uint8_t m[8], uint8_t* q) {
  for (int j = 0; j < 4; ++j) {
    q[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    q[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
  }
  for (int j = 4; j < 8; ++j) q[j + 4] = static_cast<uint8_t>((sc[j] & 0xF) | ((m[j] & 0xF) << 4));
}

namespace {

// Column 32s + t of a Q4_K block is nibble s % 2 of qs[32 (s / 2) + t] (t < 32). So for the
// sub-block pair (2c, 2c + 1) and q, the four qs bytes at 32c + 4q (A) and at 32c + 16 + 4q (B)
// hold exactly the nibbles of the chunk words of sub-blocks 2c (u0) and 2c + 1 (u1):
//   u0 = lo(A) | lo(B) << 4,  u1 = hi(A) | hi(B) << 4   (nibble-wise, four bytes at once)
constexpr uint32_t kLo = 0x0F0F0F0Fu;

inline uint32_t load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline void store32(uint8_t* p, uint32_t v) {
  std::memcpy(p, &v, 4);
}

}  // namespace

namespace {

// The Q4K_X16 part of a chunk (all of it for Q4_K, the first 2304 bytes for Q5_K) from the d,
// dmin, scales and low nibbles of 16 rows' Q4_K or Q5_K blocks (Blk), and back.
template <typename Blk>
void k4_x16_pack(const uint8_t* const rows[kX16Rows], uint8_t* out) {
  uint8_t sc[kX16Rows][8], m[kX16Rows][8];
  for (int r = 0; r < kX16Rows; ++r) {
    const auto& b = *reinterpret_cast<const Blk*>(rows[r]);
    std::memcpy(out + 2 * r, &b.d, 2);
    std::memcpy(out + 32 + 2 * r, &b.dmin, 2);
    q4k_scales_decode(b.scales, sc[r], m[r]);
  }
  uint8_t* a = out + 64;
  uint8_t* bb = out + 192;
  for (int k = 0; k < 4; ++k)
    for (int r = 0; r < kX16Rows; ++r) {
      for (int h = 0; h < 2; ++h)
        a[32 * k + 2 * r + h] =
            static_cast<uint8_t>(sc[r][2 * k + h] | ((m[r][2 * k + h] & 3) << 6));
      bb[16 * k + r] = static_cast<uint8_t>((m[r][2 * k] >> 2) | ((m[r][2 * k + 1] >> 2) << 4));
    }
  uint8_t* q = out + 256;
  for (int r = 0; r < kX16Rows; ++r) {
    const uint8_t* qs = reinterpret_cast<const Blk*>(rows[r])->qs;
    for (int c = 0; c < 4; ++c)
      for (int j = 0; j < 4; ++j) {
        const uint32_t A = load32(qs + 32 * c + 4 * j), B = load32(qs + 32 * c + 16 + 4 * j);
        store32(q + 256 * (2 * c) + 64 * j + 4 * r, (A & kLo) | ((B & kLo) << 4));
        store32(q + 256 * (2 * c + 1) + 64 * j + 4 * r, ((A >> 4) & kLo) | (B & ~kLo));
      }
  }
}

template <typename Blk>
void k4_x16_unpack_row(const uint8_t* chunk, int r, uint8_t* dst) {
  auto& b = *reinterpret_cast<Blk*>(dst);
  std::memcpy(&b.d, chunk + 2 * r, 2);
  std::memcpy(&b.dmin, chunk + 32 + 2 * r, 2);
  uint8_t sc[8], m[8];
  const uint8_t* a = chunk + 64;
  const uint8_t* bb = chunk + 192;
  for (int k = 0; k < 4; ++k)
    for (int h = 0; h < 2; ++h) {
      const uint8_t v = a[32 * k + 2 * r + h];
      const uint8_t hi = static_cast<uint8_t>(h ? bb[16 * k + r] >> 4 : bb[16 * k + r] & 0xF);
      sc[2 * k + h] = v & 63;
      m[2 * k + h] = static_cast<uint8_t>((v >> 6) | (hi << 2));
    }
  q4k_scales_encode(sc, m, b.scales);
  const uint8_t* q = chunk + 256;
  for (int c = 0; c < 4; ++c)
    for (int j = 0; j < 4; ++j) {
      const uint32_t u0 = load32(q + 256 * (2 * c) + 64 * j + 4 * r);
      const uint32_t u1 = load32(q + 256 * (2 * c + 1) + 64 * j + 4 * r);
      store32(b.qs + 32 * c + 4 * j, (u0 & kLo) | ((u1 & kLo) << 4));
      store32(b.qs + 32 * c + 16 + 4 * j, ((u0 >> 4) & kLo) | (u1 & ~kLo));
    }
}

}  // namespace

void q4k_x16_pack(const uint8_t* const rows[kX16Rows], uint8_t* out) {
  k4_x16_pack<block_q4_K>(rows, out);
}
void q4k_x16_unpack_row(const uint8_t* chunk, int r, uint8_t* dst) {
  k4_x16_unpack_row<block_q4_K>(chunk, r, dst);
}

// Q5_K: the Q4K_X16 bytes, then the fifth bits as byte masks: bit s of qh[col] is the fifth bit
// of column 32s + col.
void q5k_x16_pack(const uint8_t* const rows[kX16Rows], uint8_t* out) {
  k4_x16_pack<block_q5_K>(rows, out);
  uint64_t* h = reinterpret_cast<uint64_t*>(out + kX16Chunk);
  for (int s = 0; s < 8; ++s)
    for (int t = 0; t < 4; ++t) {
      uint64_t lo = 0, hi = 0;
      for (int r = 0; r < kX16Rows; ++r) {
        const uint8_t* qh = reinterpret_cast<const block_q5_K*>(rows[r])->qh;
        for (int i = 0; i < 4; ++i) {
          lo |= static_cast<uint64_t>((qh[4 * t + i] >> s) & 1) << (4 * r + i);
          hi |= static_cast<uint64_t>((qh[16 + 4 * t + i] >> s) & 1) << (4 * r + i);
        }
      }
      std::memcpy(h + 8 * s + 2 * t, &lo, 8);
      std::memcpy(h + 8 * s + 2 * t + 1, &hi, 8);
    }
}

void q5k_x16_unpack_row(const uint8_t* chunk, int r, uint8_t* dst) {
  k4_x16_unpack_row<block_q5_K>(chunk, r, dst);
  uint8_t* qh = reinterpret_cast<block_q5_K*>(dst)->qh;
  std::memset(qh, 0, 32);
  for (int s = 0; s < 8; ++s)
    for (int t = 0; t < 4; ++t) {
      uint64_t lo, hi;
      std::memcpy(&lo, chunk + kX16Chunk + 64 * s + 16 * t, 8);
      std::memcpy(&hi, chunk + kX16Chunk + 64 * s + 16 * t + 8, 8);
      for (int i = 0; i < 4; ++i) {
        qh[4 * t + i] |= static_cast<uint8_t>(((lo >> (4 * r + i)) & 1) << s);
        qh[16 + 4 * t + i] |= static_cast<uint8_t>(((hi >> (4 * r + i)) & 1) << s);
      }
    }
}

void q8_0_x16_pack(const uint8_t* const rows[kX16Rows], uint8_t* out) {
  for (int r = 0; r < kX16Rows; ++r) {
    const auto& b = *reinterpret_cast<const block_q8_0*>(rows[r]);
    std::memcpy(out + 2 * r, &b.d, 2);
    for (int q = 0; q < 8; ++q) {
      const uint32_t v = load32(reinterpret_cast<const uint8_t*>(b.qs) + 4 * q);
      store32(out + 32 + 64 * q + 4 * r, v ^ 0x80808080u);
    }
  }
}

void q8_0_x16_unpack_row(const uint8_t* chunk, int r, uint8_t* dst) {
  auto& b = *reinterpret_cast<block_q8_0*>(dst);
  std::memcpy(&b.d, chunk + 2 * r, 2);
  for (int q = 0; q < 8; ++q)
    store32(reinterpret_cast<uint8_t*>(b.qs) + 4 * q,
            load32(chunk + 32 + 64 * q + 4 * r) ^ 0x80808080u);
}

namespace {

// The 6-bit weights v[0..255] of a Q6_K block, and the block's ql, qh from them (ggml's bit
// layout: for n = 0, 1 and l < 32, ql[64n + l] holds columns 128n + l (low nibble) and
// 128n + 64 + l (high), ql[64n + 32 + l] columns 128n + 32 + l and 128n + 96 + l, and
// qh[32n + l] the top two bits of the four, in that order).
void q6_values(const block_q6_K& b, uint8_t* v) {
  for (int n = 0; n < 2; ++n)
    for (int l = 0; l < 32; ++l) {
      const uint8_t a = b.ql[64 * n + l], c = b.ql[64 * n + 32 + l], h = b.qh[32 * n + l];
      uint8_t* o = v + 128 * n + l;
      o[0] = static_cast<uint8_t>((a & 0xF) | ((h & 3) << 4));
      o[32] = static_cast<uint8_t>((c & 0xF) | (((h >> 2) & 3) << 4));
      o[64] = static_cast<uint8_t>((a >> 4) | (((h >> 4) & 3) << 4));
      o[96] = static_cast<uint8_t>((c >> 4) | (((h >> 6) & 3) << 4));
    }
}
void q6_from_values(const uint8_t* v, block_q6_K& b) {
  for (int n = 0; n < 2; ++n)
    for (int l = 0; l < 32; ++l) {
      const uint8_t* o = v + 128 * n + l;
      b.ql[64 * n + l] = static_cast<uint8_t>((o[0] & 0xF) | ((o[64] & 0xF) << 4));
      b.ql[64 * n + 32 + l] = static_cast<uint8_t>((o[32] & 0xF) | ((o[96] & 0xF) << 4));
      b.qh[32 * n + l] = static_cast<uint8_t>((o[0] >> 4) | ((o[32] >> 4) << 2) |
                                              ((o[64] >> 4) << 4) | ((o[96] >> 4) << 6));
    }
}

}  // namespace

void q6k_x16_pack(const uint8_t* const rows[kX16Rows], uint8_t* out) {
  uint8_t v[256];
  for (int r = 0; r < kX16Rows; ++r) {
    const auto& b = *reinterpret_cast<const block_q6_K*>(rows[r]);
    std::memcpy(out + 2 * r, &b.d, 2);
    q6_values(b, v);
    for (int t = 0; t < 16; ++t) {
      out[32 + 16 * t + r] = static_cast<uint8_t>(b.scales[t]);
      uint8_t* w = out + 288 + 192 * t + 4 * r;
      const uint8_t* vt = v + 16 * t;
      for (int q = 0; q < 3; ++q)
        for (int i = 0; i < 4; ++i)
          w[64 * q + i] =
              static_cast<uint8_t>(vt[4 * q + i] | (((vt[12 + i] >> (2 * q)) & 3) << 6));
    }
  }
}

void q6k_x16_unpack_row(const uint8_t* chunk, int r, uint8_t* dst) {
  auto& b = *reinterpret_cast<block_q6_K*>(dst);
  std::memcpy(&b.d, chunk + 2 * r, 2);
  uint8_t v[256];
  for (int t = 0; t < 16; ++t) {
    b.scales[t] = static_cast<int8_t>(chunk[32 + 16 * t + r]);
    const uint8_t* w = chunk + 288 + 192 * t + 4 * r;
    uint8_t* vt = v + 16 * t;
    for (int q = 0; q < 3; ++q)
      for (int i = 0; i < 4; ++i) vt[4 * q + i] = w[64 * q + i] & 63;
    for (int i = 0; i < 4; ++i)
      vt[12 + i] =
          static_cast<uint8_t>((w[i] >> 6) | ((w[64 + i] >> 6) << 2) | ((w[128 + i] >> 6) << 4));
  }
  q6_from_values(v, b);
}

void bf16_x16_pack(const uint8_t* const rows[kX16Rows], uint8_t* out) {
  for (int r = 0; r < kX16Rows; ++r)
    for (int k = 0; k < 16; ++k) std::memcpy(out + 64 * k + 4 * r, rows[r] + 4 * k, 4);
}

void bf16_x16_unpack_row(const uint8_t* chunk, int r, uint8_t* dst) {
  for (int k = 0; k < 16; ++k) std::memcpy(dst + 4 * k, chunk + 64 * k + 4 * r, 4);
}

namespace {

// Q4_0, Q4_1, Q5_0 and Q5_1 blocks (B; kMin: with m; kFive: with qh) of 16 rows <-> one chunk.
template <typename B, bool kMin, bool kFive = false>
void q32_x16_pack(const uint8_t* const rows[kX16Rows], uint8_t* out) {
  uint8_t* q = out + (kMin ? 64 : 32);
  uint64_t masks[8] = {};  // for q: columns 4q + i, then 16 + 4q + i
  for (int r = 0; r < kX16Rows; ++r) {
    const auto& b = *reinterpret_cast<const B*>(rows[r]);
    std::memcpy(out + 2 * r, &b.d, 2);
    if constexpr (kMin) std::memcpy(out + 32 + 2 * r, &b.m, 2);
    for (int k = 0; k < 4; ++k) std::memcpy(q + 64 * k + 4 * r, b.qs + 4 * k, 4);
    if constexpr (kFive) {
      const uint32_t qh = load32(b.qh);
      for (int k = 0; k < 4; ++k)
        for (int i = 0; i < 4; ++i) {
          masks[2 * k] |= static_cast<uint64_t>((qh >> (4 * k + i)) & 1) << (4 * r + i);
          masks[2 * k + 1] |= static_cast<uint64_t>((qh >> (16 + 4 * k + i)) & 1) << (4 * r + i);
        }
    }
  }
  if constexpr (kFive) std::memcpy(q + 256, masks, sizeof masks);
}
template <typename B, bool kMin, bool kFive = false>
void q32_x16_unpack_row(const uint8_t* chunk, int r, uint8_t* dst) {
  auto& b = *reinterpret_cast<B*>(dst);
  std::memcpy(&b.d, chunk + 2 * r, 2);
  if constexpr (kMin) std::memcpy(&b.m, chunk + 32 + 2 * r, 2);
  const uint8_t* q = chunk + (kMin ? 64 : 32);
  for (int k = 0; k < 4; ++k) std::memcpy(b.qs + 4 * k, q + 64 * k + 4 * r, 4);
  if constexpr (kFive) {
    uint64_t masks[8];
    std::memcpy(masks, q + 256, sizeof masks);
    uint32_t qh = 0;
    for (int k = 0; k < 4; ++k)
      for (int i = 0; i < 4; ++i) {
        qh |= static_cast<uint32_t>((masks[2 * k] >> (4 * r + i)) & 1) << (4 * k + i);
        qh |= static_cast<uint32_t>((masks[2 * k + 1] >> (4 * r + i)) & 1) << (16 + 4 * k + i);
      }
    store32(b.qh, qh);
  }
}

}  // namespace

void q4_0_x16_pack(const uint8_t* const rows[kX16Rows], uint8_t* out) {
  q32_x16_pack<block_q4_0, false>(rows, out);
}
void q4_0_x16_unpack_row(const uint8_t* chunk, int r, uint8_t* dst) {
  q32_x16_unpack_row<block_q4_0, false>(chunk, r, dst);
}
void q4_1_x16_pack(const uint8_t* const rows[kX16Rows], uint8_t* out) {
  q32_x16_pack<block_q4_1, true>(rows, out);
}
void q4_1_x16_unpack_row(const uint8_t* chunk, int r, uint8_t* dst) {
  q32_x16_unpack_row<block_q4_1, true>(chunk, r, dst);
}
void q5_0_x16_pack(const uint8_t* const rows[kX16Rows], uint8_t* out) {
  q32_x16_pack<block_q5_0, false, true>(rows, out);
}
void q5_0_x16_unpack_row(const uint8_t* chunk, int r, uint8_t* dst) {
  q32_x16_unpack_row<block_q5_0, false, true>(chunk, r, dst);
}
void q5_1_x16_pack(const uint8_t* const rows[kX16Rows], uint8_t* out) {
  q32_x16_pack<block_q5_1, true, true>(rows, out);
}
void q5_1_x16_unpack_row(const uint8_t* chunk, int r, uint8_t* dst) {
  q32_x16_unpack_row<block_q5_1, true, true>(chunk, r, dst);
}

}  // namespace kern

namespace {

// What an X16 layout is made of: the weight type it holds, bytes and columns per chunk (one
// chunk: 16 rows' blocks at one column position), and the functions that pack 16 rows' blocks
// into a chunk and take one row's blocks back out. One row per layout, the only place a layout
// and its type are tied together.
struct X16Format {
  MatLayout layout;
  DType type;
  int64_t chunk_bytes, chunk_cols;
  void (*pack)(const uint8_t* const*, uint8_t*);
  void (*unpack)(const uint8_t*, int, uint8_t*);
};
constexpr X16Format kX16Formats[] = {
    {MatLayout::Q4K_X16, DType::Q4_K, kern::kX16Chunk, 256, kern::q4k_x16_pack,
     kern::q4k_x16_unpack_row},
    {MatLayout::Q8_0_X16, DType::Q8_0, kern::kQ8X16Chunk, 32, kern::q8_0_x16_pack,
     kern::q8_0_x16_unpack_row},
    {MatLayout::Q6K_X16, DType::Q6_K, kern::kQ6X16Chunk, 256, kern::q6k_x16_pack,
     kern::q6k_x16_unpack_row},
    {MatLayout::Q4_0_X16, DType::Q4_0, kern::kQ40X16Chunk, 32, kern::q4_0_x16_pack,
     kern::q4_0_x16_unpack_row},
    {MatLayout::Q4_1_X16, DType::Q4_1, kern::kQ41X16Chunk, 32, kern::q4_1_x16_pack,
     kern::q4_1_x16_unpack_row},
    {MatLayout::Q5K_X16, DType::Q5_K, kern::kQ5X16Chunk, 256, kern::q5k_x16_pack,
     kern::q5k_x16_unpack_row},
    {MatLayout::Q5_0_X16, DType::Q5_0, kern::kQ50X16Chunk, 32, kern::q5_0_x16_pack,
     kern::q5_0_x16_unpack_row},
    {MatLayout::Q5_1_X16, DType::Q5_1, kern::kQ51X16Chunk, 32, kern::q5_1_x16_pack,
     kern::q5_1_x16_unpack_row},
    {MatLayout::BF16_X16, DType::BF16, kern::kBf16X16Chunk, 32, kern::bf16_x16_pack,
     kern::bf16_x16_unpack_row},
};
// The format of layout l, or null for Rows.
const X16Format* find_format(MatLayout l) {
  for (const X16Format& f : kX16Formats)
    if (f.layout == l) return &f;
  return nullptr;
}
const X16Format& format(MatLayout l) {
  const X16Format* f = find_format(l);
  CACHET_CHECK(f != nullptr, "repack: no interleaved format for the row layout");
  return *f;
}

bool repack_enabled() {
  static const bool on = env_switch_on("CACHET_REPACK");
  return on;
}

}  // namespace

MatLayout preferred_layout(const MatView& w) {
  if (w.layout != MatLayout::Rows || !repack_enabled() || active_isa() < Isa::Avx512)
    return w.layout;
  if (w.rows < kern::kX16Rows || w.row_stride != row_bytes(w.type, w.cols)) return MatLayout::Rows;
  // The type's format, where its chunks tile the row (always for the block types, whose
  // blocks make up a chunk; BF16 rows need a multiple of 32 columns)
  for (const X16Format& f : kX16Formats)
    if (f.type == w.type && w.cols % f.chunk_cols == 0) return f.layout;
  return MatLayout::Rows;
}

DType layout_type(MatLayout layout) {
  const X16Format* f = find_format(layout);
  return f ? f->type : DType::F32;
}

PackedMat pack_matrix(const MatView& w, ThreadPool* pool) {
  PackedMat p{nullptr, w};
  const MatLayout layout = preferred_layout(w);
  if (w.layout != MatLayout::Rows || layout == MatLayout::Rows) return p;
  const X16Format& fmt = format(layout);
  const size_t src_block = row_bytes(w.type, fmt.chunk_cols);
  const size_t bytes = w.row_stride * static_cast<size_t>(w.rows);
  p.buf = weight_buffer(bytes);
  auto* dst = static_cast<uint8_t*>(p.buf.get());
  const int64_t groups = w.rows / kern::kX16Rows, nb = w.cols / fmt.chunk_cols;
  const size_t group_bytes = w.row_stride * kern::kX16Rows;
  auto pack_groups = [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g)
      for (int64_t i = 0; i < nb; ++i) {
        const uint8_t* rows[kern::kX16Rows];
        for (int r = 0; r < kern::kX16Rows; ++r)
          rows[r] = w.row(g * kern::kX16Rows + r) + i * src_block;
        fmt.pack(rows, dst + g * group_bytes + i * fmt.chunk_bytes);
      }
  };
  if (pool)
    pool->parallel_for(groups, 4, pack_groups);
  else
    pack_groups(0, groups);
  const size_t packed = group_bytes * static_cast<size_t>(groups);
  std::memcpy(dst + packed, w.row(groups * kern::kX16Rows), bytes - packed);  // the tail rows
  p.view.data = dst;
  p.view.layout = layout;
  return p;
}

void unpack_row_blocks(const MatView& w, int64_t r, int64_t b0, int64_t nb, uint8_t* dst) {
  CACHET_CHECK(r >= 0 && r < w.rows && b0 >= 0 && nb >= 0, "unpack_row_blocks: row ", r,
               " blocks [", b0, ", ", b0 + nb, ") outside [", w.rows, ", ", w.cols, "]");
  const size_t bb = row_bytes(w.type, dtype_info(w.type).block_elems);
  if (w.layout == MatLayout::Rows || r >= w.rows / kern::kX16Rows * kern::kX16Rows) {
    std::memcpy(dst, w.row(r) + b0 * bb, static_cast<size_t>(nb) * bb);
    return;
  }
  const int64_t g = r / kern::kX16Rows;
  const uint8_t* group = static_cast<const uint8_t*>(w.data) + g * kern::kX16Rows * w.row_stride;
  const X16Format& fmt = format(w.layout);
  const int64_t per_chunk = fmt.chunk_cols / dtype_info(w.type).block_elems;  // blocks
  CACHET_CHECK(b0 % per_chunk == 0 && nb % per_chunk == 0, "unpack_row_blocks: blocks [", b0, ", ",
               b0 + nb, ") are not whole ", fmt.chunk_cols, "-column chunks");
  for (int64_t i = 0; i < nb / per_chunk; ++i)
    fmt.unpack(group + (b0 / per_chunk + i) * fmt.chunk_bytes, static_cast<int>(r % kern::kX16Rows),
               dst + i * per_chunk * bb);
}

PackedMat unpack_matrix(const MatView& w) {
  if (w.layout == MatLayout::Rows) return PackedMat{nullptr, w};
  const size_t rb = row_bytes(w.type, w.cols);
  const int64_t nb = w.cols / dtype_info(w.type).block_elems;
  PackedMat p{aligned_buffer(rb * static_cast<size_t>(w.rows)), w};
  auto* dst = static_cast<uint8_t*>(p.buf.get());
  for (int64_t r = 0; r < w.rows; ++r) unpack_row_blocks(w, r, 0, nb, dst + r * rb);
  p.view.data = dst;
  p.view.row_stride = rb;
  p.view.layout = MatLayout::Rows;
  return p;
}

}  // namespace cachet
