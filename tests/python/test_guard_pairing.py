"""--reference-model across formats (issue 24 item 10): the ONNX export and the .tflite of one
network name their inputs differently (`input_1` against the converter's
`serving_default_input_1:0`); the guard pairs them by name, by the .tflite's signature name, then
by position, shape and dtype, says how in the inputs line, and feeds each model under its own
names. A pair that cannot be made is one line and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("ai_edge_litert")

import driftscope  # noqa: E402
from driftscope import _guard as G  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))
import tflite_models as tm  # noqa: E402

BIN = Path(os.environ.get("DRIFTSCOPE_BIN", ROOT / "build" / "dev" / "driftscope")).absolute()

IN, OUT = 4, 3
RNG = np.random.default_rng(3)
W = (RNG.standard_normal((OUT, IN)) * 0.5).astype(np.float32)  # [out, in], as TFLite stores it
B = (RNG.standard_normal(OUT) * 0.1).astype(np.float32)


def onnx_dense(path: Path, width: int = IN, batch=1) -> None:
    """y = x W^T + b as an ONNX Gemm, the input named as a Keras export names it."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper, numpy_helper

    w = W if width == IN else np.ones((OUT, width), np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["input_1", "w", "b"], ["dense"], transB=1, name="dense")],
        "dense", [helper.make_tensor_value_info("input_1", T.FLOAT, [batch, width])],
        [helper.make_tensor_value_info("dense", T.FLOAT, [batch, OUT])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(B, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def tflite_dense(path: Path, signature: bool) -> None:
    """The same network as the TFLite converter writes it: a FULLY_CONNECTED whose input tensor
    is "serving_default_input_1:0" (and, with `signature`, a SignatureDef naming it input_1)."""
    s = tm._schema()
    T, Op, Opt = s.TensorType, s.BuiltinOperator, s.BuiltinOptions
    b = tm._Builder()
    x = b.tensor("serving_default_input_1:0", [1, IN], T.FLOAT32)
    w = b.tensor("sequential/dense/MatMul", [OUT, IN], T.FLOAT32, W)
    bias = b.tensor("sequential/dense/BiasAdd/ReadVariableOp", [OUT], T.FLOAT32, B)
    y = b.tensor("StatefulPartitionedCall:0", [1, OUT], T.FLOAT32)
    b.op(Op.FULLY_CONNECTED, 1, [x, w, bias], [y], Opt.FullyConnectedOptions, tm._fc_opts())
    path.write_bytes(b.finish([x], [y], "dense", signature=(
        ("serving_default", ["input_1"], ["dense"]) if signature else None)))


def cli(*args):
    if not BIN.exists():
        pytest.skip(f"driftscope binary not built: {BIN}")
    env = dict(os.environ, DRIFTSCOPE_PYTHON=sys.executable, NO_COLOR="1")
    here = str(Path(driftscope.__file__).parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in [here, env.get("PYTHONPATH", "")] if p)
    return subprocess.run([str(BIN), "guard", *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.parametrize("signature", [True, False], ids=["signature", "no-signature"])
def test_onnx_and_tflite_of_one_network_guard_each_other(tmp_path, signature):
    onnx_dense(tmp_path / "dense.onnx")
    tflite_dense(tmp_path / "dense.tflite", signature)
    how = "by signature name" if signature else "by position, shape and dtype"
    # The .tflite judged against the ONNX export: inputs follow the ONNX model's names.
    r = G.guard(tmp_path / "dense.tflite", reference_model=tmp_path / "dense.onnx",
                backends=["litert"], runs=1, probe="never", fallback="never")
    assert r.reference == "ort" and r.exit_code == 0, r.to_text()
    row = r["litert"]
    assert row.status == G.PASS and row.worst.max_diff < 1e-5 and row.worst.cosine > 0.99999
    assert r.inputs[0].name == "input_1"
    assert f"is 'serving_default_input_1:0' of dense.tflite (paired {how})" \
        in r.inputs[0].how
    assert f"paired {how}" in r.to_dict()["inputs"][0]["how"]
    # And the other way: the ONNX export judged against the .tflite on LiteRT's reference
    # kernels; inputs follow the .tflite's tensor names, ONNX Runtime gets them as input_1.
    back = G.guard(tmp_path / "dense.onnx", reference_model=tmp_path / "dense.tflite",
                   backends=["ort"], runs=1, probe="never", fallback="never")
    assert back.reference == "litert-ref" and back.exit_code == 0, back.to_text()
    assert back["ort"].status == G.PASS and back["ort"].worst.max_diff < 1e-5
    assert back.inputs[0].name == "serving_default_input_1:0"
    assert f"is 'input_1' of dense.onnx (paired {how})" in back.inputs[0].how
    # The command: exit 0 both ways, the pairing on the inputs line.
    for model, ref in (("dense.tflite", "dense.onnx"), ("dense.onnx", "dense.tflite")):
        proc = cli(tmp_path / model, "--reference-model", tmp_path / ref, "--backends",
                   "litert" if model.endswith(".tflite") else "ort", "--runs", "1")
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        inputs = next(ln for ln in proc.stdout.splitlines() if ln.startswith("inputs "))
        assert f"(paired {how})" in inputs


def test_a_dynamic_reference_dimension_takes_the_size_the_candidate_fixes(tmp_path):
    """An ONNX export's batch 'unk__12' against the .tflite's 1; generated inputs fit both."""
    onnx_dense(tmp_path / "dense.onnx", batch="unk__12")
    tflite_dense(tmp_path / "dense.tflite", signature=False)
    r = G.guard(tmp_path / "dense.tflite", reference_model=tmp_path / "dense.onnx",
                backends=["litert"], runs=1, probe="never", fallback="never", dims={})
    assert r.exit_code == 0 and r.inputs[0].shape == [1, IN]


def test_inputs_that_cannot_pair_are_one_line_exit_2(tmp_path):
    onnx_dense(tmp_path / "wide.onnx", width=IN + 1)
    tflite_dense(tmp_path / "dense.tflite", signature=False)
    with pytest.raises(G.GuardError, match="pairs with no input of") as e:
        G.guard(tmp_path / "dense.tflite", reference_model=tmp_path / "wide.onnx",
                backends=["litert"], runs=1)
    assert "'input_1' float32[1, 5]" in str(e.value)
    assert "'serving_default_input_1:0' float32[1, 4]" in str(e.value)
    proc = cli(tmp_path / "dense.tflite", "--reference-model", tmp_path / "wide.onnx",
               "--backends", "litert")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "pairs with no input of" in proc.stderr
