// driftscope info FILE: what a dump is, at a glance (issue 2 §5).
#include <map>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.hpp"
#include "driftscope/dumpset.hpp"
#include "driftscope/reader.hpp"
#include "util.hpp"

namespace driftscope::cli {
namespace {

struct InfoArgs {
  std::string file;
  bool json = false;
};

std::string integrity_line(const Integrity& in, const Reader& r) {
  switch (in.state) {
    case FileState::clean:
      return fmt::format("clean: {} records{}", r.records().size(),
                         in.checksums_verified ? ", every checksum verified" : "");
    case FileState::unfinished:
      return fmt::format("unfinished: {} complete records, no END record", r.records().size());
    case FileState::cut:
      return fmt::format("cut at offset {}, {} bytes discarded (torn tail); {} complete records "
                         "before it", in.cut_offset, in.discarded_bytes, r.records().size());
    case FileState::corrupt: {
      std::string s = "corrupt: " + corruption_text(in);
      s += fmt::format("; {} records before it", r.records().size());
      return s;
    }
  }
  return "unknown";
}

// A dump set (docs/dumpsets.md): the manifest's layout, then one line per rank.
int info_set(const InfoArgs& a) {
  auto opened = DumpSet::open(a.file);
  if (!opened) return fail(a.file, opened.error());
  const DumpSet& s = *opened;
  auto agree = s.check_rank_metadata();
  std::string layout;
  for (const auto& [g, n] : s.groups) layout += fmt::format("{}{}={}", layout.empty() ? "" : ",", g, n);
  const char* order = s.order == SetOrder::lockstep ? "lockstep" : "pipeline";
  if (a.json) {
    nlohmann::ordered_json j;
    j["set"] = a.file;
    j["format"] = kDumpSetFormat;
    j["world_size"] = s.world_size;
    nlohmann::ordered_json groups = nlohmann::ordered_json::object();
    for (const auto& [g, n] : s.groups) groups[g] = n;
    j["groups"] = groups;
    j["order"] = order;
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : s.metadata) meta[k] = v;
    j["metadata"] = meta;
    j["metadata_agrees"] = agree.ok();
    if (!agree) j["metadata_problem"] = agree.error().message;
    nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
    for (const RankEntry& e : s.ranks) {
      const Reader& r = s.readers[e.rank];
      ranks.push_back({{"rank", e.rank}, {"coords", s.coords_text(e.rank)}, {"file", e.file},
                       {"state", file_state_name(r.integrity().state)}, {"records", r.records().size()},
                       {"file_bytes", r.integrity().file_size}});
    }
    j["ranks"] = ranks;
    fmt::print("{}\n", j.dump(2));
    return kExitOk;
  }
  auto row = [](std::string_view key, const std::string& value) {
    fmt::print("{:<11} {}\n", key, printable(value));
  };
  row("set", a.file);
  row("format", std::string(kDumpSetFormat));
  row("layout", fmt::format("world size {}, groups {}, order {}", s.world_size, layout.empty() ? "-" : layout, order));
  row("metadata", agree ? std::string("every rank's ds.rank, ds.world_size and ds.coords agree with the manifest")
                        : "DISAGREES: " + agree.error().message);
  for (const auto& [k, v] : s.metadata) row("  " + k, v);
  for (const RankEntry& e : s.ranks) {
    const Reader& r = s.readers[e.rank];
    row(fmt::format("rank {}", e.rank), fmt::format("{}  {}  {}, {} records, {}", s.coords_text(e.rank), e.file,
                                                   file_state_name(r.integrity().state), r.records().size(),
                                                   fmt_bytes(r.integrity().file_size)));
  }
  return kExitOk;
}

int run_info(const InfoArgs& a) {
  if (is_dump_set_path(a.file)) return info_set(a);
  auto opened = Reader::open(a.file);
  if (!opened) return fail(a.file, opened.error());
  const Reader& r = *opened;
  const FileHeader& h = r.header();
  const Integrity& in = r.integrity();

  uint64_t tensors = 0, summaries = 0, payload = 0;
  std::map<std::string, uint64_t> by_dtype, by_role;
  std::map<std::string_view, uint64_t> names;
  for (const Record& rec : r.records()) {
    (rec.kind == RecordKind::summary ? summaries : tensors)++;
    payload += rec.payload.size();
    by_dtype[std::string(dtype_name(rec.info.dtype))]++;
    by_role[std::string(role_name(rec.info.role))]++;
    names[rec.info.name]++;
  }
  bool finished = in.state == FileState::clean;

  if (a.json) {
    nlohmann::ordered_json j;
    j["file"] = a.file;
    j["version"] = fmt::format("{}.{}", h.version_major, h.version_minor);
    j["salt"] = fmt_hex64(h.salt);
    j["required_features"] = h.required_features;
    j["optional_features"] = h.optional_features;
    j["header_length"] = h.header_length;
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : h.metadata) meta[k] = v;
    j["metadata"] = meta;
    j["file_bytes"] = in.file_size;
    j["payload_bytes"] = payload;
    j["records"] = r.records().size();
    j["tensors"] = tensors;
    j["summaries"] = summaries;
    j["names"] = names.size();
    j["dtypes"] = by_dtype;
    j["roles"] = by_role;
    j["finished"] = finished;
    j["state"] = file_state_name(in.state);
    j["valid_end"] = in.valid_end;
    if (in.state == FileState::cut) {
      j["cut_offset"] = in.cut_offset;
      j["discarded_bytes"] = in.discarded_bytes;
    }
    if (in.corruption) {
      j["corruption"] = {{"code", errc_name(in.corruption->code)},
                         {"offset", in.corruption->offset},
                         {"tensor", in.corrupt_name},
                         {"message", in.corruption->message}};
    }
    nlohmann::ordered_json w = nlohmann::ordered_json::array();
    for (const Error& e : in.warnings)
      w.push_back({{"code", errc_name(e.code)}, {"offset", e.offset}, {"message", e.message}});
    j["warnings"] = w;
    fmt::print("{}\n", j.dump(2));
    return kExitOk;
  }

  // Metadata, warnings and corruption messages quote the file: one escaping rule for all.
  auto row = [](std::string_view key, const std::string& value) {
    fmt::print("{:<11} {}\n", key, printable(value));
  };
  row("file", a.file);
  row("format", fmt::format("TDUMP {}.{}, salt {}", h.version_major, h.version_minor,
                            fmt_hex64(h.salt)));
  row("features", fmt::format("required 0x{:08x}, optional 0x{:08x}", h.required_features,
                              h.optional_features));
  row("size", fmt_bytes(in.file_size));
  row("payload", fmt_bytes(payload));
  row("records", fmt::format("{} ({} tensor, {} summary), {} distinct names", r.records().size(),
                             tensors, summaries, names.size()));
  auto join_counts = [](const std::map<std::string, uint64_t>& m) {
    std::string s;
    for (const auto& [k, v] : m) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", k, v);
    return s.empty() ? std::string("-") : s;
  };
  row("dtypes", join_counts(by_dtype));
  row("roles", join_counts(by_role));
  row("finished", finished ? "yes (END record present)"
                  : in.state == FileState::corrupt
                      ? "unknown (the scan stopped at the corruption)"
                      : "no (no END record: the run crashed, was killed or is still running)");
  row("integrity", integrity_line(in, r));
  for (const Error& e : in.warnings)
    row("warning", fmt::format("{}: {}", errc_name(e.code), e.message));
  row("metadata", fmt::format("{} entries", h.metadata.size()));
  size_t kw = 0;
  for (const auto& [k, v] : h.metadata) kw = std::max(kw, display_width(printable(k)));
  for (const auto& [k, v] : h.metadata) {
    std::string key = printable(k);
    fmt::print("  {}{} {}\n", key, std::string(kw - display_width(key), ' '), printable(v));
  }
  return kExitOk;
}

std::function<int()> setup_info(CLI::App& app) {
  auto a = std::make_shared<InfoArgs>();
  auto* sub = app.add_subcommand("info", "Summarise a dump: header, run metadata, counts, integrity");
  sub->add_option("FILE", a->file, "the .tdump file, or a dump set (directory or driftscope-set.json)")->required();
  sub->add_flag("--json", a->json, "print one JSON object instead of text");
  sub->footer(R"HELP(
Shows the format version and salt, the run metadata (framework, backend, device, ...), how
many tensors of which dtype and role the dump holds, its size, whether the run finished (an
END record is present) and the integrity of the file:
  clean       every record is valid and the run finished
  unfinished  every record is valid but there is no END record (crashed or still running)
  cut         the last record is incomplete (a writer killed mid-write); it is dropped
  corrupt     a record fails a check and more data follows it (code, offset, tensor name)
A dump set (a directory holding driftscope-set.json, docs/dumpsets.md) shows its layout
(world size, parallel groups, order), the manifest metadata, whether every rank's ds.* metadata
agrees with the manifest, and one line per rank: coordinates, file, integrity, records, size.
Exit status: 0 when the file could be read (even if damaged: see `driftscope verify`),
2 when it is not a readable TDUMP file.

Examples:
  driftscope info run.tdump
  driftscope info --json run.tdump | jq .state)HELP");
  return [a] { return run_info(*a); };
}

}  // namespace

DRIFTSCOPE_COMMAND(info, 10, setup_info);

}  // namespace driftscope::cli
