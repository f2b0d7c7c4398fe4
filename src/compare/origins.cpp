// Origins on the recorded data flow (docs/compare.md §5): which failing pairs introduced their
// error, which inherited it from their inputs and which amplified it; every independent origin
// with how far it reaches; each pair judged against the error its dtype makes by rounding
// (docs/metrics.md "Within or beyond rounding").
#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <queue>
#include <tuple>
#include <unordered_set>

#include "compare/internal.hpp"
#include "compare/report_access.hpp"

namespace driftscope::compare_detail {
namespace {

// docs/metrics.md §7a. Without recorded inputs: c roundings of the coarser dtype, relative to
// the norm. With them: A times the rounding error the inputs brought, plus what the op adds: one
// rounding of its output and one of its own inputs/weights (2u), plus the probabilistic bound
// sqrt(K) u_acc of a K-term sum (Higham & Mary 2019) in the accumulator's precision: float32
// for narrower dtypes (what PyTorch, ONNX Runtime and cuBLAS do), the dtype itself otherwise.
constexpr double kRoundingFactor = 16.0;
constexpr double kFloat32Roundoff = 0x1p-24;
constexpr double kInheritedFactor = 2.0;
// Affine 8-bit tensors: one quantisation step is about 2^-8 of the range.
constexpr double kQuantizedRoundoff = 1.0 / 256.0;

bool failing_status(PairStatus s) { return s == PairStatus::fail || s == PairStatus::silent_failure; }

// A tensor identity, viewing the name of the description or reference it was made from: the
// maps keyed by it live while the report's descriptions do (no name is copied: a million pairs).
using Key = std::tuple<std::string_view, Role, uint16_t, uint32_t>;
Key key_of(const TensorDesc& d) { return {d.name(), d.role, d.role_index, d.occurrence}; }
Key key_of(const TensorRef& r) { return {r.name(), r.role, r.role_index, r.occurrence}; }

// A hash of a whole identity (not the name alone: one name may occur a million times), mixed so
// that its top bits index a directory.
uint64_t identity_hash(const Key& k) {
  uint64_t h = std::hash<std::string_view>{}(std::get<0>(k));
  h ^= (static_cast<uint64_t>(std::get<1>(k)) | static_cast<uint64_t>(std::get<2>(k)) << 8 |
        static_cast<uint64_t>(std::get<3>(k)) << 24) * 0x9e3779b97f4a7c15ULL;
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 29;
  return h;
}

// A compared pair that can carry error: a floating-point value, not an index, shape or mask.
bool carries_values(const PairResult& p) {
  return p.compared && p.ref.kind == TensorKind::value && p.ref.role != Role::parameter;
}

}  // namespace

void describe_dataflow(const TensorInfo& info, TensorDesc& d) {
  if (!dtype_is_float(info.dtype)) d.kind = info.dtype == DType::boolean ? TensorKind::mask : TensorKind::index;
  for (const auto& [k, v] : info.attrs) {
    if (k == kInputsAttr) {
      auto refs = parse_inputs(v);
      if (refs) {
        if (!refs->empty()) detail::ReportAccess::edit(d).inputs = std::move(*refs);
        d.has_inputs = true;
      }
    } else if (k == kKindAttr) {
      if (auto kind = parse_tensor_kind(v)) d.kind = *kind;
    } else if (k == "ds.source") {
      if (!v.empty()) detail::ReportAccess::edit(d).source = v;
    } else if (k == "path") {
      if (!v.empty()) detail::ReportAccess::edit(d).path = v;
    }
  }
  // An integer tensor labelled "float" is still exact: its kind follows its dtype.
  if (!dtype_is_float(info.dtype) && d.kind == TensorKind::value) d.kind = TensorKind::index;
}

double rounding_bound(DType coarser, bool quantized) noexcept {
  double u = quantized ? kQuantizedRoundoff : unit_roundoff(coarser);
  if (u == 0) u = kQuantizedRoundoff;  // an integer candidate of a float reference
  return kRoundingFactor * u;
}

namespace {
// rounding_bound() is c * u with c a power of two: the unit roundoff back, exactly.
double roundoff_of(const PairResult& p) { return p.rounding / kRoundingFactor; }

uint64_t last_dim(const TensorDesc& d) { return d.shape().empty() ? 1 : std::max<uint64_t>(d.shape().back(), 1); }
}  // namespace

double dataflow_rounding_bound(double u, uint64_t contracted, double inherited_error) noexcept {
  double u_acc = std::min(u, kFloat32Roundoff);
  return kInheritedFactor * inherited_error + 2.0 * u + std::sqrt(static_cast<double>(contracted)) * u_acc;
}

void rounding_r64_limit(PairResult& p, double floor_factor, uint64_t contracted, double inherited) {
  if (!std::isfinite(p.r64_limit())) return;  // non-finite float32 values: the health checks judge
  detail::ReportAccess::edit(p).r64_limit = p.r64_k() * p.r64_err_ref() +
                floor_factor * p.r64_rms() * dataflow_rounding_bound(p.r64_u(), contracted, inherited);
  auto& reasons = detail::ReportAccess::reasons(p);
  auto it = std::find_if(reasons.begin(), reasons.end(), [](const Reason& r) { return r.code() == "reference64"; });
  if (it == reasons.end()) return;  // the limit only grew: a pass stays a pass
  if (p.r64_err_cand() <= p.r64_limit()) {
    std::vector<Reason> rest(reasons.begin(), reasons.end());
    rest.erase(rest.begin() + (it - reasons.begin()));
    reasons = std::move(rest);
    if (p.reasons().empty() && p.status == PairStatus::fail) p.status = PairStatus::pass;
  }  // else the reason stays: reason_text() words it from the new limit
}

bool localize_dataflow(Report& rep, const CompareOptions& options, const OutsideLookup& outside) {
  auto& pairs = rep.pairs;
  bool any = false;
  for (const auto& p : pairs) any = any || p.ref.has_inputs;
  if (!any) return false;

  // Identity -> pair index (the first pair of a repeated identity), and identity -> unpaired
  // reference tensor (followed through). An input is nearly always a pair recorded just before
  // the one that names it: the few before `near` (the pair being resolved) are tried first, and
  // a pair found there is the answer when no earlier pair has its identity (`repeat`). Otherwise
  // one array, 16 bytes a pair (a hash of the identity and the pair index) sorted by hash, with a
  // directory of 8 bytes a bucket over its top bits, is searched in the bucket alone. A
  // std::map's nodes took 80 bytes a pair; an array sorted by identity (32 bytes a pair) spent a
  // serial 0.5 s of a million pairs comparing names that share long prefixes ("model.layers.N.
  // block.M.out": memcmp) (issue 30 item 4). Entries of one hash are ordered by identity, then
  // pair index, so equal hashes (equal identities, or a crafted collision) still cost a binary
  // search, never a scan.
  struct Hashed {
    uint64_t hash;
    size_t pair;
  };
  auto hashed_less = [&](const Hashed& a, const Hashed& b) {
    if (a.hash != b.hash) return a.hash < b.hash;
    const Key ka = key_of(pairs[a.pair].ref), kb = key_of(pairs[b.pair].ref);
    if (ka != kb) return ka < kb;
    return a.pair < b.pair;
  };
  std::vector<Hashed> pair_keys(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) pair_keys[i] = {identity_hash(key_of(pairs[i].ref)), i};
  std::sort(pair_keys.begin(), pair_keys.end(), hashed_less);
  std::vector<char> repeat(pairs.size(), 0);  // an earlier pair has its identity
  for (size_t at = 1; at < pair_keys.size(); ++at)
    if (pair_keys[at].hash == pair_keys[at - 1].hash &&
        key_of(pairs[pair_keys[at].pair].ref) == key_of(pairs[pair_keys[at - 1].pair].ref))
      repeat[pair_keys[at].pair] = 1;
  const int dir_bits = static_cast<int>(std::bit_width(pairs.size()));  // about one entry a bucket
  auto bucket_of = [&](uint64_t h) { return dir_bits == 0 ? size_t{0} : static_cast<size_t>(h >> (64 - dir_bits)); };
  std::vector<size_t> directory((size_t{1} << dir_bits) + 1, pairs.size());
  for (size_t at = pair_keys.size(); at-- > 0;) directory[bucket_of(pair_keys[at].hash)] = at;
  for (size_t bucket = directory.size() - 1; bucket-- > 0;)
    directory[bucket] = std::min(directory[bucket], directory[bucket + 1]);
  size_t near = 0;
  auto pair_of = [&](const Key& k) -> std::optional<size_t> {
    constexpr size_t kNear = 4;
    for (size_t j = near; j > 0 && near - j < kNear; --j)
      if (!repeat[j - 1] && key_of(pairs[j - 1].ref) == k) return j - 1;
    const uint64_t h = identity_hash(k);
    const size_t bucket = bucket_of(h);
    auto it = std::lower_bound(pair_keys.begin() + static_cast<std::ptrdiff_t>(directory[bucket]),
                               pair_keys.begin() + static_cast<std::ptrdiff_t>(directory[bucket + 1]), h,
                               [&](const Hashed& e, uint64_t) {
                                 return e.hash != h ? e.hash < h : key_of(pairs[e.pair].ref) < k;
                               });
    if (it == pair_keys.end() || it->hash != h || key_of(pairs[it->pair].ref) != k) return std::nullopt;
    return it->pair;
  };
  std::map<Key, const TensorDesc*> unpaired;
  for (const auto& d : rep.only_in_reference) unpaired.emplace(key_of(d), &d);
  std::map<std::string_view, std::vector<size_t>> params;  // (views of the pairs' names)
  for (size_t i = 0; i < pairs.size(); ++i)
    if (pairs[i].compared && pairs[i].ref.role == Role::parameter) params[pairs[i].ref.name()].push_back(i);

  // The compared value pairs a tensor was computed from: recorded inputs, followed through
  // tensors that were not compared (unpaired, skipped, incomparable, or outside the comparison:
  // filtered out) to what they came from, at most kMaxFollow steps deep. Exec indexes strictly
  // decrease along the way, so the walk ends; what a followed tensor stands for is memoised, so
  // a crafted file whose tensors each name the same two earlier ones stays linear, not 2^depth.
  // A followed tensor is a hub when many name it (or one names it many times): its list is kept
  // sorted and unique, appended at most once per collection, and the collection is compacted as
  // it grows, so no list outgrows the distinct pairs it holds (issue 23 §5: lists of every
  // repeat, kept at that capacity after deduplication, took 2.1 GB for 8.4 MB of dumps).
  constexpr int kMaxFollow = 64;
  struct Collect {
    detail::InlineVector<size_t, 2> items;
    std::unordered_set<const void*> followed;  // memoised lists already appended
    size_t unique_at = 0;                      // items.size() after the last compaction
    void compact() {
      std::sort(items.begin(), items.end());
      items.erase(std::unique(items.begin(), items.end()), items.end());
      unique_at = items.size();
    }
    void add(size_t j) {
      items.push_back(j);
      if (items.size() > 2 * unique_at + 64) compact();
    }
  };
  std::map<const TensorDesc*, std::vector<size_t>> through;
  std::function<void(const TensorDesc&, Collect&, int)> resolve;
  auto follow = [&](const TensorDesc& t, Collect& out, int depth) {
    auto memo = through.find(&t);
    if (memo == through.end()) {
      Collect got;
      resolve(t, got, depth + 1);
      got.compact();
      memo = through.emplace(&t, std::vector<size_t>(got.items.begin(), got.items.end())).first;
    }
    if (!out.followed.insert(&memo->second).second) return;
    for (size_t j : memo->second) out.add(j);
  };
  resolve = [&](const TensorDesc& d, Collect& out, int depth) {
    if (depth > kMaxFollow) return;
    for (const TensorRef& r : d.inputs()) {
      Key k = key_of(r);
      if (auto at = pair_of(k)) {
        const PairResult& q = pairs[*at];
        if (q.ref.exec_index >= d.exec_index) continue;  // not computed before it: ignore
        if (q.ref.kind != TensorKind::value) continue;    // exact by construction
        if (q.compared) out.add(*at);
        else if (q.ref.has_inputs) follow(q.ref, out, depth);
      } else if (auto u = unpaired.find(k); u != unpaired.end()) {
        if (u->second->exec_index < d.exec_index && u->second->kind == TensorKind::value)
          follow(*u->second, out, depth);
      } else if (const TensorDesc* o = outside ? outside(r) : nullptr) {
        if (o->exec_index < d.exec_index && o->kind == TensorKind::value && o->has_inputs) follow(*o, out, depth);
      }
    }
  };

  std::vector<char> tainted(pairs.size(), 0);  // an origin, or downstream of one
  std::vector<char> in_flow(pairs.size(), 0);  // its basis_pairs are its inputs on the data flow
  for (size_t i = 0; i < pairs.size(); ++i) {
    PairResult& p = pairs[i];
    if (!p.compared) continue;
    if (auto it = params.find(p.ref.name()); it != params.end() && p.ref.role != Role::parameter &&
                                           !(it->second.empty() && p.parameter_pairs().empty()))
      detail::ReportAccess::edit(p).parameter_pairs = it->second;
    detail::ReportAccess::basis_pairs(p).clear();
    p.input_error = 0;
    p.origin = Origin::none;
    if (p.ref.role == Role::parameter || !p.ref.has_inputs) {
      detail::ReportAccess::basis(p) = "none";  // parameters and tensors without ds.inputs: nothing recorded before them
    } else {
      detail::ReportAccess::basis(p) = "dataflow";
      Collect got;
      near = i;
      resolve(p.ref, got, 0);
      got.compact();
      detail::ReportAccess::basis_pairs(p) = got.items;  // a copy at its size: no capacity left over from the duplicates
      in_flow[i] = 1;
      for (size_t j : p.basis_pairs()) p.input_error = std::max(p.input_error, pairs[j].error);
      // The contracted size: the longest last axis among the inputs (the reduction axis of a
      // Linear, matmul, LayerNorm or softmax); the rounding error they bring: the largest
      // relative error of an input that is itself within rounding (a fault upstream is no excuse).
      uint64_t k = last_dim(p.ref);
      double inherited = 0;
      for (size_t j : p.basis_pairs()) {
        k = std::max(k, last_dim(pairs[j].ref));
        if (!pairs[j].beyond_rounding && std::isfinite(pairs[j].error)) inherited = std::max(inherited, pairs[j].error);
      }
      p.rounding = dataflow_rounding_bound(roundoff_of(p), k, inherited);
      if (p.r64 && p.r64_u() > 0) {
        // The same model against the exact values: the inputs' errors against float64.
        double inherited64 = 0;
        for (size_t j : p.basis_pairs()) {
          const PairResult& q = pairs[j];
          if (q.r64 && !q.beyond_rounding && q.r64_rms() > 0 && std::isfinite(q.r64_err_cand()))
            inherited64 = std::max(inherited64, q.r64_err_cand() / q.r64_rms());
        }
        rounding_r64_limit(p, options.policy.r64_floor.value_or(kDefaultR64Floor), k, inherited64);
      }
    }
    p.beyond_rounding = p.r64 ? p.r64_err_cand() > p.r64_limit() : p.error > p.rounding;
    // An input carries error when it fails beyond rounding: within tolerance, or within what its
    // dtype makes anyway, it brought nothing to blame. Downstream of an origin means some input
    // is an origin or downstream of one.
    bool inputs_carry = false, inputs_fail = false, downstream = false;
    for (size_t j : p.basis_pairs()) {
      inputs_carry = inputs_carry || (failing_status(pairs[j].status) && pairs[j].beyond_rounding);
      inputs_fail = inputs_fail || failing_status(pairs[j].status);
      downstream = downstream || tainted[j];
    }
    // Never an infinite factor: exact inputs (0) or NaN/Inf on either side leave it undefined.
    p.amplification = (p.input_error > 0 && std::isfinite(p.input_error) && std::isfinite(p.error))
                          ? p.error / p.input_error
                          : std::nan("");
    if (failing_status(p.status)) {
      if (!carries_values(p)) {
        p.origin = Origin::introduced;  // parameters; an index/shape/mask tensor is exact: born here
      } else if (p.input_error == 0 || (!std::isfinite(p.error) && std::isfinite(p.input_error))) {
        p.origin = Origin::introduced;  // from exact inputs (or none), or new NaN/Inf
      } else if (p.amplification >= options.amplification_threshold) {
        p.origin = inputs_carry ? Origin::amplified : Origin::introduced;
      } else if (downstream || inputs_carry || (inputs_fail && !p.beyond_rounding)) {
        p.origin = Origin::inherited;   // the error its inputs brought, grown by less than the threshold
      } else {  // or its inputs fail by rounding only and it is beyond: this op made the excess
        p.origin = Origin::introduced;  // error accumulated below tolerance first fails here
      }
    }
    tainted[i] = downstream || (failing_status(p.status) && carries_values(p) && p.beyond_rounding &&
                                (p.origin == Origin::introduced || p.origin == Origin::amplified));
  }

  // Every origin: failing value pairs beyond rounding that introduced or amplified their error.
  rep.origins.clear();
  for (size_t i = 0; i < pairs.size(); ++i) {
    const PairResult& p = pairs[i];
    if (!failing_status(p.status) || !carries_values(p) || !p.beyond_rounding) continue;
    if (p.origin != Origin::introduced && p.origin != Origin::amplified) continue;
    OriginPoint o;
    o.pair = i;
    o.origin = p.origin;
    o.factor = p.amplification;
    for (size_t j : p.parameter_pairs())
      o.parameters_differ = o.parameters_differ || failing_status(pairs[j].status) || pairs[j].beyond_rounding;
    rep.origins.push_back(o);
  }
  // Reach: descendants along the data flow, 64 origins per pass (one bit each). A pass visits
  // only what its origins reach, smallest index first (a min-heap): inputs precede, so a pair's
  // bits are complete when it is popped (as in a sweep over every pair in order, which cost
  // pairs x origins / 64: 160k independent origins took 25.8 s, issue 23 §4). A child at a
  // lower index than its parent (files whose exec order disagrees with pair order) takes the
  // bits but passes them on no further, as that sweep did.
  // The children of pair j (the pairs whose inputs include it, ascending) are
  // child_list[child_begin[j] .. child_begin[j + 1]): two arrays where a vector per pair took 56
  // bytes a pair with the allocator's (issue 30 item 4).
  std::vector<size_t> child_begin(pairs.size() + 1, 0);
  for (size_t i = 0; i < pairs.size(); ++i)
    if (in_flow[i])
      for (size_t j : pairs[i].basis_pairs()) ++child_begin[j + 1];
  for (size_t j = 0; j < pairs.size(); ++j) child_begin[j + 1] += child_begin[j];
  std::vector<size_t> child_list(child_begin.back());
  for (size_t i = 0; i < pairs.size(); ++i)  // child_begin[j] is j's cursor, then j + 1's start
    if (in_flow[i])
      for (size_t j : pairs[i].basis_pairs()) child_list[child_begin[j]++] = i;
  for (size_t j = pairs.size(); j > 0; --j) child_begin[j] = child_begin[j - 1];
  child_begin[0] = 0;
  in_flow = {};
  std::vector<uint64_t> bits(pairs.size(), 0);
  std::vector<size_t> touched;
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> next;
  for (size_t base = 0; base < rep.origins.size(); base += 64) {
    size_t n = std::min<size_t>(64, rep.origins.size() - base);
    for (size_t k = 0; k < n; ++k) {
      size_t i = rep.origins[base + k].pair;
      if (!bits[i]) touched.push_back(i), next.push(i);
      bits[i] |= uint64_t{1} << k;
    }
    while (!next.empty()) {  // each pair is pushed once a pass: when its bits leave zero
      size_t i = next.top();
      next.pop();
      for (size_t k = child_begin[i]; k < child_begin[i + 1]; ++k) {
        const size_t c = child_list[k];
        if (!bits[c]) {
          touched.push_back(c);
          if (c > i) next.push(c);
        }
        bits[c] |= bits[i];
      }
    }
    for (size_t i : touched) {
      for (uint64_t b = bits[i]; b; b &= b - 1) {
        OriginPoint& o = rep.origins[base + static_cast<size_t>(std::countr_zero(b))];
        if (i == o.pair) continue;
        ++o.reach;
        o.reach_failing += failing_status(pairs[i].status);
      }
      bits[i] = 0;
    }
    touched.clear();
  }
  return true;
}

void mark_finer_grained(Report& rep) {
  rep.finer_in_candidate.clear();
  std::map<Key, size_t> only;
  for (size_t i = 0; i < rep.only_in_candidate.size(); ++i) only.emplace(key_of(rep.only_in_candidate[i]), i);
  if (only.empty()) return;
  std::vector<char> seen(rep.only_in_candidate.size(), 0);
  std::vector<size_t> stack;
  auto visit = [&](const TensorDesc& d) {
    for (const TensorRef& r : d.inputs())
      if (auto it = only.find(key_of(r)); it != only.end() && !seen[it->second]) {
        seen[it->second] = 1;
        stack.push_back(it->second);
      }
  };
  for (const auto& p : rep.pairs) visit(p.cand);
  while (!stack.empty()) {  // each unpaired tensor is pushed once: linear in the references
    size_t i = stack.back();
    stack.pop_back();
    visit(rep.only_in_candidate[i]);
  }
  for (size_t i = 0; i < seen.size(); ++i)
    if (seen[i]) rep.finer_in_candidate.push_back(i);
}

void list_origins_by_order(Report& rep) {
  auto& pairs = rep.pairs;
  rep.origins.clear();
  for (size_t i = 0; i < pairs.size(); ++i) {
    PairResult& p = pairs[i];
    if (!p.compared) continue;
    p.beyond_rounding = p.r64 ? p.r64_err_cand() > p.r64_limit() : p.error > p.rounding;
    if (p.origin == Origin::introduced && p.ref.role != Role::parameter && p.ref.kind == TensorKind::value &&
        p.beyond_rounding) {
      OriginPoint o;
      o.pair = i;
      o.factor = p.amplification;
      rep.origins.push_back(o);
    } else if (failing_status(p.status) && !rep.origins.empty() && i > rep.origins.back().pair) {
      ++rep.origins.back().reach;
      ++rep.origins.back().reach_failing;
    }
  }
}

}  // namespace driftscope::compare_detail
