// compute_stats() and summarize(): one pass over the tensor in fixed chunks of decoded values.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "driftscope/decode.hpp"
#include "numerics/decode_plan.hpp"
#include "numerics/decode_simd.hpp"
#include "numerics/unsigned_zero.hpp"
#include "numerics/decode_stats.hpp"
#include "numerics/sketch.hpp"

namespace driftscope::numerics {

namespace {

// The exponent e with |x| in [2^(e-1), 2^e), clamped so that 2^-e is a normal double; scaling by
// 2^-e is then exact and brings the magnitudes of a chunk into [0.5, 1).
int scale_exponent(double amax) noexcept {
  int e = 0;
  if (amax > 0) std::frexp(amax, &e);
  return std::max(e, -1021);
}

// Brings a partial result held at exponent `from` to exponent `to` >= from. Values shrink by up
// to 2^-2098 here and may underflow: they are then negligible next to the larger partial result.
double rescale(double v, int from, int to, int power) noexcept {
  return from == to ? v : std::ldexp(v, power * (from - to));
}

}  // namespace

void StatsAccumulator::add(std::span<const double> values, double* scratch) noexcept {
  count_ += values.size();
  // The passes below are SIMD kernels (decode_stats_simd.cpp) whose sums use a fixed grouping,
  // so the result is the same on every target and machine.
  //
  // Pass 1: zeros (±0), non-finite values (exponent all ones), and min/max/max|x|. Most chunks
  // have no NaN/Inf; the rare ones that do are compacted into scratch and scanned again.
  const double* f = values.data();
  size_t nf = values.size();
  if (nf == 0) return;
  ChunkScan scan = scan_chunk(f, nf);
  zero_ += scan.zeros;
  if (scan.nonfinite) {
    nf = 0;
    for (double x : values) {
      if (std::isnan(x)) ++nan_;
      else if (std::isinf(x)) ++(x > 0 ? posinf_ : neginf_);
      else scratch[nf++] = x;
    }
    if (nf == 0) return;
    f = scratch;
    scan = scan_chunk(f, nf);
  }
  const double n = static_cast<double>(nf);

  // Scale factors: x * 2^-ex lies in [-1, 1) for the sum of squares (exact scaling).
  const int ex = scale_exponent(scan.amax);
  const double sx = std::ldexp(1.0, -ex);
  if (finite_ == 0) {
    // The pivot: the first chunk's mean. Variance is shift-invariant, and with the pivot near
    // the data's centre the chunk means below are small numbers whose differences (the δ of the
    // merge) carry no cancellation error: 1e9 + noise keeps all digits of its std.
    pivot_ = std::ldexp(sum_scaled(f, nf, sx) / n, ex);
  }
  // Shifted, scaled values y = (x - pivot) * 2^-e with 2^e >= max(|x|, |pivot|), so |y| < 2.
  // Near the top of the double range x - pivot itself can overflow, so such chunks shift
  // quarter-sized values (exact for normals) and add 2 to e. A deviation far below 2^-e only
  // occurs next to ones that dominate M2, so the scaling loses nothing that matters.
  const double bound = std::max(scan.amax, std::fabs(pivot_));
  const bool quarter = bound >= 0x1p1022;
  const double pre = quarter ? 0.25 : 1.0;
  const int ew = scale_exponent(bound * pre);
  const double sw = std::ldexp(1.0, -ew);
  const int e = ew + (quarter ? 2 : 0);
  const double p = pivot_ * pre;

  // Pass 2: sum of squares (for the L2 norm) and the sum of y.
  double sums[2];
  sum_squares_and_shifted(f, nf, sx, pre, p, sw, sums);
  if (finite_ == 0) {
    ss_exp_ = ex;
    ss_ = sums[0];
  } else {
    const int to = std::max(ss_exp_, ex);
    ss_ = rescale(ss_, ss_exp_, to, 2) + rescale(sums[0], ex, to, 2);
    ss_exp_ = to;
  }

  // Pass 3, corrected two-pass variance within the chunk (Chan, Golub, LeVeque 1983):
  // M2 = Σ (y - m)² - (Σ (y - m))² / n, which cancels the rounding error of m itself.
  const double m = sums[1] / n;
  double dev[2];
  sum_deviations(f, nf, pre, p, sw, m, dev);
  const double m2 = std::max(0.0, dev[1] - dev[0] * dev[0] / n);
  const double chunk_min = scan.lo, chunk_max = scan.hi;

  if (finite_ == 0) {
    min_ = chunk_min;
    max_ = chunk_max;
    exp_ = e;
    mean_ = m;
    m2_ = m2;
    finite_ = nf;
    return;
  }
  min_ = std::min(min_, chunk_min);
  max_ = std::max(max_, chunk_max);
  // Bring both partial results to the larger exponent, then merge them (Chan et al.):
  //   mean = mean_a + δ n_b / n,  M2 = M2_a + M2_b + δ² n_a n_b / n,  δ = mean_b - mean_a.
  // In scaled form |mean| <= 2, so δ² and the products stay far from overflow.
  const int to = std::max(exp_, e);
  const double cm = rescale(m, e, to, 1);
  const double cm2 = rescale(m2, e, to, 2);
  mean_ = rescale(mean_, exp_, to, 1);
  m2_ = rescale(m2_, exp_, to, 2);
  exp_ = to;
  const double na = static_cast<double>(finite_);
  const double nt = na + n;
  const double delta = cm - mean_;
  mean_ += delta * (n / nt);
  m2_ += cm2 + delta * delta * (na * n / nt);
  finite_ += nf;
}

TensorStats StatsAccumulator::finish() const noexcept {
  TensorStats s;
  s.count = count_;
  s.nan_count = nan_;
  s.posinf_count = posinf_;
  s.neginf_count = neginf_;
  s.zero_count = zero_;
  s.l2_norm = 0;
  if (finite_ == 0) return s;  // min/max/mean/std stay NaN: there is no finite value
  s.min = unsigned_zero(min_);  // numerics/unsigned_zero.hpp: the same bytes on every target
  s.max = unsigned_zero(max_);
  s.l2_norm = std::ldexp(std::sqrt(ss_), ss_exp_);
  if (min_ == max_) {
    // A constant tensor: report it exactly (std 0), which the silent-failure checks rely on.
    s.mean = s.min;
    s.std = 0;
    return s;
  }
  double mean = pivot_ + std::ldexp(mean_, exp_);
  if (!std::isfinite(mean)) mean = 2 * (pivot_ / 2 + std::ldexp(mean_, exp_ - 1));
  s.mean = std::clamp(mean, min_, max_);
  s.std = std::ldexp(std::sqrt(m2_ / static_cast<double>(finite_)), exp_);
  return s;
}

namespace {

// Lemire's fastmod for 32-bit operands: a % d without a division, exact for every a and d > 0
// ("Faster remainder by direct computation", 2019). Gives the bucket (h >> 32) % dim.
struct FastMod32 {
  __extension__ typedef unsigned __int128 u128;
  uint64_t m;
  uint32_t d;
  explicit FastMod32(uint32_t divisor) : m(~uint64_t{0} / divisor + 1), d(divisor) {}
  uint32_t operator()(uint32_t a) const noexcept {
    const uint64_t low = m * a;
    return static_cast<uint32_t>((static_cast<u128>(low) * d) >> 64);
  }
};

template <class OnChunk>
Result<TensorStats> chunked_pass(const TensorInfo& info, std::span<const std::byte> payload,
                                 OnChunk&& on_chunk) {
  auto plan = make_decode_plan(info, payload);
  if (!plan) return std::move(plan).error();
  std::vector<double> buf(2 * kDecodeChunk);
  double* values = buf.data();
  double* scratch = buf.data() + kDecodeChunk;
  StatsAccumulator acc;
  for (uint64_t first = 0; first < plan->numel; first += kDecodeChunk) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kDecodeChunk, plan->numel - first));
    DRIFTSCOPE_TRY(decode_range(*plan, first, n, values));
    on_chunk(first, std::span<const double>(values, n));
    acc.add(std::span<const double>(values, n), scratch);
  }
  return acc.finish();
}

}  // namespace

}  // namespace driftscope::numerics

namespace driftscope {

Result<TensorStats> compute_stats(const TensorInfo& info, std::span<const std::byte> payload) {
  return numerics::chunked_pass(info, payload, [](uint64_t, std::span<const double>) {});
}

Result<Summary> summarize(const TensorInfo& info, std::span<const std::byte> payload, uint32_t dim,
                          uint64_t seed) {
  if (dim > numerics::kMaxProjectionDim)
    return make_error(Errc::invalid_argument,
                      fmt::format("projection dim {} is above the limit {} (docs/format.md §6)",
                                  dim, numerics::kMaxProjectionDim));
  // CountSketch (docs/light-mode.md §2): p[bucket(i)] += sign(i) * x_i over finite x_i, in
  // float64 and in element order, so every platform produces the same floats.
  std::vector<double> acc(dim, 0.0);
  const numerics::FastMod32 mod(dim == 0 ? 1 : dim);
  auto stats = numerics::chunked_pass(info, payload, [&](uint64_t first, std::span<const double> v) {
    if (dim == 0) return;
    double* p = acc.data();
    for (size_t j = 0; j < v.size(); ++j) {
      // Branch-free on the data: a branch on the random sign mispredicts half the time (2.5x
      // slower). The sign is a flip of the sign bit (exactly -x); a non-finite value becomes
      // -0.0, the one addend that leaves every sum, ±0 included, unchanged.
      const uint64_t h = numerics::splitmix64(seed + first + j);
      uint64_t bits = std::bit_cast<uint64_t>(v[j]) ^ ((h & 1) << 63);
      bits = ((bits >> 52) & 0x7FF) == 0x7FF ? 0x8000000000000000ull : bits;
      p[mod(static_cast<uint32_t>(h >> 32))] += std::bit_cast<double>(bits);
    }
  });
  if (!stats) return std::move(stats).error();
  Summary s;
  s.stats = *stats;
  s.projection_seed = seed;
  s.projection_kind = numerics::kProjectionCountSketch;
  s.projection.resize(dim);
  for (uint32_t k = 0; k < dim; ++k) s.projection[k] = static_cast<float>(acc[k]);
  return s;
}

}  // namespace driftscope
