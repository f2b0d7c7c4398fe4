// numerics::LogBins (the --html histogram's bins): the exponent tables give the binary search's
// bin on every edge, binade boundary and random double; the float32 binade table gives the bin
// of every float32 of a binade from its mantissa bits; the threshold counts add up to the bins.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "driftscope/compare.hpp"
#include "numerics/log_bins.hpp"

namespace {

using driftscope::PairDetail;
using driftscope::numerics::LogBins;

const double kInf = std::numeric_limits<double>::infinity();

void expect_same_bin(const LogBins& b, double d) {
  EXPECT_EQ(b.bin(d), b.bin_search(d)) << "d = " << d << " (bits " << std::hex << std::bit_cast<uint64_t>(d) << ")";
}

void check_table(const LogBins& b, int first_exp) {
  for (double e : b.edges())
    for (double x : {e, std::nextafter(e, 0.0), std::nextafter(e, kInf), std::nextafter(std::nextafter(e, 0.0), 0.0),
                     std::nextafter(std::nextafter(e, kInf), kInf)})
      expect_same_bin(b, x);
  for (int x = -1074; x <= 1023; ++x) {
    const double p = std::ldexp(1.0, x);
    expect_same_bin(b, p);
    expect_same_bin(b, std::nextafter(p, 0.0));
    expect_same_bin(b, std::nextafter(p, kInf));
  }
  for (double x : {0.0, std::numeric_limits<double>::denorm_min(), DBL_MIN, DBL_MAX, kInf, 1e300,
                   std::pow(10.0, first_exp), 3.1622776601683795e-12})
    expect_same_bin(b, x);
  // Log-uniform over the whole finite range, and dense around the bins.
  uint64_t z = 0x243F6A8885A308D3ull;
  for (int i = 0; i < 200000; ++i) {
    z ^= z << 13, z ^= z >> 7, z ^= z << 17;
    expect_same_bin(b, std::bit_cast<double>(z & 0x7FEFFFFFFFFFFFFFull));
    expect_same_bin(b, std::ldexp(1.0 + double(z >> 12) * 0x1p-52, static_cast<int>(z % 80) - 50 + first_exp * 3));
  }
}

TEST(LogBins, TableEqualsBinarySearchOnEveryBoundary) {
  check_table(LogBins(PairDetail::kHistFirstExp, PairDetail::kHistBinsPerDecade, PairDetail::kHistBins),
              PairDetail::kHistFirstExp);
  // Other layouts the class allows: three bins a decade (edges 2.15x apart), a range reaching
  // past float32's, and one starting just above the subnormals.
  check_table(LogBins(-6, 3, 60), -6);
  check_table(LogBins(20, 1, 30), 20);
  check_table(LogBins(-307, 2, 100), -307);
}

TEST(LogBins, LayoutsWithoutOneEdgePerBinadeAreRefused) {
  EXPECT_THROW(LogBins(0, 4, 10), std::invalid_argument);  // 10^(1/4) < 2
  EXPECT_THROW(LogBins(0, 0, 10), std::invalid_argument);
  EXPECT_THROW(LogBins(0, 2, 1), std::invalid_argument);
  EXPECT_THROW(LogBins(0, 2, 128), std::invalid_argument);  // a bin must fit a byte code
  EXPECT_THROW(LogBins(-309, 2, 10), std::invalid_argument);  // an edge among the subnormals
  EXPECT_THROW(LogBins(300, 2, 40), std::invalid_argument);   // an edge past the largest double
}

// binade_base/binade_edge against their definition: every float32 f of binade e is in bin
// base[e] + (mantissa(f) >= edge[e]), checked on each float32 next to an edge and on every
// binade's first and last float32.
TEST(LogBins, Float32BinadeTableGivesTheBinOfEveryFloat) {
  for (const LogBins& b : {LogBins(PairDetail::kHistFirstExp, PairDetail::kHistBinsPerDecade, PairDetail::kHistBins),
                           LogBins(-40, 3, 90)}) {
    auto by_table = [&](float f) {
      const uint32_t bits = std::bit_cast<uint32_t>(f);
      const auto e = static_cast<size_t>(bits >> 23);
      return static_cast<size_t>(b.binade_base()[e]) + ((bits & 0x7FFFFF) >= static_cast<uint32_t>(b.binade_edge()[e]));
    };
    std::vector<float> xs;
    for (int e = 1; e < 255; ++e) {
      const float first = std::bit_cast<float>(static_cast<uint32_t>(e) << 23);
      xs.insert(xs.end(), {first, std::bit_cast<float>((static_cast<uint32_t>(e) << 23) | 0x7FFFFF)});
    }
    for (double edge : b.edges()) {
      if (edge > FLT_MAX || edge < FLT_MIN) continue;
      const auto f = static_cast<float>(edge);
      xs.insert(xs.end(), {f, std::nextafter(f, 0.0f), std::nextafter(f, INFINITY)});
    }
    for (float f : xs) EXPECT_EQ(by_table(f), b.bin_search(f)) << "f = " << f;
  }
}

// Counting against thresholds() and folding with add_counts() gives the histogram of bin_search,
// with and without zeros, on values spanning a few bins and all of them.
TEST(LogBins, ThresholdCountsAddUpToTheBins) {
  const LogBins b(PairDetail::kHistFirstExp, PairDetail::kHistBinsPerDecade, PairDetail::kHistBins);
  std::vector<double> values = {0.0, 0.0, 1e-13, 2e-12, 1e-12, 0.5, 0.99, 1.0, 3.2, 1e7, 1e9, kInf};
  for (size_t from : {size_t{0}, size_t{3}, size_t{5}}) {
    const std::vector<double> v(values.begin() + static_cast<long>(from), values.end());
    bool zeros = false;
    double low = kInf, high = 0;
    for (double x : v) {
      zeros |= x == 0;
      if (x > 0) low = std::min(low, x);
      high = std::max(high, x);
    }
    std::vector<double> t(b.size());
    const size_t k = b.thresholds(zeros, low, high, t.data());
    std::vector<uint64_t> at_least(k, 0), hist(b.size(), 0), expected(b.size(), 0);
    uint64_t expected_zeros = 0;
    for (double x : v) {
      for (size_t j = 0; j < k; ++j) at_least[j] += x >= t[j];
      if (x == 0) ++expected_zeros;
      else ++expected[b.bin_search(x)];
    }
    EXPECT_EQ(b.add_counts(zeros, low, high, v.size(), at_least.data(), hist.data()), expected_zeros) << from;
    EXPECT_EQ(hist, expected) << from;
  }
}

}  // namespace
