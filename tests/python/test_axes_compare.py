"""Axis names in `driftscope compare` (issue 29 items 3 and 4, docs/axes.md §2 and §3.1):

* The by-name findings of `check` found in either run of a comparison by the same judge, with the
  run that has them (reference / candidate / both), in the text, JSON, Markdown and HTML reports;
  a finding only the candidate has makes a comparison that passes on numbers `diverged` (exit 1).
* The check page lists the axis names of every named tensor (JSON `tensor_axes`).
* A head-swap diagnosis reads the head count from the propagated names: a small attention with no
  num_heads anywhere, diagnosed from `heads*head_dim`; all-MiniLM-L6-v2, where the names and
  num_heads agree.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import driftscope  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def driftscope_bin() -> str:
    return os.environ.get("DRIFTSCOPE_BIN") or str(ROOT / "build" / "dev" / "driftscope")


def run(*args):
    p = subprocess.run([driftscope_bin(), *map(str, args)], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


NORM_OVER_SEQ = ("norm\tlayer_norm\tbatch,hidden,seq\t2,8,8\t2\t\t\t"
                 "x: batch,seq,hidden (declared) -> transpose: batch,seq,hidden -> batch,hidden,seq")


def write(path, ops=None, norm_ops=None):
    """Two tensors with the same values in every dump: only the recorded facts differ."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 8, 8)).astype(np.float32)
    with driftscope.Writer(str(path)) as w:
        w.write("fc", x, op_type="Linear", axes="batch,seq,hidden")
        attrs = {"axes_ops": norm_ops} if norm_ops else {}
        w.write("norm", x * 0.5, op_type="LayerNorm", axes="batch,seq,hidden", attrs=attrs)
    return path


def test_a_finding_only_in_the_candidate_fails_a_comparison_that_agrees_on_numbers(tmp_path):
    ref = write(tmp_path / "ref.tdump")
    cand = write(tmp_path / "cand.tdump", norm_ops=NORM_OVER_SEQ)
    rc, out = run("compare", ref, cand, "--no-progress", "--json", tmp_path / "r.json",
                  "--markdown", tmp_path / "r.md", "--html", tmp_path / "r.html")
    assert rc == 1, out
    first = out.splitlines()[0]
    assert first.startswith("DIVERGED: no tensor over tolerance, but 1 finding(s) by axis name only in the "
                            "candidate (first: norm_over at norm: layer_norm normalises over seq"), first
    assert "Findings by axis name (1)" in out
    line = next(ln for ln in out.splitlines() if "candidate norm_over" in ln)
    assert line.split()[:3] == ["1", "candidate", "norm_over"] and "names from: x: batch,seq,hidden" in line, line

    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["verdict"] == "diverged" and doc["exit_code"] == 1
    (f,) = doc["axes_findings"]
    assert f["code"] == "norm_over" and f["side"] == "candidate" and f["name"] == "norm" and f["pair"] == 1
    assert f["index_ref"] is None and f["index_cand"] == 1 and f["reference_message"] is None
    assert f["candidate_message"].startswith("layer_norm normalises over seq (axis 2 of batch,hidden,seq)")
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "docs" / "report-schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(doc)

    md = (tmp_path / "r.md").read_text()
    assert "### Findings by axis name\n\n- candidate `norm_over` in `norm`: layer\\_norm normalises over seq" in md, md
    html = (tmp_path / "r.html").read_text()
    assert 'class: "warn axes-finding"' in html and '"axes_findings":[{"code":"norm_over","side":"candidate"' in html


def test_a_finding_in_both_runs_is_shown_and_leaves_the_verdict(tmp_path):
    ref = write(tmp_path / "ref.tdump", norm_ops=NORM_OVER_SEQ)
    cand = write(tmp_path / "cand.tdump", norm_ops=NORM_OVER_SEQ)
    rc, out = run("compare", ref, cand, "--no-progress", "--json", tmp_path / "r.json")
    assert rc == 0, out
    assert out.splitlines()[0].endswith("; findings by axis name: 1 in both runs (first: norm_over at norm)"), out
    doc = json.loads((tmp_path / "r.json").read_text())
    (f,) = doc["axes_findings"]
    assert f["side"] == "both" and f["index_ref"] == 1 and f["index_cand"] == 1
    assert f["reference_message"] == f["candidate_message"]
    # Fixed in the candidate: shown, not a failure.
    rc, out = run("compare", ref, write(tmp_path / "fixed.tdump"), "--no-progress", "--json", "-")
    assert rc == 0, out
    doc = json.loads(out)
    assert [(f["side"], f["code"], f["candidate_message"]) for f in doc["axes_findings"]] == [
        ("reference", "norm_over", None)]
    assert doc["summary"].endswith("; findings by axis name: 1 in the reference only (first: norm_over at norm)")


def test_unpaired_tensors_are_judged_too(tmp_path):
    ref = write(tmp_path / "ref.tdump")
    cand = tmp_path / "cand.tdump"
    with driftscope.Writer(str(cand)) as w:
        w.write("extra", np.ones((2, 8, 8), np.float32), axes="batch,seq,hidden",
                attrs={"axes_ops": NORM_OVER_SEQ})
    rc, out = run("compare", ref, cand, "--no-progress", "--allow-unpaired", "--json", "-")
    doc = json.loads(out)
    assert [(f["side"], f["name"], f["pair"]) for f in doc["axes_findings"]] == [("candidate", "extra", None)]
    assert rc == 1 and doc["verdict"] == "diverged", out


# ---- with the PyTorch recorder ----------------------------------------------------------------

torch = pytest.importorskip("torch")
import driftscope.torch as dt  # noqa: E402

nn = torch.nn


def record(model, path, *inputs, kwargs=None, **kw):
    with torch.no_grad(), dt.record(model, path, **kw):
        model(*inputs, **(kwargs or {}))
    return path


class TransposedNorm(nn.Module):
    def __init__(self, n, fixed):
        super().__init__()
        torch.manual_seed(0)
        self.fixed = fixed
        self.fc = nn.Linear(n, n)
        self.norm = nn.LayerNorm(n)

    def forward(self, x):
        if self.fixed:
            return self.norm(self.fc(x))
        return self.norm(self.fc(x).transpose(1, 2)).transpose(1, 2)


def test_transposed_layernorm_in_the_candidate_is_named_by_compare(tmp_path):
    x = torch.randn(2, 8, 8)  # square: seq = hidden
    axes = {"x": "batch,seq,hidden"}
    good = record(TransposedNorm(8, True), tmp_path / "good.tdump", x, input_axes=axes)
    bad = record(TransposedNorm(8, False), tmp_path / "bad.tdump", x, input_axes=axes)
    rc, out = run("compare", good, bad, "--no-progress", "--allow-unpaired", "--json", tmp_path / "r.json")
    assert rc == 1, out
    doc = json.loads((tmp_path / "r.json").read_text())
    found = [(f["side"], f["code"], f["name"]) for f in doc["axes_findings"]]
    assert ("candidate", "norm_over", "norm") in found, found
    msg = next(f["candidate_message"] for f in doc["axes_findings"] if f["name"] == "norm")
    assert "normalises over seq" in msg and "names from: x: batch,seq,hidden (declared)" in msg, msg
    # check finds the same, worded the same: one judge.
    rc, cout = run("check", bad)
    assert rc == 1 and msg in cout, cout


def test_check_page_shows_the_names_of_every_tensor(tmp_path):
    x = torch.randn(2, 6, 8)
    path = record(TransposedNorm(8, True), tmp_path / "good.tdump", x, input_axes={"x": "batch,seq,hidden"})
    rc, out = run("check", path, "--json", tmp_path / "c.json", "--html", tmp_path / "c.html")
    assert rc == 0, out
    doc = json.loads((tmp_path / "c.json").read_text())
    named = {(r.name, r.role, r.role_index): r.axes for r in driftscope.open(path) if r.axes}
    listed = {(t["name"], t["role"], t["role_index"]): tuple(t["axes"]) for t in doc["tensor_axes"]}
    assert listed == named and len(listed) >= 3, (listed, named)
    norm = next(t for t in doc["tensor_axes"] if t["name"] == "norm")
    assert norm["axes"] == ["batch", "seq", "hidden"] and "layer_norm in norm" in norm["axes_from"]
    html = (tmp_path / "c.html").read_text()
    assert "Axis names per tensor" in html and '"tensor_axes":[' in html


class HeadMerge(nn.Module):
    """softmax(q k^T) v over inputs already split into heads, merged back with a reshape: the merge
    is named heads*head_dim. No num_heads attribute anywhere. `swap` exchanges heads 0 and 1 before
    the merge."""

    def __init__(self, swap=False):
        super().__init__()
        self.swap = swap

    def forward(self, q, k, v):
        b, h, s, d = q.shape
        p = (q @ k.transpose(-1, -2) / math.sqrt(d)).softmax(dim=-1)
        ctx = p @ v
        if self.swap:
            ctx = torch.cat([ctx[:, 1:2], ctx[:, 0:1], ctx[:, 2:]], dim=1)
        return ctx.transpose(1, 2).reshape(b, s, h * d)


def test_head_swap_diagnosed_from_the_names_without_num_heads(tmp_path):
    torch.manual_seed(1)
    q, k, v = (torch.randn(2, 4, 5, 4) for _ in range(3))
    axes = {n: "batch,heads,seq,head_dim" for n in ("q", "k", "v")}
    ref = record(HeadMerge(), tmp_path / "ref.tdump", q, k, v, input_axes=axes)
    cand = record(HeadMerge(swap=True), tmp_path / "cand.tdump", q, k, v, input_axes=axes)
    root = next(r for r in driftscope.open(ref) if r.name == "<root>" and r.role == "output")
    assert root.axes == ("batch", "seq", "heads*head_dim")
    assert not any("num_heads" in dict(r.attrs) for r in driftscope.open(ref))
    rc, out = run("compare", ref, cand, "--no-progress", "--json", "-")
    assert rc == 1, out
    layout = json.loads(out)["first_divergence"]["layout"]
    assert layout["hypothesis"] == "block_permutation" and layout["blocks"] == 4, layout
    assert layout["description"].startswith(
        "candidate = reference with heads 0 and 1 exchanged along axis 2 (heads*head_dim) (4x4 split; head count 4 "
        "from the axis names: axis 2 is heads*head_dim (heads = 4 in "), layout


def test_minilm_head_count_from_names_agrees_with_num_heads(bert, tmp_path):
    import copy

    model, ids, mask = bert
    before = model.config._attn_implementation
    model.set_attn_implementation("eager")  # the attention's softmax carries batch,heads,query,key
    try:
        inputs = {"input_ids": ids, "attention_mask": mask}  # named by the conventions only
        ref = record(model, tmp_path / "ref.tdump", kwargs=inputs)
        swapped = copy.deepcopy(model)
        attn = swapped.encoder.layer[0].attention.self
        with torch.no_grad():  # heads 0 and 1 exchanged in the query, key and value projections
            order = torch.cat([torch.arange(32, 64), torch.arange(0, 32), torch.arange(64, 384)])
            for proj in (attn.query, attn.key, attn.value):
                proj.weight.copy_(proj.weight[order])
                proj.bias.copy_(proj.bias[order])
        cand = record(swapped, tmp_path / "cand.tdump", kwargs=inputs)
    finally:
        model.set_attn_implementation(before)
    rc, out = run("compare", ref, cand, "--no-progress", "--filter", "encoder.layer.0.attention.self",
                  "--json", "-")
    assert rc == 1, out
    doc = json.loads(out)
    first = doc["first_divergence"]
    assert first["name"] == "encoder.layer.0.attention.self" and first["role_index"] == 0, first["name"]
    d = first["layout"]["description"]
    print(d)
    assert "num_heads" in dict(next(r for r in driftscope.open(ref) if r.name == first["name"]).attrs)
    assert d.startswith("candidate = reference with heads 0 and 1 exchanged along axis 2 (hidden) (12x32 split; "
                        "head count 12 from the axis names: axis 2 (hidden) was merged from heads,head_dim "
                        "(axes_from), heads = 12 in its axes_ops (softmax); num_heads agrees)"), d
    # The attention probabilities (batch,heads,query,key): the heads axis itself.
    probs = next(t for t in doc["tensors"] if t["name"] == first["name"] and t["role_index"] == 1)
    assert probs["layout"]["description"] == (
        "candidate = reference with heads 0 and 1 exchanged along axis 1 (heads) (12x1 split; head count 12 from "
        "the axis names: axis 1 is heads; num_heads agrees)"), probs["layout"]


def test_the_python_report_lists_the_findings_by_axis_name(tmp_path):
    ref = write(tmp_path / "ref.tdump")
    report = driftscope.compare(ref, write(tmp_path / "cand.tdump", norm_ops=NORM_OVER_SEQ))
    assert report.verdict == "diverged"
    (f,) = report.axes_findings
    assert (f["code"], f["side"], f["name"], f["pair"]) == ("norm_over", "candidate", "norm", 1)
    assert driftscope.compare(ref, write(tmp_path / "same.tdump")).axes_findings == []
