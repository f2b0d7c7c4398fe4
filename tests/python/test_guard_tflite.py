"""driftscope guard on .tflite models (issue 24): the LiteRT probe on a model whose float16
weights XNNPACK folds (item 4), and OpenVINO's rows for .tflite models (item 12).

The models are built here (tests/python/models/tflite_models.py, tflite_f16.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

import driftscope  # noqa: E402
from driftscope import _guard as G  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))
import tflite_f16  # noqa: E402
import tflite_models as tm  # noqa: E402


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("guard-tflite")
    (d / "float.tflite").write_bytes(tm.build_float())
    (d / "int8.tflite").write_bytes(tm.build_int8())
    (d / "int8io.tflite").write_bytes(tflite_f16.build_int8_io())
    (d / "f16.tflite").write_bytes(tflite_f16.build_f16_weights())
    return d


# -- item 4: the probe never reads a buffer XNNPACK left unwritten --------------------------------

def test_litert_probe_on_float16_weights_names_nothing(models):
    # Before the fix the probe's recording of `litert` read the DEQUANTIZE outputs XNNPACK never
    # writes as values and named conv1/weights (DEQUANTIZE) as a silent zero on a PASS row.
    r = driftscope.guard(models / "f16.tflite", backends=["litert"], probe="always", runs=1)
    row = r["litert"]
    assert row.status == G.PASS
    assert row.probe.method == "recorded" and row.probe.error is None
    assert row.probe.origin is None and row.probe.first_silent_zero is None
    assert row.probe.summary.startswith("PASS: 6 tensor pairs within tolerance")
    text = r.to_text()
    assert "all zeros" not in text and "conv1/weights" not in text


# -- item 12: OpenVINO runs .tflite models --------------------------------------------------------

OPENVINO = ["openvino", "openvino-bf16", "openvino-f16"]


def _native(row_name):
    from driftscope._guard._cpu import openvino_has

    return {"openvino": True, "openvino-bf16": openvino_has("bf16"),
            "openvino-f16": openvino_has("fp16")}[row_name]


def _check_openvino_rows(r, tolerance):
    for name in OPENVINO:
        row = r[name]
        if not _native(name):  # the CPU lacks it (or $DRIFTSCOPE_HIDE_CPU hides it)
            assert row.status == G.UNAVAILABLE and "no native" in row.reason, (name, row.reason)
            continue
        assert row.status == G.PASS, (name, row.status, row.reason)
        assert row.worst.cosine > 0.999 and row.worst.max_diff <= tolerance, (name, row.worst)
        assert any(n.startswith("read by OpenVINO's TensorFlow Lite frontend") for n in row.notes)
        assert any("ran" in n and "runtimePrecision" in n for n in row.notes), row.notes


@pytest.fixture(scope="module")
def openvino():
    return pytest.importorskip("openvino")


def test_openvino_rows_for_a_float_tflite_model(models, openvino):
    # Before: a .tflite model got litert-ref, litert and litert-gpu only, and --backends
    # openvino was refused ("runs onnx models").
    r = driftscope.guard(models / "float.tflite", runs=1, probe="never")
    assert [b.name for b in r.backends] == ["litert-ref", "litert", "litert-gpu"] + OPENVINO
    assert r.reference == "litert-ref"
    # float32 OpenVINO against LiteRT's reference kernels: rounding only.
    assert r["openvino"].status == G.PASS and r["openvino"].worst.cosine > 0.999999
    assert r["openvino"].worst.max_diff < 1e-5
    _check_openvino_rows(r, tolerance=0.01)


@pytest.mark.parametrize("model", ["int8", "int8io"])
def test_openvino_rows_for_int8_tflite_models(models, openvino, model):
    # int8io takes int8 `input_q` and returns int8 `probs` (scale 1/256, zero point -128):
    # OpenVINO keeps both integers, as LiteRT does; the row dequantizes the output with the
    # model's own scale and zero point, so it compares with litert-ref's.
    r = driftscope.guard(models / f"{model}.tflite", runs=1, probe="never")
    assert [b.name for b in r.backends][-3:] == OPENVINO
    _check_openvino_rows(r, tolerance=2 / 256)
    if model == "int8io":
        assert r.inputs[0].dtype == "int8"
        assert any("quantized input_q, probs fed and read as on LiteRT" in n
                   for n in r["openvino"].notes)
        out = r["openvino"].outputs[0]
        assert out.name == "probs"
        # Dequantized: probabilities (L2 norm at most 1), not integers around -100.
        assert 0.1 < out.norm_cand <= 1.0 and out.norm_cand == pytest.approx(out.norm_ref,
                                                                           abs=2 / 256)


def test_openvino_quantizes_a_float_input_of_an_int8_tflite(models, openvino):
    # --reference-model: inputs follow the float model; OpenVINO's int8 input gets them
    # quantized with the .tflite's scale and zero point, as the litert row does.
    r = driftscope.guard(models / "int8io.tflite", reference_model=models / "float.tflite",
                         backends=["litert", "openvino"], runs=1, probe="never")
    assert r["openvino"].status == G.PASS and r["openvino"].worst.cosine > 0.999
    assert r["openvino"].worst.max_diff == pytest.approx(r["litert"].worst.max_diff, abs=2 / 256)


def test_openvino_cannot_keep_tflite_nodes_in_float32(models, tmp_path, openvino):
    b = G.BACKENDS["openvino-bf16"]
    with pytest.raises(ValueError, match=r"openvino-bf16 cannot keep nodes of a \.tflite model "
                                         r"in float32"):
        b.load(str(models / "float.tflite"), str(tmp_path), 0, keep_float32=["conv1"])


def test_openvino_refuses_a_tflite_with_resource_variables(tmp_path, openvino):
    # OpenVINO's TensorFlow Lite frontend has no RESOURCE tensors (streaming models that keep
    # state in variables): a RUNTIME_ERROR row with the frontend's reason, the others still run.
    (tmp_path / "s.tflite").write_bytes(tm.build_stateful(3))
    r = driftscope.guard(tmp_path / "s.tflite", backends=["litert", "openvino"], runs=1,
                         probe="never")
    assert r["litert"].status == G.PASS
    assert r["openvino"].status == G.RUNTIME_ERROR
    assert "Unexpected type: RESOURCE" in r["openvino"].error


def test_list_backends_names_openvino_for_tflite(openvino):
    names = [b.name for b in G.family_backends("tflite")]
    assert names[:3] == ["litert", "litert-ref", "litert-gpu"]
    assert [n for n in names if n.startswith("openvino")] == OPENVINO
    assert [b.name for b in G.family_backends("onnx")].count("openvino") == 1
    assert "openvino" not in [b.name for b in G.family_backends("torch")]
