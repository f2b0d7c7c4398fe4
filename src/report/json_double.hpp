// A double as nlohmann::json dumps it (nlohmann::detail::to_chars: Grisu2, then printf("%.17g")-like
// layout), the same algorithm step for step: every integer computed is the one nlohmann computes,
// so the text is byte for byte the same (tests/unit/report/json_double_test.cpp holds it to
// to_chars on edge cases and millions of random doubles). Three things are faster: the 64 x 64-bit
// products are one 128-bit multiply (nlohmann builds them from four 32-bit products; rounded the
// same: the high half of p + 2^63), normalising counts leading zeros (nlohmann shifts one bit at a
// time), and the integral digits are divided by constants (nlohmann divides by a variable power
// of ten, one hardware division per digit). Number formatting was ~40% of writing a pair of the
// JSON report (issue 13 §5: 1,000,000 pairs, ~15 doubles each).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include <nlohmann/json.hpp>

namespace driftscope::compare_detail {
namespace json_double_detail {

namespace dtoa = nlohmann::detail::dtoa_impl;

struct Fp {  // f * 2^e
  uint64_t f;
  int e;
};

// nlohmann's diyfp::mul: round(x.f * y.f / 2^64), ties up.
inline Fp mul(Fp x, Fp y) {
  __extension__ typedef unsigned __int128 u128;
  const u128 p = static_cast<u128>(x.f) * y.f + (uint64_t{1} << 63);
  return {static_cast<uint64_t>(p >> 64), x.e + y.e + 64};
}

// dtoa_impl::grisu2_round, verbatim.
inline void round_weed(char* buf, int len, uint64_t dist, uint64_t delta, uint64_t rest, uint64_t ten_k) {
  while (rest < dist && delta - rest >= ten_k && (rest + ten_k < dist || dist - rest > rest + ten_k - dist)) {
    buf[len - 1]--;
    rest += ten_k;
  }
}

inline constexpr uint32_t kPow10[10] = {1,      10,      100,      1000,      10000,
                                        100000, 1000000, 10000000, 100000000, 1000000000};

// One step of dtoa_impl::grisu2_digit_gen's first loop with n = N digits of p1 left
// (pow10 = 10^(N-1), a constant here); true when the digits are complete.
template <int N>
inline bool integral_digits(char* buf, int& len, int& dexp, uint32_t& p1, uint64_t p2, int shift, uint64_t delta,
                            uint64_t dist) {
  constexpr uint32_t pow10 = kPow10[N - 1];
  const uint32_t d = p1 / pow10;
  p1 = p1 % pow10;
  buf[len++] = static_cast<char>('0' + d);
  const uint64_t rest = (uint64_t{p1} << shift) + p2;
  if (rest <= delta) {
    dexp += N - 1;
    round_weed(buf, len, dist, delta, rest, uint64_t{pow10} << shift);
    return true;
  }
  if constexpr (N > 1) return integral_digits<N - 1>(buf, len, dexp, p1, p2, shift, delta, dist);
  else return false;
}

// dtoa_impl::grisu2_digit_gen.
inline void digit_gen(char* buf, int& len, int& dexp, Fp m_minus, Fp w, Fp m_plus) {
  uint64_t delta = m_plus.f - m_minus.f;
  uint64_t dist = m_plus.f - w.f;
  const int shift = -m_plus.e;  // 32 .. 60
  const uint64_t one = uint64_t{1} << shift;
  uint32_t p1 = static_cast<uint32_t>(m_plus.f >> shift);
  uint64_t p2 = m_plus.f & (one - 1);
  int k = 1;  // dtoa_impl::find_largest_pow10
  while (k < 10 && p1 >= kPow10[k]) ++k;
  bool done = false;
  switch (k) {
#define DS_DIGITS(N) \
  case N: done = integral_digits<N>(buf, len, dexp, p1, p2, shift, delta, dist); break;
    DS_DIGITS(10) DS_DIGITS(9) DS_DIGITS(8) DS_DIGITS(7) DS_DIGITS(6)
    DS_DIGITS(5) DS_DIGITS(4) DS_DIGITS(3) DS_DIGITS(2) DS_DIGITS(1)
#undef DS_DIGITS
  }
  if (done) return;
  int m = 0;
  for (;;) {
    p2 *= 10;
    buf[len++] = static_cast<char>('0' + (p2 >> shift));
    p2 &= one - 1;
    ++m;
    delta *= 10;
    dist *= 10;
    if (p2 <= delta) break;
  }
  dexp -= m;
  round_weed(buf, len, dist, delta, p2, one);
}

}  // namespace json_double_detail

// nlohmann::detail::to_chars(first, first + 32, v) for a finite v: writes at most 24 bytes.
inline char* json_double(char* first, double value) {
  using namespace json_double_detail;
  if (std::signbit(value)) {
    value = -value;
    *first++ = '-';
  }
  if (value == 0) {
    first[0] = '0';
    first[1] = '.';
    first[2] = '0';
    return first + 3;
  }
  // dtoa_impl::compute_boundaries (IEEE binary64: 52 stored significand bits, bias 1075).
  const uint64_t bits = std::bit_cast<uint64_t>(value);
  const uint64_t E = bits >> 52;
  const uint64_t F = bits & ((uint64_t{1} << 52) - 1);
  const Fp v = E == 0 ? Fp{F, -1074} : Fp{F + (uint64_t{1} << 52), static_cast<int>(E) - 1075};
  const bool lower_closer = F == 0 && E > 1;
  const Fp m_plus{2 * v.f + 1, v.e - 1};
  const Fp m_minus = lower_closer ? Fp{4 * v.f - 1, v.e - 2} : Fp{2 * v.f - 1, v.e - 1};
  const int zp = std::countl_zero(m_plus.f);
  const Fp w_plus{m_plus.f << zp, m_plus.e - zp};
  const Fp w_minus{m_minus.f << (m_minus.e - w_plus.e), w_plus.e};
  const int zv = std::countl_zero(v.f);
  const Fp w{v.f << zv, v.e - zv};
  // dtoa_impl::grisu2.
  const dtoa::cached_power cached = dtoa::get_cached_power_for_binary_exponent(w_plus.e);
  const Fp c{cached.f, cached.e};
  const Fp sw = mul(w, c), sminus = mul(w_minus, c), splus = mul(w_plus, c);
  int len = 0;
  int dexp = -cached.k;
  digit_gen(first, len, dexp, Fp{sminus.f + 1, sminus.e}, sw, Fp{splus.f - 1, splus.e});
  // to_chars: kMinExp = -4, kMaxExp = digits10 = 15.
  return dtoa::format_buffer(first, len, dexp, -4, 15);
}

}  // namespace driftscope::compare_detail
