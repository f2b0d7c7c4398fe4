// A comparison in parts (compare.hpp "A comparison in parts"): the pairs of compare() measured in
// any number of parts, elsewhere, and assembled into the report compare() gives, bit for bit.
//
// A part is a blob: "DSPART4\n", u64 fingerprint of the comparison (engine.cpp: both files' salts
// and record counts, the plan's identities and criteria), u64 size of the work list, u64 pair
// count, then per pair u64 index, u8 reference64-missing flag and every field of PairResult the
// engine fills before localisation, except the descriptions (the assembler prepares those
// itself). Integers are little-endian, doubles their IEEE bits (NaN payloads and signed zeros
// survive), strings and vectors a u64 length then the elements. One field list (fields()) drives
// both directions, so the encoder and the decoder cannot disagree.
#include <algorithm>
#include <bit>
#include <cstring>
#include <type_traits>

#include <fmt/format.h>

#include "compare/internal.hpp"
#include "compare/report_access.hpp"

namespace driftscope {
namespace compare_detail {
namespace {

constexpr std::string_view kMagic = "DSPART4\n";  // 2: r64_rms and r64_u (issue 26 §5); 3: no max_abs_coords, 4: no first_mismatch_coords (issue 30 §4)

Error bad_part(std::string message) { return make_error(Errc::invalid_argument, std::move(message)); }

class Encoder {
 public:
  std::string out;
  void raw(const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
  template <class T>
    requires std::is_arithmetic_v<T>
  void operator()(T& v) {
    if constexpr (std::is_same_v<T, bool>) {
      uint8_t b = v;
      raw(&b, 1);
    } else {
      raw(&v, sizeof v);  // little-endian hosts only (static_assert below)
    }
  }
  template <class E>
    requires std::is_enum_v<E>
  void operator()(E& v) {
    auto u = static_cast<uint8_t>(v);
    (*this)(u);
  }
  void operator()(std::string& s) {
    uint64_t n = s.size();
    (*this)(n);
    raw(s.data(), s.size());
  }
  template <class T>
  void operator()(std::vector<T>& v) {
    uint64_t n = v.size();
    (*this)(n);
    for (auto& x : v) (*this)(x);
  }
  // Encoded as the std::vector it stands for.
  template <class T, size_t N>
  void operator()(detail::InlineVector<T, N>& v) {
    uint64_t n = v.size();
    (*this)(n);
    for (auto& x : v) (*this)(x);
  }
  template <class T>
  void operator()(std::optional<T>& v) {
    bool has = v.has_value();
    (*this)(has);
    if (has) (*this)(*v);
  }
  template <class T>
  void operator()(detail::Boxed<T>& v) {
    bool has = v.has_value();
    (*this)(has);
    if (has) (*this)(*v);
  }
  template <class T>
  void operator()(CompactOptional<T>& v) {
    std::optional<T> o = v;
    (*this)(o);
  }
  void operator()(detail::Interned& v) {
    std::string s = v;
    (*this)(s);
  }
  // Encoded as the container it holds.
  template <class C>
  void operator()(detail::Sparse<C>& v) {
    if (v.empty()) {
      uint64_t n = 0;
      (*this)(n);
    } else {
      (*this)(v.mut());
    }
  }
  void operator()(Reason& r) {
    (*this)(detail::ReportAccess::code(r));
    (*this)(r.message);
  }
  void operator()(PairDetail::Element& e);
  void operator()(PairDetail& d);
  void operator()(Metrics& m);
  void operator()(Criteria& c);
  void operator()(detail::Pooled<Criteria>& c) {  // encoded as the Criteria it holds
    Criteria v = c;
    (*this)(v);
  }
};

class Decoder {
 public:
  explicit Decoder(std::string_view in) : in_(in) {}
  bool ok = true;
  size_t pos = 0;
  bool raw(void* p, size_t n) {
    if (!ok || in_.size() - pos < n) return ok = false;
    std::memcpy(p, in_.data() + pos, n);
    pos += n;
    return true;
  }
  bool at_end() const { return ok && pos == in_.size(); }
  template <class T>
    requires std::is_arithmetic_v<T>
  void operator()(T& v) {
    if constexpr (std::is_same_v<T, bool>) {
      uint8_t b = 0;
      if (raw(&b, 1) && b > 1) ok = false;
      v = b != 0;
    } else {
      raw(&v, sizeof v);
    }
  }
  template <class E>
    requires std::is_enum_v<E>
  void operator()(E& v) {
    uint8_t u = 0;
    raw(&u, 1);
    v = static_cast<E>(u);
  }
  // A length never exceeds the bytes left (every element takes at least one), so a damaged
  // length cannot make us allocate more than the part's own size.
  bool length(uint64_t& n) {
    (*this)(n);
    if (ok && n > in_.size() - pos) ok = false;
    return ok;
  }
  void operator()(std::string& s) {
    uint64_t n = 0;
    if (!length(n)) return;
    s.assign(in_.data() + pos, n);
    pos += n;
  }
  template <class T>
  void operator()(std::vector<T>& v) {
    uint64_t n = 0;
    if (!length(n)) return;
    v.assign(n, T{});
    for (auto& x : v) {
      (*this)(x);
      if (!ok) return;
    }
  }
  template <class T, size_t N>
  void operator()(detail::InlineVector<T, N>& v) {
    std::vector<T> c;
    (*this)(c);
    v = c;
  }
  template <class T>
  void operator()(std::optional<T>& v) { maybe<T>(v); }
  template <class T>
  void operator()(detail::Boxed<T>& v) { maybe<T>(v); }
  template <class T>
  void operator()(CompactOptional<T>& v) { maybe<T>(v); }
  void operator()(detail::Interned& v) {
    std::string s;
    (*this)(s);
    v = s;
  }
  template <class C>
  void operator()(detail::Sparse<C>& v) {
    C c;
    (*this)(c);
    v = std::move(c);
  }
  // std::optional and Boxed share one encoding: a presence flag, then the value.
  template <class T, class Opt>
  void maybe(Opt& v) {
    bool has = false;
    (*this)(has);
    if (!ok) return;
    if (has) {
      T x{};
      (*this)(x);
      v = std::move(x);
    } else {
      v.reset();
    }
  }
  void operator()(Reason& r) {
    (*this)(detail::ReportAccess::code(r));
    (*this)(r.message);
  }
  void operator()(PairDetail::Element& e);
  void operator()(PairDetail& d);
  void operator()(Metrics& m);
  void operator()(Criteria& c);
  void operator()(detail::Pooled<Criteria>& c) {
    Criteria v;
    (*this)(v);
    c = v;
  }

 private:
  std::string_view in_;
};

static_assert(std::endian::native == std::endian::little, "parts are little-endian");

template <class IO>
void element_fields(IO& io, PairDetail::Element& e) {
  io(e.index);
  io(e.coords);
  io(e.ref);
  io(e.cand);
  io(e.abs_diff);
}

template <class IO>
void detail_fields(IO& io, PairDetail& d) {
  io(d.histogram);
  io(d.exact);
  io(d.nonfinite_same);
  io(d.nonfinite_differ);
  io(d.rows);
  io(d.cols);
  io(d.grid_rows);
  io(d.grid_cols);
  io(d.heat);
  io(d.worst);
}

template <class IO>
void metrics_fields(IO& io, Metrics& m) {
  // The rarely-set metrics (Metrics::Rare) keep their places in the encoding.
  Metrics::Rare r = m.rare();
  for (uint64_t* v : {&m.count, &m.finite_pairs, &r.nan_ref, &r.nan_cand, &r.nan_both, &r.inf_ref,
                      &r.inf_cand, &r.inf_same, &m.zero_ref, &m.zero_cand, &m.mismatch_count})
    io(*v);
  for (bool* v : {&m.nan_positions_match, &m.inf_positions_match, &m.const_ref, &m.const_cand}) io(*v);
  for (double* v : {&m.max_abs_diff, &m.mean_abs_diff, &m.rmse, &m.max_rel_diff, &m.cosine, &m.sqnr_db,
                    &m.nmse, &m.rel_l2, &m.norm_ref, &m.norm_cand, &m.mismatch_fraction,
                    &r.first_mismatch_ref, &r.first_mismatch_cand, &r.argmax_agreement, &r.topk_overlap,
                    &r.cosine_stderr, &r.rel_l2_stderr})
    io(*v);
  for (int64_t* v : {&r.first_mismatch, &m.max_abs_index, &m.max_ulp}) io(*v);
  io(r.top_k);
  m.set_rare(r);
}

template <class IO>
void criteria_fields(IO& io, Criteria& c) {
  for (CompactOptional<double>* v : {&c.atol, &c.rtol, &c.max_mismatch_fraction, &c.min_cosine, &c.min_sqnr_db,
                                   &c.max_rel_l2, &c.min_argmax_agreement, &c.min_topk_overlap})
    io(*v);
  io(c.max_ulp);
}

void Encoder::operator()(PairDetail::Element& e) { element_fields(*this, e); }
void Encoder::operator()(PairDetail& d) { detail_fields(*this, d); }
void Encoder::operator()(Metrics& m) { metrics_fields(*this, m); }
void Encoder::operator()(Criteria& c) { criteria_fields(*this, c); }
void Decoder::operator()(PairDetail::Element& e) { element_fields(*this, e); }
void Decoder::operator()(PairDetail& d) { detail_fields(*this, d); }
void Decoder::operator()(Metrics& m) { metrics_fields(*this, m); }
void Decoder::operator()(Criteria& c) { criteria_fields(*this, c); }

// Every field of a pair the engine sets before localisation; not ref, cand (prepared by the
// assembler) nor layout (diagnosed after assembly).
template <class IO>
void pair_fields(IO& io, PairResult& p) {
  // The rarely-set members (PairResult::Rare) keep their places in the encoding.
  detail::PairRare& r = detail::ReportAccess::edit(p);
  io(p.status);
  // A reason judge() words from the pair carries an empty message (reason_text() words it from
  // the fields restored here), so a restored pair words as the measured one did.
  io(detail::ReportAccess::reasons(p));
  io(detail::ReportAccess::notes(p));
  io(r.permutation);
  io(p.compared);
  io(p.estimated);
  io(p.metrics);
  io(detail::ReportAccess::criteria(p));
  io(detail::ReportAccess::criteria_source(p));
  io(p.r64);
  for (double* v : {&r.r64_err_ref, &r.r64_err_cand, &r.r64_limit, &r.r64_k, &r.r64_rms, &r.r64_u, &p.error,
                    &p.input_error, &p.amplification, &p.rounding})
    io(*v);
  io(p.origin);
  io(detail::ReportAccess::basis(p));
  io(detail::ReportAccess::basis_pairs(p));
  io(p.beyond_rounding);
  io(r.parameter_pairs);
  io(r.detail);
  detail::ReportAccess::drop_rare_if_default(p);
}

}  // namespace

uint64_t part_fingerprint(std::string_view key) noexcept {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
  for (unsigned char c : key) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

Result<void> EnginePart::check_subset(const std::vector<size_t>& all, const Report& report) const {
  for (size_t k = 0; k < subset.size(); ++k) {
    size_t i = subset[k];
    if (k > 0 && subset[k - 1] >= i)
      return bad_part(fmt::format("measure_pairs: pair {} is listed twice", i));
    if (!std::binary_search(all.begin(), all.end(), i))
      return bad_part(fmt::format("measure_pairs: pair {} is not one that needs measuring ({} pairs, {} of "
                                  "them to measure: see compare_work)", i, report.pairs.size(), all.size()));
  }
  return {};
}

Result<void> EnginePart::fill(const std::vector<size_t>& all, uint64_t expected, Report& report,
                              std::vector<uint8_t>& r64) const {
  // 0: no work, 1: to measure, 2: measured.
  std::vector<uint8_t> state(report.pairs.size(), 0);
  for (size_t i : all) state[i] = 1;
  for (size_t k = 0; k < parts.size(); ++k) {
    Decoder in(parts[k]);
    char magic[8] = {};
    uint64_t fp = 0, work_size = 0, count = 0;
    if (!in.raw(magic, 8) || std::string_view(magic, 8) != kMagic)
      return bad_part(fmt::format("part {}: not a measured part (bad magic)", k));
    in(fp);
    in(work_size);
    if (in.ok && (fp != expected || work_size != all.size()))
      return bad_part(fmt::format("part {} was measured for another comparison (other dumps or options)", k));
    if (!in.length(count)) return bad_part(fmt::format("part {}: damaged (pair count)", k));
    for (uint64_t j = 0; j < count; ++j) {
      uint64_t index = 0;
      uint8_t missing = 0;
      in(index);
      in(missing);
      if (!in.ok) return bad_part(fmt::format("part {}: damaged at byte {}", k, in.pos));
      if (index >= state.size() || state[index] == 0)
        return bad_part(fmt::format("part {}: pair {} is not one that needs measuring", k, index));
      if (state[index] == 2) return bad_part(fmt::format("part {}: pair {} was measured twice", k, index));
      PairResult p;
      pair_fields(in, p);
      if (!in.ok || static_cast<uint8_t>(p.status) > static_cast<uint8_t>(PairStatus::not_compared) ||
          static_cast<uint8_t>(p.origin) > static_cast<uint8_t>(Origin::amplified) || missing > 1)
        return bad_part(fmt::format("part {}: damaged at byte {} (pair {})", k, in.pos, index));
      PairResult& dst = report.pairs[index];
      p.ref = std::move(dst.ref);
      p.cand = std::move(dst.cand);
      dst = std::move(p);
      r64[index] = missing;
      state[index] = 2;
    }
    if (!in.at_end()) return bad_part(fmt::format("part {}: {} bytes after its last pair", k, parts[k].size() - in.pos));
  }
  size_t missing = 0;
  std::optional<size_t> first;
  for (size_t i = 0; i < state.size(); ++i)
    if (state[i] == 1 && ++missing && !first) first = i;
  if (missing)
    return bad_part(fmt::format("{} of {} pairs were measured by no part (the first: pair {}, '{}'): the "
                                "report would be incomplete", missing, all.size(), *first,
                                report.pairs[*first].ref.name()));
  return {};
}

}  // namespace compare_detail

using compare_detail::EnginePart;
using compare_detail::run_engine;

Result<std::vector<size_t>> compare_work(const Reader& reference, const Reader& candidate,
                                         const CompareOptions& options) {
  EnginePart part;
  part.kind = EnginePart::Kind::plan;
  DRIFTSCOPE_TRY(run_engine(reference, candidate, options, false, &part));
  return std::move(part.work);
}

Result<std::string> measure_pairs(const Reader& reference, const Reader& candidate,
                                  const CompareOptions& options, std::span<const size_t> pairs) {
  EnginePart part;
  part.kind = EnginePart::Kind::measure;
  part.subset.assign(pairs.begin(), pairs.end());
  std::sort(part.subset.begin(), part.subset.end());
  auto rep = run_engine(reference, candidate, options, false, &part);
  if (!rep) return std::move(rep).error();
  compare_detail::Encoder out;
  out.raw(compare_detail::kMagic.data(), compare_detail::kMagic.size());
  uint64_t work = part.work.size(), count = part.subset.size();
  out(part.fingerprint);
  out(work);
  out(count);
  for (size_t i : part.subset) {
    uint64_t index = i;
    uint8_t missing = part.r64_missing[i];
    out(index);
    out(missing);
    compare_detail::pair_fields(out, rep->pairs[i]);
  }
  return std::move(out.out);
}

Result<Report> assemble_report(const Reader& reference, const Reader& candidate,
                               const CompareOptions& options, std::span<const std::string> parts) {
  EnginePart part;
  part.kind = EnginePart::Kind::assemble;
  for (const auto& p : parts) part.parts.emplace_back(p);
  return run_engine(reference, candidate, options, false, &part);
}

}  // namespace driftscope
