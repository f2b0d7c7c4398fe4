// Alignment (docs/compare.md "Alignment"): which reference tensor meets which candidate tensor,
// and how their shapes line up (identical, size-1 axes only, permuted by axis names, reshaped).
#include <algorithm>
#include <regex>
#include <unordered_map>

#include <fmt/format.h>

#include "common/pages.hpp"
#include "compare/internal.hpp"
#include "format/record_table.hpp"
#include "driftscope/dumpset.hpp"
#include "driftscope/filter.hpp"

namespace driftscope::compare_detail {
namespace {

struct CompiledRule {
  std::regex re;
  std::string replacement;
};

Result<std::vector<CompiledRule>> compile(const std::vector<RenameRule>& rules) {
  std::vector<CompiledRule> out;
  for (const auto& r : rules) {
    try {
      out.push_back({std::regex(r.pattern, std::regex::ECMAScript), r.replacement});
    } catch (const std::regex_error& e) {
      return make_error(Errc::invalid_argument,
                        fmt::format("rename rule '{}=>{}': invalid regex: {}", r.pattern,
                                    r.replacement, e.what()));
    }
  }
  return out;
}

std::string rename_with(const std::vector<CompiledRule>& rules, std::string name) {
  for (const auto& r : rules) name = std::regex_replace(name, r.re, r.replacement);
  return name;
}

// A pairing identity: (name after renames, role, role_index, occurrence).
struct Key {
  std::string name;
  uint8_t role = 0;
  uint16_t role_index = 0;
  uint32_t occurrence = 0;
  bool operator==(const Key&) const = default;
  uint64_t hash() const {
    uint64_t h = std::hash<std::string>{}(name);
    h ^= (uint64_t{occurrence} << 24) ^ (uint64_t{role_index} << 8) ^ role;
    h *= 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
  }
};

Key key_of(std::string name, const TensorInfo& i) {
  return {std::move(name), static_cast<uint8_t>(i.role), i.role_index, i.occurrence};
}

// The first of each distinct key, in a flat open-addressing table of (hash, index into `keys`):
// a std::map of a million string keys cost ~150 MB and most of align's time.
class FirstOfKey {
 public:
  FirstOfKey(const std::vector<Key>& keys, size_t expected) : keys_(keys) {
    size_t slots = 16;
    while (slots < 2 * expected) slots *= 2;
    table_.assign(slots, {0, SIZE_MAX});
  }
  // The index of the first key equal to keys_[i] (i itself when it is the first).
  size_t insert(size_t i) {
    const uint64_t h = keys_[i].hash();
    for (size_t s = h & (table_.size() - 1);; s = (s + 1) & (table_.size() - 1)) {
      auto& e = table_[s];
      if (e.second == SIZE_MAX) {
        e = {h, i};
        return i;
      }
      if (e.first == h && keys_[e.second] == keys_[i]) return e.second;
    }
  }
  // The index of the first key equal to `k`, or SIZE_MAX.
  size_t find(const Key& k) const {
    const uint64_t h = k.hash();
    for (size_t s = h & (table_.size() - 1);; s = (s + 1) & (table_.size() - 1)) {
      const auto& e = table_[s];
      if (e.second == SIZE_MAX) return SIZE_MAX;
      if (e.first == h && keys_[e.second] == k) return e.second;
    }
  }

 private:
  const std::vector<Key>& keys_;
  std::vector<std::pair<uint64_t, size_t>> table_;
};

// Record indexes in execution order: readers order by exec_index (docs/format.md §3.3); file
// order breaks ties.
std::vector<size_t> in_exec_order(const Reader& r) {
  std::vector<size_t> out(r.record_count());
  for (size_t i = 0; i < out.size(); ++i) out[i] = i;
  std::vector<uint64_t> exec(out.size());
  for (size_t i = 0; i < out.size(); ++i) exec[i] = detail::ReaderAccess::exec_index(r, i);
  // Files are usually written in execution order already: no sort then.
  if (!std::is_sorted(exec.begin(), exec.end()))
    std::stable_sort(out.begin(), out.end(), [&](size_t a, size_t b) { return exec[a] < exec[b]; });
  return out;
}

std::vector<uint64_t> squeeze(const std::vector<uint64_t>& s) {
  std::vector<uint64_t> out;
  for (uint64_t d : s)
    if (d != 1) out.push_back(d);
  return out;
}

bool unique_names(const std::vector<std::string>& axes) {
  auto sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  return std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
}

std::string axes_text(const std::vector<std::string>& axes) {
  return "(" + join_axes(axes) + ")";
}

std::vector<std::string> base_axes(const std::vector<std::string>& axes) {
  std::vector<std::string> out;
  for (const auto& x : axes) out.push_back(axis_base(x));
  return out;
}

void plan_shapes(PlannedPair& p, const Record& ref, const Record& cand, const CompareOptions& options) {
  const TensorInfo& a = ref.info;
  const TensorInfo& b = cand.info;
  const bool light = ref.kind == RecordKind::summary || cand.kind == RecordKind::summary;
  const uint64_t na = a.numel(), nb = b.numel();
  // Shard annotations (docs/dumpsets.md §4) are not part of an axis's name for alignment.
  const std::vector<std::string> aa = base_axes(a.axes), ba = base_axes(b.axes);

  // Axis names in a different order: permute the candidate into the reference's layout.
  if (!aa.empty() && aa.size() == ba.size() && aa != ba &&
      unique_names(aa) && unique_names(ba) &&
      std::is_permutation(aa.begin(), aa.end(), ba.begin())) {
    std::vector<uint32_t> perm(aa.size());
    for (size_t i = 0; i < aa.size(); ++i)
      perm[i] = static_cast<uint32_t>(std::find(ba.begin(), ba.end(), aa[i]) - ba.begin());
    for (size_t i = 0; i < perm.size(); ++i) {
      if (b.shape[perm[i]] != a.shape[i]) {
        p.incomparable.push_back(
            {"axes", fmt::format("axis '{}' has size {} in the reference but {} in the candidate",
                                 aa[i], a.shape[i], b.shape[perm[i]])});
        return;
      }
    }
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == i;
    if (identity) return;
    if (light) {
      p.incomparable.push_back({"axes", fmt::format("axes {} vs {} need a permutation, which a light-mode "
                                                    "summary cannot undergo", axes_text(aa), axes_text(ba))});
      return;
    }
    if (na > options.max_permuted_elements) {
      p.incomparable.push_back(
          {"permutation_too_large",
           fmt::format("axes {} vs {}: {} elements exceed the permutation limit of {}",
                       axes_text(aa), axes_text(ba), na, options.max_permuted_elements)});
      return;
    }
    p.permutation = std::move(perm);
    return;
  }
  if (a.shape == b.shape) return;
  if (na != nb) {
    p.incomparable.push_back({"shape", fmt::format("shape {} vs {}: {} vs {} elements", fmt_shape(a.shape),
                                                   fmt_shape(b.shape), na, nb)});
    return;
  }
  // Only size-1 axes differ (a scalar vs [1], [1,8] vs [8]): the element order is the same.
  if (squeeze(a.shape) == squeeze(b.shape)) return;
  if (options.reshape) {
    p.reshaped = true;
    return;
  }
  std::string hint;
  auto sa = a.shape, sb = b.shape;
  std::sort(sa.begin(), sa.end());
  std::sort(sb.begin(), sb.end());
  if (sa == sb) hint = "; the shapes are a permutation of each other: record axis names to align them";
  p.incomparable.push_back(
      {"reshape_needed", fmt::format("shape {} vs {}: same {} elements; --reshape compares them in "
                                     "row-major order{}", fmt_shape(a.shape), fmt_shape(b.shape), na, hint)});
}

}  // namespace

struct Renamer::Rules {
  std::vector<CompiledRule> ref, cand;
};

Result<Renamer> Renamer::make(const NameMap& names) {
  Renamer out;
  out.rules_ = std::make_shared<Rules>();
  auto ra = compile(names.reference);
  if (!ra) return std::move(ra).error();
  auto rb = compile(names.candidate);
  if (!rb) return std::move(rb).error();
  out.rules_->ref = std::move(*ra);
  out.rules_->cand = std::move(*rb);
  for (const auto& [r, c] : names.exact) {
    out.exact_cand_to_ref_.emplace(c, r);
    out.exact_ref_.emplace(r, true);
  }
  return out;
}

std::string Renamer::ref(const std::string& name) const {
  return exact_ref_.count(name) ? name : rename_with(rules_->ref, name);
}

std::string Renamer::cand(const std::string& name) const {
  auto it = exact_cand_to_ref_.find(name);
  return it != exact_cand_to_ref_.end() ? it->second : rename_with(rules_->cand, name);
}

PlannedSide planned_side(const Record& r, size_t index) {
  return {index, r.kind, r.info.numel(), r.payload};
}

TensorDesc describe(const Record& r) {
  TensorDesc d;
  d.name = r.info.name;
  d.op_type = r.info.op_type;
  d.role = r.info.role;
  d.role_index = r.info.role_index;
  d.occurrence = r.info.occurrence;
  d.exec_index = r.info.exec_index;
  d.dtype = r.info.dtype;
  d.shape = r.info.shape;
  d.axes = r.info.axes;
  d.summary = r.kind == RecordKind::summary;
  d.quantized = r.info.encoding.kind != EncodingKind::raw;
  describe_dataflow(r.info, d);
  return d;
}

std::vector<uint64_t> unravel(uint64_t flat, const std::vector<uint64_t>& shape) {
  std::vector<uint64_t> c(shape.size(), 0);
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 0) return c;
    c[i] = flat % shape[i];
    flat /= shape[i];
  }
  return c;
}

std::vector<uint64_t> permuted_index(const std::vector<uint64_t>& ref_shape,
                                     const std::vector<uint64_t>& cand_shape,
                                     const std::vector<uint32_t>& permutation) {
  const size_t rank = ref_shape.size();
  std::vector<uint64_t> cand_stride(rank, 1);
  for (size_t i = rank; i-- > 1;) cand_stride[i - 1] = cand_stride[i] * cand_shape[i];
  // Stride, in the candidate, of each reference axis; then walk the reference in row-major order
  // with an odometer, so each step costs O(1) amortised.
  std::vector<uint64_t> step(rank);
  for (size_t i = 0; i < rank; ++i) step[i] = cand_stride[permutation[i]];
  uint64_t n = 1;
  for (uint64_t d : ref_shape) n *= d;
  std::vector<uint64_t> out(n);
  std::vector<uint64_t> coord(rank, 0);
  uint64_t off = 0;
  for (uint64_t i = 0; i < n; ++i) {
    out[i] = off;
    for (size_t ax = rank; ax-- > 0;) {
      if (++coord[ax] < ref_shape[ax]) {
        off += step[ax];
        break;
      }
      off -= step[ax] * (ref_shape[ax] - 1);
      coord[ax] = 0;
    }
  }
  return out;
}

Result<Alignment> align(const Reader& ref, const Reader& cand, const CompareOptions& options,
                        bool release_pages) {
  auto renamer = Renamer::make(options.names);
  if (!renamer) return std::move(renamer).error();
  std::optional<Filter> filter;
  if (!options.filter.empty()) {
    auto f = Filter::parse(options.filter);
    if (!f) return std::move(f).error();
    filter = std::move(*f);
  }
  auto accepted = [&](const Record& r, const std::string& name) {
    if (!filter) return true;
    if (name == r.info.name) return filter->accepts(r.info, r.info.exec_index);
    TensorInfo info = r.info;
    info.name = name;
    return filter->accepts(info, r.info.exec_index);
  };
  // Decoding reads every meta, and with small tensors every page of both files: dropped every
  // 64 Ki records, align's resident set is its tables rather than the two files (a page needed
  // again is read from the file again; nothing read can change).
  size_t decoded = 0;
  auto record = [&](const Reader& r, size_t i) {
    if (release_pages && ++decoded % 65536 == 0) {
      detail::release_pages(ref.bytes());
      detail::release_pages(cand.bytes());
    }
    return detail::ReaderAccess::record(r, i);
  };

  Alignment out;
  // The candidate's accepted records in execution order, with their keys.
  std::vector<size_t> cands;
  std::vector<Key> cand_keys;
  for (size_t i : in_exec_order(cand)) {
    Record r = record(cand, i);
    std::string n = renamer->cand(r.info.name);
    if (!accepted(r, n)) continue;
    cands.push_back(i);
    cand_keys.push_back(key_of(std::move(n), r.info));
  }
  auto add_pair = [&](const Record& a, size_t ai, const Record& b, size_t bi) {
    PlannedPair p;
    p.ref = planned_side(a, ai);
    p.cand = planned_side(b, bi);
    p.renamed = a.info.name != b.info.name;
    plan_shapes(p, a, b, options);
    out.pairs.push_back(std::move(p));
    PairResult& res = out.results.emplace_back();
    res.ref = describe(a);
    res.cand = describe(b);
  };
  const std::vector<size_t> ref_order = in_exec_order(ref);
  const size_t most = std::min(ref_order.size(), cands.size());
  out.pairs.reserve(most);
  out.results.reserve(most);

  if (options.pairing == Pairing::positional) {
    size_t k = 0;
    for (size_t i : ref_order) {
      Record a = record(ref, i);
      if (!accepted(a, renamer->ref(a.info.name))) continue;
      if (k < cands.size()) add_pair(a, i, record(cand, cands[k]), cands[k]);
      else out.only_ref.push_back(describe(a));
      ++k;
    }
    for (; k < cands.size(); ++k) out.only_cand.push_back(describe(record(cand, cands[k])));
    if (release_pages) {
      detail::release_pages(ref.bytes());
      detail::release_pages(cand.bytes());
    }
    return out;
  }

  FirstOfKey by_key(cand_keys, cand_keys.size());  // first record of each identity wins (format.md §3.3)
  for (size_t j = 0; j < cands.size(); ++j) by_key.insert(j);
  std::vector<bool> used(cands.size(), false);
  std::vector<Key> ref_keys;
  FirstOfKey seen_ref(ref_keys, ref_order.size());
  for (size_t i : ref_order) {
    Record a = record(ref, i);
    std::string n = renamer->ref(a.info.name);
    if (!accepted(a, n)) continue;
    ref_keys.push_back(key_of(std::move(n), a.info));
    if (seen_ref.insert(ref_keys.size() - 1) != ref_keys.size() - 1) {
      ref_keys.pop_back();  // a duplicate identity in the reference
      continue;
    }
    const size_t j = by_key.find(ref_keys.back());
    if (j == SIZE_MAX || used[j]) {
      out.only_ref.push_back(describe(a));
      continue;
    }
    used[j] = true;
    add_pair(a, i, record(cand, cands[j]), cands[j]);
  }
  for (size_t j = 0; j < cands.size(); ++j)
    if (!used[j] && by_key.find(cand_keys[j]) == j) out.only_cand.push_back(describe(record(cand, cands[j])));
  if (release_pages) {
    detail::release_pages(ref.bytes());
    detail::release_pages(cand.bytes());
  }
  return out;
}

}  // namespace driftscope::compare_detail
