#include "driftscope/dtype.hpp"

#include <array>
#include <string>

namespace driftscope {

namespace {
struct DTypeRow {
  DType type;
  std::string_view name;
  size_t size;
  bool is_float;
  bool is_int;
};
// docs/format.md §3.3.1
constexpr std::array<DTypeRow, 15> kRows{{
    {DType::f64, "f64", 8, true, false},
    {DType::f32, "f32", 4, true, false},
    {DType::f16, "f16", 2, true, false},
    {DType::bf16, "bf16", 2, true, false},
    {DType::f8e4m3fn, "f8e4m3fn", 1, true, false},
    {DType::f8e5m2, "f8e5m2", 1, true, false},
    {DType::i64, "i64", 8, false, true},
    {DType::i32, "i32", 4, false, true},
    {DType::i16, "i16", 2, false, true},
    {DType::i8, "i8", 1, false, true},
    {DType::u8, "u8", 1, false, true},
    {DType::boolean, "bool", 1, false, false},
    {DType::u16, "u16", 2, false, true},
    {DType::u32, "u32", 4, false, true},
    {DType::u64, "u64", 8, false, true},
}};

const DTypeRow* row(DType t) noexcept {
  auto code = static_cast<uint16_t>(t);
  if (code < 1 || code > kRows.size()) return nullptr;
  return &kRows[code - 1];
}
}  // namespace

bool dtype_valid(uint16_t code) noexcept { return code >= 1 && code <= kRows.size(); }
size_t dtype_size(DType t) noexcept { return row(t) ? row(t)->size : 0; }
bool dtype_is_float(DType t) noexcept { return row(t) && row(t)->is_float; }
bool dtype_is_integer(DType t) noexcept { return row(t) && row(t)->is_int; }
std::string_view dtype_name(DType t) noexcept { return row(t) ? row(t)->name : "invalid"; }

std::optional<DType> parse_dtype(std::string_view name) noexcept {
  for (const auto& r : kRows)
    if (r.name == name) return r.type;
  struct Alias {
    std::string_view alias;
    DType type;
  };
  static constexpr Alias kAliases[] = {
      {"float64", DType::f64},      {"double", DType::f64},        {"float32", DType::f32},
      {"float", DType::f32},        {"float16", DType::f16},       {"half", DType::f16},
      {"bfloat16", DType::bf16},    {"float8_e4m3fn", DType::f8e4m3fn},
      {"float8_e5m2", DType::f8e5m2}, {"int64", DType::i64},       {"int32", DType::i32},
      {"int16", DType::i16},        {"int8", DType::i8},           {"uint8", DType::u8},
      {"uint16", DType::u16},       {"uint32", DType::u32},        {"uint64", DType::u64},
      {"bool_", DType::boolean},    {"boolean", DType::boolean},
  };
  for (const auto& a : kAliases)
    if (a.alias == name) return a.type;
  return std::nullopt;
}

}  // namespace driftscope
