"""replay --candidate-model (issue 26 item 1, the seed scenario: a port). A second model runs as
the candidate, its tensors paired by name with the reference's as compare pairs two dumps.
PyTorch: models/port/port_net.py re-writes models/port/ref_net.py by hand (its own LayerNorm,
functional GELU, an extra Identity) on the same weights, with one planted bug: block 1's
LayerNorm epsilon is 1e-2, not 1e-5. ONNX: y = x*x*k + x with k changed and a node added. Real
runtimes (PyTorch, ONNX Runtime)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pkgenv import env_with_package  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PORT = Path(__file__).resolve().parent / "models" / "port"
PY = os.environ.get("DRIFTSCOPE_PYTHON", sys.executable)


def replay(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = env_with_package()
    return subprocess.run([PY, "-m", "driftscope", "replay", *args], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=600)


@pytest.fixture(scope="module")
def torch_port(tmp_path_factory):
    pytest.importorskip("torch")
    d = tmp_path_factory.mktemp("port")
    run = replay(d, "--model", f"{PORT / 'ref_net.py'}:build", "--candidate", "torch",
                 "--candidate-model", f"{PORT / 'port_net.py'}:build", "--at", "blocks.1.norm",
                 "--isolate", "--json", "r.json")
    return run, json.loads((d / "r.json").read_text())


def test_output_replay_at_the_planted_module_removes_the_error(torch_port):
    run, j = torch_port
    assert run.returncode == 0, run.stdout + run.stderr
    assert j["outputs"]["output"]["status"] == "PRECISION_DEGRADATION"  # the port is off
    (rep,) = j["replays"]
    assert rep["at"] == ["blocks.1.norm"] and rep["error"] is None
    assert rep["outputs"]["output"]["removed"] >= 0.99
    assert rep["outputs"]["output"]["after"]["status"] == "PASS"
    (op,) = j["ops"]
    assert op["name"] == "blocks.1.norm" and op["verdict"] == "introduced"
    # The scan teacher-forces the port's modules: the planted one, and only it, makes error.
    assert [r["name"] for r in j["isolation"]["introduced"]] == ["blocks.1.norm"]
    assert "candidate torch running" in run.stdout


def test_unmatched_names_are_listed(torch_port):
    run, j = torch_port
    # ref_net's nn.GELU modules have no counterpart (the port calls F.gelu); the port's
    # Identity modules none in the reference.
    assert j["pairing"] == {"candidate_model": f"{PORT / 'port_net.py'}:build", "matched": 10,
                            "unmatched_reference": ["blocks.0.act", "blocks.1.act"],
                            "unmatched_candidate": ["blocks.0.drop", "blocks.1.drop"]}
    assert ("unmatched: 2 tensor(s) of the reference with no tensor of that name in the "
            "candidate model: blocks.0.act, blocks.1.act") in run.stdout


def test_compare_origins_name_the_planted_module(tmp_path):
    pytest.importorskip("torch")
    run = replay(tmp_path, "--model", f"{PORT / 'ref_net.py'}:build", "--candidate", "torch",
                 "--candidate-model", f"{PORT / 'port_net.py'}:build", "--json", "r.json")
    assert run.returncode == 0, run.stdout + run.stderr
    att = json.loads((tmp_path / "r.json").read_text())["attribution"]
    assert att["origins"] == ["blocks.1.norm"]


def test_no_common_names_and_bad_flag_are_exit_2(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "other.py").write_text(
        "import torch\n\n\nclass Other(torch.nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.proj = torch.nn.Linear(32, 8)\n\n"
        "    def forward(self, x):\n        return self.proj(x)\n\n\n"
        "def build():\n    return Other(), (torch.randn(1, 8, 32),)\n")
    run = replay(tmp_path, "--model", f"{PORT / 'ref_net.py'}:build", "--candidate", "torch",
                 "--candidate-model", "other.py:build", "--at", "blocks.1.norm")
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.startswith("driftscope replay: error: --candidate-model other.py:build: "
                                 "no tensor name in common with")
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    for bad, said in (("nothing.py:build", "nothing.py is not a file"),
                      ("model.tflite", "give FILE.py:FUNCTION or MODEL.onnx")):
        run = replay(tmp_path, "--model", f"{PORT / 'ref_net.py'}:build", "--candidate",
                     "torch", "--candidate-model", bad)
        assert run.returncode == 2 and said in run.stderr and "Traceback" not in run.stderr


def _sq(path: Path, k: float, names=("square", "scale", "add"), extra=False) -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"], name=names[0]),
             helper.make_node("Mul", ["sq", "k"], ["small"], name=names[1]),
             helper.make_node("Add", ["small", "x"], ["y0" if extra else "y"], name=names[2])]
    if extra:
        nodes.append(helper.make_node("Identity", ["y0"], ["y"], name="copy"))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     [1, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
                          [helper.make_tensor("k", TensorProto.FLOAT, [], [k])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))


def test_onnx_candidate_model(tmp_path):
    pytest.importorskip("onnxruntime")
    _sq(tmp_path / "a.onnx", 0.001)
    _sq(tmp_path / "b.onnx", 0.5, extra=True)  # the port: k wrong, one more node
    _sq(tmp_path / "c.onnx", 0.001, names=("p", "q", "r"))
    run = replay(tmp_path, "a.onnx", "--reference", "ort", "--candidate", "ort",
                 "--candidate-model", "b.onnx", "--at", "scale", "--isolate", "--json", "r.json")
    assert run.returncode == 0, run.stdout + run.stderr
    j = json.loads((tmp_path / "r.json").read_text())
    assert j["replays"][0]["outputs"]["y"]["removed"] >= 0.99
    assert j["ops"][0]["verdict"] == "introduced"
    assert [r["name"] for r in j["isolation"]["introduced"]] == ["scale"]
    assert j["pairing"]["unmatched_candidate"] == ["copy"]
    assert j["pairing"]["unmatched_reference"] == []
    run = replay(tmp_path, "a.onnx", "--reference", "ort", "--candidate", "ort",
                 "--candidate-model", "c.onnx", "--at", "scale")
    assert run.returncode == 2 and "no tensor name in common" in run.stderr
    assert "Traceback" not in run.stderr
