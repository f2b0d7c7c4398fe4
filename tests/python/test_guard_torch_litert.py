"""guard on a PyTorch model through a litert-torch conversion (issue 27 item 7): the LiteRT rows
tflite-litert, tflite-litert-ref and the quantized tflite-litert-int8 ... -fp16
(backends/torch_litert.py). Where litert-torch is not installed the rows are UNAVAILABLE and say
why (that test always runs); the conversion tests need it. The models are built from code
(tests/python/models/torch_litert_models.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

import driftscope  # noqa: E402
from driftscope import _guard as G  # noqa: E402

MODELS = Path(__file__).resolve().parent / "models"
sys.path.insert(0, str(MODELS))
SPEC = str(MODELS / "torch_litert_models.py")
ROWS = ["tflite-litert", "tflite-litert-ref", "tflite-litert-int8", "tflite-litert-w8",
        "tflite-litert-w4", "tflite-litert-a8w8", "tflite-litert-a16w8", "tflite-litert-fp16"]


def _litert_torch() -> None:
    try:
        found = importlib.util.find_spec("litert_torch") is not None
    except ValueError:
        found = False
    if not found:
        pytest.skip("litert-torch is not installed (pip install litert-torch; requirements-dev "
                    "leaves it out: its xdsl pins typing-extensions<4.13, coremltools' cattrs "
                    "needs >=4.14)")
    pytest.importorskip("ai_edge_litert")
    pytest.importorskip("ai_edge_quantizer")


def test_without_litert_torch_every_row_is_unavailable_and_says_why(monkeypatch):
    # Before: no such backends ("unknown backend tflite-litert").
    monkeypatch.setitem(sys.modules, "litert_torch", None)  # not importable, as if absent
    assert [b.name for b in G.family_backends("torch") if b.name.startswith("tflite-")] == ROWS
    assert not any(G.BACKENDS[n].default for n in ROWS)  # a conversion is slow: opt-in
    r = driftscope.guard(f"{SPEC}:small", backends=ROWS, runs=1, probe="never")
    for name in ROWS:
        row = r[name]
        assert row.status == G.UNAVAILABLE, (name, row.status)
        assert "litert_torch package is not installed" in row.reason, row.reason
        assert "pip install litert-torch" in row.reason, row.reason


def test_module_paths_are_resolved_from_litert_torch_names():
    import torch

    from driftscope._guard.backends.torch_litert import _frames, _resolver
    import torch_litert_models as m

    net, _ = m.small()
    resolve = _resolver(net)
    pkg = type(net).__module__
    name = (f"{pkg}.Small/{pkg}.Body_body/torch.nn.modules.linear.Linear_fc2;1;;"
            f"{pkg}.Small/torch.nn.modules.linear.Linear_head;")
    assert [resolve(f) for f in _frames(name)] == ["body.fc2", "head"]
    assert resolve([f"{pkg}.Small", f"{pkg}.Body_body", "torch.nn.modules.linear.Linear_nope"]) \
        is None
    # A ModuleList's modules keep only their index: two lists of one class under the root
    # make the frame ambiguous, and no path is guessed.

    class Two(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.ModuleList([torch.nn.Linear(2, 2)])
            self.b = torch.nn.ModuleList([torch.nn.Linear(2, 2)])

    two = _resolver(Two())
    assert two(["Two", "torch.nn.modules.linear.Linear_0"]) is None


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.litert_torch
def test_a_small_model_passes_on_litert_converted_once():
    _litert_torch()
    r = driftscope.guard(f"{SPEC}:small", backends=["tflite-litert", "tflite-litert-ref"],
                         runs=1, probe="never")
    for name in ("tflite-litert", "tflite-litert-ref"):
        assert r[name].status == G.PASS, (name, r[name].status, r[name].error)
    made = [n for n in ("tflite-litert", "tflite-litert-ref")
            if any("once for this guard run:" in x for x in r[n].notes)]
    assert made == ["tflite-litert"], [r[n].notes for n in ("tflite-litert", "tflite-litert-ref")]
    assert any("reused here" in x for x in r["tflite-litert-ref"].notes)
    notes = r["tflite-litert"].notes
    assert any("3 module output(s) found" in x for x in notes), notes
    # The converter moved fc2's bias into head: the op named after fc2 is not fc2's output,
    # and is not recorded as it (the check by value).
    assert any("not recorded: " in x and "body.fc2" in x.split("not recorded: ")[1]
               for x in notes), notes


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.litert_torch
def test_a_float16_sensitive_module_fails_litert_fp16_and_the_probe_names_it():
    _litert_torch()
    r = driftscope.guard(f"{SPEC}:planted_f16", backends=["tflite-litert", "tflite-litert-fp16"],
                         runs=1, fallback="never")
    assert r["tflite-litert"].status == G.PASS, r["tflite-litert"].error
    row = r["tflite-litert-fp16"]
    assert row.status not in (G.PASS, G.UNAVAILABLE, G.RUNTIME_ERROR), (row.status, row.error)
    assert any("ai-edge-quantizer recipe float16" in n for n in row.notes), row.notes
    p = row.probe
    assert p.error is None and p.method == "recorded", p.to_json()
    assert p.origin.node == "body.fc2", p.to_json()
    assert "Inf where the reference is finite" in p.origin.detail


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.litert_torch
def test_a_model_litert_torch_cannot_convert_is_each_rows_error_tried_once():
    _litert_torch()
    rows = ["tflite-litert", "tflite-litert-ref"]
    r = driftscope.guard(f"{SPEC}:branchy", backends=rows, runs=1, probe="never")
    assert r["torch"].status == G.REFERENCE
    for name in rows:
        row = r[name]
        assert row.status == G.RUNTIME_ERROR, (name, row.status)
        assert "litert_torch.convert failed: GuardOnDataDependentSymNode" in row.error, row.error
        assert "\n" not in row.error and len(row.error) < 600, row.error
    assert "tried once" not in r["tflite-litert"].error
    assert "(the conversion of this guard run, tried once)" in r["tflite-litert-ref"].error


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.litert_torch
def test_bisection_keeps_modules_float32_through_the_converted_ops():
    # The precision-boundary bisection of a PyTorch model: the leaf modules after the cut kept
    # in float32 as ai-edge-quantizer no_quantize entries on the ops named after them.
    _litert_torch()
    r = driftscope.guard(f"{SPEC}:planted_f16", backends=["tflite-litert-fp16"], runs=1,
                         probe_method="bisect", fallback="never")
    p = r["tflite-litert-fp16"].probe
    assert p.error is None and p.method == "bisect", p.to_json()
    assert p.origin.node == "body.fc2", p.to_json()
    # head's op writes the model output (named by no module stack): found by value, not
    # skipped as having no op.
    assert not any("skipped" in n for n in p.notes), p.notes


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.litert_torch
def test_an_int8_outlier_module_gets_a_verified_fallback_recipe():
    _litert_torch()
    r = driftscope.guard(f"{SPEC}:planted_outlier", backends=["tflite-litert-a8w8"], runs=1)
    row = r["tflite-litert-a8w8"]
    assert row.status == G.PRECISION_DEGRADATION, (row.status, row.error)
    assert row.probe.origin.node == "body.fc2", row.probe.to_json()
    fb = row.fallback
    assert fb.error is None and fb.verified and fb.status_after == G.PASS, fb.to_json()
    assert [n for n, _ in fb.nodes] == ["body.fc2"]
    assert fb.removal_fails == {"body.fc2": G.PRECISION_DEGRADATION}
    assert "FULLY_CONNECTED" in fb.evidence["body.fc2"] and \
        "float32 inputs, outputs and weights" in fb.evidence["body.fc2"], fb.evidence
    assert "litert_torch.convert(model, sample_args)" in fb.recipe, fb.recipe
    assert "algorithm_key=\"no_quantize\"" in fb.recipe and "Linear_fc2" in fb.recipe, fb.recipe


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.litert_torch
def test_keyword_inputs_are_fed_by_name():
    # Before: fed by position into a signature that sorts them, x and bias swapped:
    # PRECISION_DEGRADATION.
    _litert_torch()
    r = driftscope.guard(f"{SPEC}:keywords", backends=["tflite-litert"], runs=1, probe="never")
    row = r["tflite-litert"]
    assert row.status == G.PASS, (row.status, row.error, row.worst)
    assert any("outputs within " in n for n in row.notes), row.notes


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.litert_torch
def test_eleven_outputs_pair_with_pytorchs_by_number():
    # Before: paired in the signature's text order, output [2] judged against output_10.
    _litert_torch()
    r = driftscope.guard(f"{SPEC}:eleven_outputs", backends=["tflite-litert"], runs=1,
                         probe="never")
    row = r["tflite-litert"]
    assert row.status == G.PASS, (row.status, row.error, row.worst)
