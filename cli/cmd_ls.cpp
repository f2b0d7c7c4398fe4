// driftscope ls FILE: one line per tensor, or a JSON array (issue 2 §5).
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.hpp"
#include "driftscope/dumpset.hpp"
#include "driftscope/filter.hpp"
#include "driftscope/reader.hpp"
#include "util.hpp"

namespace driftscope::cli {

namespace {

struct LsArgs {
  std::string file;
  std::string filter;
  bool json = false;
  bool no_stats = false;
  bool wide = false;
};

struct Column {
  std::string title;
  bool right;   // numbers align right
  int drop;     // order in which columns are dropped to fit the terminal (0: never)
  std::vector<std::string> cells;
  size_t width = 0;
  bool shown = true;
};

int run_ls(const LsArgs& a) {
  auto filter = Filter::parse(a.filter);
  if (!filter) return fail(fmt::format("--filter: {}", filter.error().to_string()));
  // A dump set (docs/dumpsets.md) lists every rank's records in the global order, with a rank
  // column; a single dump is a set of one without it.
  auto opened = DumpSet::open(a.file);
  if (!opened) return fail(a.file, opened.error());
  const DumpSet& dset = *opened;
  for (const RankEntry& e : dset.ranks) warn_damage(e.path, dset.readers[e.rank]);

  std::vector<const Record*> rows;
  std::vector<uint32_t> row_rank;
  for (const auto& [rank, rec] : dset.records_in_global_order())
    if (filter->accepts(rec->info, rec->info.exec_index)) {
      rows.push_back(rec);
      row_rank.push_back(rank);
    }

  std::vector<std::optional<TensorStats>> stats(rows.size());
  if (!a.no_stats) {
    for (size_t i = 0; i < rows.size(); ++i) {
      auto s = record_stats(*rows[i]);
      if (!s) return fail(a.file, s.error());
      stats[i] = *s;
    }
  }
  for (const RankEntry& e : dset.ranks)
    if (auto c = dset.readers[e.rank].check_unchanged(); !c) return fail(e.path, c.error());

  if (a.json) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (size_t i = 0; i < rows.size(); ++i) {
      const Record& rec = *rows[i];
      const TensorInfo& t = rec.info;
      nlohmann::ordered_json j;
      if (!dset.single) j["rank"] = row_rank[i];
      j["index"] = t.exec_index;
      j["name"] = t.name;
      j["occurrence"] = t.occurrence;
      j["role"] = role_name(t.role);
      j["role_index"] = t.role_index;
      j["kind"] = kind_name(rec.kind);
      j["op_type"] = t.op_type;
      j["dtype"] = dtype_name(t.dtype);
      j["shape"] = t.shape;
      j["axes"] = t.axes;
      j["numel"] = t.numel();
      j["bytes"] = rec.payload.size();
      j["encoding"] = t.encoding.kind == EncodingKind::raw           ? "raw"
                      : t.encoding.kind == EncodingKind::affine_tensor ? "affine_tensor"
                                                                       : "affine_channel";
      // The quantisation parameters: value = scale * (q - zero_point), per tensor or per
      // channel along `axis` (null unless per channel); empty lists for raw tensors.
      j["scales"] = t.encoding.scales;
      j["zero_points"] = t.encoding.zero_points;
      j["axis"] = t.encoding.kind == EncodingKind::affine_channel
                      ? nlohmann::ordered_json(t.encoding.axis)
                      : nlohmann::ordered_json(nullptr);
      if (rec.kind == RecordKind::summary && rec.summary()) {
        // A SUMMARY record's projection (docs/light-mode.md): seed as hex like `info`'s salt.
        j["projection_seed"] = fmt_hex64(rec.summary()->projection_seed);
        j["projection_kind"] = rec.summary()->projection_kind;
        j["projection_dim"] = rec.summary()->projection.size();
      }
      nlohmann::ordered_json attrs = nlohmann::ordered_json::object();
      for (const auto& [k, v] : t.attrs) attrs[k] = v;
      j["attrs"] = attrs;
      if (stats[i]) {
        const TensorStats& s = *stats[i];
        // JSON has no NaN: min/max/mean/std are null when no finite value exists.
        j["min"] = s.min;
        j["max"] = s.max;
        j["mean"] = s.mean;
        j["std"] = s.std;
        j["l2_norm"] = s.l2_norm;
        j["nan"] = s.nan_count;
        j["posinf"] = s.posinf_count;
        j["neginf"] = s.neginf_count;
        j["zero"] = s.zero_count;
      }
      j["offset"] = rec.offset;
      j["size"] = rec.size;
      j["payload_offset"] = rec.payload_offset;
      arr.push_back(std::move(j));
    }
    fmt::print("{}\n", arr.dump(2));
    return kExitOk;
  }

  bool any_role = false, any_summary = false;
  for (const Record* rec : rows) {
    any_role |= rec->info.role != Role::output || rec->info.role_index != 0;
    any_summary |= rec->kind == RecordKind::summary;
  }
  std::vector<Column> cols = {
      {"rank", true, 0, {}},    {"#", true, 0, {}},       {"name", false, 0, {}},   {"occ", true, 1, {}},
      {"role", false, 0, {}},   {"kind", false, 0, {}},   {"op", false, 3, {}},
      {"dtype", false, 0, {}},  {"shape", false, 0, {}},  {"axes", false, 2, {}},
      {"bytes", true, 4, {}},   {"min", true, 0, {}},     {"max", true, 0, {}},
      {"mean", true, 6, {}},    {"std", true, 5, {}},     {"nan", true, 0, {}},
      {"inf", true, 0, {}},     {"zero", true, 7, {}},
  };
  enum { kRank, kIdx, kName, kOcc, kRole, kKind, kOp, kDtype, kShape, kAxes, kBytes, kMin, kMax, kMean,
         kStd, kNan, kInf, kZero };
  cols[kRank].shown = !dset.single;
  cols[kRole].shown = any_role;
  cols[kKind].shown = any_summary;
  if (a.no_stats)
    for (int c : {kMin, kMax, kMean, kStd, kNan, kInf, kZero}) cols[static_cast<size_t>(c)].shown = false;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Record& rec = *rows[i];
    const TensorInfo& t = rec.info;
    // Names, op types and axis names come from the file: escaped before widths are measured.
    auto set = [&](int c, std::string_view v) { cols[static_cast<size_t>(c)].cells.push_back(printable(v)); };
    set(kRank, std::to_string(row_rank[i]));
    set(kIdx, std::to_string(t.exec_index));
    set(kName, t.name);
    set(kOcc, std::to_string(t.occurrence));
    set(kRole, fmt_role(t.role, t.role_index));
    set(kKind, std::string(kind_name(rec.kind)));
    set(kOp, t.op_type.empty() ? "-" : t.op_type);
    set(kDtype, std::string(dtype_name(t.dtype)));
    set(kShape, fmt_shape(t.shape, true));
    set(kAxes, t.axes.empty() ? "-" : join_axes(t.axes));
    set(kBytes, std::to_string(rec.payload.size()));
    const TensorStats s = stats[i].value_or(TensorStats{});
    set(kMin, fmt_num(s.min));
    set(kMax, fmt_num(s.max));
    set(kMean, fmt_num(s.mean));
    set(kStd, fmt_num(s.std));
    set(kNan, std::to_string(s.nan_count));
    set(kInf, std::to_string(s.posinf_count + s.neginf_count));
    set(kZero, std::to_string(s.zero_count));
  }
  for (auto& c : cols) {
    c.width = display_width(c.title);
    for (const auto& v : c.cells) c.width = std::max(c.width, display_width(v));
  }
  auto total = [&] {
    size_t w = 0, n = 0;
    for (const auto& c : cols)
      if (c.shown) w += c.width, ++n;
    return n ? w + 2 * (n - 1) : 0;
  };
  size_t width = a.wide ? 0 : terminal_width();
  if (width && total() > width) {
    // Drop the columns a reader misses least (Column::drop order; occ only while every
    // occurrence is 0, since otherwise repeated names become indistinguishable), then
    // shorten names in the middle, down to 16 columns.
    bool any_occ = false;
    for (const Record* rec : rows) any_occ |= rec->info.occurrence != 0;
    if (any_occ) cols[kOcc].drop = 0;
    for (int order = 1; order <= 7 && total() > width; ++order)
      for (auto& c : cols)
        if (c.drop == order) c.shown = false;
    Column& name = cols[kName];
    if (total() > width) {
      size_t excess = total() - width;
      size_t target = std::max<size_t>(16, name.width > excess ? name.width - excess : 0);
      if (target < name.width) {
        for (auto& v : name.cells) v = elide_middle(v, target);
        name.width = std::max(display_width(name.title), target);
      }
    }
  }
  auto print_row = [&](auto cell) {
    std::string line;
    bool first = true;
    for (size_t c = 0; c < cols.size(); ++c) {
      if (!cols[c].shown) continue;
      std::string v = cell(c);
      size_t pad = cols[c].width - display_width(v);
      if (!first) line += "  ";
      first = false;
      if (cols[c].right) line += std::string(pad, ' ') + v;
      else line += v + std::string(pad, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    fmt::print("{}\n", line);
  };
  print_row([&](size_t c) { return cols[c].title; });
  for (size_t i = 0; i < rows.size(); ++i) print_row([&](size_t c) { return cols[c].cells[i]; });
  return kExitOk;
}

std::function<int()> setup_ls(CLI::App& app) {
  auto a = std::make_shared<LsArgs>();
  auto* sub = app.add_subcommand("ls", "List the tensors of a dump, one line each, with statistics");
  sub->add_option("FILE", a->file, "the .tdump file, or a dump set (its directory or driftscope-set.json)")->required();
  sub->add_option("-f,--filter", a->filter,
                  "only tensors matching this filter (docs/filters.md), e.g. 'encoder.* dtype=f16'");
  sub->add_flag("--json", a->json,
                "print a JSON array of every field (adds offset, size, payload_offset, attrs, "
                "quantisation parameters)");
  sub->add_flag("--no-stats", a->no_stats, "skip min/max/mean/std and counts (faster on huge dumps)");
  sub->add_flag("--wide", a->wide, "never shorten names or drop columns to fit the terminal");
  sub->footer(R"HELP(
Columns: # (execution index), name (module path), occ (occurrence: 0 for the first call of a
module, 1 for the second, ...), op (op or module type), dtype, shape, axes (axis names),
bytes (payload bytes), min/max/mean/std of the finite values (std is the population standard
deviation), and the number of NaN, +/-Inf and zero elements. A role column appears when some
tensors are module inputs or parameters, a kind column when some records are summaries (light
mode: statistics without values).

A dump set (a directory with driftscope-set.json, docs/dumpsets.md) lists the records of every
rank in the set's global order with a leading rank column (and "rank" in --json).

On a terminal narrower than the table, long names are shortened in the middle and the least
useful columns (occ when every occurrence is 0, axes, op, bytes, std, mean, zero) are
dropped; pipe the output or pass
--wide to get everything. $COLUMNS overrides the terminal width.

--json prints every field (quantisation scales, zero points and axis; a summary record's
projection seed, kind and dimension), plus each record's offset and size in the file (so tools
can reason about truncation). NaN statistics (a tensor with no finite value) are null.

Examples:
  driftscope ls run.tdump
  driftscope ls run.tdump --filter 'encoder.layers.1*'
  driftscope ls run.tdump --filter 'dtype=f16 rank>=2' --json)HELP");
  return [a] { return run_ls(*a); };
}

}  // namespace

DRIFTSCOPE_COMMAND(ls, 20, setup_ls);

}  // namespace driftscope::cli
