// Alignment (docs/compare.md "Alignment"): which reference tensor meets which candidate tensor,
// and how their shapes line up (identical, size-1 axes only, permuted by axis names, reshaped).
#include <algorithm>
#include <atomic>
#include <optional>
#include <regex>
#include <unordered_map>

#include <fmt/format.h>

#include "common/bytes.hpp"
#include "common/pages.hpp"
#include "common/thread_pool.hpp"
#include "compare/internal.hpp"
#include "format/record_table.hpp"
#include "driftscope/dumpset.hpp"
#include "driftscope/filter.hpp"
#include "compare/report_access.hpp"

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

// A pairing identity: (name after renames, role, role_index, occurrence). The tables below keep
// its hash and small members only; the name is compared by decoding the record again, which
// happens only for a match or a duplicate: a copy of every name cost ~180 MB for a million
// records (issue 13 §5).
struct Ident {
  uint64_t hash = 0;
  uint32_t occurrence = 0;
  uint16_t role_index = 0;
  uint8_t role = 0;
  bool operator==(const Ident&) const = default;
};

// From fnv1a64 of the pairing name: the readers' tables hold it for the stored name, so a side
// no rename rule touches needs no meta decoded to be paired.
Ident ident_of(uint64_t name_hash, uint32_t occurrence, uint16_t role_index, Role role) {
  uint64_t h = name_hash;
  h ^= (uint64_t{occurrence} << 24) ^ (uint64_t{role_index} << 8) ^ static_cast<uint8_t>(role);
  h *= 0x9e3779b97f4a7c15ull;
  return {h ^ (h >> 29), occurrence, role_index, static_cast<uint8_t>(role)};
}
Ident ident_of(std::string_view name, const TensorInfo& i) {
  return ident_of(detail::fnv1a64(name), i.occurrence, i.role_index, i.role);
}

// The first of each distinct identity, in a flat open-addressing table of 8-byte slots: the
// high half of the hash as a tag, and 1 + an index (0: empty). Indexes are below 2^32 - 1:
// align() refuses more records. `same(j)` says whether entry j is the identity looked for.
class FirstOfKey {
 public:
  explicit FirstOfKey(size_t expected) {
    size_t slots = 16;
    while (slots < 2 * expected) slots *= 2;
    table_.assign(slots, 0);
  }
  static constexpr uint32_t kNone = UINT32_MAX;
  // The first index equal to `i` (i itself, inserted, when it is the first).
  template <class Same>
  uint32_t insert(uint32_t i, uint64_t h, Same&& same) {
    const uint64_t tag = h >> 32;
    for (size_t s = h & (table_.size() - 1);; s = (s + 1) & (table_.size() - 1)) {
      uint64_t& e = table_[s];
      if (e == 0) {
        e = tag << 32 | (uint64_t{i} + 1);
        return i;
      }
      if (e >> 32 == tag && same(static_cast<uint32_t>(e) - 1)) return static_cast<uint32_t>(e) - 1;
    }
  }
  // The first index `same` accepts among those of hash `h`, or kNone.
  template <class Same>
  uint32_t find(uint64_t h, Same&& same) const {
    const uint64_t tag = h >> 32;
    for (size_t s = h & (table_.size() - 1);; s = (s + 1) & (table_.size() - 1)) {
      const uint64_t e = table_[s];
      if (e == 0) return kNone;
      if (e >> 32 == tag && same(static_cast<uint32_t>(e) - 1)) return static_cast<uint32_t>(e) - 1;
    }
  }

 private:
  std::vector<uint64_t> table_;
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

// The shapes' alignment: `res` gets the permutation, or the reasons a pair cannot be compared.
void plan_shapes(PlannedPair& p, PairResult& res, const Record& ref, const Record& cand,
                 const CompareOptions& options) {
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
        detail::ReportAccess::reasons(res).push_back(
            {"axes", fmt::format("axis '{}' has size {} in the reference but {} in the candidate",
                                 aa[i], a.shape[i], b.shape[perm[i]])});
        return;
      }
    }
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == i;
    if (identity) return;
    if (light) {
      detail::ReportAccess::reasons(res).push_back({"axes", fmt::format("axes {} vs {} need a permutation, which a light-mode "
                                                    "summary cannot undergo", axes_text(aa), axes_text(ba))});
      return;
    }
    if (na > options.max_permuted_elements) {
      detail::ReportAccess::reasons(res).push_back(
          {"permutation_too_large",
           fmt::format("axes {} vs {}: {} elements exceed the permutation limit of {}",
                       axes_text(aa), axes_text(ba), na, options.max_permuted_elements)});
      return;
    }
    detail::ReportAccess::edit(res).permutation = std::move(perm);
    return;
  }
  if (a.shape == b.shape) return;
  if (na != nb) {
    detail::ReportAccess::reasons(res).push_back({"shape", fmt::format("shape {} vs {}: {} vs {} elements", fmt_shape(a.shape),
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
  detail::ReportAccess::reasons(res).push_back(
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

bool Renamer::keeps_ref() const noexcept { return rules_->ref.empty(); }
bool Renamer::keeps_cand() const noexcept { return rules_->cand.empty() && exact_cand_to_ref_.empty(); }

std::string Renamer::cand(const std::string& name) const {
  auto it = exact_cand_to_ref_.find(name);
  return it != exact_cand_to_ref_.end() ? it->second : rename_with(rules_->cand, name);
}

PlannedSide planned_side(const Record& r, size_t index) {
  return {r.payload, static_cast<uint32_t>(index), r.kind};
}

TensorDesc describe(const Record& r, const detail::SharedString* name) {
  TensorDesc d;
  detail::ReportAccess::name(d) = name ? *name : detail::SharedString(r.info.name);
  detail::ReportAccess::op_type(d) = r.info.op_type;
  d.role = r.info.role;
  d.role_index = r.info.role_index;
  d.occurrence = r.info.occurrence;
  d.exec_index = r.info.exec_index;
  d.dtype = r.info.dtype;
  detail::ReportAccess::shape(d) = r.info.shape;
  if (!r.info.axes.empty()) detail::ReportAccess::edit(d).axes = r.info.axes;
  d.summary = r.kind == RecordKind::summary;
  d.quantized = r.info.encoding.kind != EncodingKind::raw;
  describe_dataflow(r.info, d);
  return d;
}

namespace {
// Points each recorded input's name (TensorRef::name()) at the block of the name of the tensor it
// names, when that tensor is described on the same side: with the PyTorch recorder's data flow
// every record names the one before it, and a million such names took 48 bytes each on each side
// (issue 30 item 4). The descriptions' names are found through an open-addressing table of
// pointers (8 bytes a slot, at most half full), freed on return.
void share_input_names(std::vector<PairResult>& results, bool ref_side, std::vector<TensorDesc>& only) {
  auto side = [&](PairResult& p) -> TensorDesc& { return ref_side ? p.ref : p.cand; };
  std::vector<const detail::SharedString*> table;  // built on the first input the fast path misses
  size_t slots = 0;
  const std::hash<std::string_view> hash;
  auto slot_of = [&](std::string_view name) {
    size_t i = hash(name) & (slots - 1);
    while (table[i] && table[i]->view() != name) i = (i + 1) & (slots - 1);
    return i;
  };
  auto build = [&] {
    slots = 16;
    while (slots < 2 * (results.size() + only.size())) slots *= 2;
    table.assign(slots, nullptr);
    auto add = [&](const detail::SharedString& name) {
      size_t i = slot_of(name.view());
      if (!table[i]) table[i] = &name;  // a repeated name: the first one's block serves
    };
    for (auto& p : results) add(detail::ReportAccess::name(side(p)));
    for (auto& d : only) add(detail::ReportAccess::name(d));
  };
  // Most inputs name the tensor recorded just before (a layer's input is the last output): that
  // one is tried first, without the table's hashing and random reads.
  auto find = [&](const TensorRef& r, const TensorDesc* before) -> const detail::SharedString* {
    if (before && before->name() == r.name()) return &detail::ReportAccess::name(*before);
    if (table.empty()) build();
    return table[slot_of(r.name())];
  };
  auto share = [&](TensorDesc& d, const TensorDesc* before) {
    // Edited only where a name changes block: edit() copies a box the pair's other side shares.
    bool changes = false;
    for (const TensorRef& r : d.inputs()) {
      const detail::SharedString* n = find(r, before);
      if (n && !detail::ReportAccess::name(r).shares_with(*n)) {
        changes = true;
        break;
      }
    }
    if (!changes) return;
    for (TensorRef& r : detail::ReportAccess::edit(d).inputs)
      if (const detail::SharedString* n = find(r, before); n && !detail::ReportAccess::name(r).shares_with(*n))
        detail::ReportAccess::name(r) = *n;
  };
  for (size_t i = 0; i < results.size(); ++i) {
    share(side(results[i]), i ? &side(results[i - 1]) : nullptr);
    // The reference's edit copied the box it shared with the candidate (plan_pair): share again,
    // now that the candidate's inputs, equal names, name the same blocks too.
    if (ref_side) detail::ReportAccess::share_rare(results[i].cand, results[i].ref);
  }
  for (size_t i = 0; i < only.size(); ++i) share(only[i], i ? &only[i - 1] : nullptr);
}

// Pair (ref, cand) planned and described into its slot. The two names share one block when they
// are equal, as they almost always are (detail/shared_string.hpp: 96 bytes a pair, issue 13 §5).
void plan_pair(PlannedPair& p, PairResult& res, const Record& ref, size_t ref_index, const Record& cand,
               size_t cand_index, const CompareOptions& options) {
  p.ref = planned_side(ref, ref_index);
  p.cand = planned_side(cand, cand_index);
  p.numel = ref.info.numel();
  p.renamed = ref.info.name != cand.info.name;
  plan_shapes(p, res, ref, cand, options);
  res.ref = describe(ref);
  res.cand = describe(cand, p.renamed ? nullptr : &detail::ReportAccess::name(res.ref));
  // The two data-flow boxes become one when equal, here, so that the candidate's is freed at once
  // and reused by the next pair: shared only after every pair was described, the peak still held
  // both (issue 30 item 4).
  detail::ReportAccess::share_rare(res.cand, res.ref);
}
}  // namespace

Result<std::optional<Filter>> optional_filter(const std::string& expression) {
  if (expression.empty()) return std::optional<Filter>{};
  auto f = Filter::parse(expression);
  if (!f) return std::move(f).error();
  return std::optional<Filter>(std::move(*f));
}

Result<Alignment> align(const Reader& ref, const Reader& cand, const CompareOptions& options,
                        bool release_pages) {
  auto renamer = Renamer::make(options.names);
  if (!renamer) return std::move(renamer).error();
  auto parsed = optional_filter(options.filter);
  if (!parsed) return std::move(parsed).error();
  const std::optional<Filter>& filter = *parsed;
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
  // Indexes are 32-bit in the tables below (a dump of 2^32 records would be some 400 GB).
  if (ref.record_count() >= FirstOfKey::kNone || cand.record_count() >= FirstOfKey::kNone)
    return make_error(Errc::limit_exceeded,
                      fmt::format("compare: {} and {} records, at most {} per dump", ref.record_count(),
                                  cand.record_count(), FirstOfKey::kNone - 1));
  // Each side's accepted records in execution order with their pairing identities; the names a
  // rename rule changed are kept (the others are read again from the record when needed). A side
  // without filter or rename rules is read from the reader's table alone; otherwise its metas
  // are decoded in parallel blocks, concatenated in block order (the same for any thread count).
  constexpr size_t kBlock = 4096;  // records per parallel task (pages dropped after each)
  struct Side {
    std::vector<uint32_t> recs;
    std::vector<Ident> ids;
    std::unordered_map<uint32_t, std::string> renamed;  // by position in recs
  };
  auto side_of = [&](const Reader& r, const std::vector<size_t>& order, bool keeps,
                     std::string (Renamer::*rename)(const std::string&) const) {
    Side side;
    if (keeps && !filter) {
      side.recs.reserve(order.size());
      side.ids.reserve(order.size());
      for (size_t i : order) {
        const auto id = detail::ReaderAccess::identity(r, i);
        side.recs.push_back(static_cast<uint32_t>(i));
        side.ids.push_back(ident_of(id.name_hash, id.occurrence, id.role_index, id.role));
      }
      return side;
    }
    std::vector<Side> blocks((order.size() + kBlock - 1) / kBlock);
    detail::parallel_for(blocks.size(), [&](size_t bi) {
      Side& blk = blocks[bi];
      for (size_t k = bi * kBlock; k < std::min(order.size(), (bi + 1) * kBlock); ++k) {
        const Record rec = detail::ReaderAccess::record(r, order[k]);
        std::string n = ((*renamer).*rename)(rec.info.name);
        if (!accepted(rec, n)) continue;
        blk.ids.push_back(ident_of(n, rec.info));
        if (n != rec.info.name) blk.renamed.emplace(static_cast<uint32_t>(blk.recs.size()), std::move(n));
        blk.recs.push_back(static_cast<uint32_t>(order[k]));
      }
      if (release_pages) detail::release_pages(r.bytes());
    }, options.threads);
    for (Side& blk : blocks) {
      const auto base = static_cast<uint32_t>(side.recs.size());
      side.recs.insert(side.recs.end(), blk.recs.begin(), blk.recs.end());
      side.ids.insert(side.ids.end(), blk.ids.begin(), blk.ids.end());
      for (auto& [k, n] : blk.renamed) side.renamed.emplace(base + k, std::move(n));
      blk = Side{};
    }
    return side;
  };
  // The pairing name of position k of a side.
  auto name_of = [&](const Reader& r, const Side& side, uint32_t k) -> std::string {
    auto it = side.renamed.find(k);
    return it != side.renamed.end() ? it->second : record(r, side.recs[k]).info.name;
  };
  // Describes records into `out` (pre-sized), in parallel: their order is the given one.
  auto describe_all = [&](const Reader& r, const std::vector<uint32_t>& recs, std::vector<TensorDesc>& descs) {
    descs.resize(recs.size());
    detail::parallel_for((recs.size() + kBlock - 1) / kBlock, [&](size_t bi) {
      for (size_t k = bi * kBlock; k < std::min(recs.size(), (bi + 1) * kBlock); ++k)
        descs[k] = describe(detail::ReaderAccess::record(r, recs[k]));
    }, options.threads);
  };
  const std::vector<size_t> ref_order = in_exec_order(ref);

  if (options.pairing == Pairing::positional) {
    std::vector<uint32_t> cands;
    for (size_t i : in_exec_order(cand)) {
      Record r = record(cand, i);
      if (accepted(r, renamer->cand(r.info.name))) cands.push_back(static_cast<uint32_t>(i));
    }
    size_t k = 0;
    for (size_t i : ref_order) {
      Record a = record(ref, i);
      if (!accepted(a, renamer->ref(a.info.name))) continue;
      if (k < cands.size()) {
        const Record b = record(cand, cands[k]);
        plan_pair(out.pairs.emplace_back(), out.results.emplace_back(), a, i, b, cands[k], options);
      } else {
        out.only_ref.push_back(describe(a));
      }
      ++k;
    }
    for (; k < cands.size(); ++k) out.only_cand.push_back(describe(record(cand, cands[k])));
    if (release_pages) {
      detail::release_pages(ref.bytes());
      detail::release_pages(cand.bytes());
    }
    return out;
  }

  const Side cs = side_of(cand, in_exec_order(cand), renamer->keeps_cand(), &Renamer::cand);
  const Side rs = side_of(ref, ref_order, renamer->keeps_ref(), &Renamer::ref);

  // First record of each identity wins (format.md §3.3). Two records with the same identity
  // hash and members are the same identity when their names are: decoded only then
  // (duplicates, or a hash collision).
  FirstOfKey by_key(cs.ids.size());
  std::vector<bool> cand_dup(cs.ids.size(), false);
  for (uint32_t j = 0; j < cs.ids.size(); ++j) {
    const uint32_t first = by_key.insert(j, cs.ids[j].hash, [&](uint32_t k) {
      return cs.ids[k] == cs.ids[j] && name_of(cand, cs, k) == name_of(cand, cs, j);
    });
    cand_dup[j] = first != j;
  }
  FirstOfKey seen_ref(rs.ids.size());
  // Pairs by identity; `verify`: names compared while pairing (each candidate decoded here),
  // otherwise after, in parallel, and a mismatch (two names of one 64-bit identity hash: a
  // crafted file) pairs again with `verify`.
  std::vector<std::pair<uint32_t, uint32_t>> matched;  // positions in rs, cs
  std::vector<uint32_t> only_ref, only_cand;
  auto pair_up = [&](bool verify) {
    matched.clear();
    only_ref.clear();
    only_cand.clear();
    seen_ref = FirstOfKey(rs.ids.size());
    std::vector<bool> used(cs.ids.size(), false);
    for (uint32_t k = 0; k < rs.ids.size(); ++k) {
      const Ident& id = rs.ids[k];
      std::optional<std::string> n;  // the reference's pairing name, when needed
      auto ref_name = [&]() -> const std::string& {
        if (!n) n = name_of(ref, rs, k);
        return *n;
      };
      const uint32_t first = seen_ref.insert(k, id.hash, [&](uint32_t e) {
        return rs.ids[e] == id && name_of(ref, rs, e) == ref_name();
      });
      if (first != k) continue;  // a duplicate identity in the reference
      const uint32_t j = by_key.find(id.hash, [&](uint32_t e) {
        return cs.ids[e] == id && (!verify || name_of(cand, cs, e) == ref_name());
      });
      if (j == FirstOfKey::kNone || used[j]) {
        only_ref.push_back(rs.recs[k]);
        continue;
      }
      used[j] = true;
      matched.emplace_back(k, j);
    }
    for (uint32_t j = 0; j < cs.ids.size(); ++j)
      if (!used[j] && !cand_dup[j]) only_cand.push_back(cs.recs[j]);
  };
  pair_up(false);

  // Each pair's two records decoded once, planned and described straight into its slot.
  for (bool verify = false;; verify = true) {
    out.pairs.clear();
    out.results.clear();
    out.pairs.reserve(matched.size());
    out.results.reserve(matched.size());
    // A million results are some 400 MB of fresh pages; faulted one at a time by the serial
    // construction below they were 11-18% of a million-pair comparison (issue 30 item 4), so
    // the threads map them first, in slices.
    detail::populate_for_write(out.pairs.data(), matched.size() * sizeof(PlannedPair), options.threads);
    detail::populate_for_write(out.results.data(), matched.size() * sizeof(PairResult), options.threads);
    out.pairs.assign(matched.size(), PlannedPair{});
    out.results.resize(matched.size());
    std::atomic<bool> mismatch{false};
    detail::parallel_for((matched.size() + kBlock - 1) / kBlock, [&](size_t bi) {
      for (size_t m = bi * kBlock; m < std::min(matched.size(), (bi + 1) * kBlock); ++m) {
        const auto [k, j] = matched[m];
        const Record a = detail::ReaderAccess::record(ref, rs.recs[k]);
        const Record b = detail::ReaderAccess::record(cand, cs.recs[j]);
        if (!verify) {
          auto ra = rs.renamed.find(k);
          auto cb = cs.renamed.find(j);
          const std::string& an = ra != rs.renamed.end() ? ra->second : a.info.name;
          const std::string& bn = cb != cs.renamed.end() ? cb->second : b.info.name;
          if (an != bn) {
            mismatch = true;
            return;
          }
        }
        plan_pair(out.pairs[m], out.results[m], a, rs.recs[k], b, cs.recs[j], options);
      }
      if (release_pages) {
        detail::release_pages(ref.bytes());
        detail::release_pages(cand.bytes());
      }
    }, options.threads);
    if (!mismatch || verify) break;
    pair_up(true);
  }
  describe_all(ref, only_ref, out.only_ref);
  describe_all(cand, only_cand, out.only_cand);
  share_input_names(out.results, /*ref_side=*/true, out.only_ref);
  share_input_names(out.results, /*ref_side=*/false, out.only_cand);
  if (release_pages) {
    detail::release_pages(ref.bytes());
    detail::release_pages(cand.bytes());
  }
  return out;
}

}  // namespace driftscope::compare_detail
