// One judge (judge.hpp; docs/metrics.md §9): the status table shared by compare, check and
// guard, and the guard profile's judgement of one output. The metrics a cosine, a norm or a
// relative error needs come from compare_pair, the float64 pass compare measures every pair
// with; the rules only the guard applies (few values, decisions, argmax over a class axis,
// norms over each side's own finite values) read the decoded values once more.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "driftscope/decode.hpp"
#include "driftscope/judge.hpp"
#include "numerics/pair_metrics.hpp"

namespace driftscope {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Checked in this order; an output's status is the worst its codes map to.
constexpr std::array<StatusRule, 14> kStatusTable{{
    {"nonfinite", true, OutputStatus::numerical_instability},
    {"all_zero", true, OutputStatus::silent_zero_vector},
    {"norm_vanished", true, OutputStatus::silent_zero_vector},
    {"constant", true, OutputStatus::constant_output},
    {"allclose", false, OutputStatus::precision_degradation},
    {"few_values", false, OutputStatus::precision_degradation},
    {"cosine", false, OutputStatus::precision_degradation},
    {"sqnr", false, OutputStatus::precision_degradation},
    {"rel_l2", false, OutputStatus::precision_degradation},
    {"norm_ratio", false, OutputStatus::precision_degradation},
    {"ulp", false, OutputStatus::precision_degradation},
    {"decision_flip", false, OutputStatus::argmax_flip},
    {"argmax", false, OutputStatus::argmax_flip},
    {"topk", false, OutputStatus::argmax_flip},
}};

// The L2 norm of the finite values of `v`, scaled by the largest so that values near the float64
// maximum or among subnormals neither overflow nor underflow (as np.linalg.norm, and as
// compare_pair's norms: docs/metrics.md §3 "Range").
double finite_norm(const std::vector<double>& v) {
  double scale = 0;
  for (double x : v)
    if (std::isfinite(x)) scale = std::max(scale, std::fabs(x));
  if (scale == 0) return 0;
  double s = 0;
  for (double x : v)
    if (std::isfinite(x)) {
      double y = x / scale;
      s += y * y;
    }
  return scale * std::sqrt(s);
}

Result<std::vector<double>> decode_all(const TensorInfo& info, std::span<const std::byte> payload) {
  std::vector<double> out(info.numel());
  DRIFTSCOPE_TRY(decode(info, payload, 0, out));
  return out;
}

// Share of positions (every index of the axes but `axis`) whose top-1 over `axis` differs beyond
// a near-tie: the reference's values at the two top-1s within flip_rtol x the position's largest
// |finite value| is rounding, not a changed answer. Non-finite values never win a top-1.
void argmax_flips(const std::vector<double>& r, const std::vector<double>& c,
                  const std::vector<uint64_t>& shape, uint32_t axis, double flip_rtol,
                  OutputJudgement& j) {
  uint64_t k = shape[axis], inner = 1, outer = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d < axis) outer *= shape[d];
    if (d > axis) inner *= shape[d];
  }
  const double lowest = -std::numeric_limits<double>::infinity();
  auto val = [&](const std::vector<double>& v, uint64_t at) { return std::isfinite(v[at]) ? v[at] : lowest; };
  uint64_t flips = 0;
  for (uint64_t o = 0; o < outer; ++o) {
    for (uint64_t in = 0; in < inner; ++in) {
      uint64_t base = o * k * inner + in;
      uint64_t i = 0, jj = 0;
      double scale = 0;
      for (uint64_t q = 0; q < k; ++q) {
        uint64_t at = base + q * inner;
        if (val(r, at) > val(r, base + i * inner)) i = q;
        if (val(c, at) > val(c, base + jj * inner)) jj = q;
        if (std::isfinite(r[at])) scale = std::max(scale, std::fabs(r[at]));
      }
      if (i == jj) continue;
      double margin = val(r, base + i * inner) - val(r, base + jj * inner);
      if (margin <= flip_rtol * scale) ++j.ties;  // NaN (no finite value) is never a tie
      else ++flips;
    }
  }
  j.positions = outer * inner;
  j.argmax_flip = j.positions ? static_cast<double>(flips) / static_cast<double>(j.positions) : kNaN;
}

}  // namespace

std::string_view output_status_name(OutputStatus s) noexcept {
  switch (s) {
    case OutputStatus::pass: return "PASS";
    case OutputStatus::argmax_flip: return "ARGMAX_FLIP";
    case OutputStatus::precision_degradation: return "PRECISION_DEGRADATION";
    case OutputStatus::constant_output: return "CONSTANT_OUTPUT";
    case OutputStatus::silent_zero_vector: return "SILENT_ZERO_VECTOR";
    case OutputStatus::numerical_instability: return "NUMERICAL_INSTABILITY";
  }
  return "PASS";
}

std::span<const StatusRule> status_table() noexcept { return kStatusTable; }

namespace {
constexpr OptionSpec kGuardCriteriaSpecs[] = {DRIFTSCOPE_GUARD_CRITERIA(DRIFTSCOPE_OPTION_SETTINGS_SPEC_)};
}  // namespace

std::span<const OptionSpec> guard_criteria_specs() noexcept { return kGuardCriteriaSpecs; }

double GuardCriteria::rel_error_limit() const noexcept {
  if (max_rel_error) return *max_rel_error;
  double r = max_norm_ratio, c = min_cosine;
  return std::sqrt(std::max(r * r - 2.0 * r * c + 1.0, 0.0));
}

Result<OutputJudgement> judge_output(const TensorInfo& ref, std::span<const std::byte> ref_payload,
                                     const TensorInfo& cand, std::span<const std::byte> cand_payload,
                                     const GuardCriteria& t, std::optional<uint32_t> class_axis) {
  DRIFTSCOPE_TRY(validate(t));
  if (ref.shape != cand.shape)
    return make_error(Errc::invalid_argument, "judge_output: the candidate's shape differs from the reference's");
  if (class_axis && *class_axis >= ref.shape.size())
    return make_error(Errc::invalid_argument,
                      fmt::format("judge_output: class axis {} of a rank-{} output", *class_axis, ref.shape.size()));
  OutputJudgement j;
  j.count = ref.numel();
  if (j.count == 0) return j;  // nothing to disagree about

  numerics::PairOptions po;
  po.threads = 1;  // one output at a time; the guard runs backends in parallel already
  auto pm = numerics::compare_pair(ref, ref_payload, cand, cand_payload, po);
  if (!pm) return std::move(pm).error();
  auto rv = decode_all(ref, ref_payload);
  if (!rv) return std::move(rv).error();
  auto cv = decode_all(cand, cand_payload);
  if (!cv) return std::move(cv).error();
  const std::vector<double>& r = *rv;
  const std::vector<double>& c = *cv;
  const uint64_t n = j.count;

  // Over F, the positions finite on both sides: compare_pair's float64 pass (docs/metrics.md §3).
  const uint64_t m = j.finite_pairs = pm->finite_pairs;
  if (m > 0) {
    j.cosine = pm->cosine;
    j.max_diff = pm->max_abs_diff;
  }
  j.norm_ref = finite_norm(r);
  j.norm_cand = finite_norm(c);
  j.healthy = j.norm_ref >= t.min_norm;
  if (j.healthy && pm->norm_ref > 0) j.rel_error = pm->rel_l2;
  if (j.healthy) j.norm_ratio = j.norm_cand / j.norm_ref;

  // Per element: non-finite values where the reference is finite, the constant rule, few
  // values, and scores crossing the decision threshold.
  bool cand_finite = true, cand_one_value = true, ref_any_finite = false, scores = m > 0;
  double ref_lo = HUGE_VAL, ref_hi = -HUGE_VAL, worst_diff = -1;
  const bool few = n <= kFewValues;
  const bool score_shape = few || (!ref.shape.empty() && ref.shape.back() == 1);
  for (uint64_t i = 0; i < n; ++i) {
    const bool rf = std::isfinite(r[i]), cf = std::isfinite(c[i]);
    if (rf && std::isnan(c[i])) ++j.nan;
    if (rf && std::isinf(c[i])) ++j.inf;
    cand_finite &= cf;
    cand_one_value &= c[i] == c[0];
    if (rf) {
      ref_any_finite = true;
      ref_lo = std::min(ref_lo, r[i]);
      ref_hi = std::max(ref_hi, r[i]);
    }
    if (!(rf && cf)) continue;
    const double d = std::fabs(r[i] - c[i]);
    if (few && d > t.small_atol + t.small_rtol * std::fabs(r[i])) ++j.beyond;
    if (few && d > worst_diff) {
      worst_diff = d;
      j.worst = static_cast<int64_t>(i);
      j.worst_ref = r[i];
      j.worst_cand = c[i];
    }
    if (!(r[i] >= 0.0 && r[i] <= 1.0)) scores = false;
  }
  if (score_shape && scores) {
    for (uint64_t i = 0; i < n; ++i) {
      if (!std::isfinite(r[i]) || !std::isfinite(c[i])) continue;
      if ((r[i] >= t.decision_threshold) != (c[i] >= t.decision_threshold) &&
          std::fabs(r[i] - t.decision_threshold) > t.flip_rtol) {
        if (j.decisions++ == 0) {
          j.first_decision = static_cast<int64_t>(i);
          j.decision_ref = r[i];
          j.decision_cand = c[i];
        }
      }
    }
  }
  if (class_axis && ref.shape[*class_axis] >= 2) argmax_flips(r, c, ref.shape, *class_axis, t.flip_rtol, j);

  // The rules, in status_table() order; the first silent one decides alone.
  auto hold = [&](std::string_view code) { j.codes.push_back(code); };
  if (j.nan || j.inf) {
    hold("nonfinite");
  } else if (j.healthy && j.norm_cand < t.min_norm) {
    hold(j.norm_cand == 0 ? "all_zero" : "norm_vanished");
  } else if (n > 1 && cand_finite && cand_one_value && ref_any_finite && ref_hi - ref_lo > 0) {
    j.constant_value = c[0];
    hold("constant");
  } else {
    if (j.beyond) hold("few_values");
    if (!std::isnan(j.cosine) && !(j.cosine >= t.min_cosine)) hold("cosine");
    if (!std::isnan(j.rel_error) && j.rel_error > t.rel_error_limit()) hold("rel_l2");
    if (!std::isnan(j.norm_ratio) && !(1.0 / t.max_norm_ratio <= j.norm_ratio && j.norm_ratio <= t.max_norm_ratio))
      hold("norm_ratio");
    if (j.decisions) hold("decision_flip");
    // A top-1 share is the weakest evidence: named only when nothing above holds.
    if (j.codes.empty() && !std::isnan(j.argmax_flip) && j.argmax_flip > t.max_argmax_flip) hold("argmax");
  }
  for (std::string_view code : j.codes)
    for (const StatusRule& rule : kStatusTable)
      if (rule.code == code) j.status = std::max(j.status, rule.guard);
  return j;
}

}  // namespace driftscope
