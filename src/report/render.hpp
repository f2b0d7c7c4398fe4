// Internals shared by the renderers of src/report/ (not installed). The measuring code
// (src/compare/, src/check/) never includes this header (scripts/check-layers.sh).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

namespace driftscope::report_detail {

// The report pages (compare, guard, check; src/report/html_page.cpp): fills a template's
// %%DS_NAME%% markers. TITLE becomes escaped HTML text, STYLE and COMMON_JS the shared stylesheet
// and script; every other marker takes the JSON given for it, written so that it cannot end its
// <script type="application/json"> block. A marker without a value is left out.
struct HtmlSlot {
  std::string_view name;  // e.g. "REPORT" for %%DS_REPORT%%
  std::string_view json;
};
std::string fill_html_page(std::string_view tmpl, std::string_view title, std::initializer_list<HtmlSlot> slots);

}  // namespace driftscope::report_detail
