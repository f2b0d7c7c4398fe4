// driftscope compare REFERENCE CANDIDATE: align two dumps, measure every pair, name the first
// tensor that diverges (issue 3; docs/compare.md). Exit 0 pass, 1 diverged, 2 trouble, 3 silent
// failure. The summary line comes first on stdout; the progress bar goes to stderr on a TTY only.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "command.hpp"
#include "driftscope/compare.hpp"
#include "driftscope/report.hpp"
#include "util.hpp"

namespace driftscope::cli {
namespace {

// The flags land in the library's CompareSettings as given: the range checks are the library's
// (CompareSettings::resolve), the same for the CLI, the C ABI and Python.
struct CompareArgs {
  std::string reference, candidate;
  CompareSettings settings;
  std::string json_out, markdown_out, html_out, plot_out, model_explorer_out;
  std::string color = "auto";
  bool all = false, quiet = false, no_progress = false;
  std::string engine = "local", ray_address, ray_scratch;
  std::optional<int64_t> ray_parts;
};

// `--engine ray` runs in the Python package (driftscope/_compare/cli.py, docs/howto/cluster.md),
// which measures the pairs as Ray tasks and assembles the report with this library: the command
// line is handed over flag by flag, numbers in their shortest round-trip spelling.
std::vector<std::string> ray_args(const CompareArgs& a) {
  const CompareSettings& st = a.settings;
  std::vector<std::string> v = {a.reference, a.candidate, "--engine", "ray"};
  auto opt = [&](const char* flag, const auto& x) {
    if (x) {
      v.emplace_back(flag);
      v.push_back(fmt::format("{}", *x));
    }
  };
  auto str = [&](const char* flag, const std::string& x) {
    if (!x.empty()) {
      v.emplace_back(flag);
      v.push_back(x);
    }
  };
  auto list = [&](const char* flag, const std::vector<std::string>& xs) {
    for (const auto& x : xs) v.push_back(fmt::format("{}={}", flag, x));
  };
  auto flag = [&](const char* f, bool on) {
    if (on) v.emplace_back(f);
  };
  opt("--atol", st.atol);
  opt("--rtol", st.rtol);
  opt("--max-mismatch-fraction", st.max_mismatch_fraction);
  opt("--min-cosine", st.min_cosine);
  opt("--min-sqnr", st.min_sqnr);
  opt("--max-rel-l2", st.max_rel_l2);
  opt("--max-ulp", st.max_ulp);
  opt("--min-argmax", st.min_argmax);
  opt("--min-topk", st.min_topk);
  opt("--r64-floor", st.r64_floor);
  opt("--ray-parts", a.ray_parts);
  str("--policy", st.policy);
  str("--reference64", st.reference64);
  str("--map-file", st.map_file);
  str("--pairs", st.pairs);
  str("--filter", st.filter);
  str("--json", a.json_out);
  str("--markdown", a.markdown_out);
  str("--html", a.html_out);
  str("--plot", a.plot_out);
  str("--model-explorer", a.model_explorer_out);
  str("--color", a.color);
  str("--ray-address", a.ray_address);
  str("--ray-scratch", a.ray_scratch);
  list("--map-a", st.map_a);
  list("--map-b", st.map_b);
  list("--classes", st.classes);
  list("--r64-k", st.r64_k);
  v.push_back(fmt::format("--top-k={}", st.top_k));
  v.push_back(fmt::format("--threads={}", st.threads));
  flag("--nan-equal", st.nan_equal);
  flag("--reshape", st.reshape);
  flag("--stop-at-first", st.stop_at_first);
  flag("--allow-unpaired", st.allow_unpaired);
  flag("--allow-incomparable", st.allow_incomparable);
  flag("--all", a.all);
  flag("--quiet", a.quiet);
  flag("--no-progress", a.no_progress);
  return v;
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
  auto resolved = a.settings.resolve();
  if (!resolved) return fail(resolved.error().to_string());
  if (a.engine == "ray") return run_python("compare", kRayHelp, ray_args(a));
  if (!a.ray_address.empty() || a.ray_parts || !a.ray_scratch.empty())
    return fail("--ray-address, --ray-parts and --ray-scratch need --engine ray");
  CompareOptions o = std::move(*resolved);

  // Refused before the comparison runs, not after it spent minutes: a report path that names an
  // input (the same inode: a symlink or hard link too) would replace that dump.
  std::vector<std::string> inputs = {a.reference, a.candidate};
  for (const std::string* in : {&a.settings.reference64, &a.settings.policy, &a.settings.map_file})
    if (!in->empty()) inputs.push_back(*in);
  const std::pair<const char*, const std::string*> outputs[] = {
      {"--json", &a.json_out}, {"--markdown", &a.markdown_out}, {"--html", &a.html_out},
      {"--plot", &a.plot_out}, {"--model-explorer", &a.model_explorer_out}};
  for (const auto& [flag, out] : outputs)
    if (!out->empty() && *out != "-")
      if (auto same = refuse_input_as_output(*out, inputs); !same) return fail(same.error().message);
  for (size_t i = 0; i < std::size(outputs); ++i)
    for (size_t j = i + 1; j < std::size(outputs); ++j)
      if (!outputs[i].second->empty() && *outputs[i].second == *outputs[j].second &&
          *outputs[i].second != "-")
        return fail(fmt::format("{} and {} both name {}; give each report its own file",
                                outputs[i].first, outputs[j].first, *outputs[i].second));
  size_t to_stdout = 0;
  for (const auto& [flag, out] : outputs) to_stdout += *out == "-";
  if (to_stdout > 1) return fail("only one report can go to stdout ('-')");
  // The page's heatmaps, histograms and worst elements come from one more pass per pair.
  o.details = !a.html_out.empty();

  Progress progress(!a.no_progress && !a.quiet && ::isatty(STDERR_FILENO));
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

  if (!a.json_out.empty()) {
    // Streamed pair by pair: the whole text of a large report is never held in memory.
    auto out = OutputFile::open(a.json_out, inputs);
    if (!out) return fail(out.error().to_string());
    auto w = report_to_json(r, 2, [&](std::string_view s) { return out->write(s); });
    if (w) w = out->commit();
    if (!w) return fail(w.error().to_string());
  }
  if (!a.markdown_out.empty())
    if (auto w = write_output_file(a.markdown_out, report_to_markdown(r), inputs); !w)
      return fail(w.error().to_string());
  if (!a.html_out.empty())
    if (auto w = write_output_file(a.html_out, report_to_html(r), inputs); !w)
      return fail(w.error().to_string());
  if (!a.plot_out.empty()) {
    auto png = report_to_png(r);
    if (!png) return fail(png.error().to_string());
    if (auto w = write_output_file(a.plot_out, *png, inputs); !w) return fail(w.error().to_string());
  }
  if (!a.model_explorer_out.empty())
    if (auto w = write_output_file(a.model_explorer_out, report_to_model_explorer(r), inputs); !w)
      return fail(w.error().to_string());
  if (to_stdout == 0) {
    if (a.quiet) {
      fmt::print("{}\n", printable(r.summary));
    } else {
      TextOptions t;
      bool tty = ::isatty(STDOUT_FILENO);
      const char* no_color = std::getenv("NO_COLOR");
      t.color = a.color == "always" || (a.color == "auto" && tty && !(no_color && *no_color));
      size_t w = terminal_width();
      t.width = static_cast<unsigned>(w ? std::max<size_t>(w, 60) : 120);
      t.all = a.all;
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
  CompareSettings& st = a->settings;

  const char* tol = "Tolerance (any of these replaces the per-dtype defaults as a whole)";
  sub->add_option("--atol", st.atol, "allclose: |cand-ref| <= atol + rtol*|ref|")->group(tol);
  sub->add_option("--rtol", st.rtol, "allclose relative tolerance")->group(tol);
  sub->add_option("--max-mismatch-fraction", st.max_mismatch_fraction,
                  "let allclose fail on up to this fraction of elements")->group(tol);
  sub->add_option("--min-cosine", st.min_cosine, "cosine similarity at least this")->group(tol);
  sub->add_option("--min-sqnr", st.min_sqnr, "SQNR in dB at least this: 10 log10(sum ref^2 / sum (ref-cand)^2)")->group(tol);
  sub->add_option("--max-rel-l2", st.max_rel_l2, "relative L2 error ||cand-ref||/||ref|| at most this")->group(tol);
  sub->add_option("--max-ulp", st.max_ulp, "max ULP distance (both sides of one float dtype)")->group(tol);
  sub->add_option("--min-argmax", st.min_argmax, "argmax agreement along the class axis, fraction of rows")->group(tol);
  sub->add_option("--min-topk", st.min_topk, "mean top-k overlap along the class axis")->group(tol);
  sub->add_option("--policy", st.policy, "per-pattern tolerance file (TOML or JSON; docs/compare.md)")->group(tol);
  sub->add_flag("--nan-equal", st.nan_equal, "NaN at the same position on both sides counts as equal")->group(tol);
  sub->add_option("--reference64", st.reference64,
                  "float64 run: pass a tensor when err(cand) <= k * err(reference) + floor")->group(tol);
  sub->add_option("--r64-k", st.r64_k, "reference64 multiplier per candidate dtype, e.g. f16=3 (repeatable)")->allow_extra_args(false)->group(tol);
  sub->add_option("--r64-floor", st.r64_floor, "reference64 floor factor f: f * RMS(float64) * the rounding the candidate's dtype makes (docs/metrics.md 7a; 0: no floor)")
      ->group(tol);

  const char* al = "Alignment";
  sub->add_option("--map-a", st.map_a, "rename reference tensors: 'REGEX=>REPLACEMENT' (repeatable)")->allow_extra_args(false)->group(al);
  sub->add_option("--map-b", st.map_b, "rename candidate tensors: 'REGEX=>REPLACEMENT' (repeatable)")->allow_extra_args(false)->group(al);
  sub->add_option("--map-file", st.map_file, "mapping file (TOML or JSON): a = [...], b = [...], [exact]")->group(al);
  sub->add_option("--pairs", st.pairs, "pair by name (default) or by execution order: name, positional")
      ->group(al);
  sub->add_flag("--reshape", st.reshape, "compare same-size tensors of different shapes in row-major order")->group(al);
  sub->add_option("--filter", st.filter, "compare only tensors passing this filter (docs/filters.md)")->group(al);
  sub->add_option("--classes", st.classes, "tensors (glob) whose last axis holds classes: argmax/top-k agreement")->allow_extra_args(false)->group(al);
  sub->add_option("--top-k", st.top_k, "k of top-k agreement, 1 .. 1000 (default 5)")->group(al);

  const char* run = "Running and verdict";
  sub->add_flag("--stop-at-first", st.stop_at_first, "stop after the first divergence (fastest CI answer)")->group(run);
  sub->add_flag("--allow-unpaired", st.allow_unpaired, "tensors found in only one dump do not fail the comparison")->group(run);
  sub->add_flag("--allow-incomparable", st.allow_incomparable, "incomparable pairs do not fail the comparison")->group(run);
  sub->add_option("-j,--threads", st.threads, "worker threads, 0 .. 4096 (default 0: all cores; results never depend on it)")->group(run);
  sub->add_option("--engine", a->engine,
                  "local (default: this process's threads) or ray: measure the pairs as tasks on a Ray "
                  "cluster that sees the dumps at the same paths; the report is the local one")
      ->group(run)->check(CLI::IsMember({"local", "ray"}));
  sub->add_option("--ray-address", a->ray_address,
                  "the Ray cluster (default: $RAY_ADDRESS, else the local one: 'auto')")->group(run);
  sub->add_option("--ray-parts", a->ray_parts, "pairs are measured in this many tasks (default: 2 per cluster CPU)")
      ->group(run)->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  sub->add_option("--ray-scratch", a->ray_scratch,
                  "dump sets with --engine ray: the logical dumps go to a fresh directory in DIR, which every "
                  "worker must see (default: next to the candidate set; removed afterwards)")->group(run);

  const char* out = "Output";
  sub->add_option("--json", a->json_out, "write the JSON report (docs/report-schema.json) to FILE, '-' for stdout")->group(out);
  sub->add_option("--markdown", a->markdown_out, "write a Markdown report (CI job summary) to FILE, '-' for stdout")->group(out);
  sub->add_option("--html", a->html_out,
                  "write a self-contained HTML report (chart, sortable table, per-tensor heatmaps) to FILE")->group(out);
  sub->add_option("--plot", a->plot_out, "write a PNG image of the error growth to FILE")->group(out);
  sub->add_option("--model-explorer", a->model_explorer_out,
                  "write per-node results as Model Explorer node data (JSON overlay) to FILE")->group(out);
  sub->add_flag("--all", a->all, "list every pair, not just the neighbourhood and the worst")->group(out);
  sub->add_flag("-q,--quiet", a->quiet, "print only the summary line")->group(out);
  sub->add_option("--color", a->color, "auto (TTY and no NO_COLOR), always or never")
      ->group(out)->check(CLI::IsMember({"auto", "always", "never"}));
  sub->add_flag("--no-progress", a->no_progress, "no progress bar on stderr")->group(out);

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
