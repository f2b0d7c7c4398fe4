// One judge (judge.hpp, issue 25 item 2): the guard criteria profile, its validator beside
// compare's options, and judge_output's statuses from the one status table.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "driftscope/judge.hpp"

namespace output_judge_test {

using namespace driftscope;

std::span<const std::byte> bytes_of(const std::vector<double>& v) {
  return {reinterpret_cast<const std::byte*>(v.data()), v.size() * sizeof(double)};
}

TensorInfo f64(std::vector<uint64_t> shape) {
  TensorInfo t;
  t.dtype = DType::f64;
  t.shape = std::move(shape);
  return t;
}

OutputJudgement judged(const std::vector<double>& r, const std::vector<double>& c,
                       const GuardCriteria& g = {}, std::optional<uint32_t> axis = std::nullopt,
                       std::vector<uint64_t> shape = {}) {
  if (shape.empty()) shape = {r.size()};
  auto j = judge_output(f64(shape), bytes_of(r), f64(shape), bytes_of(c), g, axis);
  EXPECT_TRUE(j.ok()) << (j.ok() ? "" : j.error().message);
  return j.ok() ? *j : OutputJudgement{};
}

TEST(GuardCriteria, DefaultsAreTheGuardsSeedThresholds) {
  GuardCriteria g;
  EXPECT_EQ(g.min_cosine, 0.99);
  EXPECT_EQ(g.min_norm, 1e-4);
  EXPECT_EQ(g.max_argmax_flip, 0.0);
  EXPECT_FALSE(g.max_rel_error.has_value());
  EXPECT_EQ(g.max_norm_ratio, 1.25);
  EXPECT_NEAR(g.rel_error_limit(), std::sqrt(1.25 * 1.25 - 2 * 1.25 * 0.99 + 1), 1e-15);
  EXPECT_TRUE(validate(g).ok());
}

TEST(GuardCriteria, OneValidatorNamesTheOption) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Bad {
    void (*set)(GuardCriteria&, double);
    double v;
    const char* message;
  };
  const Bad cases[] = {
      {[](GuardCriteria& g, double v) { g.min_cosine = v; }, 1.5, "guard option 'min_cosine' is 1.5, allowed -1 .. 1"},
      {[](GuardCriteria& g, double v) { g.min_norm = v; }, -1, "guard option 'min_norm' is -1, allowed: finite and >= 0"},
      {[](GuardCriteria& g, double v) { g.min_norm = v; }, HUGE_VAL, "guard option 'min_norm' is inf, allowed: finite and >= 0"},
      {[](GuardCriteria& g, double v) { g.max_argmax_flip = v; }, nan, "guard option 'max_argmax_flip' is nan, allowed 0 .. 1"},
      {[](GuardCriteria& g, double v) { g.max_rel_error = v; }, -0.5, "guard option 'max_rel_error' is -0.5, allowed 0 .. inf"},
      {[](GuardCriteria& g, double v) { g.max_norm_ratio = v; }, 0.5, "guard option 'max_norm_ratio' is 0.5, allowed 1 .. inf"},
      {[](GuardCriteria& g, double v) { g.flip_rtol = v; }, 2, "guard option 'flip_rtol' is 2, allowed 0 .. 1"},
  };
  for (const Bad& b : cases) {
    GuardCriteria g;
    b.set(g, b.v);
    auto r = validate(g);
    ASSERT_FALSE(r.ok()) << b.message;
    EXPECT_EQ(r.error().code, Errc::invalid_argument);
    EXPECT_EQ(r.error().message, b.message);
    std::vector<double> x{1, 2};
    EXPECT_FALSE(judge_output(f64({2}), bytes_of(x), f64({2}), bytes_of(x), g).ok());
  }
}

TEST(GuardCriteria, InfiniteTolerancesTurnTheirRulesOff) {
  // The probe judges values inside a model without the few-values and decision rules.
  GuardCriteria g;
  g.small_atol = HUGE_VAL;
  g.decision_threshold = HUGE_VAL;
  g.max_norm_ratio = HUGE_VAL;
  g.max_rel_error = HUGE_VAL;
  EXPECT_TRUE(validate(g).ok());
  std::vector<double> r{0.6, 0.1}, c{0.4, 0.1};
  GuardCriteria loose = g;
  loose.min_cosine = -1;
  OutputJudgement j = judged(r, c, loose);
  EXPECT_EQ(j.beyond, 0u);
  EXPECT_EQ(j.decisions, 0u);
  EXPECT_EQ(j.status, OutputStatus::pass);
}

TEST(StatusTable, SilentCodesGiveTheSilentGuardStatuses) {
  for (const StatusRule& r : status_table())
    EXPECT_EQ(r.silent, r.guard >= OutputStatus::constant_output) << r.code;
  EXPECT_EQ(status_table().front().code, "nonfinite");
  EXPECT_EQ(kVanishedNormRatio, 1e-6);
}

TEST(JudgeOutput, SilentZeroIsAnAbsoluteNormInTheGuardProfile) {
  std::vector<double> r{0.6, -0.8, 0.0}, c(3), tiny_ref(3);
  for (size_t i = 0; i < 3; ++i) c[i] = r[i] * 5e-5;  // 5e-5 of the reference: compare's rule is 1e-6
  OutputJudgement j = judged(r, c);
  EXPECT_EQ(j.status, OutputStatus::silent_zero_vector);
  ASSERT_EQ(j.codes.size(), 1u);
  EXPECT_EQ(j.codes[0], "norm_vanished");
  EXPECT_NEAR(j.norm_cand, 5e-5, 1e-18);
  // A reference below min_norm is not healthy: a vanished output cannot be told apart.
  for (size_t i = 0; i < 3; ++i) tiny_ref[i] = r[i] * 5e-5;
  std::vector<double> zeros(3, 0.0);
  j = judged(tiny_ref, zeros);
  EXPECT_FALSE(j.healthy);
  EXPECT_NE(j.status, OutputStatus::silent_zero_vector);
  j = judged(r, zeros);
  EXPECT_EQ(j.codes.at(0), "all_zero");
}

TEST(JudgeOutput, MetricsAreCompareFloat64Pass) {
  std::vector<double> r(1000), c(1000);
  for (size_t i = 0; i < r.size(); ++i) {
    r[i] = std::sin(0.37 * static_cast<double>(i)) * 1e3;
    c[i] = r[i] * 1.01 + std::cos(static_cast<double>(i));
  }
  OutputJudgement j = judged(r, c);
  double dot = 0, sr = 0, sc = 0, sd = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    dot += r[i] * c[i];
    sr += r[i] * r[i];
    sc += c[i] * c[i];
    sd += (r[i] - c[i]) * (r[i] - c[i]);
  }
  EXPECT_NEAR(j.cosine, dot / std::sqrt(sr * sc), 1e-13);
  EXPECT_NEAR(j.rel_error, std::sqrt(sd / sr), 1e-13);
  EXPECT_NEAR(j.norm_ref, std::sqrt(sr), 1e-9);
  EXPECT_EQ(j.status, OutputStatus::pass);
}

TEST(JudgeOutput, ArgmaxFlipsSkipNearTiesAndOnlyCountWhenNothingElseHolds) {
  // Two positions of 4 classes: position 0 swaps a near-tie, position 1 flips for real.
  std::vector<double> r{0.1, 0.4, 0.39999999, 0.1, 0.1, 0.5, 0.3, 0.1};
  std::vector<double> c{0.1, 0.39999999, 0.4, 0.1, 0.1, 0.3, 0.5, 0.1};
  GuardCriteria loose;
  loose.min_cosine = -1;
  loose.max_norm_ratio = 1e9;
  loose.max_rel_error = 1e9;
  OutputJudgement j = judged(r, c, loose, 1u, {2, 4});
  EXPECT_EQ(j.ties, 1u);
  EXPECT_EQ(j.positions, 2u);
  EXPECT_EQ(j.argmax_flip, 0.5);
  EXPECT_EQ(j.status, OutputStatus::argmax_flip);
  // Over axis 0 (2 classes, 4 positions) the same values give other flips.
  j = judged(r, c, loose, 0u, {2, 4});
  EXPECT_EQ(j.positions, 4u);
  // The class axis must exist; shapes must agree.
  std::vector<double> x{1, 2};
  EXPECT_FALSE(judge_output(f64({2}), bytes_of(x), f64({2}), bytes_of(x), {}, 1u).ok());
  EXPECT_FALSE(judge_output(f64({2}), bytes_of(x), f64({1, 2}), bytes_of(x), {}).ok());
}

}  // namespace output_judge_test
