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
constexpr std::string_view kTemplate =
#include "check_html.inc"
    ;
}  // namespace

std::string check_to_html(const CheckReport& report) {
  return report_detail::fill_html_page(kTemplate, "driftscope check: " + report.summary,
                                        {{"REPORT", check_to_json(report, -1)}});
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
  o["notes"] = r.notes;
  o["warnings"] = r.warnings;
  return o.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace driftscope
