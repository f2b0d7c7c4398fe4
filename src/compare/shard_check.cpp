// Naming the failing shards of a gathered tensor (docs/dumpsets.md §7.1). A fault on one rank
// spoils that rank's shard of every later split tensor while the other shards stay right, so a
// failing gathered pair measures each shard against the slice of the other side's whole tensor at
// the shard's offset, with the same engine, policy and criteria as the pair.
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "compare/set_internal.hpp"
#include "compare/report_access.hpp"

namespace driftscope::compare_detail {
namespace {

// The part of the whole tensor `whole` (the other side's) that shard `s` holds, in the shard's
// shape: the inverse of the gather (§5.1).
std::vector<std::byte> slice_of(const Shard& s, const std::vector<uint64_t>& shift,
                                const std::vector<uint64_t>& whole_shape, std::span<const std::byte> whole,
                                size_t esize) {
  std::vector<std::byte> out(s.rec->info.numel() * esize);
  for_each_row(s.rec->info.shape, whole_shape, shift, [&](uint64_t start, uint64_t src, uint64_t row) {
    std::memcpy(out.data() + start * esize, whole.data() + src * esize, row * esize);
  });
  return out;
}

// A record of a logical tensor's side as the engine should judge it: its stored name, op type,
// role, dtype and attributes (policy rules match on them), base axes, the given shape.
TensorInfo measured_info(const Logical& l, const TensorInfo& stored, std::vector<uint64_t> shape, uint64_t seq) {
  TensorInfo info;
  info.name = l.first->info.name;
  info.op_type = l.first->info.op_type;
  info.role = l.first->info.role;
  info.role_index = l.first->info.role_index;
  info.dtype = stored.dtype;
  info.shape = std::move(shape);
  info.axes = l.base_axes;
  for (const auto& kv : l.first->info.attrs)
    if (kv.first != kInputsAttr) info.attrs.push_back(kv);  // names of per-rank records
  info.exec_index = seq;
  info.occurrence = static_cast<uint32_t>(seq);  // one pair per (shard, slice): pairs by occurrence
  return info;
}

}  // namespace

void name_failing_shards(Report& report, const Side& ref, const Side& cand, bool by_cand,
                         const std::vector<std::pair<const Logical*, const Logical*>>& logicals,
                         const CompareOptions& options, const std::string& directory) {
  struct Job {
    size_t pair;
    const Logical* sharded;
    const Logical* whole;
    Placement at;
  };
  std::vector<Job> jobs;
  for (size_t i = 0; i < report.pairs.size(); ++i) {
    PairResult& p = report.pairs[i];
    if (p.status != PairStatus::fail && p.status != PairStatus::silent_failure) continue;
    const auto [r, c] = logicals[i];
    if (!r || !c) continue;
    const Logical* sharded = by_cand ? c : r;
    const Logical* whole = by_cand ? r : c;
    if (sharded->split.empty() && sharded->partial.empty()) continue;  // a replica: one rank already
    if (!sharded->partial.empty()) {
      detail::ReportAccess::edit(p).shard_check = "partial_sum";
      continue;
    }
    if (!whole->split.empty() || !whole->partial.empty()) {
      detail::ReportAccess::edit(p).shard_check = "other_side_sharded";
      continue;
    }
    auto at = place_shards(*sharded);
    const TensorInfo& w = whole->first->info;
    if (!at || whole->first->kind != RecordKind::tensor || w.encoding.kind != EncodingKind::raw ||
        dtype_size(w.dtype) == 0 || w.shape != at->shape || !p.permutation().empty()) {
      detail::ReportAccess::edit(p).shard_check = "not_sliceable";
      continue;
    }
    jobs.push_back(Job{i, sharded, whole, std::move(*at)});
  }
  if (jobs.empty()) return;
  auto warn = [&](const Error& e) {
    report.warnings.push_back(fmt::format("the failing shards could not be measured alone ({}): "
                                          "gathered tensors list all their ranks", e.message));
    for (const Job& j : jobs) detail::ReportAccess::edit(report.pairs[j.pair]).shard_check = "not_sliceable";
  };
  auto ref_dump = TempDump::create(directory, "ref-shards", run_metadata(ref.set));
  if (!ref_dump) return warn(ref_dump.error());
  auto cand_dump = TempDump::create(directory, "cand-shards", run_metadata(cand.set));
  if (!cand_dump) return warn(cand_dump.error());
  std::vector<std::pair<size_t, uint32_t>> measured;  // by seq: (job, rank of the shard)
  for (size_t j = 0; j < jobs.size(); ++j) {
    const Job& job = jobs[j];
    const Record& whole = *job.whole->first;
    const size_t esize = dtype_size(whole.info.dtype);
    for (const Shard& s : job.sharded->shards) {
      const uint64_t seq = measured.size();
      std::vector<std::byte> slice =
          slice_of(s, shard_shift(*job.sharded, s, job.at), whole.info.shape, whole.payload, esize);
      TensorInfo shard_info = measured_info(*job.sharded, s.rec->info, s.rec->info.shape, seq);
      TensorInfo slice_info = measured_info(*job.whole, whole.info, s.rec->info.shape, seq);
      Writer& sw = *(by_cand ? cand_dump : ref_dump)->writer;
      Writer& ww = *(by_cand ? ref_dump : cand_dump)->writer;
      if (auto r = sw.write(shard_info, s.rec->payload); !r) return warn(r.error());
      if (auto r = ww.write(slice_info, slice); !r) return warn(r.error());
      measured.emplace_back(j, s.rank);
    }
  }
  auto rp = ref_dump->release();
  if (!rp) return warn(rp.error());
  auto cp = cand_dump->release();
  if (!cp) {
    ::unlink(rp->c_str());
    return warn(cp.error());
  }
  auto ra = Reader::open(*rp);
  auto ca = Reader::open(*cp);
  ::unlink(rp->c_str());
  ::unlink(cp->c_str());
  if (!ra) return warn(ra.error());
  if (!ca) return warn(ca.error());
  CompareOptions o = options;
  o.stop_at_first = false;
  o.details = false;
  o.max_layout_diagnoses = 0;
  o.progress = nullptr;
  auto rep = compare(*ra, *ca, o);
  if (!rep) return warn(rep.error());
  std::vector<std::vector<uint32_t>> failing(jobs.size());
  std::vector<size_t> judged(jobs.size(), 0);
  for (const PairResult& q : rep->pairs) {
    if (q.ref.exec_index >= measured.size() || !q.compared) continue;
    const auto& [j, rank] = measured[q.ref.exec_index];
    ++judged[j];
    if (q.status == PairStatus::fail || q.status == PairStatus::silent_failure) failing[j].push_back(rank);
  }
  for (size_t j = 0; j < jobs.size(); ++j) {
    PairResult& p = report.pairs[jobs[j].pair];
    if (judged[j] != jobs[j].sharded->shards.size()) {
      detail::ReportAccess::edit(p).shard_check = "not_sliceable";
      continue;
    }
    std::sort(failing[j].begin(), failing[j].end());
    detail::ReportAccess::edit(p).shard_check = failing[j].empty() ? "no_shard_fails" : "shards";
    detail::ReportAccess::edit(p).failing_shards = std::move(failing[j]);
  }
}

}  // namespace driftscope::compare_detail
