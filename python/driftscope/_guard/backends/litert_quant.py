"""The quantized LiteRT backends: a float .tflite quantized with ai-edge-quantizer (Google's
LiteRT quantizer) in the child, then run on LiteRT's default kernels (builtin + XNNPACK, as
``litert``): ``litert-int8`` (dynamic range: int8 weights, activations quantized by the kernels
at run time), ``litert-w8`` / ``litert-w4`` (weight-only: int8 / int4 weights dequantized to
float32), ``litert-a8w8`` / ``litert-a16w8`` (static: int8 / int16 activations calibrated on the
guard's own input samples, int8 weights), ``litert-fp16`` (float16 weights).

Each variant is the quantizer's own recipe (ai_edge_quantizer.recipe), and what it really
computes is read back from the built .tflite with the schema's object API: which ops run on
integer activations, which read quantized weights, which stayed float32.

Keeping ops in float32 (the verified fallback) adds a ``no_quantize`` entry to the recipe whose
regex matches the ops' scopes: ai-edge-quantizer names an op by its output tensors' names
("name;", several joined by ";"), the names driftscope's LiteRT recorder gives ops. The proof is
the built file: the kept op is there with float32 inputs, weights and outputs, and no
QUANTIZE / DEQUANTIZE sits between it and another kept op. ``litert-a8w8``'s ladder has a rung
before float32 (issue 28 item 5): the kept ops get INT16 activations, INT8 weights by an
``add_static_config`` entry for the same regex, proven from the built file the same way.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .base import Backend, Session, _missing
from .litert import _LiteRTSession

# name: (summary, ai_edge_quantizer.recipe function, needs calibration, ops whose weights it
# changes (None: every op it quantizes, activations included))
_WEIGHT_OPS = frozenset({"FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV",
                         "CONV_3D", "EMBEDDING_LOOKUP", "BATCH_MATMUL"})
VARIANTS: Dict[str, Tuple[str, str]] = {
    "litert-int8": ("LiteRT default kernels (XNNPACK), dynamic-range INT8 by ai-edge-quantizer "
                    "(int8 weights, activations quantized at run time)", "dynamic_wi8_afp32"),
    "litert-w8": ("LiteRT default kernels (XNNPACK), weight-only INT8 by ai-edge-quantizer "
                  "(int8 weights dequantized to float32)", "weight_only_wi8_afp32"),
    "litert-w4": ("LiteRT default kernels (XNNPACK), weight-only INT4 by ai-edge-quantizer "
                  "(int4 weights dequantized to float32)", "weight_only_wi4_afp32"),
    "litert-a8w8": ("LiteRT default kernels (XNNPACK), static INT8 by ai-edge-quantizer (int8 "
                    "activations and weights), calibrated on the guard's inputs",
                    "static_wi8_ai8"),
    "litert-a16w8": ("LiteRT default kernels (XNNPACK), static A16W8 by ai-edge-quantizer (int16 "
                     "activations, int8 weights), calibrated on the guard's inputs",
                     "static_wi8_ai16"),
    "litert-fp16": ("LiteRT default kernels (XNNPACK), float16 weights by ai-edge-quantizer "
                    "(dequantized to float32)", "float16"),
}
_QDQ = ("QUANTIZE", "DEQUANTIZE")
SIGNATURE_KEY = "serving_default"


class SourceQuantized(RuntimeError):
    """The model is already quantized: the row is UNAVAILABLE with this reason
    (_child.run_job), not a RUNTIME_ERROR."""

    unavailable = True


class QuantizerRejected(RuntimeError):
    """ai-edge-quantizer refused the model; the message names the op it was working on."""


def _names(enum: Any) -> Dict[int, str]:
    return {v: k for k, v in vars(enum).items() if not k.startswith("_") and isinstance(v, int)}


def _text(b: Any) -> str:
    return b.decode("utf-8", "replace") if isinstance(b, (bytes, bytearray)) else str(b or "")


class _Built:
    """A .tflite read with the schema's object API: op types, tensor types, producers."""

    def __init__(self, data: bytes) -> None:
        from ai_edge_litert import schema_py_generated as s

        self.model = s.ModelT.InitFromPackedBuf(data, 0)
        self.sg = self.model.subgraphs[0]
        self.tensors = list(self.sg.tensors or [])
        codes, types = _names(s.BuiltinOperator), _names(s.TensorType)
        self.ops: List[Tuple[str, List[int], List[int]]] = []
        for op in self.sg.operators or []:
            oc = self.model.operatorCodes[op.opcodeIndex]
            code = max(oc.builtinCode, oc.deprecatedBuiltinCode)
            kind = codes.get(code, f"builtin {code}")
            if kind == "CUSTOM" or oc.customCode:
                kind = f"CUSTOM:{_text(oc.customCode)}"
            ins = [int(i) for i in (op.inputs if op.inputs is not None else ())]
            outs = [int(i) for i in (op.outputs if op.outputs is not None else ())]
            self.ops.append((kind, ins, outs))
        self.type = [types.get(t.type, f"type {t.type}") for t in self.tensors]
        self.producer = {o: k for k, (_, _, outs) in enumerate(self.ops) for o in outs if o >= 0}

    def name(self, t: int) -> str:
        return _text(self.tensors[t].name)

    def quantized(self, t: int) -> bool:
        q = self.tensors[t].quantization
        return q is not None and q.scale is not None and len(q.scale) > 0

    def constant(self, t: int) -> bool:
        b = self.tensors[t].buffer
        bufs = self.model.buffers or []
        if not 0 < b < len(bufs):
            return False
        return (bufs[b].data is not None and len(bufs[b].data) > 0) or bufs[b].offset > 1

    def by_output(self) -> Dict[str, int]:
        return {self.name(o): k for k, (_, _, outs) in enumerate(self.ops) for o in outs if o >= 0}

    def weight(self, t: int) -> Optional[int]:
        """The constant a weight read through `t` is stored in (`t` itself, or the input of
        its DEQUANTIZE), None when `t` is not a weight."""
        if self.constant(t):
            return t
        k = self.producer.get(t)
        if k is not None and self.ops[k][0] == "DEQUANTIZE":
            src = self.ops[k][1][0]
            if src >= 0 and self.constant(src):
                return src
        return None

    def low(self, t: int) -> bool:
        """Is constant `t` a weight stored in less than float32 (quantized, or float16)?"""
        return self.type[t] == "FLOAT16" or (self.quantized(t) and self.type[t] != "FLOAT32")


def quantized_source(b: _Built) -> Optional[str]:
    """Why a model is already quantized (None: it is a float model)."""
    qdq = [k for k, (kind, _, _) in enumerate(b.ops) if kind in _QDQ]
    quant = [t for t in range(len(b.tensors)) if b.quantized(t) and b.type[t] != "FLOAT32"]
    half = [t for t in range(len(b.tensors)) if b.type[t] == "FLOAT16" and b.constant(t)]
    if not (qdq or quant or half):
        return None
    parts = []
    if quant:
        kinds = sorted({b.type[t] for t in quant})
        parts.append(f"{len(quant)} quantized {'/'.join(kinds)} tensor(s), e.g. "
                     f"'{b.name(quant[0])}'")
    if half:
        parts.append(f"{len(half)} float16 weight(s), e.g. '{b.name(half[0])}'")
    if qdq:
        parts.append(f"{len(qdq)} QUANTIZE/DEQUANTIZE op(s)")
    return ("the model is already quantized (" + "; ".join(parts) + "): ai-edge-quantizer "
            "quantizes a float .tflite; guard the float model to get this row")


def what_it_computes(b: _Built) -> List[str]:
    """Notes: which ops the built variant runs on integer activations, which read quantized or
    float16 weights, which stayed float32 (by op type, with a few names)."""
    integer: Dict[str, List[str]] = {}
    weights: Dict[str, List[str]] = {}
    floats: Dict[str, List[str]] = {}
    qdq = 0
    for kind, ins, outs in b.ops:
        if kind in _QDQ:
            # A weight's DEQUANTIZE belongs to the op that reads it.
            if not (kind == "DEQUANTIZE" and ins and ins[0] >= 0 and b.constant(ins[0])):
                qdq += 1
            continue
        label = next((b.name(o) for o in outs if o >= 0), "?")
        consts = [w for t in ins if t >= 0 and (w := b.weight(t)) is not None]
        acts = [t for t in ins + outs if t >= 0 and b.weight(t) is None]
        # The bias of an integer op is int32 (int64 with int16 activations) at the product scale: its weights say enough.
        stored = sorted({b.type[w] for w in consts if b.low(w) and b.type[w] not in ("INT32", "INT64")})
        act_types = sorted({b.type[t] for t in acts if b.quantized(t)})
        if act_types:
            key = f"{kind} ({'/'.join(act_types).lower()} activations" + (
                f", {'/'.join(stored).lower()} weights)" if stored else ")")
            integer.setdefault(key, []).append(label)
        elif stored:
            direct = any(b.constant(t) and b.low(t) for t in ins if t >= 0)
            how = ("read by the kernel, activations quantized at run time" if direct else
                   "dequantized to float32")
            key = f"{kind} ({'/'.join(stored).lower()} weights {how})"
            weights.setdefault(key, []).append(label)
        else:
            floats.setdefault(kind, []).append(label)

    def listed(groups: Dict[str, List[str]]) -> str:
        return ", ".join(f"{len(v)} {k}" + (f" [{', '.join(v[:3])}{', ...' if len(v) > 3 else ''}]")
                         for k, v in groups.items())

    n = sum(map(len, integer.values())) + sum(map(len, weights.values()))
    notes = []
    if integer:
        notes.append("integer arithmetic: " + listed(integer))
    if weights:
        notes.append("quantized weights: " + listed(weights))
    notes.append("stayed float32: " + (listed(floats) if floats else "no op"))
    if qdq:
        notes.append(f"{qdq} QUANTIZE/DEQUANTIZE op(s) at the float/integer boundaries")
    if not n:
        notes.insert(0, "ai-edge-quantizer quantized no op: the quantized precision was not "
                        "exercised")
    return notes


def _scope_regex(nodes: Sequence[str]) -> str:
    """ai-edge-quantizer's scope of an op is its output tensors' names, each followed by ";"
    (get_op_scope): this matches the ops with any of `nodes` among their outputs, exactly."""
    names = "|".join(re.escape(n) for n in nodes)
    return f"(?:^|;)(?:{names});"


def _rejected_at(err: BaseException, source: _Built) -> str:
    """The op ai-edge-quantizer was working on when it raised, read from the traceback's frames
    innermost first: its parameter loop holds the op (OpInfo, or the op's index), its graph
    rewriting the name of the tensor it was transforming (then the ops reading it)."""
    tb = err.__traceback__
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next

    def op_text(k: int) -> str:
        kind, _, outs = source.ops[k]
        out = next((source.name(o) for o in outs if o >= 0), "")
        return f"op {k} ({kind}{', output ' + repr(out) if out else ''})"

    for f in reversed(frames):
        loc = f.f_locals
        k = getattr(loc.get("op_info"), "subgraph_op_index", None)
        if k is None:
            k = loc.get("subgraph_op_id")
        if isinstance(k, (int, np.integer)) and 0 <= int(k) < len(source.ops):
            return f" at {op_text(int(k))}"
        name = loc.get("tensor_name")
        if isinstance(name, (str, bytes)):
            name = _text(name)
            readers = [k for k, (_, ins, _) in enumerate(source.ops)
                       if any(t >= 0 and source.name(t) == name for t in ins)]
            return (f" at tensor {name!r}" + (" (read by " + ", ".join(map(op_text, readers))
                                              + ")" if readers else ""))
    return ""


def _signed(data: bytes, built: _Built) -> Tuple[bytes, Dict[str, str]]:
    """The model with a SignatureDef (the quantizer calibrates through one; a hand-made model
    may have none: one named SIGNATURE_KEY is added, its inputs named as their tensors), and
    signature input name -> tensor name."""
    from ai_edge_litert import schema_py_generated as s

    m = built.model
    for sd in m.signatureDefs or []:
        if sd.subgraphIndex == 0:
            return data, {_text(t.name): built.name(t.tensorIndex) for t in sd.inputs or []}
    import copy

    import flatbuffers

    m = copy.deepcopy(m)

    def tmap(t: int) -> Any:
        x = s.TensorMapT()
        x.name, x.tensorIndex = built.name(t), t
        return x

    sd = s.SignatureDefT()
    sd.signatureKey, sd.subgraphIndex = SIGNATURE_KEY, 0
    sd.inputs = [tmap(int(t)) for t in m.subgraphs[0].inputs]
    sd.outputs = [tmap(int(t)) for t in m.subgraphs[0].outputs]
    m.signatureDefs = [sd]
    fb = flatbuffers.Builder(max(1024, len(data) + 1024))
    fb.Finish(m.Pack(fb), file_identifier=b"TFL3")
    return bytes(fb.Output()), {n: n for n in (built.name(int(t)) for t in m.subgraphs[0].inputs)}


def _samples(work: str, model: str, seed: int) -> List[Dict[str, np.ndarray]]:
    """The feeds the row ran (ortqdq.guard_samples: handed over by the job, or its job file),
    else four samples made by the guard's input rules from the model's inputs."""
    from . import ortqdq

    if ortqdq._ROW_SAMPLES or os.path.isfile(os.path.join(work, "job.pkl")):
        got = ortqdq.guard_samples(work, model, seed)
        if got:
            return got
    from ...recorders.api import litert_open
    from .. import _inputs as I

    it, _ = litert_open(model)
    return I.make_samples(I.litert_signature(it.get_input_details()), {}, {}, seed, 4)[0]


def base_recipe(recipe_name: str) -> Any:
    from ai_edge_quantizer import recipe as R

    if recipe_name == "float16":
        from ai_edge_quantizer import recipe_manager
        from ai_edge_quantizer.algorithm_manager import AlgorithmName

        rm = recipe_manager.RecipeManager()
        rm.add_weight_only_config(regex=".*", operation_name="*", num_bits=16,
                                  algorithm_key=AlgorithmName.FLOAT_CASTING)
        return rm.get_quantization_recipe()
    return getattr(R, recipe_name)()


class _QuantSession(_LiteRTSession):
    def __init__(self, it: Any, name: str, path: str, built: _Built, notes: List[str]) -> None:
        super().__init__(it, name, path, "optimized")
        self.built, self.notes = built, notes

    def float32_evidence(self, nodes: Sequence[str]) -> Dict[str, str]:
        b = self.built
        where = b.by_output()
        kept = {where[n] for n in nodes if n in where}
        proof: Dict[str, str] = {}
        for n in nodes:
            k = where.get(n)
            if k is None or b.ops[k][0] in _QDQ:
                continue
            kind, ins, outs = b.ops[k]
            ins, outs = [t for t in ins if t >= 0], [t for t in outs if t >= 0]
            ok = bool(outs) and all(b.type[t] == "FLOAT32" and not b.quantized(t) for t in outs)
            weights = []
            for t in ins:
                w = b.weight(t)
                if w is not None:
                    weights.append(b.name(t))
                    # read straight from a float32 constant, or an integer operand that is no
                    # data (a shape, indices)
                    ok = ok and w == t and not b.quantized(t) and (
                        b.type[t] == "FLOAT32" or b.type[t].startswith(("INT", "UINT")))
                elif b.type[t] != "FLOAT32" or b.quantized(t):
                    ok = ok and b.type[t].startswith(("INT", "UINT")) and not b.quantized(t)
                elif self._through_qdq_from(t, kept):
                    ok = False
            if ok:
                proof[n] = (f"the built .tflite has {kind} '{n}' (op {k}) with float32 inputs, "
                            f"outputs and weights ({', '.join(weights) or 'no weight'}), none "
                            "quantized, and no QUANTIZE/DEQUANTIZE between it and the other "
                            "kept ops")
        return proof

    def precision_evidence(self, nodes: Sequence[str], precision: str) -> Dict[str, str]:
        if precision != "int16":
            return super().precision_evidence(nodes, precision)
        b = self.built
        where = b.by_output()
        proof: Dict[str, str] = {}
        for n in nodes:
            k = where.get(n)
            if k is None or b.ops[k][0] in _QDQ:
                continue
            kind, ins, outs = b.ops[k]
            acts = [t for t in ins + outs if t >= 0 and b.weight(t) is None]
            weights = [w for t in ins if t >= 0 and (w := b.weight(t)) is not None]
            # Integer operands that are no data (a shape) pass; the bias of an int16 op is int64.
            data = [t for t in acts if b.quantized(t) or b.type[t].startswith("FLOAT")]
            # Weights stay integer: INT8 for a matrix product's (a16w8), the activations' INT16
            # for an elementwise op's constant operand; a bias is INT32/INT64 at the product scale.
            wq = [w for w in weights if b.quantized(w) and b.type[w].startswith("INT")]
            if not data or any(b.type[t] != "INT16" or not b.quantized(t) for t in data) \
                    or len(wq) != len(weights):
                continue
            kinds = sorted({b.type[w] for w in wq})
            proof[n] = (f"the built .tflite has {kind} '{n}' (op {k}) with INT16 quantized "
                        f"activations ({', '.join(b.name(t) for t in data[:3])})"
                        + (f" and {'/'.join(kinds)} weights "
                           f"({', '.join(b.name(w) for w in wq[:2])})" if wq else ""))
        return proof

    def _through_qdq_from(self, t: int, kept: set) -> bool:
        """Does `t` reach the op through QUANTIZE/DEQUANTIZE ops from another kept op?"""
        b = self.built
        k = b.producer.get(t)
        for _ in range(len(b.ops)):
            if k is None or b.ops[k][0] not in _QDQ:
                break
            src = b.ops[k][1][0] if b.ops[k][1] else -1
            k = b.producer.get(src) if src >= 0 else None
            if k in kept:
                return True
        return False


class LiteRTQuantBackend(Backend):
    family = "tflite"
    preload = ("ai_edge_quantizer.quantizer", "ai_edge_quantizer.recipe")
    # _investigate.fallback searches a .tflite fallback only on backends that can build it
    keeps_tflite_ops = True
    # Opt-in (--backends): each row quantizes the model in its child (about 1.2 s a row on a
    # 97-op face landmark model whose plain LiteRT rows take 3.5 s in all), and a quantized
    # variant is a deployment choice to check, not what the model is.
    default = False

    def __init__(self, name: str, summary: str, recipe_name: str) -> None:
        self.name, self.summary, self.recipe_name = name, summary, recipe_name
        static = recipe_name.startswith("static")
        self.fallback_ops = None if static else _WEIGHT_OPS
        if recipe_name == "float16":
            self.precision, self.computes = "float16", False

    def unavailable(self) -> Optional[str]:
        return _missing("ai_edge_litert", "ai-edge-litert") or _missing(
            "ai_edge_quantizer", "ai-edge-quantizer")

    def can_keep_float32(self) -> bool:
        return True

    def keep_precisions(self) -> Tuple[str, ...]:
        # static INT8: the kept ops can take INT16 activations (a16w8) before float32
        return ("int16",) if self.recipe_name == "static_wi8_ai8" else ()

    def load(self, model: str, work: str, seed: int, keep_float32: Sequence[str] = (),
             keep_precision: Optional[Mapping[str, str]] = None) -> Session:
        from ai_edge_quantizer import quantizer, recipe_manager

        from ...recorders.api import litert_open

        with open(model, "rb") as f:
            data = f.read()
        source = _Built(data)
        why = quantized_source(source)
        if why:
            raise SourceQuantized(why)
        rm = recipe_manager.RecipeManager()
        rm.load_quantization_recipe(base_recipe(self.recipe_name))
        if keep_float32:
            rm.add_quantization_config(_scope_regex(keep_float32), "*", None, "no_quantize")
        a16 = [n for n, p in (keep_precision or {}).items() if p == "int16"]
        if keep_precision and (len(a16) != len(keep_precision) or not self.keep_precisions()):
            raise ValueError(f"{self.name} keeps ops in "
                             f"{'int16 activations or ' if self.keep_precisions() else ''}"
                             "float32 only")
        if a16:  # the last matching entry wins: these ops get a16w8
            rm.add_static_config(_scope_regex(a16), "*", activation_num_bits=16,
                                 weight_num_bits=8)
        signed, sig_inputs = _signed(data, source)
        notes: List[str] = []
        try:
            q = quantizer.Quantizer(bytearray(signed), rm.get_quantization_recipe())
            calibration = None
            if q.need_calibration:
                samples = _samples(work, model, seed)
                key = next((_text(sd.signatureKey) for sd in
                            _Built(signed).model.signatureDefs or [] if sd.subgraphIndex == 0),
                           SIGNATURE_KEY)
                feeds = [self._signature_feeds(s, sig_inputs) for s in samples]
                calibration = q.calibrate({key: feeds}, num_threads=1)
                notes.append(f"calibrated on {len(feeds)} sample(s)" + (
                    " (ai-edge-quantizer's default moving-average min/max: the first sample "
                    "weighs most)" if len(feeds) > 1 else ""))
            result = q.quantize(calibration, enable_progress_report=False)
        except Exception as err:  # noqa: BLE001 - the quantizer's refusal is the row's error
            raise QuantizerRejected(
                f"ai-edge-quantizer ({self.recipe_name}) rejected the model"
                f"{_rejected_at(err, source)}: {type(err).__name__}: {err}") from None
        out = os.path.join(work, "quantized.tflite")
        with open(out, "wb") as f:
            f.write(bytes(result.quantized_model))
        built = _Built(bytes(result.quantized_model))
        notes.insert(0, f"ai-edge-quantizer recipe {self.recipe_name}")
        notes += what_it_computes(built)
        if keep_float32:
            notes.append(f"{len(keep_float32)} op(s) excluded from quantization (a no_quantize "
                         "recipe entry matching their output tensors)")
        if a16:
            notes.append(f"{len(a16)} op(s) with INT16 activations, INT8 weights (an a16w8 "
                         "recipe entry matching their output tensors)")
        it, name = litert_open(out, "optimized")
        return _QuantSession(it, name, out, built, notes)

    @staticmethod
    def _signature_feeds(sample: Mapping[str, Any], sig_inputs: Mapping[str, str]
                         ) -> Dict[str, np.ndarray]:
        values = list(sample.values())
        feeds = {}
        for k, (sig, tensor) in enumerate(sig_inputs.items()):
            v = sample.get(tensor, sample.get(sig))
            if v is None and k < len(values):
                v = values[k]
            feeds[sig] = np.asarray(v)
        return feeds

    def recipe(self, model: str, nodes: Sequence[str], precision: str = "float32") -> str:
        if not nodes:
            return ""
        base = (f"recipe.{self.recipe_name}()" if self.recipe_name != "float16" else
                "[]  # float16 weights: see add_weight_only_config below")
        lines = ["from ai_edge_quantizer import quantizer, recipe",
                 "",
                 f"qt = quantizer.Quantizer({os.path.basename(model)!r}, {base})"]
        if self.recipe_name == "float16":
            lines[0] += "\nfrom ai_edge_quantizer.algorithm_manager import AlgorithmName"
            lines[2] = f"qt = quantizer.Quantizer({os.path.basename(model)!r})"
            lines.append('qt.add_weight_only_config(regex=".*", operation_name="*", num_bits=16, '
                         "algorithm_key=AlgorithmName.FLOAT_CASTING)")
        if precision == "int16":
            lines += [f"# give {len(nodes)} op(s) INT16 activations, INT8 weights (a16w8): the "
                      "regex matches an op's output tensor names (its scope, \"name;\")",
                      f"qt.add_static_config(regex={_scope_regex(nodes)!r}, "
                      'operation_name="*", activation_num_bits=16, weight_num_bits=8)']
        else:
            lines += [f"# keep {len(nodes)} op(s) in float32: the regex matches an op's output "
                      "tensor names (its scope, \"name;\")",
                      f"qt.update_quantization_recipe(regex={_scope_regex(nodes)!r}, "
                      'operation_name="*", algorithm_key="no_quantize")']
        if self.recipe_name.startswith("static"):
            lines += ["# calibrate on your inputs: one {signature input name: array} per sample "
                      "(guard added a SignatureDef 'serving_default' naming the input tensors "
                      "where the model had none)",
                      f"calibration = qt.calibrate({{{SIGNATURE_KEY!r}: samples}})",
                      "result = qt.quantize(calibration)"]
        else:
            lines.append("result = qt.quantize()")
        lines.append("result.export_model('model_fp32_fallback.tflite')" if precision != "int16"
                     else "result.export_model('model_a16w8_fallback.tflite')")
        return "\n".join(lines) + "\n"


BUILT_IN = tuple(LiteRTQuantBackend(n, summary, r) for n, (summary, r) in VARIANTS.items())
