// The JSON report (docs/report-schema.json). JSON has no NaN or infinity: a value that was not
// computed (or is undefined, 0/0) is null, and ±infinity is the string "inf" / "-inf".
#include <cmath>

#include "compare/internal.hpp"

namespace driftscope {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

ordered_json real(double v) {
  if (std::isnan(v)) return nullptr;
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

ordered_json index_or_null(int64_t v) { return v < 0 ? ordered_json(nullptr) : ordered_json(v); }

ordered_json shape_json(const std::vector<uint64_t>& s) {
  ordered_json a = ordered_json::array();
  for (uint64_t d : s) a.push_back(d);
  return a;
}

ordered_json desc_json(const TensorDesc& d) {
  ordered_json o;
  o["name"] = d.name;
  o["occurrence"] = d.occurrence;
  o["role"] = role_name(d.role);
  o["role_index"] = d.role_index;
  o["op_type"] = d.op_type;
  o["index"] = d.exec_index;
  o["dtype"] = dtype_name(d.dtype);
  o["shape"] = shape_json(d.shape);
  o["axes"] = d.axes;
  o["kind"] = d.summary ? "summary" : "tensor";
  o["quantized"] = d.quantized;
  if (!d.ranks.empty()) o["ranks"] = d.ranks;  // dump sets only (docs/dumpsets.md §7)
  return o;
}

ordered_json reasons_json(const std::vector<Reason>& rs) {
  ordered_json a = ordered_json::array();
  for (const auto& r : rs) a.push_back(ordered_json{{"code", r.code}, {"message", r.message}});
  return a;
}

ordered_json criteria_json(const PairResult& p) {
  const Criteria& c = p.criteria;
  ordered_json o;
  o["source"] = p.criteria_source;
  o["text"] = c.to_string();
  auto opt = [&](const char* k, const std::optional<double>& v) { o[k] = v ? real(*v) : ordered_json(nullptr); };
  opt("atol", c.atol);
  opt("rtol", c.rtol);
  opt("max_mismatch_fraction", c.max_mismatch_fraction);
  opt("min_cosine", c.min_cosine);
  opt("min_sqnr_db", c.min_sqnr_db);
  opt("max_rel_l2", c.max_rel_l2);
  o["max_ulp"] = c.max_ulp ? ordered_json(*c.max_ulp) : ordered_json(nullptr);
  opt("min_argmax_agreement", c.min_argmax_agreement);
  opt("min_topk_overlap", c.min_topk_overlap);
  return o;
}

// docs/axes.md "Layout diagnosis"; null when the pair was not diagnosed.
ordered_json layout_json(const std::optional<LayoutDiagnosis>& l) {
  if (!l) return nullptr;
  ordered_json o;
  o["hypothesis"] = l->hypothesis;
  o["description"] = l->description;
  o["text"] = l->to_string();
  o["permutation"] = l->permutation.empty() ? ordered_json(nullptr) : ordered_json(l->permutation);
  o["axis"] = index_or_null(l->axis);
  o["blocks"] = l->blocks ? ordered_json(l->blocks) : ordered_json(nullptr);
  o["block_size"] = l->blocks ? ordered_json(l->block_size) : ordered_json(nullptr);
  o["block_order"] = l->blocks ? ordered_json(l->block_order) : ordered_json(nullptr);
  o["shift"] = l->hypothesis == "shifted" ? ordered_json(l->shift) : ordered_json(nullptr);
  o["cosine"] = real(l->cosine);
  o["rel_l2"] = real(l->rel_l2);
  o["hypotheses_tested"] = l->hypotheses_tested;
  o["sample_elements"] = l->sample_elements;
  o["elements_confirmed"] = l->elements_confirmed;
  return o;
}

ordered_json pair_json(const PairResult& p, size_t i) {
  const Metrics& m = p.metrics;
  const bool c = p.compared;
  const bool exact = c && !p.estimated;  // element-wise metrics exist
  auto num = [&](double v, bool have) { return have ? real(v) : ordered_json(nullptr); };
  auto cnt = [&](uint64_t v) { return c ? ordered_json(v) : ordered_json(nullptr); };
  ordered_json o;
  o["pair"] = i;
  o["name"] = p.ref.name;
  o["occurrence"] = p.ref.occurrence;
  o["role"] = role_name(p.ref.role);
  o["role_index"] = p.ref.role_index;
  o["op_type"] = p.ref.op_type;
  o["index_ref"] = p.ref.exec_index;
  o["index_cand"] = p.cand.exec_index;
  o["candidate_name"] = p.cand.name;
  o["dtype_ref"] = dtype_name(p.ref.dtype);
  o["dtype_cand"] = dtype_name(p.cand.dtype);
  o["shape_ref"] = shape_json(p.ref.shape);
  o["shape_cand"] = shape_json(p.cand.shape);
  o["axes_ref"] = p.ref.axes;
  o["axes_cand"] = p.cand.axes;
  o["status"] = status_name(p.status);
  o["reasons"] = reasons_json(p.reasons);
  o["notes"] = p.notes;
  o["estimated"] = p.estimated;
  if (p.permutation.empty()) o["permutation"] = nullptr;
  else o["permutation"] = p.permutation;
  o["layout"] = layout_json(p.layout);
  o["criteria"] = p.status == PairStatus::incomparable || p.status == PairStatus::skipped
                      ? ordered_json(nullptr) : criteria_json(p);
  o["count"] = cnt(m.count);
  o["cosine"] = num(m.cosine, c);
  o["rmse"] = num(m.rmse, exact);
  o["max_abs_diff"] = num(m.max_abs_diff, exact);
  o["mean_abs_diff"] = num(m.mean_abs_diff, exact);
  o["max_rel_diff"] = num(m.max_rel_diff, exact);
  o["sqnr_db"] = num(m.sqnr_db, c);
  o["nmse"] = num(m.nmse, c);
  o["rel_l2"] = num(m.rel_l2, c);
  o["mismatch_count"] = exact ? ordered_json(m.mismatch_count) : ordered_json(nullptr);
  o["mismatch_fraction"] = num(m.mismatch_fraction, exact);
  o["first_mismatch_index"] = exact ? index_or_null(m.first_mismatch) : ordered_json(nullptr);
  o["first_mismatch_coords"] = exact && m.first_mismatch >= 0 ? ordered_json(m.first_mismatch_coords) : ordered_json(nullptr);
  o["first_mismatch_ref"] = num(m.first_mismatch_ref, exact && m.first_mismatch >= 0);
  o["first_mismatch_cand"] = num(m.first_mismatch_cand, exact && m.first_mismatch >= 0);
  o["max_abs_index"] = exact ? index_or_null(m.max_abs_index) : ordered_json(nullptr);
  o["max_abs_coords"] = exact && m.max_abs_index >= 0 ? ordered_json(m.max_abs_coords) : ordered_json(nullptr);
  o["max_ulp"] = exact ? index_or_null(m.max_ulp) : ordered_json(nullptr);
  o["nan_ref"] = cnt(m.nan_ref);
  o["nan_cand"] = cnt(m.nan_cand);
  o["nan_positions_match"] = c ? ordered_json(m.nan_positions_match) : ordered_json(nullptr);
  o["inf_ref"] = cnt(m.inf_ref);
  o["inf_cand"] = cnt(m.inf_cand);
  o["inf_positions_match"] = c ? ordered_json(m.inf_positions_match) : ordered_json(nullptr);
  o["norm_ref"] = num(m.norm_ref, c);
  o["norm_cand"] = num(m.norm_cand, c);
  o["zero_ref"] = cnt(m.zero_ref);
  o["zero_cand"] = cnt(m.zero_cand);
  o["argmax_agreement"] = num(m.argmax_agreement, exact);
  o["topk_overlap"] = num(m.topk_overlap, exact);
  o["top_k"] = exact && m.top_k ? ordered_json(m.top_k) : ordered_json(nullptr);
  o["cosine_stderr"] = num(m.cosine_stderr, p.estimated);
  o["rel_l2_stderr"] = num(m.rel_l2_stderr, p.estimated);
  if (p.r64)
    o["reference64"] = ordered_json{{"k", p.r64_k}, {"error_reference", real(p.r64_err_ref)},
                                    {"error_candidate", real(p.r64_err_cand)}, {"limit", real(p.r64_limit)}};
  else
    o["reference64"] = nullptr;
  o["error"] = num(p.error, c);
  o["origin"] = p.origin == Origin::none ? ordered_json(nullptr) : ordered_json(origin_name(p.origin));
  o["basis"] = c ? ordered_json(p.basis) : ordered_json(nullptr);
  o["basis_pairs"] = p.basis_pairs;
  o["input_error"] = num(p.input_error, c && p.basis != "none");
  o["amplification"] = num(p.amplification, c);
  o["value_kind"] = tensor_kind_name(p.ref.kind);
  o["source"] = p.ref.source.empty() ? ordered_json(nullptr) : ordered_json(p.ref.source);
  o["rounding"] = num(p.rounding, c);
  o["beyond_rounding"] = c ? ordered_json(p.beyond_rounding) : ordered_json(nullptr);
  o["parameter_pairs"] = p.parameter_pairs;
  return o;
}

ordered_json origin_json(const Report& r, const OriginPoint& o) {
  const PairResult& p = r.pairs[o.pair];
  ordered_json params = ordered_json::array();
  for (size_t j : p.parameter_pairs) {
    const PairResult& q = r.pairs[j];
    params.push_back(ordered_json{
        {"pair", j}, {"role_index", q.ref.role_index}, {"path", q.ref.path},
        {"status", status_name(q.status)}, {"rel_l2", real(q.metrics.rel_l2)},
        {"max_abs_diff", real(q.metrics.max_abs_diff)}, {"beyond_rounding", q.beyond_rounding}});
  }
  return ordered_json{{"pair", o.pair}, {"name", p.ref.name}, {"occurrence", p.ref.occurrence},
                      {"role", role_name(p.ref.role)}, {"role_index", p.ref.role_index},
                      {"op_type", p.ref.op_type}, {"index_ref", p.ref.exec_index},
                      {"origin", origin_name(o.origin)}, {"error", real(p.error)},
                      {"input_error", real(p.input_error)}, {"factor", real(o.factor)},
                      {"rounding", real(p.rounding)}, {"reach", o.reach},
                      {"reach_failing", o.reach_failing},
                      {"source", p.ref.source.empty() ? ordered_json(nullptr) : ordered_json(p.ref.source)},
                      {"parameters_differ", o.parameters_differ}, {"parameters", params}};
}

ordered_json dump_json(const DumpInfo& d) {
  ordered_json o;
  o["path"] = d.path;
  o["state"] = d.state;
  o["records"] = d.records;
  ordered_json md = ordered_json::object();
  for (const auto& [k, v] : d.metadata) md[k] = v;
  o["metadata"] = md;
  if (d.set) o["world_size"] = d.world_size;
  return o;
}

ordered_json pointer(const Report& r, const std::optional<size_t>& i) {
  if (!i) return nullptr;
  return pair_json(r.pairs[*i], *i);
}

// The top level is written by hand, one member at a time, and the pairs one by one: a DOM of the
// whole report cost ~15 KiB per pair (1.5 GB for 100,000 pairs, issue 7 bug 16). Each member
// is still rendered by nlohmann::json, re-indented to its depth, so the text is byte for byte
// what dumping the whole document would give.
class Emitter {
 public:
  Emitter(int indent, const std::function<Result<void>(std::string_view)>& sink)
      : indent_(indent), sink_(sink) {}

  Result<void> begin() { return put("{"); }
  Result<void> member(std::string_view key, const ordered_json& value) {
    DRIFTSCOPE_TRY(key_prefix(key));
    return put(render(value, 1));
  }
  // "key": [ items... ] where next(i) renders item i at depth 2.
  Result<void> array_member(std::string_view key, size_t n,
                            const std::function<ordered_json(size_t)>& item) {
    DRIFTSCOPE_TRY(key_prefix(key));
    if (n == 0) return put("[]");
    std::string chunk = "[";
    for (size_t i = 0; i < n; ++i) {
      if (i) chunk += ',';
      if (pretty()) chunk += "\n" + pad(2);
      chunk += render(item(i), 2);
      if (chunk.size() >= (1u << 16)) {
        DRIFTSCOPE_TRY(put(chunk));
        chunk.clear();
      }
    }
    if (pretty()) chunk += "\n" + pad(1);
    chunk += ']';
    return put(chunk);
  }
  Result<void> end() { return put(pretty() ? "\n}\n" : "}\n"); }

 private:
  bool pretty() const { return indent_ >= 0; }
  std::string pad(int depth) const {
    return std::string(pretty() ? static_cast<size_t>(depth) * static_cast<size_t>(indent_) : 0, ' ');
  }
  Result<void> put(std::string_view s) { return sink_(s); }
  Result<void> key_prefix(std::string_view key) {
    std::string s = first_ ? "" : ",";
    first_ = false;
    if (pretty()) s += "\n" + pad(1);
    s += ordered_json(std::string(key)).dump();
    s += pretty() ? ": " : ":";
    return put(s);
  }
  // JSON strings never hold a raw newline (it is escaped), so every newline of a dump is layout.
  std::string render(const ordered_json& v, int depth) const {
    std::string s = v.dump(indent_, ' ', false, nlohmann::detail::error_handler_t::replace);
    if (!pretty() || indent_ == 0) return s;
    const std::string nl = "\n" + pad(depth);
    std::string out;
    out.reserve(s.size() + s.size() / 8);
    for (char ch : s) {
      if (ch == '\n') out += nl;
      else out += ch;
    }
    return out;
  }

  int indent_;
  const std::function<Result<void>(std::string_view)>& sink_;
  bool first_ = true;
};

}  // namespace

Result<void> report_to_json(const Report& r, int indent,
                            const std::function<Result<void>(std::string_view)>& sink) {
  Emitter e(indent, sink);
  DRIFTSCOPE_TRY(e.begin());
  DRIFTSCOPE_TRY(e.member("schema", Report::kSchema));
  DRIFTSCOPE_TRY(e.member("verdict", verdict_name(r.verdict)));
  DRIFTSCOPE_TRY(e.member("exit_code", verdict_exit_code(r.verdict)));
  DRIFTSCOPE_TRY(e.member("summary", r.summary));
  DRIFTSCOPE_TRY(e.member("reference", dump_json(r.reference)));
  DRIFTSCOPE_TRY(e.member("candidate", dump_json(r.candidate)));
  DRIFTSCOPE_TRY(e.member("reference64", r.reference64.path.empty() ? ordered_json(nullptr)
                                                                     : dump_json(r.reference64)));
  ordered_json counts;
  counts["pairs"] = r.pairs.size();
  for (PairStatus s : {PairStatus::pass, PairStatus::fail, PairStatus::silent_failure,
                       PairStatus::incomparable, PairStatus::skipped, PairStatus::not_compared})
    counts[std::string(status_name(s))] = r.count(s);
  counts["only_in_reference"] = r.only_in_reference.size();
  counts["only_in_candidate"] = r.only_in_candidate.size();
  DRIFTSCOPE_TRY(e.member("counts", counts));
  DRIFTSCOPE_TRY(e.member("stopped_early", r.stopped_early));
  DRIFTSCOPE_TRY(e.member("first_divergence", pointer(r, r.first_divergence)));
  DRIFTSCOPE_TRY(e.member("first_nonfinite", pointer(r, r.first_nonfinite)));
  DRIFTSCOPE_TRY(e.member("first_silent_zero", pointer(r, r.first_silent_zero)));
  if (r.sets) {  // dump sets (docs/dumpsets.md §7); absent for two single dumps
    DRIFTSCOPE_TRY(e.member("first_divergence_ranks", ordered_json(r.first_divergence_ranks)));
    DRIFTSCOPE_TRY(e.member("first_nonfinite_ranks", ordered_json(r.first_nonfinite_ranks)));
    DRIFTSCOPE_TRY(e.member("affected_ranks", ordered_json(r.affected_ranks)));
  }
  DRIFTSCOPE_TRY(e.array_member("tensors", r.pairs.size(), [&](size_t i) {
    ordered_json j = pair_json(r.pairs[i], i);
    if (r.sets) {
      j["ranks"] = r.pair_ranks(r.pairs[i]);
      j["ranks_ref"] = r.pairs[i].ref.ranks;
      j["ranks_cand"] = r.pairs[i].cand.ranks;
    }
    return j;
  }));
  DRIFTSCOPE_TRY(e.array_member("only_in_reference", r.only_in_reference.size(),
                                [&](size_t i) { return desc_json(r.only_in_reference[i]); }));
  DRIFTSCOPE_TRY(e.array_member("only_in_candidate", r.only_in_candidate.size(),
                                [&](size_t i) { return desc_json(r.only_in_candidate[i]); }));
  DRIFTSCOPE_TRY(e.array_member("incomparable", r.incomparable.size(), [&](size_t k) {
    const size_t i = r.incomparable[k];
    const PairResult& p = r.pairs[i];
    return ordered_json{{"pair", i}, {"name", p.ref.name}, {"occurrence", p.ref.occurrence},
                        {"role", role_name(p.ref.role)}, {"role_index", p.ref.role_index},
                        {"index_ref", p.ref.exec_index}, {"index_cand", p.cand.exec_index},
                        {"candidate_name", p.cand.name}, {"reasons", reasons_json(p.reasons)}};
  }));
  DRIFTSCOPE_TRY(e.array_member("error_growth", r.growth.size(), [&](size_t k) {
    const GrowthPoint& g = r.growth[k];
    const PairResult& p = r.pairs[g.pair];
    return ordered_json{{"pair", g.pair}, {"name", p.ref.name}, {"occurrence", p.ref.occurrence},
                        {"index_ref", p.ref.exec_index}, {"error", real(g.error)},
                        {"status", status_name(p.status)}};
  }));
  DRIFTSCOPE_TRY(e.array_member("amplifiers", r.amplifiers.size(), [&](size_t k) {
    const size_t i = r.amplifiers[k];
    const PairResult& p = r.pairs[i];
    return ordered_json{{"pair", i}, {"name", p.ref.name}, {"occurrence", p.ref.occurrence},
                        {"index_ref", p.ref.exec_index}, {"amplification", real(p.amplification)},
                        {"error", real(p.error)}, {"input_error", real(p.input_error)},
                        {"basis", p.basis}};
  }));
  DRIFTSCOPE_TRY(e.member("finer_in_candidate", r.finer_in_candidate));
  DRIFTSCOPE_TRY(e.member("localisation", ordered_json{
      {"basis", r.dataflow ? "dataflow" : "execution_order"},
      {"amplification_threshold", real(r.amplification_threshold)}}));
  DRIFTSCOPE_TRY(e.array_member("origins", r.origins.size(),
                                [&](size_t k) { return origin_json(r, r.origins[k]); }));
  DRIFTSCOPE_TRY(e.member("warnings", r.warnings));
  return e.end();
}

std::string report_to_json(const Report& r, int indent) {
  std::string out;
  (void)report_to_json(r, indent, [&](std::string_view s) -> Result<void> {
    out.append(s);
    return {};
  });
  return out;
}

}  // namespace driftscope
