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
