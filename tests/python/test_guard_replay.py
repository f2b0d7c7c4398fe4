"""guard --replay (issue 26 item 1): after a probe names an origin of a failing backend, the
guard replays there in a child process: the reference's value put back at the origin and the
candidate re-run (the share of each output's error removed), and the origin's op run alone on
the reference's inputs (introduced / inherited). One sentence in the findings, a "replay"
object in the probe's JSON; never a change of verdict or exit status.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pkgenv import env_with_package  # noqa: E402

import driftscope
from driftscope import _guard as G

ROOT = Path(__file__).resolve().parents[2]
MODELS = Path(__file__).resolve().parent / "models"


def _schema(data: dict) -> None:
    """Each probe object against the schema's probe definition."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "docs" / "guard-schema.json").read_text())
    probe = {"$ref": "#/$defs/probe", "$defs": schema["$defs"]}
    for b in data["backends"]:
        if b["probe"] is not None:
            jsonschema.validate(b["probe"], probe)


# -- PyTorch: the demo's tiny encoder in float16 ------------------------------------------------

@pytest.fixture(scope="module")
def encoder():
    pytest.importorskip("torch")
    r = driftscope.guard(f"{MODELS / 'tiny_encoder_torch.py'}:build", backends=["torch-fp16"],
                         runs=1, fallback="never")
    return r, json.loads(r.to_json())


def test_tiny_encoder_norm1_replayed_in_the_guard(encoder):
    r, data = encoder
    _schema(data)
    # The verdict is the verdicts' own.
    assert data["exit_code"] == 3 and r.backends[1].status == "NUMERICAL_INSTABILITY"
    probe = data["backends"][1]["probe"]
    assert probe["origin"]["node"] == "encoder.layers.2.norm1"
    rep = probe["replay"]
    assert rep["tensor"] == "encoder.layers.2.norm1" and rep["error"] is None
    # Every LayerNorm after block 1 squares the massive channels and overflows by itself
    # (docs/howto/replay.md): putting norm1's value back leaves the output's NaN where it is.
    assert rep["outputs"] == [{"name": "output", "error_before": "inf", "error_after": "inf",
                               "share_removed": 0.0}]
    assert rep["op"] == "introduced"
    # Two captures, the replayed run, the reference's op inputs, the op alone.
    assert rep["cost_runs"] == 5
    line = ("torch-fp16 replay: putting the reference's value back at encoder.layers.2.norm1 "
            "removes only 0.0% of output 'output''s error (NaN/Inf remain: 1536 value(s)): the "
            "error is made elsewhere too (see driftscope replay --isolate); "
            "encoder.layers.2.norm1 alone on the reference's inputs reproduces it (introduced).")
    assert line in data["findings"]
    assert driftscope._text.markdown_text(line) in r.to_markdown()
    assert "removes only 0.0% of output" in r.to_text()
    try:
        html = r.to_html()
    except (AttributeError, ImportError):  # pragma: no cover - no compiled page renderer
        pytest.skip("no compiled HTML renderer")
    assert "removes only 0.0% of output" in html  # the page prints the findings


# -- ONNX: y = (x * x) * 0.001 + x on float16 ------------------------------------------------

def _sq_model(path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxconverter_common")
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"], name="square"),
             helper.make_node("Mul", ["sq", "k"], ["small"], name="scale"),
             helper.make_node("Add", ["small", "x"], ["y"], name="add")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     [1, "n"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "n"])],
                          [helper.make_tensor("k", TensorProto.FLOAT, [], [0.001])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))


@pytest.fixture()
def sq(tmp_path: Path) -> Path:
    _sq_model(tmp_path / "sq.onnx")
    # 255.95 rounds to 256 in float16 and 256 * 256 = 65536 overflows it; the reference's
    # 255.95^2 = 65510.4 rounds to float16's largest value, 65504: it fits.
    np.save(tmp_path / "edge.npy", np.full((1, 8), 255.95, np.float32))
    # 300^2 = 90000 does not fit float16 at all, the reference's value included.
    np.save(tmp_path / "big.npy", np.full((1, 8), 300.0, np.float32))
    return tmp_path


def _guard(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = env_with_package()
    return subprocess.run([sys.executable, "-m", "driftscope", "guard", "sq.onnx", "--backends",
                           "ort-fp16-exact", "--fallback", "never", *args], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=300)


def test_onnx_overflow_replay_removes_the_error(sq):
    run = _guard(sq, "--input", "x=edge.npy", "--json", "r.json")
    assert run.returncode == 3, run.stdout + run.stderr
    data = json.loads((sq / "r.json").read_text())
    _schema(data)
    probe = data["backends"][1]["probe"]
    assert probe["origin"]["node"] == "square"
    rep = probe["replay"]
    assert rep["tensor"] == "square" and rep["op"] == "introduced" and rep["error"] is None
    (out,) = rep["outputs"]
    assert out["name"] == "y" and out["error_before"] == "inf"
    assert isinstance(out["error_after"], float) and out["error_after"] < 1e-3
    assert out["share_removed"] >= 0.99
    assert ("ort-fp16-exact replay: putting the reference's value back at square removes "
            "100.0% of output 'y''s error (NaN/Inf → finite); square alone on the reference's "
            "inputs reproduces it (introduced).") in run.stdout


def test_a_reference_value_float16_cannot_hold_is_said(sq):
    run = _guard(sq, "--input", "x=big.npy", "--json", "r.json")
    assert run.returncode == 3, run.stdout + run.stderr
    rep = json.loads((sq / "r.json").read_text())["backends"][1]["probe"]["replay"]
    assert rep["outputs"][0]["share_removed"] == 0.0
    assert ("removes only 0.0% of output 'y''s error (NaN/Inf remain: 8 value(s)): the "
            "reference's value there does not fit float16 (8 value(s) overflow when cast to "
            "it), so no replay can put it back") in run.stdout


def test_replay_never_leaves_no_replay_key(sq):
    run = _guard(sq, "--input", "x=edge.npy", "--replay", "never", "--json", "r.json")
    assert run.returncode == 3, run.stdout + run.stderr
    data = json.loads((sq / "r.json").read_text())
    probe = data["backends"][1]["probe"]
    assert probe["origin"]["node"] == "square" and "replay" not in probe
    assert "replay" not in " ".join(data["findings"])
    bad = _guard(sq, "--replay", "sometimes")
    assert bad.returncode == 2 and "--replay" in bad.stderr and "Traceback" not in bad.stderr
    with pytest.raises(G.GuardError, match="replay='sometimes': must be one of auto, never"):
        driftscope.guard(str(sq / "sq.onnx"), backends=["ort-fp16-exact"], replay="sometimes")


def test_a_replay_that_cannot_run_is_one_sentence_and_the_verdict_stands(sq, monkeypatch):
    # A probe that names a weight (the initializer k): ONNX surgery cannot replay there.
    P = G._probe

    def probe(self, row):
        return P.ProbeResult(P.BISECT, "test", origin=P.ProbeFinding("k", "Initializer", "k"))

    monkeypatch.setattr(G._investigate.Investigator, "probe", probe)
    x = np.load(sq / "edge.npy")
    r = driftscope.guard(str(sq / "sq.onnx"), backends=["ort-fp16-exact"], inputs={"x": x},
                         runs=1, fallback="never")
    assert r.exit_code == 3 and r.backends[1].status == "NUMERICAL_INSTABILITY"
    data = json.loads(r.to_json())
    _schema(data)
    rep = data["backends"][1]["probe"]["replay"]
    assert rep["error"] == "'k' is a weight (an initializer), not a computed tensor"
    assert rep["outputs"] == [] and rep["op"] is None
    lines = [f for f in data["findings"] if "replay" in f]
    assert lines == ["ort-fp16-exact replay at k could not run: 'k' is a weight (an "
                     "initializer), not a computed tensor."]


def test_replay_origin_reports_a_crash_and_what_is_not_available():
    R = G._replaying
    P = G._probe
    probe = P.ProbeResult(P.RECORDED, "t", origin=P.ProbeFinding("conv", "CONV_2D", "conv"))

    class Row:
        name, worst = "litert", None

    ctx = G._investigate.Context(model="m.tflite", family="tflite", reference="litert-ref",
                                 samples=[{}], ref_outputs=[{}], seed=0,
                                 thresholds=G._metrics.Thresholds(), policy=None, work="",
                                 keep_files=False, timeout=1.0, runs=1,
                                 runner=lambda *a, **k: {"error": "unused"})
    got = R.replay_origin(ctx, Row, probe)
    if got.error != "replay of .tflite models is not available yet":  # pragma: no cover
        assert R.importlib.util.find_spec("driftscope._replay.tflite") is not None
    else:
        assert got.sentence("litert") == ("litert replay at conv could not run: replay of "
                                           ".tflite models is not available yet.")
    ctx.family, ctx.model = "onnx", "m.onnx"
    ctx.runner = lambda *a, **k: {"error": "the backend's process was killed by SIGSEGV",
                                  "signal": "SIGSEGV", "outputs": []}
    got = R.replay_origin(ctx, Row, probe)
    assert got.to_json()["error"] == "the backend's process was killed by SIGSEGV"
    assert got.sentence("ort") == ("ort replay at conv could not run: the backend's process "
                                   "was killed by SIGSEGV.")
