// driftscope — checking one run without a reference (docs/axes.md "Checking one run"): what a
// single dump shows by itself. NaN/Inf, all-zero or constant outputs, dead channels, float16
// values near overflow, INT8 saturation; the outputs of normalisation and softmax ops judged
// along the axis their recorder declared (reserved attributes norm_axes, softmax_axis); one axis
// name with two sizes in one run.
//
// check() is a pure function of the dump and the options; each tensor is decoded once, in
// chunks, with float64 accumulation. The library never prints; reports are returned as text.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "driftscope/api.h"
#include "driftscope/error.hpp"
#include "driftscope/options.hpp"
#include "driftscope/reader.hpp"
#include "driftscope/tensor.hpp"

namespace driftscope {

// The options of `driftscope check`, declared once (issue 25 item 4; the columns are
// driftscope/options.hpp's): X(type, name, default, flag, python keyword, role, lo, hi, choices,
// group, help). The rows make CheckOptions' fields, the command's flags (cli/cmd_check.cpp), the
// nanobind fields and _core.check_options() (python/src/py_check.cpp), driftscope.check()'s
// keyword handling, and validate()'s ranges and finding codes (the `ignore` row's choices);
// tests/python/test_check_option_table.py holds the Python signature, the type stub and the docs
// (docs/cli.md) to them.
#define DRIFTSCOPE_CHECK_FINDING_CODES                                                            \
  "nonfinite,all_zero,constant,dead_channels,f16_near_overflow,int8_saturation,norm_axis,"        \
  "softmax_axis,axis_size,norm_over,softmax_over,reduce_over_batch,broadcast_conflict,"            \
  "concat_mismatch"
#define DRIFTSCOPE_CHECK_OPTIONS(X)                                                               \
  /* axis names allowed several sizes (plus the run's `dynamic_axes` metadata) */                 \
  X(std::vector<std::string>, dynamic_axes, {}, "--dynamic", "dynamic_axes", value, 0, 0, "",      \
    "Options", "an axis name that may take several sizes in this run (repeatable)")               \
  X(std::vector<std::string>, ignore, {}, "--ignore", "ignore", value, 0, 0,                       \
    DRIFTSCOPE_CHECK_FINDING_CODES, "Options",                                                     \
    "a finding code not to report, e.g. dead_channels (repeatable)")                              \
  /* |mean| and |var - 1| (RMS: |mean square - 1|) of a slice */                                  \
  X(double, norm_tolerance, 0.05, "--norm-tolerance", "norm_tolerance", value, 0, 1e6, "",        \
    "Options", "allowed |mean| and |variance - 1| of a normalised slice (default 0.05)")          \
  /* |sum - 1| of a slice (float16/bfloat16: 10 x this) */                                        \
  X(double, softmax_tolerance, 1e-3, "--softmax-tolerance", "softmax_tolerance", value, 0, 1e6,   \
    "", "Options",                                                                                 \
    "allowed |sum - 1| of a softmax slice (default 0.001; x10 for float16/bfloat16)")             \
  /* a normalisation/softmax finding needs more bad slices than this */                          \
  X(double, bad_slice_fraction, 0.01, "--bad-slices", "bad_slice_fraction", value, 0, 1, "",       \
    "Options", "fraction of slices that may break the norm/softmax test (default 0.01)")          \
  /* |x| >= this in a float16 tensor (max 65504) */                                               \
  X(double, f16_near_overflow, 32768, "--f16-limit", "f16_near_overflow", value, 0, 65504, "",    \
    "Options", "float16 |x| from which values count as near overflow (default 32768; max 65504)") \
  /* INT8/UINT8 elements at a saturating extreme */                                              \
  X(double, saturation_fraction, 0.01, "--saturation", "saturation_fraction", value, 0, 1, "",     \
    "Options", "INT8/UINT8 fraction at a saturating extreme that is a finding (default 0.01)")

// The command's own options (CheckCommandOptions): its report files and display.
#define DRIFTSCOPE_CHECK_COMMAND(X)                                                               \
  X(std::string, json, {}, "--json", "", output_file, 0, 0, "", "Options",                        \
    "write the JSON report to FILE, '-' for stdout")                                              \
  X(std::string, html, {}, "--html", "", output_file, 0, 0, "", "Options",                        \
    "write one self-contained offline HTML page (findings per tensor, filterable) to FILE, '-' "  \
    "for stdout")                                                                                  \
  X(bool, quiet, false, "-q,--quiet", "", value, 0, 0, "", "Options", "print only the summary line")

struct DS_API CheckOptions {
  DRIFTSCOPE_CHECK_OPTIONS(DRIFTSCOPE_OPTION_FIELD_)
  // Parses and checks the values: invalid_argument naming the option and its allowed range (the
  // rows' lo .. hi; `ignore`: the row's choices).
  Result<void> validate() const;
};

struct CheckCommandOptions {
  DRIFTSCOPE_CHECK_COMMAND(DRIFTSCOPE_OPTION_FIELD_)
};

// The rows of DRIFTSCOPE_CHECK_OPTIONS (scope settings) and DRIFTSCOPE_CHECK_COMMAND (command).
DS_API std::span<const OptionSpec> check_option_specs() noexcept;

// A stable code ("nonfinite", "all_zero", "constant", "dead_channels", "f16_near_overflow",
// "int8_saturation", "norm_axis", "softmax_axis", "axis_size", and by axis name "norm_over",
// "softmax_over", "reduce_over_batch", "broadcast_conflict", "concat_mismatch"; docs/axes.md lists
// them) and one line.
struct CheckFinding {
  std::string code;
  std::string name, op_type;
  Role role = Role::output;
  uint16_t role_index = 0;
  uint32_t occurrence = 0;
  uint64_t exec_index = 0;
  std::string message;
  double value = 0;  // the measured figure the message states (count, fraction, max |x| ...)
};

// The axis names of one record as the recorder left them (docs/axes.md §1.1): for the check page,
// which shows them on every tensor.
struct CheckTensorAxes {
  std::string name;
  Role role = Role::output;
  uint16_t role_index = 0;
  uint32_t occurrence = 0;
  uint64_t exec_index = 0;
  std::vector<uint64_t> shape;
  std::vector<std::string> axes;  // empty where the names stopped
  std::string from, stop;         // attributes axes_from and axes_stop ("" when absent)
};

struct DS_API CheckReport {
  static constexpr std::string_view kSchema = "driftscope.check.report/1";
  std::string path;
  std::string state;                  // file_state_name of the reader's integrity
  uint64_t records = 0, tensors_checked = 0;
  std::vector<CheckFinding> findings; // in file order
  std::vector<std::string> notes;     // what could not be checked, and why
  std::vector<std::string> warnings;  // damaged file: what was read
  // Every record with axis names or an axes_stop note, in file order (at most kMaxTensorAxes;
  // a note counts the rest).
  static constexpr size_t kMaxTensorAxes = 100000;
  std::vector<CheckTensorAxes> tensor_axes;
  std::string summary;                // one line
  // "clean", "findings", or "nothing_checked" (no tensor record: like compare's nothing_compared,
  // not a pass).
  std::string_view verdict() const noexcept;
  // The exit status of `driftscope check` (also Python's CheckReport.exit_code and the JSON's):
  // 0 clean, 1 findings, 2 nothing checked (an unreadable file is 2 as well, as an error).
  int exit_code() const noexcept;
};

// Errors concern the request (bad options) or the file (check_unchanged after reading).
DS_API Result<CheckReport> check(const Reader& reader, const CheckOptions& options = {});
// Opens the file (full verification of frames; payload CRCs as each tensor is read). An error
// opening it does not repeat the path: the caller names the file.
DS_API Result<CheckReport> check_file(const std::string& path, const CheckOptions& options = {});

}  // namespace driftscope
