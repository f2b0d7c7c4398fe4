// Internal: the TensorStats accumulator shared by compute_stats and summarize (and usable by any
// chunked pass). Feed the decoded values in fixed chunks (numerics::kDecodeChunk) in element
// order; the result is then a deterministic function of the values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "driftscope/summary.hpp"

namespace driftscope::numerics {

class StatsAccumulator {
 public:
  // Adds one chunk of values. `scratch` must hold at least values.size() doubles.
  void add(std::span<const double> values, double* scratch) noexcept;
  TensorStats finish() const noexcept;

 private:
  uint64_t count_ = 0, nan_ = 0, posinf_ = 0, neginf_ = 0, zero_ = 0;
  uint64_t finite_ = 0;
  double min_ = 0, max_ = 0;
  // Moments of the finite values, shifted and scaled: with w = x - pivot_ (pivot_ = mean of the
  // first chunk with finite values, so the shifted means are small and their differences exact),
  // mean = pivot_ + mean_ * 2^exp_ and M2 = m2_ * 2^(2 exp_). Sum of squares of x (for the L2
  // norm) = ss_ * 2^(2 ss_exp_). The exponents grow to the largest chunk exponent seen, so nothing
  // overflows even for values near DBL_MAX, and subnormal-only tensors keep their precision.
  double pivot_ = 0;
  int exp_ = 0, ss_exp_ = 0;
  double mean_ = 0, m2_ = 0, ss_ = 0;
};

}  // namespace driftscope::numerics
