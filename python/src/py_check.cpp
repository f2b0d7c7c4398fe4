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
  // Plain fields, no checks: CheckOptions::validate() (called by check()) is the validator.
  nb::class_<CheckOptions>(m, "CheckOptions")
      .def(nb::init<>())
      .def_rw("dynamic_axes", &CheckOptions::dynamic_axes)
      .def_rw("ignore", &CheckOptions::ignore)
      .def_rw("norm_tolerance", &CheckOptions::norm_tolerance)
      .def_rw("softmax_tolerance", &CheckOptions::softmax_tolerance)
      .def_rw("bad_slice_fraction", &CheckOptions::bad_slice_fraction)
      .def_rw("f16_near_overflow", &CheckOptions::f16_near_overflow)
      .def_rw("saturation_fraction", &CheckOptions::saturation_fraction);
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
