"""Property test (issue 7, structure): random tensors, names, dtypes and shapes written by the C++
writer (through driftscope.Writer) are read back identically by the C++ reader (driftscope.open)
and by the reference reader written from docs/format.md alone (python/driftscope/tdump_reader.py).
Also the places where the two readers had to be made to agree (issue 7 bugs 1, 9, 10, 11)."""
import os
import subprocess
import struct
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import driftscope

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VECTORS = os.path.join(ROOT, "tests", "vectors")
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
import tdump_write as tw  # noqa: E402

tr = tw.load_reader()

# Element bytes are drawn raw, so every bit pattern (NaN payloads, subnormals, -0) is covered.
DTYPES = ["f64", "f32", "f16", "bf16", "f8e4m3fn", "f8e5m2", "i64", "i32", "i16", "i8", "u8",
          "bool", "u16", "u32", "u64"]
SIZE = {d: tw.DTYPES[d][1] for d in DTYPES}
INTEGER = {"i64", "i32", "i16", "i8", "u8", "u16", "u32", "u64"}

# Names: any Unicode scalar value but surrogates (not UTF-8), control characters and NUL included
# (docs/format.md §3.3: names are any valid UTF-8).
names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12).filter(
    lambda s: len(s.encode()) <= 4096)
axis_names = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters=","),
                     min_size=1, max_size=4)
attr_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)


@st.composite
def tensors(draw):
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(st.lists(st.integers(0, 4), max_size=4))
    if draw(st.booleans()) and shape:  # now and then a zero-element shape with a large dim
        shape[draw(st.integers(0, len(shape) - 1))] = 0
        shape[0] = shape[0] or draw(st.integers(1, 1 << 20))
    numel = int(np.prod(shape, dtype=np.int64)) if shape else 1
    raw = draw(st.binary(min_size=numel * SIZE[dtype], max_size=numel * SIZE[dtype]))
    if dtype == "bool":
        raw = bytes(b & 1 for b in raw)
    t = {"name": draw(names), "dtype": dtype, "shape": shape, "raw": raw,
         "op_type": draw(st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)),
         "role": draw(st.sampled_from(["output", "input", "parameter", "other"])),
         "role_index": draw(st.integers(0, 3)),
         "attrs": draw(st.dictionaries(attr_text.filter(bool), attr_text, max_size=3))}
    if shape and draw(st.booleans()):
        t["axes"] = draw(st.lists(axis_names, min_size=len(shape), max_size=len(shape)))
    if dtype in INTEGER and draw(st.booleans()):
        finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
        zp = st.integers(-(1 << 63), (1 << 63) - 1)
        if shape and 1 <= shape[0] <= 4 and draw(st.booleans()):
            t["encoding"] = {"kind": "affine_channel", "axis": 0,
                             "scales": draw(st.lists(finite, min_size=shape[0], max_size=shape[0])),
                             "zero_points": draw(st.lists(zp, min_size=shape[0], max_size=shape[0]))}
        else:
            t["encoding"] = {"kind": "affine_tensor", "scale": draw(finite), "zero_point": draw(zp)}
    return t


def canonical_encoding(enc):
    if not enc or enc.get("kind") == "raw":
        return {"kind": "raw"}
    if enc["kind"] == "affine_tensor":
        return {"kind": "affine_tensor", "scales": [enc["scale"]], "zero_points": [enc["zero_point"]]}
    return {"kind": "affine_channel", "axis": enc["axis"], "scales": list(enc["scales"]),
            "zero_points": list(enc["zero_points"])}


def cpp_encoding(enc):
    if not enc:
        return {"kind": "raw"}
    out = {"kind": enc["kind"], "scales": [float(s) for s in enc["scales"]],
           "zero_points": [int(z) for z in enc["zero_points"]]}
    if enc["kind"] == "affine_channel":
        out["axis"] = int(enc["axis"])
    return out


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ts=st.lists(tensors(), max_size=6),
       meta=st.dictionaries(names.filter(lambda k: k != "writer" and len(k.encode()) <= 256),
                            attr_text, max_size=3),
       close=st.booleans())
def test_cpp_writer_read_back_identically_by_both_readers(tmp_path, ts, meta, close):
    path = str(tmp_path / "p.tdump")
    w = driftscope.Writer(path, meta=meta, salt=0x1234)
    for t in ts:
        w.write(t["name"], t["raw"], dtype=t["dtype"], shape=t["shape"], op_type=t["op_type"],
                role=t["role"], role_index=t["role_index"], attrs=t["attrs"], axes=t.get("axes"),
                encoding=t.get("encoding"))
    if close:
        w.close()
    else:
        w.flush()

    ref = tr.read(path, dequantize=True)
    with driftscope.open(path) as cpp:
        assert ref.state == cpp.state == ("clean" if close else "unfinished")
        assert cpp.integrity.index_used == close
        assert ref.metadata == cpp.metadata
        assert list(ref.metadata) == list(cpp.metadata)  # order is kept (§2.3)
        assert {k: v for k, v in ref.metadata.items() if k != "writer"} == meta
        assert len(ref.records) == len(cpp) == len(ts)
        for t, r, c in zip(ts, ref.records, cpp):
            assert r.name == c.name == t["name"]
            assert r.op_type == c.op_type == t["op_type"]
            assert r.role == c.role == t["role"] and r.role_index == c.role_index == t["role_index"]
            assert r.occurrence == c.occurrence and r.exec_index == c.exec_index
            assert r.dtype == c.dtype == t["dtype"]
            assert list(r.shape) == list(c.shape) == t["shape"]
            assert list(r.axes) == list(c.axes) == list(t.get("axes") or [])
            assert r.attrs == c.attrs == t["attrs"]
            assert r.encoding == cpp_encoding(c.encoding) == canonical_encoding(t.get("encoding"))
            assert r.offset == c.offset and r.payload_offset == c.payload_offset
            stored = c.numpy("")
            assert r.array.shape == stored.shape == tuple(t["shape"])
            # The element bytes as each reader exposes them (bf16/fp8 are widened by both).
            if t["dtype"] in ("bf16", "f8e4m3fn", "f8e5m2"):
                # widened to f32: equal bit for bit, except that a NaN is any NaN (§3.3.1)
                a, b = r.array.reshape(-1), stored.reshape(-1)
                assert np.array_equal(np.isnan(a), np.isnan(b))
                ok = ~np.isnan(a)
                assert np.array_equal(a[ok].view(np.uint32), b[ok].view(np.uint32))
            else:
                assert np.ascontiguousarray(r.array).tobytes() == np.ascontiguousarray(stored).tobytes()
                if t["dtype"] != "bool":
                    assert np.ascontiguousarray(r.array).tobytes() == t["raw"]
            if t.get("encoding"):
                deq = c.numpy("float64")
                assert r.dequantized.tobytes() == deq.tobytes()
            found = cpp.find(t["name"], r.occurrence, t["role"], t["role_index"])
            assert found is not None and found.offset == min(
                x.offset for x in ref.records if (x.name, x.occurrence, x.role, x.role_index) ==
                (t["name"], r.occurrence, t["role"], t["role_index"]))


# ---- the two readers agree where they used to differ -------------------------------------------

def one_record_file(path, shape, dtype="f32"):
    """A header, one TENSOR record of `shape` with no payload, and a valid record after it."""
    salt = 0x77
    t = {"name": "z", "dtype": dtype, "shape": shape}
    good = {"name": "ok", "dtype": "f32", "shape": [1], "data": np.array([1], np.float32)}
    blob = tw.encode_header([("writer", "t")], salt)
    blob += tw.encode_record(1, salt, tw.encode_tensor_meta(t, 0, 0), b"")
    blob += tw.encode_record(1, salt, tw.encode_tensor_meta(good, 1, 0), tw.tensor_payload(good))
    with open(path, "wb") as f:
        f.write(blob)


@pytest.mark.parametrize("shape,dtype,code", [
    ([1 << 63, 1 << 63, 0], "f32", "shape_overflow"),
    ([1 << 40, 1 << 40, 0], "f32", "shape_overflow"),
    ([0, 1 << 40, 1 << 40], "f32", "shape_overflow"),
    ([1 << 40, 0, 1 << 40], "u8", "shape_overflow"),
    ([1 << 63, 0], "u8", "limit_exceeded"),
    ([0, 1 << 47], "f32", "limit_exceeded"),
    ([1 << 40, 0], "f32", None),
    ([0, 1 << 46], "u8", None),
])
def test_zero_element_shapes_one_rule(tmp_path, shape, dtype, code):
    """Issue 7 bug 9: one rule for zero-element shapes (docs/format.md §3.3), the reader's own
    error (never a bare numpy ValueError), the same verdict from both readers."""
    path = str(tmp_path / "z.tdump")
    one_record_file(path, shape, dtype)
    ref = tr.read(path)
    with driftscope.open(path) as cpp:
        if code is None:
            assert ref.state == cpp.state == "unfinished"
            assert ref.records[0].array.shape == tuple(shape) == cpp[0].numpy().shape
            assert cpp.get("z").size == 0
        else:
            assert ref.state == cpp.state == "corrupt"
            assert ref.corruption.code == cpp.integrity.corruption.code_name == code
            assert ref.corruption.offset == cpp.integrity.corruption.offset == 128 + 48 + 32


BAD_INDEX = ["index_slots_ffff", "index_slots_swapped", "index_slot_duplicated",
             "index_entry_offset", "index_hash_id", "index_reserved", "index_slot_count",
             "end_record_count", "index_missing", "index_not_before_end"]


@pytest.mark.parametrize("stem", BAD_INDEX)
def test_unsound_index_lookups_fall_back(stem):
    """Issue 7 bugs 1 and 11: a crafted footer index never crashes `dump[name]` (run in a child
    process, so a crash fails this test instead of the session); every open mode and both readers
    give the same verdict."""
    path = os.path.join(VECTORS, "damaged", stem + ".tdump")
    code = f"""
import driftscope, sys
verdicts = set()
for use_index in (True, False):
    for verify in (True, False):
        d = driftscope.open(sys.argv[1], use_index=use_index, verify=verify)
        c = d.integrity.corruption
        verdicts.add((d.state, c.code_name if c else None, c.offset if c else None, d.integrity.index_used))
        for r in d:
            assert d.find(r.name, r.occurrence, r.role, r.role_index) is not None
        d["encoder.layers.0.act"]
        assert d.find("no such tensor") is None
print(sorted(verdicts))
"""
    run = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    ref = tr.read(path)
    assert run.stdout.strip() == str([("corrupt", ref.corruption.code, ref.corruption.offset, False)])


def test_private_record_with_index_is_clean():
    """Issue 7 bug 10: private SKIPPABLE records are not indexed; the file is clean for both
    readers and lookups go through the index."""
    path = os.path.join(VECTORS, "valid", "private_record.tdump")
    assert tr.read(path).state == "clean"
    with driftscope.open(path) as d:
        assert d.state == "clean" and d.integrity.index_used
        assert d["b"].tolist() == [3]


def test_reference_reader_cli_escapes_control_characters():
    """Names may hold any UTF-8 (§3.3); the reference reader's printout escapes control
    characters so a crafted name cannot drive the terminal (§1)."""
    reader = os.path.join(ROOT, "python", "driftscope", "tdump_reader.py")
    run = subprocess.run([sys.executable, reader, os.path.join(VECTORS, "valid", "names.tdump")],
                         capture_output=True, check=True)
    assert b"\x1b" not in run.stdout and b"\x07" not in run.stdout and b"\x00" not in run.stdout
    assert b"ctl.\\x1b[31mred\\x07\\r\\n\\t#0" in run.stdout
