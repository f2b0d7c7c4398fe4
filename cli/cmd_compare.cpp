// driftscope compare REFERENCE CANDIDATE: align two dumps, measure every pair, name the first
// tensor that diverges (issue 3; docs/compare.md). Exit 0 pass, 1 diverged, 2 trouble, 3 silent
// failure. The summary line comes first on stdout; the progress bar goes to stderr on a TTY only.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>

#include <fmt/format.h>

#include "command.hpp"
#include "driftscope/compare.hpp"
#include "util.hpp"

namespace driftscope::cli {
namespace {

struct CompareArgs {
  std::string reference, candidate;
  std::optional<double> atol, rtol, max_mismatch, min_cosine, min_sqnr, max_rel_l2, min_argmax, min_topk;
  std::optional<int64_t> max_ulp;
  std::string policy_file, map_file, reference64, filter, json_out, markdown_out;
  std::vector<std::string> map_a, map_b, classes, r64_k;
  std::optional<double> r64_floor;
  std::string pairs = "name";
  std::string color = "auto";
  bool reshape = false, nan_equal = false, stop_at_first = false, allow_unpaired = false,
       allow_incomparable = false, all = false, quiet = false, no_progress = false;
  unsigned threads = 0;
  uint32_t top_k = 5;
};

Result<void> write_output(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return {};
  }
  AtomicOutput out(path);
  {
    std::ofstream f(out.temp_path(), std::ios::binary | std::ios::trunc);
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    f.flush();
    if (!f) return make_error(Errc::io_error, fmt::format("cannot write '{}'", path));
  }
  return out.commit();
}

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
  CompareOptions o;
  if (!a.policy_file.empty()) {
    auto p = Policy::load(a.policy_file);
    if (!p) return fail(p.error().to_string());
    o.policy = std::move(*p);
  }
  Criteria cli;
  cli.atol = a.atol;
  cli.rtol = a.rtol;
  cli.max_mismatch_fraction = a.max_mismatch;
  cli.min_cosine = a.min_cosine;
  cli.min_sqnr_db = a.min_sqnr;
  cli.max_rel_l2 = a.max_rel_l2;
  cli.max_ulp = a.max_ulp;
  cli.min_argmax_agreement = a.min_argmax;
  cli.min_topk_overlap = a.min_topk;
  if (cli.max_mismatch_fraction && !cli.uses_allclose())
    return fail("--max-mismatch-fraction needs --atol or --rtol (it loosens the allclose rule)");
  // Criteria on the command line replace the defaults (and a policy file's [default]) as a whole.
  if (!cli.empty()) o.policy.global = cli;
  for (const auto& g : a.classes) {
    PolicyRule r;
    r.match = g;
    r.classes = true;
    r.top_k = a.top_k;
    o.policy.rules.push_back(r);
  }
  if (cli.min_argmax_agreement || cli.min_topk_overlap) {
    PolicyRule r;  // argmax criteria on the command line apply to every tensor with a class axis
    r.classes = true;
    r.top_k = a.top_k;
    o.policy.rules.push_back(r);
  }
  for (const auto& kv : a.r64_k) {
    size_t eq = kv.find('=');
    auto dt = eq == std::string::npos ? std::nullopt : parse_dtype(kv.substr(0, eq));
    char* end = nullptr;
    double k = eq == std::string::npos ? 0 : std::strtod(kv.c_str() + eq + 1, &end);
    if (!dt || !end || *end != '\0' || !(k > 0) || !std::isfinite(k))
      return fail(fmt::format("--r64-k '{}': expected DTYPE=K with K > 0, e.g. f16=3", kv));
    o.policy.r64_k.emplace_back(*dt, k);
  }
  if (a.r64_floor) o.policy.r64_floor = a.r64_floor;
  if (!a.map_file.empty()) {
    auto m = NameMap::load(a.map_file);
    if (!m) return fail(m.error().to_string());
    o.names = std::move(*m);
  }
  for (const auto& s : a.map_a) {
    auto r = RenameRule::parse(s);
    if (!r) return fail("--map-a: " + r.error().message);
    o.names.reference.push_back(*r);
  }
  for (const auto& s : a.map_b) {
    auto r = RenameRule::parse(s);
    if (!r) return fail("--map-b: " + r.error().message);
    o.names.candidate.push_back(*r);
  }
  o.pairing = a.pairs == "positional" ? Pairing::positional : Pairing::by_name;
  o.filter = a.filter;
  o.reshape = a.reshape;
  o.nan_equal = a.nan_equal;
  o.stop_at_first = a.stop_at_first;
  o.allow_unpaired = a.allow_unpaired;
  o.allow_incomparable = a.allow_incomparable;
  o.threads = a.threads;
  o.reference64 = a.reference64;

  Progress progress(!a.no_progress && !a.quiet && ::isatty(STDERR_FILENO));
  o.progress = [&progress](size_t done, size_t total) { progress.update(done, total); };
  auto rep = compare_files(a.reference, a.candidate, o);
  progress.finish();
  if (!rep) return fail(rep.error().to_string());
  const Report& r = *rep;

  const bool json_stdout = a.json_out == "-";
  const bool md_stdout = a.markdown_out == "-";
  if (!a.json_out.empty())
    if (auto w = write_output(a.json_out, report_to_json(r)); !w) return fail(w.error().to_string());
  if (!a.markdown_out.empty())
    if (auto w = write_output(a.markdown_out, report_to_markdown(r)); !w) return fail(w.error().to_string());
  if (!json_stdout && !md_stdout) {
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
  sub->add_option("CANDIDATE", a->candidate, "the run under test")->required();

  const char* tol = "Tolerance (any of these replaces the per-dtype defaults as a whole)";
  sub->add_option("--atol", a->atol, "allclose: |cand-ref| <= atol + rtol*|ref|")->group(tol)->check(CLI::NonNegativeNumber);
  sub->add_option("--rtol", a->rtol, "allclose relative tolerance")->group(tol)->check(CLI::NonNegativeNumber);
  sub->add_option("--max-mismatch-fraction", a->max_mismatch,
                  "let allclose fail on up to this fraction of elements")->group(tol)->check(CLI::Range(0.0, 1.0));
  sub->add_option("--min-cosine", a->min_cosine, "cosine similarity at least this")->group(tol)->check(CLI::Range(-1.0, 1.0));
  sub->add_option("--min-sqnr", a->min_sqnr, "SQNR in dB at least this: 10 log10(sum ref^2 / sum (ref-cand)^2)")->group(tol);
  sub->add_option("--max-rel-l2", a->max_rel_l2, "relative L2 error ||cand-ref||/||ref|| at most this")->group(tol)->check(CLI::NonNegativeNumber);
  sub->add_option("--max-ulp", a->max_ulp, "max ULP distance (both sides of one float dtype)")->group(tol)->check(CLI::NonNegativeNumber);
  sub->add_option("--min-argmax", a->min_argmax, "argmax agreement along the class axis, fraction of rows")->group(tol)->check(CLI::Range(0.0, 1.0));
  sub->add_option("--min-topk", a->min_topk, "mean top-k overlap along the class axis")->group(tol)->check(CLI::Range(0.0, 1.0));
  sub->add_option("--policy", a->policy_file, "per-pattern tolerance file (TOML or JSON; docs/compare.md)")->group(tol);
  sub->add_flag("--nan-equal", a->nan_equal, "NaN at the same position on both sides counts as equal")->group(tol);
  sub->add_option("--reference64", a->reference64,
                  "float64 run: pass a tensor when err(cand) <= k * err(reference) + floor")->group(tol);
  sub->add_option("--r64-k", a->r64_k, "reference64 multiplier per candidate dtype, e.g. f16=3 (repeatable)")->allow_extra_args(false)->group(tol);
  sub->add_option("--r64-floor", a->r64_floor, "reference64 floor in units of unit-roundoff(cand) * RMS(float64)")
      ->group(tol)->check(CLI::NonNegativeNumber);

  const char* al = "Alignment";
  sub->add_option("--map-a", a->map_a, "rename reference tensors: 'REGEX=>REPLACEMENT' (repeatable)")->allow_extra_args(false)->group(al);
  sub->add_option("--map-b", a->map_b, "rename candidate tensors: 'REGEX=>REPLACEMENT' (repeatable)")->allow_extra_args(false)->group(al);
  sub->add_option("--map-file", a->map_file, "mapping file (TOML or JSON): a = [...], b = [...], [exact]")->group(al);
  sub->add_option("--pairs", a->pairs, "pair by name (default) or by execution order")
      ->group(al)->check(CLI::IsMember({"name", "positional"}));
  sub->add_flag("--reshape", a->reshape, "compare same-size tensors of different shapes in row-major order")->group(al);
  sub->add_option("--filter", a->filter, "compare only tensors passing this filter (docs/filters.md)")->group(al);
  sub->add_option("--classes", a->classes, "tensors (glob) whose last axis holds classes: argmax/top-k agreement")->allow_extra_args(false)->group(al);
  sub->add_option("--top-k", a->top_k, "k of top-k agreement (default 5)")->group(al)->check(CLI::Range(1, 1000));

  const char* run = "Running and verdict";
  sub->add_flag("--stop-at-first", a->stop_at_first, "stop after the first divergence (fastest CI answer)")->group(run);
  sub->add_flag("--allow-unpaired", a->allow_unpaired, "tensors found in only one dump do not fail the comparison")->group(run);
  sub->add_flag("--allow-incomparable", a->allow_incomparable, "incomparable pairs do not fail the comparison")->group(run);
  sub->add_option("-j,--threads", a->threads, "worker threads (default: all cores; results never depend on it)")->group(run);

  const char* out = "Output";
  sub->add_option("--json", a->json_out, "write the JSON report (docs/report-schema.json) to FILE, '-' for stdout")->group(out);
  sub->add_option("--markdown", a->markdown_out, "write a Markdown report (CI job summary) to FILE, '-' for stdout")->group(out);
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

Examples:
  driftscope compare fp32.tdump fp16.tdump
  driftscope compare ref.tdump gpu.tdump --min-cosine 0.999 --stop-at-first
  driftscope compare torch.tdump ort.tdump --map-b '^/(.*)/output_0$=>$1' --json report.json
  driftscope compare fp32.tdump fp16.tdump --reference64 fp64.tdump --r64-k f16=4
  driftscope compare ref.tdump tflite.tdump --pairs positional --reshape --policy policy.toml
  driftscope compare ref.tdump cand.tdump --markdown "$GITHUB_STEP_SUMMARY" -q

Reading the report and writing policy files: docs/compare.md.)HELP");
  return [a] { return run_compare(*a); };
}

}  // namespace

DRIFTSCOPE_COMMAND(compare, 35, setup_compare);

}  // namespace driftscope::cli
