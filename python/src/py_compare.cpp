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

#include "py_core.hpp"
#include "driftscope/compare.hpp"
#include "driftscope/compare_options.hpp"
#include "driftscope/dumpset.hpp"
#include "driftscope/report.hpp"

namespace driftscope::py {

namespace {

struct PyReport {
  std::shared_ptr<const Report> report;
};

PyReport finish(Report report, const PyReader& reference, const PyReader& candidate);

// Settings arrive as driftscope.compare()'s keyword arguments and are checked by the library's
// one validator (CompareSettings::resolve), the same as the command's flags and the C ABI's JSON.
CompareOptions resolve_with_progress(const CompareSettings& settings, std::optional<nb::callable> progress) {
  CompareOptions o = unwrap(settings.resolve());
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
  return o;
}

PyReport run_compare(const PyReader& reference, const PyReader& candidate,
                     const CompareSettings& settings, std::optional<nb::callable> progress) {
  CompareOptions o = resolve_with_progress(settings, std::move(progress));
  std::shared_ptr<const Reader> ref = reference.reader, cand = candidate.reader;
  std::optional<Result<Report>> result;
  {
    nb::gil_scoped_release unlocked;
    result.emplace(compare(*ref, *cand, o));
  }
  return finish(unwrap(std::move(*result)), reference, candidate);
}

PyReport finish(Report report, const PyReader& reference, const PyReader& candidate) {
  if (report.reference.path.empty()) report.reference.path = reference.path;
  if (report.candidate.path.empty()) report.candidate.path = candidate.path;
  return PyReport{std::make_shared<const Report>(std::move(report))};
}

// A comparison in parts (compare.hpp; driftscope/_compare/ray.py runs the parts as Ray tasks).
std::vector<size_t> run_work(const PyReader& reference, const PyReader& candidate,
                             const CompareSettings& settings) {
  CompareOptions o = unwrap(settings.resolve());
  std::optional<Result<std::vector<size_t>>> result;
  {
    nb::gil_scoped_release unlocked;
    result.emplace(compare_work(*reference.reader, *candidate.reader, o));
  }
  return unwrap(std::move(*result));
}

nb::bytes run_measure(const PyReader& reference, const PyReader& candidate, const CompareSettings& settings,
                      const std::vector<size_t>& pairs) {
  CompareOptions o = unwrap(settings.resolve());
  std::optional<Result<std::string>> result;
  {
    nb::gil_scoped_release unlocked;
    result.emplace(measure_pairs(*reference.reader, *candidate.reader, o, pairs));
  }
  std::string blob = unwrap(std::move(*result));
  return nb::bytes(blob.data(), blob.size());
}

PyReport run_assemble(const PyReader& reference, const PyReader& candidate, const CompareSettings& settings,
                      const std::vector<nb::bytes>& parts) {
  CompareOptions o = unwrap(settings.resolve());
  std::vector<std::string> blobs;
  blobs.reserve(parts.size());
  for (const nb::bytes& b : parts) blobs.emplace_back(b.c_str(), b.size());
  std::optional<Result<Report>> result;
  {
    nb::gil_scoped_release unlocked;
    result.emplace(assemble_report(*reference.reader, *candidate.reader, o, blobs));
  }
  return finish(unwrap(std::move(*result)), reference, candidate);
}

// Paths, either of which may be a dump set (docs/dumpsets.md): compare_files decides.
PyReport run_compare_files(const std::string& reference, const std::string& candidate,
                           const CompareSettings& settings, std::optional<nb::callable> progress) {
  CompareOptions o = resolve_with_progress(settings, std::move(progress));
  std::optional<Result<Report>> result;
  {
    nb::gil_scoped_release unlocked;
    result.emplace(compare_files(reference, candidate, o));
  }
  return PyReport{std::make_shared<const Report>(unwrap(std::move(*result)))};
}

// A set comparison in parts (compare.hpp prepare_sets; driftscope/_compare/ray.py): the logical dumps are
// written in `directory`, compared by the parts API, and finish() makes their report the sets'.
struct PySetComparison {
  std::shared_ptr<const SetComparison> prepared;
};

PySetComparison run_prepare_sets(const std::string& reference, const std::string& candidate,
                                 const CompareSettings& settings, const std::string& directory) {
  CompareOptions o = unwrap(settings.resolve());
  std::optional<Result<SetComparison>> result;
  {
    nb::gil_scoped_release unlocked;
    result.emplace(prepare_sets(reference, candidate, o, directory));
  }
  return PySetComparison{std::make_shared<const SetComparison>(unwrap(std::move(*result)))};
}

PyReport run_finish_sets(const PySetComparison& prepared, const PyReport& logical) {
  Report report = *logical.report;
  if (auto ok = prepared.prepared->finish(report); !ok) raise(ok.error());
  return PyReport{std::make_shared<const Report>(std::move(report))};
}

// The validated manifest of a set, its rank metadata checked (DumpSet::open, one implementation).
nb::dict open_set(const std::string& path) {
  std::optional<Result<DumpSet>> opened;
  {
    nb::gil_scoped_release unlocked;
    OpenOptions oo;
    oo.verify = Verify::frames;
    opened.emplace(DumpSet::open(path, oo));
  }
  DumpSet s = unwrap(std::move(*opened));
  if (auto ok = s.check_rank_metadata(); !ok) raise(ok.error());
  nb::dict d;
  d["path"] = s.path;
  d["directory"] = s.directory;
  d["world_size"] = s.world_size;
  nb::list groups;
  for (const auto& [g, n] : s.groups) groups.append(nb::make_tuple(g, n));
  d["groups"] = groups;
  d["order"] = s.order == SetOrder::lockstep ? "lockstep" : "pipeline";
  nb::list ranks;
  for (const RankEntry& e : s.ranks) {
    nb::dict coords;
    for (size_t i = 0; i < s.groups.size(); ++i) coords[nb::str(s.groups[i].first.c_str())] = e.coords[i];
    ranks.append(nb::make_tuple(e.rank, e.file, e.path, coords));
  }
  d["ranks"] = ranks;
  nb::list meta;
  for (const auto& [k, v] : s.metadata) meta.append(nb::make_tuple(k, v));
  d["metadata"] = meta;
  return d;
}

}  // namespace

nb::list option_rows(std::span<const OptionSpec> specs) {
  auto words = [](std::string_view text) {  // "a,b" -> ["a", "b"]
    nb::list out;
    while (!text.empty()) {
      size_t comma = text.find(',');
      out.append(std::string(text.substr(0, comma)));
      text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    }
    return out;
  };
  nb::list rows;
  for (const OptionSpec& o : specs) {
    nb::dict d;
    d["name"] = std::string(o.name);
    d["type"] = std::string(option_type_name(o.type));
    d["scope"] = o.scope == OptionScope::settings ? "settings" : "command";
    d["role"] = o.role == OptionRole::input_file    ? "input_file"
                : o.role == OptionRole::output_file ? "output_file"
                                                    : "value";
    d["flags"] = words(o.flag);
    d["keyword"] = std::string(o.keyword);
    d["range"] = o.lo == o.hi ? nb::object(nb::none()) : nb::object(nb::make_tuple(o.lo, o.hi));
    d["choices"] = words(o.choices);
    d["group"] = std::string(o.group);
    d["help"] = std::string(o.help);
    d["metavar"] = std::string(o.metavar);
    rows.append(d);
  }
  return rows;
}

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
      .def("to_html", [](const PyReport& r) { return report_to_html(*r.report); })
      .def("to_model_explorer", [](const PyReport& r) { return report_to_model_explorer(*r.report); })
      .def(
          "to_png",
          [](const PyReport& r, unsigned width, unsigned height) {
            std::string png = unwrap(report_to_png(*r.report, PlotOptions{width, height}));
            return nb::bytes(png.data(), png.size());
          },
          nb::arg("width") = 960, nb::arg("height") = 420)
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

  // Plain fields, no checks: CompareSettings::resolve() is the validator. The fields are the
  // rows of compare_options.hpp, which _core.compare_options() returns as data.
  auto settings = nb::class_<CompareSettings>(m, "CompareSettings").def(nb::init<>());
  auto command = nb::class_<CompareCommandOptions>(m, "CompareCommandOptions").def(nb::init<>());
#define DS_BIND_SETTING_(type, name, ...) settings.def_rw(#name, &CompareSettings::name);
#define DS_BIND_COMMAND_(type, name, ...) command.def_rw(#name, &CompareCommandOptions::name);
  DRIFTSCOPE_COMPARE_SETTINGS(DS_BIND_SETTING_)
  DRIFTSCOPE_COMPARE_COMMAND(DS_BIND_COMMAND_)
#undef DS_BIND_SETTING_
#undef DS_BIND_COMMAND_
  settings.def("to_json", [](const CompareSettings& s) { return compare_options_to_json(s); });

  // The table itself: the Python command's argparse, compare()'s keyword handling and the
  // docs check are built from it (driftscope/_compare/).
  m.def("compare_options", [] { return option_rows(compare_option_specs()); });
  // The settings (and command options) from the JSON of compare_options_to_json: what the
  // command hands to the Ray engine and what the Ray engine hands to its tasks.
  m.def(
      "compare_options_from_json",
      [](const std::string& text) {
        CompareSettings s;
        CompareCommandOptions c;
        if (auto ok = compare_options_from_json(text, s, &c); !ok) raise(ok.error());
        return nb::make_tuple(s, c);
      },
      nb::arg("text"));
  m.def(
      "compare_options_to_json",
      [](const CompareSettings& s, std::optional<CompareCommandOptions> c) {
        return compare_options_to_json(s, c ? &*c : nullptr);
      },
      nb::arg("settings"), nb::arg("command") = nb::none());
  m.def(
      "check_compare_outputs",
      [](const std::string& reference, const std::string& candidate, const CompareSettings& s,
         const CompareCommandOptions& c) -> std::optional<std::string> {
        // The one-line message the command prints (no code prefix), or None.
        if (auto ok = check_compare_outputs(reference, candidate, s, c); !ok) return ok.error().message;
        return std::nullopt;
      },
      nb::arg("reference"), nb::arg("candidate"), nb::arg("settings"), nb::arg("command"));
  m.def(
      "compare_inputs",
      [](const std::string& reference, const std::string& candidate, const CompareSettings& s) {
        return compare_inputs(reference, candidate, s);
      },
      nb::arg("reference"), nb::arg("candidate"), nb::arg("settings"));

  m.def("compare", &run_compare, nb::arg("reference"), nb::arg("candidate"), nb::arg("settings"),
        nb::arg("progress").none());
  m.def("compare_work", &run_work, nb::arg("reference"), nb::arg("candidate"), nb::arg("settings"));
  m.def("compare_measure", &run_measure, nb::arg("reference"), nb::arg("candidate"), nb::arg("settings"),
        nb::arg("pairs"));
  m.def("compare_assemble", &run_assemble, nb::arg("reference"), nb::arg("candidate"), nb::arg("settings"),
        nb::arg("parts"));
  m.def("compare_files", &run_compare_files, nb::arg("reference"), nb::arg("candidate"),
        nb::arg("settings"), nb::arg("progress").none());
  nb::class_<PySetComparison>(m, "SetComparison")
      .def_prop_ro("reference_dump", [](const PySetComparison& p) { return p.prepared->reference_dump; })
      .def_prop_ro("candidate_dump", [](const PySetComparison& p) { return p.prepared->candidate_dump; })
      .def("finish", &run_finish_sets, nb::arg("report"));
  m.def("prepare_sets", &run_prepare_sets, nb::arg("reference"), nb::arg("candidate"), nb::arg("settings"),
        nb::arg("directory"));
  m.def("open_set", &open_set, nb::arg("path"));
  m.def("is_dump_set_path", [](const std::string& p) { return is_dump_set_path(p); }, nb::arg("path"));
}

}  // namespace driftscope::py
