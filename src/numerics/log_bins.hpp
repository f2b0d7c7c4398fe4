// Internal: the bins of a histogram of |c - r| on a log scale (the --html histogram, PairDetail),
// and the tables that find a value's bin without a search. Pure functions of the edges, kept here
// so that the detail pass (compare/detail.cpp) holds only the walk over the data.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace driftscope::numerics {

// Bin 0 holds d < 10^first_exp, bin k (1 <= k < bins) holds 10^(first_exp + k/B) <= d <
// 10^(first_exp + (k+1)/B) with B = per_decade, and the last bin everything above its lower edge,
// +inf included. NaN has no bin. Requires 1 <= B <= 3, 2 <= bins <= 127 (a bin fits a byte code
// below 128, numerics::DiffCodes) and edges in [DBL_MIN, 2^1023); std::invalid_argument
// otherwise. With B <= 3 consecutive edges are 10^(1/B) > 2 apart, so a binade [2^x, 2^(x+1))
// holds at most one edge, which both tables below rely on.
class LogBins {
 public:
  LogBins(int first_exp, int per_decade, int bins);

  size_t size() const { return edges_.size() + 1; }
  // Lower edges of bins 1 .. size() - 1, increasing.
  std::span<const double> edges() const { return edges_; }
  // The bin by definition: the number of edges <= d (d >= 0, not NaN).
  size_t bin_search(double d) const;
  // The same by the exponent table: for d in a binade the bin is (edges below the binade) +
  // (d >= the edge inside it). The binades at or below the first edge's all give bin 0, those at
  // or above the last edge's the last bin.
  size_t bin(double d) const {
    uint64_t f = std::bit_cast<uint64_t>(d) >> 52;
    f = (f < lo_ ? lo_ : f > hi_ ? hi_ : f) - lo_;
    return base_[f] + static_cast<size_t>(d >= edge_[f]);
  }

  // Per float32 exponent field e (1..254), binade [2^(e-127), 2^(e-126)): binade_base()[e] = the
  // bin of its start, binade_edge()[e] = the mantissa bits of the smallest float32 >= the edge
  // inside the binade, 0x800000 (above every mantissa) when no float32 of the binade reaches an
  // edge. 256 entries each (numerics::DiffCodes).
  const int32_t* binade_base() const { return binade_base_.data(); }
  const int32_t* binade_edge() const { return binade_edge_.data(); }

  // Thresholds for counting values by bin with count_at_least, when every positive value is in
  // [low, high] (low = 0 allowed): with `zeros`, the smallest positive double first (the values
  // >= it are the non-zero ones), then the lower edges of bins bin(low) + 1 .. bin(high). Writes at
  // most size() entries to t and returns how many.
  size_t thresholds(bool zeros, double low, double high, double* t) const;
  // Adds to hist the bins of n values counted against thresholds(zeros, low, high)
  // (at_least[j]: how many are >= t[j]); returns the number of zeros (0 without `zeros`).
  uint64_t add_counts(bool zeros, double low, double high, uint64_t n, const uint64_t* at_least,
                      uint64_t* hist) const;

 private:
  std::vector<double> edges_;
  uint64_t lo_ = 0, hi_ = 0;  // the double exponent fields bin() clamps to
  std::vector<uint8_t> base_;
  std::vector<double> edge_;
  std::array<int32_t, 256> binade_base_{}, binade_edge_{};
};

// The smallest float32 >= t (t >= 0, not NaN; +inf past the largest float32), so that for a d
// that is a float32 value, d >= t exactly when d >= round_up_f32(t).
float round_up_f32(double t);

}  // namespace driftscope::numerics
