// Internal: the bulk widening kernels behind decode() (Highway, runtime dispatch). Each reads `n`
// little-endian elements from `src` (no alignment required) and writes `n` values to `dst`.
// Every result is exact: each f16/bf16/f32 value is representable as a double, and each
// f16/bf16 value as a float. The dispatch target follows hwy's chosen target, so tests can pin
// one with hwy::SetSupportedTargetsForTest.
#pragma once

#include <cstddef>
#include <cstdint>

namespace driftscope::numerics {

void widen_f16_to_f64(const std::byte* src, size_t n, double* dst) noexcept;
void widen_bf16_to_f64(const std::byte* src, size_t n, double* dst) noexcept;
void widen_f32_to_f64(const std::byte* src, size_t n, double* dst) noexcept;
void widen_f16_to_f32(const std::byte* src, size_t n, float* dst) noexcept;
void widen_bf16_to_f32(const std::byte* src, size_t n, float* dst) noexcept;

}  // namespace driftscope::numerics
