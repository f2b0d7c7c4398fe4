// SIMD passes of the statistics accumulator (see decode_simd.hpp for the grouping contract).
#include <algorithm>
#include <cmath>

#include "numerics/decode_simd.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "numerics/decode_stats_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace driftscope::numerics {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Min/max are exact and order-free, so this pass uses full vectors; the counts are integer.
ChunkScan ScanChunk(const double* x, size_t n) {
  const hn::ScalableTag<double> d;
  const hn::RebindToSigned<decltype(d)> di;
  const size_t N = hn::Lanes(d);
  ChunkScan r{x[0], x[0], 0.0, 0, 0};
  size_t i = 0;
  if (n >= N) {
    auto lo = hn::Set(d, x[0]), hi = lo, amax = hn::Zero(d);
    auto nonfinite = hn::Zero(di), zeros = hn::Zero(di);  // each lane counts down by -1 per hit
    for (; i + N <= n; i += N) {
      const auto v = hn::LoadU(d, x + i);
      lo = hn::Min(lo, v);
      hi = hn::Max(hi, v);
      amax = hn::Max(amax, hn::Abs(v));
      nonfinite = hn::Add(nonfinite, hn::BitCast(di, hn::VecFromMask(d, hn::Not(hn::IsFinite(v)))));
      zeros = hn::Add(zeros, hn::BitCast(di, hn::VecFromMask(d, hn::Eq(v, hn::Zero(d)))));
    }
    r.lo = hn::GetLane(hn::MinOfLanes(d, lo));
    r.hi = hn::GetLane(hn::MaxOfLanes(d, hi));
    r.amax = hn::GetLane(hn::MaxOfLanes(d, amax));
    r.nonfinite = static_cast<uint64_t>(-hn::GetLane(hn::SumOfLanes(di, nonfinite)));
    r.zeros = static_cast<uint64_t>(-hn::GetLane(hn::SumOfLanes(di, zeros)));
  }
  for (; i < n; ++i) {
    const double v = x[i];
    r.lo = std::min(r.lo, v);
    r.hi = std::max(r.hi, v);
    r.amax = std::max(r.amax, std::fabs(v));
    r.nonfinite += !std::isfinite(v);
    r.zeros += v == 0;
  }
  return r;
}

// Accumulates two sums of term(x_i) in four groups (element i -> group i % 4) and returns
// (g0 + g1) + (g2 + g3) for each. Vectors have at most four lanes; with fewer lanes, several
// vectors cover the four groups, so every target adds the same numbers in the same order.
// Term provides a vector and a scalar overload computing the same expression.
template <class Term>
HWY_INLINE void GroupedSums(const double* x, size_t n, const Term& term, double* out) {
  const hn::CappedTag<double, 4> d;
  const size_t N = hn::Lanes(d);
  auto a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0;
  auto b0 = hn::Zero(d), b1 = b0, b2 = b0, b3 = b0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    term(d, hn::LoadU(d, x + i), a0, b0);
    if (N <= 2) term(d, hn::LoadU(d, x + i + N), a1, b1);
    if (N == 1) {
      term(d, hn::LoadU(d, x + i + 2), a2, b2);
      term(d, hn::LoadU(d, x + i + 3), a3, b3);
    }
  }
  HWY_ALIGN double A[4];  // N <= 4 lanes; HWY_ALIGN satisfies Store's alignment
  HWY_ALIGN double B[4];
  hn::Store(a0, d, A);
  hn::Store(b0, d, B);
  if (N <= 2) {
    hn::StoreU(a1, d, A + N);
    hn::StoreU(b1, d, B + N);
  }
  if (N == 1) {
    hn::StoreU(a2, d, A + 2);
    hn::StoreU(a3, d, A + 3);
    hn::StoreU(b2, d, B + 2);
    hn::StoreU(b3, d, B + 3);
  }
  for (size_t j = 0; i < n; ++i, ++j) term(x[i], A[j], B[j]);
  out[0] = (A[0] + A[1]) + (A[2] + A[3]);
  out[1] = (B[0] + B[1]) + (B[2] + B[3]);
}

// Σ x * sx
struct ScaledTerm {
  double sx;
  template <class D, class V>
  HWY_INLINE void operator()(D d, V v, V& a, V&) const {
    a = hn::Add(a, hn::Mul(v, hn::Set(d, sx)));
  }
  void operator()(double v, double& a, double&) const { a += v * sx; }
};

// Σ (x * sx)² and Σ (x * pre - p) * sw
struct SquaresAndShiftedTerm {
  double sx, pre, p, sw;
  template <class D, class V>
  HWY_INLINE void operator()(D d, V v, V& a, V& b) const {
    const auto xs = hn::Mul(v, hn::Set(d, sx));
    a = hn::Add(a, hn::Mul(xs, xs));
    b = hn::Add(b, hn::Mul(hn::Sub(hn::Mul(v, hn::Set(d, pre)), hn::Set(d, p)), hn::Set(d, sw)));
  }
  void operator()(double v, double& a, double& b) const {
    const double xs = v * sx;
    a += xs * xs;
    b += (v * pre - p) * sw;
  }
};

// Σ d and Σ d², d = (x * pre - p) * sw - m
struct DeviationTerm {
  double pre, p, sw, m;
  template <class D, class V>
  HWY_INLINE void operator()(D d, V v, V& a, V& b) const {
    const auto dv = hn::Sub(
        hn::Mul(hn::Sub(hn::Mul(v, hn::Set(d, pre)), hn::Set(d, p)), hn::Set(d, sw)),
        hn::Set(d, m));
    a = hn::Add(a, dv);
    b = hn::Add(b, hn::Mul(dv, dv));
  }
  void operator()(double v, double& a, double& b) const {
    const double dv = (v * pre - p) * sw - m;
    a += dv;
    b += dv * dv;
  }
};

double SumScaled(const double* x, size_t n, double sx) {
  double out[2];
  GroupedSums(x, n, ScaledTerm{sx}, out);
  return out[0];
}

void SumSquaresAndShifted(const double* x, size_t n, double sx, double pre, double p, double sw,
                          double* out) {
  GroupedSums(x, n, SquaresAndShiftedTerm{sx, pre, p, sw}, out);
}

void SumDeviations(const double* x, size_t n, double pre, double p, double sw, double m,
                   double* out) {
  GroupedSums(x, n, DeviationTerm{pre, p, sw, m}, out);
}

}  // namespace HWY_NAMESPACE
}  // namespace driftscope::numerics
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace driftscope::numerics {

HWY_EXPORT(ScanChunk);
HWY_EXPORT(SumScaled);
HWY_EXPORT(SumSquaresAndShifted);
HWY_EXPORT(SumDeviations);

ChunkScan scan_chunk(const double* x, size_t n) noexcept {
  return HWY_DYNAMIC_DISPATCH(ScanChunk)(x, n);
}
double sum_scaled(const double* x, size_t n, double sx) noexcept {
  return HWY_DYNAMIC_DISPATCH(SumScaled)(x, n, sx);
}
void sum_squares_and_shifted(const double* x, size_t n, double sx, double pre, double p, double sw,
                             double out[2]) noexcept {
  HWY_DYNAMIC_DISPATCH(SumSquaresAndShifted)(x, n, sx, pre, p, sw, out);
}
void sum_deviations(const double* x, size_t n, double pre, double p, double sw, double m,
                    double out[2]) noexcept {
  HWY_DYNAMIC_DISPATCH(SumDeviations)(x, n, pre, p, sw, m, out);
}

}  // namespace driftscope::numerics
#endif  // HWY_ONCE
