"""Generates the golden TDUMP vectors and their JSON sidecars (tests/vectors/README.md).

    python tests/vectors/generate.py [--out DIR]     (default: next to this script)

Deterministic: running it again gives byte-identical files (tests/python/test_vectors.py checks
that the committed files are exactly what this script writes). Files are written with the
independent spec writer tests/support/tdump_write.py; damaged files are made from valid ones by
the byte edits described in each sidecar. Expected values in the sidecars are computed here,
independently of the reference reader (fp8 and bf16 by their formulas, not by a lookup table).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import tdump_write as tw  # noqa: E402

WRITER = ("writer", "driftscope-vectors")


# ---- expected values, computed from the definitions of docs/format.md §3.3.1 ------------------
def fp8_value(bits: int, exp_bits: int, bias: int, finite_only: bool) -> float:
    man_bits = 7 - exp_bits
    sign = -1.0 if bits >> 7 else 1.0
    e = (bits >> man_bits) & ((1 << exp_bits) - 1)
    m = bits & ((1 << man_bits) - 1)
    top = (1 << exp_bits) - 1
    if finite_only and e == top and m == (1 << man_bits) - 1:
        return math.nan
    if not finite_only and e == top:
        return sign * math.inf if m == 0 else math.nan
    if e == 0:
        return sign * math.ldexp(m, 1 - bias - man_bits)
    return sign * math.ldexp((1 << man_bits) + m, e - bias - man_bits)


def bf16_value(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits << 16))[0]


def jnum(v):
    """JSON has no NaN or infinities: they are the strings "nan", "inf", "-inf"."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


# ---- the tensors of the valid vectors ----------------------------------------------------------
I = np.iinfo


def dtype_tensors():
    f16 = np.array([0.0, -0.0, 2.0 ** -24, 6.097555e-05, 1.0, 65504.0, np.inf, -np.inf, np.nan],
                   dtype=np.float16)
    bf16_bits = [0x3F80, 0xC000, 0x7F80, 0xFF80, 0x7FC0, 0x0001, 0x4049, 0x0000]
    codes = np.arange(256, dtype=np.uint8)
    t = [
        ("f64", [8], np.array([0.0, -0.0, 1.5, -1e308, 5e-324, np.inf, -np.inf, np.nan])),
        ("f32", [2, 4], np.array([1.0, -2.5, 3.4028235e38, 1e-45, np.inf, np.nan, -0.0, 0.1],
                                 np.float32).reshape(2, 4)),
        ("f16", [9], f16),
        ("bf16", [8], np.array(bf16_bits, np.uint16)),
        ("f8e4m3fn", [16, 16], codes.reshape(16, 16)),
        ("f8e5m2", [256], codes),
        ("i64", [4], np.array([I(np.int64).min, -1, 0, I(np.int64).max], np.int64)),
        ("i32", [4], np.array([I(np.int32).min, -1, 0, I(np.int32).max], np.int32)),
        ("i16", [4], np.array([I(np.int16).min, -1, 0, I(np.int16).max], np.int16)),
        ("i8", [4], np.array([-128, -1, 0, 127], np.int8)),
        ("u8", [4], np.array([0, 1, 128, 255], np.uint8)),
        ("bool", [3], np.array([True, False, True])),
        ("u16", [3], np.array([0, 1, 65535], np.uint16)),
        ("u32", [3], np.array([0, 1, 2 ** 32 - 1], np.uint32)),
        ("u64", [3], np.array([0, 1, 2 ** 64 - 1], np.uint64)),
    ]
    out = []
    for i, (dt, shape, arr) in enumerate(t):
        d = {"name": f"dtypes.{dt}", "op_type": "Const", "dtype": dt, "shape": shape, "data": arr}
        if dt == "f8e4m3fn":
            d["axes"] = ["hi", "lo"]
        out.append(d)
    return out


def expected_values(t):
    """Decoded values as the spec defines them (before dequantisation)."""
    arr, dt = t["data"], t["dtype"]
    flat = np.asarray(arr).reshape(-1)
    if dt == "bf16":
        return [jnum(bf16_value(int(b))) for b in flat]
    if dt == "f8e4m3fn":
        return [jnum(fp8_value(int(b), 4, 7, True)) for b in flat]
    if dt == "f8e5m2":
        return [jnum(fp8_value(int(b), 5, 15, False)) for b in flat]
    return [jnum(v.item()) for v in flat]


def dequantized_values(t):
    """§3.3.2: q − zero_point exactly (Python ints), rounded once to binary64, times scale."""
    enc = t.get("encoding")
    if not enc:
        return None
    q = np.asarray(t["data"])
    if enc["kind"] == "affine_tensor":
        return [jnum(enc["scale"] * float(int(v) - enc["zero_point"])) for v in q.reshape(-1)]
    idx = np.indices(q.shape)[enc["axis"]].reshape(-1)
    return [jnum(enc["scales"][c] * float(int(v) - enc["zero_points"][c]))
            for v, c in zip(q.reshape(-1), idx)]


def quantized_tensors():
    return [
        {"name": "q.per_tensor", "op_type": "QuantizeLinear", "dtype": "i8", "shape": [2, 3],
         "axes": "row,col", "encoding": {"kind": "affine_tensor", "scale": 0.05, "zero_point": -3},
         "data": np.array([[-128, -3, 0], [17, 100, 127]], np.int8)},
        {"name": "q.per_channel", "op_type": "QuantizeLinear", "dtype": "u8", "shape": [2, 3],
         "axes": "out,in", "attrs": [("scheme", "asymmetric")],
         "encoding": {"kind": "affine_channel", "axis": 1, "scales": [0.5, 0.25, 0.125],
                      "zero_points": [128, 0, 255]},
         "data": np.array([[0, 1, 2], [128, 255, 255]], np.uint8)},
        {"name": "q.per_channel_i32", "op_type": "Bias", "dtype": "i32", "shape": [3],
         "role": "parameter", "encoding": {"kind": "affine_channel", "axis": 0,
                                           "scales": [1e-3, 2e-3, 4e-3], "zero_points": [0, -5, 7]},
         "data": np.array([1000, -5, 2 ** 31 - 1], np.int32)},
    ]


def structure_tensors():
    f = np.float32
    return [
        {"name": "scalar.loss", "op_type": "CrossEntropy", "dtype": "f32", "shape": [],
         "data": np.array(0.6931472, f)},
        {"name": "empty.mask", "op_type": "Slice", "dtype": "f32", "shape": [3, 0, 2],
         "axes": ["batch", "seq", "hidden"], "data": np.zeros((3, 0, 2), f)},
        {"name": "encoder.layers.0.attn", "op_type": "MultiheadAttention", "dtype": "f32",
         "shape": [1, 2, 2, 2], "axes": "batch,heads,seq,dim", "role": "output", "role_index": 0,
         "attrs": [("num_heads", "2"), ("dropout", "0.0"), ("note", "naïve — ünïcödé ✓"),
                   ("empty", "")],
         "data": np.arange(8, dtype=f).reshape(1, 2, 2, 2) / 8},
        {"name": "encoder.layers.0.attn", "op_type": "MultiheadAttention", "dtype": "f32",
         "shape": [2], "role": "output", "role_index": 1, "data": np.array([0.25, 0.75], f)},
        {"name": "encoder.layers.0.attn", "op_type": "MultiheadAttention", "dtype": "f32",
         "shape": [1, 2], "role": "input", "role_index": 0, "data": np.array([[1, 2]], f)},
        {"name": "encoder.layers.0.attn.in_proj_weight", "op_type": "Parameter", "dtype": "f16",
         "shape": [2, 2], "role": "parameter", "data": np.array([[1, 0], [0, 1]], np.float16)},
        {"name": "encoder.layers.0.act", "op_type": "GELU", "dtype": "f32", "shape": [2],
         "data": np.array([0.1, 0.2], f)},                             # occurrence 0
        {"name": "encoder.layers.0.act", "op_type": "GELU", "dtype": "f32", "shape": [2],
         "data": np.array([0.3, 0.4], f)},                             # occurrence 1
        {"name": "encoder.layers.0.act", "op_type": "GELU", "dtype": "f32", "shape": [2],
         "exec_index": 20, "data": np.array([0.5, 0.6], f)},           # occurrence 2, index jump
        {"name": "rank8", "op_type": "Reshape", "dtype": "u8", "shape": [1, 2, 1, 2, 1, 2, 1, 1],
         "axes": "a,b,c,d,e,f,g,h", "role": "other", "role_index": 3,
         "data": np.arange(8, dtype=np.uint8).reshape(1, 2, 1, 2, 1, 2, 1, 1)},
        {"name": "módulo.ñame/with spaces", "dtype": "i16", "shape": [1],
         "data": np.array([-7], np.int16)},
    ]


def summary_tensors():
    x = np.array([1.0, -2.0, 0.0, np.nan, np.inf, 3.0], np.float64)
    fin = x[np.isfinite(x)]
    stats = {"count": 6, "nan_count": 1, "posinf_count": 1, "neginf_count": 0, "zero_count": 1,
             "min": float(fin.min()), "max": float(fin.max()), "mean": float(fin.mean()),
             "std": float(fin.std()), "l2_norm": float(np.sqrt((fin ** 2).sum())),
             "projection_seed": 0x5DEECE66D, "projection_kind": 1,
             "projection": [0.5, -1.25, 3.0, float(np.float32(0.1))]}
    empty = {"count": 0, "nan_count": 0, "posinf_count": 0, "neginf_count": 0, "zero_count": 0,
             "min": math.nan, "max": math.nan, "mean": math.nan, "std": math.nan, "l2_norm": 0.0,
             "projection_seed": 7, "projection_kind": 1, "projection": []}
    return [
        {"name": "light.before", "op_type": "Linear", "dtype": "f32", "shape": [2],
         "data": np.array([1.5, 2.5], np.float32)},
        {"kind": "summary", "name": "light.hidden", "op_type": "Linear", "dtype": "f64",
         "shape": [2, 3], "axes": "seq,hidden", "attrs": {"mode": "light"}, "summary": stats},
        {"kind": "summary", "name": "light.empty", "dtype": "bf16", "shape": [0],
         "summary": empty},
    ]


def quantized_edge_tensors():
    """§3.3.2 settled: any finite scale (zero, negative), any i64 zero point; q − zero_point is
    exact before the single rounding to binary64."""
    i64, u64 = np.iinfo(np.int64), np.iinfo(np.uint64)
    return [
        {"name": "q.zero_scale", "dtype": "i8", "shape": [3],
         "encoding": {"kind": "affine_tensor", "scale": 0.0, "zero_point": 5},
         "data": np.array([-128, 0, 127], np.int8)},
        {"name": "q.negative_scale", "dtype": "u8", "shape": [3],
         "encoding": {"kind": "affine_tensor", "scale": -0.5, "zero_point": 300},
         "data": np.array([0, 44, 255], np.uint8)},
        {"name": "q.i64_extremes", "dtype": "i64", "shape": [4],
         "encoding": {"kind": "affine_tensor", "scale": 1.0, "zero_point": int(i64.min)},
         "data": np.array([i64.max, i64.min, 0, 12345678901234567], np.int64)},
        {"name": "q.u64_channel", "dtype": "u64", "shape": [2, 2],
         "encoding": {"kind": "affine_channel", "axis": 1, "scales": [1.0, -2.0],
                      "zero_points": [int(i64.max), -1]},
         "data": np.array([[u64.max, 2 ** 53 + 1], [0, 2 ** 63]], np.uint64)},
    ]


def names_tensors():
    """§3.3 settled: any UTF-8 in names and axis names (control characters, NUL, repeats),
    exec_index neither unique nor increasing, zero-element shapes with large dims."""
    f = np.float32
    return [
        {"name": "ctl.\x1b[31mred\x07\r\n\t", "dtype": "f32", "shape": [1], "exec_index": 5,
         "data": np.array([1.0], f)},
        {"name": "nul\x00inside", "op_type": "Op\x00", "dtype": "f32", "shape": [1], "exec_index": 5,
         "data": np.array([2.0], f)},
        {"name": "repeated.axes", "dtype": "f32", "shape": [1, 2], "axes": "x,x", "exec_index": 3,
         "attrs": [("multi", "line 1\nline 2\x1b")], "data": np.array([[3.0, 4.0]], f)},
        {"name": "empty.huge_first", "dtype": "f32", "shape": [1 << 40, 0],
         "data": np.zeros((0,), f)},
        {"name": "empty.huge_last", "dtype": "u8", "shape": [0, 1 << 44],
         "data": np.zeros((0,), np.uint8)},
    ]


def ds_inputs(refs):
    """§3.3.3 `ds.inputs`, written here from the grammar: role/role_index/occurrence:name with
    "\\" and "," escaped by a backslash, refs joined by ","."""
    def esc(name):
        return name.replace("\\", "\\\\").replace(",", "\\,")
    return ",".join(f"{role}/{ri}/{occ}:{esc(name)}" for name, role, ri, occ in refs)


# (name, role, role_index, occurrence) of the records named by each record of dataflow.tdump,
# None when the record has no ds.inputs.
DATAFLOW_INPUTS = [
    [],                                                           # ids: computed from nothing
    [],                                                           # embed: a weight lookup
    [("embed", "output", 0, 0)],                                  # q,k: escapes in the name
    [("embed", "output", 0, 0), ("q,k\\v", "output", 0, 0),
     ("mask", "output", 0, 0)],                                   # attn: a ref to an unwritten record
    [("attn", "output", 0, 0), ("embed", "output", 0, 0)],        # norm (second call)
    None,                                                         # weight: no data flow
]


def dataflow_tensors():
    """§3.3.3: ds.inputs, ds.kind and ds.source on a small graph."""
    f = np.float32
    kinds = ["index", "float", "float", "float", "float", "float"]
    base = [
        {"name": "ids", "op_type": "Input", "dtype": "i64", "shape": [2],
         "data": np.array([3, 1], np.int64)},
        {"name": "embed", "op_type": "Gather", "dtype": "f32", "shape": [2],
         "data": np.array([0.5, -0.5], f)},
        {"name": "q,k\\v", "op_type": "MatMul", "dtype": "f32", "shape": [2],
         "data": np.array([1.0, 2.0], f)},
        {"name": "attn", "op_type": "Softmax", "dtype": "f32", "shape": [2],
         "data": np.array([0.25, 0.75], f)},
        {"name": "norm", "op_type": "LayerNorm", "dtype": "f32", "shape": [2],
         "occurrence": 1, "data": np.array([-1.0, 1.0], f)},
        {"name": "norm", "op_type": "Parameter", "dtype": "f32", "shape": [2], "role": "parameter",
         "data": np.array([1.0, 1.0], f)},
    ]
    for t, refs, kind in zip(base, DATAFLOW_INPUTS, kinds):
        attrs = [("ds.kind", kind)]
        if refs is not None:
            attrs.insert(0, ("ds.inputs", ds_inputs(refs)))
        if t["name"] == "norm" and t.get("role") != "parameter":
            attrs.append(("ds.source", "torch.nn.modules.normalization.LayerNorm norm.py:201"))
        t["attrs"] = attrs
    return base


# §3.6 / docs/light-mode.md §2: the CountSketch, written here from the spec text alone.
M64 = (1 << 64) - 1


def splitmix64(v):
    z = (v + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def countsketch(x, seed, dim):
    p = [0.0] * dim
    for i, v in enumerate(x):
        if dim and math.isfinite(v):
            h = splitmix64((seed + i) & M64)
            p[(h >> 32) % dim] += v if h & 1 == 0 else -v
    return [float(np.float32(v)) for v in p]


def summary_of(x, seed, dim):
    x = [float(v) for v in x]
    fin = np.array([v for v in x if math.isfinite(v)], np.float64)
    none = fin.size == 0
    return {"count": len(x), "nan_count": sum(math.isnan(v) for v in x),
            "posinf_count": sum(v == math.inf for v in x),
            "neginf_count": sum(v == -math.inf for v in x), "zero_count": sum(v == 0 for v in x),
            "min": math.nan if none else float(fin.min()), "max": math.nan if none else float(fin.max()),
            "mean": math.nan if none else float(fin.mean()), "std": math.nan if none else float(fin.std()),
            "l2_norm": float(math.sqrt(sum(v * v for v in fin))), "projection_seed": seed,
            "projection_kind": 1, "projection": countsketch(x, seed, dim)}


def summary_checked_tensors():
    """A TENSOR and the SUMMARY of the same values: a reader can recompute the summary."""
    x = np.array([1.5, -2.25, 0.0, -0.0, np.nan, np.inf, -np.inf, 3e38, 1e-45, 7.0, -7.0, 0.125]
                 + [float(i) / 3 for i in range(20)], np.float32)
    s = summary_of(x.tolist(), 0x5DEECE66D, 8)
    return [
        {"name": "light.values", "op_type": "Linear", "dtype": "f32", "shape": [len(x)],
         "data": x},
        {"kind": "summary", "name": "light.values", "op_type": "Linear", "dtype": "f32",
         "shape": [len(x)], "role": "other", "summary": s},
    ]


# ---- sidecars ----------------------------------------------------------------------------------
def sha256(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def canonical_encoding(enc):
    """As a reader reports it: the parameters of §3.3.2 as lists, axis only per channel."""
    if not enc:
        return {"kind": "raw"}
    if enc["kind"] == "affine_tensor":
        return {"kind": "affine_tensor", "scales": [enc["scale"]],
                "zero_points": [enc["zero_point"]]}
    return {"kind": "affine_channel", "axis": enc["axis"], "scales": list(enc["scales"]),
            "zero_points": list(enc["zero_points"])}


def record_entries(tensors, offsets, blob):
    """Expected record fields, derived from the writer inputs and the offsets they landed at."""
    out, next_index, occ = [], 0, {}
    for t, off in zip(tensors, offsets):
        role = t.get("role", "output")
        key = (t["name"], role, t.get("role_index", 0))
        exec_index = t.get("exec_index", next_index)
        occurrence = t.get("occurrence", occ.get(key, 0))
        next_index = max(next_index, exec_index + 1)
        occ[key] = max(occ.get(key, 0), occurrence + 1)
        _, _, length, plen, mlen = struct.unpack_from("<HHQQI", blob, off + 4)
        pay = off + tw.align64(48 + mlen)
        axes = t.get("axes") or []
        e = {"kind": t.get("kind", "tensor"), "name": t["name"], "occurrence": occurrence,
             "exec_index": exec_index, "op_type": t.get("op_type", ""), "role": role,
             "role_index": t.get("role_index", 0), "dtype": t["dtype"], "shape": list(t["shape"]),
             "axes": axes.split(",") if isinstance(axes, str) else list(axes),
             "attrs": [list(kv) for kv in tw._attrs(t)],
             "encoding": canonical_encoding(t.get("encoding")),
             "offset": off, "size": length, "payload_offset": pay, "payload_length": plen,
             "payload_sha256": sha256(blob[pay:pay + plen])}
        if e["kind"] == "tensor":
            e["values"] = expected_values(t)
            if t.get("encoding"):
                e["dequantized"] = dequantized_values(t)
        else:
            e["summary"] = {k: (jnum(v) if k != "projection" else [jnum(p) for p in v])
                            for k, v in t["summary"].items()}
            e["summary"]["projection_dim"] = len(t["summary"]["projection"])
        out.append(e)
    return out


def sidecar(name, blob, description, metadata, salt, records, state, *, valid_end=None,
            cut=None, corruption=None, sessions=None, reproducible=True, error=None):
    j = {"file": name, "description": description, "size": len(blob), "sha256": sha256(blob)}
    if error:
        j["error"] = error
        return j
    j["header"] = {"version": [1, 0], "salt": salt, "metadata": [list(kv) for kv in metadata]}
    j["integrity"] = {"state": state, "valid_end": valid_end if valid_end is not None else len(blob),
                      "cut_offset": cut, "discarded_bytes": len(blob) - cut if cut is not None else 0,
                      "corruption": corruption}
    j["writer"] = {"reproducible": reproducible, "sessions": sessions or [len(records)],
                   "closed": state == "clean"}
    j["records"] = records
    return j


class Out:
    def __init__(self, root):
        self.root = root

    def path(self, sub, name):
        os.makedirs(os.path.join(self.root, sub), exist_ok=True)
        return os.path.join(self.root, sub, name)

    def save(self, sub, name, blob, meta):
        with open(self.path(sub, name), "wb") as f:
            f.write(blob)
        with open(self.path(sub, name[:-len(".tdump")] + ".json"), "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=1, ensure_ascii=False, allow_nan=False)
            f.write("\n")


def write_valid(out, name, description, metadata, tensors, salt, close=True):
    path = out.path("valid", name)
    offsets = tw.write_tdump(path, metadata, tensors, salt, close=close)
    blob = open(path, "rb").read()
    recs = record_entries(tensors, offsets, blob)
    out.save("valid", name, blob, sidecar(name, blob, description, metadata, salt, recs,
                                          "clean" if close else "unfinished"))
    return blob, recs, offsets


def generate(root):
    out = Out(root)
    # §8 worked example (also what `tdump_reader.py --example` writes).
    example = [{"name": "x", "dtype": "f32", "shape": [2], "exec_index": 0,
                "data": np.array([1.0, -2.0], np.float32)}]
    write_valid(out, "example.tdump", "docs/format.md §8 worked example",
                [("framework", "demo"), ("writer", "driftscope example")], example,
                0x0123456789ABCDEF)
    write_valid(out, "dtypes.tdump", "one tensor per dtype of §3.3.1 with extreme values; fp8 "
                "tensors hold all 256 codes", [WRITER, ("framework", "vectors")], dtype_tensors(),
                0x1111111111111111)
    write_valid(out, "quantized.tdump", "affine per-tensor and per-channel encodings (§3.3.2)",
                [WRITER, ("precision", "int8")], quantized_tensors(), 0x2222222222222222)
    structure = structure_tensors()
    s_blob, s_recs, _ = write_valid(
        out, "structure.tdump", "rank 0, a zero-size dim, rank 8, axis names, attributes, roles, "
        "repeated occurrences, an exec_index jump, a UTF-8 name",
        [WRITER, ("framework", "pytorch 2.13.0"), ("backend", "cpu"), ("device", "x86_64"),
         ("model", "tiny-encoder"), ("seed", "0"), ("start_time", "2026-11-29T15:00:00Z"),
         ("user.ünïcode", "välue"), ("empty", "")], structure, 0x3333333333333333)
    write_valid(out, "summary.tdump", "SUMMARY records (§3.6) between TENSOR records, one of an "
                "empty tensor with NaN statistics", [WRITER], summary_tensors(), 0x4444444444444444)
    write_valid(out, "empty.tdump", "a closed file without records: INDEX of 0 entries, 1 slot",
                [WRITER], [], 0x5555555555555555)
    write_valid(out, "salt_zero.tdump", "salt 0 is a valid salt (§2.1)", [WRITER],
                [{"name": "x", "dtype": "f32", "shape": [1], "data": np.array([1.0], np.float32)}], 0)
    write_valid(out, "quantized_edge.tdump", "affine encodings with zero and negative scales and "
                "extreme zero points (§3.3.2)", [WRITER], quantized_edge_tensors(), 0x2323232323232323)
    write_valid(out, "names.tdump", "control characters, NUL and repeats in names and axis names; "
                "repeated and decreasing exec_index; zero-element shapes with large dims (§3.3)",
                [WRITER, ("note", "tab\there\x1b[0m")], names_tensors(), 0x2424242424242424)
    dataflow = dataflow_tensors()
    path_blob, recs, _ = write_valid(
        out, "dataflow.tdump", "the reserved data-flow attributes ds.inputs (escapes, a reference "
        "to a record that was not written, an empty list), ds.kind and ds.source (§3.3.3)",
        [WRITER], dataflow, 0x2626262626262626)
    for r, refs in zip(recs, DATAFLOW_INPUTS):
        r["dataflow"] = {"inputs": None if refs is None else [list(x) for x in refs],
                         "kind": dict(r["attrs"])["ds.kind"]}
    out.save("valid", "dataflow.tdump", path_blob, sidecar(
        "dataflow.tdump", path_blob, "the reserved data-flow attributes ds.inputs (escapes, a "
        "reference to a record that was not written, an empty list), ds.kind and ds.source (§3.3.3)",
        [WRITER], 0x2626262626262626, recs, "clean"))
    blob, recs, _ = write_valid(out, "summary_checked.tdump", "a TENSOR and the SUMMARY of the same "
                                "values (projection_dim 8): recompute the summary from the values",
                                [WRITER], summary_checked_tensors(), 0x2525252525252525)
    recs[1]["summary_of"] = 0  # the sidecar names the record whose values it summarises
    out.save("valid", "summary_checked.tdump", blob, sidecar(
        "summary_checked.tdump", blob, "a TENSOR and the SUMMARY of the same values (projection_dim "
        "8): recompute the summary from the values", [WRITER], 0x2525252525252525, recs, "clean"))
    write_private(out)
    write_valid(out, "unfinished.tdump", "three records, no INDEX or END "
                                    "(crashed or still running)", [WRITER], structure[6:9],
                                    0x6666666666666666, close=False)

    # Appended: written and closed, then continued as §5 Append says (numbering continues).
    first = [{"name": "step", "op_type": "Add", "dtype": "f32", "shape": [1],
              "data": np.array([1.0], np.float32)},
             {"name": "other", "op_type": "Mul", "dtype": "i32", "shape": [2],
              "data": np.array([1, 2], np.int32)}]
    second = [{"name": "step", "op_type": "Add", "dtype": "f32", "shape": [1],
               "data": np.array([2.0], np.float32)},
              {"name": "late", "op_type": "Sub", "dtype": "f64", "shape": [1],
               "data": np.array([-1.0])}]
    path = out.path("valid", "appended.tdump")
    meta = [WRITER, ("note", "appended")]
    off1 = tw.write_tdump(path, meta, first, 0x7777777777777777)
    off2 = tw.append_tdump(path, second)
    blob = open(path, "rb").read()
    recs = record_entries(first + second, off1 + off2, blob)
    out.save("valid", "appended.tdump", blob, sidecar(
        "appended.tdump", blob, "two records, closed, reopened for append (INDEX and END "
        "removed), two more records, closed again", meta, 0x7777777777777777, recs, "clean",
        sessions=[2, 2]))

    # ---- damaged: recovered with a state other than clean (the C++ writer cannot make these) --
    def damaged(name, blob, description, n_records, state, **kw):
        out.save("damaged", name, blob, sidecar(name, blob, description, s_meta, salt3,
                                                s_recs[:n_records], state, reproducible=False,
                                                **kw))

    s_meta, salt3 = [list(kv) for kv in json.load(open(out.path("valid", "structure.json")))
                     ["header"]["metadata"]], 0x3333333333333333
    r2, r3 = s_recs[2], s_recs[3]
    cut = r2["payload_offset"] + 5
    damaged("cut_mid_payload.tdump", s_blob[:cut], "structure.tdump cut 5 bytes into the payload "
            "of record 2: records 0-1 recovered", 2, "cut", valid_end=r2["offset"],
            cut=r2["offset"])
    cut = r3["offset"] + 20
    damaged("cut_in_frame.tdump", s_blob[:cut], "structure.tdump cut 20 bytes into the frame of "
            "record 3", 3, "cut", valid_end=r3["offset"], cut=r3["offset"])
    zeroed = s_blob[:r3["offset"]] + bytes(r3["size"] + 256)
    damaged("cut_zero_tail.tdump", zeroed, "structure.tdump after record 2, then zeros (a file "
            "system extended the file before the writer died): a cut, not corruption", 3, "cut",
            valid_end=r3["offset"], cut=r3["offset"])
    torn = bytearray(s_blob[:r3["offset"] + r3["size"]])
    torn[r3["payload_offset"] + 2] ^= 0x40
    damaged("cut_bad_last_record.tdump", bytes(torn), "structure.tdump up to the end of record 3, "
            "whose payload has a flipped bit and nothing follows it: a torn write, not corruption",
            3, "cut", valid_end=r3["offset"], cut=r3["offset"])
    blob = bytearray(s_blob)
    blob[r2["payload_offset"] + 1] ^= 0x01
    damaged("corrupt_record_crc.tdump", bytes(blob), "structure.tdump with one bit flipped in the "
            "payload of record 2; more records follow", 2, "corrupt", valid_end=r2["offset"],
            corruption={"code": "bad_record_checksum", "offset": r2["offset"] + 44,
                        "record_offset": r2["offset"], "name": None})
    # A record from another file (different salt) of the same size, spliced over record 2.
    alien = os.path.join(root, "alien.tmp")
    (alien_off,) = tw.write_tdump(alien, [WRITER], [structure[2]], 0x0BADF00D0BADF00D,
                                  close=False)
    alien_rec = open(alien, "rb").read()[alien_off:]
    os.remove(alien)
    assert len(alien_rec) == r2["size"]
    blob = s_blob[:r2["offset"]] + alien_rec + s_blob[r2["offset"] + r2["size"]:]
    damaged("corrupt_spliced.tdump", blob, "structure.tdump with record 2 replaced by the same "
            "tensor written to another file (other salt, all CRCs valid)", 2, "corrupt",
            valid_end=r2["offset"],
            corruption={"code": "salt_mismatch", "offset": r2["offset"] + 32,
                        "record_offset": r2["offset"], "name": None})
    blob = s_blob + bytes(64)
    damaged("corrupt_after_end.tdump", blob, "structure.tdump followed by 64 zero bytes: data "
            "after END", len(s_recs), "corrupt", valid_end=len(s_blob),
            corruption={"code": "record_after_end", "offset": len(s_blob),
                        "record_offset": len(s_blob), "name": None})

    write_bad_index(out, s_blob, s_meta, salt3, s_recs)

    # ---- invalid: the header fails, nothing is returned --------------------------------------
    ex = open(out.path("valid", "example.tdump"), "rb").read()
    bad = bytearray(ex)
    bad[0x54] ^= 0x20  # 'd' of "demo" -> 'D': metadata changed, header_crc no longer matches
    out.save("invalid", "bad_header_crc.tdump", bytes(bad), sidecar(
        "bad_header_crc.tdump", bytes(bad), "example.tdump with one metadata byte changed",
        None, None, [], None, error={"code": "bad_header_checksum", "offset": 60}))
    bad = bytearray(ex)
    bad[8:10] = struct.pack("<H", 2)
    out.save("invalid", "future_major.tdump", bytes(bad), sidecar(
        "future_major.tdump", bytes(bad), "example.tdump claiming version 2.0", None, None, [],
        None, error={"code": "unsupported_version", "offset": 8}))
    bad = bytearray(ex)
    bad[12:16] = bytes([1, 2, 3, 4])
    out.save("invalid", "big_endian.tdump", bytes(bad), sidecar(
        "big_endian.tdump", bytes(bad), "byte_order written big-endian", None, None, [], None,
        error={"code": "bad_byte_order", "offset": 12}))
    write_rejected(out)


def write_private(out):
    """§3.2: a private SKIPPABLE record between TENSOR records; the INDEX lists the TENSORs only."""
    salt, meta = 0x2626262626262626, [WRITER]
    ts = [{"name": "a", "dtype": "f32", "shape": [2], "data": np.array([1, 2], np.float32)},
          {"name": "b", "dtype": "i32", "shape": [1], "data": np.array([3], np.int32)}]
    blob = tw.encode_header(meta, salt)
    offsets, entries = [], []
    for i, t in enumerate(ts):
        if i == 1:
            blob += tw.encode_record(0x8001, salt, b"vendor meta", b"vendor payload", flags=1)
        offsets.append(len(blob))
        entries.append((len(blob), tw.fnv1a64(t["name"].encode()), 0, 1))
        blob += tw.encode_record(1, salt, tw.encode_tensor_meta(t, i, 0), tw.tensor_payload(t))
    index_at = len(blob)
    blob += tw.encode_record(3, salt, *tw.encode_index(entries))
    blob += tw.encode_record(4, salt, tw.encode_end(index_at, len(ts)), b"")
    recs = record_entries(ts, offsets, blob)
    out.save("valid", "private_record.tdump", blob, sidecar(
        "private_record.tdump", blob, "a private SKIPPABLE record (kind 0x8001) between two "
        "TENSOR records: skipped, not indexed, the file is clean", meta, salt, recs, "clean",
        reproducible=False))


def write_bad_index(out, s_blob, s_meta, salt, s_recs):
    """§3.4, §3.5: unsound footers of structure.tdump. Every record is intact; the file is
    corrupt at the first field of INDEX or END that disagrees with the scan."""
    end = len(s_blob) - 64
    index_at = struct.unpack_from("<Q", s_blob, end + 48)[0]
    meta_at, entries_at = index_at + 48, index_at + 128
    n = struct.unpack_from("<Q", s_blob, meta_at)[0]
    slots_at = entries_at + 24 * n
    slot_count = struct.unpack_from("<Q", s_blob, meta_at + 8)[0]
    index_meta = s_blob[meta_at:meta_at + 24]
    index_payload = s_blob[entries_at:entries_at + 24 * n + 4 * slot_count]
    entries = [struct.unpack_from("<QQII", s_blob, entries_at + 24 * e) for e in range(n)]
    records = s_blob[:index_at]

    def footer(meta, payload, end_meta=None):
        b = records + tw.encode_record(3, salt, meta, payload)
        return b + tw.encode_record(4, salt, end_meta or tw.encode_end(index_at, n), b"")

    def edit(payload_edits=(), meta_edits=()):
        m, p = bytearray(index_meta), bytearray(index_payload)
        for at, fmt, v in meta_edits:
            struct.pack_into(fmt, m, at, v)
        for at, fmt, v in payload_edits:
            struct.pack_into(fmt, p, at, v)
        return footer(bytes(m), bytes(p))

    slots = [struct.unpack_from("<I", index_payload, 24 * n + 4 * i)[0] for i in range(slot_count)]
    used = [i for i, v in enumerate(slots) if v]
    swapped = [(24 * n + 4 * used[0], "<I", slots[used[1]]), (24 * n + 4 * used[1], "<I", slots[used[0]])]
    wide_meta, wide_payload = struct.pack("<QQII", n, 2 * slot_count, 1, 0), None
    table = [0] * (2 * slot_count)
    for e, (_, h, _, _) in enumerate(entries):
        i = h % (2 * slot_count)
        while table[i]:
            i = (i + 1) % (2 * slot_count)
        table[i] = e + 1
    wide_payload = index_payload[:24 * n] + struct.pack(f"<{len(table)}I", *table)
    missing = records + tw.encode_record(4, salt, tw.encode_end(index_at, n), b"")
    between = records + tw.encode_record(3, salt, index_meta, index_payload)
    private_at = len(between)
    between += tw.encode_record(0x8001, salt, b"", b"x", flags=1)
    between += tw.encode_record(4, salt, tw.encode_end(index_at, n), b"")
    cases = [
        ("index_slots_ffff", "every INDEX slot is 0xFFFFFFFF (past the entry count)",
         edit([(24 * n + 4 * i, "<I", 0xFFFFFFFF) for i in range(slot_count)]), index_at, slots_at),
        ("index_slots_swapped", "two non-empty INDEX slots swapped (lookups would land on the "
         "wrong entries)", edit(swapped), index_at, slots_at + 4 * used[0]),
        ("index_slot_duplicated", "one INDEX slot repeats another entry number",
         edit(swapped[:1]), index_at, slots_at + 4 * used[0]),
        ("index_entry_offset", "INDEX entry 1 names offset 0xDEAD00, where no record starts",
         edit([(24, "<Q", 0xDEAD00)]), index_at, entries_at + 24),
        ("index_entry_hash", "INDEX entry 2 has a wrong name_hash",
         edit([(24 * 2 + 8, "<Q", entries[2][1] ^ 1)]), index_at, entries_at + 24 * 2 + 8),
        ("index_hash_id", "INDEX hash id 2 (only 1, FNV-1a 64, is defined)",
         edit(meta_edits=[(16, "<I", 2)]), index_at, meta_at + 16),
        ("index_reserved", "INDEX reserved field 0x00010000: reserved_nonzero at its first "
         "non-zero byte", edit(meta_edits=[(20, "<I", 0x10000)]), index_at, meta_at + 22),
        ("index_slot_count", "INDEX with twice the minimal slot_count (a table that would "
         "still probe correctly)", footer(wide_meta, wide_payload), index_at, meta_at + 8),
        ("end_record_count", "END record_count one more than the records",
         footer(index_meta, index_payload, tw.encode_end(index_at, n + 1)), end, end + 56),
        ("index_missing", "END directly after the records: no INDEX", missing, index_at,
         index_at + 48),
        ("index_not_before_end", "a private SKIPPABLE record between INDEX and END", between,
         private_at, private_at),
    ]
    codes = {"index_reserved": "reserved_nonzero"}
    for stem, what, blob, record_at, offset in cases:
        name = stem + ".tdump"
        out.save("damaged", name, blob, sidecar(
            name, blob, "structure.tdump: " + what, s_meta, salt, s_recs, "corrupt",
            valid_end=record_at, reproducible=False,
            corruption={"code": codes.get(stem, "bad_index"), "offset": offset,
                        "record_offset": record_at, "name": None}))


# ---- rejected: one bad field per file, each named by its error code and offset ---------------
GOOD = {"name": "ok", "dtype": "f32", "shape": [2], "data": np.array([1, 2], "<f4")}
RSALT = 0x5EED5EED5EED5EED
RMETA = [("writer", "t")]
REC = 128            # the bad record follows the 128-byte header
META = REC + 48      # its meta
NAME = META + 32 + 8  # the name "ok" after the fixed part and one dim
ATTRS = NAME + 2     # attributes and encoding parameters follow the name (no op type, no axes)


def with_field(meta: bytes, at: int, fmt: str, value) -> bytes:
    m = bytearray(meta)
    struct.pack_into(fmt, m, at, value)
    return bytes(m)


def meta_of(**kw) -> bytes:
    return tw.encode_tensor_meta(dict(GOOD, **kw), 0, 0)


def rejected_cases():
    """(file stem, description, meta, payload, code, offset): a bad TENSOR record followed by a
    good one, so that each failure is corruption, not a torn tail."""
    m, p = meta_of(), tw.tensor_payload(GOOD)
    q = dict(GOOD, dtype="i8")
    qp = bytes([1, 2])
    per_channel = {"kind": "affine_channel", "scales": [1.0], "zero_points": [0]}
    bool_meta = meta_of(dtype="bool")
    return [
        ("dtype_reserved", "dtype 16 (i4, reserved)", with_field(m, 12, "<H", 16), p,
         "bad_dtype", META + 12),
        ("rank_17", "rank 17 > 16", with_field(m, 14, "<B", 17), p, "limit_exceeded", META + 14),
        ("role_4", "role 4", with_field(m, 15, "<B", 4), p, "bad_enum", META + 15),
        ("encoding_3", "encoding 3", with_field(m, 18, "<B", 3), p, "bad_enum", META + 18),
        ("meta_reserved", "reserved meta byte 1", with_field(m, 19, "<B", 1), p,
         "reserved_nonzero", META + 19),
        ("meta_flags", "meta flags bit 31", with_field(m, 20, "<I", 1 << 31), p,
         "reserved_nonzero", META + 23),
        ("empty_name", "name_length 0", meta_of(name=""), p, "empty_name", META + 24),
        ("name_overlong_utf8", "name bytes C0 AF (overlong '/')",
         m[:NAME - META] + b"\xc0\xaf" + m[NAME - META + 2:], p, "bad_utf8", NAME),
        ("name_surrogate", "name bytes ED A0 (UTF-16 surrogate half)",
         m[:NAME - META] + b"\xed\xa0" + m[NAME - META + 2:], p, "bad_utf8", NAME),
        ("axes_count", "two axis names for rank 1", meta_of(axes="a,b"), p, "bad_axes", META),
        ("axes_empty_name", "axes 'a,' (an empty axis name)", meta_of(shape=[2, 1], axes="a,"),
         p, "bad_axes", META),
        ("attr_duplicate", "attribute key 'k' twice", meta_of(attrs=[("k", "1"), ("k", "2")]), p,
         "duplicate_key", ATTRS + 8),
        ("attr_empty_key", "attribute key of length 0", meta_of(attrs=[("", "1")]), p,
         "limit_exceeded", ATTRS),
        ("affine_float", "affine encoding of an f32 tensor",
         meta_of(encoding={"kind": "affine_tensor", "scale": 1.0, "zero_point": 0}), p,
         "bad_encoding", META + 18),
        ("scale_inf", "affine scale +inf",
         tw.encode_tensor_meta(dict(q, encoding={"kind": "affine_tensor", "scale": math.inf,
                                                 "zero_point": 0}), 0, 0), qp, "bad_value", ATTRS),
        ("channel_axis", "per-channel axis 1 of a rank-1 tensor",
         tw.encode_tensor_meta(dict(q, encoding=dict(per_channel, axis=1)), 0, 0), qp,
         "bad_encoding", ATTRS),
        ("channel_count", "per-channel count 1 for dims[0] = 2",
         tw.encode_tensor_meta(dict(q, encoding=dict(per_channel, axis=0)), 0, 0), qp,
         "bad_encoding", ATTRS),
        ("bool_2", "bool element 1 is 2", bool_meta, bytes([1, 2]), "bad_value",
         REC + tw.align64(48 + len(bool_meta)) + 1),
        ("payload_short", "payload_length 4 for 2 f32 elements", m, p[:4], "length_mismatch",
         REC + 16),
        ("meta_long", "one byte after the last meta field", m + b"\0", p, "length_mismatch",
         META + len(m)),
        ("shape_overflow", "dims 2^62 x 8 elements of 4 bytes", meta_of(shape=[1 << 62, 8]), b"",
         "shape_overflow", META + 32),
        # §3.3 settled: zero dims are skipped, so the position of the 0 does not matter.
        ("shape_overflow_zero_last", "dims [2^62, 8, 0] of 4 bytes: zero elements, but the "
         "other dims overflow", meta_of(shape=[1 << 62, 8, 0]), b"", "shape_overflow", META + 32),
        ("shape_overflow_zero_first", "dims [0, 2^62, 8] of 4 bytes",
         meta_of(shape=[0, 1 << 62, 8]), b"", "shape_overflow", META + 32),
        ("shape_limit_zero", "dims [0, 2^47] of 4 bytes: 2^49 bytes > the 2^48 payload limit",
         meta_of(shape=[0, 1 << 47]), b"", "limit_exceeded", META + 32),
        ("meta_short_fixed", "meta_length 10: the meta ends inside `occurrence`", m[:10], p,
         "length_mismatch", META + 8),
        ("attr_truncated", "the meta ends inside the value of attribute 0: reported at the "
         "attribute", meta_of(attrs=[("k", "vv")])[:-1], p, "length_mismatch", ATTRS),
    ]


def header_with_crc(h: bytearray) -> bytes:
    """Recomputes header_crc so that only the field under test is wrong."""
    mlen = struct.unpack_from("<I", h, 36)[0]
    struct.pack_into("<I", h, 60, tw.crc32(bytes(h[:60]), bytes(h[64:64 + mlen])))
    return bytes(h)


def set_u32(b: bytearray, at: int, v: int) -> bytearray:
    struct.pack_into("<I", b, at, v)
    return b


def header_cases():
    """(file stem, description, bytes, code, offset) for headers that make a file unreadable."""
    def h(**kw):
        return bytearray(tw.encode_header(RMETA, RSALT, **kw))
    magic, reserved, padding, count, reserved2 = h(), h(), h(), h(), h()
    reserved2[50] = 1
    magic[1] = ord("X")
    reserved[50] = 1
    padding[100] = 1
    struct.pack_into("<I", count, 40, 2)
    utf = bytearray(tw.encode_header([("k", "ab")], RSALT))
    utf[73:75] = b"\xff\xfe"
    return [
        ("bad_magic", "magic with 'X' for 'T'", bytes(magic), "bad_magic", 0),
        ("required_feature", "required_features bit 2", header_with_crc(h(required=4)),
         "unsupported_feature", 24),
        ("header_reserved", "reserved header byte 50 is 1", header_with_crc(reserved),
         "reserved_nonzero", 50),
        ("header_padding", "header padding byte 100 is 1", header_with_crc(padding),
         "nonzero_padding", 100),
        ("metadata_duplicate", "metadata key 'k' twice",
         tw.encode_header([("k", "1"), ("k", "2")], RSALT), "duplicate_key", 74),
        ("metadata_utf8", "metadata value bytes FF FE", header_with_crc(utf), "bad_utf8", 64),
        ("metadata_count", "metadata_count 2, one entry", header_with_crc(count),
         "length_mismatch", 79),
        ("truncated_header", "the first 100 bytes of a 128-byte header", bytes(h())[:100],
         "truncated_header", 100),
        # §2.1 order, settled: the file size is the offset of every truncated_header.
        ("truncated_fixed", "the first 40 bytes of a header", bytes(h())[:40], "truncated_header", 40),
        ("header_length_limit", "header_length 2 MiB: over the limit before its relation to "
         "metadata_length", header_with_crc(set_u32(h(), 32, 2 << 20)), "limit_exceeded", 32),
        ("version_and_byte_order", "version 2.0 and a big-endian byte_order: version_major is "
         "checked first", header_with_crc(set_u32(set_u32(h(), 8, 2), 12, 0x01020304 ^ 0x05050505)),
         "unsupported_version", 8),
        ("metadata_count_limit", "metadata_count 5000 and a reserved byte: metadata_count is "
         "checked before the reserved bytes", header_with_crc(set_u32(reserved2, 40, 5000)),
         "limit_exceeded", 40),
        ("metadata_value_truncated", "a metadata value that runs past the block: reported at the "
         "entry", header_with_crc(set_u32(bytearray(tw.encode_header([("k", "abc")], RSALT)), 69, 10)),
         "length_mismatch", 64),
    ]


def write_rejected(out):
    good = tw.encode_record(1, RSALT, tw.encode_tensor_meta(GOOD, 1, 0), tw.tensor_payload(GOOD))
    head = tw.encode_header(RMETA, RSALT)
    assert len(head) == REC
    for stem, what, meta, payload, code, offset in rejected_cases():
        blob = head + tw.encode_record(1, RSALT, meta, payload) + good
        name = stem + ".tdump"
        # The name is reported when the meta was read that far: the fixed fields of §3.3 are
        # checked before the name is decoded, everything else after.
        readable = stem not in ("dtype_reserved", "rank_17", "role_4", "encoding_3",
                                "meta_reserved", "meta_flags", "empty_name",
                                "name_overlong_utf8", "name_surrogate", "meta_short_fixed")
        out.save("rejected", name, blob, sidecar(
            name, blob, what + "; a valid record follows", RMETA, RSALT, [], "corrupt",
            valid_end=REC, reproducible=False,
            corruption={"code": code, "offset": offset, "record_offset": REC,
                        "name": "ok" if readable else None}))
    # Frame fields (§3.1, §3.2): the frame fails, so no name is known.
    bad_rec = tw.encode_record(1, RSALT, tw.encode_tensor_meta(GOOD, 0, 0), tw.tensor_payload(GOOD),
                               flags=1)
    reserved_rec = bytearray(tw.encode_record(1, RSALT, tw.encode_tensor_meta(GOOD, 0, 0),
                                              tw.tensor_payload(GOOD)))
    reserved_rec[30] = 1
    struct.pack_into("<I", reserved_rec, 40, tw.crc32(bytes(reserved_rec[:40])))
    struct.pack_into("<I", reserved_rec, 44, tw.crc32(bytes(reserved_rec[:44]),
                                                      bytes(reserved_rec[48:48 + struct.unpack_from("<I", reserved_rec, 24)[0]]),
                                                      tw.tensor_payload(GOOD)))
    for stem, what, rec, code, offset in [
            ("tensor_skippable", "SKIPPABLE set on a TENSOR record (reserved on kinds 1-4)", bad_rec,
             "reserved_nonzero", REC + 6),
            ("frame_reserved", "frame reserved byte 30 is 1: reported at that byte",
             bytes(reserved_rec), "reserved_nonzero", REC + 30)]:
        blob = head + rec + good
        name = stem + ".tdump"
        out.save("rejected", name, blob, sidecar(
            name, blob, what + "; a valid record follows", RMETA, RSALT, [], "corrupt",
            valid_end=REC, reproducible=False,
            corruption={"code": code, "offset": offset, "record_offset": REC, "name": None}))
    for stem, what, blob, code, offset in header_cases():
        name = stem + ".tdump"
        out.save("invalid", name, blob, sidecar(name, blob, what, None, None, [], None,
                                                error={"code": code, "offset": offset}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=HERE)
    generate(ap.parse_args().out)


if __name__ == "__main__":
    main()
