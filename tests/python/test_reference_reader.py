"""The reference reader (python/driftscope/tdump_reader.py) beyond the golden vectors: the §8
example, dtype tables against an independent implementation, truncation at every byte, single-bit
flips, field-level rejections by error code, and a round trip with the spec writer."""
import math
import os
import subprocess
import struct
import sys

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
READER = os.path.join(ROOT, "python", "driftscope", "tdump_reader.py")
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
import tdump_write as tw  # noqa: E402

tr = tw.load_reader()

VALID = os.path.join(ROOT, "tests", "vectors", "valid")
SALT = 0x5EED5EED5EED5EED


def test_crc_is_zlib_crc32_check_value():
    assert tw.crc32(b"123456789") == 0xCBF43926


def test_example_matches_vector_and_cli(tmp_path):
    golden = open(os.path.join(VALID, "example.tdump"), "rb").read()
    assert tr.example_bytes() == golden
    out = tmp_path / "example.tdump"
    run = subprocess.run([sys.executable, READER, "--example", str(out)], capture_output=True,
                         text=True, check=True)
    assert out.read_bytes() == golden
    assert "clean" in run.stdout and "x#0" in run.stdout and "min -2 max 1" in run.stdout


def test_cli_reports_cut_and_corruption():
    damaged = os.path.join(ROOT, "tests", "vectors", "damaged")
    run = subprocess.run([sys.executable, READER, os.path.join(damaged, "cut_mid_payload.tdump")],
                         capture_output=True, text=True, check=True)
    assert "cut at offset 704: 261 bytes discarded" in run.stdout
    run = subprocess.run([sys.executable, READER, os.path.join(damaged, "corrupt_spliced.tdump")],
                         capture_output=True, text=True, check=True)
    assert "corrupt: salt_mismatch at offset 736" in run.stdout
    bad = os.path.join(ROOT, "tests", "vectors", "invalid", "bad_header_crc.tdump")
    run = subprocess.run([sys.executable, READER, bad], capture_output=True, text=True)
    assert run.returncode != 0 and "bad_header_checksum at offset 60" in run.stderr


def import_torch():
    """The real torch even if another test put python/driftscope (which has a torch.py) on
    sys.path."""
    shadow = os.path.join(ROOT, "python", "driftscope")
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != shadow]
    try:
        return pytest.importorskip("torch")
    finally:
        sys.path[:] = saved


def test_fp8_and_bf16_against_torch():
    torch = import_torch()
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    for name, tdt in (("f8e4m3fn", torch.float8_e4m3fn), ("f8e5m2", torch.float8_e5m2)):
        want = codes.view(tdt).float().numpy()
        np.testing.assert_array_equal(tr.FP8[name], want)  # NaN positions must agree too
    bits = np.arange(0, 65536, 7, dtype=np.uint16)
    want = torch.from_numpy(bits.astype(np.int16)).view(torch.bfloat16).float().numpy()
    got = (bits.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(got, want)


# ---- truncation and bit flips ------------------------------------------------------------------
def structure():
    path = os.path.join(VALID, "structure.tdump")
    return open(path, "rb").read(), tr.read(path)


def read_bytes(tmp_path, blob):
    return tr.read(blob)


def test_truncation_at_every_byte(tmp_path):
    blob, full = structure()
    ends = [r.offset + r.size for r in full.records]
    index_end = len(blob) - 64  # INDEX ends where END starts
    for cut in range(len(blob) + 1):
        if cut < full.header_length:
            with pytest.raises(tr.TdumpError) as e:
                read_bytes(tmp_path, blob[:cut])
            assert e.value.code == "truncated_header"
            continue
        d = read_bytes(tmp_path, blob[:cut])
        whole = [e for e in ends if e <= cut]
        assert len(d.records) == len(whole), cut
        boundary = max(whole + [full.header_length] + ([index_end] if cut >= index_end else []))
        if cut == len(blob):
            assert d.state == "clean"
        elif cut == boundary:
            assert d.state == "unfinished" and d.cut_offset is None, cut
        else:
            assert (d.state, d.cut_offset, d.discarded_bytes) == ("cut", boundary, cut - boundary), cut
        for r, f in zip(d.records, full.records):
            assert r.name == f.name and np.array_equal(r.array, f.array, equal_nan=True)


def test_every_single_bit_flip_is_detected(tmp_path):
    blob, full = structure()
    for i in range(len(blob)):
        bad = bytearray(blob)
        bad[i] ^= 1 << (i % 8)
        try:
            d = read_bytes(tmp_path, bytes(bad))
        except tr.TdumpError as e:
            assert i < full.header_length, (i, e)
            continue
        assert d.state != "clean", i
        # Whatever is returned is an intact prefix of the original records.
        for r, f in zip(d.records, full.records):
            assert (r.name, r.offset) == (f.name, f.offset)
            assert np.array_equal(r.array, f.array, equal_nan=True), i


# ---- frame-level checks (field-level ones are golden vectors: tests/vectors/rejected) ------------
GOOD = {"name": "ok", "dtype": "f32", "shape": [2], "data": np.array([1, 2], "<f4")}


def file_with(meta, payload, kind=1, flags=0, header_meta=(("writer", "t"),)):
    """Header, a bad record, then a good one: a failure is corruption, never a torn tail."""
    head = tw.encode_header(list(header_meta), SALT)
    bad = tw.encode_record(kind, SALT, meta, payload, flags)
    good = tw.encode_record(1, SALT, tw.encode_tensor_meta(GOOD, 1, 0), tw.tensor_payload(GOOD))
    return head + bad + good


def meta_of(**kw):
    t = dict(GOOD, **kw)
    return tw.encode_tensor_meta(t, 0, 0), t


def test_bad_record_frame_fields(tmp_path):
    m, _ = meta_of()
    rec = bytearray(tw.encode_record(1, SALT, m, tw.tensor_payload(GOOD)))
    rec[47] ^= 0xFF                                   # record_crc
    blob = file_with(m, tw.tensor_payload(GOOD))
    head = len(tw.encode_header([("writer", "t")], SALT))
    d = read_bytes(tmp_path, blob[:head] + bytes(rec) + blob[head + len(rec):])
    assert (d.corruption.code, d.corruption.offset) == ("bad_record_checksum", head + 44)
    d = read_bytes(tmp_path, blob[:head] + bytes(rec))  # nothing follows: a torn tail
    assert (d.state, d.cut_offset) == ("cut", head)


def test_unknown_kinds_skippable_or_rejected(tmp_path):
    d = read_bytes(tmp_path, file_with(b"private", b"data", kind=0x8001, flags=1))
    assert d.state == "unfinished" and [r.name for r in d.records] == ["ok"]
    d = read_bytes(tmp_path, file_with(b"private", b"data", kind=0x8001, flags=0))
    assert d.corruption.code == "unknown_record_kind"
    d = read_bytes(tmp_path, file_with(b"private", b"data", kind=1, flags=2))
    assert d.corruption.code == "reserved_nonzero"


def test_nonzero_padding(tmp_path):
    m, _ = meta_of()
    blob = bytearray(file_with(m, tw.tensor_payload(GOOD)))
    blob[128 + 48 + len(m)] = 1                       # padding after the meta: in no CRC
    d = read_bytes(tmp_path, bytes(blob))
    assert (d.corruption.code, d.corruption.offset) == ("nonzero_padding", 128 + 48 + len(m))


def test_duplicate_tensor_is_a_warning(tmp_path):
    p = tmp_path / "dup.tdump"
    tw.write_tdump(p, [("writer", "t")], [dict(GOOD, occurrence=0), dict(GOOD, occurrence=0)], SALT)
    d = tr.read(str(p))
    assert d.state == "clean" and len(d.records) == 2
    assert [w.code for w in d.warnings] == ["duplicate_tensor"]


# ---- round trip with the spec writer --------------------------------------------------------------
def test_round_trip_random_tensors(tmp_path):
    rng = np.random.default_rng(1234)
    np_of = {"f64": "<f8", "f32": "<f4", "f16": "<f2", "bf16": "<u2", "f8e4m3fn": "u1",
             "f8e5m2": "u1", "i64": "<i8", "i32": "<i4", "i16": "<i2", "i8": "i1", "u8": "u1",
             "bool": "u1", "u16": "<u2", "u32": "<u4", "u64": "<u8"}
    tensors = []
    for i in range(60):
        dt = list(np_of)[i % len(np_of)]
        shape = [int(x) for x in rng.integers(0, 4, size=int(rng.integers(0, 5)))]
        raw = rng.integers(0, 256, size=int(np.prod(shape)) * np.dtype(np_of[dt]).itemsize,
                           dtype=np.uint8).tobytes()
        if dt == "bool":
            raw = bytes(b & 1 for b in raw)
        tensors.append({"name": f"t.{i}", "dtype": dt, "shape": shape, "data": raw,
                        "axes": [f"d{k}" for k in range(len(shape))] if i % 3 == 0 else [],
                        "attrs": {"i": str(i)} if i % 4 == 0 else {}, "role": i % 4,
                        "role_index": i % 3, "op_type": "Op" * (i % 2)})
    p = tmp_path / "rt.tdump"
    offsets = tw.write_tdump(p, [("writer", "t")], tensors, SALT)
    d = tr.read(str(p))
    assert d.state == "clean" and [r.offset for r in d.records] == offsets
    for r, t in zip(d.records, tensors):
        assert (r.name, r.dtype, list(r.shape), r.exec_index) == (t["name"], t["dtype"],
                                                                  t["shape"], int(t["name"][2:]))
        assert r.role == tr.ROLES[t["role"]] and r.role_index == t["role_index"]
        assert r.attrs == t["attrs"] and r.axes == t["axes"]
        stored = open(p, "rb").read()[r.payload_offset:r.payload_offset + len(t["data"])]
        assert stored == t["data"]
        if t["dtype"] not in ("bf16", "f8e4m3fn", "f8e5m2", "bool"):
            assert r.array.tobytes() == t["data"]
