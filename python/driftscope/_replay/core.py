"""Output replay and op replay over the Replayable interface (backend-neutral).

The error measure, defined once here and used by every analysis of replay: for a reference
output r and a candidate output c (float64, flattened),
  sse      = sum((c - r)^2) over every position; +inf when c is NaN or Inf anywhere r is finite
             (a non-finite output has infinite error)
  rel      = sqrt(sse) / ||r||_2          (relative L2 error; +inf with sse)
  cosine, max_abs: over the positions finite in both (the guard's _metrics.judge)
The share of an output's error a replay removes is (sse_before - sse_after) / sse_before;
sse_before = inf and sse_after finite is a removal of 100%, both infinite a removal of 0%.

Op replay: "introduced" when the op run alone on the reference's recorded inputs is beyond the
guard's tolerance (_metrics.judge with the default Thresholds: cosine >= 0.99, relative error
<= Thresholds.rel_error_limit(), norm ratio within 1.25, no NaN/Inf where the reference is
finite); "inherited" when alone it is within tolerance but beyond it in the plain run.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from .._guard import _metrics as M
from .mechanism import CannotReplay, Replayable

INTRODUCED, INHERITED, WITHIN = "introduced", "inherited", "within tolerance"

# An intermediate tensor (op replay, the isolation scan) is judged without the argmax rule: its
# last axis is no class axis, and a near-tie flipping under float16 / INT8 rounding in an
# attention Reshape is not an error of the op (_metrics.Thresholds.class_axes: {} = none).
INTERMEDIATE = M.Thresholds(class_axes={})


@dataclass
class Error:
    sse: float
    rel: float
    cosine: Optional[float]
    max_abs: Optional[float]
    nonfinite: int
    status: str  # the guard's verdict of this pair (PASS, NUMERICAL_INSTABILITY, ...)

    @property
    def beyond(self) -> bool:
        return self.status != M.PASS

    def to_json(self) -> Dict[str, Any]:
        num = _num
        return {"sse": num(self.sse), "rel": num(self.rel), "cosine": num(self.cosine),
                "max_abs": num(self.max_abs), "nonfinite": self.nonfinite,
                "status": self.status}


def error(ref: np.ndarray, cand: np.ndarray, name: str = "",
          thresholds: Optional[M.Thresholds] = None) -> Error:
    r = np.asarray(ref, dtype=np.float64).ravel()
    c = np.asarray(cand, dtype=np.float64).ravel()
    j = M.judge(name, np.asarray(ref), np.asarray(cand), thresholds or M.Thresholds(), 0)
    if r.shape != c.shape:
        return Error(math.inf, math.inf, None, None, 0, j.status)
    rf, cf = np.isfinite(r), np.isfinite(c)
    bad = int(np.count_nonzero(rf & ~cf))
    both = rf & cf
    if bad:
        sse = math.inf
    else:
        sse = float(np.sum((c[both] - r[both]) ** 2))
    norm = float(np.linalg.norm(r[rf]))
    rel = math.inf if not math.isfinite(sse) else (math.sqrt(sse) / norm if norm > 0 else
                                                    (0.0 if sse == 0 else math.inf))
    return Error(sse, rel, j.cosine, j.max_diff, bad, j.status)


def removed(before: float, after: float) -> Optional[float]:
    """The share of an error (sse) a replay removed; None when there was none to remove."""
    if before == 0.0:
        return None
    if math.isinf(before):
        return 1.0 if math.isfinite(after) else 0.0
    if math.isinf(after):
        return -math.inf
    return (before - after) / before


# -- the factory ---------------------------------------------------------------------------

_FAMILY_MODULE = {"torch": "torch", "onnx": "onnx", "tflite": "tflite"}


def family_of(model: str) -> str:
    low = model.lower()
    if low.endswith(".onnx"):
        return "onnx"
    if low.endswith(".tflite"):
        return "tflite"
    return "torch"


def replayable(model: str, backend: str, seed: int = 0, work: str = "",
               **kw: Any) -> Replayable:
    """`model` (FILE.py:FN, MODEL.onnx or MODEL.tflite) loaded on guard backend `backend`
    through its family's mechanism (_replay.torch / .onnx / .tflite, imported only when needed).
    A family whose mechanism is not there raises CannotReplay("... not available yet")."""
    family = family_of(model)
    try:
        mod = importlib.import_module(f"{__package__}.{_FAMILY_MODULE[family]}")
    except ImportError as e:
        if getattr(e, "name", "") == f"{__package__}.{_FAMILY_MODULE[family]}":
            raise CannotReplay(f"replay of {family} models is not available yet") from None
        raise
    if family == "torch":
        return mod.TorchReplayable.load(model, backend, seed=seed, work=work)
    make = getattr(mod, "replayable", None)
    if make is None:
        raise CannotReplay(f"replay of {family} models is not available yet")
    return make(model, backend, seed=seed, work=work, **kw)


# -- output replay -------------------------------------------------------------------------

@dataclass
class OutputReplay:
    """What replaying the reference's values at `at` did to each output."""

    at: List[str]
    before: Dict[str, Error]
    after: Dict[str, Error]
    error: str = ""  # why it could not run (CannotReplay)

    def share(self, output: str) -> Optional[float]:
        return removed(self.before[output].sse, self.after[output].sse)

    def to_json(self) -> Dict[str, Any]:
        return {"at": list(self.at), "error": self.error or None,
                "outputs": {o: {"before": self.before[o].to_json(),
                                "after": self.after[o].to_json() if o in self.after else None,
                                "removed": _num(self.share(o)) if o in self.after else None}
                            for o in self.before}}


def _num(x: Optional[float]) -> Any:
    """JSON has no Inf/NaN: infinities as the strings "inf"/"-inf", NaN as null."""
    if x is None or math.isnan(x):
        return None
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")


def output_errors(ref_out: Mapping[str, np.ndarray],
                  cand_out: Mapping[str, np.ndarray]) -> Dict[str, Error]:
    return {o: error(ref_out[o], cand_out[o], o) for o in ref_out if o in cand_out}


def replay_outputs(ref: Replayable, cand: Replayable, feeds: Mapping[str, np.ndarray],
                   at: Sequence[str], ref_values: Mapping[str, np.ndarray],
                   ref_out: Mapping[str, np.ndarray],
                   before: Mapping[str, Error]) -> OutputReplay:
    """One candidate run with the reference's values put back at every tensor of `at`."""
    try:
        after = cand.run(feeds, replace={n: ref_values[n] for n in at})
    except CannotReplay as e:
        return OutputReplay(list(at), dict(before), {}, str(e))
    return OutputReplay(list(at), dict(before), output_errors(ref_out, after))


# -- op replay -----------------------------------------------------------------------------

@dataclass
class OpReplay:
    name: str
    verdict: str            # INTRODUCED / INHERITED / WITHIN, "" when it could not run
    alone: Optional[Error]  # the op on the reference's inputs vs the reference's value
    plain: Optional[Error]  # the tensor in the candidate's plain run vs the reference's
    error: str = ""

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name, "verdict": self.verdict or None,
                "alone": self.alone.to_json() if self.alone else None,
                "plain": self.plain.to_json() if self.plain else None,
                "error": self.error or None}


def op_verdict(alone: Error, plain: Error) -> str:
    if alone.beyond:
        return INTRODUCED
    return INHERITED if plain.beyond else WITHIN


def replay_op(ref: Replayable, cand: Replayable, feeds: Mapping[str, np.ndarray], name: str,
              ref_value: np.ndarray, cand_value: np.ndarray) -> OpReplay:
    plain = error(ref_value, cand_value, name, INTERMEDIATE)
    try:
        alone_value = cand.run_op(name, ref.op_inputs(feeds, name))
    except CannotReplay as e:
        return OpReplay(name, "", None, plain, str(e))
    alone = error(ref_value, alone_value, name, INTERMEDIATE)
    return OpReplay(name, op_verdict(alone, plain), alone, plain)


@dataclass
class Replay:
    """Everything one `driftscope replay` computed."""

    reference: str
    candidate: str
    model: str
    outputs: List[str]
    plain: Dict[str, Error] = field(default_factory=dict)
    replays: List[OutputReplay] = field(default_factory=list)
    ops: List[OpReplay] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)
    isolation: Any = None
    attribution: Any = None
    runs: int = 0  # candidate runs made (plain included)
    # Parts of the command ("output and op replay", "attribution", "isolation scan") whose
    # child process crashed or raised: part -> the one-line reason (cli.py runs each part in
    # its own process, so the rest of the report is still there).
    runtime_errors: Dict[str, str] = field(default_factory=dict)
    # --candidate-model (a port): the tensors paired by name and those left unmatched.
    pairing: Optional[Dict[str, Any]] = None

    def to_json(self) -> Dict[str, Any]:
        return {"schema": "driftscope.replay.report/1", "model": self.model,
                "reference": self.reference, "candidate": self.candidate,
                "outputs": {o: e.to_json() for o, e in self.plain.items()},
                "replays": [r.to_json() for r in self.replays],
                "ops": [o.to_json() for o in self.ops],
                "isolation": self.isolation.to_json() if self.isolation else None,
                "attribution": self.attribution.to_json() if self.attribution else None,
                "runs": self.runs, "notes": list(self.notes), "errors": list(self.errors),
                "runtime_errors": [{"part": k, "status": "RUNTIME_ERROR", "error": v}
                                   for k, v in self.runtime_errors.items()],
                **({"pairing": self.pairing} if self.pairing is not None else {})}


def replay(ref: Replayable, cand: Replayable, feeds: Mapping[str, np.ndarray],
           at: Sequence[str], model: str = "") -> Replay:
    """Output replay at each tensor of `at` alone, and op replay of each."""
    known = ref.tensors()
    rep = Replay(ref.backend, cand.backend, model, ref.outputs())
    seen = len(ref.notes), len(cand.notes)
    rep.notes += list(ref.notes) + list(cand.notes)
    good = [n for n in at if n in set(known)]
    ref_values = ref.capture(feeds, good)
    ref_out = {o: ref_values[o] for o in rep.outputs if o in ref_values}
    cand_values = cand.capture(feeds, good)
    rep.runs += 1
    rep.plain = output_errors(ref_out, cand_values)
    for n in good:
        rep.replays.append(replay_outputs(ref, cand, feeds, [n], ref_values, ref_out, rep.plain))
        rep.runs += 1
        rep.ops.append(replay_op(ref, cand, feeds, n, ref_values[n], cand_values[n]))
    # What the mechanisms learnt while running (how a value was substituted: "planted:
    # substituted as int8, quantized with the tensor's scale ..."), said once each.
    for later in (ref.notes[seen[0]:], cand.notes[seen[1]:]):
        rep.notes += [x for x in later if x not in rep.notes]
    return rep
