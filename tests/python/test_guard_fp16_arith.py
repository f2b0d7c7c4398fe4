"""guard's float16 / bfloat16 arithmetic backends and where a float16 fallback is verified
(issue 32, items 1 and 2).

ort-fp16 on the CPU exercises float16 storage only: ONNX Runtime computes its float16 nodes in
float32 and passes values between such nodes in float32. ort-fp16-exact computes ort-fp16's own
variant with every float16 result rounded to float16 (GPU-style: float32 accumulation), so a
value above 65504 between two computing nodes is Inf there as on a GPU; a float16 fallback is
searched on it and verified on it, and a recipe checked only where float16 is stored says so.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxconverter_common")

import onnx  # noqa: E402
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

import driftscope  # noqa: E402
from driftscope._guard.backends import registry as B  # noqa: E402
from driftscope._guard._fallback import FallbackResult  # noqa: E402
from driftscope._guard._report import BackendResult, GuardReport  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))
import guard_models as gm  # noqa: E402


def _vi(name, shape):
    return h.make_tensor_value_info(name, T.FLOAT, shape)


def _two_muls(path, k1=1000.0, k2=1e-3):
    """y = (x * k1) * k2: the product between the two Muls is the only large value."""
    gm.save_model(path, [h.make_node("Mul", ["x", "a"], ["m"], name="big"),
                         h.make_node("Mul", ["m", "b"], ["y"], name="small")],
                  [_vi("x", [1, 4])], [_vi("y", [1, 4])],
                  {"a": np.array(k1, np.float32), "b": np.array(k2, np.float32)})


def _load(name, path, tmp_path, keep=()):
    work = tmp_path / f"w-{name}-{len(keep)}"
    work.mkdir(exist_ok=True)
    return B.BACKENDS[name].load(str(path), str(work), 0, keep_float32=list(keep))


def _f16_computed(model, feeds):
    """The model evaluated with float16 really computed (onnx.reference: numpy float16)."""
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(model).run(None, feeds)[0]


def test_an_intermediate_of_70000_becomes_inf_only_where_float16_is_computed(tmp_path):
    _two_muls(tmp_path / "m.onnx")
    x = {"x": np.array([[70.0, 65.0, -70.0, 1.0]], np.float32)}
    # ort-fp16: both Muls run in float32 and the 70000 between them never becomes float16.
    assert np.isfinite(_load("ort-fp16", tmp_path / "m.onnx", tmp_path).run(x)["y"]).all()
    y = _load("ort-fp16-exact", tmp_path / "m.onnx", tmp_path).run(x)["y"]
    # 70000 > 65504 is Inf in float16; 65000 is not (rounded to 64992); -70000 is -Inf.
    assert np.isposinf(y[0, 0]) and np.isneginf(y[0, 2])
    assert y[0, 1] == pytest.approx(64992.0 * np.float32(np.float16(1e-3)), rel=1e-3)
    assert y[0, 3] == pytest.approx(1.0, rel=1e-3)


def test_it_agrees_with_onnx_reference_on_a_float16_model(tmp_path):
    """Small cases against onnx.reference on the same float16 variant. The reference computes
    everything in numpy float16 (accumulation too); ort-fp16-exact accumulates MatMul in float32
    and rounds once, as GPUs do, so they differ by a few float16 ulps of the result at most."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    gm.save_model(tmp_path / "s.onnx",
                  [h.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
                   h.make_node("Add", ["m", "c"], ["a"], name="add"),
                   h.make_node("Relu", ["a"], ["r"], name="relu"),
                   h.make_node("Mul", ["r", "k"], ["p"], name="scale"),
                   h.make_node("Softmax", ["p"], ["y"], axis=-1, name="softmax")],
                  [_vi("x", [4, 16])], [_vi("y", [4, 8])],
                  {"W": w, "c": rng.standard_normal(8).astype(np.float32),
                   "k": np.array(0.7, np.float32)})
    s = _load("ort-fp16-exact", tmp_path / "s.onnx", tmp_path)
    for scale in (1.0, 30.0):
        x = {"x": (rng.standard_normal((4, 16)) * scale).astype(np.float32)}
        ours = s.run(x)["y"]
        ref = _f16_computed(s.variant_proto, x)
        assert np.isfinite(ours).all() and np.isfinite(ref).all()
        # float16 has an ulp of 2**-11 relative; a few of them, not float32 agreement.
        assert np.max(np.abs(ours - ref)) <= 8 * 2.0 ** -11, np.max(np.abs(ours - ref))
    # The overflow: x * 1e4 * 10 > 65504 is Inf in both, and finite in ort-fp16.
    _two_muls(tmp_path / "o.onnx", 1e4, 10.0)
    x = {"x": np.array([[7.0, 1.0, 2.0, 3.0]], np.float32)}
    ours = _load("ort-fp16-exact", tmp_path / "o.onnx", tmp_path).run(x)["y"]
    ref = _f16_computed(_load("ort-fp16", tmp_path / "o.onnx", tmp_path).variant_proto, x)
    assert np.array_equal(np.isinf(ours), np.isinf(ref)) and np.isinf(ours).all()


def test_bfloat16_rounds_each_result_and_keeps_weights_unclipped(tmp_path):
    # The float16 converter clips weights to 1e4; bfloat16 holds 3e4 (to 3.0016e4).
    _two_muls(tmp_path / "b.onnx", 3e4, 1e-2)
    x = {"x": np.array([[1.0, 3.0, 1e30, 0.5]], np.float32)}
    y = _load("ort-bf16-exact", tmp_path / "b.onnx", tmp_path).run(x)["y"]
    import ml_dtypes

    def bf(v):
        return np.asarray(v, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)

    want = bf(bf(bf(x["x"]) * bf(3e4)) * bf(1e-2))
    assert np.array_equal(y, want), (y, want)
    assert np.isfinite(y).all()  # 3e34 is finite in bfloat16, where float16 would be Inf


def test_an_op_it_cannot_evaluate_is_named_and_the_others_go_on(tmp_path):
    then = h.make_graph([h.make_node("Mul", ["x", "k"], ["t"])], "then", [], [_vi("t", None)])
    other = h.make_graph([h.make_node("Add", ["x", "k"], ["e"])], "else", [], [_vi("e", None)])
    gm.save_model(tmp_path / "if.onnx",
                  [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0, name="sum"),
                   h.make_node("Greater", ["s", "z"], ["cond"], name="gt"),
                   h.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other,
                               name="branch")],
                  [_vi("x", [1, 4])], [_vi("y", [1, 4])],
                  {"k": np.array(2.0, np.float32), "z": np.array(0.0, np.float32)})
    r = driftscope.guard(tmp_path / "if.onnx", backends=["ort-fp16", "ort-fp16-exact"], runs=1,
                         probe="never")
    assert r["ort-fp16"].status == "PASS"
    row = r["ort-fp16-exact"]
    assert row.status == "RUNTIME_ERROR"
    assert "cannot evaluate op If (node branch)" in row.error, row.error


@pytest.fixture(scope="module")
def overflow(tmp_path_factory):
    """The issue's synthetic model (a Mul reaching 1e6, read by a Mul after Concat/Transpose),
    guarded on ort-fp16 alone as a user would run it."""
    d = tmp_path_factory.mktemp("fp16-arith")
    gm.overflow_onnx(d / "ov.onnx")
    r = driftscope.guard(d / "ov.onnx", backends=["ort-fp16"], runs=1)
    return d, r


def test_the_fallback_keeps_the_computing_nodes_and_holds_with_float16_computed(overflow,
                                                                                tmp_path):
    d, r = overflow
    fb = r["ort-fp16"].fallback
    kept = sorted(n for n, _ in fb.nodes)
    # The Mul whose product overflows and the Mul that reads it stay float32 (before: only
    # /store/Concat and /store/Transpose, which hold on the CPU alone).
    assert "/pre1/Mul" in kept and "/post2/Mul" in kept, kept
    assert fb.searched_on == "ort-fp16-exact"
    assert fb.verified and fb.verified_on == ["ort-fp16", "ort-fp16-exact"], fb.sentence
    data = json.loads(json.dumps(r.to_dict()))["backends"]
    js = next(b for b in data if b["name"] == "ort-fp16")["fallback"]
    assert js["verified_on"] == ["ort-fp16", "ort-fp16-exact"]
    assert js["verification"] == "computed"
    assert "ort-fp16-exact (float16 arithmetic)" in js["summary"]
    assert "ort-fp16 (float16 storage only)" in js["summary"]
    assert "verified on ort-fp16 (float16 storage only), ort-fp16-exact (float16 arithmetic)" \
        in r.to_text()
    # The kept variant with float16 really computed: finite and within tolerance; the variant
    # today's search verified (Concat and Transpose kept) gives Inf there.
    from driftscope.onnxruntime import to_float16

    x = {"x": np.random.default_rng(0).standard_normal((1, 8)).astype(np.float32)}
    want = np.concatenate([x["x"], x["x"]], axis=1).T.astype(np.float64) * 1e3
    fixed = _f16_computed(to_float16(str(d / "ov.onnx"), keep_float32=kept),
                          x).astype(np.float64)
    assert np.isfinite(fixed).all()
    cos = float(np.sum(want * fixed) / np.linalg.norm(want) / np.linalg.norm(fixed))
    assert cos > 0.999
    old = _f16_computed(to_float16(str(d / "ov.onnx"),
                                   keep_float32=["/store/Concat", "/store/Transpose"]), x)
    assert np.isinf(old).all()
    # ...while ort-fp16 (storage only) passes that old variant: why its check is not enough.
    assert np.isfinite(_load("ort-fp16", d / "ov.onnx", tmp_path,
                             ["/store/Concat", "/store/Transpose"]).run(x)["y"]).all()


def _with_recipe(fb: FallbackResult) -> GuardReport:
    from driftscope._guard._inputs import InputInfo
    from driftscope._guard._metrics import Thresholds

    rows = [BackendResult("ort", "ONNX Runtime", "", "REFERENCE", reference=True),
            BackendResult("ort-fp16", "float16", "", "NUMERICAL_INSTABILITY", fallback=fb)]
    return GuardReport(model="m.onnx", family="onnx", reference="ort", backends=rows,
                       inputs=[InputInfo("x", "float32", [1], "given")], samples=1, seed=0,
                       runs=1, thresholds=Thresholds(), required=[], reference_nonfinite={})


def test_a_recipe_checked_only_where_float16_is_stored_is_labelled_so():
    fb = FallbackResult("ort-fp16", nodes=[("/n", "Mul")], status_before="NUMERICAL_INSTABILITY",
                        status_after="PASS", cosine_after=1.0, verified=True,
                        recipe="x = 1\n")
    fb.checks = [{"backend": "ort-fp16", "status": "PASS", "cosine": 1.0, "proven": True,
                  "computes": False, "error": None}]
    assert fb.storage_only
    assert "storage only" in fb.sentence and "arithmetic is not verified" in fb.sentence
    text = _with_recipe(fb).to_text()
    assert "FP32 fallback recipe for ort-fp16 (verified on ort-fp16 (float16 storage only) only: " \
           "storage only, arithmetic not verified):" in text
    assert fb.to_json()["verification"] == "storage only"
    fb.checks.append({"backend": "ort-fp16-exact", "status": "NUMERICAL_INSTABILITY",
                      "cosine": None, "proven": True, "computes": True, "error": None})
    fb.verified = False
    assert "NOT verified (on ort-fp16-exact the variant is NUMERICAL_INSTABILITY)" in fb.sentence
