// Tolerance policy: per-dtype defaults, rule resolution, and the judgement of a measured pair
// (docs/compare.md "Tolerance policy", "Reasons"). The policy and mapping files are read by the
// options layer (src/options/settings_files.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/compile.h>
#include <fmt/format.h>

#include "compare/internal.hpp"
#include "driftscope/filter.hpp"
#include "driftscope/judge.hpp"
#include "compare/report_access.hpp"

namespace driftscope {

namespace {

// Significand bits (including the implicit one): what "coarser" means for tolerances.
int precision_bits(DType t) noexcept {
  switch (t) {
    case DType::f64: return 53;
    case DType::f32: return 24;
    case DType::f16: return 11;
    case DType::bf16: return 8;
    case DType::f8e4m3fn: return 4;
    case DType::f8e5m2: return 3;
    default: return 64;  // integers and bool are exact
  }
}

// A criterion's limits are the same pair after pair (a million small pairs: a million times
// "atol=1e-05"): the text of the last few values is kept per thread, the same bytes either way.
std::string g(double v) {
  struct Memo {
    uint64_t bits = 0;
    bool set = false;
    std::string text;
  };
  thread_local Memo memo[4];
  thread_local unsigned next = 0;
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  for (const Memo& m : memo)
    if (m.set && m.bits == bits) return m.text;
  Memo& m = memo[next++ % 4];
  m = {bits, true, fmt::format(FMT_COMPILE("{:.6g}"), v)};
  return m.text;
}

}  // namespace

// ---- criteria -----------------------------------------------------------------------------------

namespace compare_detail {

const CriterionSpec kCriteria[8] = {
    {&Criteria::atol, "atol", "atol", 0, HUGE_VAL},
    {&Criteria::rtol, "rtol", "rtol", 0, HUGE_VAL},
    {&Criteria::max_mismatch_fraction, "max_mismatch_fraction", "max_mismatch_fraction", 0, 1},
    {&Criteria::min_cosine, "min_cosine", "min_cosine", -1, 1},
    {&Criteria::min_sqnr_db, "min_sqnr_db", "min_sqnr", -HUGE_VAL, HUGE_VAL},
    {&Criteria::max_rel_l2, "max_rel_l2", "max_rel_l2", 0, HUGE_VAL},
    {&Criteria::min_argmax_agreement, "min_argmax_agreement", "min_argmax", 0, 1},
    {&Criteria::min_topk_overlap, "min_topk_overlap", "min_topk", 0, 1},
};

std::string range_problem(std::string_view key, double v, double lo, double hi) {
  if (v >= lo && v <= hi) return {};
  return fmt::format("'{}' is {}, allowed {} .. {}", key, g(v), g(lo), g(hi));
}

}  // namespace compare_detail

bool Criteria::empty() const noexcept {
  return !atol && !rtol && !max_mismatch_fraction && !min_cosine && !min_sqnr_db && !max_rel_l2 &&
         !max_ulp && !min_argmax_agreement && !min_topk_overlap;
}

std::string Criteria::to_string() const {
  std::vector<std::string> parts;
  if (uses_allclose()) {
    std::string s = fmt::format("allclose(atol={}, rtol={})", g(atol.value_or(0)), g(rtol.value_or(0)));
    if (max_mismatch_fraction) s += fmt::format(" mismatch<={}", g(*max_mismatch_fraction));
    parts.push_back(s);
  }
  if (min_cosine) parts.push_back(fmt::format("cosine>={}", g(*min_cosine)));
  if (min_sqnr_db) parts.push_back(fmt::format("sqnr>={}dB", g(*min_sqnr_db)));
  if (max_rel_l2) parts.push_back(fmt::format("rel_l2<={}", g(*max_rel_l2)));
  if (max_ulp) parts.push_back(fmt::format("ulp<={}", *max_ulp));
  if (min_argmax_agreement) parts.push_back(fmt::format("argmax>={}", g(*min_argmax_agreement)));
  if (min_topk_overlap) parts.push_back(fmt::format("topk>={}", g(*min_topk_overlap)));
  if (parts.empty()) return "(health checks only)";
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? " " : "") + parts[i];
  return out;
}

Criteria default_criteria(DType t, bool quantized) {
  Criteria c;
  if (quantized) {
    c.min_sqnr_db = 20.0;
    return c;
  }
  // SQNR of one rounding to p significand bits is about 6.02p + 1.76 dB (uniform error model);
  // the defaults leave room for error accumulated over many ops (docs/compare.md table).
  switch (t) {
    case DType::f64: c.min_sqnr_db = 200.0; break;
    case DType::f32: c.min_sqnr_db = 80.0; break;
    case DType::f16: c.min_sqnr_db = 40.0; break;
    case DType::bf16: c.min_sqnr_db = 30.0; break;
    case DType::f8e4m3fn: c.min_sqnr_db = 15.0; break;
    case DType::f8e5m2: c.min_sqnr_db = 10.0; break;
    default:  // integers and bool: exact
      c.atol = 0.0;
      c.rtol = 0.0;
      break;
  }
  return c;
}

std::string_view verdict_name(Verdict v) noexcept {
  switch (v) {
    case Verdict::pass: return "pass";
    case Verdict::diverged: return "diverged";
    case Verdict::silent_failure: return "silent_failure";
    case Verdict::nothing_compared: return "nothing_compared";
  }
  return "unknown";
}

int verdict_exit_code(Verdict v) noexcept {
  switch (v) {
    case Verdict::pass: return 0;
    case Verdict::diverged: return 1;
    case Verdict::nothing_compared: return 2;
    case Verdict::silent_failure: return 3;
  }
  return 2;
}

std::string_view status_name(PairStatus s) noexcept {
  switch (s) {
    case PairStatus::pass: return "pass";
    case PairStatus::fail: return "fail";
    case PairStatus::silent_failure: return "silent_failure";
    case PairStatus::incomparable: return "incomparable";
    case PairStatus::skipped: return "skipped";
    case PairStatus::not_compared: return "not_compared";
  }
  return "unknown";
}

std::string_view origin_name(Origin o) noexcept {
  switch (o) {
    case Origin::none: return "none";
    case Origin::introduced: return "introduced";
    case Origin::inherited: return "inherited";
    case Origin::amplified: return "amplified";
  }
  return "unknown";
}

std::array<size_t, kPairStatuses> Report::counts() const noexcept {
  std::array<size_t, kPairStatuses> by_status{};
  for (const PairResult& p : pairs)
    if (static_cast<size_t>(p.status) < kPairStatuses) ++by_status[static_cast<size_t>(p.status)];
  return by_status;
}

size_t Report::count(PairStatus s) const noexcept { return counts()[static_cast<size_t>(s)]; }

}  // namespace driftscope

// ---- resolution and judgement -------------------------------------------------------------------

namespace driftscope::compare_detail {

DType coarser_dtype(DType a, DType b) noexcept {
  return precision_bits(b) < precision_bits(a) ? b : a;
}

double unit_roundoff(DType t) noexcept {
  int p = precision_bits(t);
  return p >= 64 ? 0.0 : std::ldexp(1.0, -p);
}

double default_r64_k(DType t) noexcept {
  // PyTorch's eager-vs-compiled fp64 oracle (torch._dynamo.utils.same): 2 for float32 and wider,
  // 3 for float16/bfloat16; fp8 gets 4 for its coarser rounding.
  switch (t) {
    case DType::f16:
    case DType::bf16: return 3.0;
    case DType::f8e4m3fn:
    case DType::f8e5m2: return 4.0;
    default: return 2.0;
  }
}

const PolicyRule* find_rule(const Policy& policy, const TensorDesc& ref,
                            bool (*wanted)(const PolicyRule&)) {
  for (const auto& r : policy.rules)
    if (wanted(r) && glob_match(r.match, ref.name()) && glob_match(r.op, ref.op_type())) return &r;
  return nullptr;
}

Judgement resolve_criteria(const Policy& policy, const TensorDesc& ref, DType effective_ref,
                           DType effective_cand, bool quantized) {
  Judgement j;
  for (size_t i = 0; i < policy.rules.size(); ++i) {
    const auto& r = policy.rules[i];
    if (!glob_match(r.match, ref.name()) || !glob_match(r.op, ref.op_type())) continue;
    if (!r.criteria) continue;  // a rule may only mark classes or skips
    j.rule = &r;
    j.criteria = *r.criteria;
    j.source = fmt::format("policy rule {} ({})", i + 1, r.op == "*" ? r.match : r.match + " op=" + r.op);
    return j;
  }
  if (policy.global) {
    j.criteria = *policy.global;
    j.source = "command line";
    return j;
  }
  DType t = coarser_dtype(effective_ref, effective_cand);
  j.criteria = default_criteria(t, quantized);
  // Not fmt::format: this runs for every pair (a million in the largest comparisons).
  j.source = quantized ? std::string("default (quantized)") : "default (" + std::string(dtype_name(t)) + ")";
  j.is_default = true;
  return j;
}

namespace {

void add(PairResult& p, PairStatus s, std::string_view code) {
  // silent_failure outranks fail: it names the more specific story.
  if (s == PairStatus::silent_failure || p.status == PairStatus::pass) p.status = s;
  // The code only: every sentence is a function of the pair, worded by reason_text() when a report
  // prints it (verdict_line.cpp), not a million times here for a million failing pairs.
  detail::ReportAccess::reasons(p).push_back({code, std::string()});
}

// fmt::format with a compiled format string, written through fmt's own buffer (bulk appends, where
// a std::string target takes the text a character at a time). The same text.
template <class S, class... Args>
std::string cformat(const S& format, const Args&... args) {
  fmt::memory_buffer b;
  fmt::format_to(fmt::appender(b), format, args...);
  return fmt::to_string(b);
}

}  // namespace

void judge(PairResult& p, bool nan_equal) {
  const Metrics& m = p.metrics;
  const Criteria& c = p.criteria();
  p.status = PairStatus::pass;
  detail::ReportAccess::reasons(p).clear();
  const bool ref_finite = m.nan_ref() == 0 && m.inf_ref() == 0;

  // 1. NaN positions, 2. Inf signs (the order numeric test suites use), then silent zeros.
  if (ref_finite && (m.nan_cand() > 0 || m.inf_cand() > 0)) {
    add(p, PairStatus::silent_failure, "nonfinite");
  } else {
    if (!m.nan_positions_match)
      add(p, PairStatus::fail, "nan_positions");
    else if (m.nan_both() > 0 && !nan_equal)
      add(p, PairStatus::fail, "nan");
    if (!m.inf_positions_match) add(p, PairStatus::fail, "inf_signs");
  }
  const bool ref_healthy = ref_finite && m.count > 0 && m.zero_ref < m.count && m.norm_ref > 0;
  if (ref_healthy) {
    if (m.zero_cand == m.count) {
      add(p, PairStatus::silent_failure, "all_zero");
    } else if (m.norm_cand < kVanishedNormRatio * m.norm_ref) {  // the status table (judge.hpp)
      add(p, PairStatus::silent_failure, "norm_vanished");
    } else if (m.count >= 2 && m.const_cand && !m.const_ref && m.nan_cand() == 0 && m.inf_cand() == 0) {
      add(p, PairStatus::silent_failure, "constant");
    }
  }

  // 3. the tolerance criteria; a metric that could not be computed is skipped with a note.
  auto need = [&](double v, std::string_view what) {
    if (std::isnan(v)) {
      // Worth saying only when nothing else already explains the pair.
      if (p.reasons().empty())
        detail::ReportAccess::notes(p).push_back(cformat(FMT_COMPILE("{} not evaluated: {}"), what,
                                    p.estimated            ? "light-mode estimate"
                                    : m.finite_pairs == 0 ? "no position is finite on both sides"
                                                          : "not computed"));
      return false;
    }
    return true;
  };
  if (c.uses_allclose() && !p.estimated) {
    double allowed = c.max_mismatch_fraction.value_or(0.0);
    if (m.mismatch_count > 0 && !(m.mismatch_fraction <= allowed)) add(p, PairStatus::fail, "allclose");
  } else if (c.uses_allclose()) {
    detail::ReportAccess::notes(p).push_back("allclose not evaluated: light-mode estimate");
  }
  if (c.min_cosine && need(m.cosine, "min_cosine") && !(m.cosine >= *c.min_cosine))
    add(p, PairStatus::fail, "cosine");
  if (c.min_sqnr_db && need(m.sqnr_db, "min_sqnr_db") && !(m.sqnr_db >= *c.min_sqnr_db))
    add(p, PairStatus::fail, "sqnr");
  if (c.max_rel_l2 && need(m.rel_l2, "max_rel_l2") && !(m.rel_l2 <= *c.max_rel_l2))
    add(p, PairStatus::fail, "rel_l2");
  if (c.max_ulp) {
    if (m.max_ulp < 0)
      detail::ReportAccess::notes(p).push_back("max_ulp not evaluated: the two sides do not share a float dtype");
    else if (m.max_ulp > *c.max_ulp)
      add(p, PairStatus::fail, "ulp");
  }
  if (c.min_argmax_agreement && need(m.argmax_agreement(), "min_argmax_agreement") &&
      !(m.argmax_agreement() >= *c.min_argmax_agreement))
    add(p, PairStatus::fail, "argmax");
  if (c.min_topk_overlap && need(m.topk_overlap(), "min_topk_overlap") &&
      !(m.topk_overlap() >= *c.min_topk_overlap))
    add(p, PairStatus::fail, "topk");
  if (p.r64 && !(p.r64_err_cand() <= p.r64_limit())) add(p, PairStatus::fail, "reference64");
}

}  // namespace driftscope::compare_detail
