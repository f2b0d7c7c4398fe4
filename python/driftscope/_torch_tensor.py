"""A torch tensor as TDUMP bytes: the one conversion the writer (driftscope.Writer.write of a
tensor) and the PyTorch recorder (driftscope.recorders.torch) share. It lives in the core so the
writer needs no recorder (scripts/check-python-layers.py); importing it imports torch, which
whoever made the tensor has already done.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import torch

from .errors import UnsupportedError

# Every torch dtype that has a TDUMP dtype (docs/format.md §3.3.1). The unsigned 16/32/64-bit
# dtypes exist since torch 2.3; quantized dtypes are stored as their integers plus an affine
# encoding (see quantized).
TORCH_TO_TDUMP: Dict[torch.dtype, str] = {
    torch.float64: "f64", torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
    torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8",
    torch.uint8: "u8", torch.bool: "bool",
}
for _name, _tdump in (("float8_e4m3fn", "f8e4m3fn"), ("float8_e5m2", "f8e5m2"),
                      ("uint16", "u16"), ("uint32", "u32"), ("uint64", "u64")):
    if hasattr(torch, _name):
        TORCH_TO_TDUMP[getattr(torch, _name)] = _tdump

_QUANTIZED: Dict[torch.dtype, str] = {torch.qint8: "i8", torch.quint8: "u8", torch.qint32: "i32"}


class Unsupported(Exception):
    pass


def tensor_payload(t: "torch.Tensor") -> Tuple[Any, str, Tuple[int, ...]]:
    """(flat uint8 numpy view of the bytes, TDUMP dtype, shape) of a tensor.

    A contiguous CPU tensor is not copied: the view is over its storage. A CUDA/MPS tensor is
    copied to host synchronously, so records are written in execution order. bf16 and fp8 go
    as their raw bytes. Raises UnsupportedError for dtypes TDUMP does not have.
    """
    try:
        payload, dtype, shape, _ = prepare(t)
    except Unsupported as e:
        raise UnsupportedError(str(e), 5, "unsupported") from None
    return payload, dtype, shape


def prepare(t: "torch.Tensor") -> Tuple[Any, str, Tuple[int, ...], Optional[dict]]:
    encoding = None
    if t.device.type == "meta":
        raise Unsupported("a meta tensor has no values")
    if t.layout != torch.strided:
        raise Unsupported(f"layout {t.layout} (only dense tensors are recorded)")
    if t.is_quantized:
        t, encoding = quantized(t)
    dtype = TORCH_TO_TDUMP.get(t.dtype)
    if dtype is None:
        raise Unsupported(f"torch dtype {t.dtype} has no TDUMP dtype (supported: "
                           + ", ".join(str(d).replace("torch.", "") for d in TORCH_TO_TDUMP)
                           + ")")
    t = t.detach()
    if dim_names(t) is not None:
        t = t.rename(None)  # names are read by the caller; views below refuse named tensors
    if t.device.type != "cpu":
        t = t.to("cpu")  # synchronous: the record order stays the execution order
    if not t.is_contiguous():
        t = t.contiguous()
    shape = tuple(int(d) for d in t.shape)
    # reshape(-1) is a view for a contiguous tensor; the uint8 view reinterprets bf16/fp8 bits.
    return t.reshape(-1).view(torch.uint8).numpy(), dtype, shape, encoding


def dim_names(t: "torch.Tensor") -> Optional[Tuple[Optional[str], ...]]:
    # Named tensors (a prototype API that recent torch releases dropped): read only when present.
    names = getattr(t, "names", None)
    return tuple(names) if names and any(n is not None for n in names) else None


def quantized(t: "torch.Tensor") -> Tuple["torch.Tensor", dict]:
    if t.dtype not in _QUANTIZED:
        raise Unsupported(f"quantized dtype {t.dtype} has no TDUMP dtype")
    scheme = t.qscheme()
    if scheme in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        enc = {"kind": "affine_tensor", "scale": float(t.q_scale()),
               "zero_point": int(t.q_zero_point())}
    elif scheme in (torch.per_channel_affine, torch.per_channel_symmetric):
        enc = {"kind": "affine_channel", "axis": int(t.q_per_channel_axis()),
               "scales": t.q_per_channel_scales().double().tolist(),
               "zero_points": t.q_per_channel_zero_points().long().tolist()}
    else:
        raise Unsupported(f"quantization scheme {scheme} is not affine")
    return t.int_repr(), enc


