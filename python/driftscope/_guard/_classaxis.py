"""Which outputs have a class axis, the axis an argmax flip is judged over (guard.md §5).

An argmax over an arbitrary axis is noise: a detector's [1, 22, 2100] output has 2100 anchors on
its last axis, and the top anchor of near-equal scores moves with any rounding. Argmax is applied
only where the axis holds classes:
  * --class-axis (every output, OUTPUT=AXIS for one, or `none`);
  * ONNX: the output's producer (through Identity/Cast) is Softmax/LogSoftmax (its axis), or a
    logits head: Gemm or MatMul, or an Add of a bias to one (per-token logits included);
  * LiteRT: the producer (through DEQUANTIZE/QUANTIZE/CAST) is SOFTMAX/LOG_SOFTMAX, or
    FULLY_CONNECTED with a rank-2 output;
  * PyTorch: the module's graph is not read. An output the model names (a dict or ModelOutput
    key: ``['logits']``, ``['last_hidden_state']``) has its last axis as class axis only if its
    name says so (logits, scores, probabilities, classes): a hidden state's last axis holds
    features, and an argmax over Whisper's encoder_last_hidden_state flagged seven backends whose
    tokens all agreed. An unnamed output (a tensor, a tuple position) keeps the last axis.
    --class-axis overrides, OUTPUT=none included.
"""

from __future__ import annotations

import re
from typing import Dict, Mapping, Optional, Sequence, Union

ClassAxisSpec = Union[None, int, str, Mapping[str, Optional[int]]]

# The key of Thresholds.class_axes that says: outputs not named in it follow the PyTorch rule.
TORCH_RULE = "<torch>"
_NAMED = re.compile(r"(?:\['([^']*)'\]|\.([A-Za-z_]\w*))$")
_CLASSY = re.compile(r"logit|score|prob|class", re.I)


def torch_class_axis(name: str, ndim: int) -> Optional[int]:
    """The PyTorch rule (module docstring): the last axis, unless the model names the output and
    the name is not one of logits/scores/probabilities/classes."""
    m = _NAMED.search(name)
    key = m.group(1) if m and m.group(1) is not None else (m.group(2) if m else None)
    if key is not None and not _CLASSY.search(key):
        return None
    return ndim - 1

_ONNX_PASS = {"Identity", "Cast"}
_TFLITE_PASS = {"DEQUANTIZE", "QUANTIZE", "CAST"}


def parse_class_axis(values: Sequence[str]) -> ClassAxisSpec:
    """--class-axis values: "AXIS", "OUTPUT=AXIS" (repeatable) or "none". ValueError with the
    offending value otherwise."""
    if not values:
        return None
    if list(values) == ["none"]:
        return "none"
    by_name: Dict[str, Optional[int]] = {}
    every: Optional[int] = None
    for v in values:
        name, sep, axis = v.rpartition("=")
        if sep and axis == "none":  # OUTPUT=none: no argmax on that output
            if not name:
                raise ValueError(f"--class-axis {v!r}: the output name is empty")
            by_name[name] = None
            continue
        try:
            n = int(axis)
        except ValueError:
            raise ValueError(f"--class-axis {v!r}: expected AXIS, OUTPUT=AXIS, OUTPUT=none or "
                             "none") from None
        if sep:
            if not name:
                raise ValueError(f"--class-axis {v!r}: the output name is empty")
            by_name[name] = n
        else:
            every = n
    if every is not None and by_name:
        raise ValueError("--class-axis: give one AXIS for every output, or OUTPUT=AXIS pairs")
    return every if every is not None else by_name


def _onnx_axes(model: str) -> Dict[str, int]:
    from ._stateful import onnx_proto

    proto = onnx_proto(model)
    g = proto.graph
    producer = {o: n for n in g.node for o in n.output}
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 13)
    out: Dict[str, int] = {}
    for o in g.output:
        node = producer.get(o.name)
        while node is not None and node.op_type in _ONNX_PASS and node.input:
            node = producer.get(node.input[0])
        if node is None:
            continue
        if node.op_type in ("Softmax", "LogSoftmax"):
            axis = next((a.i for a in node.attribute if a.name == "axis"),
                        -1 if opset >= 13 else 1)
            out[o.name] = axis
        elif node.op_type in ("Gemm", "MatMul") or (
                node.op_type == "Add" and any(
                    getattr(producer.get(i), "op_type", "") in ("Gemm", "MatMul")
                    for i in node.input)):
            out[o.name] = -1  # a logits head: x W (+ b), per position
    return out


def _tflite_axes(model: str) -> Dict[str, int]:
    from ..recorders.api import litert_open

    it, _ = litert_open(model)
    ops = [op for op in it._get_ops_details() if op["op_name"] != "DELEGATE"]
    producer = {int(t): op for op in ops for t in op["outputs"]}
    out: Dict[str, int] = {}
    for d in it.get_output_details():
        op = producer.get(int(d["index"]))
        while op is not None and op["op_name"] in _TFLITE_PASS and len(op["inputs"]):
            op = producer.get(int(op["inputs"][0]))
        if op is None:
            continue
        if op["op_name"] in ("SOFTMAX", "LOG_SOFTMAX") or (
                op["op_name"] == "FULLY_CONNECTED" and len(d["shape"]) == 2):
            out[d["name"]] = -1
    return out


def class_axes(family: str, model: str, spec: ClassAxisSpec
               ) -> Optional[Dict[str, Optional[int]]]:
    """Output name -> class axis (None: no argmax) for the judge (Thresholds.class_axes; "*":
    every output; TORCH_RULE: outputs not named follow the PyTorch rule). None for a PyTorch
    model without --class-axis: the judge then applies the PyTorch rule to every output."""
    if spec == "none":
        return {}
    if isinstance(spec, int):
        return {"*": spec}
    found: Optional[Dict[str, int]] = None
    if family == "onnx":
        found = _onnx_axes(model)
    elif family == "tflite":
        found = _tflite_axes(model)
    if spec:
        found = dict(found or {})
        if family not in ("onnx", "tflite"):
            found[TORCH_RULE] = -1
        found.update(spec)  # type: ignore[arg-type]
    return found
