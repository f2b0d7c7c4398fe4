// The per-chunk SIMD kernel behind compare_pair (pair_metrics.cpp) and its scalar reference.
//
// A chunk is at most kChunk decoded float64 elements of each side, in reference order. The kernel
// keeps kLanes "virtual lanes": element i of the chunk always lands in lane i % kLanes, whatever
// the vector width of the target (one AVX-512 vector holds all 8, an AVX2 vector 4, an SSE4 or
// NEON vector 2, the scalar reference 1). Each lane is summed in element order and the lanes are
// reduced by one fixed tree (reduce_lanes), so every target — and the scalar reference — performs
// the same float64 additions in the same order and returns the same bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace driftscope::numerics::kernel {

inline constexpr size_t kChunk = 4096;  // elements per chunk (32 KiB per side: stays in L1/L2)
inline constexpr size_t kLanes = 8;     // virtual lanes: see above

// Sums kept per lane.
enum Sum : size_t {
  kSumAbs = 0,   // |r - c|
  kSumSqDiff,    // (r - c)^2
  kSumRef,       // r
  kSumCand,      // c
  kSumSqRef,     // r^2
  kSumSqCand,    // c^2
  kSumDot,       // r * c
  kNumSums
};

struct Params {
  double atol = 0;
  double rtol = 0;
  double rel_eps = 1e-12;
  bool nan_equal = false;
  // A lower bound for ChunkPartial::max_rel, which then reports max(max_rel_floor, the chunk's
  // maximum): the caller passes the maximum of the chunks before, so the kernel's test for a new
  // maximum (a branch and a division) fires on the few new records of the task, not on the ~6
  // per lane that every chunk started from 0 would have. Not NaN, >= 0.
  double max_rel_floor = 0;
};

// What one chunk contributes. Sums are per lane (reduced later by reduce_lanes); everything else
// is exact (counts, minima, maxima), so its combination order does not matter.
struct ChunkPartial {
  alignas(64) double lanes[kNumSums][kLanes];
  double max_abs = 0;        // max |r - c| over finite pairs (0 when none)
  double max_rel = 0;        // max |r - c| / max(|r|, rel_eps) over finite pairs
  double min_ref = 0, max_ref = 0, min_cand = 0, max_cand = 0;  // finite pairs; ±inf when none
  uint64_t nonfinite = 0;    // positions where r or c is NaN or ±Inf
  uint64_t nan_ref = 0, nan_cand = 0, nan_both = 0;
  uint64_t inf_ref = 0, inf_cand = 0, inf_same = 0;
  uint64_t zero_ref = 0, zero_cand = 0;  // finite pairs only
  uint64_t mismatch = 0;                 // allclose failures, non-finite ones included
  int64_t first_mismatch = -1;           // chunk-local index
  uint64_t max_ulp = 0;                  // ChunkRawFn only: see there
};

// ref and cand hold n <= kChunk values, are 64-byte aligned and are readable (zero-filled) up to
// the next multiple of kLanes.
using ChunkFn = void (*)(const double* ref, const double* cand, size_t n, const Params& p,
                         ChunkPartial* out);

// The fused kernels of raw float formats: n <= kChunk little-endian values of each side, read in
// place (any alignment; nothing at or past n is read). Each value is widened to float64 in
// registers (exact) and goes through the arithmetic of ChunkFn in the same lanes and order, so the
// result has the bits ChunkFn returns for the widened chunk; from the same loads it also sets
// max_ulp, the max ULP distance of the bit patterns over finite pairs (docs/metrics.md §5). One
// pass over the payload bytes replaces decode-to-buffer, kernel and a separate ULP pass.
enum class RawFormat { f32, f16, bf16 };
using ChunkRawFn = void (*)(const std::byte* ref, const std::byte* cand, size_t n,
                            const Params& p, ChunkPartial* out);

// The scalar references: the same arithmetic, one element at a time.
void chunk_scalar(const double* ref, const double* cand, size_t n, const Params& p,
                  ChunkPartial* out);
void chunk_raw_scalar(RawFormat f, const std::byte* ref, const std::byte* cand, size_t n,
                      const Params& p, ChunkPartial* out);

// Max ULP distance (docs/metrics.md §5) of n little-endian floats of 1, 2 or 4 bytes, for a
// format whose Inf/NaN patterns are exactly those with (bits & nonfinite_mask) == nonfinite_mask
// (f32, f16, bf16, f8e5m2: the exponent field; f8e4m3fn: 0x7F). Such pairs are skipped.
// Little-endian hosts only (the caller falls back to a scalar loop elsewhere).
uint64_t max_ulp_bits(const std::byte* ref, const std::byte* cand, size_t n, unsigned bytes,
                      uint64_t nonfinite_mask);

// Sum of the kLanes lane values by a fixed pairwise tree.
double reduce_lanes(const double* lanes) noexcept;

// Targets compiled in and supported by this CPU, best first, one per entry of the HWY_EXPORT
// dispatch tables (EMU128 and SCALAR share the fallback entry); "scalar" (the reference) is last.
std::vector<std::string> targets();
// The kernel in use: the forced one, else the one HWY_DYNAMIC_DISPATCH chooses (so
// hwy::SetSupportedTargetsForTest and hwy::DisableTargets apply, as for every Highway module).
ChunkFn selected();
ChunkRawFn selected_raw(RawFormat f);
// The kernel of a named target, nullptr when not available on this CPU.
ChunkFn by_name(const std::string& name);
ChunkRawFn by_name_raw(const std::string& name, RawFormat f);
// Forces a target for every later call of every kernel in pair_kernel.cpp (the chunk kernels,
// max_ulp_bits, the detail helpers; tests and benchmarks); "" restores automatic choice. Under
// "scalar" the helpers without a reference of their own run Highway's fallback target.
bool force(const std::string& name);
// Switches off every Highway target better than `name` for the whole process (hwy::DisableTargets:
// every Highway module follows), or all but the fallback for "scalar", which the kernels here
// then take from their scalar reference; false (and the CPU's best) when `name` is not one of
// the CPU's targets().
bool cap(const std::string& name);
// The target the kernels here run now: a name from targets().
std::string current();

}  // namespace driftscope::numerics::kernel
