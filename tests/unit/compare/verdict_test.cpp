// The verdict taxonomy and the judgement of one pair: health checks (NaN positions, Inf signs,
// silent zeros) before the tolerance criteria, command-line criteria replacing the defaults,
// policy rules, argmax agreement, light-mode summaries, the float64 ordering rule, warnings.
#include <nlohmann/json.hpp>

#include "compare_test_util.hpp"

namespace {

using namespace ds_test;

Report one_pair(const ScratchDir& d, const Entry& a, const Entry& b, const CompareOptions& o = {},
                const KeyValues& meta_b = {}) {
  return run_compare(write_dump(d.file("a.tdump"), {a}), write_dump(d.file("b.tdump"), {b}, meta_b), o);
}

TEST(Verdict, TwoAllZeroTensorsAreEqual) {
  ScratchDir d;
  Report r = one_pair(d, {"z", std::vector<double>(16, 0.0)}, {"z", std::vector<double>(16, 0.0)});
  EXPECT_EQ(r.pairs[0].status, PairStatus::pass);
  EXPECT_EQ(r.pairs[0].metrics.cosine, 1.0);
  EXPECT_EQ(r.verdict, Verdict::pass);
}

TEST(Verdict, AllZeroCandidateIsSilentFailureNeverCosineOne) {
  ScratchDir d;
  Report r = one_pair(d, {"t", noise(16, 1)}, {"t", std::vector<double>(16, 0.0)});
  const PairResult& p = r.pairs[0];
  EXPECT_EQ(p.status, PairStatus::silent_failure);
  EXPECT_TRUE(has_reason(p, "all_zero"));
  EXPECT_EQ(p.metrics.cosine, 0.0);
  EXPECT_EQ(r.verdict, Verdict::silent_failure);
  ASSERT_TRUE(r.first_silent_zero.has_value());
  EXPECT_EQ(r.summary.rfind("SILENT FAILURE at t (index 0, Op): candidate is all zeros", 0), 0u) << r.summary;
  // Even when the only criterion is a loose cosine, the zero output is still caught.
  CompareOptions o;
  o.policy.global = Criteria{};
  o.policy.global->min_cosine = -1.0;
  EXPECT_EQ(one_pair(d, {"t", noise(16, 1)}, {"t", std::vector<double>(16, 0.0)}, o).verdict,
            Verdict::silent_failure);
}

TEST(Verdict, VanishedAndConstantCandidates) {
  ScratchDir d;
  auto v = noise(32, 2);
  auto tiny = v;
  for (auto& x : tiny) x *= 1e-9;
  Report r = one_pair(d, {"t", v}, {"t", tiny});
  EXPECT_TRUE(has_reason(r.pairs[0], "norm_vanished"));
  EXPECT_EQ(r.verdict, Verdict::silent_failure);
  EXPECT_TRUE(r.first_silent_zero.has_value());
  Report c = one_pair(d, {"t", v}, {"t", std::vector<double>(32, 0.25)});
  EXPECT_TRUE(has_reason(c.pairs[0], "constant"));
  EXPECT_EQ(c.pairs[0].status, PairStatus::silent_failure);
  EXPECT_FALSE(c.first_silent_zero.has_value());  // constant, not zero
  // A constant reference with a constant candidate is not a silent failure.
  Report cc = one_pair(d, {"t", std::vector<double>(32, 0.25)}, {"t", std::vector<double>(32, 0.25)});
  EXPECT_EQ(cc.verdict, Verdict::pass);
}

TEST(Verdict, NanWhereReferenceIsFiniteIsSilentFailure) {
  ScratchDir d;
  auto v = noise(8, 3);
  auto n = v;
  n[3] = std::nan("");
  Report r = one_pair(d, {"t", v}, {"t", n});
  EXPECT_EQ(r.pairs[0].status, PairStatus::silent_failure);
  EXPECT_EQ(r.pairs[0].reasons()[0].code(), "nonfinite");
  // The judgement stores the code only; the reports word it from the pair.
  EXPECT_EQ(r.pairs[0].reasons()[0].message, "");
  EXPECT_EQ(reason_text(r.pairs[0], r.pairs[0].reasons()[0]),
            "candidate has 1 NaN and 0 Inf where the reference is finite");
  EXPECT_EQ(*r.first_nonfinite, 0u);
  EXPECT_EQ(r.verdict, Verdict::silent_failure);
  auto inf = v;
  inf[0] = HUGE_VAL;
  Report ri = one_pair(d, {"t", v}, {"t", inf});
  EXPECT_EQ(ri.pairs[0].reasons()[0].code(), "nonfinite");
  EXPECT_TRUE(std::isinf(ri.pairs[0].error));
}

TEST(Verdict, NanPolicyOrder) {
  ScratchDir d;
  auto v = noise(8, 4);
  auto n = v;
  n[2] = std::nan("");
  // Same NaN positions on both sides: a mismatch unless --nan-equal.
  Report r = one_pair(d, {"t", n}, {"t", n});
  EXPECT_EQ(r.pairs[0].status, PairStatus::fail);
  EXPECT_EQ(r.pairs[0].reasons()[0].code(), "nan");
  EXPECT_EQ(r.verdict, Verdict::diverged);
  CompareOptions o;
  o.nan_equal = true;
  EXPECT_EQ(one_pair(d, {"t", n}, {"t", n}, o).verdict, Verdict::pass);
  // Different NaN positions: named first, even with --nan-equal; not silent (the reference has NaN).
  auto m = v;
  m[6] = std::nan("");
  Report p = one_pair(d, {"t", n}, {"t", m}, o);
  EXPECT_EQ(p.pairs[0].status, PairStatus::fail);
  EXPECT_EQ(p.pairs[0].reasons()[0].code(), "nan_positions");
  // Inf signs.
  auto pi = v, ni = v;
  pi[1] = HUGE_VAL;
  ni[1] = -HUGE_VAL;
  Report s = one_pair(d, {"t", pi}, {"t", ni});
  EXPECT_EQ(s.pairs[0].reasons()[0].code(), "inf_signs");
  EXPECT_EQ(one_pair(d, {"t", pi}, {"t", pi}).verdict, Verdict::pass);
}

TEST(Verdict, CommandLineCriteriaReplaceDefaults) {
  ScratchDir d;
  auto v = noise(256, 5);
  auto w = v;
  for (size_t i = 0; i < w.size(); ++i) w[i] += 1e-3 * noise(256, 6)[i];  // ~55 dB
  Report def = one_pair(d, {"t", v}, {"t", w});
  EXPECT_EQ(def.pairs[0].status, PairStatus::fail);  // float32 default: 80 dB
  EXPECT_EQ(def.pairs[0].reasons()[0].code(), "sqnr");
  CompareOptions o;
  o.policy.global = Criteria{};
  o.policy.global->min_cosine = 0.999;
  Report cos = one_pair(d, {"t", v}, {"t", w}, o);
  EXPECT_EQ(cos.pairs[0].status, PairStatus::pass);  // cosine alone judges
  EXPECT_EQ(cos.pairs[0].criteria_source(), "command line");
  o.policy.global->atol = 1e-4;
  Report ac = one_pair(d, {"t", v}, {"t", w}, o);
  EXPECT_EQ(ac.pairs[0].status, PairStatus::fail);
  EXPECT_EQ(ac.pairs[0].reasons()[0].code(), "allclose");
  EXPECT_GT(ac.pairs[0].metrics.mismatch_count, 0u);
  EXPECT_GE(ac.pairs[0].metrics.first_mismatch(), 0);
  o.policy.global->max_mismatch_fraction = 1.0;
  EXPECT_EQ(one_pair(d, {"t", v}, {"t", w}, o).pairs[0].status, PairStatus::pass);
}

TEST(Verdict, UlpCriterion) {
  ScratchDir d;
  std::vector<double> v = {1.0, 2.0, 3.0};
  std::vector<double> w = {1.0, std::nextafter(2.0f, 3.0f), 3.0};
  CompareOptions o;
  o.policy.global = Criteria{};
  o.policy.global->max_ulp = 0;
  Report r = one_pair(d, {"t", v}, {"t", w}, o);
  EXPECT_EQ(r.pairs[0].metrics.max_ulp, 1);
  EXPECT_EQ(r.pairs[0].reasons()[0].code(), "ulp");
  o.policy.global->max_ulp = 1;
  EXPECT_EQ(one_pair(d, {"t", v}, {"t", w}, o).verdict, Verdict::pass);
}

TEST(Verdict, ArgmaxJudgesLogits) {
  ScratchDir d;
  // 4 rows of 5 classes; the candidate's argmax differs in one row but values are close.
  std::vector<double> a = {0.1, 0.9, 0.2, 0.3, 0.0, 1, 2, 3, 4, 5, 5, 4, 3, 2, 1, 0, 0, 1, 0, 0};
  auto b = a;
  b[1] = 0.29;  // row 0 argmax moves from 1 to 3
  Entry ea{"lm_head", a, {4, 5}};
  Entry eb{"lm_head", b, {4, 5}};
  CompareOptions o;
  PolicyRule rule;
  rule.match = "lm_head";
  rule.classes = true;
  rule.top_k = 2;
  rule.criteria = Criteria{};
  rule.criteria->min_argmax_agreement = 0.9;
  o.policy.rules.push_back(rule);
  Report r = one_pair(d, ea, eb, o);
  EXPECT_DOUBLE_EQ(r.pairs[0].metrics.argmax_agreement(), 0.75);
  EXPECT_EQ(r.pairs[0].metrics.top_k(), 2u);
  EXPECT_EQ(r.pairs[0].reasons()[0].code(), "argmax");
  o.policy.rules[0].criteria->min_argmax_agreement = 0.75;
  EXPECT_EQ(one_pair(d, ea, eb, o).verdict, Verdict::pass);
  // Without a rule, a name that says "logits" still gets class metrics (reported, not judged).
  Report auto_r = one_pair(d, {"model.logits", a, {4, 5}}, {"model.logits", a, {4, 5}});
  EXPECT_DOUBLE_EQ(auto_r.pairs[0].metrics.argmax_agreement(), 1.0);
}

TEST(Verdict, SkipRule) {
  ScratchDir d;
  CompareOptions o;
  PolicyRule rule;
  rule.match = "*.dropout";
  rule.skip = true;
  o.policy.rules.push_back(rule);
  Report r = one_pair(d, {"m.dropout", noise(4, 1)}, {"m.dropout", noise(4, 2)}, o);
  EXPECT_EQ(r.pairs[0].status, PairStatus::skipped);
  // Skipping the only pair leaves nothing compared: not a pass (issue 7, bug 18).
  EXPECT_EQ(r.verdict, Verdict::nothing_compared);
  EXPECT_EQ(r.summary.rfind("NOTHING COMPARED: no tensor pair was compared: 1 skipped by the policy", 0), 0u)
      << r.summary;
  Report two = run_compare(write_dump(d.file("a2.tdump"), {{"m.dropout", noise(4, 1)}, {"m.out", noise(4, 3)}}),
                           write_dump(d.file("b2.tdump"), {{"m.dropout", noise(4, 2)}, {"m.out", noise(4, 3)}}), o);
  EXPECT_EQ(two.verdict, Verdict::pass);
}

// Nothing compared is never a pass: dumps without tensors (crashed recordings), a filter that
// matches nothing, tensors that only pair with nothing (allowed). Exit status 2 everywhere.
TEST(Verdict, NothingComparedIsNotAPass) {
  ScratchDir d;
  std::string e1 = write_dump(d.file("e1.tdump"), {}), e2 = write_dump(d.file("e2.tdump"), {});
  Report empty = run_compare(e1, e2);
  EXPECT_EQ(empty.verdict, Verdict::nothing_compared);
  EXPECT_EQ(empty.summary.rfind("NOTHING COMPARED: neither dump holds a tensor (reference: 0 records", 0), 0u)
      << empty.summary;
  EXPECT_EQ(verdict_exit_code(empty.verdict), 2);
  EXPECT_EQ(verdict_name(empty.verdict), "nothing_compared");
  auto j = nlohmann::json::parse(report_to_json(empty));
  EXPECT_EQ(j["verdict"], "nothing_compared");
  EXPECT_EQ(j["exit_code"], 2);
  EXPECT_EQ(report_to_text(empty, {}).rfind("NOTHING COMPARED", 0), 0u);
  EXPECT_NE(report_to_markdown(empty).find("driftscope compare: nothing_compared"), std::string::npos);

  std::string a = write_dump(d.file("a.tdump"), {{"x", noise(4, 1)}, {"y", noise(4, 2)}});
  CompareOptions f;
  f.filter = "no.such.tensor";
  Report filtered = run_compare(a, a, f);
  EXPECT_EQ(filtered.verdict, Verdict::nothing_compared);
  EXPECT_NE(filtered.summary.find("passed --filter"), std::string::npos) << filtered.summary;

  // Unpaired tensors fail the comparison unless allowed; allowed, nothing is left to compare.
  EXPECT_EQ(run_compare(a, e1).verdict, Verdict::diverged);
  CompareOptions allow;
  allow.allow_unpaired = true;
  Report one_sided = run_compare(a, e1, allow);
  EXPECT_EQ(one_sided.verdict, Verdict::nothing_compared);
  EXPECT_NE(one_sided.summary.find("the candidate holds no tensor: 2 only in the reference (allowed)"),
            std::string::npos) << one_sided.summary;
  EXPECT_EQ(run_compare(a, a).verdict, Verdict::pass);
}

TEST(Verdict, RunPrecisionMetadataNarrowsTheDefault) {
  ScratchDir d;
  auto v = noise(256, 7);
  std::vector<double> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = f16_to_double(double_to_f16(v[i]));
  // Stored as f32 by a float16 run: judged by the float16 default.
  Report r = one_pair(d, {"t", v}, {"t", h}, {}, {{"precision", "float16"}});
  EXPECT_EQ(r.pairs[0].status, PairStatus::pass);
  EXPECT_EQ(r.pairs[0].criteria_source(), "default (f16)");
  Report s = one_pair(d, {"t", v}, {"t", h});
  EXPECT_EQ(s.pairs[0].status, PairStatus::fail);
}

TEST(Verdict, QuantizedCandidateGetsQuantizedDefault) {
  ScratchDir d;
  auto v = noise(64, 8);
  std::vector<double> q(v.size());
  for (size_t i = 0; i < v.size(); ++i) q[i] = std::round(v[i] * 100.0);  // int8 codes, scale 0.01
  Entry b{"t", q};
  b.dtype = DType::i8;
  b.encoding.kind = EncodingKind::affine_tensor;
  b.encoding.scales = {0.01};
  b.encoding.zero_points = {0};
  Report r = one_pair(d, {"t", v}, b);
  EXPECT_EQ(r.pairs[0].criteria_source(), "default (quantized)");
  EXPECT_EQ(r.pairs[0].status, PairStatus::pass) << r.pairs[0].metrics.sqnr_db;
  EXPECT_TRUE(r.pairs[0].cand.quantized);
}

TEST(Verdict, LightModeSummariesAreEstimated) {
  ScratchDir d;
  auto v = noise(4096, 9);
  auto w = v;
  for (auto& x : w) x *= 2.0;  // a scale bug: relative L2 error 1
  Entry a{"t", v};
  a.summary = true;
  Entry b{"t", w};
  b.summary = true;
  Report r = one_pair(d, a, b);
  const PairResult& p = r.pairs[0];
  EXPECT_TRUE(p.estimated);
  EXPECT_TRUE(p.compared);
  EXPECT_EQ(p.status, PairStatus::fail);
  EXPECT_NEAR(p.metrics.rel_l2, 1.0, 0.2);
  EXPECT_FALSE(std::isnan(p.metrics.rel_l2_stderr()));
  // Value against summary: the value side is summarised with the summary's seed and dim.
  Entry bv{"t", v};
  Report same = one_pair(d, a, bv);
  EXPECT_TRUE(same.pairs[0].estimated);
  EXPECT_EQ(same.pairs[0].status, PairStatus::pass);
  EXPECT_NEAR(same.pairs[0].metrics.rel_l2, 0.0, 1e-6);
  // Zeroed candidate is still caught from the statistics alone.
  Entry z{"t", std::vector<double>(4096, 0.0)};
  z.summary = true;
  EXPECT_EQ(one_pair(d, a, z).verdict, Verdict::silent_failure);
}

TEST(Verdict, Reference64Rule) {
  ScratchDir d;
  // float64 truth, a float32 reference (rounded), and two candidates: one about as good as
  // float16 rounding (passes with k=3), one with 50x more error (fails).
  auto t = noise(1024, 10);
  std::vector<double> f32(t.size()), good(t.size()), bad(t.size());
  auto e = noise(1024, 11);
  for (size_t i = 0; i < t.size(); ++i) {
    f32[i] = static_cast<double>(static_cast<float>(t[i]));
    good[i] = f16_to_double(double_to_f16(t[i]));
    bad[i] = t[i] + 50 * std::ldexp(1.0, -11) * e[i];
  }
  Entry r64{"t", t};
  r64.dtype = DType::f64;
  auto p64 = write_dump(d.file("r64.tdump"), {r64});
  auto pref = write_dump(d.file("ref.tdump"), {{"t", f32}});
  Entry g{"t", good};
  g.dtype = DType::f16;
  Entry b{"t", bad};
  b.dtype = DType::f16;
  auto pg = write_dump(d.file("good.tdump"), {g});
  auto pb = write_dump(d.file("bad.tdump"), {b});
  CompareOptions o;
  o.reference64 = p64;
  Report rg = run_compare(pref, pg, o);
  const PairResult& pgood = rg.pairs[0];
  EXPECT_TRUE(pgood.r64);
  EXPECT_EQ(pgood.r64_k(), 3.0);
  EXPECT_EQ(pgood.criteria_source(), "reference64 rule");
  EXPECT_LE(pgood.r64_err_cand(), pgood.r64_limit());
  EXPECT_EQ(rg.verdict, Verdict::pass);
  EXPECT_EQ(rg.reference64.path, p64);
  Report rb = run_compare(pref, pb, o);
  EXPECT_EQ(rb.pairs[0].status, PairStatus::fail);
  EXPECT_EQ(rb.pairs[0].reasons()[0].code(), "reference64");
  // k is overridable per dtype.
  o.policy.r64_k.emplace_back(DType::f16, 1e7);
  EXPECT_EQ(run_compare(pref, pb, o).verdict, Verdict::pass);
  // A missing float64 file is an error of the request.
  o.reference64 = d.file("missing.tdump");
  auto missing = compare_files(pref, pg, o);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("reference64"), std::string::npos);
}

TEST(Verdict, ObserverEffectWarning) {
  ScratchDir d;
  auto v = noise(4, 12);
  auto a = write_dump(d.file("a.tdump"), {{"t", v}});
  auto b = write_dump(d.file("b.tdump"), {{"t", v}}, {{"observer_effect", "outputs differ: max abs diff 0.03"}});
  Report r = run_compare(a, b);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("observer effect"), std::string::npos);
  EXPECT_NE(r.warnings[0].find("outputs differ: max abs diff 0.03"), std::string::npos);
  auto c = write_dump(d.file("c.tdump"), {{"t", v}}, {{"observer_effect", "none"}});
  EXPECT_TRUE(run_compare(a, c).warnings.empty());
}

TEST(Verdict, UnfinishedRunIsWarned) {
  ScratchDir d;
  auto v = noise(4, 13);
  auto a = write_dump(d.file("a.tdump"), {{"x", v}, {"y", v}});
  // A run killed after its first record: no INDEX/END.
  {
    WriterOptions wo;
    auto w = Writer::create(d.file("b.tdump"), wo);
    ASSERT_TRUE(w.ok());
    TensorInfo info;
    info.name = "x";
    info.shape = {4};
    auto bytes = encode(v, DType::f32);
    ASSERT_TRUE((*w)->write(info, bytes).ok());
    ASSERT_TRUE((*w)->flush().ok());
    Reader::open(d.file("b.tdump")).ok();
    // Copy the file as it is now (before close writes INDEX and END).
    std::filesystem::copy_file(d.file("b.tdump"), d.file("b_cut.tdump"));
    ASSERT_TRUE((*w)->close().ok());
  }
  Report r = run_compare(a, d.file("b_cut.tdump"));
  ASSERT_FALSE(r.warnings.empty());
  EXPECT_NE(r.warnings[0].find("candidate: the run did not finish"), std::string::npos) << r.warnings[0];
  EXPECT_EQ(r.only_in_reference.size(), 1u);
  EXPECT_EQ(r.verdict, Verdict::diverged);
}

TEST(Verdict, DamagedPayloadCostsOnePair) {
  ScratchDir d;
  auto v = noise(64, 14);
  auto a = write_dump(d.file("a.tdump"), {{"x", v}, {"y", v}, {"z", v}});
  auto b = write_dump(d.file("b.tdump"), {{"x", v}, {"y", v}, {"z", v}});
  uint64_t at = 0;
  {
    auto r = Reader::open(b);
    ASSERT_TRUE(r.ok());
    at = r->find("y")->payload_offset + 5;
  }
  {
    std::FILE* f = std::fopen(b.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, static_cast<long>(at), SEEK_SET);
    int c = std::fgetc(f);
    std::fseek(f, static_cast<long>(at), SEEK_SET);
    std::fputc(c ^ 0x10, f);
    std::fclose(f);
  }
  Report r = run_compare(a, b);
  ASSERT_EQ(r.pairs.size(), 3u);
  EXPECT_EQ(r.pairs[0].status, PairStatus::pass);
  EXPECT_EQ(r.pairs[1].status, PairStatus::incomparable);
  EXPECT_EQ(r.pairs[1].reasons()[0].code(), "read_error");
  EXPECT_NE(r.pairs[1].reasons()[0].message.find("bad_record_checksum"), std::string::npos)
      << r.pairs[1].reasons()[0].message;
  EXPECT_EQ(r.pairs[2].status, PairStatus::pass);
  EXPECT_EQ(r.verdict, Verdict::diverged);
}

TEST(Verdict, InMemoryReadersAreLeftIntact) {
  // compare() on a caller's buffers must not release their pages (that would zero heap memory);
  // only compare_files, which maps the files itself, does.
  ScratchDir d;
  std::vector<Entry> es;
  for (int i = 0; i < 4; ++i) es.push_back({"t" + std::to_string(i), noise(4096, static_cast<uint64_t>(i))});
  auto a = write_dump(d.file("a.tdump"), es);
  auto slurp = [](const std::string& path) {
    std::vector<std::byte> b(std::filesystem::file_size(path));
    std::FILE* f = std::fopen(path.c_str(), "rb");
    EXPECT_EQ(std::fread(b.data(), 1, b.size(), f), b.size());
    std::fclose(f);
    return b;
  };
  auto bytes = slurp(a);
  const auto copy = bytes;
  auto ra = Reader::from_memory(bytes);
  auto rb = Reader::from_memory(bytes);
  ASSERT_TRUE(ra.ok() && rb.ok());
  for (int round = 0; round < 2; ++round) {
    auto r = compare(*ra, *rb, {});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->verdict, Verdict::pass);
    EXPECT_EQ(r->count(PairStatus::pass), 4u);
  }
  EXPECT_TRUE(bytes == copy);
}

TEST(Verdict, UnreadableInputIsAnError) {
  ScratchDir d;
  auto a = write_dump(d.file("a.tdump"), {{"x", {1.0}}});
  auto r = compare_files(a, d.file("nope.tdump"), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::io_error);
  EXPECT_NE(r.error().message.find("candidate"), std::string::npos);
  CompareOptions o;
  o.amplification_threshold = 0.5;
  EXPECT_EQ(compare_files(a, a, o).error().code, Errc::invalid_argument);
}

}  // namespace
