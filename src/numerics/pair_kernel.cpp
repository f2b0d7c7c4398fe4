// The per-chunk metric kernel, compiled once per SIMD target by Highway (foreach_target) and
// dispatched at run time; the scalar reference lives at the end. Contract: pair_kernel.hpp.

// Bitwise-identical results across targets require that no target fuses r*r + acc into one FMA
// (one rounding instead of two) while another does not; GCC contracts even vector intrinsics
// under its default -ffp-contract=fast, so contraction is switched off for this file.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

// Every attainable target (EMU128 included) is compiled so tests can compare each against the
// scalar reference. Scalable-vector targets are left out: the kernel keeps its kLanes virtual
// lanes in arrays of vectors, which sizeless SVE/RVV types cannot form; NEON serves ARM.
#ifndef HWY_COMPILE_ALL_ATTAINABLE
#define HWY_COMPILE_ALL_ATTAINABLE
#endif
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128 | HWY_RVV)
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "numerics/pair_kernel.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "numerics/half_bits-inl.h"

#include <cstddef>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "common/bytes.hpp"
#include "driftscope/decode.hpp"
#include "numerics/pair_kernel.hpp"
#include "numerics/pair_metrics.hpp"

HWY_BEFORE_NAMESPACE();
namespace driftscope::numerics::kernel {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::CappedTag<double, kLanes>;
using V = hn::Vec<D>;
using M = hn::Mask<D>;
inline constexpr size_t kN = hn::MaxLanes(D());
// Vectors per group of kLanes elements (AVX-512: 1, AVX2: 2, SSE4/NEON: 4).
inline constexpr size_t kG = kLanes / kN;
// Whether the all-finite stretches of raw chunks go two vectors at a time (step_finite2).
inline constexpr bool kPaired = HWY_TARGET != HWY_SCALAR;
static_assert(kLanes % kN == 0, "a vector must hold a whole number of virtual lanes");
// float32 lanes of two vectors D (RawSource::load2, used on every target but the scalar one, which
// has no two-lane vectors).
#if HWY_TARGET == HWY_SCALAR
using DW = hn::Rebind<float, D>;
#else
using DW = hn::Repartition<float, D>;
#endif
using DWU = hn::RebindToUnsigned<DW>;
using DWI = hn::RebindToSigned<DW>;
// The raw bits of 2 kN float16/bfloat16 values, as signed lanes (load2).
using DWH = hn::Rebind<int16_t, DW>;

// The seven running sums of one vector position j of the group. They are seven independent
// dependency chains: an FP add has 4 cycles of latency and two can start per cycle, so about
// eight must be in flight to keep the adders busy. Seven chains, each step also issuing ~35
// other vector operations (min/max, compares, the allclose test), already cover that latency;
// splitting each sum over more accumulators would only add registers (and, being part of the
// lane order, would change the bits).
struct Sums {
  V abs, sqd, r, c, rr, cc, rc;
};

struct State {
  V max_abs, max_rel, max_rel_slack, min_ref, max_ref, min_cand, max_cand;
  V atol, rtol, eps, tiny, slack, pinf, ninf, zero;
  uint64_t zero_ref_n = 0, zero_cand_n = 0, nonfinite = 0, nan_ref = 0, nan_cand = 0, nan_both = 0;
  uint64_t inf_ref = 0, inf_cand = 0, inf_same = 0, mismatch = 0;
  int64_t first = -1;
  bool nan_equal = false;
  bool tiny_possible = true;
  // step_finite2: a lane of ULP distance (in `high` units) at most uthr cannot raise max_rel;
  // uthr16 is the same bound in units of the 16-bit formats' own bits (floor(uthr / 2^16)).
  hn::Vec<DWI> uthr;
  hn::Vec<DWH> uthr16;

  // One vector: elements [i, i + kN) of the chunk, loaded by `src`.
  template <bool kTail, class Src>
  HWY_INLINE void step(Src& src, size_t i, Sums& s, M valid) {
    const D d;
    V r, c;
    src.template load<kTail>(i, r, c);
    M fin = hn::And(hn::IsFinite(r), hn::IsFinite(c));
    if constexpr (kTail) fin = hn::And(fin, valid);
    // All finite is the common case: it needs no masking at all.
    if (!kTail && hn::AllTrue(d, fin)) {
      src.ulp(true);
      return accumulate<false>(src, r, c, fin, hn::FirstN(d, 0), i, s);
    }
    src.ulp(false);
    const M nonfin = hn::AndNot(fin, valid);
    const M nr = hn::And(hn::IsNaN(r), valid), nc = hn::And(hn::IsNaN(c), valid);
    const M ir = hn::And(hn::IsInf(r), valid), ic = hn::And(hn::IsInf(c), valid);
    const M both_nan = hn::And(nr, nc);
    const M same_inf = hn::And(hn::And(ir, ic), hn::Eq(r, c));
    nonfinite += hn::CountTrue(d, nonfin);
    nan_ref += hn::CountTrue(d, nr);
    nan_cand += hn::CountTrue(d, nc);
    nan_both += hn::CountTrue(d, both_nan);
    inf_ref += hn::CountTrue(d, ir);
    inf_cand += hn::CountTrue(d, ic);
    inf_same += hn::CountTrue(d, same_inf);
    const M equal = nan_equal ? hn::Or(same_inf, both_nan) : same_inf;
    accumulate<true>(src, r, c, fin, hn::AndNot(equal, nonfin), i, s);
  }

  // One vector of a stretch presumed all finite (RunChunk checks that afterwards).
  template <class Src>
  HWY_INLINE void step_finite(Src& src, size_t i, Sums& s) {
    const D d;
    V r, c;
    src.template load<false>(i, r, c);
    src.ulp(true);
    accumulate<false>(src, r, c, hn::FirstN(d, kN), hn::FirstN(d, 0), i, s);
  }

  // Two vectors of a stretch presumed all finite: elements [i, i + kN) and [i + kLanes, i +
  // kLanes + kN), the same vector position j of two consecutive groups (one vector holds every
  // virtual lane on AVX-512, kG == 1, so there the two are adjacent). The sums take the two
  // vectors in the order of their sweep, as two step_finite calls would. The order-free rest is
  // done once for both, on 2 kN float32/int32 lanes where it is exact (on AVX2 one 256-bit
  // operation instead of two 128-bit ones), and what is rare is only tested for:
  // - r·c > Src::kTinyProduct in every lane, tested on the float32 product of the 2 kN lanes,
  //   says that no value is ±0 and both sides of each lane have one sign: no zero to count,
  //   and the ULP distance is |bits(r) - bits(c)| (RawSource::ulp_wide_over). Otherwise the
  //   vector takes the general forms (zeros_and_ulp_wide). The bound is a normal float32 and
  //   rounding is monotonic, so fl(r·c) > bound implies r·c > bound (an overflow to +Inf
  //   included); the float16 product is exact in float32 (22 significant bits, 2^-48 to 2^32).
  // - A lane can raise max_rel only if its ULP distance exceeds uthr (update_uthr: the relative
  //   difference of a pair of one sign is bounded by its ULP distance); only then does the
  //   float64 test of accumulate run (max_rel_test2), on both vectors.
  // - The mismatch count is added without a branch (its vectors are often half and half).
  template <class Src>
  HWY_INLINE void step_finite2(Src& src, size_t i, Sums& s) {
    const D d;
    V r0, c0, r1, c1;
    src.load2(i, r0, c0, r1, c1);
    V ad0, ad1;
    sums_fast(r0, c0, s, ad0);
    const M mis0 = over_tolerance(ad0, r0);
    sums_fast(r1, c1, s, ad1);
    const M mis1 = over_tolerance(ad1, r1);
    const DW dw;
    const auto rc = hn::Mul(src.wfr, src.wfc);
    if (HWY_LIKELY(hn::AllTrue(dw, hn::Gt(rc, hn::Set(dw, Src::kTinyProduct))))) {
      if (src.ulp_wide_over(uthr, uthr16)) max_rel_test2<Src>(ad0, r0, ad1, r1);
    } else {
      src.zeros_and_ulp_wide();
      max_rel_test2<Src>(ad0, r0, ad1, r1);
    }
    mismatch += hn::CountTrue(d, mis0) + hn::CountTrue(d, mis1);
    if (first < 0 || static_cast<int64_t>(i) < first) {
      int64_t at = -1;
      if (!hn::AllFalse(d, mis0)) {
        at = static_cast<int64_t>(i) + hn::FindFirstTrue(d, mis0);
      } else if (!hn::AllFalse(d, mis1)) {
        at = static_cast<int64_t>(i + kLanes) + hn::FindFirstTrue(d, mis1);
      }
      if (at >= 0 && (first < 0 || at < first)) first = at;
    }
  }

  // The sums of one all-finite vector and its max |d|; ad = |d|.
  HWY_INLINE void sums_fast(V r, V c, Sums& s, V& ad) {
    const V diff = hn::Sub(r, c);
    ad = hn::Abs(diff);
    s.abs = hn::Add(s.abs, ad);
    s.sqd = hn::Add(s.sqd, hn::Mul(diff, diff));
    s.r = hn::Add(s.r, r);
    s.c = hn::Add(s.c, c);
    // r², c² and r·c of float32, float16 or bfloat16 values are exact in float64 (at most 48
    // significant bits, no overflow or underflow), so a fused multiply-add rounds once, as the
    // addition of the exact product does: the same bits, one operation instead of two. (d² is
    // not exact, and keeps its multiplication and addition.)
    s.rr = hn::MulAdd(r, r, s.rr);
    s.cc = hn::MulAdd(c, c, s.cc);
    s.rc = hn::MulAdd(r, c, s.rc);
    max_abs = hn::Max(max_abs, ad);
  }
  HWY_INLINE M over_tolerance(V ad, V r) const {
    return hn::Gt(ad, hn::Add(atol, hn::Mul(rtol, hn::Abs(r))));
  }
  // accumulate's test for a new max_rel, on two vectors at once. The test of both used the
  // maximum from before the first: a lane that could raise it after the first vector's update
  // passes it too, and dividing a lane that does not raise the maximum leaves it unchanged.
  template <class Src>
  HWY_INLINE void max_rel_test2(V ad0, V r0, V ad1, V r1) {
    const D d;
    const V den0 = hn::Max(hn::Abs(r0), eps), den1 = hn::Max(hn::Abs(r1), eps);
    const V bound0 = hn::Mul(max_rel_slack, den0), bound1 = hn::Mul(max_rel_slack, den1);
    M maybe = hn::Or(hn::Gt(ad0, bound0), hn::Gt(ad1, bound1));
    if (tiny_possible) {
      maybe = hn::Or(maybe, hn::And(hn::Lt(bound0, tiny), hn::Gt(ad0, zero)));
      maybe = hn::Or(maybe, hn::And(hn::Lt(bound1, tiny), hn::Gt(ad1, zero)));
    }
    if (!hn::AllFalse(d, maybe)) {
      max_rel = hn::Max(max_rel, hn::Div(ad0, den0));
      max_rel = hn::Max(max_rel, hn::Div(ad1, den1));
      max_rel_slack = hn::Mul(max_rel, slack);
      tiny_possible = !hn::AllFalse(d, hn::Lt(hn::Mul(max_rel_slack, eps), tiny));
      update_uthr<Src>();
    }
  }
  // uthr from q, the smallest lane of max_rel, for finite r, c of one sign with r normal (below)
  // and ULP distance U in `high` units (the float32 bit pattern for f32 and bf16; float16 bits
  // << 16). K = Src::kUlpDoubling units span a binade, so one unit is at most 1/K of any normal
  // value at or above it (K = 2^23 in float32 and bfloat16; 2^26 in float16, whose ULP 2^-10 of
  // the binade is 2^16 units).
  // A new maximum needs fl(|d| / den) > q, hence |d| / den > q, with den = max(|r|, eps) >= |r|.
  // - q < 1: with x = U/K < 1, each unit step is at most max(|r|, |c|)/K <= (|r| + |d|)/K, so
  //   |d| <= x·|r| / (1 - x) and fl(|d|) / den <= that·(1 + 2^-53): U <= K·q / (1 + q), less a
  //   margin for this computation's roundings, cannot raise it (U < K/2).
  // - q >= (2^k - 1)·(1 + 2^-50), 1 <= k <= Src::kMaxDoublings: U <= k·Src::kUlpDoubling (the
  //   distance from r to 2^k·r) means |c| <= 2^k·|r| (2^k·r beyond the format's range: any
  //   finite c), so |d| <= (2^k - 1)·|r| and fl(|d|) <= (2^k - 1)·|r|·(1 + 2^-53) <= q·den.
  // The pairs whose r may be subnormal at such a U have |r·c| <= Src::kTinyProduct and never get
  // here (step_finite2).
  template <class Src>
  HWY_INLINE void update_uthr() {
    const double q = hn::GetLane(hn::MinOfLanes(D(), max_rel));
    double u = 0;
    if (q >= 1) {
      int k = std::ilogb(q + 1);
      if (k > Src::kMaxDoublings) k = Src::kMaxDoublings;
      while (k > 0 && (std::ldexp(1.0, k) - 1) * (1 + 0x1p-50) > q) --k;
      u = static_cast<double>(k) * Src::kUlpDoubling;
    } else if (q > 0) {
      u = std::floor(Src::kUlpDoubling * (q / (1 + q)) * (1 - 0x1p-40));
    }
    uthr = hn::Set(DWI(), static_cast<int32_t>(u));
    // U16 · 2^16 > u  <=>  U16 > floor(u / 2^16) for integer U16 >= 0 (u < 2^29 in either format).
    uthr16 = hn::Set(DWH(), static_cast<int16_t>(static_cast<int32_t>(u) >> 16));
  }

  // kMasked: only lanes in `fin` are finite pairs; the others contribute +0 to every sum (which
  // leaves a sum's bits unchanged) and nothing to minima, maxima and counts.
  template <bool kMasked, class Src>
  HWY_INLINE void accumulate(Src& src, V r, V c, M fin, M nonfin_mismatch, size_t i, Sums& s) {
    const D d;
    const V rz = kMasked ? hn::IfThenElseZero(fin, r) : r;
    const V cz = kMasked ? hn::IfThenElseZero(fin, c) : c;
    const V diff = hn::Sub(rz, cz);
    const V ad = hn::Abs(diff);
    s.abs = hn::Add(s.abs, ad);
    s.sqd = hn::Add(s.sqd, hn::Mul(diff, diff));
    s.r = hn::Add(s.r, rz);
    s.c = hn::Add(s.c, cz);
    if constexpr (Src::kNarrowExtremes) {  // float32/16/bfloat16 values: exact products (sums_fast)
      s.rr = hn::MulAdd(rz, rz, s.rr);
      s.cc = hn::MulAdd(cz, cz, s.cc);
      s.rc = hn::MulAdd(rz, cz, s.rc);
    } else {  // decoded float64 values, whose products round
      s.rr = hn::Add(s.rr, hn::Mul(rz, rz));
      s.cc = hn::Add(s.cc, hn::Mul(cz, cz));
      s.rc = hn::Add(s.rc, hn::Mul(rz, cz));
    }
    max_abs = hn::Max(max_abs, ad);
    const V ar = hn::Abs(rz);
    const V den = hn::Max(ar, eps);
    // max |d|/den without a division per element (a 512-bit divide costs ~16 cycles): a lane
    // can raise its maximum q only if |d| > q*den, so divide only vectors where some lane passes
    // a conservative version of that test: q*den*(1 - 2^-40) is below the exact q*den despite
    // two roundings, unless q*den is near the subnormal range, where we always divide. The
    // maximum is exact either way, so every target still returns the scalar reference's bits.
    const V bound = hn::Mul(max_rel_slack, den);  // max_rel_slack = max_rel * (1 - 2^-40)
    M maybe = hn::Gt(ad, bound);
    // den >= eps and rounding is monotonic, so bound >= max_rel_slack*eps (rounded): once that
    // is >= tiny in every lane, the near-subnormal clause cannot fire and is skipped.
    if (tiny_possible) maybe = hn::Or(maybe, hn::And(hn::Lt(bound, tiny), hn::Gt(ad, zero)));
    if (!hn::AllFalse(d, maybe)) {
      max_rel = hn::Max(max_rel, hn::Div(ad, den));
      max_rel_slack = hn::Mul(max_rel, slack);
      tiny_possible = !hn::AllFalse(d, hn::Lt(hn::Mul(max_rel_slack, eps), tiny));
    }
    if constexpr (Src::kNarrowExtremes) {
      src.template extremes<kMasked>();
    } else {
      min_ref = hn::Min(min_ref, kMasked ? hn::IfThenElse(fin, r, pinf) : r);
      max_ref = hn::Max(max_ref, kMasked ? hn::IfThenElse(fin, r, ninf) : r);
      min_cand = hn::Min(min_cand, kMasked ? hn::IfThenElse(fin, c, pinf) : c);
      max_cand = hn::Max(max_cand, kMasked ? hn::IfThenElse(fin, c, ninf) : c);
      const M zr = kMasked ? hn::And(fin, hn::Eq(r, zero)) : hn::Eq(r, zero);
      const M zc = kMasked ? hn::And(fin, hn::Eq(c, zero)) : hn::Eq(c, zero);
      if (!hn::AllFalse(d, hn::Or(zr, zc))) {  // exact zeros are uncommon in activations
        zero_ref_n += hn::CountTrue(d, zr);
        zero_cand_n += hn::CountTrue(d, zc);
      }
    }
    // allclose: |r - c| > atol + rtol * |r| (r is the reference), docs/metrics.md.
    const M over = hn::Gt(ad, hn::Add(atol, hn::Mul(rtol, ar)));
    const M mis = kMasked ? hn::Or(hn::And(fin, over), nonfin_mismatch) : over;
    if (!hn::AllFalse(d, mis)) {
      mismatch += hn::CountTrue(d, mis);
      // Vectors come in increasing i within a sweep: once one has failed, later ones cannot be
      // first (a later sweep, j > 0, starts lower again and is tested).
      if (first < 0 || static_cast<int64_t>(i) < first) {
        const int64_t at = static_cast<int64_t>(i) + hn::FindFirstTrue(d, mis);
        if (first < 0 || at < first) first = at;
      }
    }
  }
};

template <class F>
HWY_INLINE double reduce_with(V v, F f) {
  HWY_ALIGN double tmp[kN];
  hn::Store(v, D(), tmp);
  double r = tmp[0];
  for (size_t l = 1; l < kN; ++l) r = f(r, tmp[l]);
  return r;
}

// Decoded float64 values, padded with zeros to a whole group of kLanes (pair_kernel.hpp).
struct F64Source {
  static constexpr bool kNarrowExtremes = false;
  const double* HWY_RESTRICT ref;
  const double* HWY_RESTRICT cand;
  template <bool kTail>
  HWY_INLINE void load(size_t i, V& r, V& c) const {
    r = hn::Load(D(), ref + i);
    c = hn::Load(D(), cand + i);
  }
  HWY_INLINE void ulp(bool) const {}
};

// How far ahead RawSource asks for payload bytes. Measured with bench/bench_compare_throughput
// (2 threads, AVX-512): 1, 4 and 16 KiB all cut the CPU time of a compare by ~25%; 4 KiB was best.
inline constexpr uintptr_t kPrefetchBytes = 4096;
using DF = hn::Rebind<float, D>;
using DI = hn::Rebind<int32_t, D>;
using DU = hn::Rebind<uint32_t, D>;

// The float formats read in place. Storage type T; `high` holds each value's bits moved to the
// top of a 32-bit lane (sign at bit 31) and `ToF32` turns those into the exact float32 value
// (every f16 and bf16 is one), which PromoteTo widens exactly to float64.
using DH = hn::Rebind<uint16_t, D>;
struct F32Format {
  using T = uint32_t;
  static constexpr uint32_t kExpHigh = 0x7F800000u;  // exponent field, as placed in `high`
  static constexpr float kTinyProduct = 0x1p-126f;  // RawSource::kTinyProduct
  static constexpr double kUlpDoubling = 0x1p23;    // `high` units from x to 2x
  static constexpr int kMaxDoublings = 48;
  template <class VU>
  static HWY_INLINE auto ToF32(VU high) {
    return hn::BitCast(hn::Rebind<float, hn::DFromV<VU>>(), high);
  }
  static double Scalar(uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
};
struct BF16Format {  // bfloat16 is the upper half of a binary32
  using T = uint16_t;
  static constexpr uint32_t kExpHigh = 0x7F80u << 16;
  static constexpr float kTinyProduct = 0x1p-126f;
  static constexpr double kUlpDoubling = 0x1p23;
  static constexpr int kMaxDoublings = 48;
  template <class VU, class VH>
  static HWY_INLINE auto ToF32(VU high, VH) {
    return hn::BitCast(hn::Rebind<float, hn::DFromV<VU>>(), high);
  }
  static double Scalar(uint16_t bits) { return bf16_to_double(bits); }
};
struct F16Format {
  using T = uint16_t;
  static constexpr uint32_t kExpHigh = 0x7C00u << 16;
  static constexpr float kTinyProduct = 0x1p-27f;
  static constexpr double kUlpDoubling = 0x1p26;
  static constexpr int kMaxDoublings = 1;
  static double Scalar(uint16_t bits) { return f16_to_double(bits); }
  template <class VU, class VH>
  static HWY_INLINE auto ToF32(VU high, VH raw) {
    using DU32 = hn::DFromV<VU>;
#if HWY_ARCH_X86 && HWY_TARGET < HWY_SSE4 && !defined(HWY_DISABLE_F16C)
    // AVX2 and AVX-512 have F16C: one exact vcvtph2ps instead of ~12 operations. (A signalling
    // NaN comes out quiet; the kernel only asks whether a value is NaN, and takes the ULP
    // distance from `high`.)
    (void)high;
    return hn::PromoteTo(hn::Rebind<float, DU32>(), hn::BitCast(hn::Rebind<hwy::float16_t, DU32>(), raw));
#else
    (void)raw;
    return numerics::HWY_NAMESPACE::HalfBitsToFloat(DU32(), hn::ShiftRight<16>(high));
#endif
  }
};

// Payload values of one float format, widened in registers (exact), with the ULP distance of the
// same loaded bits. The last partial group is read from zero-padded copies: nothing past n is
// touched, and a padded lane (0 against 0) has distance 0.
//
// Minima, maxima and zero counts are taken on the float32 values, before widening: widening is
// exact and monotonic, so they are the same numbers, and the float32 vectors are half as wide
// (on AVX-512 a 256-bit operation instead of a 512-bit one, which Zen 4 splits in two).
template <class Fmt>
struct RawSource {
  static constexpr bool kNarrowExtremes = true;
  using T = typename Fmt::T;
  static constexpr int kShift = 32 - 8 * static_cast<int>(sizeof(T));
  const T* HWY_RESTRICT ref;
  const T* HWY_RESTRICT cand;
  const T* ref_tail;
  const T* cand_tail;
  size_t tail_start;
  hn::Vec<DI> xr, xc;  // `high` bits of the last load, as signed lanes
  hn::Vec<DU> best;    // running max of (ULP distance << kShift) per lane
  hn::Vec<DF> fr, fc;  // the float32 values of the last load
  hn::Vec<DF> min_r, max_r, min_c, max_c;  // over finite pairs
  uint64_t zero_r = 0, zero_c = 0;         // finite pairs only
  size_t n = 0;                            // values in the chunk
  size_t valid = kN;                       // lanes of the last load that hold values
  // load2's accumulators, on 2 kN lanes (kPaired only; folded into the above by fold_wide).
  hn::Vec<DWU> wbest{};
  hn::Vec<DW> wmin_r{}, wmax_r{}, wmin_c{}, wmax_c{};
  hn::Vec<DW> wfr{}, wfc{};   // the float32 values of the last load2
  hn::Vec<DWI> wxr{}, wxc{};  // their `high` bits, as signed lanes (float32)
  hn::Vec<DWH> wrr{}, wrc{};  // their own bits, as signed lanes (float16, bfloat16)
  hn::Vec<DWH> wbest16{};     // running max of the ULP distance from ulp_wide_over (16-bit)
  // Below this, r·c of a pair of one sign may have a subnormal r (State::update_uthr): a ULP
  // distance up to uthr (at most 48·2^23 `high` units in float32 and bfloat16, 2^26 = 2^10
  // float16 ULPs in float16) from a subnormal r leaves |c| < 2^-78 in float32 and bfloat16
  // (|r·c| < 2^-204, well below this 2^-126, the smallest normal float32 a float32 product
  // can be tested against) and |c| < 2^-13 in float16 (subnormal below 2^-14: |r·c| < 2^-27).
  static constexpr float kTinyProduct = Fmt::kTinyProduct;
  static constexpr double kUlpDoubling = Fmt::kUlpDoubling;
  static constexpr int kMaxDoublings = Fmt::kMaxDoublings;

  // Elements [i, i + kN) and [i + kLanes, i + kLanes + kN) (step_finite2), all finite pairs
  // (RunChunk checks that afterwards), widened into two float64 vectors each side; the extremes
  // are taken here from the same loads on 2 kN lanes at once (on AVX-512 one 512-bit operation
  // instead of two 256-bit ones), the ULP distance and zero counts by ulp_wide_over or
  // zeros_and_ulp_wide; one prefetch per 64 bytes of float32, not two.
#if HWY_TARGET != HWY_SCALAR
  HWY_INLINE void load2(size_t i, V& r0, V& c0, V& r1, V& c1) {
    const DWI dwi;
    const T* pr = ref + i;
    const T* pc = cand + i;
    hwy::Prefetch(reinterpret_cast<const T*>(reinterpret_cast<uintptr_t>(pr) + kPrefetchBytes));
    hwy::Prefetch(reinterpret_cast<const T*>(reinterpret_cast<uintptr_t>(pc) + kPrefetchBytes));
    hn::Vec<DW> wr, wc;
    if constexpr (sizeof(T) == 4) {
      const hn::Vec<DWU> hr = LoadTwo<DWU>(pr), hc = LoadTwo<DWU>(pc);
      wr = Fmt::ToF32(hr);
      wc = Fmt::ToF32(hc);
      wxr = hn::BitCast(dwi, hr);
      wxc = hn::BitCast(dwi, hc);
      // Widened from memory operands: no extraction of the upper half from a register.
      r0 = hn::PromoteTo(D(), hn::LoadU(DF(), reinterpret_cast<const float*>(pr)));
      r1 = hn::PromoteTo(D(), hn::LoadU(DF(), reinterpret_cast<const float*>(pr + kLanes)));
      c0 = hn::PromoteTo(D(), hn::LoadU(DF(), reinterpret_cast<const float*>(pc)));
      c1 = hn::PromoteTo(D(), hn::LoadU(DF(), reinterpret_cast<const float*>(pc + kLanes)));
    } else {
      // The ULP distance is taken on the 16-bit bits themselves (ulp_wide_over): float16 needs
      // no `high` at all on the fast path (vcvtph2ps reads the raw bits), and the distance
      // works on 16-bit lanes, half the width of 32-bit ones.
      const auto raw_r = LoadTwo<hn::RebindToUnsigned<DWH>>(pr);
      const auto raw_c = LoadTwo<hn::RebindToUnsigned<DWH>>(pc);
      wr = Fmt::ToF32(High(raw_r), raw_r);
      wc = Fmt::ToF32(High(raw_c), raw_c);
      wrr = hn::BitCast(DWH(), raw_r);
      wrc = hn::BitCast(DWH(), raw_c);
      r0 = hn::PromoteTo(D(), hn::LowerHalf(DF(), wr));
      r1 = hn::PromoteTo(D(), hn::UpperHalf(DF(), wr));
      c0 = hn::PromoteTo(D(), hn::LowerHalf(DF(), wc));
      c1 = hn::PromoteTo(D(), hn::UpperHalf(DF(), wc));
    }
    wmin_r = hn::Min(wmin_r, wr);
    wmax_r = hn::Max(wmax_r, wr);
    wmin_c = hn::Min(wmin_c, wc);
    wmax_c = hn::Max(wmax_c, wc);
    wfr = wr;
    wfc = wc;
  }
  // The kN elements at p and the kN at p + kLanes, as one vector of 2 kN lanes (one load where
  // they are adjacent, kG == 1).
  template <class DX>
  static HWY_INLINE hn::Vec<DX> LoadTwo(const T* p) {
    if constexpr (kG == 1) {
      return hn::LoadU(DX(), p);
    } else {
      const hn::Half<DX> dh;
      return hn::Combine(DX(), hn::LoadU(dh, p + kLanes), hn::LoadU(dh, p));
    }
  }
  // A 16-bit format's bits moved to the top of 32-bit lanes.
  static HWY_INLINE hn::Vec<DWU> High(hn::Vec<hn::RebindToUnsigned<DWH>> raw) {
    return hn::ShiftLeft<16>(hn::PromoteTo(DWU(), raw));
  }
  // The last load2's ULP distances when no lane holds a zero and each lane has one sign on both
  // sides (State::step_finite2 knows): |bits(r) - bits(c)|, below 2^31 (float32) or 2^15 (the
  // 16-bit formats, whose finite magnitudes are below 0x7F80); whether one exceeds uthr (in
  // `high` units) or, equivalently, uthr16 (in the 16-bit formats' own units).
  HWY_INLINE bool ulp_wide_over(hn::Vec<DWI> uthr, hn::Vec<DWH> uthr16) {
    if constexpr (sizeof(T) == 4) {
      const auto u = hn::Abs(hn::Sub(wxr, wxc));
      wbest = hn::Max(wbest, hn::BitCast(DWU(), u));
      return !hn::AllFalse(DWI(), hn::Gt(u, uthr));
    } else {
      (void)uthr;
      const auto u = hn::Abs(hn::Sub(wrr, wrc));
      wbest16 = hn::Max(wbest16, u);
      return !hn::AllFalse(DWH(), hn::Gt(u, uthr16));
    }
  }
  // The last load2's zero counts and ULP distances in the general form of ulp().
  HWY_INLINE void zeros_and_ulp_wide() {
    const DW dw;
    const DWI dwi;
    if constexpr (sizeof(T) == 2) {
      wxr = hn::BitCast(dwi, High(hn::BitCast(hn::RebindToUnsigned<DWH>(), wrr)));
      wxc = hn::BitCast(dwi, High(hn::BitCast(hn::RebindToUnsigned<DWH>(), wrc)));
    }
    const auto zr = hn::Eq(wfr, hn::Zero(dw));
    const auto zc = hn::Eq(wfc, hn::Zero(dw));
    zero_r += hn::CountTrue(dw, zr);
    zero_c += hn::CountTrue(dw, zc);
    const auto izero = hn::Zero(dwi);
    const auto kmin = hn::Set(dwi, std::numeric_limits<int32_t>::min());
    const auto orr = hn::IfThenElse(hn::Lt(wxr, izero), hn::Sub(kmin, wxr), wxr);
    const auto orc = hn::IfThenElse(hn::Lt(wxc, izero), hn::Sub(kmin, wxc), wxc);
    wbest = hn::Max(wbest, hn::BitCast(DWU(), hn::Sub(hn::Max(orr, orc), hn::Min(orr, orc))));
  }
#endif
  // load2's accumulators into the kN-lane ones (order-free: maxima, minima).
  HWY_INLINE void fold_wide() {
#if HWY_TARGET != HWY_SCALAR
    if constexpr (kPaired) {
      const DF df;
      const DU du;
      min_r = hn::Min(min_r, hn::Min(hn::LowerHalf(df, wmin_r), hn::UpperHalf(df, wmin_r)));
      max_r = hn::Max(max_r, hn::Max(hn::LowerHalf(df, wmax_r), hn::UpperHalf(df, wmax_r)));
      min_c = hn::Min(min_c, hn::Min(hn::LowerHalf(df, wmin_c), hn::UpperHalf(df, wmin_c)));
      max_c = hn::Max(max_c, hn::Max(hn::LowerHalf(df, wmax_c), hn::UpperHalf(df, wmax_c)));
      if constexpr (sizeof(T) == 2) {
        wbest = hn::Max(wbest, High(hn::BitCast(hn::RebindToUnsigned<DWH>(), wbest16)));
      }
      best = hn::Max(best, hn::Max(hn::LowerHalf(du, wbest), hn::UpperHalf(du, wbest)));
    }
#endif
  }

  template <bool kTail>
  HWY_INLINE void load(size_t i, V& r, V& c) {
    const T* pr = ref + i;
    const T* pc = cand + i;
    if constexpr (kTail) {
      pr = ref_tail + (i - tail_start);
      pc = cand_tail + (i - tail_start);
      valid = i < n ? (n - i < kN ? n - i : kN) : 0;
    } else {
      valid = kN;
      // The payload streams from memory once: ask for it a few pages ahead, where the hardware
      // prefetchers (which stop at page boundaries) do not reach. Never faults; address only.
      hwy::Prefetch(reinterpret_cast<const T*>(reinterpret_cast<uintptr_t>(pr) + kPrefetchBytes));
      hwy::Prefetch(reinterpret_cast<const T*>(reinterpret_cast<uintptr_t>(pc) + kPrefetchBytes));
    }
    hn::Vec<DU> hr, hc;
    Load(pr, hr, fr);
    Load(pc, hc, fc);
    r = hn::PromoteTo(D(), fr);
    c = hn::PromoteTo(D(), fc);
    xr = hn::BitCast(DI(), hr);
    xc = hn::BitCast(DI(), hc);
  }
  // The `high` bits and the float32 values of the elements at p, one per lane of DX: DF (kN
  // lanes, load) or DW (2 kN, load2).
  template <class DX = DF>
  static HWY_INLINE void Load(const T* p, hn::Vec<hn::RebindToUnsigned<DX>>& high, hn::Vec<DX>& f) {
    using DXU = hn::RebindToUnsigned<DX>;
    if constexpr (sizeof(T) == 4) {
      high = hn::LoadU(DXU(), p);
      f = Fmt::ToF32(high);
    } else {
      const auto raw = hn::LoadU(hn::Rebind<T, DX>(), p);
      high = hn::ShiftLeft<kShift>(hn::PromoteTo(DXU(), raw));
      f = Fmt::ToF32(high, raw);
    }
  }
  // Over the finite pairs among the first `valid` lanes of the last load; kMasked false: the
  // caller knows every lane is a finite pair. (The float64 mask of the caller cannot be rebound
  // to 32-bit lanes in the Highway version we build with, so the test is redone here: 2 ops.)
  template <bool kMasked>
  HWY_INLINE void extremes() {
    const DF df;
    const auto pinf = hn::Set(df, std::numeric_limits<float>::infinity());
    const auto zero = hn::Zero(df);
    if constexpr (kMasked) {
      const auto f = hn::And(hn::And(hn::IsFinite(fr), hn::IsFinite(fc)), hn::FirstN(df, valid));
      min_r = hn::Min(min_r, hn::IfThenElse(f, fr, pinf));
      max_r = hn::Max(max_r, hn::IfThenElse(f, fr, hn::Neg(pinf)));
      min_c = hn::Min(min_c, hn::IfThenElse(f, fc, pinf));
      max_c = hn::Max(max_c, hn::IfThenElse(f, fc, hn::Neg(pinf)));
      const auto zr = hn::And(f, hn::Eq(fr, zero));
      const auto zc = hn::And(f, hn::Eq(fc, zero));
      if (!hn::AllFalse(df, hn::Or(zr, zc))) {
        zero_r += hn::CountTrue(df, zr);
        zero_c += hn::CountTrue(df, zc);
      }
    } else {
      min_r = hn::Min(min_r, fr);
      max_r = hn::Max(max_r, fr);
      min_c = hn::Min(min_c, fc);
      max_c = hn::Max(max_c, fc);
      const auto zr = hn::Eq(fr, zero);
      const auto zc = hn::Eq(fc, zero);
      if (!hn::AllFalse(df, hn::Or(zr, zc))) {  // exact zeros are uncommon in activations
        zero_r += hn::CountTrue(df, zr);
        zero_c += hn::CountTrue(df, zc);
      }
    }
  }

  // docs/metrics.md §5 on the `high` bits: ord(b) = sign ? -magnitude : magnitude, which for a
  // negative int32 b is INT32_MIN - b (wrapping). |ord(a) - ord(b)| < 2^32 is max - min in
  // wrapping uint32 arithmetic; for 16-bit formats it is the distance << 16, still below 2^32.
  // Pairs with an Inf/NaN side (exponent field all ones) count as distance 0.
  HWY_INLINE void ulp(bool all_finite) {
    const DI di;
    const DU du;
    const auto zero = hn::Zero(di);
    // Both sides of a lane of one sign (nearly every lane: a sign differs only near zero): their
    // ords differ by exactly the difference of the bits, whose magnitude is below 2^31, so
    // |xr - xc| is the distance without the two ord conversions. A vector with a lane of
    // differing signs (±0 included) takes the general form below.
    if (all_finite && hn::AllFalse(di, hn::Lt(hn::Xor(xr, xc), zero))) {
      best = hn::Max(best, hn::BitCast(du, hn::Abs(hn::Sub(xr, xc))));
      return;
    }
    // (Highway 1.0.3's IfNegativeThenElse is wrong on SSSE3: the mask comes from a comparison.)
    const auto kmin = hn::Set(di, std::numeric_limits<int32_t>::min());
    const auto orr = hn::IfThenElse(hn::Lt(xr, zero), hn::Sub(kmin, xr), xr);
    const auto orc = hn::IfThenElse(hn::Lt(xc, zero), hn::Sub(kmin, xc), xc);
    auto dist = hn::BitCast(du, hn::Sub(hn::Max(orr, orc), hn::Min(orr, orc)));
    if (!all_finite) {
      const auto exp = hn::Set(di, static_cast<int32_t>(Fmt::kExpHigh));
      const auto nonfin = hn::Or(hn::Eq(hn::And(xr, exp), exp), hn::Eq(hn::And(xc, exp), exp));
      dist = hn::IfThenZeroElse(hn::RebindMask(du, nonfin), dist);
    }
    best = hn::Max(best, dist);
  }
};

// The chunk loop shared by every source of values (Src: F64Source, F32Source).
template <class Src>
HWY_INLINE void RunChunk(Src& src, size_t n, const Params& p, ChunkPartial* out) {
  const D d;
  State s;
  s.zero = hn::Zero(d);
  s.tiny = hn::Set(d, 0x1p-1000);
  s.slack = hn::Set(d, 1.0 - 0x1p-40);
  s.pinf = hn::Set(d, std::numeric_limits<double>::infinity());
  s.ninf = hn::Set(d, -std::numeric_limits<double>::infinity());
  s.atol = hn::Set(d, p.atol);
  s.rtol = hn::Set(d, p.rtol);
  s.eps = hn::Set(d, p.rel_eps);
  s.max_abs = s.zero;
  s.max_rel = hn::Set(d, p.max_rel_floor);
  s.max_rel_slack = hn::Mul(s.max_rel, s.slack);
  s.tiny_possible = !hn::AllFalse(d, hn::Lt(hn::Mul(s.max_rel_slack, s.eps), s.tiny));
  if constexpr (kPaired && Src::kNarrowExtremes) s.template update_uthr<Src>();
  s.min_ref = s.pinf;
  s.min_cand = s.pinf;
  s.max_ref = s.ninf;
  s.max_cand = s.ninf;
  s.nan_equal = p.nan_equal;

  // One sweep per vector position j of the group: each sweep's sums stay in registers, and a
  // lane still adds its elements in element order. (Looping over j inside the group instead
  // makes the compiler keep the kG sets of sums in memory.)
  const M all = hn::FirstN(d, kN);
  const size_t full = n / kLanes;
  for (size_t j = 0; j < kG; ++j) {
    const Sums zeros{s.zero, s.zero, s.zero, s.zero, s.zero, s.zero, s.zero};
    Sums sums = zeros;
    // Optimistically, the whole sweep without finiteness tests: a NaN or Inf among the values
    // makes the running sum of its side non-finite (they absorb every addition), so finite sums
    // of both sides prove every pair was finite and the unmasked steps were the right ones.
    // Otherwise (or on a spurious overflow of a sum of huge finite values) the sweep is redone
    // from the saved state with a test per vector. Either way the same operations reach the
    // result, so the bits do not depend on which route was taken.
    const State saved = s;
    const Src saved_src = src;
    size_t g0 = 0;
    if constexpr (kPaired && Src::kNarrowExtremes) {
      for (; g0 + 2 <= full; g0 += 2) s.step_finite2(src, g0 * kLanes + j * kN, sums);
    }
    for (size_t g = g0; g < full; ++g) s.step_finite(src, g * kLanes + j * kN, sums);
    if (!hn::AllTrue(d, hn::And(hn::IsFinite(sums.r), hn::IsFinite(sums.c)))) {
      s = saved;
      src = saved_src;
      sums = zeros;
      for (size_t g = 0; g < full; ++g) s.step<false>(src, g * kLanes + j * kN, sums, all);
    }
    if (full * kLanes < n) {
      const size_t i = full * kLanes + j * kN;
      s.step<true>(src, i, sums, hn::FirstN(d, i < n ? n - i : 0));
    }
    hn::Store(sums.abs, d, out->lanes[kSumAbs] + j * kN);
    hn::Store(sums.sqd, d, out->lanes[kSumSqDiff] + j * kN);
    hn::Store(sums.r, d, out->lanes[kSumRef] + j * kN);
    hn::Store(sums.c, d, out->lanes[kSumCand] + j * kN);
    hn::Store(sums.rr, d, out->lanes[kSumSqRef] + j * kN);
    hn::Store(sums.cc, d, out->lanes[kSumSqCand] + j * kN);
    hn::Store(sums.rc, d, out->lanes[kSumDot] + j * kN);
  }

  const auto fmax = [](double a, double b) { return a < b ? b : a; };
  const auto fmin = [](double a, double b) { return b < a ? b : a; };
  out->max_abs = reduce_with(s.max_abs, fmax);
  out->max_rel = reduce_with(s.max_rel, fmax);
  out->min_ref = reduce_with(s.min_ref, fmin);
  out->max_ref = reduce_with(s.max_ref, fmax);
  out->min_cand = reduce_with(s.min_cand, fmin);
  out->max_cand = reduce_with(s.max_cand, fmax);
  out->zero_ref = s.zero_ref_n;
  out->zero_cand = s.zero_cand_n;
  out->nonfinite = s.nonfinite;
  out->nan_ref = s.nan_ref;
  out->nan_cand = s.nan_cand;
  out->nan_both = s.nan_both;
  out->inf_ref = s.inf_ref;
  out->inf_cand = s.inf_cand;
  out->inf_same = s.inf_same;
  out->mismatch = s.mismatch;
  out->first_mismatch = s.first;
}


void ChunkKernel(const double* HWY_RESTRICT ref, const double* HWY_RESTRICT cand, size_t n,
                 const Params& p, ChunkPartial* out) {
  F64Source src{ref, cand};
  RunChunk(src, n, p, out);
  out->max_ulp = 0;
}

template <class Fmt>
HWY_INLINE void RawKernel(const std::byte* ref_bytes, const std::byte* cand_bytes, size_t n,
                          const Params& p, ChunkPartial* out) {
  using T = typename Fmt::T;
  const auto* ref = reinterpret_cast<const T*>(ref_bytes);
  const auto* cand = reinterpret_cast<const T*>(cand_bytes);
  const size_t tail_start = n / kLanes * kLanes;
  HWY_ALIGN T ref_tail[kLanes] = {};
  HWY_ALIGN T cand_tail[kLanes] = {};
  if (n > tail_start) {  // memcpy from a null pointer is undefined even for 0 bytes (empty input)
    std::memcpy(ref_tail, ref_bytes + tail_start * sizeof(T), (n - tail_start) * sizeof(T));
    std::memcpy(cand_tail, cand_bytes + tail_start * sizeof(T), (n - tail_start) * sizeof(T));
  }
  const auto pinf = hn::Set(DF(), std::numeric_limits<float>::infinity());
  const auto zf = hn::Zero(DF());
  RawSource<Fmt> src{ref,        cand,       ref_tail, cand_tail, tail_start,    hn::Zero(DI()),
                     hn::Zero(DI()), hn::Zero(DU()), zf,   zf,        pinf,          hn::Neg(pinf),
                     pinf,       hn::Neg(pinf)};
  src.n = n;
  src.wbest = hn::Zero(DWU());
  src.wbest16 = hn::Zero(DWH());
  src.wmin_r = src.wmin_c = hn::Set(DW(), std::numeric_limits<float>::infinity());
  src.wmax_r = src.wmax_c = hn::Set(DW(), -std::numeric_limits<float>::infinity());
  RunChunk(src, n, p, out);
  src.fold_wide();
  const auto fmax = [](double a, double b) { return a < b ? b : a; };
  const auto fmin = [](double a, double b) { return b < a ? b : a; };
  out->min_ref = reduce_with(hn::PromoteTo(D(), src.min_r), fmin);
  out->max_ref = reduce_with(hn::PromoteTo(D(), src.max_r), fmax);
  out->min_cand = reduce_with(hn::PromoteTo(D(), src.min_c), fmin);
  out->max_cand = reduce_with(hn::PromoteTo(D(), src.max_c), fmax);
  out->zero_ref = src.zero_r;
  out->zero_cand = src.zero_c;
  HWY_ALIGN uint32_t best[hn::MaxLanes(DU())];
  hn::Store(src.best, DU(), best);
  uint32_t m = 0;
  for (uint32_t b : best) m = m < b ? b : m;
  out->max_ulp = m >> RawSource<Fmt>::kShift;
}

void ChunkF32Kernel(const std::byte* ref, const std::byte* cand, size_t n, const Params& p,
                    ChunkPartial* out) {
  RawKernel<F32Format>(ref, cand, n, p, out);
}
void ChunkF16Kernel(const std::byte* ref, const std::byte* cand, size_t n, const Params& p,
                    ChunkPartial* out) {
  RawKernel<F16Format>(ref, cand, n, p, out);
}
void ChunkBF16Kernel(const std::byte* ref, const std::byte* cand, size_t n, const Params& p,
                     ChunkPartial* out) {
  RawKernel<BF16Format>(ref, cand, n, p, out);
}

// ULP distance on raw bits of one float width (docs/metrics.md §5): ord(b) = sign ? -mag : mag,
// distance |ord(a) - ord(b)| over pairs where neither matches the non-finite pattern
// ((bits & mask) == mask). The true distance is below 2^W, so the unsigned difference of the
// larger minus the smaller is exact in W-bit wrapping arithmetic. Integer and order-free: every
// target gives the same result.
template <typename T>
HWY_INLINE uint64_t MaxUlpImpl(const uint8_t* HWY_RESTRICT a_bytes,
                               const uint8_t* HWY_RESTRICT b_bytes, size_t n, uint64_t mask64) {
  const hn::ScalableTag<T> du;
  const hn::RebindToSigned<decltype(du)> di;
  using VU = hn::Vec<decltype(du)>;
  const T mask = static_cast<T>(mask64);
  const T magnitude = static_cast<T>(static_cast<T>(~T{0}) >> 1);
  const VU vmask = hn::Set(du, mask);
  const VU vmag = hn::Set(du, magnitude);
  const auto izero = hn::Zero(di);
  VU best = hn::Zero(du);
  const size_t lanes = hn::Lanes(du);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const VU x = hn::LoadU(du, reinterpret_cast<const T*>(a_bytes) + i);
    const VU y = hn::LoadU(du, reinterpret_cast<const T*>(b_bytes) + i);
    const auto fin = hn::And(hn::Not(hn::Eq(hn::And(x, vmask), vmask)),
                             hn::Not(hn::Eq(hn::And(y, vmask), vmask)));
    const auto mx = hn::BitCast(di, hn::And(x, vmag));
    const auto my = hn::BitCast(di, hn::And(y, vmag));
    const auto ox = hn::IfThenElse(hn::Lt(hn::BitCast(di, x), izero), hn::Sub(izero, mx), mx);
    const auto oy = hn::IfThenElse(hn::Lt(hn::BitCast(di, y), izero), hn::Sub(izero, my), my);
    const VU ux = hn::BitCast(du, ox), uy = hn::BitCast(du, oy);
    const VU dist = hn::IfThenElse(hn::RebindMask(du, hn::Lt(ox, oy)), hn::Sub(uy, ux),
                                   hn::Sub(ux, uy));
    best = hn::Max(best, hn::IfThenElseZero(fin, dist));
  }
  HWY_ALIGN T tmp[hn::MaxLanes(du)];
  hn::Store(best, du, tmp);
  uint64_t result = 0;
  for (size_t l = 0; l < lanes; ++l) result = result < tmp[l] ? tmp[l] : result;
  using S = hwy::MakeSigned<T>;
  for (; i < n; ++i) {
    T x, y;
    std::memcpy(&x, a_bytes + i * sizeof(T), sizeof(T));
    std::memcpy(&y, b_bytes + i * sizeof(T), sizeof(T));
    if ((x & mask) == mask || (y & mask) == mask) continue;
    const int64_t ox = static_cast<S>(x) < 0 ? -static_cast<int64_t>(x & magnitude) : (x & magnitude);
    const int64_t oy = static_cast<S>(y) < 0 ? -static_cast<int64_t>(y & magnitude) : (y & magnitude);
    const auto dist = static_cast<uint64_t>(ox > oy ? ox - oy : oy - ox);
    result = result < dist ? dist : result;
  }
  return result;
}

uint64_t MaxUlp8(const uint8_t* a, const uint8_t* b, size_t n, uint64_t mask) {
  return MaxUlpImpl<uint8_t>(a, b, n, mask);
}
uint64_t MaxUlp16(const uint8_t* a, const uint8_t* b, size_t n, uint64_t mask) {
  return MaxUlpImpl<uint16_t>(a, b, n, mask);
}
uint64_t MaxUlp32(const uint8_t* a, const uint8_t* b, size_t n, uint64_t mask) {
  return MaxUlpImpl<uint32_t>(a, b, n, mask);
}

// ---- the detail pass of --html (pair_metrics.hpp: diff_runs, count_at_least) -------------------
// Exact operations only (a widening, a subtraction, |x|, minima and maxima, compares, integer
// counts), so every target gives the scalar loop's result.

// A chunk's values for DiffRuns: float64 arrays, or a raw float format read in place (RawSource's
// loads: the value widened to float64 in registers, exact).
struct F64Pair {
  const double* HWY_RESTRICT r;
  const double* HWY_RESTRICT c;
  HWY_INLINE void load(size_t i, V& vr, V& vc) const {
    vr = hn::LoadU(D(), r + i);
    vc = hn::LoadU(D(), c + i);
  }
  HWY_INLINE double diff(size_t i) const { return std::abs(c[i] - r[i]); }
};
template <class Fmt>
struct RawPair {
  using T = typename Fmt::T;
  const T* HWY_RESTRICT r;
  const T* HWY_RESTRICT c;
  HWY_INLINE void load(size_t i, V& vr, V& vc) const {
    hn::Vec<DU> high;
    hn::Vec<DF> f;
    RawSource<Fmt>::Load(r + i, high, f);
    vr = hn::PromoteTo(D(), f);
    RawSource<Fmt>::Load(c + i, high, f);
    vc = hn::PromoteTo(D(), f);
  }
  HWY_INLINE double diff(size_t i) const {
    return std::abs(Fmt::Scalar(c[i]) - Fmt::Scalar(r[i]));
  }
};

// d as float32, +inf beyond float's range (converting such a double is undefined behaviour), and
// whether that lost anything: the scalar tails of DiffRuns and DiffRunsNarrow.
HWY_INLINE float NarrowDiff(double x, bool& inexact) {
  const float x32 = numerics::d_to_f32(x);
  inexact = inexact || static_cast<double>(x32) != x;
  return x32;
}

// One loop for the things a chunk's d feed that need every element: the stored d (for the
// histogram's counts and the worst elements), the extremes, the heat runs' maxima, and d rounded
// to float32 with whether every d of the chunk is a float32 value (so that the counts can run on
// float32 lanes, twice as many per vector; numerics::DiffStats::f32). kD64 / kD32: whether d /
// d32 is stored (without d32 the flag is false). Runs of at least a vector keep their maximum in
// a register (one horizontal reduction per run); shorter ones and the tails go element by element.
// The float32 copy of a d that is not a float32 value may differ between targets (overflow
// saturates on some), and is then unused.
template <bool kD64, bool kD32, class Src>
HWY_INLINE numerics::DiffStats DiffRuns(const Src& src, double* HWY_RESTRICT d,
                                        float* HWY_RESTRICT d32, const uint32_t* HWY_RESTRICT ends,
                                        size_t runs, double* HWY_RESTRICT out) {
  const D df;
  const DF df32;
  (void)df32;  // unused without kD32
  constexpr double inf = std::numeric_limits<double>::infinity();
  V lo = hn::Set(df, inf);
  M inexact = hn::FirstN(df, 0);
  bool inexact_s = false;
  double lo_s = inf, hi = 0;
  size_t i = 0;
  for (size_t j = 0; j < runs; ++j) {
    const size_t end = ends[j];
    double m = 0;
    if (end - i >= kN) {
      V run = hn::Zero(df);
      for (; i + kN <= end; i += kN) {
        V r, c;
        src.load(i, r, c);
        const V x = hn::Abs(hn::Sub(c, r));
        if constexpr (kD64) hn::StoreU(x, df, d + i);
        if constexpr (kD32) {
          const auto x32 = hn::DemoteTo(df32, x);
          hn::StoreU(x32, df32, d32 + i);
          inexact = hn::Or(inexact, hn::Ne(hn::PromoteTo(df, x32), x));
        }
        lo = hn::Min(lo, x);
        run = hn::Max(run, x);
      }
      m = hn::GetLane(hn::MaxOfLanes(df, run));
    }
    for (; i < end; ++i) {
      const double x = src.diff(i);
      if constexpr (kD64) d[i] = x;
      if constexpr (kD32) {
        d32[i] = NarrowDiff(x, inexact_s);
      }
      lo_s = x < lo_s ? x : lo_s;
      m = x > m ? x : m;
    }
    out[j] = m;
    hi = m > hi ? m : hi;
  }
  const double lv = hn::GetLane(hn::MinOfLanes(df, lo));
  return {lv < lo_s ? lv : lo_s, hi, kD32 && !inexact_s && hn::AllFalse(df, inexact)};
}

// A raw float format's values as float32, a full vector of them (16 per AVX-512 vector): exact
// widenings (every f16 and bf16 is a float32).
template <class Fmt, class DW>
HWY_INLINE hn::Vec<DW> LoadWide(DW dw, const typename Fmt::T* HWY_RESTRICT p) {
  const hn::RebindToUnsigned<DW> du;
  if constexpr (sizeof(typename Fmt::T) == 4) {
    return hn::BitCast(dw, hn::LoadU(du, p));
  } else {
    const auto raw = hn::LoadU(hn::Rebind<uint16_t, DW>(), p);
    if constexpr (std::is_same_v<Fmt, BF16Format>) {
      return hn::BitCast(dw, hn::ShiftLeft<16>(hn::PromoteTo(du, raw)));
    } else {
#if HWY_ARCH_X86 && HWY_TARGET < HWY_SSE4 && !defined(HWY_DISABLE_F16C)
      return hn::PromoteTo(dw, hn::BitCast(hn::Rebind<hwy::float16_t, DW>(), raw));
#else
      return numerics::HWY_NAMESPACE::HalfBitsToFloat(du, hn::PromoteTo(du, raw));
#endif
    }
  }
}

// DiffRuns of a raw float format storing d32 only, on float32 lanes (twice as many per vector as
// float64's): d = |c - r| rounded to float32, and whether every such rounding was exact, from
// the rounding error of the float32 subtraction computed exactly by TwoSum (six additions,
// exact for finite operands in round-to-nearest without overflow: this file never contracts
// them into FMAs; an overflow gives an error of NaN, which counts as inexact). An exact float32
// difference is the float64 one, so d32, the extremes and the runs' maxima are then those of
// DiffRuns; the positions of the inexact ones go to `rec` (numerics::InexactDiffs), for the
// caller to mend or to redo the chunk on float64. The flag may miss a d that float64 rounds to a
// float32 value while float32 does not reach it exactly (the exact difference wider than 53
// bits): such a position is merely mended to the value it already has.
HWY_INLINE void NoteInexact(numerics::InexactDiffs* rec, size_t i) {
  if (rec->count < numerics::InexactDiffs::kCap) rec->at[rec->count] = static_cast<uint32_t>(rec->base + i);
  ++rec->count;
}
// The lanes of `bad` as positions i, i + 1, ... (a rare vector: a few per chunk at most).
template <class DW, class MW>
HWY_INLINE void NoteInexactLanes(DW dw, MW bad, numerics::InexactDiffs* rec, size_t i) {
  uint8_t bits[(hn::MaxLanes(dw) + 7) / 8];
  hn::StoreMaskBits(dw, bad, bits);
  for (size_t l = 0; l < hn::Lanes(dw); ++l)
    if (bits[l / 8] >> (l % 8) & 1) NoteInexact(rec, i + l);
}
// Lanes where a - b, rounded, is not the exact difference: TwoSum's error (six additions, exact
// for finite operands in round-to-nearest; never contracted into FMAs in this file), and not Ne:
// Highway's is an ordered compare, false for the NaN error of an overflow, which is inexact.
template <class DW, class VW>
HWY_INLINE auto InexactSub(DW dw, VW a, VW b, VW s) {
  const auto a1 = hn::Add(s, b);
  const auto b1 = hn::Sub(s, a1);
  const auto err = hn::Sub(hn::Sub(a, a1), hn::Add(b, b1));  // (a - a1) + (-b - b1)
  return hn::Not(hn::Eq(err, hn::Zero(dw)));
}
template <class Fmt>
HWY_INLINE numerics::DiffStats DiffRunsNarrow(const typename Fmt::T* HWY_RESTRICT r,
                                              const typename Fmt::T* HWY_RESTRICT c,
                                              float* HWY_RESTRICT d32,
                                              const uint32_t* HWY_RESTRICT ends, size_t runs,
                                              double* HWY_RESTRICT out, numerics::InexactDiffs* rec) {
  const hn::ScalableTag<float> dw;
  const size_t lanes = hn::Lanes(dw);
  constexpr float inf = std::numeric_limits<float>::infinity();
  const auto zero = hn::Zero(dw);
  auto lo = hn::Set(dw, inf);
  auto inexact = hn::FirstN(dw, 0);
  bool inexact_s = false;
  float lo_s = inf, hi = 0;
  size_t i = 0;
  for (size_t j = 0; j < runs; ++j) {
    const size_t end = ends[j];
    float m = 0;
    if (end - i >= lanes) {
      auto run = zero;
      for (; i + lanes <= end; i += lanes) {
        const auto a = LoadWide<Fmt>(dw, c + i);
        const auto b = LoadWide<Fmt>(dw, r + i);
        const auto s = hn::Sub(a, b);
        const auto bad = InexactSub(dw, a, b, s);
        if (HWY_UNLIKELY(!hn::AllFalse(dw, bad))) {  // a few per chunk at most, in real data
          inexact = hn::Or(inexact, bad);
          if (rec != nullptr) NoteInexactLanes(dw, bad, rec, i);
        }
        const auto x = hn::Abs(s);
        hn::StoreU(x, dw, d32 + i);
        lo = hn::Min(lo, x);
        run = hn::Max(run, x);
      }
      m = hn::GetLane(hn::MaxOfLanes(dw, run));
    }
    for (; i < end; ++i) {
      const double x = std::abs(Fmt::Scalar(c[i]) - Fmt::Scalar(r[i]));
      bool lost = false;
      const float x32 = NarrowDiff(x, lost);
      if (lost) {
        inexact_s = true;
        if (rec != nullptr) NoteInexact(rec, i);
      }
      d32[i] = x32;
      lo_s = x32 < lo_s ? x32 : lo_s;
      m = x32 > m ? x32 : m;
    }
    out[j] = m;
    hi = m > hi ? m : hi;
  }
  const float lv = hn::GetLane(hn::MinOfLanes(dw, lo));
  return {lv < lo_s ? lv : lo_s, hi, !inexact_s && hn::AllFalse(dw, inexact)};
}

// d, d32 or both (numerics::diff_runs: a null pointer is not stored to).
template <class Src>
HWY_INLINE numerics::DiffStats DiffRunsTo(const Src& src, double* HWY_RESTRICT d,
                                          float* HWY_RESTRICT d32, const uint32_t* HWY_RESTRICT ends,
                                          size_t runs, double* HWY_RESTRICT out) {
  if (d32 == nullptr) return DiffRuns<true, false>(src, d, d32, ends, runs, out);
  if (d == nullptr) return DiffRuns<false, true>(src, d, d32, ends, runs, out);
  return DiffRuns<true, true>(src, d, d32, ends, runs, out);
}

numerics::DiffStats DiffRunsF64(const void* ref, const void* cand, double* HWY_RESTRICT d,
                                float* HWY_RESTRICT d32, const uint32_t* HWY_RESTRICT ends,
                                size_t runs, double* HWY_RESTRICT out,
                                numerics::InexactDiffs* rec) {
  (void)rec;  // decoded float64 values seldom give float32 d: the caller stores float64 at once
  return DiffRunsTo(F64Pair{static_cast<const double*>(ref), static_cast<const double*>(cand)}, d,
                    d32, ends, runs, out);
}
template <class Fmt>
numerics::DiffStats DiffRunsRaw(const void* ref, const void* cand, double* HWY_RESTRICT d,
                                float* HWY_RESTRICT d32, const uint32_t* HWY_RESTRICT ends,
                                size_t runs, double* HWY_RESTRICT out,
                                numerics::InexactDiffs* rec) {
  using T = typename Fmt::T;
  if (d == nullptr)
    return DiffRunsNarrow<Fmt>(static_cast<const T*>(ref), static_cast<const T*>(cand), d32, ends,
                               runs, out, rec);
  return DiffRunsTo(RawPair<Fmt>{static_cast<const T*>(ref), static_cast<const T*>(cand)}, d, d32,
                    ends, runs, out);
}
numerics::DiffStats DiffRunsF32(const void* ref, const void* cand, double* HWY_RESTRICT d,
                                float* HWY_RESTRICT d32, const uint32_t* HWY_RESTRICT ends,
                                size_t runs, double* HWY_RESTRICT out,
                                numerics::InexactDiffs* rec) {
  return DiffRunsRaw<F32Format>(ref, cand, d, d32, ends, runs, out, rec);
}
numerics::DiffStats DiffRunsF16(const void* ref, const void* cand, double* HWY_RESTRICT d,
                                float* HWY_RESTRICT d32, const uint32_t* HWY_RESTRICT ends,
                                size_t runs, double* HWY_RESTRICT out,
                                numerics::InexactDiffs* rec) {
  return DiffRunsRaw<F16Format>(ref, cand, d, d32, ends, runs, out, rec);
}
numerics::DiffStats DiffRunsBF16(const void* ref, const void* cand, double* HWY_RESTRICT d,
                                 float* HWY_RESTRICT d32, const uint32_t* HWY_RESTRICT ends,
                                 size_t runs, double* HWY_RESTRICT out,
                                numerics::InexactDiffs* rec) {
  return DiffRunsRaw<BF16Format>(ref, cand, d, d32, ends, runs, out, rec);
}

// DiffCols (numerics::diff_cols): a raw float chunk whose every d is a float32 value, so |c - r|
// on float32 lanes is d exactly, with no rounding-error test; or (kCheck) any chunk, with TwoSum's
// test noting where it may not be (InexactSub, as DiffRunsNarrow). Each segment is a piece of one row
// of the view: its d go into the running column maxima of the heat grid's current row of cells
// (an elementwise max, no horizontal reduction per heat cell) and into d32; returns the smallest
// positive d (+inf when none): the smallest of bits(d) - 1 as unsigned integers, where a zero
// wraps to the largest.
template <class Fmt, bool kCodes, bool kCheck>
HWY_INLINE float DiffColsImpl(const typename Fmt::T* HWY_RESTRICT r,
                              const typename Fmt::T* HWY_RESTRICT c, float* HWY_RESTRICT d32,
                              const uint32_t* HWY_RESTRICT ends, const uint32_t* HWY_RESTRICT cols,
                              size_t segs, float* HWY_RESTRICT colmax, numerics::DiffCodes* codes,
                              numerics::InexactDiffs* rec) {
  const hn::ScalableTag<float> dw;
  const hn::RebindToUnsigned<decltype(dw)> du;
  const hn::RebindToSigned<decltype(dw)> di;
  const size_t lanes = hn::Lanes(dw);
  const auto one = hn::Set(du, 1u);
  auto lo = hn::Set(du, ~0u);
  uint32_t lo_s = ~0u;
  // kCodes: numerics::DiffCodes, the table of exponents [e_first, e_hi]: one vector of entries,
  // or two on 8-lane targets (AVX2), so that their table spans as many binades (15) as AVX-512's
  // (a chunk whose d span more binades than the table is counted against the bin edges instead,
  // several times the cost: detail.cpp, bin_columns).
  constexpr size_t kLanesMax = hn::MaxLanes(di);
  constexpr size_t kEntries = kLanesMax == 8 ? 16 : kLanesMax;
  HWY_ALIGN int32_t tb[kEntries] = {}, te[kEntries] = {};
  int32_t e_first = 0;
  if constexpr (kCodes) {
    const size_t entries = kEntries == kLanesMax ? lanes : kEntries;
    e_first = HWY_MAX(codes->e_hi - static_cast<int32_t>(entries) + 2, 1);
    codes->e_first = e_first;
    tb[0] = 1;
    te[0] = 0x800000;
    for (size_t k = 1; k < entries; ++k) {
      const size_t e = static_cast<size_t>(e_first) + k - 1;
      tb[k] = 2 + codes->base[e] - codes->base[static_cast<size_t>(e_first)];
      te[k] = codes->edge[e];
    }
  }
  const auto vb = hn::Load(di, tb), ve = hn::Load(di, te);
  // The second half of a two-vector table (only read where kEntries == 2 kLanesMax).
  const auto vb1 = hn::Load(di, tb + kEntries - kLanesMax), ve1 = hn::Load(di, te + kEntries - kLanesMax);
  const auto off = hn::Set(di, 1 - e_first), izero = hn::Zero(di), ione = hn::Set(di, 1);
  const auto mant = hn::Set(di, 0x7FFFFF);
  const auto low_mask = hn::Set(di, static_cast<int32_t>(kLanesMax - 1));
  (void)vb, (void)ve, (void)vb1, (void)ve1, (void)off, (void)izero, (void)ione, (void)mant, (void)low_mask;
  // A local pointer: codes->out was read again after every store (which might alias it).
  uint8_t* HWY_RESTRICT out8 = kCodes ? codes->out : nullptr;
  size_t i = 0;
  for (size_t s = 0; s < segs; ++s) {
    const size_t begin = i, end = ends[s];
    float* HWY_RESTRICT cm = colmax + cols[s];  // cm[i - begin]: the column of element i
    for (; i + lanes <= end; i += lanes) {
      const auto vc = LoadWide<Fmt>(dw, c + i), vr = LoadWide<Fmt>(dw, r + i);
      const auto diff = hn::Sub(vc, vr);
      if constexpr (kCheck) {
        const auto bad = InexactSub(dw, vc, vr, diff);
        if (HWY_UNLIKELY(!hn::AllFalse(dw, bad))) NoteInexactLanes(dw, bad, rec, i);
      }
      const auto x = hn::Abs(diff);
      hn::StoreU(x, dw, d32 + i);
      lo = hn::Min(lo, hn::Sub(hn::BitCast(du, x), one));
      float* p = cm + (i - begin);
      hn::StoreU(hn::Max(hn::LoadU(dw, p), x), dw, p);
      if constexpr (kCodes) {
        const auto xi = hn::BitCast(di, x);
        const auto idx = hn::Max(hn::Add(hn::BitCast(di, hn::ShiftRight<23>(hn::BitCast(du, x))), off), izero);
        hn::Vec<decltype(di)> b, edge;
        if constexpr (kEntries == kLanesMax) {
          const auto ix = hn::IndicesFromVec(di, idx);
          b = hn::TableLookupLanes(vb, ix);
          edge = hn::TableLookupLanes(ve, ix);
        } else {  // idx < 2 kLanesMax: its low bits pick the lane, the next one the vector
          const auto ix = hn::IndicesFromVec(di, hn::And(idx, low_mask));
          const auto upper = hn::Gt(idx, low_mask);
          b = hn::IfThenElse(upper, hn::TableLookupLanes(vb1, ix), hn::TableLookupLanes(vb, ix));
          edge = hn::IfThenElse(upper, hn::TableLookupLanes(ve1, ix), hn::TableLookupLanes(ve, ix));
        }
        const auto code = hn::IfThenElse(hn::Lt(hn::And(xi, mant), edge), hn::Sub(b, ione), b);
#if HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL)
        // Codes are below 128, so each lane's low byte is its code: one vpmovdb instead of
        // Highway 1.0's DemoteTo (two packs, a mask and a permute, the loop's costliest part in
        // perf annotate).
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out8 + i), _mm512_cvtepi32_epi8(code.raw));
#elif HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2
        // The same low bytes on AVX2: vpshufb gathers each 128-bit half's four into its first
        // dword, vpermd puts the two dwords side by side (DemoteTo took five operations).
        const __m256i low_bytes = _mm256_shuffle_epi8(
            code.raw, _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                       0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
        const __m256i packed = _mm256_permutevar8x32_epi32(low_bytes, _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0));
        _mm_storel_epi64(reinterpret_cast<__m128i*>(out8 + i), _mm256_castsi256_si128(packed));
#else
        const hn::Rebind<uint8_t, decltype(di)> d8;
        hn::StoreU(hn::DemoteTo(d8, code), d8, out8 + i);
#endif
      }
    }
    for (; i < end; ++i) {
      bool lost = false;
      const float x = NarrowDiff(std::abs(Fmt::Scalar(c[i]) - Fmt::Scalar(r[i])), lost);
      if constexpr (kCheck) {
        if (lost) NoteInexact(rec, i);
      }
      d32[i] = x;
      uint32_t b;
      std::memcpy(&b, &x, sizeof b);
      lo_s = b - 1 < lo_s ? b - 1 : lo_s;
      float& m = cm[i - begin];
      m = x > m ? x : m;
      if constexpr (kCodes) {
        const int32_t e = static_cast<int32_t>(b >> 23) - e_first + 1;
        const size_t k = e < 0 ? 0 : static_cast<size_t>(e);
        out8[i] = static_cast<uint8_t>(tb[k] - (static_cast<int32_t>(b & 0x7FFFFF) < te[k]));
      }
    }
  }
  HWY_ALIGN uint32_t tmp[hn::MaxLanes(du)];
  hn::Store(lo, du, tmp);
  for (size_t l = 0; l < lanes; ++l) lo_s = tmp[l] < lo_s ? tmp[l] : lo_s;
  if (lo_s == ~0u) return std::numeric_limits<float>::infinity();
  const uint32_t b = lo_s + 1;
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}
template <class Fmt, bool kCodes>
HWY_INLINE float DiffColsChecked(const void* r, const void* c, float* d32, const uint32_t* ends,
                                 const uint32_t* cols, size_t segs, float* colmax,
                                 numerics::DiffCodes* codes, numerics::InexactDiffs* rec) {
  using T = typename Fmt::T;
  if (rec != nullptr)
    return DiffColsImpl<Fmt, kCodes, true>(static_cast<const T*>(r), static_cast<const T*>(c), d32, ends,
                                           cols, segs, colmax, codes, rec);
  return DiffColsImpl<Fmt, kCodes, false>(static_cast<const T*>(r), static_cast<const T*>(c), d32, ends,
                                          cols, segs, colmax, codes, rec);
}
template <class Fmt>
HWY_INLINE float DiffColsTo(const void* r, const void* c, float* d32, const uint32_t* ends,
                            const uint32_t* cols, size_t segs, float* colmax, numerics::DiffCodes* codes,
                            numerics::InexactDiffs* rec) {
  // The one-lane target has no table of several entries: no codes (e_first -1).
  if (codes != nullptr && (hn::Lanes(hn::ScalableTag<float>()) < 4 || codes->e_hi < 1)) {
    codes->e_first = -1;
    codes = nullptr;
  }
  if (codes != nullptr) return DiffColsChecked<Fmt, true>(r, c, d32, ends, cols, segs, colmax, codes, rec);
  return DiffColsChecked<Fmt, false>(r, c, d32, ends, cols, segs, colmax, codes, rec);
}
float DiffColsF32(const void* r, const void* c, float* d32, const uint32_t* ends, const uint32_t* cols,
                  size_t segs, float* colmax, numerics::DiffCodes* codes, numerics::InexactDiffs* rec) {
  return DiffColsTo<F32Format>(r, c, d32, ends, cols, segs, colmax, codes, rec);
}
float DiffColsF16(const void* r, const void* c, float* d32, const uint32_t* ends, const uint32_t* cols,
                  size_t segs, float* colmax, numerics::DiffCodes* codes, numerics::InexactDiffs* rec) {
  return DiffColsTo<F16Format>(r, c, d32, ends, cols, segs, colmax, codes, rec);
}
float DiffColsBF16(const void* r, const void* c, float* d32, const uint32_t* ends, const uint32_t* cols,
                   size_t segs, float* colmax, numerics::DiffCodes* codes, numerics::InexactDiffs* rec) {
  return DiffColsTo<BF16Format>(r, c, d32, ends, cols, segs, colmax, codes, rec);
}

// Byte codes (numerics::DiffCodes, count_codes): a code < 128 per element in one byte, so
// counting "code >= j" is one byte compare and add per vector of bytes (64 elements on AVX-512)
// instead of one int32 compare per 16. A byte counter takes one code per vector, so counters are
// folded into 64-bit sums every 128 vectors.
#if HWY_TARGET != HWY_SCALAR
template <size_t K>
HWY_INLINE void CountCodesGroup(const uint8_t* HWY_RESTRICT packed, size_t bytes, int8_t first,
                                uint64_t* HWY_RESTRICT out) {
  const hn::ScalableTag<int8_t> d8;
  const hn::RebindToUnsigned<decltype(d8)> du8;
  const hn::Repartition<uint64_t, decltype(du8)> d64;
  using V8 = hn::Vec<decltype(d8)>;
  const size_t lanes = hn::Lanes(d8);
  V8 below[K];
  hn::Vec<decltype(d64)> sums[K];
  for (size_t q = 0; q < K; ++q) {
    below[q] = hn::Set(d8, static_cast<int8_t>(first + static_cast<int8_t>(q) - 1));
    sums[q] = hn::Zero(d64);
  }
  const auto one = hn::Set(d8, int8_t{1});
  for (size_t i = 0; i < bytes;) {
    V8 acc[K];
    for (size_t q = 0; q < K; ++q) acc[q] = hn::Zero(d8);
    const size_t end = HWY_MIN(bytes, i + 128 * lanes);
    for (; i < end; i += lanes) {
      const auto x = hn::BitCast(d8, hn::LoadU(du8, packed + i));
      for (size_t q = 0; q < K; ++q) acc[q] = hn::IfThenElse(hn::Gt(x, below[q]), hn::Add(acc[q], one), acc[q]);
    }
    for (size_t q = 0; q < K; ++q) sums[q] = hn::Add(sums[q], hn::SumsOf8(hn::BitCast(du8, acc[q])));
  }
  HWY_ALIGN uint64_t tmp[hn::MaxLanes(d64)];
  for (size_t q = 0; q < K; ++q) {
    hn::Store(sums[q], d64, tmp);
    uint64_t c = 0;
    for (size_t l = 0; l < hn::Lanes(d64); ++l) c += tmp[l];
    out[q] += c;
  }
}
#endif

// CountCodeBytes (numerics::count_codes): out[j] = the number of codes >= j, j in [first, ncodes),
// in passes of up to 8 codes, of sizes as equal as can be.
void CountCodeBytes(const uint8_t* HWY_RESTRICT codes, size_t n, size_t first, size_t ncodes,
                    uint64_t* HWY_RESTRICT out) {
  for (size_t j = first; j < ncodes; ++j) out[j] = 0;
  size_t i = 0;
#if HWY_TARGET != HWY_SCALAR
  const size_t lanes = hn::Lanes(hn::ScalableTag<int8_t>());
  i = n / lanes * lanes;
  const size_t passes = ncodes > first ? (ncodes - first + 7) / 8 : 0;
  for (size_t j = first, p = 0; p < passes; ++p) {
    const size_t g = (ncodes - j) / (passes - p) + ((ncodes - j) % (passes - p) != 0);
    const auto at = static_cast<int8_t>(j);
    switch (g) {
      case 1: CountCodesGroup<1>(codes, i, at, out + j); break;
      case 2: CountCodesGroup<2>(codes, i, at, out + j); break;
      case 3: CountCodesGroup<3>(codes, i, at, out + j); break;
      case 4: CountCodesGroup<4>(codes, i, at, out + j); break;
      case 5: CountCodesGroup<5>(codes, i, at, out + j); break;
      case 6: CountCodesGroup<6>(codes, i, at, out + j); break;
      case 7: CountCodesGroup<7>(codes, i, at, out + j); break;
      default: CountCodesGroup<8>(codes, i, at, out + j); break;
    }
    j += g;
  }
#endif
  for (; i < n; ++i)
    for (size_t j = first; j <= codes[i] && j < ncodes; ++j) ++out[j];
}

// CountAtLeast's loop on lanes of type T (double, or float: 16 per AVX-512 vector instead of 8)
// with integer lanes I of the same width. d >= 0 and not NaN, so d >= t is bits(d) > bits(t) - 1
// as signed integers: an integer compare and a masked increment per threshold and vector, instead
// of a floating-point compare, a mask widened to a vector and a subtraction. A lane counts at most
// n / lanes elements, so n < 2^31 keeps the int32 lanes exact. One pass over d serves K
// thresholds t[0..K): one load, K compares.
template <size_t K, typename T, typename I>
HWY_INLINE void CountAtLeastGroup(const T* HWY_RESTRICT d, size_t n, const T* HWY_RESTRICT t,
                                  uint64_t* HWY_RESTRICT out) {
  const hn::ScalableTag<T> df;
  const hn::RebindToSigned<decltype(df)> di;
  using VI = hn::Vec<decltype(di)>;
  const size_t lanes = hn::Lanes(df);
  VI below[K], acc[K];  // bits(t[q]) - 1, and the counts so far
  for (size_t q = 0; q < K; ++q) {
    I b;
    std::memcpy(&b, t + q, sizeof b);
    below[q] = hn::Set(di, static_cast<I>(b - 1));
    acc[q] = hn::Zero(di);
  }
  const auto one = hn::Set(di, I{1});
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto x = hn::BitCast(di, hn::LoadU(df, d + i));
    for (size_t q = 0; q < K; ++q) acc[q] = hn::IfThenElse(hn::Gt(x, below[q]), hn::Add(acc[q], one), acc[q]);
  }
  HWY_ALIGN I tmp[hn::MaxLanes(di)];
  for (size_t q = 0; q < K; ++q) {
    hn::Store(acc[q], di, tmp);
    uint64_t c = 0;
    for (size_t l = 0; l < lanes; ++l) c += static_cast<uint64_t>(tmp[l]);
    for (size_t e = i; e < n; ++e) c += d[e] >= t[q];
    out[q] = c;
  }
}

// The thresholds in as few passes as there are groups of up to 8 (the accumulators and the
// thresholds of a group stay in registers on AVX-512), of sizes as equal as can be, so that no
// pass serves one or two thresholds only.
template <typename T, typename I>
HWY_INLINE void CountAtLeastLanes(const T* HWY_RESTRICT d, size_t n, const T* HWY_RESTRICT t,
                                  size_t k, uint64_t* HWY_RESTRICT out) {
  constexpr size_t kMaxGroup = 8;
  const size_t passes = (k + kMaxGroup - 1) / kMaxGroup;
  for (size_t p = 0, j = 0; p < passes; ++p) {
    const size_t g = (k - j) / (passes - p) + ((k - j) % (passes - p) != 0);
    switch (g) {
      case 1: CountAtLeastGroup<1, T, I>(d, n, t + j, out + j); break;
      case 2: CountAtLeastGroup<2, T, I>(d, n, t + j, out + j); break;
      case 3: CountAtLeastGroup<3, T, I>(d, n, t + j, out + j); break;
      case 4: CountAtLeastGroup<4, T, I>(d, n, t + j, out + j); break;
      case 5: CountAtLeastGroup<5, T, I>(d, n, t + j, out + j); break;
      case 6: CountAtLeastGroup<6, T, I>(d, n, t + j, out + j); break;
      case 7: CountAtLeastGroup<7, T, I>(d, n, t + j, out + j); break;
      default: CountAtLeastGroup<8, T, I>(d, n, t + j, out + j); break;
    }
    j += g;
  }
}

void CountAtLeast(const double* HWY_RESTRICT d, size_t n, const double* HWY_RESTRICT t, size_t k,
                  uint64_t* HWY_RESTRICT out) {
  CountAtLeastLanes<double, int64_t>(d, n, t, k, out);
}
void CountAtLeastF32(const float* HWY_RESTRICT d, size_t n, const float* HWY_RESTRICT t, size_t k,
                     uint64_t* HWY_RESTRICT out) {
  CountAtLeastLanes<float, int32_t>(d, n, t, k, out);
}

}  // namespace HWY_NAMESPACE
}  // namespace driftscope::numerics::kernel
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <iterator>
#include <vector>

namespace driftscope::numerics::kernel {

void chunk_scalar(const double* ref, const double* cand, size_t n, const Params& p,
                  ChunkPartial* out) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  double sum[kNumSums][kLanes] = {};
  double max_abs = 0, max_rel = p.max_rel_floor, min_ref = inf, max_ref = -inf, min_cand = inf, max_cand = -inf;
  uint64_t nonfinite = 0, nan_ref = 0, nan_cand = 0, nan_both = 0, inf_ref = 0, inf_cand = 0;
  uint64_t inf_same = 0, zero_ref = 0, zero_cand = 0, mismatch = 0;
  int64_t first = -1;
  for (size_t i = 0; i < n; ++i) {
    const size_t l = i % kLanes;
    const double r = ref[i], c = cand[i];
    const bool fin = std::isfinite(r) && std::isfinite(c);
    bool mis = false;
    if (!fin) {
      ++nonfinite;
      const bool nr = std::isnan(r), nc = std::isnan(c);
      const bool same_inf = std::isinf(r) && std::isinf(c) && r == c;
      nan_ref += nr;
      nan_cand += nc;
      nan_both += nr && nc;
      inf_ref += std::isinf(r);
      inf_cand += std::isinf(c);
      inf_same += same_inf;
      mis = !(same_inf || (p.nan_equal && nr && nc));
    }
    const double rz = fin ? r : 0.0, cz = fin ? c : 0.0;
    const double diff = rz - cz;
    const double ad = std::fabs(diff);
    sum[kSumAbs][l] = sum[kSumAbs][l] + ad;
    sum[kSumSqDiff][l] = sum[kSumSqDiff][l] + diff * diff;
    sum[kSumRef][l] = sum[kSumRef][l] + rz;
    sum[kSumCand][l] = sum[kSumCand][l] + cz;
    sum[kSumSqRef][l] = sum[kSumSqRef][l] + rz * rz;
    sum[kSumSqCand][l] = sum[kSumSqCand][l] + cz * cz;
    sum[kSumDot][l] = sum[kSumDot][l] + rz * cz;
    const double ar = std::fabs(rz);
    if (ad > max_abs) max_abs = ad;
    const double rel = ad / (ar < p.rel_eps ? p.rel_eps : ar);
    if (rel > max_rel) max_rel = rel;
    if (fin) {
      if (r < min_ref) min_ref = r;
      if (r > max_ref) max_ref = r;
      if (c < min_cand) min_cand = c;
      if (c > max_cand) max_cand = c;
      zero_ref += r == 0.0;
      zero_cand += c == 0.0;
      mis = ad > p.atol + p.rtol * ar;
    }
    if (mis) {
      ++mismatch;
      if (first < 0) first = static_cast<int64_t>(i);
    }
  }
  for (size_t k = 0; k < kNumSums; ++k) {
    for (size_t l = 0; l < kLanes; ++l) out->lanes[k][l] = sum[k][l];
  }
  out->max_abs = max_abs;
  out->max_rel = max_rel;
  out->min_ref = min_ref;
  out->max_ref = max_ref;
  out->min_cand = min_cand;
  out->max_cand = max_cand;
  out->nonfinite = nonfinite;
  out->nan_ref = nan_ref;
  out->nan_cand = nan_cand;
  out->nan_both = nan_both;
  out->inf_ref = inf_ref;
  out->inf_cand = inf_cand;
  out->inf_same = inf_same;
  out->zero_ref = zero_ref;
  out->zero_cand = zero_cand;
  out->mismatch = mismatch;
  out->first_mismatch = first;
  out->max_ulp = 0;
}

void chunk_raw_scalar(RawFormat f, const std::byte* ref, const std::byte* cand, size_t n,
                      const Params& p, ChunkPartial* out) {
  const size_t size = f == RawFormat::f32 ? 4 : 2;
  const uint32_t sign = f == RawFormat::f32 ? 0x80000000u : 0x8000u;
  const auto bits_at = [&](const std::byte* b, size_t i) {
    if (size == 4) return detail::load_le<uint32_t>(b + 4 * i);
    return static_cast<uint32_t>(detail::load_le<uint16_t>(b + 2 * i));
  };
  const auto value = [&](uint32_t b) {
    switch (f) {
      case RawFormat::f32: return static_cast<double>(std::bit_cast<float>(b));
      case RawFormat::f16: return f16_to_double(static_cast<uint16_t>(b));
      default: return bf16_to_double(static_cast<uint16_t>(b));
    }
  };
  const auto ord = [&](uint32_t b) {
    const auto mag = static_cast<int64_t>(b & (sign - 1));
    return (b & sign) ? -mag : mag;
  };
  std::vector<double> r(n), c(n);
  uint64_t best = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t x = bits_at(ref, i), y = bits_at(cand, i);
    r[i] = value(x);
    c[i] = value(y);
    if (!std::isfinite(r[i]) || !std::isfinite(c[i])) continue;
    const int64_t ox = ord(x), oy = ord(y);
    best = std::max<uint64_t>(best, static_cast<uint64_t>(ox > oy ? ox - oy : oy - ox));
  }
  chunk_scalar(r.data(), c.data(), n, p, out);
  out->max_ulp = best;
}

// Every kernel of this file goes through Highway's dispatch tables (HWY_EXPORT), so a target that
// foreach_target compiles is reachable without a hand-kept list of targets, and tests reach each
// one through the same table that production calls use.
HWY_EXPORT(ChunkKernel);
HWY_EXPORT(ChunkF32Kernel);
HWY_EXPORT(ChunkF16Kernel);
HWY_EXPORT(ChunkBF16Kernel);
HWY_EXPORT(MaxUlp8);
HWY_EXPORT(MaxUlp16);
HWY_EXPORT(MaxUlp32);
HWY_EXPORT(DiffRunsF64);
HWY_EXPORT(DiffRunsF32);
HWY_EXPORT(DiffRunsF16);
HWY_EXPORT(DiffRunsBF16);
HWY_EXPORT(CountAtLeast);
HWY_EXPORT(CountAtLeastF32);
HWY_EXPORT(DiffColsF32);
HWY_EXPORT(DiffColsF16);
HWY_EXPORT(DiffColsBF16);
HWY_EXPORT(CountCodeBytes);

namespace {

template <RawFormat F>
void raw_scalar(const std::byte* ref, const std::byte* cand, size_t n, const Params& p,
                ChunkPartial* out) {
  chunk_raw_scalar(F, ref, cand, n, p, out);
}

// The forced choice: 0 for Highway's own (HWY_DYNAMIC_DISPATCH's), kForcedScalar for the scalar
// reference, else one Highway target bit.
constexpr int64_t kForcedScalar = -1;
std::atomic<int64_t> g_forced{0};

// The index into this file's HWY_EXPORT tables for a CPU whose supported set is `targets`, as
// HWY_DYNAMIC_DISPATCH computes it (ChosenTarget::GetIndex uses this translation unit's
// HWY_TARGETS). A local ChosenTarget: forcing a target here leaves every other module's
// dispatch alone.
// A build that compiles one target only (HWY_COMPILE_ONLY_STATIC, or a compiler for which Highway
// marks the others broken: the sanitizer build) gets one-entry tables from HWY_EXPORT (highway.h,
// the same condition), which ChosenTarget's index does not fit.
constexpr bool kOneEntryTables = HWY_IDE || ((HWY_TARGETS & (HWY_TARGETS - 1)) == 0);

size_t table_index(int64_t targets) {
  if constexpr (kOneEntryTables) {
    (void)targets;
    return 0;
  }
  hwy::ChosenTarget chosen;
  chosen.Update(targets);
  return chosen.GetIndex();
}

// hwy::SupportedTargets() without its side effect. In Highway 1.0.3 it re-initialises the global
// ChosenTarget from the CPU's own targets, before DisableTargets' mask, as a step of the first
// HWY_DYNAMIC_DISPATCH, which then sets it again from the masked result; any other caller would
// leave every later dispatch on the CPU's best target, undoing cap() (DRIFTSCOPE_SIMD). The choice
// is set here as that dispatch sets it.
int64_t supported_targets() {
  const int64_t targets = hwy::SupportedTargets();
  hwy::GetChosenTarget().Update(targets);
  return targets;
}

// The index in use: the forced target's, else the one HWY_DYNAMIC_DISPATCH would take (which
// honours hwy::SetSupportedTargetsForTest and hwy::DisableTargets).
size_t current_index() {
  const int64_t f = g_forced.load(std::memory_order_acquire);
  if (f > 0) return table_index(f);
  // The scalar reference has no table entry; the helpers without a reference of their own
  // (MaxUlp, the detail pass) run Highway's fallback target (EMU128 or SCALAR) for it.
  if (f == kForcedScalar) return table_index(HWY_SCALAR);
  if constexpr (kOneEntryTables) return 0;
  hwy::ChosenTarget& chosen = hwy::GetChosenTarget();
  if (!chosen.IsInitialized()) supported_targets();
  return chosen.GetIndex();
}

// The targets compiled in this file and supported by this CPU, best (lowest bit) first, one per
// table entry: EMU128 and SCALAR share the fallback entry, which holds EMU128 when both are built.
std::vector<int64_t> compiled_supported() {
  std::vector<int64_t> out;
  std::vector<size_t> seen;
  for (int64_t left = HWY_TARGETS & supported_targets(); left != 0; left &= left - 1) {
    const int64_t t = left & -left;
    const size_t index = table_index(t);
    if (std::find(seen.begin(), seen.end(), index) != seen.end()) continue;
    seen.push_back(index);
    out.push_back(t);
  }
  return out;
}

// The target bit of a name from targets(), kForcedScalar for "scalar", 0 when not available.
int64_t find(const std::string& name) {
  if (name == "scalar") return kForcedScalar;
  for (int64_t t : compiled_supported()) {
    if (name == hwy::TargetName(t)) return t;
  }
  return 0;
}

ChunkRawFn raw_entry(size_t index, RawFormat f) {
  switch (f) {
    case RawFormat::f32: return HWY_DISPATCH_TABLE(ChunkF32Kernel)[index];
    case RawFormat::f16: return HWY_DISPATCH_TABLE(ChunkF16Kernel)[index];
    default: return HWY_DISPATCH_TABLE(ChunkBF16Kernel)[index];
  }
}

ChunkRawFn raw_reference(RawFormat f) {
  switch (f) {
    case RawFormat::f32: return &raw_scalar<RawFormat::f32>;
    case RawFormat::f16: return &raw_scalar<RawFormat::f16>;
    default: return &raw_scalar<RawFormat::bf16>;
  }
}

// The detail pass's helpers of the target in use (numerics::abs_diff and co. below).
auto diff_runs_entry(ChunkFormat f) {
  const size_t i = current_index();
  switch (f) {
    case ChunkFormat::f64: return HWY_DISPATCH_TABLE(DiffRunsF64)[i];
    case ChunkFormat::f32: return HWY_DISPATCH_TABLE(DiffRunsF32)[i];
    case ChunkFormat::f16: return HWY_DISPATCH_TABLE(DiffRunsF16)[i];
    default: return HWY_DISPATCH_TABLE(DiffRunsBF16)[i];
  }
}
auto count_at_least_entry() { return HWY_DISPATCH_TABLE(CountAtLeast)[current_index()]; }
auto count_at_least_f32_entry() { return HWY_DISPATCH_TABLE(CountAtLeastF32)[current_index()]; }
auto count_codes_entry() { return HWY_DISPATCH_TABLE(CountCodeBytes)[current_index()]; }
auto diff_cols_entry(ChunkFormat f) {
  const size_t i = current_index();
  switch (f) {
    case ChunkFormat::f32: return HWY_DISPATCH_TABLE(DiffColsF32)[i];
    case ChunkFormat::f16: return HWY_DISPATCH_TABLE(DiffColsF16)[i];
    default: return HWY_DISPATCH_TABLE(DiffColsBF16)[i];
  }
}

}  // namespace

uint64_t max_ulp_bits(const std::byte* ref, const std::byte* cand, size_t n, unsigned bytes,
                      uint64_t nonfinite_mask) {
  const auto* a = reinterpret_cast<const uint8_t*>(ref);
  const auto* b = reinterpret_cast<const uint8_t*>(cand);
  const size_t i = current_index();
  switch (bytes) {
    case 1: return HWY_DISPATCH_TABLE(MaxUlp8)[i](a, b, n, nonfinite_mask);
    case 2: return HWY_DISPATCH_TABLE(MaxUlp16)[i](a, b, n, nonfinite_mask);
    default: return HWY_DISPATCH_TABLE(MaxUlp32)[i](a, b, n, nonfinite_mask);
  }
}

double reduce_lanes(const double* lanes) noexcept {
  // Pairwise: ((l0+l1)+(l2+l3)) + ... ; also halves the rounding error of a linear sum.
  double t[kLanes];
  for (size_t l = 0; l < kLanes; ++l) t[l] = lanes[l];
  for (size_t width = kLanes / 2; width >= 1; width /= 2) {
    for (size_t l = 0; l < width; ++l) t[l] = t[2 * l] + t[2 * l + 1];
  }
  return t[0];
}

std::vector<std::string> targets() {
  std::vector<std::string> out;
  for (int64_t t : compiled_supported()) out.emplace_back(hwy::TargetName(t));
  out.emplace_back("scalar");
  return out;
}

ChunkFn by_name(const std::string& name) {
  const int64_t t = find(name);
  if (t == kForcedScalar) return &chunk_scalar;
  return t == 0 ? nullptr : HWY_DISPATCH_TABLE(ChunkKernel)[table_index(t)];
}

ChunkRawFn by_name_raw(const std::string& name, RawFormat f) {
  const int64_t t = find(name);
  if (t == kForcedScalar) return raw_reference(f);
  return t == 0 ? nullptr : raw_entry(table_index(t), f);
}

// Entry 0 of a table is Highway's ChooseAndCall (it initialises the global choice on its first
// call); current_index() never returns 0, as it initialises first.
ChunkFn selected() {
  if (g_forced.load(std::memory_order_acquire) == kForcedScalar) return &chunk_scalar;
  return HWY_DISPATCH_TABLE(ChunkKernel)[current_index()];
}

ChunkRawFn selected_raw(RawFormat f) {
  if (g_forced.load(std::memory_order_acquire) == kForcedScalar) return raw_reference(f);
  return raw_entry(current_index(), f);
}

bool cap(const std::string& name) {
  hwy::DisableTargets(0);  // a second cap may choose a better target than the first
  const int64_t t = find(name);
  if (t == 0) {
    supported_targets();
    return false;
  }
  if (t == kForcedScalar) {
    hwy::DisableTargets(~static_cast<int64_t>(HWY_SCALAR | HWY_EMU128));
  } else {
    hwy::DisableTargets(t - 1);  // every better target: a lower bit (hwy/targets.h)
  }
  supported_targets();
  g_forced.store(t == kForcedScalar ? kForcedScalar : 0, std::memory_order_release);
  return true;
}

std::string current() {
  if (g_forced.load(std::memory_order_acquire) == kForcedScalar) return "scalar";
  const size_t index = current_index();
  for (int64_t t : compiled_supported()) {
    if (table_index(t) == index) return hwy::TargetName(t);
  }
  return "scalar";
}

bool force(const std::string& name) {
  if (name.empty()) {
    g_forced.store(0, std::memory_order_release);
    return true;
  }
  const int64_t t = find(name);
  if (t == 0) return false;
  g_forced.store(t, std::memory_order_release);
  return true;
}

}  // namespace driftscope::numerics::kernel

namespace driftscope::numerics {

double ObservedChunk::value(ChunkFormat f, const void* p, size_t i) {
  const auto* b = static_cast<const std::byte*>(p);
  switch (f) {
    case ChunkFormat::f64: return static_cast<const double*>(p)[i];
    case ChunkFormat::f32: return detail::load_le<float>(b + 4 * i);
    case ChunkFormat::f16: return f16_to_double(detail::load_le<uint16_t>(b + 2 * i));
    default: return bf16_to_double(detail::load_le<uint16_t>(b + 2 * i));
  }
}

DiffStats diff_runs(const ObservedChunk& c, double* d, float* d32, const uint32_t* ends, size_t runs,
                    double* out, InexactDiffs* inexact) {
  if (inexact != nullptr) inexact->count = 0;
  return kernel::diff_runs_entry(c.format)(c.ref, c.cand, d, d32, ends, runs, out, inexact);
}
void count_at_least(const double* d, size_t n, const double* thresholds, size_t k, uint64_t* out) {
  kernel::count_at_least_entry()(d, n, thresholds, k, out);
}
void count_at_least_f32(const float* d, size_t n, const float* thresholds, size_t k, uint64_t* out) {
  kernel::count_at_least_f32_entry()(d, n, thresholds, k, out);
}
double diff_cols(const ObservedChunk& c, float* d32, const uint32_t* ends, const uint32_t* cols,
                 size_t segs, float* colmax, DiffCodes* codes, InexactDiffs* inexact) {
  return kernel::diff_cols_entry(c.format)(c.ref, c.cand, d32, ends, cols, segs, colmax, codes, inexact);
}
void count_codes(const uint8_t* codes, size_t n, size_t first, size_t ncodes, uint64_t* out) {
  kernel::count_codes_entry()(codes, n, first, ncodes, out);
}

}  // namespace driftscope::numerics

#endif  // HWY_ONCE
