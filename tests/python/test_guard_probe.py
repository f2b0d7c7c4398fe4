"""driftscope guard's probe and verified FP32 fallback (issue 8, items 6 and 7), with real runtimes.

* The demo's tiny encoder in PyTorch (tests/python/models/tiny_encoder_torch.py): torch-fp16 is
  NUMERICAL_INSTABILITY, the probe names the overflowing LayerNorm, the fallback keeps a few
  LayerNorms in float32 and is verified; removing any node of the set brings the NaN back, and the
  printed recipe, executed, gives a finite model.
* ONNX: dynamic INT8 degrades a projection; recorded probe and bisection both name it, the
  fallback excludes it from quantization with evidence. ort-fp16 on the CPU: the probe says float16
  arithmetic was not exercised at the origin.
* A backend that cannot expose intermediates is bisected.

These run the how-to's sections 8 and 9 as written (docs/howto/guard.md) and check their reports.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxconverter_common")

import driftscope  # noqa: E402
from driftscope import _guard as G  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MODELS = Path(__file__).resolve().parent / "models"
sys.path.insert(0, str(MODELS))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import guard_models as gm  # noqa: E402

BIN = Path(os.environ.get("DRIFTSCOPE_BIN", ROOT / "build" / "dev" / "driftscope")).absolute()
PAGE = ROOT / "docs" / "howto" / "guard.md"


def _probe_sections(heading: str) -> bool:
    return heading.startswith(("8.", "9."))


@pytest.fixture(scope="module")
def howto(tmp_path_factory):
    """Runs the how-to's probe and fallback sections once; their reports are checked below."""
    pytest.importorskip("torch")
    from test_howtos import run_page

    d = tmp_path_factory.mktemp("probe-howto")
    shutil.copy(MODELS / "tiny_encoder_torch.py", d / "tiny_encoder.py")
    ran = run_page(PAGE, d, sections=_probe_sections)
    assert ran == ["driftscope guard --model tiny_encoder.py:build --backends "
                   "torch-fp16,torch-bf16 --out probe-out --json tiny.json",
                   "python",
                   "driftscope guard outlier.onnx --backends ort-int8 --probe-method both "
                   "--json int8.json --markdown int8.md --html int8.html",
                   "driftscope guard storage.onnx --backends ort-fp16 --json fp16.json"]
    return d


def _schema_check(data):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "docs" / "guard-schema.json").read_text())
    jsonschema.validate(data, schema)


def _cosine(a, b):
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# -- the tiny encoder: a genuine float16 overflow --------------------------------------------------

def test_tiny_encoder_fp16_is_probed_to_the_layernorm_and_fixed(howto):
    data = json.loads((howto / "tiny.json").read_text())
    _schema_check(data)
    rows = {b["name"]: b for b in data["backends"]}
    fp16, bf16 = rows["torch-fp16"], rows["torch-bf16"]
    assert fp16["status"] == "NUMERICAL_INSTABILITY" and data["exit_code"] == 3
    assert bf16["status"] == "PASS" and bf16["probe"] is None and bf16["fallback"] is None
    probe = fp16["probe"]
    assert probe["method"] == "recorded" and "bit-identical" in probe["why"]
    origin = probe["origin"]
    assert (origin["node"], origin["op_type"], origin["origin"]) == (
        "encoder.layers.2.norm1", "LayerNorm", "introduced")
    assert probe["first_nonfinite"]["node"] == "encoder.layers.2.norm1"
    assert "1024 NaN" in origin["detail"]  # [1, 16, 64]: every value of the LayerNorm's output
    # The recordings are kept (--out) and say the same through driftscope compare itself.
    ref = howto / "probe-out" / "torch" / "sample1.tdump"
    cand = howto / "probe-out" / "torch-fp16" / "sample1.tdump"
    assert probe["files"] == {"reference": str(Path("probe-out") / "torch" / "sample1.tdump"),
                              "candidate": str(Path("probe-out") / "torch-fp16" / "sample1.tdump")}
    report = driftscope.compare(ref, cand, min_cosine=0.99, allow_unpaired=True)
    assert report.first_nonfinite.name == "encoder.layers.2.norm1"
    # Nothing before it is non-finite in float16: the probe did not skip an earlier NaN. And
    # the backend really computed in float16: every module's output is a float16 tensor.
    with driftscope.open(cand) as d:
        before = [r for r in d if r.exec_index < report.first_nonfinite.index_cand]
        assert before and all(np.isfinite(r.numpy().astype(np.float64)).all() for r in before)
        assert d.record("encoder.layers.1.mlp.fc2").dtype == "f16"
        assert d.record("encoder.layers.2.norm1").dtype == "f16"

    fb = fp16["fallback"]
    assert fb["verified"] and fb["status_after"] == "PASS" and fb["cosine_after"] > 0.999
    nodes = [n["node"] for n in fb["nodes"]]
    assert nodes[0] == "encoder.layers.2.norm1" and len(nodes) <= 6
    assert all(n["op_type"] == "LayerNorm" for n in fb["nodes"])
    # The precision ladder (issue 28 item 5) keeps the set in the cheapest precision that
    # verifies: bfloat16 where its LayerNorm statistics pass, else float32; the evidence and the
    # recipe say which.
    kept = fb.get("precision") or "float32"
    assert kept in ("float32", "bfloat16"), kept
    for n in fb["nodes"]:
        assert f"output was {kept}" in n["evidence"], n["evidence"]
    assert set(fb["removal_fails"]) == set(nodes)
    assert "restores cosine" in fb["summary"] and "verified" in fb["summary"]
    assert ("model.get_submodule(name).float()" if kept == "float32"
            else "torch.bfloat16") in fb["recipe"], fb["recipe"]


def test_removing_a_fallback_node_brings_the_failure_back(howto):
    """Independent of the guard's own search: every node of the set is needed, the whole set
    is enough, built through the backend interface in this process."""
    torch = pytest.importorskip("torch")
    nodes = [n["node"] for n in json.loads((howto / "tiny.json").read_text())
             ["backends"][1]["fallback"]["nodes"]]
    spec = f"{howto / 'tiny_encoder.py'}:build"
    b = G.BACKENDS["torch-fp16"]
    tokens = G.backends.torch.torch_leaves(G.backends.torch.torch_example(spec, 0)[1])["input"].numpy()
    ref_model, _ = G.backends.torch.torch_example(spec, 0)
    with torch.no_grad():
        ref = ref_model(torch.from_numpy(tokens)).numpy().astype(np.float64)

    def run(keep):
        s = b.load(spec, str(howto), 0, keep_float32=keep)
        out = s.run({"input": tokens})["output"]
        return out, s

    out, s = run(nodes)
    assert np.isfinite(out).all() and _cosine(ref, out) > 0.999
    assert set(s.float32_evidence(nodes)) == set(nodes)
    for n in nodes:
        out, s = run([k for k in nodes if k != n])
        assert np.isnan(out).any(), f"without {n} the float16 model should fail again"
        assert n not in s.float32_evidence(nodes)  # not kept, not proven
    out, _ = run([])
    assert np.isnan(out).all()


def test_the_torch_recipe_runs_as_printed(howto):
    torch = pytest.importorskip("torch")
    fb = json.loads((howto / "tiny.json").read_text())["backends"][1]["fallback"]
    import importlib.util

    spec = importlib.util.spec_from_file_location("tiny_recipe", howto / "tiny_encoder.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model, tokens = mod.build()
    with torch.no_grad():
        ref = model(tokens).numpy()
    scope = {"model": model}
    exec(fb["recipe"], scope)  # noqa: S102 - the recipe is the product under test
    with torch.no_grad():
        out = scope["model"](tokens)
    assert out.dtype == torch.float16 and torch.isfinite(out).all()
    assert _cosine(ref, out.float().numpy()) > 0.999


# -- ONNX --------------------------------------------------------------------------------------

def test_int8_probe_bisect_agree_and_fallback_is_proven(howto):
    data = json.loads((howto / "int8.json").read_text())
    _schema_check(data)
    row = data["backends"][1]
    assert row["status"] == "PRECISION_DEGRADATION" and data["exit_code"] == 1
    probe = row["probe"]
    assert probe["method"] == "recorded"
    assert probe["origin"]["node"] == "/proj/MatMul" and probe["origin"]["op_type"] == "MatMul"
    # The INT8 model has no node of that name (quantize_dynamic made it MatMulInteger
    # "/proj/MatMul_quant"): the name comes from the source model.
    cross = probe["cross_check"]
    assert cross["method"] == "bisect" and cross["origin"]["node"] == "/proj/MatMul"
    assert probe["agrees"] is True
    assert 1 <= cross["runs"] <= math.ceil(math.log2(2)) + 1  # two nodes
    fb = row["fallback"]
    assert fb["verified"] and [n["node"] for n in fb["nodes"]] == ["/proj/MatMul"]
    assert "float MatMul" in fb["nodes"][0]["evidence"] or "optimized graph" in \
        fb["nodes"][0]["evidence"]
    assert fb["cosine_after"] > 0.9999 and fb["removal_fails"] == {
        "/proj/MatMul": "PRECISION_DEGRADATION"}
    assert "nodes_to_exclude=['/proj/MatMul']" in fb["recipe"]
    md = (howto / "int8.md").read_text()
    assert "ort-int8 probe (recorded intermediates" in md and "cross-check by bisect: agrees" in md
    assert "**FP32 fallback recipe for ort-int8** (verified):" in md
    assert "```python\nfrom onnxruntime.quantization import quantize_dynamic" in md
    # The page carries the same report, with the diagnostics the text table shows.
    page = (howto / "int8.html").read_text()
    block = re.search(r'<script type="application/json" id="ds-report">(.*?)</script>', page, re.S)
    shown = json.loads(block.group(1))
    diagnostics = [b.pop("diagnostics") for b in shown["backends"]]
    assert shown == data
    assert diagnostics[1].startswith("y: cosine 0.97") and "MatMulInteger" in diagnostics[1]


def test_the_int8_recipe_runs_as_printed(howto, tmp_path):
    import onnxruntime as ort

    shutil.copy(howto / "outlier.onnx", tmp_path / "outlier.onnx")
    recipe = json.loads((howto / "int8.json").read_text())["backends"][1]["fallback"]["recipe"]
    subprocess.run([sys.executable, "-c", recipe], cwd=tmp_path, check=True, timeout=300)
    import onnx

    q = onnx.load(str(tmp_path / "outlier.int8.onnx"))
    ops = {n.name: n.op_type for n in q.graph.node}
    assert ops.get("/proj/MatMul") == "MatMul" and "MatMulInteger" not in ops.values()
    x = np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32)
    plain = ort.InferenceSession(str(tmp_path / "outlier.onnx"), providers=["CPUExecutionProvider"])
    fixed = ort.InferenceSession(str(tmp_path / "outlier.int8.onnx"),
                                 providers=["CPUExecutionProvider"])
    assert _cosine(plain.run(None, {"x": x})[0], fixed.run(None, {"x": x})[0]) > 0.9999


def test_fp16_on_the_cpu_says_float16_arithmetic_was_not_exercised(howto):
    data = json.loads((howto / "fp16.json").read_text())
    _schema_check(data)
    row = data["backends"][1]
    assert row["status"] == "NUMERICAL_INSTABILITY"
    probe = row["probe"]
    assert probe["origin"]["node"] == "/scale2/Mul"
    assert any("float16 arithmetic was not exercised at /scale2/Mul" in n for n in probe["notes"])
    assert any("float16 arithmetic was not exercised" in f for f in data["findings"])
    fb = row["fallback"]
    assert fb["verified"]
    # Searched and verified where float16 is computed (issue 32): the Muls that produce and read
    # the value of 1.3e6 are kept with the nodes that store it; Concat + Transpose alone (what a
    # search on ort-fp16, which computes in float32, keeps) still overflows there.
    kept = ["/scale2/Mul", "/store/Concat", "/store/Transpose", "/unscale/Mul"]
    assert sorted(n["node"] for n in fb["nodes"]) == kept
    assert fb["searched_on"] == "ort-fp16-exact"
    assert set(fb["verified_on"]) == {"ort-fp16", "ort-fp16-exact"}
    assert all("optimized graph" in n["evidence"] for n in fb["nodes"])
    # The recipe of the variant the guard built (to_float16), not the converter's call alone.
    assert f"keep_float32={kept!r}" in fb["recipe"]
    assert "node_block_list" not in fb["recipe"]


def test_the_fp16_recipe_builds_the_verified_variant(howto, tmp_path):
    import onnxruntime as ort

    shutil.copy(howto / "storage.onnx", tmp_path / "storage.onnx")
    recipe = json.loads((howto / "fp16.json").read_text())["backends"][1]["fallback"]["recipe"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(driftscope.__file__).parents[1]), os.environ.get("PYTHONPATH", "")]))
    subprocess.run([sys.executable, "-c", recipe], cwd=tmp_path, check=True, timeout=300,
                   env=env)
    x = np.random.default_rng(0).standard_normal((1, 8)).astype(np.float32)
    s = ort.InferenceSession(str(tmp_path / "storage.fp16.onnx"),
                             providers=["CPUExecutionProvider"])
    y = s.run(None, {"x": x})[0]
    want = (np.concatenate([x, x], axis=1).T.astype(np.float64) * 1e3)
    assert np.isfinite(y).all() and _cosine(want, y) > 0.9999


# -- bisection where intermediates cannot be exposed ---------------------------------------------

OPAQUE = '''
from driftscope._guard import register_backend
from driftscope._guard.backends.onnxruntime import OrtBackend


class Opaque(OrtBackend):
    """ort-int8 whose sessions cannot expose intermediates (as a delegate or a compiled
    runtime): the probe must bisect."""

    def load(self, model, work, seed, keep_float32=()):
        s = super().load(model, work, seed, keep_float32)

        def record(feeds, path):
            raise NotImplementedError
        s.record = record
        return s


register_backend(Opaque("int8-opaque", "test: ort-int8 without intermediates", variant="int8"))
'''


def test_a_backend_without_intermediates_is_bisected(tmp_path, monkeypatch):
    (tmp_path / "guard_probe_plugins.py").write_text(OPAQUE)
    monkeypatch.setenv("DRIFTSCOPE_GUARD_PLUGINS", "guard_probe_plugins")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(tmp_path), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("guard_probe_plugins", None)
    try:
        gm.outlier_onnx(tmp_path / "outlier.onnx", outlier=1.0)
        r = driftscope.guard(tmp_path / "outlier.onnx", backends=["int8-opaque"], runs=1,
                             fallback="never")
        p = r["int8-opaque"].probe
        assert p.method == "bisect" and "cannot expose" in p.why
        assert p.origin.node == "/proj/MatMul" and p.runs <= 2
        assert r["int8-opaque"].fallback is None
        assert any("bisection over the topological order" in f for f in r.findings)
        assert "bisection over the topological order" in r.to_text()
        assert r.to_dict()["backends"][1]["probe"]["method"] == "bisect"
    finally:
        G.BACKENDS.pop("int8-opaque", None)
        sys.modules.pop("guard_probe_plugins", None)


def test_int8_recording_pairs_values_by_source_names(tmp_path):
    """quantize_dynamic names its quantization node after the value it reads
    ("/mask/Mul_output_0_QuantizeLinear"): without renaming, the recorder would give module
    "mask" the uint8 quantized tensor and the probe would blame /mask/Mul."""
    gm.outlier_onnx(tmp_path / "m.onnx", outlier=1.0, exporter_names=True)
    r = driftscope.guard(tmp_path / "m.onnx", backends=["ort-int8"], runs=1, fallback="never",
                         out=tmp_path / "out")
    p = r["ort-int8"].probe
    assert p.origin.node == "/proj/MatMul" and p.first_divergence.tensor == "proj"
    with driftscope.open(tmp_path / "out" / "ort-int8" / "sample1.tdump") as d:
        mask = d.record("mask")
        assert mask.dtype == "f32" and mask.attrs["onnx_node"] == "/mask/Mul"
    with driftscope.open(tmp_path / "out" / "ort" / "sample1.tdump") as d:
        ref = d.record("mask").numpy()
    with driftscope.open(tmp_path / "out" / "ort-int8" / "sample1.tdump") as d:
        np.testing.assert_array_equal(d.record("mask").numpy(), ref)  # float32 Mul: identical


def test_prefix_model_cuts_after_a_node(tmp_path):
    """The bisection's cut: outputs are the values computed so far that later nodes read."""
    import onnx

    from driftscope._guard._probe import prefix_model
    from driftscope.onnxruntime import _static_values, _topological_nodes

    gm.overflow_onnx(tmp_path / "m.onnx")
    proto = onnx.load(str(tmp_path / "m.onnx"))
    order = _topological_nodes(proto.graph)
    static = _static_values(proto.graph, order)
    names = [n.name for n in order]
    m, outs = prefix_model(proto, names.index("/store/Concat"), order, static)
    assert outs == ["cat"] and [n.name for n in m.graph.node] == [
        "/pre0/Mul", "/pre1/Mul", "/store/Concat"]
    assert [i.name for i in m.graph.input] == ["x"]
    import onnxruntime as ort

    x = np.random.default_rng(0).standard_normal((1, 8)).astype(np.float32)
    cat = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    np.testing.assert_allclose(cat, np.concatenate([x, x], axis=1) * 1e6, rtol=1e-6)


# -- options -----------------------------------------------------------------------------------

def cli(*args, cwd=None):
    if not BIN.exists():
        pytest.skip(f"driftscope binary not built: {BIN}")
    env = dict(os.environ, DRIFTSCOPE_PYTHON=sys.executable, NO_COLOR="1")
    here = str(Path(driftscope.__file__).parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in [here, env.get("PYTHONPATH", "")] if p)
    return subprocess.run([str(BIN), "guard", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def one_error_line(proc, *fragments):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("driftscope guard: error: "), proc.stderr
    for f in fragments:
        assert f in lines[0], lines[0]


def test_probe_options_and_policy(tmp_path):
    gm.outlier_onnx(tmp_path / "outlier.onnx", outlier=1.0)
    m = tmp_path / "outlier.onnx"
    one_error_line(cli(m, "--probe", "sometimes"), "--probe", "invalid choice")
    one_error_line(cli(m, "--fallback-runs", "0"), "--fallback-budget '0'", "BUILDS")
    one_error_line(cli(m, "--policy", tmp_path / "absent.toml"), "--policy", "no such file")
    (tmp_path / "bad.toml").write_text("version = 1\n[default]\nmin_cosine = 7\n")
    one_error_line(cli(m, "--policy", tmp_path / "bad.toml"), "bad.toml")
    (tmp_path / "file").write_text("x")
    one_error_line(cli(m, "--out", tmp_path / "file"), "--out", "not a folder")
    # --probe never: a plain verdict; no probe, no fallback, nothing written.
    r = driftscope.guard(m, backends=["ort-int8"], runs=1, probe="never")
    assert r["ort-int8"].probe is None and r["ort-int8"].fallback is None
    assert r.to_dict()["probe"] == "never"
    # --probe always: a passing backend is probed too, and nothing diverges.
    r = driftscope.guard(m, backends=["ort-noopt"], runs=1, probe="always")
    p = r["ort-noopt"].probe
    assert p.method == "recorded" and p.origin is None and p.first_divergence is None
    assert r["ort-noopt"].fallback is None and r.exit_code == 0
    # A policy that accepts cosine 0.9 everywhere: the probe's comparison follows it (no
    # tensor diverges), so nothing is named and no fallback can start.
    (tmp_path / "loose.toml").write_text("version = 1\n[default]\nmin_cosine = 0.9\n")
    r = driftscope.guard(m, backends=["ort-int8"], runs=1, policy=tmp_path / "loose.toml",
                         fallback="auto")
    p = r["ort-int8"].probe
    assert p.method == "recorded" and p.origin is None and p.first_divergence is None
    assert r["ort-int8"].fallback.error == "the probe named no node to start from"
    assert not r["ort-int8"].fallback.verified


# A LiteRT backend whose model computes one op wrong: the depthwise convolution's weights and
# bias are zeroed (a delegate that silently drops an op would look the same). It runs the real
# interpreter with the default kernels, and its tensors keep the source's names.
LITERT_PLUGIN = '''
import os

from driftscope._guard import register_backend
from driftscope._guard.backends.litert import LiteRTBackend

import tflite_models as tm


class DropsDepthwise(LiteRTBackend):
    def load(self, model, work, seed):
        w = tm.weights()
        w["dwconv.w"][:] = 0.0
        w["dwconv.b"][:] = 0.0
        path = os.path.join(work, "drops-dwconv.tflite")
        with open(path, "wb") as f:
            f.write(tm.build_float(w))
        return super().load(path, work, seed)


register_backend(DropsDepthwise("litert-drops-dwconv", "test: LiteRT, DEPTHWISE_CONV_2D zeroed",
                                "optimized"))
'''


def test_a_tflite_model_is_probed_by_recording(tmp_path, monkeypatch):
    """LiteRT backends are probed with driftscope.litert's recorder: the reference (reference
    kernels) and the candidate (XNNPACK) are recorded op by op and compared by tensor name; the
    first divergence is the op that goes wrong, and a passing backend probed with --probe always
    shows none."""
    pytest.importorskip("ai_edge_litert")
    import tflite_models as tm

    (tmp_path / "guard_litert_plugins.py").write_text(LITERT_PLUGIN)
    monkeypatch.setenv("DRIFTSCOPE_GUARD_PLUGINS", "guard_litert_plugins")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(tmp_path), str(MODELS), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("guard_litert_plugins", None)
    model = tmp_path / "model.tflite"
    model.write_bytes(tm.build_float())
    try:
        r = driftscope.guard(model, backends=["litert", "litert-drops-dwconv"], runs=1,
                             probe="always", out=tmp_path / "probe")
        bad = r["litert-drops-dwconv"]
        assert bad.status in (G.PRECISION_DEGRADATION, G.ARGMAX_FLIP), bad.status
        p = bad.probe
        assert p.method == "recorded" and p.error is None, (p.why, p.error)
        assert "bit-identical" in p.why
        assert p.origin.node == "dwconv" and p.origin.op_type == "DEPTHWISE_CONV_2D"
        assert p.origin.origin == "introduced"
        assert any("litert-drops-dwconv probe (recorded intermediates" in f and "dwconv" in f
                   for f in r.findings)
        assert bad.fallback is None  # LiteRT keeps no chosen op in float32
        good = r["litert"].probe
        assert good.method == "recorded" and good.origin is None
        with driftscope.open(good.files["candidate"]) as d:
            names = [rec.name for rec in d]
            assert d.metadata["backend"] == "litert:xnnpack"
        assert names[:2] == ["conv1", "dwconv"] and "probs" in names
        with driftscope.open(good.files["reference"]) as d:
            assert d.metadata["backend"] == "litert:reference"
    finally:
        G.BACKENDS.pop("litert-drops-dwconv", None)
        sys.modules.pop("guard_litert_plugins", None)


# -- a stateful model and --reference-model are probed like the others -----------------------------

def test_a_stateful_model_is_probed_at_the_step_that_fails(tmp_path):
    """The state goes from step to step: float16 storage holds step 1 (|v| < ~1500) and
    overflows at step 2 (|v| ~ 1e6). The recorded probe compares the steps in order, each backend
    carrying its own state, and names step 2; bisection, fed the reference's state, names the
    same step; the fallback is judged on every step and verified, and it needs both nodes."""
    gm.stateful_storage_onnx(tmp_path / "st.onnx")
    r = driftscope.guard(tmp_path / "st.onnx", backends=["ort-fp16"], runs=1,
                         out=tmp_path / "out")
    row = r["ort-fp16"]
    by = {o.name: o.status for o in row.outputs}
    assert by["y[step 1]"] == G.PASS and by["y[step 2]"] == G.NUMERICAL_INSTABILITY
    p = row.probe
    assert (p.method, p.step, p.error) == ("recorded", 2, None)
    # Recording exposes 'big' as an output: it is stored in float16 where /cell/Mul writes it.
    assert p.origin.node == "/cell/Mul" and p.origin.origin == "introduced"
    assert "Inf where the reference is finite" in p.origin.detail
    assert p.files["candidate"].endswith("sample1.step2.tdump")
    with driftscope.open(p.files["reference"]) as d:  # the reference's own step 2: finite
        big = d.get("cell", dtype="float64")
        assert np.isfinite(big).all() and np.abs(big).max() > 65504
    assert any("names /cell/Mul (Mul), tensor cell, introduced there" in f and "at step 2" in f
               for f in r.findings)
    fb = row.fallback
    assert fb.verified and fb.status_after == G.PASS
    # Searched and verified where float16 is computed (issue 32): every value above 65504 (the
    # state at step 2, 9e6 before /head/Mul, 2.7e8 out of /state/Mul) needs its nodes float32,
    # not only the two that store it on the CPU.
    assert fb.verified_on == ["ort-fp16", "ort-fp16-exact"]
    assert sorted(n for n, _ in fb.nodes) == ["/cell/Add", "/cell/Mul", "/head/Mul",
                                              "/state/Mul", "/store/Concat", "/store/Transpose"]
    assert set(fb.removal_fails) == {n for n, _ in fb.nodes}
    data = r.to_dict()
    _schema_check(data)
    assert data["backends"][1]["probe"]["step"] == 2

    b = driftscope.guard(tmp_path / "st.onnx", backends=["ort-fp16"], runs=1,
                         probe_method="bisect", fallback="never")
    p = b["ort-fp16"].probe
    assert (p.method, p.step, p.origin.node) == ("bisect", 2, "/store/Concat")
    assert any("given the reference's state" in n for n in p.notes)


def test_a_reference_model_run_is_probed_by_recording_both_files(tmp_path):
    """--reference-model: the reference backend records its own file, the candidate the other;
    tensors pair by name, the outputs by position (y / y_other), and the findings name the
    candidate's nodes. Bisection cuts one graph, so it says why it cannot."""
    gm.scaled_onnx(tmp_path / "ref.onnx")
    gm.scaled_onnx(tmp_path / "cand.onnx", second=-3.0, output="y_other")
    r = driftscope.guard(tmp_path / "cand.onnx", reference_model=tmp_path / "ref.onnx",
                         backends=["ort-noopt"], runs=1)
    row = r["ort-noopt"]
    assert row.status == G.PRECISION_DEGRADATION and row.worst.name == "y"
    p = row.probe
    assert p.method == "recorded" and p.step is None
    assert (p.origin.node, p.origin.origin) == ("/second/Mul", "introduced")
    assert p.first_divergence.node == "/second/Mul"
    assert any("recorded its own model file (--reference-model)" in n for n in p.notes)
    b = driftscope.guard(tmp_path / "cand.onnx", reference_model=tmp_path / "ref.onnx",
                         backends=["ort-noopt"], runs=1, probe_method="bisect")
    p = b["ort-noopt"].probe
    assert p.method is None and "--reference-model gives the reference another file" in p.error


def test_a_torch_model_is_bisected_at_a_precision_boundary(tmp_path):
    """A PyTorch model has no graph to cut: the cut is where its leaf modules stop running in
    float16 (those after it are kept in float32, the fallback's mechanism). The binary search
    over the tiny encoder's 38 leaf modules names the LayerNorm the recording names, in about
    log2(38) runs."""
    pytest.importorskip("torch")
    shutil.copy(MODELS / "tiny_encoder_torch.py", tmp_path / "tiny_encoder.py")
    r = driftscope.guard(f"{tmp_path / 'tiny_encoder.py'}:build", backends=["torch-fp16"],
                         runs=1, probe_method="bisect", fallback="never")
    p = r["torch-fp16"].probe
    assert p.method == "bisect" and p.error is None
    assert (p.origin.node, p.origin.op_type) == ("encoder.layers.2.norm1", "LayerNorm")
    assert p.first_nonfinite.node == "encoder.layers.2.norm1"
    assert 2 < p.runs <= 2 + math.ceil(math.log2(38))
    assert any("for 38 leaf modules" in n for n in p.notes)
    assert any("bisection at a precision boundary in execution order" in f for f in r.findings)
