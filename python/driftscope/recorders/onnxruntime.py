"""Record the intermediate tensors of an ONNX Runtime run into a TDUMP file.

    import driftscope.onnxruntime as dort
    dort.record("model.onnx", {"input_ids": ids, "attention_mask": mask}, "ort.tdump")

How it works: every node output of the main graph is added to the graph's outputs (ONNX Runtime
only hands back graph outputs), the session runs once, and the values are written in topological
order with op type = node op type. Names follow ``driftscope.recorders.naming``: the last output inside each
module scope of a ``torch.onnx.export``-ed graph is written under the module path, so
``driftscope compare torch.tdump ort.tdump`` lines up module by module without a name map.
Quantisation plumbing (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear) is written with
role "other" and never takes a module's name, except a DequantizeLinear of the value its module
ended with: quantize_dynamic quantizes embedding tables, so an embedding module's Gather yields
uint8 and only the DequantizeLinear after it holds the module's float value; that one is the
module's output (the uint8 lookup stays recorded as ``<module>.Gather``). Quantized integer
values carry their affine encoding (docs/format.md §3.3.2) where the graph gives it: outputs of
DynamicQuantizeLinear and QuantizeLinear, inputs of DequantizeLinear; readers and compare see
them as scale × (q − zero_point).

Observer effect: extra graph outputs stop ONNX Runtime from fusing the nodes that produce them, so
the captured run can compute something else than the plain model. The plain model runs too, and the
run metadata key ``observer_effect`` says whether the final outputs agree bit for bit ("none") or
how they differ; ``driftscope compare`` warns about the latter.

Nodes inside control-flow subgraphs (If, Loop, Scan bodies) are not graph values of the main graph
and are not recorded; the node that owns the subgraph is.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import math
import os
import stat
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from .. import _core
from .._cli import add_record_inputs, add_record_options, parse_args, run_recorder
from . import axes_rules as _rules
from .axes_graph import GraphNames, GraphOp, declared_input_axes, head_counts, input_names
from .dataflow import DataFlow, GraphNode
from .naming import QUANT_PLUMBING, NodeInfo, PlannedName, plan_names
from ..errors import Error

__all__ = [
    "Recording",
    "ModelLoadError",
    "ModelRunError",
    "InputMismatchError",
    "record",
    "to_float16",
    "TensorSink",
    "cli_main",
]

PathLike = Union[str, "os.PathLike[str]"]

# ONNX Runtime's "tensor(float)" type strings -> numpy dtypes (the ones a caller can feed).
_ORT_TO_NUMPY = {
    "tensor(float)": np.dtype(np.float32),
    "tensor(float16)": np.dtype(np.float16),
    "tensor(double)": np.dtype(np.float64),
    "tensor(int64)": np.dtype(np.int64),
    "tensor(int32)": np.dtype(np.int32),
    "tensor(int16)": np.dtype(np.int16),
    "tensor(int8)": np.dtype(np.int8),
    "tensor(uint64)": np.dtype(np.uint64),
    "tensor(uint32)": np.dtype(np.uint32),
    "tensor(uint16)": np.dtype(np.uint16),
    "tensor(uint8)": np.dtype(np.uint8),
    "tensor(bool)": np.dtype(np.bool_),
}

# numpy kinds a TDUMP record can hold (format.md §3.3.1); strings and objects cannot.
_RECORDABLE_KINDS = frozenset("fiub")

# ONNX elem types numpy has no dtype for -> the ml_dtypes name TDUMP knows them by.
_NUMPYLESS = {16: "bfloat16", 17: "float8_e4m3fn", 19: "float8_e5m2"}
_F32_SUFFIX = "__driftscope_f32"

# doc_string of the nodes to_float16 inserts (casts, identities): recorded only as model outputs.
_INSERTED = "driftscope: inserted by the float16 conversion"

# ORT config key that lets a model held in memory find its external-data files
# (onnxruntime_session_options_config_keys.h).
_EXTERNAL_DATA_FOLDER_KEY = "session.model_external_initializers_file_folder_path"


class ModelLoadError(Error, RuntimeError):
    """The model file could not be read, or the runtime refused to load it."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 0, "model_load_failed")


class ModelRunError(Error, RuntimeError):
    """The runtime failed while running the model."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 0, "model_run_failed")


class InputMismatchError(Error, ValueError):
    """An input is missing, unknown, or has the wrong dtype or shape (the message names it)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 0, "input_mismatch")


@dataclass
class Recording:
    """What `record` did."""

    path: str
    records: int                      # TENSOR/SUMMARY records written (after the filter)
    observer_effect: str              # "none", or how the captured run's outputs differ
    outputs: Dict[str, np.ndarray]    # the model's final outputs (from the captured run)
    # Values that are not tensors TDUMP can hold (sequences, maps, strings), by value name.
    skipped: List[str] = field(default_factory=list)
    metadata: Dict[str, str] = field(default_factory=dict)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def external_data_files(proto: Any, model_path: Any) -> List[str]:
    """The external-data files an ONNX model reads (every tensor stored outside the model:
    initializers, sparse initializers, Constant attributes, subgraphs, functions), resolved
    against the model's folder as ONNX does. Exporters such as paddle2onnx keep weights in
    Constant nodes, so the main graph's initializers alone miss them."""
    import onnx

    base = os.path.dirname(os.path.abspath(model_path))
    out: List[str] = []

    def tensor(t: Any) -> None:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            loc = next((e.value for e in t.external_data if e.key == "location"), "")
            if loc:
                path = os.path.join(base, loc)
                if path not in out:
                    out.append(path)

    def graph(g: Any) -> None:
        for t in g.initializer:
            tensor(t)
        for s in g.sparse_initializer:
            tensor(s.values)
            tensor(s.indices)
        for node in g.node:
            for a in node.attribute:
                if a.HasField("t"):
                    tensor(a.t)
                for t in a.tensors:
                    tensor(t)
                if a.HasField("sparse_tensor"):
                    tensor(a.sparse_tensor.values)
                    tensor(a.sparse_tensor.indices)
                if a.HasField("g"):
                    graph(a.g)
                for sub in a.graphs:
                    graph(sub)

    graph(proto.graph)
    for f in getattr(proto, "functions", ()):
        for node in f.node:
            for a in node.attribute:
                if a.HasField("t"):
                    tensor(a.t)
    return out


def _load_model(model: Any):
    """Returns (ModelProto without external data loaded, folder holding its external data or None,
    display name)."""
    import onnx

    if isinstance(model, onnx.ModelProto):
        return model, None, model.graph.name or "model"
    path = Path(os.fspath(model))
    if not path.is_file():
        raise ModelLoadError(f"cannot load ONNX model '{path}': no such file")
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as err:  # protobuf raises DecodeError, or RuntimeWarning-derived errors
        raise ModelLoadError(f"cannot load ONNX model '{path}': not a valid ONNX file "
                             f"({_first_line(err)})") from err
    if not proto.graph.node and not proto.graph.output:
        raise ModelLoadError(f"cannot load ONNX model '{path}': the file parses but holds no graph")
    has_external = bool(external_data_files(proto, path))
    return proto, (str(path.resolve().parent) if has_external else None), path.name


def _topological_nodes(graph) -> List[Any]:
    """The graph's nodes in a topological order that keeps file order where the file is already
    sorted (the ONNX spec requires it, but hand-edited graphs are not always)."""
    produced_by = {}
    for i, node in enumerate(graph.node):
        for out in node.output:
            if out:
                produced_by[out] = i
    deps: List[set] = []
    for node in graph.node:
        # Values a subgraph (If branch, Loop body) reads from this graph are inputs too.
        used = set(node.input) | _outer_scope_inputs(node)
        deps.append({produced_by[x] for x in used if x in produced_by})
    # Fast path: already sorted.
    if all(all(d < i for d in ds) for i, ds in enumerate(deps)):
        return list(graph.node)
    import heapq

    users: Dict[int, List[int]] = {}
    missing = [len(ds) for ds in deps]
    for i, ds in enumerate(deps):
        for d in ds:
            users.setdefault(d, []).append(i)
    ready = [i for i, n in enumerate(missing) if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users.get(i, []):
            missing[u] -= 1
            if missing[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(graph.node):
        stuck = next(graph.node[i] for i, n in enumerate(missing) if n > 0)
        raise ModelLoadError(f"the graph has a cycle through node '{stuck.name or stuck.op_type}'")
    return [graph.node[i] for i in order]


def _outer_scope_inputs(node) -> set:
    """Names the subgraphs of `node` read without producing them (from the enclosing graph)."""
    import onnx

    names: set = set()
    for a in node.attribute:
        graphs = [a.g] if a.type == onnx.AttributeProto.GRAPH else (
            list(a.graphs) if a.type == onnx.AttributeProto.GRAPHS else [])
        for g in graphs:
            local = ({i.name for i in g.input} | {t.name for t in g.initializer}
                     | {o for n in g.node for o in n.output})
            for n in g.node:
                names |= {x for x in n.input if x and x not in local}
                names |= {x for x in _outer_scope_inputs(n) if x not in local}
            names |= {o.name for o in g.output if o.name not in local}
    return names


def _static_values(graph, nodes) -> set:
    """Values that do not depend on the run's inputs: Constant outputs and everything computed
    from initializers and constants alone (the exporter's Identity copies of shared weights,
    constant shape arithmetic). They are weights, not activations, the same in every run, so they
    are not recorded (graph outputs excepted)."""
    import onnx

    initializers = {t.name for t in graph.initializer}
    static = set(initializers)
    for node in nodes:
        ins = [x for x in node.input if x]
        # Random* ops have no inputs yet differ per run; a subgraph may read outer values.
        varying = node.op_type.startswith("Random") or any(
            a.type == onnx.AttributeProto.GRAPH for a in node.attribute)
        if not varying and all(x in static for x in ins):
            static.update(o for o in node.output if o)
    return static - initializers - {o.name for o in graph.output}


def _plan(proto) -> List[PlannedName]:
    nodes = _topological_nodes(proto.graph)
    infos = []
    skip = _static_values(proto.graph, nodes)
    for node in nodes:
        infos.append(NodeInfo(node.name, node.op_type, tuple(node.output),
                              inserted=node.doc_string == _INSERTED, inputs=tuple(node.input)))
    plan = plan_names(infos, skip=skip, graph_outputs=[o.name for o in proto.graph.output])
    domains = {o: n.domain for n in nodes for o in n.output}
    for entry in plan:
        d = domains.get(entry.tensor, "")
        if d not in ("", "ai.onnx"):
            entry.op_type = f"{d}.{entry.op_type}"
    return plan


# ONNX element types that are floating point (TensorProto: FLOAT, FLOAT16, DOUBLE, BFLOAT16,
# FLOAT8*) and boolean; every other numeric type is an integer.
_FLOAT_ELEMS = frozenset({1, 10, 11, 16, 17, 18, 19, 20})
_BOOL_ELEM = 9


def _quantized_encodings(proto, values: Mapping[str, Any]) -> Dict[str, Dict[str, Any]]:
    """Affine encodings (docs/format.md §3.3.2) of the graph's quantized integer values, so that
    compare reads them as the real numbers they stand for (value = scale × (q − zero_point)):
    a DynamicQuantizeLinear's output with the scale and zero point it computed, a
    QuantizeLinear's output and a DequantizeLinear's input with the node's scale and zero point
    (initializers or run values). Values whose parameters are unknown stay raw."""
    from onnx import numpy_helper

    consts = {t.name: t for t in proto.graph.initializer}

    def array(name: str) -> Optional[np.ndarray]:
        if name in values and isinstance(values[name], np.ndarray):
            return values[name]
        if name in consts:
            return numpy_helper.to_array(consts[name])
        return None

    def encoding(scale_name: str, zero_name: str, axis: int, ndim: int) -> Optional[Dict[str, Any]]:
        scale = array(scale_name)
        zero = array(zero_name) if zero_name else np.zeros((), np.int64)
        if scale is None or zero is None or scale.dtype.kind != "f" or zero.dtype.kind not in "iu":
            return None
        if scale.size == 1 and zero.size == 1:
            return {"kind": "affine_tensor", "scale": float(scale.reshape(())),
                    "zero_point": int(zero.reshape(()))}
        if scale.ndim == 1 and zero.shape in (scale.shape, ()) and ndim > 0:
            zeros = np.broadcast_to(zero, scale.shape)
            return {"kind": "affine_channel", "axis": axis % ndim,
                    "scales": [float(x) for x in scale], "zero_points": [int(x) for x in zeros]}
        return None  # blocked quantisation (opset 21 block_size): left raw

    found: Dict[str, Dict[str, Any]] = {}
    for node in proto.graph.node:
        ins = list(node.input) + ["", "", ""]
        axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
        if node.op_type == "DynamicQuantizeLinear" and len(node.output) >= 3:
            target, scale, zero = node.output[0], node.output[1], node.output[2]
        elif node.op_type == "QuantizeLinear" and node.output:
            target, scale, zero = node.output[0], ins[1], ins[2]
        elif node.op_type == "DequantizeLinear":
            target, scale, zero = ins[0], ins[1], ins[2]
        else:
            continue
        value = values.get(target)
        if target in found or not isinstance(value, np.ndarray) or value.dtype.kind not in "iu":
            continue
        enc = encoding(scale, zero, axis, value.ndim)
        if enc is not None:
            found[target] = enc
    return found


def graph_dataflow(proto) -> DataFlow:
    """The data flow of the main graph for ds.inputs / ds.kind (driftscope._dataflow)."""
    import onnx

    def elem_kind(elem: int) -> str:
        return "float" if elem in _FLOAT_ELEMS else "mask" if elem == _BOOL_ELEM else "int"

    nodes = []
    for node in _topological_nodes(proto.graph):
        cast_to = None
        if node.op_type in ("Cast", "CastLike"):
            to = next((a.i for a in node.attribute if a.name == "to"), None)
            cast_to = None if to is None else {"mask": "bool"}.get(elem_kind(to), elem_kind(to))
        if node.op_type == "Constant":
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None:
                cast_to = "float" if value.data_type in _FLOAT_ELEMS else "int"
        inputs = list(node.input) + sorted(_outer_scope_inputs(node))
        nodes.append(GraphNode(node.op_type, inputs, list(node.output), cast_to))
    constants = {t.name: t.data_type in _FLOAT_ELEMS for t in proto.graph.initializer}
    inputs = {}
    for vi in proto.graph.input:
        if vi.name in constants:
            continue
        kind = elem_kind(vi.type.tensor_type.elem_type)
        inputs[vi.name] = "index" if kind == "int" else kind
    del onnx
    return DataFlow(nodes, constants, inputs)


def _with_outputs(proto, names: Sequence[str], numpyless: Mapping[str, int]):
    """A copy of the model whose graph also outputs `names`.

    The added outputs carry no type: ONNX Runtime infers their types itself, whereas value_info
    from onnx.shape_inference can disagree with ORT for contrib ops and make session creation
    fail, and would cost a full inference pass over large models. A value numpy cannot hold
    (`numpyless`: bfloat16, float8) is exposed through a Cast to float32, which is exact."""
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(proto)
    existing = {o.name for o in out.graph.output}
    for name in names:
        exposed = name
        if name in numpyless:
            exposed = name + _F32_SUFFIX
            out.graph.node.append(onnx.helper.make_node(
                "Cast", [name], [exposed], to=onnx.TensorProto.FLOAT, doc_string=_INSERTED))
        if exposed not in existing:
            out.graph.output.append(onnx.ValueInfoProto(name=exposed))
            existing.add(exposed)
    return out


def _numpyless_values(proto) -> Dict[str, int]:
    """Values whose element type numpy has no dtype for (bfloat16, float8), by name -> ONNX
    elem type. ONNX Runtime's Python API refuses to return such outputs at all, so they are
    fetched through a Cast. Type inference runs only when the model mentions such a type."""
    import onnx

    special = set(_NUMPYLESS)
    mentioned = any(t.data_type in special for t in proto.graph.initializer) or any(
        vi.type.tensor_type.elem_type in special
        for vi in list(proto.graph.input) + list(proto.graph.output) + list(proto.graph.value_info))
    mentioned = mentioned or any(
        a.name == "to" and a.i in special for n in proto.graph.node if n.op_type == "Cast"
        for a in n.attribute)
    if not mentioned:
        return {}
    try:
        inferred = onnx.shape_inference.infer_shapes(proto)
    except Exception:  # custom ops: fall back to what the file declares
        inferred = proto
    found = {}
    for vi in (list(inferred.graph.value_info) + list(inferred.graph.output)
               + list(inferred.graph.input)):
        elem = vi.type.tensor_type.elem_type
        if elem in special:
            found[vi.name] = elem
    return found


def _declared_input_axes(proto, input_axes: Any) -> Dict[str, Any]:
    """input_axes= checked against the graph: names well formed, one per axis of a graph input."""
    inits = {i.name for i in proto.graph.initializer}
    ranks = {i.name: (len(i.type.tensor_type.shape.dim) if i.type.tensor_type.HasField("shape")
                      else None) for i in proto.graph.input if i.name not in inits}
    return declared_input_axes(input_axes, ranks, InputMismatchError)


def _axis_names(proto, declared: Optional[Mapping[str, Sequence[str]]] = None
                ) -> Dict[str, List[Any]]:
    """Value name -> per-axis symbolic name or static size, from the graph's declared types and
    ONNX shape inference, which carries the graph inputs' ``dim_param`` names (``batch``,
    ``seq``) to the intermediates it can follow (docs/axes.md). Names that inference invents
    (``unk__3``) are no names. Only values with at least one symbolic axis are listed.
    `declared` (input_axes=) names graph inputs' axes: they replace those inputs' dims for the
    inference only (the model is restored before this returns)."""
    import onnx

    saved = []
    try:
        for vi in proto.graph.input:
            names = (declared or {}).get(vi.name)
            if names is None or not vi.type.tensor_type.HasField("shape"):
                continue
            shape = vi.type.tensor_type.shape
            saved.append((shape, onnx.TensorShapeProto.FromString(shape.SerializeToString())))
            for d, n in zip(shape.dim, names):
                d.dim_param = n
        try:
            inferred = onnx.shape_inference.infer_shapes(proto)
        except Exception:  # custom ops, models over 2 GB: what the file declares
            inferred = proto
        return _symbolic_dims(inferred)
    finally:
        for shape, copy in saved:
            shape.CopyFrom(copy)


def _symbolic_dims(inferred) -> Dict[str, List[Any]]:
    found: Dict[str, List[Any]] = {}
    g = inferred.graph
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        t = vi.type.tensor_type
        if not t.HasField("shape"):
            continue
        dims: List[Any] = []
        for d in t.shape.dim:
            if d.HasField("dim_param") and d.dim_param and not d.dim_param.startswith("unk__"):
                dims.append(d.dim_param.replace(",", "_"))
            elif d.HasField("dim_value"):
                dims.append(int(d.dim_value))
            else:
                dims.append(None)
        if any(isinstance(x, str) for x in dims):
            found[vi.name] = dims
    return found


def _axes_for(dims: Optional[List[Any]], value: np.ndarray) -> Optional[List[str]]:
    """The axis names of a recorded value: symbolic names, and the size (``"384"``) for an axis
    without one; None when the inferred shape does not fit the value ORT returned."""
    if dims is None or len(dims) != value.ndim:
        return None
    out = []
    for d, n in zip(dims, value.shape):
        if isinstance(d, str):
            out.append(d)
        elif d is None or d == n:
            out.append(str(int(n)))
        else:
            return None
    return out


# Reserved attribute keys (docs/axes.md): what `driftscope check` judges normalisation and
# softmax outputs by.
def _node_axis_attrs(node, proto, rank: int) -> Dict[str, str]:
    import onnx
    from onnx import numpy_helper

    def attr(name: str, default: int) -> int:
        for a in node.attribute:
            if a.name == name and a.type == onnx.AttributeProto.INT:
                return int(a.i)
        return default

    op = node.op_type
    out: Dict[str, str] = {}
    if op in ("LayerNormalization", "SimplifiedLayerNormalization", "RMSNormalization",
              "SkipLayerNormalization", "SkipSimplifiedLayerNormalization"):
        axis = attr("axis", -1)
        first = axis if axis < 0 else axis - rank
        out["norm_axes"] = ",".join(str(a) for a in range(first, 0)) if first < 0 else "-1"
        out["norm_kind"] = "rms" if "Simplified" in op or op.startswith("RMS") else "layer"
        # Scale (and B) inputs that are not 1 (and 0) change the statistics the check reads.
        inits = {t.name: t for t in proto.graph.initializer}
        scale_at = 2 if op.startswith("Skip") else 1
        affine = True
        try:
            ins = list(node.input)
            scale = numpy_helper.to_array(inits[ins[scale_at]]) if len(ins) > scale_at else None
            bias_name = ins[scale_at + 1] if len(ins) > scale_at + 1 else ""
            bias = numpy_helper.to_array(inits[bias_name]) if bias_name else None
            affine = scale is None or not np.all(scale == 1) or (
                bias is not None and not np.all(bias == 0))
        except (KeyError, ValueError, TypeError):
            affine = True  # computed scale: cannot be known before the run
        out["norm_affine"] = "true" if affine else "false"
    elif op == "Softmax":
        opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 13)
        if opset >= 13:  # before 13 Softmax flattened the trailing axes into one
            out["softmax_axis"] = str(attr("axis", -1))
    return out


def _from_float32(value: np.ndarray, elem: int) -> np.ndarray:
    """The float32 copy of a bfloat16/float8 value back in its own dtype (exact: every such value
    is a float32). ml_dtypes comes with onnx."""
    import ml_dtypes

    return value.astype(getattr(ml_dtypes, _NUMPYLESS[elem]))


def _isolate_graph_outputs(proto):
    """Make every graph output the sole product of its own Identity node.

    onnxconverter-common's float16 pass casts a graph output back to float32 under its original
    name, but leaves other consumers of that name believing it is float16 (ORT then rejects the
    model with 'Type Error ... does not match expected type'). A graph output that nothing else
    reads avoids that."""
    import onnx

    consumed = {x for n in proto.graph.node for x in n.input}
    produced = {o for n in proto.graph.node for o in n.output}
    for out in proto.graph.output:
        name = out.name
        if name not in consumed or name not in produced:
            continue
        inner = f"{name}__driftscope_inner"
        for node in proto.graph.node:
            for k, o in enumerate(node.output):
                if o == name:
                    node.output[k] = inner
            for k, x in enumerate(node.input):
                if x == name:
                    node.input[k] = inner
        proto.graph.node.append(
            onnx.helper.make_node("Identity", [inner], [name], name=f"driftscope_output/{name}"))
    return proto


def to_float16(model: Any, providers: Optional[Sequence[Any]] = None,
               keep_float32: Sequence[str] = ()):
    """The model converted to float16 (weights and activations), graph inputs and outputs keeping
    their types — what `record(..., fp16=True)` runs. Needs ``onnxconverter-common``.

    The result is checked by loading it into ONNX Runtime (`providers`, default CPU). Nodes that
    make the converted model fail to load are kept in float32 (with casts around them) and named
    in a RuntimeWarning; a model that still fails raises ModelLoadError naming the node.
    keep_float32: node names kept in float32 on purpose (the converter's node_block_list; a value
    passed between two such nodes, or from a graph input to one, stays float32 too, which the
    converter alone does not do) — the FP32 fallback `driftscope guard` verifies."""
    converted, kept = _to_float16(model, providers, keep=keep_float32)
    if kept:
        warnings.warn(_kept_message(kept), RuntimeWarning, stacklevel=2)
    return converted


def _kept_message(kept: Sequence[str]) -> str:
    return (f"driftscope: float16 conversion kept {len(kept)} node(s) in float32 (converted, "
            f"ONNX Runtime cannot load them): {', '.join(kept)}")


# Node attributes that set the element type of the node's output (Cast's "to", the "dtype" of
# EyeLike, Random*, Bernoulli).
_DTYPE_ATTRIBUTES = ("to", "dtype")
_TEMP_NAME = "__driftscope_node_{}"
_MAX_FP16_ATTEMPTS = 32


def _all_graphs(graph):
    """The graph and every subgraph inside it (If branches, Loop and Scan bodies), depth first."""
    import onnx

    yield graph
    for node in graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _all_graphs(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from _all_graphs(g)


def _match_dtype_attributes(proto) -> None:
    """onnxconverter-common (1.16) declares a node's float outputs float16 in value_info but
    leaves a Cast(to=FLOAT) — or EyeLike/Random* with dtype=FLOAT — producing float32, so ONNX
    Runtime rejects the model ('Type (tensor(float16)) of output arg (y) of node () does not
    match expected type (tensor(float))'). Where the converter declared the output float16, the
    node is made to produce float16; its own inserted casts (declared float32) are untouched."""
    import onnx

    FLOAT, FLOAT16 = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16
    for graph in _all_graphs(proto.graph):
        declared = {vi.name: vi.type.tensor_type.elem_type
                    for vi in list(graph.value_info) + list(graph.output)}
        for node in graph.node:
            if not node.output or declared.get(node.output[0]) != FLOAT16:
                continue
            for a in node.attribute:
                if (a.name in _DTYPE_ATTRIBUTES and a.type == onnx.AttributeProto.INT
                        and a.i == FLOAT):
                    a.i = FLOAT16


def _load_error(proto, providers: Sequence[Any]) -> Optional[str]:
    """Why ONNX Runtime refuses to create a session for `proto`, or None. The runtime that will
    run the model is the judge: onnx.checker is stricter in ways that do not matter here
    (contrib-domain ops, a value an If body reads before its producer in file order), and
    misses what does (the type errors of bug 19 pass it)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4  # the error comes back as the exception; no log lines
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        ort.InferenceSession(proto.SerializeToString(), sess_options=options,
                             providers=list(providers))
    except Exception as err:
        return _first_line(err)
    return None


def _nodes_in_error(message: str, proto, candidates) -> List[str]:
    """Names of `candidates` nodes that an ONNX Runtime / checker error message points at:
    "node (NAME)", "node with name 'NAME'", or the producer of "output arg (VALUE)"."""
    import re

    named = set(re.findall(r"[Nn]ode \(([^()]*)\)", message))
    named |= set(re.findall(r"node with name '([^']*)'", message))
    named |= set(re.findall(r'In Node, \("([^"]*)"', message))
    values = set(re.findall(r"(?:output|input) arg \(([^()]*)\)", message))
    for graph in _all_graphs(proto.graph):
        for node in graph.node:
            if values.intersection(node.output):
                named.add(node.name)
    return sorted(n for n in named if n in candidates)


def _to_float16(model: Any, providers: Optional[Sequence[Any]] = None, keep: Sequence[str] = ()):
    """(converted model, names of the nodes kept in float32 because ONNX Runtime cannot load
    them converted): see to_float16. `keep`: node names kept in float32 on purpose (the
    converter's node_block_list; not listed in the result)."""
    import onnx

    try:
        from onnxconverter_common import float16 as _f16
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ModelLoadError("fp16 conversion needs the 'onnxconverter-common' package: "
                             "pip install onnxconverter-common") from err
    providers = list(providers) if providers else ["CPUExecutionProvider"]
    if isinstance(model, onnx.ModelProto):
        proto = onnx.ModelProto()
        proto.CopyFrom(model)
    else:
        path = Path(os.fspath(model))
        try:
            proto = onnx.load(str(path))  # with external data: the converter rewrites weights
        except Exception as err:
            raise ModelLoadError(f"cannot load ONNX model '{path}': {_first_line(err)}") from err
    # Stale value_info (from the exporter) keeps float32 types the converter does not revisit.
    del proto.graph.value_info[:]
    original = {n.name for n in proto.graph.node}
    _isolate_graph_outputs(proto)
    # Unnamed nodes get a temporary unique name, so that an error can point at one and the
    # converter's node_block_list can keep it in float32; the names are restored afterwards.
    display: Dict[str, str] = {}
    temporary: Dict[str, str] = {}
    k = 0
    for graph in _all_graphs(proto.graph):
        for node in graph.node:
            if not node.name or node.name in display:
                temp = _TEMP_NAME.format(k)
                k += 1
                temporary[temp] = node.name
                outs = ", ".join(o for o in node.output if o)
                display[temp] = f"{node.op_type} -> {outs}" if not node.name else node.name
                node.name = temp
            else:
                display[node.name] = node.name
    wanted = [n for n in keep if n in display]
    blocked: List[str] = list(wanted)
    for _ in range(_MAX_FP16_ATTEMPTS):
        with warnings.catch_warnings():
            # The converter warns once per weight it clamps into float16 range; that is the point.
            warnings.simplefilter("ignore")
            attempt = onnx.ModelProto()
            attempt.CopyFrom(proto)
            try:
                converted = _f16.convert_float_to_float16(attempt, keep_io_types=True,
                                                          node_block_list=blocked)
            except Exception as err:
                raise ModelLoadError(f"the float16 conversion failed: {_first_line(err)}") from err
        _match_dtype_attributes(converted)
        if wanted:
            _drop_float16_round_trips(converted, set(wanted))
        # The converter sorts by explicit inputs only; a cast it adds for a value that an If or
        # Loop body reads can land after that node, which ONNX's checker rightly refuses.
        ordered = _topological_nodes(converted.graph)
        del converted.graph.node[:]
        converted.graph.node.extend(ordered)
        error = _load_error(converted, providers)
        if error is None:
            break
        culprits = [n for n in _nodes_in_error(error, converted, display) if n not in blocked]
        if not culprits:
            where = (f" (nodes kept in float32 so far: {', '.join(display[b] for b in blocked)})"
                     if blocked else "")
            raise ModelLoadError(f"the float16 conversion gives a model ONNX Runtime cannot load, "
                                 f"and no node it names can be kept in float32{where}: "
                                 f"{_readable_error(error, display)}")
        blocked.extend(culprits)
    else:
        raise ModelLoadError(f"the float16 conversion still fails to load with "
                             f"{len(blocked)} nodes kept in float32: "
                             f"{_readable_error(error, display)}")
    # The converter names its Cast nodes after the node they serve ("/pooler/Tanh" gets
    # "/pooler/Tanh_cast_to_pooler_output"), which would make a cast the last node of the
    # module scope and shift the module's name onto it. Tagged as inserted, they (and the
    # Identity nodes above) stay out of every scope and the float16 dump keeps the float32
    # dump's names; only the final casts are recorded, as the model's outputs.
    for graph in _all_graphs(converted.graph):
        for node in graph.node:
            if node.name in temporary:
                node.name = temporary[node.name]
            elif node.name not in display:
                node.name = ""
                node.doc_string = _INSERTED
    for node in converted.graph.node:
        if node.name not in original:
            node.name = ""
            node.doc_string = _INSERTED
    return converted, [display[b] for b in blocked if b not in wanted]


def _drop_float16_round_trips(proto, kept: set) -> None:
    """onnxconverter-common (1.16) still passes a value between two nodes of its
    node_block_list through float16: Cast(to float16) after the first, Cast(to float32) before
    the second; and a graph input (keep_io_types) read by a kept node the same way. A value that
    overflows float16 (the reason to keep the nodes) becomes Inf there. Where a kept node's (or
    a graph input's) float32 value goes to float16 only to be cast straight back to float32,
    those consumers read the float32 value instead (main graph only); the float16 copy stays
    for the nodes that were converted."""
    import onnx

    FLOAT, FLOAT16 = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16
    graph = proto.graph

    def cast_to(node) -> Optional[int]:
        if node.op_type != "Cast":
            return None
        return next((a.i for a in node.attribute if a.name == "to"), None)

    producer = {o: n for n in graph.node for o in n.output if o}
    consumers: Dict[str, List[Any]] = {}
    for n in graph.node:
        for x in n.input:
            consumers.setdefault(x, []).append(n)
    outputs = {o.name for o in graph.output}
    inputs = {i.name for i in graph.input} - {t.name for t in graph.initializer}
    rename: Dict[str, str] = {}
    dead = set()
    declared = {o.name: o for o in graph.output}
    for node in graph.node:
        src = producer.get(node.input[0]) if node.input else None
        if (cast_to(node) == FLOAT16 and node.output[0] in outputs and src is not None
                and src.name in kept):
            # A kept node's graph output: the converter casts its float32 value to float16 and
            # declares the output float16 although keep_io_types was asked; a value above 65504
            # became Inf there.
            next(a for a in node.attribute if a.name == "to").i = FLOAT
            declared[node.output[0]].type.tensor_type.elem_type = FLOAT
            continue
        if cast_to(node) != FLOAT16 or not node.input or node.output[0] in outputs:
            continue
        src = producer.get(node.input[0])
        if src is None and node.input[0] not in inputs:
            continue
        if src is not None and src.name not in kept:
            continue
        users = consumers.get(node.output[0], [])
        back = [u for u in users if cast_to(u) == FLOAT and u.output[0] not in outputs]
        for u in back:
            rename[u.output[0]] = node.input[0]
            dead.add(id(u))
        if back and len(back) == len(users):
            dead.add(id(node))
    if not dead:
        return
    keep_nodes = [n for n in graph.node if id(n) not in dead]
    for n in keep_nodes:
        for k, x in enumerate(n.input):
            if x in rename:
                n.input[k] = rename[x]
    del graph.node[:]
    graph.node.extend(keep_nodes)


def _readable_error(message: str, display: Mapping[str, str]) -> str:
    for temp, shown in display.items():
        if temp != shown:
            message = message.replace(temp, shown)
    return message


def _describe_type(arg) -> str:
    shape = ", ".join(str(d) if d is not None else "?" for d in (arg.shape or []))
    return f"{arg.type.replace('tensor(', '').rstrip(')')} [{shape}]"


def _feeds_by_name(inputs: Any, names: Sequence[str]) -> Dict[str, Any]:
    """`inputs` (a dict by name, a list in the model's order, or the one input itself) as a dict
    by input name; the errors name the model's inputs (ONNX and LiteRT alike)."""
    if isinstance(inputs, Mapping):
        return dict(inputs)
    listed = ", ".join(names)
    if isinstance(inputs, (list, tuple)):
        if len(inputs) != len(names):
            raise InputMismatchError(f"the model takes {len(names)} input(s) ({listed}), "
                                     f"got {len(inputs)}")
        return dict(zip(names, inputs))
    if len(names) == 1:
        return {names[0]: inputs}
    raise InputMismatchError("inputs must be a dict of name -> array for a model with "
                             f"{len(names)} inputs ({listed})")


def _check_inputs(session, inputs: Any) -> Dict[str, np.ndarray]:
    """Checks `inputs` against the session's declared inputs; errors name the input and what
    the model expects."""
    declared = session.get_inputs()
    feeds = _feeds_by_name(inputs, [a.name for a in declared])
    names = {a.name for a in declared}
    unknown = [k for k in feeds if k not in names]
    if unknown:
        raise InputMismatchError(
            f"unknown input '{unknown[0]}'; the model's inputs are: "
            + ", ".join(f"{a.name} ({_describe_type(a)})" for a in declared))
    checked: Dict[str, np.ndarray] = {}
    for arg in declared:
        if arg.name not in feeds:
            raise InputMismatchError(f"missing input '{arg.name}': expected {_describe_type(arg)}")
        value = np.asarray(feeds[arg.name])
        want = _ORT_TO_NUMPY.get(arg.type)
        if want is not None and value.dtype != want:
            raise InputMismatchError(
                f"input '{arg.name}' has dtype {value.dtype}, the model expects "
                f"{_describe_type(arg)}")
        dims = list(arg.shape or [])
        bad = len(dims) != value.ndim or any(
            isinstance(d, int) and d >= 0 and d != s for d, s in zip(dims, value.shape))
        if bad:
            raise InputMismatchError(
                f"input '{arg.name}' has shape {tuple(value.shape)}, the model expects "
                f"{_describe_type(arg)}")
        checked[arg.name] = value
    return checked


def _output_range(x: np.ndarray) -> float:
    """max - min of the finite values (the scale a difference is read against); max |x| for a
    constant output; 0 when there is nothing finite or all is zero."""
    finite = x[np.isfinite(x)]
    if not finite.size:
        return 0.0
    span = float(finite.max() - finite.min())
    return span if span > 0 else float(np.abs(finite).max())


def observer_effect_relative(plain: Dict[str, Any], captured: Dict[str, Any]) -> float:
    """The largest max |a-b| of a float output relative to that output's range (0: the capture
    changed no float output; inf: one changed where the plain output's range is 0)."""
    worst = 0.0
    for name, a in plain.items():
        b = captured.get(name)
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.dtype.kind != "f" \
                or a.shape != b.shape:
            continue
        x, y = a.astype(np.float64), b.astype(np.float64)
        with np.errstate(invalid="ignore"):
            d = np.where(np.isnan(x) & np.isnan(y), 0.0, np.abs(x - y))
        # NaN on one side only (or Inf against a number) is an unbounded change.
        d = np.where(np.isnan(d), np.inf, d)
        top = float(d.max()) if d.size else 0.0
        if top > 0:
            span = _output_range(x)
            worst = max(worst, top / span if span > 0 else math.inf)
    return worst


def _observer_effect(plain: Dict[str, Any], captured: Dict[str, Any]) -> str:
    """"none" when every final output is bit-identical with and without capture, else the first
    differences: output name and max |a-b|, and for a float output that difference as a share of
    the output's range (0.446 is rounding on a logit in the hundreds, half the scale of a
    probability)."""
    diffs = []
    for name, a in plain.items():
        b = captured.get(name)
        if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
            continue
        if a.shape != b.shape or a.dtype != b.dtype:
            diffs.append(f"{name}: shape/dtype {a.shape}/{a.dtype} vs {b.shape}/{b.dtype}")
            continue
        if a.tobytes() == b.tobytes():
            continue
        if a.dtype.kind == "f":
            x = a.astype(np.float64)
            y = b.astype(np.float64)
            both_nan = np.isnan(x) & np.isnan(y)
            with np.errstate(invalid="ignore"):
                d = np.where(both_nan, 0.0, np.abs(x - y))
            if not np.any(d) and np.array_equal(np.isnan(x), np.isnan(y)):
                continue  # only NaN payload bits differ
            top = float(np.nanmax(d))
            span = _output_range(x)
            scale = (f"{top / span * 100:.3g}% of the output's range {span:.3g}" if span > 0
                     else "the output is all zero or non-finite without capture")
            diffs.append(f"{name}: max_abs_diff={top:.3g} ({scale})")
        else:
            diffs.append(f"{name}: {int(np.count_nonzero(a != b))} elements differ")
    if not diffs:
        return "none"
    return "outputs differ with capture: " + "; ".join(diffs[:4])


def _precision(proto, fp16: bool) -> Optional[str]:
    if fp16:
        return "float16"
    import onnx

    names = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.FLOAT16: "float16",
             onnx.TensorProto.BFLOAT16: "bfloat16", onnx.TensorProto.DOUBLE: "float64"}
    found = sorted({names[t.data_type] for t in proto.graph.initializer if t.data_type in names})
    if not found:
        return None
    return found[0] if len(found) == 1 else "mixed(" + ",".join(found) + ")"


def _make_session(model_bytes: bytes, providers, session_options, external_dir, what: str):
    import onnxruntime as ort

    options = session_options if session_options is not None else ort.SessionOptions()
    if external_dir is not None:
        try:
            current = options.get_session_config_entry(_EXTERNAL_DATA_FOLDER_KEY)
        except Exception:  # absent: ORT raises rather than returning a default
            current = None
        if current != external_dir:  # re-adding a key makes ORT print a warning
            options.add_session_config_entry(_EXTERNAL_DATA_FOLDER_KEY, external_dir)
    try:
        return ort.InferenceSession(model_bytes, sess_options=options, providers=providers)
    except Exception as err:
        raise ModelLoadError(f"ONNX Runtime cannot load {what}: {_first_line(err)}") from err


def _run(session, feeds, what: str, outputs: Optional[List[str]] = None) -> List[Any]:
    try:
        return session.run(outputs, feeds)
    except Exception as err:
        raise ModelRunError(f"ONNX Runtime failed to run {what}: {_first_line(err)}") from err


def record(model_path: Any, inputs: Any, path: PathLike, providers: Optional[Sequence[Any]] = None,
           session_options: Any = None, filter: Optional[str] = None,
           summary: Optional[str] = None, meta: Optional[Mapping[str, Any]] = None,
           fp16: bool = False, check_observer: bool = True,
           progress: Optional[Callable[[int, int], None]] = None,
           input_axes: Optional[Mapping[str, Any]] = None) -> Recording:
    """Runs `model_path` (a path or an onnx.ModelProto) on `inputs` with ONNX Runtime and records
    every node output of the main graph into the TDUMP file `path`.

    inputs: a dict input name -> array, a list in the model's input order, or one array for a
        one-input model. Dtypes and static dims must match the model (errors name the input).
    providers: ONNX Runtime execution providers (default: CPU). The first one names the backend
        in the run metadata.
    filter / summary: driftscope filter syntax (docs/filters.md): which tensors to record, and
        which of those to record as summaries (light mode) instead of values.
    progress(done, total): called as the planned tensors are written (the command's bar).
    meta: extra run metadata (string values); overrides the keys filled in automatically.
    fp16: record the model converted to float16 (inputs and outputs keep their types). Nodes
        ONNX Runtime cannot load converted stay float32: a RuntimeWarning and the run metadata
        key ``fp16_kept_float32`` name them.
    check_observer: also run the plain model and record in ``observer_effect`` whether its final
        outputs equal the captured run's (False saves that second run: "not checked").
    input_axes: axis names of graph inputs, ``{"input_ids": "batch,seq"}``, carried through
        every node by the rule table (docs/axes.md §1.2; undeclared inputs: their dim_params,
        else the conventions for input_ids, attention_mask, ...). A malformed declaration, an unknown input or a wrong rank raises
        InputMismatchError before anything runs.
    """
    import onnxruntime as ort

    import driftscope

    # Parse the filters before any expensive work, so a typo fails in milliseconds.
    name_filter = driftscope.Filter(filter) if filter else None
    if summary:
        driftscope.Filter(summary)
    proto, external_dir, model_name = _load_model(model_path)
    declared_axes = _declared_input_axes(proto, input_axes)
    providers = list(providers) if providers else ["CPUExecutionProvider"]
    kept_float32: List[str] = []
    if fp16:
        # From the path, so that external weights are loaded and converted too.
        proto, kept_float32 = _to_float16(proto if external_dir is None else model_path,
                                          providers)
        external_dir = None  # the converted weights live in the proto now
    what = f"'{model_name}'" + (" (converted to float16)" if fp16 else "")

    plain = _make_session(proto.SerializeToString(), providers, session_options, external_dir, what)
    feeds = _check_inputs(plain, inputs)
    numpyless = _numpyless_values(proto)
    output_names = [o.name for o in plain.get_outputs()]
    # Outputs numpy cannot hold are left out of the plain run (ORT would refuse the whole run).
    fetch = [n for n in output_names if n not in numpyless]
    plain_values = (dict(zip(fetch, _run(plain, feeds, what, fetch))) if check_observer and fetch
                    else {})
    # ONNX Runtime silently falls back to the CPU when a requested provider is unavailable:
    # the metadata names the provider that actually ran.
    active = plain.get_providers()
    del plain

    plan = _plan(proto)
    if name_filter is not None:
        # Exposing a value blocks fusions around it; values no name of which can pass the
        # filter are left inside the graph (smaller observer effect, less memory).
        plan = [e for e in plan if any(name_filter.may_accept_name(n) for n, _ in e.records())]
    capture_proto = _with_outputs(proto, [e.tensor for e in plan], numpyless)
    capture = _make_session(capture_proto.SerializeToString(), providers, session_options,
                            external_dir, what + " with intermediate outputs")
    del capture_proto
    returned = [o.name for o in capture.get_outputs() if o.name not in numpyless]
    values = dict(zip(returned, _run(capture, feeds, what + " with intermediate outputs",
                                     returned)))
    del capture
    for name, elem in numpyless.items():
        if name + _F32_SUFFIX in values:
            values[name] = _from_float32(values.pop(name + _F32_SUFFIX), elem)

    final = {k: values.get(k) for k in output_names}
    effect = _observer_effect(plain_values, final) if check_observer else "not checked"
    provider_name = active[0] if active else str(providers[0])
    metadata: Dict[str, str] = {
        "framework": f"onnxruntime {ort.__version__}",
        "backend": f"onnxruntime:{provider_name}",
        "device": "cpu" if provider_name == "CPUExecutionProvider" else provider_name,
        "model": model_name,
        "start_time": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "recorder": "driftscope.onnxruntime",
        "providers": ",".join(active),
    }
    if check_observer:  # unchecked: no key, rather than a value compare would warn about
        metadata["observer_effect"] = effect
    precision = _precision(proto, fp16)
    if precision:
        metadata["precision"] = precision
    if kept_float32:
        metadata["fp16_kept_float32"] = ",".join(kept_float32)
        warnings.warn(_kept_message(kept_float32), RuntimeWarning, stacklevel=2)
    if meta:
        metadata.update({str(k): str(v) for k, v in meta.items()})

    skipped: List[str] = []
    axis_names = _axis_names(proto, declared_axes)
    encodings = _quantized_encodings(proto, values)
    node_of = {o: n for n in proto.graph.node for o in n.output if o}
    shapes = {k: tuple(v.shape) for k, v in values.items() if isinstance(v, np.ndarray)}
    shapes.update({k: tuple(v.shape) for k, v in feeds.items()})
    names_flow = _onnx_axis_flow(proto, _topological_nodes(proto.graph), shapes, declared_axes,
                                 {e.tensor: e.records()[0][0] for e in plan if e.records()})
    flow = graph_dataflow(proto)
    with driftscope.Writer(os.fspath(path), meta=metadata, filter=filter or "") as writer:
        sink = TensorSink(writer, summary)
        for done, entry in enumerate(plan):
            if progress is not None:
                progress(done, len(plan))
            # Popping drops each array once written, so memory falls as the file grows.
            value = values.pop(entry.tensor, None)
            if not isinstance(value, np.ndarray) or (value.dtype.kind not in _RECORDABLE_KINDS
                                                     and value.dtype.name not in _NUMPYLESS.values()):
                skipped.append(entry.tensor)
                continue
            attrs = {"onnx_node": entry.node, "onnx_output": entry.tensor,
                     "ds.kind": flow.kind(entry.tensor, value.dtype.kind)}
            node = node_of.get(entry.tensor)
            if node is not None and list(node.output).index(entry.tensor) == 0:
                attrs.update(_node_axis_attrs(node, proto, value.ndim))
            flowed, flow_attrs = names_flow.attrs(entry.tensor)
            axes = flowed if flowed is not None and len(flowed) == value.ndim else _axes_for(
                axis_names.get(entry.tensor), value)
            if axes and "axes_stop" in flow_attrs:  # named by shape inference after all
                del flow_attrs["axes_stop"]
            attrs.update(flow_attrs)
            first = None  # the value's first record; its other names are copies of it
            for name, role_index in entry.records():
                attrs["ds.inputs"] = (flow.inputs_of(entry.tensor) if first is None
                                      else _core.format_inputs([first]))
                # Quantisation plumbing is recorded as such: role "other" (docs/format.md §3.3);
                # a DequantizeLinear that carries a module's value (_naming) is that output.
                role = ("other" if entry.op_type in QUANT_PLUMBING and not entry.module_output
                        else "output")
                result = sink.offer(name, value, op_type=entry.op_type, role_index=role_index,
                                    attrs=attrs, role=role, axes=axes,
                                    encoding=encodings.get(entry.tensor))
                if first is None and result is not None and result.written:
                    first = (name, role, role_index, result.occurrence)
                    flow.recorded(entry.tensor, first)
    return Recording(path=os.fspath(path), records=sink.written, observer_effect=effect,
                     outputs=final, skipped=skipped, metadata=metadata)


class TensorSink:
    """Offers tensors to a :class:`driftscope.Writer`, as values or, for names the `summary`
    filter accepts, as summaries (light mode, docs/format.md §3.6). Shared by the recorders."""

    def __init__(self, writer: Any, summary: Optional[str]) -> None:
        import driftscope

        self.writer = writer
        self.summary = driftscope.Filter(summary) if summary else None
        self.offered = 0
        self.written = 0
        self.summarised = 0

    def offer(self, name: str, value: np.ndarray, *, op_type: str, role_index: int = 0,
              attrs: Optional[Mapping[str, str]] = None, axes: Optional[str] = None,
              encoding: Optional[Mapping[str, Any]] = None, role: str = "output") -> Any:
        from .._writer import numpy_to_tdump_dtype

        index = self.offered
        self.offered += 1
        as_summary = self.summary is not None and self.summary.accepts(
            name, op_type, role, numpy_to_tdump_dtype(value.dtype),
            [int(d) for d in value.shape], index)
        write = self.writer.write_summary if as_summary else self.writer.write
        result = write(name, value, op_type=op_type, role=role, role_index=role_index,
                       attrs=attrs, axes=axes, encoding=encoding)
        if result.written:
            self.written += 1
            self.summarised += int(as_summary)
        return result


# ---------------------------------------------------------------------------------------------
# Command line: driftscope record onnx MODEL.onnx --input NAME=FILE.npy ... -o run.tdump


def _parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Run an ONNX model with ONNX Runtime and record every intermediate tensor.",
        epilog="Example: driftscope record onnx model.onnx --input input_ids=ids.npy "
               "--input attention_mask=mask.npy -o ort.tdump")
    add_record_inputs(p, "the .onnx file")
    p.add_argument("--provider", action="append", default=[], metavar="P",
                   help="execution provider, e.g. CPUExecutionProvider (repeat for a fallback list)")
    p.add_argument("--fp16", action="store_true",
                   help="record the model converted to float16 (inputs/outputs keep their types)")
    p.add_argument("--input-axes", action="append", default=[], metavar="NAME=AXES",
                   help="axis names of graph input NAME, e.g. 'x=batch,seq,hidden', carried through "
                        "every node by the rule table (docs/axes.md §1.2); repeatable")
    add_record_options(p)
    return p


def _require_regular_file(path: str) -> None:
    """A FIFO, device or directory given as an input would block np.load (a FIFO waits for a
    writer forever) or read without end: refuse anything but a regular file, without opening it
    for a blocking read (the same rule as the driftscope command, docs/cli.md "Conventions")."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
    finally:
        os.close(fd)
    if not stat.S_ISREG(mode):
        kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                else "a device or socket")
        raise ValueError(f"it is {kind}, not a regular file")


_NPY_MAGIC = b"\x93NUMPY"
def _npz_arrays(spec: str, file: str, names: Optional[Sequence[str]],
                room: List[int], expected: Mapping[str, Any]) -> Dict[str, np.ndarray]:
    """The arrays of the .npz `file` (those in `names`, else all), each member's header read and
    its size checked before its data is: a compressed member may take room[0] bytes (what is
    left of the budget room[1], updated), the stored ones no more than the file holds."""
    import zipfile

    from numpy.lib import format as npf

    from .._limits import format_size, npy_header, shape_text, why
    from .._text import printable

    out: Dict[str, np.ndarray] = {}
    archive = os.path.getsize(file)
    stored = 0
    try:
        z = zipfile.ZipFile(file)
    except Exception as err:  # BadZipFile, OSError, ...
        raise InputMismatchError(f"--input '{spec}': cannot read '{file}' as .npz "
                                 f"({why(err)})") from None
    with z:
        members = {(i.filename[:-4] if i.filename.endswith(".npy") else i.filename): i
                   for i in z.infolist()}
        if names is not None:
            missing = [n for n in names if n not in members]
            if missing:
                raise InputMismatchError(
                    f"--input '{spec}': '{file}' holds no array named '{missing[0]}' "
                    f"(it holds: {printable(', '.join(members))})")
        for key, info in members.items():
            if names is not None and key not in names:
                continue
            where = f"--input '{spec}': '{file}' member '{printable(info.filename)}'"
            try:
                with z.open(info) as f:
                    dtype, shape, need = npy_header(f)
                    start = f.tell()
            except Exception as err:  # BadZipFile, EOFError, a malformed header, ...
                raise InputMismatchError(f"{where}: {why(err)}") from None
            what = f"{where} declares {shape_text(dtype.name, shape)}, {format_size(need)}"
            if need > info.file_size - start:
                raise InputMismatchError(
                    f"{what}, but holds {format_size(max(info.file_size - start, 0))} of data "
                    f"after its header (offset {start} of the member): it is truncated")
            if key in expected and need > expected[key][0]:
                raise InputMismatchError(f"{what}; the model's input '{key}' takes "
                                         f"{expected[key][1]}, {format_size(expected[key][0])}")
            if info.compress_type == zipfile.ZIP_STORED:
                stored += need
                if stored > archive:
                    raise InputMismatchError(f"{what}, more than the {format_size(archive)} "
                                             "file holds: a malformed .npz")
            elif need > room[0]:
                left = "" if room[0] == room[1] else f"{format_size(room[0])} left of the "
                raise InputMismatchError(
                    f"{what} once decompressed, more than the {left}{format_size(room[1])} "
                    "that the compressed .npz members given with --input may take together")
            else:
                room[0] -= need
            try:
                with z.open(info) as f:
                    out[key] = npf.read_array(f, allow_pickle=False)
            except Exception as err:  # Bad CRC-32, EOF, MemoryError, ...
                raise InputMismatchError(f"{where}: {why(err)}") from None
    return out


def _npy_array(spec: str, name: str, file: str, expected: Any) -> np.ndarray:
    """The .npy `file`, its header read and its size checked against the file's (and the
    model's, when `expected` gives it) before its data is."""
    from numpy.lib import format as npf

    from .._limits import format_size, npy_header, shape_text, why

    try:
        with open(file, "rb") as f:
            try:
                dtype, shape, need = npy_header(f)
            except Exception as err:  # noqa: BLE001 - a malformed header, EOF, ...
                raise InputMismatchError(f"--input '{spec}': cannot read '{file}' as .npy "
                                         f"({why(err)})") from None
            start, size = f.tell(), os.fstat(f.fileno()).st_size
            what = (f"--input '{spec}': '{file}' declares {shape_text(dtype.name, shape)}, "
                    f"{format_size(need)}")
            if need > size - start:
                raise InputMismatchError(f"{what} from offset {start}, but the file ends at "
                                         f"offset {size}: it is truncated")
            if expected is not None and need > expected[0]:
                raise InputMismatchError(f"{what}; the model's input '{name}' takes "
                                         f"{expected[1]}, {format_size(expected[0])}")
            f.seek(0)
            try:
                return npf.read_array(f, allow_pickle=False)
            except Exception as err:  # noqa: BLE001 - EOF, MemoryError, ...
                raise InputMismatchError(f"--input '{spec}': cannot read '{file}' as .npy "
                                         f"({why(err)})") from None
    except OSError as err:
        raise InputMismatchError(f"--input '{spec}': cannot read '{file}' "
                                 f"({err.strerror or err})") from None


def load_cli_inputs(specs: Sequence[str], max_bytes: Optional[int] = None,
                    expected: Optional[Mapping[str, Any]] = None) -> Dict[str, np.ndarray]:
    """Parses ``NAME=FILE.npy`` and ``FILE.npz`` arguments (shared with driftscope.litert).

    Every array's .npy header is read first and its size checked before its data is read: a
    .npy file and a stored .npz member must fit in their file; the compressed .npz members of
    all `specs` may take max_bytes together once decompressed (default: DEFAULT_MAX_BYTES, the
    guard's input budget); expected: input name -> (most bytes, description) where the model
    fixes them. Every problem is one InputMismatchError naming the file (and member)."""
    from .._limits import DEFAULT_MAX_BYTES, why

    limit = DEFAULT_MAX_BYTES if max_bytes is None else int(max_bytes)
    room = [limit, limit]  # what is left, the whole budget
    expected = expected or {}
    feeds: Dict[str, np.ndarray] = {}
    for spec in specs:
        name, sep, file = spec.partition("=")
        if not sep:
            file, name = spec, ""
        if not file:
            raise InputMismatchError(f"--input '{spec}': expected NAME=FILE.npy or FILE.npz")
        try:
            _require_regular_file(file)
            with open(file, "rb") as f:
                head = f.read(len(_NPY_MAGIC))
        except FileNotFoundError as err:
            raise InputMismatchError(f"--input '{spec}': no such file '{file}'") from err
        except Exception as err:
            raise InputMismatchError(f"--input '{spec}': cannot read '{file}' as .npy/.npz "
                                     f"({why(err)})") from err
        if head.startswith(_NPY_MAGIC):
            if not name:
                raise InputMismatchError(f"--input '{spec}': a .npy file needs a name: NAME={file}")
            feeds[name] = _npy_array(spec, name, file, expected.get(name))
        elif head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
            feeds.update(_npz_arrays(spec, file, [name] if name else None, room, expected))
        else:
            raise InputMismatchError(f"--input '{spec}': cannot read '{file}' as .npy/.npz (it "
                                     f"starts with neither {_NPY_MAGIC!r} nor b'PK\\x03\\x04')")
    return feeds


def parse_meta(specs: Sequence[str]) -> Dict[str, str]:
    meta: Dict[str, str] = {}
    for spec in specs:
        key, sep, value = spec.partition("=")
        if not sep or not key:
            raise InputMismatchError(f"--meta '{spec}': expected KEY=VALUE")
        meta[key] = value
    return meta


def cli_main(argv: Optional[Sequence[str]] = None, prog: str = "driftscope record onnx") -> int:
    """Entry point of ``driftscope record onnx``. Returns the exit code: 0 recorded, 2 bad usage
    or input, model that fails to load or run."""
    args = parse_args(_parser(prog), argv)
    return run_recorder(prog, args, load_cli_inputs, lambda feeds, progress: record(
        args.model, feeds, args.output, providers=args.provider or None, filter=args.filter,
        summary=args.summary, meta=parse_meta(args.meta), fp16=args.fp16,
        check_observer=not args.no_observer_check, progress=progress,
        input_axes=_parse_input_axes_flags(args.input_axes)))


def _parse_input_axes_flags(specs: Sequence[str]) -> Optional[Dict[str, str]]:
    out: Dict[str, str] = {}
    for spec in specs:
        key, sep, value = spec.partition("=")
        if not sep or not key:
            raise InputMismatchError(f"--input-axes '{spec}': expected NAME=AXES")
        out[key] = value
    return out or None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(cli_main())


# -- axis names that flow (docs/axes.md §1.2): the rule table over the graph's op list ---------

_KEEP_OPS = frozenset(
    "Cast CastLike Erf Tanh Relu Sigmoid Sqrt Neg Abs Exp Log Reciprocal Gelu FastGelu Identity "
    "Dropout IsNaN IsInf Not Softplus Softsign LeakyRelu Elu Selu Celu HardSigmoid HardSwish Clip "
    "Floor Ceil Round Sign Sin Cos QuickGelu Mish Shrink ThresholdedRelu BatchNormalization "
    "InstanceNormalization GroupNormalization QuantizeLinear DequantizeLinear".split())
_BROADCAST_OPS = frozenset(
    "Add Sub Mul Div Pow Max Min Mean Sum Where Equal Less Greater LessOrEqual GreaterOrEqual And "
    "Or Xor Mod PRelu BiasGelu BitwiseAnd BitwiseOr".split())
_REGROUP_OPS = frozenset("Reshape Flatten Squeeze Unsqueeze".split())
_REDUCE_OPS = frozenset(
    "ReduceMean ReduceSum ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum "
    "ReduceLogSumExp ReduceSumSquare ArgMax ArgMin".split())
_NORM_OPS = frozenset(("LayerNormalization", "SimplifiedLayerNormalization", "RMSNormalization",
                       "SkipLayerNormalization", "SkipSimplifiedLayerNormalization"))


def _scope(node) -> str:
    """The module scope of a torch-exported node name: ``/encoder/layer.0/query/MatMul`` ->
    ``encoder.layer.0.query`` (a new feature axis is named after it, as in PyTorch)."""
    parts = [p for p in (node.name or "").split("/") if p]
    return ".".join(parts[:-1]) if len(parts) > 1 else ""


_HEAD_PASS = frozenset(("Transpose", "Mul", "Div", "Cast", "Sqrt"))


def _head_counts(nodes, shapes: Mapping[str, tuple], static: set) -> Dict[str, int]:
    """Reshape node name -> head count (axes_graph.head_counts over the ONNX ops)."""
    kind = {"MatMul": "matmul", "Reshape": "reshape"}
    return head_counts((GraphOp(kind.get(n.op_type, "pass" if n.op_type in _HEAD_PASS else ""),
                                list(n.input), list(n.output), n.name or n.output[0])
                        for n in nodes), shapes, static)


def _onnx_axis_flow(proto, nodes, shapes: Mapping[str, tuple], declared: Mapping[str, Any],
                    record_of: Mapping[str, str]) -> GraphNames:
    """Names of every value the run produced, from the graph inputs' names (input_axes=, the
    inputs' dim_params, the conventions for input_ids, attention_mask, ...) through the rule
    table, op by op."""
    import onnx
    from onnx import numpy_helper

    g = proto.graph
    inits = {t.name: t for t in g.initializer}
    consts: Dict[str, Any] = {}
    for n in nodes:
        if n.op_type == "Constant" and n.output:
            for a in n.attribute:
                if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                    consts[n.output[0]] = a.t
    static = _static_values(g, nodes) | set(inits)

    def value_of(name: str) -> Optional[np.ndarray]:
        t = inits.get(name) if name in inits else consts.get(name)
        try:
            return numpy_helper.to_array(t) if t is not None else None
        except Exception:  # noqa: BLE001
            return None

    def shape_of(name: str) -> Optional[tuple]:
        if name in shapes:
            return tuple(shapes[name])
        t = inits.get(name) if name in inits else consts.get(name)
        return tuple(int(d) for d in t.dims) if t is not None else None

    flow = GraphNames()
    sym = _symbolic_dims(proto)
    for vi in g.input:
        if vi.name in inits or vi.name not in shapes:
            continue
        shape = shapes[vi.name]
        names, how = input_names(vi.name, len(shape), declared, sym.get(vi.name))
        if names is not None and len(names) == len(shape):
            flow.declare(vi.name, names, shape, how)
    heads = _head_counts(nodes, {k: shape_of(k) or () for k in
                                 set(shapes) | set(inits) | set(consts)}, static)
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 13)
    scope_heads: Dict[str, int] = {}
    for n in nodes:
        if (n.name or n.output[0]) in heads:
            scope_heads.setdefault(_scope(n), heads[n.name or n.output[0]])

    for node in nodes:
        ins = [x for x in node.input if x]
        if not any(x in flow.named for x in ins):
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        in_shapes = {x: shape_of(x) for x in ins}

        def translate(A, node=node, ins=ins, in_shapes=in_shapes, attrs=attrs):
            op_type = node.op_type
            op: Optional[str] = None
            args: List[Any] = []
            kw: Dict[str, Any] = {}
            rank = len(in_shapes[ins[0]])
            if op_type in _KEEP_OPS:
                op, args = "relu", [A(ins[0])]
            elif op_type in _BROADCAST_OPS:
                op, args = "add", [A(x) for x in ins]
            elif op_type == "Transpose":
                perm = list(attrs.get("perm") or range(rank - 1, -1, -1))
                op, args = "permute", [A(ins[0]), perm]
            elif op_type in _REGROUP_OPS:
                op, args = "reshape", [A(ins[0])]
            elif op_type == "MatMul" and len(ins) == 2:
                if ins[1] in static and len(in_shapes[ins[1]]) == 2:
                    op, args = "linear", [A(ins[0])]
                else:
                    op, args = "matmul", [A(ins[0]), A(ins[1])]
            elif op_type == "Gemm" and not attrs.get("transA", 0) and ins[1] in static:
                op, args = "linear", [A(ins[0])]
            elif op_type == "Gather" and len(ins) == 2:
                axis = int(attrs.get("axis", 0))
                if ins[0] in static and axis == 0:
                    op, args = "embedding", [A(ins[1])]
                elif ins[0] not in static and len(in_shapes[ins[1]]) <= 1:
                    axis = axis + rank if axis < 0 else axis
                    pick = 0 if len(in_shapes[ins[1]]) == 0 else slice(None)
                    op, args = "getitem", [A(ins[0]), (slice(None),) * axis + (pick,)]
            elif op_type == "Slice":
                op, args = "getitem", [A(ins[0]), (slice(None),) * rank]
            elif op_type in _REDUCE_OPS:
                if "axes" in attrs:
                    axes = list(attrs["axes"])
                elif "axis" in attrs:
                    axes = [int(attrs["axis"])]
                elif len(ins) > 1 and value_of(ins[1]) is not None:
                    axes = [int(a) for a in np.ravel(value_of(ins[1]))]
                elif op_type.startswith("Arg"):
                    axes = [0]
                else:
                    axes = None
                op = "mean"
                args = [A(ins[0])]
                kw = {"dim": axes, "keepdim": bool(attrs.get("keepdims", 1))}
            elif op_type in ("Softmax", "LogSoftmax") and opset >= 13:
                op, args = "softmax", [A(ins[0]), int(attrs.get("axis", -1))]
            elif op_type in _NORM_OPS:
                axis = int(attrs.get("axis", -1))
                n_axes = -axis if axis < 0 else rank - axis
                op, args = "layer_norm", [A(ins[0]), [0] * n_axes]
            elif op_type == "Concat":
                op, args = "cat", [[A(x) for x in ins], int(attrs.get("axis", 0))]
            elif op_type == "Split":
                op, args = "split", [A(ins[0]), 1, int(attrs.get("axis", 0))]
            elif op_type == "Expand":
                op, args = "expand", [A(ins[0])]
            return op, args, kw

        first = node.output[0] if node.output else ""
        where = record_of.get(first, node.name or first)
        flow.step(node.op_type, where, ins, [(o, shape_of(o)) for o in node.output if o],
                  in_shapes, translate,
                  num_heads=heads.get(node.name or first, scope_heads.get(_scope(node))),
                  module=_scope(node) or where)
    return flow
