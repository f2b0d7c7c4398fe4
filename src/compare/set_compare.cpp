// Comparing dump sets (docs/dumpsets.md §5-§7). Each side's shards are assembled into logical
// tensors (gathered along a split axis, or summed in float64 over a partial group) and written to
// a temporary dump that is unlinked as soon as it is open; the existing engine then compares the
// two temporary dumps, and the report gets back the stored identities plus the ranks. Memory stays
// bounded by one logical tensor (plus one decoded shard when summing); the engine's guarantees
// (one float64 pass per pair, identical results for any thread count) carry over unchanged. The
// data flow goes with the logical tensors (set_dataflow.cpp, §7.2); a failing gathered tensor
// names its failing shards (shard_check.cpp, §7.1).
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "compare/set_internal.hpp"
#include "driftscope/decode.hpp"
#include "driftscope/filter.hpp"
#include "driftscope/limits.hpp"
#include "compare/report_access.hpp"

namespace driftscope::compare_detail {

std::string ranks_text(const std::vector<uint32_t>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += fmt::format("{}{}", i ? "," : "", ranks[i]);
  return s;
}

namespace {
// The size of each split axis per block coordinate, after checking that the shards can be put
// together (§5): raw TENSOR records of one rank, one dtype unless summed, other axes equal.
Result<std::vector<std::vector<uint64_t>>> shard_sizes(const Logical& l) {
  const TensorInfo& f = l.first->info;
  auto bad = [&](std::string what) { return make_error(Errc::incomparable, std::move(what)); };
  const size_t rank = f.shape.size();
  for (const Shard& s : l.shards) {
    if (s.rec->kind != RecordKind::tensor) return bad("a light-mode SUMMARY shard cannot be gathered");
    if (s.rec->info.encoding.kind != EncodingKind::raw) return bad("a quantized shard cannot be gathered");
    if (s.rec->info.shape.size() != rank) return bad("shards differ in rank");
    if (l.partial.empty() && s.rec->info.dtype != f.dtype) return bad("shards differ in dtype");
    if (dtype_size(s.rec->info.dtype) == 0) return bad("a shard has an unknown dtype");
  }
  // Sizes along each split axis per block coordinate; every other axis equal in all shards.
  std::vector<std::vector<uint64_t>> along(l.split.size());
  for (size_t i = 0; i < l.split.size(); ++i) along[i].assign(l.split[i].second.second, ~uint64_t{0});
  for (const Shard& s : l.shards) {
    for (size_t ax = 0; ax < rank; ++ax) {
      auto sp = std::find_if(l.split.begin(), l.split.end(), [&](const auto& x) { return x.first == ax; });
      if (sp == l.split.end()) {
        if (s.rec->info.shape[ax] != f.shape[ax])
          return bad(fmt::format("axis {} is {} on rank {} and {} on rank {}; only the split axis may differ",
                                 ax, s.rec->info.shape[ax], s.rank, f.shape[ax], l.shards.front().rank));
        continue;
      }
      const size_t i = static_cast<size_t>(sp - l.split.begin());
      uint64_t& want = along[i][s.block[i]];
      if (want == ~uint64_t{0}) want = s.rec->info.shape[ax];
      if (want != s.rec->info.shape[ax])
        return bad(fmt::format("shards at {}={} differ in size along axis {}", l.split[i].second.first,
                               s.block[i], ax));
    }
  }
  return along;
}

}  // namespace

Result<Placement> place_shards(const Logical& l) {
  auto sizes = shard_sizes(l);
  if (!sizes) return std::move(sizes).error();
  Placement at;
  at.shape = l.first->info.shape;
  at.offset.resize(l.split.size());
  for (size_t i = 0; i < l.split.size(); ++i) {
    uint64_t total = 0;
    for (uint64_t n : (*sizes)[i]) {
      at.offset[i].push_back(total);
      total += n;
    }
    at.shape[l.split[i].first] = total;
  }
  return at;
}

std::vector<uint64_t> shard_shift(const Logical& l, const Shard& s, const Placement& at) {
  std::vector<uint64_t> shift(s.rec->info.shape.size(), 0);
  for (size_t i = 0; i < l.split.size(); ++i) shift[l.split[i].first] = at.offset[i][s.block[i]];
  return shift;
}

TempDump::TempDump(TempDump&& o) noexcept : path(std::exchange(o.path, {})), writer(std::move(o.writer)) {}

TempDump::~TempDump() {
  writer.reset();
  if (!path.empty()) ::unlink(path.c_str());
}

Result<TempDump> TempDump::create(const std::string& dir, std::string_view side, const KeyValues& metadata) {
  std::string templ = fmt::format("{}/driftscope-set-{}-XXXXXX", dir, side);
  int fd = ::mkstemp(templ.data());
  if (fd < 0)
    return make_error(Errc::io_error, fmt::format("cannot create a temporary dump in {}: {}", dir, std::strerror(errno)));
  ::close(fd);
  TempDump t;
  t.path = templ;
  WriterOptions wo;
  wo.metadata = metadata;
  auto w = Writer::create(t.path, wo);
  if (!w) return std::move(w).error();
  t.writer = std::move(*w);
  return t;
}

Result<std::string> TempDump::release() {
  DRIFTSCOPE_TRY(writer->close());
  writer.reset();
  return std::exchange(path, {});
}

KeyValues run_metadata(const DumpSet& s) {
  KeyValues m;
  if (s.readers.empty()) return m;
  for (const auto& kv : s.readers.front().header().metadata)
    if (kv.first.rfind("ds.", 0) != 0 && kv.first != "writer") m.push_back(kv);
  return m;
}


namespace {

using Identity = std::tuple<std::string, uint8_t, uint16_t, uint32_t>;

Identity identity_of(const Logical& l) {
  const TensorInfo& i = l.first->info;
  return {l.pair_name, static_cast<uint8_t>(i.role), i.role_index, i.occurrence};
}

Result<Side> load_side(const std::string& path, std::string_view which, const CompareOptions& options,
                       const Renamer& renamer, bool is_ref, const std::optional<Filter>& filter) {
  OpenOptions oo;
  oo.verify = Verify::full;
  auto set = DumpSet::open(path, oo);
  if (!set) {
    Error e = std::move(set).error();
    e.message = fmt::format("{} '{}': {}", which, path, e.message);
    return e;
  }
  if (auto ok = set->check_rank_metadata(); !ok) {
    Error e = ok.error();
    e.message = fmt::format("{} '{}': {}", which, path, e.message);
    return e;
  }
  Side side;
  side.set = std::move(*set);
  const DumpSet& s = side.set;
  (void)options;

  struct Entry {
    uint32_t rank;
    const Record* rec;
  };
  std::vector<Entry> entries;
  for (const auto& [rank, rec] : s.records_in_global_order())
    if (!filter || filter->accepts(rec->info, rec->info.exec_index)) entries.push_back({rank, rec});

  std::map<std::tuple<Identity, Coords, std::vector<std::string>>, size_t> index;
  std::set<std::tuple<uint32_t, std::string, uint8_t, uint16_t, uint32_t>> seen;  // first record wins
  for (const Entry& e : entries) {
    const TensorInfo& info = e.rec->info;
    if (!seen.emplace(e.rank, info.name, static_cast<uint8_t>(info.role), info.role_index, info.occurrence).second)
      continue;
    auto spec = parse_shard_spec(info.axes);
    if (!spec) {
      Error err = std::move(spec).error();
      err.message = fmt::format("{} '{}': rank {} file '{}': tensor '{}': {}", which, path, e.rank,
                                s.ranks[e.rank].path, info.name, err.message);
      return err;
    }
    // Groups the set does not have are of size 1: the shard is the whole tensor along them.
    Logical l;
    std::vector<std::string> sharded_over;
    Shard sh;
    sh.rank = e.rank;
    sh.rec = e.rec;
    for (const auto& [g, axis] : spec->split)
      if (auto gi = s.group_index(g)) {
        l.split.push_back({axis, s.groups[*gi]});
        sh.block.push_back(s.ranks[e.rank].coords[*gi]);
        sharded_over.push_back(g);
      }
    for (const std::string& g : spec->partial)
      if (auto gi = s.group_index(g)) {
        l.partial.push_back(s.groups[*gi]);
        sh.partial.push_back(s.ranks[e.rank].coords[*gi]);
        sharded_over.push_back(g);
      }
    for (size_t gi = 0; gi < s.groups.size(); ++gi)
      if (std::find(sharded_over.begin(), sharded_over.end(), s.groups[gi].first) == sharded_over.end())
        l.key.emplace_back(s.groups[gi].first, s.ranks[e.rank].coords[gi]);
    std::sort(l.key.begin(), l.key.end());
    l.first = e.rec;
    l.pair_name = is_ref ? renamer.ref(info.name) : renamer.cand(info.name);
    l.base_axes = spec->base_axes;
    auto k = std::make_tuple(identity_of(l), l.key, sharded_over);
    auto [it, fresh] = index.emplace(k, side.logicals.size());
    if (fresh) side.logicals.push_back(std::move(l));
    Logical& dst = side.logicals[it->second];
    dst.shards.push_back(std::move(sh));
    dst.ranks.push_back(e.rank);
  }
  for (Logical& l : side.logicals) {
    std::sort(l.ranks.begin(), l.ranks.end());
    uint64_t want = 1;
    for (const auto& sp : l.split) want *= sp.second.second;
    for (const auto& p : l.partial) want *= p.second;
    if (l.shards.size() != want)
      l.problem = fmt::format("{} of its {} shards are present (ranks {})", l.shards.size(), want, ranks_text(l.ranks));
    else if (!l.split.empty() || !l.partial.empty())
      if (auto ok = place_shards(l); !ok) l.problem = ok.error().message;
  }
  return side;
}

// ---- assembling one logical tensor (§5) -------------------------------------------------------

struct Assembled {
  TensorInfo info;
  std::vector<std::byte> payload;  // empty with `passthrough`
  const Record* passthrough = nullptr;
};

DType sum_dtype(const Logical& l) {
  // The widest float dtype of the shards (fp8 sums are stored as f32: there is no fp8 encoder
  // we would trust to round a sum); shards without a float dtype sum into f64.
  auto width = [](DType t) {
    switch (t) {
      case DType::f64: return 4;
      case DType::f32: return 3;
      case DType::f16: case DType::bf16: return 2;
      case DType::f8e4m3fn: case DType::f8e5m2: return 1;
      default: return 0;
    }
  };
  DType best = l.shards.front().rec->info.dtype;
  bool mixed_half = false;
  for (const Shard& s : l.shards) {
    DType t = s.rec->info.dtype;
    if (width(t) == 2 && width(best) == 2 && t != best) mixed_half = true;
    if (width(t) > width(best)) best = t;
  }
  if (width(best) == 0) return DType::f64;
  if (width(best) == 1 || (width(best) == 2 && mixed_half)) return DType::f32;
  return best;
}

Result<Assembled> assemble(const Logical& l) {
  Assembled out;
  const TensorInfo& f = l.first->info;
  out.info.name = f.name;
  out.info.op_type = f.op_type;
  out.info.role = f.role;
  out.info.role_index = f.role_index;
  out.info.dtype = f.dtype;
  out.info.shape = f.shape;
  out.info.axes = l.base_axes;
  for (const auto& kv : f.attrs)
    if (kv.first != kInputsAttr) out.info.attrs.push_back(kv);  // per-rank names: see logical_inputs()
  out.info.attrs.emplace_back("ds.ranks", ranks_text(l.ranks));
  if (l.split.empty() && l.partial.empty()) {
    out.info.encoding = f.encoding;
    out.passthrough = l.first;
    return out;
  }
  auto at = place_shards(l);
  if (!at) return std::move(at).error();
  out.info.shape = at->shape;
  const uint64_t numel = out.info.numel();
  const bool summing = !l.partial.empty();
  out.info.dtype = summing ? sum_dtype(l) : f.dtype;
  const size_t esize = summing ? sizeof(double) : dtype_size(f.dtype);
  if (numel == UINT64_MAX || numel > (uint64_t{1} << 40) / esize)
    return make_error(Errc::limit_exceeded, fmt::format("the gathered tensor has {} elements", numel));
  std::vector<std::byte> buf(numel * esize);
  std::vector<double> decoded;
  // Row by row (every axis but the last): each shard row lands at its block's offset.
  for (const Shard& s : l.shards) {
    const TensorInfo& si = s.rec->info;
    const uint64_t sn = si.numel();
    if (sn == 0) continue;
    const std::byte* src = s.rec->payload.data();
    if (summing) {
      decoded.assign(sn, 0.0);
      DRIFTSCOPE_TRY(decode(si, s.rec->payload, 0, std::span<double>(decoded)));
      src = reinterpret_cast<const std::byte*>(decoded.data());
    }
    const bool first_term = std::all_of(s.partial.begin(), s.partial.end(), [](uint32_t c) { return c == 0; });
    for_each_row(si.shape, out.info.shape, shard_shift(l, s, *at), [&](uint64_t start, uint64_t dst, uint64_t row) {
      if (summing) {
        // The float64 sum over the partial group, in coordinate order (§5.2).
        double* d = reinterpret_cast<double*>(buf.data()) + dst;
        const double* x = reinterpret_cast<const double*>(src) + start;
        for (uint64_t k = 0; k < row; ++k) d[k] = first_term ? x[k] : d[k] + x[k];
      } else {
        std::memcpy(buf.data() + dst * esize, src + start * esize, row * esize);
      }
    });
  }
  if (!summing) {
    out.payload = std::move(buf);
    return out;
  }
  const double* d = reinterpret_cast<const double*>(buf.data());
  const size_t osize = dtype_size(out.info.dtype);
  out.payload.resize(numel * osize);
  for (uint64_t k = 0; k < numel; ++k) {
    std::byte* p = out.payload.data() + k * osize;
    switch (out.info.dtype) {
      case DType::f64: std::memcpy(p, &d[k], 8); break;
      case DType::f32: { float v = static_cast<float>(d[k]); std::memcpy(p, &v, 4); break; }
      case DType::f16: { uint16_t v = double_to_f16(d[k]); std::memcpy(p, &v, 2); break; }
      default: { uint16_t v = double_to_bf16(d[k]); std::memcpy(p, &v, 2); break; }
    }
  }
  return out;
}

// What a record of a temporary dump stands for.
struct TempSlot {
  size_t logical = 0;
  uint32_t occurrence = 0;  // as stored
  uint64_t exec_index = 0;  // of the first shard in global order
};

class Materializer {
 public:
  Materializer(const Side& side, TempDump& dump) : side_(side), dump_(dump) {}
  // Writes a planned record (with its ds.inputs, if any); the last logical tensor assembled is
  // kept for repeats.
  Result<void> write(const PlannedRecord& r, const std::optional<std::string>& inputs) {
    const size_t i = r.logical;
    if (cached_ != i) {
      auto a = assemble(side_.logicals[i]);
      if (!a) return std::move(a).error();
      current_ = std::move(*a);
      cached_ = i;
    }
    TensorInfo info = current_.info;
    info.occurrence = r.occurrence;
    info.exec_index = r.seq;
    if (inputs) info.attrs.emplace_back(kInputsAttr, *inputs);
    const Record* p = current_.passthrough;
    if (p && p->kind == RecordKind::summary && p->summary()) {
      DRIFTSCOPE_TRY(dump_.writer->write_summary(info, *p->summary()));
    } else {
      DRIFTSCOPE_TRY(dump_.writer->write(info, p ? p->payload : std::span<const std::byte>(current_.payload)));
    }
    return {};
  }

 private:
  const Side& side_;
  TempDump& dump_;
  size_t cached_ = ~size_t{0};
  Assembled current_;
};

std::string worst_state(const DumpSet& s) {
  FileState w = FileState::clean;
  for (const Reader& r : s.readers) w = std::max(w, r.integrity().state);
  return std::string(file_state_name(w));
}

// (name, role, role_index, occurrence in a logical dump) -> the stored occurrence.
using Occurrences = std::map<std::tuple<std::string, uint8_t, uint16_t, uint32_t>, uint32_t>;

// A tensor of a logical dump as stored: occurrence, exec_index and ranks, and its inputs named by
// their stored identities (the copies of one logical tensor become one). `d` comes fresh from
// describe(), which sets no ranks.
void restore(TensorDesc& d, const std::unordered_map<uint64_t, TempSlot>& slots, const Side& side,
             const Occurrences& occs) {
  auto it = slots.find(d.exec_index);
  if (it == slots.end()) return;
  d.occurrence = it->second.occurrence;
  d.exec_index = it->second.exec_index;
  if (!side.logicals[it->second.logical].ranks.empty()) detail::ReportAccess::edit(d).ranks = side.logicals[it->second.logical].ranks;
  if (d.inputs().empty()) return;
  std::vector<TensorRef> stored;
  for (TensorRef& r : detail::ReportAccess::edit(d).inputs) {
    auto o = occs.find({std::string(r.name()), static_cast<uint8_t>(r.role), r.role_index, r.occurrence});
    if (o != occs.end()) r.occurrence = o->second;
    if (std::find(stored.begin(), stored.end(), r) == stored.end()) stored.push_back(std::move(r));
  }
  detail::ReportAccess::edit(d).inputs = std::move(stored);
}

void add_sorted(std::vector<uint32_t>& to, const std::vector<uint32_t>& from) {
  to.insert(to.end(), from.begin(), from.end());
  std::sort(to.begin(), to.end());
  to.erase(std::unique(to.begin(), to.end()), to.end());
}

}  // namespace

Result<Report> compare_sets(const std::string& reference, const std::string& candidate,
                            const CompareOptions& options) {
  // The logical dumps are unlinked as soon as they are open: their pages live as long as the maps.
  const char* tmp = std::getenv("TMPDIR");
  auto prepared = prepare_sets(reference, candidate, options, tmp && *tmp ? tmp : "/tmp");
  if (!prepared) return std::move(prepared).error();
  auto ra = Reader::open(prepared->reference_dump);
  auto ca = Reader::open(prepared->candidate_dump);
  ::unlink(prepared->reference_dump.c_str());
  ::unlink(prepared->candidate_dump.c_str());
  if (!ra) return std::move(ra).error();
  if (!ca) return std::move(ca).error();
  auto rep = compare(*ra, *ca, prepared->options);
  if (!rep) return rep;
  DRIFTSCOPE_TRY(prepared->finish(*rep));
  return rep;
}

}  // namespace driftscope::compare_detail

namespace driftscope {

using namespace compare_detail;  // this file's helpers above

struct SetComparison::State {
  Side ref, cand;
  std::vector<std::string> warnings;  // logical tensors that could not be assembled
  std::unordered_map<uint64_t, TempSlot> ref_slots, cand_slots;  // by exec_index of the logical dumps
  Occurrences ref_occ, cand_occ;  // with data flow: to restore TensorDesc::inputs
  std::string directory;  // where prepare_sets() wrote the logical dumps; finish() uses it too
};

Result<SetComparison> prepare_sets(const std::string& reference, const std::string& candidate,
                                   const CompareOptions& options, const std::string& directory) {
  DRIFTSCOPE_TRY(validate(options));
  if (options.pairing == Pairing::positional)
    return make_error(Errc::unsupported, "dump sets pair by name: positional pairing (--pairs positional) "
                                         "has no global order across two layouts");
  if (!options.reference64.empty())
    return make_error(Errc::unsupported, "--reference64 is not supported with dump sets");
  auto renamer = Renamer::make(options.names);
  if (!renamer) return std::move(renamer).error();
  auto parsed = optional_filter(options.filter);
  if (!parsed) return std::move(parsed).error();
  const std::optional<Filter>& filter = *parsed;
  auto ref_side = load_side(reference, "reference", options, *renamer, true, filter);
  if (!ref_side) return std::move(ref_side).error();
  auto cand_side = load_side(candidate, "candidate", options, *renamer, false, filter);
  if (!cand_side) return std::move(cand_side).error();
  auto state = std::make_shared<SetComparison::State>();
  state->directory = directory;
  state->ref = std::move(*ref_side);
  state->cand = std::move(*cand_side);
  Side* ref = &state->ref;
  Side* cand = &state->cand;

  std::vector<std::string>& warnings = state->warnings;
  auto usable = [&](const Side& s, size_t i, std::string_view which) {
    const Logical& l = s.logicals[i];
    if (l.problem.empty()) return true;
    warnings.push_back(fmt::format("{} tensor '{}' (ranks {}) cannot be assembled: {}", which,
                                   l.first->info.name, ranks_text(l.ranks), l.problem));
    return false;
  };
  // Pairing (§7): by identity, then a replica meets the replica of the same coordinates, or the
  // other side's only copy.
  std::map<Identity, std::vector<size_t>> cand_by_id;
  for (size_t i = 0; i < cand->logicals.size(); ++i)
    if (usable(*cand, i, "candidate")) cand_by_id[identity_of(cand->logicals[i])].push_back(i);
  std::map<Identity, size_t> ref_count;
  std::vector<bool> ref_ok(ref->logicals.size());
  for (size_t i = 0; i < ref->logicals.size(); ++i)
    if ((ref_ok[i] = usable(*ref, i, "reference"))) ++ref_count[identity_of(ref->logicals[i])];

  // ds.inputs across ranks (§7.2): each side's logical tensors linked to those they came from.
  for (auto [side, which] : {std::pair{ref, "reference"}, std::pair{cand, "candidate"}})
    if (std::string w = link_dataflow(*side, which); !w.empty()) warnings.push_back(std::move(w));

  // The plan: which logical tensor each record of the two logical dumps is, in the reference's
  // order; then the ds.inputs of each (an input may be planned after its consumer).
  std::vector<PlannedRecord> ref_plan, cand_plan;
  std::map<std::tuple<std::string, uint8_t, uint16_t>, uint32_t> next_occ;  // per renamed name
  std::vector<bool> cand_used(cand->logicals.size(), false);
  uint64_t seq = 0;
  auto occ_for = [&](const Logical& l) {
    const TensorInfo& i = l.first->info;
    return next_occ[{l.pair_name, static_cast<uint8_t>(i.role), i.role_index}]++;
  };
  auto pin = [](const Coords& own, const Coords& partner) {  // own key, then the partner's other groups
    Coords p = own;
    for (const auto& gc : partner)
      if (std::none_of(own.begin(), own.end(), [&](const auto& x) { return x.first == gc.first; })) p.push_back(gc);
    return p;
  };
  for (size_t i = 0; i < ref->logicals.size(); ++i) {
    if (!ref_ok[i]) continue;
    const Logical& r = ref->logicals[i];
    const Identity id = identity_of(r);
    std::vector<size_t> partners;
    if (auto it = cand_by_id.find(id); it != cand_by_id.end()) {
      const bool ref_single = ref_count[id] == 1, cand_single = it->second.size() == 1;
      for (size_t c : it->second)
        if (ref_single || cand_single || cand->logicals[c].key == r.key) partners.push_back(c);
    }
    if (partners.empty()) {
      ref_plan.push_back({i, occ_for(r), seq++, r.key});
      continue;
    }
    for (size_t c : partners) {
      const uint32_t occ = occ_for(r);
      const Coords& ck = cand->logicals[c].key;
      ref_plan.push_back({i, occ, seq, pin(r.key, ck)});
      cand_plan.push_back({c, occ, seq++, pin(ck, r.key)});
      cand_used[c] = true;
    }
  }
  for (size_t c = 0; c < cand->logicals.size(); ++c)
    if (!cand_used[c] && cand->logicals[c].problem.empty())
      cand_plan.push_back({c, occ_for(cand->logicals[c]), seq++, cand->logicals[c].key});

  size_t too_long = 0;
  const auto ref_inputs = logical_inputs(*ref, ref_plan, too_long);
  const auto cand_inputs = logical_inputs(*cand, cand_plan, too_long);
  if (too_long)
    warnings.push_back(fmt::format("{} logical tensors name more inputs than one ds.inputs attribute holds "
                                   "({} bytes): they are judged without data flow", too_long,
                                   limits::kMaxValueLength));
  auto write = [&](const Side& side, const std::vector<PlannedRecord>& plan,
                   const std::vector<std::optional<std::string>>& inputs, std::string_view name,
                   std::unordered_map<uint64_t, TempSlot>& slots, Occurrences& occs) -> Result<std::string> {
    auto dump = TempDump::create(directory, name, run_metadata(side.set));
    if (!dump) return std::move(dump).error();
    Materializer out(side, *dump);
    for (size_t k = 0; k < plan.size(); ++k) {
      DRIFTSCOPE_TRY(out.write(plan[k], inputs[k]));
      const TensorInfo& f = side.logicals[plan[k].logical].first->info;
      slots[plan[k].seq] = TempSlot{plan[k].logical, f.occurrence, f.exec_index};
      if (side.dataflow) occs[{f.name, static_cast<uint8_t>(f.role), f.role_index, plan[k].occurrence}] = f.occurrence;
    }
    return dump->release();
  };
  auto ra = write(*ref, ref_plan, ref_inputs, "ref", state->ref_slots, state->ref_occ);
  if (!ra) return std::move(ra).error();
  auto ca = write(*cand, cand_plan, cand_inputs, "cand", state->cand_slots, state->cand_occ);
  if (!ca) {
    ::unlink(ra->c_str());
    return std::move(ca).error();
  }
  SetComparison out;
  out.options = options;
  out.options.filter.clear();  // applied to the stored records above, with their own exec_index
  out.reference_dump = std::move(*ra);
  out.candidate_dump = std::move(*ca);
  out.state = std::move(state);
  return out;
}


Result<void> SetComparison::finish(Report& report) const {
  if (!state) return make_error(Errc::invalid_argument, "finish() of a SetComparison that prepare_sets() did not make");
  const Side* ref = &state->ref;
  const Side* cand = &state->cand;
  const auto& ref_slots = state->ref_slots;
  const auto& cand_slots = state->cand_slots;
  const auto& warnings = state->warnings;
  for (const Reader& r : ref->set.readers) DRIFTSCOPE_TRY(r.check_unchanged());
  for (const Reader& r : cand->set.readers) DRIFTSCOPE_TRY(r.check_unchanged());

  // Pairs still carry the logical dumps' exec_index here: find their logical tensors.
  const bool by_cand = !cand->set.single || ref->set.single;  // whose ranks a pair names
  std::vector<std::pair<const Logical*, const Logical*>> logicals(report.pairs.size(), {nullptr, nullptr});
  for (size_t i = 0; i < report.pairs.size(); ++i) {
    auto r = ref_slots.find(report.pairs[i].ref.exec_index);
    auto c = cand_slots.find(report.pairs[i].cand.exec_index);
    if (r != ref_slots.end() && c != cand_slots.end())
      logicals[i] = {&ref->logicals[r->second.logical], &cand->logicals[c->second.logical]};
  }
  name_failing_shards(report, *ref, *cand, by_cand, logicals, options, state->directory);
  for (PairResult& p : report.pairs) {
    restore(p.ref, ref_slots, *ref, state->ref_occ);
    restore(p.cand, cand_slots, *cand, state->cand_occ);
  }
  for (TensorDesc& d : report.only_in_reference) restore(d, ref_slots, *ref, state->ref_occ);
  for (TensorDesc& d : report.only_in_candidate) restore(d, cand_slots, *cand, state->cand_occ);
  auto info = [](DumpInfo& di, const Side& s) {
    di.path = s.set.path;
    di.set = !s.set.single;
    di.world_size = s.set.world_size;
    di.state = worst_state(s.set);
    di.records = 0;
    for (const Reader& r : s.set.readers) di.records += r.record_count();
    di.metadata = s.set.single ? s.set.readers.front().header().metadata : s.set.metadata;
  };
  info(report.reference, *ref);
  info(report.candidate, *cand);
  report.sets = true;
  report.warnings.insert(report.warnings.begin(), warnings.begin(), warnings.end());
  // The ranks of the first divergent (NaN/Inf) logical tensor: every failing pair of its identity.
  auto ranks_of = [&](std::optional<size_t> first, std::vector<uint32_t>& out) {
    if (!first) return;
    const TensorDesc& f = report.pairs[*first].ref;
    for (const PairResult& p : report.pairs)
      if ((p.status == PairStatus::fail || p.status == PairStatus::silent_failure) && p.ref.name() == f.name() &&
          p.ref.role == f.role && p.ref.role_index == f.role_index && p.ref.occurrence == f.occurrence)
        add_sorted(out, report.pair_ranks(p));
  };
  ranks_of(report.first_divergence, report.first_divergence_ranks);
  ranks_of(report.first_nonfinite, report.first_nonfinite_ranks);
  for (const PairResult& p : report.pairs)
    if (p.status == PairStatus::fail || p.status == PairStatus::silent_failure)
      add_sorted(report.affected_ranks, report.pair_ranks(p));
  report.summary = summary_line(report);
  return {};
}


const std::vector<uint32_t>& Report::pair_ranks(const PairResult& p) const noexcept {
  if (p.shard_check() == "shards") return p.failing_shards();
  return candidate.set || !reference.set ? p.cand.ranks() : p.ref.ranks();
}

}  // namespace driftscope
