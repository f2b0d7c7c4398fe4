"""Attribution: how much of each output's error is each origin's.

For output o with squared error E0 (core.error's sse) in the plain candidate run, E_k with the
reference's value replayed at origin k alone and E_all with every origin replayed together:
  share_k     = (E0 - E_k) / E0        (the part of o's error origin k alone removes)
  together    = (E0 - E_all) / E0
  remainder   = 1 - together           (what replaying every origin does not explain)
  interaction = together - sum_k share_k
When the origins' effects add up (independent faults), sum_k share_k + remainder = 100%; the
report prints the sum and calls it additive when it is within ADDITIVE_TOLERANCE of 100%.
E0 infinite (NaN/Inf in the output): a replay that makes o finite removes 100%, one that does
not 0% (core.removed).

Cost: one candidate run per origin plus one with all of them; --max-replays N caps the origins
replayed alone (the largest reach first when they come from compare; the order given by --at
otherwise) and the report names those cut.
"""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from . import core
from .mechanism import CannotReplay, Replayable

# |sum of shares + remainder - 100%| within this: the origins' effects add up.
ADDITIVE_TOLERANCE = 0.05


@dataclass
class Attribution:
    origins: List[str]
    cut: List[str] = field(default_factory=list)
    # output -> origin -> share (None: the output had no error)
    shares: Dict[str, Dict[str, Optional[float]]] = field(default_factory=dict)
    together: Dict[str, Optional[float]] = field(default_factory=dict)
    runs: int = 0
    source: str = "--at"
    error: str = ""

    def remainder(self, output: str) -> Optional[float]:
        t = self.together.get(output)
        return None if t is None else 1.0 - t

    def ranked(self, output: str) -> List[str]:
        s = self.shares.get(output, {})
        return sorted(s, key=lambda k: -(s[k] if s[k] is not None else -math.inf))

    def additive(self, output: str) -> Optional[bool]:
        s, r = self.shares.get(output, {}), self.remainder(output)
        if r is None or any(v is None or not math.isfinite(v) for v in s.values()):
            return None
        return abs(sum(s.values()) + r - 1.0) <= ADDITIVE_TOLERANCE

    def to_json(self) -> Dict[str, Any]:
        out = {}
        for o in self.shares:
            s = self.shares[o]
            out[o] = {"ranked": [{"origin": k, "share": core._num(s[k])} for k in self.ranked(o)],
                      "together": core._num(self.together.get(o)),
                      "remainder": core._num(self.remainder(o)),
                      "additive": self.additive(o)}
        return {"origins": list(self.origins), "source": self.source, "cut": list(self.cut),
                "runs": self.runs, "additive_tolerance": ADDITIVE_TOLERANCE,
                "error": self.error or None, "outputs": out}


def origins_from_compare(ref: Replayable, cand: Replayable,
                         feeds: Mapping[str, np.ndarray]) -> List[str]:
    """The origins `driftscope compare` names between a dump of each side's plain run, largest
    reach first, as replay names tensors."""
    import driftscope

    from .torch import identity

    with tempfile.TemporaryDirectory(prefix="driftscope-replay-") as d:
        rp, cp = os.path.join(d, "ref.tdump"), os.path.join(d, "cand.tdump")
        for side, path in ((ref, rp), (cand, cp)):
            if not hasattr(side, "record"):
                raise CannotReplay(f"{side.backend}: cannot record a dump to find the origins; "
                                   "name them with --at")
            side.record(feeds, path)  # type: ignore[attr-defined]
        found = list(driftscope.compare(rp, cp).origins)
    found = [o for o in found if o.get("role") == "output"]
    found.sort(key=lambda o: -int(o.get("reach") or 0))
    known = set(ref.tensors())
    names = [identity(o["name"], int(o.get("role_index") or 0), int(o.get("occurrence") or 0))
             for o in found]
    return [n for n in dict.fromkeys(names) if n in known]


def attribute(ref: Replayable, cand: Replayable, feeds: Mapping[str, np.ndarray],
              origins: Sequence[str], max_replays: Optional[int] = None,
              ref_values: Optional[Mapping[str, np.ndarray]] = None,
              before: Optional[Mapping[str, core.Error]] = None,
              source: str = "--at") -> Attribution:
    kept = list(origins) if max_replays is None else list(origins)[:max(max_replays, 0)]
    att = Attribution(kept, cut=list(origins)[len(kept):], source=source)
    outputs = ref.outputs()
    if ref_values is None:
        ref_values = ref.capture(feeds, kept)
    ref_out = {o: ref_values[o] for o in outputs if o in ref_values}
    if before is None:
        before = core.output_errors(ref_out, cand.run(feeds))
        att.runs += 1
    try:
        alone = {}
        for k in kept:
            alone[k] = core.output_errors(ref_out, cand.run(feeds, replace={k: ref_values[k]}))
            att.runs += 1
        together = (core.output_errors(ref_out, cand.run(
            feeds, replace={k: ref_values[k] for k in kept})) if kept else dict(before))
        att.runs += 1 if kept else 0
    except CannotReplay as e:
        att.error = str(e)
        return att
    for o, b in before.items():
        att.shares[o] = {k: core.removed(b.sse, alone[k][o].sse) for k in kept}
        att.together[o] = core.removed(b.sse, together[o].sse)
    return att
