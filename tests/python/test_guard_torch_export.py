"""guard on PyTorch models through an export and through torch.compile (issue 33 items 1, 2, 4
and 8): modules that export to no node, the dynamo exporter made once per run, torch.compile
that compiled nothing, and ONNX Runtime's float16 node counts when its NCHWc layout renames
nodes. The models are built from code (tests/python/models/torch_export_models.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import driftscope  # noqa: E402
from driftscope import _guard as G  # noqa: E402

MODELS = Path(__file__).resolve().parent / "models"
sys.path.insert(0, str(MODELS))
SPEC = str(MODELS / "torch_export_models.py")


def onnx_backends():
    """Every onnx-* backend this machine can run."""
    return [b.name for b in G.family_backends("torch")
            if b.name.startswith("onnx-") and b.unavailable() is None]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_dropout_is_skipped_by_the_bisection_and_the_fallback_still_found():
    # Before: "bisection failed: ValueError: no exported node belongs to drop", no fallback.
    r = driftscope.guard(f"{SPEC}:cancel_dropout", backends=["onnx-ort-fp16"], runs=1)
    row = r["onnx-ort-fp16"]
    assert row.status == G.PRECISION_DEGRADATION, row
    assert row.probe.error is None and row.probe.method == "bisect", row.probe.to_json()
    assert row.probe.origin.node == "cancel"
    assert any("skipped: drop" in n for n in row.probe.notes), row.probe.notes
    fb = row.fallback
    assert fb.error is None and fb.verified and fb.status_after == G.PASS, fb.sentence
    assert [n for n, _ in fb.nodes] == ["cancel"]
    # Keeping the Dropout itself is keeping nothing, said so; a name that is no module is
    # still an error.
    import tempfile

    b = G.BACKENDS["onnx-ort-fp16"]
    with tempfile.TemporaryDirectory() as d:
        s = b.load(f"{SPEC}:cancel_dropout", d, 0, keep_float32=["drop", "cancel"])
        s.run({"input": np.ones((2, 8), np.float32)})
        proof = s.float32_evidence(["drop", "cancel"])
        assert "exports to no ONNX node" in proof["drop"] and "cancel" in proof
        assert any("export to no node, nothing to keep: drop" in n for n in s.notes)
        with pytest.raises(ValueError, match="no exported node belongs to nothere"):
            b.load(f"{SPEC}:cancel_dropout", d, 0, keep_float32=["nothere"])


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_transformers_models_export_once_with_dynamo_through_every_onnx_backend():
    # Before: the TorchScript exporter only, GPT-2, Llama and Whisper all RUNTIME_ERROR (aten::diff
    # from transformers' masking, or use_cache passed twice), exported once per backend.
    pytest.importorskip("transformers")
    names = onnx_backends()
    assert {"onnx-ort", "onnx-ort-fp16", "onnx-openvino"} <= set(names)
    for fn in ("gpt2", "llama", "whisper"):
        r = driftscope.guard(f"{SPEC}:{fn}", backends=names, runs=1, probe="never")
        for name in names:
            row = r[name]
            # OpenVINO f16 runs only on CPUs with native float16 (avx512_fp16, AMX-FP16): there
            # its own kernels may refuse an op; what must never fail there is the export.
            if name == "onnx-openvino-f16":
                assert "export" not in (row.error or "").lower(), (fn, name, row.error)
            else:
                assert row.status != G.RUNTIME_ERROR, (fn, name, row.error)
            assert any("exported by the dynamo exporter" in n for n in row.notes), (fn, row.notes)
        made = [name for name in names
                if any("once for this guard run:" in n for n in r[name].notes)]
        assert made == [names[0]], (fn, made)  # exported by the first, reused by the others
        assert r["onnx-ort"].status == G.PASS, (fn, r["onnx-ort"].worst)


UNEXPORTABLE = '''
import torch


class Host(torch.nn.Module):
    def forward(self, x):
        # A branch on a value (torch.export cannot guard on data) into aten::diff (no
        # TorchScript symbolic in opset 17): neither exporter takes it.
        if x.sum() > 0:
            return torch.diff(x)
        return torch.diff(-x)


def build():
    return Host(), torch.randn(2, 3)
'''


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_model_no_exporter_takes_is_each_rows_error_tried_once(tmp_path):
    (tmp_path / "host.py").write_text(UNEXPORTABLE)
    r = driftscope.guard(f"{tmp_path / 'host.py'}:build", backends=["onnx-ort", "onnx-ort-fp16"],
                         runs=1)
    first, second = r["onnx-ort"], r["onnx-ort-fp16"]
    assert first.status == second.status == G.RUNTIME_ERROR
    assert "failed with both exporters: dynamo: " in first.error and "TorchScript: " in first.error
    assert second.error.endswith("(the export of this guard run, tried once)")
    # What float16 storage exercises is said of rows that ran, not of this one.
    assert second.note == "" and "float16 storage" not in second.diagnostics
    assert r.exit_code == 1


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torch_compile_that_compiled_nothing_is_not_a_pass():
    # Before: PASS, "inductor compiled the model in 0.1 s" with 0 graphs.
    import shutil

    if shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.skip("inductor needs a C++ compiler")
    r = driftscope.guard(f"{SPEC}:script_inside", backends=["torch-compile"], runs=1)
    row = r["torch-compile"]
    assert row.status == G.UNAVAILABLE, (row.status, row.error, row.notes)
    assert "dynamo captured 0 graphs" in row.reason
    assert "torch.jit.script/freeze modules unsupported" in row.reason
    assert r.exit_code == 0  # not the user's input at fault, and not a pass of inductor
    assert not any("torch-compile matches" in f for f in r.findings)


def test_ort_fp16_counts_every_node_of_its_optimized_graph(tmp_path):
    """A conv net: ONNX Runtime's NCHWc layout (x86 with AVX2 or better) replaces the Convs by
    com.microsoft.nchwc nodes with new names and no value types; every float node is counted."""
    import onnx
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv2d(3, 16, 3, padding=1)
            self.b1 = torch.nn.BatchNorm2d(16)
            self.c2 = torch.nn.Conv2d(16, 16, 3, padding=1)
            self.c3 = torch.nn.Conv2d(16, 16, 3, padding=1)
            self.fc = torch.nn.Linear(16, 10)

        def forward(self, x):
            h = torch.relu(self.b1(self.c1(x)))
            h = h + torch.relu(self.c3(torch.relu(self.c2(h))))
            return self.fc(h.mean((2, 3)))

    torch.manual_seed(0)
    model = tmp_path / "conv.onnx"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Net().eval(), (torch.randn(1, 3, 32, 32),), str(model),
                          input_names=["x"], output_names=["y"], dynamo=False, opset_version=17)
    s = G.BACKENDS["ort-fp16"].load(str(model), str(tmp_path), 0)
    s.run({"x": np.random.default_rng(0).random((1, 3, 32, 32), np.float32)})
    q = onnx.load(str(tmp_path / "ort-fp16.optimized.onnx"), load_external_data=False)
    counted = [n for n in q.graph.node if n.op_type != "Cast"]
    nchwc = [n for n in counted if n.domain == "com.microsoft.nchwc"]
    note = next(n for n in s.notes if n.startswith("ONNX Runtime ran"))
    # Before: "ran all 3 float node(s)" (only the nodes whose values kept a type).
    assert f"ran all {len(counted)} float node(s) of its optimized graph in float32" in note, note
    if not nchwc:
        pytest.skip("this CPU's ONNX Runtime does not use the NCHWc layout (no renamed nodes)")
    assert f"com.microsoft.nchwc:Conv" in note and "names ONNX Runtime's graph optimizations" \
        in note, note
