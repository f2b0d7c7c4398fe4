// Alignment (docs/compare.md "Alignment"): which reference tensor meets which candidate tensor,
// and how their shapes line up (identical, size-1 axes only, permuted by axis names, reshaped).
#include <algorithm>
#include <deque>
#include <functional>
#include <regex>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "compare/internal.hpp"
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

// A tensor identity for pairing (docs/format.md §3.3); the name is a view of a string that
// align() keeps alive. Hashed, not ordered: only lookups are made (an ordered map of a million
// string keys cost ~1 s of comparisons).
struct Key {
  std::string_view name;
  uint8_t role;
  uint16_t role_index;
  uint32_t occurrence;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  size_t operator()(const Key& k) const noexcept {
    uint64_t h = std::hash<std::string_view>{}(k.name);
    const uint64_t rest = (uint64_t{k.role} << 48) ^ (uint64_t{k.role_index} << 32) ^ k.occurrence;
    return static_cast<size_t>(h ^ (rest * 0x9e3779b97f4a7c15ULL));
  }
};

Key key_of(std::string_view name, const TensorInfo& i) {
  return {name, static_cast<uint8_t>(i.role), i.role_index, i.occurrence};
}

std::vector<const Record*> in_exec_order(const Reader& r) {
  std::vector<const Record*> out;
  out.reserve(r.records().size());
  for (const auto& rec : r.records()) out.push_back(&rec);
  // Readers order by exec_index (docs/format.md §3.3); file order breaks ties. Files are
  // usually written in that order already.
  auto by_index = [](const Record* a, const Record* b) { return a->info.exec_index < b->info.exec_index; };
  if (!std::is_sorted(out.begin(), out.end(), by_index)) std::stable_sort(out.begin(), out.end(), by_index);
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

void plan_shapes(PlannedPair& p, const CompareOptions& options) {
  const TensorInfo& a = p.ref->info;
  const TensorInfo& b = p.cand->info;
  const bool light = p.ref->kind == RecordKind::summary || p.cand->kind == RecordKind::summary;
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

Result<Alignment> align(const Reader& ref, const Reader& cand, const CompareOptions& options) {
  auto renamer = Renamer::make(options.names);
  if (!renamer) return std::move(renamer).error();
  std::optional<Filter> filter;
  if (!options.filter.empty()) {
    auto f = Filter::parse(options.filter);
    if (!f) return std::move(f).error();
    filter = std::move(*f);
  }
  // Without any rename rule a name is the record's own: viewed, not copied.
  const bool renames = !options.names.reference.empty() || !options.names.candidate.empty() ||
                       !options.names.exact.empty();
  std::deque<std::string> renamed;  // the new names, at stable addresses
  auto name_of = [&](const Record* r, bool ref_side) -> std::string_view {
    if (!renames) return r->info.name;
    renamed.push_back(ref_side ? renamer->ref(r->info.name) : renamer->cand(r->info.name));
    return renamed.back();
  };
  auto accepted = [&](const Record* r, std::string_view name) {
    if (!filter) return true;
    TensorInfo info = r->info;
    info.name = std::string(name);
    return filter->accepts(info, r->info.exec_index);
  };

  Alignment out;
  std::vector<const Record*> refs, cands;
  std::vector<std::string_view> ref_names, cand_names;
  for (const Record* r : in_exec_order(ref)) {
    std::string_view n = name_of(r, true);
    if (!accepted(r, n)) continue;
    refs.push_back(r);
    ref_names.push_back(n);
  }
  for (const Record* r : in_exec_order(cand)) {
    std::string_view n = name_of(r, false);
    if (!accepted(r, n)) continue;
    cands.push_back(r);
    cand_names.push_back(n);
  }

  if (options.pairing == Pairing::positional) {
    size_t n = std::min(refs.size(), cands.size());
    for (size_t i = 0; i < n; ++i) {
      PlannedPair p;
      p.ref = refs[i];
      p.cand = cands[i];
      p.renamed = refs[i]->info.name != cands[i]->info.name;
      plan_shapes(p, options);
      out.pairs.push_back(std::move(p));
    }
    out.only_ref.assign(refs.begin() + static_cast<ptrdiff_t>(n), refs.end());
    out.only_cand.assign(cands.begin() + static_cast<ptrdiff_t>(n), cands.end());
    return out;
  }

  std::unordered_map<Key, size_t, KeyHash> by_key;  // first record of each identity wins (format.md §3.3)
  by_key.reserve(cands.size());
  for (size_t i = 0; i < cands.size(); ++i) by_key.emplace(key_of(cand_names[i], cands[i]->info), i);
  std::vector<bool> used(cands.size(), false);
  std::unordered_set<Key, KeyHash> seen_ref;
  seen_ref.reserve(refs.size());
  for (size_t i = 0; i < refs.size(); ++i) {
    Key k = key_of(ref_names[i], refs[i]->info);
    if (!seen_ref.insert(k).second) continue;  // a duplicate identity in the reference
    auto it = by_key.find(k);
    if (it == by_key.end() || used[it->second]) {
      out.only_ref.push_back(refs[i]);
      continue;
    }
    used[it->second] = true;
    PlannedPair p;
    p.ref = refs[i];
    p.cand = cands[it->second];
    p.renamed = p.ref->info.name != p.cand->info.name;
    plan_shapes(p, options);
    out.pairs.push_back(std::move(p));
  }
  for (size_t i = 0; i < cands.size(); ++i)
    if (!used[i] && by_key.at(key_of(cand_names[i], cands[i]->info)) == i) out.only_cand.push_back(cands[i]);
  return out;
}

}  // namespace driftscope::compare_detail
