"""``driftscope.guard(model, ...)``: run one model on every backend and judge each against the
reference backend."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import pickle
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .. import _core
from .._pyexec import kill_group, module_command
from ..errors import Error, InvalidArgumentError
from .backends import registry as B
from .backends.torch import torch_example, torch_leaves
from . import _cpu
from . import _data as D
from ._env import child_env
from ._process import _child_env, _local, _start_forker, run_backend  # noqa: F401
from . import _inputs as I
from . import _stateful as S
from ._classaxis import ClassAxisSpec, class_axes
from ._metrics import (PASS, PRECISION_DEGRADATION, REFERENCE, RUNTIME_ERROR, SEED, SEVERITY,
                       SILENT, UNAVAILABLE,
                       OutputResult, Thresholds,
                       by_position, judge_named, worse)
from ._fallback import DEFAULT_FALLBACK_RUNS
from ._investigate import FALLBACK_MODES, PROBE_METHODS, PROBE_MODES, Context, investigate
from ._replaying import REPLAY_MODES
from ._job import Job
from ._report import BackendResult, GuardReport, reason_line

PathLike = Union[str, "os.PathLike[str]"]

# Sizes tried, in turn, for dynamic dimensions nothing sized when the reference cannot run at
# the default 16 (within --max-input-bytes).
RETRY_DIMS = (64, 256, 1024, 4096)

DEFAULT_RUNS = 5
DEFAULT_TIMEOUT_S = 600.0
# --max-drop: a backend may lose this much of the task metric (mean over the samples)
DEFAULT_MAX_DROP = 0.01


class GuardError(Error, ValueError):
    """Usage or input error, or the reference backend failed: the guard cannot judge anything
    (the command exits 2). The message is one line."""

    def __init__(self, message: str, code_name: str = "guard_error") -> None:
        super().__init__(message, 0, code_name)


def family_of(model: str) -> str:
    low = model.lower()
    if low.endswith(".onnx"):
        return "onnx"
    if low.endswith(".tflite"):
        return "tflite"
    module, sep, func = model.rpartition(":")
    if sep and module and func and not os.path.isfile(model):
        return "torch"
    raise GuardError(f"cannot tell what kind of model '{model}' is: give a .onnx or .tflite file, "
                     "or a PyTorch entry point as file.py:FUNCTION (or module:FUNCTION)")


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """While the user's code runs in this process (a PyTorch entry point's import and build()),
    what it prints goes to stderr: stdout carries the report (`--json -`, the verdict as the
    first line). Descriptor 1 itself points at 2, for os.write(1, ...) and C extensions."""
    _flush_stdout()
    saved: Optional[int] = None
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no descriptor 1 or 2: sys.stdout alone is redirected
        if saved is not None:
            os.close(saved)
            saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        _flush_stdout()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def _flush_stdout() -> None:
    """Python's streams and C's stdio buffers (a C extension's printf into a pipe is held there
    and would reach descriptor 1 after it is restored)."""
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:  # noqa: BLE001 - None, or closed
            pass
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except Exception:  # noqa: BLE001 - no C library to flush
        pass


def _signature(family: str, model: str, seed: int,
               constants: Optional[List[I.InputInfo]] = None) -> List[I.InputSpec]:
    """The model's inputs; a PyTorch entry point's arguments that are not tensors (passed as
    they are to every backend) go into `constants`, for the report."""
    try:
        if family == "onnx":
            return I.onnx_signature(S.onnx_proto(model))
        if family == "tflite":
            from ..recorders.api import litert_open

            it, _ = litert_open(model)
            return I.litert_signature(it.get_input_details())
    except (Error, ImportError, OSError, ValueError) as err:
        raise GuardError(_first_line(err), "model_load_failed") from err
    try:
        with _stdout_to_stderr():
            example = torch_example(model, seed)[1]
        leaves = torch_leaves(example)
        import torch

        if constants is not None:
            constants.extend(I.constant_infos(example, leaves))
        return I.example_signature({
            k: (v.detach().float() if v.dtype == torch.bfloat16 else v.detach()).cpu().numpy()
            for k, v in leaves.items()})
    except Error as err:
        raise GuardError(_first_line(err), "model_load_failed") from err
    # The user's entry point may raise anything, sys.exit() too: exit 2 with its message.
    except (Exception, SystemExit) as err:  # noqa: BLE001
        raise GuardError(f"--model {model}: {type(err).__name__}: {_first_line(err)}",
                         "model_load_failed") from err


def _llm_refuse(**options: Any) -> None:
    """The options a language model's guard does not take (its inputs are prompts)."""
    for name, value in options.items():
        if value:
            flag = {"inputs": "--input", "dims": "--dim"}.get(name, "--" + name.replace("_", "-"))
            raise GuardError(f"{flag}: not supported for a language model (its inputs are "
                             "prompt token ids: return (model, prompt_ids); --samples prompts, "
                             "--steps new tokens)", "invalid_argument")


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _median_ms(times: Sequence[float]) -> Optional[float]:
    return statistics.median(times) * 1e3 if times else None


def _resolve_backends(family: str, backends: Optional[Sequence[str]], reference: Optional[str],
                      require: Sequence[str], ref_family: Optional[str] = None
                      ) -> Tuple[List[str], str]:
    known = B.family_backends(family)
    known_names = [b.name for b in known]
    ref_family = ref_family or family

    def check(name: str, what: str) -> None:
        if name in known_names:
            return
        if what == "--reference" and name in B.BACKENDS and B.BACKENDS[name].family == ref_family:
            return
        if name in B.BACKENDS:
            raise GuardError(f"{what} '{name}' runs {B.BACKENDS[name].family} models, not "
                             f"{family} ones (for this model: {', '.join(known_names)})",
                             "invalid_argument")
        raise GuardError(f"unknown backend '{name}' ({what}); for a {family} model choose from: "
                         f"{', '.join(known_names)}", "invalid_argument")

    chosen = list(backends) if backends else [b.name for b in known if b.default]
    for n in chosen:
        check(n, "--backends")
    ref = reference or B.DEFAULT_REFERENCE[ref_family]
    check(ref, "--reference")
    for n in require:
        check(n, "--require")
    ordered = [ref] + [n for n in dict.fromkeys(list(chosen) + list(require)) if n != ref]
    return ordered, ref



def _check_criteria(**values: Any) -> None:
    """The guard criteria profile checked by the library's one validator of judging options
    (src/options/option_validate.cpp): "guard option 'min_cosine' is 1.5, allowed -1 .. 1"."""
    for flag, value in values.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise GuardError(f"{flag}={value!r}: must be a number", "invalid_argument")
    try:
        _core.validate_guard_criteria(**{k: None if v is None else float(v)
                                         for k, v in values.items()})
    except Error as err:  # its message without the "invalid_argument: " of every core error
        text = str(err)
        raise GuardError(text.split(": ", 1)[1] if text.startswith(err.code_name + ": ") else text,
                         "invalid_argument") from None

def guard(model: PathLike, backends: Optional[Sequence[str]] = None,
          reference: Optional[str] = None, inputs: Optional[Mapping[str, Any]] = None,
          samples: Optional[int] = None, seed: int = 0,
          dims: Optional[Mapping[str, int]] = None, data: Optional[PathLike] = None,
          metric: Optional[str] = None, max_drop: float = DEFAULT_MAX_DROP,
          search_inputs: int = 0, input_ranges: Optional[Mapping[str, Tuple[float, float]]] = None,
          search_out: Optional[PathLike] = None, sensitivity: int = 0,
          min_cosine: float = SEED["min_cosine"], min_norm: float = SEED["min_norm"],
          max_argmax_flip: float = SEED["max_argmax_flip"],
          max_rel_error: Optional[float] = None, max_norm_ratio: float = SEED["max_norm_ratio"],
          decision_threshold: float = SEED["decision_threshold"], class_axis: ClassAxisSpec = None,
          max_input_bytes: Optional[int] = None,
          require: Sequence[str] = (), runs: int = DEFAULT_RUNS,
          timeout: float = DEFAULT_TIMEOUT_S, reference_model: Optional[PathLike] = None,
          steps: Optional[int] = None, state: Union[None, str, Mapping[str, str]] = None,
          probe: str = "auto", fallback: str = "auto",
          policy: Optional[PathLike] = None, out: Optional[PathLike] = None,
          probe_method: str = "auto", fallback_runs: int = DEFAULT_FALLBACK_RUNS,
          replay: str = "auto", fallback_seconds: Optional[float] = None,
          latency_budget: Optional[float] = None, repro: Optional[PathLike] = None,
          progress: Optional[Callable[[int, int, str], None]] = None,
          max_kl: Optional[float] = None, min_topk_overlap: Optional[float] = None,
          top_k: Optional[int] = None) -> GuardReport:
    """Runs `model` on the reference backend and every backend of `backends` (default: every
    backend for the model's kind), each in its own process, on the same deterministic inputs,
    and judges every output of every backend against the reference.

    model: a .onnx or .tflite path, or a PyTorch entry point "file.py:FUNCTION" whose FUNCTION()
        returns (model, inputs) (called after torch.manual_seed(seed), in every process).
    inputs: arrays by input name that replace the generated ones (every sample).
    samples / seed: sample k's inputs come from numpy.random.default_rng(seed + k); each
        backend's row shows its worst sample (default 1 sample; with `data`, every sample it
        has, and `samples` caps how many are read).
    data: the user's own samples (guard.md "Real inputs"): a folder of .npz/.npy files, one
        .npz/.npy file, or a generator "file.py:FUNCTION"; every sample is judged, probed and
        calibrated on, and the report says which inputs were real and which synthetic.
    metric / max_drop: a task metric (guard.md "Task metric": a built-in such as "top1", or
        "file.py:FUNCTION" taking (reference outputs, candidate outputs, sample) -> float,
        higher is better), evaluated per sample in each backend's child; a backend whose mean
        drop exceeds max_drop is PRECISION_DEGRADATION, one within it PASS whatever its cosine
        (silent failures keep their own rules). Arrays in --data files that are not model
        inputs reach the metric's sample (labels).
    search_inputs: runs of both backends to spend per candidate searching for the input that
        breaks it (guard.md "Inputs that break a backend"; 0: no search). The float inputs
        range over input_ranges {input: (low, high)} or what the samples span; the worst input
        found is written as search_out/BACKEND.npz (default: OUT/search with `out`, else
        ./driftscope-search), judged as one more sample of that backend, and probed.
    sensitivity: rank at most this many nodes of a failing backend that can keep nodes in
        float32 by the error each removes alone (guard.md "Sensitivity"; 0: no ranking); the
        fallback search then grows in that order.
    dims: sizes of dynamic dimensions, by symbolic name ("seq") or "INPUT:AXIS".
    min_cosine / min_norm / max_argmax_flip / max_rel_error / max_norm_ratio /
        decision_threshold: the thresholds (docs/howto/guard.md §5); max_rel_error None: the
        bound the cosine and norm-ratio rules imply.
    max_input_bytes: the budget of generated inputs, every sample and step together (default:
        1 GiB, or what the guard command's --max-input-bytes set); more is a GuardError before
        anything is allocated.
    class_axis: the axis argmax flips are judged over: an int for every output, {output: axis},
        "none", or None (found from the graph: a softmax or logits producer; _classaxis.py).
    require: backends that must be available (otherwise the verdict is "incomplete", exit 2).
    reference_model: another model file for the reference backend (a float .tflite for a
        quantized one); the inputs follow its signature, and a backend whose model takes
        quantized integers quantizes them with its own scale and zero point.
    state / steps: state input -> output pairs of a stateful model ("none": no state; default:
        found by name and shape,
        docs/howto/guard.md) and how many steps to run carrying them (default 3 when there
        are pairs); every step's outputs are judged.
    runs: timed runs of the first sample per backend (latency = their median).
    progress(done, total, backend) is called before each backend runs.
    probe: "auto" (probe failing backends), "always" (every backend that ran) or "never":
        record reference and candidate with intermediates (or bisect the graph) and name the
        first divergence, NaN/Inf and silent zero by the source model's nodes.
    fallback: "auto" (for failing backends that can keep nodes in float32, search, rebuild,
        prove and re-run a variant with a small set of nodes in float32) or "never".
    policy: a driftscope compare policy file for the probe's comparison (default: the
        --min-cosine criterion). out: a folder that keeps the recorded dumps and variant models.
    probe_method: "auto" (record; bisect where recording is impossible or changes outputs),
        "record", "bisect", or "both" (record, and bisect as a cross-check).
    fallback_runs: the cap on variant builds of one fallback search (--fallback-budget BUILDS).
    fallback_seconds: and on its wall time in seconds (--fallback-budget BUILDS,SECONDS; None:
        no limit); when either stops it, the report says what it would have built next.
    latency_budget: PCT: keep the cheapest verified rung of the fallback ladder whose measured
        latency is within PCT% of the failing variant's (None: the cheapest verified rung).
    replay: "auto" (after a probe names an origin of a failing backend, put the reference's
        value back there and re-run the candidate, and run the origin's op alone on the
        reference's inputs: docs/howto/guard.md §8) or "never". Replay never changes a verdict.
    repro: a folder (new, or empty) for a repro bundle per failing ONNX backend whose probe named
        an origin (REPRO/BACKEND/, driftscope repro's bundle; guard.md §8); needs the probe.
    max_kl / min_topk_overlap / top_k: a language model's thresholds (an entry point giving a
        causal LM: _llm.py, docs/howto/llm.md "Guard"); `steps` is then the new tokens per
        prompt and `samples` the number of prompts.
    Raises GuardError for bad arguments, a model that does not load, inputs that do not fit,
    and a reference backend that is unavailable or fails.
    """
    B.load_plugins()
    model = os.fspath(model)
    if not isinstance(sensitivity, int) or sensitivity < 0:
        raise GuardError(f"sensitivity={sensitivity!r}: must be an integer >= 0",
                         "invalid_argument")
    if samples is not None and (not isinstance(samples, int) or samples < 1):
        raise GuardError(f"samples={samples!r}: must be an integer >= 1", "invalid_argument")
    if not isinstance(runs, int) or runs < 1:
        raise GuardError(f"runs={runs!r}: must be an integer >= 1", "invalid_argument")
    _check_criteria(min_cosine=min_cosine, min_norm=min_norm, max_argmax_flip=max_argmax_flip,
                    max_rel_error=max_rel_error, max_norm_ratio=max_norm_ratio,
                    decision_threshold=decision_threshold)
    for value, allowed, what in ((probe, PROBE_MODES, "probe"),
                                 (fallback, FALLBACK_MODES, "fallback"),
                                 (probe_method, PROBE_METHODS, "probe_method"),
                                 (replay, REPLAY_MODES, "replay")):
        if value not in allowed:
            raise GuardError(f"{what}={value!r}: must be one of {', '.join(allowed)}",
                             "invalid_argument")
    if not isinstance(fallback_runs, int) or fallback_runs < 1:
        raise GuardError(f"fallback_runs={fallback_runs!r}: must be an integer >= 1",
                         "invalid_argument")
    for value, what in ((fallback_seconds, "fallback_seconds"),
                        (latency_budget, "latency_budget")):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or value < 0
                                  or (what == "fallback_seconds" and value == 0)):
            raise GuardError(f"{what}={value!r}: must be a finite number "
                             f"{'> 0' if what == 'fallback_seconds' else '>= 0'}",
                             "invalid_argument")
    if repro is not None:
        from ._reproing import RefusedDir, check_dir

        if probe == "never":
            raise GuardError("--repro needs the probe (it cuts around the origin the probe "
                             "names): drop --probe never", "invalid_argument")
        try:
            repro = check_dir(os.fspath(repro))
        except RefusedDir as err:
            raise GuardError(str(err), "invalid_argument") from None
    if policy is not None:
        _check_policy(os.fspath(policy))
    family = family_of(model)
    llm_options = {"max_kl": max_kl, "min_topk_overlap": min_topk_overlap, "top_k": top_k}
    if family == "torch" and reference_model is None:
        from . import _llm
        from ..recorders.api import llm_backends

        named = list(backends or []) + list(require) + ([reference] if reference else [])
        llm_named = any(n in llm_backends for n in named)
        if not llm_named:
            # A misspelt backend is refused before the user's code runs (it may take minutes),
            # so before it is known whether the model is a language model: both lists.
            try:
                _resolve_backends(family, backends, reference, require, family)
            except GuardError as err:
                raise GuardError(f"{err.message}; for a language model: "
                                 f"{', '.join(llm_backends)}", err.code_name) from None
        found = _llm.detect(model, seed, lambda msg: GuardError(msg, "model_load_failed"),
                            _stdout_to_stderr, llm_named)
        if found is not None:
            _llm_refuse(inputs=inputs, data=data, metric=metric, search_inputs=search_inputs,
                        sensitivity=sensitivity, dims=dims, state=state, repro=repro,
                        policy=policy)
            return _llm.run(found, entry=model, error=GuardError, backends=backends,
                            reference=reference, require=require, samples=samples, seed=seed,
                            steps=steps, max_argmax_flip=max_argmax_flip, probe=probe, out=out,
                            progress=progress, **llm_options)
    given = [k for k, v in llm_options.items() if v is not None]
    if given:
        raise GuardError(f"{given[0]}: a threshold of a language model's guard; this model is "
                         "not one (docs/howto/llm.md)", "invalid_argument")
    ref_model = model if reference_model is None else os.fspath(reference_model)
    ref_family = family_of(ref_model)
    order, ref = _resolve_backends(family, backends, reference, require, ref_family)
    for m, fam in ((model, family), (ref_model, ref_family)):
        if fam != "torch" and not os.path.isfile(m):
            raise GuardError(f"cannot load model '{m}': no such file", "model_load_failed")
    if steps is not None and (not isinstance(steps, int) or steps < 1):
        raise GuardError(f"steps={steps!r}: must be an integer >= 1", "invalid_argument")
    try:
        _cpu.hidden()
    except _cpu.HideError as e:
        raise GuardError(str(e), "invalid_argument") from None
    # Started now, it imports while this process reads the model's signature.
    previous = getattr(_local, "forker", None)
    _local.forker = _start_forker(order, [m for m, fam in ((model, family), (ref_model, ref_family))
                                          if fam == "torch"])
    # A PyTorch model is exported to ONNX once per run, for every onnx-* backend (backends/torch_extra.py).
    previous_export = getattr(_local, "export_dir", None)
    _local.export_dir = (tempfile.mkdtemp(prefix="driftscope-export-")
                         if family == "torch" else None)
    try:
        why = B.BACKENDS[ref].unavailable()
        if why:
            raise GuardError(f"the reference backend '{ref}' is unavailable: {why}",
                             "reference_failed")
        constants: List[I.InputInfo] = []
        specs = _signature(ref_family, ref_model, seed, constants)
        paired: Dict[str, Tuple[str, str]] = {}
        if ref_model != model:
            cand_specs = _signature(family, model, seed)
            paired = _same_inputs(specs, cand_specs, model, ref_model, family, ref_family)
            specs = _fixed_by_candidate(specs, cand_specs, paired, dict(dims or {}))
        # The candidate's feeds under its own names (feeds are made by the reference's).
        rename = {r: c for r, (c, _) in paired.items() if r != c}
        pairs, steps = _state_pairs(family, model, state, steps)
        if rename and pairs:
            raise GuardError("--reference-model: the models name their inputs differently "
                             f"({', '.join(f'{a} = {b}' for a, b in rename.items())}) and the "
                             "state of a stateful model is carried by name: give both models "
                             "the same input names, or --state none", "input_mismatch")
        if metric is not None:
            _check_metric(metric, max_drop)
        dataset = None
        if data is not None:
            try:
                dataset = D.load(os.fspath(data), [sp.name for sp in specs], samples,
                                 max_input_bytes if max_input_bytes is not None
                                 else I.budget(), labels_ok=metric is not None)
            except (I.InputError, InvalidArgumentError) as err:
                raise GuardError(str(err), "input_mismatch") from err
            samples = len(dataset.samples)
        elif samples is None:
            samples = 1

        def prepare(default_dim: int) -> Tuple[List[Any], List[I.InputInfo]]:
            """Every sample's feeds (with their steps) and how each input was made, the dynamic
            dimensions nothing sized given `default_dim`."""
            try:
                made, infos = I.make_samples(specs, dict(inputs or {}), dict(dims or {}), seed,
                                             samples, steps if pairs else 1,
                                             max_bytes=max_input_bytes, default_dim=default_dim,
                                             data=dataset)
            except I.InputError as err:
                raise GuardError(str(err), "input_mismatch") from err
            feeds: List[Any] = made
            for info in infos:
                if info.name in paired:
                    other, how = paired[info.name]
                    info.how += (f"; is '{other}' of {os.path.basename(model)} (paired {how})"
                                 if other != info.name else "")
            if pairs:
                per_sample = made if steps > 1 else [[m] for m in made]
                feeds = S.make_steps([p[0] for p in per_sample], per_sample, pairs)
                for info in infos:
                    if info.name in pairs:
                        out_name = pairs[info.name]
                        info.how += (f"; steps 2..{steps}: the backend's own output "
                                     f"'{out_name}'" if steps > 1 else
                                     f"; state output '{out_name}'")
            return feeds, infos + constants

        feeds, infos = prepare(I.DEFAULT_DIM)

        def runner(backend: str, m: str, samples: List[Any], *args: Any,
                   **kw: Any) -> Dict[str, Any]:
            if rename and m == model:
                samples = _renamed(samples, rename)
                if isinstance(kw.get("feeds"), (dict, S.Steps)):
                    kw["feeds"] = _renamed([kw["feeds"]], rename)[0]
                if isinstance(kw.get("calibration"), list):  # ort-qdq calibrates on these
                    kw["calibration"] = _renamed(kw["calibration"], rename)
            return run_backend(backend, m, samples, *args, **kw)

        try:
            axes = class_axes(ref_family, ref_model, class_axis)
        except (Error, ImportError, OSError, ValueError) as err:
            raise GuardError(f"class axes of {ref_model}: {_first_line(err)}",
                             "model_load_failed") from err
        thresholds = Thresholds(float(min_cosine), float(min_norm), float(max_argmax_flip),
                                max_rel_error=(None if max_rel_error is None
                                               else float(max_rel_error)),
                                max_norm_ratio=float(max_norm_ratio),
                                decision_threshold=float(decision_threshold), class_axes=axes)

        def tick(done: int, name: str) -> None:
            if progress is not None:
                progress(done, len(order), name)

        tick(0, ref)
        if search_inputs:
            if not isinstance(search_inputs, int) or search_inputs < 1:
                raise GuardError(f"search_inputs={search_inputs!r}: must be an integer >= 1",
                                 "invalid_argument")
            if pairs or rename:
                raise GuardError("--search-inputs: not supported yet for a stateful model or "
                                 "a --reference-model whose inputs are named differently",
                                 "invalid_argument")
            for name, rng_ in (input_ranges or {}).items():
                if name not in {sp.name for sp in specs}:
                    raise GuardError(f"--input-range '{name}': the model has no input of that "
                                     "name", "invalid_argument")
                lo, hi = rng_
                if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                    raise GuardError(f"--input-range '{name}={lo}:{hi}': needs finite LO < HI",
                                     "invalid_argument")
        task: Dict[str, Any] = {}
        if metric is not None:
            if pairs:
                raise GuardError("--metric: a stateful model (state carried between steps) is "
                                 "not supported yet; give --state none to judge one step",
                                 "invalid_argument")
            task = {"metric": metric, "metric_samples": [
                dict(f, **(dataset.labels[k] if dataset is not None else {}))
                for k, f in enumerate(feeds)]}
        ref_run = run_backend(ref, ref_model, feeds, runs, seed, timeout, pairs, **task)
        # Dimensions nothing sized start at 16; a model whose reference cannot run at that size
        # (an STFT frame of 400 samples, a pooling pyramid) is tried at larger sizes, within the
        # input budget, and the report says which size ran and which did not.
        if ref_run.get("error") and any(i.resizable for i in infos):
            first = ref_run
            for size in RETRY_DIMS:
                try:
                    more, more_infos = prepare(size)
                except GuardError:  # over the input budget: stop growing
                    break
                again = run_backend(ref, ref_model, more, runs, seed, timeout, pairs)
                if not again.get("error"):
                    feeds, infos, ref_run = more, more_infos, again
                    for info in infos:
                        if info.resizable:
                            info.how += (f"; its unsized dimensions are {size}: the reference "
                                         f"failed at {I.DEFAULT_DIM}"
                                         + "".join(f", {s}" for s in RETRY_DIMS
                                                   if s < size) + " (--dim sets them)")
                    break
            if ref_run.get("error"):
                ref_run = first  # the error at the default size is the one to show
        if ref_run.get("error"):
            hint = ""
            if pairs and not state:
                found = ", ".join(f"{a}->{b}" for a, b in pairs.items())
                hint = (f" (it ran {steps} steps carrying the state {found}, a pairing inferred "
                        "from the names: --state IN=OUT names the real state, --state none "
                        "runs one step without any)")
            guessed = [g for info in infos for g in info.guessed]
            if guessed:
                grown = (f", and failed again with them at {', '.join(map(str, RETRY_DIMS))}"
                         if any(i.resizable for i in infos) else "")
                hint += (f" (on generated inputs whose dynamic dimensions were guessed: "
                         f"{', '.join(guessed[:8])}{', ...' if len(guessed) > 8 else ''}"
                         f"{grown}; give real sizes with --dim NAME=SIZE or --dim "
                         "INPUT:AXIS=SIZE, or real inputs with --input NAME=FILE.npy)")
            raise GuardError(f"the reference backend '{ref}' failed: "
                             f"{reason_line(ref_run['error'])}{hint}", "reference_failed")
        if ref_run.get("metric_error"):
            raise GuardError(f"{ref_run['metric_error']} (on the reference {ref})",
                             "invalid_argument")
        ref_outputs: List[Dict[str, np.ndarray]] = ref_run["outputs"]
        ref_ms = _median_ms(ref_run["latency_s"])
        results: List[BackendResult] = []
        for done, name in enumerate(order):
            tick(done, name)
            b = B.BACKENDS[name]
            row = BackendResult(name=name, summary=b.summary, note=b.note, status=PASS,
                                required=name in require, reference=name == ref)
            if name == ref:
                run = ref_run
            else:
                why = b.unavailable()
                if why:
                    row.status, row.reason = UNAVAILABLE, why
                    results.append(row)
                    continue
                run = runner(name, model, feeds, runs, seed, timeout, pairs,
                             **(dict(task, metric_refs=ref_outputs) if task else {}))
            row.notes = list(run.get("notes", []))
            row.load_s = run.get("load_s")
            row.latency_ms = _median_ms(run.get("latency_s", []))
            row.runs = len(run.get("latency_s", []))
            if row.latency_ms is not None and ref_ms:
                row.latency_ratio = row.latency_ms / ref_ms
            if run.get("unavailable"):  # it ran without exercising what it is named for
                row.status, row.reason, row.note = UNAVAILABLE, run["error"], ""
                results.append(row)
                continue
            if run.get("error"):
                row.status, row.error, row.signal = RUNTIME_ERROR, run["error"], run.get("signal")
                row.note = ""  # what the backend exercises: said of rows that ran
                results.append(row)
                continue
            if ref_model != model and name != ref:
                _by_position(run, ref_outputs, row.notes)
            worst_by_output: Dict[str, OutputResult] = {}
            unjudged: List[str] = []
            for k, (r_out, c_out) in enumerate(zip(ref_outputs, run["outputs"])):
                for oname, rv in r_out.items():
                    if not isinstance(rv, np.ndarray) or rv.dtype.kind not in "biuf":
                        if oname not in unjudged:
                            unjudged.append(oname)
                        continue
                    res = judge_named(oname, rv, c_out, thresholds, k)
                    if name == ref:
                        res.status = REFERENCE
                    old = worst_by_output.get(oname)
                    if old is None or worse(res, old):
                        worst_by_output[oname] = res
            if unjudged:
                row.notes.append(f"not judged (not numeric tensors): {', '.join(unjudged)}")
            row.outputs = list(worst_by_output.values())
            if row.outputs and name != ref:  # the reference's row has no worst output
                row.worst = row.outputs[0]
                for o in row.outputs[1:]:
                    if worse(o, row.worst):
                        row.worst = o
                row.status = row.worst.status
            elif name == ref:
                row.status = REFERENCE
            if task:
                _judge_task(row, run, ref_run, metric, max_drop)
            results.append(row)
        if search_inputs:
            where = (os.fspath(search_out) if search_out is not None else
                     os.path.join(os.fspath(out), "search") if out is not None
                     else "driftscope-search")
            _search_rows(results, runner, model, ref, ref_model, feeds, ref_outputs,
                         search_inputs, dict(input_ranges or {}), metric, max_drop, where,
                         seed, timeout, thresholds)
        if probe != "never":
            if out is not None:
                work = os.fspath(out)
                os.makedirs(work, exist_ok=True)
            else:
                work = tempfile.mkdtemp(prefix="driftscope-probe-")
            ctx = Context(model=model, family=family, reference=ref, samples=feeds,
                          ref_outputs=ref_outputs, seed=seed, thresholds=thresholds,
                          policy=os.fspath(policy) if policy is not None else None, work=work,
                          keep_files=out is not None, timeout=timeout, runs=runs,
                          runner=runner, probe_method=probe_method,
                          fallback_runs=fallback_runs, fallback_seconds=fallback_seconds,
                          latency_budget=latency_budget, task=task or None,
                          ref_metric=ref_run.get("metric") if task else None,
                          max_drop=max_drop,
                          ref_model=ref_model if ref_model != model else None,
                          state=dict(pairs) if pairs else None, steps=steps if pairs else 1,
                          sensitivity=sensitivity, replay=replay)
            investigate(results, ctx, probe, fallback)
            if repro is not None:
                from ._reproing import write_bundles

                write_bundles(results, ctx, os.fspath(repro))
        return GuardReport(model=model, family=family, reference=ref, backends=results,
                           inputs=infos, samples=samples, seed=seed, runs=runs,
                           thresholds=thresholds, required=list(require),
                           reference_nonfinite=_nonfinite(ref_outputs), probe=probe,
                           fallback=fallback, out=os.fspath(out) if out is not None else None,
                           output_names=list(ref_outputs[0]) if ref_outputs else [],
                           metric=metric, max_drop=max_drop if metric else None)
    except BaseException:
        # Interrupted (^C, or SIGTERM/SIGHUP turned into an exception by the command) or
        # failed: the running backend child goes with the server, not after it.
        if _local.forker is not None:
            _local.forker.close(kill=True)
        raise
    finally:
        if _local.forker is not None:
            _local.forker.close()
        _local.forker = previous
        if _local.export_dir is not None:
            import shutil

            shutil.rmtree(_local.export_dir, ignore_errors=True)
        _local.export_dir = previous_export



def _search_rows(results: List[BackendResult], runner: Callable[..., Dict[str, Any]], model: str,
                 ref: str, ref_model: str, feeds: List[Any], ref_outputs: List[Any],
                 budget: int, ranges: Dict[str, Tuple[float, float]], metric: Optional[str],
                 max_drop: float, where: str, seed: int, timeout: float,
                 thresholds: Thresholds) -> None:
    """--search-inputs (_search.py) for every candidate row that ran: the worst input found is
    written as WHERE/BACKEND.npz and becomes one more sample of that row (appended to `feeds`
    and `ref_outputs`, so the probe can run on it)."""
    for row in results:
        if row.reference or row.status in (UNAVAILABLE, RUNTIME_ERROR):
            continue
        res = runner(row.name, model, feeds, 0, seed, timeout, None, kind="search",
                     reference=ref, search={"evaluations": budget, "ranges": ranges,
                                            "ref_model": ref_model if ref_model != model
                                            else None, "metric": metric})
        if res.get("error"):
            row.search = {"error": reason_line(res["error"])}
            continue
        k = len(feeds)
        feeds.append(res["feeds"])
        ref_outputs.append(res["ref_outputs"])
        os.makedirs(where, exist_ok=True)
        path = os.path.join(where, "".join(c if c.isalnum() or c in "-_." else "_"
                                           for c in row.name) + ".npz")
        tmp = path + ".part.npz"
        np.savez(tmp, **res["feeds"])
        os.replace(tmp, path)
        judged: Optional[OutputResult] = None
        for oname, rv in res["ref_outputs"].items():
            if not isinstance(rv, np.ndarray) or rv.dtype.kind not in "biuf":
                continue
            o = judge_named(oname, rv, res["outputs"], thresholds, k)
            if judged is None or worse(o, judged):
                judged = o
        row.search = {"evaluations": res["evaluations"], "start": res["start_score"],
                      "found": res["score"], "file": path, "sample": k,
                      "measure": "metric drop" if metric else "relative error",
                      "box": res["box"], "status": judged.status if judged else None}
        if judged is None:
            continue
        if metric is not None and judged.status not in SILENT:
            judged.status = PRECISION_DEGRADATION if res["score"] > max_drop else PASS
        row.search["status"] = judged.status
        if row.worst is None or worse(judged, row.worst):
            row.worst = judged
            row.outputs = [o for o in row.outputs if o.name != judged.name] + [judged]
        if SEVERITY[judged.status] > SEVERITY[row.status]:
            row.status = judged.status


def _check_metric(metric: str, max_drop: float) -> None:
    """--metric / --max-drop checked before anything runs (the metric itself is loaded only in
    the children: the user's code never runs in the guard's own process)."""
    from . import _task

    if not (isinstance(max_drop, (int, float)) and math.isfinite(max_drop)):
        raise GuardError(f"max_drop={max_drop!r}: must be a finite number", "invalid_argument")
    head = metric.partition(":")[0]
    if head in _task.BUILTINS:
        if head == "topk":
            try:
                _task.load(metric)
            except _task.MetricError as err:
                raise GuardError(str(err), "invalid_argument") from None
        return
    file_part = metric.rpartition(":")[0]
    if not file_part or not metric.rpartition(":")[2]:
        raise GuardError(f"--metric {metric!r}: not a built-in ({', '.join(_task.BUILTINS)}) "
                         "and not FILE.py:FUNCTION", "invalid_argument")
    if file_part.endswith(".py") and not os.path.isfile(file_part):
        raise GuardError(f"--metric: no such file {file_part!r}", "invalid_argument")


def _judge_task(row: BackendResult, run: Dict[str, Any], ref_run: Dict[str, Any],
                metric: str, max_drop: float) -> None:
    """The task metric's verdict on one row (_task.py): it replaces the cosine rules' PASS /
    PRECISION_DEGRADATION / ARGMAX_FLIP; silent failures and runtime errors stay."""
    from . import _task

    if run.get("metric_error"):
        raise GuardError(f"{run['metric_error']} (on {row.name})", "invalid_argument")
    if row.status in (RUNTIME_ERROR, UNAVAILABLE) or "metric" not in run:
        return
    ref_mean, cand_mean, drop, spread = _task.summary(ref_run["metric"], run["metric"])
    row.task = {"metric": metric, "reference": ref_mean, "candidate": cand_mean, "drop": drop,
                "spread": spread, "max_drop": max_drop, "samples": len(run["metric"]),
                "per_sample": [a - b for a, b in zip(ref_run["metric"], run["metric"])]}
    if row.reference or row.status in SILENT:
        return
    if drop > max_drop:
        row.status = PRECISION_DEGRADATION
        row.task["verdict"] = "drop beyond --max-drop"
    else:
        row.status = PASS
        row.task["verdict"] = "within --max-drop"


def _check_policy(path: str) -> None:
    """A policy file that does not parse fails now, not after minutes of runs: the engine
    reads it for a comparison of two one-tensor dumps."""
    import driftscope

    if not os.path.isfile(path):
        raise GuardError(f"--policy '{path}': no such file", "invalid_argument")
    with tempfile.TemporaryDirectory(prefix="driftscope-policy-") as d:
        a = os.path.join(d, "a.tdump")
        with driftscope.Writer(a) as w:
            w.write("x", np.zeros(2, np.float32))
        try:
            driftscope.compare(a, a, policy=path)
        except Error as err:
            raise GuardError(f"--policy '{path}': {_first_line(err)}", "invalid_argument") from err


def _by_position(run: Dict[str, Any], ref_outputs: List[Dict[str, np.ndarray]],
                 notes: List[str]) -> None:
    """--reference-model: the candidate's outputs named as the reference's (_metrics.by_position)
    and the note that says so."""
    if not run["outputs"] or not ref_outputs:
        return
    ref_names, names = list(ref_outputs[0]), list(run["outputs"][0])
    run["outputs"] = [by_position(out, ref_names) for out in run["outputs"]]
    renamed = list(run["outputs"][0])
    if renamed != names:
        notes.append("outputs paired with the reference model's by position: "
                     + ", ".join(f"{a} = {b}" for a, b in zip(renamed, names) if a != b))


def _dynamic(d: Any) -> bool:
    return not isinstance(d, int)


def _shapes_fit(a: I.InputSpec, b: I.InputSpec) -> bool:
    """Same rank, and every axis the same size where both models fix it (a dynamic axis takes
    what the other model fixes)."""
    return len(a.shape) == len(b.shape) and all(
        _dynamic(x) or _dynamic(y) or x == y for x, y in zip(a.shape, b.shape))


def _dtypes_fit(ref: I.InputSpec, cand: I.InputSpec) -> bool:
    """The same dtype; two float types (a float16-input export); or a float reference and a
    quantized integer input, which the candidate's backend quantizes with its own scale."""
    if ref.dtype == cand.dtype:
        return True
    if ref.dtype.kind == "f" and cand.dtype.kind == "f":
        return True
    return ref.dtype.kind == "f" and cand.dtype.kind in "iu" and cand.quant is not None


def _spec_text(s: I.InputSpec) -> str:
    dims = ", ".join("?" if _dynamic(d) else str(d) for d in s.shape)
    return f"'{s.name}' {s.dtype}[{dims}]"


def _signature_names(family: str, model: str) -> Dict[str, str]:
    """A .tflite's SignatureDef names of its inputs (the converter's tensor is
    "serving_default_input_1:0", its signature name "input_1", the name an ONNX export of the
    same network keeps): signature name -> tensor name, only where unambiguous."""
    if family != "tflite":
        return {}
    try:
        from ..recorders.api import litert_open

        it, _ = litert_open(model)
        by_index = {int(d["index"]): d["name"] for d in it.get_input_details()}
        found: Dict[str, str] = {}
        for sig in it._get_full_signature_list().values():
            if sig.get("subgraph_index", 0) != 0:
                continue
            for sig_name, index in sig.get("inputs", {}).items():
                tensor = by_index.get(int(index))
                if tensor is not None:
                    found[sig_name] = tensor if sig_name not in found else ""
        return {k: v for k, v in found.items() if v}
    except Exception:  # noqa: BLE001 - no signatures (older runtimes): pair by position
        return {}


def _same_inputs(ref_specs: Sequence[I.InputSpec], specs: Sequence[I.InputSpec], model: str,
                 ref_model: str, family: str = "", ref_family: str = ""
                 ) -> Dict[str, Tuple[str, str]]:
    """--reference-model: which input of `model` each input of the reference model is, as
    {reference name: (model's name, how they were paired)}. Paired by name first (the tensor
    name, or a .tflite's signature name), then the rest by position, else by a unique shape and
    dtype; every pair must agree in rank, fixed sizes and dtype (a float reference may take
    floats where the model takes quantized integers). Anything else is a GuardError."""
    if len(ref_specs) != len(specs):
        raise GuardError(f"--reference-model '{ref_model}' takes {len(ref_specs)} input(s) "
                         f"({', '.join(s.name for s in ref_specs)}); '{model}' takes "
                         f"{len(specs)} ({', '.join(s.name for s in specs)}): the models must "
                         "take the same inputs", "input_mismatch")
    cand = {s.name: s for s in specs}
    # A signature name of one model that is a tensor name of the other.
    alias_ref = {v: k for k, v in _signature_names(ref_family, ref_model).items()}
    alias_cand = _signature_names(family, model)
    pairs: Dict[str, Tuple[str, str]] = {}
    taken: set = set()
    for r in ref_specs:
        for key, how in ((r.name, "by name"), (alias_ref.get(r.name), "by signature name")):
            c = cand.get(key) if key else None
            if c is None and key:
                c = cand.get(alias_cand.get(key, ""))
                how = "by signature name" if c is not None else how
            if c is None or c.name in taken:
                continue
            if not _shapes_fit(r, c):
                raise GuardError(f"--reference-model: input '{r.name}' has shape {r.shape} there "
                                 f"and {c.shape} in '{model}'", "input_mismatch")
            if not _dtypes_fit(r, c):
                raise GuardError(f"--reference-model: input '{r.name}' has dtype {r.dtype} "
                                 f"there and {c.dtype} in '{model}'", "input_mismatch")
            pairs[r.name] = (c.name, how)
            taken.add(c.name)
            break
    rest_r = [r for r in ref_specs if r.name not in pairs]
    rest_c = [c for c in specs if c.name not in taken]
    if not rest_r:
        return pairs

    def fits(r: I.InputSpec, c: I.InputSpec) -> bool:
        return _shapes_fit(r, c) and _dtypes_fit(r, c)

    if all(fits(r, c) for r, c in zip(rest_r, rest_c)):
        for r, c in zip(rest_r, rest_c):
            pairs[r.name] = (c.name, "by position, shape and dtype")
        return pairs
    for r in rest_r:
        match = [c for c in rest_c if fits(r, c)]
        if len(match) != 1 or sum(fits(o, match[0]) for o in rest_r) != 1:
            listed = ", ".join(_spec_text(c) for c in rest_c)
            raise GuardError(f"--reference-model: input {_spec_text(r)} of '{ref_model}' pairs "
                             f"with no input of '{model}' (names differ; by position, shape and "
                             f"dtype {'several fit' if match else 'none fits'} of {listed})",
                             "input_mismatch")
        pairs[r.name] = (match[0].name, "by shape and dtype")
    return pairs


def _fixed_by_candidate(ref_specs: List[I.InputSpec], specs: Sequence[I.InputSpec],
                        pairs: Mapping[str, Tuple[str, str]], dims: Mapping[str, int]
                        ) -> List[I.InputSpec]:
    """The reference's inputs with the sizes the candidate fixes where the reference leaves a
    dimension dynamic (an ONNX export's batch 'unk__12' against a .tflite's 1), unless --dim
    gives it: generated inputs then fit both models."""
    cand = {s.name: s for s in specs}
    symbols: Dict[str, set] = {}
    fixed: Dict[Tuple[str, int], int] = {}
    for r in ref_specs:
        c = cand[pairs[r.name][0]]
        for axis, (x, y) in enumerate(zip(r.shape, c.shape)):
            if _dynamic(x) and isinstance(y, int) and y > 0 and f"{r.name}:{axis}" not in dims:
                if isinstance(x, str):
                    symbols.setdefault(x, set()).add(y)
                else:
                    fixed[(r.name, axis)] = y
    sizes = {k: next(iter(v)) for k, v in symbols.items() if len(v) == 1 and k not in dims}
    out = []
    for r in ref_specs:
        shape = [fixed.get((r.name, a), sizes.get(d, d) if isinstance(d, str) else d)
                 for a, d in enumerate(r.shape)]
        out.append(dataclasses.replace(r, shape=shape))
    return out


def _renamed(samples: Sequence[Any], names: Mapping[str, str]) -> List[Any]:
    """Feeds keyed by the reference model's input names, keyed by the candidate's."""
    def one(feed: Mapping[str, Any]) -> Dict[str, Any]:
        return {names.get(k, k): v for k, v in feed.items()}

    return [S.Steps([one(f) for f in s]) if isinstance(s, S.Steps) else one(s)
            for s in samples]


def _state_pairs(family: str, model: str, state: Union[None, str, Mapping[str, str]],
                 steps: Optional[int]) -> Tuple[Dict[str, str], int]:
    if state == S.NO_STATE or (family == "torch" and not state):
        return {}, 1
    if isinstance(state, str):
        raise GuardError(f"state={state!r}: a mapping of input -> output, or 'none'",
                         "invalid_argument")
    try:
        ins, outs, in_shapes, out_shapes = S.io_specs(family, model)
    except Exception as err:  # noqa: BLE001 - the signature step already loaded it once
        raise GuardError(_first_line(err), "model_load_failed") from err
    if state:
        why = S.check_pairs(state, ins, outs)
        if why:
            raise GuardError(why, "invalid_argument")
        pairs = dict(state)
    else:
        pairs = S.find_pairs(ins, outs or {}, in_shapes, out_shapes)
    if not pairs:
        return {}, 1
    return pairs, steps or S.DEFAULT_STEPS


def _nonfinite(outputs: List[Dict[str, np.ndarray]]) -> Dict[str, int]:
    found: Dict[str, int] = {}
    for out in outputs:
        for name, v in out.items():
            v = np.asarray(v)
            if v.dtype.kind == "f":
                n = int(np.count_nonzero(~np.isfinite(v)))
                if n:
                    found[name] = max(found.get(name, 0), n)
    return found
