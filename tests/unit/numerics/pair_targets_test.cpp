// Every Highway kernel of src/numerics on every target Highway compiled here and this CPU runs, in
// the manner of Highway's HWY_EXPORT_AND_TEST_P: the target is chosen with
// hwy::SetSupportedTargetsForTest and the kernels are reached through the same dynamic-dispatch
// tables (HWY_EXPORT) that production calls use. Each result is checked against a scalar loop
// (exact operations) or the scalar reference kernel (chunk metrics: the same bits on every target).
#include <algorithm>
#include <cmath>
#include <iterator>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include "driftscope/decode.hpp"
#include "numerics/decode_simd.hpp"
#include "numerics/pair_kernel.hpp"
#include "numerics/pair_metrics.hpp"

namespace driftscope::numerics {
namespace targets_test {

using kernel::ChunkPartial;
using kernel::RawFormat;

// The Highway target bit of a name that kernel::targets() lists (0 for "scalar").
int64_t target_bit(const std::string& name) {
  for (int b = 0; b < 63; ++b) {
    if (name == hwy::TargetName(int64_t{1} << b)) return int64_t{1} << b;
  }
  return 0;
}

uint64_t dbits(double x) {
  uint64_t u;
  std::memcpy(&u, &x, 8);
  return u;
}

void expect_same(const ChunkPartial& a, const ChunkPartial& b, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(0, std::memcmp(a.lanes, b.lanes, sizeof(a.lanes))) << "lane sums differ";
  EXPECT_EQ(dbits(a.max_abs), dbits(b.max_abs));
  EXPECT_EQ(dbits(a.max_rel), dbits(b.max_rel));
  EXPECT_EQ(a.min_ref, b.min_ref);
  EXPECT_EQ(a.max_ref, b.max_ref);
  EXPECT_EQ(a.min_cand, b.min_cand);
  EXPECT_EQ(a.max_cand, b.max_cand);
  EXPECT_EQ(a.nonfinite, b.nonfinite);
  EXPECT_EQ(a.nan_ref, b.nan_ref);
  EXPECT_EQ(a.nan_cand, b.nan_cand);
  EXPECT_EQ(a.nan_both, b.nan_both);
  EXPECT_EQ(a.inf_ref, b.inf_ref);
  EXPECT_EQ(a.inf_cand, b.inf_cand);
  EXPECT_EQ(a.inf_same, b.inf_same);
  EXPECT_EQ(a.zero_ref, b.zero_ref);
  EXPECT_EQ(a.zero_cand, b.zero_cand);
  EXPECT_EQ(a.mismatch, b.mismatch);
  EXPECT_EQ(a.first_mismatch, b.first_mismatch);
  EXPECT_EQ(a.max_ulp, b.max_ulp);
}

// Random bit patterns of `bytes`-byte floats with a share of specials (NaN, Inf, zeros,
// subnormals, the extremes) and of near neighbours (small ULP distances).
std::vector<std::byte> patterns(size_t n, unsigned bytes, uint64_t seed, const std::vector<std::byte>* near) {
  std::mt19937_64 rng(seed);
  std::vector<std::byte> out(n * bytes);
  const uint64_t width_mask = bytes == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * bytes)) - 1;
  for (size_t i = 0; i < n; ++i) {
    uint64_t v = rng() & width_mask;
    if (near != nullptr && rng() % 4 != 0) {
      uint64_t base = 0;
      std::memcpy(&base, near->data() + i * bytes, bytes);
      v = (base + (rng() % 5) - 2) & width_mask;  // a few ULP either way, wrapping through 0
    }
    std::memcpy(out.data() + i * bytes, &v, bytes);
  }
  return out;
}

// docs/metrics.md §5 by the definition, one element at a time.
uint64_t max_ulp_reference(const std::byte* a, const std::byte* b, size_t n, unsigned bytes,
                           uint64_t mask) {
  const uint64_t sign = uint64_t{1} << (8 * bytes - 1);
  uint64_t best = 0;
  for (size_t i = 0; i < n; ++i) {
    uint64_t x = 0, y = 0;
    std::memcpy(&x, a + i * bytes, bytes);
    std::memcpy(&y, b + i * bytes, bytes);
    if ((x & mask) == mask || (y & mask) == mask) continue;
    const int64_t ox = (x & sign) ? -static_cast<int64_t>(x & (sign - 1)) : static_cast<int64_t>(x & (sign - 1));
    const int64_t oy = (y & sign) ? -static_cast<int64_t>(y & (sign - 1)) : static_cast<int64_t>(y & (sign - 1));
    const auto d = static_cast<uint64_t>(ox > oy ? ox - oy : oy - ox);
    best = best < d ? d : best;
  }
  return best;
}

// Element i of a raw f32/f16/bf16 payload: v rounded to the format.
void put_value(std::vector<std::byte>& out, ChunkFormat f, size_t i, double v) {
  if (f == ChunkFormat::f32) {
    const float x = static_cast<float>(v);
    std::memcpy(out.data() + 4 * i, &x, 4);
  } else {
    const uint16_t x = f == ChunkFormat::f16 ? double_to_f16(v) : double_to_bf16(v);
    std::memcpy(out.data() + 2 * i, &x, 2);
  }
}

// A chunk of n pairs over the raw payloads rb, cb of format f (they outlive the chunk).
ObservedChunk observe(ChunkFormat f, const std::vector<std::byte>& rb, const std::vector<std::byte>& cb,
                      size_t n) {
  ObservedChunk ch;
  ch.n = n;
  ch.format = f;
  ch.ref = rb.data();
  ch.cand = cb.data();
  return ch;
}

class KernelTargets : public ::testing::TestWithParam<std::string> {
 protected:
  // As hwy::TestWithParamTarget: the target is what Highway's dispatch will choose.
  void SetUp() override {
    if (GetParam() != "scalar") hwy::SetSupportedTargetsForTest(target_bit(GetParam()));
    else ASSERT_TRUE(force_target("scalar"));
  }
  void TearDown() override {
    hwy::SetSupportedTargetsForTest(0);
    force_target("");
  }
};

// The chunk kernels are reached through the HWY_EXPORT tables: under Highway's target mock the
// kernel compare_pair selects is that target's (a hand-kept table chosen once per process
// ignores it and keeps running the best target).
TEST_P(KernelTargets, DispatchFollowsHighwaysChoice) {
  const std::string t = GetParam();
  ASSERT_NE(kernel::by_name(t), nullptr) << t;
  EXPECT_EQ(kernel::selected(), kernel::by_name(t)) << t;
  for (RawFormat f : {RawFormat::f32, RawFormat::f16, RawFormat::bf16}) {
    ASSERT_NE(kernel::by_name_raw(t, f), nullptr) << t;
    EXPECT_EQ(kernel::selected_raw(f), kernel::by_name_raw(t, f)) << t;
  }
}

TEST_P(KernelTargets, ChunkKernelsMatchTheScalarReference) {
  const std::string t = GetParam();
  kernel::Params params{1e-6, 1e-4, 1e-12, false, 0};
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{9}, size_t{100}, size_t{4093}, kernel::kChunk}) {
    // 64-byte aligned and zero past n (the contract of ChunkFn).
    alignas(64) static double r[kernel::kChunk + kernel::kLanes];
    alignas(64) static double c[kernel::kChunk + kernel::kLanes];
    std::fill(std::begin(r), std::end(r), 0.0);
    std::fill(std::begin(c), std::end(c), 0.0);
    std::mt19937_64 rng(n);
    std::normal_distribution<double> g(0.0, 1.0);
    for (size_t i = 0; i < n; ++i) {
      r[i] = g(rng);
      c[i] = i % 97 == 5 ? std::numeric_limits<double>::quiet_NaN() : r[i] + 1e-3 * g(rng);
    }
    ChunkPartial want, got;
    kernel::chunk_scalar(r, c, n, params, &want);
    kernel::selected()(r, c, n, params, &got);
    expect_same(got, want, t + " f64 n=" + std::to_string(n));
    for (RawFormat f : {RawFormat::f32, RawFormat::f16, RawFormat::bf16}) {
      const unsigned bytes = f == RawFormat::f32 ? 4 : 2;
      const auto rb = patterns(n, bytes, 7 + n, nullptr);
      const auto cb = patterns(n, bytes, 8 + n, &rb);
      kernel::chunk_raw_scalar(f, rb.data(), cb.data(), n, params, &want);
      kernel::selected_raw(f)(rb.data(), cb.data(), n, params, &got);
      expect_same(got, want, t + " raw " + std::to_string(bytes) + "-byte n=" + std::to_string(n));
    }
  }
}

TEST_P(KernelTargets, MaxUlpMatchesTheDefinition) {
  // Format masks: fp8 e5m2 / e4m3fn (1 byte), f16, bf16 (2), f32 (4).
  struct Case {
    unsigned bytes;
    uint64_t mask;
  };
  for (const Case k : {Case{1, 0x7C}, Case{1, 0x7F}, Case{2, 0x7C00}, Case{2, 0x7F80}, Case{4, 0x7F800000}}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{31}, size_t{64}, size_t{1000}}) {
      const auto a = patterns(n, k.bytes, 100 + n, nullptr);
      const auto b = patterns(n, k.bytes, 200 + n, &a);
      EXPECT_EQ(kernel::max_ulp_bits(a.data(), b.data(), n, k.bytes, k.mask),
                max_ulp_reference(a.data(), b.data(), n, k.bytes, k.mask))
          << GetParam() << " bytes=" << k.bytes << " mask=" << k.mask << " n=" << n;
    }
  }
}

TEST_P(KernelTargets, DetailHelpersMatchScalarLoops) {
  const size_t n = 1003;
  std::vector<double> r(n), c(n);
  std::mt19937_64 rng(3);
  std::normal_distribution<double> g(0.0, 1.0);
  for (size_t i = 0; i < n; ++i) {
    r[i] = g(rng);
    c[i] = i % 11 == 0 ? r[i] : r[i] + std::ldexp(g(rng), -static_cast<int>(i % 40));
  }
  // Runs of every length around a vector's: empty, 1, up to two vectors and a tail, one long.
  const std::vector<uint32_t> ends = {0, 1, 9, 10, 17, 33, 34, 500, 1003};
  // The same values in each format diff_runs reads: float64 arrays, and raw f32/f16/bf16 bytes
  // (the values rounded to that format first, so that the scalar loop sees what the kernel sees).
  for (const ChunkFormat f : {ChunkFormat::f64, ChunkFormat::f32, ChunkFormat::f16, ChunkFormat::bf16}) {
    const size_t size = f == ChunkFormat::f64 ? 8 : f == ChunkFormat::f32 ? 4 : 2;
    const auto encode = [&](const std::vector<double>& v) {
      std::vector<std::byte> out(v.size() * size);
      for (size_t i = 0; i < v.size(); ++i) {
        const auto put = [&](auto x) { std::memcpy(out.data() + i * size, &x, sizeof x); };
        if (f == ChunkFormat::f64) put(v[i]);
        else if (f == ChunkFormat::f32) put(static_cast<float>(v[i]));
        else if (f == ChunkFormat::f16) put(double_to_f16(v[i]));
        else put(double_to_bf16(v[i]));
      }
      return out;
    };
    const std::vector<std::byte> rb = encode(r), cb = encode(c);
    const ObservedChunk ch = observe(f, rb, cb, n);
    std::vector<double> d(n, -1.0), maxima(ends.size(), -1.0);
    std::vector<float> d32(n, -1.0f);
    const DiffStats s = diff_runs(ch, d.data(), d32.data(), ends.data(), ends.size(), maxima.data());
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    bool f32 = true;
    uint32_t begin = 0;
    for (size_t j = 0; j < ends.size(); ++j) {
      double want = 0;
      for (uint32_t i = begin; i < ends[j]; ++i) {
        const double x = std::fabs(ch.cand_at(i) - ch.ref_at(i));
        ASSERT_EQ(dbits(d[i]), dbits(x)) << GetParam() << " format " << int(f) << " i=" << i;
        if (static_cast<double>(static_cast<float>(x)) == x)
          ASSERT_EQ(static_cast<double>(d32[i]), x) << GetParam() << " format " << int(f) << " i=" << i;
        else
          f32 = false;
        lo = std::min(lo, x);
        hi = std::max(hi, x);
        want = std::max(want, x);
      }
      EXPECT_EQ(dbits(maxima[j]), dbits(want)) << GetParam() << " format " << int(f) << " run " << j;
      begin = ends[j];
    }
    EXPECT_EQ(s.min, lo) << GetParam() << " format " << int(f);
    EXPECT_EQ(s.max, hi) << GetParam() << " format " << int(f);
    EXPECT_EQ(s.f32, f32) << GetParam() << " format " << int(f);
    // f16 and bf16 differences of these values are all float32 values, float64 ones are not:
    // both answers of the flag are seen.
    if (f == ChunkFormat::f16 || f == ChunkFormat::bf16) EXPECT_TRUE(s.f32) << GetParam();
    if (f == ChunkFormat::f64) EXPECT_FALSE(s.f32) << GetParam();
    if (f != ChunkFormat::f64) {
      // d32 only (the detail pass's first try on raw formats): float32 lanes, the same answers.
      std::vector<float> e32(n, -1.0f);
      std::vector<double> maxima32(ends.size(), -1.0);
      const DiffStats s32 = diff_runs(ch, nullptr, e32.data(), ends.data(), ends.size(), maxima32.data());
      EXPECT_EQ(s32.f32, f32) << GetParam() << " format " << int(f);
      if (s32.f32) {
        EXPECT_EQ(s32.min, lo) << GetParam() << " format " << int(f);
        EXPECT_EQ(s32.max, hi) << GetParam() << " format " << int(f);
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ(static_cast<double>(e32[i]), d[i]) << GetParam() << " format " << int(f) << " i=" << i;
        for (size_t j = 0; j < ends.size(); ++j)
          EXPECT_EQ(dbits(maxima32[j]), dbits(maxima[j])) << GetParam() << " format " << int(f) << " run " << j;
      }
      continue;
    }
    const std::vector<double> thresholds = {0, std::numeric_limits<double>::denorm_min(), 1e-12, 1e-9,
                                            1e-6, 1e-3, 0.5, 1, 2, 4};
    std::vector<uint64_t> counts(thresholds.size());
    count_at_least(d.data(), n, thresholds.data(), thresholds.size(), counts.data());
    for (size_t j = 0; j < thresholds.size(); ++j) {
      uint64_t want = 0;
      for (double x : d) want += x >= thresholds[j];
      EXPECT_EQ(counts[j], want) << GetParam() << " threshold " << thresholds[j];
    }
  }
}

// diff_runs's float32 copy and flag one element away from a float32 value, and count_at_least_f32
// against a scalar loop: thresholds equal to some d (>= must count them), between floats, zero,
// the smallest subnormal, +inf; counts past a vector's lanes and tails of every length.
TEST_P(KernelTargets, Float32CountsMatchScalarLoops) {
  const double inf = std::numeric_limits<double>::infinity();
  for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{100}, size_t{4096}}) {
    std::vector<float> r(n), c(n);
    std::mt19937_64 rng(n + 5);
    std::normal_distribution<float> g(0.0f, 1.0f);
    for (size_t i = 0; i < n; ++i) {
      r[i] = g(rng);
      // A few ULP of r away, or equal: d is a float32 value (Sterbenz).
      c[i] = i % 5 == 0 ? r[i] : std::nextafter(std::nextafter(r[i], 9.0f), i % 2 ? 9.0f : -9.0f);
    }
    const std::vector<uint32_t> ends = {static_cast<uint32_t>(n / 3), static_cast<uint32_t>(n)};
    ObservedChunk ch;
    ch.n = n;
    ch.format = ChunkFormat::f32;
    ch.ref = r.data();
    ch.cand = c.data();
    std::vector<double> d(n), maxima(ends.size());
    std::vector<float> d32(n);
    DiffStats s = diff_runs(ch, d.data(), d32.data(), ends.data(), ends.size(), maxima.data());
    ASSERT_TRUE(s.f32) << GetParam() << " n=" << n;
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(static_cast<double>(d32[i]), d[i]) << GetParam() << " i=" << i;
    {
      std::vector<float> e32(n);
      EXPECT_TRUE(diff_runs(ch, nullptr, e32.data(), ends.data(), ends.size(), maxima.data()).f32) << GetParam();
      EXPECT_EQ(e32, d32) << GetParam() << " n=" << n;
    }
    std::vector<float> t = {0.0f, std::numeric_limits<float>::denorm_min(), 1e-9f, 1e-8f, 3e-8f,
                            1e-7f, 0.25f, static_cast<float>(inf)};
    for (size_t i = 0; i < n; i += 37) t.push_back(d32[i]);  // ties: d == t counts
    std::vector<uint64_t> counts(t.size());
    count_at_least_f32(d32.data(), n, t.data(), t.size(), counts.data());
    for (size_t j = 0; j < t.size(); ++j) {
      uint64_t want = 0;
      for (float x : d32) want += x >= t[j];
      EXPECT_EQ(counts[j], want) << GetParam() << " n=" << n << " threshold " << t[j];
    }
    if (n == 0) continue;
    // One d that is not a float32 value, in the vector part or the tail: the flag drops. On
    // float32 values (1000 - 2^-24: the float32 subtraction rounds; 3e38 - -3e38: it overflows),
    // with d32 only and with both; on float64 values.
    for (size_t at : {size_t{0}, n - 1}) {
      for (const auto& [a, b] : {std::pair{1000.0f, 0x1p-24f}, std::pair{3e38f, -3e38f}}) {
        std::vector<float> rf = r, cf = c, e32(n);
        rf[at] = a;
        cf[at] = b;
        ch.ref = rf.data();
        ch.cand = cf.data();
        EXPECT_FALSE(diff_runs(ch, nullptr, e32.data(), ends.data(), ends.size(), maxima.data()).f32)
            << GetParam() << " n=" << n << " at " << at << " " << a;
        EXPECT_FALSE(diff_runs(ch, d.data(), e32.data(), ends.data(), ends.size(), maxima.data()).f32)
            << GetParam() << " n=" << n << " at " << at << " " << a;
      }
      ch.ref = r.data();
      ch.cand = c.data();
      std::vector<double> rd(r.begin(), r.end()), cd(c.begin(), c.end());
      cd[at] = rd[at] + (1 + 0x1p-40);  // d = 1 + 2^-40: 41 significant bits
      ch.format = ChunkFormat::f64;
      ch.ref = rd.data();
      ch.cand = cd.data();
      s = diff_runs(ch, d.data(), d32.data(), ends.data(), ends.size(), maxima.data());
      EXPECT_FALSE(s.f32) << GetParam() << " n=" << n << " at " << at;
      cd[at] = rd[at];
      s = diff_runs(ch, d.data(), d32.data(), ends.data(), ends.size(), maxima.data());
      EXPECT_TRUE(s.f32) << GetParam() << " n=" << n << " at " << at;
      // Past float's range: not a float32 value, whichever way a target converts it.
      cd[at] = 1e300;
      s = diff_runs(ch, d.data(), d32.data(), ends.data(), ends.size(), maxima.data());
      EXPECT_FALSE(s.f32) << GetParam() << " n=" << n << " at " << at;
      ch.format = ChunkFormat::f32;
      ch.ref = r.data();
      ch.cand = c.data();
    }
  }
}

// diff_cols against scalar loops, for each raw format: d32 (the float32 difference, exact here:
// the candidate is a few ULP from the reference), the smallest positive d, and the column maxima of row
// pieces of a view whose rows are not a whole number of vectors (37 and 100 columns, starting
// mid-row), over maxima already set by earlier rows; tails of every length.
TEST_P(KernelTargets, DiffColsMatchScalarLoops) {
  for (const ChunkFormat f : {ChunkFormat::f32, ChunkFormat::f16, ChunkFormat::bf16}) {
    const size_t size = f == ChunkFormat::f32 ? 4 : 2;
    for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{100}, size_t{4096}}) {
      for (const auto [width, start] : {std::pair<size_t, size_t>{37, 5}, {100, 0}, {100, 99}}) {
        std::mt19937_64 rng(n * 7 + width + start);
        std::normal_distribution<double> g(0.0, 1.0);
        std::vector<std::byte> rb(n * size), cb(n * size);
        for (size_t i = 0; i < n; ++i) {
          const double r = g(rng), c = i % 5 == 0 ? r : r * (1.0 + std::ldexp(g(rng), -9 - int(i % 12)));
          put_value(rb, f, i, r);
          put_value(cb, f, i, c);
        }
        const ObservedChunk ch = observe(f, rb, cb, n);
        // Row pieces: the rest of the first row from column `start`, then whole rows.
        std::vector<uint32_t> ends, cols;
        for (size_t k = 0, col = start; k < n; col = 0) {
          const size_t run = std::min(n - k, width - col);
          cols.push_back(static_cast<uint32_t>(col));
          k += run;
          ends.push_back(static_cast<uint32_t>(k));
        }
        std::vector<float> colmax(width), want(width), d32(n, -1.0f);
        for (size_t i = 0; i < width; ++i) colmax[i] = want[i] = i % 3 == 0 ? 0.0f : 0x1p-9f * float(i);
        const double lo = diff_cols(ch, d32.data(), ends.data(), cols.data(), ends.size(), colmax.data());
        double want_lo = std::numeric_limits<double>::infinity();
        for (size_t j = 0, i = 0; j < ends.size(); ++j) {
          for (; i < ends[j]; ++i) {
            const double x = std::fabs(ch.cand_at(i) - ch.ref_at(i));
            ASSERT_EQ(static_cast<double>(static_cast<float>(x)), x) << "the data must give float32 d";
            ASSERT_EQ(static_cast<double>(d32[i]), x) << GetParam() << " format " << int(f) << " n=" << n << " i=" << i;
            if (x > 0) want_lo = std::min(want_lo, x);
            float& m = want[cols[j] + i - (j ? ends[j - 1] : 0)];
            m = std::max(m, static_cast<float>(x));
          }
        }
        EXPECT_EQ(lo, want_lo) << GetParam() << " format " << int(f) << " n=" << n;
        for (size_t i = 0; i < width; ++i)
          ASSERT_EQ(colmax[i], want[i]) << GetParam() << " format " << int(f) << " n=" << n << " column " << i;
      }
    }
  }
}

// Whether b - a is a float32 value, by integers: two float32 values of one significand's overlap
// at most (exponents within 24) subtract exactly in int64 at the scale of their lowest bit; farther
// apart, the difference spans more than 24 bits (neither being zero). Independent of TwoSum.
bool float_difference_exact(float a, float b) {
  if (a == 0 || b == 0 || a == b) return true;
  int ea = 0, eb = 0;
  std::frexp(a, &ea);
  std::frexp(b, &eb);
  if (std::abs(ea - eb) > 24) return false;
  const int low = std::min(ea, eb) - 24;  // both are multiples of 2^low, below 2^(low + 49)
  const auto A = static_cast<int64_t>(std::ldexp(static_cast<double>(a), -low));
  const auto B = static_cast<int64_t>(std::ldexp(static_cast<double>(b), -low));
  uint64_t d = static_cast<uint64_t>(A > B ? A - B : B - A);
  while ((d & 1) == 0) d >>= 1;
  return d < (uint64_t{1} << 24) && std::ldexp(static_cast<double>(A - B), low) <= std::numeric_limits<float>::max();
}

// diff_runs and diff_cols note the positions whose float32 difference is inexact
// (numerics::InexactDiffs): the same positions as an integer test of each pair, at every lane and
// in the scalar tails, past the cap of 64 (count goes on, positions stop); diff_runs's flag is
// false exactly when some are noted.
TEST_P(KernelTargets, InexactDifferencesAreNotedWhereTheyAre) {
  for (const ChunkFormat f : {ChunkFormat::f32, ChunkFormat::f16, ChunkFormat::bf16}) {
    const size_t size = f == ChunkFormat::f32 ? 4 : 2;
    for (const size_t n : {size_t{13}, size_t{100}, size_t{4096}, size_t{4095}}) {
      for (const size_t every : {size_t{7}, size_t{41}, size_t{997}}) {
        std::mt19937_64 rng(n * 31 + every);
        std::normal_distribution<double> g(0.0, 1.0);
        std::vector<std::byte> rb(n * size), cb(n * size);
        for (size_t i = 0; i < n; ++i) {
          const double c = 64 * g(rng);  // float16 values below 1 all subtract exactly
          // Now and then a reference far below its candidate (near zero, under absolute noise).
          const double r = i % every == every / 2 ? c * std::ldexp(1.0, -12 - int(i % 9)) : c * (1 + 1e-3 * g(rng));
          put_value(rb, f, i, r);
          put_value(cb, f, i, c);
        }
        const ObservedChunk ch = observe(f, rb, cb, n);
        std::vector<uint32_t> want;
        for (size_t i = 0; i < n; ++i)
          if (!float_difference_exact(static_cast<float>(ch.cand_at(i)), static_cast<float>(ch.ref_at(i))))
            want.push_back(static_cast<uint32_t>(i));
        if (n > 2 * every) ASSERT_FALSE(want.empty());
        const auto check = [&](const InexactDiffs& got, const char* what) {
          SCOPED_TRACE(::testing::Message() << GetParam() << " " << what << " format " << int(f) << " n=" << n);
          ASSERT_EQ(got.count, want.size());
          for (size_t q = 0; q < std::min(got.count, InexactDiffs::kCap); ++q) EXPECT_EQ(got.at[q], want[q]) << q;
        };
        std::vector<float> d32(n);
        const uint32_t ends[2] = {static_cast<uint32_t>(n / 3), static_cast<uint32_t>(n)};
        double maxima[2];
        InexactDiffs runs;
        const DiffStats st = diff_runs(ch, nullptr, d32.data(), ends, 2, maxima, &runs);
        EXPECT_EQ(st.f32, want.empty());
        check(runs, "diff_runs");
        const uint32_t cols[2] = {0, 0};
        std::vector<float> colmax(n, 0.0f);
        InexactDiffs by_cols;
        diff_cols(ch, d32.data(), ends, cols, 2, colmax.data(), nullptr, &by_cols);
        check(by_cols, "diff_cols");
      }
    }
  }
}

// diff_cols's histogram codes against their definition (pair_metrics.hpp, DiffCodes), element by
// element: zeros, d in every binade of the table and below it, mantissas at and just below each
// binade's edge, binades without an edge; row pieces and tails as above; the table's first
// exponent is the target's (-1 only on the one-lane targets). count_codes against a scalar count,
// from code 1 or later, past a pass of 8 codes and past 128 vectors of bytes.
TEST_P(KernelTargets, DiffColsCodesMatchTheirDefinition) {
  std::vector<int32_t> base(256), edge(256);
  for (size_t e = 0; e < 256; ++e) {
    base[e] = static_cast<int32_t>(e * 3 / 5);
    edge[e] = e % 3 == 0 ? 0x800000 : static_cast<int32_t>((e * 2654435761u) & 0x7FFFFF);
  }
  for (const int32_t e_hi : {int32_t{3}, int32_t{120}}) {
    for (const size_t n : {size_t{1}, size_t{15}, size_t{17}, size_t{100}, size_t{4096}}) {
      std::mt19937_64 rng(n + static_cast<size_t>(e_hi));
      std::vector<float> ref(n, 0.0f), cand(n);
      for (size_t i = 0; i < n; ++i) {
        const uint64_t x = rng();
        if (x % 7 == 0) {
          cand[i] = 0.0f;
          continue;
        }
        const int32_t e = std::max<int32_t>(1, e_hi - static_cast<int32_t>((x >> 8) % 20));  // some below the table
        uint32_t mant = static_cast<uint32_t>(x >> 32) & 0x7FFFFF;
        if (x % 5 == 0 && edge[static_cast<size_t>(e)] < 0x800000)
          mant = (static_cast<uint32_t>(edge[static_cast<size_t>(e)]) - static_cast<uint32_t>(x % 2)) & 0x7FFFFF;
        const uint32_t bits = static_cast<uint32_t>(e) << 23 | mant;
        std::memcpy(&cand[i], &bits, 4);
        if (x % 2) cand[i] = -cand[i];  // |c - r| either way
      }
      ObservedChunk ch;
      ch.n = n;
      ch.format = ChunkFormat::f32;
      ch.ref = ref.data();
      ch.cand = cand.data();
      const std::vector<uint32_t> ends = {static_cast<uint32_t>(n / 2), static_cast<uint32_t>(n)};
      const std::vector<uint32_t> cols = {0, 0};
      std::vector<float> colmax(n + 1), d32(n);
      std::vector<uint8_t> out(n, 255);
      DiffCodes codes{base.data(), edge.data(), e_hi, out.data()};
      diff_cols(ch, d32.data(), ends.data(), cols.data(), ends.size(), colmax.data(), &codes);
      if (codes.e_first < 0) {
        EXPECT_TRUE(GetParam() == "SCALAR" || GetParam() == "scalar") << GetParam();
        continue;
      }
      ASSERT_GE(codes.e_first, 1) << GetParam();
      ASSERT_LE(codes.e_first, e_hi) << GetParam();
      if (e_hi > 20) EXPECT_LE(e_hi - codes.e_first, 14) << GetParam() << ": a table of 16 lanes at most";
      for (size_t i = 0; i < n; ++i) {
        uint32_t b;
        std::memcpy(&b, &d32[i], 4);
        const int32_t e = static_cast<int32_t>(b >> 23);
        int32_t want = 0;
        if (b != 0 && e >= codes.e_first) {
          want = 1 + base[static_cast<size_t>(e)] - base[static_cast<size_t>(codes.e_first)] +
                 (static_cast<int32_t>(b & 0x7FFFFF) >= edge[static_cast<size_t>(e)]);
        }
        ASSERT_EQ(out[i], want) << GetParam() << " n=" << n << " i=" << i << " bits " << std::hex << b;
      }
    }
  }
  for (const size_t n : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{4096}, size_t{20000}}) {
    std::mt19937_64 rng(n);
    std::vector<uint8_t> c(n);
    for (auto& x : c) x = static_cast<uint8_t>(rng() % 20);
    for (const auto [first, ncodes] : {std::pair<size_t, size_t>{1, 1}, {1, 2}, {1, 9}, {1, 20}, {3, 12}, {7, 20}}) {
      std::vector<uint64_t> got(ncodes, 12345);
      count_codes(c.data(), n, first, ncodes, got.data());
      for (size_t j = first; j < ncodes; ++j) {
        uint64_t want = 0;
        for (uint8_t x : c) want += x >= j;
        EXPECT_EQ(got[j], want) << GetParam() << " n=" << n << " codes " << first << ".." << ncodes << " code " << j;
      }
    }
  }
}

// Every count of count_at_least_f32's passes: 1 to 20 thresholds (groups of up to 8, split evenly).
TEST_P(KernelTargets, Float32CountsOfEveryGroupSize) {
  const size_t n = 1000;
  std::vector<float> d(n);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (float& x : d) x = u(rng) < 0.1f ? 0.0f : u(rng);
  for (size_t k = 1; k <= 20; ++k) {
    std::vector<float> t(k);
    for (size_t j = 0; j < k; ++j) t[j] = j == 0 ? std::numeric_limits<float>::denorm_min() : d[j * 37];
    std::vector<uint64_t> counts(k, 12345);
    count_at_least_f32(d.data(), n, t.data(), k, counts.data());
    for (size_t j = 0; j < k; ++j) {
      uint64_t want = 0;
      for (float x : d) want += x >= t[j];
      EXPECT_EQ(counts[j], want) << GetParam() << " k=" << k << " threshold " << j;
    }
  }
}

TEST_P(KernelTargets, WideningMatchesTheScalarDecoders) {
  // decode_simd.cpp's kernels (exact widenings), under the same Highway target.
  const size_t n = 70000;  // every 16-bit pattern, then some
  std::vector<uint16_t> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = static_cast<uint16_t>(i * 40503u);
  std::vector<double> f16(n), bf16(n);
  std::vector<float> f16f(n), bf16f(n);
  const auto* src = reinterpret_cast<const std::byte*>(h.data());
  widen_f16_to_f64(src, n, f16.data());
  widen_bf16_to_f64(src, n, bf16.data());
  widen_f16_to_f32(src, n, f16f.data());
  widen_bf16_to_f32(src, n, bf16f.data());
  for (size_t i = 0; i < n; ++i) {
    const double a = f16_to_double(h[i]), b = bf16_to_double(h[i]);
    if (std::isnan(a)) {
      ASSERT_TRUE(std::isnan(f16[i]) && std::isnan(f16f[i])) << GetParam() << " f16 " << h[i];
    } else {
      ASSERT_EQ(dbits(f16[i]), dbits(a)) << GetParam() << " f16 " << h[i];
      ASSERT_EQ(dbits(static_cast<double>(f16f[i])), dbits(a)) << GetParam() << " f16 " << h[i];
    }
    if (std::isnan(b)) {
      ASSERT_TRUE(std::isnan(bf16[i]) && std::isnan(bf16f[i])) << GetParam() << " bf16 " << h[i];
    } else {
      ASSERT_EQ(dbits(bf16[i]), dbits(b)) << GetParam() << " bf16 " << h[i];
      ASSERT_EQ(dbits(static_cast<double>(bf16f[i])), dbits(b)) << GetParam() << " bf16 " << h[i];
    }
  }
}

// d32_exact's claim, on random pairs at every ULP distance up to its bound (half a binade's
// steps) across binades, signs and the subnormals: |c - r| is a float32 value. And the bound is
// where it says (one step past it is not proven).
TEST(DiffExactness, UlpBoundProvesFloat32Differences) {
  ObservedChunk ch;
  for (const ChunkFormat f : {ChunkFormat::f32, ChunkFormat::f16, ChunkFormat::bf16}) {
    const unsigned bits = f == ChunkFormat::f32 ? 32 : 16;
    const unsigned mant = f == ChunkFormat::f32 ? 23 : f == ChunkFormat::f16 ? 10 : 7;
    const int64_t bound = int64_t{1} << (mant - 1);
    const uint32_t sign = uint32_t{1} << (bits - 1), exp_mask = (sign - 1) & ~((uint32_t{1} << mant) - 1);
    ch.format = f;
    ch.max_ulp = static_cast<uint64_t>(bound);
    EXPECT_TRUE(d32_exact(ch)) << int(f);
    ch.max_ulp = static_cast<uint64_t>(bound) + 1;
    EXPECT_FALSE(d32_exact(ch)) << int(f);
    const auto value = [&](uint32_t b) {
      if (f == ChunkFormat::f32) {
        float x;
        std::memcpy(&x, &b, 4);
        return static_cast<double>(x);
      }
      return f == ChunkFormat::f16 ? f16_to_double(static_cast<uint16_t>(b)) : bf16_to_double(static_cast<uint16_t>(b));
    };
    const auto ord = [&](uint32_t b) { return (b & sign) ? -int64_t(b & (sign - 1)) : int64_t(b); };
    const auto from_ord = [&](int64_t o) { return o >= 0 ? uint32_t(o) : sign | uint32_t(-o); };
    std::mt19937_64 rng(bits + mant);
    for (int i = 0; i < 2000000; ++i) {
      const uint64_t x = rng();
      // Magnitudes anywhere, or near zero (subnormals, the first binades, both signs).
      const int64_t mag = x % 4 == 0 ? int64_t(x >> 8) % (2 * bound + 1) : int64_t((x >> 8) % sign);
      const int64_t o = (x & 2) ? -mag : mag;
      const int64_t dist = x % 8 < 3 ? bound - int64_t((x >> 40) % 3) : int64_t((x >> 40) % (bound + 1));
      const int64_t o2 = (x & 4) ? o - dist : o + dist;
      if (o2 <= -int64_t(sign) || o2 >= int64_t(sign)) continue;
      const uint32_t a = from_ord(o), b = from_ord(o2);
      if ((a & exp_mask) == exp_mask || (b & exp_mask) == exp_mask) continue;  // Inf/NaN
      ASSERT_EQ(std::abs(ord(b) - ord(a)), dist);
      const double d = std::fabs(value(b) - value(a));
      ASSERT_EQ(static_cast<double>(static_cast<float>(d)), d)
          << "format " << int(f) << " bits " << std::hex << a << " " << b;
    }
  }
}

std::string target_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

INSTANTIATE_TEST_SUITE_P(EveryTarget, KernelTargets, ::testing::ValuesIn(kernel::targets()), target_name);

// next_at_least (the worst elements' scan in compare/detail.cpp) against a plain loop: every
// start and bound on arrays with hits in and between its blocks of 32, ties at the bound, none.
TEST(NextAtLeast, IsTheFirstAtOrAboveTheBound) {
  std::mt19937_64 rng(3);
  for (const size_t n : {size_t{0}, size_t{5}, size_t{32}, size_t{100}, size_t{257}}) {
    std::vector<double> d(n);
    for (auto& x : d) x = static_cast<double>(rng() % 64);
    std::vector<float> f(d.begin(), d.end());
    for (size_t from = 0; from <= n; from += 3) {
      for (const double t : {0.0, 1.0, 40.0, 63.0, 64.0}) {
        size_t want = from;
        while (want < n && d[want] < t) ++want;
        EXPECT_EQ(next_at_least(d.data(), from, n, t), want) << n << " " << from << " " << t;
        EXPECT_EQ(next_at_least(f.data(), from, n, static_cast<float>(t)), want) << n << " " << from << " " << t;
      }
    }
  }
}

TEST(KernelTargetList, IsEveryTargetCompiledAndSupported) {
  const auto names = kernel::targets();
  ASSERT_GE(names.size(), 2u);
  EXPECT_EQ(names.back(), "scalar");
  for (size_t i = 0; i + 1 < names.size(); ++i) {
    const int64_t bit = target_bit(names[i]);
    ASSERT_NE(bit, 0) << names[i];
    EXPECT_NE(hwy::SupportedTargets() & bit, 0) << names[i];
    if (i > 0) {
      EXPECT_LT(target_bit(names[i - 1]), bit) << "best first";
    }
    // Each name reaches its own table entry (not, say, the fallback or the best target's).
    for (size_t j = 0; j < i; ++j) {
      EXPECT_NE(kernel::by_name(names[i]), kernel::by_name(names[j])) << names[i] << " " << names[j];
      EXPECT_NE(kernel::by_name_raw(names[i], RawFormat::f16), kernel::by_name_raw(names[j], RawFormat::f16))
          << names[i] << " " << names[j];
    }
  }
}

}  // namespace targets_test
}  // namespace driftscope::numerics
