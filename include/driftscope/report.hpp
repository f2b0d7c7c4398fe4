// driftscope — the reports: every rendering of a comparison (compare.hpp's Report), of a one-run
// check (check.hpp's CheckReport) and of the guard's JSON report. The renderers live in
// src/report/ and only read what the measuring code (src/compare/, src/check/) produced; nothing
// there depends on them (HACKING.md, module map; scripts/check-layers.sh).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "driftscope/api.h"
#include "driftscope/check.hpp"
#include "driftscope/compare.hpp"
#include "driftscope/error.hpp"
#include "driftscope/judge.hpp"

namespace driftscope {

// ---- a comparison (compare.hpp) -----------------------------------------------------------------

// JSON text following docs/report-schema.json.
DS_API std::string report_to_json(const Report& report, int indent = 2);
// The same text, handed to `sink` piece by piece (one pair at a time), so a report of a million
// pairs is never held whole in memory. Stops at, and returns, the first error of `sink`.
DS_API Result<void> report_to_json(const Report& report, int indent,
                            const std::function<Result<void>(std::string_view)>& sink);
// GitHub-flavoured Markdown for CI job summaries.
DS_API std::string report_to_markdown(const Report& report);

// One self-contained HTML page (docs/compare.md "The HTML report"): verdict, first divergence,
// error growth chart, sortable pair table, per-pair detail (from PairResult::detail, when the
// comparison ran with CompareOptions::details) and both runs' metadata. No network: a
// Content-Security-Policy forbids every fetch, and text from the dumps reaches the page only as
// escaped JSON data that the page's script inserts as text, never as markup.
DS_API std::string report_to_html(const Report& report);

// A PNG image (width x height pixels) of the error growth: relative L2 error of every compared
// pair over execution order, log scale, coloured by status, the first divergence marked.
struct PlotOptions {
  unsigned width = 960, height = 420;   // 320 .. 4096 and 200 .. 4096
};
DS_API Result<std::string> report_to_png(const Report& report, const PlotOptions& options = {});

// Model Explorer node data (github.com/google-ai-edge/model-explorer, node_data_builder.py
// GraphNodeData): per output tensor name, value = log10 of the pair's relative L2 error (-16 exact, 6 a
// new NaN/Inf), background colour by status. Loaded as an overlay on the ONNX/TFLite graph,
// whose nodes match by output tensor name.
DS_API std::string report_to_model_explorer(const Report& report);

struct TextOptions {
  bool color = false;   // ANSI colours (the caller decides: TTY and NO_COLOR)
  unsigned width = 100; // terminal columns; tables shrink the name column to fit
  bool all = false;     // every pair instead of the neighbourhood and the worst
  size_t neighbourhood = 3;
  size_t worst = 5;
};
DS_API std::string report_to_text(const Report& report, const TextOptions& options = {});

// ---- a one-run check (check.hpp) ----------------------------------------------------------------

DS_API std::string check_to_text(const CheckReport& report);
DS_API std::string check_to_json(const CheckReport& report, int indent = 2);
// One self-contained offline page (no network: its Content-Security-Policy forbids it): the
// findings grouped per tensor, filterable; names are inserted as text, never as markup.
DS_API std::string check_to_html(const CheckReport& report);

// ---- the guard (docs/howto/guard.md) --------------------------------------------------------------
// The guard itself is Python (python/driftscope/_guard): it runs the backends, judges every output
// through the library (judge.hpp judge_output) and assembles its report's model; the sentences of
// a judgement (guard_output_detail, below) and every rendering of that model but the JSON report
// (the model itself) are here, so the guard's reports share one escaping and one set of number
// formats with the compare and check reports, and are worded and rendered in one language.
//
// The model is the guard's JSON report (docs/guard-schema.json) with a "diagnostics" string per
// backend and a "render" object the JSON report does not hold: "argmax" (the line saying where an
// argmax flip is judged) and "rows", one per backend: "worst" (the worst output's cosine,
// norm_ref, norm_cand, max_diff: a number, null, or "nan"/"inf"/"-inf", which the JSON report
// writes as null), "latency_ms" and "latency_ratio" (alike), and "fallback" (null or: "heads" and
// "rows" of the tradeoff table, "budget", "kept_as", "where": the backends a float16 recipe was
// verified on, null when it names none). A model with an "llm" object is a language model's.
// invalid_argument when the text is not a JSON object with a string "summary", an array
// "backends" and an object "render".

// The text report `driftscope guard` prints: verdict line, model,
// inputs, thresholds, the backend table, findings, fallback tables and recipes. Long names (runs
// of more than 80 characters without a space) are shown as HEAD...TAIL~HASH.
DS_API Result<std::string> guard_report_to_text(std::string_view model_json);
// The Markdown report (--markdown) for CI job summaries: the same content, every name escaped.
DS_API Result<std::string> guard_report_to_markdown(std::string_view model_json);
// One self-contained offline page (--html): verdict, backend table, findings, probes, fallbacks.
// No network (the page's Content-Security-Policy forbids it); names reach the page only as escaped
// JSON inserted as text. Takes the model (its "render" is left out of the page) or the JSON report
// with "diagnostics"; invalid_argument when the text is not a JSON object with a string "summary"
// and an array "backends".
DS_API Result<std::string> guard_report_to_html(std::string_view report_json);

// The sentences explaining one output's judgement (judge.hpp judge_output), joined with "; ": one
// per reason code that held, each with the figures behind it and the criterion it broke
// ("cosine 0.981234 < 0.99"; the guard's order: nonfinite, all_zero/norm_vanished, constant,
// cosine, rel_l2, norm_ratio, few_values, decision_flip, argmax), then the near-ties not counted
// as flips and, where the reference's norm is below min_norm, why a vanished output could not be
// told.
// "empty output" for an output of no elements; empty for a pass with nothing to say. `criteria`
// and `class_axis` are those the judgement was made with. The guard's JSON report carries this
// text as an output's "detail" (docs/metrics.md §9); the numbers are printed as Python's format
// specs print them (%g-style, "-0" kept, NaN unsigned), the wording the guard has always had.
DS_API std::string guard_output_detail(const OutputJudgement& judgement, const GuardCriteria& criteria,
                                       std::optional<uint32_t> class_axis = std::nullopt);

}  // namespace driftscope
