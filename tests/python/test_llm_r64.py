"""The float64 ordering rule on generations (issue 31, must-show 1; docs/howto/llm.md "float32
against bfloat16"): the tiny hash-initialised Llama, float32 vs bfloat16 teacher-forced, flips a
real token at step 3 of NEAR_TIE_PROMPT; `llm-compare --reference64` names the first layer
beyond the rule at that step, or says none is and the flip is within rounding, with the logit
margin evidence, in text, JSON and Markdown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))

import driftscope  # noqa: E402
import tiny_llm  # noqa: E402

from driftscope import llm  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FLIP = 3  # the step where bfloat16's greedy token differs on NEAR_TIE_PROMPT


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("r64")
    model, prompt = tiny_llm.llama_near_tie()
    faulty, _ = tiny_llm.llama_near_tie_o_proj_fault()
    llm.record(model, prompt, d / "ref.tdump", new_tokens=8)
    llm.record(model, prompt, d / "bf16.tdump", backend="hf-bf16", teacher=d / "ref.tdump")
    llm.record(model, prompt, d / "f64.tdump", dtype=torch.float64, teacher=d / "ref.tdump")
    llm.record(faulty, prompt, d / "fault.tdump", backend="hf-bf16", teacher=d / "ref.tdump")
    return d


def _py(*args, cwd):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(driftscope.__file__).parents[1]), str(ROOT / "tests" / "python" / "models")]))
    return subprocess.run([sys.executable, "-m", "driftscope", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def test_bf16_flips_a_real_token_that_float64_agrees_with_float32_on(runs):
    rep = llm.compare(runs / "ref.tdump", runs / "bf16.tdump", reference64=runs / "f64.tdump")
    assert rep.teacher_forced and rep.first_flip == FLIP
    s = rep.steps[FLIP]
    assert (s["ref_token"], s["cand_token"]) == (62, 5)
    at = rep.reference64["steps"][0]
    assert at["step"] == FLIP and at["why"] == "first_flip"
    ev = at["evidence"]
    # float64 picks float32's token; the margin is far below bfloat16's logit error and far
    # above float32's: float32 is right, bfloat16 rounded the two logits onto one value
    assert ev["float64_token"] == 62 and ev["pair"] == [62, 5]
    assert ev["reference_top2"] == [62, 5] and 5e-5 < ev["reference_margin"] < 5e-4
    assert abs(ev["float64_margin"] - ev["reference_margin"]) < 1e-6
    assert ev["candidate_margin"] == 0.0
    assert ev["logits_max_error_candidate"] > 10 * ev["reference_margin"]
    assert ev["logits_max_error_reference"] < ev["reference_margin"] / 100
    lr = ev["logits_rule"]
    assert lr["k"] == 3 and lr["error_reference"] < 1e-7 < lr["error_candidate"]


def test_default_floor_names_the_first_layer_beyond_the_rule(runs):
    """The recorder writes no data flow, so the floor is one bfloat16 rounding; layer 0's o_proj
    rounds input, weight and output, and is the first past it at the flipped step."""
    rep = llm.compare(runs / "ref.tdump", runs / "bf16.tdump", reference64=runs / "f64.tdump")
    at = rep.reference64["steps"][0]
    assert at["verdict"] == "beyond_rule"
    lay = at["layer"]
    assert lay["name"] == f"step.{FLIP}/model.layers.0.self_attn.o_proj"
    assert lay["k"] == 3 and lay["error_reference"] < 1e-8
    assert lay["error_candidate"] > lay["limit"] and 1.0 < lay["ratio"] < 2.0
    # and the first step beyond tolerance (the rule's, over every step) is judged too
    fc = rep.reference64["steps"][1]
    assert fc["why"] == "first_crossing" and fc["step"] == rep.first_crossing["step"] == 0
    assert fc["layer"]["name"] == rep.first_crossing["name"]
    text = rep.to_text()
    assert (f"at step {FLIP} (the first flipped token): first layer beyond the rule: "
            f"step.{FLIP}/model.layers.0.self_attn.o_proj") in text
    assert "evidence: the reference's top-2 margin" in text


def test_three_roundings_of_floor_the_flip_is_within_rounding(runs):
    rep = llm.compare(runs / "ref.tdump", runs / "bf16.tdump", reference64=runs / "f64.tdump",
                      r64_floor=3)
    assert rep.first_flip == FLIP and rep.first_crossing is None
    assert len(rep.reference64["steps"]) == 1 and rep.reference64["r64_floor"] == 3
    at = rep.reference64["steps"][0]
    assert at["layer"] is None and at["verdict"] == "within_rounding"
    lr = at["evidence"]["logits_rule"]
    assert lr["error_candidate"] <= lr["limit"]
    assert (f"at step {FLIP} (the first flipped token): no layer beyond the float64 ordering "
            f"rule: the flip is within rounding") in rep.to_text()


def test_planted_fault_is_named_beyond_the_rule(runs):
    """Layer 1's o_proj x1.5 in the bfloat16 candidate: the same floor that passes bfloat16's
    rounding names the fault, at the flipped step and at step 0, at ~40x its limit."""
    rep = llm.compare(runs / "ref.tdump", runs / "fault.tdump", reference64=runs / "f64.tdump",
                      r64_floor=3)
    steps = {e["why"]: e for e in rep.reference64["steps"]}
    for why, k in (("first_flip", rep.first_flip), ("first_crossing", 0)):
        lay = steps[why]["layer"]
        assert steps[why]["step"] == k and steps[why]["verdict"] == "beyond_rule"
        assert lay["name"] == f"step.{k}/model.layers.1.self_attn.o_proj"
        assert lay["ratio"] > 10
    assert steps["first_flip"]["evidence"]["candidate_margin"] < 0


def test_cli_text_json_markdown(runs, tmp_path, capfd, monkeypatch):
    from driftscope.__main__ import main

    model_fn = str(ROOT / "tests/python/models/tiny_llm.py")
    # `record llm --dtype float64` through python -m driftscope's entry point in this process
    # (test_llm.py's test_cli_record_and_compare runs `record llm` as a command; a subprocess
    # re-imported torch and transformers, ~6 CPU-seconds); llm-compare below runs as one.
    monkeypatch.chdir(tmp_path)
    capfd.readouterr()
    code = main(["record", "llm", "--model", f"{model_fn}:llama_near_tie", "--dtype", "float64",
                 "--teacher", str(runs / "ref.tdump"), "-o", "f64cli.tdump"])
    assert code == 0, capfd.readouterr().err
    with driftscope.open(tmp_path / "f64cli.tdump") as d:
        assert d.metadata["precision"] == "float64"
        assert d.get("step.0/logits").dtype == "float64"
    p = _py("llm-compare", str(runs / "ref.tdump"), str(runs / "bf16.tdump"), "--reference64",
            "f64cli.tdump", "--json", "r.json", "--markdown", "r.md", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert f"first layer beyond the rule: step.{FLIP}/model.layers.0.self_attn.o_proj" in p.stdout
    r64 = json.loads((tmp_path / "r.json").read_text())["reference64"]
    assert r64["path"] == "f64cli.tdump" and r64["steps"][0]["verdict"] == "beyond_rule"
    assert set(r64["steps"][0]["evidence"]) >= {"reference_margin", "float64_token",
                                                "candidate_margin", "logits_rule"}
    md = (tmp_path / "r.md").read_text()
    assert "## float64 ordering rule" in md and "| step | ref | cand |" in md
    assert f"`step.{FLIP}/model.layers.0.self_attn.o_proj`" in md or \
        f"step.{FLIP}/model.layers.0.self_attn.o_proj" in md
    p = _py("llm-compare", str(runs / "ref.tdump"), str(runs / "bf16.tdump"), "--reference64",
            "f64cli.tdump", "--r64-floor", "3", "--r64-k", "bf16=3", cwd=tmp_path)
    assert p.returncode == 1 and "the flip is within rounding" in p.stdout, p.stderr


@pytest.mark.parametrize("case, message", [
    ("free64", "step 4 was fed token"),
    ("float32", "recorded in float32, not float64"),
    ("short", "has no step 3"),
    ("onto", "is the input file"),
])
def test_bad_reference64(runs, tmp_path, case, message):
    model, prompt = tiny_llm.llama_near_tie()
    r64 = tmp_path / "x64.tdump"
    args = ["--json", str(tmp_path / "out.json")]
    if case == "free64":  # teacher-forced with the candidate's tokens, not the reference's
        llm.record(model, prompt, r64, dtype=torch.float64, teacher=runs / "bf16.tdump")
    elif case == "float32":
        r64 = runs / "ref.tdump"
    elif case == "short":
        llm.record(model, prompt, r64, dtype=torch.float64, teacher=runs / "ref.tdump",
                   new_tokens=2)
    else:
        r64 = runs / "f64.tdump"
        args = ["--markdown", str(r64)]
    before = Path(r64).read_bytes()
    p = _py("llm-compare", str(runs / "ref.tdump"), str(runs / "bf16.tdump"), "--reference64",
            str(r64), *args, cwd=tmp_path)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert message in lines[0], lines[0]
    assert Path(r64).read_bytes() == before and not (tmp_path / "out.json").exists()
