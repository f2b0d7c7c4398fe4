"""Import and export against the real `safetensors` package (PyPI) and numpy, through the Python
API (driftscope.import_file / export_file) and the `driftscope` command.

Files written by safetensors.numpy and safetensors.torch (every dtype they have that TDUMP has,
bf16 and both fp8 variants included) import with the same values and metadata; files driftscope
exports load in safetensors' safe_open with the same keys, dtypes, values and __metadata__.
Hostile files stay hand-crafted in test_cli.py.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest
import safetensors
import safetensors.numpy
import safetensors.torch
import torch
from safetensors import safe_open

import driftscope

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("DRIFTSCOPE_BIN", ROOT / "build" / "dev" / "driftscope")).absolute()

NUMPY_ARRAYS = {
    "f64": np.array([1.5, -2.25, 1e300], np.float64),
    "f32": np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5,
    "f16": np.array([[0.1, -65504.0, np.inf]], np.float16),
    "i8": np.array([-128, 0, 127], np.int8),
    "i16": np.array([-32768, 7], np.int16),
    "i32": np.array([[-(2**31)], [2**31 - 1]], np.int32),
    "i64": np.array([-(2**63), 2**63 - 1], np.int64),
    "u8": np.array([0, 255], np.uint8),
    "u16": np.array([65535], np.uint16),
    "u32": np.array([2**32 - 1, 1], np.uint32),
    "u64": np.array([2**64 - 1], np.uint64),
    "bool": np.array([True, False, True]),
    "scalar": np.array(3.25, np.float32),
    "empty": np.zeros((0, 3), np.float32),
}


def cli(args, cwd):
    return subprocess.run([str(BIN), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_numpy_saved_file_imports_every_dtype(tmp_path):
    src = tmp_path / "np.safetensors"
    safetensors.numpy.save_file(NUMPY_ARRAYS, str(src), metadata={"format": "np", "k": "v"})
    r = driftscope.import_file(src, tmp_path / "np.tdump", meta={"backend": "cpu"})
    assert (r.format, r.written, r.filtered) == ("safetensors", len(NUMPY_ARRAYS), 0)
    assert r.payload_bytes == sum(a.nbytes for a in NUMPY_ARRAYS.values())
    with driftscope.open(tmp_path / "np.tdump") as d:
        assert sorted(d.names()) == sorted(NUMPY_ARRAYS)
        md = d.metadata
        assert (md["format"], md["k"], md["backend"]) == ("np", "v", "cpu")
        assert (md["source"], md["source_format"]) == ("np.safetensors", "safetensors")
        for name, a in NUMPY_ARRAYS.items():
            got = d[name]
            assert got.dtype == a.dtype and got.shape == a.shape, name
            assert np.array_equal(got, a), name
    # The command reads the same file the same way.
    p = cli(["import", "np.safetensors", "cli.tdump", "-q", "--salt", "1"], tmp_path)
    assert p.returncode == 0, p.stderr
    with driftscope.open(tmp_path / "cli.tdump") as d:
        assert np.array_equal(d["u64"], NUMPY_ARRAYS["u64"])


TORCH_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn,
                torch.float8_e5m2, torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64,
                torch.bool, torch.float64, torch.uint16, torch.uint32, torch.uint64]


def torch_tensors():
    base = torch.tensor([[0.5, -1.75, 3.0], [0.0, 2.0, -0.125]])
    out = {}
    for dt in TORCH_DTYPES:
        if dt == torch.bool:
            t = base > 0
        elif dt.is_floating_point:
            t = base.to(dt)
        elif dt in (torch.uint8, torch.uint16, torch.uint32, torch.uint64):
            t = base.abs().to(torch.int64).to(dt)
        else:
            t = base.to(torch.int64).to(dt)
        out["layers.0." + str(dt).removeprefix("torch.")] = t
    return out


def test_torch_saved_file_imports_bf16_and_fp8_and_round_trips(tmp_path):
    tensors = torch_tensors()
    src = tmp_path / "pt.safetensors"
    safetensors.torch.save_file(tensors, str(src), metadata={"format": "pt"})
    r = driftscope.import_file(src, tmp_path / "pt.tdump", salt=3)
    assert r.written == len(tensors)
    with driftscope.open(tmp_path / "pt.tdump") as d:
        for name, t in tensors.items():
            rec = d.record(name)
            assert tuple(rec.shape) == tuple(t.shape), name
            if t.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
                assert rec.dtype == {torch.bfloat16: "bf16", torch.float8_e4m3fn: "f8e4m3fn",
                                     torch.float8_e5m2: "f8e5m2"}[t.dtype]
                assert np.array_equal(d[name], t.float().numpy()), name  # decoded exactly
            else:
                assert np.array_equal(d[name], t.numpy()), name
    # Exported back, the real package reads the very tensors it wrote, bit for bit.
    e = driftscope.export_file(tmp_path / "pt.tdump", tmp_path / "back.safetensors")
    assert (e.format, e.written, e.widened) == ("safetensors", len(tensors), {})
    back = safetensors.torch.load_file(str(tmp_path / "back.safetensors"))
    assert set(back) == set(tensors)
    for name, t in tensors.items():
        assert back[name].dtype == t.dtype, name
        assert torch.equal(back[name].view(torch.uint8), t.view(torch.uint8)) if t.dtype != torch.bool \
            else torch.equal(back[name], t), name
    with safe_open(str(tmp_path / "back.safetensors"), framework="pt") as f:
        md = f.metadata()
    assert md["format"] == "pt" and md["source_format"] == "safetensors"


def test_dtypes_tdump_lacks_are_refused_by_name(tmp_path):
    tensors = {"ok": torch.zeros(2)}
    want = []
    if hasattr(torch, "float8_e8m0fnu"):
        tensors["scale"] = torch.ones(2).to(torch.float8_e8m0fnu)
        want.append("F8_E8M0")
    tensors["z"] = torch.zeros(2, dtype=torch.complex64)
    want.append("C64")
    for name in list(tensors)[1:]:
        src = tmp_path / f"{name}.safetensors"
        safetensors.torch.save_file({"ok": tensors["ok"], name: tensors[name]}, str(src))
        p = cli(["import", src.name, "out.tdump"], tmp_path)
        assert p.returncode == 2, p.stderr
        code = want[list(tensors).index(name) - 1]
        assert p.stderr.startswith(f"driftscope: error: {src.name}: bad_safetensors: tensor "
                                   f"'{name}': dtype '{code}' is not supported by TDUMP"), p.stderr
        assert not (tmp_path / "out.tdump").exists()
        with pytest.raises(driftscope.ImportFormatError):
            driftscope.import_file(src, tmp_path / "out.tdump")
    assert sorted(os.listdir(tmp_path)) == sorted(f"{n}.safetensors" for n in list(tensors)[1:])


def write_mixed_dump(path):
    with driftscope.Writer(path, meta={"framework": "numpy", "note": 'quote " and \\ and \u00e9'}) as w:
        w.write("embed", np.arange(6, dtype=np.float32).reshape(2, 3))
        w.write("embed", np.arange(4, dtype=np.int64), role="input")
        w.write("block", np.ones(3, np.float16))
        w.write("block", np.zeros(3, np.float16))  # occurrence 1
        w.write('odd "name"\\ \u00e9\t', np.array([True, False]))
        w.write("q", np.array([0, 10, 20], np.uint8),
                encoding={"kind": "affine_tensor", "scale": 0.5, "zero_point": 10})


EXPORT_KEYS = ["embed", "embed[input:0]", "block", "block@1", 'odd "name"\\ \u00e9\t', "q"]


def test_exported_safetensors_load_in_safe_open(tmp_path):
    write_mixed_dump(tmp_path / "m.tdump")
    e = driftscope.export_file(tmp_path / "m.tdump", tmp_path / "m.safetensors")
    assert (e.written, e.dequantized, e.warnings) == (6, 1, [])
    with driftscope.open(tmp_path / "m.tdump") as d:
        meta = d.metadata
        values = {k: d.get(r.name, r.occurrence, r.role, r.role_index)
                  for k, r in zip(EXPORT_KEYS, d)}
    with safe_open(str(tmp_path / "m.safetensors"), framework="np") as f:
        assert sorted(f.keys()) == sorted(EXPORT_KEYS)
        assert f.metadata() == meta
        for k in EXPORT_KEYS:
            got = f.get_tensor(k)
            if k == "q":  # dequantized: 0.5 * (q - 10)
                assert got.dtype == np.float32 and np.array_equal(got, [-5, 0, 5])
            else:
                assert got.dtype == values[k].dtype and np.array_equal(got, values[k]), k
    # --raw-quantized keeps the codes; npz gets the same keys in execution order.
    driftscope.export_file(tmp_path / "m.tdump", tmp_path / "raw.safetensors", raw_quantized=True)
    assert safetensors.numpy.load_file(str(tmp_path / "raw.safetensors"))["q"].dtype == np.uint8
    driftscope.export_file(tmp_path / "m.tdump", tmp_path / "m.npz", compress=True)
    assert list(np.load(tmp_path / "m.npz").keys()) == EXPORT_KEYS


def test_many_keys_import_from_the_real_package(tmp_path):
    """A checkpoint-sized key count (not timed: bench/bench_interop.cpp prints the scaling)."""
    tensors = {f"model.layers.{i // 8}.w{i % 8}": np.full(2, i, np.float32) for i in range(20000)}
    safetensors.numpy.save_file(tensors, str(tmp_path / "big.safetensors"))
    r = driftscope.import_file(tmp_path / "big.safetensors", tmp_path / "big.tdump")
    assert r.written == 20000
    with driftscope.open(tmp_path / "big.tdump") as d:
        assert d["model.layers.2499.w7"][0] == 19999


def test_python_api_errors(tmp_path):
    # A FIFO is refused at once (a thread would stay blocked in open() otherwise).
    os.mkfifo(tmp_path / "pipe.npz")
    box = {}
    t = threading.Thread(target=lambda: box.update(
        err=pytest.raises(driftscope.DumpIOError, driftscope.import_file,
                          tmp_path / "pipe.npz", tmp_path / "o.tdump")), daemon=True)
    t.start()
    t.join(10)
    if t.is_alive():
        os.close(os.open(tmp_path / "pipe.npz", os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("import_file blocked on a FIFO")
    assert "not a regular file" in str(box["err"].value)

    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04" + b"\0" * 40)
    with pytest.raises(driftscope.ImportFormatError) as ei:
        driftscope.import_file(tmp_path / "bad.npz", tmp_path / "o.tdump")
    assert ei.value.code_name == "bad_npz"
    with pytest.raises(driftscope.InvalidArgumentError):
        driftscope.import_file(tmp_path / "bad.npz", tmp_path / "o.tdump", format="zip")

    with driftscope.Writer(tmp_path / "nul.tdump") as w:
        w.write("a\0b", np.zeros(1, np.float32))
    with pytest.raises(driftscope.UnsupportedError) as eu:
        driftscope.export_file(tmp_path / "nul.tdump", tmp_path / "nul.npz")
    assert "holds a NUL byte" in str(eu.value)
    driftscope.export_file(tmp_path / "nul.tdump", tmp_path / "nul.safetensors")
    assert list(safetensors.numpy.load_file(str(tmp_path / "nul.safetensors"))) == ["a\0b"]
    assert sorted(os.listdir(tmp_path)) == ["bad.npz", "nul.safetensors", "nul.tdump", "pipe.npz"]
