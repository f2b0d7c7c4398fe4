// `driftscope check` reports (include/driftscope/report.hpp): text, JSON and the page of the same
// kind as the compare report (src/report/check.html), filled with the JSON rendering so the page
// and --json cannot disagree.
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "driftscope/report.hpp"
#include "driftscope/text.hpp"
#include "report/render.hpp"

namespace driftscope {
namespace {
constexpr std::string_view kCheckTemplate =
#include "check_html.inc"
    ;
// The axis names of every named tensor (CheckReport::tensor_axes), a table before "Not checked",
// filled as text from the page's JSON block. Added only to a page whose run has names, so every
// other page keeps its bytes.
constexpr std::string_view kCheckAxesScript = R"JS(<script>
"use strict";
(function () {
const R = JSON.parse(document.getElementById("ds-report").textContent);
const list = R.tensor_axes || [];
const tb = el("tbody", {});
for (const t of list) {
  let id = t.name;
  if (t.occurrence) id += " #" + t.occurrence;
  if (t.role !== "output" || t.role_index) id += " (" + t.role + (t.role_index ? " " + t.role_index : "") + ")";
  tb.append(el("tr", {}, el("td", {class: "num"}, String(t.index)), el("td", {class: "name mono"}, id),
               el("td", {class: "mono"}, "[" + t.shape.join(",") + "]"),
               el("td", {class: "mono"}, t.axes.length ? t.axes.join(",") : "(names stop here)"),
               el("td", {class: "wrap"}, t.axes_stop || t.axes_from || "")));
}
const table = el("table", {id: "axes"}, el("thead", {}, el("tr", {}, el("th", {}, "#"), el("th", {}, "tensor"),
  el("th", {}, "shape"), el("th", {}, "axis names"), el("th", {}, "where they came from"))), tb);
const sec = el("section", {id: "axes-section"}, el("h2", {}, "Axis names per tensor ",
  el("span", {class: "muted"}, "(" + list.length + " named tensor" + (list.length === 1 ? "" : "s") + ")")),
  el("div", {class: "tablewrap"}, table));
const notes = document.getElementById("notes-section");
notes.parentNode.insertBefore(sec, notes);
})();
</script>
)JS";
}  // namespace

std::string check_to_html(const CheckReport& report) {
  std::string page = report_detail::fill_html_page(kCheckTemplate, "driftscope check: " + report.summary,
                                                   {{"REPORT", check_to_json(report, -1)}});
  if (!report.tensor_axes.empty())
    if (size_t at = page.rfind("</body>"); at != std::string::npos) page.insert(at, kCheckAxesScript);
  return page;
}

std::string check_to_text(const CheckReport& r) {
  std::string out = printable(r.summary) + "\n";
  for (const auto& f : r.findings) {
    std::string id = f.name;
    if (f.role != Role::output || f.role_index != 0) id += fmt::format(" ({} {})", role_name(f.role), f.role_index);
    if (f.occurrence) id += fmt::format(" #{}", f.occurrence);
    out += printable(fmt::format("  {:<18} {} [index {}{}{}]: {}", f.code, id, f.exec_index,
                                 f.op_type.empty() ? "" : ", ", f.op_type, f.message)) + "\n";
  }
  for (const auto& n : r.notes) out += "  note: " + printable(n) + "\n";
  for (const auto& w : r.warnings) out += "  warning: " + printable(w) + "\n";
  return out;
}

std::string check_to_json(const CheckReport& r, int indent) {
  using nlohmann::ordered_json;
  ordered_json o;
  o["schema"] = CheckReport::kSchema;
  o["path"] = r.path;
  o["state"] = r.state;
  o["verdict"] = r.verdict();
  o["exit_code"] = r.exit_code();
  o["summary"] = r.summary;
  o["records"] = r.records;
  o["tensors_checked"] = r.tensors_checked;
  ordered_json fs = ordered_json::array();
  for (const auto& f : r.findings) {
    ordered_json j;
    j["code"] = f.code;
    j["name"] = f.name;
    j["occurrence"] = f.occurrence;
    j["role"] = role_name(f.role);
    j["role_index"] = f.role_index;
    j["op_type"] = f.op_type;
    j["index"] = f.exec_index;
    j["message"] = f.message;
    j["value"] = std::isfinite(f.value) ? ordered_json(f.value) : ordered_json(nullptr);
    fs.push_back(std::move(j));
  }
  o["findings"] = std::move(fs);
  if (!r.tensor_axes.empty()) {  // docs/axes.md "Checking one run"; absent when no record is named
    ordered_json ts = ordered_json::array();
    for (const auto& t : r.tensor_axes) {
      ordered_json j;
      j["name"] = t.name;
      j["occurrence"] = t.occurrence;
      j["role"] = role_name(t.role);
      j["role_index"] = t.role_index;
      j["index"] = t.exec_index;
      j["shape"] = t.shape;
      j["axes"] = t.axes;
      j["axes_from"] = t.from.empty() ? ordered_json(nullptr) : ordered_json(t.from);
      j["axes_stop"] = t.stop.empty() ? ordered_json(nullptr) : ordered_json(t.stop);
      ts.push_back(std::move(j));
    }
    o["tensor_axes"] = std::move(ts);
  }
  o["notes"] = r.notes;
  o["warnings"] = r.warnings;
  return o.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace driftscope
