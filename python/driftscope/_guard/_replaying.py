"""After a probe names an origin: replay there (issue 26 item 1; docs/howto/guard.md §8).

The probe reads its origin off two dumps, a correlation. Replay checks it causally, with the
mechanisms of driftscope replay (driftscope._replay.core, docs/howto/replay.md), in one child
process of the guard (kind "replay": a runtime that crashes while replaying takes only that
child down):

- output replay: the candidate runs with the reference's value put back at the origin (cast to
  the candidate's dtype); each output's error before and after, and the share removed;
- op replay: the origin's op runs alone on the candidate with the reference's recorded inputs:
  "introduced" (alone it is beyond tolerance) or "inherited" (its inputs carried the error).

Replay only adds a sentence and a JSON object to the probe: the verdict and the exit status are
the verdicts', whatever replay finds or however it fails.
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ._probe import ProbeFinding, shown

REPLAY_MODES = ("auto", "never")
# Below this share removed, the origin alone does not explain the output's error.
_EXPLAINS = 0.9


@dataclass
class ReplayResult:
    tensor: str                           # where the reference's value was put back
    outputs: List[Dict[str, Any]] = field(default_factory=list)
    op: Optional[str] = None              # "introduced" / "inherited" / None
    op_note: str = ""                     # op replay: why no verdict (within tolerance, failed)
    cost_runs: int = 0                    # runs of either backend the replay made
    error: Optional[str] = None           # why it could not run (one sentence)
    focus: Optional[str] = None           # the output the sentence names (the row's worst)
    seconds: float = 0.0                  # wall time of the replay child (not in the JSON)
    # Values of the reference's finite value at `tensor` that overflow when cast to the
    # candidate's float16: the substitution itself is Inf there (not in the JSON).
    unfit: int = 0

    def to_json(self) -> Dict[str, Any]:
        return {"tensor": self.tensor,
                "outputs": [{k: o[k] for k in ("name", "error_before", "error_after",
                                                "share_removed")} for o in self.outputs],
                "op": self.op, "cost_runs": self.cost_runs, "error": self.error}

    def _focused(self) -> Optional[Dict[str, Any]]:
        for o in self.outputs:
            if o["name"] == self.focus:
                return o
        # Else the output with the largest error before (inf first).
        def size(o: Dict[str, Any]) -> float:
            v = o["error_before"]
            return float("inf") if v == "inf" else (v if isinstance(v, float) else -1.0)
        return max(self.outputs, key=size) if self.outputs else None

    def sentence(self, backend: str) -> str:
        at = shown(self.tensor)
        if self.error:
            return f"{backend} replay at {at} could not run: {_clause(self.error)}."
        o = self._focused()
        if o is None:
            return f"{backend} replay at {at}: no numeric output to measure."
        name = shown(o["name"])
        share = o["share_removed"]
        how = _change(o)
        if share is None:
            said = (f"putting the reference's value back at {at} leaves output '{name}' "
                    f"without error, as it was")
        elif share == "-inf" or (isinstance(share, float) and share < 0):
            worse = "" if share == "-inf" else f" by {-share:.1%}"
            said = (f"putting the reference's value back at {at} makes output '{name}''s "
                    f"error worse{worse} ({how}): the error is made elsewhere too (see "
                    "driftscope replay --isolate)")
        elif self.unfit and share < _EXPLAINS:
            said = (f"putting the reference's value back at {at} removes only {share:.1%} of "
                    f"output '{name}''s error ({how}): the reference's value there does not fit "
                    f"float16 ({self.unfit} value(s) overflow when cast to it), so no replay "
                    "can put it back")
        elif share >= _EXPLAINS:
            said = (f"putting the reference's value back at {at} removes {share:.1%} of "
                    f"output '{name}''s error ({how})")
        else:
            said = (f"putting the reference's value back at {at} removes only {share:.1%} of "
                    f"output '{name}''s error ({how}): the error is made elsewhere too (see "
                    "driftscope replay --isolate)")
        if self.op == "introduced":
            op = f"{at} alone on the reference's inputs reproduces it (introduced)"
        elif self.op == "inherited":
            op = (f"{at} alone on the reference's inputs is within tolerance: its inputs "
                  "carried the error (inherited)")
        else:
            op = _clause(self.op_note or "op replay gave no verdict")
        return f"{backend} replay: {said}; {op}."


def _clause(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return (lines[0] if lines else "no message").rstrip(".")


def _change(o: Dict[str, Any]) -> str:
    """How an output's error changed, in words: NaN/Inf gone or not, else the relative errors."""
    b, a = o["nonfinite_before"], o["nonfinite_after"]
    if b and not a:
        return "NaN/Inf → finite"
    if b and a:
        return f"NaN/Inf remain: {a} value(s)"
    if a:
        return f"finite → {a} NaN/Inf"
    return f"relative error {_num(o['error_before'])} → {_num(o['error_after'])}"


def _num(v: Any) -> str:
    return v if isinstance(v, str) else ("-" if v is None else f"{v:.3g}")


def replay_target(family: str, origin: ProbeFinding) -> str:
    """The tensor to replay at: a PyTorch module's output is named by its path (the origin's
    node, also where the probe names a parent's own forward); an ONNX origin by the recorded
    tensor (a bisection gives the node's name, which replay resolves too)."""
    if family == "onnx" and origin.tensor:
        return origin.tensor
    return origin.node or origin.tensor


def replay_origin(ctx: Any, row: Any, probe: Any) -> ReplayResult:
    """In the guard: replays at the origin `probe` named for the failing `row`, in a child."""
    tensor = replay_target(ctx.family, probe.origin)
    focus = row.worst.name if getattr(row, "worst", None) is not None else None
    res = ReplayResult(tensor, focus=focus)
    if ctx.family == "tflite" and importlib.util.find_spec(
            "driftscope._replay.tflite") is None:
        res.error = "replay of .tflite models is not available yet"
        return res
    if ctx.family not in ("torch", "onnx", "tflite"):
        res.error = f"replay of {ctx.family} models is not available"
        return res
    if ctx.state:
        res.error = ("replay runs one step, and this model carries its state from step to step "
                     "(driftscope replay on one step's inputs is the way)")
        return res
    if ctx.ref_model:
        res.error = ("replay runs one model on both backends, and --reference-model gives the "
                     "reference another file")
        return res
    start = time.perf_counter()
    out = ctx.runner(row.name, ctx.model, [], 0, ctx.seed, ctx.timeout, kind="replay",
                     reference=ctx.reference, feeds=ctx.samples[probe.sample], at=tensor,
                     ref_outputs=list(ctx.ref_outputs[probe.sample]))
    res.seconds = time.perf_counter() - start
    res.cost_runs = int(out.get("runs") or 0)
    if out.get("error"):
        res.error = _clause(out["error"])
        return res
    res.outputs = list(out["outputs"])
    res.op, res.op_note = out.get("op"), out.get("op_note") or ""
    res.unfit = int(out.get("unfit") or 0)
    return res


# -- in the child ----------------------------------------------------------------------------

def _load(model: str, backend: str, seed: int, work: str) -> Any:
    """The Replayable of `model` on `backend`, built through the backend's own load()."""
    from .._replay import core

    if core.family_of(model) == "onnx":
        from .._replay import onnx as ronnx

        # core.replayable takes a family module's replayable(); until _replay.onnx has one,
        # its class is built directly (the same mechanism).
        if getattr(ronnx, "replayable", None) is None:
            return ronnx.OnnxReplayable(model, backend, work=work, seed=seed)
    return core.replayable(model, backend, seed=seed, work=work)


def replay_job(job: Any) -> Dict[str, Any]:
    """Output replay and op replay at job.at (driftscope._replay.core), the reference backend
    job.reference against the candidate job.backend, on one sample (job.feeds)."""
    import os

    import numpy as np

    from .._replay import core
    from .._replay.mechanism import CannotReplay

    at, feeds, runs = str(job.at), job.feeds, 0
    made: List[Any] = []
    try:
        for who in (job.reference, job.backend):
            work = os.path.join(job.work, "replay-" + who)
            os.makedirs(work, exist_ok=True)
            made.append(_load(job.model, who, job.seed, work))
        ref, cand = made
        ref_values = ref.capture(feeds, [at])
        runs += 1
        cand_values = cand.capture(feeds, [at])
        runs += 1
        names = [o for o in (job.ref_outputs or ()) if o in ref_values and o in cand_values
                 and isinstance(ref_values[o], np.ndarray) and ref_values[o].dtype.kind in "biuf"]
        ref_out = {o: ref_values[o] for o in names}
        before = core.output_errors(ref_out, cand_values)
        rep = core.replay_outputs(ref, cand, feeds, [at], ref_values, ref_out, before)
        runs += 1
        if rep.error:
            return {"error": rep.error, "runs": runs}
        op = core.replay_op(ref, cand, feeds, at, ref_values[at], cand_values[at])
        runs += 2 if op.alone is not None else 1
        unfit = _unfit(job.backend, ref_values[at])
    except CannotReplay as err:
        return {"error": str(err), "runs": runs}
    finally:
        for r in made:
            r.close()
    outputs = []
    for o in names:
        b, a = rep.before[o], rep.after.get(o)
        if a is None:
            continue
        outputs.append({"name": o, "error_before": core._num(b.rel),
                        "error_after": core._num(a.rel),
                        "share_removed": core._num(rep.share(o)),
                        "nonfinite_before": b.nonfinite, "nonfinite_after": a.nonfinite})
    verdict = op.verdict if op.verdict in (core.INTRODUCED, core.INHERITED) else None
    note = (f"op replay could not run: {op.error}" if op.error else
            f"{at} is within tolerance alone and in the plain run" if op.verdict == core.WITHIN
            else "")
    return {"outputs": outputs, "op": verdict, "op_note": note, "runs": runs, "unfit": unfit}


def _unfit(backend: str, value: Any) -> int:
    """How many finite values of `value` a float16 candidate cannot hold (beyond 65504 after
    rounding): a reference value that overflows float16 overflows again when put back."""
    import numpy as np

    from .backends.registry import BACKENDS

    b = BACKENDS.get(backend)
    if (getattr(b, "precision", None) or getattr(b, "dtype", None)) != "float16":
        return 0
    v = np.asarray(value, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return int(np.count_nonzero(np.isfinite(v) & ~np.isfinite(v.astype(np.float16))))
