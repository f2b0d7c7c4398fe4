// compute_stats against a naive long-double computation on adversarial inputs.
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "decode_test_util.hpp"
#include "driftscope/decode.hpp"

namespace driftscope {
namespace {

using test::bytes_of;
using test::make_info;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// The reference: long double (64-bit significand, 15-bit exponent, so no overflow or underflow
// for any double input), over the finite values, two passes, on values shifted by the first
// finite one so the sum of a large offset does not round away the spread.
TensorStats naive(const std::vector<double>& v) {
  TensorStats s;
  s.count = v.size();
  long double shift = 0, sum = 0, n = 0, mn = INFINITY, mx = -INFINITY, ss = 0;
  bool have = false;
  for (double x : v) {
    if (std::isnan(x)) { ++s.nan_count; continue; }
    if (std::isinf(x)) { ++(x > 0 ? s.posinf_count : s.neginf_count); continue; }
    if (!have) shift = x, have = true;
    s.zero_count += x == 0;
    sum += x - shift;
    ss += static_cast<long double>(x) * x;
    mn = std::min<long double>(mn, x);
    mx = std::max<long double>(mx, x);
    ++n;
  }
  s.l2_norm = static_cast<double>(std::sqrt(ss));
  if (n == 0) return s;
  const long double mean_shifted = sum / n;
  long double m2 = 0;
  for (double x : v)
    if (std::isfinite(x)) m2 += (x - shift - mean_shifted) * (x - shift - mean_shifted);
  s.min = static_cast<double>(mn);
  s.max = static_cast<double>(mx);
  s.mean = static_cast<double>(shift + mean_shifted);
  s.std = static_cast<double>(std::sqrt(m2 / n));
  return s;
}

TensorStats stats_of(const std::vector<double>& v) {
  auto r = compute_stats(make_info(DType::f64, {v.size()}), bytes_of(v));
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  return r.ok() ? *r : TensorStats{};
}

// Mean and std are compared with a tolerance relative to the largest finite magnitude (their
// condition number); l2 relative to itself.
void expect_close(const TensorStats& got, const TensorStats& want, double rel = 1e-13) {
  EXPECT_EQ(got.count, want.count);
  EXPECT_EQ(got.nan_count, want.nan_count);
  EXPECT_EQ(got.posinf_count, want.posinf_count);
  EXPECT_EQ(got.neginf_count, want.neginf_count);
  EXPECT_EQ(got.zero_count, want.zero_count);
  if (std::isnan(want.min)) {
    EXPECT_TRUE(std::isnan(got.min) && std::isnan(got.max) && std::isnan(got.mean) &&
                std::isnan(got.std));
    EXPECT_EQ(got.l2_norm, 0.0);
    return;
  }
  EXPECT_EQ(got.min, want.min);
  EXPECT_EQ(got.max, want.max);
  const double scale = std::max(std::fabs(want.min), std::fabs(want.max));
  EXPECT_NEAR(got.mean, want.mean, rel * scale);
  EXPECT_NEAR(got.std, want.std, rel * std::max(want.std, scale * 1e-3));
  if (std::isinf(want.l2_norm)) EXPECT_EQ(got.l2_norm, want.l2_norm);
  else EXPECT_NEAR(got.l2_norm, want.l2_norm, rel * want.l2_norm);
  EXPECT_GE(got.mean, got.min);
  EXPECT_LE(got.mean, got.max);
}

TEST(Stats, EmptyAndRankZero) {
  auto empty = compute_stats(make_info(DType::f32, {0, 5}), {});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->count, 0u);
  EXPECT_TRUE(std::isnan(empty->mean) && std::isnan(empty->min) && std::isnan(empty->std));
  EXPECT_EQ(empty->l2_norm, 0.0);
  const std::vector<float> one = {-2.5f};
  auto scalar = compute_stats(make_info(DType::f32, {}), bytes_of(one));
  ASSERT_TRUE(scalar.ok());
  EXPECT_EQ(scalar->count, 1u);
  EXPECT_EQ(scalar->mean, -2.5);
  EXPECT_EQ(scalar->std, 0.0);
  EXPECT_EQ(scalar->l2_norm, 2.5);
  EXPECT_EQ(scalar->min, -2.5);
}

TEST(Stats, ConstantTensorHasExactMeanAndZeroStd) {
  for (double c : {0.1, -3.3, 1e300, 5e-324, 0.0}) {
    std::vector<double> v(10007, c);  // not a multiple of the chunk length
    const auto s = stats_of(v);
    EXPECT_EQ(s.mean, c);
    EXPECT_EQ(s.std, 0.0);
    EXPECT_EQ(s.min, c);
    EXPECT_EQ(s.max, c);
    EXPECT_NEAR(s.l2_norm, std::sqrt(10007.0) * std::fabs(c), 1e-13 * s.l2_norm);
  }
}

TEST(Stats, NonFiniteAndSignedZerosAreCountedAndExcluded) {
  const std::vector<double> v = {kNan, 1.0, -0.0, kInf, 0.0, -kInf, -kInf, 3.0, kNan, kNan};
  const auto s = stats_of(v);
  EXPECT_EQ(s.nan_count, 3u);
  EXPECT_EQ(s.posinf_count, 1u);
  EXPECT_EQ(s.neginf_count, 2u);
  EXPECT_EQ(s.zero_count, 2u);
  EXPECT_EQ(s.mean, 1.0);
  EXPECT_EQ(s.max, 3.0);
  EXPECT_EQ(s.l2_norm, std::sqrt(10.0));
  expect_close(s, naive(v));
  const auto all_nan = stats_of({kNan, kInf});
  EXPECT_TRUE(std::isnan(all_nan.mean));
  EXPECT_EQ(all_nan.l2_norm, 0.0);
}

TEST(Stats, HugeMagnitudesDoNotOverflow) {
  const double big = std::numeric_limits<double>::max();
  std::vector<double> v = {big, -big, big / 2, -big / 3, 1.0};
  expect_close(stats_of(v), naive(v));
  v = {1e308, -1e308};
  const auto s = stats_of(v);
  EXPECT_NEAR(s.std, 1e308, 1e295);
  EXPECT_NEAR(s.l2_norm, std::sqrt(2.0) * 1e308, 1e295);
  EXPECT_EQ(s.mean, 0.0);
  // A norm beyond the double range is +Inf, not NaN or garbage.
  EXPECT_EQ(stats_of({big, big, big}).l2_norm, kInf);
}

TEST(Stats, SubnormalsKeepTheirPrecision) {
  std::vector<double> v;
  for (int i = 1; i <= 5000; ++i) v.push_back(std::ldexp(static_cast<double>(i % 97), -1074));
  const auto s = stats_of(v);
  expect_close(s, naive(v), 1e-12);
  EXPECT_GT(s.l2_norm, 0.0);
  EXPECT_GT(s.std, 0.0);
}

TEST(Stats, ChunksOfVeryDifferentScale) {
  // First a chunk of tiny values, then huge ones, then medium: the running exponent must grow
  // without losing the earlier chunks where they matter.
  std::vector<double> v;
  std::mt19937_64 rng(3);
  std::normal_distribution<double> g;
  for (int i = 0; i < 3000; ++i) v.push_back(g(rng) * 1e-300);
  for (int i = 0; i < 3000; ++i) v.push_back(g(rng) * 1e300);
  for (int i = 0; i < 3000; ++i) v.push_back(g(rng));
  expect_close(stats_of(v), naive(v));
  std::vector<double> w;
  for (int i = 0; i < 5000; ++i) w.push_back(g(rng) * 1e-200);
  for (int i = 0; i < 5000; ++i) w.push_back(g(rng) * 1e-150);
  expect_close(stats_of(w), naive(w));
}

TEST(Stats, LargeOffsetSmallSpreadIsStable) {
  // Naive one-pass E[x²] - E[x]² loses everything here; std must still be accurate.
  std::vector<double> v;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-1e-3, 1e-3);
  for (int i = 0; i < 100000; ++i) v.push_back(1e9 + u(rng));
  const auto s = stats_of(v);
  const auto want = naive(v);
  EXPECT_NEAR(s.std, want.std, 1e-12 * want.std);
  EXPECT_NEAR(s.mean, want.mean, 1e-15 * want.mean);
}

TEST(Stats, RandomMixedInputsAgreeWithLongDouble) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> g;
  std::uniform_int_distribution<int> e(-60, 60);
  for (size_t n : {1u, 7u, 2047u, 2048u, 2049u, 50000u}) {
    std::vector<double> v(n);
    for (auto& x : v) x = g(rng) * std::ldexp(1.0, e(rng));
    if (n > 10) v[n / 2] = kNan, v[n / 3] = -kInf, v[n / 4] = -0.0;
    SCOPED_TRACE(n);
    expect_close(stats_of(v), naive(v), 1e-12);
  }
}

TEST(Stats, BitIdenticalOnEverySimdTarget) {
  std::mt19937_64 rng(17);
  std::normal_distribution<double> g;
  std::vector<double> v(20011);
  for (auto& x : v) x = g(rng) * 1e3 + 5e4;
  v[5] = kNan;
  v[4097] = kInf;
  std::vector<uint64_t> first;
  int targets = 0;
  test::for_each_target([&] {
    const auto s = stats_of(v);
    const std::vector<uint64_t> bits = {test::bits_of(s.mean), test::bits_of(s.std),
                                        test::bits_of(s.l2_norm), test::bits_of(s.min),
                                        test::bits_of(s.max), s.nan_count, s.posinf_count};
    if (first.empty()) first = bits;
    EXPECT_EQ(bits, first);
    ++targets;
  });
  EXPECT_GE(targets, 1);
}

// min(-0, +0) is whichever operand a comparison keeps, and targets compare lanes in different
// orders: a zero extreme is reported as +0 on every target (numerics/unsigned_zero.hpp), so the
// same values give the same bytes (docs/format.md §3.6). Found by tests/python/test_simd_targets.py:
// `driftscope ls` printed -0 under SSE4 and 0 under AVX-512 for the same float16 tensor.
TEST(Stats, ZeroExtremesAreUnsignedOnEveryTarget) {
  std::mt19937_64 rng(5);
  for (size_t n : {size_t{1}, size_t{16}, size_t{64}, size_t{1000}, size_t{4096}, size_t{70001}}) {
    std::vector<double> mixed(n), negative(n, -0.0), relu(n);
    for (size_t i = 0; i < n; ++i) {
      mixed[i] = rng() % 2 ? -0.0 : 0.0;
      relu[i] = rng() % 3 == 0 ? 0.25 * static_cast<double>(rng() % 8) : (rng() % 2 ? -0.0 : 0.0);
    }
    relu[0] = -0.0;  // a zero minimum whatever the rest
    test::for_each_target([&] {
      SCOPED_TRACE(n);
      for (const auto* v : {&mixed, &negative}) {
        const auto s = stats_of(*v);
        EXPECT_EQ(test::bits_of(s.min), 0u);
        EXPECT_EQ(test::bits_of(s.max), 0u);
        EXPECT_EQ(test::bits_of(s.mean), 0u);
        EXPECT_EQ(s.zero_count, n);
      }
      EXPECT_EQ(test::bits_of(stats_of(relu).min), 0u);
    });
  }
}

TEST(Stats, NarrowAndQuantisedDtypesUseDecodedValues) {
  std::vector<uint16_t> h;
  std::vector<double> ref;
  for (int i = 0; i < 3000; ++i) {
    h.push_back(double_to_f16((i - 1500) * 0.01));
    ref.push_back(f16_to_double(h.back()));
  }
  h.push_back(0x7c00);  // +Inf
  ref.push_back(kInf);
  auto s = compute_stats(make_info(DType::f16, {h.size()}), bytes_of(h));
  ASSERT_TRUE(s.ok());
  expect_close(*s, naive(ref));
  auto info = make_info(DType::u8, {4});
  info.encoding.kind = EncodingKind::affine_tensor;
  info.encoding.scales = {0.5};
  info.encoding.zero_points = {2};
  const std::vector<uint8_t> q = {2, 4, 0, 2};
  s = compute_stats(info, bytes_of(q));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->min, -1.0);
  EXPECT_EQ(s->max, 1.0);
  EXPECT_EQ(s->zero_count, 2u);
  EXPECT_EQ(s->l2_norm, std::sqrt(2.0));
  const std::vector<uint8_t> bad = {0, 3};
  EXPECT_EQ(compute_stats(make_info(DType::boolean, {2}), bytes_of(bad)).error().code,
            Errc::bad_value);
  EXPECT_EQ(compute_stats(make_info(DType::f32, {3}), bytes_of(q)).error().code,
            Errc::invalid_argument);
}

}  // namespace
}  // namespace driftscope
