// Localisation fixtures with known answers: a chain of ops y = tanh(M x + c) over 8x8 matrices,
// recorded twice with the public Writer; in the candidate a fault is injected at op k and every
// later op computes from the faulty value, as a real engine would. The report must name op k as
// the first divergence, say the error was introduced there and inherited afterwards.
#include "compare_test_util.hpp"

namespace {

using namespace ds_test;

enum class Fault { none, scale, nan, zero, transpose, quant, f16_overflow };

constexpr size_t kN = 8;  // matrices are kN x kN

std::vector<double> matmul(const std::vector<double>& m, const std::vector<double>& x) {
  std::vector<double> out(kN * kN, 0.0);
  for (size_t r = 0; r < kN; ++r)
    for (size_t c = 0; c < kN; ++c) {
      double s = 0;
      for (size_t j = 0; j < kN; ++j) s += m[r * kN + j] * x[j * kN + c];
      out[r * kN + c] = s;
    }
  return out;
}

double round_f16(double v) { return f16_to_double(double_to_f16(v)); }

struct Chain {
  std::vector<Entry> ref, cand;
};

// Ops 0..L-1; op `k` is faulty in the candidate. With f16_overflow, op k multiplies by 1e7 in
// both runs (no tanh) and the candidate rounds every op's result to float16 and stores f16.
Chain make_chain(Fault fault, size_t k, size_t L = 8, bool inputs = false) {
  const auto M = noise(kN * kN, 100, 1.5 / std::sqrt(static_cast<double>(kN)));
  const auto c = noise(kN * kN, 200, 0.1);
  std::vector<double> x = noise(kN * kN, 300), y = x;
  const bool half = fault == Fault::f16_overflow;
  if (half)
    for (auto& v : y) v = round_f16(v);
  Chain ch;
  for (size_t i = 0; i < L; ++i) {
    const std::string name = "layers." + std::to_string(i);
    if (inputs) {
      Entry ei{name, x, {kN, kN}};
      ei.role = Role::input;
      ei.op = "Layer";
      Entry ci{name, y, {kN, kN}};
      ci.role = Role::input;
      ci.op = "Layer";
      ci.dtype = half ? DType::f16 : DType::f32;
      ch.ref.push_back(ei);
      ch.cand.push_back(ci);
    }
    auto step = [&](const std::vector<double>& in) {
      auto out = matmul(M, in);
      if (half && i == k) {
        for (auto& v : out) v *= 1e7;
        return out;
      }
      for (size_t j = 0; j < out.size(); ++j) out[j] = std::tanh(out[j] + c[j]);
      return out;
    };
    std::vector<double> nx = step(x), ny = step(y);
    if (half)
      for (auto& v : ny) v = round_f16(v);
    if (i == k) {
      switch (fault) {
        case Fault::scale:
          for (auto& v : ny) v *= 1.5;
          break;
        case Fault::nan: ny[5] = std::nan(""); break;
        case Fault::zero: std::fill(ny.begin(), ny.end(), 0.0); break;
        case Fault::transpose: {
          auto t = ny;
          for (size_t r = 0; r < kN; ++r)
            for (size_t q = 0; q < kN; ++q) ny[r * kN + q] = t[q * kN + r];
          break;
        }
        case Fault::quant:
          for (auto& v : ny) v = std::round(v * 127.0) / 127.0;
          break;
        default: break;
      }
    }
    // Float32 is what the reference stores: round here so both chains continue from the stored
    // values and ops before k agree exactly.
    for (auto& v : nx) v = static_cast<double>(static_cast<float>(v));
    if (!half)
      for (auto& v : ny) v = static_cast<double>(static_cast<float>(v));
    Entry e{name, nx, {kN, kN}};
    e.op = "Layer";
    Entry f{name, ny, {kN, kN}};
    f.op = "Layer";
    f.dtype = half ? DType::f16 : DType::f32;
    ch.ref.push_back(e);
    ch.cand.push_back(f);
    x = nx;
    y = ny;
  }
  return ch;
}

size_t pair_of(const Report& r, size_t op, Role role = Role::output) {
  for (size_t i = 0; i < r.pairs.size(); ++i)
    if (r.pairs[i].ref.name() == "layers." + std::to_string(op) && r.pairs[i].ref.role == role) return i;
  ADD_FAILURE() << "no pair for op " << op;
  return 0;
}

struct Case {
  Fault fault;
  const char* label;
  const char* reason;  // expected first reason code at k
  Verdict verdict;
};

class Localise : public ::testing::TestWithParam<std::tuple<Case, bool>> {};

TEST_P(Localise, FaultAtKIsIntroducedThereAndInheritedAfter) {
  const auto [cs, inputs] = GetParam();
  const size_t L = 8;
  for (size_t k : {size_t{0}, size_t{3}, size_t{6}}) {
    SCOPED_TRACE(std::string(cs.label) + " at op " + std::to_string(k) + (inputs ? " (inputs)" : ""));
    ScratchDir d;
    Chain ch = make_chain(cs.fault, k, L, inputs);
    KeyValues meta_c;
    if (cs.fault == Fault::f16_overflow) meta_c.emplace_back("precision", "float16");
    auto a = write_dump(d.file("ref.tdump"), ch.ref, {{"precision", "float32"}});
    auto b = write_dump(d.file("cand.tdump"), ch.cand, meta_c);
    Report r = run_compare(a, b);
    const size_t pk = pair_of(r, k);
    ASSERT_TRUE(r.first_divergence.has_value()) << r.summary;
    EXPECT_EQ(*r.first_divergence, pk) << r.summary;
    EXPECT_EQ(r.verdict, cs.verdict);
    const PairResult& p = r.pairs[pk];
    ASSERT_FALSE(p.reasons().empty());
    EXPECT_EQ(p.reasons()[0].code(), cs.reason) << p.reasons()[0].message;
    EXPECT_EQ(p.origin, Origin::introduced);
    EXPECT_EQ(p.basis(), k == 0 && !inputs ? "none" : inputs ? "inputs" : "predecessor");
    EXPECT_NE(r.summary.find("layers." + std::to_string(k) + " "), std::string::npos) << r.summary;
    // Every op before k is within tolerance.
    for (size_t i = 0; i < pk; ++i) EXPECT_EQ(r.pairs[i].status, PairStatus::pass) << r.pairs[i].ref.name();
    // Every failing pair after op k carries the error it received.
    size_t inherited = 0;
    for (size_t i = pk + 1; i < r.pairs.size(); ++i) {
      const PairResult& q = r.pairs[i];
      if (q.status == PairStatus::pass) continue;
      if (inputs && q.ref.role == Role::input) continue;  // an input is judged against its predecessor
      EXPECT_EQ(q.origin, Origin::inherited) << q.ref.name() << " amplification " << q.amplification;
      ++inherited;
    }
    if (k + 1 < L && cs.fault != Fault::f16_overflow) EXPECT_GT(inherited, 0u);
    // The growth curve has one point per output, and jumps at op k.
    size_t outputs = 0;
    for (const auto& g : r.growth) {
      outputs += 1;
      if (g.pair < pk) EXPECT_LE(g.error, 1e-3);
    }
    EXPECT_EQ(outputs, L);
    if (cs.fault == Fault::nan || cs.fault == Fault::f16_overflow) {
      ASSERT_TRUE(r.first_nonfinite.has_value());
      EXPECT_EQ(*r.first_nonfinite, pk);
    } else {
      EXPECT_FALSE(r.first_nonfinite.has_value());
    }
    if (cs.fault == Fault::zero) {
      ASSERT_TRUE(r.first_silent_zero.has_value());
      EXPECT_EQ(*r.first_silent_zero, pk);
      EXPECT_EQ(p.metrics.cosine, 0.0);  // never "cosine 1.0" for a zeroed output
    } else {
      EXPECT_FALSE(r.first_silent_zero.has_value());
    }
    if (cs.fault != Fault::f16_overflow && k > 0) {
      // Ops before k are bit-identical, so op k's error grew from nothing: top amplifier.
      ASSERT_FALSE(r.amplifiers.empty());
      EXPECT_EQ(r.amplifiers.front(), pk);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Faults, Localise,
    ::testing::Combine(::testing::Values(Case{Fault::scale, "scaled output", "sqnr", Verdict::diverged},
                                         Case{Fault::nan, "NaN", "nonfinite", Verdict::silent_failure},
                                         Case{Fault::zero, "zeroed output", "all_zero", Verdict::silent_failure},
                                         Case{Fault::transpose, "transposed output", "sqnr", Verdict::diverged},
                                         Case{Fault::quant, "quantisation noise", "sqnr", Verdict::diverged},
                                         Case{Fault::f16_overflow, "float16 overflow", "nonfinite",
                                              Verdict::silent_failure}),
                       ::testing::Bool()),
    [](const auto& info) {
      std::string s = std::get<0>(info.param).label;
      for (auto& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return s + (std::get<1>(info.param) ? "_with_inputs" : "");
    });

TEST(Localise, HealthyRunsPass) {
  ScratchDir d;
  Chain ch = make_chain(Fault::none, 0);
  Report r = run_compare(write_dump(d.file("a.tdump"), ch.ref), write_dump(d.file("b.tdump"), ch.cand));
  EXPECT_EQ(r.verdict, Verdict::pass);
  EXPECT_FALSE(r.first_divergence.has_value());
  EXPECT_TRUE(r.amplifiers.empty());
  EXPECT_EQ(r.summary.rfind("PASS: 8 tensor pairs within tolerance", 0), 0u) << r.summary;
}

TEST(Localise, Float16RunWithinItsDefaultUntilOverflow) {
  // Before the overflow the float16 candidate differs from float32 by rounding (SQNR ~ 60 dB):
  // judged by the float16 default (40 dB) those ops pass; judged by float32's (80 dB) they fail.
  ScratchDir d;
  Chain ch = make_chain(Fault::f16_overflow, 5);
  auto a = write_dump(d.file("a.tdump"), ch.ref);
  auto b = write_dump(d.file("b.tdump"), ch.cand);
  Report r = run_compare(a, b);
  EXPECT_EQ(*r.first_divergence, 5u);
  EXPECT_GT(r.pairs[2].error, 0.0);
  EXPECT_EQ(r.pairs[2].criteria_source(), "default (f16)");
  CompareOptions o;
  o.policy.global = default_criteria(DType::f32, false);
  Report strict = run_compare(a, b, o);
  // Those ops fail float32's tolerance by float16 rounding: over tolerance, yet within what the
  // dtype makes, so the first divergence is still the overflow (issue 26 §5).
  EXPECT_EQ(strict.pairs[0].status, PairStatus::fail);
  for (size_t i = 0; i < 5; ++i) EXPECT_FALSE(strict.pairs[i].beyond_rounding) << i;
  EXPECT_EQ(*strict.first_divergence, 5u);
}

TEST(Localise, StopAtFirstIsIndependentOfThreads) {
  ScratchDir d;
  Chain ch = make_chain(Fault::scale, 2, 40);
  auto a = write_dump(d.file("a.tdump"), ch.ref);
  auto b = write_dump(d.file("b.tdump"), ch.cand);
  std::string first;
  for (unsigned t : {1u, 2u, 8u}) {
    CompareOptions o;
    o.stop_at_first = true;
    o.threads = t;
    Report r = run_compare(a, b, o);
    EXPECT_TRUE(r.stopped_early);
    EXPECT_EQ(*r.first_divergence, 2u);
    EXPECT_EQ(r.count(PairStatus::not_compared), 37u);
    EXPECT_EQ(r.verdict, Verdict::diverged);
    std::string json = report_to_json(r);
    if (first.empty()) first = json;
    EXPECT_EQ(json, first) << "threads=" << t;
  }
}

TEST(Localise, ReportIsIdenticalForAnyThreadCount) {
  ScratchDir d;
  Chain ch = make_chain(Fault::quant, 9, 60, true);
  auto a = write_dump(d.file("a.tdump"), ch.ref);
  auto b = write_dump(d.file("b.tdump"), ch.cand);
  std::string first;
  for (unsigned t : {1u, 2u, 8u}) {
    CompareOptions o;
    o.threads = t;
    std::string json = report_to_json(run_compare(a, b, o));
    if (first.empty()) first = json;
    EXPECT_EQ(json, first) << "threads=" << t;
  }
}

}  // namespace
