"""`guard --sensitivity N`: each node's own effect on a failing backend's error, ranked.

For a backend that can keep nodes in float32 (an INT8 or float16 variant), one variant per node
with only that node kept in float32, each built and run in its own child process (two at a time:
a variant that crashes takes only its child down), and the error of every variant measured as

    E(variant) = mean over samples s of D(ref_s, variant_s)      (_search.divergence: the worst
                                                                 output's relative L2 error)
    share(n)   = (E(none kept) - E(n kept)) / E(none kept)        (1 where only n makes it finite)

so a share is the part of the error that node makes by itself (NVIDIA ModelOpt and AIMET rank
quantization targets the same way, one at a time). At most N nodes are built: the probe's origin
first, then the keepable nodes in model order; the rest are counted as not ranked. The fallback
search then grows its float32 set in ranking order instead of one probe at a time.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional

import numpy as np

from .backends import registry as B
from ._fallback import check_backends
from ._search import divergence

PARALLEL = 2


def _error(refs: List[Dict[str, Any]], outs: List[Dict[str, Any]]) -> float:
    ds = [divergence(r, o) for r, o in zip(refs, outs)]
    return math.inf if any(math.isinf(d) for d in ds) else float(np.mean(ds)) if ds else 0.0


def rank(inv: Any, row: Any, cap: int) -> Dict[str, Any]:
    """The ranking for `row` (a failing backend that can keep nodes in float32)."""
    c = inv.ctx
    b = B.BACKENDS[row.name]
    order, _ = inv.keepable(b)
    op_of = dict(order)
    first = row.probe.origin.node if row.probe is not None and row.probe.origin else None
    nodes = ([first] if first in op_of else []) + [n for n, _ in order if n != first]
    chosen, cut = nodes[:cap], max(len(nodes) - cap, 0)
    search, _ = check_backends(row.name, c.family, inv.run_backends or [row.name])

    def run(keep: Optional[str]) -> Dict[str, Any]:
        extra = {"keep_float32": [keep]} if keep else {}
        return c.runner(search, c.model, c.samples, 0, c.seed, c.timeout, c.state,
                        calibration=c.samples, **extra)

    base = run(None)
    if base.get("error"):
        return {"error": f"the variant itself failed: {base['error'].splitlines()[0]}",
                "on": search, "ranked": []}
    e0 = _error(c.ref_outputs, [inv._as_ref(o) for o in base["outputs"]])
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        results = list(pool.map(run, chosen))
    rows = []
    for node, res in zip(chosen, results):
        if res.get("error"):
            rows.append({"node": node, "op": op_of.get(node, "?"), "error": None, "share": None,
                         "failed": res["error"].splitlines()[0]})
            continue
        e = _error(c.ref_outputs, [inv._as_ref(o) for o in res["outputs"]])
        if math.isinf(e0):
            share = 1.0 if math.isfinite(e) else 0.0
        else:
            share = (e0 - e) / e0 if e0 > 0 else 0.0
        rows.append({"node": node, "op": op_of.get(node, "?"),
                     "error": e if math.isfinite(e) else None, "share": share, "failed": None})
    rows.sort(key=lambda r: (r["share"] is None, -(r["share"] or 0.0)))
    return {"measure": "mean over samples of the worst output's relative L2 error",
            "on": search, "baseline": e0 if math.isfinite(e0) else None,
            "nodes": rows, "ranked": [(r["node"], r["share"]) for r in rows],
            "builds": 1 + len(chosen), "cut": cut, "error": None}

