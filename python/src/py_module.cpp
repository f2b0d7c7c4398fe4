// driftscope._core: module definition, error translation, filters and dtype helpers.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "py_core.hpp"
#include "driftscope/dataflow.hpp"
#include "driftscope/dtype.hpp"
#include "driftscope/error.hpp"
#include "driftscope/file.hpp"
#include "driftscope/filter.hpp"
#include "driftscope/simd.hpp"
#include "driftscope/summary.hpp"
#include "driftscope/text.hpp"

namespace driftscope::py {

nb::object make_exception(const Error& e) {
  // The table lives in Python so that docs, stubs and the classes users catch have one source.
  nb::object errors = nb::module_::import_("driftscope.errors");
  nb::object offset = nb::none();
  if (e.offset != kNoOffset) offset = nb::int_(e.offset);
  return errors.attr("_from_core")(static_cast<int>(e.code), std::string(errc_name(e.code)),
                                   e.to_string(), offset);
}

void raise(const Error& e) {
  nb::object exc = make_exception(e);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw nb::python_error();
}

void raise(Errc code, std::string message) { raise(make_error(code, std::move(message))); }

Role parse_role(std::string_view text) {
  if (text == "output") return Role::output;
  if (text == "input") return Role::input;
  if (text == "parameter") return Role::parameter;
  if (text == "other") return Role::other;
  raise(Errc::invalid_argument,
        "role '" + std::string(text) + "' is not one of output, input, parameter, other");
}

DType parse_dtype_or_raise(std::string_view text) {
  auto t = parse_dtype(text);
  if (!t)
    raise(Errc::invalid_argument,
          "dtype '" + std::string(text) +
              "' is not a TDUMP dtype (f64 f32 f16 bf16 f8e4m3fn f8e5m2 i64 i32 i16 i8 u8 bool "
              "u16 u32 u64, or an alias such as float32)");
  return *t;
}

namespace {

struct PyFilter {
  Filter filter;
};

void bind_filter(nb::module_& m) {
  nb::class_<PyFilter>(m, "Filter")
      .def(
          "__init__",
          [](PyFilter* self, std::string_view text) {
            new (self) PyFilter{unwrap(Filter::parse(text))};
          },
          nb::arg("text") = "")
      .def(
          "accepts",
          [](const PyFilter& self, std::string name, std::string op_type, std::string_view role,
             std::string_view dtype, std::vector<uint64_t> shape, uint64_t exec_index) {
            TensorInfo info;
            info.name = std::move(name);
            info.op_type = std::move(op_type);
            info.role = parse_role(role);
            info.dtype = parse_dtype_or_raise(dtype);
            info.shape = std::move(shape);
            return self.filter.accepts(info, exec_index);
          },
          nb::arg("name"), nb::arg("op_type") = "", nb::arg("role") = "output",
          nb::arg("dtype") = "f32", nb::arg("shape") = std::vector<uint64_t>{},
          nb::arg("exec_index") = 0)
      .def("may_accept_name",
           [](const PyFilter& self, std::string_view name) { return self.filter.may_accept_name(name); })
      .def_prop_ro("byte_budget", [](const PyFilter& self) { return self.filter.byte_budget(); })
      .def_prop_ro("empty", [](const PyFilter& self) { return self.filter.empty(); })
      .def("__str__", [](const PyFilter& self) { return self.filter.to_string(); })
      .def("__repr__",
           [](const PyFilter& self) { return "Filter('" + self.filter.to_string() + "')"; });

  m.def("glob_match", &glob_match, nb::arg("pattern"), nb::arg("text"));
  // driftscope::printable for the Python front end (driftscope._text), so every front end
  // escapes one way: the bytes are UTF-8 where valid, raw where not (a name read from a file).
  m.def(
      "printable",
      [](nb::bytes text) { return printable(std::string_view(text.c_str(), text.size())); },
      nb::arg("text"));
  // The output-file rules of include/driftscope/file.hpp for every Python front end (_cli.py):
  // an output never names an input (also through a link); a stream (FIFO, character device) is
  // written in place, anything else through a temporary file renamed into place.
  // Paths come as bytes (os.fsencode): a name that is not UTF-8 is still the file's name, where
  // a str argument would fail to convert. The message comes back as bytes for the same reason.
  const auto path_of = [](nb::bytes b) { return std::string(b.c_str(), b.size()); };
  const auto paths_of = [path_of](const std::vector<nb::bytes>& bs) {
    std::vector<std::string> out;
    out.reserve(bs.size());
    for (const auto& b : bs) out.push_back(path_of(b));
    return out;
  };
  m.def(
      "refuse_input_as_output",
      [path_of, paths_of](nb::bytes out, const std::vector<nb::bytes>& inputs) -> std::optional<nb::bytes> {
        // The one-line message, worded as the commands print it (no code prefix), or None.
        if (auto ok = refuse_input_as_output(path_of(out), paths_of(inputs)); !ok)
          return nb::bytes(ok.error().message.data(), ok.error().message.size());
        return std::nullopt;
      },
      nb::arg("output"), nb::arg("inputs"));
  m.def(
      "write_output_file",
      [path_of, paths_of](nb::bytes path, nb::bytes data, const std::vector<nb::bytes>& inputs) {
        std::string_view bytes(data.c_str(), data.size());
        const std::string target = path_of(path);
        const std::vector<std::string> reads = paths_of(inputs);
        std::optional<Result<void>> written;
        {
          nb::gil_scoped_release unlocked;
          written.emplace(write_output_file(target, bytes, reads));
        }
        if (!*written) raise(written->error());
      },
      nb::arg("path"), nb::arg("data"), nb::arg("inputs") = std::vector<nb::bytes>{});
  // The data-flow attributes (docs/format.md §3.3.3): one grammar for every recorder.
  using Ref = std::tuple<std::string, std::string, int64_t, int64_t>;
  m.def(
      "format_inputs",
      [](const std::vector<Ref>& refs) {
        std::vector<TensorRef> out;
        for (const auto& [name, role, role_index, occurrence] : refs) {
          if (name.empty()) raise(Errc::invalid_argument, "format_inputs: empty tensor name");
          if (role_index < 0 || role_index > 0xFFFF || occurrence < 0 ||
              occurrence > int64_t{0xFFFFFFFF})
            raise(Errc::invalid_argument, "format_inputs: role_index or occurrence out of range");
          out.push_back({name, parse_role(role), static_cast<uint16_t>(role_index),
                         static_cast<uint32_t>(occurrence)});
        }
        return format_inputs(out);
      },
      nb::arg("refs"));
  m.def(
      "parse_inputs",
      [](std::string_view text) {
        std::vector<Ref> out;
        for (const TensorRef& r : unwrap(parse_inputs(text)))
          out.emplace_back(std::string(r.name()), std::string(role_name(r.role)), r.role_index, r.occurrence);
        return out;
      },
      nb::arg("text"));
}

}  // namespace

void bind_errors(nb::module_& m) {
  m.def(
      "errc_name", [](int code) { return std::string(errc_name(static_cast<Errc>(code))); },
      nb::arg("code"));
  // Every code the C++ enum defines, for the mapping test and the docs table.
  m.def("error_codes", [] {
    std::vector<std::pair<int, std::string>> out;
    for (int c = 0; c < 128; ++c) {
      auto name = errc_name(static_cast<Errc>(c));
      if (name != "unknown") out.emplace_back(c, std::string(name));
    }
    return out;
  });
  // Raises the exception a C++ Error with this code becomes: the same path as every binding.
  m.def(
      "_raise_error",
      [](int code, std::string message) { raise(static_cast<Errc>(code), std::move(message)); },
      nb::arg("code"), nb::arg("message"));
}

}  // namespace driftscope::py

NB_MODULE(_core, m) {
  using namespace driftscope;
  namespace nb = nanobind;
  m.doc() = "driftscope native core (private): use the driftscope package instead.";
  m.attr("__version__") = DRIFTSCOPE_VERSION;
  // DRIFTSCOPE_SIMD, as the driftscope command reads it (docs/cli.md "Environment"): a value this
  // CPU cannot run stops the import, as numpy's NPY_DISABLE_CPU_FEATURES does.
  if (auto simd = use_simd_target_from_env(); !simd) throw std::invalid_argument(simd.error().message);
  m.def("simd_target", &simd_target, "The SIMD target the kernels run (include/driftscope/simd.hpp).");
  m.def("simd_targets", &simd_targets, "The SIMD targets this build runs on this CPU, best first.");
  m.attr("DEFAULT_PROJECTION_DIM") = kDefaultProjectionDim;
  m.attr("DEFAULT_PROJECTION_SEED") = kDefaultProjectionSeed;

  m.def(
      "dtype_info",
      [](std::string_view name) {
        DType t = py::parse_dtype_or_raise(name);
        return nb::make_tuple(std::string(dtype_name(t)), static_cast<int>(t), dtype_size(t),
                              dtype_is_float(t), dtype_is_integer(t));
      },
      nb::arg("name"),
      "(canonical name, code, element size, is_float, is_integer) of a dtype name or alias.");

  py::bind_errors(m);
  py::bind_filter(m);
  py::bind_reader(m);
  py::bind_writer(m);
  py::bind_compare(m);
  py::bind_check(m);
  py::bind_interop(m);
  py::bind_judge(m);
}
