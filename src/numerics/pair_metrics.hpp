// Internal interface between the metric kernels (numerics) and the comparison engine (compare).
// All metrics of one tensor pair come from ONE pass over both tensors: elements are decoded in
// fixed-size chunks to float64 and fed to a SIMD kernel (Highway, runtime dispatch) that
// accumulates in float64; chunk results are combined in a fixed order, so the result is
// bit-identical for any thread count and any SIMD target. Formulas: docs/metrics.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "driftscope/error.hpp"
#include "driftscope/tensor.hpp"

namespace driftscope::numerics {

// The layout of a chunk's values as the kernel read them (ObservedChunk).
enum class ChunkFormat : uint8_t {
  f64,   // decoded float64 arrays
  f32,   // little-endian binary32 read in place from the payload
  f16,   // little-endian binary16, in place
  bf16,  // little-endian bfloat16, in place
};

// One chunk of a pair as the kernel measured it: elements [first, first + n) in reference order
// (the candidate already in reference order when cand_index is set). `ref`/`cand` point at n
// values of `format`: float64 arrays after a decode, or the payload bytes themselves when the
// kernel read a raw float format in place (then nothing was decoded, and value() widens one).
struct ObservedChunk {
  uint64_t first = 0;
  size_t n = 0;
  ChunkFormat format = ChunkFormat::f64;
  const void* ref = nullptr;
  const void* cand = nullptr;
  uint64_t nonfinite = 0;  // positions where either side is NaN or Inf (the kernel's count)
  // Raw formats only (the fused kernel's figures; else unknown): the largest ULP distance of a
  // finite pair (ChunkPartial::max_ulp) and the largest d = |cand - ref| of one in float64.
  uint64_t max_ulp = UINT64_MAX;
  double max_abs = 0;
  // Element i of one side, widened to float64 (exact).
  double ref_at(size_t i) const { return value(format, ref, i); }
  double cand_at(size_t i) const { return value(format, cand, i); }
  static double value(ChunkFormat f, const void* p, size_t i);
};

// A task's share of an observer (below): gets the task's chunks in order, on the task's thread.
class ChunkTask {
 public:
  virtual ~ChunkTask() = default;
  virtual void chunk(const ObservedChunk& c) = 0;
  // After the task's last chunk, when the task succeeded; tasks finish in any order.
  virtual void finish() = 0;
};

// Rides on the metrics pass (compare --html's detail pass, compare/detail.cpp): the chunks are
// still in L1 right after the kernel, so the observer reads no payload byte again, and runs on
// every thread of the pair. begin_task is called concurrently, once per task.
class ChunkObserver {
 public:
  virtual ~ChunkObserver() = default;
  virtual std::unique_ptr<ChunkTask> begin_task() = 0;
};

struct PairOptions {
  double atol = 0.0;           // allclose: mismatch when |a-b| > atol + rtol*|b| (b = reference)
  double rtol = 0.0;
  double rel_eps = 1e-12;      // max_rel_diff denominator: max(|ref|, rel_eps)
  bool nan_equal = false;      // NaN == NaN counts as equal
  unsigned threads = 0;        // 0: hardware concurrency; the result does not depend on it
  // Optional element order of the candidate: element i of the reference pairs with element
  // cand_index[i] of the candidate (axis permutation, NHWC vs NCHW). Empty: identity.
  std::span<const uint64_t> cand_index;
  // Classes along the last axis for argmax / top-k agreement; 0 disables.
  uint64_t classes = 0;
  uint32_t top_k = 5;
  // Fused payload checks for lazily checksummed dumps (compare's Engine): each task also computes
  // the CRC-32 of its share of that side's payload bytes (a partition fixed by the element count),
  // and the shares are combined in order into PairMetrics::payload_crc_*. One pass over the bytes,
  // on every thread, instead of a serial checksum pass before the kernel.
  bool crc_ref = false, crc_cand = false;
  // Drop the pages of the payload bytes a task has finished with (MADV_DONTNEED), so a pair of
  // huge tensors stays resident only in the tasks in flight. Only for read-only file-backed maps
  // (a later access reads the file again); never for a caller's memory. The candidate is released
  // only when read in order (no cand_index).
  bool release_pages = false;
  // Sees every chunk after the kernel (the values as the kernel saw them); nullptr: none. Raw
  // float pairs are then decoded to float64 as well, from the bytes the kernel just read.
  ChunkObserver* observer = nullptr;
};

struct PairMetrics {
  uint64_t count = 0;            // elements compared
  // NaN / Inf bookkeeping (NaN positions first, then Inf signs: docs/metrics.md)
  uint64_t nan_ref = 0, nan_cand = 0, nan_both = 0;   // nan_both: same position NaN on both sides
  uint64_t inf_ref = 0, inf_cand = 0, inf_same = 0;   // inf_same: same position, same sign
  bool nan_positions_match = true;
  bool inf_positions_match = true;
  uint64_t finite_pairs = 0;     // positions where both sides are finite (metrics below use these)
  // error metrics over finite pairs
  double max_abs_diff = 0, mean_abs_diff = 0, rmse = 0, max_rel_diff = 0;
  double cosine = 1;             // both all-zero: 1; exactly one all-zero: 0
  double sqnr_db = 0;            // 10 log10(sum ref^2 / sum (ref-cand)^2); +inf when equal
  double nmse = 0;               // sum (ref-cand)^2 / sum ref^2
  double rel_l2 = 0;             // ||cand-ref|| / ||ref||
  double norm_ref = 0, norm_cand = 0;
  double sum_ref = 0, sum_cand = 0, sumsq_ref = 0, sumsq_cand = 0, dot = 0, sumsq_diff = 0;
  double min_ref = 0, max_ref = 0, min_cand = 0, max_cand = 0;
  uint64_t zero_ref = 0, zero_cand = 0;
  bool const_ref = false, const_cand = false;   // every finite value equal
  // allclose
  uint64_t mismatch_count = 0;   // includes NaN/Inf disagreements
  double mismatch_fraction = 0;
  int64_t first_mismatch = -1;   // flat index (reference order), -1 when none
  double first_mismatch_ref = 0, first_mismatch_cand = 0;
  int64_t max_abs_index = -1;    // where the largest |ref-cand| sits
  double max_abs_ref = 0, max_abs_cand = 0;   // the two values there
  // ULP distance, when both sides have the same float dtype (else -1)
  int64_t max_ulp = -1;
  // classification agreement along the last axis (classes > 0)
  uint64_t rows = 0;
  double argmax_agreement = -1;  // fraction of rows whose argmax agrees; -1 when not computed
  double topk_overlap = -1;      // mean |topk(ref) ∩ topk(cand)| / k
  // CRC-32 of each payload's bytes, when PairOptions::crc_ref / crc_cand asked for it.
  uint32_t payload_crc_ref = 0, payload_crc_cand = 0;
};

// The detail pass of `compare --html` (compare/detail.cpp) on one chunk of finite values.
// diff_runs: d[i] = |cand[i] - ref[i]| in float64 for i < c.n, read straight from the chunk's
// values (raw formats widened in registers), d32[i] = d[i] rounded to float32, and in the same
// loop out[j] = the largest d of run j, d[ends[j-1], ends[j]) (ends[-1] = 0; ends ascending, the
// last = c.n; 0 for an empty run), the heat cells' runs; returns the smallest and largest d (min
// +inf when n is 0) and whether every d is a float32 value (then d32 holds exactly the d; else
// d32 is unspecified where d is not a float32 value). d or d32 may be null (not both): not
// stored; with d32 null the flag is false.
// count_at_least: out[j] = the number of d[i] >= thresholds[j], for j < k (d and thresholds >= 0,
// not NaN: they are compared as integers, the bits of a non-negative double being ordered like
// its value). count_at_least_f32: the same on float32 d and thresholds (n < 2^31), twice the lanes
// per vector; for d that are float32 values, d >= t is d >= t rounded up to float32.
// Highway, dispatched at run time (pair_kernel.cpp); exact operations only, so every target gives
// the same result.
struct DiffStats {
  double min, max;
  bool f32;  // every d is a float32 value
};
// With `inexact` (d null, a raw float format): the positions i, ascending, whose d32[i] may not be
// d[i] (the float32 subtraction was inexact; d32[i] is then d rounded to float32, the one rounding
// giving what rounding to float64 first would), for a caller that mends those few instead of
// redoing the chunk on float64; count is how many there are (only the first kCap positions are
// kept, each plus `base`). The flag above is false when count > 0. Elsewhere the d32 are exactly
// the d, and min, max and out are those of the d32.
struct InexactDiffs {
  static constexpr size_t kCap = 64;
  size_t count = 0;
  size_t base = 0;  // added to each position noted (diff_cols of a piece of a chunk)
  uint32_t at[kCap];
};
DiffStats diff_runs(const ObservedChunk& c, double* d, float* d32, const uint32_t* ends, size_t runs,
                    double* out, InexactDiffs* inexact = nullptr);
// diff_cols: a raw float chunk (format f32, f16 or bf16) without NaN/Inf whose every d is a
// float32 value (d32_exact below says when the kernel's ULP distance proves it), or, with
// `inexact`, any such chunk, whose positions where d is perhaps not a float32 value it notes as
// diff_runs does (the caller mends their codes; d32 and colmax hold d rounded to float32 there,
// which is what the heat grid keeps): d32[i] = d[i],
// and for each segment j, elements [ends[j-1], ends[j]) (ends[-1] = 0, the last = c.n), a piece of
// one row of the view, colmax[cols[j] + i - ends[j-1]] = max(itself, d[i]) (the heat grid's
// column maxima); returns the smallest positive d (+inf when none). Exact operations only.
// With `codes`, diff_cols also writes the histogram code of each d, looked up from its exponent
// field e in a table of one vector's lanes over exponents [e_first, e_hi], e_first =
// max(e_hi - lanes + 2, 1) (chosen by the target and returned; -1 when the target has no such
// table, and then no code is written): idx = max(e - e_first + 1, 0), code = 0 when idx is 0 (a
// zero, or a d below binade e_first: the caller checks the smallest d), else 1 + base[e] -
// base[e_first] + ((bits of d & 0x7FFFFF) >= edge[e]). base[e]: the bin where binade e starts;
// edge[e]: the mantissa bits of the edge inside the binade rounded up to a float32, 0x800000
// when none (numerics/log_bins.hpp, LogBins::binade_base and binade_edge).
struct DiffCodes {
  const int32_t* base;  // 256 entries each
  const int32_t* edge;
  int32_t e_hi;         // the exponent field of the largest d
  uint8_t* out;
  int32_t e_first = -1;
};
double diff_cols(const ObservedChunk& c, float* d32, const uint32_t* ends, const uint32_t* cols,
                 size_t segs, float* colmax, DiffCodes* codes = nullptr, InexactDiffs* inexact = nullptr);
// out[j] = the number of codes[i] >= j for first <= j < ncodes (first >= 1; codes < 128).
void count_codes(const uint8_t* codes, size_t n, size_t first, size_t ncodes, uint64_t* out);
// A difference d >= 0 as float32 (the detail pass's d32): rounded once, +inf beyond float's range
// (converting such a double is undefined behaviour). The kernels' scalar tails and the mending
// of inexact differences (compare/detail.cpp) take the same value.
inline float d_to_f32(double d) {
  return d <= static_cast<double>(std::numeric_limits<float>::max()) ? static_cast<float>(d)
                                                                     : std::numeric_limits<float>::infinity();
}
// Whether every finite pair's d = |c - r| of a raw chunk is a float32 value, from the chunk's max
// ULP distance alone: at most half a binade's steps (2^22 for f32, 2^9 for f16, 2^6 for bf16).
// Same sign: then c <= 2r and r <= 2c (the bits of 2r are those of r plus one binade), so c - r
// is exact in the format itself (Sterbenz), and every f16/bf16 is a float32; or both sides lie
// where values are evenly spaced (subnormal or the first normal binade) and the difference is a
// multiple of that step below 2^24 of them. Opposite signs: both magnitudes under half a binade
// of steps, so both in that evenly spaced range too.
inline bool d32_exact(const ObservedChunk& c) {
  switch (c.format) {
    case ChunkFormat::f32: return c.max_ulp <= (uint64_t{1} << 22);
    case ChunkFormat::f16: return c.max_ulp <= (uint64_t{1} << 9);
    case ChunkFormat::bf16: return c.max_ulp <= (uint64_t{1} << 6);
    default: return false;
  }
}
void count_at_least(const double* d, size_t n, const double* thresholds, size_t k, uint64_t* out);
void count_at_least_f32(const float* d, size_t n, const float* thresholds, size_t k, uint64_t* out);
// The first i in [from, n) with d[i] >= t, n when none (d not NaN): blocks of 32 tested at once.
size_t next_at_least(const float* d, size_t from, size_t n, float t);
size_t next_at_least(const double* d, size_t from, size_t n, double t);

// Computes every metric of a pair. The tensors may have different dtypes and encodings; both are
// decoded (and dequantized) to float64. Element counts must match (after cand_index mapping).
Result<PairMetrics> compare_pair(const TensorInfo& ref, std::span<const std::byte> ref_payload,
                                 const TensorInfo& cand, std::span<const std::byte> cand_payload,
                                 const PairOptions& options);

// The SIMD targets compiled in, and a way to force one for tests ("scalar", "SSE4", "AVX2",
// "AVX3", ...). Returns false when the target is not available on this CPU.
std::vector<std::string> available_targets();
bool force_target(const std::string& name);  // "" restores automatic dispatch

}  // namespace driftscope::numerics
