// The terminal report: the summary line first (what a CI log shows), then the first divergence
// with its neighbourhood, the worst tensors, the error growth, the amplifiers and the warnings.
// Tables fit `width` columns by shrinking the name column (keeping the name's specific tail).
#include <algorithm>
#include <cmath>

#include <fmt/compile.h>
#include <fmt/format.h>

#include "compare/internal.hpp"
#include "driftscope/report.hpp"
#include "driftscope/text.hpp"

namespace driftscope::compare_detail {

namespace {

std::string first_reason(const PairResult& p) {
  if (p.reasons().empty()) return "";
  return p.reasons().front().code() + ": " + reason_text(p, p.reasons().front());
}

std::string origin_text(const PairResult& p) {
  if (p.origin == Origin::none) return "";
  std::string s(origin_name(p.origin));
  if (p.basis() == "none") return s + " (nothing before it to blame)";
  const char* what = p.basis() == "inputs" ? "its inputs" : p.basis() == "dataflow" ? "its inputs (data flow)"
                                                                                : "its predecessor";
  if (p.basis() == "dataflow" && p.basis_pairs().empty())
    return s + ": computed from no recorded floating-point tensor";
  if (p.input_error == 0) return s + fmt::format(": {} matched exactly", what);
  if (std::isinf(p.error) && !std::isinf(p.input_error))
    return s + fmt::format(": new NaN/Inf from {}, whose error was {}", what, fmt_num(p.input_error, 3));
  if (std::isnan(p.amplification)) return s + fmt::format(": {} already had NaN/Inf", what);
  std::string out = s + fmt::format(": error {} is {}x that of {} ({})", fmt_num(p.error, 3),
                                    fmt_num(p.amplification, 3), what, fmt_num(p.input_error, 3));
  if (p.basis() == "dataflow" && p.origin == Origin::introduced)
    out += p.amplification > 1 ? ", which were within rounding or tolerance" : "";
  return out;
}

// "within rounding (bound 0.0625)" for the rounding column of origins and details.
std::string rounding_text(const PairResult& p) {
  // Failing by NaN, Inf or a health check with an error its dtype could make: not a rounding
  // question, and never "within rounding" beside a divergence.
  if (!p.beyond_rounding && !rounding_applies(p))
    return fmt::format("not the question: it fails by {}, not by its error ({} vs {} its dtype makes)",
                       p.reasons().empty() ? std::string("its status") : p.reasons().front().code(),
                       fmt_num(p.r64 ? p.r64_err_cand() : p.error, 3), fmt_num(p.r64 ? p.r64_limit() : p.rounding, 3));
  if (p.r64)
    return fmt::format("{} rounding (float64 rule: {} vs limit {})",
                       p.beyond_rounding ? "beyond" : "within", fmt_num(p.r64_err_cand(), 3),
                       fmt_num(p.r64_limit(), 3));
  return fmt::format("{} rounding (error {} vs {} its dtype makes anyway)",
                     p.beyond_rounding ? "beyond" : "within", fmt_num(p.error, 3), fmt_num(p.rounding, 3));
}

}  // namespace

static std::string ranks_list(const std::vector<uint32_t>& ranks) {
  std::string list;
  for (size_t i = 0; i < ranks.size(); ++i) list += fmt::format("{}{}", i ? "," : "", ranks[i]);
  return list;
}

namespace {

struct Style {
  bool on;
  std::string wrap(std::string_view code, std::string_view text) const {
    if (!on) return std::string(text);
    return fmt::format("\x1b[{}m{}\x1b[0m", code, text);
  }
  std::string bold(std::string_view t) const { return wrap("1", t); }
  std::string dim(std::string_view t) const { return wrap("2", t); }
  std::string status(PairStatus s, std::string_view text) const {
    switch (s) {
      case PairStatus::pass: return wrap("32", text);
      case PairStatus::fail: return wrap("31", text);
      case PairStatus::silent_failure: return wrap("1;35", text);
      case PairStatus::incomparable: return wrap("33", text);
      default: return wrap("2", text);
    }
  }
};

// Display width of UTF-8 text (one column per code point: the report uses no wide characters).
size_t columns(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string pad(std::string s, size_t w, bool right = false) {
  size_t c = columns(s);
  if (c >= w) return s;
  return right ? std::string(w - c, ' ') + s : s + std::string(w - c, ' ');
}

// Keeps the tail of a long name: "...layers.31.norm" says more than "encoder.lay...". Cuts
// between code points, never inside one.
std::string fit(const std::string& s, size_t w) {
  size_t c = columns(s);
  if (c <= w) return s;
  size_t keep = w <= 3 ? w : w - 3, skip = c - keep, i = 0;
  for (size_t seen = 0; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && seen++ == skip) break;
  return (w <= 3 ? "" : "...") + s.substr(i);
}

// Text from the dumps (names, op types, metadata, messages quoting them) as the terminal may
// see it: one rule, driftscope::printable().
std::string shown(const TensorDesc& d) { return printable(fmt_identity(d)); }

class Table {
 public:
  Table(const Report& r, const Style& st, unsigned width) : r_(r), st_(st) {
    // marker, index, name separator, status, rel_l2, cosine, sqnr, origin ("introduced")
    size_t fixed = 2 + 6 + 1 + 1 + 14 + 1 + 9 + 1 + 9 + 1 + 8 + 1 + 10;
    // The op and max|d| columns only when the name column keeps 32 columns beside them.
    wide_ = width >= fixed + 24 + 32;
    if (wide_) fixed += 13 + 1 + 9 + 1;
    name_w_ = width > fixed + 12 ? width - fixed : 12;
    name_w_ = std::min<size_t>(name_w_, 48);
  }
  std::string header() const {
    std::string s = "  " + pad("index", 6, true) + " " + pad("name", name_w_) + " ";
    if (wide_) s += pad("op", 13) + " ";
    s += pad("status", 14) + " " + pad("rel_l2", 9, true) + " " + pad("cosine", 9, true) + " " +
         pad("sqnr_dB", 8, true) + " ";
    if (wide_) s += pad("max|d|", 9, true) + " ";
    s += "origin";
    return st_.dim(s) + "\n";
  }
  std::string row(size_t i, bool mark = false) const {
    const PairResult& p = r_.pairs[i];
    const Metrics& m = p.metrics;
    // A dump-set pair names its ranks: replicas of one tensor share index and name.
    std::string name = fit(shown(p.ref) + (r_.sets ? fmt::format(" [rank {}]", ranks_list(r_.pair_ranks(p))) : ""), name_w_);
    std::string s = (mark ? "> " : "  ") + pad(std::to_string(p.ref.exec_index), 6, true) + " " +
                    pad(name, name_w_) + " ";
    if (wide_) s += pad(fit(printable(p.ref.op_type()), 13), 13) + " ";
    std::string status(status_name(p.status));
    s += st_.status(p.status, pad(status, 14)) + " ";
    auto n = [&](double v, int sig) { return p.compared ? fmt_num(v, sig) : std::string("-"); };
    s += pad(p.compared ? fmt_num(p.error, 3) : "-", 9, true) + " " + pad(n(m.cosine, 6), 9, true) + " " +
         pad(n(m.sqnr_db, 4), 8, true) + " ";
    if (wide_) s += pad(n(m.max_abs_diff, 3), 9, true) + " ";
    s += p.origin == Origin::none ? "" : std::string(origin_name(p.origin));
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s + "\n";
  }

 private:
  const Report& r_;
  const Style& st_;
  bool wide_;
  size_t name_w_;
};

std::string dump_line(std::string_view label, const DumpInfo& d) {
  std::string s = fmt::format("{:<10} {}  ({}, {} records", label, d.path.empty() ? "-" : printable(d.path), d.state, d.records);
  for (std::string_view k : {"framework", "backend", "device", "precision"})
    for (const auto& [kk, v] : d.metadata)
      if (kk == k && !v.empty()) s += fmt::format(", {}", printable(v));
  return s + ")\n";
}

std::string sparkline(const Report& r, size_t width) {
  static const char* kBars[] = {"\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"};
  std::vector<double> e;
  for (const auto& g : r.growth) e.push_back(g.error);
  if (e.empty()) return "";
  // One bar per bucket of consecutive tensors (the bucket's largest error), on a log scale from
  // 1e-8 (and below) to 1 (and above, NaN/Inf included).
  size_t n = std::min(e.size(), std::max<size_t>(width, 8));
  std::string out;
  for (size_t b = 0; b < n; ++b) {
    size_t lo = b * e.size() / n, hi = std::max(lo + 1, (b + 1) * e.size() / n);
    double v = 0;
    for (size_t i = lo; i < hi; ++i) v = std::max(v, std::isnan(e[i]) ? HUGE_VAL : e[i]);
    double x = v <= 1e-8 ? 0.0 : v >= 1.0 ? 1.0 : (std::log10(v) + 8.0) / 8.0;
    out += kBars[std::min<size_t>(7, static_cast<size_t>(x * 7.999))];
  }
  return out;
}

}  // namespace

}  // namespace driftscope::compare_detail

namespace driftscope {

std::string report_to_text(const Report& r, const TextOptions& o) {
  using namespace compare_detail;
  Style st{o.color};
  std::string out;
  std::string verdict_code = r.verdict == Verdict::pass             ? "1;32"
                             : r.verdict == Verdict::diverged         ? "1;31"
                             : r.verdict == Verdict::nothing_compared ? "1;33"
                                                                      : "1;35";
  out += st.wrap(verdict_code, printable(r.summary)) + "\n\n";
  out += dump_line("reference", r.reference);
  out += dump_line("candidate", r.candidate);
  if (!r.reference64.path.empty()) out += dump_line("reference64", r.reference64);
  size_t compared = 0;
  for (const auto& p : r.pairs) compared += p.compared;
  // Zero counts other than pass/fail are left out: the line stays readable on a terminal.
  const auto by_status = r.counts();
  std::string counts = fmt::format("{} paired, {} compared: {} pass, {} fail", r.pairs.size(), compared,
                                   by_status[static_cast<size_t>(PairStatus::pass)], by_status[static_cast<size_t>(PairStatus::fail)]);
  auto more = [&](size_t n, std::string_view what) {
    if (n) counts += fmt::format(", {} {}", n, what);
  };
  more(by_status[static_cast<size_t>(PairStatus::silent_failure)], "silent failure");
  more(by_status[static_cast<size_t>(PairStatus::incomparable)], "incomparable");
  more(by_status[static_cast<size_t>(PairStatus::skipped)], "skipped");
  more(by_status[static_cast<size_t>(PairStatus::not_compared)], "not compared");
  more(r.only_in_reference.size(), "only in reference");
  more(r.only_in_candidate.size(), "only in candidate");
  out += fmt::format("{:<10} {}\n", "pairs", counts);
  if (r.stopped_early) out += fmt::format("{:<10} stopped at the first divergence (--stop-at-first)\n", "");

  Table table(r, st, o.width);
  auto parameters = [&](const PairResult& p, std::string_view indent = "  ") {
    if (p.parameter_pairs().empty()) return;
    bool differ = false;
    for (size_t j : p.parameter_pairs()) {
      const PairResult& q = r.pairs[j];
      bool d = q.beyond_rounding || q.status == PairStatus::fail || q.status == PairStatus::silent_failure;
      differ = differ || d;
      out += fmt::format("{}parameter  {} {}: {}  rel_l2 {}  max|d| {}\n", indent,
                         q.ref.role_index, printable(q.ref.path().empty() ? std::string("-") : q.ref.path()),
                         d ? "differs" : q.error == 0 ? "identical" : "equal within rounding",
                         fmt_num(q.metrics.rel_l2, 3), fmt_num(q.metrics.max_abs_diff, 3));
    }
    out += fmt::format("{}cause      {}\n", indent, differ ? "its parameters differ from the reference's (weights changed)"
                                                  : "same parameters: its computation differs");
  };
  auto detail = [&](std::string_view title, size_t i) {
    const PairResult& p = r.pairs[i];
    const Metrics& m = p.metrics;
    out += '\n';
    out += st.bold(fmt::format("{}: {}{}", title, shown(p.ref), rank_text(r, p))) +
           fmt::format("  ({}; {}{} vs {}{})\n", printable(fmt_where(p)), dtype_name(p.ref.dtype), fmt_shape(p.ref.shape()),
                       dtype_name(p.cand.dtype), fmt_shape(p.cand.shape()));
    out += fmt::format("  judged by  {}: {}\n", printable(p.criteria_source()), p.criteria().to_string());
    for (const auto& rs : p.reasons()) out += fmt::format("  {:<10} {}\n", printable(rs.code()), printable(reason_text(p, rs)));
    std::string origin = origin_text(p);
    if (!origin.empty()) {
      out += fmt::format("  origin     {}", origin);
      if (!p.basis_pairs().empty() && p.basis() == "predecessor")
        out += fmt::format(" ({})", shown(r.pairs[p.basis_pairs().front()].ref));
      out += "\n";
    }
    if (p.compared && p.ref.kind == TensorKind::value &&
        (p.status == PairStatus::fail || p.status == PairStatus::silent_failure))
      out += fmt::format("  rounding   {}\n", rounding_text(p));
    if (!p.ref.source().empty()) out += fmt::format("  source     {}\n", printable(p.ref.source()));
    parameters(p);
    if (p.compared && !p.estimated && m.finite_pairs > 0) {
      out += fmt::format("  metrics    rel_l2 {}  cosine {}  sqnr {} dB  max|d| {}  rmse {}  norms {} / {}\n",
                         fmt_num(m.rel_l2, 3), fmt_num(m.cosine, 7), fmt_num(m.sqnr_db, 4),
                         fmt_num(m.max_abs_diff, 3), fmt_num(m.rmse, 3), fmt_num(m.norm_ref, 4),
                         fmt_num(m.norm_cand, 4));
    }
    if (p.compared && !p.estimated) {
      if (m.first_mismatch() >= 0)
        out += fmt::format("  mismatch   {} of {} elements; first at {}: ref {} cand {}\n", m.mismatch_count,
                           m.count, fmt_shape(p.first_mismatch_coords()), fmt_num(m.first_mismatch_ref(), 7),
                           fmt_num(m.first_mismatch_cand(), 7));
    }
    for (const auto& n : p.notes()) out += fmt::format("  note       {}\n", printable(n));
    if (p.layout() && p.layout()->hypothesis != "none")  // "none" only in JSON: no noise on numeric drift
      out += fmt::format("  layout     {}\n", printable(p.layout()->to_string()));
  };

  if (r.first_divergence) detail("First divergence", *r.first_divergence);
  if (r.sets && !r.affected_ranks.empty()) {
    std::string list;
    for (size_t i = 0; i < r.affected_ranks.size(); ++i) list += fmt::format("{}{}", i ? "," : "", r.affected_ranks[i]);
    const uint32_t world = r.candidate.set || !r.reference.set ? r.candidate.world_size : r.reference.world_size;
    out += fmt::format("  affected   ranks {} (of {}) hold a failing tensor\n", list, world);
  }
  if (r.first_nonfinite && r.first_nonfinite != r.first_divergence)
    detail("First NaN/Inf", *r.first_nonfinite);
  if (r.first_silent_zero && r.first_silent_zero != r.first_divergence &&
      r.first_silent_zero != r.first_nonfinite)
    detail("First silent zero", *r.first_silent_zero);

  if (r.first_divergence || !r.origins.empty()) {
    out += "\n" + st.bold(fmt::format("Origins ({})", r.origins.size())) +
           (r.dataflow ? fmt::format(" (on the recorded data flow; amplified: error grew {}x or more)\n",
                                     fmt_num(r.amplification_threshold, 3))
                       : std::string(" (by execution order: the reference has no data flow, ds.inputs)\n"));
    if (r.origins.empty()) out += "  none beyond rounding\n";
    for (const OriginPoint& g : r.origins) {
      const PairResult& p = r.pairs[g.pair];
      std::string how = g.origin == Origin::amplified ? fmt::format("amplified x{}", fmt_num(g.factor, 3))
                                                      : std::string("introduced");
      out += fmt::format("  {:>6} {}{}  {}  error {}  reaches {} ({} failing){}\n", p.ref.exec_index,
                         fit(shown(p.ref), std::max<size_t>(16, o.width > 70 ? o.width - 70 : 16)), rank_text(r, p), how,
                         fmt_num(p.error, 3), g.reach, g.reach_failing,
                         g.parameters_differ ? "  parameters differ" : "");
      if (!p.ref.source().empty()) out += fmt::format("         at {}\n", printable(p.ref.source()));
      parameters(p, "         ");
    }
  }
  if (o.all) {
    out += "\n" + st.bold("All pairs") + "\n" + table.header();
    for (size_t i = 0; i < r.pairs.size(); ++i) out += table.row(i, r.first_divergence == i);
  } else {
    if (r.first_divergence) {
      size_t f = *r.first_divergence;
      size_t lo = f > o.neighbourhood ? f - o.neighbourhood : 0;
      size_t hi = std::min(r.pairs.size(), f + o.neighbourhood + 1);
      out += "\n" + st.bold("Around the first divergence") + "\n" + table.header();
      for (size_t i = lo; i < hi; ++i) out += table.row(i, i == f);
    }
    std::vector<size_t> worst;  // pairs with any error: identical pairs are not "worst"
    for (size_t i = 0; i < r.pairs.size(); ++i)
      if (r.pairs[i].compared && (r.pairs[i].error != 0 || r.pairs[i].status != PairStatus::pass))
        worst.push_back(i);
    std::stable_sort(worst.begin(), worst.end(), [&](size_t a, size_t b) {
      double ea = std::isnan(r.pairs[a].error) ? HUGE_VAL : r.pairs[a].error;
      double eb = std::isnan(r.pairs[b].error) ? HUGE_VAL : r.pairs[b].error;
      return ea > eb;
    });
    if (worst.size() > o.worst) worst.resize(o.worst);
    if (!worst.empty()) {
      out += "\n" + st.bold("Worst tensors (relative L2 error)") + "\n" + table.header();
      for (size_t i : worst) out += table.row(i, r.first_divergence == i);
    }
  }

  if (r.growth.size() >= 2) {
    size_t w = o.width > 30 ? o.width - 30 : 8;
    out += "\n" + st.bold("Error growth") +
           fmt::format(" (relative L2 error of {} outputs in execution order, log scale 1e-8 .. 1)\n",
                       r.growth.size());
    out += "  " + sparkline(r, w) + "\n";
  }
  if (!r.amplifiers.empty()) {
    out += "\n" + st.bold("Biggest amplifiers") + (r.dataflow ? std::string(" (error / error of its inputs)\n")
                                                   : std::string(" (error / error of the inputs or predecessor)\n"));
    for (size_t i : r.amplifiers) {
      const PairResult& p = r.pairs[i];
      out += fmt::format("  {:>6} {}  amplification {}: {} -> {} ({})\n", p.ref.exec_index,
                         fit(shown(p.ref), std::max<size_t>(16, o.width > 60 ? o.width - 60 : 16)),
                         fmt_num(p.amplification, 3), fmt_num(p.input_error, 3), fmt_num(p.error, 3),
                         p.basis());
    }
  }
  auto list = [&](std::string_view title, const std::vector<TensorDesc>& v) {
    if (v.empty()) return;
    out += '\n';
    out += st.bold(fmt::format("{} ({})", title, v.size())) + "\n";
    size_t n = o.all ? v.size() : std::min<size_t>(v.size(), 10);
    for (size_t i = 0; i < n; ++i)
      out += fmt::format("  {:>6} {}  {}{}\n", v[i].exec_index, shown(v[i]), dtype_name(v[i].dtype),
                         fmt_shape(v[i].shape()));
    if (n < v.size()) out += fmt::format("  ... and {} more (--all lists them)\n", v.size() - n);
  };
  list("Only in the reference", r.only_in_reference);
  list("Only in the candidate", r.only_in_candidate);
  if (!r.finer_in_candidate.empty())
    out += fmt::format("  {} of them are finer-grained steps that feed compared tensors (the candidate's data "
                       "flow): listed, not a divergence\n", r.finer_in_candidate.size());
  if (!r.incomparable.empty()) {
    out += "\n" + st.bold(fmt::format("Incomparable ({})", r.incomparable.size())) + "\n";
    size_t n = o.all ? r.incomparable.size() : std::min<size_t>(r.incomparable.size(), 10);
    for (size_t k = 0; k < n; ++k) {
      const PairResult& p = r.pairs[r.incomparable[k]];
      out += fmt::format("  {:>6} {}  {}\n", p.ref.exec_index, shown(p.ref), printable(first_reason(p)));
      if (p.layout() && p.layout()->hypothesis != "none")
        out += fmt::format("  {:>6} layout: {}\n", "", printable(p.layout()->to_string()));
    }
    if (n < r.incomparable.size())
      out += fmt::format("  ... and {} more (--all lists them)\n", r.incomparable.size() - n);
  }
  if (!r.axes_findings.empty()) {
    out += "\n" + st.bold(fmt::format("Findings by axis name ({})", r.axes_findings.size())) + "\n";
    for (const auto& f : r.axes_findings) {
      const auto index = f.index_ref ? *f.index_ref : *f.index_cand;
      out += fmt::format("  {:>6} {:<9} {:<18} {}: {}\n", index, f.side, f.code, printable(f.name),
                         printable(f.candidate_message.empty() ? f.reference_message : f.candidate_message));
    }
  }
  if (!r.warnings.empty()) {
    out += "\n" + st.wrap("1;33", "Warnings") + "\n";
    for (const auto& w : r.warnings) out += "  " + printable(w) + "\n";
  }
  return out;
}

}  // namespace driftscope
