"""No code runs from the working directory (issue 23 item 1, SECURITY.md "The working directory").

Every verb of the `driftscope` command that starts Python (record torch/onnx/tflite, guard with its
fork server and backend children, reference init/run/check, evidence declare/measure/verify,
compare --engine ray) is run from a folder holding hostile numpy.py, onnx.py, driftscope.py, ...
files, as a pull request's checkout or a downloaded model folder could. Each file, if imported,
appends its name to a marker file: the marker must stay absent, and the command must do its job.
A model file given as FILE.py:FUNCTION runs (that is its purpose) and may import its own
siblings, but the numpy.py beside it must not replace numpy.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("DRIFTSCOPE_BIN", ROOT / "build" / "dev" / "driftscope")).absolute()
sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))

# Third-party packages the verbs import, the package itself, and standard-library modules that
# `python -m` (runpy), argparse, json reports and subprocess use.
HOSTILE = ("numpy", "onnx", "onnxruntime", "torch", "driftscope", "tflite_runtime", "ai_edge_litert",
           "openvino", "ray", "runpy", "json", "argparse", "subprocess", "pickle", "tempfile",
           "hashlib", "sitecustomize", "usercustomize")

NET = """
import torch
import net_helpers  # a sibling module of the model file: found beside it

def make():
    torch.manual_seed(0)
    return net_helpers.Net().eval(), (torch.randn(2, 8),)
"""
NET_HELPERS = """
import torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.tanh(self.fc(x))
"""


def _plant(folder: Path, marker: Path) -> None:
    for name in HOSTILE:
        (folder / f"{name}.py").write_text(
            f"open({str(marker)!r}, 'a').write({name!r} + '\\n')\n"
            f"raise SystemExit('hostile {name}.py from the working directory ran')\n")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("torch")
    from onnx import TensorProto, helper, numpy_helper

    base = tmp_path_factory.mktemp("cwd")
    cwd, models = base / "checkout", base / "models"
    cwd.mkdir()
    models.mkdir()
    marker = base / "ran.txt"
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="/fc/MatMul"),
         helper.make_node("Tanh", ["h"], ["y"], name="/act/Tanh")],
        "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    import onnx

    onnx.save(model, str(cwd / "model.onnx"))
    np.save(cwd / "x.npy", rng.standard_normal((2, 8)).astype(np.float32))
    import tflite_models as tm

    (cwd / "model.tflite").write_bytes(tm.build_float())
    np.save(cwd / "t.npy", tm.sample_input(seed=1))
    # The model file's folder holds hostile files too, next to its legitimate sibling.
    (models / "net.py").write_text(NET)
    (models / "net_helpers.py").write_text(NET_HELPERS)
    _plant(cwd, marker)
    _plant(models, marker)
    (models / "driftscope.py").unlink()  # keep one name that is only in the working directory
    return cwd, models, marker


def _env() -> dict:
    env = dict(os.environ, DRIFTSCOPE_PYTHON=sys.executable, NO_COLOR="1")
    # This checkout's package, as the other CLI tests pass it (never the working directory).
    pkg = str(Path(__import__("driftscope").__file__).parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg, env.get("PYTHONPATH", "")) if p)
    return env


def _run(cwd: Path, marker: Path, *args: str, want=0, env=None, timeout: float = 300):
    proc = subprocess.run([str(BIN), *args], cwd=cwd, env=dict(_env(), **(env or {})),
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    ran = marker.read_text() if marker.exists() else ""
    assert not ran, f"`driftscope {' '.join(args)}` imported from the working directory: {ran!r}\n{proc.stderr[-2000:]}"
    assert proc.returncode in (want if isinstance(want, tuple) else (want,)), (f"`driftscope {' '.join(args)}` exited {proc.returncode}, "
                                     f"expected {want}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return proc


def test_record_verbs(hostile):
    cwd, models, marker = hostile
    pytest.importorskip("ai_edge_litert")
    _run(cwd, marker, "record", "onnx", "model.onnx", "--input", "x=x.npy", "-o", "onnx.tdump")
    _run(cwd, marker, "record", "tflite", "model.tflite", "--input", "input=t.npy", "-o", "tflite.tdump")
    _run(cwd, marker, "record", "torch", "--model", f"{models / 'net.py'}:make", "-o", "torch.tdump")
    for name in ("onnx", "tflite", "torch"):
        assert (cwd / f"{name}.tdump").stat().st_size > 0
    _run(cwd, marker, "record", "torch", "--help")


def test_guard_and_its_children(hostile):
    cwd, models, marker = hostile
    # The fork server and the backend children run in this working directory too.
    proc = _run(cwd, marker, "guard", "model.onnx", "--backends", "ort-fp16", "--runs", "1",
                "--json", "guard.json")
    assert "ort-fp16" in proc.stdout
    # The plain-interpreter path (no fork server) and a PyTorch entry point beside hostile files.
    _run(cwd, marker, "guard", "--model", f"{models / 'net.py'}:make", "--backends", "torch-bf16",
         "--runs", "1", env={"DRIFTSCOPE_GUARD_NO_FORK": "1"})


def test_reference_and_evidence_verbs(hostile):
    cwd, models, marker = hostile
    _run(cwd, marker, "reference", "init", "model.onnx", "-o", "model.hash.onnx")
    _run(cwd, marker, "reference", "run", "--model", f"{models / 'net.py'}:make", "-o", "refs")
    _run(cwd, marker, "record", "torch", "--model", f"{models / 'net.py'}:make", "--dtype",
         "bfloat16", "-o", "bf16.tdump")
    # Exit 0 or 1 (the verdict on bfloat16): either way the check ran.
    _run(cwd, marker, "reference", "check", "refs/float32.tdump", "bf16.tdump", "--reference64",
         "refs/float64.tdump", want=(0, 1))
    _run(cwd, marker, "evidence", "declare", "ledger.jsonl", "--id", "bf16", "--reference",
         "refs/float32.tdump", "--reference64", "refs/float64.tdump", "--design", "hostile cwd")
    _run(cwd, marker, "evidence", "measure", "ledger.jsonl", "--id", "bf16", "--candidate",
         "bf16.tdump", want=(0, 1))
    _run(cwd, marker, "evidence", "verify", "ledger.jsonl")


def test_compare_engine_ray_starts_no_working_directory_code(hostile):
    cwd, _, marker = hostile
    # A usage error inside the Python side: the interpreter started and imported the package.
    proc = subprocess.run([str(BIN), "compare", "missing_a.tdump", "missing_b.tdump", "--engine",
                           "ray"], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=300)
    assert not marker.exists(), marker.read_text()
    assert proc.returncode == 2 and "missing_a.tdump" in proc.stderr, proc.stderr[-2000:]


def test_python_children_are_started_without_the_working_directory(tmp_path):
    """The package's own children (_pyexec.module_command): sys.path[0] is never the cwd."""
    from driftscope._pyexec import module_command

    (tmp_path / "json.py").write_text("raise SystemExit('hostile json.py ran')\n")
    out = subprocess.run(module_command("json.tool", "--help"), cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "hostile" not in out.stderr, out.stderr


# ---- signals (issue 23 item 3, SECURITY.md "Signals") ---------------------------------------

SPIN_PLUGIN = '''
import os

from driftscope._guard import Backend, register_backend


class Spins(Backend):
    name, family, summary = "spins", "onnx", "test: an endless model at 100% CPU"

    def load(self, model, work, seed):
        with open(os.environ["SPIN_PIDS"], "a") as f:
            f.write(f"{os.getpid()} {os.getppid()}\\n")
        while True:
            pass


register_backend(Spins())
'''


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig,fork", [("SIGTERM", True), ("SIGTERM", False), ("SIGHUP", True),
                                      ("SIGKILL", True), ("SIGKILL", False)])
def test_a_signal_to_guard_leaves_no_process_behind(hostile, tmp_path, sig, fork):
    """SIGTERM/SIGHUP end the guard as ^C does: the fork server and the running backend child
    (an endless model) are killed and the temporary folder removed, exit 128 + signal. Even
    SIGKILL, which the guard cannot handle, leaves no child running (parent-death signal)."""
    import signal
    import time

    cwd, _, marker = hostile
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "spin_plugin.py").write_text(SPIN_PLUGIN)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    pids = tmp_path / "pids.txt"
    env = _env()
    env.update(PYTHONPATH=os.pathsep.join((str(plugins), env["PYTHONPATH"])),
               DRIFTSCOPE_GUARD_PLUGINS="spin_plugin", SPIN_PIDS=str(pids), TMPDIR=str(tmp))
    if not fork:
        env["DRIFTSCOPE_GUARD_NO_FORK"] = "1"
    guard = subprocess.Popen([str(BIN), "guard", "model.onnx", "--backends", "spins",
                              "--timeout", "600"], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (pids.exists() and pids.read_text().endswith("\n")):
            assert guard.poll() is None, guard.communicate()
            assert time.monotonic() < deadline, "the backend child never started"
            time.sleep(0.1)
        child, parent = map(int, pids.read_text().split())
        assert _alive(child)
        guard.send_signal(getattr(signal, sig))
        _, err = guard.communicate(timeout=60)
        deadline = time.monotonic() + 10
        while (_alive(child) or (fork and _alive(parent))) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), f"the backend child {child} outlived the guard ({sig})"
        if fork:
            assert parent != guard.pid and not _alive(parent), "the fork server outlived the guard"
        if sig != "SIGKILL":
            assert guard.returncode == 128 + getattr(signal, sig), (guard.returncode, err)
            assert f"interrupted by {sig}" in err and "Traceback" not in err, err
            assert not list(tmp.glob("driftscope-guard-*")), list(tmp.iterdir())
    finally:
        if guard.poll() is None:
            guard.kill()
            guard.wait()
    assert not marker.exists()
