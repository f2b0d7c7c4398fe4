// A comparison in parts (compare.hpp): for every partition of the work into k parts, measured in
// any order, assemble_report() equals compare() bit for bit (JSON text and every double's bits),
// with failures, NaN, light-mode summaries, incomparable and skipped pairs, details, the float64
// rule and stop_at_first; and a missing, repeated, damaged or foreign part is an error.
#include <bit>

#include "compare_test_util.hpp"

namespace {

using namespace ds_test;

Reader open(const std::string& p) {
  auto r = Reader::open(p);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string());
  return std::move(*r);
}

struct Fixture {
  ScratchDir d;
  std::string ref, cand, r64, other;
  Fixture() {
    std::vector<Entry> a, b;
    std::vector<Entry> f64;
    for (int i = 0; i < 23; ++i) {
      std::string name = "layer." + std::to_string(i);
      auto v = noise(64 + 37 * i, 100 + i);
      auto w = v;
      if (i >= 9) for (auto& x : w) x *= 1.0 + 1e-3 * (i - 8);  // growing error: fails from 9
      if (i == 14) w[3] = std::nan("");                             // a new NaN: silent failure
      Entry ea{name, v}, eb{name, w};
      if (i == 5) eb.values.push_back(0.5);                         // incomparable shape
      if (i == 7) ea.summary = eb.summary = true;                   // light mode, both sides
      if (i == 8) eb.summary = true;                                // light mode, one side
      if (i % 4 == 1) ea.dtype = eb.dtype = DType::f16;
      a.push_back(ea);
      b.push_back(eb);
      Entry e64{name, v};
      e64.dtype = DType::f64;
      if (i != 3) f64.push_back(e64);                               // one without a float64 twin
    }
    a.push_back({"skip.me", noise(10, 1)});
    b.push_back({"skip.me", noise(10, 2)});
    ref = write_dump(d.file("ref.tdump"), a);
    cand = write_dump(d.file("cand.tdump"), b);
    r64 = write_dump(d.file("r64.tdump"), f64);
    b.pop_back();
    other = write_dump(d.file("other.tdump"), b);
  }
};

CompareOptions options(const Fixture& f, bool stop, bool details) {
  CompareOptions o;
  o.details = details;
  o.stop_at_first = stop;
  o.reference64 = f.r64;
  PolicyRule skip;
  skip.match = "skip.*";
  skip.skip = true;
  o.policy.rules.push_back(skip);
  o.threads = 2;
  return o;
}

std::vector<double> doubles(const PairResult& p) {
  const Metrics& m = p.metrics;
  return {m.max_abs_diff, m.mean_abs_diff, m.rmse, m.max_rel_diff, m.cosine, m.sqnr_db, m.nmse, m.rel_l2,
          m.norm_ref, m.norm_cand, m.mismatch_fraction, m.cosine_stderr(), m.rel_l2_stderr(), p.error,
          p.r64_err_ref(), p.r64_err_cand(), p.r64_limit(), p.amplification, p.input_error};
}

void expect_same(const Report& a, const Report& b) {
  ASSERT_EQ(report_to_json(a), report_to_json(b));
  ASSERT_EQ(report_to_text(a, {.all = true}), report_to_text(b, {.all = true}));
  ASSERT_EQ(a.pairs.size(), b.pairs.size());
  for (size_t i = 0; i < a.pairs.size(); ++i) {
    auto x = doubles(a.pairs[i]), y = doubles(b.pairs[i]);
    for (size_t k = 0; k < x.size(); ++k)
      EXPECT_EQ(std::bit_cast<uint64_t>(x[k]), std::bit_cast<uint64_t>(y[k])) << "pair " << i << " value " << k;
    EXPECT_EQ(a.pairs[i].detail() != nullptr, b.pairs[i].detail() != nullptr);
    if (a.pairs[i].detail() && b.pairs[i].detail()) {
      EXPECT_EQ(a.pairs[i].detail()->heat, b.pairs[i].detail()->heat);
      EXPECT_EQ(a.pairs[i].detail()->histogram, b.pairs[i].detail()->histogram);
    }
  }
}

TEST(Partial, PartsAssembleToTheSameReportBitForBit) {
  Fixture f;
  Reader a = open(f.ref), b = open(f.cand);
  for (bool stop : {false, true}) {
    for (bool details : {false, true}) {
      CompareOptions o = options(f, stop, details);
      auto whole = compare(a, b, o);
      ASSERT_TRUE(whole.ok()) << whole.error().to_string();
      EXPECT_EQ(whole->verdict, stop ? Verdict::diverged : Verdict::silent_failure);  // NaN at 14
      EXPECT_EQ(whole->stopped_early, stop);
      EXPECT_EQ(whole->count(PairStatus::incomparable), 1u);
      EXPECT_EQ(whole->count(PairStatus::skipped), 1u);
      auto work = compare_work(a, b, o);
      ASSERT_TRUE(work.ok()) << work.error().to_string();
      ASSERT_EQ(work->size(), whole->pairs.size() - 2);  // not the incomparable and skipped ones
      for (size_t k : {1u, 2u, 3u, 7u}) {
        std::vector<std::vector<size_t>> split(k);
        for (size_t j = 0; j < work->size(); ++j) split[(j * 5 + 3) % k].push_back((*work)[j]);
        std::vector<std::string> parts;
        for (size_t p = k; p-- > 0;) {  // measured and handed over in any order
          auto blob = measure_pairs(a, b, o, split[p]);
          ASSERT_TRUE(blob.ok()) << blob.error().to_string();
          parts.push_back(std::move(*blob));
        }
        auto assembled = assemble_report(a, b, o, parts);
        ASSERT_TRUE(assembled.ok()) << assembled.error().to_string();
        SCOPED_TRACE(testing::Message() << "k=" << k << " stop=" << stop << " details=" << details);
        expect_same(*whole, *assembled);
      }
    }
  }
}

TEST(Partial, IncompleteForeignOrDamagedPartsAreErrorsNeverAPartialReport) {
  Fixture f;
  Reader a = open(f.ref), b = open(f.cand), other = open(f.other);
  CompareOptions o = options(f, false, false);
  auto work = compare_work(a, b, o);
  ASSERT_TRUE(work.ok());
  std::vector<size_t> first(work->begin(), work->begin() + 5), rest(work->begin() + 5, work->end());
  auto p1 = measure_pairs(a, b, o, first), p2 = measure_pairs(a, b, o, rest);
  ASSERT_TRUE(p1.ok() && p2.ok());

  auto expect_error = [&](std::vector<std::string> parts, const std::string& what) {
    auto r = assemble_report(a, b, o, parts);
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_EQ(r.error().code, Errc::invalid_argument);
    EXPECT_NE(r.error().message.find(what), std::string::npos) << r.error().message;
  };
  expect_error({*p1}, "measured by no part");
  expect_error({}, "measured by no part");
  expect_error({*p1, *p2, *p1}, "measured twice");
  std::string cut = p2->substr(0, p2->size() - 3);
  expect_error({*p1, cut}, "part 1: damaged");
  expect_error({*p1, *p2 + "x"}, "bytes after its last pair");
  expect_error({*p1, "DSPART1"}, "bad magic");
  std::string flipped = *p2;
  flipped[8] ^= 1;  // the fingerprint
  expect_error({*p1, flipped}, "another comparison");
  // Parts measured against another candidate, or with other options, do not assemble.
  auto foreign = measure_pairs(a, other, o, rest);
  ASSERT_TRUE(foreign.ok()) << foreign.error().to_string();
  expect_error({*p1, *foreign}, "another comparison");
  CompareOptions loose = o;
  loose.policy.global = Criteria{};
  loose.policy.global->min_cosine = 0.5;
  auto lp = measure_pairs(a, b, loose, rest);
  ASSERT_TRUE(lp.ok());
  expect_error({*p1, *lp}, "another comparison");
  // Measuring a pair that needs no measuring (the skipped one) or twice in one request.
  auto skipped = measure_pairs(a, b, o, std::vector<size_t>{a.records().size() - 1});
  ASSERT_FALSE(skipped.ok());
  EXPECT_NE(skipped.error().message.find("not one that needs measuring"), std::string::npos);
  auto twice = measure_pairs(a, b, o, std::vector<size_t>{(*work)[0], (*work)[0]});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message.find("listed twice"), std::string::npos);
}

}  // namespace
