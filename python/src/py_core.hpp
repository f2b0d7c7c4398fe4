// driftscope._core — shared helpers of the nanobind extension. The extension is a client of the
// public C++ API only (include/driftscope/*.hpp); Python-facing policy (exception classes, the
// Dump and Writer classes users see) lives in python/driftscope/*.py.
#pragma once

#include <bit>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include <nanobind/nanobind.h>

#include "driftscope/error.hpp"
#include "driftscope/options.hpp"
#include "driftscope/reader.hpp"
#include "driftscope/tensor.hpp"

// Payloads are little-endian (docs/format.md §1) and arrays are handed to numpy in place.
static_assert(std::endian::native == std::endian::little,
              "driftscope._core maps payloads zero-copy and needs a little-endian host");

namespace driftscope::py {

namespace nb = nanobind;

// An open dump as the extension holds it: shared by Record objects and by arrays over the map.
struct PyReader {
  std::shared_ptr<const Reader> reader;
  std::string path;
};

// Builds the Python exception for `e` through driftscope.errors (the one mapping table,
// docs/python.md) without raising it.
nb::object make_exception(const Error& e);
// Sets that exception as the pending Python error and unwinds to nanobind. Call with the GIL held.
[[noreturn]] void raise(const Error& e);
[[noreturn]] void raise(Errc code, std::string message);

template <class T>
T unwrap(Result<T>&& r) {
  if (!r.ok()) raise(r.error());
  return std::move(r).value();
}
inline void check(Result<void>&& r) {
  if (!r.ok()) raise(r.error());
}

// "output" / "input" / "parameter" / "other".
Role parse_role(std::string_view text);
// A dtype name or alias of parse_dtype ("f32", "float32", "bfloat16", ...).
DType parse_dtype_or_raise(std::string_view text);

// An option table's rows (driftscope/options.hpp) as a list of dicts: name, type, scope, role,
// flags, keyword, range (lo, hi) or None, choices, group, help, metavar (_core.compare_options(),
// _core.check_options(), _core.guard_criteria_options(); py_compare.cpp).
nb::list option_rows(std::span<const OptionSpec> specs);

void bind_errors(nb::module_& m);
void bind_reader(nb::module_& m);
void bind_writer(nb::module_& m);
void bind_compare(nb::module_& m);
void bind_check(nb::module_& m);
void bind_interop(nb::module_& m);
void bind_judge(nb::module_& m);

}  // namespace driftscope::py
