"""State pairs found by name (issue 24 item 3): a voice-activity model's probability `output`
[batch, 1] was fed back as its audio `input` [batch, samples] (exit 2, "the reference backend
failed"). Pairs found by name must agree in dtype and shape, the generic input/output names are
never paired, `state`/`stateN` is found, `--state none` turns the inference off, and when the
reference fails under an inferred pairing the error says so and how to override it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from driftscope import _guard as G  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))
import guard_models as gm  # noqa: E402
from driftscope._guard import _stateful as S  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("DRIFTSCOPE_BIN", ROOT / "build" / "dev" / "driftscope")).absolute()


def _save(nodes, inputs, outputs, inits, path):
    gm.save_model(path, nodes, inputs, outputs, inits, path.stem)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from onnx import TensorProto as T
    from onnx import helper

    d = tmp_path_factory.mktemp("state")
    rng = np.random.default_rng(0)
    vi = helper.make_tensor_value_info
    # Silero-VAD-shaped: audio `input` [batch, samples], `state` [2, batch, 16], `sr`; outputs a
    # probability `output` [batch, 1] and the next state `stateN`.
    _save([helper.make_node("MatMul", ["input", "w_in"], ["a"]),
           helper.make_node("ReduceMean", ["state"], ["s0"], axes=[0], keepdims=0),
           helper.make_node("Add", ["a", "s0"], ["h"]),
           helper.make_node("Tanh", ["h"], ["t"]),
           helper.make_node("Unsqueeze", ["t", "axes0"], ["t1"]),
           helper.make_node("Concat", ["t1", "t1"], ["stateN"], axis=0),
           helper.make_node("MatMul", ["t", "w_out"], ["z"]),
           helper.make_node("Sigmoid", ["z"], ["output"])],
          [vi("input", T.FLOAT, ["batch", "samples"]), vi("state", T.FLOAT, [2, "batch", 16]),
           vi("sr", T.INT64, [])],
          [vi("output", T.FLOAT, ["batch", 1]), vi("stateN", T.FLOAT, [2, "batch", 16])],
          {"w_in": (rng.standard_normal((512, 16)) * 0.05).astype(np.float32),
           "w_out": rng.standard_normal((16, 1)).astype(np.float32),
           "axes0": np.array([0], np.int64)}, d / "vad.onnx")
    # Generic names of one shape: an `input` -> `output` filter, no state at all.
    _save([helper.make_node("MatMul", ["input", "w"], ["output"])],
          [vi("input", T.FLOAT, [1, 16])], [vi("output", T.FLOAT, [1, 16])],
          {"w": rng.standard_normal((16, 16)).astype(np.float32)}, d / "generic.onnx")
    # h_in/h_out by name, but h_out is twice as long: feeding it back must fail at step 2.
    _save([helper.make_node("MatMul", ["h_in", "w"], ["y"]),
           helper.make_node("Concat", ["h_in", "h_in"], ["h_out"], axis=1)],
          [vi("h_in", T.FLOAT, [1, "n"])],
          [vi("y", T.FLOAT, [1, 4]), vi("h_out", T.FLOAT, [1, "m"])],
          {"w": rng.standard_normal((16, 4)).astype(np.float32)}, d / "grows.onnx")
    return d


def test_pairs_need_a_real_name_pair_and_compatible_shapes():
    f = "float32"
    assert S.find_pairs({"input": f}, {"output": f}) == {}
    assert S.find_pairs({"input_1": f}, {"output_1": f}) == {}
    assert S.find_pairs({"state": f, "input": f}, {"stateN": f, "output": f}) == {"state": "stateN"}
    assert S.find_pairs({"state": f}, {"state_n": f}) == {"state": "state_n"}
    assert S.find_pairs({"h_in": f}, {"h_out": f}, {"h_in": (1, 16)}, {"h_out": (1, 8)}) == {}
    assert S.find_pairs({"h_in": f}, {"h_out": f}, {"h_in": (1, "n")}, {"h_out": (1, 8)}) == {
        "h_in": "h_out"}
    assert S.find_pairs({"h_in": f}, {"h_out": f}, {"h_in": (1, 16)}, {"h_out": (1, 16, 1)}) == {}


def test_a_vad_model_pairs_state_with_staten_not_input_with_output(models):
    r = G.guard(models / "vad.onnx", backends=["ort-noopt"], inputs={"sr": np.array(16000)},
                dims={"batch": 1, "samples": 512}, runs=1, probe="never", fallback="never")
    assert r.exit_code == 0, r.to_text()
    how = {i.name: i.how for i in r.inputs}
    assert "the backend's own output 'stateN'" in how["state"], how
    assert "own output" not in how["input"], how
    assert any(o.name == "output[step 3]" for o in r["ort-noopt"].outputs)


def test_generic_names_are_not_a_state(models):
    r = G.guard(models / "generic.onnx", backends=["ort-noopt"], runs=1, probe="never",
                fallback="never")
    assert r.exit_code == 0
    assert all("[step" not in o.name for o in r["ort-noopt"].outputs)
    # Named by the user, it is one.
    r = G.guard(models / "generic.onnx", backends=["ort-noopt"], runs=1, probe="never",
                fallback="never", state={"input": "output"}, steps=2)
    assert any(o.name == "output[step 2]" for o in r["ort-noopt"].outputs)


def test_an_inferred_pairing_that_fails_says_how_to_override_it(models):
    env = dict(os.environ, DRIFTSCOPE_PYTHON=sys.executable)
    pkg = str(Path(__import__("driftscope").__file__).parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg, env.get("PYTHONPATH", "")) if p)
    base = [str(BIN), "guard", str(models / "grows.onnx"), "--dim", "n=16", "--runs", "1",
            "--backends", "ort-noopt", "--probe", "never"]
    proc = subprocess.run(base, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert "h_in->h_out, a pairing inferred from the names" in err and "--state none" in err, err
    proc = subprocess.run(base + ["--state", "none"], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
