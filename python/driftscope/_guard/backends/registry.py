"""The backends guard knows, by name, in the order ``--list-backends`` shows them: the built-in
ones of the runtime modules beside this one, then the plugins'.

More backends come from plugins: modules named in ``$DRIFTSCOPE_GUARD_PLUGINS`` (comma
separated) are imported by the guard and by every child, and call :func:`register_backend`
(``from driftscope._guard import register_backend``, docs/howto/guard.md).
"""

from __future__ import annotations

import importlib
import os
from typing import Dict, List, Sequence

from . import fp16_arith, litert, litert_quant, onnxruntime, torch
from .base import Backend, FAMILIES

__all__ = ["BACKENDS", "DEFAULT_REFERENCE", "FAMILIES", "register_backend", "load_plugins",
           "family_backends", "names"]

DEFAULT_REFERENCE = {"onnx": "ort", "tflite": "litert-ref", "torch": "torch"}

BACKENDS: Dict[str, Backend] = {}


def register_backend(backend: Backend) -> Backend:
    """Adds (or replaces) a backend by name; returns it."""
    for family in (backend.family, *backend.also_runs):
        if family not in FAMILIES:
            raise ValueError(f"backend {backend.name!r}: family {family!r} is not one of "
                             f"{', '.join(FAMILIES)}")
    BACKENDS[backend.name] = backend
    return backend


def load_plugins() -> None:
    for name in filter(None, (s.strip() for s in
                              os.environ.get("DRIFTSCOPE_GUARD_PLUGINS", "").split(","))):
        importlib.import_module(name)


def _more(onnx_backends: Sequence[Backend]) -> List[Backend]:
    """The backends of their own modules (OpenVINO, static QDQ INT8, IREE, torch.compile,
    ExecuTorch, the ONNX backends of a PyTorch model through an export; the LiteRT ones
    through a litert-torch conversion are registered after them, torch_litert.py)."""
    from .executorch import ExecuTorchBackend
    from .iree import IreeBackend
    from .openvino import BACKENDS as OPENVINO
    from .ortqdq import OrtQdqBackend
    from .torch_extra import TorchCompileBackend, exported_backends

    onnx: List[Backend] = [OrtQdqBackend(), *OPENVINO, IreeBackend()]
    more_torch: List[Backend] = [TorchCompileBackend(), ExecuTorchBackend()]
    more_torch += exported_backends(list(onnx_backends) + onnx)
    return onnx + more_torch


def _register_built_in() -> None:
    for module in (onnxruntime, litert, litert_quant, torch):
        for b in module.BUILT_IN:
            register_backend(b)
    for name, precision, computes in (("ort-fp16", "float16", False),
                                      ("torch-fp16", "float16", True),
                                      ("torch-bf16", "bfloat16", True)):
        BACKENDS[name].precision, BACKENDS[name].computes = precision, computes
    for b in fp16_arith.ARITH.values():  # beside ort-fp16 in listings and reports
        b.registry = BACKENDS  # they run ort-fp16's variant: whichever backend has that name
        register_backend(b)
    for b in _more([b for b in BACKENDS.values() if b.family == "onnx"]):
        register_backend(b)
    from .torch_litert import converted_backends  # a PyTorch model through litert-torch

    for b in converted_backends([b for b in BACKENDS.values() if b.family == "tflite"]):
        register_backend(b)
    order = list(BACKENDS)  # the INT8 variants side by side in listings and reports
    order.remove("ort-qdq")
    order.insert(order.index("ort-int8") + 1, "ort-qdq")
    for k, name in enumerate(("ort-fp16-exact", "ort-bf16-exact")):
        order.remove(name)
        order.insert(order.index("ort-fp16") + 1 + k, name)
    BACKENDS.update({n: BACKENDS.pop(n) for n in order})


_register_built_in()


def family_backends(family: str) -> List[Backend]:
    return [b for b in BACKENDS.values() if b.family == family or family in b.also_runs]


def names(backends: Sequence[Backend]) -> str:
    return ", ".join(b.name for b in backends)
