"""guard --data (issue 28 item 1): the user's own samples are judged, probed and calibrated on,
and the report says which inputs were real and which synthetic.

The model squares its input and scales it back: y = (x * x) * 0.001 + x. Standard-normal inputs
(the generated ones) stay far from float16's limit; a sample of 300s makes x * x = 90000, beyond
float16's 65504, so ort-fp16 (which stores every intermediate in float16) gives Inf there only.
"""
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

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxconverter_common")

from onnx import TensorProto, helper  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _model(path: Path, two_inputs: bool = False) -> None:
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"], name="square"),
             helper.make_node("Mul", ["sq", "k"], ["small"], name="scale"),
             helper.make_node("Add", ["small", "x"], ["y"], name="add")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "n"])]
    if two_inputs:
        nodes[-1] = helper.make_node("Add", ["small", "b"], ["y"], name="add")
        inputs.append(helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, "n"]))
    g = helper.make_graph(nodes, "g", inputs,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "n"])],
                          [helper.make_tensor("k", TensorProto.FLOAT, [], [0.001])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))


def guard(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = env_with_package()
    return subprocess.run([sys.executable, "-m", "driftscope", "guard", *args], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture()
def work(tmp_path: Path) -> Path:
    _model(tmp_path / "sq.onnx")
    d = tmp_path / "data"
    d.mkdir()
    np.savez(d / "a_small.npz", x=np.full((1, 8), 0.5))          # float64: cast to float32
    np.savez(d / "b_large.npz", x=np.full((1, 8), 300.0, np.float32))
    return tmp_path


def test_real_data_decides_the_verdict(work):
    synthetic = guard("sq.onnx", "--backends", "ort-fp16-exact", "--probe", "never", "--json",
                      "syn.json", cwd=work)
    assert synthetic.returncode == 0, synthetic.stdout + synthetic.stderr
    syn = json.loads((work / "syn.json").read_text())
    assert syn["inputs_source"] == "synthetic"
    assert "synthetic sample(s)" in synthetic.stdout

    real = guard("sq.onnx", "--backends", "ort-fp16-exact", "--data", "data", "--probe", "never",
                 "--json", "real.json", cwd=work)
    assert real.returncode == 3, real.stdout + real.stderr
    rep = json.loads((work / "real.json").read_text())
    assert rep["inputs_source"] == "real" and rep["samples"] == 2
    row = [b for b in rep["backends"] if b["name"] == "ort-fp16-exact"][0]
    assert row["status"] == "NUMERICAL_INSTABILITY"
    # Only the second file in name order, b_large.npz, overflows.
    bad = {o["sample"] for o in row["outputs"] if o["status"] != "PASS"}
    assert bad == {1}, row["outputs"]
    assert "2 real sample(s)" in real.stdout
    assert "x float32[1, 8]: real: --data data (2 samples)" in real.stdout


def test_generator_is_capped_and_mixed_inputs_are_said(tmp_path):
    _model(tmp_path / "two.onnx", two_inputs=True)
    (tmp_path / "gen.py").write_text(
        "import numpy as np\n"
        "def forever():\n"
        "    k = 0\n"
        "    while True:\n"
        "        k += 1\n"
        "        yield {'x': np.full((1, 3), float(k), np.float32)}\n")
    p = guard("two.onnx", "--backends", "ort", "--data", "gen.py:forever", "--samples", "5",
              "--json", "r.json", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["samples"] == 5 and rep["inputs_source"] == "mixed"
    how = {i["name"]: i["how"] for i in rep["inputs"]}
    assert how["x"].startswith("real: --data gen.py:forever (5 samples)")
    assert "synthetic: not in --data" in how["b"] and how["b"].startswith("standard normal")
    assert rep["inputs"][1]["shape"] == [1, 3]  # sized by the data's x through dim "n"


@pytest.mark.parametrize("make, data, message", [
    (None, "nodir", "--data nodir: no such file or folder"),
    ("empty", "empty", "--data empty: the folder has no .npz or .npy file"),
    ("z", "bad.npz", "--data bad.npz: input 'z' is not an input of the model; its inputs are: x"),
    ("shape", "bad.npz", "--data bad.npz: input 'x' has shape (2, 3, 4), the model expects "
                         "float32 [1, n]"),
    ("text", "bad.npz", "--data bad.npz: input 'x' has dtype <U1; give numbers"),
    ("junk", "bad.npz", "--data bad.npz: not a .npz file"),
    ("raises", "g.py:f", "--data g.py:f: calling it failed: ValueError: boom"),
    ("notdict", "g.py:f", "--data g.py:f item 1: expected a dict of input name -> array, got int"),
    ("nofn", "g.py:nothere", "--data: g.py has no function 'nothere'"),
    ("npy2", "x.npy", "a .npy file is one input's value, and the model has 2 inputs"),
])
def test_bad_data_is_one_line_and_exit_2(tmp_path, make, data, message):
    _model(tmp_path / "m.onnx", two_inputs=make == "npy2")
    if make == "empty":
        (tmp_path / "empty").mkdir()
    elif make == "z":
        np.savez(tmp_path / "bad.npz", z=np.ones(3))
    elif make == "shape":
        np.savez(tmp_path / "bad.npz", x=np.ones((2, 3, 4), np.float32))
    elif make == "text":
        np.savez(tmp_path / "bad.npz", x=np.array(["a"]))
    elif make == "junk":
        (tmp_path / "bad.npz").write_text("not a zip")
    elif make == "raises":
        (tmp_path / "g.py").write_text("def f():\n    raise ValueError('boom')\n")
    elif make == "notdict":
        (tmp_path / "g.py").write_text("def f():\n    yield 3\n")
    elif make == "nofn":
        (tmp_path / "g.py").write_text("def f():\n    return []\n")
    elif make == "npy2":
        np.save(tmp_path / "x.npy", np.ones((1, 3), np.float32))
    p = guard("m.onnx", "--backends", "ort", "--data", data, cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], p.stderr
    assert "Traceback" not in p.stderr


def test_reports_never_replace_data_files(work):
    p = guard("sq.onnx", "--backends", "ort", "--data", "data", "--json", "data/a_small.npz",
              cwd=work)
    assert p.returncode == 2 and "(--data)" in p.stderr
    with np.load(work / "data" / "a_small.npz") as z:
        assert z["x"].shape == (1, 8)
