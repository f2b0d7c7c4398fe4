#include "numerics/log_bins.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace driftscope::numerics {

LogBins::LogBins(int first_exp, int per_decade, int bins) {
  if (per_decade < 1 || per_decade > 3 || bins < 2 || bins > 127)
    throw std::invalid_argument("LogBins: needs 1 <= per_decade <= 3 and 2 <= bins <= 127");
  for (int k = 1; k < bins; ++k) edges_.push_back(std::pow(10.0, first_exp + double(k) / per_decade));
  // The exponent table gives every subnormal bin 0, and needs a binade above the last edge.
  if (!(edges_.front() >= std::numeric_limits<double>::min() && edges_.back() < 0x1p1023))
    throw std::invalid_argument("LogBins: the edges must lie in [DBL_MIN, 2^1023)");
  const double nan = std::numeric_limits<double>::quiet_NaN();

  // The double exponent table. Binade of field f: [2^(f-1023), 2^(f-1022)) for f >= 1 (field 0:
  // zero and subnormals). lo_: the last binade wholly below the first edge; hi_: the first wholly
  // above the last edge, whose "edge" is NaN, never reached.
  uint64_t f_lo = 1;
  while (std::ldexp(1.0, static_cast<int>(f_lo) - 1022) <= edges_.front()) ++f_lo;
  lo_ = f_lo - 1;
  uint64_t f_hi = lo_;
  while (std::ldexp(1.0, static_cast<int>(f_hi) - 1023) <= edges_.back()) ++f_hi;
  hi_ = f_hi;
  for (uint64_t f = lo_; f <= hi_; ++f) {
    const double low = std::ldexp(1.0, static_cast<int>(f) - 1023);
    const double high = std::ldexp(1.0, static_cast<int>(f) - 1022);
    const auto below = static_cast<size_t>(std::lower_bound(edges_.begin(), edges_.end(), low) - edges_.begin());
    base_.push_back(static_cast<uint8_t>(below));
    edge_.push_back(below < edges_.size() && edges_[below] < high ? edges_[below] : nan);
  }
  base_[0] = 0;
  edge_[0] = nan;

  // The float32 binade table: d >= an edge e exactly when d >= the smallest float32 >= e, which
  // either lies in d's binade (and then compares by the mantissa bits alone) or not (and then no
  // float32 of the binade reaches e).
  for (int e = 1; e < 255; ++e) {
    const double start = std::ldexp(1.0, e - 127), end = std::ldexp(1.0, e - 126);
    const size_t b = bin_search(start);
    binade_base_[static_cast<size_t>(e)] = static_cast<int32_t>(b);
    binade_edge_[static_cast<size_t>(e)] = 0x800000;
    if (b < edges_.size() && edges_[b] < end) {
      const float up = round_up_f32(edges_[b]);
      if (static_cast<double>(up) < end)
        binade_edge_[static_cast<size_t>(e)] = static_cast<int32_t>(std::bit_cast<uint32_t>(up) & 0x7FFFFF);
    }
  }
}

size_t LogBins::bin_search(double d) const {
  return static_cast<size_t>(std::upper_bound(edges_.begin(), edges_.end(), d) - edges_.begin());
}

size_t LogBins::thresholds(bool zeros, double low, double high, double* t) const {
  size_t k = 0;
  if (zeros) t[k++] = std::numeric_limits<double>::denorm_min();
  for (size_t b = bin(low), hi = bin(high); b < hi; ++b) t[k++] = edges_[b];  // lower edge of b + 1
  return k;
}

// Bins are monotone in d, so the values fall in [bin(low), bin(high)], and the number in bins
// >= b is the number of values >= the lower edge of b.
uint64_t LogBins::add_counts(bool zeros, double low, double high, uint64_t n, const uint64_t* at_least,
                             uint64_t* hist) const {
  uint64_t above = n, nzero = 0;
  size_t j = 0;
  if (zeros) {
    nzero = n - at_least[0];
    above = at_least[j++];
  }
  const size_t hi = bin(high);
  for (size_t b = bin(low); b < hi; ++b, ++j) {
    hist[b] += above - at_least[j];
    above = at_least[j];
  }
  hist[hi] += above;
  return nzero;
}

float round_up_f32(double t) {
  if (t > static_cast<double>(std::numeric_limits<float>::max())) return std::numeric_limits<float>::infinity();
  const auto f = static_cast<float>(t);
  return static_cast<double>(f) < t ? std::nextafter(f, std::numeric_limits<float>::infinity()) : f;
}

}  // namespace driftscope::numerics
