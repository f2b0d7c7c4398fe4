// driftscope — turning stored elements into numbers: every dtype decoded (bf16, f16 and fp8
// widened exactly; integers converted; affine-quantized tensors dequantized) to f64 or f32.
// One implementation serves the reader, the CLI, the comparison engine and Python.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "driftscope/error.hpp"
#include "driftscope/summary.hpp"
#include "driftscope/tensor.hpp"

namespace driftscope {

// Decodes elements [first, first + out.size()) of a tensor whose bytes are `payload` (the whole
// tensor) into `out`. Per-channel dequantisation needs the element position, hence `first`.
// Errors: invalid_argument when the range or payload size does not fit `info`.
Result<void> decode(const TensorInfo& info, std::span<const std::byte> payload, uint64_t first,
                    std::span<double> out);
Result<void> decode(const TensorInfo& info, std::span<const std::byte> payload, uint64_t first,
                    std::span<float> out);

// Single-pass statistics of a whole tensor (decoded values), float64 accumulation.
Result<TensorStats> compute_stats(const TensorInfo& info, std::span<const std::byte> payload);

// Light mode: stats plus a projection of dimension `dim` with the given seed (docs/metrics.md).
Result<Summary> summarize(const TensorInfo& info, std::span<const std::byte> payload,
                          uint32_t dim = kDefaultProjectionDim,
                          uint64_t seed = kDefaultProjectionSeed);

// Scalar conversions, exact (every value of the narrow type is a double).
double f16_to_double(uint16_t bits) noexcept;
double bf16_to_double(uint16_t bits) noexcept;
double f8e4m3fn_to_double(uint8_t bits) noexcept;
double f8e5m2_to_double(uint8_t bits) noexcept;
// Round-to-nearest-even conversions (used by examples and tests to make narrow data).
uint16_t double_to_f16(double v) noexcept;
uint16_t double_to_bf16(double v) noexcept;

}  // namespace driftscope
