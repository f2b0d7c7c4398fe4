"""guard --repro DIR (issue 26 item 4): a repro bundle per failing ONNX backend, cut around the
origin the probe named, with the guard's reference and the probe's sample, written to DIR/BACKEND
by driftscope repro's search in a child process of its own. The row gains "repro" {dir,
reproduces, nodes, error} and the findings one sentence; the verdict is the verdicts'. Real
runtimes: ONNX Runtime (ort-fp16-exact), PyTorch for the not-ONNX row."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pkgenv import env_with_package  # noqa: E402

import driftscope
from driftscope import _guard as G

pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[2]
PY = os.environ.get("DRIFTSCOPE_PYTHON", sys.executable)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_guard_replay import _sq_model  # noqa: E402 - y = (x * x) * 0.001 + x


def _env():
    return env_with_package()


def _guard(cwd: Path, model: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "driftscope", "guard", model, "--fallback", "never", *args],
                          cwd=cwd, capture_output=True, text=True, env=_env(), timeout=600)


def _schema(data: dict) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "docs" / "guard-schema.json").read_text())
    jsonschema.validate(data, schema)


@pytest.fixture()
def sq(tmp_path: Path) -> Path:
    _sq_model(tmp_path / "sq.onnx")
    # 255.95 rounds to 256 in float16 and 256 * 256 overflows it; ort's float32 holds 65510.4.
    np.save(tmp_path / "edge.npy", np.full((1, 8), 255.95, np.float32))
    return tmp_path


def test_bundle_per_failing_onnx_backend(sq):
    run = _guard(sq, "sq.onnx", "--backends", "ort-fp16-exact,ort-int8", "--input",
                 "x=edge.npy", "--replay", "never", "--repro", "bundles", "--json", "r.json")
    assert run.returncode == 3, run.stdout + run.stderr  # the verdict's own exit status
    data = json.loads((sq / "r.json").read_text())
    _schema(data)
    rows = {b["name"]: b for b in data["backends"]}
    # The passing row and the reference get none; the failing one its bundle.
    assert rows["ort"]["repro"] is None and rows["ort-int8"]["repro"] is None
    assert rows["ort-fp16-exact"]["repro"] == {
        "dir": os.path.join("bundles", "ort-fp16-exact"), "reproduces": True, "nodes": 1,
        "error": None, "at": "square"}
    assert sorted(os.listdir(sq / "bundles")) == ["ort-fp16-exact"]
    folder = sq / "bundles" / "ort-fp16-exact"
    assert sorted(os.listdir(folder)) == sorted(
        ("model.onnx", "inputs.npz", "expected.npz", "run.py", "README.md", "SHA256SUMS"))
    # The bundle's inputs are the guard's sample (the reference's value at x), and run.py alone
    # (no driftscope on its path) reproduces on the candidate and not on float32.
    with np.load(folder / "inputs.npz") as z:
        assert np.array_equal(z["x"], np.load(sq / "edge.npy"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for extra, code in (((), 1), (("--backend", "float32"), 0)):
        p = subprocess.run([PY, "run.py", *extra], cwd=folder, env=env, capture_output=True,
                           text=True, timeout=300)
        assert p.returncode == code, p.stdout + p.stderr
    line = ("ort-fp16-exact: repro bundle of 1 node(s) around square in "
            f"{os.path.join('bundles', 'ort-fp16-exact')}: it reproduces (run.py exits 1).")
    assert line in data["findings"] and line in run.stdout


def test_non_empty_dir_and_no_probe_refused_up_front(sq):
    (sq / "full").mkdir()
    (sq / "full" / "keep.txt").write_text("mine")
    before = (sq / "sq.onnx").read_bytes()
    for args, said in (
            (("--repro", "full"), "--repro full: the folder is not empty"),
            (("--repro", "sq.onnx"), "--repro sq.onnx: exists and is not a folder"),
            (("--repro", "nowhere/b"), "does not exist"),
            (("--repro", "new", "--probe", "never"), "--repro needs the probe")):
        run = _guard(sq, "sq.onnx", "--backends", "ort-fp16-exact", "--input", "x=edge.npy",
                     *args)
        assert run.returncode == 2, (args, run.stdout, run.stderr)
        assert said in run.stderr and "Traceback" not in run.stderr
        assert run.stderr.count("\n") == 1 and run.stdout == ""
    assert (sq / "full" / "keep.txt").read_text() == "mine"
    assert (sq / "sq.onnx").read_bytes() == before and not (sq / "new").exists()


def test_torch_model_says_onnx_only(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "sqt.py").write_text(
        "import torch\n\n\nclass Sq(torch.nn.Module):\n"
        "    def forward(self, x):\n        return x * x * 0.001 + x\n\n\n"
        "def build():\n    return Sq(), (torch.full((1, 8), 255.95),)\n")
    run = _guard(tmp_path, "sqt.py:build", "--backends", "torch-fp16", "--replay", "never",
                 "--repro", "bundles", "--json", "r.json")
    assert run.returncode == 3, run.stdout + run.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    _schema(data)
    row = data["backends"][1]
    assert row["name"] == "torch-fp16" and row["status"] == "NUMERICAL_INSTABILITY"
    assert row["repro"] == {"dir": None, "reproduces": None, "nodes": None,
                            "error": "repro bundles are written for ONNX models only"}
    assert ("torch-fp16: no repro bundle: repro bundles are written for ONNX models only."
            in data["findings"])
    assert not (tmp_path / "bundles").exists()  # nothing written, not even an empty DIR


def test_a_crashing_repro_child_is_one_error_and_a_backend_run_py_cannot_build(sq, monkeypatch):
    import driftscope._pyexec as X

    # The repro child dies by a signal (a runtime that crashes while capturing): the row says
    # so; the guard goes on.
    real_run = X.run_module

    def crashing(module, args, env, timeout=None):  # only the repro child crashes
        if module != "driftscope._guard._reproing":
            return real_run(module, args, env, timeout)
        with monkeypatch.context() as m:
            m.setattr(X, "module_command", lambda *a: [
                sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"])
            return real_run(module, args, env, timeout)

    monkeypatch.setattr(X, "run_module", crashing)
    x = np.load(sq / "edge.npy")
    r = driftscope.guard(str(sq / "sq.onnx"), backends=["ort-fp16-exact"], inputs={"x": x},
                         runs=1, fallback="never", replay="never", repro=str(sq / "b"))
    assert r.exit_code == 3
    assert r.backends[1].repro == {"dir": None, "reproduces": None, "nodes": None,
                                   "error": "the repro child was killed by SIGSEGV",
                                   "at": "square"}
    # A failing backend whose build run.py cannot rebuild with the runtime's API.
    P = G._probe
    ctx = G._investigate.Context(model="m.onnx", family="onnx", reference="ort",
                                 samples=[{}], ref_outputs=[{}], seed=0,
                                 thresholds=G._metrics.Thresholds(), policy=None, work="",
                                 keep_files=False, timeout=1.0, runs=1, runner=None)

    class Row:
        name, reference, status = "ort-qdq", False, "PRECISION_DEGRADATION"
        probe = P.ProbeResult(P.RECORDED, "t", origin=P.ProbeFinding("mm", "MatMul", "mm"))
        repro = None

    from driftscope._guard import _reproing

    _reproing.write_bundles([Row], ctx, str(sq / "c"))
    assert Row.repro["dir"] is None
    assert Row.repro["error"].startswith("the backend ort-qdq is not one run.py can rebuild")
    assert not (sq / "c").exists()
