// The number and shape formats of the judges' reasons: compare's judge(), alignment and layout
// (src/compare) and check's findings (src/check) state numbers in these words, so one value
// reads the same in every report.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace driftscope::compare_detail {

// `significant` digits ("%.4g"); "nan", "inf", "-inf" and "0" spelled out.
std::string fmt_num(double v, int significant = 4);
// "[2,3]"
std::string fmt_shape(std::span<const uint64_t> shape);

}  // namespace driftscope::compare_detail
