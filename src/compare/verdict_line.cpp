// The report's one-line verdict (Report::summary, what a CI log shows first) and the identity
// formats of the engine's reasons. They belong to the report model, not to a renderer: the engine
// and the dump-set comparison fill Report::summary, and every renderer prints it as it stands
// (src/report). The number and shape formats are the judges' (judge/reason_format.cpp).
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compare/internal.hpp"

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
    std::string s = fmt::format("SILENT FAILURE at {}: {}", at(*first), r.pairs[*first].reasons().front().message);
    if (r.first_divergence && *r.first_divergence != *first)
      s += fmt::format("; first divergence earlier at {}", at(*r.first_divergence));
    return s;
  }
  if (r.first_divergence) {
    const PairResult& p = r.pairs[*r.first_divergence];
    std::string s = fmt::format("DIVERGED: first divergence at {}: {}", at(*r.first_divergence),
                                p.reasons().empty() ? std::string("over tolerance") : p.reasons().front().message);
    return s;
  }
  if (size_t over = r.count(PairStatus::fail)) {
    // Over tolerance, yet within the rounding the dtype makes (docs/metrics.md §7a): no divergence.
    size_t first = 0;
    while (r.pairs[first].status != PairStatus::fail) ++first;
    const PairResult& p = r.pairs[first];
    return fmt::format("DIVERGED: {} tensor(s) over tolerance, none beyond rounding (first: {}: {})", over,
                       at(first), p.reasons().empty() ? std::string("over tolerance") : p.reasons().front().message);
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
                                fmt_identity(p.ref), p.reasons().front().message));
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
