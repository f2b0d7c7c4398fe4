// driftscope._core: the comparison engine (include/driftscope/compare.hpp), the same one the
// `driftscope compare` command runs. The Python Report reads the structured result from the JSON
// rendering (docs/report-schema.json), so Python and the CLI can never disagree on a field.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include "core.hpp"
#include "driftscope/compare.hpp"

namespace driftscope::py {

namespace {

struct PyReport {
  std::shared_ptr<const Report> report;
};

Criteria criteria_from(const nb::dict& d) {
  Criteria c;
  for (auto [key, value] : d) {
    std::string k = nb::cast<std::string>(key);
    if (value.is_none()) continue;
    if (k == "atol") c.atol = nb::cast<double>(value);
    else if (k == "rtol") c.rtol = nb::cast<double>(value);
    else if (k == "max_mismatch_fraction") c.max_mismatch_fraction = nb::cast<double>(value);
    else if (k == "min_cosine") c.min_cosine = nb::cast<double>(value);
    else if (k == "min_sqnr_db") c.min_sqnr_db = nb::cast<double>(value);
    else if (k == "max_rel_l2") c.max_rel_l2 = nb::cast<double>(value);
    else if (k == "max_ulp") c.max_ulp = nb::cast<int64_t>(value);
    else if (k == "min_argmax_agreement") c.min_argmax_agreement = nb::cast<double>(value);
    else if (k == "min_topk_overlap") c.min_topk_overlap = nb::cast<double>(value);
    else
      raise(Errc::invalid_argument,
            "unknown criterion '" + k +
                "' (atol, rtol, max_mismatch_fraction, min_cosine, min_sqnr_db, max_rel_l2, "
                "max_ulp, min_argmax_agreement, min_topk_overlap)");
  }
  return c;
}

std::vector<RenameRule> rename_rules(const std::vector<std::string>& texts) {
  std::vector<RenameRule> out;
  for (const auto& t : texts) out.push_back(unwrap(RenameRule::parse(t)));
  return out;
}

PyReport run_compare(const PyReader& reference, const PyReader& candidate,
                     std::optional<nb::dict> criteria, std::optional<std::string> policy_text,
                     std::optional<std::string> policy_path, std::vector<std::string> map_a,
                     std::vector<std::string> map_b,
                     std::vector<std::pair<std::string, std::string>> exact,
                     std::optional<std::string> mapping_path, std::string_view pairing,
                     std::string filter, bool reshape, bool nan_equal, bool stop_at_first,
                     bool allow_unpaired, bool allow_incomparable, unsigned threads,
                     std::string reference64, double amplification_threshold,
                     size_t max_amplifiers, std::optional<nb::callable> progress) {
  CompareOptions o;
  if (policy_path) o.policy = unwrap(Policy::load(*policy_path));
  if (policy_text) o.policy = unwrap(Policy::parse(*policy_text, "policy"));
  if (criteria) {
    Criteria c = criteria_from(*criteria);
    if (!c.empty()) o.policy.global = c;
  }
  if (mapping_path) o.names = unwrap(NameMap::load(*mapping_path));
  for (auto& r : rename_rules(map_a)) o.names.reference.push_back(std::move(r));
  for (auto& r : rename_rules(map_b)) o.names.candidate.push_back(std::move(r));
  for (auto& e : exact) o.names.exact.push_back(std::move(e));
  if (pairing == "name")
    o.pairing = Pairing::by_name;
  else if (pairing == "positional")
    o.pairing = Pairing::positional;
  else
    raise(Errc::invalid_argument,
          "pairs='" + std::string(pairing) + "' is not one of name, positional");
  o.filter = std::move(filter);
  o.reshape = reshape;
  o.nan_equal = nan_equal;
  o.stop_at_first = stop_at_first;
  o.allow_unpaired = allow_unpaired;
  o.allow_incomparable = allow_incomparable;
  o.threads = threads;
  o.reference64 = std::move(reference64);
  o.amplification_threshold = amplification_threshold;
  o.max_amplifiers = max_amplifiers;
  if (progress) {
    nb::callable cb = *progress;
    // Runs on the calling thread while the GIL is released; a callback error must not unwind
    // through the engine, so it is reported as unraisable and the comparison goes on.
    o.progress = [cb](size_t done, size_t total) {
      nb::gil_scoped_acquire locked;
      try {
        cb(done, total);
      } catch (nb::python_error& e) {
        e.discard_as_unraisable("driftscope.compare progress callback");
      }
    };
  }

  std::shared_ptr<const Reader> ref = reference.reader, cand = candidate.reader;
  std::optional<Result<Report>> result;
  {
    nb::gil_scoped_release unlocked;
    result.emplace(compare(*ref, *cand, o));
  }
  Report report = unwrap(std::move(*result));
  if (report.reference.path.empty()) report.reference.path = reference.path;
  if (report.candidate.path.empty()) report.candidate.path = candidate.path;
  return PyReport{std::make_shared<const Report>(std::move(report))};
}

}  // namespace

void bind_compare(nb::module_& m) {
  nb::class_<PyReport>(m, "Report")
      .def_prop_ro("verdict",
                   [](const PyReport& r) { return std::string(verdict_name(r.report->verdict)); })
      .def_prop_ro("summary", [](const PyReport& r) { return r.report->summary; })
      .def_prop_ro("exit_code", [](const PyReport& r) { return verdict_exit_code(r.report->verdict); })
      .def(
          "to_json",
          [](const PyReport& r, int indent) {
            std::shared_ptr<const Report> keep = r.report;
            std::string out;
            {
              nb::gil_scoped_release unlocked;
              out = report_to_json(*keep, indent);
            }
            return out;
          },
          nb::arg("indent") = 2)
      .def("to_markdown", [](const PyReport& r) { return report_to_markdown(*r.report); })
      .def(
          "to_text",
          [](const PyReport& r, bool color, unsigned width, bool all) {
            TextOptions t;
            t.color = color;
            t.width = width;
            t.all = all;
            return report_to_text(*r.report, t);
          },
          nb::arg("color") = false, nb::arg("width") = 100, nb::arg("all") = false);

  m.def("compare", &run_compare, nb::arg("reference"), nb::arg("candidate"),
        nb::arg("criteria").none(), nb::arg("policy_text").none(),
        nb::arg("policy_path").none(), nb::arg("map_a"), nb::arg("map_b"), nb::arg("exact"),
        nb::arg("mapping_path").none(), nb::arg("pairs"), nb::arg("filter"),
        nb::arg("reshape"), nb::arg("nan_equal"), nb::arg("stop_at_first"),
        nb::arg("allow_unpaired"), nb::arg("allow_incomparable"), nb::arg("threads"),
        nb::arg("reference64"), nb::arg("amplification_threshold"),
        nb::arg("max_amplifiers"), nb::arg("progress").none());
}

}  // namespace driftscope::py
