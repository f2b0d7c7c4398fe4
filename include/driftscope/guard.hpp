// driftscope — the page of `driftscope guard --html` (docs/howto/guard.md). The guard itself is
// Python (python/driftscope/_guard); its page is rendered here so that every report page shares
// one template mechanism, stylesheet and escaping with the compare and check pages.
#pragma once

#include <string>
#include <string_view>

#include "driftscope/error.hpp"

namespace driftscope {

// One self-contained offline page from the guard's JSON report (docs/guard-schema.json, plus a
// "diagnostics" string per backend): verdict, backend table, findings, probes, fallbacks. No
// network (the page's Content-Security-Policy forbids it); names reach the page only as escaped
// JSON inserted as text. invalid_argument when the text is not a JSON object with a string
// "summary" and an array "backends".
Result<std::string> guard_report_to_html(std::string_view report_json);

}  // namespace driftscope
