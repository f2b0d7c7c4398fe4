// The detail pass of --html (compare/detail.cpp): DetailPass, fused into the metrics pass and run
// on every thread of a pair, gives the PairDetail of its definition (detail_by_definition, one
// element at a time), bit for bit, for any thread count.
#include <algorithm>
#include <bit>
#include <limits>
#include <optional>

#include "compare/internal.hpp"
#include "compare_test_util.hpp"
#include "numerics/log_bins.hpp"
#include "numerics/pair_metrics.hpp"

namespace {

using namespace ds_test;
using driftscope::compare_detail::DetailPass;

// The PairDetail of compare.hpp by its definition, element by element on one thread: each d
// from decode(), its bin by binary search, its heat cell by two divisions, and the kWorst
// largest d (lower index first on ties) by a full sort. nullopt when an element fails to decode.
std::optional<PairDetail> detail_by_definition(const TensorInfo& ref, std::span<const std::byte> rb,
                                               const TensorInfo& cand, std::span<const std::byte> cb,
                                               std::span<const uint64_t> cand_index) {
  const numerics::LogBins bins(PairDetail::kHistFirstExp, PairDetail::kHistBinsPerDecade, PairDetail::kHistBins);
  const uint64_t n = ref.numel();
  PairDetail d;
  d.histogram.assign(PairDetail::kHistBins, 0);
  d.cols = ref.shape.empty() ? 1 : ref.shape.back();
  d.rows = ref.shape.size() <= 1 ? (n == 0 ? 0 : 1) : (d.cols == 0 ? 0 : n / d.cols);
  d.grid_rows = static_cast<uint32_t>(std::min<uint64_t>(d.rows, PairDetail::kMaxGridRows));
  d.grid_cols = static_cast<uint32_t>(std::min<uint64_t>(d.cols, PairDetail::kMaxGridCols));
  d.heat.assign(size_t{d.grid_rows} * d.grid_cols, 0.0f);
  std::vector<PairDetail::Element> all;
  for (uint64_t i = 0; i < n; ++i) {
    double r, c;
    if (!decode(ref, rb, i, std::span<double>(&r, 1)) ||
        !decode(cand, cb, cand_index.empty() ? i : cand_index[i], std::span<double>(&c, 1)))
      return std::nullopt;
    double diff = 0;
    if (std::isfinite(r) && std::isfinite(c)) {
      diff = std::fabs(c - r);
      if (diff == 0) ++d.exact;
      else ++d.histogram[bins.bin_search(diff)];
    } else if ((std::isnan(r) && std::isnan(c)) || r == c) {
      ++d.nonfinite_same;
    } else {
      ++d.nonfinite_differ;
      diff = HUGE_VAL;
    }
    const uint64_t gr = (i / d.cols) * d.grid_rows / d.rows, gc = (i % d.cols) * d.grid_cols / d.cols;
    float& cell = d.heat[gr * d.grid_cols + gc];
    cell = std::max(cell, static_cast<float>(diff));
    if (diff > 0) all.push_back({i, {}, r, c, diff});
  }
  std::sort(all.begin(), all.end(), [](const auto& x, const auto& y) {
    return x.abs_diff != y.abs_diff ? x.abs_diff > y.abs_diff : x.index < y.index;
  });
  if (all.size() > PairDetail::kWorst) all.resize(PairDetail::kWorst);
  for (auto& e : all) e.coords = detail::unravel(e.index, ref.shape);
  d.worst = std::move(all);
  return d;
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
void check_inexact_case(const std::vector<uint64_t>& shape, bool tiny);

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
      index = detail::permuted_index(ri.shape, ci.shape, {1, 0});
      ASSERT_EQ(index.size(), n);
      for (uint64_t i = 0; i < n; ++i) stored[index[i]] = cand[i];
    }
    const auto rb = encode(ref, tc.dtype), cb = encode(stored, tc.dtype);
    const auto expected = detail_by_definition(ri, rb, ci, cb, index);
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

// A raw float32 chunk whose float32 subtraction is inexact at a few positions (a reference far
// below its difference: near zero, under absolute noise) is counted on float32 lanes with those
// few mended (DetailTask::mend_inexact); with more than InexactDiffs::kCap it is redone on
// float64. Each must give the definition's detail, where the mended d decides:
// - chunk 1: the largest d, inexact, lies on an edge's far side that float32 does not reach
//   (f_lo < e <= d, rounded to f_lo): only the float64 d puts it in e's bin, and only a chunk
//   maximum widened to it counts that bin at all;
// - chunk 2: the smallest d, inexact, lies just below the edge 10, which it rounds up to: only a
//   chunk minimum widened to it counts the bin below 10;
// - chunk 3: every 8th d inexact, far more than kCap;
// - chunk 4: none (the plain float32 path), and ordinary noise elsewhere.
// Both ways a chunk is taken: 1-D and long (DetailTask's runs, diff_runs) and in rows of 5123
// (by_columns: diff_cols, the histogram by codes); and chunk 1 at two scales: its d near 1, and
// near 1e-10, where the codes' table starts in bin 0 (d < 1e-12).
TEST(DetailPassFused, InexactFloat32DifferencesAreMendedOrRedone) {
  for (const std::vector<uint64_t>& shape : {std::vector<uint64_t>{20492}, std::vector<uint64_t>{4, 5123}}) {
    for (const bool tiny : {false, true}) {
      SCOPED_TRACE(testing::Message() << (shape.size() == 1 ? "1-D" : "rows of 5123") << (tiny ? ", tiny" : ""));
      check_inexact_case(shape, tiny);
    }
  }
}

void check_inexact_case(const std::vector<uint64_t>& shape, bool tiny) {
  const numerics::LogBins bins(PairDetail::kHistFirstExp, PairDetail::kHistBinsPerDecade, PairDetail::kHistBins);
  // An edge above a float32 f_lo and below the midpoint of f_lo and the next float32.
  double e = 0;
  float f_lo = 0;
  for (double x : bins.edges()) {
    const auto f = static_cast<float>(x);
    const float lo = static_cast<double>(f) <= x ? f : std::nextafter(f, 0.0f);
    const float hi = std::nextafter(lo, HUGE_VALF);
    const bool in_range = tiny ? x > 1e-12 && x < 1e-8 : x > 1e-2 && x < 1e3;
    if (in_range && static_cast<double>(lo) < x && x < (double{lo} + double{hi}) / 2) {
      e = x;  // the largest such edge
      f_lo = lo;
    }
  }
  ASSERT_GT(e, 0) << "no edge of the histogram lies just above a float32";
  const float delta = numerics::round_up_f32(e - f_lo);  // f_lo + delta: at e or just above
  const double d1 = double{f_lo} + double{delta};
  ASSERT_GE(d1, e);
  ASSERT_EQ(static_cast<float>(d1), f_lo);  // rounds below the edge

  const size_t chunk = 4096, n = 5 * chunk + 12;
  std::vector<double> ref(n), cand(n);
  const std::vector<double> wiggle = noise(n, 5);
  for (size_t i = 0; i < n; ++i) {
    ref[i] = static_cast<float>(1.0 + std::fabs(wiggle[i]));            // in [1, ~4)
    cand[i] = static_cast<float>(ref[i] * (1.0 + 0x1p-20 * wiggle[i]));  // exact differences
    if (tiny && i >= chunk && i < 2 * chunk) {  // d in [2^-36, 2^-32]: in the codes' table
      ref[i] = static_cast<float>(0x1p-24 * ref[i]);
      cand[i] = static_cast<float>(ref[i] * (1.0 + 0x1p-12 * (1.0 + std::fabs(wiggle[i]))));
    }
  }
  ASSERT_GT(d1, 0x1p-32);  // chunk 1's largest d
  const size_t p1 = chunk + 1000;
  ref[p1] = -static_cast<double>(delta);
  cand[p1] = f_lo;
  for (size_t i = 2 * chunk; i < 3 * chunk; ++i) {  // chunk 2: d = 32, exact (r: 16 fraction bits)
    ref[i] = std::ldexp(std::floor(std::ldexp(1.0 + std::fabs(wiggle[i]), 16)), -16);
    cand[i] = ref[i] + 32.0;
  }
  const size_t p2 = 2 * chunk + 2047;
  ref[p2] = 0x1p-30;
  cand[p2] = 10.0;  // d = 10 - 2^-30, rounded to float32: 10
  ASSERT_EQ(static_cast<float>(cand[p2] - ref[p2]), 10.0f);
  for (size_t i = 3 * chunk; i < 4 * chunk; i += 8) ref[i] = 0x1p-40 * (1.0 + static_cast<double>(i % 64));
  for (size_t i = 0; i < n; ++i) cand[i] = static_cast<float>(cand[i]);

  TensorInfo ri;
  ri.name = "t";
  ri.dtype = DType::f32;
  ri.shape = shape;
  const auto rb = encode(ref, DType::f32), cb = encode(cand, DType::f32);
  const auto expected = detail_by_definition(ri, rb, ri, cb, {});
  ASSERT_TRUE(expected.has_value());
  ASSERT_GT(expected->histogram[bins.bin_search(d1)], 0u);
  ASSERT_GT(expected->histogram[bins.bin_search(10.0) - 1], 0u);
  for (unsigned threads : {1u, 2u}) {
    SCOPED_TRACE(testing::Message() << threads << " threads");
    DetailPass pass(ri);
    numerics::PairOptions o;
    o.threads = threads;
    o.observer = &pass;
    auto m = numerics::compare_pair(ri, rb, ri, cb, o);
    ASSERT_TRUE(m.ok()) << m.error().to_string();
    expect_same_detail(pass.take(ri.shape), *expected);
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
