// Internal: a validated view of one tensor's payload, so callers that decode chunk by chunk (the
// comparison engine, compute_stats, summarize) check the description once and then decode any
// range without re-validating. See decode.hpp for the public entry points.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "driftscope/error.hpp"
#include "driftscope/tensor.hpp"

namespace driftscope::numerics {

struct DecodePlan {
  DType dtype = DType::f32;
  EncodingKind encoding = EncodingKind::raw;
  const std::byte* data = nullptr;
  uint64_t numel = 0;
  size_t elem_size = 0;
  // Affine parameters (borrowed from the TensorInfo, which must outlive the plan). Per channel:
  // the channel of flat element i is (i / inner) % channels (row-major, docs/format.md §3.3.2).
  const double* scales = nullptr;
  const int64_t* zero_points = nullptr;
  uint64_t inner = 1;
  uint64_t channels = 1;
};

// Checks dtype, shape arithmetic, payload size and encoding parameters against docs/format.md
// §3.3. Errors: bad_dtype, shape_overflow, invalid_argument (payload size), bad_encoding
// (parameters inconsistent with the shape or a non-integer dtype), bad_value (non-finite scale).
Result<DecodePlan> make_decode_plan(const TensorInfo& info, std::span<const std::byte> payload);

// Decodes elements [first, first + n) of a validated plan. Errors: invalid_argument when the
// range is outside the tensor, bad_value for a bool byte other than 0/1. `out` holds n values.
Result<void> decode_range(const DecodePlan& plan, uint64_t first, size_t n, double* out);
Result<void> decode_range(const DecodePlan& plan, uint64_t first, size_t n, float* out);

// Fixed chunk length (elements) used by every chunked pass; results depend on it, so it is a
// constant and never derived from the machine.
inline constexpr size_t kDecodeChunk = 2048;

}  // namespace driftscope::numerics
