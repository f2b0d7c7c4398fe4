// Where the error of a pair sits (PairDetail): histogram, downsampled heatmap and worst elements,
// from one more pass over the pair's elements in fixed chunks, so memory per pair is a few KiB
// whatever the tensor's size.
#include <algorithm>
#include <array>
#include <cmath>

#include "compare/internal.hpp"
#include "driftscope/decode.hpp"

namespace driftscope::compare_detail {
namespace {

constexpr uint64_t kChunk = 4096;

// Lower edges 10^(kHistFirstExp + k/B) of bins 1 .. kHistBins-1: a binary search over 39 edges
// costs a fraction of a log10 per element.
const std::array<double, PairDetail::kHistBins - 1>& hist_edges() {
  static const auto edges = [] {
    std::array<double, PairDetail::kHistBins - 1> e{};
    for (int k = 1; k < PairDetail::kHistBins; ++k)
      e[static_cast<size_t>(k - 1)] =
          std::pow(10.0, PairDetail::kHistFirstExp + double(k) / PairDetail::kHistBinsPerDecade);
    return e;
  }();
  return edges;
}

size_t hist_bin(double d) {
  const auto& e = hist_edges();
  return static_cast<size_t>(std::upper_bound(e.begin(), e.end(), d) - e.begin());
}

// Worse first: larger d, then the lower index (a total order, so the result is deterministic).
bool worse(const PairDetail::Element& a, const PairDetail::Element& b) {
  if (a.abs_diff != b.abs_diff) return a.abs_diff > b.abs_diff;
  return a.index < b.index;
}

}  // namespace

std::optional<PairDetail> pair_detail(const TensorInfo& ref, std::span<const std::byte> ref_payload,
                                      const TensorInfo& cand, std::span<const std::byte> cand_payload,
                                      std::span<const uint64_t> cand_index) {
  PairDetail d;
  const uint64_t n = ref.numel();
  d.histogram.assign(PairDetail::kHistBins, 0);
  d.cols = ref.shape.empty() ? 1 : ref.shape.back();
  d.rows = d.cols == 0 ? 0 : n / d.cols;
  if (ref.shape.size() <= 1) d.rows = n == 0 ? 0 : 1;
  d.grid_rows = static_cast<uint32_t>(std::min<uint64_t>(d.rows, PairDetail::kMaxGridRows));
  d.grid_cols = static_cast<uint32_t>(std::min<uint64_t>(d.cols, PairDetail::kMaxGridCols));
  d.heat.assign(size_t{d.grid_rows} * d.grid_cols, 0.0f);

  // The element's cell, advanced by counting instead of two divisions per element: column c
  // belongs to cell floor(c * G / C), which first reaches g at column ceil(g * C / G).
  auto edge = [](uint64_t g, uint64_t count, uint64_t cells) { return (g * count + cells - 1) / cells; };
  uint64_t col = 0, row = 0, gc = 0, gr = 0;
  uint64_t next_col = d.grid_cols ? edge(1, d.cols, d.grid_cols) : 0;
  uint64_t next_row = d.grid_rows ? edge(1, d.rows, d.grid_rows) : 0;
  std::array<double, kChunk> a{}, b{};
  std::vector<PairDetail::Element> worst;  // a min-heap under worse(): front is the best kept
  worst.reserve(PairDetail::kWorst + 1);
  for (uint64_t first = 0; first < n; first += kChunk) {
    const uint64_t m = std::min(kChunk, n - first);
    if (!decode(ref, ref_payload, first, std::span<double>(a.data(), m))) return std::nullopt;
    if (cand_index.empty()) {
      if (!decode(cand, cand_payload, first, std::span<double>(b.data(), m))) return std::nullopt;
    } else {
      for (uint64_t k = 0; k < m; ++k)
        if (!decode(cand, cand_payload, cand_index[first + k], std::span<double>(&b[k], 1)))
          return std::nullopt;
    }
    for (uint64_t k = 0; k < m; ++k) {
      const double r = a[k], c = b[k];
      double diff;
      if (std::isfinite(r) && std::isfinite(c)) {
        diff = std::fabs(c - r);
        if (diff == 0) ++d.exact;
        else ++d.histogram[hist_bin(diff)];
      } else if ((std::isnan(r) && std::isnan(c)) || r == c) {
        ++d.nonfinite_same;
        diff = 0;
      } else {
        ++d.nonfinite_differ;
        diff = HUGE_VAL;
      }
      const uint64_t i = first + k;
      float& cell = d.heat[gr * d.grid_cols + gc];
      // Widening to float may round a tiny d up or down; the cell is for the eye, not for metrics.
      cell = std::max(cell, static_cast<float>(diff));
      if (diff > 0 && (worst.size() < PairDetail::kWorst || worse({i, {}, r, c, diff}, worst.front()))) {
        worst.push_back({i, {}, r, c, diff});
        std::push_heap(worst.begin(), worst.end(), worse);
        if (worst.size() > PairDetail::kWorst) {
          std::pop_heap(worst.begin(), worst.end(), worse);
          worst.pop_back();
        }
      }
      if (++col == d.cols) {
        col = gc = 0;
        next_col = edge(1, d.cols, d.grid_cols);
        if (++row == next_row) next_row = edge(++gr + 1, d.rows, d.grid_rows);
      } else if (col == next_col) {
        next_col = edge(++gc + 1, d.cols, d.grid_cols);
      }
    }
  }
  std::sort(worst.begin(), worst.end(), worse);
  for (auto& e : worst) e.coords = unravel(e.index, ref.shape);
  d.worst = std::move(worst);
  return d;
}

}  // namespace driftscope::compare_detail
