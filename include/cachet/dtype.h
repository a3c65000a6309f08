// Element and block types. Values below 100 are ggml's type ids (as stored in GGUF files);
// the others are safetensors dtypes that have no ggml id.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace cachet {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
  // safetensors-only element types
  BOOL = 100,
  U8 = 101,
  U16 = 102,
  U32 = 103,
  U64 = 104,
  F8_E4M3 = 105,
  F8_E5M2 = 106,
};

struct DTypeInfo {
  DType type;
  std::string_view name;    // "Q4_K", "F32", ... (ggml spelling; safetensors names map onto these)
  int64_t block_elems;      // elements per block (1 for plain element types)
  int64_t block_bytes;      // bytes per block
  bool quantized;           // a ggml block format
  bool in_gguf;             // has a ggml type id
};

// Info for a type; throws cachet::Error for an unknown value.
const DTypeInfo& dtype_info(DType t);
// Lookup of a ggml type id read from a file: nullopt when unknown.
std::optional<DType> dtype_from_ggml(uint32_t id);
// "Q4_K", "q4_k", "bf16", "F32", ... -> type (nullopt when unknown).
std::optional<DType> dtype_from_name(std::string_view name);
inline std::string_view dtype_name(DType t) { return dtype_info(t).name; }
// Alignment in bytes that data of this type needs (the alignment of its element or block
// struct: 2 for the f16-scaled blocks, 4 for F32 and Q8_K, ...).
size_t dtype_alignment(DType t);
// Bytes of a row of n elements; throws if n is not a multiple of the block size.
size_t row_bytes(DType t, int64_t n);

}  // namespace cachet
