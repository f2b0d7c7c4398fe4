"""guard's variants built for the probe and the FP32 fallback (issue 24 items 7 and 8).

* ort-qdq rebuilds its variant for every bisection prefix and every fallback candidate; each is
  calibrated on the feeds the row ran (--dim / --input), not on generated 16-sized ones, and a
  search whose builds keep failing for one reason stops with that reason.
* ort-fp16 and weights held in Constant nodes: the converter clips a BatchNorm variance of 1e7 to
  1e4; the row names the clipped Constant, the fallback keeps the node's Constant inputs float32
  with it, and the proof of float32 follows a node's weights up to the Constant (a float16
  Constant cast back to float32 is not float32).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxconverter_common")

import onnx  # noqa: E402
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

import driftscope  # noqa: E402
from driftscope import _guard as G  # noqa: E402
from driftscope._guard.backends.base import Backend  # noqa: E402
from driftscope._guard.backends.onnxruntime import ort_float32_evidence, save_optimized_graph  # noqa: E402
from driftscope._guard.backends.registry import register_backend  # noqa: E402


def _save(path, nodes, inputs, outputs, inits=()):
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, str(path))
    return m


def _qdq_model(path):
    """x [1, n] + c[1, 4] (runs only with n = 4 or 1): a column of 1000 makes per-tensor INT8
    of the sum zero the other columns, and the MatMul reads only those: ort-qdq's output is all
    zeros until the MatMul (and the Add) stay float32."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 8)).astype(np.float32)
    w[0, :] = 0.0
    w2 = (rng.standard_normal((8, 8)) * 0.5).astype(np.float32)
    c = np.array([[1000.0, 0.0, 0.0, 0.0]], np.float32)
    _save(path, [h.make_node("Add", ["x", "c"], ["a"], name="add"),
                 h.make_node("MatMul", ["a", "W"], ["m"], name="mm"),
                 h.make_node("Relu", ["m"], ["r"], name="relu"),
                 h.make_node("MatMul", ["r", "W2"], ["y"], name="mm2")],
          [h.make_tensor_value_info("x", T.FLOAT, [1, "n"])],
          [h.make_tensor_value_info("y", T.FLOAT, [1, 8])],
          [nh.from_array(w, "W"), nh.from_array(w2, "W2"), nh.from_array(c, "c")])


def test_qdq_bisection_and_fallback_calibrate_on_the_users_dims(tmp_path):
    _qdq_model(tmp_path / "q.onnx")
    r = driftscope.guard(tmp_path / "q.onnx", backends=["ort-qdq"], dims={"n": 4}, runs=1,
                         samples=2, probe_method="both")
    row = r["ort-qdq"]
    assert row.status == "SILENT_ZERO_VECTOR"
    # Before: every prefix and every variant was calibrated on x [1, 16] ("broadcast 4 by 16").
    assert row.probe.origin.node == "mm"
    assert row.probe.other.method == "bisect" and row.probe.other.error is None, \
        row.probe.other.error
    assert row.probe.other.origin.node == "mm" and row.probe.agrees
    fb = row.fallback
    assert [t["status"] for t in fb.trail if t["status"] == "RUNTIME_ERROR"] == []
    assert fb.verified and fb.status_after == "PASS", fb.sentence
    assert sorted(n for n, _ in fb.nodes) == ["add", "mm"]


class _Refusing(Backend):
    name, family = "refusing-test", "onnx"

    def can_keep_float32(self):
        return True

    def load(self, model, work, seed, keep_float32=()):
        raise RuntimeError("Attempting to broadcast an axis by a dimension other than 1. 4 by 16"
                           "\nat element_wise_ops.h:563")


def test_a_search_whose_builds_fail_the_same_way_stops_with_the_reason(tmp_path):
    from dataclasses import asdict

    from driftscope._guard._fallback import search_job
    from driftscope._guard._job import Job
    from driftscope._guard._metrics import Thresholds

    _qdq_model(tmp_path / "q.onnx")
    register_backend(_Refusing())
    try:
        order = [("add", "Add"), ("mm", "MatMul"), ("relu", "Relu"), ("mm2", "MatMul")]
        x = {"x": np.ones((1, 4), np.float32)}
        out = search_job(Job(kind="fallback", backend="refusing-test", runs=0,
                             model=str(tmp_path / "q.onnx"), samples=[x],
                             ref_outputs=[{"y": np.ones((1, 8), np.float32)}],
                             thresholds=asdict(Thresholds()), order=order, origins=["add"],
                             cap=20, work=str(tmp_path), seed=0))
    finally:
        G.BACKENDS.pop("refusing-test", None)
    # Before: it went on to the next node, and the next, and said "no node is left" (or "the
    # cap of 20 variant builds was reached" on a larger graph).
    assert out["runs"] == 3 and not out["passed"]
    assert "failed for the same reason" in out["why"]
    assert "4 by 16" in out["why"] and "\n" not in out["why"]
    assert "cap" not in out["why"]


def _bn_model(path, unnamed_shared=False):
    """x -> BatchNormalization (scale, bias, mean, var all Constant nodes; var 1e7..1e8) ->
    Relu -> Conv. Converted to float16, var is clipped to 1e4: BN's output 30-100x too large."""
    rng = np.random.default_rng(1)
    arrays = {"scale": np.array([3000, 5000, 8000, 9000], np.float32),
              "bias": np.array([0.1, -0.2, 0.3, 0.0], np.float32),
              "mean": np.array([0.5, -0.5, 0.25, 0.0], np.float32),
              "var": np.array([1e7, 3e7, 6e7, 1e8], np.float32)}
    nodes = [h.make_node("Constant", [], [k], name=f"{k}_node",
                         value=nh.from_array(v, f"{k}_t")) for k, v in arrays.items()]
    nodes += [h.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["bn"],
                          name="bn", epsilon=1e-5),
              h.make_node("Relu", ["bn"], ["r"], name="relu"),
              h.make_node("Conv", ["r", "Wc"], ["y"], name="conv", pads=[1, 1, 1, 1])]
    outputs = [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 8, 8])]
    if unnamed_shared:  # var's Constant has no name and another node reads it too
        nodes[3].name = ""
        nodes.append(h.make_node("ReduceMax", ["var"], ["vmax"], name="rmax", keepdims=0))
        outputs.append(h.make_tensor_value_info("vmax", T.FLOAT, []))
    wc = (rng.standard_normal((4, 4, 3, 3)) * 0.3).astype(np.float32)
    return _save(path, nodes, [h.make_tensor_value_info("x", T.FLOAT, [1, 4, 8, 8])], outputs,
                 [nh.from_array(wc, "Wc")])


def test_fp16_names_clipped_constants_and_the_fallback_keeps_them_float32(tmp_path):
    _bn_model(tmp_path / "bn.onnx")
    r = driftscope.guard(tmp_path / "bn.onnx", backends=["ort-fp16"], runs=1)
    row = r["ort-fp16"]
    assert row.status == "PRECISION_DEGRADATION"
    # Before: the note scanned initializers only and the row said nothing of the clipping.
    clipped = [n for n in row.notes if "clipped" in n]
    assert clipped and "4 weight(s) above 10000" in clipped[0], row.notes
    assert "Constant var_node (max 1e+08)" in clipped[0]
    fb = row.fallback
    # Before: keeping bn left its Constant inputs converted (clipped): the search grew to every
    # node and found no passing set.
    assert fb.verified and fb.status_after == "PASS", fb.sentence
    assert [n for n, _ in fb.nodes] == ["bn"]
    assert "weights are float32 up to" in fb.evidence["bn"]
    assert "var_node" in fb.recipe and "NOT exactly" not in fb.recipe
    # The recipe's call builds the variant guard verified.
    from driftscope.onnxruntime import to_float16
    import onnxruntime as ort

    keep = ["bn", "var_node", "mean_node", "bias_node", "scale_node"]
    assert f"keep_float32={keep!r}" in fb.recipe
    x = np.random.default_rng(0).random((1, 4, 8, 8), dtype=np.float32)
    want = ort.InferenceSession(str(tmp_path / "bn.onnx")).run(None, {"x": x})[0]
    got = ort.InferenceSession(to_float16(str(tmp_path / "bn.onnx"), keep_float32=keep)
                               .SerializeToString()).run(None, {"x": x})[0]
    assert np.abs(got - want).max() < 1e-2 * np.abs(want).max()


def test_fp16_fallback_copies_an_unnamed_shared_constant(tmp_path):
    _bn_model(tmp_path / "bn.onnx", unnamed_shared=True)
    import onnxruntime as ort

    x = np.random.default_rng(0).random((1, 4, 8, 8), dtype=np.float32)
    want = ort.InferenceSession(str(tmp_path / "bn.onnx")).run(None, {"x": x})
    b = G.BACKENDS["ort-fp16"]
    plain = b.load(str(tmp_path / "bn.onnx"), str(tmp_path), 0)
    assert any("clipped: Constant var (max 1e+08)" in n for n in plain.notes), plain.notes
    # The plain variant runs bn in float32 on a float16 Constant: said, and not a proof of a
    # node kept in float32 (below).
    assert "but its weight" in plain.float32_evidence(["bn"])["bn"]
    os.makedirs(tmp_path / "k", exist_ok=True)
    kept = b.load(str(tmp_path / "bn.onnx"), str(tmp_path / "k"), 0, keep_float32=["bn"])
    got = kept.run({"x": x})
    assert np.abs(got["y"] - want[0]).max() < 1e-2 * np.abs(want[0]).max()
    # The other reader of var still reads the converted (clipped) value: only bn's copy is kept.
    assert float(got["vmax"]) == 1e4 and float(want[1]) == 1e8
    assert "bn" in kept.float32_evidence(["bn"])


def _crafted(path, var_type):
    """A variant whose BatchNormalization has float32 inputs and outputs, but its variance comes
    through Cast(to=float) from a Constant of `var_type` (float16: clipped to 1e4, as the
    converter writes it)."""
    var = np.array([1e7, 3e7, 6e7, 1e8], np.float32)
    held = np.minimum(var, 1e4).astype(np.float16) if var_type == T.FLOAT16 else var
    ones, zeros = np.ones(4, np.float32), np.zeros(4, np.float32)
    return _save(path, [
        h.make_node("Constant", [], ["var16"], name="var_node", value=nh.from_array(held, "v")),
        h.make_node("Cast", ["var16"], ["var"], name="var_cast", to=T.FLOAT),
        h.make_node("BatchNormalization", ["x", "s", "b", "m", "var"], ["y"], name="bn")],
        [h.make_tensor_value_info("x", T.FLOAT, [1, 4, 2, 2])],
        [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 2, 2])],
        [nh.from_array(ones, "s"), nh.from_array(zeros, "b"), nh.from_array(zeros, "m")])


@pytest.mark.parametrize("var_type", [T.FLOAT16, T.FLOAT])
def test_float32_io_fed_a_float16_weight_through_a_cast_is_not_proven(tmp_path, var_type):
    import onnxruntime as ort

    variant = _crafted(tmp_path / "v.onnx", var_type)
    options = ort.SessionOptions()
    optimized = str(tmp_path / "v.opt.onnx")
    save_optimized_graph(options, optimized)
    ort.InferenceSession(str(tmp_path / "v.onnx"), options, providers=["CPUExecutionProvider"])
    # ONNX Runtime folds the Cast: its graph holds a float32 initializer (the clipped values).
    opt = onnx.load(optimized, load_external_data=False)
    assert [n.op_type for n in opt.graph.node] == ["BatchNormalization"]
    proof = ort_float32_evidence(["bn"], variant, optimized, kept=["bn"])
    if var_type == T.FLOAT16:
        assert proof == {}  # before: "bn ... with 6 float32 input/output value(s)"
        # Not built to keep bn (the probe asks of the plain variant): the weight is named.
        said = ort_float32_evidence(["bn"], variant, optimized)["bn"]
        assert "but its weight var16 comes from Constant var_node" in said
    else:
        assert "weights are float32 up to" in proof["bn"]
