"""`guard --search-inputs N`: look for the input that breaks a backend.

Synthetic standard-normal inputs miss the activations that overflow float16 or saturate an INT8
range. For one candidate backend, in one child process that loads both it and the reference,
this searches the float inputs' box (each input between the low and high its samples show, or
what --input-range declares) for the input that maximises the divergence

    D(x) = max over outputs o of ||c_o(x) - r_o(x)||_2 / max(||r_o(x)||_2, tiny)

(+inf where the candidate has NaN/Inf and the reference is finite; with --metric, the metric's
drop m(r, r, x) - m(r, c, x) instead), with N runs of both backends:
  1. every sample the guard ran (so the search starts no worse than the samples),
  2. random restarts: uniform draws in the box (seeded: --seed), a tenth of the budget,
  3. a (1+1) evolution strategy from the best point: every float input moved by a Gaussian step
     of sigma times its range, clipped to the box; a better point is kept and sigma grows x1.5,
     a worse one shrinks it x0.8 (Rechenberg's 1/5 rule, roughly), until the budget is spent or
     D is +inf (the backend is broken there; nothing is worse).
Integer and bool inputs (ids, masks) are not searched: they keep the starting sample's values.
The parent writes the worst input as an .npz (loadable again with --data) and judges, and probes,
the backend on it.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ._job import Job

TINY = 1e-30


def divergence(ref: Mapping[str, Any], cand: Mapping[str, Any]) -> float:
    """D for one input (module docstring); outputs that are not numeric arrays are skipped."""
    worst = 0.0
    for name, r in ref.items():
        if not isinstance(r, np.ndarray) or r.dtype.kind not in "biuf":
            continue
        c = cand.get(name)
        if not isinstance(c, np.ndarray) or c.shape != r.shape:
            return math.inf
        r64, c64 = r.astype(np.float64), c.astype(np.float64)
        fin = np.isfinite(r64)
        if np.any(~np.isfinite(c64) & fin):
            return math.inf
        diff = float(np.linalg.norm((c64 - r64)[fin]))
        worst = max(worst, diff / max(float(np.linalg.norm(r64[fin])), TINY))
    return worst


def _box(job: Job) -> Dict[str, Tuple[float, float]]:
    """Per float input, (low, high): declared (--input-range) or the samples' own range."""
    declared = dict(job.search.get("ranges", {}))
    box: Dict[str, Tuple[float, float]] = {}
    for name, value in job.samples[0].items():
        if not isinstance(value, np.ndarray) or value.dtype.kind != "f":
            continue
        if name in declared:
            box[name] = tuple(declared[name])  # type: ignore[assignment]
            continue
        lo = min(float(np.nanmin(s[name])) for s in job.samples if s[name].size)
        hi = max(float(np.nanmax(s[name])) for s in job.samples if s[name].size)
        if hi <= lo:
            hi = lo + 1.0
        box[name] = (lo, hi)
    return box


def search_job(job: Job) -> Dict[str, Any]:
    """In the child: the search for `job.backend` against `job.reference` (module docstring)."""
    import os

    from .backends.registry import BACKENDS

    budget = int(job.search["evaluations"])
    rng = np.random.default_rng(job.seed + 7919)
    ref_work = os.path.join(job.work, "reference")
    os.makedirs(ref_work, exist_ok=True)
    reference = BACKENDS[job.reference].load(job.search.get("ref_model") or job.model, ref_work,
                                             job.seed)
    candidate = BACKENDS[job.backend].load(job.model, job.work, job.seed)
    metric = job.search.get("metric")
    score_fn = divergence
    if metric:
        from . import _task

        fn = _task.load(metric)

        def score_fn(r: Mapping[str, Any], c: Mapping[str, Any], s: Any = None) -> float:
            try:
                d = float(fn(r, r, s or {})) - float(fn(r, c, s or {}))
            except Exception:  # noqa: BLE001 - a metric failing on a searched point scores it worst
                return math.inf
            return d if not math.isnan(d) else math.inf

    box = _box(job)
    evaluated = 0
    best: Optional[Tuple[float, Dict[str, np.ndarray], Any, Any]] = None
    start_score = -math.inf
    trace: List[float] = []

    def evaluate(feeds: Dict[str, np.ndarray]) -> float:
        nonlocal evaluated, best
        evaluated += 1
        r = reference.run(feeds)
        c = candidate.run(feeds)
        d = score_fn(r, c, feeds) if metric else score_fn(r, c)
        trace.append(d)
        if best is None or d > best[0]:
            best = (d, {k: np.array(v, copy=True) for k, v in feeds.items()}, r, c)
        return d

    for s in job.samples:
        if evaluated >= budget:
            break
        start_score = max(start_score, evaluate(dict(s)))
    base = job.samples[0]

    def draw() -> Dict[str, np.ndarray]:
        feeds = dict(base)
        for name, (lo, hi) in box.items():
            feeds[name] = rng.uniform(lo, hi, size=base[name].shape).astype(base[name].dtype)
        return feeds

    restarts = max(1, budget // 10)
    for _ in range(restarts):
        if evaluated >= budget or (best is not None and math.isinf(best[0])):
            break
        evaluate(draw())
    sigma = 0.2
    while evaluated < budget and best is not None and not math.isinf(best[0]) and box:
        point = dict(best[1])
        for name, (lo, hi) in box.items():
            step = rng.normal(0.0, sigma * (hi - lo), size=point[name].shape)
            point[name] = np.clip(point[name] + step, lo, hi).astype(base[name].dtype)
        before = best[0]
        if evaluate(point) > before:
            sigma = min(sigma * 1.5, 1.0)
        else:
            sigma = max(sigma * 0.8, 1e-4)
    assert best is not None
    return {"score": best[0], "start_score": start_score, "evaluations": evaluated,
            "feeds": best[1], "ref_outputs": best[2], "outputs": best[3],
            "box": {k: list(v) for k, v in box.items()}, "trace": trace,
            "error": None}
