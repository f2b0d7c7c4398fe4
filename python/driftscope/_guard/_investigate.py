"""After the verdicts: probe the failing backends and search their FP32 fallback (--probe,
--fallback). Every run goes through the guard's child processes (a runtime that crashes while
probing takes only that run down)."""

from __future__ import annotations

import os
import shutil
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from .backends import registry as B
from ._delegate_bisect import can_bisect, partial_cut, partial_notes
from ._fallback import FallbackResult, check_backends, choose
from ._metrics import (DEGRADED, PASS, REFERENCE, RUNTIME_ERROR, SILENT, UNAVAILABLE, Thresholds,
                       by_position, judge_all)
from ._probe import (RECORDED, ProbeResult, bisect_result, compare_dumps,
                     findings_from_report, nearest_upstream, onnx_nodes,
                     onnx_weights_and_producers, pick_origin, shown, torch_leaves,
                     torch_modules, with_delegated)
from ._stateful import step_dump, step_name

PROBE_MODES = ("auto", "never", "always")
FALLBACK_MODES = ("auto", "never")
PROBE_METHODS = ("auto", "record", "bisect", "both")

# Numeric failures a probe can localise (a RUNTIME_ERROR has no values to compare).
_PROBED = (SILENT | DEGRADED) - {RUNTIME_ERROR}


@dataclass
class Context:
    model: str
    family: str
    reference: str
    samples: List[Dict[str, np.ndarray]]
    ref_outputs: List[Dict[str, np.ndarray]]
    seed: int
    thresholds: Thresholds
    policy: Optional[str]
    work: str
    keep_files: bool
    timeout: float
    runs: int
    runner: Callable[..., Dict[str, Any]]
    probe_method: str = "auto"
    fallback_runs: int = 20
    # --fallback-budget's SECONDS (None: builds only) and --latency-budget PCT (_fallback.choose)
    fallback_seconds: Optional[float] = None
    latency_budget: Optional[float] = None
    # --metric: the child's metric job fields (_run.guard's `task`), the reference's per-sample
    # scores and --max-drop: each fallback candidate is scored and judged by its drop too.
    task: Optional[Dict[str, Any]] = None
    ref_metric: Optional[List[float]] = None
    max_drop: Optional[float] = None
    # --reference-model: the file the reference backend runs (None: `model`).
    ref_model: Optional[str] = None
    # A stateful model: state input -> output pairs and the steps of each sample (_stateful.py).
    state: Optional[Dict[str, str]] = None
    steps: int = 1
    # --sensitivity N: rank at most N keepable nodes by their own effect (_sensitivity.py)
    sensitivity: int = 0
    # --replay: "auto" replays at the origin a probe names (_replaying.py), "never" does not.
    replay: str = "auto"

    @property
    def reference_model(self) -> str:
        return self.ref_model or self.model


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _computes(name: str) -> bool:
    """Does the backend compute what it deploys (False: float16 stored, computed in float32)?"""
    b = B.BACKENDS[name]
    return getattr(b, "precision", None) is None or bool(getattr(b, "computes", False))


class Investigator:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        # The backends of the run that ran (a fallback is verified on those computing its
        # precision too).
        self.run_backends: List[str] = []
        self.ref_dumps: Dict[int, str] = {}
        self._nodes: Optional[List[Any]] = None

    def _dir(self, backend: str) -> str:
        d = os.path.join(self.ctx.work, _safe(backend))
        os.makedirs(d, exist_ok=True)
        return d

    def _ref_dump(self, sample: int) -> str:
        """The reference backend's recording of `sample` (once per sample)."""
        if sample in self.ref_dumps:
            return self.ref_dumps[sample]
        c = self.ctx
        path = os.path.join(self._dir(c.reference), f"sample{sample + 1}.tdump")
        run = c.runner(c.reference, c.reference_model, [c.samples[sample]], 0, c.seed,
                       c.timeout, c.state, record={"path": path, "sample": 0})
        if run.get("error") or not run.get("recorded"):
            raise RuntimeError(f"the reference {c.reference} could not be recorded: "
                               f"{run.get('error') or run.get('record_error')}")
        self.ref_dumps[sample] = path
        return path

    def dumps(self, path: str) -> List[str]:
        """The files a recording as `path` wrote: one per step of a stateful model."""
        if not self.ctx.state:
            return [path]
        return [step_dump(path, t) for t in range(self.ctx.steps)]

    def nodes(self) -> List[Any]:
        """(source name, op type) in topological (ONNX), execution (PyTorch) or model
        (LiteRT) order."""
        if self._nodes is None:
            if self.ctx.family == "onnx":
                self._nodes = onnx_nodes(self.ctx.model)
            elif self.ctx.family in ("torch", "tflite"):
                # Recorded order: PyTorch's module calls, LiteRT's ops in model order (their
                # output tensors' names).
                self._nodes = torch_modules(self.dumps(self._ref_dump(0))[0])
            else:
                self._nodes = []
        return self._nodes

    # -- probe ---------------------------------------------------------------------------------
    def probe(self, row: Any) -> ProbeResult:
        c = self.ctx
        sample = row.worst.sample if row.worst is not None else 0
        method = c.probe_method
        if method == "bisect":
            return self._bisect(row, sample, "--probe-method bisect")
        recorded = self._recorded(row, sample)
        if method == "both":
            other = self._bisect(row, sample, "cross-check")
            recorded.other = other
            if recorded.origin is not None and other.origin is not None:
                recorded.agrees = recorded.origin.node == other.origin.node
            return recorded
        if recorded.method is None and c.family in ("onnx", "torch", "tflite") and \
                method == "auto":
            return self._bisect(row, sample, recorded.why)
        return recorded

    def _recorded(self, row: Any, sample: int) -> ProbeResult:
        c = self.ctx
        d = self._dir(row.name)
        try:
            ref = self._ref_dump(sample)
        except RuntimeError as err:
            return ProbeResult(None, str(err), sample, error=str(err))
        cand = os.path.join(d, f"sample{sample + 1}.tdump")
        evidence = [n for n, _ in self.nodes()] if c.family == "onnx" else None
        # Calibrated (ort-qdq) on every sample the row ran, so that it records the row's variant.
        run = c.runner(row.name, c.model, [c.samples[sample]], 0, c.seed, c.timeout, c.state,
                       record={"path": cand, "sample": 0}, evidence=evidence,
                       calibration=c.samples)
        if run.get("error"):
            return ProbeResult(None, f"recording the candidate failed: {run['error']}", sample,
                               error=run["error"])
        if not run.get("recorded"):
            return ProbeResult(None, run.get("record_error") or "no recording", sample)
        effect = run.get("observer_effect")
        why = "recording left the candidate's final outputs bit-identical"
        if effect != "none":
            # Exposing intermediates stops fusions; a change far below the failure does not
            # move the verdict, and then the recording still shows where the failure starts.
            ref_out = [c.ref_outputs[sample]]
            plain = judge_all(ref_out, [self._as_ref(run.get("plain_outputs") or {})],
                              c.thresholds)
            captured = judge_all(ref_out, [self._as_ref(run.get("captured_outputs") or {})],
                                 c.thresholds)
            ps, cs = (plain.status if plain else PASS), (captured.status if captured else PASS)
            if ps != cs:
                return ProbeResult(None, f"recording changed the candidate's verdict from {ps} "
                                         f"to {cs} (observer effect: {effect})", sample)
            # "Slightly" only when the change is small next to what the verdict tolerates.
            from ..recorders.api import onnx_observer_effect_relative as observer_effect_relative

            rel = observer_effect_relative(run.get("plain_outputs") or {},
                                           run.get("captured_outputs") or {})
            size = ("slightly" if rel <= 0.1 * c.thresholds.rel_error_limit()
                    else f"by up to {rel:.0%} of an output's range")
            why = (f"recording changed the candidate's outputs {size} ({effect}) but not its "
                   f"verdict ({ps})")
        # Step by step (a stateful model, each backend carrying its own state): the first step
        # whose recording names where the failure starts.
        refs, cands = self.dumps(ref), self.dumps(cand)
        step, report, found, origin = 0, None, {}, None
        for t, (r, cd) in enumerate(zip(refs, cands)):
            rep = compare_dumps(r, cd, c.thresholds, c.policy)
            # Named by the model the candidate ran: with --reference-model the reference's
            # file may name its nodes differently, and the fallback changes the candidate's.
            fnd = findings_from_report(rep, cd if c.ref_model else r)
            org = pick_origin(row.status, fnd)
            if report is None or org is not None:
                step, report, found, origin = t, rep, fnd, org
            if org is not None:
                break
        res = ProbeResult(RECORDED, why, sample, runs=2, summary=report.summary, **found)
        res.origin = origin
        if c.state and origin is not None:
            res.step = step + 1
            res.notes.append(f"step {step + 1} of {len(refs)} is the first whose recording names "
                             "a failing tensor (each backend carrying its own state from step 1)")
        elif c.state:
            res.notes.append(f"none of the {len(refs)} steps' recordings names a failing tensor "
                             "(each backend carrying its own state from step 1)")
        if c.ref_model:
            res.notes.append("the reference recorded its own model file (--reference-model); "
                             "tensors pair by name")
        ref, cand = refs[step], cands[step]
        if c.keep_files:
            res.files = {"reference": ref, "candidate": cand}
        ev = run.get("evidence") or {}
        if res.origin is not None and res.origin.node in ev and "16" in row.name:
            # The variant computes the origin in float32 (e.g. ONNX Runtime's CPU provider
            # behind inserted casts): its failure is the precision its values are stored in.
            word = ("bfloat16" if "bf16" in row.name else "float16" if "16" in row.name
                    else "low precision")
            res.notes.append(f"{word} arithmetic was not exercised at "
                             f"{shown(res.origin.node)}: {ev[res.origin.node]}; what fails is "
                             f"storing its values in {word}")
        return res

    def _bisect(self, row: Any, sample: int, why: str) -> ProbeResult:
        c = self.ctx
        if c.family == "torch":
            return self._bisect_torch(row, sample, why)
        if c.family not in ("onnx", "tflite"):
            return ProbeResult(None, why, sample, error=f"{why}; bisection needs an ONNX graph, "
                                                        f"a .tflite model or a PyTorch model to "
                                                        f"cut (this is a {c.family} model)")
        if c.ref_model:
            return ProbeResult(None, why, sample, error=f"{why}; bisection cuts one graph and "
                               "runs it on both backends, and --reference-model gives the "
                               "reference another file")
        out = c.runner(row.name, c.model, [], 0, c.seed, c.timeout, kind="bisect",
                       reference=c.reference, feeds=self._bisect_feeds(sample),
                       calibration=c.samples, thresholds=asdict(c.thresholds))
        tflite = c.family == "tflite"
        res = bisect_result(out, why, sample, **(
            {"cut": "over the model's operator order ({runs} prefix runs)"} if tflite else {}))
        if res.origin is None:
            return with_delegated(res, out, row.name, c.reference, why, sample) \
                if tflite else res
        runs = res.runs
        n = out["cuts"] if tflite else len(self.nodes())
        res.notes.append(f"{runs} prefix runs of each backend for {n} "
                         f"{'operators' if tflite else 'nodes'} "
                         f"(log2 {n} = {np.log2(max(n, 1)):.1f})")
        if tflite and out.get("refused"):
            res.notes.append(f"{out['refused']} operator(s) surgery cannot cut (custom, control "
                             "flow, resource variables) left out; the values they hand on were "
                             "fed to both backends from one reference-kernel run")
        if c.state:
            res.step = int(out["found"].get("step", 0)) + 1
            res.notes.append(f"step {res.step} is the first whose whole graph fails with both "
                             "backends given the reference's state (the bisection cuts one "
                             "step, so both prefixes read the same state)")
        if tflite:  # delegated-range bisection's cross-check (_delegated.py)
            res = with_delegated(res, out, row.name, c.reference, why, sample)
        return res

    def _bisect_torch(self, row: Any, sample: int, why: str) -> ProbeResult:
        """PyTorch: the cut is a precision boundary (_probe.torch_bisect_job)."""
        c = self.ctx
        partial = can_bisect(B.BACKENDS[row.name])  # over what a delegate/compiler takes
        if not partial and not B.BACKENDS[row.name].can_keep_float32():
            return ProbeResult(None, why, sample, error=f"{why}; a PyTorch model is bisected by "
                               f"keeping the modules after a cut in float32, which {row.name} "
                               "cannot do")
        nodes = self.nodes()
        leaves = torch_leaves([n for n, _ in nodes])
        out = c.runner(row.name, c.model, [], 0, c.seed, c.timeout, c.state,
                       kind="bisect_torch", leaves=leaves, ops=dict(nodes),
                       feeds=c.samples[sample], ref_outputs=c.ref_outputs[sample],
                       thresholds=asdict(c.thresholds))
        if partial:
            res = bisect_result(out, why, sample, cut=partial_cut(B.BACKENDS[row.name]))
            res.notes.extend(partial_notes(B.BACKENDS[row.name], out))
            return res
        res = bisect_result(out, why, sample,
                            cut="at a precision boundary in execution order ({runs} runs)")
        if res.origin is None:
            return res
        runs = res.runs
        skipped = list(out.get("skipped") or ())
        n = len(leaves) - len(skipped)
        if skipped:
            res.notes.append(f"{len(skipped)} leaf module(s) with no arithmetic of their own in "
                             f"{row.name} (exported to no node) skipped: "
                             + ", ".join(shown(s) for s in skipped[:5])
                             + (" ..." if len(skipped) > 5 else ""))
        res.notes.append(f"{runs} runs of {row.name} with the leaf modules after the cut kept in "
                         f"float32, for {n} leaf modules (log2 {n} = {np.log2(max(n, 1)):.1f}): "
                         f"{shown(res.origin.node)} is the first whose own {row.name} arithmetic fails "
                         "the verdict")
        return res

    def _bisect_feeds(self, sample: int) -> List[Dict[str, np.ndarray]]:
        """The feeds of each step to bisect: a stateful model's step t takes the reference's
        own state output of step t - 1 (both backends then cut the same inputs)."""
        c = self.ctx
        feeds = c.samples[sample]
        if not c.state:
            return [feeds]
        ref_out = c.ref_outputs[sample]
        out: List[Dict[str, np.ndarray]] = []
        for t, step in enumerate(feeds):
            state = {} if t == 0 else {i: ref_out[step_name(o, t - 1)]
                                       for i, o in c.state.items()}
            out.append({**step, **state})
        return out

    def _as_ref(self, outputs: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """--reference-model: the candidate's outputs named as the reference's (by position,
        as the verdicts pair them)."""
        c = self.ctx
        if not c.ref_model or not c.ref_outputs:
            return outputs
        return by_position(outputs, list(c.ref_outputs[0]))

    # -- fallback ------------------------------------------------------------------------------
    def keepable(self, b: Any) -> Tuple[List[Tuple[str, str]], Dict[str, List[str]]]:
        """The (node, op type) backend `b`'s variant changes and could keep in float32, in
        model order, and (ONNX, weights-only backends) each node's input producers."""
        ops = b.fallback_ops
        weighted: Optional[set] = None
        inputs: Dict[str, List[str]] = {}
        if self.ctx.family == "onnx" and b.fallback_weights_only:
            weighted, inputs = onnx_weights_and_producers(self.ctx.model)
        order = [(n, op) for n, op in self.nodes() if (ops is None or op in ops)
                 and (weighted is None or n in weighted)]
        return order, inputs

    def fallback(self, row: Any, probe: ProbeResult) -> FallbackResult:
        c = self.ctx
        began = time.monotonic()
        res = FallbackResult(row.name, status_before=row.status,
                             cosine_before=row.worst.cosine if row.worst else None,
                             cap=c.fallback_runs, seconds_cap=c.fallback_seconds,
                             latency_budget=c.latency_budget)
        try:
            return self._fallback(row, probe, res)
        finally:
            res.seconds = time.monotonic() - began

    def _fallback(self, row: Any, probe: ProbeResult, res: FallbackResult) -> FallbackResult:
        c = self.ctx
        b = B.BACKENDS[row.name]
        if c.family == "tflite" and not getattr(b, "keeps_tflite_ops", False):
            # Now that bisection names a node here, say why no search follows (it would only
            # build variants that cannot be made: docs/howto/guard.md section 6); the
            # ai-edge-quantizer backends keep ops float32 by their recipes (litert_quant.py).
            res.error = ("a .tflite model's nodes cannot be kept in float32 (LiteRT has no "
                         "per-op precision in one interpreter; OpenVINO places it by ONNX node "
                         "names)")
            return res
        ranked = [n for n, share in (row.sensitivity or {}).get("ranked", [])
                  if share is not None and share > 0]
        if probe.origin is None and getattr(b, "fallback_range", None) is None and not ranked:
            res.error = "the probe named no node to start from"
            return res
        order, inputs = self.keepable(b)
        names = {n for n, _ in order}
        # No origin (the probe failed or named nothing) but a target range: the search starts
        # from the nodes the reference's ranges name, and says so when they name none.
        starts = [probe.origin.node] if probe.origin is not None else []
        ranking = [n for n, share in (row.sensitivity or {}).get("ranked", [])
                   if share is not None and share > 0]
        if ranking:  # each node's own effect, measured: the search grows in that order
            starts = ranking[:1]
            res.start_note = (f"started from {shown(ranking[0])}, the node whose float32 "
                              "removes the most error alone (--sensitivity)")
        if not ranking and probe.origin is not None and probe.origin.node not in names:
            # The probed node is one the variant does not change (INT8: a LayerNorm after a
            # quantized embedding): start from the nearest nodes above it that it does.
            if not inputs and c.family == "onnx":
                inputs = onnx_weights_and_producers(c.model)[1]
            starts = nearest_upstream(probe.origin.node, inputs, names)
            if not starts:
                res.error = (f"the probed node {probe.origin.node} is not one {row.name} can "
                             "keep in float32, and none above it is")
                return res
            listed = ", ".join(shown(s) for s in starts[:3]) + (
                f" and {len(starts) - 3} more" if len(starts) > 3 else "")
            res.start_note = (f"started from {listed}, the nearest node(s) above "
                              f"{shown(probe.origin.node)} that {row.name} changes")
        op_of = dict(self.nodes())
        ref_dump = self.ref_dumps.get(probe.sample) if probe.method == RECORDED else None
        step = (probe.step or 1) - 1
        if ref_dump is not None:
            ref_dump = self.dumps(ref_dump)[step]
        d = self._dir(row.name)
        # A float16 deployment is searched where float16 is computed (_fallback.check_backends).
        search, verify = check_backends(row.name, c.family, self.run_backends or [row.name])
        res.searched_on = search
        # The ladder's rungs below float32 that both the searched and the row's backend keep.
        rungs = [r for r in B.BACKENDS[search].keep_precisions() if r in b.keep_precisions()]
        out = c.runner(search, c.model, c.samples, 0, c.seed, c.timeout, c.state,
                       kind="fallback", probe_step=step if c.state else None,
                       names_from="candidate" if c.ref_model else "reference",
                       ref_outputs=c.ref_outputs,
                       thresholds=asdict(c.thresholds), order=order,
                       origins=starts, ranking=ranking, cap=c.fallback_runs,
                       seconds=c.fallback_seconds, rungs=rungs,
                       ref_dump=ref_dump,
                       probe_sample=0 if ref_dump is None else probe.sample,
                       policy=c.policy, calibration=c.samples)
        if out.get("error"):
            res.error = f"the search failed: {out['error']}"
            return res
        res.runs, res.trail = out["runs"], out["trail"]
        res.stopped, res.next_try = out.get("stopped"), out.get("next")
        if res.trail and res.trail[0]["step"].startswith("seed") and res.start_note is None:
            res.start_note = (f"the first build kept {len(res.trail[0]['keep'])} node(s): "
                              f"{out.get('ranges')}")
        res.nodes = [(n, op_of.get(n, "?")) for n in out["nodes"]]
        res.removal_fails = dict(out.get("removal_fails", {}))
        if len(out["nodes"]) == 1:  # without it the variant is the failing backend itself
            res.removal_fails.setdefault(out["nodes"][0], row.status)
        res.recipe = b.recipe(c.model, out["nodes"])
        if not out["passed"]:
            res.error = f"no passing set within the search: {out.get('why')}"
            return res
        # Rebuild every rung that passed in the search (and float32) from scratch in a fresh
        # process, prove, re-run, time; keep the cheapest verified (within --latency-budget).
        keep = list(out["nodes"])
        passed = [r["precision"] for r in out.get("ladder", []) if r["status"] == PASS]
        variant = os.path.join(d, "fallback-variant.onnx") if c.keep_files else None
        built = [self._verify(row, keep, p, verify, variant if p == "float32" else None)
                 for p in passed + ["float32"]]
        res.verify_builds = sum(v["builds"] for v in built)
        res.candidates = [{k: v[k] for k in ("precision", "status", "cosine", "proven",
                                              "verified", "latency_ms", "latency_change",
                                              "metric_drop", "error")} for v in built]
        for r in out.get("ladder", []):  # the rungs that failed in the search: not rebuilt
            if r["status"] != PASS:
                res.candidates.insert(0, {"precision": r["precision"], "status": r["status"],
                                          "cosine": r["cosine"], "proven": False,
                                          "verified": False, "latency_ms": None,
                                          "latency_change": None, "metric_drop": None,
                                          "error": r.get("error")})
        order = {p: i for i, p in enumerate(list(rungs) + ["float32"])}
        res.candidates.sort(key=lambda x: order.get(x["precision"], len(order)))
        at, res.choice = choose(res.candidates, c.latency_budget)
        pick = built[-1] if at is None else next(
            v for v in built if v["precision"] == res.candidates[at]["precision"])
        res.precision = pick["precision"]
        if res.precision != "float32":
            res.recipe = b.recipe(c.model, keep, precision=res.precision)
        if pick.get("run_error"):
            res.error = f"the rebuilt variant failed: {pick['run_error']}"
            return res
        res.status_after, res.cosine_after = pick["status"], pick["cosine"]
        res.evidence, res.unproven = pick["evidence"], pick["unproven"]
        res.latency_ms, res.latency_change = pick["latency_ms"], pick["latency_change"]
        res.checks = pick["checks"]
        res.verified = pick["verified"]
        if not res.verified and pick["error"] and pick["status"] == PASS and pick["proven"]:
            res.error = pick["error"]  # the task metric's drop: the sentence says so
        if variant and os.path.isfile(variant) and res.precision == "float32":
            res.files["variant"] = variant
        return res

    def _verify(self, row: Any, keep: List[str], precision: str, verify: List[str],
                variant: Optional[str]) -> Dict[str, Any]:
        """The variant keeping `keep` in `precision`, rebuilt in a fresh process, proven,
        re-run, timed; and checked on each backend of `verify` after the row's that keeps that
        precision."""
        c = self.ctx
        how: Dict[str, Any] = ({"keep_float32": keep} if precision == "float32" else
                               {"keep_precision": {n: precision for n in keep}})
        v: Dict[str, Any] = {"precision": precision, "status": None, "cosine": None,
                             "proven": False, "verified": False, "latency_ms": None,
                             "latency_change": None, "error": None, "evidence": {},
                             "unproven": list(keep), "checks": [], "run_error": None,
                             "builds": 1, "metric_drop": None}
        task = dict(c.task, metric_refs=c.ref_outputs) if c.task else {}
        run = c.runner(row.name, c.model, c.samples, c.runs, c.seed, c.timeout, c.state,
                       evidence=keep, save_variant=variant, **how, **task)
        if run.get("error"):
            v["run_error"] = v["error"] = run["error"]
            return v
        worst = judge_all(c.ref_outputs, [self._as_ref(o) for o in run["outputs"]],
                          c.thresholds)
        v["status"] = worst.status if worst else PASS
        v["cosine"] = worst.cosine if worst else None
        v["evidence"] = dict(run.get("evidence") or {})
        v["unproven"] = [n for n in keep if n not in v["evidence"]]
        v["proven"] = not v["unproven"]
        run_metric = run.get("metric")
        times = run.get("latency_s") or []
        if times:
            v["latency_ms"] = statistics.median(times) * 1e3
            if row.latency_ms:
                v["latency_change"] = v["latency_ms"] / row.latency_ms - 1.0
        v["checks"] = [{"backend": row.name, "status": v["status"], "cosine": v["cosine"],
                        "proven": v["proven"], "computes": _computes(row.name), "error": None}]
        for other in verify[1:]:  # the same nodes kept, on each backend computing the precision
            if precision != "float32" and precision not in B.BACKENDS[other].keep_precisions():
                continue
            v["builds"] += 1
            run = c.runner(other, c.model, c.samples, 0, c.seed, c.timeout, c.state,
                           evidence=keep, **how)
            check = {"backend": other, "status": None, "cosine": None, "proven": False,
                     "computes": _computes(other), "error": run.get("error")}
            if not run.get("error"):
                w = judge_all(c.ref_outputs, [self._as_ref(o) for o in run["outputs"]],
                              c.thresholds)
                check["status"], check["cosine"] = (w.status, w.cosine) if w else (PASS, None)
                check["proven"] = all(n in (run.get("evidence") or {}) for n in keep)
            v["checks"].append(check)
        drop_ok = True
        if c.task and c.ref_metric is not None and run_metric is not None:
            from ._task import summary

            v["metric_drop"] = summary(c.ref_metric, run_metric)[2]
            drop_ok = v["metric_drop"] <= (c.max_drop or 0.0)
        v["verified"] = v["status"] == PASS and v["proven"] and drop_ok and all(
            ch["status"] == PASS and ch["proven"] for ch in v["checks"])
        if not drop_ok:
            v["error"] = (f"the task metric drops {v['metric_drop']:.4g} > --max-drop "
                          f"{c.max_drop:g}")
        elif v["status"] != PASS:
            v["error"] = f"the rebuilt variant is {v['status']}"
        elif not v["proven"]:
            v["error"] = f"not proven {precision}: {', '.join(v['unproven'][:3])}"
        return v


def investigate(rows: List[Any], ctx: Context, probe: str, fallback: str) -> None:
    """Fills row.probe and row.fallback of the rows that need them."""
    if probe == "never":
        return
    inv = Investigator(ctx)
    inv.run_backends = [r.name for r in rows if r.status not in (UNAVAILABLE, RUNTIME_ERROR)]
    for row in rows:
        if row.reference or row.status in (UNAVAILABLE, RUNTIME_ERROR, REFERENCE):
            continue
        failing = row.status in _PROBED
        if not failing and probe != "always":
            continue
        try:
            row.probe = inv.probe(row)
        except Exception as err:  # noqa: BLE001 - a probe that fails is reported, not fatal
            row.probe = ProbeResult(None, "the probe failed", error=str(err).splitlines()[0]
                                    if str(err) else type(err).__name__)
        if failing and ctx.replay == "auto" and row.probe.origin is not None:
            row.probe.replay = _replay_at_origin(ctx, row)
        b = B.BACKENDS[row.name]
        if failing and ctx.sensitivity and b.can_keep_float32() and ctx.family != "tflite":
            from ._sensitivity import rank

            row.sensitivity = rank(inv, row, ctx.sensitivity)
        if failing and fallback == "auto" and b.can_keep_float32():
            try:
                row.fallback = inv.fallback(row, row.probe)
            except Exception as err:  # noqa: BLE001
                row.fallback = FallbackResult(row.name, status_before=row.status,
                                              error=str(err).splitlines()[0] if str(err)
                                              else type(err).__name__)
    if not ctx.keep_files:
        shutil.rmtree(ctx.work, ignore_errors=True)


def _replay_at_origin(ctx: Context, row: Any) -> Any:
    """Replay never changes a verdict: whatever goes wrong is the replay's one sentence."""
    from ._replaying import ReplayResult, replay_origin, replay_target

    try:
        return replay_origin(ctx, row, row.probe)
    except Exception as err:  # noqa: BLE001 - a replay that fails is reported, not fatal
        return ReplayResult(replay_target(ctx.family, row.probe.origin),
                            error=str(err).splitlines()[0] if str(err) else type(err).__name__)
