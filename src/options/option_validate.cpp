// The one validator of compare options (issue 7): the CLI, the C ABI and Python hand their
// settings to CompareSettings::resolve(), and compare() checks options built in code with
// validate(), so every front end refuses the same values with the same message. It is the
// options layer's, beside the table whose ranges it applies (compare_options.hpp); the engine
// only calls it.
#include <cmath>
#include <cstdlib>
#include <limits>
#include <type_traits>

#include <fmt/format.h>

#include "compare/internal.hpp"
#include "driftscope/judge.hpp"

namespace driftscope {
namespace {

// The bounds are the option table's rows (compare_options.hpp), which --help and the docs show.
double upper(std::string_view option) { return find_compare_option(option)->hi; }
const int64_t kMaxThreads = static_cast<int64_t>(upper("threads"));
const int64_t kMaxAmplifiers = static_cast<int64_t>(upper("max_amplifiers"));
const int64_t kMaxTopK = static_cast<int64_t>(upper("top_k"));
const double kMaxR64 = upper("r64_floor");  // k and floor; the same bound as in policy files

Error option_error(std::string message) {
  return make_error(Errc::invalid_argument, "compare option " + message);
}

Result<void> check_integer(std::string_view key, int64_t v, int64_t lo, int64_t hi) {
  if (v >= lo && v <= hi) return {};
  return option_error(fmt::format("'{}' is {}, allowed {} .. {}", key, v, lo, hi));
}

Result<void> check_number(std::string_view key, double v, double lo, double hi) {
  std::string problem = compare_detail::range_problem(key, v, lo, hi);
  if (problem.empty()) return {};
  return option_error(std::move(problem));
}

// Criteria given as options are named by their option spelling ("min_sqnr"), in every front end.
Result<void> check_criteria(const Criteria& c, std::string_view prefix) {
  for (const auto& spec : compare_detail::kCriteria) {
    const auto& v = c.*(spec.member);
    if (!v) continue;
    std::string problem = compare_detail::range_problem(spec.option, *v, spec.lo, spec.hi);
    if (!problem.empty()) return make_error(Errc::invalid_argument, std::string(prefix) + problem);
  }
  if (c.max_ulp && *c.max_ulp < 0)
    return make_error(Errc::invalid_argument,
                      fmt::format("{}'max_ulp' is {}, allowed 0 .. {}", prefix, *c.max_ulp,
                                  std::numeric_limits<int64_t>::max()));
  return {};
}

// The engine's scalar settings, one check for the settings (before any file is read) and for
// options built in code.
Result<void> check_scalars(int64_t threads, int64_t max_amplifiers, double amplification,
                           std::optional<double> r64_floor) {
  DRIFTSCOPE_TRY(check_integer("threads", threads, 0, kMaxThreads));
  DRIFTSCOPE_TRY(check_integer("max_amplifiers", max_amplifiers, 0, kMaxAmplifiers));
  if (r64_floor) DRIFTSCOPE_TRY(check_number("r64_floor", *r64_floor, 0, kMaxR64));
  if (!(amplification > 1) || !std::isfinite(amplification))
    return option_error(
        fmt::format("'amplification_threshold' is {}, allowed: finite and > 1", amplification));
  return {};
}

}  // namespace

Result<void> validate(const CompareOptions& o) {
  if (o.policy.global) DRIFTSCOPE_TRY(check_criteria(*o.policy.global, "compare option "));
  for (size_t i = 0; i < o.policy.rules.size(); ++i) {
    const PolicyRule& r = o.policy.rules[i];
    std::string prefix = fmt::format("policy rule {}: ", i + 1);
    if (r.criteria) DRIFTSCOPE_TRY(check_criteria(*r.criteria, prefix));
    if (r.top_k < 1 || r.top_k > kMaxTopK)
      return make_error(Errc::invalid_argument,
                        fmt::format("{}'top_k' is {}, allowed 1 .. {}", prefix, r.top_k, kMaxTopK));
  }
  for (const auto& [dtype, k] : o.policy.r64_k)
    DRIFTSCOPE_TRY(check_number(fmt::format("r64_k.{}", dtype_name(dtype)), k, 0, kMaxR64));
  return check_scalars(o.threads, static_cast<int64_t>(std::min<size_t>(o.max_amplifiers, size_t{1} << 62)),
                       o.amplification_threshold, o.policy.r64_floor);
}

Result<CompareOptions> CompareSettings::resolve() const {
  CompareOptions o;
  Criteria c;
  c.atol = atol;
  c.rtol = rtol;
  c.max_mismatch_fraction = max_mismatch_fraction;
  c.min_cosine = min_cosine;
  c.min_sqnr_db = min_sqnr;
  c.max_rel_l2 = max_rel_l2;
  c.max_ulp = max_ulp;
  c.min_argmax_agreement = min_argmax;
  c.min_topk_overlap = min_topk;
  // Plain values first, files last: a typo in a number is named before any file is read.
  DRIFTSCOPE_TRY(check_criteria(c, "compare option "));
  if (c.max_mismatch_fraction && !c.uses_allclose())
    return option_error("'max_mismatch_fraction' needs 'atol' or 'rtol' (it loosens the allclose rule)");
  DRIFTSCOPE_TRY(check_integer("top_k", top_k, 1, kMaxTopK));
  DRIFTSCOPE_TRY(check_scalars(threads, max_amplifiers, amplification_threshold, r64_floor));
  if (pairs != "name" && pairs != "positional")
    return option_error(fmt::format("'pairs' is '{}', allowed name, positional", pairs));
  if (!policy.empty() && !policy_text.empty())
    return option_error("'policy' (a path) and 'policy_text' are both given; give one");
  std::vector<std::pair<DType, double>> r64;
  for (const auto& kv : r64_k) {
    size_t eq = kv.find('=');
    auto dt = eq == std::string::npos ? std::nullopt : parse_dtype(kv.substr(0, eq));
    char* end = nullptr;
    double k = eq == std::string::npos ? 0 : std::strtod(kv.c_str() + eq + 1, &end);
    if (!dt || !end || end == kv.c_str() + eq + 1 || *end != '\0' || !(k >= 0 && k <= kMaxR64))
      return option_error(fmt::format("'r64_k' entry '{}': expected DTYPE=K with K in 0 .. 1e+12, e.g. f16=3", kv));
    r64.emplace_back(*dt, k);
  }

  if (!policy.empty()) {
    auto p = Policy::load(policy);
    if (!p) return std::move(p).error();
    o.policy = std::move(*p);
  } else if (!policy_text.empty()) {
    auto p = Policy::parse(policy_text, "policy_text");
    if (!p) return std::move(p).error();
    o.policy = std::move(*p);
  }
  // Criteria given here replace the defaults (and a policy's [default]) as a whole.
  if (!c.empty()) o.policy.global = c;
  for (const auto& glob : classes) {
    PolicyRule r;
    r.match = glob;
    r.classes = true;
    r.top_k = static_cast<uint32_t>(top_k);
    o.policy.rules.push_back(r);
  }
  if (c.min_argmax_agreement || c.min_topk_overlap) {
    PolicyRule r;  // argmax criteria given here apply to every tensor with a class axis
    r.classes = true;
    r.top_k = static_cast<uint32_t>(top_k);
    o.policy.rules.push_back(r);
  }
  for (const auto& e : r64) o.policy.r64_k.push_back(e);
  if (r64_floor) o.policy.r64_floor = r64_floor;

  if (!map_file.empty()) {
    auto m = NameMap::load(map_file);
    if (!m) return std::move(m).error();
    o.names = std::move(*m);
  }
  for (const auto& [rules, side] : {std::pair{&map_a, &o.names.reference}, std::pair{&map_b, &o.names.candidate}}) {
    for (const auto& text : *rules) {
      auto r = RenameRule::parse(text);
      if (!r) {
        Error e = std::move(r).error();
        e.message = fmt::format("compare option '{}': {}", rules == &map_a ? "map_a" : "map_b", e.message);  // already printable
        return e;
      }
      side->push_back(std::move(*r));
    }
  }
  for (const auto& e : exact) o.names.exact.push_back(e);

  o.pairing = pairs == "positional" ? Pairing::positional : Pairing::by_name;
  o.filter = filter;
  o.reshape = reshape;
  o.nan_equal = nan_equal;
  o.stop_at_first = stop_at_first;
  o.allow_unpaired = allow_unpaired;
  o.allow_incomparable = allow_incomparable;
  o.threads = static_cast<unsigned>(threads);
  o.reference64 = reference64;
  o.amplification_threshold = amplification_threshold;
  o.max_amplifiers = static_cast<size_t>(max_amplifiers);
  o.details = details;
  DRIFTSCOPE_TRY(validate(o));
  return o;
}

}  // namespace driftscope

// ---- the guard criteria profile (judge.hpp; docs/metrics.md §9) ---------------------------------
// A block of its own: the guard's thresholds are judging options like compare's criteria, so
// they are refused here with the same wording ("guard option 'min_cosine' is 1.5, allowed -1 ..
// 1"), by `driftscope guard`, driftscope.guard() and _core.judge_output alike.

namespace driftscope {
namespace {

constexpr OptionSpec kGuardRows[] = {DRIFTSCOPE_GUARD_CRITERIA(DRIFTSCOPE_OPTION_SETTINGS_SPEC_)};

// A row of DRIFTSCOPE_GUARD_CRITERIA by its name; a name that is none fails to compile.
consteval const OptionSpec& guard_row(std::string_view name) {
  for (const OptionSpec& s : kGuardRows)
    if (s.name == name) return s;
  throw "not a row of DRIFTSCOPE_GUARD_CRITERIA";
}

}  // namespace

Result<void> validate(const GuardCriteria& c) {
  // The ranges are the rows' (judge.hpp), which the command's help and the docs show. min_norm
  // must also be finite, decision_threshold may also be inf (judge.hpp says why); each is said
  // in its own words, checked in this order as before the table.
  auto refuse = [](std::string problem) { return make_error(Errc::invalid_argument, "guard option " + problem); };
  auto given = [](const auto& v, double lo) -> double {
    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, double>) return v;
    else return v.value_or(lo);  // not given: nothing to check
  };
  constexpr const OptionSpec& n = guard_row("min_norm");
  if (!(c.min_norm >= n.lo) || !std::isfinite(c.min_norm))
    return refuse(fmt::format("'min_norm' is {}, allowed: finite and >= {}", c.min_norm, n.lo));
#define DS_GUARD_RANGE_(type, name, def, flag, keyword, role, lo, hi, ...)                          \
  if (std::string_view(#name) != "min_norm" && std::string_view(#name) != "decision_threshold")    \
    if (std::string problem = compare_detail::range_problem(#name, given(c.name, lo), lo, hi);      \
        !problem.empty())                                                                          \
      return refuse(std::move(problem));
  DRIFTSCOPE_GUARD_CRITERIA(DS_GUARD_RANGE_)
#undef DS_GUARD_RANGE_
  constexpr const OptionSpec& d = guard_row("decision_threshold");
  if (!(c.decision_threshold >= d.lo && c.decision_threshold <= d.hi) && c.decision_threshold != HUGE_VAL)
    return refuse(fmt::format("'decision_threshold' is {}, allowed {} .. {} (inf: no decision rule)",
                              c.decision_threshold, d.lo, d.hi));
  return {};
}

}  // namespace driftscope
