// Localisation (docs/compare.md "Localisation"): the first divergence, the first NaN/Inf and the
// first silent zero; whether each failing op introduced its error or inherited it; the error-growth
// curve and the biggest amplifiers.
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "compare/internal.hpp"
#include "compare/report_access.hpp"

namespace driftscope::compare_detail {
namespace {

// Below this relative L2 error, amplification ratios measure rounding noise, not a story.
constexpr double kAmplifierFloor = 1e-6;

bool failing(PairStatus s) { return s == PairStatus::fail || s == PairStatus::silent_failure; }

bool has_code(const PairResult& p, std::string_view code) {
  return std::any_of(p.reasons().begin(), p.reasons().end(), [&](const Reason& r) { return r.code() == code; });
}

void localize_by_order(Report& rep, const CompareOptions& options) {
  auto& pairs = rep.pairs;
  // Inputs of each module call, by (reference name, occurrence).
  std::map<std::tuple<std::string_view, uint32_t>, std::vector<size_t>> inputs;  // (views of the pairs' names)
  for (size_t i = 0; i < pairs.size(); ++i)
    if (pairs[i].compared && pairs[i].ref.role == Role::input)
      inputs[{pairs[i].ref.name(), pairs[i].ref.occurrence}].push_back(i);

  std::optional<size_t> prev_output;
  for (size_t i = 0; i < pairs.size(); ++i) {
    PairResult& p = pairs[i];
    if (!p.compared) continue;
    bool input_failing = false;
    detail::ReportAccess::basis_pairs(p).clear();
    p.input_error = 0;
    if (p.ref.role == Role::parameter) {
      detail::ReportAccess::basis(p) = "none";  // parameters are not computed from earlier tensors
    } else if (auto it = inputs.find({p.ref.name(), p.ref.occurrence});
               p.ref.role != Role::input && it != inputs.end()) {
      detail::ReportAccess::basis(p) = "inputs";
      for (size_t j : it->second) {
        detail::ReportAccess::basis_pairs(p).push_back(j);
        p.input_error = std::max(p.input_error, pairs[j].error);
        input_failing = input_failing || failing(pairs[j].status);
      }
    } else if (prev_output) {
      detail::ReportAccess::basis(p) = "predecessor";
      detail::ReportAccess::basis_pairs(p).push_back(*prev_output);
      p.input_error = pairs[*prev_output].error;
      input_failing = failing(pairs[*prev_output].status);
    } else {
      detail::ReportAccess::basis(p) = "none";
    }
    if (p.input_error > 0) p.amplification = p.error / p.input_error;  // inf/inf: NaN
    else p.amplification = p.error > 0 ? HUGE_VAL : std::nan("");
    if (failing(p.status)) {
      // Introduced: the error was born here (the inputs were within tolerance) or grew by the
      // threshold factor; otherwise the op only carried what it received.
      bool amplified = p.amplification >= options.amplification_threshold;
      p.origin = (!input_failing || amplified) ? Origin::introduced : Origin::inherited;
    } else {
      p.origin = Origin::none;
    }
    // Integer, shape and mask tensors are exact: never anyone's predecessor.
    if (p.ref.role == Role::output && p.ref.kind == TensorKind::value) prev_output = i;
  }
  list_origins_by_order(rep);
}

void first_points(Report& rep, const CompareOptions& options) {
  auto& pairs = rep.pairs;
  rep.first_divergence.reset();
  rep.first_nonfinite.reset();
  rep.first_silent_zero.reset();
  rep.growth.clear();
  rep.amplifiers.clear();
  std::vector<size_t> amp;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const PairResult& p = pairs[i];
    if (!p.compared) continue;
    if (!rep.first_divergence && diverges(p)) rep.first_divergence = i;
    const Metrics& m = p.metrics;
    if (!rep.first_nonfinite && (m.nan_cand() > m.nan_both() || m.inf_cand() > m.inf_same()))
      rep.first_nonfinite = i;
    if (!rep.first_silent_zero && (has_code(p, "all_zero") || has_code(p, "norm_vanished")))
      rep.first_silent_zero = i;
    if (p.ref.role == Role::output) rep.growth.push_back({i, p.error});
    // (In the same walk: each walk over a million pairs of 440 bytes is some 40 ms.)
    if (p.amplification > 1.0 && p.error >= kAmplifierFloor && p.basis() != "none") amp.push_back(i);
  }
  // The first max_amplifiers of a stable sort by (amplification, error), both descending: a
  // partial sort with the pair index as the last key gives the same list in O(n log k) (every
  // pair may qualify, a million of them).
  auto before = [&](size_t a, size_t b) {
    if (pairs[a].amplification != pairs[b].amplification)
      return pairs[a].amplification > pairs[b].amplification;
    if (pairs[a].error != pairs[b].error) return pairs[a].error > pairs[b].error;
    return a < b;
  };
  const size_t keep = std::min<size_t>(amp.size(), options.max_amplifiers);
  std::partial_sort(amp.begin(), amp.begin() + static_cast<ptrdiff_t>(keep), amp.end(), before);
  amp.resize(keep);
  rep.amplifiers = std::move(amp);
}

}  // namespace

bool rounding_applies(const PairResult& p) noexcept {
  if (p.ref.kind != TensorKind::value) return false;
  static constexpr std::string_view kErrorCriteria[] = {"allclose", "cosine", "sqnr", "rel_l2", "ulp", "reference64"};
  return std::all_of(p.reasons().begin(), p.reasons().end(), [](const Reason& r) {
    return std::find(std::begin(kErrorCriteria), std::end(kErrorCriteria), r.code()) != std::end(kErrorCriteria);
  });
}

// The first divergence is the first pair over tolerance that is also beyond rounding: a
// floating-point error its dtype makes anyway is no divergence, whatever a fixed tolerance says,
// so no report calls one tensor both. Where rounding is not the question the tolerance decides.
bool diverges(const PairResult& p) noexcept {
  return failing(p.status) && (p.beyond_rounding || !rounding_applies(p));
}

void localize(Report& rep, const CompareOptions& options, const OutsideLookup& outside) {
  rep.amplification_threshold = options.amplification_threshold;
  rep.dataflow = localize_dataflow(rep, options, outside);
  if (!rep.dataflow) localize_by_order(rep, options);
  first_points(rep, options);
}

}  // namespace driftscope::compare_detail
