// driftscope verify FILE...: exit 0 intact, 1 damaged, 2 unreadable (issue 2 §5).
#include <memory>

#include <fmt/format.h>

#include "command.hpp"
#include "driftscope/dumpset.hpp"
#include "driftscope/reader.hpp"
#include "util.hpp"

namespace driftscope::cli {
namespace {

struct VerifyArgs {
  std::vector<std::string> files;
  bool strict = false;
  bool quiet = false;
};

int verify_one(const std::string& file, const VerifyArgs& a) {
  OpenOptions scan_opt;
  scan_opt.verify = Verify::full;
  scan_opt.use_index = false;
  auto scanned = Reader::open(file, scan_opt);
  if (!scanned) {
    fail(file, scanned.error());
    return kExitTrouble;
  }
  const Reader& r = *scanned;
  const Integrity& in = r.integrity();
  const size_t n = r.records().size();
  // A dump without records is intact but holds nothing (a run that died before its first
  // tensor): say so, and --strict counts it as damaged, like an unfinished run.
  const bool empty = n == 0;
  const std::string records =
      empty ? std::string("no records (empty: the run recorded nothing)") : fmt::format("{} records", n);
  auto say = [&](std::string_view verdict, const std::string& text) {
    if (!a.quiet) fmt::print("{}\n", printable(fmt::format("{}: {}: {}", file, verdict, text)));
  };
  auto say_warnings = [&] {
    if (!a.quiet)
      for (const Error& e : in.warnings)
        fmt::print("{}\n", printable(fmt::format("{}: warning: {}: {}", file, errc_name(e.code),
                                                  e.message)));
  };

  switch (in.state) {
    case FileState::clean:
      // The reader judged the footer index entry by entry and slot by slot against the scan
      // (docs/format.md §3.4); an unsound one makes the file corrupt, below.
      say(empty && a.strict ? "DAMAGED" : "OK",
          fmt::format("clean, {}, {}, every checksum verified, index agrees with the scan", records,
                      fmt_bytes(in.file_size)));
      say_warnings();
      return empty && a.strict ? kExitDifferent : kExitOk;
    case FileState::unfinished:
      say(a.strict ? "DAMAGED" : "OK",
          fmt::format("unfinished (no END record: the run crashed or is still running), {}, {}, "
                      "every checksum verified", records, fmt_bytes(in.file_size)));
      say_warnings();
      return a.strict ? kExitDifferent : kExitOk;
    case FileState::cut:
      say("DAMAGED", fmt::format("cut at offset {}: {} bytes discarded (torn tail); {} complete "
                                 "records recovered before it", in.cut_offset, in.discarded_bytes,
                                 n));
      say_warnings();
      return kExitDifferent;
    case FileState::corrupt: {
      std::string text = fmt::format("corrupt: {}; {} records recovered before it", corruption_text(in), n);
      // How much a resynchronising reader would still save after the damage.
      OpenOptions re_opt;
      re_opt.use_index = false;
      re_opt.resync = true;
      if (auto re = Reader::open(file, re_opt); re && re->records().size() > n)
        text += fmt::format(", {} more after resynchronising past the damage",
                            re->records().size() - n);
      say("DAMAGED", text);
      say_warnings();
      return kExitDifferent;
    }
  }
  return kExitTrouble;
}

// A dump set (docs/dumpsets.md): the manifest, every rank's file as verify_one checks a dump, and
// the ranks' ds.rank / ds.world_size / ds.coords metadata against the manifest.
int verify_set(const std::string& path, const VerifyArgs& a) {
  auto set = DumpSet::open_manifest(path);
  if (!set) return fail(path, set.error());
  int worst = kExitOk;
  for (const RankEntry& e : set->ranks) worst = std::max(worst, verify_one(e.path, a));
  if (worst == kExitTrouble) return worst;
  OpenOptions o;
  o.verify = Verify::frames;  // the records were checked above; only the headers matter here
  for (const RankEntry& e : set->ranks) {
    auto r = Reader::open(e.path, o);
    if (!r) return fail(e.path, r.error());
    set->readers.push_back(std::move(*r));
  }
  std::string layout;
  for (const auto& [g, n] : set->groups) layout += fmt::format("{}{}={}", layout.empty() ? "" : ",", g, n);
  if (auto ok = set->check_rank_metadata(); !ok) {
    if (!a.quiet) fmt::print("{}\n", printable(fmt::format("{}: INVALID: {}", path, ok.error().message)));
    return kExitDifferent;
  }
  if (!a.quiet)
    fmt::print("{}\n", printable(fmt::format("{}: {}: set of {} ranks ({}), manifest valid, every rank's "
                                              "metadata agrees with it", path, worst == kExitOk ? "OK" : "DAMAGED",
                                              set->world_size, layout.empty() ? "no groups" : layout)));
  return worst;
}

int run_verify(const VerifyArgs& a) {
  int worst = kExitOk;
  for (const auto& f : a.files)
    worst = std::max(worst, is_dump_set_path(f) ? verify_set(f, a) : verify_one(f, a));
  return worst;
}

std::function<int()> setup_verify(CLI::App& app) {
  auto a = std::make_shared<VerifyArgs>();
  auto* sub = app.add_subcommand("verify", "Check every checksum and the index of dumps");
  sub->add_option("FILE", a->files, "one or more .tdump files or dump sets (directory or driftscope-set.json)")->required();
  sub->add_flag("--strict", a->strict,
                "count an unfinished run (no END record) or an empty one (no records) as damaged");
  sub->add_flag("-q,--quiet", a->quiet, "print nothing; only the exit status tells");
  sub->footer(R"HELP(
Reads every record of each file, checks every CRC-32, padding byte and field, and checks
that the footer index agrees with a full scan (same records, same offsets, exactly the hash
table those entries give); an unsound index is bad_index at the field that disagrees. The
verdict is the reader's, the same one `info` shows. One line per file on stdout:
  FILE: OK: clean, ...              intact
  FILE: OK: unfinished ...          intact, but the run never wrote its END record
  FILE: OK: ... no records (empty)  intact, but the run recorded nothing (--strict: DAMAGED)
  FILE: DAMAGED: cut at offset ...  torn tail: what was recovered and where the cut is
  FILE: DAMAGED: corrupt: ...       the first bad record: error code, tensor, offset

A dump set (a directory holding driftscope-set.json, docs/dumpsets.md): the manifest is
validated (an invalid one is exit 2, one line naming the key), every rank's file is verified
as above, then each rank's ds.rank, ds.world_size and ds.coords metadata is checked against
the manifest; a last line says "SET: OK: set of N ranks ...", or "SET: INVALID: ..." (exit 1).

Exit status: 0 every file intact, 1 some file damaged (its complete records are still
readable: `driftscope filter DAMAGED.tdump FIXED.tdump` rewrites them into a clean file),
2 some file unreadable (not a TDUMP file, bad header, I/O error).

Examples:
  driftscope verify run.tdump
  driftscope verify --strict runs/*.tdump && echo all good)HELP");
  return [a] { return run_verify(*a); };
}

}  // namespace

DRIFTSCOPE_COMMAND(verify, 40, setup_verify);

}  // namespace driftscope::cli
