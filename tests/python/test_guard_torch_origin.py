"""Where a PyTorch model's NaN is born (issue 33, item 6): a NaN born in a parent's own
forward, between its children (QK^T overflowing in float16 before the output projection). The
probe names the parent's forward, not the child handed the NaN, and --probe-method both shows
the bisection's cross-check in text, Markdown and HTML.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

import driftscope  # noqa: E402
from driftscope import _guard as G  # noqa: E402

MODELS = Path(__file__).resolve().parent / "models"


@pytest.fixture(scope="module")
def parent():
    r = driftscope.guard(f"{MODELS / 'torch_parent_forward.py'}:build", backends=["torch-fp16"],
                         runs=1, probe_method="both")
    return r, json.loads(r.to_json())


def test_a_nan_born_between_children_names_the_parents_forward(parent):
    r, data = parent
    jsonschema = pytest.importorskip("jsonschema")
    root = Path(__file__).resolve().parents[2]
    jsonschema.validate(data, json.loads((root / "docs" / "guard-schema.json").read_text()))
    probe = data["backends"][1]["probe"]
    assert probe["method"] == "recorded"
    origin = probe["origin"]
    # Not attn.proj, the child Linear handed the NaN: attn's own q @ k^T overflowed.
    assert (origin["node"], origin["op_type"], origin["origin"]) == ("attn", "Attn",
                                                                    "introduced")
    assert probe["first_nonfinite"]["node"] == "attn"
    assert "not introduced by attn.proj: its input 0 already has 240 NaN" in origin["detail"]
    assert "arose in attn's own forward, between its child modules" in origin["detail"]
    # The bisection over leaf modules finds none to blame: the two methods agree.
    cross = probe["cross_check"]
    assert cross["method"] == "bisect" and cross["origin"] is None
    assert "still fails with every leaf module in float32" in cross["error"]
    assert probe["agrees"] is True
    # The fallback starts from the parent and keeps it whole: verified.
    fb = data["backends"][1]["fallback"]
    assert fb["verified"] and [n["node"] for n in fb["nodes"]] == ["attn"]


def test_the_cross_check_is_in_every_rendering(parent):
    r, data = parent
    line = "torch-fp16 cross-check by bisect: agrees (the failure is not in a leaf module)"
    assert line in r.to_text()
    assert any(line in f for f in data["findings"])
    assert driftscope._text.markdown_text(line) in r.to_markdown()
    try:
        html = r.to_html()
    except (AttributeError, ImportError):  # pragma: no cover - no compiled page renderer
        pytest.skip("no compiled HTML renderer")
    assert "cross-check by bisect: agrees" in html


def test_the_cross_check_sentence_says_what_bisection_found():
    P = G._probe
    rec = P.ProbeResult(P.RECORDED, "why", origin=P.ProbeFinding("a.b", "Linear", "a.b",
                                                                "introduced"))
    rec.other = P.ProbeResult(P.BISECT, "cross-check", runs=2,
                              error="it still fails with every leaf module in float32: x")
    assert rec.agreement is False  # the recording blames a leaf; bisection says no leaf
    assert "cross-check by bisect: DISAGREES: names no single module" in \
        rec.cross_check_sentence("b")
    rec.other = P.ProbeResult(None, "cross-check", error="bisection failed: boom")
    assert rec.agreement is None
    assert rec.sentences("b")[-1] == "b cross-check: not run: bisection failed: boom."
