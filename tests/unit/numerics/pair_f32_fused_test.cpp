// The fused float32 path (pair_kernel.hpp, ChunkF32Fn): reading f32 payload bytes in place, widening
// in registers and measuring the ULP distance from the same loads must give exactly what decoding
// to float64 buffers, the float64 kernel and the separate ULP pass give, on every target.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/crc32.hpp"
#include "numerics/pair_kernel.hpp"
#include "numerics/pair_metrics.hpp"
#include "pair_test_util.hpp"

namespace driftscope::numerics {
namespace {

using kernel::ChunkPartial;
using testing::bits;
using testing::expect_identical;

constexpr float kInfF = std::numeric_limits<float>::infinity();
const float kNaNF = std::numeric_limits<float>::quiet_NaN();

struct F32ForceGuard {
  ~F32ForceGuard() { force_target(""); }
};

// Perturbed pairs; adversarial ones mix NaN, ±Inf, ±0, subnormals, opposite signs and extremes.
void fill_f32(bool adversarial, size_t n, uint64_t seed, std::vector<float>& r, std::vector<float>& c) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 19);
  r.resize(n);
  c.resize(n);
  for (size_t i = 0; i < n; ++i) {
    r[i] = g(rng);
    c[i] = r[i] * (1.0f + 1e-4f * g(rng));
    if (!adversarial) continue;
    switch (pick(rng)) {
      case 0: r[i] = kNaNF; break;
      case 1: c[i] = -kNaNF; break;
      case 2: r[i] = c[i] = kNaNF; break;
      case 3: r[i] = kInfF; c[i] = pick(rng) < 10 ? kInfF : -kInfF; break;
      case 4: c[i] = -kInfF; break;
      case 5: r[i] = -0.0f; c[i] = 0.0f; break;
      case 6: r[i] = std::numeric_limits<float>::denorm_min() * static_cast<float>(pick(rng)); c[i] = -r[i]; break;
      case 7: r[i] = std::numeric_limits<float>::max(); c[i] = -std::numeric_limits<float>::max(); break;
      case 8: r[i] = std::numeric_limits<float>::max(); c[i] = std::numeric_limits<float>::max(); break;
      case 9: c[i] = -r[i]; break;
      default: break;
    }
  }
}

// Independent ULP distance (docs/metrics.md §5), one element at a time in 64-bit integers.
uint64_t ulp_direct(const std::vector<float>& r, const std::vector<float>& c) {
  const auto ord = [](float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    const auto mag = static_cast<int64_t>(b & 0x7FFFFFFFu);
    return (b >> 31) ? -mag : mag;
  };
  uint64_t best = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    if (!std::isfinite(r[i]) || !std::isfinite(c[i])) continue;
    const int64_t d = ord(r[i]) - ord(c[i]);
    best = std::max<uint64_t>(best, static_cast<uint64_t>(d < 0 ? -d : d));
  }
  return best;
}

TEST(PairF32Fused, EveryTargetMatchesTheFloat64KernelPerChunk) {
  const std::vector<size_t> sizes = {0, 1, 5, 7, 8, 9, 15, 16, 17, 63, 100, 1001, 4095, 4096};
  kernel::Params params{1e-6, 1e-4, 1e-12, false};
  for (bool adversarial : {false, true}) {
    for (size_t n : sizes) {
      std::vector<float> r, c;
      fill_f32(adversarial, n, 77 + n, r, c);
      // Payloads at an odd float offset and ending exactly at n: the kernel reads in place.
      std::vector<float> rs(n + 1), cs(n + 1);
      std::copy(r.begin(), r.end(), rs.begin() + 1);
      std::copy(c.begin(), c.end(), cs.begin() + 1);
      alignas(64) static double rb[kernel::kChunk + kernel::kLanes];
      alignas(64) static double cb[kernel::kChunk + kernel::kLanes];
      const size_t padded = (n + kernel::kLanes - 1) / kernel::kLanes * kernel::kLanes;
      std::fill(rb, rb + padded, 0.0);
      std::fill(cb, cb + padded, 0.0);
      std::copy(r.begin(), r.end(), rb);
      std::copy(c.begin(), c.end(), cb);
      const uint64_t want_ulp = ulp_direct(r, c);
      for (const auto& t : kernel::targets()) {
        const std::string what = t + " n=" + std::to_string(n) + (adversarial ? " adversarial" : "");
        SCOPED_TRACE(what);
        ChunkPartial want, got;
        kernel::by_name(t)(rb, cb, n, params, &want);
        kernel::by_name_f32(t)(rs.data() + 1, cs.data() + 1, n, params, &got);
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
  // The extreme distance: opposite-sign largest finite floats (bits 0x7F7FFFFF) are twice that
  // apart, beyond int32 and beyond 2^31.
  const std::vector<float> r = {std::numeric_limits<float>::max()};
  const std::vector<float> c = {-std::numeric_limits<float>::max()};
  for (const auto& t : kernel::targets()) {
    ChunkPartial got;
    kernel::by_name_f32(t)(r.data(), c.data(), 1, params, &got);
    EXPECT_EQ(got.max_ulp, 2 * 0x7F7FFFFFull) << t;
  }
}

// Whole tensors: the fused path (plain f32 pair) against the decoding path, which an identity
// candidate permutation selects; checksums fused into the same tasks.
TEST(PairF32Fused, WholeTensorEqualsTheDecodingPath) {
  F32ForceGuard guard;
  const size_t n = 3 * (size_t{1} << 18) + 4099;  // several tasks, a ragged last chunk
  std::vector<uint64_t> identity(n);
  for (size_t i = 0; i < n; ++i) identity[i] = i;
  for (bool adversarial : {false, true}) {
    std::vector<float> r, c;
    fill_f32(adversarial, n, adversarial ? 5 : 6, r, c);
    const auto a = testing::make_tensor(DType::f32, r, {n});
    const auto b = testing::make_tensor(DType::f32, c, {n});
    // The candidate payload one byte into a buffer: an unaligned map of a dump.
    std::vector<std::byte> shifted(b.bytes.size() + 1);
    std::memcpy(shifted.data() + 1, b.bytes.data(), b.bytes.size());
    const std::span<const std::byte> cand(shifted.data() + 1, b.bytes.size());
    PairOptions o;
    o.rtol = 1e-3;
    o.atol = 1e-5;
    o.crc_ref = o.crc_cand = true;
    for (const auto& t : available_targets()) {
      ASSERT_TRUE(force_target(t));
      o.cand_index = {};
      auto fused = compare_pair(a.info, a.payload(), b.info, cand, o);
      o.cand_index = identity;
      auto decoded = compare_pair(a.info, a.payload(), b.info, cand, o);
      ASSERT_TRUE(fused.ok()) << fused.error().to_string();
      ASSERT_TRUE(decoded.ok()) << decoded.error().to_string();
      expect_identical(*fused, *decoded, t + (adversarial ? " adversarial" : " normal"));
      EXPECT_EQ(fused->max_ulp, static_cast<int64_t>(ulp_direct(r, c)));
      EXPECT_EQ(fused->payload_crc_ref, detail::crc32(0, a.payload()));
      EXPECT_EQ(fused->payload_crc_cand, detail::crc32(0, cand));
      EXPECT_EQ(decoded->payload_crc_cand, detail::crc32(0, cand));
      if (adversarial) EXPECT_GT(fused->nan_ref, 0u);
    }
  }
}

}  // namespace
}  // namespace driftscope::numerics
