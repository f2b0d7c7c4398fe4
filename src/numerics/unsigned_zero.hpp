// The sign of a zero extreme. min(-0, +0) is whichever operand a comparison keeps, and SIMD
// targets compare lanes in different orders, so a minimum or maximum that is zero would be -0 on
// one machine and +0 on another. Every minimum and maximum driftscope reports (tensor statistics,
// SUMMARY records: docs/format.md §3.6; compare's extremes) is therefore a zero without a sign,
// +0, so that every target writes the same bytes.
#pragma once

namespace driftscope::numerics {

inline double unsigned_zero(double v) noexcept { return v == 0 ? 0.0 : v; }

}  // namespace driftscope::numerics
