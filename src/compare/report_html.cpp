// The HTML report: the template src/compare/report.html (embedded at build time, hand-written
// CSS and JS, no libraries) with two JSON blocks filled in: the JSON report itself
// (docs/report-schema.json) and the per-pair detail (PairResult::detail), heatmaps as base64 bytes.
#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "compare/internal.hpp"
#include "driftscope/text.hpp"

namespace driftscope {
namespace {

constexpr std::string_view kTemplate =
#include "report_html_template.inc"
    ;

using nlohmann::json;

json real(double v) {
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
  for (const auto& e : d.worst) w.push_back(json::array({e.index, e.coords, real(e.ref), real(e.cand), real(e.abs_diff)}));
  o["w"] = std::move(w);
  return o;
}

// JSON inside <script type="application/json">: the block ends at the first "</script" and
// "<!--" changes how it is parsed, so '<' (and '>', '&' for good measure) are written as \u00XX
// escapes, which JSON.parse reads back as the same characters. They only occur inside strings.
void append_script_json(std::string& out, std::string_view j) {
  for (char c : j) {
    switch (c) {
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default: out += c;
    }
  }
}

// Text in HTML markup (the <title>): printable(), then the five characters HTML gives a meaning.
std::string html_text(std::string_view s) {
  std::string out;
  for (char c : printable(s)) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

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
    const auto& d = report.pairs[i].detail;
    detail += d ? detail_json(*d).dump(-1, ' ', false, nlohmann::detail::error_handler_t::replace) : "null";
  }
  detail += ']';

  std::string out;
  out.reserve(kTemplate.size() + report_json.size() + detail.size() + 256);
  std::string_view t = kTemplate;
  struct Slot {
    std::string_view marker;
    int what;
  };
  for (const Slot& s : {Slot{"%%DS_TITLE%%", 0}, Slot{"%%DS_REPORT%%", 1}, Slot{"%%DS_DETAIL%%", 2}}) {
    size_t at = t.find(s.marker);
    if (at == std::string_view::npos) continue;  // the template is ours; tested to hold all three
    out += t.substr(0, at);
    if (s.what == 0) out += html_text("driftscope: " + report.summary);
    else append_script_json(out, s.what == 1 ? std::string_view(report_json) : std::string_view(detail));
    t.remove_prefix(at + s.marker.size());
  }
  out += t;
  return out;
}

}  // namespace driftscope
