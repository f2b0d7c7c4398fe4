// Tolerance policy: per-dtype defaults, the TOML subset and JSON policy files, mapping files and
// rename rules, and their errors (docs/compare.md "Tolerance policy", "Policy file").
#include <gtest/gtest.h>

#include "compare/report_access.hpp"
#include "compare/internal.hpp"
#include "driftscope/compare.hpp"

namespace {

using namespace driftscope;
using config::parse_toml;

TEST(PolicyDefaults, PerDtypeTable) {
  EXPECT_EQ(default_criteria(DType::f64, false).min_sqnr_db, 200.0);
  EXPECT_EQ(default_criteria(DType::f32, false).min_sqnr_db, 80.0);
  EXPECT_EQ(default_criteria(DType::f16, false).min_sqnr_db, 40.0);
  EXPECT_EQ(default_criteria(DType::bf16, false).min_sqnr_db, 30.0);
  EXPECT_EQ(default_criteria(DType::f8e4m3fn, false).min_sqnr_db, 15.0);
  EXPECT_EQ(default_criteria(DType::f8e5m2, false).min_sqnr_db, 10.0);
  EXPECT_EQ(default_criteria(DType::f32, true).min_sqnr_db, 20.0);
  Criteria exact = default_criteria(DType::i32, false);
  EXPECT_TRUE(exact.uses_allclose());
  EXPECT_EQ(*exact.atol, 0.0);
  EXPECT_EQ(*exact.rtol, 0.0);
  EXPECT_FALSE(exact.min_sqnr_db.has_value());
  EXPECT_TRUE(default_criteria(DType::boolean, false).uses_allclose());
}

TEST(PolicyDefaults, CoarserDtypeDecides) {
  using compare_detail::coarser_dtype;
  EXPECT_EQ(coarser_dtype(DType::f32, DType::f16), DType::f16);
  EXPECT_EQ(coarser_dtype(DType::f16, DType::bf16), DType::bf16);
  EXPECT_EQ(coarser_dtype(DType::bf16, DType::f32), DType::bf16);
  EXPECT_EQ(coarser_dtype(DType::i64, DType::f32), DType::f32);
  EXPECT_EQ(coarser_dtype(DType::f64, DType::f64), DType::f64);
  Policy p;
  TensorDesc d;
  detail::ReportAccess::name(d) = "x";
  auto j = compare_detail::resolve_criteria(p, d, DType::f32, DType::f16, false);
  EXPECT_EQ(j.criteria.min_sqnr_db, 40.0);
  EXPECT_EQ(j.source, "default (f16)");
  EXPECT_TRUE(j.is_default);
}

TEST(PolicyDefaults, R64MultipliersFollowPyTorch) {
  EXPECT_EQ(compare_detail::default_r64_k(DType::f32), 2.0);
  EXPECT_EQ(compare_detail::default_r64_k(DType::f16), 3.0);
  EXPECT_EQ(compare_detail::default_r64_k(DType::bf16), 3.0);
  EXPECT_EQ(compare_detail::unit_roundoff(DType::f16), std::ldexp(1.0, -11));
  EXPECT_EQ(compare_detail::unit_roundoff(DType::i8), 0.0);
}

TEST(PolicyResolution, RulesThenCommandLineThenDefaults) {
  auto p = Policy::parse(R"(
[[rule]]
match = "*.softmax"
atol = 1e-3
rtol = 1e-2

[[rule]]
op = "LayerNorm"
min_cosine = 0.99

[[rule]]
match = "head.*"
classes = true
)");
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  TensorDesc soft;
  detail::ReportAccess::name(soft) = "enc.0.softmax";
  detail::ReportAccess::op_type(soft) = "Softmax";
  auto j = compare_detail::resolve_criteria(*p, soft, DType::f32, DType::f32, false);
  EXPECT_EQ(j.criteria.atol, 1e-3);
  EXPECT_EQ(j.criteria.rtol, 1e-2);
  EXPECT_FALSE(j.criteria.min_sqnr_db.has_value());
  EXPECT_EQ(j.source, "policy rule 1 (*.softmax)");

  TensorDesc ln;
  detail::ReportAccess::name(ln) = "enc.0.norm";
  detail::ReportAccess::op_type(ln) = "LayerNorm";
  j = compare_detail::resolve_criteria(*p, ln, DType::f32, DType::f32, false);
  EXPECT_EQ(j.criteria.min_cosine, 0.99);
  EXPECT_FALSE(j.criteria.uses_allclose());

  // A rule without criteria (classes only) does not hide the defaults.
  TensorDesc head;
  detail::ReportAccess::name(head) = "head.logits";
  j = compare_detail::resolve_criteria(*p, head, DType::f32, DType::f32, false);
  EXPECT_EQ(j.criteria.min_sqnr_db, 80.0);
  EXPECT_NE(compare_detail::find_rule(*p, head, [](const PolicyRule& r) { return r.classes; }), nullptr);

  // Command-line criteria replace the defaults as a whole.
  p->global = Criteria{};
  p->global->min_cosine = 0.999;
  TensorDesc other;
  detail::ReportAccess::name(other) = "enc.0.mlp";
  j = compare_detail::resolve_criteria(*p, other, DType::f32, DType::f16, false);
  EXPECT_EQ(j.criteria.min_cosine, 0.999);
  EXPECT_FALSE(j.criteria.min_sqnr_db.has_value());
  EXPECT_FALSE(j.criteria.uses_allclose());
  EXPECT_EQ(j.source, "command line");
  EXPECT_FALSE(j.is_default);
}

TEST(PolicyFile, JsonAndTomlMeanTheSame) {
  auto t = Policy::parse(R"(
version = 1
[default]
min_sqnr_db = 35.5
[[rule]]
match = "lm_head"
min_argmax_agreement = 0.99
top_k = 3
[reference64]
floor = 2.0
k = { f16 = 4, bf16 = 5.5 }
)");
  auto j = Policy::parse(R"({"version": 1, "default": {"min_sqnr_db": 35.5},
    "rules": [{"match": "lm_head", "min_argmax_agreement": 0.99, "top_k": 3}],
    "reference64": {"floor": 2.0, "k": {"f16": 4, "bf16": 5.5}}})");
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  ASSERT_TRUE(j.ok()) << j.error().to_string();
  for (const Policy* p : {&*t, &*j}) {
    ASSERT_TRUE(p->global.has_value());
    EXPECT_EQ(p->global->min_sqnr_db, 35.5);
    ASSERT_EQ(p->rules.size(), 1u);
    EXPECT_EQ(p->rules[0].match, "lm_head");
    EXPECT_TRUE(p->rules[0].classes);
    EXPECT_EQ(p->rules[0].top_k, 3u);
    EXPECT_EQ(p->rules[0].criteria->min_argmax_agreement, 0.99);
    EXPECT_EQ(p->r64_floor, 2.0);
    ASSERT_EQ(p->r64_k.size(), 2u);
  }
}

TEST(PolicyFile, SkipRules) {
  auto p = Policy::parse("[[rule]]\nmatch = \"*.dropout\"\nskip = true\n");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->rules[0].skip);
  EXPECT_FALSE(p->rules[0].criteria.has_value());
}

struct BadPolicy {
  const char* text;
  const char* needle;
};

class PolicyErrors : public ::testing::TestWithParam<BadPolicy> {};

TEST_P(PolicyErrors, NamesTheProblem) {
  auto p = Policy::parse(GetParam().text, "p.toml");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, Errc::bad_policy);
  EXPECT_NE(p.error().message.find(GetParam().needle), std::string::npos) << p.error().message;
  EXPECT_EQ(p.error().message.find('\n'), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    All, PolicyErrors,
    ::testing::Values(BadPolicy{"[[rule]]\nmatch = \"x\"\natoll = 1\n", "unknown key 'atoll' in rule 1"},
                      BadPolicy{"[[rule]]\natol = 1\n", "needs 'match'"},
                      BadPolicy{"[default]\nmin_cosine = 2\n", "'min_cosine' is 2, allowed -1 .. 1"},
                      BadPolicy{"[default]\natol = -1\n", "'atol' is -1"},
                      BadPolicy{"[default]\natol = \"1e-3\"\n", "'atol' must be a number"},
                      BadPolicy{"[default]\nmax_ulp = 1.5\n", "max_ulp"},
                      BadPolicy{"\n\nmin_cosine = 0.9 junk\n", "p.toml:3:"},
                      BadPolicy{"x = \"\"\"multi\"\"\"\n", "multi-line strings are not supported"},
                      BadPolicy{"when = 2024-01-01\n", "dates and times are not supported"},
                      BadPolicy{"bogus = 1\n", "unknown key 'bogus'"},
                      BadPolicy{"version = 2\n", "'version' must be 1"},
                      BadPolicy{"[reference64]\nk = { f99 = 1 }\n", "unknown dtype 'f99'"},
                      BadPolicy{"[[rule]]\nmatch = \"a\"\ntop_k = 0\n", "top_k"},
                      BadPolicy{"{\"rules\": [1,}", "not valid JSON"},
                      BadPolicy{"[default\nx=1\n", "expected ']'"},
                      BadPolicy{"a = 1\na = 2\n", "p.toml:2:5: Error while parsing key-value pair: cannot redefine existing integer 'a'"}));

TEST(TomlSubset, Values) {
  auto j = parse_toml(R"(# comment
title = "a \"q\" \u00e9\tb"   # trailing comment
lit = 'C:\path\n'
n = 1_000
h = 0xff
o = 0o17
b = 0b101
neg = -42
f = -1.5e-3
inf1 = +inf
t = true
arr = [1, 2,
  3, # comment inside
]
nested = [[1, 2], ["a"]]
inline = { a = 1, b.c = "x" }
"quoted key" = 1
dotted.key.path = 7
[[rule]]
x = 1
[[rule]]
x = 2
[rule.sub]
y = 3
)",
                    "t");
  ASSERT_TRUE(j.ok()) << j.error().to_string();
  const auto& v = *j;
  EXPECT_EQ(v["title"], "a \"q\" \xC3\xA9\tb");
  EXPECT_EQ(v["lit"], "C:\\path\\n");
  EXPECT_EQ(v["n"], 1000);
  EXPECT_EQ(v["h"], 255);
  EXPECT_EQ(v["o"], 15);
  EXPECT_EQ(v["b"], 5);
  EXPECT_EQ(v["neg"], -42);
  EXPECT_DOUBLE_EQ(v["f"].get<double>(), -1.5e-3);
  EXPECT_TRUE(std::isinf(v["inf1"].get<double>()));
  EXPECT_EQ(v["t"], true);
  EXPECT_EQ(v["arr"].size(), 3u);
  EXPECT_EQ(v["nested"][1][0], "a");
  EXPECT_EQ(v["inline"]["b"]["c"], "x");
  EXPECT_EQ(v["quoted key"], 1);
  EXPECT_EQ(v["dotted"]["key"]["path"], 7);
  ASSERT_EQ(v["rule"].size(), 2u);
  EXPECT_EQ(v["rule"][1]["x"], 2);
  EXPECT_EQ(v["rule"][1]["sub"]["y"], 3);
}

TEST(TomlSubset, Errors) {
  for (const char* bad : {"x = ", "x = [1, 2", "x = \"open", "x = 1__0", "x = 99999999999999999999",
                          "= 1", "x = 'a' 'b'", "x = {a = 1", "x = \"\\q\"", "x = \"\\uD800\""}) {
    auto j = parse_toml(bad, "t");
    EXPECT_FALSE(j.ok()) << bad;
    if (!j.ok()) EXPECT_EQ(j.error().code, Errc::bad_policy) << bad;
  }
  // Deep nesting is refused, not recursed into without bound.
  std::string deep = "x = " + std::string(100, '[') + std::string(100, ']');
  EXPECT_FALSE(parse_toml(deep, "t").ok());
}

TEST(RenameRules, ParseAndErrors) {
  auto r = RenameRule::parse("^model\\.(.*)$=>$1");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->pattern, "^model\\.(.*)$");
  EXPECT_EQ(r->replacement, "$1");
  auto e = RenameRule::parse("no arrow");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code, Errc::invalid_argument);
  EXPECT_NE(e.error().message.find("=>"), std::string::npos);
  auto bad = RenameRule::parse("([a-=>x");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("invalid regex"), std::string::npos);
  EXPECT_FALSE(RenameRule::parse("=>x").ok());
}

TEST(NameMapFile, TomlAndJson) {
  auto t = NameMap::parse(R"(
a = ['^model\.(.*)$=>$1']
b = ['^/(.*)/output_0$=>$1', '/=>.']
[exact]
"encoder.norm" = "LayerNorm_17"
)");
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  EXPECT_EQ(t->reference.size(), 1u);
  EXPECT_EQ(t->candidate.size(), 2u);
  ASSERT_EQ(t->exact.size(), 1u);
  EXPECT_EQ(t->exact[0].first, "encoder.norm");
  EXPECT_EQ(t->exact[0].second, "LayerNorm_17");
  auto j = NameMap::parse(R"({"b": ["x=>y"], "exact": {"a": "b"}})");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->candidate.size(), 1u);
  auto bad = NameMap::parse("a = ['nope']\n", "m.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Errc::bad_policy);
  EXPECT_NE(bad.error().message.find("m.toml"), std::string::npos);
}

TEST(CriteriaText, Readable) {
  Criteria c;
  EXPECT_EQ(c.to_string(), "(health checks only)");
  EXPECT_TRUE(c.empty());
  c.atol = 1e-5;
  c.rtol = 1e-3;
  c.min_cosine = 0.999;
  EXPECT_EQ(c.to_string(), "allclose(atol=1e-05, rtol=0.001) cosine>=0.999");
  EXPECT_FALSE(c.empty());
}

}  // namespace

namespace {

using namespace driftscope;

std::string repeat(std::string_view s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

// Issue 7 bug 3: the depth limit was reset inside inline tables, so nesting them recursed without
// bound. Every way of nesting values, in TOML and in JSON, policy and mapping files alike, is a
// one-line bad_policy error naming the place, never a stack overflow (also under ASan).
TEST(ConfigDepth, DeepNestingIsRefusedEverywhere) {
  const size_t n = 200000;
  const std::vector<std::string> texts = {
      "x = " + repeat("{a=", n) + "1" + repeat("}", n) + "\n",
      "x = " + repeat("{a=[", n) + "1" + repeat("]}", n) + "\n",
      "x = " + repeat("[{a=", n) + "1" + repeat("}]", n) + "\n",
      "x = " + repeat("[", n) + repeat("]", n) + "\n",
      std::string(1u << 20, '['),  // a table header "[[" whose key starts with '['
      "x = " + std::string(1u << 20, '['),
      "[rule]\nx = " + repeat("{ b = ", n) + "\n",
      "x = " + repeat("{a.b.c=", n) + "1" + repeat("}", n) + "\n",
      repeat("a.", n) + "a = 1\n",
      "[" + repeat("a.", n) + "a]\n",
      "{\"a\": " + repeat("[", n) + repeat("]", n) + "}",
      "{\"a\": " + repeat("{\"b\":", n) + "1" + repeat("}", n) + "}",
  };
  for (const auto& text : texts) {
    auto p = Policy::parse(text, "deep.toml");
    ASSERT_FALSE(p.ok()) << text.substr(0, 40);
    EXPECT_EQ(p.error().code, Errc::bad_policy) << p.error().to_string();
    EXPECT_NE(p.error().message.find("deep.toml:"), std::string::npos) << p.error().message;
    const std::string& msg = p.error().message;
    EXPECT_TRUE(msg.find("nested more than") != std::string::npos ||
                msg.find("dotted key has more than") != std::string::npos ||
                msg.find("in the table header") != std::string::npos)
        << msg;
    EXPECT_EQ(p.error().message.find('\n'), std::string::npos);
    auto m = NameMap::parse(text, "deep.toml");
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.error().code, Errc::bad_policy) << m.error().to_string();
  }
}

// Found by fuzz_policy_parse: toml++ 3.3 asserts (under NDEBUG: assumes) that a table header's key
// starts with a key character; "[!x]" aborted the ASan build. Refused before toml++ sees it.
TEST(ConfigSyntax, TableHeaderWithoutAKey) {
  for (const char* text : {"[!x]\n", "[[!x]]\n", "a = 1\n  [ /=>.]\n", "[\x01]\n", "[[ =]]\n"}) {
    auto p = Policy::parse(text, "h.toml");
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_EQ(p.error().code, Errc::bad_policy);
    EXPECT_NE(p.error().message.find("expected a key (bare, \"quoted\" or 'literal') in the table header"),
              std::string::npos)
        << p.error().message;
  }
  auto ok = compare_detail::parse_config("x = [\n[1],\n ]\n[ \"q\" ]\n['l'.b]\n", "t");  // array lines are no headers
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
}

// Found by the fuzz targets under UBSan: toml++ 3.3's whitespace classifier reached
// __builtin_unreachable for most non-ASCII code points, and a value starting with a terminator
// broke an assumption. Both must be plain values or plain errors (run under the asan preset).
TEST(ConfigSyntax, NonAsciiAndTerminatorsAreNoUndefinedBehaviour) {
  auto j = compare_detail::parse_config("[exact]\n\"caf\xC3\xA9\" = \"\xEF\xAD\xBF\"\n\"\xE3\x80\x81\" = 'x'\n", "t");
  ASSERT_TRUE(j.ok()) << j.error().to_string();
  EXPECT_EQ((*j)["exact"]["caf\xC3\xA9"], "\xEF\xAD\xBF");
  for (const char* bad : {"a\xEF\xAD\xBF['^^{\"a\":{mode", "x = [1, 2.5, -inf,}\n", "x = {a = }\n", "x = [,]\n",
                          "\xC3\xA9 = 1\n"}) {
    auto e = compare_detail::parse_config(bad, "t");
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.error().code, Errc::bad_policy);
  }
}

// Found by fuzz_policy_parse: a JSON number beyond double's range threw out_of_range, which only
// parse_error was caught for: std::terminate.
TEST(ConfigSyntax, JsonNumberOutOfRange) {
  for (const char* text : {"{\"default\": {\"atol\": 1e555555555}}", "{\"a\": [-1e400]}"}) {
    auto p = Policy::parse(text, "p.json");
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_EQ(p.error().code, Errc::bad_policy);
    EXPECT_NE(p.error().message.find("p.json: not valid JSON: number overflow parsing"), std::string::npos)
        << p.error().message;
    EXPECT_FALSE(NameMap::parse(text, "m.json").ok());
  }
}

// Found by fuzz_name_map_parse: a key with an escaped newline ("a\nb") reached the one-line
// error message raw. Quoted file strings are shown with control characters as \xNN.
TEST(ConfigSyntax, MessagesStayOneLine) {
  auto m = NameMap::parse("\"enc\\nx\\u001b[31m\" = 1\n", "m.toml");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().message, "m.toml: unknown key 'enc\\x0ax\\x1b[31m' (expected a, b, exact)");
  auto p = Policy::parse("[[rule]]\nmatch = 'a'\n\"\\r\" = 1\n", "p.toml");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message, "p.toml: unknown key '\\x0d' in rule 1");
  auto r = RenameRule::parse("a\x1b]0;x\x07");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "rename rule 'a\\x1b]0;x\\x07' has no '=>' (expected REGEX=>REPLACEMENT)");
}

TEST(ConfigDepth, ModerateNestingStillParses) {
  // Eight levels of arrays and inline tables is far inside the limit: a value, not an error.
  auto j = compare_detail::parse_config("x = " + repeat("{a=[", 8) + "1" + repeat("]}", 8) + "\n", "t");
  ASSERT_TRUE(j.ok()) << j.error().to_string();
  auto p = Policy::parse("[[rule]]\nmatch = \"a\"\n" + std::string("x = ") + repeat("{a=", 8) + "1" +
                             repeat("}", 8) + "\n",
                         "p.toml");
  ASSERT_FALSE(p.ok());  // parsed, then refused by the validator for the unknown key
  EXPECT_NE(p.error().message.find("unknown key 'x' in rule 1"), std::string::npos) << p.error().message;
}

}  // namespace

namespace {

// Sibling of bug 3: std::regex compiles recursively, so a rename rule nested 100,000 groups deep
// (a mapping file, --map-a) overflowed the stack. Nesting and length are bounded before compiling.
TEST(RenameRules, DeepOrHugePatternsAreRefused) {
  using driftscope::RenameRule;
  const size_t n = 100000;
  auto deep = RenameRule::parse(std::string(2000, '(') + "a" + std::string(2000, ')') + "=>x");
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.error().code, driftscope::Errc::invalid_argument);
  EXPECT_EQ(deep.error().message, "rename rule regex nests groups more than 32 deep (at byte 32)");
  auto hidden = RenameRule::parse("[]" + std::string(100, '(') + "=>x");  // not inside a class
  ASSERT_FALSE(hidden.ok());
  EXPECT_NE(hidden.error().message.find("more than 32 deep"), std::string::npos);
  auto huge = RenameRule::parse(std::string(5000, 'a') + "=>x");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().message, "rename rule regex is 5000 bytes, allowed 1 .. 4096");
  EXPECT_TRUE(RenameRule::parse(std::string(32, '(') + "a" + std::string(32, ')') + "=>x").ok());
  EXPECT_TRUE(RenameRule::parse("[(]+(a)=>x").ok());  // a '(' inside a class is no group
  // libstdc++ reads \N and {N,M} into a long without an overflow test (fuzz_name_map_parse's
  // crash-backref-overflow): numbers of more than 9 digits are refused before compiling.
  for (const std::string pattern : {"edel\\8" + std::string(50, '3'), "a{" + std::string(20, '9') + "}",
                                    "a{1," + std::string(20, '9') + "}", "\\0" + std::string(30, '7'),
                                    "[\\1" + std::string(30, '2') + "]"}) {
    auto big = RenameRule::parse(pattern + "=>x");
    ASSERT_FALSE(big.ok()) << pattern;
    EXPECT_EQ(big.error().code, driftscope::Errc::invalid_argument);
    EXPECT_NE(big.error().message.find("a number of more than 9 digits"), std::string::npos) << big.error().message;
  }
  EXPECT_TRUE(RenameRule::parse("layer(\\d+)\\.w{1,3}=>l\\1").ok());
  EXPECT_TRUE(RenameRule::parse("x12345678901234=>y").ok());  // a long literal number is no count
  auto map = driftscope::NameMap::parse("a = ['" + std::string(n, '(') + "=>x']\n", "m.toml");
  ASSERT_FALSE(map.ok());
  EXPECT_EQ(map.error().message, "m.toml: rename rule regex is 100000 bytes, allowed 1 .. 4096");
  map = driftscope::NameMap::parse("a = ['" + std::string(1000, '(') + "=>x']\n", "m.toml");
  ASSERT_FALSE(map.ok());
  EXPECT_EQ(map.error().code, driftscope::Errc::bad_policy);
}

}  // namespace
