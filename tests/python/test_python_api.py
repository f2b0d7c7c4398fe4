"""The driftscope Python package: Writer, open/Dump, Filter, errors, packaging (issue 4 §1)."""

from __future__ import annotations

import gc
import os
import re
import struct
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import driftscope
from driftscope import _core
from driftscope.errors import CODE_TO_EXCEPTION, exception_for_code

ROOT = Path(__file__).resolve().parents[2]


def write_one(path, name, array, **kw):
    with driftscope.Writer(path) as w:
        r = w.write(name, array, **kw)
    return r


# -- packaging ---------------------------------------------------------------------------------

def test_import_loads_no_framework():
    code = ("import sys, driftscope; print(sorted(m for m in ('torch', 'onnx', 'onnxruntime', "
            "'ai_edge_litert', 'tensorflow', 'jax') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "[]"


def test_adapters_are_lazy_attributes():
    code = ("import sys, driftscope; assert 'driftscope.torch' not in sys.modules; "
            "m = driftscope.torch; assert 'torch' in sys.modules; "
            "print(m.__name__, m is sys.modules['driftscope.torch'])")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    # driftscope.torch is the recorder's module itself, whose code is in driftscope/recorders/
    assert out.stdout.strip() == "driftscope.recorders.torch True"
    with pytest.raises(AttributeError):
        driftscope.no_such_thing  # noqa: B018


def test_package_ships_types_and_private_core():
    pkg = Path(driftscope.__file__).parent
    assert (pkg / "py.typed").is_file()
    assert (pkg / "_core.pyi").is_file()
    assert driftscope._core.__name__ == "driftscope._core"
    assert driftscope.__version__ == _core.__version__


def test_core_stub_declares_every_native_name():
    import ast

    tree = ast.parse((Path(driftscope.__file__).parent / "_core.pyi").read_text())
    declared = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    declared |= {t.id for n in tree.body if isinstance(n, ast.AnnAssign)
                 for t in [n.target] if isinstance(t, ast.Name)}
    native = {n for n in dir(_core) if not n.startswith("__")}
    assert native <= declared, f"missing from _core.pyi: {sorted(native - declared)}"
    for cls in ("Record", "Reader", "Writer", "Filter", "Report"):
        node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
        stubbed = {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
        public = {n for n in dir(getattr(_core, cls)) if not n.startswith("_")}
        assert public <= stubbed, f"{cls}: missing from _core.pyi: {sorted(public - stubbed)}"


@pytest.mark.skipif("site-packages" not in driftscope.__file__,
                    reason="the command is installed by pip install, not by a developer build")
def test_pip_install_puts_the_command_next_to_python():
    exe = Path(sys.executable).parent / "driftscope"
    assert exe.is_file() and os.access(exe, os.X_OK)
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and driftscope.__version__ in out.stdout


def test_python_m_driftscope():
    run = lambda *a: subprocess.run([sys.executable, "-m", "driftscope", *a],  # noqa: E731
                                    capture_output=True, text=True)
    v = run("--version")
    assert v.returncode == 0 and driftscope.__version__ in v.stdout
    bad = run("record", "caffe")
    assert bad.returncode == 2 and "unknown framework 'caffe'" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    assert run("frobnicate").returncode == 2
    assert run("record", "--help").returncode == 0


# -- round trips -------------------------------------------------------------------------------

ZERO_COPY_DTYPES = [np.float64, np.float32, np.float16, np.int64, np.int32, np.int16, np.int8,
                    np.uint8, np.uint16, np.uint32, np.uint64, np.bool_]


@pytest.mark.parametrize("dtype", ZERO_COPY_DTYPES, ids=lambda d: np.dtype(d).name)
def test_round_trip_every_numpy_dtype_is_zero_copy(tmp_path, dtype):
    rng = np.random.default_rng(7)
    if np.dtype(dtype) == np.bool_:
        a = rng.integers(0, 2, size=(3, 5)).astype(bool)
    elif np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        a = rng.integers(info.min, info.max, size=(3, 5), dtype=dtype, endpoint=True)
    else:
        a = rng.standard_normal((3, 5)).astype(dtype)
    p = tmp_path / "x.tdump"
    write_one(p, "x", a)
    d = driftscope.open(p)
    got = d["x"]
    assert got.dtype == a.dtype and got.shape == a.shape
    assert np.array_equal(got, a)
    # A view of the mapped file: read-only, not owning, 64-byte aligned payload.
    assert not got.flags.writeable and not got.flags.owndata
    assert got.ctypes.data % 64 == 0
    with pytest.raises(ValueError):
        got[0, 0] = got[0, 1]


def test_array_keeps_the_mapping_alive(tmp_path):
    p = tmp_path / "x.tdump"
    a = np.arange(100000, dtype=np.float32)
    write_one(p, "x", a)
    d = driftscope.open(p)
    view = d["x"]
    rec = d.record("x")
    del d, rec
    gc.collect()
    # The file may even be removed: the mapping stays valid while the array lives.
    os.unlink(p)
    assert np.array_equal(view, a)
    assert float(view[-1]) == 99999.0


def test_closed_dump_refuses_lookups_but_arrays_survive(tmp_path):
    p = tmp_path / "x.tdump"
    write_one(p, "x", np.ones(4, np.float64))
    with driftscope.open(p) as d:
        arr = d["x"]
    assert d.closed
    with pytest.raises(ValueError, match="closed"):
        d["x"]
    assert arr.sum() == 4.0


def _bf16_bits(values):
    f = np.asarray(values, dtype=np.float32)
    return (f.view(np.uint32) >> 16).astype(np.uint16)  # exact for values with 8 mantissa bits


def test_bf16_and_fp8_decode_to_float32(tmp_path):
    p = tmp_path / "x.tdump"
    vals = np.array([1.0, -2.5, 0.0, 3.140625, -0.0078125], dtype=np.float32)
    # OCP fp8: 0x38 = 1.0, 0xC4 = -3.0 (e4m3fn, bias 7); 0x3C = 1.0, 0xC2 = -3.0 (e5m2, bias 15)
    e4m3 = np.array([0x38, 0xC4, 0x00, 0x7F], dtype=np.uint8)  # 0x7F is NaN in e4m3fn
    e5m2 = np.array([0x3C, 0xC2, 0x7C, 0xFC], dtype=np.uint8)  # +-inf in e5m2
    with driftscope.Writer(p) as w:
        w.write("bf", _bf16_bits(vals), dtype="bf16")
        w.write("e4", e4m3, dtype="f8e4m3fn")
        w.write("e5", e5m2, dtype="float8_e5m2")
    d = driftscope.open(p)
    assert d.record("bf").dtype == "bf16"
    bf = d["bf"]
    assert bf.dtype == np.float32 and np.array_equal(bf, vals)
    e4 = d["e4"]
    assert e4.dtype == np.float32
    assert e4[:3].tolist() == [1.0, -3.0, 0.0] and np.isnan(e4[3])
    assert d["e5"].tolist() == [1.0, -3.0, np.inf, -np.inf]
    assert d.get("bf", dtype="float64").dtype == np.float64


def test_raw_bytes_need_dtype_and_shape(tmp_path):
    p = tmp_path / "x.tdump"
    raw = struct.pack("<4f", 1, 2, 3, 4)
    with driftscope.Writer(p) as w:
        with pytest.raises(driftscope.InvalidArgumentError, match="dtype= and shape="):
            w.write("x", raw)
        w.write("x", raw, dtype="f32", shape=(2, 2))
    assert driftscope.open(p)["x"].tolist() == [[1, 2], [3, 4]]


def test_non_contiguous_big_endian_and_scalar_inputs(tmp_path):
    p = tmp_path / "x.tdump"
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    with driftscope.Writer(p) as w:
        w.write("t", base.T)                                  # Fortran order: copied
        w.write("be", np.arange(5, dtype=">i4"))              # big-endian: swapped
        w.write("s", 2.5)                                     # Python scalar: rank 0
        w.write("l", [[1, 2], [3, 4]])                        # nested list
    d = driftscope.open(p)
    assert np.array_equal(d["t"], base.T)
    assert d["be"].tolist() == [0, 1, 2, 3, 4] and d["be"].dtype == np.int32
    assert d["s"].shape == () and float(d["s"]) == 2.5
    assert d["l"].tolist() == [[1, 2], [3, 4]]


def test_empty_and_rank0_tensors(tmp_path):
    p = tmp_path / "x.tdump"
    with driftscope.Writer(p) as w:
        w.write("empty", np.zeros((2, 0, 3), np.float32))
        w.write("scalar", np.int8(-5))
    d = driftscope.open(p)
    assert d["empty"].shape == (2, 0, 3)
    assert d["scalar"].shape == () and int(d["scalar"]) == -5


def test_unsupported_numpy_dtype_is_a_clear_error(tmp_path):
    with driftscope.Writer(tmp_path / "x.tdump") as w:
        with pytest.raises(driftscope.InvalidArgumentError, match="complex128"):
            w.write("c", np.zeros(3, np.complex128))


# -- identity, lookup, metadata ----------------------------------------------------------------

def test_identity_occurrences_roles_and_lookup(tmp_path):
    p = tmp_path / "x.tdump"
    with driftscope.Writer(p, meta={"framework": "numpy", "seed": 3}) as w:
        for k in range(3):
            w.write("block.norm", np.full(2, k, np.float32), op_type="LayerNorm",
                    axes="batch,hidden" if False else ["hidden"], attrs={"step": k})
        w.write("block.norm", np.zeros(2, np.float32), role="input", role_index=1, occurrence=0)
        r = w.write("head", np.ones(3, np.float32), exec_index=100)
    assert r.written and r.exec_index == 100 and r.offset is not None
    d = driftscope.open(p)
    assert len(d) == 5 and d.names() == ["block.norm", "head"]
    assert d.metadata["framework"] == "numpy" and d.metadata["seed"] == "3"
    assert d.metadata["writer"].startswith("driftscope ") and "(python)" in d.metadata["writer"]
    assert [r.occurrence for r in d.records("block.norm")] == [0, 1, 2, 0]
    assert d.get("block.norm", occurrence=2).tolist() == [2.0, 2.0]
    rec = d.record("block.norm", occurrence=1)
    assert (rec.op_type, rec.role, rec.role_index, rec.axes, rec.attrs) == (
        "LayerNorm", "output", 0, ("hidden",), {"step": "1"})
    assert d.record("block.norm", role="input", role_index=1).role == "input"
    assert [r.exec_index for r in d] == [0, 1, 2, 3, 100]
    assert "head" in d and "nope" not in d
    assert d[-1].name == "head" and d[0].name == "block.norm"
    with pytest.raises(IndexError):
        d[5]
    assert d.get("nope", default=None) is None
    assert d.find("head", occurrence=1) is None


def test_not_found_is_a_key_error_with_suggestions(tmp_path):
    p = tmp_path / "x.tdump"
    write_one(p, "encoder.layer.0.output", np.zeros(1, np.float32))
    d = driftscope.open(p)
    with pytest.raises(KeyError) as e:
        d["encoder.layer.0.outptu"]
    assert isinstance(e.value, driftscope.NotFoundError) and e.value.code_name == "not_found"
    assert "did you mean 'encoder.layer.0.output'" in str(e.value)
    with pytest.raises(driftscope.NotFoundError, match="that name has: occurrence 0 output"):
        d.get("encoder.layer.0.output", occurrence=4)


def test_record_attributes_stats_and_verify(tmp_path):
    p = tmp_path / "x.tdump"
    a = np.array([[1.0, np.nan], [np.inf, -3.0], [0.0, 2.0]], np.float32)
    write_one(p, "x", a, op_type="Op")
    d = driftscope.open(p, verify=False)
    r = d.record("x")
    assert (r.kind, r.dtype, r.shape, r.numel, r.nbytes) == ("tensor", "f32", (3, 2), 6, 24)
    assert r.payload_offset % 64 == 0 and r.offset < r.payload_offset < r.offset + r.size
    s = r.stats()
    assert (s["count"], s["nan_count"], s["posinf_count"], s["zero_count"]) == (6, 1, 1, 1)
    assert (s["min"], s["max"]) == (-3.0, 2.0)
    finite = np.array([1.0, -3.0, 0.0, 2.0])
    assert s["mean"] == pytest.approx(finite.mean()) and s["l2_norm"] == pytest.approx(
        np.linalg.norm(finite))
    r.verify()
    assert "x" in repr(r) and "f32" in repr(r)
    assert d.integrity.checksums_verified is False


def test_quantized_encodings_dequantize(tmp_path):
    p = tmp_path / "x.tdump"
    q = np.array([[-128, 0, 5], [127, 10, -7]], np.int8)
    with driftscope.Writer(p) as w:
        w.write("t", q, encoding={"kind": "affine_tensor", "scale": 0.5, "zero_point": 3})
        w.write("c", q, encoding={"kind": "affine_channel", "axis": 0, "scales": [0.25, 2.0],
                                  "zero_points": [0, -1]})
    d = driftscope.open(p)
    assert d.record("t").encoding == {"kind": "affine_tensor", "scales": [0.5],
                                      "zero_points": [3]}
    assert np.array_equal(d["t"], q)  # stored integers by default
    assert np.array_equal(d.get("t", dtype="float64"), 0.5 * (q.astype(np.float64) - 3))
    want = np.array([0.25, 2.0])[:, None] * (q.astype(np.float64) - np.array([0, -1])[:, None])
    assert np.array_equal(d.get("c", dtype="float64"), want)
    with pytest.raises(driftscope.InvalidArgumentError):
        d.get("t", dtype="int8")


# -- filters, light mode, sync modes -----------------------------------------------------------

def test_writer_filter_and_wants(tmp_path):
    p = tmp_path / "x.tdump"
    with driftscope.Writer(p, filter="enc.* -*.drop rank>=1") as w:
        assert w.wants("enc.0") and not w.wants("dec.0") and not w.wants("enc.0.drop")
        assert w.write("dec.0", np.ones(2, np.float32)).status == "filtered"
        assert w.write("enc.0", np.float32(1)).status == "filtered"   # rank 0
        assert w.write("enc.1", np.ones(2, np.float32)).written
    assert [r.name for r in driftscope.open(p)] == ["enc.1"]
    f = driftscope.Filter("enc.* op=Linear")
    assert f.accepts("enc.3", op_type="Linear") and not f.accepts("enc.3", op_type="ReLU")
    assert not f.may_accept_name("dec") and f.byte_budget is None
    assert driftscope.Filter("budget=1KiB").byte_budget == 1024
    assert driftscope.glob_match("enc.*.norm", "enc.3.norm")


def test_byte_budget_stops_recording(tmp_path):
    p = tmp_path / "x.tdump"
    with driftscope.Writer(p, filter="budget=100") as w:
        statuses = [w.write(f"t{i}", np.zeros(10, np.float32)).status for i in range(5)]
    assert statuses[:2] == ["written", "written"] and statuses[-1] == "over_budget"


def test_light_mode_summary(tmp_path):
    p = tmp_path / "x.tdump"
    rng = np.random.default_rng(0)
    a = rng.standard_normal(1000).astype(np.float32)
    with driftscope.Writer(p) as w:
        w.write_summary("s", a, op_type="Gelu", projection_dim=64)
    d = driftscope.open(p)
    r = d.record("s")
    assert r.kind == "summary" and r.dtype == "f32" and r.shape == (1000,)
    s = r.summary
    assert s["count"] == 1000 and s["projection"].shape == (64,)
    assert s["mean"] == pytest.approx(a.astype(np.float64).mean(), rel=1e-9)
    assert s["std"] == pytest.approx(a.astype(np.float64).std(), rel=1e-9)
    assert s["l2_norm"] == pytest.approx(np.linalg.norm(a.astype(np.float64)), rel=1e-9)
    assert r.stats()["count"] == 1000
    with pytest.raises(driftscope.UnsupportedError, match="SUMMARY"):
        d["s"]


@pytest.mark.parametrize("sync", ["close", "record", "bytes", True, False, 4096])
@pytest.mark.parametrize("background", [False, True])
def test_sync_and_background_modes(tmp_path, sync, background):
    p = tmp_path / "x.tdump"
    arrays = [np.full(1000, i, np.float32) for i in range(20)]
    with driftscope.Writer(p, sync=sync, background=background, queue_bytes=8192) as w:
        for i, a in enumerate(arrays):
            w.write(f"t{i}", a)
        w.flush()
        assert w.records_written == 20
    d = driftscope.open(p)
    assert d.finished and [float(d[f"t{i}"][0]) for i in range(20)] == list(range(20))


def test_background_writer_copies_the_payload(tmp_path):
    p = tmp_path / "x.tdump"
    a = np.zeros(4096, np.float32)
    with driftscope.Writer(p, background=True) as w:
        for i in range(10):
            a[:] = i                   # reused buffer: the queue must hold its own copy
            w.write(f"t{i}", a)
    d = driftscope.open(p)
    assert [float(d[f"t{i}"][0]) for i in range(10)] == list(range(10))


def test_append_continues_a_file(tmp_path):
    p = tmp_path / "x.tdump"
    with driftscope.Writer(p, meta={"run": "1"}) as w:
        w.write("a", np.ones(2, np.float32))
    with driftscope.Writer(p, append=True) as w:
        w.write("b", np.zeros(2, np.float32))
    d = driftscope.open(p)
    assert d.names() == ["a", "b"] and d.metadata["run"] == "1" and d.finished
    with pytest.raises(driftscope.DumpIOError):
        driftscope.Writer(p, overwrite=False)


def test_concurrent_writes_from_threads(tmp_path):
    p = tmp_path / "x.tdump"
    with driftscope.Writer(p) as w:
        def work(t):
            for i in range(50):
                w.write(f"thread{t}.t{i}", np.full(256, t * 1000 + i, np.int32))
        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    d = driftscope.open(p)
    assert len(d) == 200
    assert sorted(r.exec_index for r in d) == list(range(200))
    assert all(int(d[f"thread{t}.t{i}"][0]) == t * 1000 + i for t in range(4) for i in range(50))


# -- integrity ---------------------------------------------------------------------------------

def three_records(p):
    with driftscope.Writer(p) as w:
        for i in range(3):
            w.write(f"t{i}", np.full(100, i, np.float32))
    return [r.offset for r in driftscope.open(p)]


def test_unfinished_run_is_readable(tmp_path):
    p = tmp_path / "x.tdump"
    w = driftscope.Writer(p, sync="record")
    w.write("a", np.ones(3, np.float32))
    d = driftscope.open(p)
    assert d.state == "unfinished" and not d.finished and not d.integrity.damaged
    assert d["a"].tolist() == [1, 1, 1]
    driftscope.open(p, strict=True)  # unfinished is not damage
    w.close()
    assert driftscope.open(p).finished


def test_cut_file_recovers_complete_records(tmp_path):
    p = tmp_path / "x.tdump"
    offsets = three_records(p)
    data = p.read_bytes()
    p.write_bytes(data[: offsets[2] + 100])  # inside the third record
    d = driftscope.open(p)
    assert d.state == "cut" and d.integrity.damaged
    assert d.names() == ["t0", "t1"]
    assert d.integrity.cut_offset == offsets[2] and d.integrity.discarded_bytes == 100
    with pytest.raises(driftscope.FormatError, match="cut at offset"):
        driftscope.open(p, strict=True)


def test_corrupt_file_reports_the_failure(tmp_path):
    p = tmp_path / "x.tdump"
    offsets = three_records(p)
    data = bytearray(p.read_bytes())
    data[offsets[1] + 200] ^= 0x01  # a payload byte of t1; t2 follows
    p.write_bytes(bytes(data))
    d = driftscope.open(p, use_index=False)
    assert d.state == "corrupt"
    err = d.integrity.corruption
    assert isinstance(err, driftscope.FormatError) and err.code_name == "bad_record_checksum"
    assert offsets[1] <= err.offset < offsets[2]
    assert d.names() == ["t0"]
    with pytest.raises(driftscope.FormatError) as e:
        driftscope.open(p, strict=True, use_index=False)
    assert e.value.code_name == "bad_record_checksum"
    resynced = driftscope.open(p, resync=True, use_index=False)
    assert "t2" in resynced.names()


# -- errors: the documented mapping, each row ---------------------------------------------------

def test_every_core_code_maps_to_its_documented_class():
    codes = dict(_core.error_codes())
    assert codes[0] == "ok" and codes[21] == "bad_magic" and codes[91] == "bad_policy"
    for code, name in codes.items():
        if code == 0:
            continue
        with pytest.raises(driftscope.Error) as e:
            _core._raise_error(code, f"message {name}")
        assert type(e.value) is exception_for_code(code)
        assert (e.value.code, e.value.code_name) == (code, name)
        assert str(e.value) == f"{name}: message {name}"


def test_docs_table_matches_the_mapping():
    text = (ROOT / "docs" / "python.md").read_text()
    rows = re.findall(r"^\|\s*`([a-z_0-9]+)`\s*\((\d+)\)\s*\|\s*`driftscope\.(\w+)`", text, re.M)
    assert len(rows) >= len(CODE_TO_EXCEPTION)
    documented = {int(code): cls for _, code, cls in rows}
    for code, name in _core.error_codes():
        if code == 0:
            continue
        assert code in documented, f"docs/python.md has no row for {name} ({code})"
        assert documented[code] == exception_for_code(code).__name__, name


def test_row_invalid_argument(tmp_path):
    with driftscope.Writer(tmp_path / "x.tdump") as w:
        with pytest.raises(driftscope.InvalidArgumentError) as e:
            w.write("x", np.zeros(2, np.uint8), dtype="f128")
    assert isinstance(e.value, ValueError) and e.value.code == 1
    with pytest.raises(driftscope.InvalidArgumentError):
        driftscope.Writer(tmp_path / "y.tdump", sync="sometimes")


def test_row_io_error(tmp_path):
    with pytest.raises(driftscope.DumpIOError) as e:
        driftscope.open(tmp_path / "missing.tdump")
    assert isinstance(e.value, OSError) and e.value.code_name == "io_error"
    with pytest.raises(OSError):
        driftscope.Writer(tmp_path / "no" / "such" / "dir" / "x.tdump")


def test_row_not_found(tmp_path):
    p = tmp_path / "x.tdump"
    write_one(p, "a", np.zeros(1, np.float32))
    with pytest.raises(driftscope.NotFoundError) as e:
        driftscope.open(p).record("b")
    assert isinstance(e.value, KeyError) and e.value.code == 3


def test_row_filter_syntax(tmp_path):
    with pytest.raises(driftscope.FilterSyntaxError) as e:
        driftscope.Writer(tmp_path / "x.tdump", filter="rank<<3")
    assert isinstance(e.value, ValueError) and e.value.code_name == "filter_syntax"
    with pytest.raises(driftscope.FilterSyntaxError):
        driftscope.Filter("numel=lots")


def test_row_unsupported(tmp_path):
    p = tmp_path / "x.tdump"
    with driftscope.Writer(p) as w:
        w.write_summary("s", np.ones(4, np.float32))
    with pytest.raises(driftscope.UnsupportedError) as e:
        driftscope.open(p).get("s")
    assert e.value.code_name == "unsupported"


def test_row_closed(tmp_path):
    w = driftscope.Writer(tmp_path / "x.tdump")
    w.close()
    w.close()  # idempotent
    with pytest.raises(driftscope.ClosedError) as e:
        w.write("a", np.zeros(1, np.float32))
    assert e.value.code_name == "closed"


def test_row_format_error(tmp_path):
    p = tmp_path / "x.tdump"
    p.write_bytes(b"PK\x03\x04 not a dump at all" + bytes(100))
    with pytest.raises(driftscope.FormatError) as e:
        driftscope.open(p)
    assert e.value.code_name == "bad_magic" and isinstance(e.value, ValueError)
    write_one(p, "a", np.zeros(1, np.float32))
    data = bytearray(p.read_bytes())
    data[8] = 9  # version_major
    p.write_bytes(bytes(data))
    with pytest.raises(driftscope.FormatError) as e:
        driftscope.open(p)
    assert e.value.code_name in ("unsupported_version", "bad_header_checksum")
    with pytest.raises(driftscope.FormatError) as e:
        with driftscope.Writer(tmp_path / "y.tdump") as w:
            w.write("", np.zeros(1, np.float32))
    assert e.value.code_name == "empty_name"
    with pytest.raises(driftscope.FormatError) as e:
        with driftscope.Writer(tmp_path / "z.tdump") as w:
            w.write("a", np.zeros((2, 3), np.float32), axes="batch")
    assert e.value.code_name == "bad_axes"


def test_errors_pickle_round_trip():
    import pickle

    e = driftscope.FormatError("bad_magic: x", 21, "bad_magic", 0)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is driftscope.FormatError and back.offset == 0 and str(back) == str(e)


# -- compare: the C++ engine of `driftscope compare` -------------------------------------------

def two_runs(tmp_path, scale_from=2, zero_at=None):
    rng = np.random.default_rng(1)
    base = [rng.standard_normal((4, 16)).astype(np.float32) for _ in range(5)]
    ref, cand = tmp_path / "ref.tdump", tmp_path / "cand.tdump"
    with driftscope.Writer(ref) as w:
        for i, a in enumerate(base):
            w.write(f"layer{i}", a, op_type="Linear")
    with driftscope.Writer(cand) as w:
        for i, a in enumerate(base):
            if i == zero_at:
                a = np.zeros_like(a)
            elif i >= scale_from:
                a = a * np.float32(1.05)
            w.write(f"layer{i}", a, op_type="Linear")
    return ref, cand


def test_compare_names_the_first_divergence(tmp_path):
    ref, cand = two_runs(tmp_path)
    report = driftscope.compare(ref, cand)
    assert report.verdict == "diverged" and report.exit_code == 1 and not report.passed
    first = report.first_divergence
    assert first.name == "layer2" and first.status == "fail" and first["index_ref"] == 2
    assert "layer2" in report.summary
    assert [t.status for t in report.tensors] == ["pass", "pass", "fail", "fail", "fail"]
    t = report.tensor("layer3")
    assert t.rel_l2 == pytest.approx(0.05, rel=1e-5) and t.cosine == pytest.approx(1.0)
    assert report.counts["pairs"] == 5 and report.only_in_reference == []
    doc = __import__("json").loads(report.to_json())
    assert doc["verdict"] == "diverged" and doc["first_divergence"]["name"] == "layer2"
    assert "layer2" in report.to_markdown() and "layer2" in report.to_text(width=80)
    with pytest.raises(driftscope.NotFoundError):
        report.tensor("layer9")


def test_compare_criteria_replace_defaults_and_accept_dumps(tmp_path):
    ref, cand = two_runs(tmp_path)
    with driftscope.open(ref) as a, driftscope.open(cand) as b:
        assert driftscope.compare(a, b, min_cosine=0.999).verdict == "pass"
        assert driftscope.compare(a, b, max_rel_l2=0.01).verdict == "diverged"
        stopped = driftscope.compare(a, b, atol=1e-6, stop_at_first=True)
    assert stopped.first_divergence.name == "layer2"
    assert stopped.tensors[-1].status == "not_compared"
    same = driftscope.compare(ref, ref)
    assert same.verdict == "pass" and same.exit_code == 0 and same.first_divergence is None


def test_compare_silent_failure_and_progress(tmp_path):
    ref, cand = two_runs(tmp_path, scale_from=99, zero_at=3)
    seen = []
    report = driftscope.compare(ref, cand, progress=lambda done, total: seen.append((done, total)))
    assert report.verdict == "silent_failure" and report.exit_code == 3
    assert report.first_silent_zero.name == "layer3"
    assert seen and seen[-1][0] == seen[-1][1] == 5


def test_compare_renames_and_policies(tmp_path):
    ref, cand = two_runs(tmp_path)
    renamed = tmp_path / "renamed.tdump"
    src = driftscope.open(cand)
    with driftscope.Writer(renamed) as w:
        for r in src:
            w.write(r.name.replace("layer", "/model/L"), r.numpy(), op_type=r.op_type)
    unpaired = driftscope.compare(ref, renamed)
    assert unpaired.verdict == "diverged" and len(unpaired.only_in_reference) == 5
    mapped = driftscope.compare(ref, renamed, map_b=[r"^/model/L(\d+)$=>layer$1"])
    assert mapped.first_divergence.name == "layer2"
    assert mapped.first_divergence.candidate_name == "/model/L2"
    loose = {"rule": [{"match": "layer*", "min_cosine": 0.99}]}
    assert driftscope.compare(ref, cand, policy=loose).verdict == "pass"


def test_row_policy_error(tmp_path):
    ref, cand = two_runs(tmp_path)
    with pytest.raises(driftscope.PolicyError) as e:
        driftscope.compare(ref, cand, policy={"no_such_key": 1})
    assert e.value.code_name == "bad_policy" and isinstance(e.value, ValueError)
    with pytest.raises(driftscope.InvalidArgumentError):
        driftscope.compare(ref, cand, pairs="diagonal")
    with pytest.raises(driftscope.InvalidArgumentError):
        driftscope.compare(ref, cand, map_a=["no arrow here"])


def test_compare_positional_pairing_of_unrelated_names(tmp_path):
    ref, cand = two_runs(tmp_path)
    other = tmp_path / "other.tdump"
    with driftscope.Writer(other) as w:
        for i, r in enumerate(driftscope.open(cand)):
            w.write(f"node_{i}", r.numpy())
    report = driftscope.compare(ref, other, pairs="positional")
    assert report.first_divergence.name == "layer2"


# -- a file that changes or is not a file (issue 7, bugs 4, 5 and 8) ----------------------------

def test_dump_truncated_while_open_reads_zeros_and_says_so(tmp_path):
    p = tmp_path / "live.tdump"
    with driftscope.Writer(p) as w:
        for i in range(16):
            w.write(f"t{i}", np.full(4096, i + 1, dtype=np.float32))
    dump = driftscope.open(p, verify=False)
    dump.check_unchanged()  # nothing changed yet
    last, rec = dump["t15"], dump.record("t15")
    os.truncate(p, 8192)  # a writer cut the file: the pages of t15 are gone
    assert float(np.asarray(last).sum()) == 0.0  # zeros, not SIGBUS
    with pytest.raises(driftscope.errors.DumpIOError, match="file changed while reading"):
        dump.check_unchanged()
    with pytest.raises(driftscope.errors.DumpIOError, match="file changed while reading"):
        rec.verify()  # not a checksum error over the zeros
    with pytest.raises(driftscope.errors.DumpIOError, match="file changed while reading"):
        dump["t14"]  # the footer index was cut away: not "no tensor 't14'"


def test_truncation_guard_does_not_use_a_foreign_alternate_signal_stack(tmp_path):
    # A library in the same process set the thread's alternate signal stack and freed it (seen
    # in the full test run: a SIGSEGV where the guard should have read zeros). The guard's
    # handler must run on the thread's own stack. In a child: the process is left damaged.
    code = (
        "import ctypes, os, sys, numpy as np, driftscope\n"
        "libc = ctypes.CDLL(None)\n"
        "class Stack(ctypes.Structure):\n"
        "    _fields_ = [('sp', ctypes.c_void_p), ('flags', ctypes.c_int), ('size', ctypes.c_size_t)]\n"
        "libc.mmap.restype = ctypes.c_void_p\n"
        "libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,\n"
        "                      ctypes.c_int, ctypes.c_long]\n"
        "p = sys.argv[1]\n"
        "with driftscope.Writer(p) as w:\n"
        "    for i in range(16):\n"
        "        w.write(f't{i}', np.full(4096, i + 1, dtype=np.float32))\n"
        "dump = driftscope.open(p, verify=False)\n"
        "last = dump['t15']\n"
        "addr = libc.mmap(None, 65536, 3, 0x22, -1, 0)\n"
        "assert libc.sigaltstack(ctypes.byref(Stack(addr, 0, 65536)), None) == 0\n"
        "libc.munmap(ctypes.c_void_p(addr), ctypes.c_size_t(65536))\n"
        "os.truncate(p, 8192)\n"
        "print(float(np.asarray(last).sum()))\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "live.tdump")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out
    assert out.stdout.strip() == "0.0"


def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.tdump"
    os.mkfifo(fifo)
    code = ("import sys, driftscope\n"
            "try:\n    driftscope.open(sys.argv[1])\nexcept driftscope.errors.DumpIOError as e:\n"
            "    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True, text=True,
                         timeout=30)
    assert "it is a FIFO, not a regular file" in out.stdout, out
    write_one(tmp_path / "a.tdump", "x", np.ones(4, np.float32))
    policy = subprocess.run(
        [sys.executable, "-c", "import sys, driftscope\ntry:\n    driftscope.compare(sys.argv[1], "
         "sys.argv[1], policy=sys.argv[2])\nexcept driftscope.errors.Error as e:\n    print(e)\n",
         str(tmp_path / "a.tdump"), str(fifo)], capture_output=True, text=True, timeout=30)
    assert "it is a FIFO, not a regular file" in policy.stdout, policy
