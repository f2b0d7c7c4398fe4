// Layout diagnosis (src/compare/layout.cpp, docs/axes.md): each hypothesis is planted in a
// candidate built here by index arithmetic, and compare must name it, with the split, the axis
// and a cosine of 1; an unrelated candidate must get "none".
#include <nlohmann/json.hpp>

#include "compare/internal.hpp"
#include "compare_test_util.hpp"

namespace {

using namespace ds_test;
using driftscope::compare_detail::diagnose_layout;
using driftscope::compare_detail::LayoutInput;

// out[perm-ordered coords] = in[coords]: the reference permuted (numpy transpose(perm)).
std::vector<double> transpose(const std::vector<double>& in, const std::vector<uint64_t>& shape,
                              const std::vector<uint32_t>& perm) {
  std::vector<uint64_t> pshape;
  for (uint32_t a : perm) pshape.push_back(shape[a]);
  std::vector<double> out(in.size());
  for (uint64_t i = 0; i < in.size(); ++i) {
    auto c = driftscope::detail::unravel(i, shape);
    uint64_t j = 0;
    for (size_t k = 0; k < perm.size(); ++k) j = j * pshape[k] + c[perm[k]];
    out[j] = in[i];
  }
  return out;
}

// Blocks a and b of size `m` along the last axis exchanged.
std::vector<double> swap_blocks(std::vector<double> v, uint64_t last, uint64_t m, uint64_t a, uint64_t b) {
  for (uint64_t row = 0; row < v.size() / last; ++row)
    for (uint64_t j = 0; j < m; ++j) std::swap(v[row * last + a * m + j], v[row * last + b * m + j]);
  return v;
}

const PairResult& only_pair(const Report& r) {
  EXPECT_EQ(r.pairs.size(), 1u);
  return r.pairs.front();
}

TEST(Layout, HeadsExchangedInsideTheHiddenAxis) {
  ScratchDir dir;
  const std::vector<uint64_t> shape{2, 5, 48};  // 12 heads of 4
  auto ref = noise(2 * 5 * 48, 1);
  auto cand = swap_blocks(ref, 48, 4, 0, 1);
  auto a = write_dump(dir.file("a.tdump"), {{"attn.q", ref, shape}});
  auto b = write_dump(dir.file("b.tdump"), {{"attn.q", cand, shape}});
  Report r = run_compare(a, b);
  ASSERT_EQ(r.verdict, Verdict::diverged);
  const PairResult& p = only_pair(r);
  ASSERT_TRUE(p.layout() != nullptr);
  EXPECT_EQ(p.layout()->hypothesis, "block_permutation");
  EXPECT_EQ(p.layout()->axis, 2);
  EXPECT_EQ(p.layout()->blocks, 12u);
  EXPECT_EQ(p.layout()->block_size, 4u);
  std::vector<uint64_t> order{1, 0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  EXPECT_EQ(p.layout()->block_order, order);
  EXPECT_DOUBLE_EQ(p.layout()->cosine, 1.0);
  EXPECT_EQ(p.layout()->description, "candidate = reference with blocks 0 and 1 exchanged along axis 2 (12x4 split)");
  EXPECT_GT(p.layout()->hypotheses_tested, 10u);
  EXPECT_EQ(p.layout()->sample_elements, 480u);
  // The text report states the hypothesis, the cosine and the cost.
  std::string text = report_to_text(r);
  EXPECT_NE(text.find("layout     candidate = reference with blocks 0 and 1 exchanged along axis 2 (12x4 split), "
                      "cosine 1.0000 ("), std::string::npos) << text;
  auto j = nlohmann::json::parse(report_to_json(r));
  EXPECT_EQ(j["tensors"][0]["layout"]["hypothesis"], "block_permutation");
  EXPECT_EQ(j["tensors"][0]["layout"]["blocks"], 12);
  EXPECT_NE(report_to_markdown(r).find("- layout: candidate = reference with blocks 0 and 1"), std::string::npos);
}

TEST(Layout, DeclaredHeadCountNamesHeadsAndWinsTheSplit) {
  ScratchDir dir;
  const std::vector<uint64_t> shape{1, 3, 24};  // 3 heads of 8; heads 1 and 2 exchanged
  auto ref = noise(72, 2);
  auto cand = swap_blocks(ref, 24, 8, 1, 2);
  Entry e{"q", ref, shape};
  e.attrs = {{"num_heads", "3"}};
  Entry f{"q", cand, shape};
  auto a = write_dump(dir.file("a.tdump"), {e});
  auto b = write_dump(dir.file("b.tdump"), {f});
  const Report r = run_compare(a, b);
  const PairResult& p = only_pair(r);
  ASSERT_TRUE(p.layout() != nullptr);
  EXPECT_EQ(p.layout()->description, "candidate = reference with heads 1 and 2 exchanged along axis 2 (3x8 split; head count 3 "
                                    "from num_heads)");
}

TEST(Layout, AttentionTransposedBhsdVersusBshd) {
  ScratchDir dir;
  const std::vector<uint64_t> shape{1, 4, 6, 8};  // [b,h,s,d]
  auto ref = noise(192, 3);
  auto cand = transpose(ref, shape, {0, 2, 1, 3});
  Entry e{"attn.context", ref, shape};
  e.axes = {"batch", "heads", "seq", "head_dim"};
  // The candidate kept [b,s,h,d]: shapes differ, no axis names to align them.
  auto a = write_dump(dir.file("a.tdump"), {e});
  auto b = write_dump(dir.file("b.tdump"), {{"attn.context", cand, {1, 6, 4, 8}}});
  const Report r = run_compare(a, b);
  const PairResult& p = only_pair(r);
  EXPECT_EQ(p.status, PairStatus::incomparable);
  ASSERT_TRUE(p.layout() != nullptr);
  EXPECT_EQ(p.layout()->hypothesis, "permutation");
  EXPECT_EQ(p.layout()->permutation, (std::vector<uint32_t>{0, 2, 1, 3}));
  EXPECT_EQ(p.layout()->description,
            "candidate = reference with axis 1 (heads) and axis 2 (seq) transposed "
            "([batch,heads,seq,head_dim] <-> [batch,seq,heads,head_dim])");
  EXPECT_DOUBLE_EQ(p.layout()->cosine, 1.0);

  // The same data under the reference's shape: a view where a transpose was meant.
  auto c = write_dump(dir.file("c.tdump"), {{"attn.context", cand, shape}});
  const Report rc = run_compare(a, c);
  const PairResult& q = only_pair(rc);
  EXPECT_EQ(q.status, PairStatus::fail);
  ASSERT_TRUE(q.layout() != nullptr);
  EXPECT_EQ(q.layout()->hypothesis, "view_of_permutation");
  EXPECT_NE(q.layout()->description.find("a reshape or view where a transpose was meant"), std::string::npos);
}

TEST(Layout, NchwReadAsNhwc) {
  ScratchDir dir;
  const std::vector<uint64_t> shape{1, 3, 5, 7};
  auto ref = noise(105, 4);
  auto a = write_dump(dir.file("a.tdump"), {{"conv", ref, shape}});
  auto b = write_dump(dir.file("b.tdump"), {{"conv", transpose(ref, shape, {0, 2, 3, 1}), {1, 5, 7, 3}}});
  const Report r = run_compare(a, b);
  const PairResult& p = only_pair(r);
  ASSERT_TRUE(p.layout() != nullptr);
  EXPECT_EQ(p.layout()->hypothesis, "permutation");
  EXPECT_EQ(p.layout()->description, "candidate = reference with NCHW read as NHWC: channels moved last");
}

TEST(Layout, ReversedAndShiftedAxes) {
  const std::vector<uint64_t> shape{6, 10};
  auto ref = noise(60, 5);
  std::vector<double> rev(60), rolled(60);
  for (uint64_t i = 0; i < 6; ++i)
    for (uint64_t j = 0; j < 10; ++j) {
      rev[i * 10 + (9 - j)] = ref[i * 10 + j];
      rolled[((i + 2) % 6) * 10 + j] = ref[i * 10 + j];
    }
  LayoutInput in;
  in.ref = ref;
  in.cand = rev;
  in.ref_shape = in.cand_shape = shape;
  auto d = diagnose_layout(in);
  EXPECT_EQ(d.hypothesis, "reversed");
  EXPECT_EQ(d.axis, 1);
  in.cand = rolled;
  d = diagnose_layout(in);
  EXPECT_EQ(d.hypothesis, "shifted");
  EXPECT_EQ(d.axis, 0);
  EXPECT_EQ(d.shift, 2);
  EXPECT_EQ(d.description, "candidate = reference shifted by 2 along axis 0 (cyclically)");
}

TEST(Layout, NothingFitsAnUnrelatedCandidateAndTheCostIsBounded) {
  const std::vector<uint64_t> shape{64, 128};
  auto ref = noise(64 * 128, 6), other = noise(64 * 128, 7);
  LayoutInput in;
  in.ref = ref;
  in.cand = other;
  in.ref_shape = in.cand_shape = shape;
  auto d = diagnose_layout(in);
  EXPECT_EQ(d.hypothesis, "none");
  EXPECT_EQ(d.sample_elements, 4096u);  // sampled, not every element
  EXPECT_EQ(d.elements_confirmed, 64u * 128u);  // only the baseline pass: no hypothesis got that far
  EXPECT_NE(d.to_string().find("no layout hypothesis fits"), std::string::npos);
}

TEST(Layout, APassingPairIsNotDiagnosedAndTheLimitIsHonoured) {
  ScratchDir dir;
  auto ref = noise(48, 8);
  auto a = write_dump(dir.file("a.tdump"), {{"x", ref, {4, 12}}});
  auto b = write_dump(dir.file("b.tdump"), {{"x", ref, {4, 12}}});
  EXPECT_FALSE(only_pair(run_compare(a, b)).layout() != nullptr);
  auto c = write_dump(dir.file("c.tdump"), {{"x", swap_blocks(ref, 12, 3, 0, 1), {4, 12}}});
  CompareOptions o;
  o.max_layout_elements = 10;
  const Report rc = run_compare(a, c, o);
  const PairResult& p = only_pair(rc);
  EXPECT_FALSE(p.layout() != nullptr);
  ASSERT_FALSE(p.notes().empty());
  EXPECT_EQ(p.notes().back(), "layout not diagnosed: 48 elements exceed the limit of 10");
  o.max_layout_diagnoses = 0;
  EXPECT_FALSE(only_pair(run_compare(a, c, o)).layout() != nullptr);
}

}  // namespace
