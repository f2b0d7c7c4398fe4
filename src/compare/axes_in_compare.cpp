// Checks by axis name in a comparison (docs/axes.md §3.1, docs/compare.md §1): every paired and
// unpaired tensor of both runs judged by the one judge (judge/axes_checks.cpp), each finding
// named once with the run that has it. Compare's glue, so the judge knows nothing of a Report.
#include <algorithm>

#include <fmt/format.h>

#include "common/thread_pool.hpp"
#include "compare/internal.hpp"
#include "format/record_table.hpp"
#include "judge/axes_checks.hpp"

namespace driftscope::compare_detail {

namespace {

AxesJudgement judge_record(const Reader& r, size_t i) {
  const Record rec = detail::ReaderAccess::record(r, i);
  if (!has_axes_facts(rec.info)) return {};
  return judge_axes(rec.info);
}

AxesFindingPair entry(const AxesFinding& f, std::string_view side, const TensorDesc& d) {
  AxesFindingPair e;
  e.code = f.code;
  e.side = side;
  e.name = std::string(d.name());
  e.role = d.role;
  e.role_index = d.role_index;
  e.occurrence = d.occurrence;
  e.op_type = d.op_type();
  return e;
}

}  // namespace

void find_axes_in_comparison(Report& report, std::span<const std::pair<uint32_t, uint32_t>> records,
                             const Reader& ref, const Reader& cand, unsigned threads) {
  // Neither run has an attribute the judge reads (known from the scan on open): every judgement
  // would be empty, and decoding a million metas again brings back pages the measuring pass
  // released (a million 16-float records interleave metas and payloads: ~600 MiB of RSS).
  if (!detail::ReaderAccess::has_axes_attributes(ref) && !detail::ReaderAccess::has_axes_attributes(cand)) return;
  // In blocks: only a block's judgements are held at once (a million pairs would hold 64 MB).
  const size_t n = records.size();
  constexpr size_t kBlock = 4096, kSub = 256;
  std::vector<AxesJudgement> a(std::min(n, kBlock)), b(std::min(n, kBlock));
  size_t malformed_ref = 0, malformed_cand = 0;
  auto& out = report.axes_findings;
  auto in = [](const AxesJudgement& j, std::string_view code) -> const AxesFinding* {
    for (const auto& f : j.findings)
      if (f.code == code) return &f;
    return nullptr;
  };
  for (size_t first = 0; first < n; first += kBlock) {
    const size_t m = std::min(kBlock, n - first);
    detail::parallel_for((m + kSub - 1) / kSub, [&](size_t sub) {
      for (size_t k = sub * kSub; k < std::min(m, (sub + 1) * kSub); ++k) {
        a[k] = judge_record(ref, records[first + k].first);
        b[k] = judge_record(cand, records[first + k].second);
      }
    }, threads);
    for (size_t k = 0; k < m; ++k) {
      const size_t i = first + k;
      malformed_ref += a[k].malformed;
      malformed_cand += b[k].malformed;
      const PairResult& p = report.pairs[i];
      for (const auto& f : a[k].findings) {
        const AxesFinding* g = in(b[k], f.code);
        AxesFindingPair e = entry(f, g ? "both" : "reference", p.ref);
        e.pair = i;
        e.index_ref = p.ref.exec_index;
        e.reference_message = f.message;
        if (g) {
          e.index_cand = p.cand.exec_index;
          e.candidate_message = g->message;
        }
        out.push_back(std::move(e));
      }
      for (const auto& g : b[k].findings) {
        if (in(a[k], g.code)) continue;
        AxesFindingPair e = entry(g, "candidate", p.cand);
        e.pair = i;
        e.index_cand = p.cand.exec_index;
        e.candidate_message = g.message;
        out.push_back(std::move(e));
      }
    }
  }
  // Unpaired tensors: each is its own run's alone.
  for (int side = 0; side < 2; ++side) {
    const Reader& r = side == 0 ? ref : cand;
    for (const TensorDesc& d : side == 0 ? report.only_in_reference : report.only_in_candidate) {
      auto i = detail::ReaderAccess::find(r, d.name(), d.occurrence, d.role, d.role_index);
      if (!i) continue;
      auto j = judge_record(r, *i);
      (side == 0 ? malformed_ref : malformed_cand) += j.malformed;
      for (const auto& f : j.findings) {
        AxesFindingPair e = entry(f, side == 0 ? "reference" : "candidate", d);
        (side == 0 ? e.index_ref : e.index_cand) = d.exec_index;
        (side == 0 ? e.reference_message : e.candidate_message) = f.message;
        out.push_back(std::move(e));
      }
    }
  }
  for (auto [side, count] : {std::pair{"reference", malformed_ref}, std::pair{"candidate", malformed_cand}})
    if (count)
      report.warnings.push_back(fmt::format("{}: {} tensor(s) with malformed axes_ops entries: those entries were "
                                            "not judged by axis name", side, count));
}

}  // namespace driftscope::compare_detail
