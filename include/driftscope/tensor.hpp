// driftscope — the description of one recorded tensor (docs/format.md §3.3), shared by writers,
// readers, filters and the comparison engine.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "driftscope/api.h"
#include "driftscope/dtype.hpp"

namespace driftscope {

enum class Role : uint8_t { output = 0, input = 1, parameter = 2, other = 3 };
DS_API std::string_view role_name(Role r) noexcept;  // "output", "input", "parameter", "other"

enum class EncodingKind : uint8_t { raw = 0, affine_tensor = 1, affine_channel = 2 };

// Affine quantisation: value = scale * (q - zero_point); per tensor (one scale) or per channel
// along `axis` (one scale and zero point per index of that axis).
struct Encoding {
  EncodingKind kind = EncodingKind::raw;
  uint32_t axis = 0;                  // affine_channel only
  std::vector<double> scales;         // 1 entry (affine_tensor) or dims[axis] entries
  std::vector<int64_t> zero_points;   // same length as scales
};

using KeyValues = std::vector<std::pair<std::string, std::string>>;

inline constexpr uint64_t kAutoIndex = ~uint64_t{0};
inline constexpr uint32_t kAutoOccurrence = ~uint32_t{0};

struct DS_API TensorInfo {
  std::string name;                       // module path, e.g. "encoder.layers.31.norm"
  std::string op_type;                    // e.g. "LayerNorm"; may be empty
  Role role = Role::output;
  uint16_t role_index = 0;                // which output/input/parameter of the module
  uint64_t exec_index = kAutoIndex;       // kAutoIndex: the writer numbers offered tensors 0,1,2...
  uint32_t occurrence = kAutoOccurrence;  // kAutoOccurrence: the writer counts calls per identity
  DType dtype = DType::f32;
  std::vector<uint64_t> shape;            // rank 0..16
  std::vector<std::string> axes;          // empty, or one name per dim ("batch","seq","hidden")
  KeyValues attrs;                        // free string attributes
  Encoding encoding;                      // raw unless quantized

  // Number of elements (1 for rank 0); saturates at UINT64_MAX on overflow.
  uint64_t numel() const noexcept;
};

// "batch,seq,hidden" <-> {"batch","seq","hidden"}
DS_API std::string join_axes(const std::vector<std::string>& axes);
DS_API std::vector<std::string> split_axes(std::string_view axes);

}  // namespace driftscope
