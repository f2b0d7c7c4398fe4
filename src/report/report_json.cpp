// The JSON report (docs/report-schema.json). JSON has no NaN or infinity: a value that was not
// computed (or is undefined, 0/0) is null, and ±infinity is the string "inf" / "-inf".
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <span>
#include <system_error>
#include <thread>

#include "common/shape_index.hpp"
#include "common/thread_pool.hpp"
#include "compare/internal.hpp"
#include "driftscope/report.hpp"
#include "report/json_writer.hpp"

namespace driftscope {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using compare_detail::JsonBuffer;
using compare_detail::JsonWriter;
using compare_detail::RunKey;
using compare_detail::RunText;

ordered_json real(double v) {
  if (std::isnan(v)) return nullptr;
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

ordered_json index_or_null(int64_t v) { return v < 0 ? ordered_json(nullptr) : ordered_json(v); }

ordered_json shape_json(std::span<const uint64_t> s) {
  ordered_json a = ordered_json::array();
  for (uint64_t d : s) a.push_back(d);
  return a;
}

ordered_json desc_json(const TensorDesc& d) {
  ordered_json o;
  o["name"] = d.name();
  o["occurrence"] = d.occurrence;
  o["role"] = role_name(d.role);
  o["role_index"] = d.role_index;
  o["op_type"] = d.op_type();
  o["index"] = d.exec_index;
  o["dtype"] = dtype_name(d.dtype);
  o["shape"] = shape_json(d.shape());
  o["axes"] = d.axes();
  o["kind"] = d.summary ? "summary" : "tensor";
  o["quantized"] = d.quantized;
  if (!d.ranks().empty()) o["ranks"] = d.ranks();  // dump sets only (docs/dumpsets.md §7)
  return o;
}

ordered_json reasons_json(const PairResult& p) {
  ordered_json a = ordered_json::array();
  for (const auto& r : p.reasons()) a.push_back(ordered_json{{"code", r.code()}, {"message", reason_text(p, r)}});
  return a;
}

// docs/axes.md "Layout diagnosis"; null when the pair was not diagnosed.
ordered_json layout_json(const LayoutDiagnosis* l) {
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

// One element of "tensors" (and the first_* pointers), written straight to text: at a million
// pairs the per-pair DOM dominated the whole comparison (JsonWriter).
void write_real(JsonWriter& w, double v) {
  if (std::isnan(v)) w.null();
  else if (std::isinf(v)) w.str(v > 0 ? "inf" : "-inf");
  else w.number(v);
}

// Criteria::to_string() of the previous pair, reused while the criteria are the same bits: pairs
// judged by one default or one policy rule come in long runs, and formatting the text anew cost
// ~1 us a pair. One per formatting thread; a pure cache (keyed by the criteria's bits), so what it
// held from an earlier report does no harm.
class CriteriaText {
 public:
  const std::string& operator()(const Criteria& c) {
    if (!valid_ || !same(c, last_)) {
      last_ = c;
      text_ = c.to_string();
      valid_ = true;
    }
    return text_;
  }

 private:
  template <class T>
  static bool same(const CompactOptional<T>& a, const CompactOptional<T>& b) {
    if (a.has_value() != b.has_value()) return false;
    if (!a) return true;
    if constexpr (std::is_same_v<T, double>) return std::bit_cast<uint64_t>(*a) == std::bit_cast<uint64_t>(*b);
    else return *a == *b;
  }
  static bool same(const Criteria& a, const Criteria& b) {
    return same(a.atol, b.atol) && same(a.rtol, b.rtol) &&
           same(a.max_mismatch_fraction, b.max_mismatch_fraction) && same(a.min_cosine, b.min_cosine) &&
           same(a.min_sqnr_db, b.min_sqnr_db) && same(a.max_rel_l2, b.max_rel_l2) &&
           same(a.max_ulp, b.max_ulp) && same(a.min_argmax_agreement, b.min_argmax_agreement) &&
           same(a.min_topk_overlap, b.min_topk_overlap);
  }

  bool valid_ = false;
  Criteria last_;
  std::string text_;
};

// What one formatting thread keeps from pair to pair: the criteria's text and the last text of
// each run of members write_pair copies whole while its inputs repeat (JsonWriter::run).
struct PairText {
  CriteriaText criteria;
  RunText runs[7];
};

constexpr size_t kJsonCoordsInline = 16;

// `ranks`: the pair's ranks (Report::pair_ranks) when the report compares dump sets.
void write_pair(JsonWriter& w, PairText& memo, const PairResult& p, size_t i,
                const std::vector<uint32_t>* ranks = nullptr) {
  const Metrics& m = p.metrics;
  const bool c = p.compared;
  const bool exact = c && !p.estimated;  // element-wise metrics exist
  auto num = [&](const auto& k, double v, bool have) {
    w.key(k);
    if (have) write_real(w, v);
    else w.null();
  };
  auto cnt = [&](const auto& k, uint64_t v) {
    w.key(k);
    if (c) w.number(v);
    else w.null();
  };
  auto index_member = [&](const auto& k, int64_t v, bool have) {
    w.key(k);
    if (have && v >= 0) w.number(v);
    else w.null();
  };
  // PairResult::coords_of() without its vector: two allocations a pair were a measurable part of
  // writing a million pairs (issue 30 item 4). Shapes of up to kJsonCoordsInline axes (every real
  // one) unravel on the stack; a longer one takes the accessor.
  auto coords = [&](const auto& k, int64_t flat_index, bool have) {
    w.key(k);
    if (!have) return w.null();
    const std::span<const uint64_t> shape = p.ref.shape();
    if (shape.size() > kJsonCoordsInline) return w.array_of(p.coords_of(flat_index));
    uint64_t at[kJsonCoordsInline];
    detail::unravel(static_cast<uint64_t>(flat_index), shape, at);
    w.array_of(std::span<const uint64_t>(at, shape.size()));
  };
  w.begin_object();
  w.key("pair"), w.number(static_cast<uint64_t>(i));
  w.key("name"), w.str(p.ref.name());
  // Each run's key holds every value its members print (RunKey; a value left out would print
  // the previous pair's text).
  w.run(memo.runs[0], RunKey().add(p.ref.occurrence).add(p.ref.role).add(p.ref.role_index).str(p.ref.op_type()), [&] {
    w.key("occurrence"), w.number(p.ref.occurrence);
    w.key("role"), w.str(role_name(p.ref.role));
    w.key("role_index"), w.number(p.ref.role_index);
    w.key("op_type"), w.str(p.ref.op_type());
  });
  w.key("index_ref"), w.number(p.ref.exec_index);
  w.key("index_cand"), w.number(p.cand.exec_index);
  w.key("candidate_name"), w.str(p.cand.name());
  w.run(memo.runs[1],
        RunKey().add(p.ref.dtype).add(p.cand.dtype).span(p.ref.shape()).span(p.cand.shape())
            .strings(p.ref.axes()).strings(p.cand.axes()).add(p.status),
        [&] {
          w.key("dtype_ref"), w.str(dtype_name(p.ref.dtype));
          w.key("dtype_cand"), w.str(dtype_name(p.cand.dtype));
          w.key("shape_ref"), w.array_of(p.ref.shape());
          w.key("shape_cand"), w.array_of(p.cand.shape());
          w.key("axes_ref"), w.array_of(p.ref.axes());
          w.key("axes_cand"), w.array_of(p.cand.axes());
          w.key("status"), w.str(status_name(p.status));
        });
  w.key("reasons");
  w.begin_array();
  for (const auto& r : p.reasons()) {
    w.begin_object();
    w.key("code"), w.str(r.code());
    w.key("message"), w.str(reason_text(p, r));
    w.end_object();
  }
  w.end_array();
  const bool judged = p.status != PairStatus::incomparable && p.status != PairStatus::skipped;
  RunKey k2;
  k2.strings(p.notes()).add(p.estimated).span(std::span<const uint32_t>(p.permutation())).add(judged);
  if (p.layout()) k2.fail();  // rare, and its text holds more than the key would
  if (judged) {
    const Criteria& cr = p.criteria();
    k2.str(p.criteria_source());
    auto opt = [&](const auto& v) {
      k2.add(v.has_value());
      if (v) k2.add(*v);
    };
    opt(cr.atol), opt(cr.rtol), opt(cr.max_mismatch_fraction), opt(cr.min_cosine), opt(cr.min_sqnr_db),
        opt(cr.max_rel_l2), opt(cr.max_ulp), opt(cr.min_argmax_agreement), opt(cr.min_topk_overlap);
  }
  k2.add(c).add(m.count);
  w.run(memo.runs[2], k2, [&] {
    w.key("notes"), w.array_of(p.notes());
    w.key("estimated"), w.boolean(p.estimated);
    w.key("permutation");
    if (p.permutation().empty()) w.null();
    else w.array_of(p.permutation());
    w.key("layout");
    if (p.layout()) w.json(layout_json(p.layout()));
    else w.null();
    w.key("criteria");
    if (p.status == PairStatus::incomparable || p.status == PairStatus::skipped) {
      w.null();
    } else {
      const Criteria& cr = p.criteria();
      auto opt = [&](const auto& k, const std::optional<double>& v) {
        w.key(k);
        if (v) write_real(w, *v);
        else w.null();
      };
      w.begin_object();
      w.key("source"), w.str(p.criteria_source());
      w.key("text"), w.str(memo.criteria(cr));
      opt("atol", cr.atol);
      opt("rtol", cr.rtol);
      opt("max_mismatch_fraction", cr.max_mismatch_fraction);
      opt("min_cosine", cr.min_cosine);
      opt("min_sqnr_db", cr.min_sqnr_db);
      opt("max_rel_l2", cr.max_rel_l2);
      w.key("max_ulp");
      if (cr.max_ulp) w.number(*cr.max_ulp);
      else w.null();
      opt("min_argmax_agreement", cr.min_argmax_agreement);
      opt("min_topk_overlap", cr.min_topk_overlap);
      w.end_object();
    }
    cnt("count", m.count);
  });
  num("cosine", m.cosine, c);
  num("rmse", m.rmse, exact);
  num("max_abs_diff", m.max_abs_diff, exact);
  num("mean_abs_diff", m.mean_abs_diff, exact);
  num("max_rel_diff", m.max_rel_diff, exact);
  num("sqnr_db", m.sqnr_db, c);
  num("nmse", m.nmse, c);
  num("rel_l2", m.rel_l2, c);
  w.key("mismatch_count");
  if (exact) w.number(m.mismatch_count);
  else w.null();
  num("mismatch_fraction", m.mismatch_fraction, exact);
  index_member("first_mismatch_index", m.first_mismatch(), exact);
  coords("first_mismatch_coords", m.first_mismatch(), exact && m.first_mismatch() >= 0);
  num("first_mismatch_ref", m.first_mismatch_ref(), exact && m.first_mismatch() >= 0);
  num("first_mismatch_cand", m.first_mismatch_cand(), exact && m.first_mismatch() >= 0);
  index_member("max_abs_index", m.max_abs_index, exact);
  coords("max_abs_coords", m.max_abs_index, exact && m.max_abs_index >= 0);
  index_member("max_ulp", m.max_ulp, exact);
  w.run(memo.runs[3],
        RunKey().add(c).add(m.nan_ref()).add(m.nan_cand()).add(m.nan_positions_match).add(m.inf_ref())
            .add(m.inf_cand()).add(m.inf_positions_match),
        [&] {
          cnt("nan_ref", m.nan_ref());
          cnt("nan_cand", m.nan_cand());
          w.key("nan_positions_match");
          if (c) w.boolean(m.nan_positions_match);
          else w.null();
          cnt("inf_ref", m.inf_ref());
          cnt("inf_cand", m.inf_cand());
          w.key("inf_positions_match");
          if (c) w.boolean(m.inf_positions_match);
          else w.null();
        });
  num("norm_ref", m.norm_ref, c);
  num("norm_cand", m.norm_cand, c);
  RunKey k4;
  k4.add(c).add(exact).add(p.estimated).add(m.zero_ref).add(m.zero_cand).add(m.argmax_agreement())
      .add(m.topk_overlap()).add(m.top_k()).add(m.cosine_stderr()).add(m.rel_l2_stderr()).add(p.r64);
  if (p.r64) k4.fail();  // its three doubles differ from pair to pair
  w.run(memo.runs[4], k4, [&] {
    cnt("zero_ref", m.zero_ref);
    cnt("zero_cand", m.zero_cand);
    num("argmax_agreement", m.argmax_agreement(), exact);
    num("topk_overlap", m.topk_overlap(), exact);
    w.key("top_k");
    if (exact && m.top_k()) w.number(m.top_k());
    else w.null();
    num("cosine_stderr", m.cosine_stderr(), p.estimated);
    num("rel_l2_stderr", m.rel_l2_stderr(), p.estimated);
    w.key("reference64");
    if (p.r64) {
      w.begin_object();
      w.key("k"), w.number(p.r64_k());
      w.key("error_reference"), write_real(w, p.r64_err_ref());
      w.key("error_candidate"), write_real(w, p.r64_err_cand());
      w.key("limit"), write_real(w, p.r64_limit());
      w.end_object();
    } else {
      w.null();
    }
  });
  num("error", p.error, c);
  w.run(memo.runs[5], RunKey().add(p.origin).add(c).str(p.basis()), [&] {
    w.key("origin");
    if (p.origin == Origin::none) w.null();
    else w.str(origin_name(p.origin));
    w.key("basis");
    if (c) w.str(p.basis());
    else w.null();
  });
  w.key("basis_pairs"), w.array_of(p.basis_pairs());
  num("input_error", p.input_error, c && p.basis() != "none");
  num("amplification", p.amplification, c);
  w.key("value_kind"), w.str(tensor_kind_name(p.ref.kind));
  w.key("source");
  if (p.ref.source().empty()) w.null();
  else w.str(p.ref.source());
  w.run(memo.runs[6],
        RunKey().add(c).add(p.rounding).add(p.beyond_rounding).span(std::span<const size_t>(p.parameter_pairs())),
        [&] {
          num("rounding", p.rounding, c);
          w.key("beyond_rounding");
          if (c) w.boolean(p.beyond_rounding);
          else w.null();
          w.key("parameter_pairs"), w.array_of(p.parameter_pairs());
        });
  if (ranks) {  // dump sets only (docs/dumpsets.md §7)
    w.key("ranks"), w.array_of(*ranks);
    w.key("ranks_ref"), w.array_of(p.ref.ranks());
    w.key("ranks_cand"), w.array_of(p.cand.ranks());
    if (!p.shard_check().empty()) w.key("shard_check"), w.str(p.shard_check());
  }
  w.end_object();
}

ordered_json origin_json(const Report& r, const OriginPoint& o) {
  const PairResult& p = r.pairs[o.pair];
  ordered_json params = ordered_json::array();
  for (size_t j : p.parameter_pairs()) {
    const PairResult& q = r.pairs[j];
    params.push_back(ordered_json{
        {"pair", j}, {"role_index", q.ref.role_index}, {"path", q.ref.path()},
        {"status", status_name(q.status)}, {"rel_l2", real(q.metrics.rel_l2)},
        {"max_abs_diff", real(q.metrics.max_abs_diff)}, {"beyond_rounding", q.beyond_rounding}});
  }
  ordered_json out{{"pair", o.pair}, {"name", p.ref.name()}, {"occurrence", p.ref.occurrence},
                      {"role", role_name(p.ref.role)}, {"role_index", p.ref.role_index},
                      {"op_type", p.ref.op_type()}, {"index_ref", p.ref.exec_index},
                      {"origin", origin_name(o.origin)}, {"error", real(p.error)},
                      {"input_error", real(p.input_error)}, {"factor", real(o.factor)},
                      {"rounding", real(p.rounding)}, {"reach", o.reach},
                      {"reach_failing", o.reach_failing},
                      {"source", p.ref.source().empty() ? ordered_json(nullptr) : ordered_json(p.ref.source())},
                      {"parameters_differ", o.parameters_differ}, {"parameters", params}};
  if (r.sets) out["ranks"] = r.pair_ranks(p);  // dump sets only, as tensors[].ranks
  return out;
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
  // "key": value, the value written by fn at depth 1.
  Result<void> member_written(std::string_view key, const std::function<void(JsonWriter&)>& fn) {
    DRIFTSCOPE_TRY(key_prefix(key));
    JsonBuffer s;
    JsonWriter w(s, indent_, 1);
    fn(w);
    return put(s.view());
  }
  // "key": [ items... ] where fn(w, i) writes item i at depth 2, handed to the sink in chunks of
  // kItems items. A long array is formatted by helper threads, chunk by chunk, while this thread
  // passes the finished chunks to the sink in order: at 1,000,000 pairs (2.75 GB of text)
  // formatting and the sink's writes (the kernel's copy into the page cache) both take seconds,
  // and on two cores they overlap. The sink is only ever called on this thread.
  Result<void> array_written(std::string_view key, size_t n,
                             const std::function<void(JsonWriter&, size_t)>& fn) {
    DRIFTSCOPE_TRY(key_prefix(key));
    if (n == 0) return put("[]");
    // Items [begin, end), each after its separator; the closing bracket after the last one.
    auto format = [&](JsonBuffer& chunk, size_t begin, size_t end) {
      const size_t pad2 = pretty() ? 2 * static_cast<size_t>(indent_) : 0;
      for (size_t i = begin; i < end; ++i) {
        chunk += i ? ',' : '[';
        if (pretty()) {
          chunk += '\n';
          chunk.fill(' ', pad2);
        }
        JsonWriter w(chunk, indent_, 2);
        fn(w, i);
      }
      if (end == n) {
        if (pretty()) {
          chunk += '\n';
          chunk.fill(' ', static_cast<size_t>(indent_));
        }
        chunk += ']';
      }
    };
    if (n >= kPipelineItems) {
      std::optional<Result<void>> piped = pipelined(n, format);
      if (piped) return std::move(*piped);
    }
    JsonBuffer chunk;
    for (size_t i = 0; i < n; i += kItems) {
      chunk.clear();
      format(chunk, i, std::min(n, i + kItems));
      DRIFTSCOPE_TRY(put(chunk.view()));
    }
    return {};
  }
  // "key": [ items... ] where item(i) is rendered by nlohmann at depth 2 (irregular members).
  Result<void> array_member(std::string_view key, size_t n,
                            const std::function<ordered_json(size_t)>& item) {
    return array_written(key, n, [&](JsonWriter& w, size_t i) { w.json(item(i)); });
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
    if (pretty()) {
      s += '\n';
      s += pad(1);
    }
    s += ordered_json(std::string(key)).dump();
    s += pretty() ? ": " : ":";
    return put(s);
  }
  // JSON strings never hold a raw newline (it is escaped), so every newline of a dump is layout.
  std::string render(const ordered_json& v, int depth) const {
    std::string s = v.dump(indent_, ' ', false, nlohmann::detail::error_handler_t::replace);
    if (!pretty() || indent_ == 0) return s;
    std::string nl = pad(depth);
    nl.insert(nl.begin(), '\n');
    std::string out;
    out.reserve(s.size() + s.size() / 8);
    for (char ch : s) {
      if (ch == '\n') out += nl;
      else out += ch;
    }
    return out;
  }

  static constexpr size_t kItems = 256;           // per chunk: ~700 KB of pairs
  static constexpr size_t kPipelineItems = 4096;  // below this threads cost more than they save
  static constexpr size_t kRing = 6;              // chunks formatted ahead of the sink, at most

  // array_written's threaded form; nullopt when no thread could be started (then the caller
  // formats inline). Chunk k holds items [k * kItems, (k + 1) * kItems) and lives in ring slot
  // k % kRing from when a formatter claims it until the sink has taken it; a formatter claims
  // chunk k only once chunk k - kRing is written, so a slot is never in two hands.
  template <class Format>
  std::optional<Result<void>> pipelined(size_t n, Format& format) {
    struct Slot {
      JsonBuffer text;
      bool ready = false;
    };
    const size_t chunks = (n + kItems - 1) / kItems;
    std::vector<Slot> ring(kRing);
    std::mutex m;
    std::condition_variable cv;
    size_t claimed = 0, written = 0;
    bool stop = false;
    std::exception_ptr thrown;
    auto formatter = [&] {
      try {
        for (;;) {
          size_t k;
          JsonBuffer text;
          {
            std::unique_lock lock(m);
            cv.wait(lock, [&] { return stop || claimed == chunks || claimed < written + kRing; });
            if (stop || claimed == chunks) return;
            k = claimed++;
            text = std::move(ring[k % kRing].text);
          }
          text.clear();
          const size_t begin = k * kItems;
          format(text, begin, std::min(n, begin + kItems));
          std::lock_guard lock(m);
          ring[k % kRing].text = std::move(text);
          ring[k % kRing].ready = true;
          cv.notify_all();
        }
      } catch (...) {
        std::lock_guard lock(m);
        if (!thrown) thrown = std::current_exception();
        stop = true;
        cv.notify_all();
      }
    };
    // Two formatters where there are two cores: with the sink's thread that is one more thread
    // than cores, and the kernel gives each what the others leave.
    std::vector<std::thread> helpers;
    const unsigned want = std::min(2u, detail::hardware_threads());
    for (unsigned t = 0; t < want; ++t) {
      try {
        helpers.emplace_back(formatter);
      } catch (const std::system_error&) {
        break;
      }
    }
    if (helpers.empty()) return std::nullopt;
    Result<void> result;
    for (size_t k = 0; k < chunks; ++k) {
      JsonBuffer text;
      {
        std::unique_lock lock(m);
        cv.wait(lock, [&] { return stop || ring[k % kRing].ready; });
        if (!ring[k % kRing].ready) break;  // a formatter threw
        text = std::move(ring[k % kRing].text);
        ring[k % kRing].ready = false;
      }
      result = put(text.view());
      std::lock_guard lock(m);
      ring[k % kRing].text = std::move(text);
      written = k + 1;
      if (!result) stop = true;
      cv.notify_all();
      if (!result) break;
    }
    {
      std::lock_guard lock(m);
      stop = true;
      cv.notify_all();
    }
    for (auto& t : helpers) t.join();
    if (thrown) std::rethrow_exception(thrown);
    return result;
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
  // One walk for every status, not Report::count() per status: six walks over a million pairs
  // were 2% of writing their report.
  const auto by_status = r.counts();
  for (PairStatus s : {PairStatus::pass, PairStatus::fail, PairStatus::silent_failure,
                       PairStatus::incomparable, PairStatus::skipped, PairStatus::not_compared})
    counts[std::string(status_name(s))] = by_status[static_cast<size_t>(s)];
  counts["only_in_reference"] = r.only_in_reference.size();
  counts["only_in_candidate"] = r.only_in_candidate.size();
  DRIFTSCOPE_TRY(e.member("counts", counts));
  DRIFTSCOPE_TRY(e.member("stopped_early", r.stopped_early));
  for (auto [key, i] : {std::pair{"first_divergence", r.first_divergence},
                        std::pair{"first_nonfinite", r.first_nonfinite},
                        std::pair{"first_silent_zero", r.first_silent_zero}})
    DRIFTSCOPE_TRY(e.member_written(key, [&, i = i](JsonWriter& w) {
      PairText text;
      if (i) write_pair(w, text, r.pairs[*i], *i);
      else w.null();
    }));
  if (r.sets) {  // dump sets (docs/dumpsets.md §7); absent for two single dumps
    DRIFTSCOPE_TRY(e.member("first_divergence_ranks", ordered_json(r.first_divergence_ranks)));
    DRIFTSCOPE_TRY(e.member("first_nonfinite_ranks", ordered_json(r.first_nonfinite_ranks)));
    DRIFTSCOPE_TRY(e.member("affected_ranks", ordered_json(r.affected_ranks)));
  }
  DRIFTSCOPE_TRY(e.array_written("tensors", r.pairs.size(), [&](JsonWriter& w, size_t i) {
    thread_local PairText text;  // array_written may format on several threads
    if (!r.sets) return write_pair(w, text, r.pairs[i], i);
    const auto ranks = r.pair_ranks(r.pairs[i]);
    write_pair(w, text, r.pairs[i], i, &ranks);
  }));
  DRIFTSCOPE_TRY(e.array_member("only_in_reference", r.only_in_reference.size(),
                                [&](size_t i) { return desc_json(r.only_in_reference[i]); }));
  DRIFTSCOPE_TRY(e.array_member("only_in_candidate", r.only_in_candidate.size(),
                                [&](size_t i) { return desc_json(r.only_in_candidate[i]); }));
  DRIFTSCOPE_TRY(e.array_member("incomparable", r.incomparable.size(), [&](size_t k) {
    const size_t i = r.incomparable[k];
    const PairResult& p = r.pairs[i];
    return ordered_json{{"pair", i}, {"name", p.ref.name()}, {"occurrence", p.ref.occurrence},
                        {"role", role_name(p.ref.role)}, {"role_index", p.ref.role_index},
                        {"index_ref", p.ref.exec_index}, {"index_cand", p.cand.exec_index},
                        {"candidate_name", p.cand.name()}, {"reasons", reasons_json(p)}};
  }));
  DRIFTSCOPE_TRY(e.array_written("error_growth", r.growth.size(), [&](JsonWriter& w, size_t k) {
    const GrowthPoint& g = r.growth[k];
    const PairResult& p = r.pairs[g.pair];
    w.begin_object();
    w.key("pair"), w.number(static_cast<uint64_t>(g.pair));
    w.key("name"), w.str(p.ref.name());
    w.key("occurrence"), w.number(p.ref.occurrence);
    w.key("index_ref"), w.number(p.ref.exec_index);
    w.key("error"), write_real(w, g.error);
    w.key("status"), w.str(status_name(p.status));
    w.end_object();
  }));
  DRIFTSCOPE_TRY(e.array_member("amplifiers", r.amplifiers.size(), [&](size_t k) {
    const size_t i = r.amplifiers[k];
    const PairResult& p = r.pairs[i];
    return ordered_json{{"pair", i}, {"name", p.ref.name()}, {"occurrence", p.ref.occurrence},
                        {"index_ref", p.ref.exec_index}, {"amplification", real(p.amplification)},
                        {"error", real(p.error)}, {"input_error", real(p.input_error)},
                        {"basis", p.basis()}};
  }));
  DRIFTSCOPE_TRY(e.member("finer_in_candidate", r.finer_in_candidate));
  DRIFTSCOPE_TRY(e.member("localisation", ordered_json{
      {"basis", r.dataflow ? "dataflow" : "execution_order"},
      {"amplification_threshold", real(r.amplification_threshold)}}));
  DRIFTSCOPE_TRY(e.array_member("origins", r.origins.size(),
                                [&](size_t k) { return origin_json(r, r.origins[k]); }));
  if (!r.axes_findings.empty())  // docs/compare.md "Findings by axis name"; absent when there is none
    DRIFTSCOPE_TRY(e.array_member("axes_findings", r.axes_findings.size(), [&](size_t k) {
      const AxesFindingPair& f = r.axes_findings[k];
      auto opt = [](const auto& v) { return v ? ordered_json(*v) : ordered_json(nullptr); };
      auto msg = [](const std::string& m) { return m.empty() ? ordered_json(nullptr) : ordered_json(m); };
      return ordered_json{{"code", f.code}, {"side", f.side}, {"name", f.name}, {"occurrence", f.occurrence},
                          {"role", role_name(f.role)}, {"role_index", f.role_index}, {"op_type", f.op_type},
                          {"pair", opt(f.pair)}, {"index_ref", opt(f.index_ref)}, {"index_cand", opt(f.index_cand)},
                          {"reference_message", msg(f.reference_message)},
                          {"candidate_message", msg(f.candidate_message)}};
    }));
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
