"""The isolation scan (`driftscope replay --isolate`): every module's own error, whatever it
inherits, from ONE teacher-forced candidate pass (PyTorch).

Reference pass: every module call's arguments and outputs recorded. Candidate pass: a pre-hook
gives every module the reference's arguments (cast to the candidate's dtype), a forward hook
records what the module computed and hands the reference's output on to the rest of the model.
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

    def to_json(self) -> Dict[str, Any]:
        return {"scanned": self.scanned, "runs": self.runs, "error": self.error or None,
                "tolerance": "the guard's default thresholds (cosine >= 0.99, relative error "
                             "<= 0.296, norm ratio within 1.25, no NaN/Inf)",
                "introduced": [r.to_json() for r in self.introduced]}


def isolate(ref: Replayable, cand: Replayable, feeds: Mapping[str, np.ndarray]) -> Isolation:
    for side in (ref, cand):
        if not hasattr(side, "teacher_forced"):
            return Isolation(error=f"{side.backend}: the isolation scan needs teacher forcing, "
                                   "which only the PyTorch mechanism has so far")
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
        e = core.error(ref_value, value, name)
        if e.beyond:
            p = plain_outs.get(name)
            iso.introduced.append(Row(name, e, core.error(ref_value, p, name)
                                      if p is not None and p.shape == ref_value.shape else None))
    return iso
