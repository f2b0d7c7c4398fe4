// The HTML report: the template src/report/report.html (embedded at build time, hand-written
// CSS and JS, no libraries) with two JSON blocks filled in: the JSON report itself
// (docs/report-schema.json) and the per-pair detail (PairResult::detail), heatmaps as base64 bytes.
#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "compare/internal.hpp"
#include "report/render.hpp"
#include "driftscope/report.hpp"

namespace driftscope {
namespace {

constexpr std::string_view kReportTemplate =
#include "report_html.inc"
    ;

using nlohmann::json;

json json_real(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

std::string base64(const std::vector<uint8_t>& b) {
  static constexpr char k[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((b.size() + 2) / 3 * 4);
  for (size_t i = 0; i < b.size(); i += 3) {
    uint32_t v = uint32_t{b[i]} << 16;
    if (i + 1 < b.size()) v |= uint32_t{b[i + 1]} << 8;
    if (i + 2 < b.size()) v |= b[i + 2];
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
    out += i + 1 < b.size() ? k[(v >> 6) & 63] : '=';
    out += i + 2 < b.size() ? k[v & 63] : '=';
  }
  return out;
}

// Heat cells as one byte each, so 500 pairs of 32 x 64 cells stay near 1.4 MB of base64:
// 0 exact, 255 non-finite disagreement, 1..254 log10 of the cell's largest |difference| spread
// over [lo, hi], the extremes of this pair's cells (the page prints lo and hi).
json detail_json(const PairDetail& d) {
  json o;
  o["h"] = d.histogram;
  o["e0"] = PairDetail::kHistFirstExp;
  o["bpd"] = PairDetail::kHistBinsPerDecade;
  o["z"] = d.exact;
  o["ns"] = d.nonfinite_same;
  o["nd"] = d.nonfinite_differ;
  o["rows"] = d.rows;
  o["cols"] = d.cols;
  o["gr"] = d.grid_rows;
  o["gc"] = d.grid_cols;
  double lo = HUGE_VAL, hi = -HUGE_VAL;
  for (float v : d.heat)
    if (v > 0 && std::isfinite(v)) {
      lo = std::min(lo, std::log10(double{v}));
      hi = std::max(hi, std::log10(double{v}));
    }
  std::vector<uint8_t> bytes(d.heat.size());
  for (size_t i = 0; i < d.heat.size(); ++i) {
    float v = d.heat[i];
    if (v == 0) bytes[i] = 0;
    else if (!std::isfinite(v)) bytes[i] = 255;
    else if (hi <= lo) bytes[i] = 254;
    else bytes[i] = static_cast<uint8_t>(1 + std::lround(253.0 * (std::log10(double{v}) - lo) / (hi - lo)));
  }
  o["hm"] = base64(bytes);
  o["lo"] = lo <= hi ? json(lo) : json(nullptr);
  o["hi"] = lo <= hi ? json(hi) : json(nullptr);
  json w = json::array();
  for (const auto& e : d.worst) w.push_back(json::array({e.index, e.coords, json_real(e.ref), json_real(e.cand), json_real(e.abs_diff)}));
  o["w"] = std::move(w);
  return o;
}

// Findings by axis name (Report::axes_findings) under the warnings, as text from the page's own
// JSON block like everything else. Added only to a page that has one, so every other page keeps
// its bytes.
constexpr std::string_view kReportAxesScript = R"JS(<script>
"use strict";
(function () {
const R = JSON.parse(document.getElementById("ds-report").textContent);
const box = document.getElementById("warnings");
for (const f of R.axes_findings || [])
  box.append(el("div", {class: "warn axes-finding"}, "by axis name, " + (f.side === "both" ? "in both runs" : "only in the " + f.side) +
    ": " + f.code + " at " + f.name + ": " + (f.candidate_message || f.reference_message)));
})();
</script>
)JS";

}  // namespace

std::string report_to_html(const Report& report) {
  std::string report_json;
  (void)report_to_json(report, -1, [&](std::string_view s) -> Result<void> {
    report_json += s;
    return {};
  });
  std::string detail = "[";
  for (size_t i = 0; i < report.pairs.size(); ++i) {
    if (i) detail += ',';
    const auto& d = report.pairs[i].detail();
    detail += d ? detail_json(*d).dump(-1, ' ', false, nlohmann::detail::error_handler_t::replace) : "null";
  }
  detail += ']';

  std::string page = report_detail::fill_html_page(kReportTemplate, "driftscope: " + report.summary,
                                                  {{"REPORT", report_json}, {"DETAIL", detail}});
  if (!report.axes_findings.empty())
    if (size_t at = page.rfind("</body>"); at != std::string::npos) page.insert(at, kReportAxesScript);
  return page;
}

}  // namespace driftscope
