// driftscope compare REFERENCE CANDIDATE: align two dumps, measure every pair, name the first
// tensor that diverges (issue 3; docs/compare.md). Exit 0 pass, 1 diverged, 2 trouble, 3 silent
// failure. The summary line comes first on stdout; the progress bar goes to stderr on a TTY only.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "command.hpp"
#include "driftscope/compare.hpp"
#include "driftscope/compare_options.hpp"
#include "driftscope/report.hpp"
#include "util.hpp"

namespace driftscope::cli {
namespace {

// The flags land in the library's CompareSettings as given: the range checks are the library's
// (CompareSettings::resolve), the same for the CLI, the C ABI and Python. The flags themselves are
// the rows of compare_options.hpp (setup_compare registers them).
struct CompareArgs {
  std::string reference, candidate;
  CompareSettings settings;
  CompareCommandOptions command;
};

// `--engine ray` runs in the Python package (driftscope/_compare/cli.py, docs/howto/cluster.md),
// which measures the pairs as Ray tasks and assembles the report with this library. It gets the
// options as they were resolved here, one JSON object by the table's names, not a command line
// rebuilt flag by flag and parsed again.
std::vector<std::string> ray_args(const CompareArgs& a) {
  return {a.reference, a.candidate, "--options-json", compare_options_to_json(a.settings, &a.command)};
}

constexpr const char* kRayHelp = "driftscope compare --engine ray runs in the driftscope Python package with ray "
                                 "installed (docs/howto/cluster.md)\n";

// Redraws one line on stderr; only used when stderr is a terminal.
class Progress {
 public:
  explicit Progress(bool on) : on_(on) {}
  ~Progress() { finish(); }
  void update(size_t done, size_t total) {
    if (!on_ || total == 0) return;
    const size_t width = 30;
    size_t filled = done * width / total;
    std::fprintf(stderr, "\rcomparing [%s%s] %zu/%zu pairs", std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), done, total);
    std::fflush(stderr);
    drawn_ = true;
  }
  void finish() {
    if (drawn_) std::fprintf(stderr, "\r\x1b[K");
    drawn_ = false;
  }

 private:
  bool on_;
  bool drawn_ = false;
};

int run_compare(const CompareArgs& a) {
  const CompareCommandOptions& c = a.command;
  auto resolved = a.settings.resolve();
  if (!resolved) return fail(resolved.error().to_string());
  if (c.engine == "ray") return run_python("compare", kRayHelp, ray_args(a));
  if (!c.ray_address.empty() || c.ray_parts || !c.ray_scratch.empty())
    return fail("--ray-address, --ray-parts and --ray-scratch need --engine ray");
  CompareOptions o = std::move(*resolved);

  if (auto ok = check_compare_outputs(a.reference, a.candidate, a.settings, c); !ok)
    return fail(ok.error().message);
  const std::vector<std::string> inputs = compare_inputs(a.reference, a.candidate, a.settings);
  const bool to_stdout = c.json == "-" || c.markdown == "-" || c.html == "-" || c.plot == "-" ||
                         c.model_explorer == "-";
  // The page's heatmaps, histograms and worst elements come from one more pass per pair.
  o.details = !c.html.empty();

  Progress progress(!c.no_progress && !c.quiet && ::isatty(STDERR_FILENO));
  o.progress = [&progress](size_t done, size_t total) { progress.update(done, total); };
  auto rep = compare_files(a.reference, a.candidate, o);
  progress.finish();
  if (!rep) return fail(rep.error().to_string());
  // Deliberately never freed: the process ends right after the reports are written, and freeing
  // a million pairs' strings and vectors one by one cost ~0.3 s at exit (issue 13 §5). Reachable
  // from a static, so leak checkers do not count it. The library itself never does this.
  static Report* kept = nullptr;
  kept = new Report(std::move(*rep));
  const Report& r = *kept;

  if (!c.json.empty()) {
    // Streamed pair by pair: the whole text of a large report is never held in memory.
    auto out = OutputFile::open(c.json, inputs);
    if (!out) return fail(out.error().to_string());
    auto w = report_to_json(r, 2, [&](std::string_view s) { return out->write(s); });
    if (w) w = out->commit();
    if (!w) return fail(w.error().to_string());
  }
  if (!c.markdown.empty())
    if (auto w = write_output_file(c.markdown, report_to_markdown(r), inputs); !w)
      return fail(w.error().to_string());
  if (!c.html.empty())
    if (auto w = write_output_file(c.html, report_to_html(r), inputs); !w)
      return fail(w.error().to_string());
  if (!c.plot.empty()) {
    auto png = report_to_png(r);
    if (!png) return fail(png.error().to_string());
    if (auto w = write_output_file(c.plot, *png, inputs); !w) return fail(w.error().to_string());
  }
  if (!c.model_explorer.empty())
    if (auto w = write_output_file(c.model_explorer, report_to_model_explorer(r), inputs); !w)
      return fail(w.error().to_string());
  if (!to_stdout) {
    if (c.quiet) {
      fmt::print("{}\n", printable(r.summary));
    } else {
      TextOptions t;
      bool tty = ::isatty(STDOUT_FILENO);
      const char* no_color = std::getenv("NO_COLOR");
      t.color = c.color == "always" || (c.color == "auto" && tty && !(no_color && *no_color));
      size_t w = terminal_width();
      t.width = static_cast<unsigned>(w ? std::max<size_t>(w, 60) : 120);
      t.all = c.all;
      std::string text = report_to_text(r, t);
      std::fwrite(text.data(), 1, text.size(), stdout);
    }
  }
  std::fflush(stdout);
  return verdict_exit_code(r.verdict);
}

std::function<int()> setup_compare(CLI::App& app) {
  auto a = std::make_shared<CompareArgs>();
  auto* sub = app.add_subcommand("compare", "Compare two dumps and name the first tensor that diverges");
  sub->add_option("REFERENCE", a->reference,
                  "the trusted run; its execution order defines 'first' and errors are relative to it")
      ->required();
  sub->add_option("CANDIDATE", a->candidate, "the run under test (a dump or a dump set directory)")->required();
  // Only the command's own options are range- and choice-checked by CLI11; the settings' values
  // go to CompareSettings::resolve(), so a bad one gets the message every front end gives.
  DRIFTSCOPE_CLI_ROWS(DRIFTSCOPE_COMPARE_SETTINGS, sub, a->settings, false);
  DRIFTSCOPE_CLI_ROWS(DRIFTSCOPE_COMPARE_COMMAND, sub, a->command, true);

  sub->footer(R"HELP(
Pairs tensors by (name, role, occurrence), measures every pair in one float64 pass and
judges it: NaN positions first, then Inf signs, then the tolerance. The first line names
the first divergent tensor; the report then says whether that op introduced the error or
inherited it, shows its neighbourhood, the worst tensors, the error growth along the run
and the biggest amplifiers.

Default tolerance by the coarser dtype of a pair (or the run's `precision` metadata):
  f64 sqnr>=200dB  f32 sqnr>=80dB  f16 sqnr>=40dB  bf16 sqnr>=30dB  fp8 e4m3 15dB / e5m2 10dB
  quantized (affine int) sqnr>=20dB  integers and bool: exact
Always checked: NaN/Inf where the reference is finite, an all-zero, vanished or constant
candidate where the reference is healthy (a "silent failure").

Exit status: 0 pass, 1 diverged (also tensors that could not be paired or compared,
unless --allow-unpaired / --allow-incomparable), 2 usage or input error, or NOTHING COMPARED
(no pair was compared: dumps without tensors, a --filter or name map that paired nothing;
the reports are still written), 3 silent failure.
A report FILE (--json, --markdown, --html, --plot, --model-explorer) that is one of the dumps
(also through a link) is refused; reports are written to a temporary file and renamed into place.
--html writes one offline page: error growth chart, every pair, and per tensor a histogram,
a heatmap of where the error sits and the worst elements (docs/compare.md).
A dump truncated while it is read is an error ("file changed while reading"), never a verdict
on zeros.

Examples:
  driftscope compare fp32.tdump fp16.tdump
  driftscope compare ref.tdump gpu.tdump --min-cosine 0.999 --stop-at-first
  driftscope compare torch.tdump ort.tdump --map-b '^/(.*)/output_0$=>$1' --json report.json
  driftscope compare fp32.tdump fp16.tdump --reference64 fp64.tdump --r64-k f16=4
  driftscope compare ref.tdump tflite.tdump --pairs positional --reshape --policy policy.toml
  driftscope compare ref.tdump cand.tdump --markdown "$GITHUB_STEP_SUMMARY" -q
  driftscope compare fp32.tdump fp16.tdump --html report.html --plot growth.png
  driftscope compare ref.tdump cand.tdump --engine ray --ray-address head:6379 --json r.json
  driftscope compare ref-set/ tp2-set/ --engine ray --ray-scratch /shared/tmp --json r.json

Dump sets (multi-rank runs, docs/dumpsets.md): REFERENCE or CANDIDATE may be a directory
holding driftscope-set.json and one .tdump per rank (or the manifest itself); a single .tdump
is a set of world size 1. Shards are put together before measuring: an axis named `hidden@tp`
is split across group tp (the shards are concatenated along it), `out+tp` marks a partial sum
awaiting all-reduce (the shards are summed in float64). Unannotated tensors are replicas,
compared rank by rank. The report names the ranks of every pair, of the first divergence and
first NaN/Inf ("first divergence at mlp.fc2 on rank 1 (of 2)") and lists the affected ranks.
  driftscope compare tp1.tdump tp2-run/ --json report.json

Reading the report and writing policy files: docs/compare.md.)HELP");
  return [a] { return run_compare(*a); };
}

}  // namespace

DRIFTSCOPE_COMMAND(compare, 35, setup_compare);

}  // namespace driftscope::cli
