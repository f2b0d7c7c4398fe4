"""``ort-fp16-exact`` and ``ort-bf16-exact``: float16 / bfloat16 *arithmetic* on any CPU, for
ONNX models (docs/howto/guard-backends.md, "Arithmetic backends").

``ort-fp16`` exercises float16 storage only: ONNX Runtime's CPU provider computes most float16
nodes in float32 behind casts it inserts, and merges runs of such nodes so that the values between
them never become float16 at all. A Mul reaching 1e6 between two such nodes is finite on the CPU
and Inf on a GPU. These backends emulate GPU-style float16 arithmetic instead:

* the variant is exactly ort-fp16's (the same converter call and fallback keep list: what the
  recipe builds), then every float16 value of it is made float32 and every node that produced a
  float16 value gets its output rounded to float16 right after it (Cast to FLOAT16, Cast back to
  FLOAT); float16 weights become the float32 numbers they hold;
* so each node computes in float32 on inputs that are float16 numbers, and its result is rounded
  once to float16. For one elementwise operation (+, -, *, /, sqrt) that is the correctly rounded
  float16 result (float32 carries more than 2 * 11 + 2 bits, so the double rounding is harmless);
  a value above 65504 becomes Inf exactly where float16 hardware makes it Inf. Matrix products,
  convolutions, reductions, Softmax and normalisations accumulate in float32 and round their
  result: what GPUs do with float16 inputs (tensor cores, cuDNN, ONNX Runtime's CUDA kernels).
  ``onnx.reference.ReferenceEvaluator`` on the float16 model computes everything in numpy
  float16, accumulation included: on long sums it is further from float32 than a GPU is.
* nodes the fallback keeps in float32 are float32 in the variant and get no rounding.

Why ONNX Runtime with inserted roundings and not a numpy evaluator over the graph: every op ONNX
Runtime runs is evaluated (no second implementation of ~180 ops), at ONNX Runtime's speed; the
rounding is the only thing added. Graph optimisations are off (ORT_DISABLE_ALL) so that no fusion
can join two nodes across a rounding (a Cast pair was kept at every level in ONNX Runtime 1.32,
but fusions are not promised to respect it). bfloat16 is the same graph rounded to BFLOAT16
(ONNX Runtime's CPU Cast rounds to nearest even), with the weights taken from the float32 model
(the float16 converter clips weights to 1e4, which bfloat16 does not need).

What it cannot evaluate: control flow (If, Loop, Scan and any node with a subgraph: the nodes
inside would not be rounded) and a node whose output type shape inference cannot tell; the row
says which op, and the other backends go on.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from .base import Backend, Session

# The rounding casts: not part of the source model (the recorder and the proofs skip them).
ROUNDING = "driftscope: rounding to {} (arithmetic emulation)"
# Ops whose float16 arithmetic GPUs accumulate in float32; only named in the row's note.
ACCUMULATING = frozenset({"MatMul", "Gemm", "Conv", "ConvTranspose", "ReduceSum", "ReduceMean",
                          "ReduceSumSquare", "ReduceL2", "ReduceL1", "ReduceLogSumExp",
                          "Softmax", "LogSoftmax", "LayerNormalization", "BatchNormalization",
                          "InstanceNormalization", "GroupNormalization", "Einsum",
                          "GlobalAveragePool", "AveragePool", "Attention",
                          "SkipLayerNormalization", "FusedMatMul"})


class UnsupportedOp(ValueError):
    pass


def _bf16_round(a: np.ndarray) -> np.ndarray:
    """float32 -> the nearest bfloat16 (ties to even; overflow to Inf; NaN kept), as float32."""
    a = np.ascontiguousarray(a, np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    up = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    out = up.astype(np.uint32).view(np.float32).reshape(a.shape)
    return np.where(np.isnan(a), a, out).astype(np.float32)


def _types(proto: Any) -> Dict[str, int]:
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(proto)
    except Exception:  # noqa: BLE001 - the converter's own value_info is used instead
        inferred = proto
    g = inferred.graph
    t = {vi.name: vi.type.tensor_type.elem_type
         for vi in list(proto.graph.value_info) + list(g.value_info) + list(g.input)
         + list(g.output) if vi.type.tensor_type.elem_type}
    t.update({i.name: i.data_type for i in g.initializer})
    return t


def emulate(variant: Any, low: int, source: Any = None, backend: str = "ort-fp16-exact"
            ) -> Any:
    """The float32 graph that computes `variant` (a float16 model from the converter) with every
    float16 value rounded to `low` (FLOAT16 or BFLOAT16) where it is produced. `source`: the
    float32 model, whose weights are rounded to `low` instead of the variant's float16 ones
    (bfloat16). Returns (model, number of rounded values)."""
    import onnx
    from onnx import numpy_helper

    T = onnx.TensorProto
    F16, F32 = T.FLOAT16, T.FLOAT
    types = _types(variant)
    out = onnx.ModelProto()
    out.CopyFrom(variant)
    g = out.graph
    originals: Dict[str, np.ndarray] = {}
    if source is not None:  # the unclipped float32 weights, by the names the variant keeps
        originals = {i.name: numpy_helper.to_array(i) for i in source.graph.initializer
                     if i.data_type == F32}
        for n in source.graph.node:
            if n.op_type == "Constant" and n.output:
                for a in n.attribute:
                    if a.name == "value" and a.t.data_type == F32:
                        originals[n.output[0]] = numpy_helper.to_array(a.t)

    def as_float32(t: Any, name: str) -> Any:
        old = originals.get(name)
        v = numpy_helper.to_array(t).astype(np.float32)
        if old is not None and old.shape == v.shape:
            v = old.astype(np.float32)
        if low == T.BFLOAT16:
            v = _bf16_round(v)
        new = numpy_helper.from_array(v, t.name)
        return new

    for k, init in enumerate(list(g.initializer)):
        if init.data_type == F16:
            g.initializer[k].CopyFrom(as_float32(init, init.name))
    taken = {o for n in g.node for o in list(n.input) + list(n.output)} | {
        i.name for i in g.input} | {i.name for i in g.initializer}

    def fresh(base: str) -> str:
        name = base
        while name in taken:
            name += "_"
        taken.add(name)
        return name

    nodes: List[Any] = []
    rounded = 0
    word = "bfloat16" if low == T.BFLOAT16 else "float16"
    for node in g.node:
        for a in node.attribute:
            if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                raise UnsupportedOp(
                    f"{backend} cannot evaluate op {node.op_type} (node "
                    f"{node.name or node.output[0]}): the nodes of its subgraph would not be "
                    f"rounded to {word}")
            if a.type == onnx.AttributeProto.INT and a.name in ("to", "dtype") and a.i == F16:
                a.i = F32
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == F16:
                a.t.CopyFrom(as_float32(a.t, node.output[0] if node.op_type == "Constant"
                                        else ""))
        nodes.append(node)
        for k, o in enumerate(node.output):
            if not o:
                continue
            kind = types.get(o)
            if kind is None:
                raise UnsupportedOp(
                    f"{backend} cannot evaluate op {node.op_type} (node "
                    f"{node.name or o}): shape inference does not tell the type of its output "
                    f"{o}, so its {word} rounding cannot be placed")
            if kind != F16:
                continue
            pre, mid = fresh(o + "/ds_f32"), fresh(o + "/ds_" + word)
            node.output[k] = pre
            tag = ROUNDING.format(word)
            nodes.append(onnx.helper.make_node("Cast", [pre], [mid], to=low, doc_string=tag))
            nodes.append(onnx.helper.make_node("Cast", [mid], [o], to=F32, doc_string=tag))
            rounded += 1
    made = [onnx.NodeProto() for _ in nodes]
    for m, n in zip(made, nodes):
        m.CopyFrom(n)
    del g.node[:]
    g.node.extend(made)
    del g.value_info[:]
    for vi in list(g.input) + list(g.output):
        if vi.type.tensor_type.elem_type == F16:
            vi.type.tensor_type.elem_type = F32
    return out, rounded


class _ArithSession(Session):
    def __init__(self, session: Any, notes: List[str], variant: Any, types: Dict[str, int],
                 kept: Sequence[str], word: str) -> None:
        self.session, self.notes, self._variant, self.types = session, notes, variant, types
        self.kept, self.word = tuple(kept), word
        self.names = [o.name for o in session.get_outputs()]

    @property
    def variant_proto(self) -> Any:
        return self._variant

    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        from ...recorders.api import onnx_check_inputs as _check_inputs, onnx_run as _run

        checked = _check_inputs(self.session, dict(feeds))
        return dict(zip(self.names, _run(self.session, checked, "the model")))

    def float32_evidence(self, nodes: Sequence[str]) -> Dict[str, str]:
        """A node is float32 here when the variant (what the recipe builds) gives it float32
        inputs and outputs (so the emulation rounds none of them) and float32 weights."""
        import onnx

        from .onnxruntime import _weights_not_float32

        F32 = onnx.TensorProto.FLOAT
        floats = (F32, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
                  onnx.TensorProto.DOUBLE)
        by_name = {n.name: n for n in self._variant.graph.node if n.name}
        found: Dict[str, str] = {}
        for name in nodes:
            n = by_name.get(name)
            if n is None:
                continue
            kinds = [self.types.get(x) for x in list(n.input) + list(n.output) if x]
            fl = [k for k in kinds if k in floats]
            if any(k is None for k in kinds) or not fl or any(k != F32 for k in fl):
                continue
            found[name] = (f"the variant computes {name} as {n.op_type} with {len(fl)} float32 "
                           f"input/output value(s), none rounded to {self.word} in the emulation")
        for name, why in _weights_not_float32(self._variant, list(found)).items():
            if why:
                del found[name]
            else:
                found[name] += "; its weights are float32 up to their initializers and Constants"
        return found


class ArithBackend(Backend):
    """float16 / bfloat16 arithmetic emulated with ONNX Runtime (the module's docstring)."""

    family = "onnx"
    default = False
    computes = True
    preload = ("onnxruntime", "driftscope.onnxruntime", "onnxconverter_common.float16")
    # The backends it was registered among (registry.py sets it): it runs the variant of the one
    # named ort-fp16 there, so a plugin that replaces ort-fp16 is followed.
    registry: Mapping[str, Backend] = {}

    def __init__(self, name: str, precision: str, summary: str, note: str) -> None:
        self.name, self.precision, self.summary, self.note = name, precision, summary, note

    @property
    def _low(self) -> int:
        import onnx

        return (onnx.TensorProto.BFLOAT16 if self.precision == "bfloat16"
                else onnx.TensorProto.FLOAT16)

    @property
    def fallback_range(self) -> Any:  # type: ignore[override]
        # Its variant is ort-fp16's, so a float16 search on it is seeded by the same range
        # (_ranges.range_seed_of); bfloat16 has float32's range and no converter clip.
        return (getattr(self.registry.get("ort-fp16"), "fallback_range", None)
                if self.precision == "float16" else None)

    def unavailable(self) -> Optional[str]:
        return self.registry["ort-fp16"].unavailable()

    def can_keep_float32(self) -> bool:
        # Its recipe is ort-fp16's (the converter's node_block_list); bfloat16 has none for ONNX.
        return self.precision == "float16"

    def load(self, model: str, work: str, seed: int,
             keep_float32: Sequence[str] = ()) -> Session:
        import onnxruntime as ort

        from ...recorders.api import onnx_load_model, onnx_make_session

        if keep_float32 and not self.can_keep_float32():
            raise ValueError(f"{self.name} cannot keep nodes in float32")
        # ort-fp16's own variant: what its recipe builds, kept nodes, loading fixes and all.
        half = self.registry["ort-fp16"].load(model, work, seed, keep_float32=list(keep_float32))
        variant = half.variant_proto
        source = onnx_load_model(model)[0] if self.precision == "bfloat16" else None
        emulated, rounded = emulate(variant, self._low, source, self.name)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = onnx_make_session(emulated.SerializeToString(), ["CPUExecutionProvider"],
                                     options, None, f"'{model}'")
        types = _types(variant)
        acc: Dict[str, int] = {}
        for n in variant.graph.node:
            if n.op_type in ACCUMULATING and any(types.get(o) == 10 for o in n.output):
                acc[n.op_type] = acc.get(n.op_type, 0) + 1
        notes = [s for s in half.notes if not s.startswith("ONNX Runtime ran")]
        if self.precision == "bfloat16":
            notes = [s for s in notes if "clipped" not in s]
        notes.append(f"{rounded} value(s) rounded to {self.precision} where produced; "
                     + (", ".join(f"{v} {k}" for k, v in sorted(acc.items()))
                        + " accumulate in float32" if acc else "no accumulating op"))
        return _ArithSession(session, notes, variant, types, keep_float32, self.precision)

    def recipe(self, model: str, nodes: Sequence[str]) -> str:
        return self.registry["ort-fp16"].recipe(model, nodes) if self.can_keep_float32() else ""


_NOTE = ("{p} arithmetic emulated on the CPU: every {p} node's result rounded to {p}, matrix "
         "products, convolutions and reductions accumulating in float32 (GPU-style)")

ARITH = {
    "float16": ArithBackend("ort-fp16-exact", "float16",
                            "ONNX Runtime, CPU provider, ort-fp16's variant with every float16 "
                            "result rounded to float16 (float16 arithmetic, GPU-style float32 "
                            "accumulation)", _NOTE.format(p="float16")),
    "bfloat16": ArithBackend("ort-bf16-exact", "bfloat16",
                             "ONNX Runtime, CPU provider, ort-fp16's variant with every float16 "
                             "result rounded to bfloat16 and float32 weights (bfloat16 "
                             "arithmetic, GPU-style float32 accumulation)",
                             _NOTE.format(p="bfloat16")),
}
