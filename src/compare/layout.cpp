// Layout diagnosis (docs/axes.md "Layout diagnosis"): when a pair fails, or only its shapes
// disagree, is the candidate the reference under a layout mistake? Every hypothesis is a map from
// a reference element to the candidate element that should hold it. Each is scored on a fixed
// sample of the reference (cosine and relative L2 in float64); the best few are confirmed on every
// element; the first that fits is reported with what it cost.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/thread_pool.hpp"
#include "judge/axes_checks.hpp"
#include "compare/internal.hpp"
#include "driftscope/dumpset.hpp"
#include "driftscope/decode.hpp"
#include "format/record_table.hpp"
#include "compare/report_access.hpp"

namespace driftscope {

std::string LayoutDiagnosis::to_string() const {
  std::string cost = fmt::format("{} hypotheses tested on {} sampled elements, {} element reads to confirm",
                                 hypotheses_tested, sample_elements, elements_confirmed);
  if (hypothesis == "none") return fmt::format("no layout hypothesis fits ({})", cost);
  return fmt::format("{}, cosine {:.4f} ({})", description, cosine, cost);
}

namespace compare_detail {
namespace {

enum class Kind { permutation, block, reversed, shifted };

struct Hypothesis {
  Kind kind = Kind::permutation;
  std::vector<uint32_t> perm;    // candidate axis k holds reference axis perm[k]
  std::vector<uint64_t> pshape;  // the candidate's memory read as this shape (reference dims permuted)
  uint32_t axis = 0;
  uint64_t blocks = 0, block = 0;
  std::vector<uint64_t> where;   // block: candidate block holding reference block p
  int64_t shift = 0;
};

struct Score {
  double cosine = 0, rel_l2 = HUGE_VAL;
};

// Cosine and relative L2 (docs/metrics.md) over the positions finite on both sides.
class Accumulator {
 public:
  void add(double a, double b) {
    if (!std::isfinite(a) || !std::isfinite(b)) return;
    ab_ += a * b;
    aa_ += a * a;
    bb_ += b * b;
    dd_ += (b - a) * (b - a);
  }
  Score score() const {
    Score s;
    if (aa_ == 0 && bb_ == 0) s.cosine = 1;
    else if (aa_ == 0 || bb_ == 0) s.cosine = 0;
    else s.cosine = ab_ / std::sqrt(aa_ * bb_);
    s.rel_l2 = aa_ > 0 ? std::sqrt(dd_ / aa_) : (dd_ == 0 ? 0.0 : HUGE_VAL);
    return s;
  }

 private:
  double ab_ = 0, aa_ = 0, bb_ = 0, dd_ = 0;
};

// Maps reference flat indexes to candidate flat indexes under one hypothesis.
class Mapper {
 public:
  Mapper(const std::vector<uint64_t>& shape, const Hypothesis& h) : shape_(shape), h_(h), coords_(shape.size()) {
    strides_.assign(shape.size(), 1);
    for (size_t i = shape.size(); i-- > 1;) strides_[i - 1] = strides_[i] * shape[i];
    if (h.kind == Kind::permutation) {
      pstrides_.assign(h.pshape.size(), 1);
      for (size_t i = h.pshape.size(); i-- > 1;) pstrides_[i - 1] = pstrides_[i] * h.pshape[i];
    }
  }
  uint64_t operator()(uint64_t flat) {
    for (size_t i = shape_.size(); i-- > 0;) {
      coords_[i] = flat % shape_[i];
      flat /= shape_[i];
    }
    uint64_t out = 0;
    switch (h_.kind) {
      case Kind::permutation:
        for (size_t k = 0; k < h_.perm.size(); ++k) out += coords_[h_.perm[k]] * pstrides_[k];
        return out;
      case Kind::block: {
        uint64_t& x = coords_[h_.axis];
        x = h_.where[x / h_.block] * h_.block + x % h_.block;
        break;
      }
      case Kind::reversed: coords_[h_.axis] = shape_[h_.axis] - 1 - coords_[h_.axis]; break;
      case Kind::shifted: {
        const int64_t n = static_cast<int64_t>(shape_[h_.axis]);
        coords_[h_.axis] = static_cast<uint64_t>(((static_cast<int64_t>(coords_[h_.axis]) + h_.shift) % n + n) % n);
        break;
      }
    }
    for (size_t i = 0; i < shape_.size(); ++i) out += coords_[i] * strides_[i];
    return out;
  }

 private:
  const std::vector<uint64_t>& shape_;
  const Hypothesis& h_;
  std::vector<uint64_t> coords_, strides_, pstrides_;
};

constexpr uint64_t kSample = 4096;     // reference elements each hypothesis is scored on
constexpr size_t kConfirm = 4;         // best hypotheses confirmed on the whole tensor
constexpr double kFitCosine = 0.999;   // a fitting hypothesis explains the candidate this well...
constexpr double kFitGain = 0.5;       // ...and at most halves the error of the layout as recorded
constexpr uint64_t kMaxBlocks = 64;    // block splits tried: 2 .. 64 blocks per axis
constexpr size_t kMaxPermRank = 6;     // every permutation up to this rank (720), swaps above

// Deterministic, spread over the whole tensor: stride N/S with a golden-ratio jitter inside it.
std::vector<uint64_t> sample_indexes(uint64_t n) {
  std::vector<uint64_t> s;
  if (n <= kSample) {
    s.resize(n);
    std::iota(s.begin(), s.end(), uint64_t{0});
    return s;
  }
  const uint64_t step = n / kSample;
  for (uint64_t k = 0; k < kSample; ++k) s.push_back(k * step + (k * 0x9E3779B97F4A7C15ull >> 40) % step);
  return s;
}

Score score(const LayoutInput& in, const Hypothesis& h, const std::vector<uint64_t>& idx) {
  Mapper map(in.ref_shape, h);
  Accumulator acc;
  for (uint64_t i : idx) acc.add(in.ref[i], in.cand[map(i)]);
  return acc.score();
}

Score score_all(const LayoutInput& in, const Hypothesis& h) {
  Mapper map(in.ref_shape, h);
  Accumulator acc;
  for (uint64_t i = 0; i < in.ref.size(); ++i) acc.add(in.ref[i], in.cand[map(i)]);
  return acc.score();
}

// Candidate permutations: every one (rank <= kMaxPermRank) or every swap, keeping one per distinct
// order of the axes longer than 1 (moving size-1 axes changes no element's place).
std::vector<Hypothesis> permutations(const std::vector<uint64_t>& shape) {
  std::vector<Hypothesis> out;
  const size_t r = shape.size();
  if (r < 2) return out;
  auto add = [&](const std::vector<uint32_t>& p, std::vector<std::vector<uint32_t>>& seen) {
    std::vector<uint32_t> key;
    for (uint32_t a : p)
      if (shape[a] > 1) key.push_back(a);
    if (std::is_sorted(key.begin(), key.end())) return;  // the identity in memory
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) return;
    seen.push_back(key);
    // The canonical member of its class: size-1 axes stay where they are.
    Hypothesis h;
    h.perm.resize(r);
    size_t next = 0;
    for (uint32_t i = 0; i < r; ++i) h.perm[i] = shape[i] > 1 ? key[next++] : i;
    for (uint32_t a : h.perm) h.pshape.push_back(shape[a]);
    out.push_back(std::move(h));
  };
  std::vector<std::vector<uint32_t>> seen;
  std::vector<uint32_t> p(r);
  std::iota(p.begin(), p.end(), 0u);
  if (r <= kMaxPermRank) {
    // Swaps first: the simplest explanation wins a tie.
    for (size_t i = 0; i < r; ++i)
      for (size_t j = i + 1; j < r; ++j) {
        auto q = p;
        std::swap(q[i], q[j]);
        add(q, seen);
      }
    while (std::next_permutation(p.begin(), p.end())) add(p, seen);
  } else {
    for (size_t i = 0; i < r; ++i)
      for (size_t j = i + 1; j < r; ++j) {
        auto q = p;
        std::swap(q[i], q[j]);
        add(q, seen);
      }
  }
  return out;
}

// Block splits of one axis: the declared head count first, then every divisor up to kMaxBlocks.
std::vector<uint64_t> block_counts(uint64_t n, uint64_t heads) {
  std::vector<uint64_t> out;
  if (heads >= 2 && heads <= n && n % heads == 0) out.push_back(heads);
  for (uint64_t k = 2; k <= std::min(n, kMaxBlocks); ++k)
    if (n % k == 0 && k != heads) out.push_back(k);
  return out;
}

// Which candidate block holds each reference block, by the best cosine over a sample of the other
// axes; empty unless that is a permutation other than the identity.
std::vector<uint64_t> match_blocks(const LayoutInput& in, uint32_t axis, uint64_t k) {
  const auto& s = in.ref_shape;
  const uint64_t n = s[axis], m = n / k;
  uint64_t outer = 1, inner = 1;
  for (uint32_t i = 0; i < axis; ++i) outer *= s[i];
  for (size_t i = axis + 1; i < s.size(); ++i) inner *= s[i];
  const uint64_t rows = outer * inner;
  const uint64_t nrow = std::min<uint64_t>(rows, 32), nj = std::min<uint64_t>(m, 8);
  std::vector<uint64_t> where(k);
  std::vector<bool> used(k, false);
  for (uint64_t p = 0; p < k; ++p) {
    double best = -2;
    for (uint64_t q = 0; q < k; ++q) {
      Accumulator acc;
      for (uint64_t r = 0; r < nrow; ++r) {
        const uint64_t row = r * rows / nrow, o = row / inner, t = row % inner;
        for (uint64_t jj = 0; jj < nj; ++jj) {
          const uint64_t j = jj * m / nj;
          acc.add(in.ref[(o * n + p * m + j) * inner + t], in.cand[(o * n + q * m + j) * inner + t]);
        }
      }
      double c = acc.score().cosine;
      if (c > best) {
        best = c;
        where[p] = q;
      }
    }
    if (used[where[p]]) return {};
    used[where[p]] = true;
  }
  for (uint64_t p = 0; p < k; ++p)
    if (where[p] != p) return where;
  return {};
}

std::string axis_label(const LayoutInput& in, uint32_t a) {
  if (a < in.ref_axes.size()) return fmt::format("axis {} ({})", a, in.ref_axes[a]);
  return fmt::format("axis {}", a);
}

std::string names_of(const std::vector<uint32_t>& order, const std::vector<std::string>& axes) {
  std::vector<std::string> v;
  for (uint32_t a : order) v.push_back(a < axes.size() ? axes[a] : std::to_string(a));
  return "[" + fmt::format("{}", fmt::join(v, ",")) + "]";
}

// Conventional names for a 4-d move of the channel axis, and a [b,h,s,d] <-> [b,s,h,d] swap.
std::string perm_words(const LayoutInput& in, const Hypothesis& h) {
  const auto& p = h.perm;
  std::vector<uint32_t> id(p.size());
  std::iota(id.begin(), id.end(), 0u);
  std::vector<size_t> moved;
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != i) moved.push_back(i);
  std::string what;
  if (p == std::vector<uint32_t>{0, 2, 3, 1}) what = "NCHW read as NHWC: channels moved last";
  else if (p == std::vector<uint32_t>{0, 3, 1, 2}) what = "NHWC read as NCHW: channels moved first";
  else if (moved.size() == 2)
    what = fmt::format("{} and {} transposed", axis_label(in, static_cast<uint32_t>(moved[0])),
                       axis_label(in, static_cast<uint32_t>(moved[1])));
  else what = fmt::format("axes permuted to ({})", fmt::join(p, ","));
  if (p.size() == 4 && moved == std::vector<size_t>{1, 2})
    what += in.ref_axes.size() == 4 ? fmt::format(" ({} <-> {})", names_of(id, in.ref_axes), names_of(p, in.ref_axes))
                                    : " ([b,h,s,d] <-> [b,s,h,d])";
  return what;
}

std::string describe(const LayoutInput& in, const Hypothesis& h, bool view) {
  switch (h.kind) {
    case Kind::permutation:
      if (view)
        return fmt::format("candidate = reference with {}, stored under the shape {} (a reshape or view where a "
                           "transpose was meant)", perm_words(in, h), fmt_shape(in.cand_shape));
      return fmt::format("candidate = reference with {}", perm_words(in, h));
    case Kind::block: {
      std::vector<uint64_t> moved;
      for (uint64_t q = 0; q < h.blocks; ++q)
        if (h.where[q] != q) moved.push_back(q);
      const bool heads = in.num_heads == h.blocks ||
                         (h.axis < in.ref_axes.size() &&
                          (in.ref_axes[h.axis].find("head") != std::string::npos ||
                           in.ref_axes[h.axis] == "hidden" || in.ref_axes[h.axis] == "embed"));
      const char* what = heads ? "heads" : "blocks";
      std::string split = fmt::format("{}x{} split", h.blocks, h.block);
      if (heads && in.num_heads == h.blocks && !in.heads_from.empty())
        split += fmt::format("; head count {} from {}", h.blocks, in.heads_from);
      if (moved.size() == 2)
        return fmt::format("candidate = reference with {} {} and {} exchanged along {} ({})", what, moved[0],
                           moved[1], axis_label(in, h.axis), split);
      std::vector<uint64_t> order(h.blocks);
      for (uint64_t p = 0; p < h.blocks; ++p) order[h.where[p]] = p;
      return fmt::format("candidate = reference with {} permuted along {} ({}): candidate {} hold reference {} ({})",
                         what, axis_label(in, h.axis), split, what, what, fmt::join(order, ","));
    }
    case Kind::reversed: return fmt::format("candidate = reference reversed along {}", axis_label(in, h.axis));
    case Kind::shifted:
      return fmt::format("candidate = reference shifted by {} along {} (cyclically)", h.shift, axis_label(in, h.axis));
  }
  return "";
}

}  // namespace

LayoutDiagnosis diagnose_layout(const LayoutInput& in) {
  LayoutDiagnosis d;
  const uint64_t n = in.ref.size();
  if (n < 2 || in.cand.size() != n) return d;
  const auto& shape = in.ref_shape;

  std::vector<Hypothesis> hs = permutations(shape);
  uint64_t splits = 0;  // block splits tried; the matcher turns each into at most one hypothesis
  for (uint32_t a = 0; a < shape.size(); ++a) {
    if (shape[a] < 2) continue;
    Hypothesis r;
    r.kind = Kind::reversed;
    r.axis = a;
    hs.push_back(r);
    std::vector<int64_t> shifts;
    const int64_t len = static_cast<int64_t>(shape[a]);
    for (int64_t s : {1, 2, 3, -1, -2, -3}) {
      int64_t v = ((s % len) + len) % len;
      if (v != 0 && std::find(shifts.begin(), shifts.end(), v) == shifts.end()) shifts.push_back(v);
    }
    for (int64_t s : shifts) {
      Hypothesis h;
      h.kind = Kind::shifted;
      h.axis = a;
      h.shift = s > len / 2 ? s - len : s;
      hs.push_back(h);
    }
  }
  // Block splits last: a reversal or a shift is also a permutation of one-element blocks, and the
  // simpler name wins a tie.
  for (uint32_t a = 0; a < shape.size(); ++a) {
    if (shape[a] < 2) continue;
    for (uint64_t k : block_counts(shape[a], in.num_heads)) {
      ++splits;
      auto where = match_blocks(in, a, k);
      if (where.empty()) continue;
      Hypothesis h;
      h.kind = Kind::block;
      h.axis = a;
      h.blocks = k;
      h.block = shape[a] / k;
      h.where = std::move(where);
      hs.push_back(std::move(h));
    }
  }
  const auto idx = sample_indexes(n);
  d.sample_elements = idx.size();
  d.hypotheses_tested = splits;
  for (const auto& h : hs) d.hypotheses_tested += h.kind != Kind::block;

  // The layout as recorded is the baseline every hypothesis must clearly beat.
  Accumulator base_s;
  for (uint64_t i : idx) base_s.add(in.ref[i], in.cand[i]);
  const Score base_sample = base_s.score();
  Accumulator base_a;
  for (uint64_t i = 0; i < n; ++i) base_a.add(in.ref[i], in.cand[i]);
  const Score base = base_a.score();
  d.elements_confirmed += n;

  // Hypotheses that fit the sample; those within 5% of the best error count as tied and keep the
  // order above (simplest first), so float rounding never picks a contrived explanation.
  std::vector<std::pair<Score, size_t>> fit;
  for (size_t i = 0; i < hs.size(); ++i) {
    Score s = score(in, hs[i], idx);
    if (s.cosine >= kFitCosine - 0.009 && s.rel_l2 <= kFitGain * base_sample.rel_l2) fit.push_back({s, i});
  }
  double best = HUGE_VAL;
  for (const auto& f : fit) best = std::min(best, f.first.rel_l2);
  std::vector<std::pair<Score, size_t>> ranked, rest;
  for (const auto& f : fit) (f.first.rel_l2 <= best * 1.05 + 1e-12 ? ranked : rest).push_back(f);
  std::stable_sort(rest.begin(), rest.end(),
                   [](const auto& a, const auto& b) { return a.first.rel_l2 < b.first.rel_l2; });
  ranked.insert(ranked.end(), rest.begin(), rest.end());
  if (ranked.size() > kConfirm) ranked.resize(kConfirm);
  for (const auto& [sample_score, i] : ranked) {
    const Hypothesis& h = hs[i];
    Score s = score_all(in, h);
    d.elements_confirmed += n;
    if (!(s.cosine >= kFitCosine && s.rel_l2 <= kFitGain * base.rel_l2)) continue;
    const bool view = h.kind == Kind::permutation && in.cand_shape != h.pshape;
    d.hypothesis = h.kind == Kind::permutation ? (view ? "view_of_permutation" : "permutation")
                   : h.kind == Kind::block      ? "block_permutation"
                   : h.kind == Kind::reversed   ? "reversed"
                                                : "shifted";
    d.description = describe(in, h, view);
    d.permutation = h.perm;
    if (h.kind != Kind::permutation) d.axis = h.axis;
    if (h.kind == Kind::block) {
      d.blocks = h.blocks;
      d.block_size = h.block;
      d.block_order.assign(h.blocks, 0);
      for (uint64_t p = 0; p < h.blocks; ++p) d.block_order[h.where[p]] = p;
    }
    d.shift = h.shift;
    d.cosine = s.cosine;
    d.rel_l2 = s.rel_l2;
    return d;
  }
  return d;
}

namespace {

// The num_heads a recorder declared on either side (docs/axes.md, reserved attribute keys).
uint64_t declared_heads(const TensorInfo& a, const TensorInfo& b) {
  for (const TensorInfo* t : {&a, &b}) {
    std::string_view v;
    for (const auto& [k, val] : t->attrs)
      if (k == "num_heads") v = val;
    uint64_t h = 0;
    for (char c : v) {
      if (c < '0' || c > '9' || h > (uint64_t{1} << 32)) return 0;
      h = h * 10 + static_cast<uint64_t>(c - '0');
    }
    if (h) return h;
  }
  return 0;
}

// The head count read from the propagated axis names (docs/axes.md "Layout diagnosis"): an axis
// named `heads`, an axis whose name joins `heads` with others (`heads*head_dim`), or one that
// axes_from shows merged from `heads,head_dim` (`... heads,head_dim -> ...,hidden`); the size of
// `heads` comes from the record itself, its axes_ops, or another tensor of the comparison.
struct NamedSize {
  uint64_t size = 0;
  std::string where;
};
using SizeMap = std::map<std::string, NamedSize, std::less<>>;

void add_sizes(SizeMap& m, const std::vector<std::string>& names, std::span<const uint64_t> sizes,
               const std::string& where) {
  if (names.size() != sizes.size()) return;
  for (size_t i = 0; i < names.size(); ++i)
    if (!names[i].empty() && names[i] != "?" && sizes[i] > 0) m.try_emplace(axis_base(names[i]), NamedSize{sizes[i], where});
}

// The names of one step of a trail: what follows its last ": ", less a "(declared)" suffix.
std::vector<std::string> step_names(std::string_view step) {
  if (size_t c = step.rfind(": "); c != std::string_view::npos) step.remove_prefix(c + 2);
  if (size_t p = step.find(" ("); p != std::string_view::npos) step = step.substr(0, p);
  return split_on(step, ',');
}

bool merged_from_heads(std::string_view trail, std::string_view name) {
  std::vector<std::string> steps;
  for (size_t at = 0; at <= trail.size();) {
    size_t end = trail.find(" -> ", at);
    if (end == std::string_view::npos) end = trail.size();
    steps.emplace_back(trail.substr(at, end - at));
    at = end + 4;
  }
  for (size_t k = 1; k < steps.size(); ++k) {
    auto x = step_names(steps[k - 1]), y = step_names(steps[k]);
    if (x.size() != y.size() + 1) continue;
    for (size_t j = 0; j < y.size(); ++j)
      if (x[j] == "heads" && x[j + 1] == "head_dim" && y[j] == name && std::equal(y.begin(), y.begin() + j, x.begin()) &&
          std::equal(y.begin() + j + 1, y.end(), x.begin() + j + 2))
        return true;
  }
  return false;
}

struct NamedHeads {
  uint64_t count = 0;
  std::string from;
};

NamedHeads heads_from_names(const TensorInfo& t, const SizeMap& report_sizes) {
  if (t.axes.size() != t.shape.size()) return {};
  SizeMap own;  // the record's own facts first
  add_sizes(own, t.axes, t.shape, "the tensor itself");
  for (const auto& line : split_on(attr_value(t, "axes_ops"), '\n'))
    if (auto e = parse_axes_event(line)) {
      add_sizes(own, e->names, e->sizes, "its axes_ops (" + e->op + ")");
      add_sizes(own, e->names2, e->sizes2, "its axes_ops (" + e->op + ")");
    }
  auto size_of = [&](std::string_view n) -> const NamedSize* {
    if (auto it = own.find(n); it != own.end()) return &it->second;
    if (auto it = report_sizes.find(n); it != report_sizes.end()) return &it->second;
    return nullptr;
  };
  std::string_view trail = attr_value(t, "axes_from");
  for (size_t a = 0; a < t.axes.size(); ++a) {
    const std::string base = axis_base(t.axes[a]);
    const uint64_t n = t.shape[a];
    NamedHeads h;
    if (base == "heads") {
      h = {n, fmt::format("the axis names: axis {} is heads", a)};
    } else if (auto parts = split_on(base, '*'); parts.size() > 1 &&
               std::find(parts.begin(), parts.end(), "heads") != parts.end()) {
      uint64_t c = 1;
      std::vector<std::string> where;
      for (const auto& part : parts) {
        const NamedSize* s = size_of(part);
        if (!s) {
          c = 0;
          break;
        }
        c *= s->size;
        where.push_back(fmt::format("{} = {} in {}", part, s->size, s->where));
        if (part == "heads") break;
      }
      if (c) h = {c, fmt::format("the axis names: axis {} is {} ({})", a, base, fmt::join(where, ", "))};
    } else if (merged_from_heads(trail, base)) {
      if (const NamedSize* s = size_of("heads"))
        h = {s->size, fmt::format("the axis names: axis {} ({}) was merged from heads,head_dim (axes_from), "
                                  "heads = {} in {}", a, base, s->size, s->where)};
    }
    if (h.count >= 2 && h.count <= n && n % h.count == 0) return h;
  }
  return {};
}

Result<std::vector<double>> decoded(const Reader& r, const Record& rec) {
  if (!r.integrity().checksums_verified) DRIFTSCOPE_TRY(r.verify_payload(rec));
  std::vector<double> v(rec.info.numel());
  DRIFTSCOPE_TRY(decode(rec.info, rec.payload, 0, v));
  return v;
}

}  // namespace

// Element count of a described side (its shape was checked when the dump was opened).
static uint64_t numel_of(const TensorDesc& d) {
  uint64_t n = 1;
  for (uint64_t x : d.shape()) n *= x;
  return n;
}

void diagnose_layouts(Report& report, std::span<const PairRecords> records, const Reader& ref,
                      const Reader& cand, const CompareOptions& options) {
  std::vector<size_t> chosen;
  for (size_t i = 0; i < report.pairs.size() && chosen.size() < options.max_layout_diagnoses; ++i) {
    const PairResult& p = report.pairs[i];
    if (p.ref.summary || p.cand.summary) continue;
    const bool first = report.first_divergence == i;
    const bool failed = (p.status == PairStatus::fail || p.status == PairStatus::silent_failure) &&
                        (first || p.origin == Origin::introduced);
    const bool shape_only = p.status == PairStatus::incomparable && !p.reasons().empty() &&
                            p.reasons().front().code() == "reshape_needed";
    if (!failed && !shape_only) continue;
    if (numel_of(p.ref) != numel_of(p.cand)) continue;
    chosen.push_back(i);
  }
  // Axis sizes by name over every tensor of the comparison, for heads_from_names, which reads
  // them only for a tensor with named axes: a million unnamed pairs skip the walk.
  SizeMap sizes;
  const bool any_named = std::any_of(chosen.begin(), chosen.end(), [&](size_t i) {
    return !report.pairs[i].ref.axes().empty() || !report.pairs[i].cand.axes().empty();
  });
  if (any_named) {
    auto add = [&](const TensorDesc& d) {
      if (d.axes().empty()) return;  // (the label below would be a string per tensor)
      add_sizes(sizes, d.axes(), d.shape(),
                "tensor " + fmt_identity(d));
    };
    for (const PairResult& p : report.pairs) add(p.ref), add(p.cand);
    for (const TensorDesc& d : report.only_in_reference) add(d);
    for (const TensorDesc& d : report.only_in_candidate) add(d);
  }
  detail::parallel_for(chosen.size(), [&](size_t k) {
    const size_t i = chosen[k];
    PairResult& p = report.pairs[i];
    const uint64_t n = numel_of(p.ref);
    if (n > options.max_layout_elements) {
      detail::ReportAccess::notes(p).push_back(fmt::format("layout not diagnosed: {} elements exceed the limit of {}", n,
                                    options.max_layout_elements));
      return;
    }
    const Record ra = detail::ReaderAccess::record(ref, records[i].first);
    const Record rb = detail::ReaderAccess::record(cand, records[i].second);
    if (!std::ranges::equal(ra.info.shape, p.ref.shape()) || !std::ranges::equal(rb.info.shape, p.cand.shape())) return;  // the file was cut meanwhile
    auto a = decoded(ref, ra);
    auto b = decoded(cand, rb);
    if (!a || !b) return;  // the pair itself reports unreadable payloads
    LayoutInput in;
    in.ref_shape = ra.info.shape;
    in.cand_shape = rb.info.shape;
    for (const std::string& name : ra.info.axes) in.ref_axes.push_back(axis_base(name));  // dumpsets.md §4
    const uint64_t declared = declared_heads(ra.info, rb.info);
    NamedHeads named = heads_from_names(ra.info, sizes);
    if (!named.count) named = heads_from_names(rb.info, sizes);
    if (named.count) {
      in.num_heads = named.count;
      in.heads_from = named.from;
      if (declared) in.heads_from += declared == named.count ? "; num_heads agrees"
                                                             : fmt::format("; num_heads says {}", declared);
    } else if (declared) {
      in.num_heads = declared;
      in.heads_from = "num_heads";
    }
    std::vector<double> c = std::move(*b);
    if (!p.permutation().empty()) {  // the candidate read through its axis names first
      auto index = detail::permuted_index(ra.info.shape, rb.info.shape, p.permutation());
      std::vector<double> v(n);
      for (uint64_t j = 0; j < n; ++j) v[j] = c[index[j]];
      c = std::move(v);
      in.cand_shape = in.ref_shape;
    }
    in.ref = *a;
    in.cand = c;
    detail::ReportAccess::edit(p).layout = diagnose_layout(in);
  }, options.threads ? options.threads : detail::hardware_threads());
}

}  // namespace compare_detail
}  // namespace driftscope
