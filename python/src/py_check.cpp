// driftscope._core: `driftscope check` (include/driftscope/check.hpp), the same library function
// the command runs. Python reads the findings from the JSON rendering, so the two cannot disagree.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "py_core.hpp"
#include "driftscope/check.hpp"
#include "driftscope/report.hpp"

namespace driftscope::py {

void bind_check(nb::module_& m) {
  // Plain fields, no checks: CheckOptions::validate() (called by check()) is the validator. The
  // fields are the rows of check.hpp's table, which _core.check_options() returns as data.
  auto options = nb::class_<CheckOptions>(m, "CheckOptions").def(nb::init<>());
#define DS_BIND_CHECK_(type, name, ...) options.def_rw(#name, &CheckOptions::name);
  DRIFTSCOPE_CHECK_OPTIONS(DS_BIND_CHECK_)
#undef DS_BIND_CHECK_
  // driftscope.check()'s keyword handling and the docs check are built from it.
  m.def("check_options", [] { return option_rows(check_option_specs()); });
  // (JSON report, text report, HTML page) of one run.
  m.def(
      "check",
      [](const PyReader& reader, const CheckOptions& options) {
        std::shared_ptr<const Reader> keep = reader.reader;
        std::optional<Result<CheckReport>> result;
        {
          nb::gil_scoped_release unlocked;
          result.emplace(check(*keep, options));
        }
        CheckReport rep = unwrap(std::move(*result));
        rep.path = reader.path;
        return std::make_tuple(check_to_json(rep, 0), check_to_text(rep), check_to_html(rep));
      },
      nb::arg("reader"), nb::arg("options"));
  // The guard's reports (include/driftscope/report.hpp) from its model: the JSON report with each
  // row's diagnostics and the "render" object (python/driftscope/_guard/_report.py assembles it).
  m.def(
      "guard_report_html", [](std::string_view model_json) { return unwrap(guard_report_to_html(model_json)); },
      nb::arg("model_json"));
  m.def(
      "guard_report_text", [](std::string_view model_json) { return unwrap(guard_report_to_text(model_json)); },
      nb::arg("model_json"));
  m.def(
      "guard_report_markdown",
      [](std::string_view model_json) { return unwrap(guard_report_to_markdown(model_json)); },
      nb::arg("model_json"));
}

}  // namespace driftscope::py
