"""The fallback ladder and its budgets (issue 28 items 5, 6).

* torch-fp16: a module whose values overflow float16 but fit bfloat16: the ladder keeps it in
  bfloat16 (its parameters and its output bfloat16 in the built variant), float32 verified too.
* ort-qdq: a MatMul whose INT8 input loses every small value next to an outlier: INT16
  activations (A16W8, quantize_static's TensorQuantOverrides) for it pass, proven from ONNX
  Runtime's optimised graph.
* --latency-budget picks between verified candidates by their measured latency.
* --fallback-budget BUILDS[,SECONDS] (alias --fallback-runs): used builds and seconds reported,
  and when the budget stops the search, what it would have built next.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import driftscope
from driftscope._guard._fallback import choose

ROOT = Path(__file__).resolve().parents[2]
MODELS = Path(__file__).resolve().parent / "models"
BF16 = f"{MODELS / 'torch_bf16_rung.py'}:build"
BIN = Path(os.environ.get("DRIFTSCOPE_BIN", ROOT / "build" / "dev" / "driftscope"))


def _fallback(report):
    data = json.loads(report.to_json())
    row = next(b for b in data["backends"] if b["status"] != "REFERENCE")
    return row, row["fallback"]


@pytest.fixture(scope="module")
def bf16_run():
    pytest.importorskip("torch")
    r = driftscope.guard(BF16, backends=["torch-fp16"], runs=3, replay="never")
    return r, *_fallback(r)


def test_torch_fp16_ladder_stops_at_bfloat16(bf16_run):
    r, row, fb = bf16_run
    assert row["status"] != "PASS"
    assert [n["node"] for n in fb["nodes"]] == ["norm"]
    assert fb["precision"] == "bfloat16" and fb["verified"], fb["summary"]
    # Proven from the built variant: the module's parameters and its output were bfloat16.
    ev = fb["nodes"][0]["evidence"]
    assert "2 parameter(s) (proj.weight, proj.bias) bfloat16" in ev
    assert "output was bfloat16" in ev
    by = {c["precision"]: c for c in fb["candidates"]}
    assert list(by) == ["bfloat16", "float32"]
    assert by["bfloat16"]["verified"] and by["float32"]["verified"]
    assert by["bfloat16"]["cosine"] < by["float32"]["cosine"]  # bfloat16 rounds coarser
    assert "bfloat16_on_entry" in fb["recipe"] and ".to(torch.bfloat16)" in fb["recipe"]
    text = r.to_text()
    assert "keeping 1 node(s) in bfloat16 (norm: Scaled)" in text
    assert "Fallback candidates for torch-fp16" in text
    assert "Fallback candidates for torch-fp16" in r.to_markdown()


def test_the_bfloat16_recipe_keeps_the_module_in_bfloat16_and_float16_overflows(tmp_path):
    """The variant itself, built by the backend: float16 alone overflows (h * h > 65504), the
    kept module's parameters and output are bfloat16, everything else float16."""
    torch = pytest.importorskip("torch")
    from driftscope._guard.backends.registry import BACKENDS

    b = BACKENDS["torch-fp16"]
    assert b.keep_precisions() == ("bfloat16",)
    x = {"input": np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)}
    plain = b.load(BF16, str(tmp_path), 0)
    assert not np.any(plain.run(x)["output"] != plain.run(x)["output"])
    s = b.load(BF16, str(tmp_path), 0, keep_precision={"norm": "bfloat16"})
    out = s.run(x)["output"]
    assert np.isfinite(out).all()
    assert s.model.norm.proj.weight.dtype == torch.bfloat16
    assert s.model.head.weight.dtype == torch.float16
    assert s.seen["norm"] == torch.bfloat16
    assert set(s.precision_evidence(["norm"], "bfloat16")) == {"norm"}
    assert s.precision_evidence(["norm"], "float32") == {}
    with pytest.raises(ValueError, match="bfloat16"):
        b.load(BF16, str(tmp_path), 0, keep_precision={"norm": "int16"})


def _outlier_model(tmp_path):
    """x (64 features, one of them 100, the rest ~0.05) -> MatMul 'mm' (the outlier's weight row
    zero) -> Relu -> MatMul: INT8 activations round every small feature to zero."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto as T, helper as h, numpy_helper as nh

    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 16)).astype(np.float32)
    w[0] = 0
    w2 = rng.standard_normal((16, 8)).astype(np.float32)
    g = h.make_graph([h.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
                      h.make_node("Relu", ["h"], ["r"], name="relu"),
                      h.make_node("MatMul", ["r", "W2"], ["y"], name="mm2")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [1, 64])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 8])],
                     [nh.from_array(w, "W"), nh.from_array(w2, "W2")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "outlier.onnx"
    onnx.save(m, path)
    data = tmp_path / "data"
    data.mkdir()
    for k in range(4):
        x = (rng.standard_normal((1, 64)) * 0.05).astype(np.float32)
        x[0, 0] = 100
        np.savez(data / f"s{k}.npz", x=x)
    return path, data


@pytest.fixture(scope="module")
def qdq_run(tmp_path_factory):
    pytest.importorskip("onnxruntime.quantization")
    path, data = _outlier_model(tmp_path_factory.mktemp("qdq"))
    r = driftscope.guard(path, backends=["ort-qdq"], data=data, runs=20, replay="never",
                         latency_budget=10.0)
    return (path, data, r, *_fallback(r))


def test_ort_qdq_int16_activations_pass_for_the_kept_node(qdq_run):
    _, _, r, row, fb = qdq_run
    assert row["status"] == "SILENT_ZERO_VECTOR"
    assert [n["node"] for n in fb["nodes"]] == ["mm"]
    by = {c["precision"]: c for c in fb["candidates"]}
    assert list(by) == ["int16", "float32"]
    assert by["int16"]["status"] == "PASS" and by["int16"]["verified"], by["int16"]
    assert by["float32"]["verified"]
    assert 0.999 < by["int16"]["cosine"] < by["float32"]["cosine"]
    ladder = [t for t in fb["trail"] if t["step"] == "ladder: int16"]
    assert len(ladder) == 1 and ladder[0]["keep"] == ["mm"]
    if fb["precision"] == "int16":
        assert "dequantized from 16-bit integers, its weights from INT8" in \
            fb["nodes"][0]["evidence"]
        assert "in INT16 activations (A16W8) (mm: MatMul)" in r.to_text()


def test_the_int16_variant_is_proven_from_onnx_runtimes_graph(qdq_run, tmp_path):
    path, data, *_ = qdq_run
    from driftscope._guard.backends.ortqdq import OrtQdqBackend, use_row_samples

    feeds = [dict(np.load(f)) for f in sorted(data.iterdir())]
    use_row_samples(feeds)
    try:
        b = OrtQdqBackend()
        (tmp_path / "a").mkdir()
        s = b.load(str(path), str(tmp_path / "a"), 0, keep_precision={"mm": "int16"})
        s.run(feeds[0])
        assert set(s.precision_evidence(["mm"], "int16")) == {"mm"}
        assert s.float32_evidence(["mm"]) == {}  # 16-bit integer inputs are not float32
        (tmp_path / "b").mkdir()
        plain = b.load(str(path), str(tmp_path / "b"), 0)
        plain.run(feeds[0])
        assert plain.precision_evidence(["mm"], "int16") == {}  # INT8: QLinearMatMul
    finally:
        use_row_samples(None)


def test_latency_budget_picks_by_the_measured_latency(qdq_run):
    *_, fb = qdq_run
    # The choice the run made follows from its own measured numbers.
    at, why = choose(fb["candidates"], 10.0)
    assert fb["precision"] == fb["candidates"][at]["precision"]
    assert fb["choice"] == why and "--latency-budget 10%" in why
    cands = [{"precision": "int16", "verified": True, "latency_change": 0.30,
              "latency_ms": 1.3},
             {"precision": "float32", "verified": True, "latency_change": 0.05,
              "latency_ms": 1.05}]
    assert choose(cands, None)[0] == 0          # no budget: the cheapest rung
    assert choose(cands, 50.0)[0] == 0          # both within: the cheapest rung
    at, why = choose(cands, 10.0)               # INT16 over budget, float32 within
    assert at == 1 and "INT16 activations (A16W8) measured over it" in why
    at, why = choose(cands, 1.0)                # neither: the fastest, said so
    assert at == 1 and why.startswith("no verified rung is within --latency-budget 1%")
    cands[1]["verified"] = False
    assert choose(cands, 10.0)[0] == 0          # only verified candidates count


def test_builds_cap_reached_says_what_would_be_tried_next():
    pytest.importorskip("torch")
    r = driftscope.guard(BF16, backends=["torch-fp16"], runs=1, replay="never",
                         fallback_runs=1)
    _, fb = _fallback(r)
    budget = fb["budget"]
    assert budget["builds"] == 1 and budget["max_builds"] == 1
    assert budget["stopped"] == "the cap of 1 variant builds was reached"
    assert budget["next"] == "the 1 node(s) in bfloat16 instead of float32"
    assert fb["precision"] == "float32" and fb["verified"]
    assert budget["seconds"] > 0 and budget["verification_builds"] == 1
    text = r.to_text()
    assert ("the fallback search stopped: the cap of 1 variant builds was reached; it would "
            "have tried next the 1 node(s) in bfloat16 instead of float32") in text
    assert "budget used: 1 of 1 builds (+1 verification)" in text


def test_seconds_budget_stops_the_search():
    pytest.importorskip("torch")
    r = driftscope.guard(BF16, backends=["torch-fp16"], runs=1, replay="never",
                         fallback_seconds=1e-3)
    _, fb = _fallback(r)
    assert fb["budget"]["builds"] == 1 and fb["budget"]["max_seconds"] == 1e-3
    assert fb["budget"]["stopped"].startswith("the budget of 0.001 s was spent")
    assert "bfloat16" in fb["budget"]["next"]


def _cli(*args):
    if not BIN.exists():
        pytest.skip(f"driftscope binary not built: {BIN}")
    env = dict(os.environ, DRIFTSCOPE_PYTHON=sys.executable, NO_COLOR="1")
    here = str(Path(driftscope.__file__).parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in [here, env.get("PYTHONPATH", "")] if p)
    return subprocess.run([str(BIN), "guard", *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.parametrize("flag,value,says", [
    ("--fallback-budget", "0", "--fallback-budget '0': expected BUILDS[,SECONDS]"),
    ("--fallback-budget", "5,x", "--fallback-budget '5,x': expected BUILDS[,SECONDS]"),
    ("--fallback-budget", "5,0", "--fallback-budget '5,0': expected BUILDS[,SECONDS]"),
    ("--fallback-runs", "-1", "--fallback-budget '-1': expected BUILDS[,SECONDS]"),
    ("--latency-budget", "nan", "--latency-budget nan: must be a finite percentage >= 0"),
])
def test_bad_budgets_are_one_line_exit_2(flag, value, says):
    proc = _cli("--model", BF16, flag, value)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"driftscope guard: error: {says}"), proc.stderr


def test_cli_fallback_budget_reaches_the_json(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "r.json"
    proc = _cli("--model", BF16, "--backends", "torch-fp16", "--runs", "1", "--replay", "never",
                "--fallback-budget", "1,600", "--latency-budget", "25", "--json", out)
    assert proc.returncode == 1, proc.stderr
    fb = json.loads(out.read_text())["backends"][1]["fallback"]
    assert fb["budget"]["max_builds"] == 1 and fb["budget"]["max_seconds"] == 600
    assert fb["latency_budget"] == 25


def test_litert_a8w8_ladder_gives_the_kept_ops_int16_activations(tmp_path):
    """ai-edge-quantizer's static INT8: an activation of 1000 beside ones of about 1 (made by
    `shift`, read by `first`): the kept ops get an a16w8 recipe entry, proven from the built
    .tflite (INT16 quantized activations, integer weights), and the recipe's calls rebuild it."""
    pytest.importorskip("ai_edge_litert")
    pytest.importorskip("ai_edge_quantizer")
    sys.path.insert(0, str(MODELS))
    import tflite_act_outlier

    model = tmp_path / "act.tflite"
    model.write_bytes(tflite_act_outlier.build())
    r = driftscope.guard(model, backends=["litert-a8w8"], runs=3, replay="never")
    row, fb = _fallback(r)
    assert row["status"] == "PRECISION_DEGRADATION"
    assert sorted(n["node"] for n in fb["nodes"]) == ["first", "shift"]
    assert fb["precision"] == "int16" and fb["verified"], fb["summary"]
    ev = {n["node"]: n["evidence"] for n in fb["nodes"]}
    assert "FULLY_CONNECTED 'first'" in ev["first"] and "INT16 quantized activations" in \
        ev["first"] and "INT8 weights" in ev["first"].replace("INT64/INT8", "INT8")
    by = {c["precision"]: c for c in fb["candidates"]}
    assert list(by) == ["int16", "float32"] and by["float32"]["verified"]
    assert "qt.add_static_config(regex='(?:^|;)(?:first|shift);'" in fb["recipe"]
    assert "activation_num_bits=16, weight_num_bits=8" in fb["recipe"]

    # The recipe's own calls, run here on the guard's first sample, give a passing variant.
    from ai_edge_litert.interpreter import Interpreter
    from ai_edge_quantizer import quantizer, recipe

    x = np.random.default_rng(1).standard_normal((1, 16)).astype(np.float32)

    def run(path):
        it = Interpreter(model_path=str(path))
        it.allocate_tensors()
        d, o = it.get_input_details()[0], it.get_output_details()[0]
        v = x
        if d["quantization"][0]:  # the quantizer may quantize the graph input itself
            sc, z = d["quantization"]
            info = np.iinfo(d["dtype"])
            v = np.clip(np.round(x / sc) + z, info.min, info.max).astype(d["dtype"])
        it.set_tensor(d["index"], v)
        it.invoke()
        y = it.get_tensor(o["index"]).astype(np.float64).ravel()
        return (y - o["quantization"][1]) * o["quantization"][0] if o["quantization"][0] else y

    from driftscope._guard.backends import litert_quant as lq

    signed, _ = lq._signed(model.read_bytes(), lq._Built(model.read_bytes()))
    (tmp_path / "signed.tflite").write_bytes(signed)
    def built(a16):
        qt = quantizer.Quantizer(str(tmp_path / "signed.tflite"), recipe.static_wi8_ai8())
        if a16:
            qt.add_static_config(regex=lq._scope_regex(["first", "shift"]), operation_name="*",
                                 activation_num_bits=16, weight_num_bits=8)
        cal = qt.calibrate({"serving_default": [{"input": x}]}, num_threads=1)
        path = tmp_path / f"a16-{a16}.tflite"
        path.write_bytes(bytes(qt.quantize(cal, enable_progress_report=False).quantized_model))
        got = run(path)
        return float(ref @ got / np.linalg.norm(ref) / np.linalg.norm(got))

    ref = run(model)
    assert built(True) > 0.999 and not built(False) >= 0.99  # INT8 alone: all zeros here (NaN)


def test_with_a_metric_each_candidate_is_scored_and_judged_by_its_drop(tmp_path):
    """--metric: every candidate's drop is in the table and the JSON, and a candidate whose drop
    exceeds --max-drop is not verified, whatever its cosine (here neg-max-abs with a drop limit
    no rounding meets)."""
    pytest.importorskip("onnxruntime.quantization")
    path, data = _outlier_model(tmp_path)
    r = driftscope.guard(path, backends=["ort-qdq"], data=data, runs=2, replay="never",
                         metric="neg-max-abs", max_drop=1e-9)
    _, fb = _fallback(r)
    by = {c["precision"]: c for c in fb["candidates"]}
    assert list(by) == ["int16", "float32"]
    for c in by.values():
        assert c["status"] == "PASS" and c["proven"] and c["metric_drop"] > 1e-9
        assert not c["verified"] and "the task metric drops" in c["error"]
    assert not fb["verified"] and "NOT verified (the task metric drops" in fb["summary"]
    assert "metric drop" in r.to_text() and "| metric drop |" in r.to_markdown()
    r2 = driftscope.guard(path, backends=["ort-qdq"], data=data, runs=2, replay="never",
                          metric="top1")
    _, fb2 = _fallback(r2)
    assert fb2["verified"] and [c["metric_drop"] for c in fb2["candidates"]] == [0.0, 0.0]
