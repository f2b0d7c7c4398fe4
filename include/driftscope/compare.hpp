// driftscope — comparing two runs: align the tensors of a reference and a candidate dump, measure
// every pair, judge it against a tolerance policy and name the first tensor that diverges
// (docs/compare.md; metric formulas in docs/metrics.md; JSON report in docs/report-schema.json).
//
// Contract: compare() is a pure function of the two dumps and the options. Pairs are ordered by
// the reference's execution index, metrics come from one float64 pass per pair, and the report is
// identical whatever `threads` is. Memory stays bounded: payloads are read through the readers'
// maps, never copied whole (a permuted-axes pair needs an index of 8 bytes per element, capped by
// CompareOptions::max_permuted_elements). The library never prints; reports are returned as text.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "driftscope/api.h"
#include "driftscope/compact_optional.hpp"
#include "driftscope/compare_options.hpp"
#include "driftscope/dataflow.hpp"
#include "driftscope/dtype.hpp"
#include "driftscope/error.hpp"
#include "driftscope/detail/boxed.hpp"
#include "driftscope/detail/inline_vector.hpp"
#include "driftscope/detail/interned.hpp"
#include "driftscope/detail/pooled.hpp"
#include "driftscope/detail/shared_string.hpp"
#include "driftscope/detail/sparse.hpp"
#include "driftscope/reader.hpp"
#include "driftscope/tensor.hpp"

namespace driftscope {

// ---- tolerance policy ---------------------------------------------------------------------------

// Pass/fail criteria for one tensor pair. A pair passes when every criterion that is set holds.
// An empty Criteria judges nothing beyond the health checks (NaN positions, Inf signs, silent
// zeros), which always apply.
// (CompactOptional: std::optional's interface in 8 bytes; a report holds one Criteria per pair.)
struct DS_API Criteria {
  CompactOptional<double> atol;                   // allclose: |cand-ref| <= atol + rtol*|ref|
  CompactOptional<double> rtol;                   // (either one set enables allclose; the other is 0)
  CompactOptional<double> max_mismatch_fraction;  // allclose may fail on this fraction (default 0)
  CompactOptional<double> min_cosine;
  CompactOptional<double> min_sqnr_db;
  CompactOptional<double> max_rel_l2;             // ||cand-ref|| / ||ref||
  CompactOptional<int64_t> max_ulp;               // only when both sides share a float dtype
  CompactOptional<double> min_argmax_agreement;   // need class metrics (PolicyRule::classes)
  CompactOptional<double> min_topk_overlap;

  bool empty() const noexcept;
  bool uses_allclose() const noexcept { return atol.has_value() || rtol.has_value(); }
  // "sqnr>=40dB", "atol=1e-05 rtol=0.001 cosine>=0.999", "(none)".
  std::string to_string() const;
};

// The documented default for a pair whose coarser side has dtype `t` (docs/compare.md, table
// "Default tolerances"); `quantized` when either side is affine-quantized.
DS_API Criteria default_criteria(DType t, bool quantized);

// A per-pattern override. The first rule whose patterns match a pair decides its criteria.
struct PolicyRule {
  std::string match = "*";   // glob (filter.hpp glob_match) on the reference tensor name
  std::string op = "*";      // glob on the reference op type
  std::optional<Criteria> criteria;  // replaces the criteria as a whole; nullopt keeps them
  bool skip = false;         // do not compare matching tensors (reported as "skipped")
  bool classes = false;      // last axis holds classes: compute argmax / top-k agreement
  uint32_t top_k = 5;
};

struct DS_API Policy {
  // Replaces the per-dtype defaults for every pair no rule decides (command-line criteria).
  std::optional<Criteria> global;
  std::vector<PolicyRule> rules;
  // Reference64 multipliers per candidate dtype (docs/compare.md "The float64 ordering rule").
  std::vector<std::pair<DType, double>> r64_k;
  std::optional<double> r64_floor;  // relative floor, in units of RMS(reference64)

  // Parses a policy file; the format is TOML (a documented subset) unless the text starts with
  // '{' (JSON). Errors are Errc::bad_policy naming the line or key.
  static Result<Policy> parse(std::string_view text, std::string_view origin = "policy");
  static Result<Policy> load(const std::string& path);
};

// ---- alignment ----------------------------------------------------------------------------------

// A rename rule "REGEX=>REPLACEMENT" (ECMAScript regex, $1.. in the replacement), applied to
// every name of one side before pairing; rules apply in order, each to the previous result.
struct DS_API RenameRule {
  std::string pattern;
  std::string replacement;
  // Parses "REGEX=>REPL"; errors are Errc::invalid_argument naming the rule.
  static Result<RenameRule> parse(std::string_view text);
};

struct DS_API NameMap {
  std::vector<RenameRule> reference;   // --map-a
  std::vector<RenameRule> candidate;   // --map-b
  // Exact pairs (reference name, candidate name); they win over the regex rules.
  std::vector<std::pair<std::string, std::string>> exact;
  // Mapping file (TOML subset or JSON): a = [...], b = [...], [exact] "ref" = "cand".
  static Result<NameMap> parse(std::string_view text, std::string_view origin = "mapping");
  static Result<NameMap> load(const std::string& path);
};

enum class Pairing : uint8_t {
  by_name,     // (name after renames, role + role_index, occurrence)
  positional,  // i-th record of the reference with the i-th of the candidate, execution order
};

// ---- options ------------------------------------------------------------------------------------

struct CompareOptions {
  Policy policy;
  NameMap names;
  Pairing pairing = Pairing::by_name;
  std::string filter;          // filter syntax (filter.hpp) applied to reference tensors
  bool reshape = false;        // compare same-count tensors of different shapes element by element
  bool nan_equal = false;      // NaN at the same position on both sides counts as equal
  bool stop_at_first = false;  // stop after the first divergence (later pairs: "not_compared")
  bool allow_unpaired = false;      // tensors only in one dump do not make the verdict "diverged"
  bool allow_incomparable = false;  // neither do incomparable pairs
  unsigned threads = 0;        // 0: hardware concurrency; never changes the result
  std::string reference64;     // path of a float64 run of the reference (empty: none)
  double amplification_threshold = 10.0;  // introduced when error grows by this factor or more
  size_t max_amplifiers = 5;
  uint64_t max_permuted_elements = uint64_t{1} << 27;
  // Also compute where the error of each element-wise pair sits (PairResult::detail): one more
  // pass over each compared pair, in the same worker while its pages are resident; memory per
  // pair is fixed (a few KiB), whatever the tensor's size. The HTML report needs it.
  bool details = false;
  // Layout diagnosis (docs/axes.md): pairs diagnosed per report (0: none) and the largest tensor
  // diagnosed; both bound its cost (each side decoded once to float64).
  size_t max_layout_diagnoses = 16;
  uint64_t max_layout_elements = uint64_t{1} << 22;
  // Called by the calling thread as pairs complete (done, total). Must not throw.
  std::function<void(size_t done, size_t total)> progress;
};

// Compare options spelt as a user gives them: the keys of the C ABI's options JSON and of Python's
// compare(), the long options of `driftscope compare` ('-' for '_'); the fields, their defaults,
// ranges and help are the rows of DRIFTSCOPE_COMPARE_SETTINGS (compare_options.hpp). resolve() is
// the one validator every front end calls, so a bad value gets the same error and message from
// the CLI, C and Python: Errc::invalid_argument "compare option 'min_cosine' is 2, allowed -1 .. 1"
// (or the error of the policy file, mapping file, rename rule or filter it names).
struct DS_API CompareSettings {
  DRIFTSCOPE_COMPARE_SETTINGS(DRIFTSCOPE_OPTION_FIELD_)

  // Checks every value, reads the policy and mapping files and builds the engine's options.
  Result<CompareOptions> resolve() const;
};

// Checks options built in code against the same ranges (compare() and resolve() call it):
// criteria, rules, reference64 multipliers and floor, threads, amplification settings.
DS_API Result<void> validate(const CompareOptions& options);

// ---- report -------------------------------------------------------------------------------------

// nothing_compared: no pair was compared (dumps without tensors, a filter or name map that paired
// nothing, every pair skipped, unpaired or incomparable but allowed). Not a pass: a CI job whose
// runs recorded nothing must not go green. Numeric values are the C ABI's DS_VERDICT_*.
enum class Verdict : uint8_t { pass, diverged, silent_failure, nothing_compared };
enum class PairStatus : uint8_t {
  pass,
  fail,            // over tolerance, or NaN/Inf disagreement where the reference is not healthy
  silent_failure,  // candidate NaN/Inf, zero, vanished or constant where the reference is healthy
  incomparable,    // could not be compared; reasons say why
  skipped,         // a policy rule said skip
  not_compared,    // after the first divergence with stop_at_first
};
inline constexpr size_t kPairStatuses = 6;  // the number of PairStatus values
// introduced: born here; inherited: carried in from its inputs; amplified: its inputs carried
// error and this op multiplied it by at least CompareOptions::amplification_threshold
// (docs/compare.md §5).
enum class Origin : uint8_t { none, introduced, inherited, amplified };
DS_API std::string_view verdict_name(Verdict v) noexcept;
// The exit status of `driftscope compare` for a verdict (also Python's Report.exit_code and the
// JSON report's exit_code): 0 pass, 1 diverged, 2 nothing_compared (like an input error: there
// was nothing to judge), 3 silent_failure.
DS_API int verdict_exit_code(Verdict v) noexcept;
DS_API std::string_view status_name(PairStatus s) noexcept;
DS_API std::string_view origin_name(Origin o) noexcept;

namespace detail {
struct ReportAccess;  // the engine's write access to the report model (src/compare/report_access.hpp)
}

// A stable code ("allclose", "nonfinite", "shape", ...; docs/compare.md lists them) and, for the
// reasons whose sentence quotes what the pair does not hold (a shape or dtype mismatch, a read
// error, an axis finding), that sentence in `message`. The judgement of the metrics stores the
// code only (`message` is empty): reason_text() words every reason from its pair.
class Reason {
 public:
  Reason() = default;
  Reason(std::string_view code, std::string text) : code_(code), message(std::move(text)) {}
  const std::string& code() const noexcept { return code_; }

 private:
  friend struct detail::ReportAccess;
  detail::Interned code_;  // (a few dozen distinct codes: one pointer, detail/interned.hpp)

 public:
  std::string message;  // "" for a reason worded from its pair: read reasons through reason_text()
};

namespace detail {

// Not API (storage, may change): the recorded inputs of one description (TensorDesc::inputs()
// reads them as a span), read like a std::vector: the one
// input most tensors have sits inline, more go to one heap block. The PyTorch recorder gives every
// record its inputs, and a std::vector put each in a 32-byte block of its own: 61 MiB at a million
// pairs (issue 30 item 4). 24 bytes, as a std::vector.
class TensorRefs {
 public:
  TensorRefs() noexcept {}
  TensorRefs(std::vector<TensorRef>&& v) { take(v.data(), v.size()); }
  TensorRefs(std::initializer_list<TensorRef> v) {
    std::vector<TensorRef> copy(v);
    take(copy.data(), copy.size());
  }
  TensorRefs(const TensorRefs& o) {
    std::vector<TensorRef> copy(o.begin(), o.end());
    take(copy.data(), copy.size());
  }
  TensorRefs(TensorRefs&& o) noexcept { steal(o); }
  ~TensorRefs() { destroy(); }
  TensorRefs& operator=(const TensorRefs& o) {
    if (this != &o) *this = TensorRefs(o);
    return *this;
  }
  TensorRefs& operator=(TensorRefs&& o) noexcept {
    if (this != &o) {
      destroy();
      steal(o);
    }
    return *this;
  }
  TensorRefs& operator=(std::vector<TensorRef>&& v) { return *this = TensorRefs(std::move(v)); }

  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  TensorRef* begin() noexcept { return size_ > 1 ? many_ : &one_; }
  TensorRef* end() noexcept { return begin() + size_; }
  const TensorRef* begin() const noexcept { return size_ > 1 ? many_ : &one_; }
  const TensorRef* end() const noexcept { return begin() + size_; }
  TensorRef& operator[](size_t i) noexcept { return begin()[i]; }
  const TensorRef& operator[](size_t i) const noexcept { return begin()[i]; }
  friend bool operator==(const TensorRefs& a, const TensorRefs& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  // Moves the n refs at p in (this holds none).
  void take(TensorRef* p, size_t n) {
    if (n == 1) {
      new (&one_) TensorRef(std::move(*p));
    } else if (n > 1) {
      many_ = std::allocator<TensorRef>().allocate(n);
      std::uninitialized_move(p, p + n, many_);
    }
    size_ = n;
  }
  void steal(TensorRefs& o) noexcept {
    if (o.size_ == 1) {
      new (&one_) TensorRef(std::move(o.one_));
      o.one_.~TensorRef();
    } else if (o.size_ > 1) {
      many_ = o.many_;
    }
    size_ = std::exchange(o.size_, 0);
  }
  void destroy() noexcept {
    if (size_ == 1) {
      one_.~TensorRef();
    } else if (size_ > 1) {
      std::destroy(many_, many_ + size_);
      std::allocator<TensorRef>().deallocate(many_, size_);
    }
    size_ = 0;
  }
  union {
    TensorRef one_;     // size_ == 1
    TensorRef* many_;   // size_ > 1
  };
  size_t size_ = 0;
};

}  // namespace detail

// One side of a pair, as recorded. The name, op type, shape and the data-flow members are read
// through accessors (plain types); their storage is private (detail/: a pair's two equal names
// share one block, an op type is one pointer, a shape of up to two axes needs no heap block) and
// only the comparison engine writes it (detail::ReportAccess).
class TensorDesc {
 public:
  std::string_view name() const noexcept { return name_; }  // as stored
  const std::string& op_type() const noexcept { return op_type_; }
  std::span<const uint64_t> shape() const noexcept { return {shape_.data(), shape_.size()}; }

 private:
  friend struct detail::ReportAccess;
  detail::SharedString name_;
  detail::Interned op_type_;

 public:
  Role role = Role::output;
  uint16_t role_index = 0;
  uint32_t occurrence = 0;
  uint64_t exec_index = 0;
  // (The one-byte members sit together: a report of a million pairs holds two of these each.)
  DType dtype = DType::f32;
  bool summary = false;   // a light-mode SUMMARY record (metrics are estimates)
  bool quantized = false;
  // Data flow (docs/format.md §3.3.3), when the recorder wrote it.
  bool has_inputs = false;             // the record carries a valid ds.inputs
  TensorKind kind = TensorKind::value; // ds.kind; integer and bool dtypes are never `value`

 private:
  detail::InlineVector<uint64_t, 2> shape_;
  // The members below are empty unless the recorder wrote data flow (inputs, source), axis
  // names or a path, or the side is a dump set (ranks), so they live in one box (detail/boxed.hpp,
  // shared between a pair's two descriptions when equal: ReportAccess::share_rare()): 8
  // bytes when none is set, where five Sparse members took 40 (a million pairs hold two
  // descriptions each: issue 13 §5). Source and path take few distinct values (a module class
  // and the file:line of its forward; "weight"), so they are Interned; inputs and ranks, set
  // together with them by the PyTorch recorder and by dump sets, sit in the box itself. Read them
  // through the accessors, which give an empty value when none is set; the engine sets them
  // through detail::ReportAccess::edit(), which makes the box.
  struct Rare {
    // The recorded tensors it was computed from (ds.inputs). A comparison points their names at
    // the blocks of the named tensors' own names where it describes them (TensorRef).
    detail::TensorRefs inputs;
    // Dump sets (docs/dumpsets.md): the ranks this logical tensor came from (gathered or summed
    // shards, or the one rank holding this replica); empty when the side is a single dump.
    // (Sparse: the box holding data flow alone is 56 bytes, 64 with the allocator's, not 80.)
    detail::Sparse<std::vector<uint32_t>> ranks;
    detail::Interned source;        // ds.source: where it is computed ("Linear  file.py:12")
    detail::Interned path;          // attribute "path": the output leaf or parameter ("weight")
    detail::Sparse<std::vector<std::string>> axes;
    friend bool operator==(const Rare&, const Rare&) = default;
  };

 public:
  const std::vector<std::string>& axes() const noexcept { return rare_ ? rare_->axes.get() : kNoRare.axes.get(); }
  // The recorded tensors it was computed from (ds.inputs): a comparison points their names at the
  // blocks of the named tensors' own names where it describes them.
  std::span<const TensorRef> inputs() const noexcept {
    const detail::TensorRefs& v = rare_ ? rare_->inputs : kNoRare.inputs;
    return {v.begin(), v.size()};
  }
  const std::string& source() const noexcept { return rare_ ? rare_->source.get() : kNoRare.source.get(); }
  const std::string& path() const noexcept { return rare_ ? rare_->path.get() : kNoRare.path.get(); }
  const std::vector<uint32_t>& ranks() const noexcept { return rare_ ? rare_->ranks.get() : kNoRare.ranks.get(); }

 private:
  static inline const Rare kNoRare{};
  detail::SharedBox<Rare> rare_;  // (copies share it until edited: detail/boxed.hpp)
};

// Metrics of a pair (docs/metrics.md). Values that were not computed are NaN (doubles) or -1.
struct Metrics {
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  uint64_t count = 0, finite_pairs = 0;
  bool nan_positions_match = true, inf_positions_match = true;
  bool const_ref = false, const_cand = false;
  double max_abs_diff = kNaN, mean_abs_diff = kNaN, rmse = kNaN, max_rel_diff = kNaN;
  double cosine = kNaN, sqnr_db = kNaN, nmse = kNaN, rel_l2 = kNaN;
  double norm_ref = kNaN, norm_cand = kNaN;
  uint64_t zero_ref = 0, zero_cand = 0;
  uint64_t mismatch_count = 0;
  double mismatch_fraction = kNaN;
  int64_t max_abs_index = -1;      // its coordinates: PairResult::max_abs_coords()
  int64_t max_ulp = -1;

  // The metrics below are usually at their defaults (no NaN or Inf on either side, no class
  // metrics, not light mode), so they live in one box (detail/boxed.hpp): 8 bytes where they took 128
  // (a report holds a million pairs: issue 13 §5, issue 30 item 4). Read them through the
  // accessors; set them with set_rare(), which keeps the box only when a value differs from its
  // default. The first mismatch is the exception: set on every failing or tolerated mismatch,
  // which in a failing comparison is most pairs, it is held beside the box (24 bytes), not in it
  // (a 144-byte block each, issue 30 item 4).
  struct Rare {
    uint64_t nan_ref = 0, nan_cand = 0, nan_both = 0, inf_ref = 0, inf_cand = 0, inf_same = 0;
    uint32_t top_k = 0;                                   // class metrics: the k of topk_overlap
    double argmax_agreement = kNaN, topk_overlap = kNaN;  // class metrics only
    double cosine_stderr = kNaN, rel_l2_stderr = kNaN;    // light mode only
    // The first element outside allclose (a failing or tolerated mismatch only): flat index in
    // reference order and its two values; its coordinates in the reference's shape are
    // PairResult::first_mismatch_coords().
    int64_t first_mismatch = -1;
    double first_mismatch_ref = kNaN, first_mismatch_cand = kNaN;
    // Whether the boxed members (all but the first mismatch) are at their defaults.
    bool is_default() const noexcept {
      return (nan_ref | nan_cand | nan_both | inf_ref | inf_cand | inf_same | top_k) == 0 &&
             std::isnan(argmax_agreement) && std::isnan(topk_overlap) && std::isnan(cosine_stderr) &&
             std::isnan(rel_l2_stderr);
    }
  };
  uint64_t nan_ref() const noexcept { return rare_ ? rare_->nan_ref : 0; }
  uint64_t nan_cand() const noexcept { return rare_ ? rare_->nan_cand : 0; }
  uint64_t nan_both() const noexcept { return rare_ ? rare_->nan_both : 0; }
  uint64_t inf_ref() const noexcept { return rare_ ? rare_->inf_ref : 0; }
  uint64_t inf_cand() const noexcept { return rare_ ? rare_->inf_cand : 0; }
  uint64_t inf_same() const noexcept { return rare_ ? rare_->inf_same : 0; }
  uint32_t top_k() const noexcept { return rare_ ? rare_->top_k : 0; }
  double argmax_agreement() const noexcept { return rare_ ? rare_->argmax_agreement : kNaN; }
  double topk_overlap() const noexcept { return rare_ ? rare_->topk_overlap : kNaN; }
  double cosine_stderr() const noexcept { return rare_ ? rare_->cosine_stderr : kNaN; }
  double rel_l2_stderr() const noexcept { return rare_ ? rare_->rel_l2_stderr : kNaN; }
  int64_t first_mismatch() const noexcept { return first_mismatch_; }
  double first_mismatch_ref() const noexcept { return first_mismatch_ref_; }
  double first_mismatch_cand() const noexcept { return first_mismatch_cand_; }
  // All of them at once (the defaults when none is set).
  Rare rare() const {
    Rare r = rare_ ? *rare_ : Rare{};
    r.first_mismatch = first_mismatch_;
    r.first_mismatch_ref = first_mismatch_ref_;
    r.first_mismatch_cand = first_mismatch_cand_;
    return r;
  }
  void set_rare(const Rare& r) {
    first_mismatch_ = r.first_mismatch;
    first_mismatch_ref_ = r.first_mismatch_ref;
    first_mismatch_cand_ = r.first_mismatch_cand;
    if (r.is_default()) {
      rare_.reset();
    } else {
      rare_ = r;
      rare_->first_mismatch = -1;  // held above: the box's copy stays at its default
      rare_->first_mismatch_ref = rare_->first_mismatch_cand = kNaN;
    }
  }

 private:
  int64_t first_mismatch_ = -1;
  double first_mismatch_ref_ = kNaN, first_mismatch_cand_ = kNaN;
  detail::Boxed<Rare> rare_;
};

// Where the error of one pair sits, for visual reports (CompareOptions::details). d = |cand - ref|
// per element, in float64, the candidate read in the reference's order (permuted or reshaped as
// the metrics are). "Non-finite" positions are those where either side is NaN or ±Inf.
struct PairDetail {
  // Histogram of d over positions finite on both sides with d > 0, kHistBinsPerDecade bins per
  // power of ten: bin k holds 10^(kHistFirstExp + k/B) <= d < 10^(kHistFirstExp + (k+1)/B);
  // the first bin also holds smaller d, the last also larger.
  static constexpr int kHistFirstExp = -12;
  static constexpr int kHistBinsPerDecade = 2;
  static constexpr int kHistBins = 40;          // 1e-12 .. 1e8
  static constexpr uint32_t kMaxGridRows = 32;
  static constexpr uint32_t kMaxGridCols = 64;
  static constexpr size_t kWorst = 8;
  std::vector<uint64_t> histogram;   // kHistBins counts
  uint64_t exact = 0;                // d == 0 (finite on both sides)
  uint64_t nonfinite_same = 0;       // both NaN, or the same infinity
  uint64_t nonfinite_differ = 0;     // any other position with a NaN or Inf
  // The 2-D view: rows = product of every axis but the last, cols = the last axis (a scalar or
  // a vector is one row). It is cut into grid_rows x grid_cols cells (at most kMaxGridRows x
  // kMaxGridCols); cell (i, j) covers view rows [i*rows/grid_rows, (i+1)*rows/grid_rows) and the
  // columns likewise, and holds the largest d in it (+inf where non-finite values differ).
  uint64_t rows = 0, cols = 0;
  uint32_t grid_rows = 0, grid_cols = 0;
  std::vector<float> heat;           // grid_rows * grid_cols, row-major
  struct Element {
    uint64_t index = 0;              // flat, reference order
    std::vector<uint64_t> coords;    // in the reference's shape
    double ref = 0, cand = 0, abs_diff = 0;  // abs_diff +inf where non-finite values differ
  };
  std::vector<Element> worst;        // largest d first (ties: lower index), at most kWorst
};

// A layout hypothesis tested on a failed pair (docs/axes.md "Layout diagnosis"): is the candidate
// the reference with its axes permuted, blocks of one axis (attention heads) exchanged, or an axis
// reversed or shifted? Tested on a sample first, confirmed on the whole tensor.
struct DS_API LayoutDiagnosis {
  // "permutation" (the candidate's axes are the reference's, permuted), "view_of_permutation"
  // (the candidate holds the permuted data under another shape: a view where a transpose was
  // meant), "block_permutation", "reversed", "shifted"; "none" when no hypothesis fits.
  std::string hypothesis = "none";
  std::string description;            // "candidate = reference with heads 0 and 1 exchanged ..."
  std::vector<uint32_t> permutation;  // permutation kinds: reference axis of each candidate axis
  int64_t axis = -1;                  // block_permutation, reversed, shifted: reference axis
  uint64_t blocks = 0, block_size = 0;
  std::vector<uint64_t> block_order;  // block_permutation: reference block held by each candidate block
  int64_t shift = 0;                  // shifted: candidate[(i + shift) mod n] = reference[i]
  double cosine = std::numeric_limits<double>::quiet_NaN();  // under the hypothesis, whole tensor
  double rel_l2 = std::numeric_limits<double>::quiet_NaN();
  // The cost, bounded: hypotheses tested on `sample_elements` sampled elements each, the best few
  // confirmed on every element (elements_confirmed counts the element reads of confirmation).
  uint64_t hypotheses_tested = 0, sample_elements = 0, elements_confirmed = 0;
  // One line: the description with cosine and cost, or why nothing fits.
  std::string to_string() const;
};

namespace detail {

// Not API (storage, may change): the members of a PairResult that are set only for a minority of
// pairs: permuted axes, module
// outputs with recorded parameters, --html, layout diagnoses, a float64 run of the reference,
// failing pairs of dump sets (PairResult reads them through its accessors; outside it only
// because its defaults must be complete before PairResult's empty one is made).
struct PairRare {
  Sparse<std::vector<uint32_t>> permutation;  // candidate axis for each reference axis, when permuted
  Sparse<std::vector<size_t>> parameter_pairs;  // the module's compared parameters (role parameter)
  // With CompareOptions::details, for pairs compared element by element (not light-mode ones).
  Boxed<PairDetail> detail;
  // Layout diagnosis: set for the first divergence, introduced errors and same-size shape
  // mismatches (at most CompareOptions::max_layout_diagnoses pairs).
  Boxed<LayoutDiagnosis> layout;
  // reference64 rule (when a float64 run was given and held this tensor: PairResult::r64)
  double r64_err_ref = 0, r64_err_cand = 0, r64_limit = 0, r64_k = 0;
  // RMS of the float64 values; the candidate's unit roundoff when its dtype is coarser than the
  // reference's (0 otherwise): the limit's floor is then the rounding model of docs/metrics.md
  // §7a on the data flow, set at localisation (docs/compare.md "The float64 ordering rule").
  double r64_rms = 0, r64_u = 0;
  // Dump sets (docs/dumpsets.md §7.1): a failing pair gathered from split shards whose other
  // side is one whole tensor has each shard measured against its slice of it. shard_check: ""
  // (not a failing gathered pair), "shards" (failing_shards holds the ranks whose shard fails:
  // the pair's ranks), "no_shard_fails", "partial_sum", "other_side_sharded" or
  // "not_sliceable" (the pair keeps all its ranks).
  Sparse<std::string> shard_check;
  Sparse<std::vector<uint32_t>> failing_shards;
  // Bit for bit: a -0.0 or a NaN is not a default.
  bool is_default() const noexcept {
    uint64_t bits = 0;
    for (double v : {r64_err_ref, r64_err_cand, r64_limit, r64_k, r64_rms, r64_u}) bits |= std::bit_cast<uint64_t>(v);
    return bits == 0 && shard_check.empty() && failing_shards.empty() && permutation.empty() &&
           parameter_pairs.empty() && !detail && !layout;
  }
};

}  // namespace detail

// One compared pair. Lists, the criteria and the short texts are read through accessors (plain
// types); their storage is private (detail/: empty lists cost a pointer, the criteria and texts
// few distinct values are pooled) and only the comparison engine writes it (detail::ReportAccess).
class PairResult {
 public:
  TensorDesc ref, cand;
  // (The one-byte members sit together: a report holds a million pairs.)
  PairStatus status = PairStatus::pass;
  bool compared = false;         // metrics are valid
  bool estimated = false;        // light mode: metrics are sketch estimates
  bool r64 = false;              // judged by the reference64 rule (r64_*() below)
  Origin origin = Origin::none;  // localisation (below); set for fail / silent_failure
  bool beyond_rounding = false;  // error > rounding (with reference64: the float64 rule failed)

  // Why it failed / is incomparable / was skipped.
  const std::vector<Reason>& reasons() const noexcept { return reasons_; }
  // "renamed", "axes permuted ...", "reshaped", "estimated".
  const std::vector<std::string>& notes() const noexcept { return notes_; }
  // What it was judged by, and where that came from: "default (f16)", "command line", "policy
  // rule 2 (*.softmax)".
  const Criteria& criteria() const noexcept { return criteria_; }
  const std::string& criteria_source() const noexcept { return criteria_source_; }
  // Localisation (docs/compare.md "Introduced or inherited"): "inputs", "predecessor" or "none",
  // and the indexes into Report::pairs the input error came from.
  const std::string& basis() const noexcept { return basis_; }
  std::span<const size_t> basis_pairs() const noexcept { return {basis_pairs_.data(), basis_pairs_.size()}; }

 private:
  friend struct detail::ReportAccess;
  // (usually empty: 8 bytes each, detail/sparse.hpp)
  detail::Sparse<std::vector<Reason>> reasons_;
  detail::Sparse<std::vector<std::string>> notes_;

 public:
  Metrics metrics;

 private:
  detail::Pooled<Criteria> criteria_;  // (one Criteria shared by every pair judged alike: 8 bytes)
  detail::Interned criteria_source_;

 public:
  // localisation (docs/compare.md "Introduced or inherited")
  double error = 0;              // rel_l2, +inf when the candidate has new NaN/Inf

 private:
  detail::Interned basis_;
  detail::InlineVector<size_t, 2> basis_pairs_;

 public:
  double input_error = 0;
  double amplification = 0;      // error / input_error (+inf when input_error is 0), NaN if 0/0
  //   With data flow: NaN when the inputs are exact (0) or NaN/Inf, never +inf.
  // judged against rounding (docs/metrics.md "Within or beyond rounding"; beyond_rounding above)
  double rounding = 0;           // the error the candidate's dtype makes anyway (rel_l2 units)

  // The coordinates of metrics.max_abs_index and metrics.first_mismatch() in the reference's
  // shape (empty when it is -1): computed when asked, not held (24 bytes a pair each).
  std::vector<uint64_t> max_abs_coords() const { return coords_of(metrics.max_abs_index); }
  std::vector<uint64_t> first_mismatch_coords() const { return coords_of(metrics.first_mismatch()); }
  std::vector<uint64_t> coords_of(int64_t flat_index) const {
    if (flat_index < 0) return {};
    const std::span<const uint64_t> shape = ref.shape();
    std::vector<uint64_t> c(shape.size(), 0);
    uint64_t flat = static_cast<uint64_t>(flat_index);
    for (size_t i = shape.size(); i-- > 0;) {
      if (shape[i] == 0) return c;
      c[i] = flat % shape[i];
      flat /= shape[i];
    }
    return c;
  }

  // The members below are set only for a minority of pairs (detail::PairRare), so they live in one
  // box (detail/boxed.hpp): 8 bytes where they took 96 (a report holds a million pairs: issue 30
  // item 4). Read them through the accessors, which give the defaults when none is set; the engine
  // sets them through detail::ReportAccess::edit(), which makes the box
  // (ReportAccess::drop_rare_if_default() gives it back when nothing in it differs from the
  // defaults).
  const std::vector<uint32_t>& permutation() const noexcept {
    return rare_ ? rare_->permutation.get() : kNoRare.permutation.get();
  }
  const std::vector<size_t>& parameter_pairs() const noexcept {
    return rare_ ? rare_->parameter_pairs.get() : kNoRare.parameter_pairs.get();
  }
  // With CompareOptions::details, for pairs compared element by element; null otherwise.
  const PairDetail* detail() const noexcept { return rare_ ? rare_->detail.operator->() : nullptr; }
  // The layout diagnosis (the first divergence, introduced errors, same-size shape mismatches: at
  // most CompareOptions::max_layout_diagnoses pairs); null otherwise.
  const LayoutDiagnosis* layout() const noexcept { return rare_ ? rare_->layout.operator->() : nullptr; }
  double r64_err_ref() const noexcept { return rare_ ? rare_->r64_err_ref : 0; }
  double r64_err_cand() const noexcept { return rare_ ? rare_->r64_err_cand : 0; }
  double r64_limit() const noexcept { return rare_ ? rare_->r64_limit : 0; }
  double r64_k() const noexcept { return rare_ ? rare_->r64_k : 0; }
  double r64_rms() const noexcept { return rare_ ? rare_->r64_rms : 0; }
  double r64_u() const noexcept { return rare_ ? rare_->r64_u : 0; }
  const std::string& shard_check() const noexcept { return rare_ ? rare_->shard_check.get() : kNoRare.shard_check.get(); }
  const std::vector<uint32_t>& failing_shards() const noexcept {
    return rare_ ? rare_->failing_shards.get() : kNoRare.failing_shards.get();
  }

 private:
  using Rare = detail::PairRare;
  static inline const Rare kNoRare{};
  detail::Boxed<Rare> rare_;
};

// The sentence of one of a pair's reasons, as every report prints it ("candidate has 1 NaN and 0
// Inf where the reference is finite"): the stored Reason::message where the reason has one, else
// worded from the pair's metrics, criteria and float64 figures. The judgement stores codes only,
// so a million failing pairs cost no million strings; the reports word the few they print.
DS_API std::string reason_text(const PairResult& pair, const Reason& reason);

// One independent origin of error (docs/compare.md §5 "Every origin").
struct OriginPoint {
  size_t pair = 0;              // index into Report::pairs
  Origin origin = Origin::introduced;  // introduced or amplified
  double factor = 0;            // amplification (NaN: the inputs were exact)
  size_t reach = 0;             // compared tensors downstream of it in the data flow
  size_t reach_failing = 0;     // ... of which fail
  bool parameters_differ = false;       // one of its parameters differs from the reference's
};

struct DumpInfo {
  std::string path;
  uint32_t world_size = 1;       // ranks of a dump set; 1 for a single dump
  bool set = false;              // the side is a dump set (docs/dumpsets.md)
  KeyValues metadata;
  std::string state;             // file_state_name of the reader's integrity
  uint64_t records = 0;
};

struct GrowthPoint {
  size_t pair;                   // index into Report::pairs
  double error;                  // relative L2 error (+inf: new NaN/Inf)
};

// A finding by axis name (docs/axes.md §3.1: norm_over, softmax_over, reduce_over_batch,
// broadcast_conflict, concat_mismatch), the same judge as `driftscope check`, on a tensor of either
// run of a comparison. `side` says which run has it: "candidate" (a bug the candidate brought: the
// verdict is at least diverged, docs/compare.md), "reference" (the candidate no longer has it) or
// "both" (the pair's two records both have it: it is not the candidate's doing).
struct AxesFindingPair {
  std::string code;
  std::string side;                  // "reference", "candidate" or "both"
  std::string name;                  // the tensor as the side that has it stores it (the reference's for both)
  Role role = Role::output;
  uint16_t role_index = 0;
  uint32_t occurrence = 0;
  std::string op_type;
  std::optional<size_t> pair;        // index into Report::pairs, when the tensor is paired
  std::optional<uint64_t> index_ref, index_cand;  // execution indexes of the records that have it
  std::string reference_message, candidate_message;  // "" on a side without the finding
};

struct DS_API Report {
  static constexpr std::string_view kSchema = "driftscope.compare.report/1";
  Verdict verdict = Verdict::pass;
  std::string summary;           // the one line a CI log shows first
  DumpInfo reference, candidate, reference64;
  std::vector<PairResult> pairs;                 // in reference execution order
  std::optional<size_t> first_divergence;        // indexes into pairs
  std::optional<size_t> first_nonfinite;
  std::optional<size_t> first_silent_zero;
  std::vector<TensorDesc> only_in_reference, only_in_candidate;
  // Indexes into only_in_candidate of finer-grained steps: the candidate's data flow feeds them
  // into a compared tensor (an op-level dump against a module-level one). Listed, and not a
  // divergence (docs/compare.md §3 "Granularity").
  std::vector<size_t> finer_in_candidate;
  std::vector<size_t> incomparable;
  std::vector<GrowthPoint> growth;               // outputs, in execution order
  std::vector<size_t> amplifiers;                // biggest amplification first
  std::vector<std::string> warnings;
  // Findings by axis name in either run, in the reference's execution order (pairs and tensors
  // only in the reference), then the candidate's tensors only in the candidate.
  std::vector<AxesFindingPair> axes_findings;
  bool stopped_early = false;
  // Every independent origin in execution order (the first is the headline); data flow or not.
  std::vector<OriginPoint> origins;
  bool dataflow = false;         // origins follow the reference's recorded data flow (ds.inputs)
  double amplification_threshold = 10.0;  // the factor that makes a pair "amplified"
  // Dump sets (docs/dumpsets.md §7): true when either side is a set. The ranks of a pair are the
  // candidate's when the candidate is a set, else the reference's, narrowed to the failing
  // shards when PairResult::shard_check is "shards" (pair_ranks()); the lists
  // below hold the ranks of every failing pair of the first divergent (first NaN/Inf) logical
  // tensor, and of every pair that failed, sorted.
  bool sets = false;
  std::vector<uint32_t> first_divergence_ranks, first_nonfinite_ranks, affected_ranks;
  const std::vector<uint32_t>& pair_ranks(const PairResult& p) const noexcept;
  // The number of pairs of each status, indexed by PairStatus, in one walk over the pairs;
  // count(s) is counts()[s].
  std::array<size_t, kPairStatuses> counts() const noexcept;
  size_t count(PairStatus s) const noexcept;
};

// Compares two opened dumps. Errors (Errc::bad_policy, invalid_argument, io_error for the
// reference64 file, ...) concern the request; problems of single pairs go into the report.
DS_API Result<Report> compare(const Reader& reference, const Reader& candidate,
                       const CompareOptions& options);
// Opens both files (full verification) and compares them; paths are recorded in the report.
// Either path may be a dump set (a directory or its driftscope-set.json, docs/dumpsets.md): the
// shards of each side are gathered or summed into logical tensors first, paired by identity and
// coordinates, and the report's pairs carry their ranks (Report::sets). Sets need by-name pairing
// (positional pairing is Errc::unsupported).
DS_API Result<Report> compare_files(const std::string& reference, const std::string& candidate,
                             const CompareOptions& options);

// ---- a comparison in parts (docs/howto/cluster.md) ---------------------------------------------

// compare() split so that its pairs can be measured elsewhere (Ray tasks, other machines reading
// the same files): compare_work() lists the pairs that need measuring (indexes into
// Report::pairs), measure_pairs() measures any subset of them into a self-describing blob, and
// assemble_report() judges, localises and reports from the blobs of all parts, with the same
// dumps and options. For any partition of compare_work() into parts the report equals compare()'s
// bit for bit. Errors (Errc::invalid_argument) for a pair outside the work list, a damaged blob or
// one from another comparison, and a pair no part measured or two parts did: never a partial report.
DS_API Result<std::vector<size_t>> compare_work(const Reader& reference, const Reader& candidate,
                                         const CompareOptions& options);
DS_API Result<std::string> measure_pairs(const Reader& reference, const Reader& candidate,
                                  const CompareOptions& options, std::span<const size_t> pairs);
DS_API Result<Report> assemble_report(const Reader& reference, const Reader& candidate,
                               const CompareOptions& options, std::span<const std::string> parts);

// ---- dump sets in parts (docs/howto/cluster.md "Dump sets") --------------------------------------

// A set comparison split so that its two logical dumps can be compared elsewhere (the parts API
// above, on Ray workers): prepare_sets() gathers/sums each side's shards into two logical dumps
// written in `directory` (it must exist; whoever measures them must see it at that path), and
// finish() puts the sets' paths, ranks and warnings into the report of those two dumps.
// compare_files() on sets is exactly prepare_sets() + compare() + finish(), so any front end that
// follows the same steps gets its report bit for bit. Errors as compare_files() for sets; nothing
// is left in `directory` on error.
struct DS_API SetComparison {
  std::string reference_dump, candidate_dump;  // the logical dumps; the caller removes them
  CompareOptions options;                      // to compare them with (the filter is applied)
  // The report of reference_dump vs candidate_dump (compare() or assemble_report() with
  // `options`) as the report of the two sets. Errors: a set's file changed meanwhile (io_error).
  Result<void> finish(Report& report) const;
  struct State;
  std::shared_ptr<const State> state;
};
DS_API Result<SetComparison> prepare_sets(const std::string& reference, const std::string& candidate,
                                   const CompareOptions& options, const std::string& directory);

}  // namespace driftscope
