"""Dynamic dimensions on real exported models (issue 24 items 5, 6): exporters write "?" for
every unknown dimension, and those are independent unknowns, not one shared symbol; and when the
reference fails on generated inputs whose dimensions were guessed, the error names the guesses
and the flags that replace them."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from driftscope import _guard as G  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))
import guard_models as gm  # noqa: E402


def _save(nodes, inputs, outputs, inits, path):
    gm.save_model(path, nodes, inputs, outputs, inits, path.stem)


def test_question_mark_dims_are_independent(tmp_path):
    from onnx import TensorProto as T
    from onnx import helper

    _save([helper.make_node("Relu", ["x"], ["y"])],
          [helper.make_tensor_value_info("x", T.FLOAT, ["?", "?", "?"])],
          [helper.make_tensor_value_info("y", T.FLOAT, ["?", "?", "?"])], {},
          tmp_path / "q.onnx")
    x = np.random.default_rng(0).standard_normal((1, 48, 3)).astype(np.float32)
    r = G.guard(tmp_path / "q.onnx", backends=["ort-noopt"], inputs={"x": x}, runs=1,
                probe="never", fallback="never")
    assert r.exit_code == 0 and r.inputs[0].shape == [1, 48, 3]
    # Generated: each "?" gets its own default, and each is named as a guess.
    r = G.guard(tmp_path / "q.onnx", backends=["ort-noopt"], runs=1, probe="never",
                fallback="never", dims={"x:1": 48})
    assert r.inputs[0].shape == [1, 48, 16]


def test_the_error_names_the_guessed_dims(tmp_path):
    from onnx import TensorProto as T
    from onnx import helper

    # Works only for n = 10: the default 16 cannot be reshaped to [1, 5, 2].
    _save([helper.make_node("Reshape", ["x", "shape"], ["y"])],
          [helper.make_tensor_value_info("x", T.FLOAT, [1, "n"])],
          [helper.make_tensor_value_info("y", T.FLOAT, [1, 5, 2])],
          {"shape": np.array([1, 5, 2], np.int64)}, tmp_path / "r.onnx")
    with pytest.raises(G.GuardError) as e:
        G.guard(tmp_path / "r.onnx", backends=["ort-noopt"], runs=1, probe="never",
                fallback="never")
    msg = str(e.value)
    assert "\n" not in msg
    assert "dynamic dimensions were guessed: x:1 (n) = 16" in msg and "--dim NAME=SIZE" in msg
    r = G.guard(tmp_path / "r.onnx", backends=["ort-noopt"], runs=1, probe="never",
                fallback="never", dims={"n": 10})
    assert r.exit_code == 0


def test_unsized_dims_grow_until_the_reference_runs(tmp_path):
    """An STFT-like front end (a 400-sample frame, hop 160) cannot run on 16 samples: the guard
    tries 64, 256, 1024 and says which size ran; --dim still wins."""
    from onnx import TensorProto as T
    from onnx import helper

    w = np.random.default_rng(1).standard_normal((8, 1, 400)).astype(np.float32) * 0.05
    _save([helper.make_node("Unsqueeze", ["audio", "axes"], ["a3"]),
           helper.make_node("Conv", ["a3", "w"], ["frames"], strides=[160])],
          [helper.make_tensor_value_info("audio", T.FLOAT, [1, "samples"])],
          [helper.make_tensor_value_info("frames", T.FLOAT, [1, 8, "frames"])],
          {"w": w, "axes": np.array([1], np.int64)}, tmp_path / "stft.onnx")
    r = G.guard(tmp_path / "stft.onnx", backends=["ort-noopt"], runs=1, probe="never",
                fallback="never")
    assert r.exit_code == 0 and r.inputs[0].shape == [1, 1024], r.inputs[0]
    assert "unsized dimensions are 1024: the reference failed at 16, 64, 256" in r.inputs[0].how
    r = G.guard(tmp_path / "stft.onnx", backends=["ort-noopt"], runs=1, probe="never",
                fallback="never", dims={"samples": 16000})
    assert r.inputs[0].shape == [1, 16000] and "unsized" not in r.inputs[0].how
