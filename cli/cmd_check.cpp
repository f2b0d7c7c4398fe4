// driftscope check RUN.tdump: findings from one run, no reference (issue 10; docs/axes.md).
// Exit 0 clean, 1 findings, 2 trouble or nothing checked (the codes of compare).
#include <memory>

#include <fmt/format.h>

#include "command.hpp"
#include "driftscope/check.hpp"
#include "driftscope/report.hpp"
#include "util.hpp"

namespace driftscope::cli {
namespace {

// The flags are the rows of check.hpp's option table (setup_check registers them).
struct CheckArgs {
  std::string file;
  CheckOptions options;
  CheckCommandOptions command;
};

int run_check(const CheckArgs& a) {
  const CheckCommandOptions& c = a.command;
  for (const std::string* out : {&c.json, &c.html})
    if (!out->empty() && *out != "-")
      if (auto same = refuse_input_as_output(*out, std::vector<std::string>{a.file}); !same) return fail(same.error().message);
  if (!c.json.empty() && c.json == c.html)
    return fail(c.json == "-" ? std::string("only one report can go to stdout ('-')")
                              : fmt::format("--json and --html both name {}; give each report its own file", c.json));
  const bool to_stdout = c.json == "-" || c.html == "-";
  if (auto v = a.options.validate(); !v) return fail(v.error().to_string());
  auto rep = check_file(a.file, a.options);
  if (!rep) return fail(a.file, rep.error());
  if (!c.json.empty())
    if (auto w = write_output_file(c.json, check_to_json(*rep), std::vector<std::string>{a.file}); !w) return fail(w.error().to_string());
  if (!c.html.empty())
    if (auto w = write_output_file(c.html, check_to_html(*rep), std::vector<std::string>{a.file}); !w) return fail(w.error().to_string());
  if (!to_stdout) {
    if (c.quiet) fmt::print("{}\n", printable(rep->summary));
    else fmt::print("{}", check_to_text(*rep));
  }
  std::fflush(stdout);
  return rep->exit_code();
}

std::function<int()> setup_check(CLI::App& app) {
  auto a = std::make_shared<CheckArgs>();
  auto* sub = app.add_subcommand("check", "Check one run by itself: NaN/Inf, dead or constant outputs, wrong-axis norms");
  sub->add_option("RUN", a->file, "the .tdump file of one run")->required();
  // The options' values go to CheckOptions::validate(), the one validator of every front end.
  DRIFTSCOPE_CLI_ROWS(DRIFTSCOPE_CHECK_OPTIONS, sub, a->options, false);
  DRIFTSCOPE_CLI_ROWS(DRIFTSCOPE_CHECK_COMMAND, sub, a->command, true);
  sub->footer(R"HELP(
Looks at one recorded run, with no reference to compare against, and reports what is
wrong on its face. Each finding has a code:

  nonfinite          NaN or Inf in any tensor
  all_zero           an output that is zero everywhere
  constant           an output whose elements are all the same value
  dead_channels      channels of an output that are zero at every position (the channel
                     axis is the one named channels/hidden/features/..., else the last)
  f16_near_overflow  a float16 output with |x| >= 32768 (float16 overflows past 65504)
  int8_saturation    an INT8/UINT8 output with more than 1% of elements at -128/127
                     (0/255); an extreme that is the zero point encodes 0, not saturation
  norm_axis          a LayerNorm/RMSNorm output that is not normalised along the axis its
                     recorder declared (attribute norm_axes), and the axis it is normalised
                     along instead
  softmax_axis       a softmax output that does not sum to one along its declared axis
                     (attribute softmax_axis), and the axis it does sum to one along
  axis_size          one axis name with two sizes in one run (--dynamic NAME allows it;
                     so does the run's `dynamic_axes` metadata)
  norm_over          a normalisation over an axis named batch/seq/key/query/time/heads
                     (the transposed-LayerNorm bug), by the names the recorder propagated
  softmax_over       a softmax over the query axis (attention scores) or over batch
  reduce_over_batch  a mean/sum/... over the axis named batch inside the model
  broadcast_conflict two differently named axes of the same size met in a broadcast
                     (a per-token vector added along the feature axis)
  concat_mismatch    a concatenation of parts that name one axis differently

The recorders declare axis names and the norm/softmax axes (docs/axes.md). A tensor
without a declaration is still checked for everything else.

Exit status: 0 clean, 1 findings, 2 usage or input error (a file that is not a readable
TDUMP: one line naming the offset) or NOTHING CHECKED (no tensor in the dump).
A damaged file (cut, corrupt) is checked up to the damage, with a warning.

Examples:
  driftscope check run.tdump
  driftscope check run.tdump --dynamic seq --ignore dead_channels
  driftscope check run.tdump --json findings.json -q
  driftscope check run.tdump --html check.html)HELP");
  return [a] { return run_check(*a); };
}

}  // namespace

DRIFTSCOPE_COMMAND(check, 36, setup_check);

}  // namespace driftscope::cli
