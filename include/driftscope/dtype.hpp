// driftscope — element types of TDUMP tensors (docs/format.md §3.3.1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "driftscope/api.h"

namespace driftscope {

// Codes are the on-disk values; never renumber.
enum class DType : uint16_t {
  f64 = 1,
  f32 = 2,
  f16 = 3,
  bf16 = 4,
  f8e4m3fn = 5,
  f8e5m2 = 6,
  i64 = 7,
  i32 = 8,
  i16 = 9,
  i8 = 10,
  u8 = 11,
  boolean = 12,
  u16 = 13,
  u32 = 14,
  u64 = 15,
  // 16 (i4) and 17 (u4) are reserved for packed sub-byte types.
};

// Bytes per element; 0 for codes that are not valid in this version.
DS_API size_t dtype_size(DType t) noexcept;
// True for the codes this version defines (1..15).
DS_API bool dtype_valid(uint16_t code) noexcept;
DS_API bool dtype_is_float(DType t) noexcept;    // f64 f32 f16 bf16 f8*
DS_API bool dtype_is_integer(DType t) noexcept;  // signed or unsigned ints (not bool)
// "f32", "bf16", "f8e4m3fn", "bool", ...
DS_API std::string_view dtype_name(DType t) noexcept;
// Accepts the names above and common aliases ("float32", "float16", "bfloat16", "int8", "uint8",
// "float8_e4m3fn", "float8_e5m2", "bool", "float", "double", "half").
DS_API std::optional<DType> parse_dtype(std::string_view name) noexcept;

}  // namespace driftscope
