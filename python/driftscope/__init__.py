"""driftscope: record the named intermediate tensors of a model run into a ``.tdump`` file, then
compare two runs and name the first tensor that diverges.

    import driftscope
    with driftscope.Writer("run.tdump", meta={"framework": "numpy"}) as w:
        w.write("encoder.layers.0.norm", array, op_type="LayerNorm", axes="batch,seq,hidden")
    dump = driftscope.open("run.tdump")
    x = dump["encoder.layers.0.norm"]          # numpy, zero-copy over the mapped file
    report = driftscope.compare("fp32.tdump", "fp16.tdump")
    print(report.summary, report.first_divergence)
    driftscope.import_file("model.safetensors", "weights.tdump")   # also .npz, .npy
    driftscope.export_file("run.tdump", "run.npz")                 # or .safetensors

Framework recorders are submodules imported on first use, so ``import driftscope`` loads no
framework: ``driftscope.torch``, ``driftscope.onnxruntime``, ``driftscope.litert``.
"""

from __future__ import annotations

import importlib
from typing import Any

from . import _core
from ._compare.api import Report, TensorResult, compare
from ._compare.check import CheckReport, Finding, check
from ._dump import Dump, Integrity, Record, open
from ._dumpset import DumpSet, Rank, open_set
from ._interop import ExportResult, ImportResult, export_file, import_file
from ._writer import Writer, WriteResult
from .errors import (
    ClosedError,
    DumpIOError,
    Error,
    FilterSyntaxError,
    FormatError,
    ImportFormatError,
    IncomparableError,
    InvalidArgumentError,
    NotFoundError,
    PolicyError,
    UnsupportedError,
)

Filter = _core.Filter
glob_match = _core.glob_match
__version__: str = _core.__version__

__all__ = [
    "open_set", "DumpSet", "Rank",
    "open", "Dump", "Record", "Integrity", "Writer", "WriteResult", "Filter", "glob_match",
    "compare", "Report", "TensorResult", "check", "CheckReport", "Finding",
    "import_file", "export_file", "ImportResult", "ExportResult",
    "Error", "InvalidArgumentError", "DumpIOError", "NotFoundError", "FilterSyntaxError",
    "UnsupportedError", "ClosedError", "FormatError", "ImportFormatError", "IncomparableError",
    "PolicyError", "__version__",
]

_LAZY_SUBMODULES = ("torch", "onnxruntime", "litert")


# driftscope.guard(model, ...) -> GuardReport (docs/howto/guard.md), loaded on first use.
_LAZY_GUARD = ("guard", "GuardReport", "GuardError")


def __getattr__(name: str) -> Any:
    # PEP 562: `driftscope.torch` imports the adapter (and its framework) only when touched.
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _LAZY_GUARD:
        return getattr(importlib.import_module(f"{__name__}._guard"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return sorted(set(globals()) | set(_LAZY_SUBMODULES) | set(_LAZY_GUARD))
