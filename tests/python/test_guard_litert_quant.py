"""The quantized LiteRT backends (issue 27 items 4 and 5): a float .tflite quantized with
ai-edge-quantizer in the child and run on LiteRT's default kernels; the verified per-op fallback
as an ai-edge-quantizer recipe, proven from the built file.

The models are built here (tests/python/models/tflite_models.py, tflite_outlier.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")
pytest.importorskip("ai_edge_quantizer")

import driftscope  # noqa: E402
from driftscope import _guard as G  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))
import tflite_models as tm  # noqa: E402
import tflite_outlier  # noqa: E402

QUANT = ["litert-int8", "litert-w8", "litert-w4", "litert-a8w8", "litert-a16w8", "litert-fp16"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("guard-litert-quant")
    (d / "float.tflite").write_bytes(tm.build_float())
    (d / "int8.tflite").write_bytes(tm.build_int8())
    (d / "outlier.tflite").write_bytes(tflite_outlier.build())
    (d / "outlier-sig.tflite").write_bytes(tflite_outlier.build(signature=True))
    return d


def _cosine(a, b):
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_each_backend_runs_a_float_model_and_says_what_it_quantized(models):
    r = driftscope.guard(models / "float.tflite", backends=QUANT, runs=1, probe="never")
    want = {"litert-int8": "1 FULLY_CONNECTED (int8 weights read by the kernel, activations "
                           "quantized at run time) [logits]",
            "litert-w8": "1 CONV_2D (int8 weights dequantized to float32) [conv1]",
            # ai-edge-quantizer leaves the depthwise conv's weights float for int4
            "litert-w4": "stayed float32: 1 DEPTHWISE_CONV_2D [dwconv]",
            "litert-a8w8": "1 SOFTMAX (int8 activations) [probs]; stayed float32: no op",
            "litert-a16w8": "1 CONV_2D (int16 activations, int8 weights) [conv1]",
            "litert-fp16": "1 FULLY_CONNECTED (float16 weights dequantized to float32) [logits]"}
    for name in QUANT:
        row = r[name]
        assert row.status == G.PASS, (name, row.status, row.error)
        notes = "; ".join(row.notes)
        assert want[name] in notes, (name, notes)
        assert "ai-edge-quantizer recipe" in notes
    assert "calibrated on 1 sample(s)" in "; ".join(r["litert-a8w8"].notes)


def test_they_are_opt_in():
    from driftscope._guard.backends.registry import BACKENDS

    assert all(name in BACKENDS and not BACKENDS[name].default for name in QUANT)


def test_a_quantized_model_is_unavailable_with_the_reason(models):
    r = driftscope.guard(models / "int8.tflite", backends=["litert-a8w8", "litert-int8"], runs=1)
    for name in ("litert-a8w8", "litert-int8"):
        row = r[name]
        assert row.status == G.UNAVAILABLE
        assert row.reason.startswith("the model is already quantized (")
        assert "e.g. 'input_q'" in row.reason and "QUANTIZE/DEQUANTIZE" in row.reason


def test_a_quantizer_that_rejects_the_model_names_the_op(tmp_path):
    # One weight read by a FULLY_CONNECTED and a BATCH_MATMUL: ai-edge-quantizer 0.10.0's float16
    # recipe fails inserting its DEQUANTIZE (a TypeError of its own).
    s = tm._schema()
    T, Op, Opt = s.TensorType, s.BuiltinOperator, s.BuiltinOptions
    b = tm._Builder()
    rng = np.random.default_rng(1)
    x = b.tensor("input", [1, 16], T.FLOAT32)
    w = b.tensor("shared/weights", [16, 16], T.FLOAT32,
                 rng.normal(0, .3, (16, 16)).astype(np.float32))
    a = b.tensor("a", [1, 16], T.FLOAT32)
    b.op(Op.FULLY_CONNECTED, 1, [x, w, -1], [a], Opt.FullyConnectedOptions,
         s.FullyConnectedOptionsT())
    shape = b.tensor("r/shape", [3], T.INT32, np.array([1, 1, 16], np.int32))
    r3 = b.tensor("r", [1, 1, 16], T.FLOAT32)
    b.op(Op.RESHAPE, 1, [a, shape], [r3], Opt.ReshapeOptions, s.ReshapeOptionsT())
    y = b.tensor("b", [1, 1, 16], T.FLOAT32)
    b.op(Op.BATCH_MATMUL, 1, [r3, w], [y], Opt.BatchMatMulOptions, s.BatchMatMulOptionsT())
    path = tmp_path / "shared.tflite"
    path.write_bytes(b.finish([x], [y], "shared weight"))
    row = driftscope.guard(path, backends=["litert-fp16"], runs=1)["litert-fp16"]
    assert row.status == G.RUNTIME_ERROR
    assert "ai-edge-quantizer (float16) rejected the model at tensor 'shared/weights' (read by " \
           "op 0 (FULLY_CONNECTED, output 'a'), op 2 (BATCH_MATMUL, output 'b'))" in row.error


def test_a8w8_outlier_weight_is_found_kept_float_verified_and_proven(models):
    r = driftscope.guard(models / "outlier.tflite", backends=["litert-a8w8"], runs=1)
    row = r["litert-a8w8"]
    assert row.status == G.PRECISION_DEGRADATION and row.worst.cosine < 0.9
    assert row.probe.origin is not None and row.probe.origin.node == "outlier"
    assert row.probe.origin.op_type == "FULLY_CONNECTED"
    fb = row.fallback
    assert fb is not None and fb.verified, fb.sentence
    assert [n for n, _ in fb.nodes] == ["outlier"]
    assert fb.cosine_after > 0.999 and fb.runs <= 3
    proof = fb.evidence["outlier"]
    assert "FULLY_CONNECTED 'outlier'" in proof and "float32 inputs, outputs and weights" in proof
    recipe = fb.printed_recipe
    assert "recipe.static_wi8_ai8()" in recipe
    assert "regex='(?:^|;)(?:outlier);'" in recipe and 'algorithm_key="no_quantize"' in recipe
    assert "a .tflite model's nodes cannot be kept" not in r.to_text()


def _built_with(model, samples, keep):
    """The printed recipe's way (Quantizer + update_quantization_recipe), run here."""
    from ai_edge_quantizer import quantizer, recipe

    from driftscope._guard.backends import litert_quant as lq

    qt = quantizer.Quantizer(str(model), recipe.static_wi8_ai8())
    if keep:
        qt.update_quantization_recipe(regex=lq._scope_regex(keep), operation_name="*",
                                      algorithm_key="no_quantize")
    calibration = qt.calibrate({"serving_default": samples}, num_threads=1)
    return bytes(qt.quantize(calibration, enable_progress_report=False).quantized_model)


def _run(data, path, x):
    from ai_edge_litert.interpreter import Interpreter

    path.write_bytes(data)
    it = Interpreter(model_path=str(path))
    it.allocate_tensors()
    d, o = it.get_input_details()[0], it.get_output_details()[0]
    if d["quantization"][0]:
        sc, z = d["quantization"]
        x = np.clip(np.round(x / sc) + z, -128, 127).astype(d["dtype"])
    it.set_tensor(d["index"], x)
    it.invoke()
    y = it.get_tensor(o["index"]).astype(np.float64)
    return (y - o["quantization"][1]) * o["quantization"][0] if o["quantization"][0] else y


def test_the_recipe_keeps_the_op_float_and_without_it_the_failure_comes_back(models, tmp_path):
    from driftscope._guard.backends import litert_quant as lq

    model = models / "outlier-sig.tflite"
    x = np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32)
    ref = _run(model.read_bytes(), tmp_path / "f.tflite", x)
    kept = _built_with(model, [{"x": x}], ["outlier"])
    plain = _built_with(model, [{"x": x}], [])
    assert _cosine(_run(kept, tmp_path / "k.tflite", x), ref) > 0.999
    assert _cosine(_run(plain, tmp_path / "p.tflite", x), ref) < 0.9
    # the proof reads the built file: the kept op proven, the quantized one not
    built = lq._Built(kept)
    session = lq._QuantSession(None, "k", str(tmp_path / "k.tflite"), built, [])
    assert set(session.float32_evidence(["outlier", "fc4"])) == {"outlier"}
    plain_session = lq._QuantSession(None, "p", "", lq._Built(plain), [])
    assert plain_session.float32_evidence(["outlier"]) == {}


def test_the_proof_refuses_a_quantize_dequantize_pair_inside_the_kept_set(models):
    from driftscope._guard.backends import litert_quant as lq

    x = np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32)
    # quiet and fc4 kept float, outlier between them quantized: fc4 reads outlier's DEQUANTIZE,
    # a boundary with a quantized op, so both kept ops are proven. Claimed kept too, outlier is
    # not proven, nor is fc4: it reads outlier through a DEQUANTIZE, inside the claimed set.
    data = _built_with(models / "outlier-sig.tflite", [{"x": x}], ["quiet", "fc4"])
    s = lq._QuantSession(None, "q", "", lq._Built(data), [])
    assert set(s.float32_evidence(["quiet", "fc4"])) == {"quiet", "fc4"}
    assert set(s.float32_evidence(["quiet", "outlier", "fc4"])) == {"quiet"}
    # The same file with outlier's integer op read as a bare QUANTIZE of quiet's float output:
    # then quiet -> QUANTIZE -> DEQUANTIZE -> fc4 is a round trip inside the kept set.
    b = lq._Built(data)
    where = b.by_output()
    quiet_out = b.ops[where["quiet"]][2][0]
    k = where["outlier"]
    b.ops[k] = ("QUANTIZE", [quiet_out], b.ops[k][2])
    s2 = lq._QuantSession(None, "q", "", b, [])
    assert set(s2.float32_evidence(["quiet", "fc4"])) == {"quiet"}
