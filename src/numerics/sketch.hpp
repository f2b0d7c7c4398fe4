// Internal: the light-mode CountSketch (docs/light-mode.md) — the hash that places each element,
// and the estimator the comparison engine uses on two Summaries (summary-vs-summary, or
// value-vs-summary after summarize() of the value side with the summary's seed and dim).
#pragma once

#include <cstdint>

#include "driftscope/error.hpp"
#include "driftscope/summary.hpp"

namespace driftscope::numerics {

// SplitMix64 finaliser of x + golden gamma (Steele, Lea, Flood 2014; the mixer of Java's
// SplittableRandom): the element hash is splitmix64(seed + i), wrapping mod 2^64.
constexpr uint64_t splitmix64(uint64_t x) noexcept {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Bucket and sign of flat element i: bucket = (h >> 32) % dim, sign = +1 when (h & 1) == 0.
struct SketchSlot {
  uint32_t bucket;
  bool negative;
};
constexpr SketchSlot sketch_slot(uint64_t seed, uint64_t i, uint32_t dim) noexcept {
  const uint64_t h = splitmix64(seed + i);
  return {static_cast<uint32_t>((h >> 32) % dim), (h & 1) != 0};
}

inline constexpr uint32_t kProjectionCountSketch = 1;  // docs/format.md §3.6 projection_kind
inline constexpr uint32_t kMaxProjectionDim = 4096;    // docs/format.md §6

// Estimates of how candidate b differs from reference a, from their summaries alone, and one
// standard error for each (docs/light-mode.md §4). Values cover finite elements only.
struct SketchEstimate {
  double cosine = 1;        // <a,b> / (|a| |b|), clamped to [-1, 1]
  double rel_l2 = 0;        // |a - b| / |a|; +inf when |a| = 0 < |b|
  double cosine_stderr = 0;
  double rel_l2_stderr = 0;
};

// Errors: incomparable when the summaries differ in element count, seed, dim or kind, when a
// projection is empty, or when a projection value is not finite (a float overflow in the sketch).
Result<SketchEstimate> estimate_from_sketches(const Summary& reference, const Summary& candidate);

}  // namespace driftscope::numerics
