// compare_pair: values of every metric on small hand-checked cases, the NaN/Inf policy, the edge
// cases of docs/metrics.md, and the rejection of bad input.
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "numerics/pair_metrics.hpp"
#include "pair_test_util.hpp"

namespace driftscope::numerics {
namespace {

using testing::bf16;
using testing::f16;
using testing::f32;
using testing::f64;
using testing::make_tensor;
using testing::run;
using testing::Tensor;

constexpr double kInfinity = std::numeric_limits<double>::infinity();
const double kQuietNaN = std::numeric_limits<double>::quiet_NaN();

TEST(PairMetrics, HandCheckedValues) {
  auto r = run(f64({1, 2, 3, 4}), f64({1, 2, 3, 5}));
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const PairMetrics& m = *r;
  EXPECT_EQ(m.count, 4u);
  EXPECT_EQ(m.finite_pairs, 4u);
  EXPECT_EQ(m.max_abs_diff, 1.0);
  EXPECT_EQ(m.max_abs_index, 3);
  EXPECT_EQ(m.max_abs_ref, 4.0);
  EXPECT_EQ(m.max_abs_cand, 5.0);
  EXPECT_EQ(m.mean_abs_diff, 0.25);
  EXPECT_EQ(m.rmse, 0.5);
  EXPECT_EQ(m.max_rel_diff, 0.25);
  EXPECT_EQ(m.sum_ref, 10.0);
  EXPECT_EQ(m.sum_cand, 11.0);
  EXPECT_EQ(m.sumsq_ref, 30.0);
  EXPECT_EQ(m.sumsq_cand, 39.0);
  EXPECT_EQ(m.dot, 34.0);
  EXPECT_EQ(m.sumsq_diff, 1.0);
  EXPECT_DOUBLE_EQ(m.norm_ref, std::sqrt(30.0));
  EXPECT_DOUBLE_EQ(m.norm_cand, std::sqrt(39.0));
  EXPECT_DOUBLE_EQ(m.cosine, 34.0 / std::sqrt(30.0 * 39.0));
  EXPECT_DOUBLE_EQ(m.sqnr_db, 10.0 * std::log10(30.0));
  EXPECT_DOUBLE_EQ(m.nmse, 1.0 / 30.0);
  EXPECT_DOUBLE_EQ(m.rel_l2, std::sqrt(1.0 / 30.0));
  EXPECT_EQ(m.min_ref, 1.0);
  EXPECT_EQ(m.max_ref, 4.0);
  EXPECT_EQ(m.min_cand, 1.0);
  EXPECT_EQ(m.max_cand, 5.0);
  EXPECT_FALSE(m.const_ref);
  EXPECT_EQ(m.mismatch_count, 1u);
  EXPECT_EQ(m.mismatch_fraction, 0.25);
  EXPECT_EQ(m.first_mismatch, 3);
  EXPECT_EQ(m.first_mismatch_ref, 4.0);
  EXPECT_EQ(m.first_mismatch_cand, 5.0);
  EXPECT_EQ(m.max_ulp, int64_t{1} << 50);  // 4.0 and 5.0 are 2^50 doubles apart
  EXPECT_TRUE(m.nan_positions_match);
  EXPECT_TRUE(m.inf_positions_match);
  EXPECT_EQ(m.argmax_agreement, -1.0);
  EXPECT_EQ(m.topk_overlap, -1.0);

  auto r32 = run(f32({1, 2, 3, 4}), f32({1, 2, 3, 5}));
  ASSERT_TRUE(r32.ok());
  EXPECT_EQ(r32->max_ulp, int64_t{1} << 21);
}

TEST(PairMetrics, AllcloseUsesTheReferenceMagnitude) {
  // |a-b| > atol + rtol*|ref|: with ref = 100 the tolerance is 0.01 + 0.01*100 = 1.01.
  PairOptions o;
  o.atol = 0.01;
  o.rtol = 0.01;
  auto r = run(f64({100, 1, 0}), f64({101, 2, 0.01}), o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->mismatch_count, 1u);  // only 1 vs 2 (tolerance 0.02); 0.01 is not > 0.01
  EXPECT_EQ(r->first_mismatch, 1);
  EXPECT_DOUBLE_EQ(r->max_rel_diff, 0.01 / 1e-12);  // |0 - 0.01| / max(0, rel_eps)
  // The rule is asymmetric: the reference's magnitude scales rtol.
  o.atol = 0;
  auto ab = run(f64({99}), f64({100}), o);   // 1 > 0.99
  auto ba = run(f64({100}), f64({99}), o);   // 1 > 1.00 is false
  ASSERT_TRUE(ab.ok() && ba.ok());
  EXPECT_EQ(ab->mismatch_count, 1u);
  EXPECT_EQ(ba->mismatch_count, 0u);
}

TEST(PairMetrics, MaxRelUsesEpsilonForZeroReference) {
  PairOptions o;
  o.rel_eps = 1e-3;
  auto r = run(f64({0, 10}), f64({1e-3, 10}), o);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->max_rel_diff, 1.0);  // 1e-3 / max(0, 1e-3)
}

TEST(PairMetrics, NanPolicy) {
  auto r = run(f64({kQuietNaN, 1, kQuietNaN, 2}), f64({kQuietNaN, 1, 3, kQuietNaN}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->nan_ref, 2u);
  EXPECT_EQ(r->nan_cand, 2u);
  EXPECT_EQ(r->nan_both, 1u);
  EXPECT_FALSE(r->nan_positions_match);
  EXPECT_EQ(r->finite_pairs, 1u);
  EXPECT_EQ(r->max_abs_diff, 0.0);  // metrics use the one finite pair (1, 1)
  EXPECT_EQ(r->mismatch_count, 3u);  // NaN==NaN is a mismatch without nan_equal
  EXPECT_EQ(r->first_mismatch, 0);
  EXPECT_TRUE(std::isnan(r->first_mismatch_ref));

  PairOptions o;
  o.nan_equal = true;
  auto e = run(f64({kQuietNaN, 1, kQuietNaN, 2}), f64({kQuietNaN, 1, 3, kQuietNaN}), o);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->mismatch_count, 2u);
  EXPECT_EQ(e->first_mismatch, 2);
  EXPECT_EQ(e->first_mismatch_cand, 3.0);

  auto same = run(f64({kQuietNaN, 1}), f64({kQuietNaN, 1}), o);
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->nan_positions_match);
  EXPECT_EQ(same->mismatch_count, 0u);
  EXPECT_EQ(same->first_mismatch, -1);
}

TEST(PairMetrics, InfSigns) {
  auto r = run(f64({kInfinity, -kInfinity, kInfinity, 1, 2}), f64({kInfinity, kInfinity, 5, -kInfinity, 2}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->inf_ref, 3u);
  EXPECT_EQ(r->inf_cand, 3u);
  EXPECT_EQ(r->inf_same, 1u);
  EXPECT_FALSE(r->inf_positions_match);
  EXPECT_EQ(r->finite_pairs, 1u);
  EXPECT_EQ(r->mismatch_count, 3u);  // +inf vs +inf agrees; the others do not
  EXPECT_EQ(r->first_mismatch, 1);

  auto same = run(f64({kInfinity, -kInfinity, 1}), f64({kInfinity, -kInfinity, 1}));
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->inf_positions_match);
  EXPECT_EQ(same->mismatch_count, 0u);
  EXPECT_EQ(same->sqnr_db, kInfinity);
}

TEST(PairMetrics, SignedZeros) {
  auto r = run(f64({-0.0, 0.0, -0.0}), f64({0.0, -0.0, -0.0}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->mismatch_count, 0u);
  EXPECT_EQ(r->max_abs_diff, 0.0);
  EXPECT_EQ(r->max_ulp, 0);  // -0 and +0 are the same point of the ordered scale
  EXPECT_EQ(r->zero_ref, 3u);
  EXPECT_EQ(r->zero_cand, 3u);
  EXPECT_EQ(r->cosine, 1.0);  // both all-zero
  EXPECT_EQ(r->sqnr_db, kInfinity);
  EXPECT_EQ(r->nmse, 0.0);
  EXPECT_EQ(r->rel_l2, 0.0);
  EXPECT_TRUE(r->const_ref);
  EXPECT_TRUE(r->const_cand);
  EXPECT_FALSE(std::signbit(r->min_ref));  // zeros are reported unsigned
}

TEST(PairMetrics, CosineZeroRules) {
  auto one_zero = run(f64({1, 2, 3}), f64({0, 0, 0}));
  ASSERT_TRUE(one_zero.ok());
  EXPECT_EQ(one_zero->cosine, 0.0);  // a silent zero is never "cosine 1"
  EXPECT_EQ(one_zero->norm_cand, 0.0);
  EXPECT_DOUBLE_EQ(one_zero->nmse, 1.0);
  EXPECT_DOUBLE_EQ(one_zero->rel_l2, 1.0);
  EXPECT_DOUBLE_EQ(one_zero->sqnr_db, 0.0);
  auto ref_zero = run(f64({0, 0}), f64({1, 0}));
  ASSERT_TRUE(ref_zero.ok());
  EXPECT_EQ(ref_zero->cosine, 0.0);
  EXPECT_EQ(ref_zero->sqnr_db, -kInfinity);
  EXPECT_EQ(ref_zero->nmse, kInfinity);
  EXPECT_EQ(ref_zero->rel_l2, kInfinity);
  auto opposite = run(f64({1, 2}), f64({-1, -2}));
  ASSERT_TRUE(opposite.ok());
  EXPECT_DOUBLE_EQ(opposite->cosine, -1.0);
  auto scaled = run(f64({1, 2, 3}), f64({2, 4, 6}));
  ASSERT_TRUE(scaled.ok());
  EXPECT_DOUBLE_EQ(scaled->cosine, 1.0);
  // Identical finite values give exactly 1, not 1 - 1ulp.
  auto same = run(f64({0.1, 0.7, 1e-3}), f64({0.1, 0.7, 1e-3}));
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->cosine, 1.0);
}

TEST(PairMetrics, ConstantTensors) {
  auto r = run(f64({7, 7, 7}), f64({7, 7, 8}));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->const_ref);
  EXPECT_FALSE(r->const_cand);
  EXPECT_EQ(r->min_ref, 7.0);
  EXPECT_EQ(r->max_ref, 7.0);
  // NaN positions are outside the finite pairs, so they do not break constancy.
  auto n = run(f64({7, kQuietNaN}), f64({7, 1}));
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(n->const_ref);
  EXPECT_TRUE(n->const_cand);
}

TEST(PairMetrics, EmptyAndRankZero) {
  auto e = run(make_tensor<float>(DType::f32, {}, {0, 3}), make_tensor<float>(DType::f32, {}, {0, 3}));
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  EXPECT_EQ(e->count, 0u);
  EXPECT_EQ(e->finite_pairs, 0u);
  EXPECT_EQ(e->cosine, 1.0);
  EXPECT_EQ(e->sqnr_db, kInfinity);
  EXPECT_EQ(e->mismatch_fraction, 0.0);
  EXPECT_EQ(e->first_mismatch, -1);
  EXPECT_EQ(e->max_abs_index, -1);
  EXPECT_EQ(e->max_ulp, 0);
  EXPECT_FALSE(e->const_ref);

  auto s = run(make_tensor<float>(DType::f32, {2.5f}, {}), make_tensor<float>(DType::f32, {3.0f}, {}));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->count, 1u);
  EXPECT_EQ(s->max_abs_diff, 0.5);
  EXPECT_EQ(s->max_abs_index, 0);
  EXPECT_TRUE(s->const_ref);
}

TEST(PairMetrics, AllNonFinite) {
  auto r = run(f64({kQuietNaN, kInfinity}), f64({1, 2}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->finite_pairs, 0u);
  EXPECT_EQ(r->max_abs_index, -1);
  EXPECT_EQ(r->mismatch_count, 2u);
  EXPECT_EQ(r->rmse, 0.0);
  EXPECT_FALSE(r->const_ref);
}

TEST(PairMetrics, HugeMagnitudesDoNotOverflow) {
  // Squares of 1e300 overflow float64; the scaled sums must not.
  auto r = run(f64({1e300, -2e300, 3e300}), f64({1.5e300, -2e300, 3e300}));
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->max_abs_diff, 0.5e300);
  EXPECT_DOUBLE_EQ(r->rmse, 0.5e300 / std::sqrt(3.0));
  EXPECT_DOUBLE_EQ(r->norm_ref, std::sqrt(14.0) * 1e300);
  EXPECT_DOUBLE_EQ(r->cosine, (1.5 + 4 + 9) / (std::sqrt(14.0) * std::sqrt(15.25)));
  EXPECT_DOUBLE_EQ(r->sqnr_db, 10 * std::log10(14.0 / 0.25));
  EXPECT_DOUBLE_EQ(r->nmse, 0.25 / 14.0);
  EXPECT_DOUBLE_EQ(r->rel_l2, std::sqrt(0.25 / 14.0));
  EXPECT_EQ(r->sumsq_ref, kInfinity);  // the true value, 1.4e601, is not a double

  // r - c itself overflows here.
  auto o = run(f64({1.5e308, 1}), f64({-1.5e308, 1}));
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->max_abs_diff, kInfinity);
  EXPECT_EQ(o->max_abs_index, 0);
  EXPECT_EQ(o->rmse, kInfinity);  // 3e308 / sqrt(2) = 2.1e308 is beyond float64
  EXPECT_DOUBLE_EQ(o->rel_l2, 2.0);
  EXPECT_DOUBLE_EQ(o->cosine, -1.0);
}

TEST(PairMetrics, TinyMagnitudesDoNotUnderflow) {
  auto r = run(f64({1e-300, 2e-300}), f64({1e-300, 3e-300}));
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->rmse, 1e-300 / std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(r->norm_ref, std::sqrt(5.0) * 1e-300);
  EXPECT_DOUBLE_EQ(r->rel_l2, std::sqrt(1.0 / 5.0));
  EXPECT_DOUBLE_EQ(r->cosine, 7.0 / (std::sqrt(5.0) * std::sqrt(10.0)));
  // Subnormals: the smallest positive double against zero is one ULP away.
  auto s = run(f64({std::numeric_limits<double>::denorm_min(), -std::numeric_limits<double>::denorm_min()}),
               f64({0.0, std::numeric_limits<double>::denorm_min()}));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->max_ulp, 2);
  EXPECT_DOUBLE_EQ(s->cosine, -1.0 / std::sqrt(2.0));
  EXPECT_GT(s->norm_ref, 0.0);
}

TEST(PairMetrics, UlpPerDtype) {
  // f16: 1.0 = 0x3C00, next = 0x3C01.
  auto h = run(make_tensor<uint16_t>(DType::f16, {0x3C00, 0x8000, 0x0001}, {3}),
               make_tensor<uint16_t>(DType::f16, {0x3C01, 0x0000, 0x8001}, {3}));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->max_ulp, 2);  // smallest subnormal vs its negative
  auto b = run(make_tensor<uint16_t>(DType::bf16, {0x3F80}, {1}),
               make_tensor<uint16_t>(DType::bf16, {0x3F83}, {1}));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->max_ulp, 3);
  // e4m3fn: 0x7E is the largest finite (448); 0x7F is NaN and is left out.
  auto e4 = run(make_tensor<uint8_t>(DType::f8e4m3fn, {0x7E, 0x7F, 0x01}, {3}),
                make_tensor<uint8_t>(DType::f8e4m3fn, {0xFE, 0x00, 0x02}, {3}));
  ASSERT_TRUE(e4.ok());
  EXPECT_EQ(e4->max_ulp, 2 * 0x7E);
  EXPECT_EQ(e4->nan_ref, 1u);
  // e5m2: 0x7C is +inf and is left out; 0x7B is the largest finite.
  auto e5 = run(make_tensor<uint8_t>(DType::f8e5m2, {0x7B, 0x7C}, {2}),
                make_tensor<uint8_t>(DType::f8e5m2, {0x7A, 0x7B}, {2}));
  ASSERT_TRUE(e5.ok());
  EXPECT_EQ(e5->max_ulp, 1);
  EXPECT_EQ(e5->inf_ref, 1u);
  // f64: the distance between the two extremes does not fit int64: saturate.
  auto w = run(f64({std::numeric_limits<double>::max()}), f64({-std::numeric_limits<double>::max()}));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->max_ulp, std::numeric_limits<int64_t>::max());
  // Different dtypes or quantized sides: no ULP distance.
  auto mixed = run(f32({1, 2}), f16({1, 2}));
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(mixed->max_ulp, -1);
  auto ints = run(make_tensor<int32_t>(DType::i32, {1, 2}, {2}), make_tensor<int32_t>(DType::i32, {1, 3}, {2}));
  ASSERT_TRUE(ints.ok());
  EXPECT_EQ(ints->max_ulp, -1);
  EXPECT_EQ(ints->max_abs_diff, 1.0);
}

TEST(PairMetrics, MixedDtypesCompareInFloat64) {
  const std::vector<double> v = {0.1, -2.5, 1000.0, 3.0};
  auto r = run(f32(v), f16(v));
  ASSERT_TRUE(r.ok());
  // f16 rounds 0.1 to 0.0999755859375 and f32 to 0.100000001490116...; the rest is exact.
  const double d01 = std::fabs(static_cast<double>(0.1f) - f16_to_double(double_to_f16(0.1)));
  EXPECT_EQ(r->max_abs_diff, d01);
  EXPECT_EQ(r->max_abs_index, 0);
  EXPECT_EQ(r->mismatch_count, 1u);
  auto b = run(f64({0.5, -2.5, 1001.0, 3.0}), bf16({0.5, -2.5, 1001.0, 3.0}));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->max_abs_index, 2);  // bf16 keeps 8 significant bits: 1001 -> 1000
  EXPECT_EQ(b->max_abs_diff, 1.0);
}

TEST(PairMetrics, QuantizedSideIsDequantized) {
  // value = 0.5 * (q - 2)
  auto q = make_tensor<int8_t>(DType::i8, {2, 4, -2, 127}, {4});
  q.info.encoding.kind = EncodingKind::affine_tensor;
  q.info.encoding.scales = {0.5};
  q.info.encoding.zero_points = {2};
  auto r = run(f32({0, 1, -2, 62}), q);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->max_abs_diff, 0.5);
  EXPECT_EQ(r->max_abs_index, 3);
  EXPECT_EQ(r->max_ulp, -1);

  // Per channel along axis 1 of a [2,2] tensor: scales {1, 10}, zero points {0, 1}.
  auto c = make_tensor<uint8_t>(DType::u8, {3, 2, 5, 4}, {2, 2});
  c.info.encoding.kind = EncodingKind::affine_channel;
  c.info.encoding.axis = 1;
  c.info.encoding.scales = {1, 10};
  c.info.encoding.zero_points = {0, 1};
  auto ref = make_tensor<double>(DType::f64, {3, 10, 5, 30}, {2, 2});
  auto rc = run(ref, c);
  ASSERT_TRUE(rc.ok()) << rc.error().to_string();
  EXPECT_EQ(rc->max_abs_diff, 0.0);
  // The same tensor seen transposed through cand_index keeps each element's own channel.
  const std::vector<uint64_t> perm = {0, 2, 1, 3};
  auto ref_t = make_tensor<double>(DType::f64, {3, 5, 10, 30}, {2, 2});
  PairOptions o;
  o.cand_index = perm;
  auto rt = run(ref_t, c, o);
  ASSERT_TRUE(rt.ok()) << rt.error().to_string();
  EXPECT_EQ(rt->max_abs_diff, 0.0);
}

TEST(PairMetrics, CandIndexPermutation) {
  // NCHW reference [1,2,2,3] against an NHWC candidate holding the same values.
  const uint64_t C = 2, H = 2, W = 3;
  std::vector<double> nchw(C * H * W), nhwc(C * H * W);
  std::vector<uint64_t> idx(C * H * W);
  for (uint64_t c = 0; c < C; ++c)
    for (uint64_t h = 0; h < H; ++h)
      for (uint64_t w = 0; w < W; ++w) {
        const uint64_t i = (c * H + h) * W + w, j = (h * W + w) * C + c;
        nchw[i] = static_cast<double>(i) * 1.5 - 4;
        nhwc[j] = nchw[i];
        idx[i] = j;
      }
  auto a = make_tensor(DType::f32, std::vector<float>(nchw.begin(), nchw.end()), {1, C, H, W});
  auto b = make_tensor(DType::f32, std::vector<float>(nhwc.begin(), nhwc.end()), {1, H, W, C});
  auto plain = run(a, b);
  ASSERT_TRUE(plain.ok());
  EXPECT_GT(plain->max_abs_diff, 0.0);
  PairOptions o;
  o.cand_index = idx;
  auto perm = run(a, b, o);
  ASSERT_TRUE(perm.ok());
  EXPECT_EQ(perm->max_abs_diff, 0.0);
  EXPECT_EQ(perm->max_ulp, 0);
  EXPECT_EQ(perm->cosine, 1.0);
  // A changed candidate element is reported at its reference position.
  b = make_tensor(DType::f32, [&] {
        std::vector<float> f(nhwc.begin(), nhwc.end());
        f[idx[7]] += 1;
        return f;
      }(), {1, H, W, C});
  auto moved = run(a, b, o);
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(moved->first_mismatch, 7);
  EXPECT_EQ(moved->max_abs_index, 7);
  EXPECT_EQ(moved->first_mismatch_ref, nchw[7]);
}

TEST(PairMetrics, ArgmaxAndTopK) {
  // Two rows of 4 classes.
  PairOptions o;
  o.classes = 4;
  o.top_k = 2;
  auto r = run(f32({0.1, 0.9, 0.5, 0.2, /**/ 3, 1, 2, 0}),
               f32({0.1, 0.8, 0.7, 0.2, /**/ 1, 3, 0, 2}), o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rows, 2u);
  EXPECT_DOUBLE_EQ(r->argmax_agreement, 0.5);  // row 0 agrees (1), row 1 does not (0 vs 1)
  // top-2: row 0 {1,2} vs {1,2} -> 2; row 1 {0,2} vs {1,3} -> 0.
  EXPECT_DOUBLE_EQ(r->topk_overlap, 0.5);

  // Ties go to the lower class; NaN ranks first (as numpy/torch argmax).
  o.top_k = 1;
  auto t = run(f32({1, 1, 0}), f32({0, 1, 1}), [&] { PairOptions p = o; p.classes = 3; return p; }());
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->argmax_agreement, 0.0);  // 0 vs 1
  auto n = run(f32({1, kQuietNaN, 0}), f32({5, 1, 0}), [&] { PairOptions p = o; p.classes = 3; return p; }());
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->argmax_agreement, 0.0);  // 1 (NaN) vs 0
  // top_k larger than the class count is clamped to it.
  PairOptions big;
  big.classes = 2;
  big.top_k = 5;
  auto b = run(f32({1, 2}), f32({2, 1}), big);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->topk_overlap, 1.0);
  EXPECT_EQ(b->argmax_agreement, 0.0);
}

TEST(PairMetrics, RowsLongerThanATask) {
  // 3 rows of 300000 classes: rows are longer than one task (256 Ki elements), so each row
  // becomes its own task.
  const size_t C = 300000;
  std::vector<float> a(3 * C), b(3 * C);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>((i * 7919) % 1000);
    b[i] = a[i];
  }
  a[5] = 2000;           // row 0 argmax at 5
  b[C - 1] = 3000;       // candidate row 0 argmax at C-1
  a[C + 17] = 5000;      // row 1: both at 17
  b[C + 17] = 5000;
  a[2 * C + 200000] = 4000;
  b[2 * C + 200000] = 4000;
  PairOptions o;
  o.classes = C;
  o.top_k = 1;
  auto r = run(make_tensor(DType::f32, a, {3, C}), make_tensor(DType::f32, b, {3, C}), o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rows, 3u);
  EXPECT_DOUBLE_EQ(r->argmax_agreement, 2.0 / 3.0);
}

TEST(PairMetrics, LargeTopKOnAscendingRows) {
  // Ascending values make every element enter the top-k: the heap keeps this O(n log k).
  const size_t C = 200000;
  std::vector<float> a(2 * C), b(2 * C);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(i % C);
    b[i] = a[i];
  }
  b[C - 1] = -1;  // row 0: the candidate loses its best column
  PairOptions o;
  o.classes = C;
  o.top_k = 65536;
  auto r = run(make_tensor(DType::f32, a, {2, C}), make_tensor(DType::f32, b, {2, C}), o);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->rows, 2u);
  EXPECT_DOUBLE_EQ(r->argmax_agreement, 0.5);
  // Row 0 shares 65535 of its 65536 best columns, row 1 all of them.
  EXPECT_DOUBLE_EQ(r->topk_overlap, (65535.0 + 65536.0) / (2 * 65536.0));
}

TEST(PairMetrics, RejectsBadInput) {
  auto n = run(f32({1, 2, 3}), f32({1, 2}));
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.error().code, Errc::incomparable);

  auto short_payload = f32({1, 2, 3});
  short_payload.bytes.pop_back();
  auto p = run(short_payload, f32({1, 2, 3}));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, Errc::invalid_argument);

  PairOptions o;
  const std::vector<uint64_t> bad = {0, 1, 3};
  o.cand_index = bad;
  auto i = run(f32({1, 2, 3}), f32({1, 2, 3}), o);
  ASSERT_FALSE(i.ok());
  EXPECT_EQ(i.error().code, Errc::invalid_argument);
  EXPECT_NE(i.error().message.find("cand_index[2]"), std::string::npos) << i.error().message;
  const std::vector<uint64_t> short_idx = {0, 1};
  o.cand_index = short_idx;
  EXPECT_EQ(run(f32({1, 2, 3}), f32({1, 2, 3}), o).error().code, Errc::invalid_argument);

  PairOptions c;
  c.classes = 2;
  EXPECT_EQ(run(f32({1, 2, 3}), f32({1, 2, 3}), c).error().code, Errc::invalid_argument);
  c.classes = 3;
  c.top_k = 0;
  EXPECT_EQ(run(f32({1, 2, 3}), f32({1, 2, 3}), c).error().code, Errc::invalid_argument);
  c.top_k = 65537;  // bounded: the per-row state is two heaps of top_k entries
  EXPECT_EQ(run(f32({1, 2, 3}), f32({1, 2, 3}), c).error().code, Errc::invalid_argument);

  for (double bad_tol : {-1.0, std::numeric_limits<double>::quiet_NaN()}) {
    PairOptions t;
    t.atol = bad_tol;
    EXPECT_EQ(run(f32({1}), f32({1}), t).error().code, Errc::invalid_argument);
    t = {};
    t.rtol = bad_tol;
    EXPECT_EQ(run(f32({1}), f32({1}), t).error().code, Errc::invalid_argument);
  }
  for (double bad_eps : {0.0, -1.0, kInfinity}) {
    PairOptions t;
    t.rel_eps = bad_eps;
    EXPECT_EQ(run(f32({1}), f32({1}), t).error().code, Errc::invalid_argument);
  }

  // A bool byte other than 0/1 is reported by the decoder, not hidden.
  auto b = make_tensor<uint8_t>(DType::boolean, {0, 2}, {2});
  auto br = run(make_tensor<uint8_t>(DType::boolean, {0, 1}, {2}), b);
  ASSERT_FALSE(br.ok());
  EXPECT_EQ(br.error().code, Errc::bad_value);

  // Huge declared shapes are refused before any allocation.
  Tensor huge = f32({1});
  huge.info.shape = {uint64_t{1} << 40, uint64_t{1} << 40};
  EXPECT_FALSE(run(huge, huge).ok());
}

TEST(PairMetrics, TargetsAreListedAndForcible) {
  const auto targets = available_targets();
  ASSERT_FALSE(targets.empty());
  EXPECT_EQ(targets.back(), "scalar");
  EXPECT_FALSE(force_target("no-such-target"));
  for (const auto& t : targets) EXPECT_TRUE(force_target(t)) << t;
  EXPECT_TRUE(force_target(""));
}

}  // namespace
}  // namespace driftscope::numerics
