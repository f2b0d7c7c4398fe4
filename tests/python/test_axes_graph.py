"""Axis names that flow over a graph's op list (issue 29): the ONNX Runtime recorder applies the
rule table of axes_rules op by op (docs/axes.md §1.2), so ONNX records carry the same names,
trails and `axes_ops` facts as PyTorch's and `driftscope check` judges them by the same rules.

* GraphNames (framework-free): names and trails per value, "names stop" where an op has no rule,
  events as axes_ops lines; where a graph input's names come from.
* A transposed LayerNorm behind a reshape whose shape is computed at run time (ONNX shape
  inference cannot follow it): flagged by name; the corrected model is CLEAN.
* all-MiniLM-L6-v2 through ONNX Runtime with only input_ids/attention_mask: >= 95% of its float
  node outputs named, the heads split named inside attention, scores query,key with the softmax
  over key, and no finding by name.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import driftscope
from driftscope.recorders import axes_rules as R
from driftscope.recorders.axes_graph import GraphNames, input_names

ROOT = Path(__file__).resolve().parents[2]


def driftscope_bin() -> str:
    return os.environ.get("DRIFTSCOPE_BIN") or str(ROOT / "build" / "dev" / "driftscope")


def check(path, *flags):
    p = subprocess.run([driftscope_bin(), "check", *flags, str(path)], capture_output=True,
                       text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


# ---- GraphNames: the bookkeeping between a graph's values and the rule table ------------------

def test_graph_names_follow_rules_and_stop_where_none_applies():
    g = GraphNames()
    g.declare("x", ("batch", "seq", "hidden"), (2, 6, 8), "declared")
    g.apply("permute", "Transpose", "t", ["x"], [g.arg("x", (2, 6, 8)), [0, 2, 1]], {},
            [("xt", (2, 8, 6))])
    g.apply("layer_norm", "LayerNormalization", "ln", ["xt"], [g.arg("xt", (2, 8, 6)), [0]], {},
            [("n", (2, 8, 6))])
    g.apply(None, "CumSum", "cs", ["n"], [], {}, [("c", (2, 8, 6))])
    g.apply("relu", "Relu", "r", ["c"], [g.arg("c", (2, 8, 6))], {}, [("r", (2, 8, 6))])
    axes, attrs = g.attrs("n")
    assert axes == ["batch", "hidden", "seq"]
    assert attrs["axes_from"] == ("x: batch,seq,hidden (declared) -> Transpose at t: "
                                  "batch,seq,hidden -> batch,hidden,seq -> LayerNormalization at "
                                  "ln: batch,hidden,seq")
    line = attrs["axes_ops"].split("\t")
    assert line[:5] == ["norm", "LayerNormalization", "batch,hidden,seq", "2,8,6", "2"], line
    assert g.attrs("c") == (None, {"axes_stop": "names stop at CumSum at cs (no rule)"})
    assert g.attrs("r") == (None, {"axes_stop": "names stop at CumSum at cs (no rule)"})
    # a rule that fails on odd arguments is no rule, never an exception
    g.apply("permute", "Transpose", "bad", ["x"], [g.arg("x", (2, 6, 8)), [0, 7]], {},
            [("y", (2, 8, 6))])
    assert g.attrs("y")[0] is None


def test_where_graph_input_names_come_from():
    assert input_names("x", 2, {"x": ("a", "b")}, ["batch", "seq"]) == (("a", "b"), "declared")
    assert input_names("x", 2, {}, ["batch", "seq"]) == (("batch", "seq"), "dim_param")
    assert input_names("input_ids", 2, {}, [None, 7]) == (("batch", "seq"), "convention")
    assert input_names("input_ids", 3, {}, None) == (None, "")  # rank differs: no convention
    assert input_names("x", 3, {}, ["batch", None, 8]) == (("batch", None, None), "dim_param")
    assert R.CONVENTIONS["attention_mask"] == ("batch", "seq")


# ---- ONNX Runtime -------------------------------------------------------------------------------

def _export(tmp_path, model, x, name="m.onnx"):
    torch = pytest.importorskip("torch")
    path = tmp_path / name
    with torch.no_grad():
        torch.onnx.export(model, (x,), str(path), input_names=["x"], opset_version=17,
                          dynamo=False)
    return path


@pytest.mark.parametrize("fixed", [False, True], ids=["bug", "fixed"])
def test_onnx_transposed_norm_behind_a_runtime_reshape_is_found_by_name(tmp_path, fixed):
    pytest.importorskip("onnxruntime")
    torch = pytest.importorskip("torch")
    import driftscope.onnxruntime as dort

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)
            self.norm = torch.nn.LayerNorm(8)  # seq = hidden = 8: shapes cannot tell

        def forward(self, x):
            h = self.fc(x)
            # a reshape by run-time sizes: Shape -> Gather -> Concat -> Reshape in the graph
            h = h.reshape(h.shape[0], h.shape[1], 2, -1).reshape(h.shape[0], h.shape[1], -1)
            return self.norm(h) if fixed else self.norm(h.transpose(1, 2)).transpose(1, 2)

    x = torch.randn(2, 8, 8)
    path = _export(tmp_path, M().eval(), x)
    out = tmp_path / "r.tdump"
    dort.record(str(path), {"x": x.numpy()}, out, input_axes={"x": "batch,seq,hidden"},
                check_observer=False)
    rc, text = check(out)
    if fixed:
        assert rc == 0, text
        return
    assert rc == 1, text
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("norm_over"))
    assert "LayerNormalization normalises over seq" in line, line
    assert "x: batch,seq,hidden (declared)" in line and "Reshape" in line, line


def _share_named(path):
    recs = [r for r in driftscope.open(path) if dict(r.attrs).get("ds.kind") == "float"]
    return sum(1 for r in recs if r.axes) / len(recs), recs


@pytest.mark.parametrize("declare", [True, False], ids=["declared", "dim_params"])
def test_minilm_onnx_names_flow_through_every_layer(tmp_path, minilm_onnx, bert, declare):
    pytest.importorskip("onnxruntime")
    import driftscope.onnxruntime as dort

    _, ids, mask = bert
    out = tmp_path / "minilm.tdump"
    axes = {"input_ids": "batch,seq", "attention_mask": "batch,seq"} if declare else None
    dort.record(str(minilm_onnx), {"input_ids": ids.numpy(), "attention_mask": mask.numpy()},
                out, input_axes=axes, check_observer=False)
    share, recs = _share_named(out)
    # measured: 264 of 266 float node outputs (the token-type and position embeddings look up
    # indices computed from shapes, which carry no names)
    assert share >= 0.95, share
    by = {r.name: r for r in recs}
    att = "encoder.layer.3.attention.self"
    assert by[f"{att}.Reshape"].axes == ("batch", "seq", "heads", "head_dim")
    assert by[f"{att}.MatMul"].axes == ("batch", "heads", "query", "key")
    ops = dict(by[f"{att}.Softmax"].attrs)["axes_ops"].split("\t")
    assert ops[:5] == ["softmax", "Softmax", "batch,heads,query,key",
                       f"{ids.shape[0]},12,{ids.shape[1]},{ids.shape[1]}", "3"], ops
    assert by[att].axes == ("batch", "seq", "hidden")
    trail = dict(by[att].attrs)["axes_from"]
    assert "batch,seq,heads,head_dim -> batch,seq,hidden" in trail, trail
    how = "declared" if declare else "dim_param"
    assert trail.startswith(f"input_ids: batch,seq ({how})"), trail
    assert by["encoder.layer.0.intermediate"].axes == (
        "batch", "seq", "encoder.layer.0.intermediate.dense.out")
    assert by["pooler"].axes == ("batch", "hidden")
    # the export's mask and shape plumbing (-inf padding, constant shape arithmetic) trips the
    # value checks with or without names; by name there is nothing to report
    rc, text = check(out, "--ignore", "nonfinite", "--ignore", "all_zero", "--ignore",
                     "constant", "--ignore", "dead_channels")
    assert rc == 0, text
