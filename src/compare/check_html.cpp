// `driftscope check --html`: the check report as a page of the same kind as the compare report
// (src/compare/check.html), filled with the JSON rendering so the page and --json cannot disagree.
#include "compare/internal.hpp"
#include "driftscope/check.hpp"

namespace driftscope {
namespace {
constexpr std::string_view kTemplate =
#include "check_html.inc"
    ;
}  // namespace

std::string check_to_html(const CheckReport& report) {
  return compare_detail::fill_html_page(kTemplate, "driftscope check: " + report.summary,
                                        {{"REPORT", check_to_json(report, -1)}});
}

}  // namespace driftscope
