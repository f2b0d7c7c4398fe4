// The light-mode estimator (docs/light-mode.md §4). With S the CountSketch map (k buckets):
//   E[<Sa,Sb>] = <a,b>,  Var[<Sa,Sb>] = (|a|²|b|² + <a,b>² - 2 Σ a_i² b_i²) / k
// and, since S is linear, S(a-b) = Sa - Sb, so |Sa-Sb|² estimates |a-b|² with
//   Var[|S(a-b)|²] = 2 (|a-b|⁴ - Σ (a_i-b_i)⁴) / k.
// Two unbiased estimators of <a,b> follow: the direct P = <Sa,Sb> and the polarised
// D = (|a|² + |b|² - |Sa-Sb|²) / 2, which uses the exact norms from the stats. D's error scales
// with |a-b|², P's with |a||b|: for nearly equal tensors (the case compare cares about) D is
// orders of magnitude better. We take whichever has the smaller variance bound.
#include "numerics/sketch.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace driftscope::numerics {

namespace {
Error incomparable(std::string what) { return make_error(Errc::incomparable, std::move(what)); }
}  // namespace

Result<SketchEstimate> estimate_from_sketches(const Summary& a, const Summary& b) {
  if (a.projection_kind != kProjectionCountSketch || b.projection_kind != kProjectionCountSketch)
    return incomparable(fmt::format("projection kinds {} and {}: only kind {} (CountSketch) is "
                                    "known",
                                    a.projection_kind, b.projection_kind,
                                    kProjectionCountSketch));
  if (a.projection_seed != b.projection_seed)
    return incomparable(fmt::format("projection seeds differ (0x{:x} vs 0x{:x})",
                                    a.projection_seed, b.projection_seed));
  if (a.projection.size() != b.projection.size())
    return incomparable(fmt::format("projection dims differ ({} vs {})", a.projection.size(),
                                    b.projection.size()));
  if (a.projection.empty() || a.projection.size() > kMaxProjectionDim)
    return incomparable(fmt::format("projection dim {} is outside 1..{}", a.projection.size(),
                                    kMaxProjectionDim));
  if (a.stats.count != b.stats.count)
    return incomparable(fmt::format("element counts differ ({} vs {})", a.stats.count,
                                    b.stats.count));
  double na = a.stats.l2_norm;
  double nb = b.stats.l2_norm;
  if (!std::isfinite(na) || !std::isfinite(nb) || na < 0 || nb < 0)
    return incomparable(fmt::format("L2 norms {} and {} are not finite", na, nb));
  for (size_t i = 0; i < a.projection.size(); ++i)
    if (!std::isfinite(a.projection[i]) || !std::isfinite(b.projection[i]))
      return incomparable(fmt::format("projection value {} is not finite (values beyond the "
                                      "float range)",
                                      i));

  SketchEstimate e;
  if (na == 0 || nb == 0) {
    // Same conventions as the exact metrics (docs/metrics.md): two zero tensors are equal, a
    // zero against a non-zero one is orthogonal. These follow from the norms alone: no error.
    e.cosine = (na == 0 && nb == 0) ? 1.0 : 0.0;
    e.rel_l2 = na == 0 ? (nb == 0 ? 0.0 : std::numeric_limits<double>::infinity()) : 1.0;
    return e;
  }

  // Scale everything by max(|a|,|b|) so that squares of f64-range norms cannot overflow.
  const double s = std::max(na, nb);
  na /= s;
  nb /= s;
  const double k = static_cast<double>(a.projection.size());
  double q = 0, p = 0, ssa = 0, ssb = 0;
  for (size_t i = 0; i < a.projection.size(); ++i) {
    const double x = static_cast<double>(a.projection[i]);
    const double y = static_cast<double>(b.projection[i]);
    const double d = (x - y) / s;  // x - y is exact in double for floats of similar magnitude
    q += d * d;
    p += (x / s) * (y / s);
    ssa += (x / s) * (x / s);
    ssb += (y / s) * (y / s);
  }
  // Each stored bucket carries a float rounding error <= 2^-24 |p_k|, so |Sa-Sb| is off by at
  // most 2^-24 (|Sa| + |Sb|) and <Sa,Sb> by at most 2^-23 |Sa||Sb|: a deterministic floor added
  // to the standard errors. (The float64 accumulation of the sketch is far below this.)
  const double f = 0x1p-24 * (std::sqrt(ssa) + std::sqrt(ssb));
  const double ab = na * nb;
  const double var_polar = q * q / (2 * k);
  const double var_direct = (na * na * nb * nb + p * p) / k;

  double dot, sd_dot, floor_cos;
  if (var_polar <= var_direct) {
    dot = (na * na + nb * nb - q) / 2;
    sd_dot = std::sqrt(var_polar);
    floor_cos = (2 * std::sqrt(q) * f + f * f) / (2 * ab);
    // r = |Sa-Sb| / |a|; Var[r²] <= 2 r⁴ / k, so by the delta method sd(r) = r / sqrt(2k).
    e.rel_l2 = std::sqrt(q) / na;
    e.rel_l2_stderr = e.rel_l2 / std::sqrt(2 * k) + f / na;
  } else {
    dot = p;
    sd_dot = std::sqrt(var_direct);
    floor_cos = 0x1p-23 * std::sqrt(ssa * ssb) / ab;
    // r² = (|a|² + |b|² - 2<a,b>) / |a|², so sd(r²) = 2 sd(<a,b>) / |a|²; near r = 0 the delta
    // method breaks down and |r̂ - r| <= sqrt(|r̂² - r²|) takes over.
    const double r2 = (na * na + nb * nb - 2 * dot) / (na * na);
    const double sd_r2 = 2 * (sd_dot + 0x1p-23 * std::sqrt(ssa * ssb)) / (na * na);
    e.rel_l2 = std::sqrt(std::max(0.0, r2));
    e.rel_l2_stderr = sd_r2 / std::max(2 * e.rel_l2, std::sqrt(sd_r2));
  }
  e.cosine = std::clamp(dot / ab, -1.0, 1.0);
  e.cosine_stderr = sd_dot / ab + floor_cos;
  return e;
}

}  // namespace driftscope::numerics
