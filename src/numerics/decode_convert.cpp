// Scalar conversions between the narrow float formats and binary64 (docs/format.md §3.3.1).
// Widening is exact: each narrow value is (-1)^s * m * 2^k with a small integer m, which std::ldexp
// represents exactly in binary64. Narrowing rounds to nearest, ties to even, with integer
// arithmetic on the binary64 significand so the result does not depend on the FP environment.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "driftscope/decode.hpp"

namespace driftscope {

namespace {

double signed_nan(bool negative) noexcept {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  return negative ? -nan : nan;
}

// Rounds m / 2^shift to the nearest integer, ties to even. m < 2^53.
uint64_t shift_round_even(uint64_t m, int shift) noexcept {
  if (shift <= 0) return m;
  if (shift >= 54) return 0;  // m < 2^53 <= half of 2^shift: rounds to zero
  const uint64_t q = m >> shift;
  const uint64_t rem = m & ((uint64_t{1} << shift) - 1);
  const uint64_t half = uint64_t{1} << (shift - 1);
  return (rem > half || (rem == half && (q & 1))) ? q + 1 : q;
}

// Narrows a binary64 to an IEEE-style binary format with `mant_bits` stored mantissa bits and
// exponent bias `bias` (max biased exponent all ones = Inf/NaN). Returns the magnitude bits; the
// caller ORs the sign.
uint32_t narrow_magnitude(double v, int mant_bits, int bias, int exp_bits) noexcept {
  const uint64_t b = std::bit_cast<uint64_t>(v) & ~(uint64_t{1} << 63);
  const uint32_t inf_bits = ((uint32_t{1} << exp_bits) - 1) << mant_bits;
  const uint64_t raw_exp = b >> 52;
  const uint64_t frac = b & ((uint64_t{1} << 52) - 1);
  if (raw_exp == 0x7FF) {
    // NaN stays NaN (quiet, top mantissa bit set); Inf stays Inf.
    return frac ? inf_bits | (uint32_t{1} << (mant_bits - 1)) : inf_bits;
  }
  // v = m * 2^(e - 52) with m the 53-bit significand (implicit bit included for normals).
  const uint64_t m = raw_exp ? (frac | (uint64_t{1} << 52)) : frac;
  const int e = raw_exp ? static_cast<int>(raw_exp) - 1023 : -1022;
  const int min_normal_exp = 1 - bias;
  // The target's quantum is 2^(e - mant_bits) for normals and 2^(min_normal_exp - mant_bits)
  // in the subnormal range; the shift turns m into a count of quanta.
  const int target_exp = e < min_normal_exp ? min_normal_exp : e;
  const uint64_t q = shift_round_even(m, 52 - mant_bits + (target_exp - e));
  // Normal: bits = (biased_exp - 1) << mant_bits + q, where q includes the implicit bit, so a
  // rounding carry (q == 2^(mant_bits+1)) moves into the exponent by itself. Subnormal: bits = q,
  // and q == 2^mant_bits is exactly the smallest normal.
  uint64_t bits = e < min_normal_exp
                      ? q
                      : (static_cast<uint64_t>(target_exp + bias - 1) << mant_bits) + q;
  if (bits >= inf_bits) bits = inf_bits;
  return static_cast<uint32_t>(bits);
}

}  // namespace

double f16_to_double(uint16_t bits) noexcept {
  const bool neg = bits & 0x8000;
  const int exp = (bits >> 10) & 0x1F;
  const int mant = bits & 0x3FF;
  double mag;
  if (exp == 0x1F) {
    if (mant) return signed_nan(neg);
    mag = std::numeric_limits<double>::infinity();
  } else if (exp == 0) {
    mag = static_cast<double>(mant) * 0x1p-24;  // 2^(1-15) * mant/2^10
  } else {
    // 2^(exp-15) * (1024+m)/2^10, the power of two built from its bits: exact like ldexp, without
    // ldexp's call (compare_pair decodes whole chunks with this when it locates max_abs_diff).
    const double pow2 = std::bit_cast<double>(static_cast<uint64_t>(exp - 25 + 1023) << 52);
    mag = static_cast<double>(mant | 0x400) * pow2;
  }
  return neg ? -mag : mag;
}

double bf16_to_double(uint16_t bits) noexcept {
  return static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(bits) << 16));
}

double f8e4m3fn_to_double(uint8_t bits) noexcept {
  // OCP FP8 E4M3 ("fn": finite, NaN only at S.1111.111), bias 7, max 448.
  const bool neg = bits & 0x80;
  const int exp = (bits >> 3) & 0xF;
  const int mant = bits & 0x7;
  if (exp == 0xF && mant == 0x7) return signed_nan(neg);
  const double mag = exp == 0 ? std::ldexp(static_cast<double>(mant), -9)  // 2^-6 * m/8
                              : std::ldexp(static_cast<double>(mant | 0x8), exp - 10);
  return neg ? -mag : mag;
}

double f8e5m2_to_double(uint8_t bits) noexcept {
  // OCP FP8 E5M2: binary16 with the low 8 mantissa bits dropped, bias 15, Inf and NaN as IEEE.
  return f16_to_double(static_cast<uint16_t>(bits << 8));
}

uint16_t double_to_f16(double v) noexcept {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  return static_cast<uint16_t>(sign | narrow_magnitude(v, 10, 15, 5));
}

uint16_t double_to_bf16(double v) noexcept {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  return static_cast<uint16_t>(sign | narrow_magnitude(v, 7, 127, 8));
}

}  // namespace driftscope
