// The detail pass of --html (compare/detail.cpp): DetailPass, fused into the metrics pass and run
// on every thread of a pair, gives the PairDetail of the separate single-threaded pass it
// replaced, bit for bit, for any thread count; its exponent-table histogram bin is the binary
// search's on every boundary.
#include <bit>
#include <cfloat>
#include <limits>

#include "compare/internal.hpp"
#include "compare_test_util.hpp"
#include "numerics/pair_metrics.hpp"

namespace {

using namespace ds_test;
using driftscope::compare_detail::DetailPass;

void expect_same_bin(double d) {
  EXPECT_EQ(compare_detail::hist_bin_fast(d), compare_detail::hist_bin_reference(d))
      << "d = " << d << " (bits " << std::hex << std::bit_cast<uint64_t>(d) << ")";
}

TEST(DetailBins, TableEqualsBinarySearchOnEveryBoundary) {
  const double inf = std::numeric_limits<double>::infinity();
  for (int k = 1; k < PairDetail::kHistBins; ++k) {
    const double e = std::pow(10.0, PairDetail::kHistFirstExp + double(k) / PairDetail::kHistBinsPerDecade);
    for (double x : {e, std::nextafter(e, 0.0), std::nextafter(e, inf),
                     std::nextafter(std::nextafter(e, 0.0), 0.0), std::nextafter(std::nextafter(e, inf), inf)})
      expect_same_bin(x);
  }
  for (int x = -1074; x <= 1023; ++x) {
    const double p = std::ldexp(1.0, x);
    expect_same_bin(p);
    expect_same_bin(std::nextafter(p, 0.0));
    expect_same_bin(std::nextafter(p, inf));
  }
  for (double x : {0.0, std::numeric_limits<double>::denorm_min(), DBL_MIN, DBL_MAX, inf, 1e-12, 1e8,
                   3.1622776601683795e-12, 1e300})
    expect_same_bin(x);
  // Log-uniform over the whole finite range, and dense around the bins.
  uint64_t z = 0x243F6A8885A308D3ull;
  for (int i = 0; i < 200000; ++i) {
    z ^= z << 13, z ^= z >> 7, z ^= z << 17;
    expect_same_bin(std::bit_cast<double>(z & 0x7FEFFFFFFFFFFFFFull));
    expect_same_bin(std::ldexp(1.0 + double(z >> 12) * 0x1p-52, static_cast<int>(z % 80) - 50));
  }
}

// Every field, doubles by their bits.
void expect_same_detail(const PairDetail& a, const PairDetail& b) {
  EXPECT_EQ(a.histogram, b.histogram);
  EXPECT_EQ(a.exact, b.exact);
  EXPECT_EQ(a.nonfinite_same, b.nonfinite_same);
  EXPECT_EQ(a.nonfinite_differ, b.nonfinite_differ);
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.cols, b.cols);
  EXPECT_EQ(a.grid_rows, b.grid_rows);
  EXPECT_EQ(a.grid_cols, b.grid_cols);
  ASSERT_EQ(a.heat.size(), b.heat.size());
  for (size_t i = 0; i < a.heat.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(a.heat[i]), std::bit_cast<uint32_t>(b.heat[i])) << "cell " << i;
  ASSERT_EQ(a.worst.size(), b.worst.size());
  for (size_t i = 0; i < a.worst.size(); ++i) {
    EXPECT_EQ(a.worst[i].index, b.worst[i].index) << i;
    EXPECT_EQ(a.worst[i].coords, b.worst[i].coords) << i;
    EXPECT_EQ(std::bit_cast<uint64_t>(a.worst[i].ref), std::bit_cast<uint64_t>(b.worst[i].ref)) << i;
    EXPECT_EQ(std::bit_cast<uint64_t>(a.worst[i].cand), std::bit_cast<uint64_t>(b.worst[i].cand)) << i;
    EXPECT_EQ(std::bit_cast<uint64_t>(a.worst[i].abs_diff), std::bit_cast<uint64_t>(b.worst[i].abs_diff)) << i;
  }
}

struct DetailCase {
  std::string what;
  std::vector<uint64_t> shape;
  DType dtype;
  bool permuted = false;  // the candidate stored transposed (a 2-D shape)
  bool all_differ = false;  // no exact element: chunks whose histogram counts no zeros
  // A few d in a few chunks that are not float32 values, just below a bin edge that is one
  // (1000 - 2^-24, 10 - 2^-24): such a chunk must count on float64 (rounded to float32 they
  // would reach the edge's bin); its other chunks count on float32 lanes.
  bool gaps = false;
  // Every candidate within 2^-12 of its reference, relatively (a few ULP of float16, bfloat16
  // none or one): the kernel's ULP distance proves every d of a chunk a float32 value, so rows of
  // 64 to 16384 columns take DetailTask::by_columns (diff_cols and the heat's column maxima);
  // the gaps, NaN/Inf and far-off ties below put chunks on the other paths in the same tasks.
  bool close = false;
};

void check_case(const DetailCase& tc);

TEST(DetailPassFused, EqualsTheSeparatePassForAnyThreadCount) {
  const std::vector<DetailCase> cases = {
      {"2-D f32, several tasks", {700, 1100}, DType::f32, false, false, true},
      {"1-D f16", {300001}, DType::f16, false, false, true},
      {"bf16, short rows (runs of 1..2 per cell)", {4099, 97}, DType::bf16, false, false, true},
      {"f64 (decoded path), 4-D", {3, 5, 211, 67}, DType::f64},
      {"i32 (decoded path)", {1, 262145}, DType::i32},
      {"f32 transposed candidate (cand_index)", {513, 769}, DType::f32, true},
      {"f16, every element off (no zeros), runs of 3..4", {1031, 250}, DType::f16, false, true},
      {"scalar", {}, DType::f32},
      {"empty", {0, 7}, DType::f32},
  };
  for (const auto& tc : cases) check_case(tc);
}

TEST(DetailPassFused, ColumnMaximaEqualTheSeparatePass) {
  const std::vector<DetailCase> cases = {
      {"f32 rows of 1100", {700, 1100}, DType::f32, false, false, true, true},
      {"f16 rows of 70: a chunk spans grid rows", {5000, 70}, DType::f16, false, false, true, true},
      {"bf16 rows of 64 (the shortest taken)", {2000, 64}, DType::bf16, false, false, false, true},
      {"f32 rows of 3000, 40 rows: a grid row of one or two rows", {40, 3000}, DType::f32, false, false, true, true},
      {"f32 one row of 9000", {1, 9000}, DType::f32, false, false, false, true},
      {"f16 1-D of 16384 (the longest row taken)", {16384}, DType::f16, false, false, true, true},
      {"f32 rows of 16385 (too long: runs)", {20, 16385}, DType::f32, false, false, false, true},
      {"bf16 rows of 63 (too short: runs)", {1000, 63}, DType::bf16, false, false, false, true},
      {"f16 every element off", {900, 333}, DType::f16, false, true, false, true},
  };
  for (const auto& tc : cases) check_case(tc);
}

void check_case(const DetailCase& tc) {
  {
    SCOPED_TRACE(tc.what);
    uint64_t n = 1;
    for (uint64_t s : tc.shape) n *= s;
    std::vector<double> ref = noise(n, 7, 100.0), cand = ref;
    const std::vector<double> wiggle = noise(n, 11);
    for (uint64_t i = 0; i < n; ++i) {
      if (tc.all_differ && tc.close) {  // one float16 step or more, in the same binade
        cand[i] = ref[i] * (1.0 + 0x1p-10 + std::fabs(wiggle[i]) * 0x1p-14);
        continue;
      }
      if (tc.all_differ) {  // off by more than a float16 step of |ref| <= 100 everywhere
        cand[i] = ref[i] + 0.5 + std::fabs(wiggle[i]) * std::ldexp(1.0, -static_cast<int>(i % 8));
        continue;
      }
      if (i % 3 == 0) continue;                                      // exact
      const int shift = tc.close ? 14 + static_cast<int>(i % 30) : static_cast<int>(i % 40);
      cand[i] = ref[i] * (1.0 + std::max(-0x1p-12, std::min(0x1p-12, std::ldexp(wiggle[i], -shift))));
    }
    for (uint64_t k = 0; tc.gaps && k < 6; ++k) {
      const uint64_t i = (4096 * (3 + 9 * k) + 5 * k) % n;
      ref[i] = k % 2 ? 1000.0 : 10.0;
      cand[i] = 0x1p-24;
    }
    // Non-finite values in some chunks only, and ties of the worst d across tasks.
    const bool floats = tc.dtype != DType::i32;
    for (uint64_t i = 5; floats && i < n; i += 99991) {
      ref[i] = i % 2 ? std::nan("") : HUGE_VAL;
      cand[i] = i % 4 == 1 ? std::nan("") : (i % 4 == 3 ? 1.0 : -HUGE_VAL);
    }
    for (uint64_t i = 17; i < n; i += 61001) {
      ref[i] = 1000.0;
      cand[i] = 1256.0;  // the same d everywhere: the lower index wins
    }
    TensorInfo ri;
    ri.name = "t";
    ri.dtype = tc.dtype;
    ri.shape = tc.shape;
    TensorInfo ci = ri;
    std::vector<uint64_t> index;
    std::vector<double> stored = cand;
    if (tc.permuted) {
      ci.shape = {tc.shape[1], tc.shape[0]};
      index = compare_detail::permuted_index(ri.shape, ci.shape, {1, 0});
      ASSERT_EQ(index.size(), n);
      for (uint64_t i = 0; i < n; ++i) stored[index[i]] = cand[i];
    }
    const auto rb = encode(ref, tc.dtype), cb = encode(stored, tc.dtype);
    const auto expected = compare_detail::pair_detail(ri, rb, ci, cb, index);
    ASSERT_TRUE(expected.has_value());
    if (n > 1000) {
      // Otherwise the test would not see the merge of worst elements and heat across tasks.
      ASSERT_EQ(expected->worst.size(), PairDetail::kWorst);
      if (tc.all_differ) ASSERT_EQ(expected->exact, 0u);
      else ASSERT_GT(expected->exact, 0u);
    }
    for (unsigned threads : {1u, 2u, 7u}) {
      SCOPED_TRACE(testing::Message() << threads << " threads");
      DetailPass pass(ri);
      numerics::PairOptions o;
      o.threads = threads;
      o.cand_index = index;
      o.observer = &pass;
      auto m = numerics::compare_pair(ri, rb, ci, cb, o);
      ASSERT_TRUE(m.ok()) << m.error().to_string();
      expect_same_detail(pass.take(ri.shape), *expected);
    }
  }
}

// The brief of issue 30: the HTML report of a pair large enough to be split across threads
// (compare's kLargePair) has the same bytes on 1, 2 and 7 threads.
TEST(DetailPassFused, HtmlBytesEqualOnAnyThreadCount) {
  ScratchDir d;
  const uint64_t rows = 1031, cols = 1100;  // 1.13 M elements: many tasks of the kernel
  std::vector<double> a = noise(rows * cols, 3), b = a;
  for (uint64_t i = 0; i < b.size(); ++i) b[i] *= 1.0 + 1e-3 * double(i % 7);
  for (uint64_t i = 1000; i < b.size(); i += 150001) b[i] += 0.5;  // ties across tasks
  b[777777] = std::nan("");
  Entry ea, eb;
  ea.name = eb.name = "big";
  ea.values = a;
  eb.values = b;
  ea.shape = eb.shape = {rows, cols};
  const std::string ra = write_dump(d.file("a.tdump"), {ea});
  const std::string rb = write_dump(d.file("b.tdump"), {eb});
  std::string first;
  for (unsigned threads : {1u, 2u, 7u}) {
    CompareOptions o;
    o.details = true;
    o.threads = threads;
    const Report r = run_compare(ra, rb, o);
    ASSERT_EQ(r.pairs.size(), 1u);
    ASSERT_TRUE(r.pairs[0].detail() != nullptr);
    EXPECT_EQ(r.pairs[0].detail()->worst.size(), PairDetail::kWorst);
    const std::string html = report_to_html(r);
    if (first.empty()) first = html;
    else EXPECT_TRUE(html == first) << threads << " threads: the HTML differs from 1 thread's";
  }
}

}  // namespace
