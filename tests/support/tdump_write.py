"""An independent TDUMP v1 writer, written from docs/format.md (not from the C++), for golden files
and test inputs. Deterministic: the same arguments give the same bytes, and those bytes are what
the C++ Writer writes with WriterOptions{fixed_salt=true, salt=SALT} for the same calls.

    from tdump_write import write_tdump
    write_tdump("run.tdump", [("writer", "tests"), ("framework", "demo")],
                [{"name": "x", "dtype": "f32", "shape": [2], "data": np.array([1, -2], "<f4")}],
                salt=0x0123456789ABCDEF)

Tensor dicts (every key but `name` and `dtype` is optional):

  kind         "tensor" (default) or "summary" (§3.6: a SUMMARY record, needs `summary`)
  name         str, the module path
  op_type      str, default ""
  role         "output" (default), "input", "parameter", "other", or its code 0..3
  role_index   int, default 0
  exec_index   int; default: one more than the largest exec_index written so far (0 first),
               which is how the C++ writer numbers tensors offered with kAutoIndex
  occurrence   int; default: how many tensors with the same (name, role, role_index) came
               before (kAutoOccurrence)
  dtype        name of §3.3.1: f64 f32 f16 bf16 f8e4m3fn f8e5m2 i64 i32 i16 i8 u8 bool u16 u32 u64
  shape        list of ints, default [] (rank 0: one element)
  axes         list of str or "a,b,c"; default none
  attrs        list of (key, value) pairs (order kept) or a dict
  encoding     None (raw), {"kind": "affine_tensor", "scale": s, "zero_point": z} or
               {"kind": "affine_channel", "axis": a, "scales": [...], "zero_points": [...]}
  data         the element bytes, row-major: bytes, or a numpy array whose itemsize is the
               dtype's size (bf16 as uint16 bits, fp8 as uint8 bits, bool as bool/uint8);
               arrays are written little-endian. Required for "tensor".
  summary      for "summary": dict with count, nan_count, posinf_count, neginf_count, zero_count,
               min, max, mean, std, l2_norm, projection_seed, projection_kind (default 1),
               projection (list of float32 values)

The lower-level encoders (encode_header, encode_tensor_meta, encode_record, encode_index,
encode_end) are public so tests can build invalid files one field at a time.
"""
from __future__ import annotations

import struct
import zlib
from typing import Iterable, Sequence

import numpy as np

DTYPES = {"f64": (1, 8), "f32": (2, 4), "f16": (3, 2), "bf16": (4, 2), "f8e4m3fn": (5, 1),
          "f8e5m2": (6, 1), "i64": (7, 8), "i32": (8, 4), "i16": (9, 2), "i8": (10, 1),
          "u8": (11, 1), "bool": (12, 1), "u16": (13, 2), "u32": (14, 4), "u64": (15, 8)}
ROLES = {"output": 0, "input": 1, "parameter": 2, "other": 3}
ENCODINGS = {"raw": 0, "affine_tensor": 1, "affine_channel": 2}
KIND_TENSOR, KIND_SUMMARY, KIND_INDEX, KIND_END = 1, 2, 3, 4
FILE_MAGIC = b"\x89TDUMP\r\n"
RECORD_MAGIC = b"\x8aREC"


def align64(x: int) -> int:
    return (x + 63) & ~63


def crc32(*parts: bytes) -> int:
    c = 0
    for p in parts:
        c = zlib.crc32(p, c)
    return c


def fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def encode_header(metadata: Sequence[tuple[str, str]], salt: int, *, version=(1, 0),
                  byte_order=0x01020304, required=0, optional=0) -> bytes:
    """§2.1 + §2.3: the 64-byte fixed part, the metadata block and the zero padding."""
    block = b"".join(struct.pack("<I", len(k.encode())) + k.encode() +
                     struct.pack("<I", len(v.encode())) + v.encode() for k, v in metadata)
    header_length = align64(64 + len(block))
    fixed = FILE_MAGIC + struct.pack("<HHIQIIIII16x", version[0], version[1], byte_order, salt,
                                     required, optional, header_length, len(block),
                                     len(metadata))
    fixed += struct.pack("<I", crc32(fixed, block))
    return (fixed + block).ljust(header_length, b"\0")


def encode_record(kind: int, salt: int, meta: bytes, payload: bytes, flags: int = 0) -> bytes:
    """§3.1: frame, meta, padding, payload, padding; both CRCs computed."""
    p = align64(48 + len(meta))
    length = align64(p + len(payload))
    frame = RECORD_MAGIC + struct.pack("<HHQQIIQ", kind, flags, length, len(payload), len(meta),
                                       0, salt)
    frame += struct.pack("<I", crc32(frame))
    frame += struct.pack("<I", crc32(frame, meta, payload))
    return (frame + meta).ljust(p, b"\0") + payload.ljust(length - p, b"\0")


def _attrs(t: dict) -> list[tuple[str, str]]:
    a = t.get("attrs") or []
    return list(a.items()) if isinstance(a, dict) else [tuple(kv) for kv in a]


def encode_tensor_meta(t: dict, exec_index: int, occurrence: int) -> bytes:
    """§3.3: fixed part, dims, name, op_type, axes, attrs, encoding parameters."""
    shape = [int(d) for d in t.get("shape", [])]
    axes = t.get("axes") or ""
    axes = (",".join(axes) if not isinstance(axes, str) else axes).encode()
    name, op = t["name"].encode(), t.get("op_type", "").encode()
    attrs = _attrs(t)
    role = t.get("role", "output")
    enc = t.get("encoding") or {"kind": "raw"}
    out = struct.pack("<QIHBBHBBIHHHH", exec_index, occurrence, DTYPES[t["dtype"]][0], len(shape),
                      ROLES.get(role, role), t.get("role_index", 0), ENCODINGS[enc["kind"]], 0, 0,
                      len(name), len(op), len(axes), len(attrs))
    out += struct.pack(f"<{len(shape)}Q", *shape) + name + op + axes
    for k, v in attrs:
        out += struct.pack("<HI", len(k.encode()), len(v.encode())) + k.encode() + v.encode()
    if enc["kind"] == "affine_tensor":
        out += struct.pack("<dq", enc["scale"], enc["zero_point"])
    elif enc["kind"] == "affine_channel":
        n = len(enc["scales"])
        out += struct.pack(f"<II{n}d{n}q", enc["axis"], n, *enc["scales"], *enc["zero_points"])
    return out


def encode_summary_payload(s: dict) -> bytes:
    """§3.6: 112 fixed bytes then the f32 projection."""
    proj = np.asarray(s.get("projection", []), dtype="<f4")
    return struct.pack("<5Q5dQII16x", s["count"], s["nan_count"], s["posinf_count"],
                       s["neginf_count"], s["zero_count"], s["min"], s["max"], s["mean"], s["std"],
                       s["l2_norm"], s["projection_seed"], len(proj),
                       s.get("projection_kind", 1)) + proj.tobytes()


def tensor_payload(t: dict) -> bytes:
    data = t["data"]
    if isinstance(data, np.ndarray):
        size = DTYPES[t["dtype"]][1]
        if data.dtype.itemsize != size:
            raise ValueError(f"{t['name']}: array itemsize {data.dtype.itemsize}, dtype needs {size}")
        data = np.ascontiguousarray(data, dtype=data.dtype.newbyteorder("<")).tobytes()
    numel = int(np.prod(t.get("shape", []), dtype=np.uint64))
    if len(data) != numel * DTYPES[t["dtype"]][1]:
        raise ValueError(f"{t['name']}: {len(data)} payload bytes for {numel} elements")
    return bytes(data)


def encode_index(entries: Sequence[tuple[int, int, int, int]]) -> tuple[bytes, bytes]:
    """§3.4: entries are (offset, name_hash, occurrence, kind) in file order; returns meta,
    payload."""
    slots = 1
    while slots < 2 * len(entries):
        slots *= 2
    table = [0] * slots
    for e, (_, h, _, _) in enumerate(entries):
        s = h % slots
        while table[s]:
            s = (s + 1) % slots
        table[s] = e + 1
    meta = struct.pack("<QQII", len(entries), slots, 1, 0)
    payload = b"".join(struct.pack("<QQII", *e) for e in entries)
    return meta, payload + struct.pack(f"<{slots}I", *table)


def encode_end(index_offset: int, record_count: int) -> bytes:
    return struct.pack("<QQ", index_offset, record_count)


class _Stream:
    """Record-at-a-time state: offsets, numbering and the index entries of the file so far."""

    def __init__(self, f, salt: int, pos: int):
        self.f, self.salt, self.pos = f, salt, pos
        self.entries: list[tuple[int, int, int, int]] = []
        self.next_index = 0
        self.occurrences: dict[tuple, int] = {}

    def note(self, kind, name, exec_index, occurrence, role, role_index, offset):
        self.entries.append((offset, fnv1a64(name.encode()), occurrence, kind))
        self.next_index = max(self.next_index, exec_index + 1)
        key = (name, ROLES.get(role, role), role_index)
        self.occurrences[key] = max(self.occurrences.get(key, 0), occurrence + 1)

    def put(self, t: dict) -> int:
        role, role_index = t.get("role", "output"), t.get("role_index", 0)
        key = (t["name"], ROLES.get(role, role), role_index)
        exec_index = t.get("exec_index", self.next_index)
        occurrence = t.get("occurrence", self.occurrences.get(key, 0))
        kind = KIND_SUMMARY if t.get("kind", "tensor") == "summary" else KIND_TENSOR
        payload = encode_summary_payload(t["summary"]) if kind == KIND_SUMMARY else tensor_payload(t)
        rec = encode_record(kind, self.salt, encode_tensor_meta(t, exec_index, occurrence), payload)
        offset = self.pos
        self.f.write(rec)
        self.pos += len(rec)
        self.note(kind, t["name"], exec_index, occurrence, role, role_index, offset)
        return offset

    def close(self):
        index_offset = self.pos
        meta, payload = encode_index(self.entries)
        rec = encode_record(KIND_INDEX, self.salt, meta, payload)
        self.f.write(rec + encode_record(KIND_END, self.salt, encode_end(index_offset,
                                                                          len(self.entries)), b""))


def write_tdump(path, metadata: Sequence[tuple[str, str]], tensors: Iterable[dict], salt: int,
                close: bool = True) -> list[int]:
    """Writes a new file: header, one record per tensor in order, then INDEX and END when
    `close`. Returns the record offsets."""
    header = encode_header(metadata, salt)
    with open(path, "wb") as f:
        f.write(header)
        s = _Stream(f, salt, len(header))
        offsets = [s.put(t) for t in tensors]
        if close:
            s.close()
    return offsets


def load_reader():
    """The reference reader python/driftscope/tdump_reader.py, loaded by path: putting
    python/driftscope on sys.path would shadow `torch` with driftscope's torch.py."""
    import importlib.util
    import os
    import sys

    if "tdump_reader" not in sys.modules:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python",
                            "driftscope", "tdump_reader.py")
        spec = importlib.util.spec_from_file_location("tdump_reader", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["tdump_reader"] = module  # dataclasses look their module up by name
        spec.loader.exec_module(module)
    return sys.modules["tdump_reader"]


def append_tdump(path, tensors: Iterable[dict], close: bool = True) -> list[int]:
    """§5 Append: validates the file with the reference reader, truncates it after the last valid
    TENSOR/SUMMARY record (dropping a torn tail, INDEX and END), keeps the header and salt, and
    continues numbering where the file left off."""
    dump = load_reader().read(path)
    if dump.state == "corrupt":
        raise ValueError(f"{path}: cannot append to a corrupt file ({dump.corruption})")
    end = max([r.offset + r.size for r in dump.records], default=dump.header_length)
    with open(path, "r+b") as f:
        f.truncate(end)
        f.seek(end)
        s = _Stream(f, dump.salt, end)
        for r in dump.records:
            s.note(KIND_SUMMARY if r.kind == "summary" else KIND_TENSOR, r.name, r.exec_index,
                   r.occurrence, r.role, r.role_index, r.offset)
        offsets = [s.put(t) for t in tensors]
        if close:
            s.close()
    return offsets
