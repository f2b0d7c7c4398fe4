// driftscope — data flow between recorded tensors: the reserved TENSOR attributes `ds.inputs`
// (which recorded tensors a tensor was computed from) and `ds.kind` (what a tensor holds), defined
// in docs/format.md §3.3.3. Recorders of every language write them; compare reads them to tell an
// error born in an op from one its inputs brought (docs/compare.md §5).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "driftscope/api.h"
#include "driftscope/error.hpp"
#include "driftscope/detail/shared_string.hpp"
#include "driftscope/tensor.hpp"

namespace driftscope {

inline constexpr std::string_view kInputsAttr = "ds.inputs";
inline constexpr std::string_view kKindAttr = "ds.kind";

namespace detail {
struct ReportAccess;  // the comparison engine's write access (src/compare/report_access.hpp)
}

// A recorded tensor's identity (docs/format.md §3.3): name, role + role_index, occurrence.
// The name is read through name() (a view that lives as long as this TensorRef); its storage is
// private (detail/shared_string.hpp: one pointer to a shared block), so a comparison can point it
// at the block of the referenced tensor's own name and a million recorded inputs cost no name of
// their own (issue 30 item 4). 16 bytes, was 40 as a std::string.
class TensorRef {
 public:
  TensorRef() noexcept = default;
  TensorRef(std::string_view tensor_name, Role r = Role::output, uint16_t index = 0, uint32_t occ = 0)
      : name_(tensor_name), role(r), role_index(index), occurrence(occ) {}
  std::string_view name() const noexcept { return name_; }

 private:
  friend struct detail::ReportAccess;
  detail::SharedString name_;

 public:
  Role role = Role::output;
  uint16_t role_index = 0;
  uint32_t occurrence = 0;
  friend bool operator==(const TensorRef& a, const TensorRef& b) noexcept {
    return a.name_ == b.name_ && a.role == b.role && a.role_index == b.role_index && a.occurrence == b.occurrence;
  }
};

// What a tensor holds. Only `value` tensors carry rounding error; the others are exact by
// construction and are never an error source or an op's input error (docs/compare.md §5).
enum class TensorKind : uint8_t {
  value,  // "float": a floating-point activation
  index,  // integer ids, positions, gather indices
  shape,  // shapes and sizes, and arithmetic on them
  mask,   // booleans, and floats computed from integers/booleans only (attention masks)
};
DS_API std::string_view tensor_kind_name(TensorKind k) noexcept;   // "float", "index", "shape", "mask"
DS_API std::optional<TensorKind> parse_tensor_kind(std::string_view text) noexcept;

// The `ds.inputs` value for `refs` (grammar in docs/format.md §3.3.3), e.g.
// "output/0/0:encoder.layers.0.norm1,input/1/0:attention\,mask".
DS_API std::string format_inputs(const std::vector<TensorRef>& refs);
// Parses a `ds.inputs` value; Errc::bad_value with the byte position of the first problem.
DS_API Result<std::vector<TensorRef>> parse_inputs(std::string_view text);

}  // namespace driftscope
