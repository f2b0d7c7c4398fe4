// The sentences of one guard output's judgement (report.hpp guard_output_detail), worded in C++
// since issue 25 item 2 and byte-identical to the Python that wrote them before: every expected
// string below is what python/driftscope/_guard/_metrics.py judge() of commit 1d9b98d wrote for
// the same codes and figures (its _core.judge_output stubbed to return them). Edge values of
// Python's format specs: 0, -0 ("-0", which fmt_num would print "0"), inf, NaN of either sign
// ("nan": Python never signs one), 1e-5 ("1e-05"), 123456789 ("1.235e+08" at .4g), 0.5% ({:.1%}).
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <span>
#include <string_view>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "driftscope/judge.hpp"
#include "driftscope/report.hpp"

namespace guard_detail_test {

using namespace driftscope;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Case {
  OutputJudgement j;
  GuardCriteria t;
  std::optional<uint32_t> axis;
  const char* expected;
};

TEST(GuardOutputDetail, EveryCodeWordedAsPythonWordedIt) {
  const Case cases[] = {
    {{.codes = {"nonfinite"}, .count = 7, .finite_pairs = 3, .nan = 2, .inf = 1, .norm_ref = 1.0,
      .norm_cand = 1.0, .cosine = 1.0, .rel_error = 0.0, .norm_ratio = 1.0, .healthy = true},
     {}, std::nullopt,
     "2 NaN and 1 Inf of 7 values where the reference is finite"},
    {{.codes = {"nonfinite"}, .count = 123456790, .finite_pairs = 3, .inf = 123456789, .norm_ref = 1.0,
      .norm_cand = 1.0, .cosine = 1.0, .rel_error = 0.0, .norm_ratio = 1.0, .healthy = true},
     {}, std::nullopt,
     "0 NaN and 123456789 Inf of 123456790 values where the reference is finite"},
    {{.codes = {"all_zero"}, .count = 3, .finite_pairs = 3, .norm_ref = 0.5, .cosine = 1.0,
      .rel_error = 0.0, .norm_ratio = 1.0, .healthy = true},
     {}, std::nullopt,
     "L2 norm 0 < 0.0001 where the reference's is 0.5"},
    {{.codes = {"norm_vanished"}, .count = 3, .finite_pairs = 3, .norm_ref = 123456789.0,
      .norm_cand = 1e-05, .cosine = 1.0, .rel_error = 0.0, .norm_ratio = 1.0, .healthy = true},
     {.min_norm = 1e-05}, std::nullopt,
     "L2 norm 1e-05 < 1e-05 where the reference's is 1.235e+08"},
    {{.codes = {"norm_vanished"}, .count = 3, .finite_pairs = 3, .norm_ref = kInf, .norm_cand = 3.14159e-07,
      .cosine = 1.0, .rel_error = 0.0, .norm_ratio = 1.0, .healthy = true},
     {.min_norm = 0.0}, std::nullopt,
     "L2 norm 3.14e-07 < 0 where the reference's is inf"},
    {{.codes = {"constant"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0,
      .cosine = 1.0, .rel_error = 0.0, .norm_ratio = 1.0, .healthy = true, .constant_value = 2.0},
     {}, std::nullopt,
     "every value is 2 where the reference varies"},
    {{.codes = {"constant"}, .count = 3, .finite_pairs = 3, .norm_ref = 1e-05, .norm_cand = 1.0,
      .cosine = 1.0, .rel_error = 0.0, .norm_ratio = 1.0, .constant_value = -0.0},
     {}, std::nullopt,
     "every value is -0 where the reference varies; the reference's norm 1e-05 is below 0.0001, so a vanished output cannot be told apart"},
    {{.codes = {"constant"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0,
      .cosine = 1.0, .rel_error = 0.0, .norm_ratio = 1.0, .healthy = true, .constant_value = 123456789.0},
     {}, std::nullopt,
     "every value is 1.23457e+08 where the reference varies"},
    {{.codes = {"constant"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0,
      .cosine = 1.0, .rel_error = 0.0, .norm_ratio = 1.0, .healthy = true,
      .constant_value = -1.2345675e-05},
     {}, std::nullopt,
     "every value is -1.23457e-05 where the reference varies"},
    {{.codes = {"cosine"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0,
      .cosine = 0.9812345678, .rel_error = 0.0, .norm_ratio = 1.0, .healthy = true},
     {}, std::nullopt,
     "cosine 0.981235 < 0.99"},
    {{.codes = {"cosine"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0, .cosine = -0.0,
      .rel_error = 0.0, .norm_ratio = 1.0, .healthy = true},
     {.min_cosine = -0.0}, std::nullopt,
     "cosine -0.000000 < -0"},
    {{.codes = {"cosine"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0, .cosine = -1.0,
      .rel_error = 0.0, .norm_ratio = 1.0, .healthy = true},
     {.min_cosine = 1.0}, std::nullopt,
     "cosine -1.000000 < 1"},
    {{.codes = {"cosine"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0,
      .cosine = 0.99999949999, .rel_error = 0.0, .norm_ratio = 1.0, .healthy = true},
     {.min_cosine = 0.9999995}, std::nullopt,
     "cosine 0.999999 < 1"},
    {{.codes = {"rel_l2"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0, .cosine = 1.0,
      .rel_error = 0.3, .norm_ratio = 1.0, .healthy = true},
     {}, std::nullopt,
     "relative error 0.3 > 0.296"},
    {{.codes = {"rel_l2"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0, .cosine = 1.0,
      .rel_error = kInf, .norm_ratio = 1.0, .healthy = true},
     {.max_rel_error = 1e-05}, std::nullopt,
     "relative error inf > 1e-05"},
    {{.codes = {"rel_l2"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0, .cosine = 1.0,
      .rel_error = 123456789.0, .norm_ratio = 1.0, .healthy = true},
     {.max_rel_error = 0.0}, std::nullopt,
     "relative error 1.235e+08 > 0"},
    {{.codes = {"norm_ratio"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0,
      .cosine = 1.0, .rel_error = 0.0, .norm_ratio = 1.3, .healthy = true},
     {}, std::nullopt,
     "norm ratio cand/ref 1.3 outside [0.8, 1.25]"},
    {{.codes = {"norm_ratio"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0,
      .cosine = 1.0, .rel_error = 0.0, .norm_ratio = 0.0, .healthy = true},
     {.max_norm_ratio = kInf}, std::nullopt,
     "norm ratio cand/ref 0 outside [0, inf]"},
    {{.codes = {"norm_ratio"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0,
      .cosine = 1.0, .rel_error = 0.0, .norm_ratio = 123456789.0, .healthy = true},
     {.max_norm_ratio = 3.0}, std::nullopt,
     "norm ratio cand/ref 1.235e+08 outside [0.3333, 3]"},
    {{.codes = {"cosine", "rel_l2", "norm_ratio"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0,
      .norm_cand = 1.0, .cosine = 0.5, .rel_error = 0.9, .norm_ratio = 1.5, .healthy = true},
     {}, std::nullopt,
     "cosine 0.500000 < 0.99; relative error 0.9 > 0.296; norm ratio cand/ref 1.5 outside [0.8, 1.25]"},
    {{.codes = {"few_values"}, .count = 2, .finite_pairs = 2, .norm_ref = 1.0, .norm_cand = 1.0,
      .cosine = 1.0, .rel_error = 0.0, .norm_ratio = 1.0, .beyond = 1, .worst_ref = 1.0, .worst_cand = 1.5,
      .healthy = true},
     {}, std::nullopt,
     "1 of 2 values beyond |diff| <= 0.01 + 0.01|ref| (worst 1 -> 1.5; a cosine cannot judge so few values)"},
    {{.codes = {"few_values"}, .count = 4, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0,
      .cosine = 1.0, .rel_error = 0.0, .norm_ratio = 1.0, .beyond = 3, .worst_ref = -0.0,
      .worst_cand = 123456789.0, .healthy = true},
     {.small_atol = 1e-05, .small_rtol = 0.0}, std::nullopt,
     "3 of 3 values beyond |diff| <= 1e-05 + 0|ref| (worst -0 -> 1.23457e+08; a cosine cannot judge so few values)"},
    {{.codes = {"few_values"}, .count = 1, .finite_pairs = 1, .norm_ref = 1.0, .norm_cand = 1.0,
      .cosine = 1.0, .rel_error = 0.0, .norm_ratio = 1.0, .beyond = 1, .worst_ref = 1e-05,
      .worst_cand = -1e-05, .healthy = true},
     {.small_atol = kInf, .small_rtol = 0.005}, std::nullopt,
     "1 of 1 values beyond |diff| <= inf + 0.005|ref| (worst 1e-05 -> -1e-05; a cosine cannot judge so few values)"},
    {{.codes = {"decision_flip"}, .count = 2, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0,
      .cosine = 1.0, .rel_error = 0.0, .norm_ratio = 1.0, .decisions = 1, .decision_ref = 0.6,
      .decision_cand = 0.4, .healthy = true},
     {}, std::nullopt,
     "decision flip: 1 score(s) cross 0.5 (0.6 -> 0.4)"},
    {{.codes = {"decision_flip"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0,
      .cosine = 1.0, .rel_error = 0.0, .norm_ratio = 1.0, .decisions = 2, .decision_ref = 1e-05,
      .decision_cand = 0.0, .healthy = true},
     {.decision_threshold = 1e-05}, std::nullopt,
     "decision flip: 2 score(s) cross 1e-05 (1e-05 -> 0)"},
    {{.codes = {"decision_flip"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0,
      .cosine = 1.0, .rel_error = 0.0, .norm_ratio = 1.0, .decisions = 1, .decision_ref = 0.123456789,
      .decision_cand = -0.0, .healthy = true},
     {.decision_threshold = kInf}, std::nullopt,
     "decision flip: 1 score(s) cross inf (0.123457 -> -0)"},
    {{.codes = {"few_values", "decision_flip"}, .count = 2, .finite_pairs = 2, .norm_ref = 1.0,
      .norm_cand = 1.0, .cosine = 1.0, .rel_error = 0.0, .norm_ratio = 1.0, .beyond = 2, .worst_ref = 0.9,
      .worst_cand = 0.1, .decisions = 1, .decision_ref = 0.9, .decision_cand = 0.1, .healthy = true},
     {}, std::nullopt,
     "2 of 2 values beyond |diff| <= 0.01 + 0.01|ref| (worst 0.9 -> 0.1; a cosine cannot judge so few values); decision flip: 1 score(s) cross 0.5 (0.9 -> 0.1)"},
    {{.codes = {"argmax"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0, .cosine = 1.0,
      .rel_error = 0.0, .norm_ratio = 1.0, .argmax_flip = 0.005, .positions = 200, .healthy = true},
     {}, 1u,
     "top-1 over axis 1 changes at 0.5% of 200 positions"},
    {{.codes = {"argmax"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0, .cosine = 1.0,
      .rel_error = 0.0, .norm_ratio = 1.0, .argmax_flip = 0.0, .positions = 1, .healthy = true},
     {}, 0u,
     "top-1 over axis 0 changes at 0.0% of 1 positions"},
    {{.codes = {"argmax"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0, .cosine = 1.0,
      .rel_error = 0.0, .norm_ratio = 1.0, .argmax_flip = 1.0, .positions = 123456789, .healthy = true},
     {.max_argmax_flip = 0.5}, 3u,
     "top-1 over axis 3 changes at 100.0% of 123456789 positions"},
    {{.codes = {"argmax"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0, .cosine = 1.0,
      .rel_error = 0.0, .norm_ratio = 1.0, .argmax_flip = 1e-05, .positions = 100000, .healthy = true},
     {}, 2u,
     "top-1 over axis 2 changes at 0.0% of 100000 positions"},
    {{.codes = {"argmax"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0, .cosine = 1.0,
      .rel_error = 0.0, .norm_ratio = 1.0, .argmax_flip = 0.0125, .positions = 80, .healthy = true},
     {}, 0u,
     "top-1 over axis 0 changes at 1.2% of 80 positions"},
    {{.codes = {"argmax"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0, .cosine = 1.0,
      .rel_error = 0.0, .norm_ratio = 1.0, .argmax_flip = 0.6666666666666666, .ties = 1, .positions = 3,
      .healthy = true},
     {}, 0u,
     "top-1 over axis 0 changes at 66.7% of 3 positions; 1 near-tie(s) whose top-1 swapped within 0.0001 of the row's largest value, not counted as flips"},
    {{.codes = {}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0, .cosine = 1.0,
      .rel_error = 0.0, .norm_ratio = 1.0, .ties = 4, .positions = 10, .healthy = true},
     {}, 1u,
     "4 near-tie(s) whose top-1 swapped within 0.0001 of the row's largest value, not counted as flips"},
    {{.codes = {}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0, .cosine = 1.0,
      .rel_error = 0.0, .norm_ratio = 1.0, .ties = 1, .positions = 10, .healthy = true},
     {.flip_rtol = 0.0}, 1u,
     "1 near-tie(s) whose top-1 swapped within 0 of the row's largest value, not counted as flips"},
    {{.codes = {}, .count = 3, .finite_pairs = 3, .cosine = 1.0, .rel_error = 0.0, .norm_ratio = 1.0},
     {}, std::nullopt,
     "the reference's norm 0 is below 0.0001, so a vanished output cannot be told apart"},
    {{.codes = {}, .count = 3, .finite_pairs = 3, .norm_ref = 1e-05, .norm_cand = kNaN, .cosine = 1.0,
      .rel_error = 0.0, .norm_ratio = 1.0},
     {.min_norm = 123456789.0}, std::nullopt,
     "the reference's norm 1e-05 is below 1.23457e+08, so a vanished output cannot be told apart"},
    {{.codes = {"few_values"}, .count = 2, .finite_pairs = 2, .norm_ref = 5e-05, .norm_cand = 1.0,
      .cosine = 1.0, .rel_error = 0.0, .norm_ratio = 1.0, .beyond = 1, .worst_ref = 5e-05,
      .worst_cand = 0.0},
     {}, std::nullopt,
     "1 of 2 values beyond |diff| <= 0.01 + 0.01|ref| (worst 5e-05 -> 0; a cosine cannot judge so few values); the reference's norm 5e-05 is below 0.0001, so a vanished output cannot be told apart"},
    {{.codes = {}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0, .cosine = 1.0,
      .rel_error = 0.0, .norm_ratio = 1.0, .healthy = true},
     {}, std::nullopt,
     ""},
    {{.codes = {"cosine"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0, .cosine = kNaN,
      .rel_error = 0.0, .norm_ratio = 1.0, .healthy = true},
     {}, std::nullopt,
     "cosine nan < 0.99"},
    {{.codes = {"rel_l2"}, .count = 3, .finite_pairs = 3, .norm_ref = 1.0, .norm_cand = 1.0, .cosine = 1.0,
      .rel_error = std::copysign(kNaN, -1.0), .norm_ratio = 1.0, .healthy = true},
     {}, std::nullopt,
     "relative error nan > 0.296"},
    {{.codes = {}, .cosine = 1.0, .rel_error = 0.0, .norm_ratio = 1.0},
     {}, std::nullopt,
     "empty output"},
  };
  std::set<std::string_view> covered;
  for (const Case& c : cases) {
    EXPECT_EQ(guard_output_detail(c.j, c.t, c.axis), c.expected);
    covered.insert(c.j.codes.begin(), c.j.codes.end());
  }
  // Every code judge_output can give an output has a case (allclose, sqnr, ulp and topk are
  // compare's alone).
  for (std::string_view code : {"nonfinite", "all_zero", "norm_vanished", "constant", "few_values", "cosine",
                                "rel_l2", "norm_ratio", "decision_flip", "argmax"})
    EXPECT_TRUE(covered.count(code)) << code;
}

// Through the judge: the figures judge_output records behind few_values and decision_flip (the
// two values at the worst element and at the first crossing) are the ones the sentence quotes.
TEST(GuardOutputDetail, FromJudgeOutput) {
  auto detail = [](std::vector<double> r, std::vector<double> c, std::optional<uint32_t> axis = std::nullopt,
                   std::vector<uint64_t> shape = {}) {
    TensorInfo info;
    info.dtype = DType::f64;
    info.shape = shape.empty() ? std::vector<uint64_t>{r.size()} : shape;
    auto bytes = [](const std::vector<double>& v) {
      return std::span<const std::byte>(reinterpret_cast<const std::byte*>(v.data()), v.size() * sizeof(double));
    };
    auto j = judge_output(info, bytes(r), info, bytes(c), {}, axis);
    EXPECT_TRUE(j.ok());
    return j.ok() ? guard_output_detail(*j, {}, axis) : std::string();
  };
  // Expected: _metrics.judge() of commit 1d9b98d on the same arrays.
  EXPECT_EQ(detail({100.0, -0.0}, {100.0, 0.25}),
            "1 of 2 values beyond |diff| <= 0.01 + 0.01|ref| (worst -0 -> 0.25; a cosine cannot judge so few "
            "values)");
  EXPECT_EQ(detail({0.501, 0.1}, {0.499, 0.1}), "decision flip: 1 score(s) cross 0.5 (0.501 -> 0.499)");
  EXPECT_EQ(detail({0.2, 0.7, 0.9}, {0.2, 0.3, 0.1}, std::nullopt, {3, 1}),
            "cosine 0.784987 < 0.99; relative error 0.7727 > 0.296; norm ratio cand/ref 0.3232 outside [0.8, "
            "1.25]; 2 of 3 values beyond |diff| <= 0.01 + 0.01|ref| (worst 0.9 -> 0.1; a cosine cannot judge so "
            "few values); decision flip: 2 score(s) cross 0.5 (0.7 -> 0.3)");
  EXPECT_EQ(detail({10, 9.9, 0, 0, 10, 9.9, 9.9, 0, 10, 5, 5.00001, 1},
                   {9.9, 10, 0, 0, 10, 9.9, 9.9, 0, 10, 5.00001, 5, 1}, 1u, {4, 3}),
            "top-1 over axis 1 changes at 25.0% of 4 positions; 1 near-tie(s) whose top-1 swapped within 0.0001 "
            "of the row's largest value, not counted as flips");
  EXPECT_EQ(detail({1, 2, 3, 4, 5}, {-2.5, -2.5, -2.5, -2.5, -2.5}), "every value is -2.5 where the reference varies");
  EXPECT_EQ(detail({1e-6, 2e-6, 3e-6}, {1e-6, 2e-6, 3e-6}),
            "the reference's norm 3.74e-06 is below 0.0001, so a vanished output cannot be told apart");
  EXPECT_EQ(detail({}, {}, std::nullopt, {0, 3}), "empty output");
  EXPECT_EQ(detail({1, 2, 3}, {1, 2, 3}), "");
}

}  // namespace guard_detail_test
