"""Delegated-range bisection of a .tflite model (issue 27 item 3): only a range of operators on
the candidate (XNNPACK), the rest on the reference kernels, chained from surgery's pieces; the
guard's probe runs it beside the prefix bisection and says which method found the answer.
Before _guard/_delegated.py none of this existed: the import below failed, and the guard's
report of the planted model had no cross-check (probe.other was None)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

import driftscope  # noqa: E402
from driftscope._guard import _delegated  # noqa: E402
from driftscope._guard._metrics import Thresholds  # noqa: E402
from driftscope._guard._probe import BISECT, ProbeResult, with_delegated  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))
import tflite_planted  # noqa: E402

OPS = len(tflite_planted.OPS)
LIMIT = math.ceil(math.log2(OPS)) + 2


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    path = tmp_path_factory.mktemp("planted") / "planted.tflite"
    path.write_bytes(tflite_planted.build())
    return str(path)


def _x():
    return {"input": np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32)}


def test_delegated_range_bisection_names_the_planted_op(planted, tmp_path):
    out = _delegated.delegated_range(planted, "litert-ref", "litert", _x(), Thresholds(),
                                     str(tmp_path))
    assert out["found"] is not None, out
    assert out["found"]["node"] == "planted" and out["found"]["index"] == 4
    assert out["range"] == [4, 4]
    assert len(out["runs"]) <= LIMIT, out["runs"]
    # The first run delegates everything (the failure reproduces through the chain), the last
    # the planted op alone.
    assert out["runs"][0] == {"range": [0, OPS - 1], "status": "PRECISION_DEGRADATION"}
    assert out["runs"][-1] == {"range": [4, 4], "status": "PRECISION_DEGRADATION"}
    # The reference's kernels on both sides of every cut: the chain is the whole model.
    same = _delegated.delegated_range(planted, "litert-ref", "litert-ref", _x(), Thresholds(),
                                      str(tmp_path / "same"))
    assert same["found"] is None and len(same["runs"]) == 1
    assert same["why"].startswith("every operator delegated to litert-ref through the chained "
                                  "pieces passes")


def test_a_gpu_candidate_stays_unavailable(planted, tmp_path):
    out = _delegated.delegated_range(planted, "litert-ref", "litert-gpu", _x(), Thresholds(),
                                     str(tmp_path))
    assert out["found"] is None and out["runs"] == []
    assert out["unavailable"].startswith("litert-gpu is unavailable here: "), out


def test_the_guard_report_shows_which_method_found_it(planted, tmp_path):
    r = driftscope.guard(planted, backends=["litert"], runs=1, probe_method="bisect")
    p = r["litert"].probe
    assert p.method == BISECT and p.origin.node == "planted"
    d = p.other
    assert d is not None and d.method == "delegated-range", d
    assert d.origin.node == "planted" and d.runs <= LIMIT and p.agrees is True
    text = r.to_text()
    assert f"litert cross-check by delegated-range: agrees (planted, {d.runs} runs)." in text, \
        text
    js = json.loads(json.dumps(p.to_json()))
    assert js["cross_check"]["method"] == "delegated-range"
    assert js["cross_check"]["origin"]["node"] == "planted" and js["agrees"] is True


def test_where_prefix_bisection_names_nothing_the_answer_is_the_delegated_range_s(planted,
                                                                                   tmp_path):
    out = {"delegated": _delegated.delegated_range(planted, "litert-ref", "litert", _x(),
                                                   Thresholds(), str(tmp_path))}
    prefix = ProbeResult(BISECT, "--probe-method bisect", 0, runs=4,
                         error="the whole model cut at its last operator passes")
    res = with_delegated(prefix, out, "litert", "litert-ref", "--probe-method bisect", 0)
    assert res.method == "delegated-range" and res.origin.node == "planted"
    assert res.other is prefix
    said = " ".join(res.sentences("litert"))
    assert ("litert probe (bisection with one range of operators delegated to litert and the "
            f"rest on litert-ref ({res.runs} chained runs); --probe-method bisect) names planted "
            "(FULLY_CONNECTED)") in said, said
    assert "prefix bisection named no operator, so this answer is the delegated-range " \
           "bisection's" in said
    assert ("litert cross-check by bisect: names no single module (the whole model cut at its "
            "last operator passes), 4 runs.") in said
    assert res.to_json()["method"] == "delegated-range"


def test_a_model_with_refused_operators_says_why_no_delegated_range_ran(tmp_path):
    model = tmp_path / "streaming.tflite"
    model.write_bytes(tflite_planted.build(stateful=True))
    p = driftscope.guard(model, backends=["litert"], runs=1,
                         probe_method="bisect")["litert"].probe
    assert p.origin.node == "planted"  # the prefix bisection's answer stands
    assert p.other.method == "delegated-range" and p.other.origin is None
    assert p.other.error.startswith("delegated-range bisection chains pieces around every "
                                    "operator, and op 0 (CALL_ONCE) runs subgraph(s) 1"), \
        p.other.error
