// The options of `driftscope compare`, declared once (issue 25 item 4; the row type and its
// columns: driftscope/options.hpp). Each row is one option:
// its C++ type and default, its name (the CompareSettings field, the C ABI's JSON key, the key of
// the settings JSON the command hands to the Ray engine), its command-line flag (CLI11 spelling),
// its driftscope.compare() keyword, what it names (an input file, a report file), its range, its
// choices, its help group and its help text. Every front end is built from these rows: the CLI11
// registration (cli/cmd_compare.cpp), the C ABI's options JSON (src/capi/compare_c.cpp), the
// nanobind CompareSettings and _core.compare_options() (python/src/py_compare.cpp), and through
// that the Python command's argparse and compare()'s keyword handling (driftscope/_compare/).
// tests/python/test_compare_option_table.py holds the front ends and docs/compare.md to it.
//
// A range is checked where the option is judged: CompareSettings::resolve() (src/compare/
// options.cpp) for the settings, so every front end names a bad value with the same message;
// the command (CLI11) for the command's own options.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "driftscope/api.h"
#include "driftscope/error.hpp"
#include "driftscope/options.hpp"

namespace driftscope {

#define DRIFTSCOPE_INF_ std::numeric_limits<double>::infinity()
#define DRIFTSCOPE_TOL_ "Tolerance (any of these replaces the per-dtype defaults as a whole)"

// X(type, name, default, flag, python keyword, role, lo, hi, choices, group, help)
// The library's settings (CompareSettings). A row without a flag is not on the command line;
// one without a keyword is not a compare() keyword (policy_text: compare(policy={...})).
// Ranges of the criteria are also kCriteria's (src/compare/policy.cpp; policy files), held equal
// by tests/unit/compare/option_table_test.cpp.
#define DRIFTSCOPE_COMPARE_SETTINGS(X)                                                                  \
  X(std::optional<double>, atol, {}, "--atol", "atol", value, 0, DRIFTSCOPE_INF_, "", DRIFTSCOPE_TOL_,    \
    "allclose: |cand-ref| <= atol + rtol*|ref|")                                                        \
  X(std::optional<double>, rtol, {}, "--rtol", "rtol", value, 0, DRIFTSCOPE_INF_, "", DRIFTSCOPE_TOL_,    \
    "allclose relative tolerance")                                                                      \
  X(std::optional<double>, max_mismatch_fraction, {}, "--max-mismatch-fraction", "max_mismatch_fraction", \
    value, 0, 1, "", DRIFTSCOPE_TOL_, "let allclose fail on up to this fraction of elements")             \
  X(std::optional<double>, min_cosine, {}, "--min-cosine", "min_cosine", value, -1, 1, "",               \
    DRIFTSCOPE_TOL_, "cosine similarity at least this")                                                 \
  X(std::optional<double>, min_sqnr, {}, "--min-sqnr", "min_sqnr", value, -DRIFTSCOPE_INF_,              \
    DRIFTSCOPE_INF_, "", DRIFTSCOPE_TOL_,                                                               \
    "SQNR in dB at least this: 10 log10(sum ref^2 / sum (ref-cand)^2)")                                 \
  X(std::optional<double>, max_rel_l2, {}, "--max-rel-l2", "max_rel_l2", value, 0, DRIFTSCOPE_INF_, "",  \
    DRIFTSCOPE_TOL_, "relative L2 error ||cand-ref||/||ref|| at most this")                             \
  X(std::optional<int64_t>, max_ulp, {}, "--max-ulp", "max_ulp", value, 0, 9223372036854775807.0, "",    \
    DRIFTSCOPE_TOL_, "max ULP distance (both sides of one float dtype)")                                \
  X(std::optional<double>, min_argmax, {}, "--min-argmax", "min_argmax_agreement", value, 0, 1, "",      \
    DRIFTSCOPE_TOL_, "argmax agreement along the class axis, fraction of rows")                         \
  X(std::optional<double>, min_topk, {}, "--min-topk", "min_topk_overlap", value, 0, 1, "",              \
    DRIFTSCOPE_TOL_, "mean top-k overlap along the class axis")                                         \
  X(std::string, policy, {}, "--policy", "policy", input_file, 0, 0, "", DRIFTSCOPE_TOL_,                \
    "per-pattern tolerance file (TOML or JSON; docs/compare.md)")                                       \
  X(std::string, policy_text, {}, "", "", value, 0, 0, "", "",                                          \
    "the policy itself (TOML or JSON text) instead of a file; not both")                                \
  X(bool, nan_equal, false, "--nan-equal", "nan_equal", value, 0, 0, "", DRIFTSCOPE_TOL_,                \
    "NaN at the same position on both sides counts as equal")                                           \
  X(std::string, reference64, {}, "--reference64", "reference64", input_file, 0, 0, "", DRIFTSCOPE_TOL_, \
    "float64 run: pass a tensor when err(cand) <= k * err(reference) + floor")                          \
  X(std::vector<std::string>, r64_k, {}, "--r64-k", "r64_k", value, 0, 1e12, "", DRIFTSCOPE_TOL_,        \
    "reference64 multiplier per candidate dtype, e.g. f16=3 (repeatable)")                              \
  X(std::optional<double>, r64_floor, {}, "--r64-floor", "r64_floor", value, 0, 1e12, "", DRIFTSCOPE_TOL_, \
    "reference64 floor factor f: f * RMS(float64) * the rounding the candidate's dtype makes "           \
    "(docs/metrics.md 7a; 0: no floor)")                                                                \
  X(std::vector<std::string>, map_a, {}, "--map-a", "map_a", value, 0, 0, "", "Alignment",              \
    "rename reference tensors: 'REGEX=>REPLACEMENT' (repeatable)")                                      \
  X(std::vector<std::string>, map_b, {}, "--map-b", "map_b", value, 0, 0, "", "Alignment",              \
    "rename candidate tensors: 'REGEX=>REPLACEMENT' (repeatable)")                                      \
  X(std::string, map_file, {}, "--map-file", "mapping", input_file, 0, 0, "", "Alignment",              \
    "mapping file (TOML or JSON): a = [...], b = [...], [exact]")                                       \
  X(ExactNames, exact, {}, "", "names", value, 0, 0, "", "",                                            \
    "exact pairs: {\"reference name\": \"candidate name\"}")                                            \
  X(std::string, pairs, "name", "--pairs", "pairs", value, 0, 0, "name,positional", "Alignment",         \
    "pair by name (default) or by execution order: name, positional")                                   \
  X(bool, reshape, false, "--reshape", "reshape", value, 0, 0, "", "Alignment",                         \
    "compare same-size tensors of different shapes in row-major order")                                 \
  X(std::string, filter, {}, "--filter", "filter", value, 0, 0, "", "Alignment",                        \
    "compare only tensors passing this filter (docs/filters.md)")                                       \
  X(std::vector<std::string>, classes, {}, "--classes", "classes", value, 0, 0, "", "Alignment",        \
    "tensors (glob) whose last axis holds classes: argmax/top-k agreement")                             \
  X(int64_t, top_k, 5, "--top-k", "top_k", value, 1, 1000, "", "Alignment",                             \
    "k of top-k agreement, 1 .. 1000 (default 5)")                                                      \
  X(bool, stop_at_first, false, "--stop-at-first", "stop_at_first", value, 0, 0, "",                    \
    "Running and verdict", "stop after the first divergence (fastest CI answer)")                       \
  X(bool, allow_unpaired, false, "--allow-unpaired", "allow_unpaired", value, 0, 0, "",                 \
    "Running and verdict", "tensors found in only one dump do not fail the comparison")                 \
  X(bool, allow_incomparable, false, "--allow-incomparable", "allow_incomparable", value, 0, 0, "",     \
    "Running and verdict", "incomparable pairs do not fail the comparison")                             \
  X(int64_t, threads, 0, "-j,--threads", "threads", value, 0, 4096, "", "Running and verdict",          \
    "worker threads, 0 .. 4096 (default 0: all cores; results never depend on it)")                     \
  X(double, amplification_threshold, 10.0, "", "amplification_threshold", value, 1, DRIFTSCOPE_INF_, "", \
    "", "localisation: an error that grows by this factor or more is introduced (finite, > 1)")        \
  X(int64_t, max_amplifiers, 5, "", "max_amplifiers", value, 0, 1000, "", "",                           \
    "localisation: the amplifiers listed")                                                              \
  X(bool, details, false, "", "details", value, 0, 0, "", "",                                           \
    "also find where each pair's error sits (the HTML report's heatmaps); --html turns it on")

// The command's own options (CompareCommandOptions): report files, display and the engine. Not
// the C ABI's keys; the command hands them to the Ray engine's Python side with the settings.
#define DRIFTSCOPE_COMPARE_COMMAND(X)                                                                  \
  X(std::string, engine, "local", "--engine", "engine", value, 0, 0, "local,ray", "Running and verdict",  \
    "local (default: this process's threads) or ray: measure the pairs as tasks on a Ray cluster that " \
    "sees the dumps at the same paths; the report is the local one")                                    \
  X(std::string, ray_address, {}, "--ray-address", "ray_address", value, 0, 0, "", "Running and verdict", \
    "the Ray cluster (default: $RAY_ADDRESS, else the local one: 'auto')")                              \
  X(std::optional<int64_t>, ray_parts, {}, "--ray-parts", "ray_parts", value, 1, 1048576, "",             \
    "Running and verdict", "pairs are measured in this many tasks (default: 2 per cluster CPU)")        \
  X(std::string, ray_scratch, {}, "--ray-scratch", "ray_scratch", value, 0, 0, "", "Running and verdict", \
    "dump sets with --engine ray: the logical dumps go to a fresh directory in DIR, which every "        \
    "worker must see (default: next to the candidate set; removed afterwards)")                         \
  X(std::string, json, {}, "--json", "", output_file, 0, 0, "", "Output",                               \
    "write the JSON report (docs/report-schema.json) to FILE, '-' for stdout")                          \
  X(std::string, markdown, {}, "--markdown", "", output_file, 0, 0, "", "Output",                       \
    "write a Markdown report (CI job summary) to FILE, '-' for stdout")                                 \
  X(std::string, html, {}, "--html", "", output_file, 0, 0, "", "Output",                               \
    "write a self-contained HTML report (chart, sortable table, per-tensor heatmaps) to FILE")          \
  X(std::string, plot, {}, "--plot", "", output_file, 0, 0, "", "Output",                               \
    "write a PNG image of the error growth to FILE")                                                    \
  X(std::string, model_explorer, {}, "--model-explorer", "", output_file, 0, 0, "", "Output",           \
    "write per-node results as Model Explorer node data (JSON overlay) to FILE")                        \
  X(bool, all, false, "--all", "", value, 0, 0, "", "Output",                                           \
    "list every pair, not just the neighbourhood and the worst")                                        \
  X(bool, quiet, false, "-q,--quiet", "", value, 0, 0, "", "Output", "print only the summary line")     \
  X(std::string, color, "auto", "--color", "", value, 0, 0, "auto,always,never", "Output",              \
    "auto (TTY and no NO_COLOR), always or never")                                                      \
  X(bool, no_progress, false, "--no-progress", "", value, 0, 0, "", "Output", "no progress bar on stderr")

// The options of the command beyond the library's settings.
struct CompareCommandOptions {
  DRIFTSCOPE_COMPARE_COMMAND(DRIFTSCOPE_OPTION_FIELD_)
};

DS_API std::span<const OptionSpec> compare_option_specs() noexcept;
// The row of `name` (a settings or command option), or nullptr.
DS_API const OptionSpec* find_compare_option(std::string_view name) noexcept;

struct CompareSettings;

// The settings (and, when given, the command's options) as one JSON object keyed by option name,
// every row present. Numbers in their shortest round-trip spelling; an infinite or NaN number is
// the string "inf", "-inf" or "nan" (JSON has none).
DS_API std::string compare_options_to_json(const CompareSettings& settings,
                                    const CompareCommandOptions* command = nullptr);
// Sets the options a JSON object names (the keys of compare_options_to_json; numbers may also be
// "inf", "-inf", "nan"). Command options only when `command` is given. An unknown key or a value
// of the wrong JSON type is Errc::invalid_argument ("unknown compare option 'x'", "compare option
// 'atol' must be a number"); ranges are resolve()'s.
DS_API Result<void> compare_options_from_json(std::string_view json_object, CompareSettings& settings,
                                       CompareCommandOptions* command = nullptr);

// The inputs and report files of a compare command: every input_file setting that is given, then
// the report files that are checked together. Refuses before anything is measured: a report
// file that is one of the inputs (also through a link), two reports naming one file, more than
// one report on stdout ('-'). The message names the flags as the command spells them.
DS_API Result<void> check_compare_outputs(const std::string& reference, const std::string& candidate,
                                   const CompareSettings& settings,
                                   const CompareCommandOptions& command);
// reference, candidate, then every input_file setting that is given.
DS_API std::vector<std::string> compare_inputs(const std::string& reference, const std::string& candidate,
                                        const CompareSettings& settings);

}  // namespace driftscope
