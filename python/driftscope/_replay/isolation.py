"""The isolation scan (`driftscope replay --isolate`): every op's own error, whatever it
inherits. Two ways, chosen by what the candidate's mechanism can do (its capability, not its
family): teacher forcing in ONE candidate pass (PyTorch, below), or every op run alone on the
reference's captured inputs, one small model per op (ONNX: onnx.isolate, bounded by `limit`
nodes, DEFAULT_LIMIT unless the user says otherwise; the report says how many were left out).

Teacher forcing. Reference pass: every module call's arguments and outputs recorded. Candidate
pass: a pre-hook gives every module the reference's arguments (cast to the candidate's dtype),
a forward hook records what the module computed and hands the reference's output on to the
rest of the model.
So each module's recorded output differs from the reference's only by what its own forward did
(a leaf: its op; a parent: the arithmetic between its children, such as a residual add). A
module is listed when that own error is beyond the guard's tolerance (core.error's status:
_metrics.judge, default Thresholds), in execution order, with its error in the plain run beside
it. A second fault downstream of a first, smaller than the error it inherits, shows up here while
any comparison of two dumps calls it inherited.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from . import core
from .mechanism import CannotReplay, Replayable


# Nodes run alone by default when the mechanism isolates one op at a time (ONNX: about 0.4 s
# per node on ort-int8, so ~80 s; --max-isolate changes it).
DEFAULT_LIMIT = 200


@dataclass
class Row:
    name: str
    own: core.Error
    plain: Optional[core.Error]

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name, "own": self.own.to_json(),
                "plain": self.plain.to_json() if self.plain else None}


@dataclass
class Isolation:
    scanned: int = 0
    introduced: List[Row] = field(default_factory=list)  # beyond tolerance, execution order
    runs: int = 0  # candidate passes (the teacher-forced one and the plain one)
    error: str = ""
    how: str = "teacher forcing"  # or "one op at a time"
    left_out: int = 0  # ops past the limit, not scanned
    limit: Optional[int] = None
    not_alone: List[str] = field(default_factory=list)  # "NAME: why" for ops that cannot run alone

    def to_json(self) -> Dict[str, Any]:
        return {"scanned": self.scanned, "runs": self.runs, "error": self.error or None,
                "how": self.how, "limit": self.limit, "left_out": self.left_out,
                "not_alone": list(self.not_alone),
                "tolerance": "the guard's default thresholds (cosine >= 0.99, relative error "
                             "<= 0.296, norm ratio within 1.25, no NaN/Inf)",
                "introduced": [r.to_json() for r in self.introduced]}


def isolate(ref: Replayable, cand: Replayable, feeds: Mapping[str, np.ndarray],
            limit: Optional[int] = None) -> Isolation:
    if hasattr(cand, "teacher_forced") and hasattr(ref, "reference_calls"):
        return _teacher_forced(ref, cand, feeds)
    if hasattr(cand, "isolate"):
        return _op_by_op(ref, cand, feeds, DEFAULT_LIMIT if limit is None else limit)
    return _through_the_interface(ref, cand, feeds, DEFAULT_LIMIT if limit is None else limit)


def _through_the_interface(ref: Replayable, cand: Replayable, feeds: Mapping[str, np.ndarray],
                           limit: int) -> Isolation:
    """Op at a time with the interface alone (a mechanism without its own batched scan, such
    as .tflite's): each of the first `limit` tensors' op run on the candidate with the
    reference's recorded inputs (op_inputs + run_op), against the reference's value; one capture
    of every scanned tensor on each side gives the values and the plain-run errors."""
    names = cand.tensors()
    known = set(ref.tensors())
    chosen = [n for n in names if n in known][:max(0, int(limit))]
    left = max(0, len([n for n in names if n in known]) - len(chosen))
    iso = Isolation(how="one op at a time", limit=limit, left_out=left)
    try:
        ref_vals = ref.capture(feeds, chosen)
        plain_vals = cand.capture(feeds, chosen)
    except CannotReplay as e:
        iso.error = str(e)
        return iso
    iso.runs = 1
    for n in chosen:
        try:
            own = cand.run_op(n, ref.op_inputs(feeds, n))
        except CannotReplay as e:
            iso.not_alone.append(f"{n}: {e}")
            continue
        iso.runs += 1
        iso.scanned += 1
        err = core.error(ref_vals[n], own, "", core.INTERMEDIATE)
        if err.beyond:
            iso.introduced.append(Row(n, err, core.error(ref_vals[n], plain_vals[n], "",
                                                         core.INTERMEDIATE)))
    return iso


def _op_by_op(ref: Replayable, cand: Replayable, feeds: Mapping[str, np.ndarray],
              limit: int) -> Isolation:
    try:
        got = cand.isolate(ref, feeds, limit,  # type: ignore[attr-defined]
                           metric=lambda c, r: core.error(r, c, "", core.INTERMEDIATE))
    except CannotReplay as e:
        return Isolation(error=str(e), how="one op at a time", limit=limit)
    iso = Isolation(how="one op at a time", limit=limit, left_out=got.left_out,
                    runs=2 + len(got.rows))
    for row in got.rows:
        if row.own is None:
            iso.not_alone.append(f"{row.name}: {row.reason}")
            continue
        iso.scanned += 1
        if row.own.beyond:
            iso.introduced.append(Row(row.name, row.own, row.plain))
    return iso


def _teacher_forced(ref: Replayable, cand: Replayable,
                    feeds: Mapping[str, np.ndarray]) -> Isolation:
    try:
        calls, ref_outs = ref.reference_calls(feeds)  # type: ignore[attr-defined]
        own = cand.teacher_forced(feeds, calls, ref_outs)  # type: ignore[attr-defined]
        _, plain_outs = cand.reference_calls(feeds)  # type: ignore[attr-defined]
    except CannotReplay as e:
        return Isolation(error=str(e))
    iso = Isolation(runs=2)
    for name, value in own.items():  # recorded in execution order (forward-hook order)
        ref_value = ref_outs[name]
        if ref_value.shape != value.shape:
            continue
        iso.scanned += 1
        e = core.error(ref_value, value, name, core.INTERMEDIATE)
        if e.beyond:
            p = plain_outs.get(name)
            plain = (core.error(ref_value, p, name, core.INTERMEDIATE)
                     if p is not None and p.shape == ref_value.shape else None)
            iso.introduced.append(Row(name, e, plain))
    return iso
