// compare_pair: the single pass that measures one tensor pair (docs/metrics.md).
//
// Work is split into tasks of whole chunks (kTaskChunks x kChunk elements, rounded to whole rows
// when classification metrics are on). The split depends only on the element count, never on the
// thread count; tasks run in parallel, each combines its chunks in order, and the tasks are then
// combined in order. Together with the fixed lane order inside the kernel (pair_kernel.hpp) this
// makes the result bit-identical for any thread count and any SIMD target.
#include "numerics/pair_metrics.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <string_view>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "common/bytes.hpp"
#include "common/crc32.hpp"
#include "common/pages.hpp"
#include "common/thread_pool.hpp"
#include "driftscope/decode.hpp"
#include "numerics/decode_plan.hpp"
#include "numerics/pair_kernel.hpp"
#include "numerics/release_front.hpp"
#include "numerics/unsigned_zero.hpp"

namespace driftscope::numerics {
namespace {

using kernel::ChunkPartial;
using kernel::kChunk;
using kernel::kLanes;

constexpr size_t kTaskChunks = 64;  // 256 Ki elements per task: enough work to amortise a hand-off
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr size_t kPopulateBytes = size_t{256} << 10;
// A pair's tasks give their pages back in runs of at least this many bytes (ReleaseFront).
constexpr size_t kReleaseBytes = size_t{8} << 20;
// Bounds the per-row state of top-k agreement (two heaps of k entries per task in flight).
constexpr uint32_t kMaxTopK = 65536;

// Squares of magnitudes outside [2^-400, 2^400] leave the comfortable float64 range (a sum of
// 2^48 squares of 2^400 is still finite; a square of 2^-400 is still normal). Chunks holding
// such values are re-summed with power-of-two scaling (rescale_chunk), as LAPACK's dnrm2 does.
const double kBig = std::ldexp(1.0, 400);
const double kTiny = std::ldexp(1.0, -400);

// m * 2^e. Power-of-two scaling is exact, so a chunk re-summed at scale 2^-k and stored as
// (m, 2k) loses nothing; combining two sums aligns the smaller exponent to the larger.
struct ScaledSum {
  double m = 0;
  int e = 0;
  void add(double m2, int e2) {
    if (m2 == 0) return;
    if (m == 0) {
      m = m2;
      e = e2;
    } else if (e2 == e) {
      m += m2;
    } else if (e2 > e) {
      m = std::ldexp(m, e - e2) + m2;
      e = e2;
    } else {
      m += std::ldexp(m2, e2 - e);
    }
  }
  void add(const ScaledSum& o) { add(o.m, o.e); }
  double value() const { return std::ldexp(m, e); }
};

bool ranks_above(double a, uint64_t ia, double b, uint64_t ib) {
  const bool na = std::isnan(a), nb = std::isnan(b);
  if (na != nb) return na;
  if (!na && a != b) return a > b;
  return ia < ib;
}

// The k best (value, column) of a row so far, NaN ranking above every number and ties going to
// the lower column: a heap whose front is the worst kept entry, so each element costs one
// comparison and, when it enters, O(log k).
struct RowState {
  using Entry = std::pair<double, uint64_t>;
  std::vector<Entry> heap;
  Entry best{0.0, 0};
  static bool worse_first(const Entry& x, const Entry& y) {
    return ranks_above(x.first, x.second, y.first, y.second);
  }
  void push(double v, uint64_t col, size_t k) {
    if (col == 0 || ranks_above(v, col, best.first, best.second)) best = {v, col};
    if (heap.size() < k) {
      heap.emplace_back(v, col);
      std::push_heap(heap.begin(), heap.end(), worse_first);
    } else if (ranks_above(v, col, heap.front().first, heap.front().second)) {
      std::pop_heap(heap.begin(), heap.end(), worse_first);
      heap.back() = {v, col};
      std::push_heap(heap.begin(), heap.end(), worse_first);
    }
  }
};

// Everything one task (or the whole tensor) has accumulated.
struct Acc {
  double sum_abs = 0, sum_ref = 0, sum_cand = 0;
  ScaledSum sq_diff, sq_ref, sq_cand, dot;
  double max_abs = 0;
  int64_t max_abs_index = -1;
  double max_abs_ref = 0, max_abs_cand = 0;
  double max_rel = 0;
  double min_ref = kInf, max_ref = -kInf, min_cand = kInf, max_cand = -kInf;
  uint64_t finite = 0, nan_ref = 0, nan_cand = 0, nan_both = 0, inf_ref = 0, inf_cand = 0;
  uint64_t inf_same = 0, zero_ref = 0, zero_cand = 0, mismatch = 0;
  int64_t first_mismatch = -1;
  double first_ref = 0, first_cand = 0;
  uint64_t max_ulp = 0;
  uint64_t rows = 0, argmax_agree = 0, topk_hits = 0;
  std::optional<Error> error;

  // Appends `o`, which covers later elements than everything already in *this.
  void append(const Acc& o) {
    sum_abs += o.sum_abs;
    sum_ref += o.sum_ref;
    sum_cand += o.sum_cand;
    sq_diff.add(o.sq_diff);
    sq_ref.add(o.sq_ref);
    sq_cand.add(o.sq_cand);
    dot.add(o.dot);
    // Strictly greater: on ties the earlier position stays.
    if (o.max_abs_index >= 0 && (max_abs_index < 0 || o.max_abs > max_abs)) {
      max_abs = o.max_abs;
      max_abs_index = o.max_abs_index;
      max_abs_ref = o.max_abs_ref;
      max_abs_cand = o.max_abs_cand;
    }
    max_rel = std::max(max_rel, o.max_rel);
    min_ref = std::min(min_ref, o.min_ref);
    max_ref = std::max(max_ref, o.max_ref);
    min_cand = std::min(min_cand, o.min_cand);
    max_cand = std::max(max_cand, o.max_cand);
    finite += o.finite;
    nan_ref += o.nan_ref;
    nan_cand += o.nan_cand;
    nan_both += o.nan_both;
    inf_ref += o.inf_ref;
    inf_cand += o.inf_cand;
    inf_same += o.inf_same;
    zero_ref += o.zero_ref;
    zero_cand += o.zero_cand;
    mismatch += o.mismatch;
    if (first_mismatch < 0 && o.first_mismatch >= 0) {
      first_mismatch = o.first_mismatch;
      first_ref = o.first_ref;
      first_cand = o.first_cand;
    }
    max_ulp = std::max(max_ulp, o.max_ulp);
    rows += o.rows;
    argmax_agree += o.argmax_agree;
    topk_hits += o.topk_hits;
  }
};

// ---- ULP distance (docs/metrics.md "ULP distance") ------------------------------------------

struct UlpFormat {
  unsigned bytes = 0;
  uint64_t sign = 0;      // sign bit
  uint64_t exp = 0;       // exponent field mask
  uint64_t nonfinite = 0; // pattern (under `nonfinite_mask`) of Inf/NaN
  uint64_t nonfinite_mask = 0;
};

std::optional<UlpFormat> ulp_format(DType t) {
  switch (t) {
    case DType::f64: return UlpFormat{8, 1ull << 63, 0x7FF0000000000000ull, 0x7FF0000000000000ull, 0x7FF0000000000000ull};
    case DType::f32: return UlpFormat{4, 1ull << 31, 0x7F800000u, 0x7F800000u, 0x7F800000u};
    case DType::f16: return UlpFormat{2, 0x8000u, 0x7C00u, 0x7C00u, 0x7C00u};
    case DType::bf16: return UlpFormat{2, 0x8000u, 0x7F80u, 0x7F80u, 0x7F80u};
    case DType::f8e5m2: return UlpFormat{1, 0x80u, 0x7Cu, 0x7Cu, 0x7Cu};
    // E4M3FN has no infinities; only S.1111.111 is NaN (docs/format.md §3.3.1).
    case DType::f8e4m3fn: return UlpFormat{1, 0x80u, 0x78u, 0x7Fu, 0x7Fu};
    default: return std::nullopt;
  }
}

inline uint64_t load_bits(const std::byte* p, unsigned bytes) {
  switch (bytes) {
    case 8: return detail::load_le<uint64_t>(p);
    case 4: return detail::load_le<uint32_t>(p);
    case 2: return detail::load_le<uint16_t>(p);
    default: return static_cast<uint64_t>(p[0]);
  }
}

// Sign-magnitude bits -> an integer that orders like the values; -0 and +0 both map to 0, so
// adjacent floats are 1 apart, and the distance between x and -x is twice x's distance to 0.
inline int64_t ordered(uint64_t bits, const UlpFormat& f) {
  const auto mag = static_cast<int64_t>(bits & (f.sign - 1));
  return (bits & f.sign) ? -mag : mag;
}

// Max |ordered(a) - ordered(b)| over pairs where both are finite. The true distance is below
// 2^64, so the unsigned difference of the larger minus the smaller is exact.
template <unsigned kBytes>
uint64_t max_ulp_chunk(const UlpFormat& f, const std::byte* ref, const std::byte* cand,
                       const uint64_t* cand_index, uint64_t first, size_t n) {
  uint64_t best = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t ci = cand_index ? cand_index[first + i] : first + i;
    const uint64_t a = load_bits(ref + (first + i) * kBytes, kBytes);
    const uint64_t b = load_bits(cand + ci * kBytes, kBytes);
    if ((a & f.nonfinite_mask) == f.nonfinite || (b & f.nonfinite_mask) == f.nonfinite) continue;
    const int64_t ia = ordered(a, f), ib = ordered(b, f);
    const uint64_t dist = ia >= ib ? static_cast<uint64_t>(ia) - static_cast<uint64_t>(ib)
                                   : static_cast<uint64_t>(ib) - static_cast<uint64_t>(ia);
    best = std::max(best, dist);
  }
  return best;
}

uint64_t max_ulp_range(const UlpFormat& f, const std::byte* ref, const std::byte* cand,
                       const uint64_t* cand_index, uint64_t first, size_t n) {
  if (cand_index == nullptr && f.bytes <= 4 && f.nonfinite == f.nonfinite_mask &&
      std::endian::native == std::endian::little) {
    return kernel::max_ulp_bits(ref + first * f.bytes, cand + first * f.bytes, n, f.bytes,
                                f.nonfinite_mask);
  }
  switch (f.bytes) {
    case 8: return max_ulp_chunk<8>(f, ref, cand, cand_index, first, n);
    case 4: return max_ulp_chunk<4>(f, ref, cand, cand_index, first, n);
    case 2: return max_ulp_chunk<2>(f, ref, cand, cand_index, first, n);
    default: return max_ulp_chunk<1>(f, ref, cand, cand_index, first, n);
  }
}

// ---- the pass ---------------------------------------------------------------------------------

struct AlignedDoubles {
  struct Free {
    void operator()(double* q) const { ::operator delete[](q, std::align_val_t{64}); }
  };
  std::unique_ptr<double[], Free> mem;
  explicit AlignedDoubles(size_t n)
      : mem(static_cast<double*>(::operator new[](n * sizeof(double), std::align_val_t{64}))) {
    std::fill(mem.get(), mem.get() + n, 0.0);
  }
  double* get() const { return mem.get(); }
};

struct Job {
  const DecodePlan* ref = nullptr;
  const DecodePlan* cand = nullptr;
  const PairOptions* options = nullptr;
  kernel::Params params;
  kernel::ChunkFn fn = nullptr;
  // Set when both sides are raw little-endian f32, f16 or bf16 (the same dtype) read in order,
  // without classification metrics: chunks then go from the payload bytes straight into the
  // fused kernel of that format.
  kernel::ChunkRawFn raw = nullptr;
  kernel::RawFormat raw_format = kernel::RawFormat::f32;
  uint64_t n = 0;
  uint64_t task_elems = 0;
  std::optional<UlpFormat> ulp;
  const std::byte* ref_bytes = nullptr;
  const std::byte* cand_bytes = nullptr;
  size_t ref_size = 0, cand_size = 0;  // payload bytes
  uint64_t classes = 0;
  size_t k = 0;
};

// The bytes of a payload that belong to elements [begin, end) of n, for the fused CRC and page
// release: proportional, so the shares of all tasks partition the payload exactly, whatever the
// element size (packed or dequantized encodings included).
std::pair<size_t, size_t> byte_share(size_t size, uint64_t begin, uint64_t end, uint64_t n) {
  __extension__ typedef unsigned __int128 u128;  // size * end overflows 64 bits past 4 GiB x 4 Gi
  return {static_cast<size_t>(u128{size} * begin / n), static_cast<size_t>(u128{size} * end / n)};
}

// Re-sums the four squared sums of one chunk with each quantity scaled by a power of two that
// brings its largest magnitude to [1, 2): no overflow, and no underflow of anything that matters
// next to the largest term. One scalar routine serves every SIMD target, so results stay equal.
template <class Chunk>
void rescale_chunk(const Chunk& ch, size_t n, const ChunkPartial& cp, Acc& acc) {
  const double mag_r = std::max(std::fabs(cp.min_ref), std::fabs(cp.max_ref));
  const double mag_c = std::max(std::fabs(cp.min_cand), std::fabs(cp.max_cand));
  const int kr = mag_r > 0 ? std::ilogb(mag_r) : 0;
  const int kc = mag_c > 0 ? std::ilogb(mag_c) : 0;
  // r - c overflows only when both are near the top of the range: then scale before subtracting.
  const bool diff_overflows = std::isinf(cp.max_abs);
  const int kd = diff_overflows ? std::max(kr, kc) : (cp.max_abs > 0 ? std::ilogb(cp.max_abs) : 0);
  double srr = 0, scc = 0, src = 0, sdd = 0;
  for (size_t i = 0; i < n; ++i) {
    const double ri = ch.ref(i), ci = ch.cand(i);
    if (!std::isfinite(ri) || !std::isfinite(ci)) continue;
    const double rs = std::ldexp(ri, -kr), cs = std::ldexp(ci, -kc);
    const double ds = diff_overflows ? std::ldexp(ri, -kd) - std::ldexp(ci, -kd)
                                     : std::ldexp(ri - ci, -kd);
    srr += rs * rs;
    scc += cs * cs;
    src += rs * cs;
    sdd += ds * ds;
  }
  acc.sq_ref.add(srr, 2 * kr);
  acc.sq_cand.add(scc, 2 * kc);
  acc.dot.add(src, kr + kc);
  acc.sq_diff.add(sdd, 2 * kd);
}

// One chunk's values as the kernel saw them: decoded buffers, or raw payload bytes.
struct DecodedChunk {
  const double* r;
  const double* c;
  double ref(size_t i) const { return r[i]; }
  double cand(size_t i) const { return c[i]; }
};
struct RawChunk {
  kernel::RawFormat f;
  const std::byte* r;
  const std::byte* c;
  static double at(kernel::RawFormat f, const std::byte* p, size_t i) {
    switch (f) {
      case kernel::RawFormat::f32: return detail::load_le<float>(p + 4 * i);
      case kernel::RawFormat::f16: return f16_to_double(detail::load_le<uint16_t>(p + 2 * i));
      default: return bf16_to_double(detail::load_le<uint16_t>(p + 2 * i));
    }
  }
  double ref(size_t i) const { return at(f, r, i); }
  double cand(size_t i) const { return at(f, c, i); }
};

bool outside_safe_range(double mag) { return mag >= kBig || (mag > 0 && mag < kTiny); }

Result<void> decode_cand(const Job& job, uint64_t first, size_t n, double* out,
                         std::vector<std::byte>& gather) {
  const auto& idx = job.options->cand_index;
  if (idx.empty()) return decode_range(*job.cand, first, n, out);
  for (size_t i = 0; i < n; ++i) {
    if (idx[first + i] >= job.n)
      return make_error(Errc::invalid_argument,
                        fmt::format("cand_index[{}] is {}, outside the candidate's {} elements",
                                    first + i, idx[first + i], job.n));
  }
  const DecodePlan& p = *job.cand;
  if (p.encoding == EncodingKind::affine_channel) {
    // The channel depends on the element's own position: decode each where it lies.
    for (size_t i = 0; i < n; ++i) DRIFTSCOPE_TRY(decode_range(p, idx[first + i], 1, out + i));
    return {};
  }
  // Raw and per-tensor encodings do not depend on position: gather the bytes, decode them at once.
  gather.resize(n * p.elem_size);
  for (size_t i = 0; i < n; ++i)
    std::memcpy(gather.data() + i * p.elem_size, p.data + idx[first + i] * p.elem_size,
                p.elem_size);
  DecodePlan g = p;
  g.data = gather.data();
  g.numel = n;
  return decode_range(g, 0, n, out);
}

// Finds the first element of a chunk attaining its maximum |r - c|, with the kernel's own
// arithmetic.
template <class Chunk>
void locate_max_abs(const Chunk& ch, uint64_t s, size_t len, double max_abs, Acc& acc) {
  for (size_t i = 0; i < len; ++i) {
    const double ri = ch.ref(i), ci = ch.cand(i);
    if (std::isfinite(ri) && std::isfinite(ci) && std::fabs(ri - ci) == max_abs) {
      acc.max_abs = max_abs;
      acc.max_abs_index = static_cast<int64_t>(s + i);
      acc.max_abs_ref = ri;
      acc.max_abs_cand = ci;
      return;
    }
  }
}

// The chunk's bookkeeping after the kernel: everything but the ULP distance and top-k.
// defer_locate: a chunk that raises the maximum |r - c| only records its start in max_abs_index;
// the caller calls locate_max_abs on the last such chunk when the task ends (the chunk's values
// must still be readable then). Within a task of 64 chunks the running maximum rises ~5 times
// (the harmonic number H(64)), and each element search reads half a chunk on average.
template <class Chunk>
void absorb_chunk(const Chunk& ch, uint64_t s, size_t len, const ChunkPartial& cp, Acc& acc,
                  bool defer_locate = false) {
  const uint64_t finite = len - cp.nonfinite;
  acc.sum_abs += kernel::reduce_lanes(cp.lanes[kernel::kSumAbs]);
  acc.sum_ref += kernel::reduce_lanes(cp.lanes[kernel::kSumRef]);
  acc.sum_cand += kernel::reduce_lanes(cp.lanes[kernel::kSumCand]);
  const double mag_r = std::max(std::fabs(cp.min_ref), std::fabs(cp.max_ref));
  const double mag_c = std::max(std::fabs(cp.min_cand), std::fabs(cp.max_cand));
  if (finite > 0 && (outside_safe_range(mag_r) || outside_safe_range(mag_c) ||
                     outside_safe_range(cp.max_abs))) {
    rescale_chunk(ch, len, cp, acc);
  } else {
    acc.sq_diff.add(kernel::reduce_lanes(cp.lanes[kernel::kSumSqDiff]), 0);
    acc.sq_ref.add(kernel::reduce_lanes(cp.lanes[kernel::kSumSqRef]), 0);
    acc.sq_cand.add(kernel::reduce_lanes(cp.lanes[kernel::kSumSqCand]), 0);
    acc.dot.add(kernel::reduce_lanes(cp.lanes[kernel::kSumDot]), 0);
  }
  if (finite > 0 && (acc.max_abs_index < 0 || cp.max_abs > acc.max_abs)) {
    if (defer_locate) {
      acc.max_abs = cp.max_abs;
      acc.max_abs_index = static_cast<int64_t>(s);
    } else {
      locate_max_abs(ch, s, len, cp.max_abs, acc);
    }
  }
  acc.max_rel = std::max(acc.max_rel, cp.max_rel);
  if (finite > 0) {
    acc.min_ref = std::min(acc.min_ref, cp.min_ref);
    acc.max_ref = std::max(acc.max_ref, cp.max_ref);
    acc.min_cand = std::min(acc.min_cand, cp.min_cand);
    acc.max_cand = std::max(acc.max_cand, cp.max_cand);
  }
  acc.finite += finite;
  acc.nan_ref += cp.nan_ref;
  acc.nan_cand += cp.nan_cand;
  acc.nan_both += cp.nan_both;
  acc.inf_ref += cp.inf_ref;
  acc.inf_cand += cp.inf_cand;
  acc.inf_same += cp.inf_same;
  acc.zero_ref += cp.zero_ref;
  acc.zero_cand += cp.zero_cand;
  acc.mismatch += cp.mismatch;
  if (acc.first_mismatch < 0 && cp.first_mismatch >= 0) {
    const auto i = static_cast<size_t>(cp.first_mismatch);
    acc.first_mismatch = static_cast<int64_t>(s + i);
    acc.first_ref = ch.ref(i);
    acc.first_cand = ch.cand(i);
  }
}

// The payload CRCs of elements [s, s + len) are continued chunk by chunk, right after the chunk
// was decoded or measured, so the bytes come from L1. The chunks' byte shares partition the
// task's share.
void crc_chunk(const Job& job, uint64_t s, size_t len, std::pair<uint32_t, uint32_t>* crc) {
  if (crc == nullptr) return;
  if (job.options->crc_ref) {
    const auto [b0, b1] = byte_share(job.ref_size, s, s + len, job.n);
    crc->first = detail::crc32(crc->first, job.ref_bytes + b0, b1 - b0);
  }
  if (job.options->crc_cand) {
    const auto [b0, b1] = byte_share(job.cand_size, s, s + len, job.n);
    crc->second = detail::crc32(crc->second, job.cand_bytes + b0, b1 - b0);
  }
}

// Raw float pairs: no buffers, no decode pass, no ULP pass (pair_kernel.hpp, ChunkRawFn).
void run_task_raw(const Job& job, uint64_t begin, uint64_t end, Acc& acc,
                  std::pair<uint32_t, uint32_t>* crc, ChunkTask* observer) {
  ChunkPartial cp;
  kernel::Params params = job.params;
  // The observer reads the chunk's bytes in place, right after the kernel (still in L1).
  const ChunkFormat format = job.raw_format == kernel::RawFormat::f32   ? ChunkFormat::f32
                             : job.raw_format == kernel::RawFormat::f16 ? ChunkFormat::f16
                                                                        : ChunkFormat::bf16;
  for (uint64_t s = begin; s < end; s += kChunk) {
    const size_t len = static_cast<size_t>(std::min<uint64_t>(kChunk, end - s));
    const size_t size = job.ref->elem_size;
    const RawChunk ch{job.raw_format, job.ref_bytes + size * s, job.cand_bytes + size * s};
    params.max_rel_floor = acc.max_rel;  // max_rel is a maximum: seeding it changes no bits
    job.raw(ch.r, ch.c, len, params, &cp);
    crc_chunk(job, s, len, crc);
    absorb_chunk(ch, s, len, cp, acc, /*defer_locate=*/true);
    acc.max_ulp = std::max(acc.max_ulp, cp.max_ulp);
    if (observer) observer->chunk({s, len, format, ch.r, ch.c, cp.nonfinite, cp.max_ulp, cp.max_abs});
  }
  if (acc.max_abs_index >= 0) {  // the start of the chunk that set the task's maximum
    const auto s = static_cast<uint64_t>(acc.max_abs_index);
    const size_t size = job.ref->elem_size;
    locate_max_abs(RawChunk{job.raw_format, job.ref_bytes + size * s, job.cand_bytes + size * s}, s,
                   static_cast<size_t>(std::min<uint64_t>(kChunk, end - s)), acc.max_abs, acc);
  }
  if (observer) observer->finish();
}

void run_task(const Job& job, uint64_t begin, uint64_t end, Acc& acc,
              std::pair<uint32_t, uint32_t>* crc) {
  const std::unique_ptr<ChunkTask> observer =
      job.options->observer ? job.options->observer->begin_task() : nullptr;
  if (job.raw != nullptr) return run_task_raw(job, begin, end, acc, crc, observer.get());
  // Sized to the task, not to a whole chunk: a comparison of many small tensors runs one task per
  // pair, and 2 x 32 KiB aligned blocks per pair fragmented the heap into ~33 KiB of RSS per pair
  // (issue 7, bug 16). The kernel needs the padded tail only (zeroed below for every chunk).
  const size_t cap = static_cast<size_t>(std::min<uint64_t>(kChunk, end - begin));
  AlignedDoubles rbuf(cap + kLanes), cbuf(cap + kLanes);
  std::vector<std::byte> gather;
  ChunkPartial cp;
  RowState top_r, top_c;
  uint64_t col = 0;
  if (job.classes > 0) {
    top_r.heap.reserve(job.k);
    top_c.heap.reserve(job.k);
  }
  std::vector<uint64_t> set_r, set_c;
  kernel::Params params = job.params;
  for (uint64_t s = begin; s < end; s += kChunk) {
    const size_t len = static_cast<size_t>(std::min<uint64_t>(kChunk, end - s));
    double* r = rbuf.get();
    double* c = cbuf.get();
    if (auto res = decode_range(*job.ref, s, len, r); !res) {
      acc.error = std::move(res).error();
      return;
    }
    if (auto res = decode_cand(job, s, len, c, gather); !res) {
      acc.error = std::move(res).error();
      return;
    }
    crc_chunk(job, s, len, crc);
    // The kernel reads whole groups of kLanes; the tail it masks must still be valid memory.
    const size_t padded = (len + kLanes - 1) / kLanes * kLanes;
    std::fill(r + len, r + padded, 0.0);
    std::fill(c + len, c + padded, 0.0);
    params.max_rel_floor = acc.max_rel;  // as in run_task_raw
    job.fn(r, c, len, params, &cp);
    absorb_chunk(DecodedChunk{r, c}, s, len, cp, acc);
    if (observer) observer->chunk({s, len, ChunkFormat::f64, r, c, cp.nonfinite});
    if (job.ulp) {
      const uint64_t* idx = job.options->cand_index.empty() ? nullptr : job.options->cand_index.data();
      acc.max_ulp = std::max(acc.max_ulp,
                             max_ulp_range(*job.ulp, job.ref_bytes, job.cand_bytes, idx, s, len));
    }
    if (job.classes > 0) {
      // Tasks start on row boundaries, so a row never spans two tasks.
      for (size_t i = 0; i < len; ++i) {
        top_r.push(r[i], col, job.k);
        top_c.push(c[i], col, job.k);
        if (++col < job.classes) continue;
        ++acc.rows;
        acc.argmax_agree += top_r.best.second == top_c.best.second;
        set_r.clear();
        set_c.clear();
        for (const auto& e : top_r.heap) set_r.push_back(e.second);
        for (const auto& e : top_c.heap) set_c.push_back(e.second);
        std::sort(set_r.begin(), set_r.end());
        std::sort(set_c.begin(), set_c.end());
        size_t a = 0, b = 0;
        while (a < set_r.size() && b < set_c.size()) {
          if (set_r[a] == set_c[b]) {
            ++acc.topk_hits;
            ++a;
            ++b;
          } else if (set_r[a] < set_c[b]) {
            ++a;
          } else {
            ++b;
          }
        }
        top_r.heap.clear();
        top_c.heap.clear();
        col = 0;
      }
    }
  }
  if (observer) observer->finish();
}

Error bad_option(std::string_view what, double v, std::string_view rule) {
  return make_error(Errc::invalid_argument, fmt::format("{} is {}; it must be {}", what, v, rule));
}

}  // namespace

Result<PairMetrics> compare_pair(const TensorInfo& ref, std::span<const std::byte> ref_payload,
                                 const TensorInfo& cand, std::span<const std::byte> cand_payload,
                                 const PairOptions& options) {
  if (!(options.atol >= 0)) return bad_option("atol", options.atol, ">= 0");
  if (!(options.rtol >= 0)) return bad_option("rtol", options.rtol, ">= 0");
  if (!(options.rel_eps > 0) || !std::isfinite(options.rel_eps))
    return bad_option("rel_eps", options.rel_eps, "finite and > 0");

  auto ref_plan = make_decode_plan(ref, ref_payload);
  if (!ref_plan) return std::move(ref_plan).error();
  auto cand_plan = make_decode_plan(cand, cand_payload);
  if (!cand_plan) return std::move(cand_plan).error();
  const uint64_t n = ref_plan->numel;
  if (cand_plan->numel != n)
    return make_error(Errc::incomparable,
                      fmt::format("'{}' has {} elements, '{}' has {}", ref.name, n, cand.name,
                                  cand_plan->numel));
  if (!options.cand_index.empty() && options.cand_index.size() != n)
    return make_error(Errc::invalid_argument,
                      fmt::format("cand_index has {} entries for {} elements",
                                  options.cand_index.size(), n));
  if (options.classes > 0) {
    if (n % options.classes != 0)
      return make_error(Errc::invalid_argument,
                        fmt::format("classes is {}, which does not divide the {} elements of '{}'",
                                    options.classes, n, ref.name));
    if (options.top_k == 0 || options.top_k > kMaxTopK)
      return make_error(Errc::invalid_argument,
                        fmt::format("top_k is {}; it must be 1..{}", options.top_k, kMaxTopK));
  }

  Job job;
  job.ref = &*ref_plan;
  job.cand = &*cand_plan;
  job.options = &options;
  job.params = {options.atol, options.rtol, options.rel_eps, options.nan_equal};
  job.fn = kernel::selected();  // chosen once per pair, not per chunk
  job.n = n;
  if (ref.dtype == cand.dtype && ref.encoding.kind == EncodingKind::raw &&
      cand.encoding.kind == EncodingKind::raw)
    job.ulp = ulp_format(ref.dtype);
  job.ref_bytes = ref_payload.data();
  job.cand_bytes = cand_payload.data();
  job.ref_size = ref_payload.size();
  job.cand_size = cand_payload.size();
  job.classes = options.classes;
  job.k = static_cast<size_t>(std::min<uint64_t>(options.top_k, std::max<uint64_t>(options.classes, 1)));
  if (job.ulp && options.cand_index.empty() && options.classes == 0 &&
      std::endian::native == std::endian::little) {  // job.ulp: same dtype, both raw
    const std::optional<kernel::RawFormat> f =
        ref.dtype == DType::f32    ? std::optional(kernel::RawFormat::f32)
        : ref.dtype == DType::f16  ? std::optional(kernel::RawFormat::f16)
        : ref.dtype == DType::bf16 ? std::optional(kernel::RawFormat::bf16)
                                   : std::nullopt;
    if (f) {
      job.raw_format = *f;
      job.raw = kernel::selected_raw(*f);
    }
  }
  job.task_elems = kTaskChunks * kChunk;
  if (job.classes > 0) job.task_elems = std::max<uint64_t>(1, job.task_elems / job.classes) * job.classes;

  const uint64_t tasks = n == 0 ? 0 : (n - 1) / job.task_elems + 1;
  // One task (every pair below a task's size, e.g. a million small tensors): its results live
  // on the stack, no heap allocation per pair.
  const bool crc = options.crc_ref || options.crc_cand;
  Acc one_part{};
  std::pair<uint32_t, uint32_t> one_crc{};
  std::vector<Acc> many_parts(tasks > 1 ? tasks : 0);
  std::vector<std::pair<uint32_t, uint32_t>> many_crcs(crc && tasks > 1 ? tasks : 0);
  const std::span<Acc> parts = tasks > 1 ? std::span<Acc>(many_parts) : std::span<Acc>(&one_part, tasks);
  const std::span<std::pair<uint32_t, uint32_t>> crcs =
      !crc ? std::span<std::pair<uint32_t, uint32_t>>() : tasks > 1 ? std::span(many_crcs) : std::span(&one_crc, tasks);
  std::optional<ReleaseFront> front;
  if (options.release_pages && tasks > 1)
    front.emplace(tasks, kReleaseBytes / std::max<uint64_t>(1, byte_share(job.ref_size, 0, job.task_elems, n).second));
  detail::parallel_for(
      tasks,
      [&](size_t t) {
        const uint64_t begin = t * job.task_elems;
        const uint64_t end = std::min(n, begin + job.task_elems);
        const auto [r0, r1] = byte_share(job.ref_size, begin, end, n);
        const auto [c0, c1] = byte_share(job.cand_size, begin, end, n);
        // File maps: one call maps a large share's pages instead of a fault per 64 KiB (a system
        // call per small pair would cost more than the faults it saves).
        if (options.release_pages && r1 - r0 >= kPopulateBytes) {
          detail::populate_pages(ref_payload.subspan(r0, r1 - r0));
          if (options.cand_index.empty()) detail::populate_pages(cand_payload.subspan(c0, c1 - c0));
        }
        run_task(job, begin, end, parts[t], crc ? &crcs[t] : nullptr);
        if (!options.release_pages) return;
        uint64_t first = t, last = t + 1;
        if (front) {
          std::tie(first, last) = front->finish(t);
          if (first == last) return;
        }
        const auto [rb, re] = byte_share(job.ref_size, first * job.task_elems, std::min(n, last * job.task_elems), n);
        const auto [cb, ce] = byte_share(job.cand_size, first * job.task_elems, std::min(n, last * job.task_elems), n);
        detail::release_pages(ref_payload.subspan(rb, re - rb));
        if (options.cand_index.empty()) detail::release_pages(cand_payload.subspan(cb, ce - cb));
      },
      options.threads);
  uint32_t crc_ref = 0, crc_cand = 0;
  if (tasks == 0) {
    if (options.crc_ref) crc_ref = detail::crc32(0, ref_payload);
    if (options.crc_cand) crc_cand = detail::crc32(0, cand_payload);
  }
  for (uint64_t t = 0; t < crcs.size(); ++t) {
    const uint64_t begin = t * job.task_elems;
    const uint64_t end = std::min(n, begin + job.task_elems);
    const auto [r0, r1] = byte_share(job.ref_size, begin, end, n);
    const auto [c0, c1] = byte_share(job.cand_size, begin, end, n);
    if (t == 0) {  // crc32(0, a ‖ b) needs no combining for the first piece
      crc_ref = crcs[t].first;
      crc_cand = crcs[t].second;
      continue;
    }
    crc_ref = detail::crc32_combine(crc_ref, crcs[t].first, r1 - r0);
    crc_cand = detail::crc32_combine(crc_cand, crcs[t].second, c1 - c0);
  }

  Acc total;
  for (const Acc& a : parts) {
    if (a.error) return *a.error;
    total.append(a);
  }

  PairMetrics m;
  m.count = n;
  m.payload_crc_ref = crc_ref;
  m.payload_crc_cand = crc_cand;
  m.nan_ref = total.nan_ref;
  m.nan_cand = total.nan_cand;
  m.nan_both = total.nan_both;
  m.inf_ref = total.inf_ref;
  m.inf_cand = total.inf_cand;
  m.inf_same = total.inf_same;
  m.nan_positions_match = total.nan_ref == total.nan_both && total.nan_cand == total.nan_both;
  m.inf_positions_match = total.inf_ref == total.inf_same && total.inf_cand == total.inf_same;
  m.finite_pairs = total.finite;
  const auto fp = static_cast<double>(total.finite);
  if (total.finite > 0) {
    m.max_abs_diff = total.max_abs;
    m.mean_abs_diff = total.sum_abs / fp;
    m.max_rel_diff = total.max_rel;
    m.max_abs_index = total.max_abs_index;
    m.max_abs_ref = unsigned_zero(total.max_abs_ref);
    m.max_abs_cand = unsigned_zero(total.max_abs_cand);
    m.min_ref = unsigned_zero(total.min_ref);
    m.max_ref = unsigned_zero(total.max_ref);
    m.min_cand = unsigned_zero(total.min_cand);
    m.max_cand = unsigned_zero(total.max_cand);
    m.const_ref = total.min_ref == total.max_ref;
    m.const_cand = total.min_cand == total.max_cand;
  }
  const ScaledSum& sd = total.sq_diff;
  const ScaledSum& sr = total.sq_ref;
  const ScaledSum& sc = total.sq_cand;
  // Scaled sums keep even exponents, so halving them for square roots is exact.
  m.rmse = total.finite > 0 ? std::ldexp(std::sqrt(sd.m / fp), sd.e / 2) : 0.0;
  m.norm_ref = std::ldexp(std::sqrt(sr.m), sr.e / 2);
  m.norm_cand = std::ldexp(std::sqrt(sc.m), sc.e / 2);
  m.sum_ref = unsigned_zero(total.sum_ref);
  m.sum_cand = unsigned_zero(total.sum_cand);
  m.sumsq_ref = sr.value();
  m.sumsq_cand = sc.value();
  m.sumsq_diff = sd.value();
  m.dot = unsigned_zero(total.dot.value());
  m.zero_ref = total.zero_ref;
  m.zero_cand = total.zero_cand;
  if (sr.m == 0 && sc.m == 0) {
    m.cosine = 1;
  } else if (sr.m == 0 || sc.m == 0) {
    m.cosine = 0;
  } else if (sd.m == 0) {
    m.cosine = 1;  // equal vectors: exactly 1, where the quotient could round to 1 - 2^-53
  } else {
    const double c = std::ldexp(total.dot.m / (std::sqrt(sr.m) * std::sqrt(sc.m)),
                                total.dot.e - (sr.e + sc.e) / 2);
    m.cosine = std::clamp(c, -1.0, 1.0);
  }
  if (sd.m == 0) {
    m.sqnr_db = kInf;
    m.nmse = 0;
    m.rel_l2 = 0;
  } else if (sr.m == 0) {
    m.sqnr_db = -kInf;
    m.nmse = kInf;
    m.rel_l2 = kInf;
  } else {
    m.sqnr_db = 10.0 * std::log10(sr.m / sd.m) + 10.0 * std::log10(2.0) * (sr.e - sd.e);
    m.nmse = std::ldexp(sd.m / sr.m, sd.e - sr.e);
    m.rel_l2 = std::ldexp(std::sqrt(sd.m / sr.m), (sd.e - sr.e) / 2);
  }
  m.mismatch_count = total.mismatch;
  m.mismatch_fraction = n > 0 ? static_cast<double>(total.mismatch) / static_cast<double>(n) : 0.0;
  m.first_mismatch = total.first_mismatch;
  m.first_mismatch_ref = total.first_ref;
  m.first_mismatch_cand = total.first_cand;
  if (job.ulp) {
    m.max_ulp = total.max_ulp > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                    ? std::numeric_limits<int64_t>::max()
                    : static_cast<int64_t>(total.max_ulp);
  }
  m.rows = total.rows;
  if (total.rows > 0) {
    const auto rows = static_cast<double>(total.rows);
    m.argmax_agreement = static_cast<double>(total.argmax_agree) / rows;
    m.topk_overlap = static_cast<double>(total.topk_hits) / (rows * static_cast<double>(job.k));
  }
  return m;
}

std::vector<std::string> available_targets() { return kernel::targets(); }

bool force_target(const std::string& name) { return kernel::force(name); }

namespace {
// A block's test is one OR over its compares, which the compiler vectorises; only the block
// with a hit is walked element by element.
template <class T>
size_t next_at_least_in(const T* d, size_t i, size_t n, T t) {
  constexpr size_t kBlock = 32;
  for (; i + kBlock <= n; i += kBlock) {
    bool any = false;
    for (size_t j = 0; j < kBlock; ++j) any |= d[i + j] >= t;
    if (any) break;
  }
  for (; i < n; ++i)
    if (d[i] >= t) return i;
  return n;
}
}  // namespace

size_t next_at_least(const float* d, size_t from, size_t n, float t) { return next_at_least_in(d, from, n, t); }
size_t next_at_least(const double* d, size_t from, size_t n, double t) { return next_at_least_in(d, from, n, t); }

}  // namespace driftscope::numerics
