// driftscope — the hash initialiser: reproducible reference weights and inputs without a checkpoint.
//
// docs/references.md specifies it; in short, element i of a tensor named NAME is
//   key   = fold of SEED, NAME's UTF-8 bytes and their count through SplitMix64's mix64
//   x_c   = mix64(key + (c + 1) * 0x9E3779B97F4A7C15)          (SplitMix64 output number c)
//   value = a uniform (one x) or Irwin-Hall-of-4 "normal" (four x) value of mean 0 and
//           standard deviation STD, computed exactly in float64 up to one final multiplication,
//           then rounded to nearest-even in the tensor's dtype.
// Only integer operations, exact float64 steps and one correctly rounded multiplication are
// used, so every conforming implementation (this one, the C ABI, driftscope.reference in Python,
// org.driftscope.tdump.HashInit in Java) produces the same bits on every machine; the golden
// vectors in tests/vectors/hashinit/ check that.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>

#include "driftscope/api.h"
#include "driftscope/error.hpp"

namespace driftscope::reference {

enum class Distribution : uint8_t {
  uniform = 0,  // U(-a, a), a = std * sqrt(3): PyTorch's kaiming_uniform / Linear bias shape
  normal = 1,   // Irwin-Hall of 4 uniforms, centred and scaled: bounded at +-std * 2 * sqrt(3)
};

// SplitMix64's finaliser (Steele, Lea, Flood 2014; the constants of Java's SplittableRandom).
DS_API uint64_t mix64(uint64_t z) noexcept;

// The key of a tensor name (spec step 1). Any bytes are accepted (the spec hashes bytes; names
// are UTF-8 by convention, and the writers reject invalid UTF-8 separately).
DS_API uint64_t name_key(std::string_view name, uint64_t seed = 0) noexcept;

// Element `index` of the tensor, as the float64 value before the cast to its dtype.
DS_API double hash_value(uint64_t key, uint64_t index, Distribution dist, double scale_a) noexcept;

// scale_a = std * sqrt(3), the argument hash_value takes; invalid_argument unless std is finite
// and >= 0.
DS_API Result<double> scale_for_std(double std_dev);

// Fills out[i] with elements first..first+out.size()-1 of the tensor `name` (flat row-major
// index). The float overloads round each float64 value to nearest-even once. Filling a tensor in
// pieces gives the same bits as filling it at once.
DS_API Result<void> hash_fill(std::string_view name, Distribution dist, double std_dev, std::span<double> out,
                       uint64_t seed = 0, uint64_t first = 0);
DS_API Result<void> hash_fill(std::string_view name, Distribution dist, double std_dev, std::span<float> out,
                       uint64_t seed = 0, uint64_t first = 0);

// Integer inputs (token ids, calibration data): out[i] = low + (x_i mod (high - low)).
// invalid_argument unless low < high and high - low fits int64.
DS_API Result<void> hash_fill_integers(std::string_view name, int64_t low, int64_t high,
                                std::span<int64_t> out, uint64_t seed = 0, uint64_t first = 0);

}  // namespace driftscope::reference
