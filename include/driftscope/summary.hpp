// driftscope — light mode: a tensor's statistics and a fixed-seed random projection, stored
// instead of its values (docs/format.md §3.6, sketch and estimator in docs/light-mode.md).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace driftscope {

struct TensorStats {
  uint64_t count = 0;
  uint64_t nan_count = 0;
  uint64_t posinf_count = 0;
  uint64_t neginf_count = 0;
  uint64_t zero_count = 0;
  double min = std::numeric_limits<double>::quiet_NaN();  // finite values only
  double max = std::numeric_limits<double>::quiet_NaN();
  double mean = std::numeric_limits<double>::quiet_NaN();
  double std = std::numeric_limits<double>::quiet_NaN();  // population
  double l2_norm = 0.0;                                   // of the finite values
};

struct Summary {
  TensorStats stats;
  uint64_t projection_seed = 0;
  uint32_t projection_kind = 1;     // 1: CountSketch hashed with SplitMix64 (docs/light-mode.md)
  std::vector<float> projection;    // projection_dim values
};

inline constexpr uint32_t kDefaultProjectionDim = 256;
inline constexpr uint64_t kDefaultProjectionSeed = 0x5DEECE66Dull;

}  // namespace driftscope
