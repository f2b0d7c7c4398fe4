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
#include <string>
#include <string_view>
#include <vector>

#include "driftscope/api.h"
#include "driftscope/error.hpp"
#include "driftscope/reader.hpp"
#include "driftscope/tensor.hpp"

namespace driftscope {

struct DS_API CheckOptions {
  std::vector<std::string> dynamic_axes;  // axis names allowed several sizes (plus the run's
                                          // `dynamic_axes` metadata)
  std::vector<std::string> ignore;        // finding codes not to report
  double norm_tolerance = 0.05;     // |mean| and |var - 1| (RMS: |mean square - 1|) of a slice
  double softmax_tolerance = 1e-3;  // |sum - 1| of a slice (float16/bfloat16: 10 x this)
  double bad_slice_fraction = 0.01; // a normalisation/softmax finding needs more bad slices
  double f16_near_overflow = 32768; // |x| >= this in a float16 tensor (max 65504)
  double saturation_fraction = 0.01;  // INT8/UINT8 elements at a saturating extreme
  // Parses and checks the values: invalid_argument naming the option and its allowed range.
  Result<void> validate() const;
};

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
