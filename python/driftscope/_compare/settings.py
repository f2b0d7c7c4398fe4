"""compare()'s keyword arguments as the engine's CompareSettings: shared by the local engine
(api.compare) and the Ray one (ray.py, in every worker), which imports nothing else of api.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, Union

from .. import _core


def settings(o: Mapping[str, Any]) -> Any:
    """The engine's CompareSettings from every keyword argument of compare() (api.options fills
    the ones not given; unchecked: the engine's one validator checks them when it runs)."""
    s = _core.CompareSettings()
    for attr in ("atol", "rtol", "min_cosine", "min_sqnr", "max_ulp", "max_rel_l2",
                 "max_mismatch_fraction", "pairs", "threads", "top_k", "r64_floor",
                 "amplification_threshold", "max_amplifiers"):
        setattr(s, attr, o[attr])
    for attr in ("reshape", "nan_equal", "stop_at_first", "allow_unpaired", "allow_incomparable",
                 "details"):
        setattr(s, attr, bool(o[attr]))
    s.min_argmax, s.min_topk = o["min_argmax_agreement"], o["min_topk_overlap"]
    s.policy_text, s.policy = _policy(o["policy"])
    s.map_a, s.map_b, s.classes = list(o["map_a"]), list(o["map_b"]), list(o["classes"])
    s.exact = [(str(a), str(b)) for a, b in (o["names"] or {}).items()]
    s.map_file = os.fspath(o["mapping"]) if o["mapping"] is not None else ""
    s.filter = o["filter"] or ""
    s.reference64 = os.fspath(o["reference64"]) if o["reference64"] is not None else ""
    k = o["r64_k"]
    s.r64_k = [f"{n}={v!r}" for n, v in k.items()] if isinstance(k, Mapping) else list(k)
    return s


def _policy(policy: Union[None, str, "os.PathLike[str]", Mapping[str, Any]]):
    """(text, path) for the engine: a mapping becomes JSON text, anything else is a file."""
    if policy is None:
        return "", ""
    if isinstance(policy, Mapping):
        return json.dumps(policy), ""
    return "", os.fspath(policy)
