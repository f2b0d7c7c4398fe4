"""``driftscope guard`` / ``python -m driftscope guard``: the command line of driftscope.guard."""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Optional, Sequence, Tuple

from .._cli import OneLineParser, parse_args, write_output
from .._progress import Progress
from .._text import printable
from ..errors import Error
from .backends import registry as B
from ._classaxis import parse_class_axis
from ._fallback import DEFAULT_FALLBACK_RUNS
from ._investigate import FALLBACK_MODES, PROBE_METHODS, PROBE_MODES
from ._metrics import CRITERIA, SEED
from ._replaying import REPLAY_MODES
from ._run import DEFAULT_RUNS, DEFAULT_TIMEOUT_S, GuardError, guard
from ._inputs import (DEFAULT_MAX_BYTES, InputError, format_size, input_budget,
                      onnx_external_files, output_onto_input, parse_dims, parse_size)
from ._stateful import parse_state

PROG = "driftscope guard"

DESCRIPTION = """\
Run one model on every runtime and precision this machine has (the backends), compare each
backend's outputs with a reference backend on the same generated inputs, and give one verdict:
does any backend silently return zeros, NaN/Inf, a constant, or drifted values?

Each backend runs in its own process, so one that crashes is reported (RUNTIME_ERROR, with the
signal) and the others still run. Backends that cannot run here are listed as UNAVAILABLE with
the reason; that is never a pass, and --require makes it an error."""

EPILOG = """\
backends (reference first; --list-backends says which can run here):
  .onnx    ort (reference), ort-noopt, ort-fp16, ort-int8, ort-qdq, ort-cuda, openvino,
           openvino-bf16, openvino-f16; only when named: iree
  .tflite  litert-ref (reference), litert, litert-gpu, openvino, openvino-bf16, openvino-f16;
           only when named: litert-int8, litert-w8, litert-w4, litert-a8w8, litert-a16w8,
           litert-fp16 (ai-edge-quantizer variants)
  PyTorch  torch (reference), torch-bf16, torch-fp16 (--model file.py:FUNCTION); only when
           named: torch-compile, executorch, and the ONNX backends through an export:
           onnx-ort, onnx-ort-fp16, onnx-ort-int8, onnx-ort-qdq, onnx-openvino-f16, ...;
           and the LiteRT backends through a litert-torch conversion: tflite-litert,
           tflite-litert-ref, tflite-litert-int8, ... (needs pip install litert-torch)

inputs: your own with --data (a folder of .npz samples, a file, or a generator), else
generated from the model's signature, the same for every backend: ids within the
vocabulary when the graph shows the embedding table, masks as ones, floats standard normal
(image-like tensors uniform in [0,1)); sample k is seeded with SEED+k. Dynamic dimensions
default to 1 for the first axis and 16 for the others (--dim changes them). Generated inputs
may take 1 GiB in all (every sample and step); a model whose declared dims need more is refused
(exit 2) before anything is allocated: --max-input-bytes raises the budget.

verdicts per backend: PASS, NUMERICAL_INSTABILITY (NaN/Inf where the reference is finite),
SILENT_ZERO_VECTOR (L2 norm < --min-norm where the reference's is not), CONSTANT_OUTPUT,
PRECISION_DEGRADATION (cosine < --min-cosine, norm ratio outside --max-norm-ratio: scale errors
a cosine cannot see, relative error > --max-rel-error, or, for an output of at most 4 values, a
value off by more than 0.01 + 0.01|ref|), ARGMAX_FLIP (top-1 over a class axis changes beyond a
near-tie, or a score in [0, 1] crosses --decision-threshold), RUNTIME_ERROR, UNAVAILABLE. The class axis is found
from a softmax or logits producer (--class-axis names it); elsewhere argmax is not applied.

probe and fallback (default for failing backends): the reference and the failing backend run
again with every intermediate tensor recorded (driftscope's recorders, named by the source
model's nodes / module paths) and driftscope compare names the first divergence, first NaN/Inf
and first silent zero; where recording is impossible or changes the outputs, an ONNX graph is
bisected (prefixes cut after a node, about log2(nodes) runs). For float16 / INT8 backends a
small set of nodes kept in float32 is searched (grow from the probed node, then shrink), rebuilt,
proven to run in float32 in the built variant, re-run, and printed as a recipe. Where the probe
names an origin, replay checks it (--replay auto): the candidate re-run with the reference's
value put back there (the share of each output's error removed), and that op run alone on the
reference's inputs (introduced or inherited); driftscope replay goes further.

exit status: 0 every available backend passes; 1 degraded (PRECISION_DEGRADATION, ARGMAX_FLIP,
RUNTIME_ERROR); 3 silent failure (NUMERICAL_INSTABILITY, SILENT_ZERO_VECTOR, CONSTANT_OUTPUT);
2 usage or input error, the reference backend failed, or a --require'd backend is unavailable.

language models: --model file.py:FUNCTION whose FUNCTION returns a transformers causal LM,
(model, prompt_ids) or a local checkpoint folder's path runs every backend of the generation
recorder (hf reference, hf-bf16, hf-fp16, hf-compile, ...; unavailable ones say why) on
--samples prompts (default 3, generated ids unless given) for --steps new tokens (default 8),
each teacher-forced with the reference's tokens; verdicts on every step's logits: ARGMAX_FLIP
(more than --max-argmax-flip of the steps flip their greedy token), PRECISION_DEGRADATION (max
KL above --max-kl, or a prompt's mean top-k overlap below --min-topk-overlap); failing backends
are probed: the first step and layer beyond tolerance (docs/howto/llm.md).

examples:
  driftscope guard model.onnx
  driftscope guard model.onnx --backends ort-fp16,ort-int8 --dim seq=32 --json guard.json
  driftscope guard model.tflite --input image=cat.npy --require litert
  driftscope guard --model net.py:build --backends torch-fp16 --markdown "$GITHUB_STEP_SUMMARY"
  driftscope guard model.onnx --backends ort-int8 --out guard-out --probe-method both

docs/howto/guard.md explains every backend, input rule and formula."""


def _parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog=PROG, description=DESCRIPTION, epilog=EPILOG,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model_file", nargs="?", metavar="MODEL",
                   help="the .onnx or .tflite model (for PyTorch use --model)")
    p.add_argument("--model", metavar="FILE.py:FUNCTION",
                   help="a PyTorch model: FUNCTION() returns (model, inputs), as for "
                        "`driftscope record torch`; called after torch.manual_seed(SEED); or a "
                        "language model: a transformers causal LM, (model, prompt_ids) or a "
                        "checkpoint folder's path (docs/howto/llm.md)")
    p.add_argument("--backends", metavar="A,B,...",
                   help="backends to check (default: every backend for this kind of model)")
    p.add_argument("--reference", metavar="NAME",
                   help="the backend the others are compared with (default: ort, litert-ref "
                        "or torch)")
    p.add_argument("--reference-model", metavar="FILE",
                   help="run the reference backend on this model instead (a float .tflite for "
                        "a quantized one); inputs follow its signature")
    p.add_argument("--input", "-i", action="append", default=[], metavar="NAME=FILE.npy",
                   help="use this array for input NAME instead of a generated one (repeatable; "
                        "FILE.npz alone gives every array in it by name; NAME=NUMBER gives a "
                        "scalar such as a sample rate, in the input's dtype)")
    p.add_argument("--state", action="append", default=[], metavar="IN=OUT|none",
                   help="a stateful model: output OUT is input IN's value at the next step "
                        "(repeatable; default: pairs found by name and shape, such as "
                        "h_in/h_out, state/stateN; none: no state at all)")
    p.add_argument("--steps", type=int, default=None, metavar="T",
                   help="steps to run a stateful model, carrying its state (default 3); every "
                        "step's outputs are judged; a language model: new tokens per prompt "
                        "(default 8)")
    p.add_argument("--data", metavar="DIR|FILE|FILE.py:FN",
                   help="judge on your own inputs: a folder of .npz samples (arrays named by "
                        "input; .npy for a one-input model), one .npz/.npy file, or a Python "
                        "generator FILE.py:FN yielding {input: array} dicts; inputs a sample "
                        "lacks are generated. Verdicts on generated inputs alone are marked "
                        "synthetic in the report")
    p.add_argument("--metric", metavar="NAME|FILE.py:FN",
                   help="judge by a task metric instead of cosine: top1, topk:K, cosine, "
                        "neg-max-abs, iou (each with an optional :OUTPUT), or FN(reference "
                        "outputs, candidate outputs, sample) -> float, higher is better; arrays in "
                        "--data files that are not inputs reach the sample as labels")
    p.add_argument("--max-drop", type=float, default=0.01, metavar="X",
                   help="with --metric: a backend fails when its mean metric drop over the "
                        "samples exceeds X (default 0.01)")
    p.add_argument("--search-inputs", type=int, default=0, metavar="N",
                   help="per candidate backend, spend N runs searching the float inputs' range "
                        "for the input that breaks it most (random restarts, then a local "
                        "search); the worst one is written as .npz, judged and probed")
    p.add_argument("--input-range", action="append", default=[], metavar="NAME=LO:HI",
                   help="the range --search-inputs explores for input NAME (default: what the "
                        "samples span)")
    p.add_argument("--search-out", metavar="DIR",
                   help="where --search-inputs writes BACKEND.npz (default: OUT/search with "
                        "--out, else ./driftscope-search)")
    p.add_argument("--sensitivity", type=int, default=0, metavar="N",
                   help="for a failing INT8/float16 backend, build at most N variants each "
                        "keeping one node in float32 and rank the nodes by the share of the "
                        "error each removes alone; the fallback search grows in that order")
    p.add_argument("--samples", type=int, default=None, metavar="N",
                   help="run N seeded input samples; each backend reports its worst (default "
                        "1; with --data: every sample, at most N, a generator's first 16; a "
                        "language model: N prompts, default 3)")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of the generated inputs (default 0)")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=SIZE",
                   help="size of a dynamic dimension: a symbolic name (seq=32) or INPUT:AXIS "
                        "(repeatable)")
    p.add_argument("--max-input-bytes", type=_size, default=DEFAULT_MAX_BYTES, metavar="SIZE",
                   help="the inputs of all samples and steps (generated, or read from --input and "
                        "--data files) may take this much "
                        "memory (512M, 2G, ...; default 1G); a model whose dims need more is "
                        "refused before anything is allocated")
    # The guard criteria profile's flags: the rows of the library's table (GuardCriteria,
    # include/driftscope/judge.hpp), whose ranges the library's one validator enforces.
    for row in CRITERIA:
        if row["flags"]:
            p.add_argument(*row["flags"], type=float, default=SEED[row["name"]],
                           metavar=row["metavar"], help=row["help"])
    p.add_argument("--class-axis", action="append", default=[],
                   metavar="AXIS|OUTPUT=AXIS|OUTPUT=none|none",
                   help="the axis argmax flips are judged over, for every output or one "
                        "(repeatable); OUTPUT=none: not that output; none: never (default: "
                        "found from a softmax or logits producer; for PyTorch models the last "
                        "axis, except outputs named other than logits/scores/probs/classes)")
    p.add_argument("--max-kl", type=float, default=None, metavar="NATS",
                   help="a language model: PRECISION_DEGRADATION when KL(reference || "
                        "candidate) of some step's softmaxed logits exceeds this (default 0.01)")
    p.add_argument("--min-topk-overlap", type=float, default=None, metavar="F",
                   help="a language model: PRECISION_DEGRADATION when a prompt's mean top-k "
                        "token overlap over its steps is below F (default 0.8)")
    p.add_argument("--top-k", type=int, default=None, metavar="K",
                   help="a language model: the k of --min-topk-overlap (default 5)")
    p.add_argument("--require", action="append", default=[], metavar="NAME",
                   help="this backend must be available here (repeatable; comma lists too)")
    p.add_argument("--runs", type=int, default=DEFAULT_RUNS, metavar="K",
                   help=f"timed runs per backend; latency is their median (default "
                        f"{DEFAULT_RUNS})")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                   help=f"give up on a backend after this long (default {DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--json", metavar="FILE",
                   help="write the JSON report (docs/guard-schema.json); '-' for stdout, then "
                        "no text report")
    p.add_argument("--markdown", metavar="FILE",
                   help="write a Markdown report, e.g. for $GITHUB_STEP_SUMMARY")
    p.add_argument("--html", metavar="FILE",
                   help="write one self-contained offline HTML page (verdict, backend table, "
                        "findings, probes, fallback recipe); '-' for stdout")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar on stderr (it is drawn only when stderr is a terminal)")
    p.add_argument("--probe", choices=PROBE_MODES, default="auto",
                   help="localise failures layer by layer: auto (failing backends, default), "
                        "always (every backend that ran), never")
    p.add_argument("--probe-method", choices=PROBE_METHODS, default="auto",
                   help="auto (record intermediates; bisect an ONNX graph where recording is "
                        "impossible or changes the outputs), record, bisect, or both (record, "
                        "and bisect as a cross-check)")
    p.add_argument("--fallback", choices=FALLBACK_MODES, default="auto",
                   help="search a verified FP32 fallback for failing float16/INT8 backends "
                        "(auto, default) or not (never); needs the probe")
    p.add_argument("--replay", choices=REPLAY_MODES, default="auto",
                   help="after the probe names an origin of a failing backend, check it "
                        "causally: put the reference's value back there and re-run the "
                        "candidate (the share of each output's error removed), and run that op "
                        "alone on the reference's inputs (introduced / inherited): auto "
                        "(default) or never; never changes a verdict")
    p.add_argument("--repro", metavar="DIR",
                   help="write a repro bundle (driftscope repro's: the smallest subgraph around "
                        "the probe's origin, inputs, expected outputs, run.py) per failing ONNX "
                        "backend into DIR/BACKEND/; DIR must be new or empty; never changes a "
                        "verdict")
    p.add_argument("--fallback-budget", "--fallback-runs", dest="fallback_budget",
                   default=str(DEFAULT_FALLBACK_RUNS), metavar="BUILDS[,SECONDS]",
                   help=f"budget of one fallback search: at most BUILDS variant builds "
                        f"(default {DEFAULT_FALLBACK_RUNS}) and SECONDS of wall time (default: "
                        "no limit); the report says what was used and, when it stops the "
                        "search, what it would have tried next (--fallback-runs N: the same)")
    p.add_argument("--latency-budget", type=float, default=None, metavar="PCT",
                   help="keep the cheapest verified fallback precision (the ladder: INT16 "
                        "activations, bfloat16, float32) whose measured latency is within PCT%% "
                        "of the failing variant's (default: the cheapest verified one); the "
                        "report lists every verified candidate's cosine and latency")
    p.add_argument("--policy", metavar="FILE",
                   help="driftscope compare policy file (TOML or JSON) for the probe's "
                        "comparison (default: --min-cosine)")
    p.add_argument("--out", metavar="DIR",
                   help="keep the probe's recorded dumps (REFERENCE/sampleK.tdump, "
                        "BACKEND/sampleK.tdump) and the fallback's variant models in DIR")
    p.add_argument("--list-backends", action="store_true",
                   help="list every backend, whether it can run here and why not; then exit")
    return p


def _fallback_budget(text: str) -> Tuple[int, Optional[float]]:
    """--fallback-budget BUILDS[,SECONDS] (or --fallback-runs N) -> (builds, seconds or None)."""
    builds, _, secs = text.partition(",")
    try:
        n = int(builds)
        t = float(secs) if secs else None
    except ValueError:
        n, t = 0, None
    if n < 1 or (secs and (t is None or not math.isfinite(t) or t <= 0)):
        raise GuardError(f"--fallback-budget '{text}': expected BUILDS[,SECONDS], BUILDS an "
                         "integer >= 1 and SECONDS a number > 0 (e.g. 20 or 20,120)")
    return n, t


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _model_files(path: Optional[str], role: str) -> list:
    """(file, role) for a model and, for ONNX, the external-data files it names: inputs too."""
    if not path:
        return []
    files = [(path, role)]
    if path.lower().endswith(".onnx") and os.path.isfile(path):
        from ._stateful import onnx_proto

        try:
            files += [(f, f"external data of {path}")
                      for f in onnx_external_files(onnx_proto(path), path)]
        except (Error, OSError, ValueError):  # not a model guard can read: it says so later
            pass
    return files


def _number_inputs(specs: Sequence[str]) -> tuple:
    """``NAME=16000`` (a number, not a file of that name) apart from the file arguments."""
    numbers, files = {}, []
    for spec in specs:
        name, sep, value = spec.partition("=")
        number = None
        if sep and name and not os.path.exists(value):
            for kind in (int, float):
                try:
                    number = kind(value)
                    break
                except ValueError:
                    pass
        if number is None:
            files.append(spec)
        else:
            numbers[name] = number
    return numbers, files


def _ranges(specs: Sequence[str]) -> dict:
    """--input-range NAME=LO:HI values."""
    out = {}
    for spec in specs:
        name, eq, rest = spec.partition("=")
        lo, colon, hi = rest.partition(":")
        try:
            if not (eq and colon and name):
                raise ValueError
            out[name] = (float(lo), float(hi))
        except ValueError:
            raise GuardError(f"--input-range {spec!r}: expected NAME=LO:HI (x=-300:300)") from None
        lo, hi = out[name]
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):  # as guard() says it
            raise GuardError(f"--input-range '{name}={lo}:{hi}': needs finite LO < HI")
    return out


def _data_files(data: Optional[str]) -> list:
    """What --data reads: the file, the generator's file, or the folder's sample files."""
    if not data:
        return []
    if os.path.isdir(data):
        return [(os.path.join(data, f), "--data") for f in sorted(os.listdir(data))
                if f.endswith((".npz", ".npy"))]
    return [(data if os.path.exists(data) else data.rpartition(":")[0], "--data")]


def _split(values: Sequence[str]) -> list:
    return [x.strip() for v in values for x in v.split(",") if x.strip()]


def _list_backends() -> int:
    # One name column for every family, as wide as the longest name (onnx-openvino-f16, and
    # plugins' names) so that summaries and states line up.
    names = [printable(b.name) for f in B.FAMILIES for b in B.family_backends(f)]
    width = max([12] + [len(n) for n in names])
    for family in B.FAMILIES:
        print(f"{family}:")
        for b in B.family_backends(family):
            why = b.unavailable()
            ref = " (default reference)" if B.DEFAULT_REFERENCE[family] == b.name else ""
            state = "available" if why is None else f"unavailable: {why}"
            print(f"  {printable(b.name):<{width}} {printable(b.summary)}{ref}\n"
                  f"  {'':<{width}} {printable(state)}")
    return 0


def cli_main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of ``driftscope guard``; returns the exit status."""
    B.load_plugins()
    try:
        args = parse_args(_parser(), argv)
    except SystemExit as e:  # --help (0) or an argparse usage error (2)
        return int(e.code) if isinstance(e.code, int) else (0 if e.code is None else 2)
    if args.list_backends:
        return _list_backends()
    try:
        if (args.model_file is None) == (args.model is None):
            raise GuardError("give one model: a .onnx or .tflite file, or --model "
                             "file.py:FUNCTION for PyTorch (try driftscope guard --help)")
        model = args.model_file if args.model is None else args.model
        if args.model is not None and ":" not in args.model:
            raise GuardError(f"--model '{args.model}': expected file.py:FUNCTION or "
                             "module:FUNCTION")
        from ..recorders.api import onnx_load_cli_inputs as load_cli_inputs

        # Refused before minutes of runs, not after: a report never replaces what guard reads.
        # An ONNX model's external data is read too: --json weights.bin would replace it.
        reads = (_model_files(args.model_file, "the model")
                 + ([(args.model.rpartition(":")[0], "--model")] if args.model else [])
                 + [(spec.partition("=")[2] or spec, "--input") for spec in args.input]
                 + _model_files(args.reference_model, "--reference-model")
                 + ([(args.policy, "--policy")] if args.policy else [])
                 + _data_files(args.data)
                 + ([(args.metric.rpartition(":")[0], "--metric")]
                    if args.metric and args.metric.rpartition(":")[0].endswith(".py") else []))
        outputs = [("--json", args.json), ("--markdown", args.markdown), ("--html", args.html)]
        for flag, out in outputs:
            same = output_onto_input(out, flag, reads) if out and out != "-" else None
            if same:
                raise GuardError(same)
        named = [(flag, out) for flag, out in outputs if out]
        if sum(out == "-" for _, out in named) > 1:
            raise GuardError("only one report can go to stdout ('-')")
        for i, (flag, out) in enumerate(named):
            for other, out2 in named[i + 1:]:
                if out == out2 and out != "-":
                    raise GuardError(f"{flag} and {other} both name {out}; give each report "
                                     "its own file")
        if args.out and os.path.exists(args.out) and not os.path.isdir(args.out):
            raise GuardError(f"--out '{args.out}': exists and is not a folder")

        if not (math.isfinite(args.timeout) and args.timeout > 0):
            raise GuardError(f"--timeout {args.timeout:g}: allowed a number of seconds above 0")
        builds, seconds = _fallback_budget(args.fallback_budget)
        if args.latency_budget is not None and not (
                math.isfinite(args.latency_budget) and args.latency_budget >= 0):
            raise GuardError(f"--latency-budget {args.latency_budget:g}: must be a finite "
                             "percentage >= 0")
        try:
            numbers, files = _number_inputs(args.input)
            given = dict(load_cli_inputs(files, max_bytes=args.max_input_bytes), **numbers)
            state = parse_state(args.state)
            dims = parse_dims(args.dim)
            class_axis = parse_class_axis(args.class_axis)
        except (InputError, ValueError, Error) as err:
            raise GuardError(str(err)) from err
        with Progress("guard", "backends", enabled=False if args.no_progress else None) as bar, \
                input_budget(args.max_input_bytes):
            report = guard(model, backends=_split([args.backends]) if args.backends else None,
                           reference=args.reference, inputs=given, samples=args.samples,
                           data=args.data, metric=args.metric, max_drop=args.max_drop,
                           search_inputs=args.search_inputs,
                           input_ranges=_ranges(args.input_range), search_out=args.search_out,
                           sensitivity=args.sensitivity,
                           seed=args.seed, dims=dims,
                           **{r["keyword"]: getattr(args, r["name"]) for r in CRITERIA
                              if r["flags"]},
                           class_axis=class_axis,
                           require=_split(args.require), runs=args.runs, timeout=args.timeout,
                           reference_model=args.reference_model, steps=args.steps,
                           state=state or None,
                           probe=args.probe, fallback=args.fallback, policy=args.policy,
                           out=args.out, probe_method=args.probe_method,
                           fallback_runs=builds, fallback_seconds=seconds,
                           latency_budget=args.latency_budget,
                           replay=args.replay, repro=args.repro,
                           progress=lambda done, total, name: bar.update(done, total, name),
                           max_kl=args.max_kl, min_topk_overlap=args.min_topk_overlap,
                           top_k=args.top_k)
        if args.json:
            write_output(args.json, report.to_json())
        if args.markdown:
            write_output(args.markdown, report.to_markdown())
        if args.html:
            write_output(args.html, report.to_html())
    except (Error, OSError) as err:
        msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        print(f"{PROG}: error: {printable(msg)}", file=sys.stderr)
        return 2
    except MemoryError:  # exit 1 would read as "degraded"; this is the user's to fix
        print(f"{PROG}: error: out of memory (the generated inputs may take "
              f"{format_size(args.max_input_bytes)}: lower --max-input-bytes, or give the "
              "inputs with --input)", file=sys.stderr)
        return 2
    if "-" not in (args.json, args.markdown, args.html):
        sys.stdout.write(report.to_text())
    return report.exit_code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(cli_main())
