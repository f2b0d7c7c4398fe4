// Light mode: the CountSketch is deterministic (golden values from an independent Python
// implementation), linear, ignores non-finite values; the estimator stays within its documented
// standard error over many random pairs.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "decode_test_util.hpp"
#include "driftscope/decode.hpp"
#include "numerics/sketch.hpp"

namespace driftscope {
namespace {

using numerics::estimate_from_sketches;
using test::bytes_of;
using test::make_info;

Summary summary_of(const std::vector<double>& v, uint32_t dim, uint64_t seed) {
  auto r = summarize(make_info(DType::f64, {v.size()}), bytes_of(v), dim, seed);
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  return r.ok() ? *r : Summary{};
}

TEST(Sketch, SplitMix64KnownAnswers) {
  // The first two outputs of the SplitMix64 generator seeded with 0.
  static_assert(numerics::splitmix64(0) == 0xe220a8397b1dcdafull);
  static_assert(numerics::splitmix64(0x9E3779B97F4A7C15ull) == 0x6e789e6aa1b965f4ull);
}

TEST(Sketch, GoldenValues) {
  std::vector<float> x(100);
  for (int i = 0; i < 100; ++i) x[i] = static_cast<float>(i * 0.25 - 3.0);
  x[7] = std::numeric_limits<float>::quiet_NaN();
  x[50] = std::numeric_limits<float>::infinity();
  auto s = summarize(make_info(DType::f32, {4, 25}), bytes_of(x), 8, kDefaultProjectionSeed);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->projection, (std::vector<float>{-18.0f, 20.5f, 48.0f, 20.75f, 60.25f, 0.75f,
                                               -6.25f, 5.25f}));
  EXPECT_EQ(s->projection_seed, kDefaultProjectionSeed);
  EXPECT_EQ(s->projection_kind, 1u);
  EXPECT_EQ(s->stats.nan_count, 1u);
  EXPECT_EQ(s->stats.posinf_count, 1u);
  // seed + i wraps around 2^64; a dim that is not a power of two.
  s = summarize(make_info(DType::f32, {100}), bytes_of(x), 5, ~uint64_t{0} - 3);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->projection, (std::vector<float>{-68.0f, 20.75f, 32.25f, -39.0f, 7.75f}));
  // Inexact sums: the float64 accumulation in element order, then one rounding to float.
  std::vector<float> y(5000);
  for (int i = 0; i < 5000; ++i) y[i] = static_cast<float>((i * 7919 % 1000) / 37.0 - 13.0);
  s = summarize(make_info(DType::f32, {5000}), bytes_of(y), 16, 12345);
  ASSERT_TRUE(s.ok());
  const uint32_t golden[16] = {0x43484531, 0x42e87c8a, 0x42c1e453, 0xc0f4c1b8, 0x4200c1bb, 0x437f3e45,
                               0x43094c1c, 0xc2b367c8, 0x431bd67c, 0xc3410000, 0x431dd67d, 0x433facf9,
                               0x43045307, 0x42dceb3e, 0x424f759f, 0xc32df229};
  for (int k = 0; k < 16; ++k) EXPECT_EQ(std::bit_cast<uint32_t>(s->projection[k]), golden[k]) << k;
}

TEST(Sketch, EachElementLandsInItsDocumentedBucketWithItsSign) {
  // One-hot tensors: the sketch must hold exactly ±1 at bucket (h >> 32) % dim, sign from h & 1.
  for (uint32_t dim : {1u, 3u, 37u, 256u, 4095u, 4096u}) {
    for (uint64_t i : {0ull, 1ull, 2ull, 99ull, 150ull, 199ull}) {
      std::vector<double> v(200, 0.0);
      v[i] = 1.0;
      const auto s = summary_of(v, dim, 0xABCDEF);
      const auto slot = numerics::sketch_slot(0xABCDEF, i, dim);
      const uint64_t h = numerics::splitmix64(0xABCDEF + i);
      ASSERT_EQ(slot.bucket, (h >> 32) % dim);
      for (uint32_t k = 0; k < dim; ++k)
        ASSERT_EQ(s.projection[k], k == slot.bucket ? (slot.negative ? -1.0f : 1.0f) : 0.0f)
            << "dim " << dim << " element " << i << " bucket " << k;
    }
  }
}

TEST(Sketch, SameValuesSameSketchWhateverTheDtype) {
  std::vector<float> f;
  std::vector<uint16_t> h;
  std::vector<double> d;
  for (int i = 0; i < 7000; ++i) {
    h.push_back(double_to_f16(std::sin(i * 0.1) * 10));
    d.push_back(f16_to_double(h.back()));
    f.push_back(static_cast<float>(d.back()));
  }
  const auto a = summarize(make_info(DType::f16, {7000}), bytes_of(h), 64, 9);
  const auto b = summarize(make_info(DType::f32, {70, 100}), bytes_of(f), 64, 9);
  const auto c = summary_of(d, 64, 9);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->projection, c.projection);
  EXPECT_EQ(b->projection, c.projection);
  EXPECT_EQ(a->stats.l2_norm, c.stats.l2_norm);
  EXPECT_NE(summary_of(d, 64, 10).projection, c.projection);  // the seed matters
}

TEST(Sketch, LinearAndBlindToNonFinite) {
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int> small(-50, 50);
  std::vector<double> a(3000), b(3000), diff(3000);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = small(rng) * 0.5;  // exact in float and in every partial sum
    b[i] = small(rng) * 0.5;
    diff[i] = a[i] - b[i];
  }
  const auto sa = summary_of(a, 32, 77), sb = summary_of(b, 32, 77), sd = summary_of(diff, 32, 77);
  for (int k = 0; k < 32; ++k) EXPECT_EQ(sa.projection[k] - sb.projection[k], sd.projection[k]);
  auto with_bad = a;
  auto zeroed = a;
  for (size_t i : {3u, 100u, 2999u}) {
    with_bad[i] = i == 100 ? -std::numeric_limits<double>::infinity()
                           : std::numeric_limits<double>::quiet_NaN();
    zeroed[i] = 0;
  }
  EXPECT_EQ(summary_of(with_bad, 32, 77).projection, summary_of(zeroed, 32, 77).projection);
}

TEST(Sketch, ArgumentErrors) {
  const std::vector<double> v(10, 1.0);
  EXPECT_EQ(summarize(make_info(DType::f64, {10}), bytes_of(v), 4097, 1).error().code,
            Errc::invalid_argument);
  auto zero_dim = summarize(make_info(DType::f64, {10}), bytes_of(v), 0, 1);
  ASSERT_TRUE(zero_dim.ok());
  EXPECT_TRUE(zero_dim->projection.empty());
  EXPECT_EQ(zero_dim->stats.count, 10u);
  EXPECT_EQ(summarize(make_info(DType::f64, {11}), bytes_of(v), 16, 1).error().code,
            Errc::invalid_argument);

  const auto a = summary_of(v, 16, 1);
  auto b = a;
  b.projection_seed = 2;
  EXPECT_EQ(estimate_from_sketches(a, b).error().code, Errc::incomparable);
  b = summary_of(v, 32, 1);
  EXPECT_EQ(estimate_from_sketches(a, b).error().code, Errc::incomparable);
  b = summary_of(std::vector<double>(11, 1.0), 16, 1);
  EXPECT_EQ(estimate_from_sketches(a, b).error().code, Errc::incomparable);
  b = a;
  b.projection_kind = 2;
  EXPECT_EQ(estimate_from_sketches(a, b).error().code, Errc::incomparable);
  b = a;
  b.projection[3] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(estimate_from_sketches(a, b).error().code, Errc::incomparable);
  const auto e = summary_of(std::vector<double>(10, 0.0), 0, 1);
  EXPECT_EQ(estimate_from_sketches(e, e).error().code, Errc::incomparable);
}

TEST(SketchEstimator, ExactCases) {
  std::vector<double> a(1000), z(1000, 0.0);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::cos(static_cast<double>(i));
  const auto sa = summary_of(a, 128, 5), sz = summary_of(z, 128, 5);
  auto same = estimate_from_sketches(sa, sa);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->cosine, 1.0);
  EXPECT_EQ(same->rel_l2, 0.0);
  // Float storage of the sketch limits resolution to about 2^-24 relative: stated, not hidden.
  EXPECT_GT(same->rel_l2_stderr, 0.0);
  EXPECT_LT(same->rel_l2_stderr, 3e-7);
  auto zz = estimate_from_sketches(sz, sz);
  EXPECT_EQ(zz->cosine, 1.0);
  EXPECT_EQ(zz->rel_l2, 0.0);
  auto az = estimate_from_sketches(sa, sz);
  EXPECT_EQ(az->cosine, 0.0);
  EXPECT_EQ(az->rel_l2, 1.0);
  auto za = estimate_from_sketches(sz, sa);
  EXPECT_EQ(za->rel_l2, std::numeric_limits<double>::infinity());
  // b = 2a: cos 1, rel_l2 1 (the sketch difference is exact here up to float rounding).
  std::vector<double> a2(a);
  for (auto& x : a2) x *= 2;
  auto doubled = estimate_from_sketches(sa, summary_of(a2, 128, 5));
  EXPECT_NEAR(doubled->cosine, 1.0, 3 * doubled->cosine_stderr + 1e-12);
  EXPECT_NEAR(doubled->rel_l2, 1.0, 3 * doubled->rel_l2_stderr);
  // Huge f64 values: sums beyond float range are rejected rather than misestimated.
  std::vector<double> huge(100, 1e300);
  const auto sh = summary_of(huge, 16, 5);
  EXPECT_EQ(estimate_from_sketches(sh, sh).error().code, Errc::incomparable);
}

struct Truth {
  double cosine, rel_l2;
};
Truth exact(const std::vector<double>& a, const std::vector<double>& b) {
  long double ab = 0, aa = 0, bb = 0, dd = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += static_cast<long double>(a[i]) * b[i];
    aa += static_cast<long double>(a[i]) * a[i];
    bb += static_cast<long double>(b[i]) * b[i];
    dd += static_cast<long double>(a[i] - b[i]) * (a[i] - b[i]);
  }
  return {static_cast<double>(ab / std::sqrt(aa * bb)), static_cast<double>(std::sqrt(dd / aa))};
}

// Random pairs b = alpha a + noise, over several dims, sizes, noise levels and distributions.
struct PairGen {
  explicit PairGen(uint64_t seed) : rng(seed) {}
  std::mt19937_64 rng;
  std::vector<double> a, b;
  void make(size_t n, int kind, double alpha, double noise) {
    std::normal_distribution<double> g;
    std::student_t_distribution<double> heavy(3.0);
    std::uniform_real_distribution<double> u(0, 1);
    a.resize(n);
    b.resize(n);
    for (size_t i = 0; i < n; ++i) {
      switch (kind) {
        case 0: a[i] = g(rng); break;
        case 1: a[i] = heavy(rng); break;
        default: a[i] = u(rng) < 0.05 ? g(rng) * 20 : g(rng) * 0.1; break;  // sparse spikes
      }
      b[i] = alpha * a[i] + noise * g(rng);
    }
  }
};

TEST(SketchEstimator, ErrorsStayWithinThreeStandardErrors) {
  PairGen gen(2026);
  int total = 0, cos_out = 0, rel_out = 0;
  const double noises[] = {0.0, 1e-6, 1e-3, 0.05, 0.3, 1.0, 3.0};
  const double alphas[] = {1.0, 1.0, 0.5, -1.0, 0.0};
  for (uint32_t dim : {64u, 256u, 1024u}) {
    for (size_t n : {1000u, 20000u}) {
      for (int rep = 0; rep < 12; ++rep) {
        for (double noise : noises) {
          for (double alpha : alphas) {
            if (alpha == 0.0 && noise == 0.0) continue;
            gen.make(n, rep % 3, alpha, noise);
            const uint64_t seed = gen.rng();
            const auto est = estimate_from_sketches(summary_of(gen.a, dim, seed),
                                                    summary_of(gen.b, dim, seed));
            ASSERT_TRUE(est.ok()) << est.error().to_string();
            const Truth t = exact(gen.a, gen.b);
            ++total;
            cos_out += std::fabs(est->cosine - t.cosine) > 3 * est->cosine_stderr;
            rel_out += std::fabs(est->rel_l2 - t.rel_l2) > 3 * est->rel_l2_stderr;
            // Sanity: the stderr is not uselessly large for near-identical tensors.
            if (alpha == 1.0 && noise == 1e-3) {
              EXPECT_LT(est->cosine_stderr, 1e-5);
              EXPECT_LT(est->rel_l2_stderr, 0.25 * t.rel_l2);
            }
          }
        }
      }
    }
  }
  std::printf("estimates outside 3 stderr: cosine %d, rel_l2 %d, of %d pairs\n", cos_out, rel_out,
              total);
  EXPECT_GT(total, 2000);
  EXPECT_LE(cos_out, total / 100) << cos_out << " of " << total << " cosine estimates off by > 3 stderr";
  EXPECT_LE(rel_out, total / 100) << rel_out << " of " << total << " rel_l2 estimates off by > 3 stderr";
}

// Not a test: prints the table in docs/light-mode.md. Run with
//   ds_test_numerics --gtest_also_run_disabled_tests --gtest_filter='*ErrorTable*'
// "direct" is the textbook estimate <Sa,Sb> / (|a||b|), shown for comparison.
TEST(SketchEstimator, DISABLED_ErrorTable) {
  PairGen gen(99);
  std::printf("| dim | true rel_l2 | rel_l2: median / 99th pct abs error | mean rel_l2_stderr | "
              "cosine: median / 99th pct abs error | direct cosine: median abs error | "
              "outside 3 stderr (cos, rel) |\n|---|---|---|---|---|---|---|\n");
  for (uint32_t dim : {16u, 64u, 256u, 1024u, 4096u}) {
    for (double noise : {1e-3, 0.1, 1.0}) {
      std::vector<double> er, ec, ed;
      double se = 0, truth = 0;
      int out_c = 0, out_r = 0;
      const int reps = 200;
      for (int rep = 0; rep < reps; ++rep) {
        gen.make(20000, 0, 1.0, noise);
        const uint64_t seed = gen.rng();
        const auto sa = summary_of(gen.a, dim, seed), sb = summary_of(gen.b, dim, seed);
        const auto est = estimate_from_sketches(sa, sb);
        ASSERT_TRUE(est.ok());
        const Truth t = exact(gen.a, gen.b);
        double p = 0;
        for (uint32_t k = 0; k < dim; ++k)
          p += static_cast<double>(sa.projection[k]) * sb.projection[k];
        ed.push_back(std::fabs(p / (sa.stats.l2_norm * sb.stats.l2_norm) - t.cosine));
        er.push_back(std::fabs(est->rel_l2 - t.rel_l2));
        ec.push_back(std::fabs(est->cosine - t.cosine));
        out_c += ec.back() > 3 * est->cosine_stderr;
        out_r += er.back() > 3 * est->rel_l2_stderr;
        se += est->rel_l2_stderr / reps;
        truth += t.rel_l2 / reps;
      }
      std::sort(er.begin(), er.end());
      std::sort(ec.begin(), ec.end());
      std::sort(ed.begin(), ed.end());
      std::printf("| %u | %.3g | %.2g / %.2g | %.2g | %.2g / %.2g | %.2g | %d, %d of %d |\n", dim,
                  truth, er[reps / 2], er[reps * 99 / 100], se, ec[reps / 2], ec[reps * 99 / 100],
                  ed[reps / 2], out_c, out_r, reps);
    }
  }
}

}  // namespace
}  // namespace driftscope
