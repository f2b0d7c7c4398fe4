// Where the error of a pair sits (PairDetail): histogram, downsampled heatmap and worst elements.
// DetailPass rides on the metrics pass (numerics::ChunkObserver): each of the kernel's tasks feeds
// its chunks, still in L1, to a task-local accumulator, merged into the pair's under a lock when
// the task ends. Every merge is exact and order-free (integer counts, maxima, the best kWorst
// elements of a total order), so the result is the same for any thread count. The tests hold it
// to a separate element-by-element pass (tests/unit/compare/detail_test.cpp).
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <mutex>

#include "compare/internal.hpp"
#include "driftscope/decode.hpp"
#include "numerics/log_bins.hpp"
#include "numerics/pair_metrics.hpp"

namespace driftscope::compare_detail {
namespace {

constexpr uint64_t kChunk = 4096;
constexpr uint64_t kMinColumns = 64, kMaxColumns = 16384;  // DetailTask::by_columns
constexpr size_t kBins = PairDetail::kHistBins;

// The histogram's bins (compare.hpp, PairDetail).
const numerics::LogBins& bins() {
  static const numerics::LogBins b(PairDetail::kHistFirstExp, PairDetail::kHistBinsPerDecade,
                                   PairDetail::kHistBins);
  return b;
}

// The exponent field of a float32 value held in a double.
int32_t field(double x) { return static_cast<int32_t>(std::bit_cast<uint32_t>(static_cast<float>(x)) >> 23); }

// Worse first: larger d, then the lower index (a total order, so the result is deterministic).
bool worse(const PairDetail::Element& a, const PairDetail::Element& b) {
  if (a.abs_diff != b.abs_diff) return a.abs_diff > b.abs_diff;
  return a.index < b.index;
}

// Keeps the kWorst worst in a min-heap under worse(): front is the best kept.
void offer(std::vector<PairDetail::Element>& heap, const PairDetail::Element& e) {
  if (heap.size() >= PairDetail::kWorst && !worse(e, heap.front())) return;
  heap.push_back(e);
  std::push_heap(heap.begin(), heap.end(), worse);
  if (heap.size() > PairDetail::kWorst) {
    std::pop_heap(heap.begin(), heap.end(), worse);
    heap.pop_back();
  }
}

// Row-major 2-D view and its grid (compare.hpp, PairDetail).
void init_view(PairDetail& d, const TensorInfo& ref) {
  const uint64_t n = ref.numel();
  d.histogram.assign(kBins, 0);
  d.cols = ref.shape.empty() ? 1 : ref.shape.back();
  d.rows = d.cols == 0 ? 0 : n / d.cols;
  if (ref.shape.size() <= 1) d.rows = n == 0 ? 0 : 1;
  d.grid_rows = static_cast<uint32_t>(std::min<uint64_t>(d.rows, PairDetail::kMaxGridRows));
  d.grid_cols = static_cast<uint32_t>(std::min<uint64_t>(d.cols, PairDetail::kMaxGridCols));
  d.heat.assign(size_t{d.grid_rows} * d.grid_cols, 0.0f);
}

// Column c belongs to cell floor(c * G / C), which first reaches g at column ceil(g * C / G).
uint64_t cell_edge(uint64_t g, uint64_t count, uint64_t cells) {
  __extension__ typedef unsigned __int128 u128;
  return static_cast<uint64_t>((u128{g} * count + cells - 1) / cells);
}
uint64_t cell_of(uint64_t i, uint64_t count, uint64_t cells) {
  __extension__ typedef unsigned __int128 u128;
  return static_cast<uint64_t>(u128{i} * cells / count);
}

}  // namespace

struct DetailPass::State {
  std::mutex mu;
  PairDetail d;
  std::vector<double> heat;  // as double: max commutes with the final rounding to float
  std::vector<PairDetail::Element> worst;
  // Where the grid's cells start: column cell g at col_edge[g], row cell g at row_edge[g] (one
  // past the last cell too), so that a task's walk over the cells divides nothing.
  std::vector<uint64_t> col_edge, row_edge;
};

namespace {

class DetailTask final : public numerics::ChunkTask {
 public:
  explicit DetailTask(DetailPass::State& s)
      : s_(s), cols_(s.d.cols), col_edge_(s.col_edge.data()), row_edge_(s.row_edge.data()),
        gcols_(s.d.grid_cols), heat_(s.heat.size(), 0.0) {
    worst_.reserve(PairDetail::kWorst + 1);
    // Rows of a few vectors at least (shorter ones are mostly scalar tails), and column maxima
    // that stay in L1/L2.
    if (!heat_.empty() && cols_ >= kMinColumns && cols_ <= kMaxColumns) colmax_.assign(cols_, 0.0f);
  }

  void chunk(const numerics::ObservedChunk& c) override {
    if (!started_) seek(c.first);
    const size_t m = c.n;
    double* d = diff_.data();
    double top;
    bool f32 = false;  // d is in diff32_ only (but for the mended ones: mend_inexact)
    size_t runs = 0;
    inexact_.count = 0;
    if (c.nonfinite == 0 && !colmax_.empty() && c.format != numerics::ChunkFormat::f64) {
      // A raw float chunk with rows long enough for the column maxima (diff_cols): every d a
      // float32 value (the ULP distance proves it), or all but a few that mend_inexact mends.
      const bool proven = numerics::d32_exact(c);
      numerics::DiffCodes codes{bins().binade_base(), bins().binade_edge(), field(c.max_abs), codes_.data()};
      double low = by_columns(c, &codes, proven ? nullptr : &inexact_);  // the smallest positive d
      f32 = true;
      top = c.max_abs;
      if (inexact_.count == 0 || mend_inexact(c, low, top, &codes)) {
        bin_columns(m, low, top, codes);
      } else {  // too many to mend: the histogram on float64 (the heat is right: mend_inexact)
        inexact_.count = 0;
        const uint32_t whole = static_cast<uint32_t>(m);
        double unused;
        const numerics::DiffStats st = numerics::diff_runs(c, d, nullptr, &whole, 1, &unused);
        bin_finite(d, m, st);
        f32 = false;
      }
    } else if (runs = plan_runs(m); c.nonfinite == 0) {
      // One pass over the chunk's values: d, its extremes and the heat runs' maxima. A raw float
      // chunk stores d as float32 only, which holds it exactly nearly always (the difference of
      // two close floats is exact). The few that it does not (a reference far smaller than its
      // difference: near zero, under absolute noise) are mended one by one (mend_inexact); a
      // chunk with more than InexactDiffs::kCap is redone storing float64. Decoded float64
      // values seldom give float32 d, so they store float64 at once.
      numerics::DiffStats st{};
      if (c.format != numerics::ChunkFormat::f64) {
        inexact_.base = 0;
        st = numerics::diff_runs(c, nullptr, diff32_.data(), ends_.data(), runs, maxes_.data(), &inexact_);
        f32 = st.f32 = st.f32 || mend_inexact(c, st.min, st.max, nullptr);
      }
      if (!f32) {
        inexact_.count = 0;
        st = numerics::diff_runs(c, d, nullptr, ends_.data(), runs, maxes_.data());
      }
      bin_finite(d, m, st);
      top = st.max;
    } else {
      top = bin_any(c, d);
    }
    for (size_t j = 0; j < runs; ++j) {
      double& cell = heat_[cells_[j]];
      cell = std::max(cell, maxes_[j]);
    }
    // Later elements lose ties, so only a d above the bar (the 8th worst kept, or 0) is offered:
    // next_at_least finds the next (d > bar is d >= the next value above bar), or a mended one.
    if (top > 0 && (worst_.size() < PairDetail::kWorst || top > worst_.front().abs_diff)) {
      const float* d32 = diff32_.data();
      size_t q = 0;  // the next mended position
      for (size_t k = 0; k < m; ++k) {
        const double bar = worst_.size() < PairDetail::kWorst ? 0.0 : worst_.front().abs_diff;
        const float up = numerics::round_up_f32(bar);
        const float bar32 = up == bar ? std::nextafter(up, HUGE_VALF) : up;  // the next float above
        const size_t mended = q < inexact_.count ? inexact_.at[q] : m;
        k = f32 ? std::min(mended, numerics::next_at_least(d32, k, m, bar32))
                : numerics::next_at_least(d, k, m, std::nextafter(bar, HUGE_VAL));
        if (k >= m) break;
        double x = f32 ? static_cast<double>(d32[k]) : d[k];
        if (q < inexact_.count && inexact_.at[q] == k) x = exact_d_[q++];
        if (x > 0 && (worst_.size() < PairDetail::kWorst || x > worst_.front().abs_diff))
          offer(worst_, {c.first + k, {}, c.ref_at(k), c.cand_at(k), x});
      }
    }
  }

  void finish() override {
    flush_columns();
    std::lock_guard<std::mutex> lock(s_.mu);
    for (size_t b = 0; b < kBins; ++b) s_.d.histogram[b] += hist_[b];
    s_.d.exact += exact_;
    s_.d.nonfinite_same += nonfinite_same_;
    s_.d.nonfinite_differ += nonfinite_differ_;
    for (size_t i = 0; i < heat_.size(); ++i) s_.heat[i] = std::max(s_.heat[i], heat_[i]);
    for (const auto& e : worst_) offer(s_.worst, e);
  }

 private:
  // The task's first element: its place in the view and the grid.
  void seek(uint64_t first) {
    started_ = true;
    row_ = first / cols_;
    col_ = first % cols_;
    gc_ = cell_of(col_, cols_, gcols_);
    gr_ = cell_of(row_, s_.d.rows, s_.d.grid_rows);
    next_col_ = col_edge_[gc_ + 1];
    next_row_ = row_edge_[gr_ + 1];
  }

  // The chunk by diff_cols: cut into pieces of one row each, in calls of one row of heat cells
  // each (the column maxima are folded into the heat cells when the next such row starts); then
  // the view's place moves on as plan_runs would have moved it. Returns the smallest positive d;
  // `codes` (numerics::DiffCodes) gets each d's histogram code in codes_.
  double by_columns(const numerics::ObservedChunk& c, numerics::DiffCodes* codes,
                    numerics::InexactDiffs* inexact) {
    const size_t m = c.n;
    const size_t size = c.format == numerics::ChunkFormat::f32 ? 4 : 2;
    double lo = HUGE_VAL;
    uint64_t row = row_, col = col_, gr = gr_, next_row = next_row_;
    size_t k = 0;
    while (k < m) {
      if (gr != colmax_row_) {
        flush_columns();
        colmax_row_ = gr;
      }
      const size_t start = k;
      size_t segs = 0;
      while (k < m) {
        const size_t run = static_cast<size_t>(std::min<uint64_t>(m - k, cols_ - col));
        seg_cols_[segs] = static_cast<uint32_t>(col);
        k += run;
        ends_[segs++] = static_cast<uint32_t>(k - start);
        col += run;
        if (col < cols_) break;
        col = 0;
        if (++row == next_row) {
          next_row = row_edge_[++gr + 1];
          break;
        }
      }
      numerics::ObservedChunk part = c;
      part.ref = static_cast<const std::byte*>(c.ref) + size * start;
      part.cand = static_cast<const std::byte*>(c.cand) + size * start;
      codes->out = codes_.data() + start;
      if (inexact != nullptr) inexact->base = start;
      lo = std::min(lo, numerics::diff_cols(part, diff32_.data() + start, ends_.data(),
                                            seg_cols_.data(), segs, colmax_.data(), codes, inexact));
    }
    seek(c.first + m);
    return lo;
  }

  // The few float32 d of a raw chunk that diff_runs or diff_cols flagged as perhaps not d: each d
  // on float64 (as the float64 pass takes it) into exact_d_, for the worst elements and the
  // counts (mend_counts); with `codes` its code becomes its bin's. The float32 copy, one rounding
  // of the exact difference, is what the heat cells need: float64 rounds a difference of two
  // float32 values only when one is below 2^-28 of the other, far from any float32 midpoint
  // (checked). `low` and `high` only widen. False when not mended
  // (too many, a check failed, a code below the table): the caller counts on float64.
  bool mend_inexact(const numerics::ObservedChunk& c, double& low, double& high, numerics::DiffCodes* codes) {
    if (inexact_.count > numerics::InexactDiffs::kCap) return false;
    const bool with_codes = codes != nullptr && codes->e_first >= 1;
    const size_t b0 = with_codes ? static_cast<size_t>(bins().binade_base()[codes->e_first]) : 0;
    for (size_t q = 0; q < inexact_.count; ++q) {
      const uint32_t k = inexact_.at[q];
      const double x = std::fabs(c.cand_at(k) - c.ref_at(k));
      const float x32 = numerics::d_to_f32(x);
      if (x32 != diff32_[k]) return false;
      exact_d_[q] = x;
      low = std::min(low, x);
      high = std::max(high, x);
      if (with_codes) {
        const size_t b = bins().bin(x);
        if (b < b0) return false;  // below the codes' table
        codes_[k] = static_cast<uint8_t>(1 + b - b0);
      }
    }
    return true;
  }

  // The counts of a chunk's d32 against thresholds t (as float32: up), at_least[j] for j < k, made
  // those of d where mend_inexact took d on float64.
  void mend_counts(const double* t, const float* up, size_t k, uint64_t* at_least) const {
    for (size_t q = 0; q < inexact_.count; ++q) {
      const double x = exact_d_[q];
      const float x32 = diff32_[inexact_.at[q]];
      for (size_t j = 0; j < k; ++j) at_least[j] = at_least[j] + (x >= t[j]) - (x32 >= up[j]);
    }
  }

  // Folds the column maxima of heat row colmax_row_ into its cells and clears them.
  void flush_columns() {
    if (colmax_row_ == kNoRow) return;
    double* cells = heat_.data() + colmax_row_ * gcols_;
    for (uint64_t g = 0; g < gcols_; ++g) {
      float mx = 0;
      for (uint64_t i = col_edge_[g]; i < col_edge_[g + 1]; ++i) {
        mx = std::max(mx, colmax_[i]);
        colmax_[i] = 0;
      }
      cells[g] = std::max(cells[g], static_cast<double>(mx));
    }
    colmax_row_ = kNoRow;
  }

  // Cuts the next m elements into runs of one heat cell each (ends_, cells_) and moves on.
  size_t plan_runs(size_t m) {
    size_t runs = 0;
    size_t k = 0;
    while (k < m) {
      const size_t run = static_cast<size_t>(std::min<uint64_t>(m - k, next_col_ - col_));
      k += run;
      ends_[runs] = static_cast<uint32_t>(k);
      cells_[runs++] = static_cast<uint32_t>(gr_ * gcols_ + gc_);
      col_ += run;
      if (col_ == cols_) {
        col_ = gc_ = 0;
        next_col_ = col_edge_[1];
        if (++row_ == next_row_) next_row_ = row_edge_[++gr_ + 1];
      } else if (col_ == next_col_) {
        next_col_ = col_edge_[++gc_ + 1];
      }
    }
    return runs;
  }

  // The histogram of a chunk without NaN/Inf. Bins are monotone in d, so the chunk's d fall in
  // [bin(min), bin(max)], and the number in bins >= b is the number of d >= the lower edge of b:
  // a few vector compares per element instead of a bin lookup and a counter increment each.
  // Zeros (exact) are the d below the smallest positive double, counted only when min is 0.
  // With every d a float32 value (but the mended, mend_counts) the compares run on float32 lanes,
  // twice as many per vector: for such d, d >= t is d >= (t rounded up to a float32).
  void bin_finite(const double* d, size_t m, const numerics::DiffStats& st) {
    const bool zeros = st.min == 0;
    std::array<double, kBins> thresholds;
    std::array<uint64_t, kBins> at_least;
    const size_t k = bins().thresholds(zeros, st.min, st.max, thresholds.data());
    if (st.f32) {
      std::array<float, kBins> up;
      for (size_t j = 0; j < k; ++j) up[j] = numerics::round_up_f32(thresholds[j]);
      numerics::count_at_least_f32(diff32_.data(), m, up.data(), k, at_least.data());
      mend_counts(thresholds.data(), up.data(), k, at_least.data());
    } else {
      numerics::count_at_least(d, m, thresholds.data(), k, at_least.data());
    }
    exact_ += bins().add_counts(zeros, st.min, st.max, m, at_least.data(), hist_.data());
  }

  // The histogram of by_columns's d (float32 values in diff32_, their codes in codes_; low: the
  // smallest positive d, +inf when none; high: the largest). Each float32 binade holds at most
  // one edge (consecutive edges are 10^(1/2) > 2 apart), so a d's bin is the bin of its binade's
  // start plus whether d reaches the edge inside it: d >= e exactly when d >= the smallest float32
  // >= e, which lies in the binade (else no float32 of it reaches e) and then compares by the
  // mantissa bits alone. That is the code diff_cols wrote: 1 + bin - b0, b0 the bin where binade
  // e_first starts, 0 for a zero. When some positive d lies below the codes' table (the chunk
  // spans more binades than a vector has lanes), or the target wrote none, the d are counted
  // against the edges instead.
  void bin_columns(size_t m, double low, double high, const numerics::DiffCodes& codes) {
    if (!(low < HUGE_VAL)) {  // every d is zero
      exact_ += m;
      return;
    }
    std::array<uint64_t, kBins + 1> at_least;
    if (codes.e_first >= 1 && field(low) >= codes.e_first) {
      // Codes below the smallest positive d's are empty: its code's count is every positive d.
      const auto b0 = static_cast<size_t>(bins().binade_base()[codes.e_first]);
      const size_t first = 1 + bins().bin(low) - b0, ncodes = 2 + bins().bin(high) - b0;
      numerics::count_codes(codes_.data(), m, first, ncodes, at_least.data());
      exact_ += m - at_least[first];
      for (size_t j = first; j < ncodes; ++j)
        hist_[b0 + j - 1] += at_least[j] - (j + 1 < ncodes ? at_least[j + 1] : 0);
      return;
    }
    // Every zero, then the lower edges of bins bin(low) + 1 .. bin(high).
    std::array<double, kBins> thresholds;
    std::array<float, kBins> up;
    const size_t k = bins().thresholds(true, low, high, thresholds.data());
    for (size_t j = 0; j < k; ++j) up[j] = numerics::round_up_f32(thresholds[j]);
    numerics::count_at_least_f32(diff32_.data(), m, up.data(), k, at_least.data());
    mend_counts(thresholds.data(), up.data(), k, at_least.data());
    exact_ += bins().add_counts(true, low, high, m, at_least.data(), hist_.data());
  }

  // A chunk with NaN/Inf somewhere: element by element, and the runs' maxima. Returns the
  // largest d.
  double bin_any(const numerics::ObservedChunk& c, double* d) {
    const numerics::LogBins& t = bins();
    for (size_t k = 0; k < c.n; ++k) {
      const double r = c.ref_at(k), x = c.cand_at(k);
      if (std::isfinite(r) && std::isfinite(x)) {
        d[k] = std::fabs(x - r);
        if (d[k] == 0) ++exact_;
        else ++hist_[t.bin(d[k])];
      } else if ((std::isnan(r) && std::isnan(x)) || r == x) {
        ++nonfinite_same_;
        d[k] = 0;
      } else {
        ++nonfinite_differ_;
        d[k] = HUGE_VAL;
      }
    }
    double top = 0;
    size_t k = 0;
    for (size_t j = 0; k < c.n; ++j) {
      double mx = 0;
      for (; k < ends_[j]; ++k) mx = std::max(mx, d[k]);
      maxes_[j] = mx;
      top = std::max(top, mx);
    }
    return top;
  }

  DetailPass::State& s_;
  const uint64_t cols_;
  const uint64_t* col_edge_;
  const uint64_t* row_edge_;
  const uint64_t gcols_;
  bool started_ = false;
  uint64_t col_ = 0, row_ = 0, gc_ = 0, gr_ = 0, next_col_ = 0, next_row_ = 0;
  std::array<uint64_t, kBins> hist_{};
  uint64_t exact_ = 0, nonfinite_same_ = 0, nonfinite_differ_ = 0;
  std::vector<double> heat_;
  std::vector<PairDetail::Element> worst_;
  std::array<double, kChunk> diff_;
  std::array<float, kChunk> diff32_;  // diff_ rounded to float32 (numerics::diff_runs)
  numerics::InexactDiffs inexact_;    // where diff32_ was mended (mend_inexact)
  std::array<double, numerics::InexactDiffs::kCap> exact_d_;  // the d there
  std::array<uint32_t, kChunk> ends_, cells_;  // a chunk's runs: end in the chunk, heat cell
  // by_columns: the column maxima of heat row colmax_row_ (empty when the view's rows are too
  // short or too long for them), and each row piece's first column.
  static constexpr uint64_t kNoRow = UINT64_MAX;
  std::vector<float> colmax_;
  uint64_t colmax_row_ = kNoRow;
  std::array<uint32_t, kChunk> seg_cols_;
  std::array<uint8_t, kChunk> codes_;  // by_columns: each d's histogram code (numerics::DiffCodes)
  std::array<double, kChunk> maxes_;
};

}  // namespace

DetailPass::DetailPass(const TensorInfo& ref) : s_(std::make_unique<State>()) {
  init_view(s_->d, ref);
  s_->heat.assign(s_->d.heat.size(), 0.0);
  const PairDetail& d = s_->d;
  if (d.grid_cols > 0 && d.grid_rows > 0) {
    for (uint64_t g = 0; g <= uint64_t{d.grid_cols} + 1; ++g) s_->col_edge.push_back(cell_edge(g, d.cols, d.grid_cols));
    for (uint64_t g = 0; g <= uint64_t{d.grid_rows} + 1; ++g) s_->row_edge.push_back(cell_edge(g, d.rows, d.grid_rows));
  }
  s_->worst.reserve(PairDetail::kWorst + 1);
}

DetailPass::~DetailPass() = default;

std::unique_ptr<numerics::ChunkTask> DetailPass::begin_task() {
  return std::make_unique<DetailTask>(*s_);
}

PairDetail DetailPass::take(std::span<const uint64_t> shape) {
  PairDetail d = std::move(s_->d);
  // Rounding to float is monotone, so the float of the largest d is the largest float of the d.
  for (size_t i = 0; i < d.heat.size(); ++i) d.heat[i] = static_cast<float>(s_->heat[i]);
  std::vector<PairDetail::Element> worst = std::move(s_->worst);
  std::sort(worst.begin(), worst.end(), worse);
  for (auto& e : worst) e.coords = detail::unravel(e.index, shape);
  d.worst = std::move(worst);
  return d;
}

}  // namespace driftscope::compare_detail
