"""``ort-qdq``: static INT8 quantization in QDQ format
(``onnxruntime.quantization.quantize_static``), calibrated on the guard's own input samples, run
by ONNX Runtime's CPU provider (which fuses DequantizeLinear -> op -> QuantizeLinear into integer
kernels).

Keeping nodes in float32 uses quantize_static's own ``nodes_to_exclude``; the proof is the graph
ONNX Runtime optimised and saved: the node is still there under its name, not fused into an
integer kernel, with float32 inputs and outputs.
"""

from __future__ import annotations

import os
import pickle
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .base import Backend, Session, _missing

from .onnxruntime import _OrtSession, save_optimized_graph

_INTEGER_KINDS = ("QLinear", "DynamicQuantize", "QuantizeLinear", "DequantizeLinear")


# The feeds the row ran, handed over by a job that builds variants in folders of its own (the
# fallback search's variant{k}, a bisection's prefix{k}: _fallback.search_job, _probe.bisect_job),
# where no job file lies beside them. Each job is its own child process: set once per job.
_ROW_SAMPLES: Optional[List[Dict[str, np.ndarray]]] = None


def use_row_samples(samples: Optional[Sequence[Any]]) -> None:
    """Calibrate every variant this process builds on `samples` (the feeds the row ran, one
    dict per sample or a stateful sample's steps), not on generated ones."""
    global _ROW_SAMPLES
    if samples:
        from .._stateful import first_steps

        _ROW_SAMPLES = first_steps(samples)
    else:
        _ROW_SAMPLES = None


def guard_samples(work: str, model: str, seed: int) -> List[Dict[str, np.ndarray]]:
    """The inputs the row ran on, which every variant of it is calibrated on (a variant
    calibrated on other inputs is another variant, and inputs made by the default rules may not
    even run: a --dim the model needs): the samples a job handed over (use_row_samples), else the
    child's job file in `work` (driftscope._guard._run.run_backend): its calibration (a probe's
    recording runs one sample of the row's) or its samples. Outside a guard run (neither),
    four samples made by the guard's input rules from the model's signature."""
    if _ROW_SAMPLES:
        return list(_ROW_SAMPLES)
    job = os.path.join(work, "job.pkl")
    if os.path.isfile(job):
        with open(job, "rb") as f:
            data = pickle.load(f)  # a _job.Job
        samples = data.calibration or data.samples
        if samples:
            from .._stateful import first_steps

            return first_steps(samples)
    from ...recorders.api import onnx_load_model as _load_model
    from .. import _inputs as I

    proto, _, _ = _load_model(model)
    return I.make_samples(I.onnx_signature(proto), {}, {}, seed, 4)[0]


def a16_overrides(model: str, nodes: Sequence[str]) -> Dict[str, Any]:
    """quantize_static's TensorQuantOverrides giving `nodes` INT16 activations: every tensor they
    read or write that is not a weight (initializer), as QInt16."""
    import onnx
    from onnxruntime.quantization import QuantType

    proto = onnx.load(model, load_external_data=False)
    inits = {t.name for t in proto.graph.initializer}
    by_name = {n.name: n for n in proto.graph.node}
    missing = [n for n in nodes if n not in by_name]
    if missing:
        raise ValueError(f"the model has no node {missing[0]!r} (keep_precision)")
    tensors = []
    for name in nodes:
        n = by_name[name]
        for x in list(n.input) + list(n.output):
            if x and x not in inits and x not in tensors:
                tensors.append(x)
    return {t: [{"quant_type": QuantType.QInt16}] for t in tensors}


class _Reader:
    """onnxruntime.quantization.CalibrationDataReader over a list of feed dicts."""

    def __init__(self, samples: Sequence[Mapping[str, np.ndarray]], names: Sequence[str]) -> None:
        self.items = [{k: np.asarray(s[k]) for k in names} for s in samples]
        self.pos = 0

    def get_next(self) -> Optional[Dict[str, np.ndarray]]:
        if self.pos >= len(self.items):
            return None
        self.pos += 1
        return self.items[self.pos - 1]

    def rewind(self) -> None:
        self.pos = 0


def _integer_ops(proto) -> Dict[str, int]:
    ops: Dict[str, int] = {}
    for n in proto.graph.node:
        if n.op_type in ("QuantizeLinear", "DequantizeLinear"):
            ops[n.op_type] = ops.get(n.op_type, 0) + 1
    return ops


class _QdqSession(_OrtSession):
    def __init__(self, session: Any, notes: List[str], optimized: str, path: str) -> None:
        import onnx

        # The probe records the QDQ model itself (its node names are the source's: quantize_static
        # only inserts Q/DQ pairs around them).
        super().__init__(session, notes, path, "CPUExecutionProvider", True, optimized,
                         lambda: onnx.load(path))

    def float32_evidence(self, nodes: Sequence[str]) -> Dict[str, str]:
        import onnx

        if not os.path.isfile(self.optimized):
            return {}
        q = onnx.load(self.optimized, load_external_data=False)
        types = {vi.name: vi.type.tensor_type.elem_type
                 for vi in list(q.graph.value_info) + list(q.graph.input) + list(q.graph.output)}
        inits = {t.name: t.data_type for t in q.graph.initializer}
        by_name = {n.name: n for n in q.graph.node}
        dequantized = {o for n in q.graph.node if n.op_type == "DequantizeLinear"
                       for o in n.output}
        f32 = onnx.TensorProto.FLOAT
        proof: Dict[str, str] = {}
        for name in nodes:
            n = by_name.get(name)
            if n is None or n.op_type.startswith(_INTEGER_KINDS) or "Integer" in n.op_type:
                continue
            ins = [types.get(x, inits.get(x)) for x in n.input if x]
            outs = [types.get(x) for x in n.output if x]
            ints = (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)
            if outs and all(t == f32 for t in outs) and not any(t in ints for t in ins) and \
                    not any(x in dequantized for x in n.input):
                proof[name] = (f"ONNX Runtime's optimised graph still has {n.op_type} '{name}' "
                               "with float32 inputs and outputs, none "
                               "of them dequantized INT8 (not fused into an integer kernel)")
        return proof

    def precision_evidence(self, nodes: Sequence[str], precision: str) -> Dict[str, str]:
        if precision != "int16":
            return super().precision_evidence(nodes, precision)
        import onnx

        if not os.path.isfile(self.optimized):
            return {}
        q = onnx.load(self.optimized, load_external_data=False)
        inits = {t.name: t.data_type for t in q.graph.initializer}
        types = {vi.name: vi.type.tensor_type.elem_type
                 for vi in list(q.graph.value_info) + list(q.graph.input) + list(q.graph.output)}
        made_by = {o: n for n in q.graph.node for o in n.output}
        read_by: Dict[str, List[Any]] = {}
        for n in q.graph.node:
            for x in n.input:
                read_by.setdefault(x, []).append(n)
        i16 = (onnx.TensorProto.INT16, onnx.TensorProto.UINT16)

        def zp_type(qdq: Any) -> Optional[int]:
            if len(qdq.input) < 3:
                return None  # no zero point: the default type, UINT8
            zp = qdq.input[2]
            return inits.get(zp, types.get(zp))

        by_name = {n.name: n for n in q.graph.node}
        proof: Dict[str, str] = {}
        for name in nodes:
            n = by_name.get(name)
            if n is None or n.op_type.startswith(_INTEGER_KINDS) or "Integer" in n.op_type:
                continue  # gone, or fused into an integer kernel: not 16-bit activations
            acts, ok, w8 = [], True, False
            for x in n.input:
                if not x or x in inits:
                    continue
                dq = made_by.get(x)
                if dq is None or dq.op_type != "DequantizeLinear":
                    ok = False  # a float activation that was never quantized: not A16
                    break
                if dq.input[0] in inits:  # a quantized weight: A16W8 keeps weights INT8
                    w8 = w8 or zp_type(dq) in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)
                    continue
                if zp_type(dq) not in i16:
                    ok = False
                    break
                acts.append(x)
            if not ok or not acts:
                continue
            # A16 is about what the node reads; its output is quantized as its consumer reads
            # it (ONNX Runtime drops the 16-bit pair before a Relu that a 8-bit Q absorbs).
            outs_q = [r for o in n.output for r in read_by.get(o, [])
                      if r.op_type == "QuantizeLinear"]
            bits = sorted({"16" if zp_type(r) in i16 else "8" for r in outs_q})
            proof[name] = (f"ONNX Runtime's optimised graph still has {n.op_type} '{name}' "
                           f"(not fused into an integer kernel), its activation input(s) "
                           f"{', '.join(acts[:3])} dequantized from 16-bit integers"
                           + (", its weights from INT8" if w8 else "")
                           + (f"; its output quantized to {'/'.join(bits)}-bit for the next "
                              "node" if bits else ""))
        return proof


class OrtQdqBackend(Backend):
    name = "ort-qdq"
    family = "onnx"
    summary = ("ONNX Runtime, CPU provider, static INT8 in QDQ format "
               "(onnxruntime.quantization.quantize_static), calibrated on the guard's inputs")
    note = ""
    preload = ("onnxruntime", "onnxruntime.quantization", "driftscope.onnxruntime")

    def unavailable(self) -> Optional[str]:
        return _missing("onnxruntime.quantization", "onnxruntime")

    def can_keep_float32(self) -> bool:
        return True

    def keep_precisions(self) -> Tuple[str, ...]:
        # INT16 activations, INT8 weights (A16W8) on the kept nodes: quantize_static's
        # TensorQuantOverrides; ONNX Runtime's CPU provider runs 16-bit Q/DQ from opset 21,
        # which quantize_static moves the model to.
        return ("int16",)

    def load(self, model: str, work: str, seed: int, keep_float32: Sequence[str] = (),
             keep_precision: Optional[Mapping[str, str]] = None) -> Session:
        import onnx
        import onnxruntime as ort
        from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

        from ...recorders.api import onnx_make_session

        name = os.path.basename(model)
        samples = guard_samples(work, model, seed)
        # The samples are made from the model's signature: their names are its inputs (no
        # second parse of the model for them).
        inputs = list(samples[0])
        out = os.path.join(work, "qdq.onnx")
        extra: Dict[str, Any] = {}
        a16 = [n for n, p in (keep_precision or {}).items() if p == "int16"]
        if keep_precision and len(a16) != len(keep_precision):
            raise ValueError(f"{self.name} keeps nodes in int16 activations or float32 only")
        if a16:
            extra["TensorQuantOverrides"] = a16_overrides(model, a16)
        # Weights in a data file beside it: the graph alone is read back below (kilobytes, not
        # the whole model again); ONNX Runtime and the recorder read the file itself.
        # A ModelProto, not the path: given a path, the quantizer writes '<stem>-inferred.onnx'
        # beside the user's model and deletes it (a user's file of that name replaced and gone;
        # two builds at once racing on it), as ort-int8's quantize_dynamic did.
        quantize_static(onnx.load(model), out, _Reader(samples, inputs),
                        quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                        nodes_to_exclude=list(keep_float32), use_external_data_format=True,
                        extra_options=extra)
        q = onnx.load(out, load_external_data=False)
        ops = _integer_ops(q)
        notes = [f"calibrated on {len(samples)} sample(s); "
                 + (", ".join(f"{v} {k}" for k, v in sorted(ops.items())) if ops else
                    "no node was quantized: int8 was not exercised")]
        if keep_float32:
            notes.append(f"{len(keep_float32)} node(s) excluded from quantization "
                         "(nodes_to_exclude)")
        if a16:
            notes.append(f"{len(a16)} node(s) with INT16 activations, INT8 weights "
                         "(TensorQuantOverrides)")
        options = ort.SessionOptions()
        options.log_severity_level = 3
        optimized = os.path.join(work, "qdq-optimized.onnx")
        save_optimized_graph(options, optimized)
        session = onnx_make_session(out, ["CPUExecutionProvider"], options,
                                     None, f"'{name}' (QDQ)")
        opt = onnx.load(optimized, load_external_data=False) if os.path.isfile(optimized) else q
        fused: Dict[str, int] = {}
        for n in opt.graph.node:
            if n.op_type.startswith("QLinear") or "Integer" in n.op_type or \
                    n.op_type in ("QAttention", "QGemm", "DynamicQuantizeMatMul"):
                fused[n.op_type] = fused.get(n.op_type, 0) + 1
        notes.append("ONNX Runtime ran " + (", ".join(f"{v} {k}" for k, v in sorted(fused.items()))
                                            if fused else "no integer kernel: the QDQ pairs "
                                            "ran as float32 with rounding")
                     + " (its optimised graph)")
        return _QdqSession(session, notes, optimized, out)
