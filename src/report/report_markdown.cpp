// The Markdown report for CI job summaries (GitHub's $GITHUB_STEP_SUMMARY and the like): verdict
// first, the first divergence in detail, then every pair inside a collapsed <details> block.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "compare/internal.hpp"
#include "driftscope/report.hpp"
#include "driftscope/text.hpp"

namespace driftscope {
namespace {

using namespace compare_detail;

// Every text from the dumps (names, op types, metadata, messages quoting them) must render as the
// literal text: a tensor named "[x](https://evil)" or "<img src=...>" must not become a link or an
// image in a CI summary. Control characters are spelled out first (driftscope::printable, the
// rule every driftscope report follows), so nothing below ever sees a line break.

// Free text: every ASCII character Markdown (or GitHub: emoji :x:, math $x$, @mentions, #refs,
// autolinks after "www." or "://") gives a meaning is backslash-escaped, < > & become entities.
// Parentheses stay: with '[' and ']' escaped they cannot form a link. The second '/' of "//" is
// escaped too: linkify (markdown-it) links a protocol-relative "//localhost" with no dot or colon.
// A backslash-escaped '|' is also how a GFM table cell holds a pipe.
std::string text(std::string_view s) {
  std::string out;
  for (char c : printable(s)) {
    if (c == '/' && !out.empty() && out.back() == '/') out += '\\';
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '\\': case '`': case '*': case '_': case '{': case '}': case '[': case ']': case '#':
      case '+': case '!': case '|': case '~': case '.': case ':': case '@': case '$': case '^':
        out += '\\';
        out += c;
        break;
      default: out += c;
    }
  }
  return out;
}

// A name as a code span, which shows its content literally: the fence is one backtick longer
// than the longest run inside; padding spaces (the renderer strips one from each side when both
// are there) keep a leading or trailing backtick from joining the fence, and keep a name that
// starts and ends with a space whole. Inside a table a '|' still ends the cell
// unless escaped (GFM removes that backslash before the span is parsed); elsewhere it is literal.
enum class Where { table, text };
std::string code(std::string_view s, Where where) {
  std::string body;
  size_t run = 0, longest = 0;
  for (char c : printable(s)) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
    if (c == '|' && where == Where::table) body += '\\';
    body += c;
  }
  std::string fence(longest + 1, '`');
  bool pad = !body.empty() && (body.front() == '`' || body.back() == '`' ||
                               (body.front() == ' ' && body.back() == ' '));
  return pad ? fence + " " + body + " " + fence : fence + body + fence;
}
std::string cell_code(std::string_view s) { return code(s, Where::table); }
std::string line_code(std::string_view s) { return code(s, Where::text); }

std::string pair_row(const Report& r, size_t i) {
  const PairResult& p = r.pairs[i];
  const Metrics& m = p.metrics;
  auto n = [&](double v, int sig) { return p.compared ? fmt_num(v, sig) : std::string("-"); };
  std::string status(status_name(p.status));
  if (r.first_divergence == i) status = "**" + status + "** (first)";
  return fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", p.ref.exec_index,
                     cell_code(fmt_identity(p.ref)) + text(rank_text(r, p)), text(p.ref.op_type()), status,
                     p.compared ? fmt_num(p.error, 3) : "-", n(m.cosine, 6), n(m.sqnr_db, 4),
                     n(m.max_abs_diff, 3),
                     p.reasons().empty() ? std::string() : text(p.reasons().front().code() + ": " + reason_text(p, p.reasons().front())));
}

constexpr const char* kHeader =
    "| index | name | op | status | rel_l2 | cosine | sqnr dB | max abs diff | reason |\n"
    "|---:|---|---|---|---:|---:|---:|---:|---|\n";

}  // namespace

std::string report_to_markdown(const Report& r) {
  std::string out;
  const char* icon = r.verdict == Verdict::pass ? "\u2705" : r.verdict == Verdict::diverged ? "\u274C" : "\u26A0\uFE0F";
  out += fmt::format("## {} driftscope compare: {}\n\n", icon, verdict_name(r.verdict));
  out += fmt::format("**{}**\n\n", text(r.summary));
  out += "| | reference | candidate |\n|---|---|---|\n";
  out += fmt::format("| file | {} | {} |\n", cell_code(r.reference.path), cell_code(r.candidate.path));
  out += fmt::format("| state | {} | {} |\n", r.reference.state, r.candidate.state);
  out += fmt::format("| records | {} | {} |\n", r.reference.records, r.candidate.records);
  for (std::string_view k : {"framework", "backend", "device", "precision", "model"}) {
    std::string a, b;
    for (const auto& [kk, v] : r.reference.metadata) if (kk == k) a = v;
    for (const auto& [kk, v] : r.candidate.metadata) if (kk == k) b = v;
    if (!a.empty() || !b.empty()) out += fmt::format("| {} | {} | {} |\n", k, text(a), text(b));
  }
  if (!r.reference64.path.empty()) out += fmt::format("| reference64 | {} | |\n", cell_code(r.reference64.path));
  const auto by_status = r.counts();
  out += fmt::format("\n{} pairs: {} pass, {} fail, {} silent failure, {} incomparable, {} skipped, {} not "
                     "compared; {} only in reference, {} only in candidate.\n",
                     r.pairs.size(), by_status[static_cast<size_t>(PairStatus::pass)], by_status[static_cast<size_t>(PairStatus::fail)],
                     by_status[static_cast<size_t>(PairStatus::silent_failure)], by_status[static_cast<size_t>(PairStatus::incomparable)],
                     by_status[static_cast<size_t>(PairStatus::skipped)], by_status[static_cast<size_t>(PairStatus::not_compared)],
                     r.only_in_reference.size(), r.only_in_candidate.size());

  auto detail = [&](std::string_view title, size_t i) {
    const PairResult& p = r.pairs[i];
    out += fmt::format("\n### {}: {}{}\n\n", title, line_code(fmt_identity(p.ref)), text(rank_text(r, p)));
    out += fmt::format("- index {} ({}), {}{} vs {}{}\n", p.ref.exec_index, p.ref.op_type().empty() ? "-" : text(p.ref.op_type()),
                       dtype_name(p.ref.dtype), fmt_shape(p.ref.shape()), dtype_name(p.cand.dtype), fmt_shape(p.cand.shape()));
    out += fmt::format("- judged by {}: {}\n", text(p.criteria_source()), line_code(p.criteria().to_string()));
    for (const auto& rs : p.reasons()) out += fmt::format("- **{}**: {}\n", text(rs.code()), text(reason_text(p, rs)));
    if (p.origin != Origin::none) {
      out += fmt::format("- **{}**", origin_name(p.origin));
      if (p.basis() != "none")
        out += fmt::format(": relative error {} vs {} in its {} (amplification {})", fmt_num(p.error, 3),
                           fmt_num(p.input_error, 3),
                           p.basis() == "inputs" ? "inputs" : p.basis() == "dataflow" ? "inputs (data flow)" : "predecessor",
                           fmt_num(p.amplification, 3));
      if (p.beyond_rounding || (p.ref.kind == TensorKind::value && rounding_applies(p)))
        out += fmt::format("; {} rounding ({})", p.beyond_rounding ? "beyond" : "within", fmt_num(p.rounding, 3));
      else if (p.ref.kind == TensorKind::value)
        out += fmt::format("; rounding not the question: it fails by {}",
                           p.reasons().empty() ? std::string("its status") : p.reasons().front().code());
      out += "\n";
    }
    if (!p.ref.source().empty()) out += fmt::format("- source: {}\n", line_code(p.ref.source()));
    for (size_t j : p.parameter_pairs()) {
      const PairResult& q = r.pairs[j];
      bool d = q.beyond_rounding || q.status == PairStatus::fail || q.status == PairStatus::silent_failure;
      out += fmt::format("- parameter {} {}: {} (rel_l2 {}, max abs diff {})\n", q.ref.role_index,
                         line_code(q.ref.path().empty() ? std::string("-") : q.ref.path()),
                         d ? "**differs**" : "equal within rounding", fmt_num(q.metrics.rel_l2, 3),
                         fmt_num(q.metrics.max_abs_diff, 3));
    }
    for (const auto& n : p.notes()) out += fmt::format("- note: {}\n", text(n));
    if (p.layout() && p.layout()->hypothesis != "none") out += fmt::format("- layout: {}\n", text(p.layout()->to_string()));
  };
  if (r.first_divergence) detail("First divergence", *r.first_divergence);
  if (r.first_nonfinite && r.first_nonfinite != r.first_divergence) detail("First NaN/Inf", *r.first_nonfinite);
  if (r.first_silent_zero && r.first_silent_zero != r.first_divergence && r.first_silent_zero != r.first_nonfinite)
    detail("First silent zero", *r.first_silent_zero);

  if (r.first_divergence || !r.origins.empty()) {
    out += fmt::format("\n### Origins ({})\n\n{}\n\n", r.origins.size(),
                       r.dataflow ? "Found on the recorded data flow; *amplified*: the error grew " +
                                        fmt_num(r.amplification_threshold, 3) + "x or more."
                                  : std::string("By execution order: the reference has no data flow (`ds.inputs`)."));
    out += "| index | name | origin | error | reach (failing) | parameters | source |\n|---:|---|---|---:|---:|---|---|\n";
    for (const OriginPoint& g : r.origins) {
      const PairResult& p = r.pairs[g.pair];
      out += fmt::format("| {} | {}{} | {} | {} | {} ({}) | {} | {} |\n", p.ref.exec_index, cell_code(fmt_identity(p.ref)),
                         text(rank_text(r, p)),
                         g.origin == Origin::amplified ? "amplified x" + fmt_num(g.factor, 3) : std::string("introduced"),
                         fmt_num(p.error, 3), g.reach, g.reach_failing,
                         p.parameter_pairs().empty() ? "-" : g.parameters_differ ? "differ" : "same",
                         p.ref.source().empty() ? std::string("-") : cell_code(p.ref.source()));
    }
  }
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
      out += fmt::format("| {} | {} | {} | {} | {} | {} |\n", p.ref.exec_index, cell_code(fmt_identity(p.ref)),
                         fmt_num(p.amplification, 3), fmt_num(p.input_error, 3), fmt_num(p.error, 3), p.basis());
    }
  }
  if (!r.only_in_reference.empty() || !r.only_in_candidate.empty() || !r.incomparable.empty()) {
    out += "\n### Unpaired and incomparable\n\n";
    for (const auto& d : r.only_in_reference) out += fmt::format("- only in reference: {}\n", line_code(fmt_identity(d)));
    if (!r.finer_in_candidate.empty())
      out += fmt::format("- {} of the tensors only in the candidate are finer-grained steps that feed compared "
                         "tensors: listed, not a divergence\n", r.finer_in_candidate.size());
    for (const auto& d : r.only_in_candidate) out += fmt::format("- only in candidate: {}\n", line_code(fmt_identity(d)));
    for (size_t i : r.incomparable)
      out += fmt::format("- incomparable: {}: {}\n", line_code(fmt_identity(r.pairs[i].ref)),
                         text(reason_text(r.pairs[i], r.pairs[i].reasons().front())));
  }
  if (!r.axes_findings.empty()) {
    out += "\n### Findings by axis name\n\n";
    for (const auto& f : r.axes_findings)
      out += fmt::format("- {} `{}` in {}: {}\n", f.side, f.code, line_code(f.name),
                         text(f.candidate_message.empty() ? f.reference_message : f.candidate_message));
  }
  if (!r.warnings.empty()) {
    out += "\n### Warnings\n\n";
    for (const auto& w : r.warnings) out += fmt::format("- {}\n", text(w));
  }
  out += fmt::format("\n<details><summary>All {} pairs</summary>\n\n", r.pairs.size());
  out += kHeader;
  for (size_t i = 0; i < r.pairs.size(); ++i) out += pair_row(r, i);
  out += "\n</details>\n";
  return out;
}

}  // namespace driftscope
