"""Sizes and byte budgets, and the no-overwrite check, shared by the guard and `reference init`:
a size flag's parsing (parse_size), its wording (format_size, max_bytes_error) and element
counts in Python ints that never wrap (numel), so a hostile declared shape is refused before
numpy allocates anything; a .npy header read alone (npy_header), so that a .npz member's declared
size is known before it is decompressed; an error about a user's file in one bounded line (why).
"""

from __future__ import annotations

import math
import os
import re
from typing import Any, Optional, Sequence, Tuple

# 1 GiB: far above any real model's inputs at the default dims, far below what a laptop holds.
DEFAULT_MAX_BYTES = 1 << 30

_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)\s*", re.IGNORECASE)


def parse_size(text: str) -> int:
    """'512M', '2G', '1.5GiB', '1000000' -> bytes (K, M, G, T, P are powers of 1024)."""
    m = _SIZE.fullmatch(text)
    if not m:
        raise ValueError(f"'{text}': expected a size such as 512M, 2G or 1073741824")
    scale = 1 << (10 * "kmgtp".index(m.group(2).lower()) + 10) if m.group(2) else 1
    value = int(float(m.group(1)) * scale) if "." in m.group(1) else int(m.group(1)) * scale
    if value < 1:
        raise ValueError(f"'{text}': the size must be at least 1 byte")
    return value


def format_size(n: int) -> str:
    """'1,536,000,000 bytes (1.4 GiB)': exact for the reader who checks, rounded for the eye."""
    units = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    k = min((n.bit_length() - 1) // 10, len(units)) if n >= 1024 else 0
    if k == 0:
        return f"{n:,} bytes"
    return f"{n:,} bytes ({n / (1 << (10 * k)):.3g} {units[k - 1]})"


def numel(shape: Sequence[int]) -> int:
    """Elements of a shape in Python ints: never wraps, whatever the dims (numpy's prod does)."""
    return math.prod(int(d) for d in shape)


def shape_text(dtype: str, shape: Sequence[Any]) -> str:
    return f"{dtype} [{', '.join('?' if d is None else str(d) for d in shape)}]"


def max_bytes_error(total: int, limit: int, flag: str, what: str) -> Optional[str]:
    """The one-line refusal when `total` bytes exceed `limit`, naming the flag that raises it."""
    if total <= limit:
        return None
    return (f"{what} {format_size(total)}, more than the {format_size(limit)} allowed "
            f"(raise it with {flag} SIZE, e.g. {flag} {_suggest(total)})")


def _suggest(total: int) -> str:
    for unit, shift in (("P", 50), ("T", 40), ("G", 30), ("M", 20)):
        if total >= 1 << shift:
            return f"{-(-total // (1 << shift))}{unit}"
    return str(total)


def output_onto_input(output: str, flag: str,
                      inputs: Sequence[Tuple[str, str]]) -> Optional[str]:
    """The no-overwrite rule (driftscope._cli.refuse_output_onto_inputs) for (path, role) inputs,
    naming the input it hits: the same file also through a symbolic or hard link (device and
    inode, as os.path.samefile)."""
    try:
        out = os.stat(output)
    except OSError:
        return None  # does not exist yet: it cannot be an input
    for path, role in inputs:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino):
            return (f"{flag} {output} is the input file {path} ({role}); choose another name "
                    f"(driftscope never modifies its inputs)")
    return None


NPY_HEADER_CHARS = 10_000  # numpy's own limit (max_header_size)
_WHY_CHARS = 300


def why(err: BaseException) -> str:
    """An error about a user's file, as one printable line of bounded length (numpy quotes a
    malformed header whole, up to 10,000 characters)."""
    from ._text import printable

    text = str(err).strip()
    text = printable(text.splitlines()[0] if text else type(err).__name__)
    return text if len(text) <= _WHY_CHARS else text[:_WHY_CHARS - 3] + "..."


def npy_header(f: Any) -> Tuple[Any, Tuple[int, ...], int]:
    """(dtype, shape, declared data bytes) of the .npy stream `f`, read up to its data: the
    header only (numpy.lib.format), so a size is known before anything is allocated. ValueError
    for a header numpy refuses, one longer than numpy reads, or an object dtype."""
    from numpy.lib import format as npf

    version = npf.read_magic(f)
    if version != (1, 0):  # a 4-byte header length: numpy reads it all before its own limit
        at = f.tell()
        raw = f.read(4)
        length = int.from_bytes(raw, "little") if len(raw) == 4 else 0
        if length > NPY_HEADER_CHARS:
            raise ValueError(f"the header declares {length:,} bytes at offset {at}, more than "
                             f"the {NPY_HEADER_CHARS:,} numpy reads")
        f.seek(at)
    if version == (1, 0):
        shape, _, dtype = npf.read_array_header_1_0(f, max_header_size=NPY_HEADER_CHARS)
    elif version == (2, 0):
        shape, _, dtype = npf.read_array_header_2_0(f, max_header_size=NPY_HEADER_CHARS)
    else:  # 3.0 (utf-8 field names): numpy has no public reader for it
        shape, _, dtype = npf._read_array_header(  # noqa: SLF001
            f, version, max_header_size=NPY_HEADER_CHARS)
    if dtype.hasobject:
        raise ValueError(f"its dtype {dtype} holds Python objects, which are never loaded")
    return dtype, tuple(int(d) for d in shape), numel(shape) * dtype.itemsize
