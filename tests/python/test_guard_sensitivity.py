"""guard --sensitivity N (issue 28 item 4): each keepable node's own effect on a failing INT8
backend, ranked, and the FP32 fallback grown in that order.

mlp.onnx: three MatMul -> Tanh layers; the middle weight holds one outlier (400 among values of
about 0.17), so ort-int8's per-tensor weight scale (400/127) rounds every other weight of that
MatMul to 0: keeping mm1 alone in float32 removes nearly all the error, mm0 and mm2 nothing.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_guard_data import guard  # noqa: E402

onnx = pytest.importorskip("onnx")


def _mlp(path: Path) -> None:
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    ws = [rng.normal(size=(32, 32)).astype(np.float32) / 6 for _ in range(3)]
    ws[1][3, 5] = 400.0
    nodes, inits, prev = [], [], "x"
    for i, w in enumerate(ws):
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes += [helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"], name=f"mm{i}"),
                  helper.make_node("Tanh", [f"m{i}"], [f"t{i}"], name=f"tanh{i}")]
        prev = f"t{i}"
    g = helper.make_graph(nodes, "mlp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [4, 32])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))


def test_ranking_names_the_outlier_and_the_fallback_starts_there(tmp_path):
    pytest.importorskip("onnxruntime")
    _mlp(tmp_path / "mlp.onnx")
    p = guard("mlp.onnx", "--backends", "ort-int8", "--sensitivity", "8", "--json", "r.json",
              cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    row = json.loads((tmp_path / "r.json").read_text())["backends"][1]
    s = row["sensitivity"]
    assert s["builds"] == 4 and s["cut"] == 0 and s["on"] == "ort-int8"
    by = {n["node"]: n for n in s["nodes"]}
    assert [n["node"] for n in s["nodes"]][0] == "mm1"
    assert not any(n["failed"] for n in s["nodes"]), s["nodes"]
    assert by["mm1"]["share"] > 0.9 and abs(by["mm0"]["share"]) < 0.1
    assert abs(by["mm2"]["share"]) < 0.1
    # share = (E0 - E(n)) / E0 with E the mean worst-output relative error
    assert by["mm1"]["share"] == pytest.approx((s["baseline"] - by["mm1"]["error"])
                                               / s["baseline"])
    fb = row["fallback"]
    assert fb["verified"] and [n["node"] for n in fb["nodes"]] == ["mm1"] and fb["runs"] == 1
    assert "mm1 (MatMul) 98%" in p.stdout or "mm1 (MatMul) 99%" in p.stdout
    assert "(--sensitivity)" in p.stdout


def test_cap_says_what_was_not_ranked(tmp_path):
    pytest.importorskip("onnxruntime")
    _mlp(tmp_path / "mlp.onnx")
    p = guard("mlp.onnx", "--backends", "ort-int8", "--sensitivity", "1", "--fallback", "never",
              "--json", "r.json", cwd=tmp_path)
    s = json.loads((tmp_path / "r.json").read_text())["backends"][1]["sensitivity"]
    assert s["builds"] == 2 and s["cut"] == 2 and len(s["nodes"]) == 1
    assert "2 more node(s) not ranked" in p.stdout


def test_negative_is_a_usage_error(tmp_path):
    _mlp(tmp_path / "mlp.onnx")
    p = guard("mlp.onnx", "--backends", "ort", "--sensitivity", "-1", cwd=tmp_path)
    assert p.returncode == 2 and "sensitivity=-1: must be an integer >= 0" in p.stderr


def test_int8_builds_leave_the_model_folder_alone(tmp_path):
    """ONNX Runtime's quantizer, given a path, shape-infers it into '<stem>-inferred.onnx' beside
    it and deletes that file: it replaced and removed the user's file of that name, and the
    ranking's two builds at once raced on it (12 of MiniLM's 39 nodes failed to build)."""
    pytest.importorskip("onnxruntime")
    d = tmp_path / "models"
    d.mkdir()
    _mlp(d / "mlp.onnx")
    (d / "mlp-inferred.onnx").write_bytes(b"the user's own file")
    p = guard("models/mlp.onnx", "--backends", "ort-int8", "--sensitivity", "8", "--json",
              "r.json", cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert (d / "mlp-inferred.onnx").read_bytes() == b"the user's own file"
    assert sorted(f.name for f in d.iterdir()) == ["mlp-inferred.onnx", "mlp.onnx"]
    s = json.loads((tmp_path / "r.json").read_text())["backends"][1]["sensitivity"]
    assert not any(n["failed"] for n in s["nodes"]), s["nodes"]


def test_qdq_builds_leave_the_model_folder_alone(tmp_path):
    """The same for ort-qdq's quantize_static, which also shape-infers a path beside it."""
    pytest.importorskip("onnxruntime")
    d = tmp_path / "models"
    d.mkdir()
    _mlp(d / "mlp.onnx")
    (d / "mlp-inferred.onnx").write_bytes(b"the user's own file")
    p = guard("models/mlp.onnx", "--backends", "ort-qdq", "--probe", "never", cwd=tmp_path)
    assert p.returncode in (0, 1, 3), p.stdout + p.stderr
    assert (d / "mlp-inferred.onnx").read_bytes() == b"the user's own file"
    assert sorted(f.name for f in d.iterdir()) == ["mlp-inferred.onnx", "mlp.onnx"]


def test_weights_held_as_constant_nodes_are_keepable(tmp_path):
    """Paddle2ONNX writes every weight as a Constant node (PP-OCR's models have no initializer),
    and quantize_dynamic turns such Convs into ConvInteger: they are nodes an INT8 fallback can
    keep. Before: no keepable node ("not one ort-int8 can keep"), no ranking, no fallback."""
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    ws = [rng.normal(size=(8, 8, 3, 3)).astype(np.float32) / 8 for _ in range(3)]
    ws[1][2, 3, 1, 1] = 300.0  # the outlier: conv1's per-tensor INT8 step wipes the rest out
    nodes, prev = [], "x"
    for i, w in enumerate(ws):
        nodes += [helper.make_node("Constant", [], [f"w{i}"], name=f"const{i}",
                                   value=numpy_helper.from_array(w, f"w{i}")),
                  helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], name=f"conv{i}",
                                   pads=[1, 1, 1, 1]),
                  helper.make_node("Tanh", [f"c{i}"], [f"t{i}"], name=f"tanh{i}")]
        prev = f"t{i}"
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 8, 8, 8])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "conv.onnx"))
    from driftscope._guard._probe import onnx_weights_and_producers

    weighted, _ = onnx_weights_and_producers(str(tmp_path / "conv.onnx"))
    assert {"conv0", "conv1", "conv2"} <= weighted
    guard("conv.onnx", "--backends", "ort-int8", "--sensitivity", "8", "--json", "r.json",
          cwd=tmp_path)
    row = json.loads((tmp_path / "r.json").read_text())["backends"][1]
    assert row["status"] == "PRECISION_DEGRADATION", row
    assert [n["node"] for n in row["sensitivity"]["nodes"]][0] == "conv1", row["sensitivity"]
    assert row["fallback"]["verified"], row["fallback"]
    assert [n["node"] for n in row["fallback"]["nodes"]] == ["conv1"]
