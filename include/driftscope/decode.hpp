// driftscope — turning stored elements into numbers: every dtype decoded (bf16, f16 and fp8
// widened exactly; integers converted; affine-quantized tensors dequantized) to f64 or f32.
// One implementation serves the reader, the CLI, the comparison engine and Python.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "driftscope/api.h"
#include "driftscope/error.hpp"
#include "driftscope/summary.hpp"
#include "driftscope/tensor.hpp"

namespace driftscope {

// Decodes elements [first, first + out.size()) of a tensor whose bytes are `payload` (the whole
// tensor, little-endian, row-major) into `out`. Per-channel dequantisation needs the element
// position, hence `first`. Floats widen exactly (f16, bf16, fp8: subnormals, ±0, ±Inf, NaN kept);
// integers convert with one rounding (above 2^53 for double, 2^24 for float); affine encodings
// give scale * (q - zero_point) computed in double, then rounded once to float for the f32 output.
// Errors: bad_dtype (unknown code), shape_overflow, invalid_argument (payload size does not match
// the shape, or the range is outside the tensor), bad_encoding (affine parameters that do not fit
// the dtype or shape), bad_value (non-finite scale; bool byte other than 0/1 — `out` is then
// partly written).
DS_API Result<void> decode(const TensorInfo& info, std::span<const std::byte> payload, uint64_t first,
                    std::span<double> out);
DS_API Result<void> decode(const TensorInfo& info, std::span<const std::byte> payload, uint64_t first,
                    std::span<float> out);

// Single-pass statistics of a whole tensor (decoded values), float64 accumulation in fixed
// chunks: the result depends only on the values (docs/light-mode.md §1). Errors: as decode().
DS_API Result<TensorStats> compute_stats(const TensorInfo& info, std::span<const std::byte> payload);

// Light mode: stats plus the CountSketch of dimension `dim` (0 … 4096) with the given seed
// (docs/light-mode.md §2), bit-identical on every platform. Errors: as decode(), and
// invalid_argument for dim > 4096.
DS_API Result<Summary> summarize(const TensorInfo& info, std::span<const std::byte> payload,
                          uint32_t dim = kDefaultProjectionDim,
                          uint64_t seed = kDefaultProjectionSeed);

// Scalar conversions, exact (every value of the narrow type is a double).
DS_API double f16_to_double(uint16_t bits) noexcept;
DS_API double bf16_to_double(uint16_t bits) noexcept;
DS_API double f8e4m3fn_to_double(uint8_t bits) noexcept;
DS_API double f8e5m2_to_double(uint8_t bits) noexcept;
// Round to nearest, ties to even, in one step from double (no detour through float); overflow
// gives ±Inf, NaN stays NaN (quiet, sign kept). Used by examples and tests to make narrow data.
DS_API uint16_t double_to_f16(double v) noexcept;
DS_API uint16_t double_to_bf16(double v) noexcept;

}  // namespace driftscope
