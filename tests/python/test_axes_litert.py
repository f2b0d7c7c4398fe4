"""Axis names that flow through a LiteRT (.tflite) graph (issue 29): ``input_axes=`` and
``--input-axes`` on the LiteRT recorder, the conventions by signature name, and the same rule
table as PyTorch and ONNX (axes_rules, through axes_graph) op by op over the model, so
`driftscope check` judges .tflite recordings by name with the same C++ code.

* The transposed-LayerNorm bug (FULLY_CONNECTED -> TRANSPOSE -> decomposed layer norm over the
  last axis -> TRANSPOSE back), square and non-square: exit 1, norm_over "normalises over seq";
  the corrected model: CLEAN. The same bug as a MEAN over axis 1, no transposes: flagged.
* Softmax over the query axis (TRANSPOSE, SOFTMAX, TRANSPOSE): softmax_over; over key: CLEAN.
* A small encoder (embedding GATHER, 2-head attention with RESHAPE/TRANSPOSE, mask, MLP, norms)
  with nothing declared: input_ids/attention_mask named by their signature names; the share of
  named outputs, the heads split, query,key scores; CLEAN.
* Bad declarations: one clear error before anything runs (no file); on the command line exit 2
  with one line.

The models are flatbuffers written by tests/python/models/tflite_axes.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))
from pkgenv import env_with_package  # noqa: E402
import tflite_axes as ta  # noqa: E402

import driftscope  # noqa: E402
import driftscope.litert as dl  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
AXES = {"x": "batch,seq,hidden"}


def driftscope_bin() -> str:
    return os.environ.get("DRIFTSCOPE_BIN") or str(ROOT / "build" / "dev" / "driftscope")


def check(path):
    p = subprocess.run([driftscope_bin(), "check", str(path)], capture_output=True, text=True,
                       timeout=120)
    return p.returncode, p.stdout + p.stderr


def record(tmp_path, model: bytes, name: str, inputs, **kw):
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(model)
    out = tmp_path / f"{name}.tdump"
    dl.record(path, inputs, out, **kw)
    return out


def x_of(*shape):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("kernels", ["reference", "optimized"])
@pytest.mark.parametrize("seq,hidden", [(6, 8), (8, 8)], ids=["non-square", "square"])
def test_transposed_layernorm_is_found_by_name(tmp_path, seq, hidden, kernels):
    x = {"x": x_of(2, seq, hidden)}
    bad = record(tmp_path, ta.transposed_norm(seq, hidden), "bad", x, kernels=kernels,
                 input_axes=AXES)
    rc, out = check(bad)
    assert rc == 1 and "norm_over" in out, out
    assert ("layer_norm (MEAN, SQUARED_DIFFERENCE) normalises over seq "
            "(axis 2 of batch,hidden,seq)") in out, out
    assert "names from: x: batch,seq,hidden (declared) -> FULLY_CONNECTED at fc" in out, out
    assert "TRANSPOSE at fc_t: batch,seq,hidden -> batch,hidden,seq" in out, out
    assert out.count("norm_over") == 2, out  # the summary line and one finding: one per norm
    dump = driftscope.open(bad)
    assert dump.record("fc_t").axes == ("batch", "hidden", "seq")
    assert dump.record("out").axes == ("batch", "seq", "hidden")
    good = record(tmp_path, ta.transposed_norm(seq, hidden, fixed=True), "good", x,
                  kernels=kernels, input_axes=AXES)
    rc, out = check(good)
    assert rc == 0, out
    assert driftscope.open(good).record("norm").axes == ("batch", "seq", "hidden")


def test_a_mean_over_the_tokens_is_a_norm_over_seq(tmp_path):
    bad = record(tmp_path, ta.norm_over_seq(), "seqnorm", {"x": x_of(2, 6, 8)},
                 kernels="reference", input_axes=AXES)
    rc, out = check(bad)
    assert rc == 1 and "normalises over seq (axis 1 of batch,seq,hidden)" in out, out
    # "x" has no convention: without the declaration nothing is named, so nothing is judged
    plain = record(tmp_path, ta.norm_over_seq(), "plain", {"x": x_of(2, 6, 8)},
                   kernels="reference")
    assert all(r.axes == () for r in driftscope.open(plain))
    assert check(plain)[0] == 0


@pytest.mark.parametrize("kernels", ["reference", "optimized"])
def test_softmax_over_the_query_axis_is_flagged(tmp_path, kernels):
    x = {"x": x_of(1, 5, 8)}
    bad = record(tmp_path, ta.attention(wrong_softmax=True), "bad", x, kernels=kernels,
                 input_axes=AXES)
    rc, out = check(bad)
    assert rc == 1 and "softmax_over" in out, out
    assert "SOFTMAX normalises over query (axis 2 of batch,key,query)" in out, out
    dump = driftscope.open(bad)
    assert dump.record("scores").axes == ("batch", "query", "key")
    assert dump.record("context").axes == ("batch", "seq", "hidden")
    good = record(tmp_path, ta.attention(), "good", x, kernels=kernels, input_axes=AXES)
    rc, out = check(good)
    assert rc == 0, out
    assert driftscope.open(good).record("probs").axes == ("batch", "query", "key")


def test_encoder_is_named_from_its_signature_conventions(tmp_path):
    path = record(tmp_path, ta.encoder(), "enc", ta.encoder_inputs(), kernels="optimized")
    dump = driftscope.open(path)
    floats = [r for r in dump if r.role == "output" and r.dtype.startswith("f")]
    named = [r for r in floats if r.axes]
    share = len(named) / len(floats)
    print(f"named float outputs: {len(named)} of {len(floats)} ({100 * share:.1f}%)")
    assert share >= 0.95, [r.name for r in floats if not r.axes]
    by = {r.name: r for r in dump}
    assert by["embeddings/lookup"].axes == ("batch", "seq", "hidden")
    assert dict(by["embeddings/lookup"].attrs)["axes_from"].startswith(
        "input_ids: batch,seq (convention) -> GATHER at embeddings/lookup")
    for p in "qkv":  # the head count read from the reshape feeding attention's products
        assert by[f"attention/{p}/split"].axes == ("batch", "seq", "heads", "head_dim")
        assert by[f"attention/{p}/heads"].axes == ("batch", "heads", "seq", "head_dim")
    assert by["attention/scores"].axes == ("batch", "heads", "query", "key")
    assert by["attention/masked"].axes == ("batch", "heads", "query", "key")  # mask over seq
    assert by["attention/merge"].axes == ("batch", "seq", "hidden")
    assert by["mlp/up"].axes == ("batch", "seq", "mlp.up.out")
    assert by["mlp/down"].axes == ("batch", "seq", "hidden")
    assert by["pooled"].axes == ("batch", "hidden")
    assert by["classifier"].axes == ("batch", "classifier.out")
    ops = dict(by["attention/probs"].attrs)["axes_ops"].split("\t")
    assert ops[:5] == ["softmax", "SOFTMAX", "batch,heads,query,key", "1,2,7,7", "3"], ops
    rc, out = check(path)
    assert rc == 0, out
    # a declaration by signature name wins over the convention
    path = record(tmp_path, ta.encoder(), "decl", ta.encoder_inputs(), kernels="reference",
                  input_axes={"input_ids": "b,s"})
    assert driftscope.open(path).record("embeddings/lookup").axes == ("b", "s", "hidden")


def test_a_flattening_fully_connected_merges_names(tmp_path):
    path = record(tmp_path, ta.flattening_fc(), "fc", {"x": x_of(2, 4, 6)}, kernels="reference",
                  input_axes=AXES)
    r = driftscope.open(path).record("proj")
    assert r.axes == ("batch*seq", "proj.out")
    assert dict(r.attrs)["axes_from"] == ("x: batch,seq,hidden (declared) -> FULLY_CONNECTED at "
                                          "proj: batch,seq,hidden -> batch*seq,hidden -> "
                                          "FULLY_CONNECTED at proj: batch*seq,hidden -> "
                                          "batch*seq,proj.out")


@pytest.mark.parametrize("axes,msg", [
    ({"x": "batch,seq"}, "input_axes['x']: 2 names (batch,seq) for a rank-3 input"),
    ({"x": "batch,seq,batch"}, "declared twice"),
    ({"x": "batch,,hidden"}, "empty axis name"),
    ({"x": "batch,s\x01,hidden"}, "control character"),
    ({"y": "batch"}, "input_axes: 'y' is not an input of the model (its inputs: x)"),
    ("batch,seq,hidden", "input_axes: expected a dict"),
])
def test_bad_declarations_are_one_clear_error(tmp_path, axes, msg):
    model = tmp_path / "m.tflite"
    model.write_bytes(ta.transposed_norm())
    with pytest.raises(dl.InputMismatchError, match=re.escape(msg)):
        dl.record(model, {"x": x_of(2, 6, 8)}, tmp_path / "r.tdump", input_axes=axes)
    assert not (tmp_path / "r.tdump").exists()


def test_cli_input_axes(tmp_path):
    model = tmp_path / "m.tflite"
    model.write_bytes(ta.transposed_norm())
    np.save(tmp_path / "x.npy", x_of(2, 6, 8))
    out = tmp_path / "cli.tdump"
    base = [sys.executable, "-m", "driftscope", "record", "tflite", str(model), "--input",
            f"x={tmp_path / 'x.npy'}", "-o", str(out), "--no-progress", "--kernels", "reference"]
    env = env_with_package()
    p = subprocess.run(base + ["--input-axes", "x=batch,seq,hidden"], capture_output=True,
                       text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    rc, text = check(out)
    assert rc == 1 and "normalises over seq" in text, text
    for bad, msg in (("x=batch,seq", "2 names (batch,seq) for a rank-3 input"),
                     ("x=batch,seq,seq", "declared twice"),
                     ("x", "--input-axes 'x': expected NAME=AXES"),
                     ("y=batch", "'y' is not an input")):
        p = subprocess.run(base + ["--input-axes", bad, "-o", str(tmp_path / "bad.tdump")],
                           capture_output=True, text=True, env=env, timeout=120)
        err = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(err) == 1 and msg in err[0], p.stderr
        assert "Traceback" not in p.stderr and not (tmp_path / "bad.tdump").exists()
    p = subprocess.run(base + ["--help"], capture_output=True, text=True, env=env, timeout=120)
    assert "--input-axes NAME=AXES" in p.stdout and "signature name" in p.stdout, p.stdout


def test_names_pass_through_nhwc_image_ops(tmp_path):
    import tflite_models as tm

    path = record(tmp_path, tm.build_float(), "cnn", {"input": tm.sample_input()},
                  kernels="reference", input_axes={"image": "batch,height,width,channels"})
    by = {r.name: r for r in driftscope.open(path)}  # declared by its signature name, "image"
    assert by["conv1"].axes == ("batch", "height", "width", "channels")
    assert dict(by["conv1"].attrs)["axes_from"] == (
        "image: batch,height,width,channels (declared) -> CONV_2D at conv1: NHWC "
        "batch,height,width,channels")
    assert by["flatten"].axes == ("batch", "channels")  # the pooled 1x1 axes drop out
    assert by["logits"].axes == ("batch", "logits.out")
    assert by["probs"].axes == ("batch", "logits.out")
    ops = dict(by["probs"].attrs)["axes_ops"].split("\t")
    assert ops[:5] == ["softmax", "SOFTMAX", "batch,logits.out", "1,10", "1"], ops


def test_the_norm_rule_takes_a_decomposed_norms_axes():
    from driftscope.recorders import axes_rules as R

    ctx = R.Ctx("layer_norm", [R.Arg(("batch", "seq", "hidden"), (2, 6, 8))], {"dims": [1]},
                [(2, 6, 8)])
    assert R.propagate(ctx) == [("batch", "seq", "hidden")]
    assert ctx.events == [("norm", "layer_norm", ("batch", "seq", "hidden"), (2, 6, 8), (1,),
                           None, None)]
