// driftscope — the page of `driftscope guard --html` (docs/howto/guard.md): guard_report_to_html is
// declared with every other renderer in driftscope/report.hpp; this header stays for the callers
// that include it by this name.
#pragma once

#include "driftscope/report.hpp"
