"""Writing dumps: :class:`Writer`, a thin front over the C++ streaming writer."""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _core
from .errors import InvalidArgumentError

__all__ = ["Writer", "WriteResult", "numpy_to_tdump_dtype", "as_payload"]

# numpy dtype name -> TDUMP dtype. bfloat16 and float8 come from ml_dtypes (used by JAX and
# TensorFlow); they are recognised by name so that driftscope never imports ml_dtypes itself.
_NUMPY_TO_TDUMP: Dict[str, str] = {
    "float64": "f64", "float32": "f32", "float16": "f16",
    "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8",
    "uint64": "u64", "uint32": "u32", "uint16": "u16", "uint8": "u8",
    "bool": "bool",
    "bfloat16": "bf16", "float8_e4m3fn": "f8e4m3fn", "float8_e5m2": "f8e5m2",
}

_SYNC = {"close": "close", "record": "record", "bytes": "bytes", True: "record", False: "close"}


class WriteResult(NamedTuple):
    """What the writer did with one offered tensor."""

    status: str          # "written", "filtered" or "over_budget"
    exec_index: int      # execution index assigned (filtered tensors consume one too)
    occurrence: int
    offset: Optional[int]  # record offset in the file when written

    @property
    def written(self) -> bool:
        return self.status == "written"


def numpy_to_tdump_dtype(dtype: np.dtype) -> str:
    """The TDUMP dtype name of a numpy dtype; InvalidArgumentError when TDUMP has no such dtype."""
    name = np.dtype(dtype).name
    try:
        return _NUMPY_TO_TDUMP[name]
    except KeyError:
        raise InvalidArgumentError(
            f"numpy dtype {name} has no TDUMP dtype (supported: {', '.join(_NUMPY_TO_TDUMP)})",
            1, "invalid_argument") from None


def as_payload(data: Any, dtype: Optional[str] = None,
               shape: Optional[Sequence[int]] = None) -> Tuple[Any, str, Tuple[int, ...]]:
    """(flat uint8 view of the bytes, TDUMP dtype, shape) for a numpy array, torch tensor, scalar,
    nested list, or raw buffer (then ``dtype`` and ``shape`` say what the bytes are).

    A C-contiguous little-endian array is not copied.
    """
    if type(data).__module__.partition(".")[0] == "torch":
        from ._torch_tensor import tensor_payload  # torch is already imported by whoever made `data`
        return tensor_payload(data)
    if isinstance(data, (bytes, bytearray, memoryview)):
        if dtype is None or shape is None:
            raise InvalidArgumentError(
                "raw bytes need dtype= and shape= to say what they hold", 1, "invalid_argument")
        return memoryview(data).cast("B"), _core.dtype_info(dtype)[0], tuple(int(d) for d in shape)
    arr = np.asarray(data)
    if dtype is not None:
        canonical, _, size, _, _ = _core.dtype_info(dtype)
        if shape is None:
            shape = arr.shape if arr.dtype.itemsize == size else None
        if shape is None:
            raise InvalidArgumentError(
                f"an array of {arr.dtype} holding {dtype} elements needs shape=", 1,
                "invalid_argument")
        tdtype = canonical
    else:
        tdtype = numpy_to_tdump_dtype(arr.dtype)
        shape = arr.shape
    if arr.dtype.byteorder == ">" or (arr.dtype.byteorder == "=" and np.little_endian is False):
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    arr = np.ascontiguousarray(arr)
    # reshape(-1) of a contiguous array is a view; it also lets 0-d arrays be viewed as bytes.
    return arr.reshape(-1).view(np.uint8), tdtype, tuple(int(d) for d in shape)


def _encoding_arg(encoding: Optional[Mapping[str, Any]]) -> Optional[tuple]:
    if encoding is None:
        return None
    kind = encoding.get("kind", "affine_tensor")
    if kind == "raw":
        return None
    if kind == "affine_tensor":
        scales = [float(encoding["scale"])] if "scale" in encoding else [
            float(s) for s in encoding["scales"]]
        zps = [int(encoding.get("zero_point", 0))] if "scale" in encoding else [
            int(z) for z in encoding["zero_points"]]
        return ("affine_tensor", 0, scales, zps)
    if kind == "affine_channel":
        return ("affine_channel", int(encoding["axis"]),
                [float(s) for s in np.asarray(encoding["scales"]).ravel()],
                [int(z) for z in np.asarray(encoding["zero_points"]).ravel()])
    raise InvalidArgumentError(
        f"encoding kind {kind!r} is not one of raw, affine_tensor, affine_channel", 1,
        "invalid_argument")


def _axes_arg(axes: Union[None, str, Iterable[str]]) -> list:
    if axes is None:
        return []
    if isinstance(axes, str):
        return axes.split(",") if axes else []
    return [str(a) for a in axes]


class Writer:
    """Writes a TDUMP file, streaming: each ``write`` appends one record.

    Parameters
    ----------
    path: the file to write (replaced unless ``append`` or ``overwrite=False``).
    meta: run metadata (framework, backend, device, precision, model, seed, ... and free keys).
    filter: which tensors to keep, in the filter syntax of docs/filters.md.
    sync: "close" (fdatasync at close), "record" or True (after every record: ``write``
        returning means the record is durable), "bytes" or an int N (every N bytes).
    background: a writer thread does the I/O; ``write`` copies into a queue bounded by
        ``queue_bytes`` and blocks only when it is full.
    append: continue an existing file (a torn tail is dropped, metadata kept).
    salt: a fixed salt for byte-reproducible files (tests, golden vectors).
    drop_behind: stream the file out of the page cache while writing: writeback starts every
        4 MiB and what reached the device is evicted, so about the last 20 MiB of the file stay
        cached (files under 16 MiB stay fully cached). A long recording then does not push other
        files (model weights, a reference dump) out of memory, and writing is cheaper where
        fresh page-cache pages are expensive; reading the dump right after comes from the device.
        The bytes written and ``sync`` are unchanged. Linux; ignored elsewhere.
    """

    def __init__(self, path: Union[str, "os.PathLike[str]"],
                 meta: Optional[Mapping[str, Any]] = None, filter: str = "", *,
                 sync: Union[str, bool, int] = "close", background: bool = False,
                 queue_bytes: int = 256 << 20, append: bool = False, overwrite: bool = True,
                 salt: Optional[int] = None, drop_behind: bool = False) -> None:
        sync_bytes = 64 << 20
        if isinstance(sync, int) and not isinstance(sync, bool):
            if sync <= 0:
                raise InvalidArgumentError(f"sync={sync}: a byte interval must be positive", 1,
                                           "invalid_argument")
            sync_bytes, sync_mode = sync, "bytes"
        else:
            try:
                sync_mode = _SYNC[sync]
            except (KeyError, TypeError):
                raise InvalidArgumentError(
                    f"sync={sync!r} is not one of 'close', 'record', 'bytes', True, False or a "
                    f"byte count", 1, "invalid_argument") from None
        metadata = [(str(k), str(v)) for k, v in (meta or {}).items()]
        if not any(k == "writer" for k, _ in metadata):
            metadata.append(("writer", f"driftscope {_core.__version__} (python)"))
        self._path = os.fspath(path)
        self._closed = False
        self._w = _core.Writer.create(self._path, metadata, filter or "", sync_mode, sync_bytes,
                                      append, overwrite, background, int(queue_bytes), salt,
                                      bool(drop_behind))

    @property
    def path(self) -> str:
        return self._path

    def write(self, name: str, data: Any, *, op_type: str = "", axes: Any = None,
              role: str = "output", role_index: int = 0,
              attrs: Optional[Mapping[str, Any]] = None, occurrence: Optional[int] = None,
              exec_index: Optional[int] = None, encoding: Optional[Mapping[str, Any]] = None,
              dtype: Optional[str] = None, shape: Optional[Sequence[int]] = None) -> WriteResult:
        """Records one tensor.

        data: numpy array (any TDUMP dtype, ml_dtypes bfloat16/float8 included), torch tensor,
            Python scalar or list, or a raw buffer with ``dtype`` and ``shape``.
        axes: "batch,seq,hidden" or a sequence of names, one per dim.
        occurrence / exec_index: None lets the writer count calls per identity and number
            tensors in call order.
        encoding: {"kind": "affine_tensor", "scale": s, "zero_point": z} or {"kind":
            "affine_channel", "axis": a, "scales": [...], "zero_points": [...]} for quantized ints.
        """
        payload, tdtype, tshape = as_payload(data, dtype, shape)
        r = self._w.write(name, payload, tdtype, list(tshape), op_type, role, role_index,
                          occurrence, exec_index, _axes_arg(axes),
                          [(str(k), str(v)) for k, v in (attrs or {}).items()],
                          _encoding_arg(encoding))
        return WriteResult(r["status"], r["exec_index"], r["occurrence"], r["offset"])

    def write_summary(self, name: str, data: Any, *, op_type: str = "", axes: Any = None,
                      role: str = "output", role_index: int = 0,
                      attrs: Optional[Mapping[str, Any]] = None,
                      occurrence: Optional[int] = None, exec_index: Optional[int] = None,
                      encoding: Optional[Mapping[str, Any]] = None, dtype: Optional[str] = None,
                      shape: Optional[Sequence[int]] = None,
                      projection_dim: int = _core.DEFAULT_PROJECTION_DIM,
                      seed: int = _core.DEFAULT_PROJECTION_SEED) -> WriteResult:
        """Light mode: records the tensor's statistics and a fixed-seed random projection
        (docs/format.md §3.6) instead of its values. Arguments as :meth:`write`."""
        payload, tdtype, tshape = as_payload(data, dtype, shape)
        r = self._w.write_summary(name, payload, tdtype, list(tshape), op_type, role, role_index,
                                  occurrence, exec_index, _axes_arg(axes),
                                  [(str(k), str(v)) for k, v in (attrs or {}).items()],
                                  _encoding_arg(encoding), int(projection_dim), int(seed))
        return WriteResult(r["status"], r["exec_index"], r["occurrence"], r["offset"])

    def wants(self, name: str) -> bool:
        """False when no tensor of this name can pass the filter: skip preparing it."""
        return self._w.wants(name)

    def flush(self) -> None:
        """Waits for queued records and fdatasyncs."""
        self._w.flush()

    def close(self) -> None:
        """Writes the footer index and END record, syncs and closes. Idempotent."""
        self._w.close()  # idempotent in C++; a failed close can be retried
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def records_written(self) -> int:
        return self._w.records_written

    @property
    def bytes_written(self) -> int:
        return self._w.bytes_written

    @property
    def salt(self) -> int:
        return self._w.salt

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, *exc: object) -> None:
        # Also on an exception: what was recorded up to it is worth a finished, indexed file.
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<driftscope.Writer {self._path!r} {state} records={self.records_written}>"
