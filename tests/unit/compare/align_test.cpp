// Alignment: identities with occurrences and roles, rename rules and mapping files, permuted axes
// (NCHW vs NHWC), size-1 axes, --reshape, incomparable reasons and positional pairing.
#include "compare_test_util.hpp"
#include "compare/internal.hpp"

namespace {

using namespace ds_test;

TEST(Align, PairsCallByCallAndReportsUnpaired) {
  ScratchDir d;
  auto v = noise(8, 1);
  // "block" runs three times in the reference and twice in the candidate.
  std::vector<Entry> ref = {{"embed", v}, {"block", v}, {"block", v}, {"block", v}, {"ref_only", v}};
  std::vector<Entry> cand = {{"embed", v}, {"block", v}, {"block", v}, {"cand_only", v}};
  auto a = write_dump(d.file("a.tdump"), ref);
  auto b = write_dump(d.file("b.tdump"), cand);
  Report r = run_compare(a, b);
  ASSERT_EQ(r.pairs.size(), 3u);
  EXPECT_EQ(r.pairs[1].ref.name(), "block");
  EXPECT_EQ(r.pairs[1].ref.occurrence, 0u);
  EXPECT_EQ(r.pairs[2].ref.occurrence, 1u);
  EXPECT_EQ(r.pairs[2].cand.occurrence, 1u);
  ASSERT_EQ(r.only_in_reference.size(), 2u);
  EXPECT_EQ(r.only_in_reference[0].name(), "block");
  EXPECT_EQ(r.only_in_reference[0].occurrence, 2u);
  EXPECT_EQ(r.only_in_reference[1].name(), "ref_only");
  ASSERT_EQ(r.only_in_candidate.size(), 1u);
  EXPECT_EQ(r.only_in_candidate[0].name(), "cand_only");
  // Identical values, but unpaired tensors make the verdict "diverged" unless allowed.
  EXPECT_EQ(r.count(PairStatus::pass), 3u);
  EXPECT_EQ(r.verdict, Verdict::diverged);
  EXPECT_FALSE(r.first_divergence.has_value());
  EXPECT_NE(r.summary.find("2 tensor(s) only in the reference"), std::string::npos) << r.summary;
  CompareOptions o;
  o.allow_unpaired = true;
  EXPECT_EQ(run_compare(a, b, o).verdict, Verdict::pass);
}

TEST(Align, RolesAreDistinctIdentities) {
  ScratchDir d;
  auto x = noise(4, 2), y = noise(4, 3);
  Entry in{"mod", x};
  in.role = Role::input;
  Entry out{"mod", y};
  auto a = write_dump(d.file("a.tdump"), {in, out});
  auto b = write_dump(d.file("b.tdump"), {in, out});
  Report r = run_compare(a, b);
  ASSERT_EQ(r.pairs.size(), 2u);
  EXPECT_EQ(r.pairs[0].ref.role, Role::input);
  EXPECT_EQ(r.pairs[1].ref.role, Role::output);
  EXPECT_EQ(r.verdict, Verdict::pass);
}

TEST(Align, RenameRulesBothSides) {
  ScratchDir d;
  auto v = noise(6, 4);
  auto a = write_dump(d.file("a.tdump"), {{"model.encoder.layer.0", v}, {"model.head", v}});
  auto b = write_dump(d.file("b.tdump"), {{"/encoder/layer.0/output_0", v}, {"Gemm_42", v}});
  CompareOptions o;
  o.names.reference.push_back(*RenameRule::parse("^model\\.=>"));
  o.names.candidate.push_back(*RenameRule::parse("^/(.*)/output_0$=>$1"));
  o.names.candidate.push_back(*RenameRule::parse("/=>."));
  o.names.exact.emplace_back("model.head", "Gemm_42");
  Report r = run_compare(a, b, o);
  ASSERT_EQ(r.pairs.size(), 2u) << r.summary;
  EXPECT_TRUE(r.only_in_reference.empty());
  EXPECT_TRUE(r.only_in_candidate.empty());
  EXPECT_EQ(r.pairs[0].cand.name(), "/encoder/layer.0/output_0");
  EXPECT_EQ(r.pairs[1].cand.name(), "Gemm_42");
  EXPECT_EQ(r.pairs[0].notes().front(), "renamed: candidate '/encoder/layer.0/output_0'");
  EXPECT_EQ(r.verdict, Verdict::pass);
}

TEST(Align, InvalidRenameRegexIsAnError) {
  ScratchDir d;
  auto a = write_dump(d.file("a.tdump"), {{"x", {1.0}}});
  CompareOptions o;
  o.names.reference.push_back(RenameRule{"(unclosed", "x"});
  auto r = compare_files(a, a, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::invalid_argument);
}

TEST(Align, PermutedAxesNchwVsNhwc) {
  ScratchDir d;
  const uint64_t N = 2, C = 3, H = 4, W = 5;
  std::vector<double> nchw(N * C * H * W), nhwc(N * C * H * W);
  for (uint64_t n = 0; n < N; ++n)
    for (uint64_t c = 0; c < C; ++c)
      for (uint64_t h = 0; h < H; ++h)
        for (uint64_t w = 0; w < W; ++w) {
          double v = static_cast<double>(1000 * n + 100 * c + 10 * h + w) + 0.5;
          nchw[((n * C + c) * H + h) * W + w] = v;
          nhwc[((n * H + h) * W + w) * C + c] = v;
        }
  Entry a{"conv", nchw, {N, C, H, W}};
  a.axes = {"N", "C", "H", "W"};
  Entry b{"conv", nhwc, {N, H, W, C}};
  b.axes = {"N", "H", "W", "C"};
  auto fa = write_dump(d.file("a.tdump"), {a});
  auto fb = write_dump(d.file("b.tdump"), {b});
  Report r = run_compare(fa, fb);
  ASSERT_EQ(r.pairs.size(), 1u);
  const PairResult& p = r.pairs[0];
  EXPECT_EQ(p.status, PairStatus::pass) << (p.reasons().empty() ? "" : p.reasons()[0].message);
  EXPECT_EQ(p.permutation(), (std::vector<uint32_t>{0, 3, 1, 2}));
  EXPECT_EQ(p.metrics.max_abs_diff, 0.0);
  EXPECT_EQ(p.notes().front(), "axes permuted: reference (N,C,H,W) vs candidate (N,H,W,C)");

  // The same bytes without the permutation would be nonsense: a candidate whose axes claim NCHW
  // but whose data is NHWC has the same shape only by accident; here shapes differ, so it is
  // incomparable without axis names.
  Entry b2 = b;
  b2.axes.clear();
  auto fb2 = write_dump(d.file("b2.tdump"), {b2});
  Report r2 = run_compare(fa, fb2);
  ASSERT_EQ(r2.pairs.size(), 1u);
  EXPECT_EQ(r2.pairs[0].status, PairStatus::incomparable);
  ASSERT_FALSE(r2.pairs[0].reasons().empty());
  EXPECT_EQ(r2.pairs[0].reasons()[0].code(), "reshape_needed");
  EXPECT_NE(r2.pairs[0].reasons()[0].message.find("permutation of each other"), std::string::npos);
  EXPECT_EQ(r2.verdict, Verdict::diverged);
  ASSERT_EQ(r2.incomparable.size(), 1u);
}

TEST(Align, AxisSizeMismatchIsIncomparable) {
  ScratchDir d;
  Entry a{"t", noise(6, 1), {2, 3}};
  a.axes = {"x", "y"};
  Entry b{"t", noise(6, 1), {2, 3}};
  b.axes = {"y", "x"};  // y would need size 3 in the candidate
  Report r = run_compare(write_dump(d.file("a.tdump"), {a}), write_dump(d.file("b.tdump"), {b}));
  ASSERT_EQ(r.pairs.size(), 1u);
  EXPECT_EQ(r.pairs[0].status, PairStatus::incomparable);
  EXPECT_EQ(r.pairs[0].reasons()[0].code(), "axes");
  EXPECT_EQ(r.pairs[0].reasons()[0].message, "axis 'x' has size 2 in the reference but 3 in the candidate");
}

TEST(Align, ReshapeOnlyWhenAsked) {
  ScratchDir d;
  auto v = noise(12, 5);
  auto fa = write_dump(d.file("a.tdump"), {{"t", v, {3, 4}}});
  auto fb = write_dump(d.file("b.tdump"), {{"t", v, {2, 6}}});
  Report r = run_compare(fa, fb);
  EXPECT_EQ(r.pairs[0].status, PairStatus::incomparable);
  EXPECT_EQ(r.pairs[0].reasons()[0].code(), "reshape_needed");
  EXPECT_EQ(r.verdict, Verdict::diverged);
  CompareOptions o;
  o.allow_incomparable = true;
  // Allowed, the only pair is still not compared: nothing was compared, which is not a pass.
  EXPECT_EQ(run_compare(fa, fb, o).verdict, Verdict::nothing_compared);
  o = {};
  o.reshape = true;
  Report r2 = run_compare(fa, fb, o);
  EXPECT_EQ(r2.pairs[0].status, PairStatus::pass);
  EXPECT_EQ(r2.pairs[0].notes().back(), "reshaped: reference [3,4] vs candidate [2,6]");
  EXPECT_EQ(r2.verdict, Verdict::pass);
}

TEST(Align, SizeOneAxesNeedNoReshape) {
  ScratchDir d;
  auto fa = write_dump(d.file("a.tdump"), {{"s", {2.5}, {}}, {"v", {1, 2, 3}, {1, 3}}});
  auto fb = write_dump(d.file("b.tdump"), {{"s", {2.5}, {1}}, {"v", {1, 2, 3}, {3}}});
  Report r = run_compare(fa, fb);
  ASSERT_EQ(r.pairs.size(), 2u);
  EXPECT_EQ(r.pairs[0].status, PairStatus::pass);
  EXPECT_EQ(r.pairs[1].status, PairStatus::pass);
  EXPECT_EQ(r.verdict, Verdict::pass);
}

TEST(Align, ElementCountMismatchIsIncomparable) {
  ScratchDir d;
  auto fa = write_dump(d.file("a.tdump"), {{"t", noise(6, 1), {2, 3}}});
  auto fb = write_dump(d.file("b.tdump"), {{"t", noise(12, 1), {3, 4}}});
  CompareOptions o;
  o.reshape = true;  // cannot help
  Report r = run_compare(fa, fb, o);
  EXPECT_EQ(r.pairs[0].status, PairStatus::incomparable);
  EXPECT_EQ(r.pairs[0].reasons()[0].code(), "shape");
  EXPECT_EQ(r.pairs[0].reasons()[0].message, "shape [2,3] vs [3,4]: 6 vs 12 elements");
  EXPECT_FALSE(r.pairs[0].compared);
}

TEST(Align, PositionalPairing) {
  ScratchDir d;
  auto x = noise(5, 7), y = noise(5, 8);
  auto fa = write_dump(d.file("a.tdump"), {{"conv1", x}, {"relu1", y}, {"extra", y}});
  auto fb = write_dump(d.file("b.tdump"), {{"node_0", x}, {"node_1", y}});
  Report by_name = run_compare(fa, fb);
  EXPECT_TRUE(by_name.pairs.empty());
  EXPECT_EQ(by_name.only_in_reference.size(), 3u);
  CompareOptions o;
  o.pairing = Pairing::positional;
  Report r = run_compare(fa, fb, o);
  ASSERT_EQ(r.pairs.size(), 2u);
  EXPECT_EQ(r.pairs[0].ref.name(), "conv1");
  EXPECT_EQ(r.pairs[0].cand.name(), "node_0");
  EXPECT_EQ(r.pairs[1].cand.name(), "node_1");
  EXPECT_EQ(r.count(PairStatus::pass), 2u);
  ASSERT_EQ(r.only_in_reference.size(), 1u);
  EXPECT_EQ(r.only_in_reference[0].name(), "extra");
}

TEST(Align, FilterRestrictsBothSides) {
  ScratchDir d;
  auto v = noise(4, 9);
  auto fa = write_dump(d.file("a.tdump"), {{"enc.0", v}, {"enc.1", v}, {"dec.0", v}});
  auto fb = write_dump(d.file("b.tdump"), {{"enc.0", v}, {"enc.1", v}, {"dec.9", v}});
  CompareOptions o;
  o.filter = "enc.*";
  Report r = run_compare(fa, fb, o);
  EXPECT_EQ(r.pairs.size(), 2u);
  EXPECT_TRUE(r.only_in_reference.empty());
  EXPECT_TRUE(r.only_in_candidate.empty());
  EXPECT_EQ(r.verdict, Verdict::pass);
  o.filter = "rank=banana";
  auto bad = compare_files(fa, fb, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Errc::filter_syntax);
}

TEST(Align, MixedDtypesDecodeToFloat64) {
  ScratchDir d;
  std::vector<double> v = {0.5, -1.25, 3.0, 100.0};
  Entry a{"t", v};
  a.dtype = DType::f64;
  Entry b{"t", v};
  b.dtype = DType::f16;  // every value is exact in f16
  Entry ia{"ids", {1, 2, 3}};
  ia.dtype = DType::i64;
  Entry ib{"ids", {1, 2, 3}};
  ib.dtype = DType::i32;
  Report r = run_compare(write_dump(d.file("a.tdump"), {a, ia}), write_dump(d.file("b.tdump"), {b, ib}));
  ASSERT_EQ(r.pairs.size(), 2u);
  EXPECT_EQ(r.pairs[0].status, PairStatus::pass);
  EXPECT_EQ(r.pairs[0].metrics.max_abs_diff, 0.0);
  EXPECT_EQ(r.pairs[0].criteria_source(), "default (f16)");
  EXPECT_EQ(r.pairs[1].status, PairStatus::pass);
  EXPECT_EQ(r.pairs[1].criteria().to_string(), "allclose(atol=0, rtol=0)");
}

}  // namespace
