// The formats of judge/reason_format.hpp. They are judging, not rendering: judge() writes them
// into PairResult::reasons and check into its findings, and every renderer prints those as they
// stand.
#include "judge/reason_format.hpp"

#include <cmath>

#include <fmt/compile.h>
#include <fmt/format.h>

namespace driftscope::compare_detail {

std::string fmt_num(double v, int significant) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return "0";
  // The precisions in use, with the format compiled (FMT_COMPILE: the same text, less than half
  // the time): judge() formats two or three numbers for every failing pair, a million pairs in
  // the largest comparisons (issue 13 §5).
  char buf[64];
  auto text = [&](auto end) { return std::string(buf, static_cast<size_t>(end - buf)); };
  switch (significant) {
    case 2: return text(fmt::format_to(buf, FMT_COMPILE("{:.2g}"), v));
    case 3: return text(fmt::format_to(buf, FMT_COMPILE("{:.3g}"), v));
    case 4: return text(fmt::format_to(buf, FMT_COMPILE("{:.4g}"), v));
    case 6: return text(fmt::format_to(buf, FMT_COMPILE("{:.6g}"), v));
    case 7: return text(fmt::format_to(buf, FMT_COMPILE("{:.7g}"), v));
    default: return fmt::format("{:.{}g}", v, significant);
  }
}

std::string fmt_shape(std::span<const uint64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace driftscope::compare_detail
