"""Hostile --input / --data files and models for record onnx, guard and repro: every one is a
one-line error and exit 2, never a traceback, and a compression bomb is refused from its .npy
header before its data is decompressed (peak memory measured on the child).

The files: a .npz whose member fails its CRC, is truncated, has a truncated header, holds Python
objects or declares 16 GB it does not hold; a .npz of 1.25 GiB of deflated zeros (5 MB); models
ONNX Runtime cannot load (a cycle, an unknown op, an initializer whose dims do not fit); .npy
arrays of the wrong dtype or shape, or for an input the model does not have; a PyTorch entry
point that returns ("abc", 5)."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pkgenv import env_with_package  # noqa: E402

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from numpy.lib import format as npf  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

PY = os.environ.get("DRIFTSCOPE_PYTHON", sys.executable)
BOMB_BYTES = 5 << 28        # 1.25 GiB of float32 zeros: over the 1 GiB input budget
PEAK_LIMIT_KB = 600 << 10   # the refusal must come before the data is decompressed


def _mlp(fix=None):
    """x float32 [2, 4] -> Gemm (/l1/Gemm) -> Relu -> y [2, 3]; `fix` breaks the model."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(np.zeros(3, np.float32), "b")
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["h"], name="/l1/Gemm"),
             helper.make_node("Relu", ["h"], ["y"], name="/act/Relu")]
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [w, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    if fix is not None:
        fix(m)
    return m


def _cycle(m):
    m.graph.node[0].input[0] = m.graph.node[0].output[0]


def _badop(m):
    m.graph.node[0].op_type = "NoSuchOp"


def _badinit(m):
    init = m.graph.initializer[0]
    init.CopyFrom(numpy_helper.from_array(np.zeros((4, 3, 1), np.float32), "w"))


def _npy_bytes(a):
    b = io.BytesIO()
    np.save(b, a, allow_pickle=True)
    return b.getvalue()


@pytest.fixture(scope="module")
def fx():
    """The model and the hostile files, made once in a folder of their own."""
    with tempfile.TemporaryDirectory(prefix="driftscope-hostile-") as d:
        d = Path(d)
        onnx.save(_mlp(), d / "mlp.onnx")
        for name, fix in (("cycle", _cycle), ("badop", _badop), ("badinit", _badinit)):
            (d / f"{name}.onnx").write_bytes(_mlp(fix).SerializeToString())
        x = np.ones((2, 4), np.float32)
        np.save(d / "x.npy", x)
        np.save(d / "xint.npy", x.astype(np.int64))
        np.save(d / "xwrongshape.npy", np.ones((3, 7), np.float32))
        good = _npy_bytes(x)
        with zipfile.ZipFile(d / "crc.npz", "w") as z:
            z.writestr("x.npy", good)
        raw = bytearray((d / "crc.npz").read_bytes())
        at = raw.find(b"\x00\x00\x80\x3f")
        raw[at + 2] ^= 0xFF
        (d / "crc.npz").write_bytes(bytes(raw))
        with zipfile.ZipFile(d / "short.npz", "w") as z:
            z.writestr("x.npy", good[:-24])
        with zipfile.ZipFile(d / "badhdr.npz", "w") as z:
            z.writestr("x.npy", good[:40])
        with zipfile.ZipFile(d / "obj.npz", "w") as z:
            z.writestr("x.npy", _npy_bytes(np.array([1, "a"], dtype=object)))
        with zipfile.ZipFile(d / "huge16g.npz", "w") as z:
            h = io.BytesIO()
            npf.write_array_header_1_0(h, {"descr": "<f4", "fortran_order": False,
                                           "shape": (4_000_000_000,)})
            z.writestr("x.npy", h.getvalue() + bytes(32))
        # The bomb, streamed: this process never holds it.
        with zipfile.ZipFile(d / "bomb.npz", "w", compression=zipfile.ZIP_DEFLATED,
                             compresslevel=1) as z:
            with z.open("x.npy", "w", force_zip64=True) as f:
                npf.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False,
                                               "shape": (BOMB_BYTES // 4,)})
                chunk = bytes(1 << 24)
                for _ in range(BOMB_BYTES // len(chunk)):
                    f.write(chunk)
        (d / "mlp.py").write_text("def nonmodel2():\n    return ('abc', 5)\n")
        yield d


# Runs a command and prints its peak RSS. A child forked from a large process (a pytest worker
# that has run many tests) starts with the parent's pages in its RSS until it execs, so its
# ru_maxrss would be the worker's size: the command is forked from this small fresh interpreter
# instead, and RUSAGE_CHILDREN counts it (and whatever it runs) alone.
_PEAK = ("import resource, subprocess, sys\n"
         "p = subprocess.run(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)\n"
         "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
         "sys.exit(p.returncode)\n")


def drift(cwd, *args):
    """`python -m driftscope ARGS` in `cwd`: (exit code, stderr, the command's peak RSS in KiB)."""
    p = subprocess.run([PY, "-c", _PEAK, PY, "-m", "driftscope", *map(str, args)], cwd=cwd,
                       capture_output=True, stdin=subprocess.DEVNULL, env=env_with_package())
    return p.returncode, p.stderr.decode("utf-8", "replace"), int(p.stdout.split()[-1])


def one_line_error(rc, stderr, *want):
    assert "Traceback" not in stderr, stderr
    assert rc == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    for w in want:
        assert w in lines[0], stderr


BAD_NPZ = [("crc", "Bad CRC-32"), ("short", "truncated"), ("badhdr", "EOF"),
           ("obj", "Python objects"), ("huge16g", "truncated")]


@pytest.mark.parametrize("name,why", BAD_NPZ)
def test_record_onnx_bad_npz_is_one_line_naming_file_and_member(fx, tmp_path, name, why):
    rc, err, _ = drift(fx, "record", "onnx", "mlp.onnx", "--input", f"{name}.npz",
                       "-o", tmp_path / "r.tdump")
    one_line_error(rc, err, f"'{name}.npz' member 'x.npy'", why)
    assert not (tmp_path / "r.tdump").exists()


@pytest.mark.parametrize("name,why", [("crc", "Bad CRC-32"), ("short", "truncated")])
def test_guard_input_bad_npz_names_the_file(fx, name, why):
    rc, err, _ = drift(fx, "guard", "mlp.onnx", "--no-progress", "--input", f"{name}.npz")
    one_line_error(rc, err, f"'{name}.npz' member 'x.npy'", why)


def test_guard_data_bad_npz_names_the_member(fx):
    rc, err, _ = drift(fx, "guard", "mlp.onnx", "--no-progress", "--data", "crc.npz")
    one_line_error(rc, err, "--data crc.npz: member 'x.npy'", "Bad CRC-32")


def test_repro_bad_npz_is_one_line(fx, tmp_path):
    rc, err, _ = drift(fx, "repro", "mlp.onnx", "--candidate", "ort-fp16", "--at", "/l1/Gemm",
                       "-o", tmp_path / "b", "--input", "crc.npz")
    one_line_error(rc, err, "'crc.npz' member 'x.npy'", "Bad CRC-32")


@pytest.mark.parametrize("cmd", [
    ("record", "onnx", "mlp.onnx", "--input", "bomb.npz", "-o", "{tmp}/r.tdump"),
    ("guard", "mlp.onnx", "--no-progress", "--input", "bomb.npz"),
    ("guard", "mlp.onnx", "--no-progress", "--data", "bomb.npz"),
    ("repro", "mlp.onnx", "--candidate", "ort-fp16", "--at", "/l1/Gemm", "-o", "{tmp}/b",
     "--input", "bomb.npz"),
], ids=["record-onnx", "guard-input", "guard-data", "repro"])
def test_npz_bomb_refused_from_its_header(fx, tmp_path, cmd):
    rc, err, peak_kb = drift(fx, *(a.format(tmp=tmp_path) for a in cmd))
    assert peak_kb < PEAK_LIMIT_KB, f"peak RSS {peak_kb} KiB: {err}"
    one_line_error(rc, err, "bomb.npz", "member 'x.npy'", "declares float32 [335544320]")


@pytest.mark.parametrize("model", ["cycle", "badop", "badinit"])
def test_repro_model_onnxruntime_cannot_load(fx, tmp_path, model):
    rc, err, _ = drift(fx, "repro", f"{model}.onnx", "--candidate", "ort-fp16", "--at",
                       "/l1/Gemm", "-o", tmp_path / "b")
    one_line_error(rc, err, f"ONNX Runtime cannot load '{model}.onnx'")
    assert not err.split("error: ", 1)[1].startswith(("'", '"')), err  # not a repr
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("spec,why", [("x=xint.npy", "int64 [2, 4]"),
                                      ("x=xwrongshape.npy", "float32 [3, 7]"),
                                      ("nosuch=x.npy", "no input of that name")])
def test_repro_input_that_does_not_fit(fx, tmp_path, spec, why):
    rc, err, _ = drift(fx, "repro", "mlp.onnx", "--candidate", "ort-fp16", "--at", "/l1/Gemm",
                       "-o", tmp_path / "b", "--input", spec)
    one_line_error(rc, err, why)


def test_repro_torch_entry_point_returning_no_model(fx, tmp_path):
    pytest.importorskip("torch")
    rc, err, _ = drift(fx, "repro", "--model", "mlp.py:nonmodel2", "--candidate", "torch-bf16",
                       "--at", "l1", "-o", tmp_path / "b")
    one_line_error(rc, err, "--model mlp.py:nonmodel2")


def test_good_inputs_still_load(fx):
    """The header-first loader reads what np.load reads: .npy, stored and deflated .npz."""
    from driftscope.onnxruntime import load_cli_inputs

    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    d = Path(tempfile.mkdtemp(dir=fx))
    np.save(d / "a.npy", x)
    np.savez(d / "s.npz", x=x, y=x.T.copy(order="F"))
    np.savez_compressed(d / "c.npz", x=x)
    got = load_cli_inputs([f"x={d / 'a.npy'}", str(d / "s.npz"), f"x={d / 'c.npz'}"])
    assert sorted(got) == ["x", "y"]
    assert np.array_equal(got["x"], x) and np.array_equal(got["y"], x.T)
