#include "cachet/dtype.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

#include "cachet/error.h"

namespace cachet {
namespace {

constexpr std::array<DTypeInfo, 27> kTypes{{
    {DType::F32, "F32", 1, 4, false, true},
    {DType::F16, "F16", 1, 2, false, true},
    {DType::Q4_0, "Q4_0", 32, 18, true, true},
    {DType::Q4_1, "Q4_1", 32, 20, true, true},
    {DType::Q5_0, "Q5_0", 32, 22, true, true},
    {DType::Q5_1, "Q5_1", 32, 24, true, true},
    {DType::Q8_0, "Q8_0", 32, 34, true, true},
    {DType::Q8_1, "Q8_1", 32, 36, true, true},
    {DType::Q2_K, "Q2_K", 256, 84, true, true},
    {DType::Q3_K, "Q3_K", 256, 110, true, true},
    {DType::Q4_K, "Q4_K", 256, 144, true, true},
    {DType::Q5_K, "Q5_K", 256, 176, true, true},
    {DType::Q6_K, "Q6_K", 256, 210, true, true},
    {DType::Q8_K, "Q8_K", 256, 292, true, true},
    {DType::I8, "I8", 1, 1, false, true},
    {DType::I16, "I16", 1, 2, false, true},
    {DType::I32, "I32", 1, 4, false, true},
    {DType::I64, "I64", 1, 8, false, true},
    {DType::F64, "F64", 1, 8, false, true},
    {DType::BF16, "BF16", 1, 2, false, true},
    {DType::BOOL, "BOOL", 1, 1, false, false},
    {DType::U8, "U8", 1, 1, false, false},
    {DType::U16, "U16", 1, 2, false, false},
    {DType::U32, "U32", 1, 4, false, false},
    {DType::U64, "U64", 1, 8, false, false},
    {DType::F8_E4M3, "F8_E4M3", 1, 1, false, false},
    {DType::F8_E5M2, "F8_E5M2", 1, 1, false, false},
}};

}  // namespace

const DTypeInfo& dtype_info(DType t) {
  for (const auto& info : kTypes)
    if (info.type == t) return info;
  fail("unknown tensor type id ", static_cast<uint32_t>(t));
}

std::optional<DType> dtype_from_ggml(uint32_t id) {
  for (const auto& info : kTypes)
    if (info.in_gguf && static_cast<uint32_t>(info.type) == id) return info.type;
  return std::nullopt;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  std::string up(name);
  std::transform(up.begin(), up.end(), up.begin(), [](unsigned char c) { return std::toupper(c); });
  for (const auto& info : kTypes)
    if (info.name == up) return info.type;
  return std::nullopt;
}

size_t dtype_alignment(DType t) {
  switch (t) {
    case DType::F32: case DType::I32: case DType::U32: case DType::Q8_K: return 4;
    case DType::F64: case DType::I64: case DType::U64: return 8;
    case DType::I8: case DType::U8: case DType::BOOL: case DType::F8_E4M3: case DType::F8_E5M2:
      return 1;
    default: return 2;  // F16, BF16, I16, U16 and the blocks with f16 scales
  }
}

size_t row_bytes(DType t, int64_t n) {
  const auto& info = dtype_info(t);
  CACHET_CHECK(n >= 0 && n % info.block_elems == 0, "a row of ", n, " elements is not a whole number of ",
               info.name, " blocks (", info.block_elems, " elements each)");
  return static_cast<size_t>(n / info.block_elems) * static_cast<size_t>(info.block_bytes);
}

}  // namespace cachet
