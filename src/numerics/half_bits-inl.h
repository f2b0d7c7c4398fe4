// binary16 bits -> binary32, per SIMD target: shared by the widening kernels (decode_simd.cpp) and
// the fused pair kernel (pair_kernel.cpp). Highway "-inl" header: included once per target.
#if defined(DRIFTSCOPE_NUMERICS_HALF_BITS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DRIFTSCOPE_NUMERICS_HALF_BITS_INL_H_
#undef DRIFTSCOPE_NUMERICS_HALF_BITS_INL_H_
#else
#define DRIFTSCOPE_NUMERICS_HALF_BITS_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace driftscope::numerics {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// binary16 -> binary32 without relying on F16C, so every target (SSE4, scalar) gives the same
// exact result, Inf and NaN included. With e = exponent field, m = mantissa field:
//   e == 0      subnormal or zero: value = m * 2^-24, and int->float of m < 2^10 is exact;
//   e == 31     Inf/NaN: exponent field all ones, mantissa kept (NaN payload preserved);
//   otherwise   rebias: f32 exponent = e - 15 + 127, i.e. add (127-15) << 23 to (e,m) << 13.
template <class DU32>
HWY_INLINE hn::Vec<hn::Rebind<float, DU32>> HalfBitsToFloat(DU32 du32, hn::Vec<DU32> h) {
  const hn::Rebind<float, DU32> df32;
  const hn::Rebind<int32_t, DU32> di32;
  const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du32, 0x8000u)));
  const auto em = hn::And(h, hn::Set(du32, 0x7FFFu));
  const auto exp = hn::ShiftRight<10>(em);
  const auto shifted = hn::ShiftLeft<13>(em);
  const auto normal = hn::Add(shifted, hn::Set(du32, uint32_t{127 - 15} << 23));
  const auto infnan = hn::Or(shifted, hn::Set(du32, 0x7F800000u));
  const auto sub = hn::BitCast(
      du32, hn::Mul(hn::ConvertTo(df32, hn::BitCast(di32, em)), hn::Set(df32, 0x1p-24f)));
  const auto mag = hn::IfThenElse(hn::Eq(exp, hn::Zero(du32)), sub,
                                  hn::IfThenElse(hn::Eq(exp, hn::Set(du32, 31u)), infnan, normal));
  return hn::BitCast(df32, hn::Or(mag, sign));
}

}  // namespace HWY_NAMESPACE
}  // namespace driftscope::numerics
HWY_AFTER_NAMESPACE();

#endif  // include guard (per target)
