"""Where a failing backend breaks: the probe (docs/howto/guard.md, "Probe").

Two methods, and the report says which one found the answer:

* recorded: the reference and the candidate backend each run once more with every intermediate
  tensor recorded through driftscope's own recorders (driftscope.onnxruntime / driftscope.torch,
  named by the source model's node / module names, also for a converted float16 or INT8 variant),
  and driftscope.compare (the C++ engine, the one implementation of the metrics) names the first
  divergence, the first NaN/Inf and the first silent zero, each introduced or inherited.
  Recording must not change what it observes: the candidate's final outputs with and without
  recording are compared bit for bit first.
* bisect (ONNX): where the candidate cannot expose intermediates, or exposing them changes its
  outputs (observer effect), the graph is cut after node k of the topological order: a prefix
  model whose outputs are every value computed up to k that a later node or the model output
  reads. Both backends run the prefix; a binary search finds the first k whose cut fails the
  guard's verdict, in about log2(nodes) prefix runs.
* bisect (PyTorch): there is no graph to cut, so the cut is a precision boundary: the candidate
  runs with the leaf modules after position k (execution order) kept in float32, and a binary
  search finds the first k whose run fails the verdict on the model's outputs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .._text import printable
from ._job import Job
from ._metrics import PASS, SEVERITY, Thresholds, judge

RECORDED, BISECT = "recorded", "bisect"
# How torch_bisect_job says that no leaf module is where the failure is.
_OUTSIDE_LEAVES = "still fails with every leaf module in float32"


def shown(text: str) -> str:
    """A name from the model, for people: driftscope's one escaping rule (_text.printable, the
    twin of driftscope::printable), as every driftscope report shows text from a file."""
    return printable(text)


@dataclass
class ProbeFinding:
    """One tensor the probe names. `node` is the source model's node name (ONNX) or module path
    (PyTorch); `tensor` the recorded tensor's name; origin "introduced" or "inherited"."""

    node: str
    op_type: str
    tensor: str
    origin: Optional[str] = None
    detail: str = ""
    index: Optional[int] = None
    # The error arose in this module's own forward, between its children (its child's recorded
    # input already had it): a bisection over leaf modules cannot name it.
    own_forward: bool = field(default=False, compare=False)

    def to_json(self) -> Dict[str, Any]:
        return {"node": self.node, "op_type": self.op_type, "tensor": self.tensor,
                "origin": self.origin, "detail": self.detail, "index": self.index}

    def describe(self) -> str:
        where = f"{shown(self.node)} ({shown(self.op_type)})"
        if self.tensor and self.tensor != self.node:
            where += f", tensor {shown(self.tensor)}"
        origin = f", {self.origin} there" if self.origin else ""
        return f"{where}{origin}: {self.detail}" if self.detail else where + origin


@dataclass
class ProbeResult:
    method: Optional[str]               # "recorded", "bisect" or None (could not probe)
    why: str                            # why this method
    sample: int = 0
    first_divergence: Optional[ProbeFinding] = None
    first_nonfinite: Optional[ProbeFinding] = None
    first_silent_zero: Optional[ProbeFinding] = None
    origin: Optional[ProbeFinding] = None   # where the fallback starts
    runs: int = 0                       # prefix runs (bisect) or recorded runs
    summary: str = ""                   # compare's one line (recorded)
    notes: List[str] = field(default_factory=list)
    error: Optional[str] = None
    files: Dict[str, str] = field(default_factory=dict)
    agrees: Optional[bool] = None       # both methods ran (--probe-method both): same origin?
    other: Optional["ProbeResult"] = None
    step: Optional[int] = None          # a stateful model: the step (1-based) the findings are in
    # What a bisection cut: an ONNX graph (prefix runs) or a PyTorch model's precision.
    cut: str = "over the topological order ({runs} prefix runs)"
    # Replay at the origin (_replaying.ReplayResult; guard --replay auto), None when not run.
    replay: Optional[Any] = None

    def to_json(self) -> Dict[str, Any]:
        def f(x: Optional[ProbeFinding]) -> Optional[Dict[str, Any]]:
            return x.to_json() if x else None

        out = {"method": self.method, "why": self.why, "sample": self.sample,
               "first_divergence": f(self.first_divergence),
               "first_nonfinite": f(self.first_nonfinite),
               "first_silent_zero": f(self.first_silent_zero), "origin": f(self.origin),
               "runs": self.runs, "compare_summary": self.summary or None,
               "notes": list(self.notes), "error": self.error, "files": dict(self.files),
               "agrees": self.agreement, "step": self.step}
        if self.other is not None:
            out["cross_check"] = self.other.to_json()
        if self.replay is not None:
            out["replay"] = self.replay.to_json()
        return out

    def sentences(self, backend: str) -> List[str]:
        if self.method is None:
            return [f"{backend} was not probed: {self.error or self.why}."]
        how = ("recorded intermediates compared by driftscope compare" if self.method == RECORDED
               else "bisection " + self.cut.format(runs=self.runs))
        out = []
        if self.origin is None:
            out.append(f"{backend} probe ({how}; {self.why}): no single tensor fails"
                       + (f"; {self.error}" if self.error else "") + ".")
        else:
            at = f" at step {self.step}" if self.step is not None else ""
            out.append(f"{backend} probe ({how}; {self.why}) names {self.origin.describe()}"
                       f"{at}.")
            for label, x in (("first divergence", self.first_divergence),
                             ("first NaN/Inf", self.first_nonfinite),
                             ("first silent zero", self.first_silent_zero)):
                if x is not None and x is not self.origin and x.node != self.origin.node:
                    out.append(f"{backend} {label}: {x.describe()}.")
        out.extend(f"{backend} probe: {n}" for n in self.notes)
        if self.replay is not None:
            out.append(self.replay.sentence(backend))
        if self.other is not None:
            out.append(self.cross_check_sentence(backend))
        return out

    @property
    def agreement(self) -> Optional[bool]:
        """--probe-method both: do the two methods say the same? The same node; or, where the
        recording names a parent's own forward (between its children), a PyTorch bisection that
        fails with every leaf module in float32 (the failure lies outside the leaves)."""
        if self.agrees is not None or self.other is None or self.origin is None:
            return self.agrees
        if self.other.origin is None and self.other.method == BISECT and self.other.error:
            if _OUTSIDE_LEAVES in self.other.error:
                return self.origin.own_forward
        return None

    def cross_check_sentence(self, backend: str) -> str:
        o = self.other
        assert o is not None
        if o.method is None:
            return f"{backend} cross-check: not run: {o.error or o.why}."
        if o.origin is None:
            said = f"names no single module ({o.error})" if o.error else "names no node"
            agree = self.agreement
            verdict = ("" if agree is None else
                       "agrees (the failure is not in a leaf module): " if agree else
                       "DISAGREES: ")
            return f"{backend} cross-check by {o.method}: {verdict}{said}, {o.runs} runs."
        same = "agrees" if self.agreement else "DISAGREES"
        return (f"{backend} cross-check by {o.method}: {same} ({shown(o.origin.node)}, "
                f"{o.runs} runs).")


# -- ONNX graph helpers ------------------------------------------------------------------------

def onnx_nodes(model: str) -> List[Tuple[str, str]]:
    """(name, op type) of the model's nodes that compute from the inputs, topological order."""
    from ..recorders.api import (onnx_load_model as _load_model,
                                 onnx_static_values as _static_values,
                                 onnx_topological_nodes as _topological_nodes)

    proto, _, _ = _load_model(model)
    nodes = _topological_nodes(proto.graph)
    static = _static_values(proto.graph, nodes)
    return [(n.name, n.op_type) for n in nodes
            if n.name and any(o and o not in static for o in n.output)]


def onnx_weights_and_producers(model: str) -> Tuple[set, Dict[str, List[str]]]:
    """Names of the nodes that read a float32 initializer (the ones weight quantization can
    change), and for every node the names of the nodes that produce its inputs."""
    import onnx

    from ..recorders.api import onnx_load_model as _load_model

    proto, _, _ = _load_model(model)
    floats = {t.name for t in proto.graph.initializer if t.data_type == onnx.TensorProto.FLOAT}
    # Weights held as Constant nodes (Paddle2ONNX writes every weight so, PP-OCR's models have no
    # initializer at all): quantize_dynamic folds and quantizes them like initializers.
    floats |= {n.output[0] for n in proto.graph.node if n.op_type == "Constant" and n.output
               and any(a.name == "value" and a.t.data_type == onnx.TensorProto.FLOAT
                       for a in n.attribute)}
    producer = {o: n.name for n in proto.graph.node for o in n.output if o}
    weighted = {n.name for n in proto.graph.node if n.name and floats.intersection(n.input)}
    inputs = {n.name: [producer[x] for x in n.input if x in producer]
              for n in proto.graph.node if n.name}
    return weighted, inputs


def nearest_upstream(node: str, inputs: Dict[str, List[str]], wanted: set,
                     limit: int = 64) -> List[str]:
    """The nodes of `wanted` closest above `node` (breadth first, not past one found)."""
    found: List[str] = []
    seen = {node}
    frontier = list(inputs.get(node, []))
    while frontier and len(seen) < limit:
        nxt: List[str] = []
        for n in frontier:
            if n in seen:
                continue
            seen.add(n)
            if n in wanted:
                found.append(n)
            else:
                nxt.extend(inputs.get(n, []))
        frontier = nxt
    return found


def prefix_model(proto: Any, k: int, order: List[Any], static: set) -> Tuple[Any, List[str]]:
    """The graph cut after node order[k]: outputs are the values nodes 0..k computed that a
    later node or the graph's output reads; nodes nothing among them needs are dropped, and so
    are graph inputs nothing reads. Returns (model, output names)."""
    import onnx

    done = set()
    for n in order[:k + 1]:
        done.update(o for o in n.output if o)
    later = {x for n in order[k + 1:] for x in n.input}
    outs = [o.name for o in proto.graph.output]
    frontier = [v for v in dict.fromkeys(o for n in order[:k + 1] for o in n.output if o)
                if v not in static and (v in later or v in outs)]
    need = set(frontier)
    keep = []
    for n in reversed(order[:k + 1]):
        if need.intersection(n.output):
            keep.append(n)
            need.update(x for x in n.input if x)
    keep.reverse()
    m = onnx.ModelProto()
    m.CopyFrom(proto)
    del m.graph.node[:]
    m.graph.node.extend(keep)
    inputs = [i for i in proto.graph.input if i.name in need]
    del m.graph.input[:]
    m.graph.input.extend(inputs)
    inits = [t for t in proto.graph.initializer if t.name in need]
    del m.graph.initializer[:]
    m.graph.initializer.extend(inits)
    del m.graph.output[:]
    typed = {vi.name: vi for vi in list(proto.graph.value_info) + list(proto.graph.output)}
    for v in frontier:
        m.graph.output.append(typed[v] if v in typed else onnx.ValueInfoProto(name=v))
    return m, frontier


def bisect_job(job: Job) -> Dict[str, Any]:
    """In a child process: binary search for the first node whose cut fails. Both backends run
    each prefix; the verdict is the guard's own (judge) on the cut's values."""
    with open(job.model, "rb") as f:
        if f.read(8)[4:] == b"TFL3":  # a .tflite flatbuffer, whichever backend runs it
            from ._delegated import add_to

            return add_to(job, tflite_bisect_job(job))
    import onnx

    from ..recorders.api import (onnx_load_model as _load_model,
                                 onnx_static_values as _static_values,
                                 onnx_topological_nodes as _topological_nodes)
    from .backends.registry import BACKENDS
    from .backends.ortqdq import use_row_samples
    from ._stateful import first_steps

    proto, external_dir, _ = _load_model(job.model)
    if external_dir is not None:
        proto = onnx.load(job.model)
    order = _topological_nodes(proto.graph)
    static = _static_values(proto.graph, order)
    cand_idx = [i for i, n in enumerate(order) if any(o and o not in static for o in n.output)]
    ref, cand = BACKENDS[job.reference], BACKENDS[job.backend]
    # One feed dict, or one per step of a stateful model (each with the reference's state).
    steps = job.feeds if isinstance(job.feeds, list) else [job.feeds]
    feeds = steps[0]
    calibration = first_steps(job.calibration or [steps[0]])
    t = Thresholds(**job.thresholds)
    # The argmax of an intermediate value's last axis means nothing (a Reshape, an attention
    # score), nor does a "decision" of a scalar inside the graph (a shape, an epsilon): cuts are
    # judged by NaN/Inf, silent zero, constant, cosine, relative error and norm ratio; the
    # model's own outputs by every criterion.
    inner = Thresholds(t.min_cosine, t.min_norm, 1.0, max_rel_error=t.max_rel_error,
                       max_norm_ratio=t.max_norm_ratio, small_atol=float("inf"),
                       decision_threshold=float("inf"), class_axes={})
    graph_outputs = {o.name for o in proto.graph.output}
    runs: List[Dict[str, Any]] = []

    def fails(pos: int) -> Tuple[bool, str, str]:
        k = cand_idx[pos]
        m, outs = prefix_model(proto, k, order, static)
        d = os.path.join(job.work, f"prefix{k}")
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "prefix.onnx")
        onnx.save(m, path)
        names = {i.name for i in m.graph.input}
        sub = {n: v for n, v in feeds.items() if n in names}
        # A backend that calibrates (ort-qdq) calibrates the prefix on the row's own feeds, as
        # the row's variant was, cut to the inputs the prefix reads.
        use_row_samples([{n: v for n, v in s.items() if n in names} for s in calibration])
        r = ref.load(path, d, job.seed).run(sub)
        c = cand.load(path, d, job.seed).run(sub)
        worst, detail = _worst_at_cut(outs, r, c, t, inner, graph_outputs)
        runs.append({"node": order[k].name or order[k].op_type, "status": worst})
        return worst != PASS, worst, detail

    lo, hi = -1, len(cand_idx) - 1  # cut lo passes (nothing), cut hi is to be seen
    step = 0
    for step, feeds in enumerate(steps):
        bad, status, detail = fails(hi)
        if bad:
            break
    else:
        return {"found": None, "runs": runs,
                "why": "the whole graph cut at its last node passes (the failure is not in "
                       "the values the graph computes, or needs more than one sample"
                       + (", or builds up through the state carried from step to step)"
                          if len(steps) > 1 else ")")}
    hi, status, detail = first_failing(fails, lo, hi, status, detail)
    node = order[cand_idx[hi]]
    return {"found": {"node": node.name, "op_type": node.op_type, "status": status,
                      "detail": detail, "index": hi, "step": step}, "runs": runs}


def _worst_at_cut(outs: Sequence[str], r: Dict[str, np.ndarray], c: Dict[str, np.ndarray],
                  t: Thresholds, inner: Thresholds, graph_outputs: Any) -> Tuple[str, str]:
    """The worst (status, detail) of a cut model's outputs, ONNX and .tflite alike: the model's
    own outputs judged by `t`, values inside it by `inner` (bisect_job says why)."""
    worst, detail = PASS, ""
    for o in outs:
        if o not in r:
            continue
        if o not in c:
            return "RUNTIME_ERROR", f"{o}: the candidate returned no value"
        res = judge(o, r[o], c[o], t if o in graph_outputs else inner, 0)
        if SEVERITY[res.status] > SEVERITY[worst]:
            worst, detail = res.status, f"{o}: {res.detail}"
    return worst, detail


def _inner(t: Thresholds) -> Thresholds:
    """How a value inside the model is judged at a cut (bisect_job says why)."""
    return Thresholds(t.min_cosine, t.min_norm, 1.0, max_rel_error=t.max_rel_error,
                      max_norm_ratio=t.max_norm_ratio, small_atol=float("inf"),
                      decision_threshold=float("inf"), class_axes={})


def tflite_bisect_job(job: Job) -> Dict[str, Any]:
    """In a child process: bisection of a .tflite model (surgery/tflite.py). The model is cut
    after operator k of its order (the order LiteRT runs them): a prefix model whose outputs are
    the values operators 0..k computed that a later one or the model output reads. Both backends
    run the prefix; a binary search finds the first k whose cut fails the verdict. Operators
    surgery refuses (custom, control flow, resource variables) are never cut after; the values
    they hand on (a streaming model's variable reads) are fed to both backends' prefixes from
    one run of the whole model on the reference kernels, so the search runs over the rest."""
    from .backends.registry import BACKENDS
    from .surgery import tflite as cut

    g = cut.load(job.model)
    ref, cand = BACKENDS[job.reference], BACKENDS[job.backend]
    steps = job.feeds if isinstance(job.feeds, list) else [job.feeds]
    t = Thresholds(**job.thresholds)
    inner = _inner(t)
    graph_outputs = {g.name(o) for o in g.outputs}
    model_inputs = [g.name(i) for i in g.inputs]
    cuts: List[int] = []
    pieces: Dict[int, Any] = {}
    refused: List[str] = []
    for k in range(len(g.operators)):
        try:
            pieces[k] = cut.cut_after_refused(g, k)
            cuts.append(k)
        except cut.CutRefused as err:
            if cut.refusal(g, k) is not None:
                refused.append(str(err).replace("cannot cut here: ", "", 1))
    ops = {"ops": len(g.operators), "cuts": len(cuts), "refused": len(refused)}
    if not cuts:
        return {"found": None, "runs": [], **ops,
                "why": "no cut of this model can be made: " + (refused[0] if refused else
                                                                  "no operator")}
    runs: List[Dict[str, Any]] = []

    def named(feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        # A piece has no SignatureDef: samples named by the model's signature go by position.
        if not all(n in feeds for n in model_inputs) and len(feeds) == len(model_inputs):
            return dict(zip(model_inputs, feeds.values()))
        return feeds

    def handed_on(feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """What the refused operators hand on, from one reference-kernel run of the model."""
        if not refused:
            return {}
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        it = Interpreter(model_path=job.model, experimental_preserve_all_tensors=True,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        it.allocate_tensors()
        for d in it.get_input_details():
            it.set_tensor(d["index"], np.asarray(feeds[d["name"]], d["dtype"]))
        it.invoke()
        need = {n for p in pieces.values() for n in p.inputs} - set(model_inputs)
        return {n: it.get_tensor(g.index(n)).copy() for n in need}

    def fails(pos: int, feeds: Dict[str, np.ndarray]) -> Tuple[bool, str, str]:
        k = cuts[pos]
        piece = pieces[k]
        d = os.path.join(job.work, f"prefix{k}")
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "prefix.tflite")
        with open(path, "wb") as f:
            f.write(piece.data)
        sub = {n: feeds[n] for n in piece.inputs}
        r = ref.load(path, d, job.seed).run(sub)
        c = cand.load(path, d, job.seed).run(sub)
        worst, detail = _worst_at_cut(piece.outputs, r, c, t, inner, graph_outputs)
        runs.append({"node": g.op_label(k), "status": worst})
        return worst != PASS, worst, detail

    lo, hi = -1, len(cuts) - 1
    step, feeds = 0, {}
    for step, sample in enumerate(steps):
        feeds = named(sample)
        feeds = {**feeds, **handed_on(feeds)}
        bad, status, detail = fails(hi, feeds)
        if bad:
            break
    else:
        where = ("the whole model cut at its last operator passes" if cuts[-1] ==
                 len(g.operators) - 1 else f"the model cut after op {cuts[-1]}, its last cut, "
                                           "passes")
        return {"found": None, "runs": runs, **ops,
                "why": f"{where} (the failure is not in the values the model computes there, "
                       "or needs more than one sample)"}
    hi, status, detail = first_failing(lambda pos: fails(pos, feeds), lo, hi, status, detail)
    k = cuts[hi]
    outs = [g.name(o) for o in g.operators[k].outputs if o >= 0]
    return {"found": {"node": outs[0] if outs else g.op_label(k), "op_type": g.op_types[k],
                      "status": status, "detail": detail, "index": k, "step": step},
            "runs": runs, **ops}


def first_failing(fails: Callable[[int], Tuple[bool, str, str]], lo: int, hi: int, status: str,
                  detail: str) -> Tuple[int, str, str]:
    """Binary search for the first cut that fails, given that cut `lo` passes and cut `hi`
    fails with (status, detail): the cut and the failure it shows, in log2(hi - lo) runs."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        bad, st, de = fails(mid)
        if bad:
            hi, status, detail = mid, st, de
        else:
            lo = mid
    return hi, status, detail


def torch_leaves(names: Sequence[str]) -> List[str]:
    """The module paths of `names` (execution order) that contain no other of them."""
    return [n for n in names if not any(o.startswith(n + ".") for o in names)]


def torch_bisect_job(job: Job) -> Dict[str, Any]:
    """In a child process: a PyTorch model has no graph to cut, so the cut is a precision
    boundary. The candidate runs in its own dtype with the leaf modules after position k kept in
    float32 (the fallback's mechanism: float32 parameters and arithmetic, the output cast back),
    and a binary search finds the first k whose run fails the guard's verdict on the model's
    outputs: the module whose low-precision arithmetic breaks it, in about log2(modules) runs."""
    from .backends.registry import BACKENDS
    from ._metrics import judge_all
    from ._stateful import StatefulSession

    cand = BACKENDS[job.backend]
    from ._delegate_bisect import can_bisect, partial_bisect_job

    if can_bisect(cand):  # a delegate or compiler: bisected over what it takes
        return partial_bisect_job(job)
    leaves: List[str] = list(job.leaves)
    feeds, ref = job.feeds, job.ref_outputs
    t = Thresholds(**job.thresholds)
    runs: List[Dict[str, Any]] = []

    def fails(pos: int) -> Tuple[bool, str, str]:
        session = cand.load(job.model, job.work, job.seed,
                            keep_float32=leaves[pos + 1:])
        if job.state:
            session = StatefulSession(session, job.state)
        worst = judge_all([ref], [session.run(feeds)], t)
        status = worst.status if worst is not None else PASS
        runs.append({"node": leaves[pos] if pos >= 0 else "", "status": status})
        detail = f"{worst.name}: {worst.detail}" if worst is not None else ""
        return status != PASS, status, detail

    # A module that compiles to nothing in the candidate (an eval-mode Dropout or an Identity
    # exported to no ONNX node) has no arithmetic to keep: no cut is placed after it.
    without = getattr(cand, "modules_without_nodes", None)
    skipped: List[str] = []
    if without is not None:
        empty = set(without(job.model, job.work, job.seed, leaves))
        skipped = [n for n in leaves if n in empty]
        leaves = [n for n in leaves if n not in empty]
    lo, hi = -1, len(leaves) - 1  # cut lo passes (every leaf in float32), cut hi is to be seen
    if not leaves:
        return {"found": None, "runs": runs, "skipped": skipped,
                "why": "no leaf module has arithmetic of its own in the candidate"}
    bad, status, detail = fails(hi)
    if not bad:
        return {"found": None, "runs": runs, "skipped": skipped,
                "why": "the candidate passes on this sample when it is run again"}
    if fails(lo)[0]:
        return {"found": None, "runs": runs, "skipped": skipped,
                "why": "it still fails with every leaf module in float32: the failure is in "
                       "operations outside the modules (a parent's own forward) or in the "
                       "low-precision values passed between them"}
    hi, status, detail = first_failing(fails, lo, hi, status, detail)
    ops = dict(job.ops or {})
    return {"found": {"node": leaves[hi], "op_type": ops.get(leaves[hi], ""), "status": status,
                      "detail": detail, "index": hi}, "runs": runs, "skipped": skipped}


# -- findings from a compare report -------------------------------------------------------------

def _detail(t: Any) -> str:
    """compare's first reason (its message has the numbers)."""
    reasons = t.get("reasons") or []
    if reasons:
        return str(reasons[0].get("message") or reasons[0].get("code"))
    cos = t.get("cosine")
    return f"cosine {cos:.6f}" if cos is not None else ""


def findings_from_report(report: Any, ref_dump: str) -> Dict[str, Optional[ProbeFinding]]:
    """first_divergence / first_nonfinite / first_silent_zero, named by the source model: an
    ONNX record carries the node that computed it (attribute onnx_node), a PyTorch record is
    named by its module path."""
    import driftscope

    dump = driftscope.open(ref_dump)
    out: Dict[str, Optional[ProbeFinding]] = {}
    try:
        for key in ("first_divergence", "first_nonfinite", "first_silent_zero"):
            t = getattr(report, key)
            if t is None:
                out[key] = None
                continue
            try:
                rec = dump.record(t["name"], t["occurrence"], t["role"], t["role_index"])
                node = rec.attrs.get("onnx_node") or t["name"]
            except driftscope.Error:
                node = t["name"]
            out[key] = ProbeFinding(node=node, op_type=t.get("op_type", ""), tensor=t["name"],
                                    origin=t.get("origin"), detail=_detail(t),
                                    index=t.get("index_ref"))
            out[key] = _own_forward(report, key, t, dump) or out[key]
    finally:
        dump.close()
    return out


# The probe's PyTorch recordings hold every module's inputs too (role input, for _own_forward);
# origins are localised on the rest, the data flow followed through the inputs left out.
_NOT_INPUTS = "role=output,parameter,other"
# A module's input that has an error at least 1/_INHERITED of its output's passed it on
# (compare's amplification threshold: docs/compare.md §5).
_INHERITED = 10.0
_ROOT = "<root>"


def _own_forward(report: Any, key: str, t: Any, names: Any) -> Optional[ProbeFinding]:
    """A module output compare calls "introduced" whose module's recorded input already had
    the error (new NaN/Inf there; or, for a divergence, an error on its first input at least
    1/_INHERITED of the output's) was not introduced by that module: the error arose in its
    caller's own forward, between its children (an attention module's QK^T before its output
    projection). The finding names that parent; None when the inputs do not show it (or were
    not recorded)."""
    import driftscope

    if t.get("role") != "output" or t.get("origin") != "introduced":
        return None
    name, cand_name = t["name"], t.get("candidate_name") or t["name"]
    try:
        ref = driftscope.open(report.data["reference"]["path"])
    except (driftscope.Error, KeyError, TypeError):
        return None
    try:
        cand = driftscope.open(report.data["candidate"]["path"])
    except (driftscope.Error, KeyError, TypeError):
        ref.close()
        return None
    try:
        why, index = None, None
        for i in range(64 if key == "first_nonfinite" else 1):
            try:
                r = ref.record(name, t["occurrence"], "input", i)
                c = cand.record(cand_name, t["occurrence"], "input", i)
            except driftscope.Error:
                break
            if r.dtype not in ("f64", "f32", "f16", "bf16") or r.shape != c.shape:
                continue
            rv = r.numpy().astype(np.float64)
            cv = c.numpy().astype(np.float64)
            new = ~np.isfinite(cv) & np.isfinite(rv)
            if new.any():
                why = (f"its input {i} already has {int(np.isnan(cv[new]).sum())} NaN and "
                       f"{int(np.isinf(cv[new]).sum())} Inf where the reference is finite")
            elif key != "first_nonfinite" and np.isfinite(cv).all():
                norm = float(np.linalg.norm(rv))
                e_in = float(np.linalg.norm(cv - rv)) / norm if norm else 0.0
                e = t.get("rel_l2")
                if e_in > 0 and e is not None and e < _INHERITED * e_in:
                    why = (f"its input {i} already has relative error {e_in:.3g} "
                           f"(its output {e:.3g})")
            if why:
                index = r.exec_index
                break
        if why is None:
            return None
        parent = name.rpartition(".")[0] or _ROOT
        op = ""
        try:
            op = names.record(parent, 0, "output", 0).op_type
        except driftscope.Error:
            pass
        where = ("the model's own forward" if parent == _ROOT
                 else f"{shown(parent)}'s own forward")
        return ProbeFinding(node=parent, op_type=op, tensor=name, origin="introduced",
                            detail=f"{_detail(t)}; not introduced by {shown(name)}: {why}, "
                                   f"so it arose in {where}, between its child modules",
                            index=index, own_forward=True)
    finally:
        ref.close()
        cand.close()


def pick_origin(status: str, found: Dict[str, Optional[ProbeFinding]]) -> Optional[ProbeFinding]:
    """Where the backend's failure starts: the first NaN/Inf for NUMERICAL_INSTABILITY, the
    first silent zero for SILENT_ZERO_VECTOR / CONSTANT_OUTPUT, else the first divergence."""
    order = {"NUMERICAL_INSTABILITY": ("first_nonfinite", "first_divergence"),
             "SILENT_ZERO_VECTOR": ("first_silent_zero", "first_divergence"),
             "CONSTANT_OUTPUT": ("first_silent_zero", "first_divergence")}.get(
                 status, ("first_divergence", "first_nonfinite", "first_silent_zero"))
    for key in order:
        if found.get(key) is not None:
            return found[key]
    return None


def compare_dumps(ref: str, cand: str, thresholds: Thresholds, policy: Optional[str]) -> Any:
    """The probe's comparison: driftscope.compare with the --policy file, else with the
    guard's --min-cosine as the criterion (the health checks always apply)."""
    import driftscope

    if policy:
        return driftscope.compare(ref, cand, policy=policy, allow_unpaired=True,
                                  allow_incomparable=True, filter=_NOT_INPUTS)
    return driftscope.compare(ref, cand, min_cosine=thresholds.min_cosine, allow_unpaired=True,
                              allow_incomparable=True, filter=_NOT_INPUTS)


def torch_modules(ref_dump: str) -> List[Tuple[str, str]]:
    """(module path, class) in execution order, from a PyTorch reference recording (the root
    and repeated calls left out)."""
    import driftscope

    seen: Dict[str, str] = {}
    with driftscope.open(ref_dump) as d:
        for r in d:
            if r.role == "output" and r.name != "<root>" and r.name not in seen:
                seen[r.name] = r.op_type
    return list(seen.items())


def bisect_finding(found: Dict[str, Any]) -> ProbeFinding:
    return ProbeFinding(node=found["node"], op_type=found["op_type"], tensor="",
                        origin="introduced", detail=f"{found['status']}: {found['detail']}",
                        index=found.get("index"))


def bisect_result(out: Dict[str, Any], why: str, sample: int, **kw: Any) -> ProbeResult:
    """A bisection job's answer as a probe result: the node found is the origin and the first
    finding of its kind; no node found (or the job failed) is a result without an origin."""
    if out.get("error"):
        return ProbeResult(None, why, sample, error=f"bisection failed: {out['error']}")
    runs = len(out.get("runs", []))
    if out.get("found") is None:
        return ProbeResult(BISECT, why, sample, runs=runs, error=out.get("why"))
    f = bisect_finding(out["found"])
    res = ProbeResult(BISECT, why, sample, runs=runs, **kw)
    setattr(res, status_key(out["found"]["status"]), f)
    if res.first_divergence is None:
        res.first_divergence = f
    res.origin = f
    return res


def with_delegated(prefix: ProbeResult, out: Dict[str, Any], backend: str, reference: str,
                   why: str, sample: int) -> ProbeResult:
    """A .tflite bisection's answer with the delegated-range search (_delegated.py) in it: a
    cross-check of the prefix bisection's origin (agrees or not), or the answer itself where
    the prefix bisection named no operator; the report's sentence and JSON say which method
    found it."""
    from ._delegated import METHOD

    d = out.get("delegated")
    if not d:
        return prefix
    if d.get("unavailable"):
        res = ProbeResult(None, why, sample, error=d["unavailable"])
    else:
        res = bisect_result(d, why, sample,
                            cut=f"with one range of operators delegated to {backend} and the "
                                f"rest on {reference} ({{runs}} chained runs)")
        res.method = METHOD if res.method is not None else None
        if res.origin is not None:
            res.notes.append(f"{len(d['runs'])} chained runs for {d['ops']} operators "
                             f"(ceil(log2 {d['ops']}) + 2 = "
                             f"{int(np.ceil(np.log2(max(d['ops'], 1)))) + 2})")
        elif d.get("range"):
            res.error = d.get("why")
    if prefix.origin is None and res.origin is not None:
        res.why = why
        res.notes.append("prefix bisection named no operator, so this answer is the "
                         "delegated-range bisection's")
        res.other = prefix
        return res
    prefix.other = res
    if prefix.origin is not None and res.origin is not None:
        prefix.agrees = prefix.origin.node == res.origin.node
    return prefix


def status_key(status: str) -> str:
    return {"NUMERICAL_INSTABILITY": "first_nonfinite", "SILENT_ZERO_VECTOR": "first_silent_zero",
            "CONSTANT_OUTPUT": "first_silent_zero"}.get(status, "first_divergence")
