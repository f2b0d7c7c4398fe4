"""Range-seeded FP32 fallback search (docs/howto/guard.md, "Fallback"; issue 32 item 3).

Before growing node by node, the search reads the float32 reference's ranges and starts from
every node whose weights, inputs or outputs the target type cannot hold. It is AutoCast's
data_max / init_max idea, but with the bounds of what really happens rather than a fixed cut-off:

* a weight (an initializer, a Constant node's tensor, or anything computed from them alone)
  whose magnitude exceeds what the conversion keeps: onnxconverter-common clips every float16
  weight into 1e4 in magnitude, so a BatchNorm variance of 1e8 becomes 1e4 (sqrt: 100x off);
  its consumers are seeded (their Constant producers are kept with them by the backend);
* a value the reference recorded (a node's output, or a graph input of the probed sample) whose
  magnitude exceeds the type's largest finite value (float16: 65504): stored in float16 it is
  Inf. Its producer and every consumer are seeded, because the value stays float32 only if
  both ends are kept;
* a value whose every nonzero element lies below the type's smallest subnormal (float16: 2^-24):
  stored in float16 it is all zeros.

Not seeded on: weights below the converter's lower clip (1e-7; the OCR detector has 3998 of
them): each moves a product by less than 1e-7 times its activation, far below float16's own
rounding of the sum, and seeding on them would keep most of a network; a value that fits the
range but loses precision in float16 (relative 2^-11): that is a precision question the
grow step answers by measuring. bfloat16 has float32's exponent range: a value or weight outside
it is already Inf in float32, so range seeding almost never names a node for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from ._job import Job


@dataclass(frozen=True)
class TargetRange:
    dtype: str
    value_max: float    # the largest finite value of the type
    weight_max: float   # the largest weight the conversion leaves unchanged beyond rounding
    value_min: float    # the smallest nonzero magnitude the type holds (its smallest subnormal)


FLOAT16 = TargetRange("float16", 65504.0, 65504.0, 2.0 ** -24)
BFLOAT16 = TargetRange("bfloat16", 3.3895313892515355e38, 3.3895313892515355e38, 2.0 ** -133)


@dataclass
class RangeSeed:
    nodes: List[str] = field(default_factory=list)      # topological order
    reasons: Dict[str, str] = field(default_factory=dict)
    note: str = ""   # one clause for the report: what the ranges suggest

    def describe(self, limit: int = 4) -> str:
        from .._text import printable as shown

        listed = "; ".join(f"{shown(n)}: {self.reasons[n]}" for n in self.nodes[:limit])
        more = f"; and {len(self.nodes) - limit} more" if len(self.nodes) > limit else ""
        return listed + more


def _g(x: float) -> str:
    return f"{x:.3g}"


def _abs_max(a: np.ndarray) -> Optional[float]:
    if a.size == 0 or a.dtype.kind != "f":
        return None
    m = np.abs(a[np.isfinite(a)]) if not np.isfinite(a).all() else np.abs(a)
    return float(m.max()) if m.size else None


def _value_flags(m: Optional[float], target: TargetRange) -> Optional[str]:
    if m is None or not math.isfinite(m):
        return None
    if m > target.value_max:
        return f"max |value| {_g(m)} > {target.dtype} max {target.value_max:g}"
    if 0 < m < target.value_min:
        return (f"every nonzero |value| <= {_g(m)} < {target.dtype}'s smallest subnormal "
                f"{_g(target.value_min)} (all zeros)")
    return None


def range_seed(model: Any, target: TargetRange, candidates: Sequence[str],
               ref_dump: Optional[str] = None,
               feeds: Optional[Mapping[str, np.ndarray]] = None) -> RangeSeed:
    """The nodes of `candidates` (the nodes the search may keep) that the reference's ranges
    say the target type cannot run: see the module's docstring. `model`: path or ModelProto
    (weights read whole); `ref_dump`: the reference's recording of the probed sample (None: the
    probe bisected, and only weights and graph inputs are read); `feeds`: that sample."""
    import onnx
    from onnx import numpy_helper

    from ..recorders.api import (onnx_static_values as _static_values,
                                 onnx_topological_nodes as _topological_nodes)

    proto = model if isinstance(model, onnx.ModelProto) else onnx.load(str(model))
    graph = proto.graph
    nodes = _topological_nodes(graph)
    static = _static_values(graph, nodes) | {t.name for t in graph.initializer}
    wanted = set(candidates)
    producer = {o: n for n in nodes for o in n.output if o}
    consumers: Dict[str, List[Any]] = {}
    for n in nodes:
        for x in n.input:
            if x:
                consumers.setdefault(x, []).append(n)
    inits = {t.name: t for t in graph.initializer}
    FLOAT = onnx.TensorProto.FLOAT

    def tensor_max(t: Any) -> Optional[float]:
        if t.data_type != FLOAT:
            return None
        return _abs_max(numpy_helper.to_array(t))

    weight_max: Dict[str, Optional[float]] = {}

    def upstream_max(x: str) -> Optional[float]:
        """The largest float32 weight magnitude a static value is computed from."""
        if x in weight_max:
            return weight_max[x]
        weight_max[x] = None  # a cycle guard; graphs are acyclic
        found: List[float] = []
        if x in inits:
            m = tensor_max(inits[x])
            if m is not None:
                found.append(m)
        p = producer.get(x)
        if p is not None:
            for a in p.attribute:
                held = ([a.t] if a.type == onnx.AttributeProto.TENSOR else []) + list(a.tensors)
                found += [m for m in map(tensor_max, held) if m is not None]
            found += [m for m in map(upstream_max, [i for i in p.input if i in static])
                      if m is not None]
        weight_max[x] = max(found) if found else None
        return weight_max[x]

    reasons: Dict[str, str] = {}

    def flag(node: Any, why: str) -> None:
        if node.name in wanted and node.name not in reasons:
            reasons[node.name] = why

    for n in nodes:
        if n.name not in wanted:
            continue
        for x in n.input:
            if x in static:
                m = upstream_max(x)
                if m is not None and m > target.weight_max:
                    flag(n, f"weight {x} max |w| {_g(m)} > {target.weight_max:g} (the "
                            f"conversion clips it)")
    values: Dict[str, float] = {}
    if feeds:
        for name, a in feeds.items():
            m = _abs_max(np.asarray(a)) if isinstance(a, np.ndarray) else None
            if m is not None:
                values[name] = m
    recorded_here = None
    if not ref_dump and feeds:
        # The probe bisected (or did not run), so nobody recorded the reference: record its
        # float32 run of the probed sample here, for the values' ranges are the seed's main
        # evidence (a LayerNorm's x^2 overflowing float16 is no weight and no input).
        recorded_here = _record_reference(proto, feeds)
        ref_dump = recorded_here.name if recorded_here is not None else None
    if ref_dump:
        import driftscope

        with driftscope.open(ref_dump) as d:
            for r in d:
                out = r.attrs.get("onnx_output")
                if r.role != "output" or not out or not r.dtype.startswith(("f", "bf")):
                    continue
                try:
                    s = r.stats()
                except driftscope.Error:  # a damaged record: its range is unknown
                    continue
                lo, hi = s.get("min"), s.get("max")
                if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
                    continue
                values[out] = max(values.get(out, 0.0), abs(lo), abs(hi))
    for v, m in values.items():
        why = _value_flags(m, target)
        if why is None or v in static:
            continue
        if v in producer:
            flag(producer[v], f"output {v}: {why}")
        for c in consumers.get(v, []):
            flag(c, f"input {v}: {why}")
    if recorded_here is not None:
        recorded_here.cleanup()
    seed = RangeSeed([n.name for n in nodes if n.name in reasons], reasons)
    read = "weights and the probed sample's inputs" + (
        " and recorded values" if ref_dump else " (no recording of the reference: values not read)")
    bounds = (f"weights above {target.weight_max:g}, values above {target.value_max:g} or "
              f"wholly below {_g(target.value_min)} in magnitude")
    if seed.nodes:
        seed.note = (f"the reference's ranges ({read}) name {len(seed.nodes)} node(s) with "
                     f"{bounds} for {target.dtype}: {seed.describe()}")
    else:
        seed.note = (f"the reference's ranges ({read}) name no node: nothing has {bounds} for "
                     f"{target.dtype}, so the failure is precision within the range, not range")
    return seed


class _Recorded:
    """A recording of the reference made for the seed, removed with its folder once read."""

    def __init__(self, folder: Any) -> None:
        import os

        self.folder = folder
        self.name = os.path.join(folder.name, "reference.tdump")

    def cleanup(self) -> None:
        self.folder.cleanup()


def _record_reference(proto: Any, feeds: Mapping[str, np.ndarray]) -> Optional[_Recorded]:
    """The float32 model recorded by ONNX Runtime on `feeds` (every node output of the main
    graph), or None where it cannot be (a model too large to pass in memory, a feed it refuses):
    the seed then reads weights and inputs only, as the note says."""
    import tempfile

    from ..recorders.api import onnx_record as record

    rec = _Recorded(tempfile.TemporaryDirectory(prefix="driftscope-ranges-"))
    try:
        record(proto, dict(feeds), rec.name, check_observer=False)
    except Exception:  # noqa: BLE001 - the seed is a shortcut, not the search
        rec.cleanup()
        return None
    return rec


def range_seed_of(job: Job, backend: Any, order: Sequence[str]) -> RangeSeed:
    """The seed of a fallback search job (_fallback.search_job): empty where the backend
    declares no target range (INT8, torch, LiteRT) or the model is not ONNX. A seed that cannot
    be read is said, and the search grows as it would without one."""
    target = getattr(backend, "fallback_range", None)
    if target is None or getattr(backend, "family", None) != "onnx":
        return RangeSeed()
    samples = job.samples or []
    at = job.probe_sample or 0
    feeds = samples[at] if at < len(samples) else None
    # With --reference-model the recording is of another model: its values are not named by
    # this graph's values.
    dump = job.ref_dump if job.names_from != "candidate" else None
    try:
        return range_seed(job.model, target, order, dump, feeds)
    except Exception as err:  # noqa: BLE001 - the seed is a shortcut, not the search
        from ._messages import whole_message

        return RangeSeed(note=f"the reference's ranges could not be read ({whole_message(err)})")


def tried(trail: Sequence[Mapping[str, Any]], seed: RangeSeed) -> str:
    """What a search that found no passing set tried, in a clause."""
    if not trail:
        return "no build ran"
    cosines = [t["cosine"] for t in trail if t.get("cosine") is not None]
    first = trail[0]
    said = [f"{len(trail)} build(s)"]
    if seed.nodes and str(first.get("step", "")).startswith("seed"):
        said.append(f"the first kept the probed node(s) and the {len(seed.nodes)} the ranges "
                    f"name ({len(first['keep'])} node(s)): {first['status']}")
    if len(trail) > 1:
        said.append(f"the last kept {len(trail[-1]['keep'])} node(s): {trail[-1]['status']}")
    if cosines:
        said.append(f"best cosine {max(cosines):.6g}")
    return ", ".join(said)
