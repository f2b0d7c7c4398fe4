// The report's one-line verdict (Report::summary, what a CI log shows first) and the identity
// formats of the engine's reasons. They belong to the report model, not to a renderer: the engine
// and the dump-set comparison fill Report::summary, and every renderer prints it as it stands
// (src/report). The number and shape formats are the judges' (judge/reason_format.cpp).
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compare/internal.hpp"

namespace driftscope {

namespace {

// A criterion's limit as the judgement's texts print it (6 significant digits).
std::string limit_text(double v) { return fmt::format("{:.6g}", v); }

std::string mismatch_coords_text(const std::vector<uint64_t>& c) {
  std::string s = "[";
  for (size_t i = 0; i < c.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(c[i]);
  }
  return s + "]";
}

}  // namespace

// The sentences of the judgement's codes (policy.cpp judge() stores the code only). Each reads
// only what the pair holds after judging, so a pair restored from a measured part
// (partial.cpp) words the same.
std::string reason_text(const PairResult& p, const Reason& r) {
  if (!r.message.empty()) return r.message;
  using compare_detail::fmt_num;
  const Metrics& m = p.metrics;
  const Criteria& c = p.criteria();
  const std::string& code = r.code();
  if (code == "nonfinite")
    return fmt::format("candidate has {} NaN and {} Inf where the reference is finite", m.nan_cand(), m.inf_cand());
  if (code == "nan_positions")
    return fmt::format("NaN at different positions: reference {}, candidate {}, shared {}", m.nan_ref(),
                       m.nan_cand(), m.nan_both());
  if (code == "nan")
    return fmt::format("{} NaN at the same positions on both sides (--nan-equal accepts them)", m.nan_both());
  if (code == "inf_signs")
    return fmt::format("Inf positions or signs differ: reference {}, candidate {}, same {}", m.inf_ref(),
                       m.inf_cand(), m.inf_same());
  if (code == "all_zero") return fmt::format("candidate is all zeros; reference norm is {}", fmt_num(m.norm_ref));
  if (code == "norm_vanished")
    return fmt::format("candidate norm {} is below 1e-6 of the reference norm {}", fmt_num(m.norm_cand),
                       fmt_num(m.norm_ref));
  if (code == "constant") return "candidate is constant where the reference varies";
  if (code == "allclose") {
    std::string where;
    if (m.first_mismatch() >= 0)
      where = fmt::format("; first at {}: ref {} cand {}", mismatch_coords_text(p.first_mismatch_coords()),
                          fmt_num(m.first_mismatch_ref(), 7), fmt_num(m.first_mismatch_cand(), 7));
    return fmt::format("{} of {} elements ({}%) exceed atol+rtol*|ref| (atol={}, rtol={}){}", m.mismatch_count,
                       m.count, fmt_num(100.0 * m.mismatch_fraction, 3), limit_text(c.atol.value_or(0)),
                       limit_text(c.rtol.value_or(0)), where);
  }
  if (code == "cosine" && c.min_cosine)
    return fmt::format("cosine {} < {}", fmt_num(m.cosine, 7), limit_text(*c.min_cosine));
  if (code == "sqnr" && c.min_sqnr_db)
    return fmt::format("SQNR {} dB < {} dB (relative L2 error {})", fmt_num(m.sqnr_db, 4),
                       limit_text(*c.min_sqnr_db), fmt_num(m.rel_l2, 3));
  if (code == "rel_l2" && c.max_rel_l2)
    return fmt::format("relative L2 error {} > {}", fmt_num(m.rel_l2, 4), limit_text(*c.max_rel_l2));
  if (code == "ulp" && c.max_ulp) return fmt::format("max ULP distance {} > {}", m.max_ulp, *c.max_ulp);
  if (code == "argmax" && c.min_argmax_agreement)
    return fmt::format("argmax agrees on {}% of rows < {}%", fmt_num(100 * m.argmax_agreement(), 4),
                       limit_text(100 * *c.min_argmax_agreement));
  if (code == "topk" && c.min_topk_overlap)
    return fmt::format("top-{} overlap {} < {}", m.top_k(), fmt_num(m.topk_overlap(), 4),
                       limit_text(*c.min_topk_overlap));
  if (code == "reference64")
    return fmt::format("error against float64 {} > {} x float32's own {} + floor = {}", fmt_num(p.r64_err_cand(), 3),
                       limit_text(p.r64_k()), fmt_num(p.r64_err_ref(), 3), fmt_num(p.r64_limit(), 3));
  return {};
}

}  // namespace driftscope

namespace driftscope::compare_detail {

std::string fmt_identity(const TensorDesc& d) {
  std::string s = std::string(d.name());
  if (d.role != Role::output || d.role_index != 0)
    s += fmt::format(" ({} {})", role_name(d.role), d.role_index);
  if (d.occurrence != 0) s += fmt::format(" #{}", d.occurrence);
  return s;
}

std::string fmt_where(const PairResult& p) {
  std::string s = fmt::format("index {}", p.ref.exec_index);
  if (!p.ref.op_type().empty()) s += ", " + p.ref.op_type();
  return s;
}

std::string rank_text(const Report& r, const PairResult& p) {
  if (!r.sets) return "";
  const auto& ranks = r.pair_ranks(p);
  const uint32_t world = r.candidate.set || !r.reference.set ? r.candidate.world_size : r.reference.world_size;
  std::string list;
  for (size_t i = 0; i < ranks.size(); ++i) list += fmt::format("{}{}", i ? "," : "", ranks[i]);
  return fmt::format(" on rank{} {} (of {})", ranks.size() == 1 ? "" : "s", list, world);
}

namespace {
// A passing comparison still says that both runs share a finding by axis name (or that the
// candidate lost one): numbers that agree do not make a normalisation over tokens right.
std::string axes_note(const Report& r) {
  if (r.axes_findings.empty()) return "";
  std::vector<std::string> parts;
  for (std::string_view side : {"both", "reference"}) {
    auto n = std::count_if(r.axes_findings.begin(), r.axes_findings.end(),
                           [&](const AxesFindingPair& f) { return f.side == side; });
    if (n) parts.push_back(fmt::format("{} in {}", n, side == "both" ? "both runs" : "the reference only"));
  }
  const auto& f = r.axes_findings.front();
  return fmt::format("; findings by axis name: {} (first: {} at {})", fmt::join(parts, ", "), f.code, f.name);
}
}  // namespace

std::string summary_line(const Report& r) {
  auto at = [&](size_t i) {
    const PairResult& p = r.pairs[i];
    return fmt::format("{}{} ({})", fmt_identity(p.ref), rank_text(r, p), fmt_where(p));
  };
  if (r.verdict == Verdict::pass) {
    size_t compared = 0;
    std::optional<size_t> worst;
    for (size_t i = 0; i < r.pairs.size(); ++i) {
      if (!r.pairs[i].compared) continue;
      ++compared;
      if (!worst || r.pairs[i].error > r.pairs[*worst].error) worst = i;
    }
    std::string s = fmt::format("PASS: {} tensor pairs within tolerance", compared);
    if (worst && r.pairs[*worst].error > 0)
      s += fmt::format(" (largest relative L2 error {} at {})", fmt_num(r.pairs[*worst].error, 3),
                       fmt_identity(r.pairs[*worst].ref));
    else if (worst)
      s += " (all identical)";
    return s + axes_note(r);
  }
  if (r.verdict == Verdict::nothing_compared) {
    // Say why nothing was compared, in the words of the options that explain it.
    std::string s = "NOTHING COMPARED: ";
    if (r.reference.records == 0 && r.candidate.records == 0)
      s += "neither dump holds a tensor";
    else if (r.reference.records == 0 || r.candidate.records == 0)
      s += fmt::format("the {} holds no tensor", r.reference.records == 0 ? "reference" : "candidate");
    else if (r.pairs.empty() && r.only_in_reference.empty())
      s += "no tensor of the reference passed --filter";
    else
      s += "no tensor pair was compared";
    std::vector<std::string> why;
    if (size_t n = r.count(PairStatus::skipped)) why.push_back(fmt::format("{} skipped by the policy", n));
    if (!r.incomparable.empty()) why.push_back(fmt::format("{} incomparable (allowed)", r.incomparable.size()));
    if (!r.only_in_reference.empty())
      why.push_back(fmt::format("{} only in the reference (allowed)", r.only_in_reference.size()));
    if (!r.only_in_candidate.empty())
      why.push_back(fmt::format("{} only in the candidate (allowed)", r.only_in_candidate.size()));
    for (size_t i = 0; i < why.size(); ++i) s += (i ? ", " : ": ") + why[i];
    return s + fmt::format(" (reference: {} records, {}; candidate: {} records, {})", r.reference.records,
                           r.reference.state, r.candidate.records, r.candidate.state);
  }
  if (r.verdict == Verdict::silent_failure) {
    std::optional<size_t> first;
    for (size_t i = 0; i < r.pairs.size() && !first; ++i)
      if (r.pairs[i].status == PairStatus::silent_failure) first = i;
    std::string s = fmt::format("SILENT FAILURE at {}: {}", at(*first), reason_text(r.pairs[*first], r.pairs[*first].reasons().front()));
    if (r.first_divergence && *r.first_divergence != *first)
      s += fmt::format("; first divergence earlier at {}", at(*r.first_divergence));
    return s;
  }
  if (r.first_divergence) {
    const PairResult& p = r.pairs[*r.first_divergence];
    std::string s = fmt::format("DIVERGED: first divergence at {}: {}", at(*r.first_divergence),
                                p.reasons().empty() ? std::string("over tolerance") : reason_text(p, p.reasons().front()));
    return s;
  }
  if (size_t over = r.count(PairStatus::fail)) {
    // Over tolerance, yet within the rounding the dtype makes (docs/metrics.md §7a): no divergence.
    size_t first = 0;
    while (r.pairs[first].status != PairStatus::fail) ++first;
    const PairResult& p = r.pairs[first];
    return fmt::format("DIVERGED: {} tensor(s) over tolerance, none beyond rounding (first: {}: {})", over,
                       at(first), p.reasons().empty() ? std::string("over tolerance") : reason_text(p, p.reasons().front()));
  }
  std::vector<std::string> parts;
  if (!r.only_in_reference.empty())
    parts.push_back(fmt::format("{} tensor(s) only in the reference (first: {})", r.only_in_reference.size(),
                                fmt_identity(r.only_in_reference.front())));
  if (r.only_in_candidate.size() > r.finer_in_candidate.size()) {
    // Finer-grained steps are not a divergence: name the first tensor that is not one.
    size_t first = 0;
    for (size_t k = 0; k < r.finer_in_candidate.size() && r.finer_in_candidate[k] == first; ++k) ++first;
    parts.push_back(fmt::format("{} only in the candidate (first: {})",
                                r.only_in_candidate.size() - r.finer_in_candidate.size(),
                                fmt_identity(r.only_in_candidate[first])));
  }
  if (!r.incomparable.empty()) {
    const PairResult& p = r.pairs[r.incomparable.front()];
    parts.push_back(fmt::format("{} incomparable (first: {}: {})", r.incomparable.size(),
                                fmt_identity(p.ref), reason_text(p, p.reasons().front())));
  }
  if (auto it = std::find_if(r.axes_findings.begin(), r.axes_findings.end(),
                             [](const AxesFindingPair& f) { return f.side == "candidate"; });
      it != r.axes_findings.end())
    parts.push_back(fmt::format("{} finding(s) by axis name only in the candidate (first: {} at {}: {})",
                                std::count_if(r.axes_findings.begin(), r.axes_findings.end(),
                                              [](const AxesFindingPair& f) { return f.side == "candidate"; }),
                                it->code, it->name, it->candidate_message));
  std::string s = "DIVERGED: no tensor over tolerance, but ";
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? "; " : "") + parts[i];
  return s;
}

}  // namespace driftscope::compare_detail
