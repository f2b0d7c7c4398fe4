// Bulk widening kernels, compiled once per SIMD target (hwy/foreach_target.h) and dispatched at
// run time. Used only on little-endian hosts: the payload bytes are then the lane values.
#include "numerics/decode_simd.hpp"

#include <bit>
#include <cstring>

#include "driftscope/decode.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "numerics/decode_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "numerics/half_bits-inl.h"

HWY_BEFORE_NAMESPACE();
namespace driftscope::numerics {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// float16 (kF16) or bfloat16 bits widened to To (float or double). One To vector per step; the
// u16 and f32 stages use the same lane count (a fraction of a register), which keeps the code
// target-independent. To double, the loop is bound by the 8-byte stores. bfloat16 is the upper
// half of a binary32: widening is a 16-bit shift, exact for every pattern.
template <bool kF16, class To>
HWY_INLINE void Widen16(const std::byte* src, size_t n, To* dst) {
  const hn::ScalableTag<To> dto;
  const hn::Rebind<uint16_t, decltype(dto)> du16;
  const hn::Rebind<uint32_t, decltype(dto)> du32;
  const hn::Rebind<float, decltype(dto)> df32;
  const size_t N = hn::Lanes(dto);
  const auto* s = reinterpret_cast<const uint16_t*>(src);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto h = hn::PromoteTo(du32, hn::LoadU(du16, s + i));
    hn::Vec<decltype(df32)> f;
    if constexpr (kF16) f = HalfBitsToFloat(du32, h);
    else f = hn::BitCast(df32, hn::ShiftLeft<16>(h));
    if constexpr (sizeof(To) == 8) hn::StoreU(hn::PromoteTo(dto, f), dto, dst + i);
    else hn::StoreU(f, dto, dst + i);
  }
  for (; i < n; ++i) {
    uint16_t b;
    std::memcpy(&b, src + 2 * i, 2);
    dst[i] = static_cast<To>(kF16 ? f16_to_double(b) : bf16_to_double(b));
  }
}

void F16ToF64(const std::byte* src, size_t n, double* dst) { Widen16<true>(src, n, dst); }
void F16ToF32(const std::byte* src, size_t n, float* dst) { Widen16<true>(src, n, dst); }
void BF16ToF64(const std::byte* src, size_t n, double* dst) { Widen16<false>(src, n, dst); }
void BF16ToF32(const std::byte* src, size_t n, float* dst) { Widen16<false>(src, n, dst); }

void F32ToF64(const std::byte* src, size_t n, double* dst) {
  const hn::ScalableTag<double> d64;
  const hn::Rebind<float, decltype(d64)> df32;
  const size_t N = hn::Lanes(d64);
  const auto* s = reinterpret_cast<const float*>(src);
  size_t i = 0;
  // Two independent vectors per step so the load->convert->store chains overlap.
  for (; i + 2 * N <= n; i += 2 * N) {
    const auto a = hn::PromoteTo(d64, hn::LoadU(df32, s + i));
    const auto b = hn::PromoteTo(d64, hn::LoadU(df32, s + i + N));
    hn::StoreU(a, d64, dst + i);
    hn::StoreU(b, d64, dst + i + N);
  }
  for (; i < n; ++i) {
    float f;
    std::memcpy(&f, src + 4 * i, 4);
    dst[i] = static_cast<double>(f);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace driftscope::numerics
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace driftscope::numerics {

HWY_EXPORT(F16ToF64);
HWY_EXPORT(F16ToF32);
HWY_EXPORT(BF16ToF64);
HWY_EXPORT(BF16ToF32);
HWY_EXPORT(F32ToF64);

void widen_f16_to_f64(const std::byte* src, size_t n, double* dst) noexcept {
  HWY_DYNAMIC_DISPATCH(F16ToF64)(src, n, dst);
}
void widen_f16_to_f32(const std::byte* src, size_t n, float* dst) noexcept {
  HWY_DYNAMIC_DISPATCH(F16ToF32)(src, n, dst);
}
void widen_bf16_to_f64(const std::byte* src, size_t n, double* dst) noexcept {
  HWY_DYNAMIC_DISPATCH(BF16ToF64)(src, n, dst);
}
void widen_bf16_to_f32(const std::byte* src, size_t n, float* dst) noexcept {
  HWY_DYNAMIC_DISPATCH(BF16ToF32)(src, n, dst);
}
void widen_f32_to_f64(const std::byte* src, size_t n, double* dst) noexcept {
  HWY_DYNAMIC_DISPATCH(F32ToF64)(src, n, dst);
}

}  // namespace driftscope::numerics
#endif  // HWY_ONCE
