// The checks by axis name (docs/axes.md §3.1): one judge of the facts a recorder wrote (axis
// names, `axes_from`, `axes_ops`, `norm_axes`, `softmax_axis`), called by `driftscope check` for
// one run and by compare for each run of a comparison (Report::axes_findings), so the two can
// never disagree about what is a finding.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "driftscope/reader.hpp"
#include "driftscope/tensor.hpp"

namespace driftscope::compare_detail {

inline constexpr std::string_view kAxesCodes[] = {"norm_over", "softmax_over", "reduce_over_batch",
                                                  "broadcast_conflict", "concat_mismatch"};

struct AxesFinding {
  std::string code, message;
  double value = 0;  // the axis index, or the size of the axes that met (broadcast_conflict)
};
struct AxesJudgement {
  std::vector<AxesFinding> findings;  // at most one per code
  bool malformed = false;             // some `axes_ops` entry could not be read (not judged)
};
// The by-name findings of one record; codes in `ignore` are not reported.
AxesJudgement judge_axes(const TensorInfo& t, std::span<const std::string> ignore = {});
// Whether judge_axes can find anything in the record (a cheap test before the work).
bool has_axes_facts(const TensorInfo& t);

// One `axes_ops` entry: kind, op, names, sizes, axes, names2, sizes2, trail (tab-separated).
struct AxesEvent {
  std::string kind, op, trail;
  std::vector<std::string> names, names2;  // "?" or "": unnamed
  std::vector<uint64_t> sizes, sizes2;
  std::vector<uint32_t> axes;
};
// nullopt: malformed (a producer's free text under a reserved key).
std::optional<AxesEvent> parse_axes_event(std::string_view line);

// Report::axes_findings of a comparison: every paired record (`records`: per pair, its record
// indexes) and every unpaired one of both runs judged by judge_axes, a pair's two findings of
// one code merged into one "both" entry. Cost: one meta decoding per record, `threads` wide.

// Shared with the rest of check: the value of an attribute ("" when absent), comma lists, and
// "-1", "2", "-2,-1" or axis names as sorted axis indexes (nullopt: names no axis of the tensor).
std::string_view attr_value(const TensorInfo& t, std::string_view key);
std::vector<std::string> split_list(std::string_view v);
std::vector<std::string> split_on(std::string_view v, char sep);
std::string lowered(std::string_view s);
std::optional<std::vector<uint32_t>> parse_axis_list(std::string_view v, const TensorInfo& t);

}  // namespace driftscope::compare_detail
