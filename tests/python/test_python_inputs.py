"""The file rules of docs/cli.md "Conventions" in the pure-Python paths (issue 7): the one-file
reference reader and the recorders' --input loader refuse a FIFO at once instead of waiting for a
writer forever (bug 8), and a recorder never writes its dump over the model or an input it reads
(bug 4's rule: the same path, a symlink or a hard link). Each call runs in a child process with a
time limit, so a regression fails instead of hanging."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_py(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def test_reference_reader_refuses_a_fifo(tmp_path):
    os.mkfifo(tmp_path / "pipe.tdump")
    os.mkdir(tmp_path / "dir.tdump")
    code = f"""
import sys; sys.path.insert(0, {str(ROOT / 'python' / 'driftscope')!r})
import tdump_reader as t
for p in ('pipe.tdump', 'dir.tdump'):
    try:
        t.read(p)
    except t.TdumpError as e:
        print(e.code, e)
"""
    r = run_py(code, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "io_error io_error at offset 0: cannot read 'pipe.tdump': it is a FIFO, not a regular file",
        "io_error io_error at offset 0: cannot read 'dir.tdump': it is a directory, not a regular file",
    ]


def test_recorder_inputs_refuse_a_fifo(tmp_path):
    pytest.importorskip("onnxruntime")
    os.mkfifo(tmp_path / "x.npy")
    code = """
from driftscope.onnxruntime import load_cli_inputs
try:
    load_cli_inputs(['x=x.npy'])
except Exception as e:
    print(type(e).__name__, e)
"""
    r = run_py(code, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ("InputMismatchError --input 'x=x.npy': cannot read 'x.npy' as "
                                ".npy/.npz (it is a FIFO, not a regular file)")


def relu_model(path):
    """y = relu(x) over two floats: a model the ONNX recorder and guard both run."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def record(args, cwd):
    return subprocess.run([sys.executable, "-m", "driftscope", "record", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("how", ["same", "symlink", "hardlink", "input"])
def test_onnx_recorder_never_writes_over_what_it_reads(tmp_path, how):
    import numpy as np
    relu_model(tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.array([1, -1], np.float32))
    out = {"same": "m.onnx", "symlink": "link.tdump", "hardlink": "hard.tdump", "input": "x.npy"}[how]
    if how == "symlink":
        os.symlink("m.onnx", tmp_path / "link.tdump")
    if how == "hardlink":
        os.link(tmp_path / "m.onnx", tmp_path / "hard.tdump")
    before = {p: (tmp_path / p).read_bytes() for p in ("m.onnx", "x.npy")}
    r = record(["onnx", "m.onnx", "--input", "x=x.npy", "-o", out], tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr == (f"driftscope record onnx: error: output {out} is the input file; choose "
                        f"another name (driftscope never modifies its inputs)\n")
    assert {p: (tmp_path / p).read_bytes() for p in before} == before
    ok = record(["onnx", "m.onnx", "--input", "x=x.npy", "-o", "run.tdump"], tmp_path)
    assert ok.returncode == 0, ok.stderr


def test_torch_recorder_never_writes_over_its_entry_point(tmp_path):
    pytest.importorskip("torch")
    src = "import torch\ndef make():\n    return torch.nn.ReLU(), torch.ones(2)\n"
    (tmp_path / "model.py").write_text(src)
    r = record(["torch", "--model", "model.py:make", "-o", "model.py"], tmp_path)
    assert r.returncode == 2, r.stderr
    assert "output model.py is the input file" in r.stderr
    assert (tmp_path / "model.py").read_text() == src


def test_guard_report_never_replaces_the_model(tmp_path):
    relu_model(tmp_path / "m.onnx")
    before = (tmp_path / "m.onnx").read_bytes()
    os.link(tmp_path / "m.onnx", tmp_path / "hard.json")
    for flag, out in (("--json", "m.onnx"), ("--markdown", "hard.json")):
        r = subprocess.run([sys.executable, "-m", "driftscope", "guard", "m.onnx", "--backends",
                            "ort", flag, out], cwd=tmp_path, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 2, r.stderr
        assert r.stderr == (f"driftscope guard: error: {flag} {out} is the input file m.onnx "
                            f"(the model); choose another name (driftscope never modifies its "
                            f"inputs)\n")
        assert (tmp_path / "m.onnx").read_bytes() == before
    # A report to a new file is written whole (renamed into place: no temporary file is left).
    r = subprocess.run([sys.executable, "-m", "driftscope", "guard", "m.onnx", "--backends", "ort",
                        "--json", "g.json"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode in (0, 1), r.stderr
    assert (tmp_path / "g.json").read_text().startswith("{")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.json", "hard.json", "m.onnx"]
