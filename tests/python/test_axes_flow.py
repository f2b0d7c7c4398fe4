"""Axis names that flow (issue 29): declared once at the inputs of a PyTorch model, carried through
every op by the rule table (docs/axes.md §1.1), and judged by name in `driftscope check`.

* The transposed-LayerNorm bug (normalising over tokens), square and non-square: exit 1 naming
  `norm` and "normalises over seq"; the corrected module is CLEAN.
* An attention block whose softmax runs over the query axis (dim=-2): softmax_over.
* A bias put along the token axis where seq = hidden: broadcast_conflict.
* A mean over the batch inside the model: reduce_over_batch.
* all-MiniLM-L6-v2 with only input_ids/attention_mask (named by convention): >= 95% of module
  outputs named, the heads split named inside attention, and CLEAN.
* Bad declarations: one clear error, exit 2 on the CLI.
"""

from __future__ import annotations

import math
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pkgenv import env_with_package  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")

import driftscope  # noqa: E402
import driftscope.torch as dt  # noqa: E402
from driftscope.errors import InvalidArgumentError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
nn = torch.nn


def driftscope_bin() -> str:
    return os.environ.get("DRIFTSCOPE_BIN") or str(ROOT / "build" / "dev" / "driftscope")


def check(path):
    p = subprocess.run([driftscope_bin(), "check", str(path)], capture_output=True, text=True,
                       timeout=120)
    return p.returncode, p.stdout + p.stderr


def record(model, path, *inputs, **kw):
    torch.manual_seed(0)
    with torch.no_grad(), dt.record(model, path, **kw):
        model(*inputs)
    return path


class TransposedNorm(nn.Module):
    """LayerNorm(seq_len) on a transposed activation: normalises each feature over the tokens."""

    def __init__(self, seq, hidden, fixed=False):
        super().__init__()
        self.fixed = fixed
        self.fc = nn.Linear(hidden, hidden)
        self.norm = nn.LayerNorm(hidden if fixed else seq)

    def forward(self, x):
        if self.fixed:
            return self.norm(self.fc(x))
        return self.norm(self.fc(x).transpose(1, 2)).transpose(1, 2)


@pytest.mark.parametrize("seq,hidden", [(6, 8), (8, 8)], ids=["non-square", "square"])
def test_transposed_layernorm_is_found_by_name(tmp_path, seq, hidden):
    x = torch.randn(2, seq, hidden)
    bad = record(TransposedNorm(seq, hidden), tmp_path / "bad.tdump", x,
                 input_axes={"x": "batch,seq,hidden"})
    rc, out = check(bad)
    assert rc == 1, out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("norm_over"))
    assert " norm [" in line and "normalises over seq" in line, line
    assert "names from: x: batch,seq,hidden (declared)" in line and "transpose" in line, line
    good = record(TransposedNorm(seq, hidden, fixed=True), tmp_path / "good.tdump", x,
                  input_axes={"x": "batch,seq,hidden"})
    rc, out = check(good)
    assert rc == 0 and "CLEAN" in out, out


class Attention(nn.Module):
    def __init__(self, hidden=16, heads=4, softmax_dim=-1):
        super().__init__()
        self.num_heads, self.softmax_dim = heads, softmax_dim
        self.q, self.k, self.v, self.o = (nn.Linear(hidden, hidden) for _ in range(4))

    def forward(self, x):
        b, s, h = x.shape
        d = h // self.num_heads

        def split(t):
            return t.view(b, s, self.num_heads, d).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d)
        p = scores.softmax(dim=self.softmax_dim)
        return self.o((p @ v).transpose(1, 2).reshape(b, s, h))


def test_softmax_over_query_axis_is_flagged(tmp_path):
    x = torch.randn(2, 5, 16)
    bad = record(Attention(softmax_dim=-2), tmp_path / "bad.tdump", x,
                 input_axes={"x": "batch,seq,hidden"})
    rc, out = check(bad)
    assert rc == 1, out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("softmax_over"))
    assert "<root>" in line and "softmax normalises over query" in line, line
    assert "batch,heads,query,key" in line, line
    good = record(Attention(softmax_dim=-1), tmp_path / "good.tdump", x,
                  input_axes={"x": "batch,seq,hidden"})
    rc, out = check(good)
    assert rc == 0, out
    # the heads split and merge are named: the output's trail ends in the merge
    r = next(r for r in driftscope.open(good) if r.name == "<root>")
    assert r.axes == ("batch", "seq", "hidden")
    assert "batch,seq,heads,head_dim -> batch,seq,hidden" in dict(r.attrs)["axes_from"]


class Bias(nn.Module):
    def __init__(self, n, wrong=True):
        super().__init__()
        self.wrong = wrong
        self.bias = nn.Parameter(torch.randn(n))

    def forward(self, x):
        return x + (self.bias.unsqueeze(-1) if self.wrong else self.bias)


def test_bias_along_the_token_axis_is_a_broadcast_conflict(tmp_path):
    x = torch.randn(2, 8, 8)  # seq = hidden: the shapes cannot tell
    axes = {"x": "batch,seq,hidden", "bias": "hidden"}  # the bias: a parameter, by its path
    bad = record(Bias(8), tmp_path / "bad.tdump", x, input_axes=axes)
    rc, out = check(bad)
    assert rc == 1, out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("broadcast_conflict"))
    assert "add meets seq with hidden (both size 8)" in line, line
    good = record(Bias(8, wrong=False), tmp_path / "good.tdump", x, input_axes=axes)
    rc, out = check(good)
    assert rc == 0, out


class BatchMean(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x)
        return h - h.mean(dim=0, keepdim=True)  # statistics across samples at inference


def test_mean_over_batch_is_flagged(tmp_path):
    bad = record(BatchMean(), tmp_path / "bad.tdump", torch.randn(3, 5, 8),
                 input_axes={"x": "batch,seq,hidden"})
    rc, out = check(bad)
    assert rc == 1 and "reduce_over_batch" in out and "mean reduces over batch" in out, out


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_minilm_names_flow_from_the_conventions(bert, tmp_path, attn):
    model, ids, mask = bert
    path = tmp_path / "minilm.tdump"
    before = model.config._attn_implementation
    model.set_attn_implementation(attn)  # eager: QK^T, the mask add and softmax in Python
    try:
        with torch.no_grad(), dt.record(model, path):  # nothing declared: the conventions
            model(input_ids=ids, attention_mask=mask)
    finally:
        model.set_attn_implementation(before)
    outs = [r for r in driftscope.open(path) if r.role == "output"]
    named = [r for r in outs if r.axes]
    share = len(named) / len(outs)
    print(f"MiniLM ({attn}): {len(named)} of {len(outs)} module outputs named ({share:.1%})")
    assert share >= 0.95, [r.name for r in outs if not r.axes]
    by = {r.name: r for r in outs if r.role_index == 0}
    assert by["encoder.layer.0.intermediate.dense"].axes == (
        "batch", "seq", "encoder.layer.0.intermediate.dense.out")
    assert by["encoder.layer.5.output"].axes == ("batch", "seq", "hidden")
    trail = dict(by["encoder.layer.3.attention.self"].attrs)["axes_from"]
    assert "batch,seq,heads,head_dim -> batch,seq,hidden" in trail, trail
    if attn == "eager":  # the scores are query,key and the softmax runs over key
        ops = dict(by["encoder.layer.3.attention.self"].attrs)["axes_ops"].split("\t")
        assert ops[:5] == ["softmax", "softmax", "batch,heads,query,key", "2,12,16,16", "3"], ops
    rc, out = check(path)
    assert rc == 0, out


@pytest.mark.parametrize("axes,msg", [
    ({"x": "batch,seq"}, "2 names (batch,seq) for a rank-3 input"),
    ({"x": "batch,seq,batch"}, "declared twice"),
    ({"x": "batch,se,q,hidden"}, "4 names"),
    ({"x": "batch,s\x01,hidden"}, "control character"),
    ({"y": "batch"}, "'y' is neither an argument"),
])
def test_bad_declarations_are_one_clear_error(tmp_path, axes, msg):
    m = TransposedNorm(6, 8, fixed=True)
    with pytest.raises(InvalidArgumentError, match=re.escape(msg)):
        with dt.record(m, tmp_path / "r.tdump", input_axes=axes):
            m(torch.randn(2, 6, 8))


def test_a_parameter_declared_with_the_wrong_rank_creates_no_file(tmp_path):
    with pytest.raises(InvalidArgumentError, match=re.escape("2 names (seq,hidden) for a rank-1")):
        with dt.record(Bias(8), tmp_path / "r.tdump", input_axes={"bias": "seq,hidden"}):
            pass
    assert not (tmp_path / "r.tdump").exists()


def test_cli_input_axes(tmp_path):
    model_py = tmp_path / "m.py"
    model_py.write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(s):\n"
        "        super().__init__(); s.fc = torch.nn.Linear(8, 8); s.norm = torch.nn.LayerNorm(6)\n"
        "    def forward(s, x):\n"
        "        return s.norm(s.fc(x).transpose(1, 2)).transpose(1, 2)\n"
        "def make():\n"
        "    return M(), torch.randn(2, 6, 8)\n")
    out = tmp_path / "r.tdump"
    env = env_with_package()
    base = [sys.executable, "-m", "driftscope", "record", "torch", "--model", f"{model_py}:make",
            "-o", str(out), "--no-progress"]
    p = subprocess.run(base + ["--input-axes", "x=batch,seq,hidden"], capture_output=True,
                       text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    rc, text = check(out)
    assert rc == 1 and "normalises over seq" in text, text
    for bad, msg in (("x=batch,seq", "2 names"), ("x=batch,,hidden", "empty axis name"),
                     ("x", "expected KEY=VALUE")):
        p = subprocess.run(base + ["--input-axes", bad], capture_output=True, text=True, env=env,
                           timeout=120)
        assert p.returncode == 2, p.stderr
        err = p.stderr.strip().splitlines()
        assert len(err) == 1 and msg in err[0] and "Traceback" not in p.stderr, p.stderr


class NoRule(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.out = nn.Linear(8, 8)

    def forward(self, x):
        return self.out(torch.cumsum(self.fc(x), dim=1))  # cumsum: no rule in the table


def test_an_op_without_a_rule_ends_the_names_and_says_where(tmp_path):
    path = record(NoRule(), tmp_path / "r.tdump", torch.randn(2, 5, 8),
                  input_axes={"x": "batch,seq,hidden"})
    by = {r.name: r for r in driftscope.open(path)}
    assert by["fc"].axes == ("batch", "seq", "hidden")
    assert by["out"].axes == ()  # never a guessed name
    assert dict(by["out"].attrs)["axes_stop"] == "names stop at cumsum (no rule)"
    assert dict(by["<root>"].attrs)["axes_stop"] == "names stop at cumsum (no rule)"


# ---- ONNX Runtime: input_axes= become the graph inputs' dim_params for shape inference ---------

@pytest.mark.parametrize("fixed", [False, True], ids=["bug", "fixed"])
def test_onnxruntime_input_axes_name_the_transposed_norm(tmp_path, fixed):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    import driftscope.onnxruntime as dort

    model = TransposedNorm(8, 8, fixed=fixed).eval()  # square: seq = hidden
    x = torch.randn(2, 8, 8)
    onnx_path = tmp_path / "m.onnx"
    with torch.no_grad():
        torch.onnx.export(model, (x,), str(onnx_path), input_names=["x"], opset_version=17,
                          dynamo=False)
    out = tmp_path / "ort.tdump"
    dort.record(str(onnx_path), {"x": x.numpy()}, out, input_axes={"x": "batch,seq,hidden"})
    rc, text = check(out)
    if fixed:
        assert rc == 0, text
    else:
        assert rc == 1 and "norm_over" in text and "normalises over seq" in text, text
    with pytest.raises(dort.InputMismatchError, match=re.escape("2 names (batch,seq)")):
        dort.record(str(onnx_path), {"x": x.numpy()}, tmp_path / "bad.tdump",
                    input_axes={"x": "batch,seq"})
    with pytest.raises(dort.InputMismatchError, match="'y' is not an input"):
        dort.record(str(onnx_path), {"x": x.numpy()}, tmp_path / "bad.tdump",
                    input_axes={"y": "batch"})
    assert not (tmp_path / "bad.tdump").exists()
    # the command: the same declaration by flag; a bad one is one line, exit 2
    import numpy as np

    np.save(tmp_path / "x.npy", x.numpy())
    env = env_with_package()
    base = [sys.executable, "-m", "driftscope", "record", "onnx", str(onnx_path), "--input",
            f"x={tmp_path / 'x.npy'}", "-o", str(tmp_path / "cli.tdump"), "--no-progress"]
    p = subprocess.run(base + ["--input-axes", "x=batch,seq,hidden"], capture_output=True,
                       text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert check(tmp_path / "cli.tdump")[0] == (0 if fixed else 1)
    p = subprocess.run(base + ["--input-axes", "x=batch,seq,seq"], capture_output=True,
                       text=True, env=env, timeout=120)
    err = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(err) == 1 and "declared twice" in err[0], p.stderr


class CatMismatch(nn.Module):
    def __init__(self, wrong=True):
        super().__init__()
        self.wrong = wrong
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x)
        extra = h.transpose(1, 2) if self.wrong else h  # square: the shapes join either way
        return torch.cat([h, extra], dim=1)


def test_concat_of_differently_named_parts_is_flagged(tmp_path):
    x = torch.randn(2, 8, 8)
    bad = record(CatMismatch(), tmp_path / "bad.tdump", x, input_axes={"x": "batch,seq,hidden"})
    rc, out = check(bad)
    assert rc == 1 and "concat_mismatch" in out, out
    assert "cat along axis 1 joins parts whose axis 1 is seq on one side and hidden" in out, out
    good = record(CatMismatch(False), tmp_path / "good.tdump", x,
                  input_axes={"x": "batch,seq,hidden"})
    assert check(good)[0] == 0
