// `driftscope guard --html` (include/driftscope/report.hpp): src/report/guard.html filled with the
// guard's model (its JSON report; src/report/guard_text.cpp), which the Python guard hands over as text.
#include "driftscope/report.hpp"

#include <nlohmann/json.hpp>

#include "report/render.hpp"

namespace driftscope {
namespace {
constexpr std::string_view kGuardTemplate =
#include "guard_html.inc"
    ;
}  // namespace

Result<std::string> guard_report_to_html(std::string_view report_json) {
  auto j = nlohmann::json::parse(report_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return make_error(Errc::invalid_argument, "guard report: not a JSON object");
  auto summary = j.find("summary");
  auto backends = j.find("backends");
  if (summary == j.end() || !summary->is_string() || backends == j.end() || !backends->is_array())
    return make_error(Errc::invalid_argument, "guard report: needs a string \"summary\" and an array \"backends\"");
  j.erase("render");  // what only the text and Markdown reports show
  // Re-serialised compactly: one JSON text whatever the caller's layout; bad UTF-8 replaced.
  std::string compact = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return report_detail::fill_html_page(kGuardTemplate, "driftscope guard: " + summary->get<std::string>(),
                                        {{"REPORT", compact}});
}

}  // namespace driftscope
