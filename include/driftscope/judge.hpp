// driftscope — one judge (docs/metrics.md §9 "Statuses"): the statuses a pair or an output can
// get, the reason codes behind them and the thresholds of each criteria profile. `driftscope
// compare` and `driftscope check` judge with the compare profile (compare.hpp: per-dtype
// criteria, relative silent-zero rule); `driftscope guard` judges every output of every backend
// with the guard profile (GuardCriteria below) through judge_output(), bound to Python as
// driftscope._core.judge_output. Both judges measure with the same float64 pass (compare_pair).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "driftscope/api.h"
#include "driftscope/error.hpp"
#include "driftscope/options.hpp"
#include "driftscope/tensor.hpp"

namespace driftscope {

// A guard output's status, worst last: an output takes the worst status one of its reason codes
// maps to (status_table()). The names are the guard's ("SILENT_ZERO_VECTOR").
enum class OutputStatus : uint8_t {
  pass,
  argmax_flip,
  precision_degradation,
  constant_output,
  silent_zero_vector,
  numerical_instability,
};
DS_API std::string_view output_status_name(OutputStatus s) noexcept;

// One row of the status table: a reason code, whether it is a silent failure (compare's
// `silent_failure`, check's finding of the same code, the guard's exit status 3) or a plain
// failure, and the guard status it gives an output.
struct StatusRule {
  std::string_view code;
  bool silent;
  OutputStatus guard;
};
// Every code the judges emit for a value-level failure, in the order they are checked.
DS_API std::span<const StatusRule> status_table() noexcept;

// The compare profile's silent-zero rule: a candidate whose norm is below this fraction of a
// healthy reference's has vanished (`norm_vanished`).
inline constexpr double kVanishedNormRatio = 1e-6;

// The guard criteria profile, declared once (issue 25 item 4; the columns are driftscope/
// options.hpp's, plus the argparse metavar): the rows make GuardCriteria's fields and defaults (the
// guard's seed thresholds), validate()'s ranges (options/option_validate.cpp, the one validator of
// judging options), _core.GUARD_CRITERIA_DEFAULTS and _core.guard_criteria_options(), from which
// the Python command builds its flags, their help and their defaults (driftscope/_guard/
// _command.py; docs/howto/guard.md §5). tests/python/test_guard_option_table.py holds them to it.
// Special ranges, said by validate(): min_norm must also be finite (an infinite one would call
// every output vanished); decision_threshold may be inf (no decision rule); an infinite
// tolerance or ratio turns its rule off (the probe judges values inside a model without the
// few-values and decision rules).
#define DRIFTSCOPE_GUARD_CRITERIA(X)                                                               \
  X(double, min_cosine, 0.99, "--min-cosine", "min_cosine", value, -1, 1, "", "",                   \
    "PRECISION_DEGRADATION below this cosine similarity (default 0.99)", "C")                      \
  /* absolute silent zero */                                                                       \
  X(double, min_norm, 1e-4, "--min-norm", "min_norm", value, 0, DRIFTSCOPE_GUARD_INF_, "", "",       \
    "SILENT_ZERO_VECTOR below this L2 norm where the reference's is at least this (default 1e-4)",  \
    "N")                                                                                            \
  X(double, max_argmax_flip, 0.0, "--max-argmax-flip", "max_argmax_flip", value, 0, 1, "", "",       \
    "ARGMAX_FLIP when more than this share of positions change their top-1 (default 0: any change)", \
    "F")                                                                                            \
  /* nullopt: rel_error_limit()'s bound */                                                         \
  X(std::optional<double>, max_rel_error, {}, "--max-rel-error", "max_rel_error", value, 0,          \
    DRIFTSCOPE_GUARD_INF_, "", "",                                                                  \
    "PRECISION_DEGRADATION when ||cand - ref|| / ||ref|| exceeds E (default: what --min-cosine and " \
    "--max-norm-ratio allow together, 0.296 at their defaults)",                                    \
    "E")                                                                                            \
  X(double, max_norm_ratio, 1.25, "--max-norm-ratio", "max_norm_ratio", value, 1,                    \
    DRIFTSCOPE_GUARD_INF_, "", "",                                                                  \
    "PRECISION_DEGRADATION when the norm ratio cand/ref is outside [1/R, R] (default 1.25)", "R")   \
  /* few values: |c - r| <= atol + rtol |r| */                                                     \
  X(double, small_atol, 0.01, "", "small_atol", value, 0, DRIFTSCOPE_GUARD_INF_, "", "",             \
    "few values: a value is beyond its tolerance when |c - r| > small_atol + small_rtol |r|", "")   \
  X(double, small_rtol, 0.01, "", "small_rtol", value, 0, DRIFTSCOPE_GUARD_INF_, "", "",             \
    "few values: the relative part of that tolerance", "")                                         \
  /* scores in [0, 1] */                                                                           \
  X(double, decision_threshold, 0.5, "--decision-threshold", "decision_threshold", value, 0, 1, "",  \
    "",                                                                                             \
    "a score output (values in [0, 1]; at most 4, or a last axis of 1) whose value crosses T is a "  \
    "decision flip (default 0.5)",                                                                  \
    "T")                                                                                            \
  /* near-tie of a decision or a top-1 */                                                          \
  X(double, flip_rtol, 1e-4, "", "flip_rtol", value, 0, 1, "", "",                                  \
    "a decision or top-1 within this relative distance of its rival is a near-tie, not a flip", "")

#define DRIFTSCOPE_GUARD_INF_ std::numeric_limits<double>::infinity()

struct DS_API GuardCriteria {
  DRIFTSCOPE_GUARD_CRITERIA(DRIFTSCOPE_OPTION_FIELD_)
  // --max-rel-error, or the largest relative error the cosine and norm-ratio rules allow
  // together: with cos >= C and norm ratio rho <= R, ||c - r||^2 / ||r||^2 = rho^2 - 2 rho cos
  // + 1 <= R^2 - 2RC + 1 (0.296 at the defaults), so it never contradicts a relaxed min_cosine.
  double rel_error_limit() const noexcept;
};
// Errc::invalid_argument "guard option 'min_cosine' is 1.5, allowed -1 .. 1".
DS_API Result<void> validate(const GuardCriteria& criteria);
// The rows of DRIFTSCOPE_GUARD_CRITERIA (scope settings; metavar: the Python flag's).
DS_API std::span<const OptionSpec> guard_criteria_specs() noexcept;

// At most this many values: a cosine cannot judge an output (two one-element vectors have cosine
// +-1), so it is judged element by element.
inline constexpr uint64_t kFewValues = 4;

// One output judged against the reference's: codes and figures only. Its sentences ("cosine
// 0.981234 < 0.99") are the report layer's (report.hpp guard_output_detail). Values not computed
// are NaN.
struct OutputJudgement {
  OutputStatus status = OutputStatus::pass;
  std::vector<std::string_view> codes;  // status_table() codes that held, in table order
  uint64_t count = 0, finite_pairs = 0;  // elements; positions finite on both sides (F)
  uint64_t nan = 0, inf = 0;            // candidate NaN / Inf where the reference is finite
  double norm_ref = 0, norm_cand = 0;   // over each side's finite values
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  double cosine = kNaN, max_diff = kNaN, rel_error = kNaN;  // over positions finite on both
  double norm_ratio = kNaN, argmax_flip = kNaN;
  uint64_t beyond = 0;                  // few values: values beyond small_atol + small_rtol |r|
  int64_t worst = -1;                   // few values: where |c - r| is largest (flat index)
  double worst_ref = kNaN, worst_cand = kNaN;  // the two values there
  uint64_t decisions = 0;               // scores across decision_threshold
  int64_t first_decision = -1;          // the first of them (flat index)
  double decision_ref = kNaN, decision_cand = kNaN;  // the two values there
  uint64_t ties = 0;                    // top-1 swaps within flip_rtol: not counted as flips
  uint64_t positions = 0;               // argmax: positions over the class axis
  bool healthy = false;                 // norm_ref >= min_norm: a vanished output can be told
  double constant_value = kNaN;         // constant_output: the candidate's one value
};

// Judges candidate `cand` against reference `ref` (same dtype-independent element count and
// shape; any dtype decode.hpp reads) with the guard profile. `class_axis`: the axis argmax runs
// over, or nullopt where the output has none. The metrics come from compare_pair's float64 pass
// (docs/metrics.md), the statuses from status_table(). Errors: invalid criteria, shapes that
// differ, a class axis out of range, a payload that does not decode.
DS_API Result<OutputJudgement> judge_output(const TensorInfo& ref, std::span<const std::byte> ref_payload,
                                     const TensorInfo& cand, std::span<const std::byte> cand_payload,
                                     const GuardCriteria& criteria,
                                     std::optional<uint32_t> class_axis = std::nullopt);

}  // namespace driftscope
