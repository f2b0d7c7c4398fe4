"""Delegated-range bisection of a .tflite model (issue 27 item 3): LiteRT culprit_finder's
question, which range of operators must run on the candidate for the failure to appear, asked
without touching the delegate.

A run "with operators i..j delegated" chains three pieces cut by surgery/tflite.py: the prefix
(operators 0..i-1) on the reference backend, the middle (i..j, fed the prefix's values) on the
candidate, the suffix (j+1.., fed the middle's values) on the reference again; each piece is
loaded through the backend's own load(), so the candidate builds its part as it builds a whole
model (XNNPACK takes the middle's nodes; a GPU or vendor delegate backend its own). The chained
model's outputs are judged against the reference's whole-model outputs with the guard's
verdict. Values cross a cut as the backends hand them out (quantized tensors dequantized with
their own scale and zero point, quantized back by the next piece's input parameters: the
integers round-trip), so the reference on both sides of a range gives the whole model's outputs
bit for bit (tests/python/test_tflite_surgery.py checks the pieces chained).

The search: the whole range first (the failure must reproduce through the chain), then halving:
the left half is run; if it fails the search goes on in it, otherwise in the right half without
a run (one culprit is in one half). The single operator left is run alone to confirm, so a
single-culprit model costs ceil(log2(ops)) + 2 runs at most. When the operator alone does not
reproduce (the failure needs two operators delegated together), the answer is the smallest
failing range actually run, named as a range.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Tuple

import numpy as np

from ._metrics import PASS, SEVERITY, Thresholds, judge

METHOD = "delegated-range"


def _first_line(err: BaseException) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    return lines[0] if lines else type(err).__name__


def delegated_range(model: str, reference: str, candidate: str,
                    feeds: Mapping[str, np.ndarray], thresholds: Thresholds, work: str,
                    seed: int = 0) -> Dict[str, Any]:
    """Binary search for the smallest range of operators whose delegation to `candidate` (the
    rest on `reference`) fails the verdict on the model's outputs. Returns {"found": {node,
    op_type, status, detail, index} or None, "range": [first, last] or None, "runs": [{range,
    status}], "ops": n, "why"/"unavailable": a sentence}."""
    from .backends.registry import BACKENDS
    from .surgery import tflite as cut

    ref, cand = BACKENDS[reference], BACKENDS[candidate]
    for b in (cand, ref):
        why = b.unavailable()
        if why:
            return {"found": None, "range": None, "runs": [], "ops": 0,
                    "unavailable": f"{b.name} is unavailable here: {why}"}
    g = cut.load(model)
    n = len(g.operators)
    base = {"found": None, "range": None, "runs": [], "ops": n}
    for k in range(n):
        why = cut.refusal(g, k)
        if why is not None:
            return {**base, "why": "delegated-range bisection chains pieces around every "
                                   f"operator, and {why}"}
    inputs = [g.name(t) for t in g.inputs]
    if not all(i in feeds for i in inputs) and len(feeds) == len(inputs):
        feeds = dict(zip(inputs, feeds.values()))  # a signature's names: by position
    outputs = [g.name(t) for t in g.outputs]
    sessions: Dict[Tuple[str, Any], Tuple[Any, Any]] = {}

    def load(backend: Any, key: Any, make: Any) -> Tuple[Any, Any]:
        got = sessions.get((backend.name, key))
        if got is None:
            piece = make()
            d = os.path.join(work, f"{backend.name}-{'-'.join(map(str, key))}")
            os.makedirs(d, exist_ok=True)
            path = os.path.join(d, "piece.tflite")
            with open(path, "wb") as f:
                f.write(piece.data)
            got = sessions[(backend.name, key)] = (backend.load(path, d, seed), piece)
        return got

    def run(backend: Any, key: Any, make: Any, values: Dict[str, np.ndarray]) -> None:
        session, piece = load(backend, key, make)
        fed = {}
        for name in piece.inputs:
            v = np.asarray(values[name])
            want = g.type_names[g.index(name)]
            if want == "FLOAT32" and v.dtype != np.float32:
                v = v.astype(np.float32)  # what the previous piece handed out as float64
            fed[name] = v
        values.update(session.run(fed))

    def chained(i: int, j: int) -> Dict[str, np.ndarray]:
        values: Dict[str, np.ndarray] = dict(feeds)
        given = list(g.inputs) + (cut.frontier(g, i - 1) if i > 0 else [])
        if i > 0:
            run(ref, ("prefix", i), lambda: cut.cut_after(g, i - 1), values)
        run(cand, ("middle", i, j), lambda: cut.middle(g, given, cut.frontier(g, j)), values)
        if j < n - 1:
            rest = list(g.inputs) + cut.frontier(g, j)
            run(ref, ("suffix", j), lambda: cut.middle(g, rest, g.outputs), values)
        return {o: values[o] for o in outputs}

    try:
        want = ref.load(model, work, seed).run(dict(feeds))
    except Exception as err:  # noqa: BLE001
        return {**base, "why": f"the reference {reference} cannot run the model: "
                               f"{_first_line(err)}"}
    runs: List[Dict[str, Any]] = []

    def fails(i: int, j: int) -> Tuple[bool, str, str]:
        try:
            got = chained(i, j)
        except cut.CutRefused as err:
            runs.append({"range": [i, j], "status": "RUNTIME_ERROR"})
            raise _Stop(f"ops {i}..{j} cannot be chained: {err}") from None
        except Exception as err:  # noqa: BLE001 - a piece the runtime rejects
            runs.append({"range": [i, j], "status": "RUNTIME_ERROR"})
            raise _Stop(f"ops {i}..{j} delegated failed to run: {_first_line(err)}") from None
        worst, detail = PASS, ""
        for o in outputs:
            res = judge(o, want[o], got[o], thresholds, 0)
            if SEVERITY[res.status] > SEVERITY[worst]:
                worst, detail = res.status, f"{o}: {res.detail}"
        runs.append({"range": [i, j], "status": worst})
        return worst != PASS, worst, detail

    try:
        bad, status, detail = fails(0, n - 1)
        if not bad:
            return {**base, "runs": runs,
                    "why": f"every operator delegated to {candidate} through the chained "
                           "pieces passes (the failure is not reproduced by the pieces)"}
        lo, hi = 0, n - 1
        proven = (lo, hi, status, detail)
        while hi > lo:
            mid = (lo + hi) // 2
            bad, st, de = fails(lo, mid)
            if bad:
                hi = mid
                proven = (lo, hi, st, de)
            else:
                lo = mid + 1
        if proven[:2] != (lo, hi):
            bad, st, de = fails(lo, hi)
            if bad:
                proven = (lo, hi, st, de)
    except _Stop as stop:
        return {**base, "runs": runs, "why": str(stop)}
    first, last, status, detail = proven
    out = {**base, "runs": runs, "range": [first, last]}
    if first != last:
        out["why"] = (f"no single operator reproduces the failure delegated alone; the "
                      f"smallest failing range run is {g.op_label(first)} .. "
                      f"{g.op_label(last)}")
        return out
    outs = [g.name(o) for o in g.operators[first].outputs if o >= 0]
    out["found"] = {"node": outs[0] if outs else g.op_label(first),
                    "op_type": g.op_types[first], "status": status, "detail": detail,
                    "index": first}
    return out


class _Stop(Exception):
    pass


def add_to(job: Any, out: Dict[str, Any]) -> Dict[str, Any]:
    """In the bisection child of a .tflite model: the delegated-range search beside the prefix
    bisection's answer `out` (out["delegated"]), for a LiteRT candidate (the backends that run
    a .tflite with delegates; OpenVINO reads the file whole)."""
    from .backends.registry import BACKENDS

    if out.get("error") or getattr(BACKENDS.get(job.backend), "family", "") != "tflite":
        return out
    steps = job.feeds if isinstance(job.feeds, list) else [job.feeds]
    found = out.get("found") or {}
    feeds = steps[min(int(found.get("step", 0) or 0), len(steps) - 1)]
    work = os.path.join(job.work, "delegated")
    os.makedirs(work, exist_ok=True)
    try:
        out["delegated"] = delegated_range(job.model, job.reference, job.backend, feeds,
                                           Thresholds(**job.thresholds), work, job.seed)
    except Exception as err:  # noqa: BLE001 - the prefix bisection's answer stands
        out["delegated"] = {"found": None, "runs": [], "why": f"delegated-range bisection "
                                                              f"failed: {_first_line(err)}"}
    return out

