"""Converting between dumps and the files other tools save tensors in.

``driftscope.import_file("model.safetensors", "weights.tdump")`` and
``driftscope.export_file("run.tdump", "run.npz")`` run the C++ engine of ``driftscope import`` and
``driftscope export`` (docs/cli.md: hostile-input checks, execution order, key names).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Union

from . import _core

__all__ = ["import_file", "export_file", "ImportResult", "ExportResult"]

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class ImportResult:
    """What :func:`import_file` recorded. ``format`` is "npz", "npy" or "safetensors"; ``notes``
    names each npz member skipped because it is not an .npy array."""

    format: str
    written: int
    filtered: int
    payload_bytes: int
    skipped: int
    notes: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export_file` wrote. ``widened`` maps a dtype name to the number of tensors
    written as float32 because .npz has no such dtype (bf16, fp8); ``warnings`` names each record
    left out because its key repeats an earlier one."""

    format: str
    written: int
    widened: Dict[str, int]
    dequantized: int
    summaries_skipped: int
    warnings: List[str] = field(default_factory=list)


def import_file(src: PathLike, dst: PathLike, *, format: Optional[str] = None, filter: str = "",
                meta: Optional[Mapping[str, str]] = None, salt: Optional[int] = None) -> ImportResult:
    """Converts an .npz, .npy or .safetensors file into the dump ``dst`` (replaced if it exists).

    format: "npz", "npy" or "safetensors"; None recognises the file by content, then extension.
    filter: import only tensors this filter accepts (docs/filters.md).
    meta: run metadata; a key here replaces "source", "source_format" and safetensors'
    "__metadata__" entries of the same name. salt: a fixed file salt (byte-reproducible output).
    Raises ImportFormatError (bad_npz / bad_safetensors) naming the member or tensor, the field and
    the offset, DumpIOError for an unreadable or non-regular input (a FIFO is never waited on),
    InvalidArgumentError when ``dst`` is the input. On any error ``dst`` is not created.
    """
    d = _core.import_file(os.fspath(src), os.fspath(dst), format, filter,
                          list((meta or {}).items()), salt)
    return ImportResult(**d)


def export_file(src: PathLike, dst: PathLike, *, format: Optional[str] = None, filter: str = "",
                compress: bool = False, raw_quantized: bool = False) -> ExportResult:
    """Writes the tensor records of the dump ``src`` to ``dst`` in execution order.

    format: "npz" or "safetensors"; None picks safetensors for a name ending in ".safetensors",
    else npz. Keys are the tensor names plus "[role:index]" and "@occurrence" where needed
    (docs/cli.md, export). compress deflates npz members; raw_quantized keeps quantized tensors'
    integer codes instead of dequantized float32. A name holding NUL cannot be an npz member:
    UnsupportedError naming the record. On any error ``dst`` is not created.
    """
    d = _core.export_file(os.fspath(src), os.fspath(dst), format, filter, compress, raw_quantized)
    d["widened"] = dict(d["widened"])
    return ExportResult(**d)
