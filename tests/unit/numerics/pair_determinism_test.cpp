// Reproducibility of compare_pair: every compiled SIMD target gives the scalar reference's bits,
// chunk by chunk and for whole tensors, and the thread count never changes a bit.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "numerics/pair_kernel.hpp"
#include "numerics/pair_metrics.hpp"
#include "pair_test_util.hpp"

namespace driftscope::numerics {
namespace {

using kernel::ChunkPartial;
using testing::bits;
using testing::expect_identical;
using testing::make_tensor;

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// Restores automatic dispatch even when an assertion fails mid-test.
struct ForceGuard {
  ~ForceGuard() { force_target(""); }
};

enum class Pattern { normal, adversarial, huge, tiny };

// ref and a perturbed cand; adversarial mixes NaN, ±Inf, ±0, subnormals, exact ties.
void fill(Pattern p, size_t n, uint64_t seed, std::vector<double>& r, std::vector<double>& c) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  std::uniform_int_distribution<int> pick(0, 15);
  r.resize(n);
  c.resize(n);
  const double scale = p == Pattern::huge ? 1e300 : p == Pattern::tiny ? 1e-300 : 1.0;
  for (size_t i = 0; i < n; ++i) {
    r[i] = g(rng) * scale;
    c[i] = r[i] + g(rng) * 1e-3 * scale;
    if (p != Pattern::adversarial) continue;
    switch (pick(rng)) {
      case 0: r[i] = kNaN; break;
      case 1: c[i] = kNaN; break;
      case 2: r[i] = c[i] = kNaN; break;
      case 3: r[i] = kInf; c[i] = pick(rng) < 8 ? kInf : -kInf; break;
      case 4: c[i] = -kInf; break;
      case 5: r[i] = -0.0; c[i] = 0.0; break;
      case 6: r[i] = std::numeric_limits<double>::denorm_min() * pick(rng); c[i] = -r[i]; break;
      case 7: c[i] = r[i]; break;
      case 8: r[i] = 3.0; c[i] = 3.0 + 0.25; break;  // ties for the largest error
      default: break;
    }
  }
}

void expect_same_chunk(const ChunkPartial& a, const ChunkPartial& b, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(0, std::memcmp(a.lanes, b.lanes, sizeof(a.lanes))) << "lane sums differ";
  EXPECT_EQ(bits(a.max_abs), bits(b.max_abs));
  EXPECT_EQ(bits(a.max_rel), bits(b.max_rel));
  // Minima and maxima may differ only in the sign of a zero (docs/metrics.md).
  EXPECT_EQ(a.min_ref, b.min_ref);
  EXPECT_EQ(a.max_ref, b.max_ref);
  EXPECT_EQ(a.min_cand, b.min_cand);
  EXPECT_EQ(a.max_cand, b.max_cand);
  EXPECT_EQ(a.nonfinite, b.nonfinite);
  EXPECT_EQ(a.nan_ref, b.nan_ref);
  EXPECT_EQ(a.nan_cand, b.nan_cand);
  EXPECT_EQ(a.nan_both, b.nan_both);
  EXPECT_EQ(a.inf_ref, b.inf_ref);
  EXPECT_EQ(a.inf_cand, b.inf_cand);
  EXPECT_EQ(a.inf_same, b.inf_same);
  EXPECT_EQ(a.zero_ref, b.zero_ref);
  EXPECT_EQ(a.zero_cand, b.zero_cand);
  EXPECT_EQ(a.mismatch, b.mismatch);
  EXPECT_EQ(a.first_mismatch, b.first_mismatch);
}

TEST(PairDeterminism, EveryTargetMatchesScalarPerChunk) {
  const auto targets = kernel::targets();
  ASSERT_GE(targets.size(), 2u) << "expected at least one SIMD target besides scalar";
  const std::vector<size_t> sizes = {0, 1, 3, 7, 8, 15, 16, 17, 31, 33, 100, 1000, 4095, 4096};
  kernel::Params params{1e-6, 1e-4, 1e-12, false};
  for (Pattern p : {Pattern::normal, Pattern::adversarial, Pattern::huge, Pattern::tiny}) {
    for (size_t n : sizes) {
      std::vector<double> r, c;
      fill(p, n, 1000 + n, r, c);
      const size_t padded = (n + kernel::kLanes - 1) / kernel::kLanes * kernel::kLanes;
      alignas(64) static double rb[kernel::kChunk + kernel::kLanes];
      alignas(64) static double cb[kernel::kChunk + kernel::kLanes];
      std::fill(rb, rb + padded, 0.0);
      std::fill(cb, cb + padded, 0.0);
      std::copy(r.begin(), r.end(), rb);
      std::copy(c.begin(), c.end(), cb);
      ChunkPartial want;
      kernel::chunk_scalar(rb, cb, n, params, &want);
      for (const auto& t : targets) {
        ChunkPartial got;
        kernel::by_name(t)(rb, cb, n, params, &got);
        expect_same_chunk(got, want, t + " n=" + std::to_string(n) + " pattern=" +
                                         std::to_string(static_cast<int>(p)));
      }
      params.nan_equal = !params.nan_equal;
    }
  }
}

TEST(PairDeterminism, ScalarKernelCountsWhatItSees) {
  // The reference itself, checked against direct counting.
  std::vector<double> r, c;
  fill(Pattern::adversarial, 4000, 7, r, c);
  alignas(64) static double rb[kernel::kChunk + kernel::kLanes];
  alignas(64) static double cb[kernel::kChunk + kernel::kLanes];
  std::copy(r.begin(), r.end(), rb);
  std::copy(c.begin(), c.end(), cb);
  ChunkPartial p;
  kernel::chunk_scalar(rb, cb, r.size(), kernel::Params{}, &p);
  uint64_t nan_r = 0, inf_c = 0, nonfin = 0;
  double sum_abs = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    nan_r += std::isnan(r[i]);
    inf_c += std::isinf(c[i]);
    const bool fin = std::isfinite(r[i]) && std::isfinite(c[i]);
    nonfin += !fin;
    if (fin) sum_abs += std::fabs(r[i] - c[i]);
  }
  EXPECT_EQ(p.nan_ref, nan_r);
  EXPECT_EQ(p.inf_cand, inf_c);
  EXPECT_EQ(p.nonfinite, nonfin);
  EXPECT_NEAR(kernel::reduce_lanes(p.lanes[kernel::kSumAbs]), sum_abs, 1e-12 * sum_abs);
}

// Several tasks (256 Ki elements each) plus a tail that is not a whole group of lanes.
const size_t kBig = 807000;  // 3 tasks and a ragged last one; 807 rows of 1000

struct Pair {
  testing::Tensor a, b;
};

Pair big_pair(Pattern p, DType dtype) {
  std::vector<double> r, c;
  fill(p, kBig, 42, r, c);
  if (dtype == DType::f32) {
    return {make_tensor(DType::f32, std::vector<float>(r.begin(), r.end()), {kBig}),
            make_tensor(DType::f32, std::vector<float>(c.begin(), c.end()), {kBig})};
  }
  return {make_tensor(DType::f64, r, {kBig}), make_tensor(DType::f64, c, {kBig})};
}

TEST(PairDeterminism, EveryTargetMatchesScalarWholeTensor) {
  ForceGuard guard;
  PairOptions o;
  o.atol = 1e-5;
  o.rtol = 1e-3;
  for (Pattern p : {Pattern::normal, Pattern::adversarial, Pattern::huge}) {
    const Pair pr = big_pair(p, p == Pattern::huge ? DType::f64 : DType::f32);
    ASSERT_TRUE(force_target("scalar"));
    auto want = testing::run(pr.a, pr.b, o);
    ASSERT_TRUE(want.ok()) << want.error().to_string();
    EXPECT_EQ(want->count, kBig);
    for (const auto& t : available_targets()) {
      ASSERT_TRUE(force_target(t)) << t;
      auto got = testing::run(pr.a, pr.b, o);
      ASSERT_TRUE(got.ok());
      expect_identical(*got, *want, t + " pattern " + std::to_string(static_cast<int>(p)));
    }
  }
}

TEST(PairDeterminism, ThreadCountDoesNotChangeBits) {
  for (Pattern p : {Pattern::normal, Pattern::adversarial}) {
    const Pair pr = big_pair(p, DType::f32);
    PairOptions o;
    o.rtol = 1e-3;
    o.classes = 1000;  // classification runs too
    o.threads = 1;
    auto one = testing::run(pr.a, pr.b, o);
    ASSERT_TRUE(one.ok()) << one.error().to_string();
    EXPECT_GT(one->rows, 0u);
    for (unsigned threads : {2u, 8u, 0u}) {
      o.threads = threads;
      auto got = testing::run(pr.a, pr.b, o);
      ASSERT_TRUE(got.ok());
      expect_identical(*got, *one, "threads=" + std::to_string(threads));
    }
  }
}

TEST(PairDeterminism, LargeTensorAgreesWithDirectFormulas) {
  // An independent long-double computation of the main metrics on the multi-task tensor.
  std::vector<double> r, c;
  fill(Pattern::normal, kBig, 42, r, c);
  auto got = testing::run(make_tensor(DType::f64, r, {kBig}), make_tensor(DType::f64, c, {kBig}));
  ASSERT_TRUE(got.ok());
  long double sd = 0, sr = 0, sc = 0, dot = 0, sa = 0;
  double mx = 0;
  int64_t at = -1;
  for (size_t i = 0; i < kBig; ++i) {
    const long double d = static_cast<long double>(r[i]) - c[i];
    sd += d * d;
    sr += static_cast<long double>(r[i]) * r[i];
    sc += static_cast<long double>(c[i]) * c[i];
    dot += static_cast<long double>(r[i]) * c[i];
    sa += std::fabs(r[i] - c[i]);
    if (std::fabs(r[i] - c[i]) > mx) {
      mx = std::fabs(r[i] - c[i]);
      at = static_cast<int64_t>(i);
    }
  }
  const auto n = static_cast<long double>(kBig);
  EXPECT_EQ(got->max_abs_diff, mx);
  EXPECT_EQ(got->max_abs_index, at);
  EXPECT_NEAR(got->rmse, static_cast<double>(std::sqrt(sd / n)), 1e-13 * got->rmse);
  EXPECT_NEAR(got->mean_abs_diff, static_cast<double>(sa / n), 1e-13 * got->mean_abs_diff);
  EXPECT_NEAR(got->sqnr_db, static_cast<double>(10 * std::log10(sr / sd)), 1e-11);
  EXPECT_NEAR(1 - got->cosine, static_cast<double>(1 - dot / std::sqrt(sr * sc)), 1e-12);
}

}  // namespace
}  // namespace driftscope::numerics
