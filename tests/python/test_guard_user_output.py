"""What the user's code prints or raises never corrupts the guard's report (issue 33 items 3, 7).

- A runtime's error: the JSON keeps the whole message; the text shows the line that states the
  cause (_report.reason_line), checked on messages the real runtimes raise here: TorchScript's
  interpreter, Python tracebacks, ONNX Runtime and OpenVINO.
- A PyTorch entry point's arguments that are not tensors (sr=16000) are in the inputs line and
  the JSON report.
- What build() prints (print(), os.write(1, ...), C's printf) goes to stderr: `--json -` stays
  JSON and the verdict stays the first line of the text report, with the fork server and with
  plain interpreters.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import traceback
from pathlib import Path

import numpy as np
import pytest

import driftscope
from driftscope._guard import _messages
from driftscope._guard._report import reason_line

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("DRIFTSCOPE_BIN", ROOT / "build" / "dev" / "driftscope")).absolute()

CAUSE = "expected scalar type Float but found BFloat16"

# A ScriptModule whose bfloat16 run fails in the TorchScript interpreter (a float32 tensor made
# inside forward meets the bfloat16 activations), whose forward takes sr as a plain int, and
# whose build() prints in the three ways user code does.
ENTRY = '''
import ctypes
import os
import sys

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, sr: int = 16000):
        y = self.lin(x)
        w = torch.ones(1, 4, 4)
        return torch.bmm(w, y.unsqueeze(0).transpose(1, 2)) * (sr / 16000.0)


def build():
    print("USER-PRINT from build()")
    sys.stdout.flush()
    os.write(1, b"USER-FD1 from build()\\n")
    ctypes.CDLL(None).printf(b"USER-PRINTF from build()\\n")  # held in C's stdio buffer
    return torch.jit.script(Net()), {"x": torch.randn(1, 4), "sr": 16000}


def leaves():
    sys.exit(0)
'''


def cli(*args, env=None):
    if not BIN.exists():
        pytest.skip(f"driftscope binary not built: {BIN}")
    full_env = dict(os.environ, DRIFTSCOPE_PYTHON=sys.executable, NO_COLOR="1")
    full_env.update(env or {})
    here = str(Path(driftscope.__file__).parents[1])
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in [here, full_env.get("PYTHONPATH", "")]
                                             if p)
    return subprocess.run([str(BIN), "guard", *map(str, args), "--probe", "never",
                           "--fallback", "never", "--runs", "1", "--no-progress"],
                          env=full_env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The entry point through the command twice: `--json -` with the fork server, the text
    report with one plain interpreter per backend."""
    pytest.importorskip("torch")
    d = tmp_path_factory.mktemp("user_output")
    (d / "scripted.py").write_text(ENTRY)
    spec = f"{d / 'scripted.py'}:build"
    as_json = cli("--model", spec, "--backends", "torch-bf16", "--json", "-")
    as_text = cli("--model", spec, "--backends", "torch-bf16",
                  env={"DRIFTSCOPE_GUARD_NO_FORK": "1"})
    return d, as_json, as_text


# -- item 7: the user's output ---------------------------------------------------------------

@pytest.mark.parametrize("which", ["json", "text"])
def test_what_build_prints_goes_to_stderr_never_into_the_report(runs, which):
    _, as_json, as_text = runs
    proc = as_json if which == "json" else as_text
    assert proc.returncode == 1, proc.stderr  # degraded: torch-bf16 is a runtime error
    assert "USER-" not in proc.stdout
    # The parent's build() (the signature step) printed; its output is on stderr, whole.
    for tag in ("USER-PRINT", "USER-FD1", "USER-PRINTF"):
        assert f"{tag} from build()" in proc.stderr, proc.stderr
    if which == "json":
        data = json.loads(proc.stdout)
        assert data["verdict"] == "degraded" and data["exit_code"] == 1
    else:
        assert proc.stdout.splitlines()[0].startswith("DEGRADED: torch-bf16 RUNTIME_ERROR")


def test_a_build_that_calls_sys_exit_is_one_error_line_and_exit_2(runs):
    d, _, _ = runs
    proc = cli("--model", f"{d / 'scripted.py'}:leaves", "--backends", "torch-bf16",
               "--json", "-")
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    # driftscope._entry names it as the user wrote it (sys.exit, not SystemExit)
    assert len(lines) == 1 and "called sys.exit(" in lines[0] and "leaves" in lines[0], lines


def test_the_fork_server_protocol_survives_a_preload_that_prints(tmp_path):
    """A preloaded module (a plugin backend's runtime) that prints at import, through
    sys.stdout and descriptor 1: the server still answers (no fall back to plain
    interpreters), and the job's result comes back."""
    import pickle

    from driftscope._guard._forker import Forker
    from driftscope._guard._job import Job
    from driftscope._guard._run import _child_env

    (tmp_path / "chatty_runtime.py").write_text(
        "import os\nprint('chatty at import')\nos.write(1, b'chatty fd 1\\n')\n")
    env = _child_env()
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    job, result = tmp_path / "job.pkl", tmp_path / "result.pkl"
    job.write_bytes(pickle.dumps(Job(backend="no-such-backend", model="m.onnx", samples=[],
                                     runs=1, seed=0, work=str(tmp_path))))
    forker = Forker(env, ["chatty_runtime"])
    try:
        ran = forker.run(str(job), str(result), str(tmp_path / "stderr.txt"), 120.0)
    finally:
        forker.close()
    assert ran is not None, "the server's answer was lost"
    assert ran[0] == 0 and not ran[2], ran
    assert "no-such-backend" in pickle.loads(result.read_bytes())["error"]


# -- item 3: errors and arguments ------------------------------------------------------------

def test_torchscript_error_text_states_the_cause_json_keeps_it_whole(runs):
    _, as_json, as_text = runs
    row = next(b for b in json.loads(as_json.stdout)["backends"] if b["name"] == "torch-bf16")
    assert row["status"] == "RUNTIME_ERROR"
    whole = row["error"]
    assert "The following operation failed in the TorchScript interpreter." in whole
    assert "<--- HERE" in whole and whole.rstrip().endswith(CAUSE)
    line = next(ln for ln in as_text.stdout.splitlines() if ln.startswith("torch-bf16 "))
    assert line.endswith(f"  RuntimeError: {CAUSE}") and "TorchScript" not in line, line
    assert f"torch-bf16 failed: RuntimeError: {CAUSE}" in as_text.stdout


def test_non_tensor_arguments_are_in_the_inputs_line_and_the_json(runs):
    _, as_json, as_text = runs
    data = json.loads(as_json.stdout)
    by_name = {i["name"]: i for i in data["inputs"]}
    assert by_name["sr"] == {"name": "sr", "dtype": "int", "shape": [], "value": "16000",
                             "how": "the entry point's value, passed as is to every backend "
                                    "(not a tensor)"}
    assert "value" not in by_name["x"] and by_name["x"]["shape"] == [1, 4]
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "docs" / "guard-schema.json").read_text())
    jsonschema.validate(data, schema)
    inputs = next(ln for ln in as_text.stdout.splitlines() if ln.startswith("inputs "))
    assert "x float32[1, 4]: the entry point's value" in inputs
    assert "sr=16000 (int): the entry point's value, passed as is" in inputs, inputs


# -- reason_line on messages the runtimes raise here ---------------------------------------------

def _raised(fn):
    try:
        fn()
    except Exception as err:  # noqa: BLE001
        return _messages.whole_message(err)  # as the backend's child reports it
    raise AssertionError("expected the runtime to raise")


def _torchscript(load: bool):
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def forward(self, x):
            w = torch.ones(1, 4, 4)
            return torch.bmm(w, x.unsqueeze(0).transpose(1, 2))

    net = torch.jit.script(Net())
    if load:  # a saved model: the serialized code's traceback, then the original code's
        import io

        buf = io.BytesIO()
        torch.jit.save(net, buf)
        buf.seek(0)
        net = torch.jit.load(buf)
    return _raised(lambda: net(torch.ones(1, 4, dtype=torch.bfloat16)))


def _python_traceback():
    def inner():
        return {}["sr"]

    try:
        try:
            inner()
        except KeyError as e:
            raise RuntimeError("building the model failed") from e
    except RuntimeError:
        return traceback.format_exc()


def _onnx(w_rows: int):
    import onnx
    from onnx import TensorProto as T
    from onnx import helper

    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", T.FLOAT, [1, 8])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [1, 4])],
                          [onnx.numpy_helper.from_array(np.ones((w_rows, 4), np.float32), "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _ort(kind: str):
    ort = pytest.importorskip("onnxruntime")
    if kind == "load":
        return _raised(lambda: ort.InferenceSession(_onnx(5).SerializeToString(),
                                                    providers=["CPUExecutionProvider"]))
    s = ort.InferenceSession(_onnx(8).SerializeToString(), providers=["CPUExecutionProvider"])
    feed = np.ones((1, 5), np.float32) if kind == "shape" else np.ones((1, 8), np.float64)
    return _raised(lambda: s.run(None, {"x": feed}))


def _openvino(kind: str, tmp_path):
    ov = pytest.importorskip("openvino")
    import onnx
    from onnx import TensorProto as T
    from onnx import helper

    core = ov.Core()
    if kind == "unsupported":
        g = helper.make_graph([helper.make_node("NoSuchOp", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", T.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [1, 8])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
    else:
        m = _onnx(5 if kind == "validate" else 8)
    path = str(tmp_path / f"{kind}.onnx")
    onnx.save(m, path)
    if kind != "infer":
        return _raised(lambda: core.read_model(path))
    compiled = core.compile_model(path, "CPU")
    return _raised(lambda: compiled({"x": np.ones((1, 5), np.float32)}))


# (message maker, what the line must say, what it must not)
CASES = {
    "torchscript": (lambda p: _torchscript(False), [f"RuntimeError: {CAUSE}"],
                    ["TorchScript interpreter", "<--- HERE", "torch.ones"]),
    "torchscript-loaded": (lambda p: _torchscript(True), [f"RuntimeError: {CAUSE}"],
                           ["serialized code", "<--- HERE", "torch.bmm"]),
    "python-traceback": (lambda p: _python_traceback(),
                         ["RuntimeError: building the model failed"],
                         ["Traceback", "File ", "^^^", "The above exception"]),
    "ort-shape": (lambda p: _ort("shape"),
                  ["INVALID_ARGUMENT : Got invalid dimensions for input: x", "Got: 5 Expected: 8"],
                  []),
    "ort-dtype": (lambda p: _ort("dtype"), ["Unexpected input data type"], []),
    "ort-load": (lambda p: _ort("load"), ["Incompatible dimensions for matrix multiplication"],
                 []),
    "openvino-unsupported": (lambda p: _openvino("unsupported", p),
                             ["No conversion rule found for operations: NoSuchOp"],
                             ["Exception from", "failed at src/"]),
    "openvino-validate": (lambda p: _openvino("validate", p),
                          ["Incompatible MatMul matrix dimension"],
                          ["Exception from", "failed at src/", "While validating"]),
    "openvino-infer": (lambda p: _openvino("infer", p),
                       ["the model input (shape=[1,8]) and the tensor", "are incompatible"],
                       ["Exception from", "failed at src/"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_reason_line_states_the_cause_of_real_runtime_messages(case, tmp_path):
    make, says, never = CASES[case]
    message = make(tmp_path)
    line = reason_line(message)
    assert "\n" not in line and len(line) <= 300
    for text in says:
        assert text in line, (line, message)
    for text in never:
        assert text not in line, (line, message)


def test_a_message_over_the_bound_keeps_its_cause_at_the_end():
    """A TorchScript message longer than the 16 KiB the report keeps (a deep inlined call
    stack): the head and the tail are kept, and the tail states the cause."""
    real = _torchscript(True).split(": ", 1)[1]
    head, _, tail = real.partition("Traceback of TorchScript, original code")
    frames = "\n".join(f'  File "code/__torch__/m{k}.py", line {k}, in forward\n'
                       f"    _{k} = (self.m{k}).forward(x, )\n           ~~~~~~ <--- HERE"
                       for k in range(400))
    message = head + frames + "\n\nTraceback of TorchScript, original code" + tail
    assert len(message) > _messages.MAX_MESSAGE
    kept = _messages.whole_message(RuntimeError(message))
    assert len(kept) <= _messages.MAX_MESSAGE + 40
    assert kept.startswith("RuntimeError: The following operation failed")
    assert kept.rstrip().endswith(CAUSE)
    assert reason_line(kept) == f"RuntimeError: {CAUSE}"
