// Internals of the comparison engine shared by src/compare/*.cpp (not installed).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <unordered_map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/shape_index.hpp"
#include "config/config_text.hpp"
#include "driftscope/compare.hpp"
#include "driftscope/filter.hpp"
#include "driftscope/reader.hpp"
#include "judge/reason_format.hpp"
#include "numerics/pair_metrics.hpp"

namespace driftscope::compare_detail {

// ---- axes_in_compare.cpp: the checks by axis name over both runs of a comparison -------------
void find_axes_in_comparison(Report& report, std::span<const std::pair<uint32_t, uint32_t>> records,
                             const Reader& ref, const Reader& cand, unsigned threads);

// ---- config/config_text.hpp: policy and mapping files read as JSON values ----------------------
using config::kMaxConfigBytes;
using config::parse_config;
using config::read_text_file;
// Error messages quote keys, names and rules from files and callers; make_error() passes every
// message through driftscope::printable (include/driftscope/text.hpp), so it stays one line.

// ---- policy.cpp ---------------------------------------------------------------------------------
// The allowed range of each criterion: one table for policy files, options and validate().
struct CriterionSpec {
  CompactOptional<double> Criteria::*member;
  std::string_view key;     // policy-file key, as the Criteria field is named
  std::string_view option;  // CompareSettings / C ABI / CLI name (policy files accept it too)
  double lo, hi;
};
extern const CriterionSpec kCriteria[8];
// "'atol' is -1, allowed 0 .. inf", or "" when lo <= v <= hi (NaN is never inside).
std::string range_problem(std::string_view key, double v, double lo, double hi);
struct Judgement {
  Criteria criteria;
  std::string source;
  const PolicyRule* rule = nullptr;   // the deciding rule, if any
  bool is_default = false;            // the per-dtype default (reference64 replaces it)
};
// Which criteria judge this pair: the first matching rule with criteria, else the policy's global
// criteria, else the default for the coarser dtype. `effective_cand` is the candidate's dtype,
// narrowed by its run's `precision` metadata.
Judgement resolve_criteria(const Policy& policy, const TensorDesc& ref, DType effective_ref,
                           DType effective_cand, bool quantized);
// The first rule matching `ref` for which wanted(rule) holds.
const PolicyRule* find_rule(const Policy& policy, const TensorDesc& ref,
                            bool (*wanted)(const PolicyRule&));
// The coarser of two dtypes for tolerance purposes (fewer significand bits).
DType coarser_dtype(DType a, DType b) noexcept;
// Unit roundoff 2^-p of a float dtype; 0 for integer types.
double unit_roundoff(DType t) noexcept;
// Default reference64 multiplier k for a candidate dtype.
double default_r64_k(DType t) noexcept;
inline constexpr double kDefaultR64Floor = 1.0;  // f: f * RMS(ref64) * the rounding bound (docs/metrics.md §7a)

// Applies the health checks and the criteria to a compared pair: fills status and reasons.
void judge(PairResult& pair, bool nan_equal);

// ---- align.cpp ----------------------------------------------------------------------------------
// One side of a planned pair: its record (an index into its reader, decoded again where it is
// measured: detail::ReaderAccess) and what scheduling needs without decoding it.
// (32-bit record indexes: align() refuses dumps of 2^32 - 1 records or more.)
struct PlannedSide {
  std::span<const std::byte> payload;
  uint32_t index = 0;
  RecordKind kind = RecordKind::tensor;
};
// What measuring needs beyond the pair's PairResult (which align() fills with both descriptions,
// the permutation and, for a pair it cannot compare, the reasons): 64 bytes, held by the engine
// until the pairs are measured (a million pairs: issue 13 §5).
struct PlannedPair {
  PlannedSide ref, cand;
  uint64_t numel = 0;       // the reference's element count
  bool reshaped = false;
  bool renamed = false;
};
// The records are decoded once here and described straight into the report's pairs (a million
// records are never all built at once: issue 13 §5).
struct Alignment {
  std::vector<PlannedPair> pairs;     // reference execution order
  // Per pair: ref and cand described, permutation (non-empty when the candidate's axes are
  // permuted) and, when the pair cannot be compared, reasons; the rest default.
  std::vector<PairResult> results;
  std::vector<TensorDesc> only_ref, only_cand;
};
// `release_pages`: the readers' maps are the engine's own (compare_files), so the pages that
// decoding the metas touched may be dropped as it goes (common/pages.hpp).
Result<Alignment> align(const Reader& ref, const Reader& cand, const CompareOptions& options,
                        bool release_pages = false);
// CompareOptions::filter parsed, nullopt when empty (every record taken).
Result<std::optional<Filter>> optional_filter(const std::string& expression);
// The names pairing uses (NameMap: exact pairs first, then the regex rules of each side); the
// one implementation for single dumps and dump sets.
class Renamer {
 public:
  static Result<Renamer> make(const NameMap& names);
  std::string ref(const std::string& name) const;
  std::string cand(const std::string& name) const;
  // No rule changes any name of that side (pairing may then use the readers' name hashes).
  bool keeps_ref() const noexcept;
  bool keeps_cand() const noexcept;

 private:
  struct Rules;
  std::shared_ptr<Rules> rules_;
  std::unordered_map<std::string, std::string> exact_cand_to_ref_;
  std::unordered_map<std::string, bool> exact_ref_;
};
// `name`: the description's name when the caller already holds it as a SharedString (a pair's
// candidate of the same name shares the reference's block).
TensorDesc describe(const Record& r, const detail::SharedString* name = nullptr);
PlannedSide planned_side(const Record& r, size_t index);
// (reference, candidate) record indexes of a planned pair.
using PairRecords = std::pair<uint32_t, uint32_t>;

// ---- detail.cpp ---------------------------------------------------------------------------------
// PairDetail of a pair, gathered during its metrics pass: pass the DetailPass as the
// PairOptions::observer of the pair's compare_pair, then take() it once that succeeded. The
// candidate is seen as the kernel sees it (reference shape, cand_index applied).
class DetailPass final : public numerics::ChunkObserver {
 public:
  explicit DetailPass(const TensorInfo& ref);
  ~DetailPass() override;
  std::unique_ptr<numerics::ChunkTask> begin_task() override;
  PairDetail take(std::span<const uint64_t> ref_shape);
  struct State;

 private:
  std::unique_ptr<State> s_;
};

// ---- origins.cpp: data flow (docs/format.md §3.3.3) and origins (docs/compare.md §5) ---------
// Reads ds.inputs, ds.kind and ds.source into a fresh description (an attribute absent or empty
// leaves its member empty); a malformed ds.inputs leaves has_inputs false.
void describe_dataflow(const TensorInfo& info, TensorDesc& d);
// The relative L2 error a candidate of dtype `t` makes anyway by rounding (docs/metrics.md).
double rounding_bound(DType coarser, bool quantized) noexcept;
// The same for a tensor with recorded inputs: unit roundoff `u`, contracted size `contracted`,
// `inherited_error` the largest relative error of its inputs that are within rounding.
double dataflow_rounding_bound(double u, uint64_t contracted, double inherited_error) noexcept;
// The float64 rule's limit of a candidate coarser than the reference (PairResult::r64_u() > 0):
// k x float32's own error + floor_factor x RMS(float64) x the bound above in the candidate's u,
// `inherited` the inputs' relative errors against float64. A pair that failed only by the rule
// and is within the new limit passes; one that still fails has its reason restated.
void rounding_r64_limit(PairResult& pair, double floor_factor, uint64_t contracted, double inherited);
// A reference record outside the comparison (filtered out by --filter) described for the data
// flow (identity, exec_index, kind, ds.inputs), or nullptr when the reference holds none of
// that identity. The pointer stays valid for the lookup's lifetime.
using OutsideLookup = std::function<const TensorDesc*(const TensorRef&)>;
// Labels every failing pair introduced / inherited / amplified from the reference's data flow
// and lists every origin; false (nothing changed) when the reference has no data flow. Inputs
// neither paired nor unpaired are looked up with `outside` (when given) and followed through.
bool localize_dataflow(Report& report, const CompareOptions& options, const OutsideLookup& outside = {});
// Fills Report::finer_in_candidate from the candidate's data flow (ds.inputs of paired tensors).
void mark_finer_grained(Report& report);
// Every origin in execution order without data flow: the pairs the execution-order rule calls
// introduced, reach = the failing pairs up to the next origin.
void list_origins_by_order(Report& report);

// ---- localize.cpp -------------------------------------------------------------------------------
// Fills first_* , origins, growth and amplifiers from judged pairs.
void localize(Report& report, const CompareOptions& options, const OutsideLookup& outside = {});

// Whether rounding can explain why a pair fails: a floating-point value judged only by criteria
// on its error (allclose, cosine, SQNR, relative L2, ULP, the float64 rule). NaN, Inf, health and
// classification failures are no rounding question, and index, shape and mask tensors are exact.
bool rounding_applies(const PairResult& pair) noexcept;
// A divergence: failing, and beyond rounding where rounding applies (docs/metrics.md §7a).
bool diverges(const PairResult& pair) noexcept;

// ---- layout.cpp: layout diagnosis (docs/axes.md) --------------------------------------------------
struct LayoutInput {
  std::span<const double> ref, cand;      // every element, decoded; same count
  std::vector<uint64_t> ref_shape, cand_shape;
  std::vector<std::string> ref_axes;      // may be empty
  uint64_t num_heads = 0;                 // the head count (axis names, else attribute num_heads), 0: none
  std::string heads_from;                 // where num_heads came from, said in a heads diagnosis
};
// Tests the hypotheses on a sample, confirms the best on every element; cost O(720 + rank * 80)
// sampled hypotheses plus at most 5 full passes.
LayoutDiagnosis diagnose_layout(const LayoutInput& in);
// Diagnoses the first divergence, pairs that introduced an error and same-size shape mismatches,
// in execution order, at most options.max_layout_diagnoses of them.
// `records`: per pair, its record indexes (the plan is gone by then).
void diagnose_layouts(Report& report, std::span<const PairRecords> records, const Reader& ref,
                      const Reader& cand, const CompareOptions& options);

// ---- engine.cpp / partial.cpp: a comparison in parts (compare.hpp "A comparison in parts") -------
// What the engine does instead of measuring every pair itself. plan: list the pairs that need
// measuring; measure: measure `subset` only (no stop_at_first cut) and hand back per-pair flags;
// assemble: take every measurement from `fill` (the parts), then judge and report as compare().
struct EnginePart {
  enum class Kind : uint8_t { plan, measure, assemble } kind = Kind::plan;
  std::vector<size_t> subset;         // measure: ascending pair indexes, each in the work list
  std::vector<size_t> work;           // plan, measure: the pairs that need measuring
  uint64_t fingerprint = 0;           // plan, measure: identifies the comparison
  std::vector<uint8_t> r64_missing;   // measure: per pair, judged without a float64 counterpart
  std::vector<std::string_view> parts;  // assemble: the measured blobs
  // measure: every index of `subset` is in `work`, ascending, no repeats.
  Result<void> check_subset(const std::vector<size_t>& work, const Report& report) const;
  // assemble: decodes the parts into report.pairs[i] for every i of `work` (and r64_missing);
  // an error when a part is damaged or from another comparison, or a pair is missing or twice.
  Result<void> fill(const std::vector<size_t>& work, uint64_t fingerprint, Report& report,
                    std::vector<uint8_t>& r64_missing) const;
};
// FNV-1a 64 of the plan's description.
uint64_t part_fingerprint(std::string_view key) noexcept;
// compare() with an optional part (nullptr: the whole comparison); `own_maps` as compare_files.
Result<Report> run_engine(const Reader& reference, const Reader& candidate, const CompareOptions& options,
                          bool own_maps, EnginePart* part);

// ---- set_compare.cpp: dump sets (docs/dumpsets.md) ------------------------------------------------
// Gathers/sums the shards of each side into logical tensors (temporary dumps, unlinked once
// open), pairs them by identity and coordinates, runs compare() and puts the ranks in the report.
Result<Report> compare_sets(const std::string& reference, const std::string& candidate,
                            const CompareOptions& options);

// ---- verdict_line.cpp: Report::summary and the identity formats of the engine's reasons ------
// (fmt_num and fmt_shape: judge/reason_format.hpp)
std::string fmt_identity(const TensorDesc& d);  // name, with #occurrence and role when not plain
std::string fmt_where(const PairResult& p);     // "index 3, MatMul"
std::string summary_line(const Report& report);
// " on rank 1 (of 2)" for a pair of a dump-set report (docs/dumpsets.md §7); "" otherwise.
std::string rank_text(const Report& report, const PairResult& pair);

}  // namespace driftscope::compare_detail
