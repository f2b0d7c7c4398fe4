"""The ONNX rewrite of initializers (docs/references.md "ONNX"): `driftscope reference init
model.onnx -o model.hash.onnx`. ONNX has no module types, so the native scale comes from the op
that consumes each initializer; everything else (shapes, scalars, epsilons, integer tensors) is
left exactly as it was."""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ._hash import hash_tensor

SCHEME = "driftscope-hash/1"
METADATA_KEY = "driftscope.reference.init"
_FLOATS = {1: "float32", 11: "float64", 10: "float16"}  # TensorProto data types rewritten


def _linear_std(fan_in: int) -> float:
    return 1.0 / math.sqrt(3.0 * fan_in)  # the same expression as the PyTorch helper


def _attr(node: Any, name: str, default: int) -> int:
    for a in node.attribute:
        if a.name == name:
            return int(a.i)
    return default


def plan(model: Any) -> Tuple[Dict[str, Tuple[str, float]], Dict[str, str]]:
    """(rules for the initializers to rewrite, reasons the others stay) from the graph's nodes."""
    inits = {t.name: t for t in model.graph.initializer}
    rules: Dict[str, Tuple[str, float]] = {}
    weight_fan: Dict[str, int] = {}  # node output -> fan_in of the weight that produced it
    def is_float(name: str) -> bool:
        t = inits.get(name)
        return t is not None and t.data_type in _FLOATS

    for node in model.graph.node:
        ins = list(node.input)
        op = node.op_type
        if op == "MatMul" and len(ins) == 2 and is_float(ins[1]) and len(inits[ins[1]].dims) >= 2:
            fan = int(inits[ins[1]].dims[-2])
            rules[ins[1]] = ("uniform", _linear_std(fan))
            weight_fan[node.output[0]] = fan
        elif op == "Gemm" and len(ins) >= 2 and is_float(ins[1]) and len(inits[ins[1]].dims) == 2:
            fan = int(inits[ins[1]].dims[1 if _attr(node, "transB", 0) else 0])
            rules[ins[1]] = ("uniform", _linear_std(fan))
            if len(ins) >= 3 and is_float(ins[2]):
                rules[ins[2]] = ("uniform", _linear_std(fan))
        elif op in ("Conv", "ConvTranspose") and len(ins) >= 2 and is_float(ins[1]):
            d = [int(x) for x in inits[ins[1]].dims]
            fan = math.prod(d[1:]) if op == "Conv" else math.prod([d[1]] + d[2:])
            rules[ins[1]] = ("uniform", _linear_std(max(fan, 1)))
            if len(ins) >= 3 and is_float(ins[2]):
                rules[ins[2]] = ("uniform", _linear_std(max(fan, 1)))
        elif op == "Gather" and ins and is_float(ins[0]) and len(inits[ins[0]].dims) == 2:
            rules[ins[0]] = ("normal", 1.0)  # an embedding table: nn.Embedding's N(0, 1)
        elif op in ("LayerNormalization", "SimplifiedLayerNormalization", "SkipLayerNormalization",
                    "InstanceNormalization", "GroupNormalization"):
            for i, name in enumerate(ins[1:], start=1):
                if is_float(name):
                    rules[name] = ("constant", 1.0 if i == 1 else 0.0)
        elif op == "BatchNormalization":
            for i, name in enumerate(ins[1:5], start=1):  # scale, B, mean, var
                if is_float(name):
                    rules[name] = ("constant", 1.0 if i in (1, 4) else 0.0)
    # A bias added to a MatMul output: the weight's fan-in (nn.Linear's bias bound).
    for node in model.graph.node:
        if node.op_type == "Add" and len(node.input) == 2:
            a, b = node.input
            for x, y in ((a, b), (b, a)):
                if x in weight_fan and is_float(y) and y not in rules:
                    rules[y] = ("uniform", _linear_std(weight_fan[x]))
    kept = {n: "no weight-consuming op (constant, shape or scalar)" for n in inits if n not in rules}
    for n in kept:
        if inits[n].data_type not in _FLOATS:
            kept[n] = "not a float tensor"
    return rules, kept


def rewrite(model: Any, seed: int = 0) -> Dict[str, Any]:
    """Rewrites `model`'s initializers in place (an onnx.ModelProto); returns the record that is
    also stored in its metadata_props under driftscope.reference.init."""
    from onnx import numpy_helper

    rules, kept = plan(model)
    for i, t in enumerate(model.graph.initializer):
        rule = rules.get(t.name)
        if rule is None:
            continue
        kind, value = rule
        dtype = _FLOATS[t.data_type]
        shape = tuple(int(d) for d in t.dims)
        if kind == "constant":
            arr = np.full(shape, value, dtype=dtype)
        else:
            arr = hash_tensor(t.name, shape, kind, value,
                              "float64" if dtype == "float64" else "float32", seed).astype(dtype)
        model.graph.initializer[i].CopyFrom(numpy_helper.from_array(arr, t.name))
    record = {"scheme": SCHEME, "seed": str(seed),
              "parameters": {n: [k, v] for n, (k, v) in rules.items()},
              "kept": sorted(kept)}
    for p in list(model.metadata_props):
        if p.key == METADATA_KEY:
            model.metadata_props.remove(p)
    entry = model.metadata_props.add()
    entry.key = METADATA_KEY
    entry.value = json.dumps(record, sort_keys=True, separators=(",", ":"))
    return record


MAX_BYTES_FLAG = "--max-weight-bytes"


class InitError(ValueError):
    """A model reference init refuses (one line, naming the file and the initializer)."""


def read_model(src: str) -> Any:
    """The ModelProto without its external data: checked (check_sizes) before any is read."""
    import onnx

    try:
        return onnx.load(src, load_external_data=False)
    except Exception as err:  # noqa: BLE001 - protobuf's DecodeError and friends
        text = str(err).strip()
        raise InitError(f"{src}: not a valid ONNX file "
                        f"({text.splitlines()[0] if text else type(err).__name__})") from None


def model_files(model: Any, src: str) -> List[Tuple[str, str]]:
    """(path, role) of every file `reference init` reads: the model and its external data."""
    from ..recorders.api import onnx_external_data_files as onnx_external_files

    return [(src, "the model")] + [(f, f"external data of {src}")
                                   for f in onnx_external_files(model, src)]


# Elements per stored unit where it is not one: sub-byte types are packed (ONNX IR, "int4").
_PACKED = {21: 2, 22: 2, 23: 2, 25: 4, 26: 4}
_COMPLEX = {14: 8, 15: 16}


def _stored(t: Any, base: str) -> Optional[Tuple[int, int]]:
    """(bytes the declared dims need, bytes present) for initializer t, in the unit the data is
    stored in (bytes for raw and external data, values for typed fields, which the expected
    count is then expressed in too); None for types whose layout is not checked here."""
    import onnx
    from onnx import helper

    from .._limits import numel

    n = numel(t.dims)
    dt = t.data_type
    if dt == onnx.TensorProto.STRING:
        return (n, len(t.string_data)) if t.data_location != onnx.TensorProto.EXTERNAL else None
    if dt in _PACKED:
        need_bytes = -(-n // _PACKED[dt])
        need_values = need_bytes if dt in (21, 22, 23) else -(-n // 4)
    elif dt in _COMPLEX:
        need_bytes, need_values = n * _COMPLEX[dt], 2 * n
    else:
        try:
            need_bytes = n * np.dtype(helper.tensor_dtype_to_np_dtype(dt)).itemsize
        except Exception:  # noqa: BLE001 - an undefined or future type: left to onnx
            return None
        need_values = n
    if t.data_location == onnx.TensorProto.EXTERNAL:
        info = {e.key: e.value for e in t.external_data}
        try:
            offset = int(info.get("offset", 0) or 0)
            size = os.stat(os.path.join(base, info.get("location", ""))).st_size
        except (OSError, ValueError):
            return None  # a missing or odd location: onnx's loader refuses it with its own words
        present = max(size - offset, 0)
        if "length" in info:
            try:
                present = min(present, int(info["length"]))
            except ValueError:
                return None
        return need_bytes, present
    if t.raw_data:
        return need_bytes, len(t.raw_data)
    try:
        field = helper.tensor_dtype_to_field(dt)
    except Exception:  # noqa: BLE001
        return None
    return need_values, len(getattr(t, field))


def check_sizes(model: Any, src: str, max_bytes: int) -> None:
    """Refuses (InitError) before anything is read or allocated: an initializer whose declared
    dims do not match the data it holds (raw, typed or external: a 97-byte file declaring
    20000x20000 would otherwise make a 1.6 GB output), and rewritten initializers above
    max_bytes. Sizes are Python ints: no dims can wrap them."""
    import onnx

    from .._limits import format_size, max_bytes_error, numel
    from .._text import printable

    base = os.path.dirname(os.path.abspath(src))
    for t in model.graph.initializer:
        dims = [int(d) for d in t.dims]
        what = f"{src}: initializer '{printable(t.name)}'"
        if any(d < 0 for d in dims):
            raise InitError(f"{what} declares dims {dims}: a negative dimension")
        sizes = _stored(t, base)
        if sizes is not None and sizes[0] != sizes[1]:
            unit = ("bytes" if t.raw_data or t.data_location == onnx.TensorProto.EXTERNAL
                    else "values")
            raise InitError(f"{what} declares {_type_shape(t)}, {sizes[0]:,} {unit}, but holds "
                            f"{sizes[1]:,} {unit} of data")
    rules, _ = plan(model)
    inits = {t.name: t for t in model.graph.initializer}
    total, largest = 0, None
    for name in rules:
        t = inits[name]
        size = numel(t.dims) * np.dtype(_FLOATS[t.data_type]).itemsize
        total += size
        if largest is None or size > largest[1]:
            largest = (t, size)
    if largest is not None:
        t, size = largest
        over = max_bytes_error(
            total, max_bytes, MAX_BYTES_FLAG,
            f"{src}: the {len(rules)} initializer(s) to rewrite (the largest: "
            f"'{printable(t.name)}' {_type_shape(t)}, {format_size(size)}) take")
        if over:
            raise InitError(over)


def _type_shape(t: Any) -> str:
    import onnx

    from .._limits import shape_text

    name = onnx.TensorProto.DataType.Name(t.data_type).lower() \
        if t.data_type in onnx.TensorProto.DataType.values() else f"type {t.data_type}"
    return shape_text(name, list(t.dims))


def rewrite_file(src: str, dst: str, seed: int = 0, max_bytes: Optional[int] = None,
                 model: Any = None) -> Dict[str, Any]:
    """Reads src (or takes `model`, src parsed by read_model), checks it (check_sizes), loads its
    external data, rewrites, writes dst by the output rules (temporary file renamed into
    place)."""
    import tempfile

    import onnx
    from onnx.external_data_helper import load_external_data_for_model

    from .._limits import DEFAULT_MAX_BYTES

    model = read_model(src) if model is None else model
    check_sizes(model, src, DEFAULT_MAX_BYTES if max_bytes is None else max_bytes)
    load_external_data_for_model(model, os.path.dirname(os.path.abspath(src)))
    record = rewrite(model, seed)
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(dst) + ".tmp-",
                               dir=os.path.dirname(os.path.abspath(dst)))
    os.close(fd)
    try:
        onnx.save(model, tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dst)
    except BaseException:
        os.unlink(tmp)
        raise
    return record


def summary(record: Dict[str, Any]) -> str:
    kinds: Dict[str, int] = defaultdict(int)
    for k, _ in record["parameters"].values():
        kinds[k] += 1
    parts = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    return (f"{len(record['parameters'])} initializers rewritten ({parts}); "
            f"{len(record['kept'])} kept")
