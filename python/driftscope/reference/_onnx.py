"""The ONNX rewrite of initializers (docs/references.md "ONNX"): `driftscope reference init
model.onnx -o model.hash.onnx`. ONNX has no module types, so the native scale comes from the op
that consumes each initializer; everything else (shapes, scalars, epsilons, integer tensors) is
left exactly as it was."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from typing import Any, Dict, Tuple

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
            fan = int(np.prod(d[1:])) if op == "Conv" else int(np.prod([d[1]] + d[2:]))
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


def rewrite_file(src: str, dst: str, seed: int = 0) -> Dict[str, Any]:
    """Reads src, rewrites, writes dst by the output rules (temporary file renamed into place)."""
    import os
    import tempfile

    import onnx

    model = onnx.load(src)
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
