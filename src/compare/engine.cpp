// The comparison engine: runs the planned pairs (in parallel across tensors, and within large
// tensors), judges each against its criteria and the float64 rule, then localises.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <span>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "common/pages.hpp"
#include "common/thread_pool.hpp"
#include "judge/axes_checks.hpp"
#include "compare/internal.hpp"
#include "driftscope/dumpset.hpp"
#include "driftscope/decode.hpp"
#include "format/record_crc.hpp"
#include "format/record_table.hpp"
#include "numerics/pair_metrics.hpp"
#include "numerics/sketch.hpp"
#include "compare/report_access.hpp"

namespace driftscope {
namespace {

using namespace compare_detail;

// A pair this large runs alone with every thread inside the kernel; smaller pairs run side by side
// with one thread each. Either way the kernel's fixed chunking gives the same bits.
constexpr uint64_t kLargePair = uint64_t{1} << 20;
// Elements per batch of small pairs between two progress reports / stop-at-first checks.
constexpr uint64_t kBatchElements = uint64_t{8} << 20;
constexpr size_t kBatchPairs = 256;

// The per-dtype allclose used only to report mismatches when the criteria do not use allclose
// (torch.testing.assert_close defaults).
std::pair<double, double> reporting_allclose(DType t) {
  switch (t) {
    case DType::f64: return {1e-7, 1e-7};
    case DType::f32: return {1e-5, 1.3e-6};
    case DType::f16: return {1e-5, 1e-3};
    case DType::bf16: return {1e-5, 1.6e-2};
    case DType::f8e4m3fn:
    case DType::f8e5m2: return {1e-3, 1.25e-1};
    default: return {0.0, 0.0};
  }
}

// ASCII only, as std::tolower in the "C" locale the tools run in, without a libc call per
// character (asked for every pair: 1.7% of a million-record compare).
constexpr char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string lower_name(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = ascii_lower(c);
  return out;
}

// Does the last axis hold classes (logits)? A policy rule may say so; otherwise names that say it.
bool looks_like_classes(const TensorDesc& d) {
  if (d.shape().empty() || d.shape().back() < 2) return false;
  // Lowered on the stack: asked for every pair, a heap copy of each name cost more than the test.
  char buf[256];
  std::string heap;
  std::string_view n;
  if (d.name().size() <= sizeof buf) {
    for (size_t i = 0; i < d.name().size(); ++i)
      buf[i] = ascii_lower(d.name()[i]);
    n = std::string_view(buf, d.name().size());
  } else {
    heap = lower_name(d.name());
    n = heap;
  }
  for (std::string_view w : {"logits", "lm_head", "classifier"})
    if (n.find(w) != std::string_view::npos) return true;
  if (!d.axes().empty()) {
    std::string a = lower_name(d.axes().back());
    for (std::string_view w : {"class", "classes", "vocab", "labels", "logits"})
      if (a == w) return true;
  }
  return false;
}

// The run's declared precision ("float16", "int8", ...): a candidate recorded as f32 by a float16
// run is judged as float16.
struct RunPrecision {
  std::optional<DType> dtype;
  bool quantized = false;
};
RunPrecision run_precision(const Reader& r) {
  RunPrecision p;
  std::string_view v = r.header().get("precision");
  if (v.empty()) return p;
  auto t = parse_dtype(v);
  if (!t) return p;
  if (dtype_is_float(*t)) p.dtype = *t;
  else if (*t == DType::i8 || *t == DType::u8 || *t == DType::i16 || *t == DType::u16) p.quantized = true;
  return p;
}

// `top_k`: the k of the class metrics when the kernel computed them (else 0).
Metrics from_kernel(const numerics::PairMetrics& k, const TensorDesc& /*ref*/, uint32_t top_k) {
  Metrics m;
  m.count = k.count;
  m.finite_pairs = k.finite_pairs;
  Metrics::Rare rare;
  rare.nan_ref = k.nan_ref;
  rare.nan_cand = k.nan_cand;
  rare.nan_both = k.nan_both;
  rare.inf_ref = k.inf_ref;
  rare.inf_cand = k.inf_cand;
  rare.inf_same = k.inf_same;
  m.nan_positions_match = k.nan_positions_match;
  m.inf_positions_match = k.inf_positions_match;
  m.max_abs_diff = k.max_abs_diff;
  m.mean_abs_diff = k.mean_abs_diff;
  m.rmse = k.rmse;
  m.max_rel_diff = k.max_rel_diff;
  m.cosine = k.cosine;
  m.sqnr_db = k.sqnr_db;
  m.nmse = k.nmse;
  m.rel_l2 = k.rel_l2;
  m.norm_ref = k.norm_ref;
  m.norm_cand = k.norm_cand;
  m.zero_ref = k.zero_ref;
  m.zero_cand = k.zero_cand;
  m.const_ref = k.const_ref;
  m.const_cand = k.const_cand;
  m.mismatch_count = k.mismatch_count;
  m.mismatch_fraction = k.mismatch_fraction;
  rare.first_mismatch = k.first_mismatch;
  if (k.first_mismatch >= 0) {
    rare.first_mismatch_ref = k.first_mismatch_ref;
    rare.first_mismatch_cand = k.first_mismatch_cand;
  }
  m.max_abs_index = k.max_abs_index;
  m.max_ulp = k.max_ulp;
  if (k.argmax_agreement >= 0) rare.argmax_agreement = k.argmax_agreement;
  if (k.topk_overlap >= 0) rare.topk_overlap = k.topk_overlap;
  rare.top_k = top_k;
  m.set_rare(rare);
  // The error metrics cover positions finite on both sides; with none (an all-NaN candidate)
  // they are undefined, not "cosine 1, error 0".
  if (k.count > 0 && k.finite_pairs == 0) {
    for (double* v : {&m.max_abs_diff, &m.mean_abs_diff, &m.rmse, &m.max_rel_diff, &m.cosine, &m.sqnr_db,
                      &m.nmse, &m.rel_l2, &m.norm_ref, &m.norm_cand})
      *v = Metrics::kNaN;
  }
  return m;
}

Metrics from_estimate(const Summary& a, const Summary& b, const numerics::SketchEstimate& e) {
  Metrics m;
  const TensorStats& s = a.stats;
  const TensorStats& t = b.stats;
  m.count = s.count;
  Metrics::Rare rare;
  rare.nan_ref = s.nan_count;
  rare.nan_cand = t.nan_count;
  // Positions are unknown in light mode: equal counts are taken as equal positions.
  m.nan_positions_match = s.nan_count == t.nan_count;
  rare.nan_both = m.nan_positions_match ? s.nan_count : std::min(s.nan_count, t.nan_count);
  rare.inf_ref = s.posinf_count + s.neginf_count;
  rare.inf_cand = t.posinf_count + t.neginf_count;
  m.inf_positions_match = s.posinf_count == t.posinf_count && s.neginf_count == t.neginf_count;
  rare.inf_same = m.inf_positions_match ? rare.inf_ref : 0;
  m.norm_ref = s.l2_norm;
  m.norm_cand = t.l2_norm;
  m.zero_ref = s.zero_count;
  m.zero_cand = t.zero_count;
  m.const_ref = s.count >= 2 && s.min == s.max;
  m.const_cand = t.count >= 2 && t.min == t.max;
  m.cosine = e.cosine;
  m.rel_l2 = e.rel_l2;
  m.nmse = e.rel_l2 * e.rel_l2;
  m.sqnr_db = e.rel_l2 == 0 ? HUGE_VAL : -20.0 * std::log10(e.rel_l2);
  rare.cosine_stderr = e.cosine_stderr;
  rare.rel_l2_stderr = e.rel_l2_stderr;
  m.set_rare(rare);
  return m;
}

class Engine {
 public:
  // `own_maps`: the readers were opened here from files (Reader::open maps them read-only), so
  // their pages may be released after use; a caller's Reader::from_memory buffer never is.
  Engine(const Reader& ref, const Reader& cand, const Reader* r64, const CompareOptions& o, bool own_maps,
         EnginePart* part = nullptr)
      : ref_(ref), cand_(cand), r64_(r64), o_(o), ref_prec_(run_precision(ref)),
        cand_prec_(run_precision(cand)), own_maps_(own_maps), part_(part) {}

  Result<Report> run() {
    auto aligned = align(ref_, cand_, o_, own_maps_);
    if (!aligned) return std::move(aligned).error();
    plan_ = std::move(aligned->pairs);
    Report& rep = report_;
    rep.pairs = std::move(aligned->results);
    fill_dump(rep.reference, ref_);
    fill_dump(rep.candidate, cand_);
    if (r64_) fill_dump(rep.reference64, *r64_);
    rep.only_in_reference = std::move(aligned->only_ref);
    rep.only_in_candidate = std::move(aligned->only_cand);
    integrity_warnings("reference", ref_);
    integrity_warnings("candidate", cand_);
    if (r64_) integrity_warnings("reference64", *r64_);
    observer_warnings("reference", ref_);
    observer_warnings("candidate", cand_);

    judged_default_.assign(plan_.size(), 0);
    rules_.assign(plan_.size(), nullptr);
    std::vector<size_t> work;
    r64_missing_.assign(plan_.size(), 0);
    // prepare(i) writes pair i's state only: blocks of pairs side by side, the work list after.
    std::vector<uint8_t> needs(plan_.size(), 0);
    constexpr size_t kPrepareBlock = 4096;
    detail::parallel_for((plan_.size() + kPrepareBlock - 1) / kPrepareBlock, [&](size_t b) {
      for (size_t i = b * kPrepareBlock; i < std::min(plan_.size(), (b + 1) * kPrepareBlock); ++i)
        needs[i] = prepare(i);
    }, o_.threads);
    for (size_t i = 0; i < plan_.size(); ++i)
      if (needs[i]) work.push_back(i);
    // A comparison in parts (partial.cpp): list the work, measure a subset, or take every
    // measurement from the parts; judging, localising and reporting below are the same code.
    if (part_ && part_->kind == EnginePart::Kind::plan) {
      part_->work = std::move(work);
      part_->fingerprint = fingerprint();
      return std::move(report_);
    }
    if (part_ && part_->kind == EnginePart::Kind::measure) {
      part_->fingerprint = fingerprint();
      part_->work = work;
      DRIFTSCOPE_TRY(part_->check_subset(work, report_));
      execute(part_->subset, /*may_stop=*/false);
      part_->r64_missing = r64_missing_;
      return std::move(report_);
    }
    if (part_ && part_->kind == EnginePart::Kind::assemble) {
      DRIFTSCOPE_TRY(part_->fill(work, fingerprint(), report_, r64_missing_));
    } else {
      execute(work, /*may_stop=*/true);
    }
    cut_after_first_divergence(work);
    // Measured: the plan goes (a million pairs: 64 MB); layout diagnosis needs record indexes only.
    // The rules and the work list (8 MB each) go first, so the record indexes do not add to the
    // peak (issue 30 item 4).
    std::vector<const PolicyRule*>().swap(rules_);
    std::vector<size_t>().swap(work);
    std::vector<PairRecords> records(plan_.size());
    for (size_t i = 0; i < plan_.size(); ++i) records[i] = {plan_[i].ref.index, plan_[i].cand.index};
    std::vector<PlannedPair>().swap(plan_);
    size_t r64_missing = 0;
    for (size_t i = 0; i < rep.pairs.size(); ++i)
      r64_missing += r64_missing_[i] && rep.pairs[i].status != PairStatus::not_compared;
    if (r64_missing > 0)
      rep.warnings.push_back(fmt::format(
          "reference64: {} compared tensor(s) have no float64 counterpart and were judged by the "
          "tolerance policy", r64_missing));
    for (size_t i = 0; i < rep.pairs.size(); ++i)
      if (rep.pairs[i].status == PairStatus::incomparable) rep.incomparable.push_back(i);
    localize(rep, o_, outside_lookup());
    if (o_.max_layout_diagnoses > 0) diagnose_layouts(rep, records, ref_, cand_, o_);
    find_axes_in_comparison(rep, records, ref_, cand_, o_.threads);
    mark_finer_grained(rep);
    verdict();
    rep.summary = summary_line(rep);
    return std::move(report_);
  }

 private:
  // Reference records outside the comparison, for the data flow (docs/compare.md §5): with
  // --filter, an input filtered out stands for what it was computed from, as in a dump set.
  // Only identities no pair or unpaired tensor holds are looked up, each once.
  OutsideLookup outside_lookup() {
    if (o_.filter.empty()) return {};
    return [this](const TensorRef& r) -> const TensorDesc* {
      auto [it, fresh] = outside_.try_emplace(std::tuple{std::string(r.name()), r.role, r.role_index, r.occurrence});
      if (fresh) {
        if (auto i = detail::ReaderAccess::find(ref_, r.name(), r.occurrence, r.role, r.role_index))
          it->second = describe(detail::ReaderAccess::record(ref_, *i));
      }
      return it->second ? &*it->second : nullptr;
    };
  }

  const Reader& ref_;
  const Reader& cand_;
  const Reader* r64_;
  const CompareOptions& o_;
  RunPrecision ref_prec_, cand_prec_;
  bool own_maps_;
  std::vector<PlannedPair> plan_;
  Report report_;
  std::map<std::tuple<std::string, Role, uint16_t, uint32_t>, std::optional<TensorDesc>> outside_;
  std::vector<numerics::PairOptions> kopts_;
  std::vector<std::vector<uint64_t>> perm_index_;
  std::vector<uint8_t> r64_missing_;  // per pair: judged without a float64 counterpart
  EnginePart* part_;

  // Identifies this comparison's plan for parts measured elsewhere (EnginePart::fingerprint).
  uint64_t fingerprint() const {
    std::string key = fmt::format("{}|{}|{}|{}|{}|{}|{}|{}\n", ref_.header().salt, cand_.header().salt,
                                  ref_.record_count(), cand_.record_count(), plan_.size(),
                                  o_.nan_equal, o_.details, !o_.reference64.empty());
    for (const PairResult& p : report_.pairs)
      key += fmt::format("{}#{}#{}#{}|{}#{}|{}|{}|{}\n", p.ref.name(), p.ref.occurrence, role_name(p.ref.role),
                         p.ref.role_index, p.cand.name(), p.cand.occurrence, status_name(p.status),
                         p.criteria().to_string(), p.criteria_source());
    return part_fingerprint(key);
  }

  static void fill_dump(DumpInfo& d, const Reader& r) {
    d.metadata = r.header().metadata;
    d.state = std::string(file_state_name(r.integrity().state));
    d.records = r.record_count();
  }

  void integrity_warnings(std::string_view side, const Reader& r) {
    const Integrity& in = r.integrity();
    switch (in.state) {
      case FileState::clean: break;
      case FileState::unfinished:
        report_.warnings.push_back(fmt::format(
            "{}: the run did not finish (no END record); {} records were read", side, r.record_count()));
        break;
      case FileState::cut:
        report_.warnings.push_back(fmt::format(
            "{}: the file is cut at offset {} ({} bytes discarded); {} complete records were read",
            side, in.cut_offset, in.discarded_bytes, r.record_count()));
        break;
      case FileState::corrupt:
        report_.warnings.push_back(fmt::format(
            "{}: the file is corrupt ({}); {} records before the damage were read", side,
            in.corruption ? in.corruption->to_string() : std::string("unknown damage"), r.record_count()));
        break;
    }
    size_t dups = 0;
    for (const auto& w : in.warnings) dups += w.code == Errc::duplicate_tensor;
    if (dups)
      report_.warnings.push_back(fmt::format(
          "{}: {} duplicate tensor identities; the first record of each was used", side, dups));
  }

  void observer_warnings(std::string_view side, const Reader& r) {
    std::string v = lower_name(r.header().get("observer_effect"));
    if (v.empty()) return;
    for (std::string_view ok : {"none", "no", "false", "0", "ok", "agree", "same", "identical"})
      if (v == ok || v.rfind(std::string(ok) + ":", 0) == 0 || v.rfind(std::string(ok) + " ", 0) == 0)
        return;
    report_.warnings.push_back(fmt::format(
        "{}: observer effect: recording intermediates changed the model's final outputs ({}); "
        "the recorded run may not be the run you ship", side, r.header().get("observer_effect")));
  }

  DType effective(DType t, const RunPrecision& p) const {
    if (!dtype_is_float(t) || !p.dtype) return t;
    return coarser_dtype(t, *p.dtype);
  }

  // Fills the descriptive part of pair i; true when it needs computing.
  bool prepare(size_t i) {
    const PlannedPair& plan = plan_[i];
    // ref, cand, permutation and the reasons of an incomparable pair were set by align().
    PairResult& p = report_.pairs[i];
    const bool incomparable = !p.reasons().empty();
    if (plan.renamed) detail::ReportAccess::notes(p).push_back(fmt::format("renamed: candidate '{}'", p.cand.name()));
    if (!p.permutation().empty())
      detail::ReportAccess::notes(p).push_back(fmt::format("axes permuted: reference ({}) vs candidate ({})",
                                    join_axes(p.ref.axes()), join_axes(p.cand.axes())));
    else if (!std::ranges::equal(p.ref.shape(), p.cand.shape()) && !incomparable)
      detail::ReportAccess::notes(p).push_back(fmt::format("{}: reference {} vs candidate {}",
                                    plan.reshaped ? "reshaped" : "size-1 axes differ",
                                    fmt_shape(p.ref.shape()), fmt_shape(p.cand.shape())));
    if (incomparable) {
      p.status = PairStatus::incomparable;
      return false;
    }
    const PolicyRule* rule = find_rule(o_.policy, p.ref, [](const PolicyRule& r) { return r.skip; });
    if (rule) {
      p.status = PairStatus::skipped;
      detail::ReportAccess::reasons(p).push_back({"skipped", fmt::format("policy rule '{}' says skip", rule->match)});
      return false;
    }
    bool quantized = p.ref.quantized || p.cand.quantized ||
                     (dtype_is_float(p.cand.dtype) && cand_prec_.quantized);
    auto j = resolve_criteria(o_.policy, p.ref, effective(p.ref.dtype, ref_prec_),
                              effective(p.cand.dtype, cand_prec_), quantized);
    detail::ReportAccess::criteria(p) = j.criteria;
    detail::ReportAccess::criteria_source(p) = j.source;
    p.rounding = rounding_bound(
        coarser_dtype(effective(p.ref.dtype, ref_prec_), effective(p.cand.dtype, cand_prec_)), quantized);
    judged_default_[i] = j.is_default;
    rules_[i] = find_rule(o_.policy, p.ref, [](const PolicyRule& r) { return r.classes; });
    return true;
  }
  std::vector<uint8_t> judged_default_;  // not vector<bool>: prepare() runs in parallel
  std::vector<const PolicyRule*> rules_;

  numerics::PairOptions kernel_options(const PairResult& p, const PolicyRule* rule, unsigned threads) const {
    numerics::PairOptions k;
    if (p.criteria().uses_allclose()) {
      k.atol = p.criteria().atol.value_or(0.0);
      k.rtol = p.criteria().rtol.value_or(0.0);
    } else {
      auto [a, r] = reporting_allclose(coarser_dtype(effective(p.ref.dtype, ref_prec_),
                                                     effective(p.cand.dtype, cand_prec_)));
      k.atol = a;
      k.rtol = r;
    }
    k.nan_equal = o_.nan_equal;
    k.threads = threads;
    bool classes = (rule && rule->classes) || p.criteria().min_argmax_agreement ||
                   p.criteria().min_topk_overlap || looks_like_classes(p.ref);
    if (classes && !p.ref.shape().empty() && p.ref.shape().back() >= 2) {
      k.classes = p.ref.shape().back();
      k.top_k = static_cast<uint32_t>(std::min<uint64_t>(rule ? rule->top_k : 5, k.classes));
    }
    return k;
  }

  Result<void> verified(const Reader& r, const Record& rec) const {
    if (r.integrity().checksums_verified) return {};
    return r.verify_payload(rec);
  }

  // Once its pair is measured a payload's pages are dropped, so the RSS of a comparison stays
  // bounded by the pairs in flight rather than growing to the size of both dumps (the maps are
  // read-only and file-backed: a later access reads the file again, no result can change).
  void compute(size_t i, unsigned threads) {
    measure(i, threads);
    if (own_maps_) {
      detail::release_pages(plan_[i].ref.payload);
      detail::release_pages(plan_[i].cand.payload);
    }
  }

  // Small payloads share pages with their neighbours, so compute() can release none of them:
  // once a batch is measured, the whole pages spanning its payloads go (a page a later pair
  // still needs is simply read again from the file).
  void release_batch(const std::vector<size_t>& work, size_t begin, size_t end) const {
    for (bool ref_side : {true, false}) {
      const std::byte* lo = nullptr;
      const std::byte* hi = nullptr;
      for (size_t j = begin; j < end; ++j) {
        const auto& pl = (ref_side ? plan_[work[j]].ref : plan_[work[j]].cand).payload;
        if (pl.empty()) continue;
        if (!lo || pl.data() < lo) lo = pl.data();
        if (!hi || pl.data() + pl.size() > hi) hi = pl.data() + pl.size();
      }
      // Only a run of neighbouring records: pairs in an order far from the file's stay resident.
      if (lo && static_cast<size_t>(hi - lo) <= (size_t{64} << 20))
        detail::release_pages({lo, static_cast<size_t>(hi - lo)});
    }
  }

  // The record of one side of a pair as measure() uses it. A raw TENSOR record needs nothing
  // that align() did not already decode into the description and the plan, so its meta is not
  // decoded a third time (scan, align, here: a third of the CPU time with a million small
  // tensors, issue 13 §5); only its frame is checked again. Summaries, quantised tensors (their
  // encoding parameters) and the detail pass (every field) decode the record again.
  Record side_record(const Reader& r, const PlannedSide& s, const TensorDesc& d) const {
    if (s.kind != RecordKind::tensor || d.quantized || o_.details) return detail::ReaderAccess::record(r, s.index);
    Record rec;
    const std::optional<uint64_t> offset = detail::ReaderAccess::frame_offset(r, s.index, s.payload);
    if (!offset) {  // as ReaderAccess::record() sees a file cut since the scan
      rec.info.shape = {0};
      return rec;
    }
    rec.kind = RecordKind::tensor;
    rec.offset = *offset;
    rec.payload = s.payload;
    rec.payload_offset = static_cast<uint64_t>(s.payload.data() - r.bytes().data());
    rec.info.name = d.name();
    rec.info.role = d.role;
    rec.info.role_index = d.role_index;
    rec.info.occurrence = d.occurrence;
    rec.info.exec_index = d.exec_index;
    rec.info.dtype = d.dtype;
    rec.info.shape.assign(d.shape().begin(), d.shape().end());
    return rec;
  }

  void measure(size_t i, unsigned threads) {
    const PlannedPair& plan = plan_[i];
    PairResult& p = report_.pairs[i];
    // Built here, in the worker, and dropped with the pair (detail::ReaderAccess).
    const Record ref_rec = side_record(ref_, plan.ref, p.ref);
    const Record cand_rec = side_record(cand_, plan.cand, p.cand);
    auto fail_read = [&](std::string_view side, const Error& e) {
      p.status = PairStatus::incomparable;
      detail::ReportAccess::reasons(p).push_back({"read_error", fmt::format("{}: {}", side, e.to_string())});
    };
    // Not what align() saw: the file was cut meanwhile (check_unchanged() then fails the result).
    if (ref_rec.kind != plan.ref.kind || !std::ranges::equal(ref_rec.info.shape, p.ref.shape()))
      return fail_read("reference", make_error(Errc::io_error, "file changed while reading"));
    if (cand_rec.kind != plan.cand.kind || !std::ranges::equal(cand_rec.info.shape, p.cand.shape()))
      return fail_read("candidate", make_error(Errc::io_error, "file changed while reading"));
    if (ref_rec.kind == RecordKind::summary || cand_rec.kind == RecordKind::summary) {
      if (auto v = verified(ref_, ref_rec); !v) return fail_read("reference", v.error());
      if (auto v = verified(cand_, cand_rec); !v) return fail_read("candidate", v.error());
      return compute_light(i, ref_rec, cand_rec);
    }

    numerics::PairOptions k = kernel_options(p, rules_[i], threads);
    // Payload CRCs of lazily checked dumps are computed by the kernel's tasks as they read the
    // bytes (one parallel pass) and judged before anything of the pair is used.
    k.crc_ref = !ref_.integrity().checksums_verified;
    k.crc_cand = !cand_.integrity().checksums_verified;
    k.release_pages = own_maps_;
    std::vector<uint64_t> index;
    if (!p.permutation().empty()) {
      index = detail::permuted_index(ref_rec.info.shape, cand_rec.info.shape, p.permutation());
      k.cand_index = index;
    }
    // --reshape and size-1 differences compare in row-major order: present the candidate with
    // the reference's shape so coordinates and class rows follow the reference.
    TensorInfo cand_info = cand_rec.info;
    if (p.permutation().empty()) cand_info.shape = ref_rec.info.shape;
    // --html's histogram, heatmap and worst elements come from the kernel's own chunks.
    std::optional<DetailPass> detail_pass;
    if (o_.details) k.observer = &detail_pass.emplace(ref_rec.info);
    auto r = numerics::compare_pair(ref_rec.info, ref_rec.payload, cand_info, cand_rec.payload, k);
    k.observer = nullptr;
    // A damaged payload is a read error, whatever the kernel made of its bytes.
    if (k.crc_ref) {
      auto v = r ? detail::verify_payload_crc(ref_, ref_rec, r->payload_crc_ref) : verified(ref_, ref_rec);
      if (!v) return fail_read("reference", v.error());
    }
    if (k.crc_cand) {
      auto v = r ? detail::verify_payload_crc(cand_, cand_rec, r->payload_crc_cand) : verified(cand_, cand_rec);
      if (!v) return fail_read("candidate", v.error());
    }
    if (!r) {
      p.status = PairStatus::incomparable;
      detail::ReportAccess::reasons(p).push_back({"decode", r.error().to_string()});
      return;
    }
    p.compared = true;
    p.metrics = from_kernel(*r, p.ref, k.classes ? k.top_k : 0);
    if (r64_) reference64(i, k, ref_rec, cand_rec, cand_info);
    judge(p, o_.nan_equal);
    p.error = error_of(p);
    if (detail_pass) detail::ReportAccess::edit(p).detail = detail_pass->take(ref_rec.info.shape);
  }

  void compute_light(size_t i, const Record& a, const Record& b) {
    PairResult& p = report_.pairs[i];
    const Summary* sa = a.summary();
    const Summary* sb = b.summary();
    Summary made;
    auto summarise = [&](const Record& value_side, const Summary& like) -> Result<void> {
      auto s = summarize(value_side.info, value_side.payload,
                         static_cast<uint32_t>(like.projection.size()), like.projection_seed);
      if (!s) return std::move(s).error();
      made = std::move(*s);
      return {};
    };
    if (!sa || !sb) {
      auto r = !sa ? summarise(a, *sb) : summarise(b, *sa);
      if (!r) {
        p.status = PairStatus::incomparable;
        detail::ReportAccess::reasons(p).push_back({"decode", r.error().to_string()});
        return;
      }
      (!sa ? sa : sb) = &made;
    }
    auto e = numerics::estimate_from_sketches(*sa, *sb);
    if (!e) {
      p.status = PairStatus::incomparable;
      detail::ReportAccess::reasons(p).push_back({"summary_mismatch", e.error().message});
      return;
    }
    p.compared = true;
    p.estimated = true;
    p.metrics = from_estimate(*sa, *sb, *e);
    detail::ReportAccess::notes(p).push_back(fmt::format("estimated from light-mode summaries: cosine ±{}, relative L2 ±{} "
                                  "(one standard error)", fmt_num(e->cosine_stderr, 2),
                                  fmt_num(e->rel_l2_stderr, 2)));
    // Criteria that need the elements cannot judge an estimate; fall back to the SQNR default.
    Criteria c = p.criteria();
    if (!c.min_cosine && !c.min_sqnr_db && !c.max_rel_l2) {
      Criteria d = default_criteria(coarser_dtype(effective(p.ref.dtype, ref_prec_),
                                                  effective(p.cand.dtype, cand_prec_)),
                                    p.ref.quantized || p.cand.quantized);
      if (!d.min_sqnr_db) d.min_sqnr_db = 200.0;  // exact dtypes: any measurable error fails
      c.min_sqnr_db = d.min_sqnr_db;
      detail::ReportAccess::criteria(p) = c;
      detail::ReportAccess::criteria_source(p) += fmt::format("; light mode: sqnr>={}dB", *c.min_sqnr_db);
    }
    judge(p, o_.nan_equal);
    p.error = error_of(p);
  }

  // The float64 ordering rule (docs/compare.md): err(cand, r64) <= k * err(ref, r64) + floor.
  void reference64(size_t i, const numerics::PairOptions& k, const Record& ref_rec, const Record& cand_rec,
                   const TensorInfo& cand_info) {
    PairResult& p = report_.pairs[i];
    const TensorInfo& ri = ref_rec.info;
    // One decoded record, not the float64 run's records() (a million records: ~300 MB).
    std::optional<Record> found;
    if (auto j = detail::ReaderAccess::find(*r64_, ri.name, ri.occurrence, ri.role, ri.role_index))
      found = detail::ReaderAccess::record(*r64_, *j);
    const Record* s = found ? &*found : nullptr;
    if (!s || s->kind != RecordKind::tensor || s->info.numel() != ri.numel() ||
        !verified(*r64_, *s)) {
      detail::ReportAccess::notes(p).push_back("reference64: no matching float64 tensor; judged by the tolerance policy");
      r64_missing_[i] = 1;
      return;
    }
    TensorInfo si = s->info;
    si.shape = ri.shape;
    numerics::PairOptions ko = k;
    ko.classes = 0;
    ko.cand_index = {};
    ko.crc_ref = ko.crc_cand = false;  // the pair's own payloads were judged already
    auto er = numerics::compare_pair(si, s->payload, ri, ref_rec.payload, ko);
    ko.cand_index = k.cand_index;
    auto ec = numerics::compare_pair(si, s->payload, cand_info, cand_rec.payload, ko);
    detail::release_pages(s->payload);
    if (!er || !ec) {
      detail::ReportAccess::notes(p).push_back(fmt::format("reference64: {}", (!er ? er.error() : ec.error()).to_string()));
      r64_missing_[i] = 1;
      return;
    }
    DType ct = effective(p.cand.dtype, cand_prec_);
    double kk = default_r64_k(ct);
    for (const auto& [t, v] : o_.policy.r64_k)
      if (t == ct) kk = v;
    double rms64 = er->count ? er->norm_ref / std::sqrt(static_cast<double>(er->count)) : 0.0;
    double floor = o_.policy.r64_floor.value_or(kDefaultR64Floor) * unit_roundoff(ct) * rms64;
    p.r64 = true;
    detail::PairRare& r64 = detail::ReportAccess::edit(p);
    r64.r64_k = kk;
    r64.r64_err_ref = er->rmse;
    r64.r64_err_cand = ec->rmse;
    r64.r64_limit = kk * er->rmse + floor;
    r64.r64_rms = rms64;
    // A candidate coarser than the reference: the float32 run's error says nothing of what the
    // candidate's dtype makes, so localisation replaces the floor by the rounding model on the
    // data flow (docs/metrics.md §7a). Same or finer: float32's own error measures it.
    DType rt = effective(p.ref.dtype, ref_prec_);
    if (unit_roundoff(ct) > unit_roundoff(rt)) r64.r64_u = unit_roundoff(ct);
    // Non-finite values in the float32 run or the candidate leave the RMSE undefined.
    if (er->finite_pairs != er->count) r64.r64_limit = HUGE_VAL;
    if (ec->finite_pairs != ec->count) r64.r64_err_cand = HUGE_VAL;
    if (judged_default_[i]) {
      detail::ReportAccess::criteria(p) = Criteria{};
      detail::ReportAccess::criteria_source(p) = "reference64 rule";
    }
  }

  static double error_of(const PairResult& p) {
    const Metrics& m = p.metrics;
    if (m.nan_cand() > m.nan_both() || m.inf_cand() > m.inf_same()) return HUGE_VAL;
    if (std::isnan(m.rel_l2)) return m.norm_cand > 0 ? HUGE_VAL : 0.0;
    return m.rel_l2;
  }

  bool diverged(size_t i) const {
    auto s = report_.pairs[i].status;
    return s == PairStatus::fail || s == PairStatus::silent_failure;
  }

  // Measures `work` (ascending pair indexes). With stop_at_first and `may_stop`, stops after the
  // batch holding the first divergence; cut_after_first_divergence() then makes the report the
  // same whatever the batching was.
  void execute(const std::vector<size_t>& work, bool may_stop) {
    const unsigned threads = o_.threads ? o_.threads : detail::hardware_threads();
    size_t done = 0;
    const size_t total = work.size();
    size_t pos = 0, scanned = 0;
    while (pos < work.size()) {
      size_t i = work[pos];
      if (plan_[i].numel >= kLargePair) {
        compute(i, threads);
        ++pos;
      } else {
        size_t end = pos;
        uint64_t elems = 0;
        while (end < work.size() && end - pos < kBatchPairs && elems < kBatchElements &&
               plan_[work[end]].numel < kLargePair) {
          elems += plan_[work[end]].numel;
          ++end;
        }
        detail::parallel_for(end - pos, [&](size_t j) { compute(work[pos + j], 1); }, threads);
        if (own_maps_) release_batch(work, pos, end);
        pos = end;
      }
      done = pos;
      if (o_.progress) o_.progress(done, total);
      if (o_.stop_at_first && may_stop) {
        for (; scanned < pos; ++scanned)
          if (diverged(work[scanned])) return;
      }
    }
  }

  void cut_after_first_divergence(const std::vector<size_t>& work) {
    if (!o_.stop_at_first) return;
    auto first = std::find_if(work.begin(), work.end(), [&](size_t j) { return diverged(j); });
    if (first != work.end()) {
      const size_t first_bad = *first;
      // Everything after the first divergence is "not_compared", whatever the batch size was,
      // so the report does not depend on the thread count.
      for (size_t i = first_bad + 1; i < report_.pairs.size(); ++i) {
        PairResult& p = report_.pairs[i];
        if (p.status == PairStatus::incomparable || p.status == PairStatus::skipped) continue;
        PairResult fresh;
        fresh.ref = std::move(p.ref);
        fresh.cand = std::move(p.cand);
        fresh.status = PairStatus::not_compared;
        p = std::move(fresh);
      }
      report_.stopped_early = true;
    }
  }

  void verdict() {
    Report& r = report_;
    const auto by_status = r.counts();
    if (by_status[static_cast<size_t>(PairStatus::silent_failure)]) r.verdict = Verdict::silent_failure;
    else if (by_status[static_cast<size_t>(PairStatus::fail)]) r.verdict = Verdict::diverged;
    // Finer-grained candidate steps (op-level against module-level) are listed, not a divergence.
    else if (!o_.allow_unpaired &&
             (!r.only_in_reference.empty() || r.only_in_candidate.size() > r.finer_in_candidate.size()))
      r.verdict = Verdict::diverged;
    else if (!o_.allow_incomparable && !r.incomparable.empty()) r.verdict = Verdict::diverged;
    // A by-name finding only the candidate has is a bug it brought, whatever its numbers say
    // (docs/compare.md "Findings by axis name").
    else if (std::any_of(r.axes_findings.begin(), r.axes_findings.end(),
                         [](const AxesFindingPair& f) { return f.side == "candidate"; }))
      r.verdict = Verdict::diverged;
    else if (std::none_of(r.pairs.begin(), r.pairs.end(), [](const PairResult& p) { return p.compared; }))
      r.verdict = Verdict::nothing_compared;
    else r.verdict = Verdict::pass;
  }
};

}  // namespace

namespace {
// Frames and metas are checked on open; each payload's CRC is computed by the kernel tasks that
// read it for its pair (Engine::measure), so checksumming runs in parallel, in the same pass over
// the bytes and only for tensors that are compared, and a damaged payload costs one pair
// ("read_error"), not the rest of the file.
OpenOptions lazy_checksums() {
  OpenOptions o;
  o.verify = Verify::frames;
  return o;
}

}  // namespace

namespace compare_detail {

Result<Report> run_engine(const Reader& reference, const Reader& candidate, const CompareOptions& options,
                          bool own_maps, EnginePart* part) {
  DRIFTSCOPE_TRY(validate(options));  // options built in code meet the front ends' ranges
  std::optional<Reader> r64;
  if (!options.reference64.empty()) {
    auto r = Reader::open(options.reference64, lazy_checksums());
    if (!r) {
      Error e = std::move(r).error();
      e.message = "reference64 '" + options.reference64 + "': " + e.message;
      return e;
    }
    r64 = std::move(*r);
  }
  Engine engine(reference, candidate, r64 ? &*r64 : nullptr, options, own_maps, part);
  auto rep = engine.run();
  // A dump cut while it was compared read zeros past its new end: no verdict from that.
  DRIFTSCOPE_TRY(reference.check_unchanged());
  DRIFTSCOPE_TRY(candidate.check_unchanged());
  if (r64) DRIFTSCOPE_TRY(r64->check_unchanged());
  if (rep && r64) rep->reference64.path = options.reference64;
  return rep;
}

}  // namespace compare_detail

Result<Report> compare(const Reader& reference, const Reader& candidate, const CompareOptions& options) {
  return run_engine(reference, candidate, options, /*own_maps=*/false, nullptr);
}

Result<Report> compare_files(const std::string& reference, const std::string& candidate,
                             const CompareOptions& options) {
  if (is_dump_set_path(reference) || is_dump_set_path(candidate))
    return compare_detail::compare_sets(reference, candidate, options);
  // The two scans on open (every frame and meta checked: ~1 s per million records) are
  // independent: run side by side. Below kInlineScanBytes together they run on this thread: a
  // worker's start and wake-up cost more than such a scan (issue 30 item 3: a compare of two tiny
  // dumps waited on the worker for most of its wall time on a busy machine). Sizes that cannot be
  // read (a FIFO, a missing file) take the ordinary path, whose open gives the error.
  constexpr uintmax_t kInlineScanBytes = uintmax_t{1} << 20;
  std::error_code size_a, size_b;
  const uintmax_t bytes_a = std::filesystem::file_size(reference, size_a);
  const uintmax_t bytes_b = std::filesystem::file_size(candidate, size_b);
  const bool small = !size_a && !size_b && bytes_a < kInlineScanBytes && bytes_b < kInlineScanBytes - bytes_a;
  std::optional<Result<Reader>> a, b;
  detail::parallel_for(2, [&](size_t side) {
    (side == 0 ? a : b).emplace(Reader::open(side == 0 ? reference : candidate, lazy_checksums()));
  }, small ? 1u : std::min(2u, options.threads ? options.threads : detail::hardware_threads()));
  if (!*a) {
    Error e = std::move(*a).error();
    e.message = "reference '" + reference + "': " + e.message;
    return e;
  }
  if (!*b) {
    Error e = std::move(*b).error();
    e.message = "candidate '" + candidate + "': " + e.message;
    return e;
  }
  // The scan on open touched every frame and meta; with small tensors that is every page of
  // both files. Measuring reads them again pair by pair (and releases them behind it).
  detail::release_pages((*a)->bytes());
  detail::release_pages((*b)->bytes());
  auto rep = run_engine(**a, **b, options, /*own_maps=*/true, nullptr);
  if (rep) {
    rep->reference.path = reference;
    rep->candidate.path = candidate;
  }
  return rep;
}

}  // namespace driftscope
