// Data flow across ranks (docs/dumpsets.md §7.2). A rank's ds.inputs name records of its own file
// (docs/format.md §3.3.3); a logical tensor's inputs are the logical tensors its shards' inputs
// belong to, over all its ranks. A collective needs nothing more: rank 0's all-reduced replica
// names rank 0's partial sum, and that logical tensor is the sum over every rank's shard.
#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "compare/set_internal.hpp"
#include "driftscope/limits.hpp"

namespace driftscope::compare_detail {
namespace {

// The engine follows unpaired tensors this deep too (origins.cpp).
constexpr int kMaxFollow = 64;

std::optional<std::vector<TensorRef>> inputs_of(const Record& r) {
  for (const auto& [k, v] : r.info.attrs)
    if (k == kInputsAttr) {
      auto refs = parse_inputs(v);
      if (!refs) return std::nullopt;  // malformed: no data flow for this record (format.md §3.3.3)
      return std::move(*refs);
    }
  return std::nullopt;
}

}  // namespace

std::string link_dataflow(Side& side, std::string_view which) {
  const DumpSet& s = side.set;
  std::vector<uint32_t> with, without;
  for (uint32_t r = 0; r < s.readers.size(); ++r) {
    const auto recs = s.readers[r].records();
    if (recs.empty()) continue;
    const bool any = std::any_of(recs.begin(), recs.end(), [](const Record& x) { return inputs_of(x).has_value(); });
    (any ? with : without).push_back(r);
  }
  if (with.empty()) return {};
  if (!without.empty())
    return fmt::format("{} ranks {} recorded no data flow (ds.inputs) and ranks {} did: the {}'s data flow is not "
                       "used, origins follow the global order",
                       which, ranks_text(without), ranks_text(with), which);
  if (auto pp = s.group_index("pp"); s.order == SetOrder::pipeline && pp && s.groups[*pp].second > 1)
    return fmt::format("the {} is a pipeline of {} stages: a stage's ds.inputs cannot name the activations it "
                       "receives from the stage before, so its data flow is not used and origins follow the "
                       "global order", which, s.groups[*pp].second);
  side.dataflow = true;

  std::unordered_map<const Record*, size_t> logical_of;  // shards of logical tensors in the dump
  for (size_t i = 0; i < side.logicals.size(); ++i)
    if (side.logicals[i].problem.empty())
      for (const Shard& sh : side.logicals[i].shards) logical_of.emplace(sh.rec, i);
  // A record outside the logical dump stands for what it was computed from (memoised: a filtered
  // record may be named by many).
  std::unordered_map<const Record*, std::vector<size_t>> through;
  std::function<void(uint32_t, const Record&, const std::vector<TensorRef>&, std::vector<size_t>&, int)> follow;
  follow = [&](uint32_t rank, const Record& consumer, const std::vector<TensorRef>& refs, std::vector<size_t>& out,
               int depth) {
    for (const TensorRef& ref : refs) {
      const Record* t = s.readers[rank].find(ref.name(), ref.occurrence, ref.role, ref.role_index);
      if (!t || t->info.exec_index >= consumer.info.exec_index) continue;  // missing or later: ignored
      if (auto it = logical_of.find(t); it != logical_of.end()) {
        out.push_back(it->second);
        continue;
      }
      TensorDesc d;
      describe_dataflow(t->info, d);
      if (d.kind != TensorKind::value || depth >= kMaxFollow) continue;  // exact values carry no error
      auto memo = through.find(t);
      if (memo == through.end()) {
        std::vector<size_t> got;
        if (auto more = inputs_of(*t)) follow(rank, *t, *more, got, depth + 1);
        memo = through.emplace(t, std::move(got)).first;
      }
      out.insert(out.end(), memo->second.begin(), memo->second.end());
    }
  };
  for (size_t i = 0; i < side.logicals.size(); ++i) {
    Logical& l = side.logicals[i];
    if (!l.problem.empty()) continue;
    std::vector<size_t> in;
    bool all = true;
    for (const Shard& sh : l.shards) {
      auto refs = inputs_of(*sh.rec);
      if (!refs) {
        all = false;  // one rank does not know: neither does the logical tensor
        break;
      }
      follow(sh.rank, *sh.rec, *refs, in, 0);
    }
    if (!all) continue;
    std::sort(in.begin(), in.end());
    in.erase(std::unique(in.begin(), in.end()), in.end());
    in.erase(std::remove(in.begin(), in.end(), i), in.end());
    l.has_inputs = true;
    l.inputs = std::move(in);
  }
  return {};
}

std::vector<std::optional<std::string>> logical_inputs(const Side& side, const std::vector<PlannedRecord>& plan,
                                                       size_t& too_long) {
  std::vector<std::optional<std::string>> out(plan.size());
  if (!side.dataflow) return out;
  std::vector<std::vector<size_t>> records_of(side.logicals.size());
  for (size_t k = 0; k < plan.size(); ++k) records_of[plan[k].logical].push_back(k);
  auto groups_of = [](const Coords& c) {
    std::vector<std::string> g;
    for (const auto& gc : c) g.push_back(gc.first);
    std::sort(g.begin(), g.end());
    return g;
  };
  auto on_groups = [](const Coords& c, const std::vector<std::string>& groups) {
    Coords r;
    for (const std::string& g : groups)
      for (const auto& gc : c)
        if (gc.first == g) r.push_back(gc);
    return r;
  };
  // A TP=1 reference against thousands of replicas has thousands of copies of each tensor: the
  // copies of an input that agree with a consumer (the same coordinates on every group both pin)
  // are found by those coordinates, per set of groups the copies pin, not by scanning them all.
  std::vector<std::vector<std::vector<std::string>>> pinned(side.logicals.size());  // group sets
  for (size_t m = 0; m < side.logicals.size(); ++m)
    for (size_t j : records_of[m])
      if (auto g = groups_of(plan[j].pin); std::find(pinned[m].begin(), pinned[m].end(), g) == pinned[m].end())
        pinned[m].push_back(std::move(g));
  using IndexKey = std::tuple<size_t, std::vector<std::string>, std::vector<std::string>>;  // m, pinned, shared
  std::map<IndexKey, std::map<Coords, std::vector<size_t>>> by_pin;
  std::vector<TensorRef> refs;
  std::vector<size_t> chosen;
  for (size_t k = 0; k < plan.size(); ++k) {
    const Logical& l = side.logicals[plan[k].logical];
    if (!l.has_inputs) continue;
    refs.clear();
    const std::vector<std::string> mine = groups_of(plan[k].pin);
    for (size_t m : l.inputs) {
      chosen.clear();
      for (const std::vector<std::string>& g : pinned[m]) {
        std::vector<std::string> both;
        std::set_intersection(mine.begin(), mine.end(), g.begin(), g.end(), std::back_inserter(both));
        auto [index, fresh] = by_pin.try_emplace(IndexKey{m, g, both});
        if (fresh)
          for (size_t j : records_of[m])
            if (groups_of(plan[j].pin) == g) index->second[on_groups(plan[j].pin, both)].push_back(j);
        if (auto hit = index->second.find(on_groups(plan[k].pin, both)); hit != index->second.end())
          chosen.insert(chosen.end(), hit->second.begin(), hit->second.end());
      }
      if (chosen.empty()) chosen = records_of[m];
      std::sort(chosen.begin(), chosen.end());
      const TensorInfo& mi = side.logicals[m].first->info;
      for (size_t j : chosen) refs.push_back(TensorRef{mi.name, mi.role, mi.role_index, plan[j].occurrence});
    }
    std::string v = format_inputs(refs);
    if (v.size() > limits::kMaxValueLength) {
      ++too_long;
      continue;
    }
    out[k] = std::move(v);
  }
  return out;
}

}  // namespace driftscope::compare_detail
