// The fused kernels of raw float formats (pair_kernel.hpp, ChunkRawFn): reading f32, f16 or bf16
// payload bytes in place, widening in registers and measuring the ULP distance from the same loads
// must give exactly what decoding to float64 buffers, the float64 kernel and the separate ULP pass
// give, on every target.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/crc32.hpp"
#include "driftscope/decode.hpp"
#include "numerics/pair_kernel.hpp"
#include "numerics/pair_metrics.hpp"
#include "pair_test_util.hpp"

namespace driftscope::numerics {
namespace {

using kernel::ChunkPartial;
using kernel::RawFormat;
using testing::bits;
using testing::expect_identical;

struct RawForceGuard {
  ~RawForceGuard() { force_target(""); }
};

struct Format {
  RawFormat f;
  DType dtype;
  const char* name;
  size_t size;
  uint32_t sign;
  double max;  // largest finite value
};
const Format kFormats[] = {
    {RawFormat::f32, DType::f32, "f32", 4, 0x80000000u, std::numeric_limits<float>::max()},
    {RawFormat::f16, DType::f16, "f16", 2, 0x8000u, 65504.0},
    {RawFormat::bf16, DType::bf16, "bf16", 2, 0x8000u, 0x1.FEp127},
};

// Bit patterns of the format for a value (rounded to nearest).
uint32_t encode(const Format& f, double v) {
  switch (f.f) {
    case RawFormat::f32: return std::bit_cast<uint32_t>(static_cast<float>(v));
    case RawFormat::f16: return double_to_f16(v);
    default: return double_to_bf16(v);
  }
}
double decode(const Format& f, uint32_t b) {
  switch (f.f) {
    case RawFormat::f32: return std::bit_cast<float>(b);
    case RawFormat::f16: return f16_to_double(static_cast<uint16_t>(b));
    default: return bf16_to_double(static_cast<uint16_t>(b));
  }
}

// Perturbed pairs of bit patterns; adversarial ones mix NaN, ±Inf, ±0, subnormals, opposite signs
// and the largest finite values.
void fill_bits(const Format& f, bool adversarial, size_t n, uint64_t seed, std::vector<uint32_t>& r,
               std::vector<uint32_t>& c) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  std::uniform_int_distribution<int> pick(0, 19);
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  r.resize(n);
  c.resize(n);
  for (size_t i = 0; i < n; ++i) {
    double a = g(rng), b = a * (1.0 + 1e-2 * g(rng));
    if (adversarial) {
      switch (pick(rng)) {
        case 0: a = nan; break;
        case 1: b = -nan; break;
        case 2: a = b = nan; break;
        case 3: a = inf; b = pick(rng) < 10 ? inf : -inf; break;
        case 4: b = -inf; break;
        case 5: a = -0.0; b = 0.0; break;
        case 6: a = 1e-45 * pick(rng); b = -a; break;  // subnormal or zero in every format
        case 7: a = f.max; b = -f.max; break;
        case 8: a = b = f.max; break;
        case 9: b = -a; break;
        default: break;
      }
    }
    r[i] = encode(f, a);
    c[i] = encode(f, b);
    if (adversarial && pick(rng) == 0) r[i] |= 0x1;  // NaN payloads, odd mantissas
  }
}

std::vector<std::byte> to_bytes(const Format& f, const std::vector<uint32_t>& v, size_t offset) {
  std::vector<std::byte> out(offset + v.size() * f.size);
  for (size_t i = 0; i < v.size(); ++i) std::memcpy(out.data() + offset + i * f.size, &v[i], f.size);
  return out;
}

// The float64 buffers the float64 kernels read: the values decoded, zero past them (a chunk's
// last group of lanes is read whole).
struct Decoded {
  alignas(64) double r[kernel::kChunk + kernel::kLanes] = {};
  alignas(64) double c[kernel::kChunk + kernel::kLanes] = {};
};
std::unique_ptr<Decoded> decoded(const Format& f, const std::vector<uint32_t>& r, const std::vector<uint32_t>& c) {
  auto d = std::make_unique<Decoded>();
  for (size_t i = 0; i < r.size(); ++i) {
    d->r[i] = decode(f, r[i]);
    d->c[i] = decode(f, c[i]);
  }
  return d;
}

// Independent ULP distance (docs/metrics.md §5), one element at a time in 64-bit integers.
uint64_t ulp_direct(const Format& f, const std::vector<uint32_t>& r, const std::vector<uint32_t>& c) {
  const auto ord = [&](uint32_t b) {
    const auto mag = static_cast<int64_t>(b & (f.sign - 1));
    return (b & f.sign) ? -mag : mag;
  };
  uint64_t best = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    if (!std::isfinite(decode(f, r[i])) || !std::isfinite(decode(f, c[i]))) continue;
    const int64_t d = ord(r[i]) - ord(c[i]);
    best = std::max<uint64_t>(best, static_cast<uint64_t>(d < 0 ? -d : d));
  }
  return best;
}

TEST(PairRawFused, EveryTargetMatchesTheFloat64KernelPerChunk) {
  const std::vector<size_t> sizes = {0, 1, 5, 7, 8, 9, 15, 16, 17, 63, 100, 1001, 4095, 4096};
  kernel::Params params{1e-6, 1e-4, 1e-12, false};
  for (const Format& f : kFormats) {
    for (bool adversarial : {false, true}) {
      for (size_t n : sizes) {
        std::vector<uint32_t> r, c;
        fill_bits(f, adversarial, n, 77 + n, r, c);
        // Payloads at an odd byte offset and ending exactly at n: the kernel reads in place.
        const auto rs = to_bytes(f, r, 1), cs = to_bytes(f, c, 3);
        const auto dec = decoded(f, r, c);
        const double* rb = dec->r;
        const double* cb = dec->c;
        const uint64_t want_ulp = ulp_direct(f, r, c);
        for (const auto& t : kernel::targets()) {
          SCOPED_TRACE(t + " " + f.name + " n=" + std::to_string(n) + (adversarial ? " adversarial" : ""));
          ChunkPartial want, got;
          kernel::by_name(t)(rb, cb, n, params, &want);
          kernel::by_name_raw(t, f.f)(rs.data() + 1, cs.data() + 3, n, params, &got);
          EXPECT_EQ(0, std::memcmp(got.lanes, want.lanes, sizeof got.lanes)) << "lane sums differ";
          EXPECT_EQ(bits(got.max_abs), bits(want.max_abs));
          EXPECT_EQ(bits(got.max_rel), bits(want.max_rel));
          EXPECT_EQ(got.min_ref, want.min_ref);
          EXPECT_EQ(got.max_ref, want.max_ref);
          EXPECT_EQ(got.min_cand, want.min_cand);
          EXPECT_EQ(got.max_cand, want.max_cand);
          EXPECT_EQ(got.nonfinite, want.nonfinite);
          EXPECT_EQ(got.nan_ref, want.nan_ref);
          EXPECT_EQ(got.nan_cand, want.nan_cand);
          EXPECT_EQ(got.nan_both, want.nan_both);
          EXPECT_EQ(got.inf_ref, want.inf_ref);
          EXPECT_EQ(got.inf_cand, want.inf_cand);
          EXPECT_EQ(got.inf_same, want.inf_same);
          EXPECT_EQ(got.zero_ref, want.zero_ref);
          EXPECT_EQ(got.zero_cand, want.zero_cand);
          EXPECT_EQ(got.mismatch, want.mismatch);
          EXPECT_EQ(got.first_mismatch, want.first_mismatch);
          EXPECT_EQ(got.max_ulp, want_ulp);
        }
        params.nan_equal = !params.nan_equal;
      }
    }
    // The extreme distance: the largest finite values of opposite signs are twice their
    // magnitude bits apart (beyond int32 for f32).
    const std::vector<uint32_t> r = {encode(f, f.max)}, c = {encode(f, -f.max)};
    const auto rs = to_bytes(f, r, 0), cs = to_bytes(f, c, 0);
    for (const auto& t : kernel::targets()) {
      ChunkPartial got;
      kernel::by_name_raw(t, f.f)(rs.data(), cs.data(), 1, params, &got);
      EXPECT_EQ(got.max_ulp, 2 * uint64_t{r[0]}) << t << " " << f.name;
    }
  }
}

// The kernel takes the ULP distance of an all-finite vector as |bits(r) - bits(c)| when every lane
// has one sign on both sides, and the general form otherwise. Finite pairs only, so the paths are
// told apart by signs alone: vectors of one sign up to the extremes (the largest finite value
// against +0 and -0), and vectors where a single lane changes sign, at ±0 (distance 0) and at the
// largest distance of the chunk. Each case holds the chunk's maximum in the lane that decides it.
TEST(PairRawFused, UlpOfFiniteVectorsOnEitherPath) {
  kernel::Params params{1e-6, 1e-4, 1e-12, false};
  for (const Format& f : kFormats) {
    const double tiny = decode(f, 1);  // the smallest positive subnormal
    struct Case {
      const char* what;
      double r, c;  // at lane 3 of vector 5; every other pair is a small same-sign perturbation
    };
    const Case cases[] = {
        {"one sign, largest distance", f.max, 0.0},
        {"one sign, negative", -f.max, -0.0},
        {"one sign, subnormals", -tiny, -f.max},
        {"sign change at the largest distance", f.max / 2, -tiny},
        {"sign change, negative first", -f.max / 2, tiny},
        {"+0 against -0", 0.0, -0.0},
    };
    for (const Case& k : cases) {
      const size_t n = 200;
      std::vector<uint32_t> r, c;
      fill_bits(f, false, n, 11, r, c);
      r[5 * 8 + 3] = encode(f, k.r);
      c[5 * 8 + 3] = encode(f, k.c);
      const auto rs = to_bytes(f, r, 0), cs = to_bytes(f, c, 0);
      const uint64_t want = ulp_direct(f, r, c);
      for (const auto& t : kernel::targets()) {
        ChunkPartial got;
        kernel::by_name_raw(t, f.f)(rs.data(), cs.data(), n, params, &got);
        EXPECT_EQ(got.max_ulp, want) << t << " " << f.name << " " << k.what;
        EXPECT_EQ(got.nonfinite, 0u) << t << " " << f.name << " " << k.what;
      }
    }
  }
}

// On AVX-512 an all-finite stretch of a chunk goes 16 elements at a time (pair_kernel.cpp,
// State::step_finite2): the ULP distance, zero counts and the test for a new max_rel_diff are
// taken from r·c and the ULP distance, and only vectors where those say so take the general
// forms. One rare pair at a time in chunks of ordinary pairs of one sign, at the edges of the
// 8- and 16-element groups and at the end of the stretch, must give the bits of the float64
// kernel (decoded values) and of the scalar reference on every target: a NaN (the chunk is
// redone), ±0, opposite signs, and subnormal references whose relative difference is far above
// the chunk's (a few ULPs apart: only r·c tells them from normal values); and, with the running
// maximum seeded at 3.5, a pair whose candidate is 5 times its reference (the ULP distance that
// decides is 2 binades, not 3).
TEST(PairRawFused, RarePairsInFiniteStretches) {
  const size_t n = 4096 - 5;  // 510 groups of 8 in pairs, one more group, then a tail of 3
  for (const Format& f : kFormats) {
    const double sub = decode(f, 3), sub2 = decode(f, 5);  // subnormals, 2 ULPs apart
    const double nan = std::numeric_limits<double>::quiet_NaN();
    struct Case {
      const char* what;
      double r, c;
      double floor;  // Params::max_rel_floor
      bool decides;  // the pair holds the chunk's maximum relative difference
    };
    const Case cases[] = {
        {"NaN", nan, 1.0, 0, false},
        {"NaN candidate", 0.5, nan, 0, false},
        {"zero reference", 0.0, 1e-3, 0, false},
        {"both zero", -0.0, 0.0, 0, false},
        {"opposite signs", 0.25, -0.25, 0, false},
        {"subnormal reference", sub, sub2, 0, true},
        {"subnormal, negative", -sub2, -sub, 0, true},
        {"large relative difference", 1.0, 1.5, 0, true},
        {"5 times the reference over a floor of 3.5", -1.0, -5.0, 3.5, true},
    };
    for (const Case& k : cases) {
      // rel_eps below every subnormal
      const kernel::Params params{1e-6, 1e-4, 1e-300, false, k.floor};
      // Every position of the first two pairs of groups: a stretch takes two vectors of kN
      // elements, adjacent on AVX-512 (kN = 8) and a group apart on AVX2 (kN = 4) and SSE4
      // (kN = 2), whose sweeps each take one vector position. 4079: the last of the stretches;
      // 4087: the group after them; 4090: the tail.
      std::vector<size_t> where(32);
      std::iota(where.begin(), where.end(), size_t{0});
      where.insert(where.end(), {2040, 2047, 2055, 4079, 4087, 4090});
      // quiet: every other pair equal, so the case is the chunk's only mismatch (if any) and
      // first_mismatch is its position.
      for (size_t q = 0; q < 2 * where.size(); ++q) {
        const bool quiet = q >= where.size();
        const size_t at = where[q % where.size()];
        std::vector<uint32_t> r, c;
        fill_bits(f, false, n, 3 + at, r, c);
        if (quiet) c = r;
        r[at] = encode(f, k.r);
        c[at] = encode(f, k.c);
        const auto rs = to_bytes(f, r, 0), cs = to_bytes(f, c, 0);
        const auto dec = decoded(f, r, c);
        const double* rb = dec->r;
        const double* cb = dec->c;
        ChunkPartial ref;
        kernel::chunk_scalar(rb, cb, n, params, &ref);
        // The case decides the chunk's maximum relative difference (and so is not masked by it).
        if (k.decides) {
          ASSERT_EQ(bits(ref.max_rel), bits(std::abs(rb[at] - cb[at]) / std::max(std::abs(rb[at]), 1e-300)))
              << f.name << " " << k.what;
        }
        for (const auto& t : kernel::targets()) {
          SCOPED_TRACE(t + " " + f.name + " " + k.what + " at " + std::to_string(at) +
                       (quiet ? " quiet" : ""));
          ChunkPartial want, got;
          kernel::by_name(t)(rb, cb, n, params, &want);
          kernel::by_name_raw(t, f.f)(rs.data(), cs.data(), n, params, &got);
          for (const ChunkPartial* w : {&want, &ref}) {
            EXPECT_EQ(0, std::memcmp(got.lanes, w->lanes, sizeof got.lanes)) << "lane sums differ";
            EXPECT_EQ(bits(got.max_abs), bits(w->max_abs));
            EXPECT_EQ(bits(got.max_rel), bits(w->max_rel));
            EXPECT_EQ(got.min_ref, w->min_ref);
            EXPECT_EQ(got.max_ref, w->max_ref);
            EXPECT_EQ(got.min_cand, w->min_cand);
            EXPECT_EQ(got.max_cand, w->max_cand);
            EXPECT_EQ(got.nonfinite, w->nonfinite);
            EXPECT_EQ(got.nan_ref, w->nan_ref);
            EXPECT_EQ(got.nan_cand, w->nan_cand);
            EXPECT_EQ(got.zero_ref, w->zero_ref);
            EXPECT_EQ(got.zero_cand, w->zero_cand);
            EXPECT_EQ(got.mismatch, w->mismatch);
            EXPECT_EQ(got.first_mismatch, w->first_mismatch);
          }
          EXPECT_EQ(got.max_ulp, ulp_direct(f, r, c));
        }
      }
    }
  }
}

// The ULP bound that skips the float64 test for a new max_rel (pair_kernel.cpp, update_uthr), at
// its edge in each format's own units. Every background pair is 10 ULPs above r = ±bg, each
// lane's maximum q = 10 ULPs of bg relative, and one pair at the bottom of a binade is `off` ULPs
// off, the smallest distance whose relative difference beats q:
// - bg = 1, off = 11: its ULP distance lies within a factor (1 + q) of the threshold, so a
//   threshold even twice too large (in float16, half a float32 unit's worth of its finer units
//   short of the truth) skips it and misses the chunk's maximum;
// - bg = 1.5, off = 7: q is 6.67 ULPs of the bottom of a binade and the threshold floor(6.67 /
//   (1 + q)) = 6, so the pair is one unit above it: a threshold one unit too large (in the
//   16-bit formats, one of their own units, as ulp_wide_over counts them) skips it. Only the
//   first 16 pairs set the maxima here and every later one but this is equal (c = r), so no
//   lane beside it sends its vectors to the float64 test.
TEST(PairRawFused, MaxRelUlpBoundAtItsEdge) {
  const size_t n = 4096 - 5;
  struct Edge {
    double bg;
    uint32_t off;
  };
  for (const Format& f : kFormats) {
    for (const Edge e : {Edge{1.0, 11}, Edge{1.5, 7}}) {
      const bool tight = e.bg != 1.0;
      for (double base : {1.0, -1.0, 0.25}) {
        for (size_t at : {size_t{0}, size_t{9}, size_t{16}, size_t{2047}, size_t{4079}, size_t{4087}, size_t{4090}}) {
          if (tight && at < 16) continue;
          std::vector<uint32_t> r(n), c(n);
          for (size_t i = 0; i < n; ++i) {
            r[i] = encode(f, i % 2 ? e.bg : -e.bg);
            c[i] = r[i] + (tight && i >= 16 ? 0 : 10);  // away from zero on either sign: |c| > |r|
          }
          r[at] = encode(f, base * 2);  // 2, -2, 0.5: powers of two, the bottom of their binades
          c[at] = r[at] + e.off;
          const auto rs = to_bytes(f, r, 0), cs = to_bytes(f, c, 0);
          const auto dec = decoded(f, r, c);
          const double* rb = dec->r;
          const double* cb = dec->c;
          const kernel::Params params{1e-6, 1e-4, 1e-300, false, 0};
          ChunkPartial ref;
          kernel::chunk_scalar(rb, cb, n, params, &ref);
          ASSERT_EQ(bits(ref.max_rel), bits(std::abs(rb[at] - cb[at]) / std::abs(rb[at]))) << f.name;
          for (const auto& t : kernel::targets()) {
            SCOPED_TRACE(t + " " + f.name + " bg " + std::to_string(e.bg) + " base " + std::to_string(base) +
                         " at " + std::to_string(at));
            ChunkPartial got;
            kernel::by_name_raw(t, f.f)(rs.data(), cs.data(), n, params, &got);
            EXPECT_EQ(bits(got.max_rel), bits(ref.max_rel));
          }
        }
      }
    }
  }
}

// The position of the largest |r - c| is looked up once per task, in the last chunk that raised
// the maximum (compare_pair, absorb_chunk's defer_locate): it is the first element attaining it,
// a tie in a later chunk or later in the same chunk loses, and it matches the decoding path.
TEST(PairRawFused, MaxAbsPositionIsTheFirstAttainingElement) {
  const size_t chunk = kernel::kChunk;
  const size_t n = 5 * chunk + 17;  // one task, a ragged last chunk
  std::vector<uint64_t> identity(n);
  for (size_t i = 0; i < n; ++i) identity[i] = i;
  for (const Format& f : kFormats) {
    std::vector<uint32_t> r(n), c(n);
    for (size_t i = 0; i < n; ++i) {
      r[i] = encode(f, 1.0);
      c[i] = encode(f, 1.0);
    }
    // Rising maxima: chunk 0, then chunk 2 (twice), tied in chunk 3, smaller in chunk 4.
    const std::pair<size_t, double> at[] = {{100, 1.25},           {chunk + 9, 1.5},
                                            {2 * chunk + 700, 2.0}, {2 * chunk + 900, 2.0},
                                            {3 * chunk + 1, 2.0},   {4 * chunk + 3, 1.75},
                                            {5 * chunk + 16, 2.0}};
    for (const auto& [i, v] : at) c[i] = encode(f, v);
    const auto a = to_bytes(f, r, 0), b = to_bytes(f, c, 0);
    TensorInfo info;
    info.name = "t";
    info.dtype = f.dtype;
    info.shape = {n};
    RawForceGuard guard;
    for (const auto& t : available_targets()) {
      ASSERT_TRUE(force_target(t));
      PairOptions o;
      auto fused = compare_pair(info, a, info, b, o);
      o.cand_index = identity;
      auto decoded = compare_pair(info, a, info, b, o);
      ASSERT_TRUE(fused.ok() && decoded.ok());
      EXPECT_EQ(fused->max_abs_index, static_cast<int64_t>(2 * chunk + 700)) << t << " " << f.name;
      EXPECT_EQ(fused->max_abs_diff, 1.0) << t << " " << f.name;
      expect_identical(*fused, *decoded, t + " " + f.name);
    }
  }
}

// Whole tensors: the fused path (a plain pair) against the decoding path, which an identity
// candidate permutation selects; checksums fused into the same tasks.
TEST(PairRawFused, WholeTensorEqualsTheDecodingPath) {
  RawForceGuard guard;
  const size_t n = (size_t{1} << 18) + 4099;  // two tasks, a ragged last chunk
  std::vector<uint64_t> identity(n);
  for (size_t i = 0; i < n; ++i) identity[i] = i;
  for (const Format& f : kFormats) {
    for (bool adversarial : {false, true}) {
      std::vector<uint32_t> r, c;
      fill_bits(f, adversarial, n, adversarial ? 5 : 6, r, c);
      TensorInfo ri, ci;
      ri.name = ci.name = "t";
      ri.dtype = ci.dtype = f.dtype;
      ri.shape = ci.shape = {n};
      const auto a = to_bytes(f, r, 0);
      const auto b = to_bytes(f, c, 1);  // the candidate one byte into a buffer: an unaligned map
      const std::span<const std::byte> ref(a), cand(b.data() + 1, b.size() - 1);
      PairOptions o;
      o.rtol = 1e-3;
      o.atol = 1e-5;
      o.crc_ref = o.crc_cand = true;
      for (const auto& t : available_targets()) {
        ASSERT_TRUE(force_target(t));
        o.cand_index = {};
        auto fused = compare_pair(ri, ref, ci, cand, o);
        o.cand_index = identity;
        auto decoded = compare_pair(ri, ref, ci, cand, o);
        ASSERT_TRUE(fused.ok()) << fused.error().to_string();
        ASSERT_TRUE(decoded.ok()) << decoded.error().to_string();
        const std::string what = t + " " + f.name + (adversarial ? " adversarial" : " normal");
        expect_identical(*fused, *decoded, what);
        EXPECT_EQ(fused->max_ulp, static_cast<int64_t>(ulp_direct(f, r, c))) << what;
        EXPECT_EQ(fused->payload_crc_ref, detail::crc32(0, ref)) << what;
        EXPECT_EQ(fused->payload_crc_cand, detail::crc32(0, cand)) << what;
        EXPECT_EQ(decoded->payload_crc_cand, detail::crc32(0, cand)) << what;
        EXPECT_GT(fused->max_ulp, 0) << what;
        if (adversarial) EXPECT_GT(fused->nan_ref, 0u) << what;
      }
    }
  }
}

// compare_pair seeds each chunk's max_rel with the maximum of the chunks before it
// (Params::max_rel_floor), so that the kernel's test for a new maximum rarely fires. The chunk
// then reports max(floor, its own maximum) and everything else unchanged, on every target, the
// scalar reference included.
TEST(PairRawFused, MaxRelFloorOnlyRaisesMaxRel) {
  for (const Format& f : kFormats) {
    for (bool adversarial : {false, true}) {
      const size_t n = 1001;
      std::vector<uint32_t> r, c;
      fill_bits(f, adversarial, n, 5 + n, r, c);
      const auto rs = to_bytes(f, r, 0), cs = to_bytes(f, c, 0);
      for (const auto& t : kernel::targets()) {
        SCOPED_TRACE(t + " " + f.name + (adversarial ? " adversarial" : ""));
        kernel::Params params{1e-6, 1e-4, 1e-12, false};
        ChunkPartial base;
        kernel::by_name_raw(t, f.f)(rs.data(), cs.data(), n, params, &base);
        ASSERT_GT(base.max_rel, 0.0);
        for (double floor : {base.max_rel / 3, base.max_rel, base.max_rel * 3,
                             std::numeric_limits<double>::infinity()}) {
          params.max_rel_floor = floor;
          ChunkPartial got;
          kernel::by_name_raw(t, f.f)(rs.data(), cs.data(), n, params, &got);
          EXPECT_EQ(bits(got.max_rel), bits(std::max(floor, base.max_rel))) << "floor " << floor;
          EXPECT_EQ(0, std::memcmp(got.lanes, base.lanes, sizeof got.lanes));
          EXPECT_EQ(bits(got.max_abs), bits(base.max_abs));
          EXPECT_EQ(got.mismatch, base.mismatch);
          EXPECT_EQ(got.zero_ref, base.zero_ref);
          EXPECT_EQ(got.max_ulp, base.max_ulp);
        }
      }
    }
  }
}

}  // namespace
}  // namespace driftscope::numerics
