// driftscope._core.import_file / export_file over include/driftscope/interop.hpp. The Python
// wrapper (python/driftscope/_interop.py) turns the dicts returned here into result objects.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "py_core.hpp"
#include "driftscope/interop.hpp"

namespace driftscope::py {

namespace {

std::optional<InteropFormat> parse_format(const std::optional<std::string>& f, bool allow_npy) {
  if (!f || f->empty()) return std::nullopt;
  if (*f == "npz") return InteropFormat::npz;
  if (*f == "safetensors") return InteropFormat::safetensors;
  if (*f == "npy" && allow_npy) return InteropFormat::npy;
  raise(Errc::invalid_argument, "format '" + *f + "' is not one of " +
                                    (allow_npy ? "npz, npy, safetensors" : "npz, safetensors"));
}

}  // namespace

void bind_interop(nb::module_& m) {
  m.def(
      "import_file",
      [](const std::string& src, const std::string& dst, const std::optional<std::string>& format,
         const std::string& filter, const std::vector<std::pair<std::string, std::string>>& meta,
         std::optional<uint64_t> salt) {
        ImportOptions o;
        o.format = parse_format(format, true);
        o.filter = filter;
        o.metadata = meta;
        o.fixed_salt = salt.has_value();
        o.salt = salt.value_or(0);
        std::optional<Result<ImportResult>> r;
        {
          nb::gil_scoped_release unlocked;
          r.emplace(import_file(src, dst, o));
        }
        ImportResult res = unwrap(std::move(*r));
        nb::dict d;
        d["format"] = std::string(interop_format_name(res.format));
        d["written"] = res.written;
        d["filtered"] = res.filtered;
        d["payload_bytes"] = res.payload_bytes;
        d["skipped"] = res.skipped;
        d["notes"] = res.notes;
        return d;
      },
      nb::arg("src"), nb::arg("dst"), nb::arg("format") = nb::none(), nb::arg("filter") = "",
      nb::arg("meta") = std::vector<std::pair<std::string, std::string>>(),
      nb::arg("salt") = nb::none());
  m.def(
      "export_file",
      [](const std::string& src, const std::string& dst, const std::optional<std::string>& format,
         const std::string& filter, bool compress, bool raw_quantized) {
        ExportOptions o;
        o.format = parse_format(format, false);
        o.filter = filter;
        o.compress = compress;
        o.raw_quantized = raw_quantized;
        std::optional<Result<ExportResult>> r;
        {
          nb::gil_scoped_release unlocked;
          r.emplace(export_file(src, dst, o));
        }
        ExportResult res = unwrap(std::move(*r));
        nb::dict d;
        d["format"] = std::string(interop_format_name(res.format));
        d["written"] = res.written;
        d["widened"] = res.widened;
        d["dequantized"] = res.dequantized;
        d["summaries_skipped"] = res.summaries_skipped;
        d["warnings"] = res.warnings;
        return d;
      },
      nb::arg("src"), nb::arg("dst"), nb::arg("format") = nb::none(), nb::arg("filter") = "",
      nb::arg("compress") = false, nb::arg("raw_quantized") = false);
}

}  // namespace driftscope::py
