"""Weights in Constant nodes stored as external data (paddle2onnx exports keep weights in Constant
nodes; quantize_static(use_external_data_format=True) writes them out): the recorder looked only at
the main graph's initializers for external data, so ONNX Runtime resolved the data file against the
working directory and the guard's ort-qdq probe failed on two real OCR models ("External data path
does not exist: <cwd>/qdq.onnx.data")."""

from __future__ import annotations

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import driftscope  # noqa: E402
from driftscope import onnxruntime as dort  # noqa: E402


def test_constant_weights_in_external_data_are_found(tmp_path, monkeypatch):
    from onnx import TensorProto as T
    from onnx import helper, numpy_helper

    w = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(w, "w"), name="c"),
         helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
        "g", [helper.make_tensor_value_info("x", T.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", T.FLOAT, [1, 64])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    d = tmp_path / "model"
    d.mkdir()
    onnx.save(model, str(d / "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="m.onnx.data", size_threshold=0, convert_attribute=True)
    assert dort.external_data_files(onnx.load(str(d / "m.onnx"), load_external_data=False),
                                    d / "m.onnx") == [str(d / "m.onnx.data")]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    x = np.ones((1, 64), np.float32)
    rec = dort.record(str(d / "m.onnx"), {"x": x}, str(tmp_path / "r.tdump"))
    np.testing.assert_allclose(rec.outputs["y"], x @ w, rtol=1e-5)
    assert "2 records state=clean" in repr(driftscope.open(str(tmp_path / "r.tdump")))
