"""The first divergent operation inside a delegate or a compiler (issue 27 item 6): a backend
that can hand any chosen part of the model to its accelerated path, and run the rest on its
plain one, is bisected over what it hands over, the way LiteRT's culprit_finder bisects which
range of nodes is delegated: the graph stays whole and the delegate is not touched.

A backend offers it with two methods (and ``partial_what``, three phrases for its reports):

* ``partial_units(model, work, seed, leaves)``: (unit, op, module path) of everything its
  accelerated path takes, in execution order: ``executorch`` the edge operations the
  XnnpackPartitioner delegates, ``torch-compile`` the leaf modules (``leaves``, from the
  reference's recording);
* ``load_partial(model, work, seed, delegated, units=...)``: a session with only the units
  ``delegated`` on the accelerated path (XNNPACK, inductor), the rest on the plain one (the
  portable kernels, eager PyTorch).

The search hands over a prefix of the units (0..k): for ExecuTorch a topological prefix of each
XNNPACK partition stays a valid (convex) partition, for torch.compile the compiled modules keep
the fusions among them. Cut k fails when its outputs fail the guard's verdict; runs: the whole
(k = last), nothing (k = -1), then a binary search, at most ceil(log2(units)) + 2. One more run
hands over the found unit alone: when that passes, the failure needs what was handed over
before it too (an XNNPACK partition fused across it, an inductor kernel fused across the module
boundary), and the report says so.

When the run with nothing handed over already fails the reference (the portable kernels, or a
compiled parent's own forward, diverge by themselves), the search is over what the accelerated
path changes beyond that run: each cut is judged against that run's outputs.

This module imports no other module of the guard's probe (``_probe`` dispatches to it).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ._metrics import PASS, Thresholds, judge_all


def can_bisect(backend: Any) -> bool:
    return hasattr(backend, "partial_units") and hasattr(backend, "load_partial")


def partial_bisect_job(job: Any) -> Dict[str, Any]:
    """In a child process: the bisection over what the backend hands its accelerated path."""
    from .backends.registry import BACKENDS
    from ._stateful import StatefulSession

    cand = BACKENDS[job.backend]
    units: List[Tuple[str, str, str]] = list(cand.partial_units(job.model, job.work, job.seed,
                                                                list(job.leaves)))
    names = [u[0] for u in units]
    ops = dict(job.ops or {})
    t = Thresholds(**job.thresholds)
    runs: List[Dict[str, Any]] = []
    against: Dict[str, Any] = {"outputs": job.ref_outputs, "what": "the reference"}
    base = {"units": len(units)}

    def run(delegated: Sequence[str]) -> Dict[str, np.ndarray]:
        session = cand.load_partial(job.model, job.work, job.seed, list(delegated), units=names)
        if job.state:
            session = StatefulSession(session, job.state)
        return session.run(job.feeds)

    def verdict(out: Dict[str, np.ndarray], ref: Any) -> Tuple[str, str]:
        worst = judge_all([ref], [out], t)
        if worst is None:
            return PASS, ""
        return worst.status, f"{worst.name}: {worst.detail}"

    seen: Dict[int, Dict[str, np.ndarray]] = {}

    def fails(pos: int) -> Tuple[bool, str, str]:
        seen[pos] = run(names[:pos + 1])
        status, detail = verdict(seen[pos], against["outputs"])
        runs.append({"node": names[pos] if pos >= 0 else "", "status": status,
                     "handed": pos + 1})
        return status != PASS, status, detail

    if not units:
        return {"found": None, "runs": runs, **base,
                "why": f"{job.backend} takes none of the model's operations on its accelerated "
                       "path, so there is nothing to bisect"}
    hi = len(units) - 1
    bad, status, detail = fails(hi)
    if not bad:
        return {"found": None, "runs": runs, **base,
                "why": "the candidate passes on this sample when it is built again"}
    lo_out = run([])
    lo_status, lo_detail = verdict(lo_out, job.ref_outputs)
    runs.append({"node": "", "status": lo_status, "handed": 0})
    if lo_status != PASS:
        # The plain path fails by itself: what does the accelerated path add to that?
        base["plain"] = {"status": lo_status, "detail": lo_detail}
        against.update(outputs=lo_out, what="the run with nothing handed over")
        status, detail = verdict(seen[hi], lo_out)
        if status == PASS:
            return {"found": None, "runs": runs, **base,
                    "why": f"with nothing handed over it already fails ({lo_status}: "
                           f"{lo_detail}), and handing everything over changes the outputs "
                           "by less than the verdict tolerates: the failure is not in what "
                           f"{job.backend}'s accelerated path takes"}
    lo = -1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        b, st, de = fails(mid)
        if b:
            hi, status, detail = mid, st, de
        else:
            lo = mid
    unit, op, module = units[hi]
    alone: Optional[Dict[str, str]] = None
    if hi > 0:
        st, de = verdict(run([unit]), against["outputs"])
        alone = {"status": st, "detail": de}
    return {"found": {"node": module or "<root>", "op_type": op or ops.get(module, ""),
                      "unit": unit, "status": status, "detail": detail, "index": hi},
            "runs": runs, "alone": alone, "against": against["what"], **base}


def partial_cut(backend: Any) -> str:
    what = backend.partial_what[0]
    return "over the " + what + " ({runs} runs)"


def partial_notes(backend: Any, out: Dict[str, Any]) -> List[str]:
    """The report's sentences on a partial bisection's answer."""
    what, handed, rest = backend.partial_what
    notes: List[str] = []
    n = int(out.get("units") or 0)
    plain = out.get("plain")
    if plain:
        notes.append(f"with nothing {handed} (everything {rest}) it already fails "
                     f"({plain['status']}: {plain['detail']}); each cut was judged against that "
                     "run, so what is named is what the accelerated path changes beyond it")
    found = out.get("found")
    if not found:
        return notes
    runs = len(out.get("runs") or [])
    bound = math.ceil(math.log2(max(n, 1))) + 2
    unit = found.get("unit") or found["node"]
    named = found["node"] if unit == found["node"] else f"{unit} ({found['op_type']}) of module " \
                                                      f"{found['node']}"
    notes.append(f"{runs} runs for {n} {what} (at most ceil(log2 {n}) + 2 = {bound}): "
                 f"{named} is the first whose being {handed} fails the verdict, the ones "
                 f"after it {rest}")
    alone = out.get("alone")
    if alone is not None:
        if alone["status"] == PASS:
            notes.append(f"{unit} {handed} alone passes: the failure needs the {what} before it "
                         f"{handed} too (a fusion crosses its boundary), 1 more run")
        else:
            notes.append(f"{unit} {handed} alone fails too ({alone['status']}): the divergence "
                         f"is in its own {handed.split(' ')[0]} form, 1 more run")
    return notes
