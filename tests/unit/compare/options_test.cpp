// The one validator of compare options (issue 7): CompareSettings::resolve() for the front ends
// and validate() for options built in code refuse the same values with the same message.
#include <cmath>
#include <functional>
#include <limits>

#include <gtest/gtest.h>

#include "driftscope/compare.hpp"

namespace {

using namespace driftscope;

struct BadSetting {
  const char* what;
  std::function<void(CompareSettings&)> set;
  const char* message;
};

TEST(CompareSettings, OutOfRangeValuesAreNamed) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<BadSetting> cases = {
      {"atol<0", [](auto& s) { s.atol = -1; }, "compare option 'atol' is -1, allowed 0 .. inf"},
      {"atol nan", [&](auto& s) { s.atol = nan; }, "compare option 'atol' is nan, allowed 0 .. inf"},
      {"rtol nan", [&](auto& s) { s.rtol = nan; }, "compare option 'rtol' is nan, allowed 0 .. inf"},
      {"cosine", [](auto& s) { s.min_cosine = 2; }, "compare option 'min_cosine' is 2, allowed -1 .. 1"},
      {"sqnr nan", [&](auto& s) { s.min_sqnr = nan; }, "compare option 'min_sqnr' is nan, allowed -inf .. inf"},
      {"argmax", [](auto& s) { s.min_argmax = 1.5; }, "compare option 'min_argmax' is 1.5, allowed 0 .. 1"},
      {"mismatch", [](auto& s) { s.max_mismatch_fraction = 0.1; },
       "compare option 'max_mismatch_fraction' needs 'atol' or 'rtol' (it loosens the allclose rule)"},
      {"ulp", [](auto& s) { s.max_ulp = -1; }, "compare option 'max_ulp' is -1, allowed 0 .. 9223372036854775807"},
      {"threads<0", [](auto& s) { s.threads = -1; }, "compare option 'threads' is -1, allowed 0 .. 4096"},
      {"threads huge", [](auto& s) { s.threads = int64_t{1} << 40; },
       "compare option 'threads' is 1099511627776, allowed 0 .. 4096"},
      {"top_k 0", [](auto& s) { s.top_k = 0; }, "compare option 'top_k' is 0, allowed 1 .. 1000"},
      {"top_k<0", [](auto& s) { s.top_k = -3; }, "compare option 'top_k' is -3, allowed 1 .. 1000"},
      {"amplifiers", [](auto& s) { s.max_amplifiers = -1; }, "compare option 'max_amplifiers' is -1, allowed 0 .. 1000"},
      {"amplification", [&](auto& s) { s.amplification_threshold = nan; },
       "compare option 'amplification_threshold' is nan, allowed: finite and > 1"},
      {"floor", [](auto& s) { s.r64_floor = -1; }, "compare option 'r64_floor' is -1, allowed 0 .. 1e+12"},
      {"r64_k", [](auto& s) { s.r64_k = {"f16=-2"}; },
       "compare option 'r64_k' entry 'f16=-2': expected DTYPE=K with K in 0 .. 1e+12, e.g. f16=3"},
      {"r64_k nan", [](auto& s) { s.r64_k = {"f16=nan"}; },
       "compare option 'r64_k' entry 'f16=nan': expected DTYPE=K with K in 0 .. 1e+12, e.g. f16=3"},
      {"pairs", [](auto& s) { s.pairs = "sideways"; },
       "compare option 'pairs' is 'sideways', allowed name, positional"},
      {"both policies", [](auto& s) { s.policy = "p.toml"; s.policy_text = "version = 1"; },
       "compare option 'policy' (a path) and 'policy_text' are both given; give one"},
  };
  for (const auto& c : cases) {
    CompareSettings s;
    c.set(s);
    auto o = s.resolve();
    ASSERT_FALSE(o.ok()) << c.what;
    EXPECT_EQ(o.error().code, Errc::invalid_argument) << c.what;
    EXPECT_EQ(o.error().message, c.message) << c.what;
  }
}

TEST(CompareSettings, ValuesBecomeOptions) {
  CompareSettings s;
  s.min_cosine = 0.99;
  s.classes = {"*.logits"};
  s.top_k = 3;
  s.r64_k = {"f16=4"};
  s.threads = 2;
  s.pairs = "positional";
  s.map_b = {"^/(.*)$=>$1"};
  s.exact = {{"a", "b"}};
  s.policy_text = "[[rule]]\nmatch = \"x\"\natol = 1\n";
  auto o = s.resolve();
  ASSERT_TRUE(o.ok()) << o.error().to_string();
  ASSERT_TRUE(o->policy.global.has_value());
  EXPECT_EQ(o->policy.global->min_cosine, 0.99);
  ASSERT_EQ(o->policy.rules.size(), 2u);  // the file's rule first, then --classes
  EXPECT_EQ(o->policy.rules[1].top_k, 3u);
  ASSERT_EQ(o->policy.r64_k.size(), 1u);
  EXPECT_EQ(o->policy.r64_k[0].second, 4.0);
  EXPECT_EQ(o->threads, 2u);
  EXPECT_EQ(o->pairing, Pairing::positional);
  EXPECT_EQ(o->names.candidate.size(), 1u);
  EXPECT_EQ(o->names.exact.size(), 1u);

  CompareSettings bad_rule;
  bad_rule.map_a = {"no arrow"};
  auto e = bad_rule.resolve();
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code, Errc::invalid_argument);
  EXPECT_EQ(e.error().message.rfind("compare option 'map_a': rename rule 'no arrow'", 0), 0u) << e.error().message;

  CompareSettings bad_policy;
  bad_policy.policy_text = "x = {a = {b = 1}";
  auto p = bad_policy.resolve();
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, Errc::bad_policy);
  EXPECT_EQ(p.error().message.rfind("policy_text:1:", 0), 0u) << p.error().message;
}

TEST(CompareOptionsValidate, OptionsBuiltInCodeMeetTheSameRanges) {
  CompareOptions o;
  EXPECT_TRUE(validate(o).ok());
  o.policy.global = Criteria{};
  o.policy.global->atol = std::numeric_limits<double>::quiet_NaN();
  auto e = validate(o);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message, "compare option 'atol' is nan, allowed 0 .. inf");

  CompareOptions r;
  PolicyRule rule;
  rule.criteria = Criteria{};
  rule.criteria->min_topk_overlap = -0.5;
  r.policy.rules.push_back(rule);
  e = validate(r);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message, "policy rule 1: 'min_topk' is -0.5, allowed 0 .. 1");
  r.policy.rules[0].criteria.reset();
  r.policy.rules[0].top_k = 0;
  EXPECT_EQ(validate(r).error().message, "policy rule 1: 'top_k' is 0, allowed 1 .. 1000");

  CompareOptions t;
  t.threads = 1u << 20;
  EXPECT_EQ(validate(t).error().message, "compare option 'threads' is 1048576, allowed 0 .. 4096");
  t.threads = 0;
  t.policy.r64_k = {{DType::f16, -1.0}};
  EXPECT_EQ(validate(t).error().message, "compare option 'r64_k.f16' is -1, allowed 0 .. 1e+12");
}

}  // namespace
