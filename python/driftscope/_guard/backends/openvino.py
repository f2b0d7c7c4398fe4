"""OpenVINO CPU backends: ``openvino`` (float32), ``openvino-bf16`` and ``openvino-f16`` (the
CPU plugin's INFERENCE_PRECISION_HINT).

What they really compute is read back from the compiled model: every operation of
``compiled_model.get_runtime_model()`` carries ``runtimePrecision`` (the precision its kernel
ran in) and ``originalLayersNames`` (the model layers fused into it). The row counts them; on a
CPU without native bfloat16/float16 the plugin may run in float32 whatever the hint says, and the
row says so.

Keeping nodes in float32: OpenVINO's own mechanism is the ``precise`` runtime attribute
(``ov::disable_fp16_compression``), which the CPU plugin's precision pass honours. Set from
Python as a plain rt_info string it is silently ignored (measured with OpenVINO 2026.4: the
nodes still ran in float16), so the variant is built as IR: the ONNX model is read, saved as IR
XML, the attribute ``<attribute name="precise" version="0"/>`` is written into the chosen layers
and the IR is read back, which makes OpenVINO create the typed attribute. The proof is the
runtime model's ``runtimePrecision`` of every operation that came from those layers.

``.tflite`` models: OpenVINO reads them itself (its TensorFlow Lite frontend, ``read_model``),
so the same three rows run them. Quantized inputs and outputs stay integers there, as in
LiteRT: a float value for a quantized input is quantized with the input's scale and zero point
and integer outputs are dequantized with theirs (read from the model through LiteRT), exactly as
the ``litert`` rows do, so the rows compare. No FP32 fallback for them: the ``precise``
attribute is placed through the ONNX node names of the IR's layers, and OpenVINO exposes no
intermediate tensors to probe with.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set

import numpy as np

from .base import Backend, Session, _missing
from .._cpu import ENV as HIDE_ENV
from .._cpu import openvino_capabilities

_FLOATS = {"f32", "f16", "bf16"}


def _core() -> Any:
    import openvino as ov

    return ov.Core()


def warm() -> None:
    """For the guard's fork server: loads the CPU plugin and the ONNX frontend (~0.3 s that
    every child would pay again) without compiling anything (compiling starts the CPU plugin's
    thread pool, which must be created in the child)."""
    core = _core()
    core.get_property("CPU", "FULL_DEVICE_NAME")
    core.get_available_devices()


def _ir_owners(xml_text: str, proto) -> Dict[str, str]:
    """IR layer name -> the source ONNX node it came from. A layer whose output port carries a
    tensor name belongs to the node producing that tensor; a layer without named outputs (the
    MVN, Multiply, ... an ONNX LayerNormalization is decomposed into) belongs to the node of the
    first named layer downstream of it."""
    producer = {o: (n.name or o) for n in proto.graph.node for o in n.output if o}
    root = ET.fromstring(xml_text)
    layers: Dict[str, Dict[str, Any]] = {}
    for layer in root.iter("layer"):
        names: List[str] = []
        out = layer.find("output")
        for port in (out if out is not None else []):
            names += [s for s in (port.get("names") or "").split(",") if s]
        layers[layer.get("id")] = {"name": layer.get("name"), "type": layer.get("type"),
                                   "tensors": names}
    consumers: Dict[str, List[str]] = {}
    for e in root.iter("edge"):
        consumers.setdefault(e.get("from-layer"), []).append(e.get("to-layer"))
    owner: Dict[str, str] = {}
    for lid, info in layers.items():
        for t in info["tensors"]:
            if t in producer:
                owner[lid] = producer[t]
                break

    def find(lid: str, seen: Set[str]) -> Optional[str]:
        if lid in owner:
            return owner[lid]
        for c in consumers.get(lid, []):
            if c not in seen:
                seen.add(c)
                got = find(c, seen)
                if got:
                    return got
        return None

    result: Dict[str, str] = {}
    for lid, info in layers.items():
        if info["type"] in ("Parameter", "Const", "Result"):
            continue
        got = find(lid, {lid})
        if got:
            result[info["name"]] = got
    return result


def _mark_precise(xml_text: str, layer_names: Set[str]) -> str:
    def add(mo: "re.Match[str]") -> str:
        head = mo.group(0)
        name = re.search(r'\bname="([^"]*)"', head)
        if name is None or _unescape(name.group(1)) not in layer_names:
            return head
        return head + '<rt_info><attribute name="precise" version="0" /></rt_info>'

    return re.sub(r"<layer [^>]*>", add, xml_text)


def _ov_message(err: BaseException) -> str:
    """OpenVINO's exceptions start with the source line that threw; the reason is the last
    line."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    return "OpenVINO: " + (lines[-1] if lines else type(err).__name__)


def _unescape(s: str) -> str:
    return (s.replace("&quot;", '"').replace("&apos;", "'").replace("&lt;", "<")
            .replace("&gt;", ">").replace("&amp;", "&"))


class _OvSession(Session):
    def __init__(self, compiled: Any, notes: List[str], owners: Dict[str, str], model: str,
                 work: str, names: List[str]) -> None:
        self.compiled, self.notes, self.owners = compiled, notes, owners
        self.model, self.work = model, work
        self.request = compiled.create_infer_request()
        # Compiling can merge a value's names ({'t', 'y'} when y = f(t) is folded): the output
        # names are the model's as read, in the same order.
        self.outputs = list(zip(compiled.outputs, names))

    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        by_name = {}
        for port in self.compiled.inputs:
            name = port.get_any_name()
            if name not in feeds:
                raise ValueError(f"no value for input '{name}'")
            by_name[name] = np.asarray(feeds[name], order="C")  # keeps rank 0 (a scalar)
        try:
            result = self.request.infer(by_name)
        except RuntimeError as err:
            raise RuntimeError(_ov_message(err)) from None
        return {name: np.array(result[port]) for port, name in self.outputs}

    def precisions(self) -> Dict[str, Set[str]]:
        """Source node -> the runtime precisions of every operation made from its layers."""
        if not self.owners:  # layer names are the same in the IR of the model as read
            import openvino as ov

            from ...recorders.api import onnx_load_model as _load_model

            xml = os.path.join(self.work, "openvino-names.xml")
            ov.save_model(_core().read_model(self.model), xml, compress_to_fp16=False)
            with open(xml, encoding="utf-8") as f:
                self.owners = _ir_owners(f.read(), _load_model(self.model)[0])
        found: Dict[str, Set[str]] = {}
        for op in self.compiled.get_runtime_model().get_ordered_ops():
            info = op.get_rt_info()
            prec = info["runtimePrecision"].astype(str) if "runtimePrecision" in info else ""
            if prec not in _FLOATS:
                continue
            orig = info["originalLayersNames"].astype(str) if "originalLayersNames" in info else ""
            for layer in filter(None, orig.split(",")):
                node = self.owners.get(layer)
                if node:
                    found.setdefault(node, set()).add(prec)
        return found

    def float32_evidence(self, nodes: Sequence[str]) -> Dict[str, str]:
        got = self.precisions()
        return {n: "every operation of the compiled model made from it has runtimePrecision "
                   "f32 (compiled_model.get_runtime_model())"
                for n in nodes if got.get(n) == {"f32"}}


class _OvTfliteSession(_OvSession):
    """A .tflite model: fed and read as the litert rows are (quantized inputs and outputs)."""

    def __init__(self, compiled: Any, notes: List[str], model: str, work: str,
                 io: "_TfliteIO") -> None:
        super().__init__(compiled, notes, {}, model, work, [])
        self.io = io
        self.outputs = _pair_ports(compiled.outputs, io.output_names, "output")

    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        feeds = self.io.quantize(feeds)
        by_name = {}
        for port, name in _pair_ports(self.compiled.inputs, self.io.input_names, "input"):
            if name not in feeds:
                raise ValueError(f"no value for input '{name}'")
            by_name[port.get_any_name()] = np.asarray(feeds[name], order="C")
        try:
            result = self.request.infer(by_name)
        except RuntimeError as err:
            raise RuntimeError(_ov_message(err)) from None
        return self.io.dequantize({name: np.array(result[port]) for port, name in self.outputs})

    def float32_evidence(self, nodes: Sequence[str]) -> Dict[str, str]:
        return {}  # nothing is kept in float32 for a .tflite model (module docstring)


def _pair_ports(ports: Sequence[Any], names: Sequence[str], what: str) -> List[Any]:
    """(OpenVINO port, the .tflite's tensor name): by name where a port carries one, else by
    position (the frontend keeps the subgraph's order)."""
    if not names:
        return [(p, p.get_any_name()) for p in ports]
    if len(ports) != len(names):
        raise ValueError(f"OpenVINO read {len(ports)} {what}(s) from the .tflite model, LiteRT "
                         f"{len(names)} ({', '.join(names)})")
    pairs = []
    for k, p in enumerate(ports):
        named = [n for n in names if n in p.get_names()]
        pairs.append((p, named[0] if named else names[k]))
    return pairs


class _TfliteIO:
    """The .tflite's inputs and outputs as LiteRT declares them (names, quantization), and the
    litert rows' own conversions: a float value for a quantized input is quantized with its
    scale and zero point, integer outputs are dequantized with theirs."""

    def __init__(self, model: str) -> None:
        self.input_names: List[str] = []
        self.output_names: List[str] = []
        self.lite: Any = None
        import importlib.util

        if importlib.util.find_spec("ai_edge_litert") is None:
            return  # OpenVINO's own names, values as they are (the guard's reference needs it)
        from ...recorders.api import litert_open
        from .litert import _LiteRTSession

        self.lite = _LiteRTSession(*litert_open(model))
        self.input_names = [d["name"] for d in self.lite.it.get_input_details()]
        self.output_names = [d["name"] for d in self.lite.it.get_output_details()]

    def quantize(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        return self.lite._feeds(feeds) if self.lite is not None else dict(feeds)

    def dequantize(self, values: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        return self.lite._outputs(values) if self.lite is not None else dict(values)

    def quantized(self) -> List[str]:
        if self.lite is None:
            return []
        it = self.lite.it
        return [d["name"] for d in it.get_input_details() + it.get_output_details()
                if d.get("quantization", (0.0, 0))[0] and np.dtype(d["dtype"]).kind in "iu"]


class OpenVinoBackend(Backend):
    family = "onnx"
    also_runs = ("tflite",)  # OpenVINO reads .tflite files too (its TensorFlow Lite frontend)

    def __init__(self, name: str, precision: str, capability: Optional[str], summary: str,
                 note: str = "") -> None:
        self.name, self.precision, self.capability = name, precision, capability
        self.summary, self.note = summary, note
        self.preload = ("openvino", "driftscope._guard.backends.openvino:warm")

    def unavailable(self) -> Optional[str]:
        why = _missing("openvino", "openvino")
        if why:
            return why
        import openvino as ov

        core = ov.Core()
        if "CPU" not in core.available_devices:
            return f"OpenVINO {ov.__version__} sees no CPU device"
        if self.capability:
            reported = list(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"))
            caps = openvino_capabilities(reported)
            if self.capability not in caps:
                hid = (f"; ${HIDE_ENV} hides {self.capability}"
                       if self.capability in reported else "")
                return (f"this CPU has no native {self.precision} support (OpenVINO's CPU "
                        f"OPTIMIZATION_CAPABILITIES: {', '.join(caps)}{hid})")
        return None

    def can_keep_float32(self) -> bool:
        return self.precision != "f32"

    def load(self, model: str, work: str, seed: int, keep_float32: Sequence[str] = ()
             ) -> Session:
        import openvino as ov

        from ...recorders.api import onnx_load_model as _load_model

        core = _core()
        tflite = model.lower().endswith(".tflite")
        if tflite and keep_float32:
            raise ValueError(f"{self.name} cannot keep nodes of a .tflite model in float32 (the "
                             "precise attribute is placed by ONNX node names)")
        ov_model = core.read_model(model)
        notes: List[str] = []
        owners: Dict[str, str] = {}
        io = _TfliteIO(model) if tflite else None
        if io is not None:
            quantized = io.quantized()
            notes.append("read by OpenVINO's TensorFlow Lite frontend" + (
                f"; quantized {', '.join(quantized)} fed and read as on LiteRT (scale, zero "
                "point)" if quantized else ""))
        if keep_float32:
            # The attribute must come from the IR reader to be honoured (module docstring).
            proto, _, _ = _load_model(model)
            xml = os.path.join(work, "openvino.xml")
            ov.save_model(ov_model, xml, compress_to_fp16=False)
            with open(xml, encoding="utf-8") as f:
                text = f.read()
            owners = _ir_owners(text, proto)
            wanted = set(keep_float32)
            layers = {layer for layer, node in owners.items() if node in wanted}
            missing = wanted - set(owners[x] for x in layers)
            if missing:
                raise ValueError("no OpenVINO layer comes from node(s) "
                                 + ", ".join(sorted(missing)[:5]))
            with open(xml, "w", encoding="utf-8") as f:
                f.write(_mark_precise(text, layers))
            ov_model = core.read_model(xml)
            notes.append(f"{len(wanted)} node(s) marked precise (kept in float32, "
                         f"{len(layers)} OpenVINO layer(s))")
        names = [o.get_any_name() for o in ov_model.outputs]
        try:
            compiled = core.compile_model(ov_model, "CPU",
                                          {"INFERENCE_PRECISION_HINT": self.precision})
        except RuntimeError as err:
            raise RuntimeError(_ov_message(err)) from None
        session = (_OvTfliteSession(compiled, notes, model, work, io) if io is not None else
                   _OvSession(compiled, notes, owners, model, work, names))
        hint = compiled.get_property("INFERENCE_PRECISION_HINT")
        got = hint.to_string() if hasattr(hint, "to_string") else str(hint)
        counts: Dict[str, int] = {}
        for op in compiled.get_runtime_model().get_ordered_ops():
            info = op.get_rt_info()
            prec = info["runtimePrecision"].astype(str) if "runtimePrecision" in info else ""
            kind = info["layerType"].astype(str) if "layerType" in info else ""
            if prec in _FLOATS and kind not in ("Input", "Output", "Const", "Reorder"):
                counts[prec] = counts.get(prec, 0) + 1
        ran = ", ".join(f"{v} in {k}" for k, v in sorted(counts.items()))
        notes.append(f"OpenVINO {ov.__version__.split('-')[0]} ran {sum(counts.values())} operation(s): {ran} "
                     f"(runtimePrecision; inference precision {got})")
        if self.precision != "f32" and not counts.get(self.precision):
            notes.append(f"no operation ran in {self.precision}: {self.precision} arithmetic "
                         "was not exercised")
        return session


_BF16_NOTE = ("bfloat16 only where the CPU plugin has bfloat16 kernels (matrix products, "
              "convolutions); other operations run in float32 (the row counts them)")

BACKENDS = [
    OpenVinoBackend("openvino", "f32", None, "OpenVINO, CPU plugin, float32 "
                    "(INFERENCE_PRECISION_HINT f32)"),
    OpenVinoBackend("openvino-bf16", "bf16", "BF16", "OpenVINO, CPU plugin, "
                    "INFERENCE_PRECISION_HINT bf16", note=_BF16_NOTE),
    OpenVinoBackend("openvino-f16", "f16", "FP16", "OpenVINO, CPU plugin, "
                    "INFERENCE_PRECISION_HINT f16 (float16 arithmetic where the CPU has it: "
                    "AVX512-FP16/AMX-FP16)"),
]
