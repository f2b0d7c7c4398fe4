// compute_stats() and summarize(): one pass over the tensor in fixed chunks of decoded values.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "driftscope/decode.hpp"
#include "numerics/decode_plan.hpp"
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

// Four running values, combined in a fixed order.
struct Lanes4 {
  double v[4];
  explicit Lanes4(double init) noexcept : v{init, init, init, init} {}
  double total() const noexcept { return (v[0] + v[1]) + (v[2] + v[3]); }
  double min() const noexcept { return std::min(std::min(v[0], v[1]), std::min(v[2], v[3])); }
  double max() const noexcept { return std::max(std::max(v[0], v[1]), std::max(v[2], v[3])); }
};

// Calls f(j, x[i]) with j = i % 4 for every element, in blocks of four.
template <class F>
inline void for_each4(const double* x, size_t n, F&& f) noexcept {
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    f(0, x[i]);
    f(1, x[i + 1]);
    f(2, x[i + 2]);
    f(3, x[i + 3]);
  }
  for (int j = 0; i < n; ++i, ++j) f(j, x[i]);
}

}  // namespace

void StatsAccumulator::add(std::span<const double> values, double* scratch) noexcept {
  count_ += values.size();
  // Pass 1, integer only: how many values are NaN/Inf (exponent all ones) and how many are ±0.
  // Most chunks have no non-finite value and are then used in place.
  uint64_t nonfinite = 0, zeros = 0;
  for (double x : values) {
    const uint64_t b = std::bit_cast<uint64_t>(x);
    nonfinite += ((b >> 52) & 0x7FF) == 0x7FF;
    zeros += (b << 1) == 0;
  }
  zero_ += zeros;
  const double* f = values.data();
  size_t nf = values.size();
  if (nonfinite) {
    nf = 0;
    for (double x : values) {
      if (std::isnan(x)) ++nan_;
      else if (std::isinf(x)) ++(x > 0 ? posinf_ : neginf_);
      else scratch[nf++] = x;
    }
    f = scratch;
  }
  if (nf == 0) return;
  const double n = static_cast<double>(nf);

  // Four independent accumulators per quantity in every loop below: they break the add latency
  // chain (about 4x faster), and their fixed combine order keeps the result machine-independent.
  Lanes4 lo(f[0]), hi(f[0]), amax(0.0);
  for_each4(f, nf, [&](int j, double x) {
    lo.v[j] = std::min(lo.v[j], x);
    hi.v[j] = std::max(hi.v[j], x);
    amax.v[j] = std::max(amax.v[j], std::fabs(x));
  });
  const double chunk_min = lo.min(), chunk_max = hi.max(), chunk_amax = amax.max();

  // Sum of squares for the L2 norm, on x scaled by 2^-ex into [0.5, 1) (exact scaling).
  const int ex = scale_exponent(chunk_amax);
  const double sx = std::ldexp(1.0, -ex);
  Lanes4 ss(0.0), sum(0.0);
  for_each4(f, nf, [&](int j, double x) {
    const double y = x * sx;
    ss.v[j] += y * y;
    sum.v[j] += y;
  });
  if (finite_ == 0) {
    // The pivot: the first chunk's mean. Variance is shift-invariant, and with the pivot near
    // the data's centre the chunk means below are small numbers whose differences (the δ of the
    // merge) carry no cancellation error: 1e9 + noise keeps all digits of its std.
    pivot_ = std::ldexp(sum.total() / n, ex);
    ss_exp_ = ex;
    ss_ = ss.total();
  } else {
    const int to = std::max(ss_exp_, ex);
    ss_ = rescale(ss_, ss_exp_, to, 2) + rescale(ss.total(), ex, to, 2);
    ss_exp_ = to;
  }

  // Shifted, scaled values y = (x - pivot) * 2^-e with 2^e >= max(|x|, |pivot|), so |y| <= 2.
  // Near the top of the double range x - pivot itself can overflow, so such chunks shift
  // quarter-sized values (exact for normals) and add 2 to e. A deviation far below 2^-e only
  // occurs next to ones that dominate M2, so the scaling loses nothing that matters.
  const double bound = std::max(chunk_amax, std::fabs(pivot_));
  const bool quarter = bound >= 0x1p1022;
  const double pre = quarter ? 0.25 : 1.0;
  const int ew = scale_exponent(bound * pre);
  const double sw = std::ldexp(1.0, -ew);
  const int e = ew + (quarter ? 2 : 0);
  const double p = pivot_ * pre;
  Lanes4 wsum(0.0);
  for_each4(f, nf, [&](int j, double x) { wsum.v[j] += (x * pre - p) * sw; });
  // Corrected two-pass variance within the chunk (Chan, Golub, LeVeque 1983):
  // M2 = Σ (y - m)² - (Σ (y - m))² / n, which cancels the rounding error of m itself.
  const double m = wsum.total() / n;
  Lanes4 dev(0.0), dev2(0.0);
  for_each4(f, nf, [&](int j, double x) {
    const double d = (x * pre - p) * sw - m;
    dev.v[j] += d;
    dev2.v[j] += d * d;
  });
  const double dsum = dev.total();
  const double m2 = std::max(0.0, dev2.total() - dsum * dsum / n);

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
  s.min = min_;
  s.max = max_;
  s.l2_norm = std::ldexp(std::sqrt(ss_), ss_exp_);
  if (min_ == max_) {
    // A constant tensor: report it exactly (std 0), which the silent-failure checks rely on.
    s.mean = min_;
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
    for (size_t j = 0; j < v.size(); ++j) {
      const double x = v[j];
      if (!std::isfinite(x)) continue;
      const uint64_t h = numerics::splitmix64(seed + first + j);
      const double sx = (h & 1) ? -x : x;
      acc[mod(static_cast<uint32_t>(h >> 32))] += sx;
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
