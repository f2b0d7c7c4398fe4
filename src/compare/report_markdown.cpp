// The Markdown report for CI job summaries (GitHub's $GITHUB_STEP_SUMMARY and the like): verdict
// first, the first divergence in detail, then every pair inside a collapsed <details> block.
#include <cmath>

#include <fmt/format.h>

#include "compare/internal.hpp"

namespace driftscope {
namespace {

using namespace compare_detail;

// Markdown table cells: '|' would end the cell, newlines the row; backticks keep names literal.
std::string cell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}
std::string code(std::string_view s) {
  std::string t = cell(s);
  return t.find('`') == std::string::npos ? "`" + t + "`" : "`` " + t + " ``";
}

std::string pair_row(const Report& r, size_t i) {
  const PairResult& p = r.pairs[i];
  const Metrics& m = p.metrics;
  auto n = [&](double v, int sig) { return p.compared ? fmt_num(v, sig) : std::string("-"); };
  std::string status(status_name(p.status));
  if (r.first_divergence == i) status = "**" + status + "** (first)";
  return fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", p.ref.exec_index,
                     code(fmt_identity(p.ref)), cell(p.ref.op_type), status,
                     p.compared ? fmt_num(p.error, 3) : "-", n(m.cosine, 6), n(m.sqnr_db, 4),
                     n(m.max_abs_diff, 3),
                     p.reasons.empty() ? std::string() : cell(p.reasons.front().code + ": " + p.reasons.front().message));
}

constexpr const char* kHeader =
    "| index | name | op | status | rel_l2 | cosine | sqnr dB | max abs diff | reason |\n"
    "|---:|---|---|---|---:|---:|---:|---:|---|\n";

}  // namespace

std::string report_to_markdown(const Report& r) {
  std::string out;
  const char* icon = r.verdict == Verdict::pass ? "\u2705" : r.verdict == Verdict::diverged ? "\u274C" : "\u26A0\uFE0F";
  out += fmt::format("## {} driftscope compare: {}\n\n", icon, verdict_name(r.verdict));
  out += fmt::format("**{}**\n\n", cell(r.summary));
  out += "| | reference | candidate |\n|---|---|---|\n";
  out += fmt::format("| file | {} | {} |\n", code(r.reference.path), code(r.candidate.path));
  out += fmt::format("| state | {} | {} |\n", r.reference.state, r.candidate.state);
  out += fmt::format("| records | {} | {} |\n", r.reference.records, r.candidate.records);
  for (std::string_view k : {"framework", "backend", "device", "precision", "model"}) {
    std::string a, b;
    for (const auto& [kk, v] : r.reference.metadata) if (kk == k) a = v;
    for (const auto& [kk, v] : r.candidate.metadata) if (kk == k) b = v;
    if (!a.empty() || !b.empty()) out += fmt::format("| {} | {} | {} |\n", k, cell(a), cell(b));
  }
  if (!r.reference64.path.empty()) out += fmt::format("| reference64 | {} | |\n", code(r.reference64.path));
  out += fmt::format("\n{} pairs: {} pass, {} fail, {} silent failure, {} incomparable, {} skipped, {} not "
                     "compared; {} only in reference, {} only in candidate.\n",
                     r.pairs.size(), r.count(PairStatus::pass), r.count(PairStatus::fail),
                     r.count(PairStatus::silent_failure), r.count(PairStatus::incomparable),
                     r.count(PairStatus::skipped), r.count(PairStatus::not_compared),
                     r.only_in_reference.size(), r.only_in_candidate.size());

  auto detail = [&](std::string_view title, size_t i) {
    const PairResult& p = r.pairs[i];
    out += fmt::format("\n### {}: {}\n\n", title, code(fmt_identity(p.ref)));
    out += fmt::format("- index {} ({}), {}{} vs {}{}\n", p.ref.exec_index, p.ref.op_type.empty() ? "-" : cell(p.ref.op_type),
                       dtype_name(p.ref.dtype), fmt_shape(p.ref.shape), dtype_name(p.cand.dtype), fmt_shape(p.cand.shape));
    out += fmt::format("- judged by {}: `{}`\n", cell(p.criteria_source), p.criteria.to_string());
    for (const auto& rs : p.reasons) out += fmt::format("- **{}**: {}\n", rs.code, cell(rs.message));
    if (p.origin != Origin::none) {
      out += fmt::format("- **{}**", origin_name(p.origin));
      if (p.basis != "none")
        out += fmt::format(": relative error {} vs {} in its {} (amplification {})", fmt_num(p.error, 3),
                           fmt_num(p.input_error, 3), p.basis == "inputs" ? "inputs" : "predecessor",
                           fmt_num(p.amplification, 3));
      out += "\n";
    }
    for (const auto& n : p.notes) out += fmt::format("- note: {}\n", cell(n));
  };
  if (r.first_divergence) detail("First divergence", *r.first_divergence);
  if (r.first_nonfinite && r.first_nonfinite != r.first_divergence) detail("First NaN/Inf", *r.first_nonfinite);
  if (r.first_silent_zero && r.first_silent_zero != r.first_divergence && r.first_silent_zero != r.first_nonfinite)
    detail("First silent zero", *r.first_silent_zero);

  if (r.first_divergence) {
    size_t f = *r.first_divergence;
    out += "\n### Around the first divergence\n\n";
    out += kHeader;
    for (size_t i = f > 3 ? f - 3 : 0; i < std::min(r.pairs.size(), f + 4); ++i) out += pair_row(r, i);
  }
  if (!r.amplifiers.empty()) {
    out += "\n### Biggest amplifiers\n\n| index | name | amplification | input error | error | basis |\n|---:|---|---:|---:|---:|---|\n";
    for (size_t i : r.amplifiers) {
      const PairResult& p = r.pairs[i];
      out += fmt::format("| {} | {} | {} | {} | {} | {} |\n", p.ref.exec_index, code(fmt_identity(p.ref)),
                         fmt_num(p.amplification, 3), fmt_num(p.input_error, 3), fmt_num(p.error, 3), p.basis);
    }
  }
  if (!r.only_in_reference.empty() || !r.only_in_candidate.empty() || !r.incomparable.empty()) {
    out += "\n### Unpaired and incomparable\n\n";
    for (const auto& d : r.only_in_reference) out += fmt::format("- only in reference: {}\n", code(fmt_identity(d)));
    for (const auto& d : r.only_in_candidate) out += fmt::format("- only in candidate: {}\n", code(fmt_identity(d)));
    for (size_t i : r.incomparable)
      out += fmt::format("- incomparable: {}: {}\n", code(fmt_identity(r.pairs[i].ref)),
                         cell(r.pairs[i].reasons.front().message));
  }
  if (!r.warnings.empty()) {
    out += "\n### Warnings\n\n";
    for (const auto& w : r.warnings) out += fmt::format("- {}\n", cell(w));
  }
  out += fmt::format("\n<details><summary>All {} pairs</summary>\n\n", r.pairs.size());
  out += kHeader;
  for (size_t i = 0; i < r.pairs.size(); ++i) out += pair_row(r, i);
  out += "\n</details>\n";
  return out;
}

}  // namespace driftscope
