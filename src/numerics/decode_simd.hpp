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

namespace driftscope::numerics {

// Kernels of StatsAccumulator (decode_stats.cpp), one SIMD pass each over a chunk of doubles.
// Sums are grouped exactly like four scalar accumulators: element i goes to accumulator i % 4,
// and the total is (a0 + a1) + (a2 + a3), which every target reproduces (vectors of at most four
// lanes), so results are bit-identical on every target. Min/max/counts are exact anyway.
struct ChunkScan {
  double lo, hi, amax;  // over all values; meaningful only when nonfinite == 0
  uint64_t nonfinite, zeros;
};
ChunkScan scan_chunk(const double* x, size_t n) noexcept;
// Σ x * sx
double sum_scaled(const double* x, size_t n, double sx) noexcept;
// out[0] = Σ (x * sx)²,  out[1] = Σ (x * pre - p) * sw
void sum_squares_and_shifted(const double* x, size_t n, double sx, double pre, double p, double sw,
                             double out[2]) noexcept;
// out[0] = Σ d,  out[1] = Σ d²,  with d = (x * pre - p) * sw - m
void sum_deviations(const double* x, size_t n, double pre, double p, double sw, double m,
                    double out[2]) noexcept;

}  // namespace driftscope::numerics
