"""Record the intermediate tensors of a LiteRT (TensorFlow Lite) run into a TDUMP file.

    import driftscope.litert as dlite
    dlite.record("model.tflite", {"input": x}, "device.tdump")                       # optimized
    dlite.record("model.tflite", {"input": x}, "ref.tdump", kernels="reference")      # reference

The interpreter runs with ``experimental_preserve_all_tensors=True``, so every intermediate tensor
keeps its value after ``invoke()``; the recorder then walks the operators of the main subgraph in
execution order and writes each op's outputs, op type = the op's builtin name (``CONV_2D``).
Without a delegate the interpreter executes ops in model order; with XNNPACK, delegate nodes
replace them and the model order is recorded all the same. A delegate need not write every
output of the ops it took over (XNNPACK folds the DEQUANTIZE of float16 weights into the layer
that reads them): before a delegated run the recorder fills those buffers with a byte pattern,
and a tensor that still holds it after the run, and another pattern after a second run, was
never written; it is skipped with that reason, never recorded as values (the buffer holds zeros
or stale memory). Ops inside control-flow subgraphs (WHILE, IF bodies) are not recorded. Quantized tensors are
written as their integer values with the affine encoding LiteRT uses (``value = scale * (q -
zero_point)``, per tensor or per channel, docs/format.md §3.3.2), so ``driftscope compare``
dequantizes exactly what the kernels computed. 4-D activations of image ops get NHWC axis names
(``batch,height,width,channels``), so a comparison against an NCHW dump can permute them.
Axis names declared on the inputs (``input_axes=``, or the conventions for input_ids,
attention_mask, ... by signature name) flow through the ops by the rule table the PyTorch and
ONNX recorders use (axes_rules, through axes_graph; docs/axes.md §1.3).
Tensors that hold no data TDUMP can store (resource-variable handles, variant and string
tensors) are never read, and every other read is first tried in a forked probe process: a tensor
LiteRT cannot hand out is skipped and named in a RuntimeWarning instead of taking the process
down (``Recording.skipped`` lists them; the dump's metadata key ``not_recorded`` names them with
the reason).

Kernel choices (all on the CPU):
  "optimized"  the interpreter's default: optimized builtin kernels plus the XNNPACK delegate,
               i.e. what an app gets by default;
  "builtin"    optimized builtin kernels without the default delegate;
  "reference"  the reference kernels (BuiltinRefOpResolver), straightforward loops that are the
               usual yardstick for the optimized ones.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from .._cli import add_record_inputs, add_record_options, parse_args, run_recorder
from . import axes_rules as _rules
from .axes_graph import (GraphNames, GraphOp, Named, declared_input_axes, head_counts,
                         input_names)
from .dataflow import DataFlow, GraphNode
from ..errors import Error  # noqa: F401  (callers catch driftscope.litert.Error)
from .onnxruntime import (
    InputMismatchError,
    ModelLoadError,
    ModelRunError,
    Recording,
    TensorSink,
    _feeds_by_name,
    _first_line,
    _parse_input_axes_flags,
    load_cli_inputs,
    parse_meta,
)

__all__ = ["record", "KERNELS", "NHWC_AXES", "cli_main"]

KERNELS = ("optimized", "builtin", "reference")
NHWC_AXES = "batch,height,width,channels"

# Ops whose 4-D data input and output are NHWC by definition (TFLite's image ops).
_IMAGE_OPS = frozenset({
    "CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "AVERAGE_POOL_2D", "MAX_POOL_2D",
    "L2_POOL_2D", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "SPACE_TO_DEPTH",
    "DEPTH_TO_SPACE", "LOCAL_RESPONSE_NORMALIZATION", "L2_NORMALIZATION",
})
# Ops whose output keeps the layout of their first input (elementwise, activations, requantize).
_LAYOUT_PRESERVING = frozenset({
    "ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "RELU", "RELU6", "RELU_N1_TO_1",
    "RELU_0_TO_1", "LEAKY_RELU", "PRELU", "LOGISTIC", "TANH", "HARD_SWISH", "GELU", "ABS", "NEG",
    "QUANTIZE", "DEQUANTIZE", "CAST", "PAD", "PADV2", "MIRROR_PAD", "SQUARED_DIFFERENCE",
    "EXP", "SQRT", "RSQRT", "SQUARE", "POW", "FLOOR", "CEIL", "ROUND", "ELU",
})

_TFL_TO_NUMPY_OK = frozenset("fiub")


def _kernel_resolver(kernels: str):
    from ai_edge_litert.interpreter import OpResolverType

    table = {
        "optimized": OpResolverType.BUILTIN,
        "builtin": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
        "reference": OpResolverType.BUILTIN_REF,
    }
    if kernels not in table:
        raise InputMismatchError(
            f"kernels={kernels!r} is not one of {', '.join(repr(k) for k in KERNELS)}")
    return table[kernels]


def _read_model(model: Any) -> Tuple[bytes, str]:
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model), "model.tflite"
    path = Path(os.fspath(model))
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ModelLoadError(f"cannot load LiteRT model '{path}': no such file") from None
    except OSError as err:
        raise ModelLoadError(f"cannot load LiteRT model '{path}': {_first_line(err)}") from err
    return data, path.name


class _ModelInfo:
    """What the flatbuffer says about the main subgraph's tensors, read before LiteRT sees it."""

    def __init__(self, constant: Set[int], types: List[str], model: Any = None) -> None:
        self.constant = constant  # indices of tensors with buffer data (weights)
        self.types = types        # TensorType name of each tensor ("FLOAT32", "RESOURCE", ...)
        self.model = model        # the flatbuffer's Model table (op options, small constants)
        self.inputs: Dict[str, Optional[int]] = {}  # main subgraph input name -> rank
        self.signature: Dict[str, str] = {}  # signature input name -> tensor name


def _check_flatbuffer(data: bytes, name: str) -> _ModelInfo:
    """A .tflite file is a flatbuffer with file identifier "TFL3" at bytes 4..8. The interpreter
    trusts offsets inside the buffer, so anything else is refused before it gets there."""
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise ModelLoadError(
            f"cannot load LiteRT model '{name}': not a TFLite flatbuffer (file identifier "
            f"{data[4:8]!r} at offset 4, expected b'TFL3')")
    try:
        from ai_edge_litert import schema_py_generated as schema

        model = schema.Model.GetRootAs(data, 0)
        if model.SubgraphsLength() < 1:
            raise ModelLoadError(f"cannot load LiteRT model '{name}': the model has no subgraph")
        sg = model.Subgraphs(0)
        type_names = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
        constant: Set[int] = set()
        types: List[str] = []
        for i in range(sg.TensorsLength()):
            t = sg.Tensors(i)
            types.append(type_names.get(t.Type(), f"type {t.Type()}"))
            b = t.Buffer()
            if 0 < b < model.BuffersLength():
                buf = model.Buffers(b)
                # Data inline, or (models over 2 GiB) at an offset after the flatbuffer.
                if buf.DataLength() > 0 or buf.Size() > 0:
                    constant.add(i)
        info = _ModelInfo(constant, types, model)
        for i in range(sg.InputsLength()):
            t = sg.Tensors(sg.Inputs(i))
            info.inputs[(t.Name() or b"").decode("utf-8", "replace")] = (
                t.ShapeSignatureLength() or t.ShapeLength())
        for k in range(model.SignatureDefsLength()):
            sd = model.SignatureDefs(k)
            if sd.SubgraphIndex() != 0:
                continue
            for j in range(sd.InputsLength()):
                m = sd.Inputs(j)
                idx = m.TensorIndex()
                if 0 <= idx < sg.TensorsLength():
                    info.signature[(m.Name() or b"").decode("utf-8", "replace")] = (
                        sg.Tensors(idx).Name() or b"").decode("utf-8", "replace")
        return info
    except ModelLoadError:
        raise
    except Exception as err:
        raise ModelLoadError(
            f"cannot load LiteRT model '{name}': malformed flatbuffer ({_first_line(err)})") from err


def _interpreter(data: bytes, name: str, kernels: str, num_threads: Optional[int], preserve: bool):
    from ai_edge_litert.interpreter import Interpreter

    with warnings.catch_warnings():
        # It warns that preserving every tensor costs memory: that is what recording means.
        warnings.simplefilter("ignore")
        try:
            it = Interpreter(model_content=data, num_threads=num_threads,
                             experimental_op_resolver_type=_kernel_resolver(kernels),
                             experimental_preserve_all_tensors=preserve)
        except (ValueError, RuntimeError) as err:
            raise ModelLoadError(f"LiteRT cannot load '{name}': {_first_line(err)}") from err
    return it


def _shape_text(d: Mapping[str, Any]) -> str:
    sig = d.get("shape_signature")
    dims = sig if sig is not None and len(sig) else d["shape"]
    return "[" + ", ".join("?" if int(x) < 0 else str(int(x)) for x in dims) + "]"


def _feed(it, inputs: Any, name: str) -> None:
    """Sets the inputs; resizes dynamic dims; errors name the input and the expected shape."""
    declared = it.get_input_details()
    feeds = _feeds_by_name(inputs, [d["name"] for d in declared])
    by_name = {d["name"]: d for d in declared}
    # Converted models name input tensors "serving_default_image:0"; their SignatureDef keeps the
    # names the user knows ("image"). Accept those too when they are unambiguous.
    by_index = {int(d["index"]): d["name"] for d in declared}
    aliases: Dict[str, str] = {}
    try:
        signatures = it._get_full_signature_list()
    except Exception:  # older runtimes without signatures
        signatures = {}
    for sig in signatures.values():
        if sig.get("subgraph_index", 0) != 0:
            continue
        for sig_name, index in sig.get("inputs", {}).items():
            target = by_index.get(int(index))
            if target is not None and sig_name not in by_name:
                aliases[sig_name] = target if sig_name not in aliases else ""
    for key in list(feeds):
        if key not in by_name and aliases.get(key):
            feeds[aliases[key]] = feeds.pop(key)
    for key in feeds:
        if key not in by_name:
            known = {v: k for k, v in aliases.items() if v}
            raise InputMismatchError(
                f"unknown input '{key}'; the model's inputs are: " + ", ".join(
                    f"{d['name']} ({np.dtype(d['dtype']).name} {_shape_text(d)}"
                    + (f", signature name '{known[d['name']]}'" if d["name"] in known else "")
                    + ")" for d in declared))
    resized = False
    values = {}
    for d in declared:
        if d["name"] not in feeds:
            raise InputMismatchError(
                f"missing input '{d['name']}': expected {np.dtype(d['dtype']).name} {_shape_text(d)}")
        v = np.asarray(feeds[d["name"]])
        if v.dtype != np.dtype(d["dtype"]):
            raise InputMismatchError(
                f"input '{d['name']}' has dtype {v.dtype}, the model expects "
                f"{np.dtype(d['dtype']).name} {_shape_text(d)}")
        sig = d.get("shape_signature")
        sig = list(sig) if sig is not None and len(sig) else list(d["shape"])
        if len(sig) != v.ndim or any(s >= 0 and s != x for s, x in zip(sig, v.shape)):
            raise InputMismatchError(
                f"input '{d['name']}' has shape {tuple(v.shape)}, the model expects "
                f"{np.dtype(d['dtype']).name} {_shape_text(d)}")
        if tuple(d["shape"]) != v.shape:
            it.resize_tensor_input(d["index"], list(v.shape), strict=True)
            resized = True
        values[d["index"]] = v
    try:
        it.allocate_tensors()
    except (ValueError, RuntimeError) as err:
        raise ModelLoadError(f"LiteRT cannot prepare '{name}'"
                             f"{' for these input shapes' if resized else ''}: "
                             f"{_first_line(err)}") from err
    for index, v in values.items():
        it.set_tensor(index, v)


def _invoke(it, name: str) -> None:
    try:
        it.invoke()
    except (ValueError, RuntimeError) as err:
        raise ModelRunError(f"LiteRT failed to run '{name}': {_first_line(err)}") from err


def _encoding(details: Mapping[str, Any], value: np.ndarray) -> Optional[Dict[str, Any]]:
    """The TDUMP affine encoding of a quantized LiteRT tensor, or None for a raw one."""
    if value.dtype.kind not in "iu":
        return None
    q = details.get("quantization_parameters") or {}
    scales = np.asarray(q.get("scales", []), dtype=np.float64).ravel()
    zps = np.asarray(q.get("zero_points", []), dtype=np.int64).ravel()
    if scales.size == 0 or not np.all(np.isfinite(scales)) or np.all(scales == 0):
        return None  # an integer tensor that holds integers (indices, shapes)
    if zps.size == 0:
        zps = np.zeros_like(scales, dtype=np.int64)
    if scales.size == 1:
        return {"kind": "affine_tensor", "scale": float(scales[0]), "zero_point": int(zps[0])}
    axis = int(q.get("quantized_dimension", 0))
    if zps.size == 1:
        zps = np.full(scales.size, zps[0], dtype=np.int64)
    if not (0 <= axis < value.ndim) or value.shape[axis] != scales.size or zps.size != scales.size:
        raise ModelRunError(
            f"tensor '{details.get('name')}' has {scales.size} quantization scales along axis "
            f"{axis}, but its shape is {tuple(value.shape)}")
    return {"kind": "affine_channel", "axis": axis, "scales": scales, "zero_points": zps}


def _display_name(raw: str, op_index: int, op_name: str, out_index: int) -> str:
    # Converter-fused tensors are named "a/b/Relu;a/b/BiasAdd;a/b/Conv2D": the first name is the
    # op that produced the value. Unnamed tensors get a name from their op.
    first = raw.split(";", 1)[0].strip()
    return first or f"{op_name.lower()}_{op_index}" + (f":{out_index}" if out_index else "")


def record(model_path: Any, inputs: Any, path: Any, kernels: str = "optimized",
           filter: Optional[str] = None, summary: Optional[str] = None,
           meta: Optional[Mapping[str, Any]] = None, num_threads: Optional[int] = None,
           check_observer: bool = True, parameters: bool = False,
           progress: Optional[Callable[[int, int], None]] = None,
           input_axes: Optional[Mapping[str, Any]] = None) -> Recording:
    """Runs a .tflite model (path or bytes) on `inputs` with the LiteRT interpreter and records
    every op's outputs into the TDUMP file `path`.

    inputs: dict input tensor name -> array, a list in input order, or one array.
    kernels: "optimized" (default interpreter: builtin kernels + XNNPACK), "builtin" (without the
        default delegate) or "reference" (reference kernels).
    filter / summary: driftscope filter syntax: which tensors to record, which as summaries.
    progress(done, total): called as the planned tensors are written (the command's bar).
    meta: extra run metadata; overrides the keys filled in automatically.
    check_observer: also run without preserving tensors and record in ``observer_effect``
        whether the final outputs agree.
    parameters: also record each op's constant inputs (weights, biases) before its outputs,
        role "parameter", role_index = input position; quantized weights keep their per-channel
        encoding.
    input_axes: axis names of model inputs, ``{"x": "batch,seq,hidden"}``, keyed by input tensor
        name or signature name, carried through every op by the rule table (docs/axes.md
        §1.3; undeclared inputs: the conventions for input_ids, attention_mask, ... by their
        signature or tensor name). A malformed declaration, an unknown input or a wrong rank
        raises InputMismatchError before anything runs.
    """
    import driftscope

    from .onnxruntime import _observer_effect

    _kernel_resolver(kernels)  # reject a bad choice, and bad filters, before any work
    for text in (filter, summary):
        if text:
            driftscope.Filter(text)
    data, name = _read_model(model_path)
    info = _check_flatbuffer(data, name)
    declared_axes = declared_input_axes(input_axes, info.inputs, InputMismatchError,
                                        info.signature)
    constant = info.constant
    name_filter = driftscope.Filter(filter) if filter else None

    plain_values: Dict[str, np.ndarray] = {}
    if check_observer:
        plain = _interpreter(data, name, kernels, num_threads, preserve=False)
        _feed(plain, inputs, name)
        _invoke(plain, name)
        plain_values, _ = _read_outputs(plain, info)
        del plain

    it = _interpreter(data, name, kernels, num_threads, preserve=True)
    _feed(it, inputs, name)  # allocates: the default delegate takes its nodes here
    ops_all = it._get_ops_details()
    delegated = any(op["op_name"] == "DELEGATE" for op in ops_all)
    ops = [op for op in ops_all if op["op_name"] != "DELEGATE"]
    plan = _plan_reads(it, ops, constant, parameters, name_filter)
    outputs = [int(d["index"]) for d in it.get_output_details()]
    watched: List[int] = []
    if delegated:
        # A delegate need not write every tensor of the nodes it took over (XNNPACK folds a
        # DEQUANTIZE of float16 weights into the convolution reading them): such a buffer keeps
        # whatever it held, zeros or garbage. Filling the buffers first shows which stay unwritten.
        watched = _fill(it, info, constant, [e[1] for e in plan if e[0] == "output"] + outputs,
                        _UNWRITTEN[0])
    _invoke(it, name)
    # Every planned read is type-checked and tried in a child process before this process
    # touches any tensor (see _Reader).
    reader = _Reader(it, info, [e[1] for e in plan] + outputs)
    if watched:
        reader.problems.update(_unwritten(reader, watched, ops_all, name, lambda: _second_run(
            data, name, kernels, num_threads, inputs)))
    final, final_skipped = _read_outputs(it, info, reader)
    planned = {e[2] for e in plan}
    effect = _observer_effect(plain_values, final) if check_observer else "not checked"

    from importlib import metadata as _md

    try:
        version = _md.version("ai-edge-litert")
    except _md.PackageNotFoundError:  # pragma: no cover - other LiteRT distributions
        version = "unknown"
    backend = {"optimized": "xnnpack" if delegated else "builtin", "builtin": "builtin",
               "reference": "reference"}[kernels]
    metadata: Dict[str, str] = {
        "framework": f"litert {version}",
        "backend": f"litert:{backend}",
        "device": "cpu",
        "model": name,
        "kernels": kernels,
        "start_time": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "recorder": "driftscope.litert",
    }

    if check_observer:  # unchecked: no key, rather than a value compare would warn about
        metadata["observer_effect"] = effect

    # Which tensors are NHWC: outputs of image ops, and of layout-preserving ops fed by one.
    # A 4-D model input that feeds an image op's data input is NHWC too.
    nhwc: Set[int] = set()
    for op in ops:
        ins = [int(t) for t in op["inputs"] if int(t) >= 0]
        if op["op_name"] in _IMAGE_OPS and ins:
            nhwc.add(ins[0])
    for op in ops:
        ins = [int(t) for t in op["inputs"] if int(t) >= 0]
        if op["op_name"] in _IMAGE_OPS or (op["op_name"] in _LAYOUT_PRESERVING and ins
                                           and ins[0] in nhwc):
            nhwc.update(int(t) for t in op["outputs"] if int(t) >= 0)

    # name -> why it was not recorded (a model output the plan holds is reported there)
    skipped: Dict[str, str] = {n: w for n, w in final_skipped.items() if n not in planned}
    known = dict(skipped)
    known.update((e[2], reader.problems[e[1]]) for e in plan if e[1] in reader.problems)
    if known:  # in the file too, so a comparison can tell a tensor never read from a lost one
        metadata["not_recorded"] = _skipped_message(known, prefix="", limit=64)[:8192]
    flow = _graph_dataflow(it, ops, info)
    names_flow = _axis_flow(it, ops, info, declared_axes, nhwc,
                            {e[1]: e[2] for e in plan if e[0] == "output"})
    with driftscope.Writer(os.fspath(path), meta=_with_precision(metadata, it, ops, meta),
                           filter=filter or "") as writer:
        sink = TensorSink(writer, summary)
        for done, (role, t, tname, op, j) in enumerate(plan):
            if progress is not None:
                progress(done, len(plan))
            if not writer.wants(tname):
                continue
            value, why = reader.read(t)
            if value is None:
                skipped[tname] = why
                continue
            details = it._get_tensor_details(t, 0)
            attrs = {"tflite_tensor": details["name"], "tflite_tensor_index": str(t),
                     "tflite_op_index": str(op["index"])}
            axes: Any = NHWC_AXES if (role == "output" and t in nhwc and value.ndim == 4) else None
            if role == "output":
                flowed, flow_attrs = names_flow.attrs(str(t))
                if flowed is not None and len(flowed) == value.ndim:
                    axes = flowed
                elif axes and "axes_stop" in flow_attrs:  # named by its layout after all
                    del flow_attrs["axes_stop"]
                attrs.update(flow_attrs)
            attrs["ds.kind"] = flow.kind(str(t), value.dtype.kind)
            if role == "output":
                attrs["ds.inputs"] = flow.inputs_of(str(t))
            result = sink.offer(tname, value, op_type=op["op_name"], role_index=j, role=role,
                                attrs=attrs, axes=axes, encoding=_encoding(details, value))
            if role == "output" and result is not None and result.written:
                flow.recorded(str(t), (tname, role, j, result.occurrence))
    if skipped:
        warnings.warn(_skipped_message(skipped), RuntimeWarning, stacklevel=2)
    return Recording(path=os.fspath(path), records=sink.written, observer_effect=effect,
                     outputs=final, skipped=list(skipped), metadata=metadata)


# TensorTypes whose data LiteRT's get_tensor copies out as a plain numpy array that TDUMP can
# hold. Everything else is never read: RESOURCE and VARIANT tensors hold a handle, not data, and
# LiteRT's Python binding decodes them as string tensors, reading string offsets out of a 4-byte
# resource id (SIGSEGV once the id is 2 or more: issue 7, bug 17); packed 4-/2-bit, fp8, bf16
# and complex types have no faithful numpy copy or no TDUMP dtype.
_READABLE_TYPES = frozenset({
    "FLOAT32", "FLOAT16", "FLOAT64", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16",
    "UINT32", "UINT64", "BOOL",
})


# Casts by their output type (TensorType names): what a CAST op turns its input into.
_FLOAT_TYPES = frozenset({"FLOAT32", "FLOAT16", "FLOAT64", "BFLOAT16"})


def _graph_dataflow(it, ops, info: _ModelInfo) -> DataFlow:
    """The main subgraph's data flow for ds.inputs / ds.kind (driftscope._dataflow); values are
    named by tensor index."""
    def type_kind(t: int) -> str:
        name = info.types[t] if 0 <= t < len(info.types) else "FLOAT32"
        return "float" if name in _FLOAT_TYPES else "bool" if name == "BOOL" else "int"

    nodes = []
    for op in ops:
        outs = [int(x) for x in op["outputs"] if int(x) >= 0]
        cast_to = type_kind(outs[0]) if op["op_name"] in ("CAST", "DEQUANTIZE") and outs else None
        nodes.append(GraphNode(op["op_name"], [str(int(x)) for x in op["inputs"] if int(x) >= 0],
                               [str(x) for x in outs], cast_to))
    constants = {str(t): type_kind(t) == "float" for t in info.constant}
    inputs = {}
    for d in it.get_input_details():
        k = type_kind(int(d["index"]))
        inputs[str(int(d["index"]))] = {"int": "index", "bool": "mask"}.get(k, k)
    return DataFlow(nodes, constants, inputs)


# -- axis names that flow (docs/axes.md §1.3): the rule table over the .tflite op list --------

_KEEP_OPS = frozenset(
    "RELU RELU6 RELU_N1_TO_1 RELU_0_TO_1 LEAKY_RELU LOGISTIC TANH HARD_SWISH GELU ABS NEG EXP LOG "
    "SQRT RSQRT SQUARE FLOOR CEIL ROUND ELU SIN COS SIGN QUANTIZE DEQUANTIZE CAST LOGICAL_NOT "
    "ZEROS_LIKE ONES_LIKE".split())
_BROADCAST_OPS = frozenset(
    "ADD SUB MUL DIV MAXIMUM MINIMUM SQUARED_DIFFERENCE POW FLOOR_DIV FLOOR_MOD EQUAL NOT_EQUAL "
    "LESS LESS_EQUAL GREATER GREATER_EQUAL LOGICAL_AND LOGICAL_OR SELECT SELECT_V2 PRELU".split())
_REGROUP_OPS = frozenset(("RESHAPE", "SQUEEZE", "EXPAND_DIMS"))
_REDUCE_OPS = frozenset(("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD", "REDUCE_ANY",
                         "REDUCE_ALL"))
_PAD_OPS = frozenset(("PAD", "PADV2", "MIRROR_PAD", "SLICE"))
# What lies between a normalisation's MEAN and the product or quotient that applies it.
_NORM_CHAIN = frozenset(("ADD", "RSQRT", "SQRT", "MAXIMUM", "DIV", "MUL"))
_HEAD_PASS = frozenset(("TRANSPOSE", "MUL", "DIV", "CAST", "SQRT", "DEQUANTIZE", "QUANTIZE"))


def _scope(where: str) -> str:
    """A tensor name as a module path, which a new feature axis is named after (as in PyTorch):
    ``model/encoder/q_proj/MatMul`` -> ``model.encoder.q_proj`` (TensorFlow's op names, which
    start with a capital, are dropped), ``mlp/up`` -> ``mlp.up``."""
    parts = [p for p in where.split("/") if p]
    if len(parts) > 1 and parts[-1][:1].isupper():
        parts = parts[:-1]
    return ".".join(parts) or where


class _Options:
    """Builtin options and small constant inputs of the main subgraph's ops, read from the
    flatbuffer (the interpreter's op details carry neither)."""

    def __init__(self, info: _ModelInfo) -> None:
        from ai_edge_litert import schema_py_generated as schema

        self.s = schema
        self.model = info.model
        self.sg = info.model.Subgraphs(0) if info.model is not None else None
        self.types = info.types

    def table(self, op_index: int, cls_name: str) -> Any:
        """The op's options table as `cls_name` (``ConcatenationOptions``), or None."""
        if self.sg is None or not 0 <= op_index < self.sg.OperatorsLength():
            return None
        tab = self.sg.Operators(op_index).BuiltinOptions()
        if tab is None:
            return None
        o = getattr(self.s, cls_name)()
        o.Init(tab.Bytes, tab.Pos)
        return o

    def ints(self, t: int) -> Optional[List[int]]:
        """A small INT32/INT64 constant (a perm, axes, an axis), or None."""
        if self.sg is None or not 0 <= t < self.sg.TensorsLength():
            return None
        dtype = {"INT32": np.int32, "INT64": np.int64}.get(self.types[t])
        b = self.sg.Tensors(t).Buffer()
        if dtype is None or not 0 < b < self.model.BuffersLength():
            return None
        raw = self.model.Buffers(b).DataAsNumpy()
        if not isinstance(raw, np.ndarray) or raw.size == 0 or raw.size > 64:
            return None
        return [int(x) for x in np.frombuffer(raw.tobytes(), dtype=dtype)]


def _input_axes_of(it, info: _ModelInfo, declared: Mapping[str, Sequence[str]],
                   nhwc: Set[int]) -> List[Tuple[int, Tuple[Optional[str], ...], str, str]]:
    """(tensor index, names, where from, its signature or tensor name) of the model inputs that
    have names: declared ones, then the conventions for input_ids, attention_mask, ... by
    signature name, tensor name, or the tensor name without the converter's
    ``serving_default_`` and ``:0``. An NHWC ``pixel_values`` (one that feeds an image op) is
    named batch,height,width,channels."""
    by_tensor = {v: k for k, v in info.signature.items()}
    out = []
    for d in it.get_input_details():
        name, t = d["name"], int(d["index"])
        rank = len(d["shape"])
        names, how = input_names(name, rank, declared)
        if names is None:
            bare = name.split(":", 1)[0]
            bare = bare[len("serving_default_"):] if bare.startswith("serving_default_") else bare
            for key in (by_tensor.get(name), bare):
                if key and key in _rules.CONVENTIONS:
                    names, how = input_names(key, rank, {})
                    if names is not None and key == "pixel_values" and t in nhwc:
                        names = tuple(NHWC_AXES.split(","))
                    break
        if names is not None and len(names) == rank:
            out.append((t, names, how, by_tensor.get(name) or name))
    return out


def _norm_source(op: Mapping[str, Any], producer: Mapping[int, Any], opts: _Options,
                 used: Set[int], centred: Set[int]) -> Optional[Tuple[int, List[int], str]]:
    """A decomposed normalisation applied by `op` (tensors are indices): ``x - MEAN(x)``
    (SUB or SQUARED_DIFFERENCE: a layer norm's centring), or ``x * f(MEAN(x*x))`` (MUL or DIV
    through ADD/RSQRT/SQRT: an RMS norm) with x not already centred. Returns (x, the MEAN's axes,
    kind) once per MEAN, else None."""
    ins = [int(t) for t in op["inputs"] if int(t) >= 0]
    if len(ins) != 2:
        return None
    for x, other in ((ins[0], ins[1]), (ins[1], ins[0])):
        p = producer.get(other)
        if op["op_name"] in ("SUB", "SQUARED_DIFFERENCE"):
            if p is not None and p["op_name"] == "MEAN" and int(p["inputs"][0]) == x:
                mean = p
                kind = "layer_norm"
            else:
                continue
        elif op["op_name"] in ("MUL", "DIV") and x not in centred:
            for _ in range(4):  # through ADD eps, RSQRT, SQRT, MAXIMUM
                if p is None or p["op_name"] not in _NORM_CHAIN:
                    break
                p = next((producer.get(int(t)) for t in p["inputs"] if int(t) in producer), None)
            if p is None or p["op_name"] != "MEAN":
                continue
            sq = producer.get(int(p["inputs"][0]))
            if sq is None or not (
                    (sq["op_name"] == "SQUARE" and int(sq["inputs"][0]) == x)
                    or (sq["op_name"] == "MUL" and [int(t) for t in sq["inputs"]] == [x, x])
                    or (sq["op_name"] == "POW" and int(sq["inputs"][0]) == x)):
                continue
            mean = p
            kind = "rms_norm"
        else:
            return None
        key = int(mean["outputs"][0])
        axes = opts.ints(int(mean["inputs"][1])) if len(mean["inputs"]) > 1 else None
        keep = opts.table(int(mean["index"]), "ReducerOptions")
        if key in used or axes is None or keep is None or not keep.KeepDims():
            continue
        used.add(key)
        return x, axes, kind
    return None


def _axis_flow(it, ops, info: _ModelInfo, declared: Mapping[str, Sequence[str]],
               nhwc: Set[int], record_of: Mapping[int, str]) -> GraphNames:
    """Names of every tensor the run produced, from the model inputs' names through the rule
    table (axes_rules, the same as PyTorch's and ONNX's), op by op in model order. Tensors are
    keyed by index (as text)."""
    flow = GraphNames()
    try:
        starts = _input_axes_of(it, info, declared, nhwc)
        if not starts:
            return flow
        opts = _Options(info)
    except Exception:  # noqa: BLE001 - naming never breaks a recording
        return flow
    shapes: Dict[int, Tuple[int, ...]] = {}

    def shape(t: int) -> Optional[Tuple[int, ...]]:
        if t not in shapes:
            try:
                shapes[t] = tuple(int(x) for x in it._get_tensor_details(t, 0)["shape"])
            except Exception:  # noqa: BLE001
                return None
        return shapes[t]

    for t, names, how, label in starts:
        flow.declare(str(t), names, shape(t) or (), how, label)
    static = set(info.constant)
    producer = {int(t): op for op in ops for t in op["outputs"] if int(t) >= 0}
    kinds = {"BATCH_MATMUL": "matmul", "RESHAPE": "reshape"}
    heads = head_counts((GraphOp(kinds.get(op["op_name"], "pass" if op["op_name"] in _HEAD_PASS
                                           else ""),
                                 [str(int(x)) for x in op["inputs"]],
                                 [str(int(x)) for x in op["outputs"]], str(op["index"]))
                         for op in ops),
                        {str(t): shape(t) or () for op in ops for t in
                         list(op["inputs"]) + list(op["outputs"]) if int(t) >= 0},
                        {str(t) for t in static})
    used_means: Set[int] = set()
    centred: Set[int] = set()
    for op in ops:
        outs = [int(t) for t in op["outputs"] if int(t) >= 0]
        try:
            _axis_step(it, op, flow, opts, shape, static, producer, heads, record_of,
                       used_means, centred)
        except Exception:  # noqa: BLE001 - naming never breaks a recording: the names stop
            for t in outs:
                flow.named[str(t)] = Named(None, stop=f"names stop at {op['op_name']} (no rule)")
    return flow


def _axis_step(it, op: Mapping[str, Any], flow: GraphNames, opts: _Options,
               shape: Callable[[int], Optional[Tuple[int, ...]]], static: Set[int],
               producer: Mapping[int, Any], heads: Mapping[str, int],
               record_of: Mapping[int, str], used_means: Set[int], centred: Set[int]) -> None:
    """One op of the model: its rule call (the adapter from TFLite op types to the table)."""
    name = op["op_name"]
    ins = [int(t) for t in op["inputs"] if int(t) >= 0]
    outs = [int(t) for t in op["outputs"] if int(t) >= 0]
    keys = [str(t) for t in ins]
    if not outs or not any(k in flow.named for k in keys):
        return
    where = record_of.get(outs[0]) or _display_name(
        it._get_tensor_details(outs[0], 0)["name"], op["index"], name, 0)
    module = _scope(where)
    out_shapes = [(str(t), shape(t)) for t in outs]
    in_shapes = {str(t): shape(t) for t in ins}
    num_heads = heads.get(str(op["index"]))
    label = name
    try:
        norm = _norm_source(op, producer, opts, used_means, centred) if name in (
            "SUB", "SQUARED_DIFFERENCE", "MUL", "DIV") else None
    except Exception:  # noqa: BLE001
        norm = None
    if norm is not None:
        x, axes, kind = norm
        if kind == "layer_norm":
            centred.add(outs[0])
        label = f"{kind} (MEAN, {name})"
        flow.step(label, where, [str(x)], out_shapes[:1], in_shapes,
                  lambda A, x=x, axes=axes: ("layer_norm", [A(str(x))], {"dims": axes}),
                  module=module)
        return
    if name in _IMAGE_OPS and str(ins[0]) in flow.named and len(out_shapes[0][1] or ()) == 4:
        # NHWC by definition: the layout names, as the recorder has always written them
        # (the spatial sizes change, so a rule would lose them).
        src = flow.named[str(ins[0])]
        for t, s in out_shapes:
            if s is not None and len(s) == 4 and src.names is not None:
                n = tuple(NHWC_AXES.split(","))
                flow.named[t] = src.then(n, f"{name} at {where}: NHWC {NHWC_AXES}")
            else:
                flow.step(name, where, keys, [(t, s)], in_shapes,
                          lambda A: (None, [], {}))
        return
    if name == "FULLY_CONNECTED" and len(out_shapes[0][1] or ()) < len(in_shapes[keys[0]] or ()):
        # keep_num_dims=False: [..., k] flattened to [n, k] first, then the product
        s_in = in_shapes[keys[0]] or ()
        flat = (f"{outs[0]}~flat", (int(np.prod(s_in[:-1], dtype=np.int64)), s_in[-1]))
        flow.step(name, where, keys[:1], [flat], in_shapes,
                  lambda A: ("reshape", [A(keys[0])], {}), module=module)
        in_shapes[flat[0]] = flat[1]
        flow.step(name, where, [flat[0]], out_shapes[:1], in_shapes,
                  lambda A: ("linear", [A(flat[0])], {}), module=module)
        return

    def translate(A, op=op, name=name, ins=ins, keys=keys, in_shapes=in_shapes):
        rank = len(in_shapes[keys[0]] or ())
        if name in _KEEP_OPS:
            return "relu", [A(keys[0])], {}
        if name in _BROADCAST_OPS:
            return "add", [A(k) for k in keys], {}
        if name in _REGROUP_OPS:
            return "reshape", [A(keys[0])], {}
        if name == "TRANSPOSE":
            return "permute", [A(keys[0]), opts.ints(ins[1])], {}
        if name == "FULLY_CONNECTED":
            return "linear", [A(keys[0])], {}
        if name == "BATCH_MATMUL":
            o = opts.table(int(op["index"]), "BatchMatMulOptions")
            adj = (bool(o.AdjX()), bool(o.AdjY())) if o is not None else (False, False)
            if ins[1] in static and len(in_shapes[keys[1]] or ()) == 2 and not adj[0]:
                return "linear", [A(keys[0])], {}
            a, b = A(keys[0]), A(keys[1])
            return "matmul", [_swap(a) if adj[0] else a, _swap(b) if adj[1] else b], {}
        if name == "L2_NORMALIZATION":  # over the last axis
            return "layer_norm", [A(keys[0]), [0]], {}
        if name in ("SOFTMAX", "LOG_SOFTMAX"):
            return "softmax", [A(keys[0]), -1], {}  # TFLite's softmax: the last axis
        if name in _REDUCE_OPS or name in ("ARG_MAX", "ARG_MIN"):
            axes = opts.ints(ins[1]) if len(ins) > 1 else None
            o = opts.table(int(op["index"]), "ReducerOptions") if name in _REDUCE_OPS else None
            keep = bool(o.KeepDims()) if o is not None else False
            return "mean", [A(keys[0])], {"dim": axes, "keepdim": keep}
        if name == "CONCATENATION":
            o = opts.table(int(op["index"]), "ConcatenationOptions")
            return "cat", [[A(k) for k in keys], int(o.Axis())], {}
        if name == "PACK":
            o = opts.table(int(op["index"]), "PackOptions")
            return "stack", [[A(k) for k in keys], int(o.Axis())], {}
        if name == "UNPACK":
            o = opts.table(int(op["index"]), "UnpackOptions")
            return "unbind", [A(keys[0]), int(o.Axis())], {}
        if name == "SPLIT":  # inputs: axis, value
            return "split", [A(keys[1]), 1, opts.ints(ins[0])[0]], {}
        if name == "SPLIT_V":  # inputs: value, sizes, axis
            return "split", [A(keys[0]), 1, opts.ints(ins[2])[0]], {}
        if name == "GATHER":
            o = opts.table(int(op["index"]), "GatherOptions")
            axis = int(o.Axis()) if o is not None else 0
            if ins[0] in static and axis == 0:
                return "embedding", [A(keys[1])], {}
            if ins[0] not in static and len(in_shapes[keys[1]] or ()) <= 1:
                axis = axis + rank if axis < 0 else axis
                pick = 0 if len(in_shapes[keys[1]] or ()) == 0 else slice(None)
                return "getitem", [A(keys[0]), (slice(None),) * axis + (pick,)], {}
        if name in _PAD_OPS or (name == "STRIDED_SLICE"
                                and len(out_shapes[0][1] or ()) == rank):
            return "getitem", [A(keys[0]), (slice(None),) * rank], {}
        if name == "BROADCAST_TO":
            return "expand", [A(keys[0])], {}
        return None, [], {}

    flow.step(label, where, keys, out_shapes, in_shapes, translate, num_heads=num_heads,
              module=module)


def _swap(a: "_rules.Arg") -> "_rules.Arg":
    """An operand BATCH_MATMUL reads transposed (adj_x, adj_y): its last two axes swapped."""
    n = a.names
    if n is not None and len(n) >= 2:
        n = n[:-2] + (n[-1], n[-2])
    s = a.shape[:-2] + (a.shape[-1], a.shape[-2]) if len(a.shape) >= 2 else a.shape
    return _rules.Arg(n, s)


def _plan_reads(it, ops, constant: Set[int], parameters: bool,
                name_filter) -> List[Tuple[str, int, str, Any, int]]:
    """(role, tensor index, record name, op, role_index) of every tensor to record, in execution
    order; a parameter comes before the outputs of the first op that uses it."""
    plan: List[Tuple[str, int, str, Any, int]] = []
    used: Dict[str, int] = {}
    params_done: Set[int] = set()
    for op in ops:
        if parameters:
            for j, t in enumerate(int(x) for x in op["inputs"]):
                if t < 0 or t not in constant or t in params_done:
                    continue
                params_done.add(t)
                details = it._get_tensor_details(t, 0)
                plan.append(("parameter", t,
                             _display_name(details["name"], op["index"], op["op_name"], j), op, j))
        for j, t in enumerate(int(x) for x in op["outputs"]):
            if t < 0:
                continue
            details = it._get_tensor_details(t, 0)
            tname = _display_name(details["name"], op["index"], op["op_name"], j)
            if tname in used:
                used[tname] += 1
                tname = f"{tname}#{used[tname] - 1}"
            else:
                used[tname] = 1
            plan.append(("output", t, tname, op, j))
    if name_filter is not None:
        # Tensors no name of which can pass the filter are neither probed nor read.
        plan = [e for e in plan if name_filter.may_accept_name(e[2])]
    return plan


def _type_problem(it, info: _ModelInfo, t: int) -> Optional[str]:
    """Why tensor `t` must not be read, judged from its declared type alone, or None."""
    ttype = info.types[t] if 0 <= t < len(info.types) else None
    if ttype is not None and ttype not in _READABLE_TYPES:
        return f"{ttype} tensor"
    dtype = np.dtype(it._get_tensor_details(t, 0)["dtype"])
    if dtype.kind not in _TFL_TO_NUMPY_OK:
        return f"{dtype.name} tensor"
    return None


class _Reader:
    """Reads tensor values without letting LiteRT take the process down.

    A tensor's declared type is checked first (_type_problem). What the type cannot show — a
    runtime tensor whose data pointer or size does not match its shape — is found by reading
    every planned tensor once in a forked child (copy-on-write: no second model run); a read
    that kills the child is marked unreadable and the rest are tried in a fresh child. Only
    then does this process read, skipping the marked ones."""

    # A child that makes no progress for this long is taken for hung (a lock held at fork time).
    PROBE_TIMEOUT_S = 60.0

    def __init__(self, it, info: _ModelInfo, indices: Sequence[int]) -> None:
        self.it = it
        self.problems: Dict[int, str] = {}
        readable = []
        for t in dict.fromkeys(int(i) for i in indices):
            why = _type_problem(it, info, t)
            if why is not None:
                self.problems[t] = why
            else:
                readable.append(t)
        self.problems.update(_probe_reads(it, readable, self.PROBE_TIMEOUT_S))
        self.checked = set(readable) | set(self.problems)

    def read(self, t: int) -> Tuple[Optional[np.ndarray], str]:
        """The value of tensor `t` (one of the indices given), or None and why not."""
        if t not in self.checked:
            raise ValueError(f"tensor {t} was not checked before reading")
        if t in self.problems:
            return None, self.problems[t]
        try:
            return self.it.get_tensor(t), ""
        except ValueError as err:  # a dynamic tensor never produced; no buffer
            return None, f"no data ({_first_line(err)})"


def _probe_reads(it, indices: Sequence[int], timeout: float) -> Dict[int, str]:
    """Reads `indices` in forked children; returns the ones whose read killed the child."""
    if not indices or not hasattr(os, "fork"):
        return {}
    import select
    import signal
    import struct

    bad: Dict[int, str] = {}
    start = 0
    while start < len(indices):
        r, w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        with warnings.catch_warnings():
            # Python 3.12+ warns that fork() in a threaded process may deadlock the child;
            # the child only copies tensors, and a hung child is killed after `timeout`.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # the child: report each index before reading it, then "done" (-1)
            try:
                os.close(r)
                _quiet_child()
                for k in range(start, len(indices)):
                    os.write(w, struct.pack("<q", k))
                    try:
                        v = it.get_tensor(indices[k])
                        if isinstance(v, np.ndarray):
                            v.tobytes()  # touch every byte the parent's writer will read
                    except Exception:
                        pass
                os.write(w, struct.pack("<q", -1))
            finally:
                os._exit(0)
        os.close(w)
        got = b""
        hung = False
        try:
            while True:
                ready, _, _ = select.select([r], [], [], timeout)
                if not ready:
                    os.kill(pid, signal.SIGKILL)
                    hung = True
                    break
                chunk = os.read(r, 65536)
                if not chunk:
                    break
                got += chunk
        finally:
            os.close(r)
        _, status = os.waitpid(pid, 0)
        got = got[: len(got) // 8 * 8]
        last = struct.unpack("<q", got[-8:])[0] if got else start
        if last == -1:
            break
        if hung:
            why = f"reading it hangs LiteRT (no progress in {timeout:g} s, in a probe process)"
        elif os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            try:
                how = signal.Signals(sig).name
            except ValueError:
                how = f"signal {sig}"
            why = f"reading it crashes LiteRT ({how}, in a probe process)"
        else:
            why = f"reading it ends the probe process (exit status {os.WEXITSTATUS(status)})"
        bad[indices[last]] = why
        start = last + 1
    return bad


def _quiet_child() -> None:
    """No core file and no faulthandler traceback from a probe child that crashes."""
    try:
        import faulthandler
        import resource

        faulthandler.disable()
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except Exception:  # pragma: no cover - platforms without these
        pass


# Byte patterns written into buffers before a delegated run: a buffer that still holds the first
# after the run, and the second after a run of its own, was never written (a kernel that wrote
# it computed the same values both times, which cannot be both patterns).
_UNWRITTEN = (0xA5, 0x5A)


def _fill(it, info: _ModelInfo, constant: Set[int], indices: Sequence[int], byte: int
          ) -> List[int]:
    """Fills the buffers of `indices` (op outputs) with `byte`; returns the ones filled. Weights,
    model inputs and tensors the recorder never reads are left alone."""
    inputs = {int(d["index"]) for d in it.get_input_details()}
    return [t for t in dict.fromkeys(indices)
            if t not in constant and t not in inputs and _type_problem(it, info, t) is None
            and _fill_one(it, t, byte)]


def _fill_one(it, t: int, byte: int) -> bool:
    d = it._get_tensor_details(t, 0)
    dtype, shape = np.dtype(d["dtype"]), tuple(int(x) for x in d["shape"])
    count = int(np.prod(shape, dtype=np.int64))
    if count == 0:
        return False
    try:  # set_tensor checks size and type, and refuses an unallocated tensor
        it.set_tensor(t, np.full(count * dtype.itemsize, byte, np.uint8).view(dtype)
                      .reshape(shape))
    except (ValueError, RuntimeError):
        return False
    return True


def _holds(value: Optional[np.ndarray], byte: int) -> bool:
    if value is None or value.size == 0:
        return False
    return bool(np.all(np.ascontiguousarray(value).view(np.uint8) == byte))


def _second_run(data: bytes, name: str, kernels: str, num_threads: Optional[int], inputs: Any):
    """A fresh interpreter like the recorded one, fed the same inputs, not yet invoked."""
    it = _interpreter(data, name, kernels, num_threads, preserve=True)
    _feed(it, inputs, name)
    return it


def _unwritten(reader: "_Reader", watched: Sequence[int], ops_all, name: str, fresh
               ) -> Dict[int, str]:
    """The watched tensors (filled with _UNWRITTEN[0] before the run `reader` reads) that no
    kernel wrote, each with why. Candidates are confirmed by a run of `fresh()` (an interpreter
    of the same model, fed, not yet invoked) with their buffers filled with _UNWRITTEN[1]."""
    candidates = [t for t in watched if _holds(reader.read(t)[0], _UNWRITTEN[0])]
    if not candidates:
        return {}
    other = fresh()
    # The reads below are safe: the same tensors of the same model were just probed and read.
    candidates = [t for t in candidates if _fill_one(other, t, _UNWRITTEN[1])]
    _invoke(other, name)
    candidates = [t for t in candidates if _holds(other.get_tensor(t), _UNWRITTEN[1])]
    inside = _delegated_tensors(ops_all)
    producer = {int(t): op["op_name"] for op in ops_all if op["op_name"] != "DELEGATE"
                for t in op["outputs"] if int(t) >= 0}
    return {t: (f"never written: XNNPACK computes this {producer.get(t, 'op')} internally"
                if t in inside else f"never written by its {producer.get(t, 'op')}")
            for t in candidates}


def _delegated_tensors(ops_all) -> Set[int]:
    """Tensors computed by nodes a delegate took over: walking back from each DELEGATE node's
    outputs through the nodes that produce them, up to the DELEGATE node's inputs."""
    producer = {int(t): op for op in ops_all if op["op_name"] != "DELEGATE"
                for t in op["outputs"] if int(t) >= 0}
    inside: Set[int] = set()
    for node in ops_all:
        if node["op_name"] != "DELEGATE":
            continue
        stop = {int(t) for t in node["inputs"] if int(t) >= 0}
        todo = [int(t) for t in node["outputs"] if int(t) >= 0]
        seen: Set[int] = set()
        while todo:
            t = todo.pop()
            if t in seen or t in stop or t not in producer:
                continue
            seen.add(t)
            op = producer[t]
            inside.update(int(x) for x in op["outputs"] if int(x) >= 0)
            todo.extend(int(x) for x in op["inputs"] if int(x) >= 0)
    return inside


def _read_outputs(it, info: _ModelInfo, reader: Optional["_Reader"] = None
                  ) -> Tuple[Dict[str, np.ndarray], Dict[str, str]]:
    """The model's final outputs that can be read safely, and why the others were not."""
    details = it.get_output_details()
    if reader is None:
        reader = _Reader(it, info, [int(d["index"]) for d in details])
    values: Dict[str, np.ndarray] = {}
    skipped: Dict[str, str] = {}
    for d in details:
        v, why = reader.read(int(d["index"]))
        if v is None:
            skipped[d["name"]] = why
        else:
            values[d["name"]] = v.copy()
    return values, skipped


def _skipped_message(skipped: Mapping[str, str], prefix: str = "driftscope: ",
                     limit: int = 8) -> str:
    shown = [f"{n} ({why})" for n, why in list(skipped.items())[:limit]]
    more = f" and {len(skipped) - limit} more" if len(skipped) > limit else ""
    return f"{prefix}{len(skipped)} tensor(s) not recorded: " + ", ".join(shown) + more


def _with_precision(metadata: Dict[str, str], it, ops, meta) -> Dict[str, str]:
    """Adds "precision" (the activations' dtype: int8 for a full-integer model) and user keys."""
    kinds = []
    for op in ops:
        for t in op["outputs"]:
            if int(t) >= 0:
                d = it._get_tensor_details(int(t), 0)
                kinds.append(np.dtype(d["dtype"]).name)
    if kinds:
        floats = [k for k in kinds if k.startswith("float")]
        quant = [k for k in kinds if k in ("int8", "uint8", "int16")]
        if quant and len(quant) >= len(floats):
            metadata["precision"] = quant[0]
        elif floats:
            metadata["precision"] = max(set(floats), key=floats.count)
    if meta:
        metadata.update({str(k): str(v) for k, v in meta.items()})
    return metadata


def _parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Run a .tflite model with the LiteRT interpreter and record every op's outputs.",
        epilog="Example: driftscope record tflite model.tflite --input input=x.npy -o device.tdump")
    add_record_inputs(p, "the .tflite file")
    p.add_argument("--kernels", choices=KERNELS, default="optimized",
                   help="optimized (default interpreter, XNNPACK), builtin (no default delegate) "
                        "or reference kernels")
    p.add_argument("--threads", type=int, default=None, help="interpreter threads")
    p.add_argument("--parameters", action="store_true",
                   help="also record each op's constant inputs (weights), role 'parameter'")
    p.add_argument("--input-axes", action="append", default=[], metavar="NAME=AXES",
                   help="axis names of input NAME (tensor or signature name), e.g. "
                        "'x=batch,seq,hidden', carried through every op by the rule table "
                        "(docs/axes.md §1.3); repeatable")
    add_record_options(p)
    return p


def cli_main(argv: Optional[Sequence[str]] = None, prog: str = "driftscope record tflite") -> int:
    """Entry point of ``driftscope record tflite``: 0 recorded, 2 bad usage/input/model."""
    args = parse_args(_parser(prog), argv)
    return run_recorder(prog, args, load_cli_inputs, lambda feeds, progress: record(
        args.model, feeds, args.output, kernels=args.kernels, filter=args.filter,
        summary=args.summary, meta=parse_meta(args.meta), num_threads=args.threads,
        parameters=args.parameters, check_observer=not args.no_observer_check,
        progress=progress, input_axes=_parse_input_axes_flags(args.input_axes)))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(cli_main())
