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


def test_fp8_and_bf16_against_torch():
    torch = pytest.importorskip("torch")
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


# ---- field-level checks, each by its error code --------------------------------------------------
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


def patched(meta, at, fmt, value):
    m = bytearray(meta)
    struct.pack_into(fmt, m, at, value)
    return bytes(m)


def cases():
    m, _ = meta_of()
    p = tw.tensor_payload(GOOD)
    name_at = 32 + 8  # after the fixed part and one dim
    yield "bad_dtype", patched(m, 12, "<H", 16), p           # i4: reserved code
    yield "limit_exceeded", patched(m, 14, "<B", 17), p      # rank 17
    yield "bad_enum", patched(m, 15, "<B", 4), p             # role
    yield "bad_enum", patched(m, 18, "<B", 3), p             # encoding
    yield "reserved_nonzero", patched(m, 19, "<B", 1), p
    yield "reserved_nonzero", patched(m, 20, "<I", 1 << 31), p
    yield "empty_name", meta_of(name="")[0], p
    yield "bad_utf8", m[:name_at] + b"\xc0\xaf" + m[name_at + 2:], p      # overlong '/'
    yield "bad_utf8", m[:name_at] + b"\xed\xa0" + m[name_at + 2:], p      # surrogate half
    yield "bad_axes", meta_of(axes="a,b")[0], p
    yield "bad_axes", meta_of(shape=[2, 1], axes="a,")[0], p
    yield "duplicate_key", meta_of(attrs=[("k", "1"), ("k", "2")])[0], p
    yield "limit_exceeded", meta_of(attrs=[("", "1")])[0], p
    yield "bad_encoding", meta_of(encoding={"kind": "affine_tensor", "scale": 1.0,
                                            "zero_point": 0})[0], p
    q = dict(GOOD, dtype="i8", data=np.array([1, 2], np.int8))
    yield "bad_value", tw.encode_tensor_meta(dict(q, encoding={"kind": "affine_tensor",
                                                              "scale": math.inf,
                                                              "zero_point": 0}), 0, 0), b"\1\2"
    yield "bad_encoding", tw.encode_tensor_meta(dict(q, encoding={
        "kind": "affine_channel", "axis": 1, "scales": [1.0], "zero_points": [0]}), 0, 0), b"\1\2"
    yield "bad_encoding", tw.encode_tensor_meta(dict(q, encoding={
        "kind": "affine_channel", "axis": 0, "scales": [1.0], "zero_points": [0]}), 0, 0), b"\1\2"
    yield "bad_value", meta_of(dtype="bool", data=None)[0], b"\1\2"
    yield "length_mismatch", m, p[:4]
    yield "length_mismatch", m + b"\0", p                     # meta longer than its fields
    yield "shape_overflow", meta_of(shape=[1 << 62, 8])[0], b""


@pytest.mark.parametrize("code,meta,payload", list(cases()))
def test_bad_field_is_named(tmp_path, code, meta, payload):
    d = read_bytes(tmp_path, file_with(meta, payload))
    assert d.state == "corrupt" and d.records == []
    assert d.corruption.code == code, d.corruption


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


def header_with_crc(h):
    """Recomputes header_crc so that only the field under test is wrong."""
    mlen = struct.unpack_from("<I", h, 36)[0]
    struct.pack_into("<I", h, 60, tw.crc32(bytes(h[:60]), bytes(h[64:64 + mlen])))
    return bytes(h)


def header_cases():
    h = lambda **kw: bytearray(tw.encode_header([("writer", "t")], SALT, **kw))  # noqa: E731
    x = h()
    x[1] = ord("X")
    yield "bad_magic", bytes(x)
    yield "unsupported_feature", header_with_crc(h(required=4))
    yield "bad_byte_order", header_with_crc(h(byte_order=0x04030201))
    yield "unsupported_version", header_with_crc(h(version=(2, 0)))
    x = h()
    x[50] = 1
    yield "reserved_nonzero", header_with_crc(x)
    x = h()
    x[100] = 1                                         # header padding
    yield "nonzero_padding", header_with_crc(x)
    yield "duplicate_key", bytes(tw.encode_header([("k", "1"), ("k", "2")], SALT))
    x = bytearray(tw.encode_header([("k", "ab")], SALT))
    x[64 + 4 + 1 + 4:64 + 4 + 1 + 4 + 2] = b"\xff\xfe"
    yield "bad_utf8", header_with_crc(x)
    x = h()
    struct.pack_into("<I", x, 40, 2)                   # count says 2, block holds 1
    yield "length_mismatch", header_with_crc(x)
    yield "truncated_header", bytes(h())[:100]
    yield "optional bits ignored", header_with_crc(h(optional=0xFFFFFFFF))


@pytest.mark.parametrize("code,blob", list(header_cases()))
def test_header_checks(tmp_path, code, blob):
    if code == "optional bits ignored":
        assert read_bytes(tmp_path, blob).state == "unfinished"
        return
    with pytest.raises(tr.TdumpError) as e:
        read_bytes(tmp_path, blob)
    assert e.value.code == code


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
