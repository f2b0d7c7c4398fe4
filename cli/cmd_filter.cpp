// driftscope filter IN OUT --filter F: rewrite the selected records into a new dump (issue 2 §5).
#include <memory>

#include <fmt/format.h>

#include "command.hpp"
#include "driftscope/reader.hpp"
#include "driftscope/writer.hpp"
#include "util.hpp"

namespace driftscope::cli {
namespace {

struct FilterArgs {
  std::string in;
  std::string out;
  std::string filter;
  bool quiet = false;
  bool salvage = false;
};

int run_filter(const FilterArgs& a) {
  if (auto f = Filter::parse(a.filter); !f)
    return fail(fmt::format("--filter: {}", f.error().to_string()));
  const std::string inputs[] = {a.in};
  if (auto same = refuse_input_as_output(a.out, inputs); !same) return fail(same.error().message);
  OpenOptions ropt;
  ropt.resync = a.salvage;
  auto opened = Reader::open(a.in, ropt);
  if (!opened) return fail(a.in, opened.error());
  const Reader& r = *opened;
  warn_damage(a.in, r);

  // Same metadata (the original "writer" included) and salt: filtering the same input twice
  // gives the same bytes, and the output still says which program recorded the run.
  WriterOptions opt;
  opt.metadata = r.header().metadata;
  opt.filter = a.filter;
  opt.fixed_salt = true;
  opt.salt = r.header().salt;
  auto out = AtomicOutput::create(a.out, inputs);
  if (!out) return fail(out.error().message);
  auto w = Writer::create(out->temp_path(), opt);
  if (!w) return fail(a.out, w.error());

  uint64_t kept = 0, filtered = 0, over_budget = 0, bytes = 0;
  for (const Record& rec : r.records()) {
    auto res = rec.kind == RecordKind::summary && rec.summary()
                   ? (*w)->write_summary(rec.info, *rec.summary())
                   : (*w)->write(rec.info, rec.payload);
    if (!res) {
      // Copying from a page cut off the input fails in write(2) (EFAULT): the cut is the error.
      if (auto c = r.check_unchanged(); !c) return fail(a.in, c.error());
      return fail(a.out, res.error());
    }
    switch (res->status) {
      case WriteStatus::written:
        ++kept;
        bytes += rec.payload.size();
        break;
      case WriteStatus::filtered: ++filtered; break;
      case WriteStatus::over_budget: ++over_budget; break;
    }
  }
  if (auto c = (*w)->close(); !c) return fail(a.out, c.error());
  if (auto c = r.check_unchanged(); !c) return fail(a.in, c.error());
  if (auto c = out->commit(); !c) return fail(c.error().message);
  if (!a.quiet) {
    std::string why;
    if (filtered) why += fmt::format(", {} filtered out", filtered);
    if (over_budget) why += fmt::format(", {} over the byte budget", over_budget);
    fmt::print(stderr, "driftscope: wrote {}: {} of {} records ({} payload bytes){}\n", a.out,
               kept, r.records().size(), fmt_count(bytes), why);
  }
  return kExitOk;
}

std::function<int()> setup_filter(CLI::App& app) {
  auto a = std::make_shared<FilterArgs>();
  auto* sub = app.add_subcommand("filter", "Copy the records that match a filter into a new dump");
  sub->add_option("IN", a->in, "the .tdump file to read (never modified)")->required();
  sub->add_option("OUT", a->out, "the .tdump file to write (replaced if it exists)")->required();
  sub->add_option("-f,--filter", a->filter,
                  "which tensors to keep (docs/filters.md); default: all of them");
  sub->add_flag("-q,--quiet", a->quiet, "do not print the one-line summary on stderr");
  sub->add_flag("--salvage", a->salvage,
                "on a corrupt IN, also copy the valid records found after the damage");
  sub->footer(R"HELP(
Writes the records of IN that pass the filter to OUT, in the same order, with the same run
metadata, salt and record fields (names, execution indices, occurrences, roles, op types,
axes, attributes, encodings); summary records stay summaries. OUT is written to a temporary
file and renamed into place, so it is complete or absent. OUT may not be IN.

IN may be damaged: its complete records are copied and OUT is a clean file, so
`driftscope filter cut.tdump fixed.tdump` repairs a dump left by a killed run. With
--salvage, records after a corrupted one are recovered too (the reader searches for the next
valid record frame past the damage).

Filter syntax (see docs/filters.md): glob patterns on names ('encoder.layers.1*'),
exclusions ('-*.dropout'), op=, role=, dtype=, rank/numel/dim predicates, every=N, and
budget=BYTES (keep tensors until their payloads reach that size).

Examples:
  driftscope filter run.tdump layers.tdump --filter 'encoder.layers.*'
  driftscope filter run.tdump small.tdump --filter 'numel<=1M budget=100MiB'
  driftscope filter crashed.tdump repaired.tdump)HELP");
  return [a] { return run_filter(*a); };
}

}  // namespace

DRIFTSCOPE_COMMAND(filter, 50, setup_filter);

}  // namespace driftscope::cli
