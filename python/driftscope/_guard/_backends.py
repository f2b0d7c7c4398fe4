"""The runner interface and the backends guard knows.

A backend is one runtime + precision (``ort-fp16``: ONNX Runtime, CPU provider, the model
converted to float16). The guard asks it, in its own process, whether it can run here
(:meth:`Backend.unavailable`, with the reason), and then, in a child process per backend, to
load the model (:meth:`Backend.load`, which builds the variant: a float16 or INT8 copy) and run
it (:meth:`Session.run`). A backend that crashes its child (a segfault in a runtime) takes only
the child down.

More backends come from plugins: modules named in ``$DRIFTSCOPE_GUARD_PLUGINS`` (comma
separated) are imported by the guard and by every child, and call :func:`register_backend`.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

FAMILIES = ("onnx", "tflite", "torch")
DEFAULT_REFERENCE = {"onnx": "ort", "tflite": "litert-ref", "torch": "torch"}


class Session:
    """A loaded model. ``notes`` say what the variant really is (nodes kept in float32, how many
    nodes were quantized); they go into the report row."""

    notes: List[str]

    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        raise NotImplementedError

    def float32_evidence(self, nodes: Sequence[str]) -> Dict[str, str]:
        """node -> how the built variant proves it ran float32; a node missing is not proven."""
        return {}


class Backend:
    """One runtime + precision. Subclasses set the class attributes and implement load()."""

    name: str = ""
    family: str = ""        # which models it runs: "onnx", "tflite" or "torch"
    summary: str = ""       # one line: what runs
    # What it really exercises where that is less than its name suggests; completes the
    # sentence "NAME exercises ..." in every report that runs it.
    note: str = ""
    # Run when --backends is not given (the slow opt-in ones, such as the ONNX backends of a
    # PyTorch model through an export, are not).
    default: bool = True

    def unavailable(self) -> Optional[str]:
        """None when this backend can run on this machine, else the reason it cannot."""
        return None

    def can_keep_float32(self) -> bool:
        """Whether load(..., keep_float32=...) can keep chosen nodes in float32."""
        return False

    def load(self, model: str, work: str, seed: int, keep_float32: Sequence[str] = ()
             ) -> Session:
        """In the child process: build this backend's variant of `model` (files go in the
        folder `work`) and load it, with the nodes named in `keep_float32` (the source model's
        node names) kept in float32 where can_keep_float32(). Raise on failure; the message
        becomes the report's."""
        raise NotImplementedError


BACKENDS: Dict[str, Backend] = {}


def register_backend(backend: Backend) -> Backend:
    """Adds (or replaces) a backend by name; returns it."""
    if backend.family not in FAMILIES:
        raise ValueError(f"backend {backend.name!r}: family {backend.family!r} is not one of "
                         f"{', '.join(FAMILIES)}")
    BACKENDS[backend.name] = backend
    return backend


def load_plugins() -> None:
    for name in filter(None, (s.strip() for s in
                              os.environ.get("DRIFTSCOPE_GUARD_PLUGINS", "").split(","))):
        importlib.import_module(name)


def _missing(module: str, pip: str) -> Optional[str]:
    try:
        importlib.import_module(module)
    except ImportError as err:
        return f"the {module} package is not installed ({err}); pip install {pip}"
    return None


def _gpu_device() -> Optional[str]:
    import glob

    found = sorted(glob.glob("/dev/nvidia[0-9]*") + glob.glob("/dev/dri/renderD*"))
    return found[0] if found else None


# -- ONNX Runtime ------------------------------------------------------------------------------

class _OrtSession(Session):
    def __init__(self, session: Any, notes: List[str]) -> None:
        self.session = session
        self.notes = notes
        self.names = [o.name for o in session.get_outputs()]

    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        from ..onnxruntime import _check_inputs, _run

        checked = _check_inputs(self.session, dict(feeds))
        return dict(zip(self.names, _run(self.session, checked, "the model")))


class OrtBackend(Backend):
    family = "onnx"

    def __init__(self, name: str, summary: str, note: str = "",
                 provider: str = "CPUExecutionProvider", optimize: bool = True,
                 variant: Optional[str] = None) -> None:
        self.name, self.summary, self.note = name, summary, note
        self.provider, self.optimize, self.variant = provider, optimize, variant

    def unavailable(self) -> Optional[str]:
        why = _missing("onnxruntime", "onnxruntime")
        if why:
            return why
        import onnxruntime as ort

        have = ort.get_available_providers()
        if self.provider not in have:
            gpu = "" if _gpu_device() else "; this machine has no GPU device"
            return (f"onnxruntime {ort.__version__} has no {self.provider} (it provides "
                    f"{', '.join(have)}){gpu}")
        if self.variant == "fp16":
            return _missing("onnxconverter_common", "onnxconverter-common")
        if self.variant == "int8":
            return _missing("onnxruntime.quantization", "onnxruntime")
        return None

    def load(self, model: str, work: str, seed: int) -> Session:
        import onnxruntime as ort

        from .. import onnxruntime as dort

        if self.variant is None:
            proto, external_dir, name = None, None, os.path.basename(model)
        else:
            proto, external_dir, name = dort._load_model(model)
        notes: List[str] = []
        if self.variant == "fp16":
            clamped = _clamped_weights(proto) if external_dir is None else None
            if clamped:
                notes.append(clamped)
            proto, kept = dort._to_float16(proto if external_dir is None else model,
                                           [self.provider])
            external_dir = None
            if kept:
                notes.append(f"{len(kept)} node(s) kept in float32 (ONNX Runtime cannot load "
                             f"them converted): {', '.join(kept[:5])}"
                             + (" ..." if len(kept) > 5 else ""))
        elif self.variant == "int8":
            from onnxruntime.quantization import quantize_dynamic

            import onnx

            out = os.path.join(work, "int8.onnx")
            quantize_dynamic(model, out)
            proto, external_dir = onnx.load(out), None
            ops: Dict[str, int] = {}
            for n in proto.graph.node:
                if "Integer" in n.op_type or n.op_type.startswith(("QLinear", "DynamicQuantize")):
                    ops[n.op_type] = ops.get(n.op_type, 0) + 1
            notes.append("int8 nodes: " + ", ".join(f"{v} {k}" for k, v in sorted(ops.items()))
                         if ops else "no node was quantized: int8 was not exercised")
        options = ort.SessionOptions()
        options.log_severity_level = 3
        if not self.optimize:
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        optimized = os.path.join(work, "optimized.onnx")
        if self.variant == "fp16":
            options.optimized_model_filepath = optimized
        # The file itself when nothing was changed: ONNX Runtime reads it (and its external
        # data) faster than a re-serialised copy (bench/bench_guard.py).
        source = model if self.variant is None else proto.SerializeToString()
        session = dort._make_session(source, [self.provider], options,
                                     None if self.variant is None else external_dir, f"'{name}'")
        active = session.get_providers()
        if not active or active[0] != self.provider:
            raise RuntimeError(f"ONNX Runtime ran {active[0] if active else 'nothing'} instead "
                               f"of {self.provider}")
        if self.variant == "fp16" and os.path.isfile(optimized):
            notes.append(_float16_kernels(optimized))
        return _OrtSession(session, notes)


# onnxconverter-common's convert_float_to_float16 defaults: weights are clipped into
# [1e-7, 1e4] in magnitude (zeros stay zero) before the cast, not to float16's own range.
_CONVERTER_MIN, _CONVERTER_MAX = 1e-7, 1e4


def _clamped_weights(proto) -> Optional[str]:
    """Which float32 weights the float16 conversion changes by more than rounding."""
    import onnx
    from onnx import numpy_helper

    big = small = 0
    for t in proto.graph.initializer:
        if t.data_type != onnx.TensorProto.FLOAT:
            continue
        a = np.abs(numpy_helper.to_array(t))
        big += int(np.count_nonzero(a > _CONVERTER_MAX))
        small += int(np.count_nonzero((a > 0) & (a < _CONVERTER_MIN)))
    if not big and not small:
        return None
    return (f"the float16 conversion clipped {big} weight(s) above {_CONVERTER_MAX:g} and "
            f"{small} nonzero weight(s) below {_CONVERTER_MIN:g} in magnitude")


def _float16_kernels(optimized_path: str) -> str:
    """What ONNX Runtime really computes in a float16 model: the graph it saved after its
    optimizations. Nodes without a float16 kernel for the provider (and isolated ones) get casts
    around them and run in float32; the values they produce have no float16 type there."""
    import onnx

    q = onnx.load(optimized_path, load_external_data=False)
    types = {vi.name: vi.type.tensor_type.elem_type
             for vi in list(q.graph.value_info) + list(q.graph.output)}
    f16, f32 = onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT
    half: Dict[str, int] = {}
    single = 0
    for n in q.graph.node:
        if n.op_type == "Cast":
            continue
        outs = [o for o in n.output if o]
        if any(types.get(o) == f16 for o in outs):
            half[n.op_type] = half.get(n.op_type, 0) + 1
        elif any(types.get(o) == f32 or o.startswith("InsertedPrecisionFreeCast_") for o in outs):
            single += 1
    if not half:
        return (f"ONNX Runtime ran all {single} float node(s) in float32: only the rounding of "
                "weights (and inputs) to float16 was exercised")
    kinds = ", ".join(f"{v} {k}" for k, v in sorted(half.items()))
    return (f"ONNX Runtime ran {sum(half.values())} node(s) with float16 kernels ({kinds}) and "
            f"{single} in float32")


_FP16_NOTE = ("float16 storage, not float16 arithmetic: ONNX Runtime's CPU provider computes "
              "most float16 nodes in float32 behind inserted casts")

for _b in (
    OrtBackend("ort", "ONNX Runtime, CPU provider, float32, default graph optimizations"),
    OrtBackend("ort-noopt", "ONNX Runtime, CPU provider, float32, graph optimizations off",
               optimize=False),
    OrtBackend("ort-fp16", "ONNX Runtime, CPU provider, model converted to float16 (inputs "
               "and outputs stay float32)", note=_FP16_NOTE, variant="fp16"),
    OrtBackend("ort-int8", "ONNX Runtime, CPU provider, dynamic INT8 quantization "
               "(onnxruntime.quantization.quantize_dynamic)", variant="int8"),
    OrtBackend("ort-cuda", "ONNX Runtime, CUDA provider, float32",
               provider="CUDAExecutionProvider"),
):
    register_backend(_b)


# -- LiteRT ------------------------------------------------------------------------------------

class _LiteRTSession(Session):
    def __init__(self, it: Any, name: str) -> None:
        self.it, self.name, self.notes = it, name, []

    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        from ..litert import _feed, _invoke

        feeds = dict(feeds)
        for d in self.it.get_input_details():
            # A float value for a quantized input (--reference-model: the inputs follow the
            # float reference): quantized with the input's own scale and zero point.
            v = feeds.get(d["name"])
            scale, zero = d.get("quantization", (0.0, 0))
            if v is not None and scale and np.dtype(d["dtype"]).kind in "iu" and \
                    np.asarray(v).dtype.kind == "f":
                info = np.iinfo(d["dtype"])
                feeds[d["name"]] = np.clip(np.round(np.asarray(v, np.float64) / scale) + zero,
                                           info.min, info.max).astype(d["dtype"])
        _feed(self.it, feeds, self.name)
        _invoke(self.it, self.name)
        out: Dict[str, np.ndarray] = {}
        for d in self.it.get_output_details():
            v = np.array(self.it.get_tensor(d["index"]))
            scale, zero = d.get("quantization", (0.0, 0))
            if scale and v.dtype.kind in "iu":  # judge what the integers stand for
                v = float(scale) * (v.astype(np.float64) - int(zero))
            out[d["name"]] = v
        return out


class LiteRTBackend(Backend):
    family = "tflite"

    def __init__(self, name: str, summary: str, kernels: str) -> None:
        self.name, self.summary, self.kernels = name, summary, kernels

    def unavailable(self) -> Optional[str]:
        return _missing("ai_edge_litert", "ai-edge-litert")

    def load(self, model: str, work: str, seed: int) -> Session:
        from ..litert import _check_flatbuffer, _interpreter, _read_model

        data, name = _read_model(model)
        _check_flatbuffer(data, name)
        return _LiteRTSession(_interpreter(data, name, self.kernels, None, preserve=False), name)


class LiteRTGpuBackend(Backend):
    name = "litert-gpu"
    family = "tflite"
    summary = "LiteRT GPU accelerator"

    def unavailable(self) -> Optional[str]:
        if _gpu_device() is None:
            return "this machine has no GPU device (no /dev/dri render node, no /dev/nvidia*)"
        return "the LiteRT GPU runner is not implemented in this version of driftscope guard"


register_backend(LiteRTBackend("litert", "LiteRT interpreter, default kernels (builtin + "
                               "XNNPACK delegate, what an app gets)", "optimized"))
register_backend(LiteRTBackend("litert-ref", "LiteRT interpreter, reference kernels "
                               "(BuiltinRefOpResolver)", "reference"))
register_backend(LiteRTGpuBackend())


# -- PyTorch -----------------------------------------------------------------------------------

def torch_example(spec: str, seed: int) -> Any:
    """Calls FUNCTION of ``file.py:FUNCTION`` (or ``module:FUNCTION``) after seeding torch, and
    returns its (model, inputs)."""
    import torch

    from ..errors import InvalidArgumentError
    from ..torch import _load_entry_point

    torch.manual_seed(seed)
    made = _load_entry_point(spec)()
    if not (isinstance(made, tuple) and len(made) == 2):
        raise InvalidArgumentError(f"--model {spec}: the function must return (model, inputs), "
                                   f"got {type(made).__name__}", 1, "invalid_argument")
    return made


def torch_leaves(inputs: Any) -> Dict[str, Any]:
    """The tensors of an entry point's inputs, by the name guard gives them: the key of a dict,
    ``input0``, ``input1``... of a tuple, ``input`` of a single tensor."""
    import torch

    if isinstance(inputs, torch.Tensor):
        return {"input": inputs}
    if isinstance(inputs, Mapping):
        return {str(k): v for k, v in inputs.items() if isinstance(v, torch.Tensor)}
    if isinstance(inputs, (list, tuple)):
        return {f"input{i}": v for i, v in enumerate(inputs) if isinstance(v, torch.Tensor)}
    raise TypeError(f"the entry point's inputs are a {type(inputs).__name__}; expected a "
                    "tensor, a tuple of positional arguments or a dict of keyword arguments")


def _rebuild(inputs: Any, feeds: Mapping[str, np.ndarray], dtype: Any) -> Any:
    import torch

    def conv(v: np.ndarray) -> Any:
        t = torch.from_numpy(np.ascontiguousarray(v))
        return t.to(dtype) if dtype is not None and t.is_floating_point() else t

    if isinstance(inputs, torch.Tensor):
        return conv(feeds["input"])
    if isinstance(inputs, Mapping):
        return {k: conv(feeds[str(k)]) if isinstance(v, torch.Tensor) else v
                for k, v in inputs.items()}
    return type(inputs)(conv(feeds[f"input{i}"]) if isinstance(v, torch.Tensor) else v
                        for i, v in enumerate(inputs))


class _TorchSession(Session):
    def __init__(self, model: Any, example: Any, dtype: Any) -> None:
        self.model, self.example, self.dtype, self.notes = model, example, dtype, []

    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        import torch

        from ..torch import _call, _flat

        with torch.no_grad():
            out = _call(self.model, _rebuild(self.example, feeds, self.dtype))
        leaves, _ = _flat(out)
        result: Dict[str, np.ndarray] = {}
        for path, t in leaves:
            t = t.detach().cpu()
            if t.dtype in (torch.bfloat16, torch.float16):
                t = t.float()  # exact: every bf16/f16 value is a float32
            result[path.lstrip(".") or "output"] = t.numpy().copy()
        return result


class TorchBackend(Backend):
    family = "torch"

    def __init__(self, name: str, summary: str, dtype: Optional[str]) -> None:
        self.name, self.summary, self.dtype = name, summary, dtype

    def unavailable(self) -> Optional[str]:
        return _missing("torch", "torch")

    def load(self, model: str, work: str, seed: int) -> Session:
        import torch

        net, example = torch_example(model, seed)
        dtype = getattr(torch, self.dtype) if self.dtype else None
        if dtype is not None:
            net = net.to(dtype)
        net.eval()
        return _TorchSession(net, example, dtype)


register_backend(TorchBackend("torch", "PyTorch eager, CPU, float32", None))
register_backend(TorchBackend("torch-bf16", "PyTorch eager, CPU, model and float inputs in "
                              "bfloat16", "bfloat16"))
register_backend(TorchBackend("torch-fp16", "PyTorch eager, CPU, model and float inputs in "
                              "float16 (float16 arithmetic)", "float16"))


def _register_more() -> None:
    """The backends of their own modules (OpenVINO, static QDQ INT8, torch.compile, the ONNX
    backends of a PyTorch model through an export, runtimes that are not installed)."""
    from . import _more

    for b in _more.backends([b for b in BACKENDS.values() if b.family == "onnx"]):
        register_backend(b)
    order = list(BACKENDS)  # the INT8 variants side by side in listings and reports
    order.remove("ort-qdq")
    order.insert(order.index("ort-int8") + 1, "ort-qdq")
    BACKENDS.update({n: BACKENDS.pop(n) for n in order})


_register_more()


def family_backends(family: str) -> List[Backend]:
    return [b for b in BACKENDS.values() if b.family == family]


def names(backends: Sequence[Backend]) -> str:
    return ", ".join(b.name for b in backends)
