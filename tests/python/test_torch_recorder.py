"""driftscope.torch: forward-hook and dispatch-mode recording of small models (issue 4 §2)."""

from __future__ import annotations

import collections
import dataclasses
import os
import re
import signal
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import driftscope  # noqa: E402
import driftscope.torch as dt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.fc = torch.nn.Linear(d, d)
        self.act = torch.nn.GELU()

    def forward(self, x):
        return x + self.act(self.fc(self.norm(x)))


class Net(torch.nn.Module):
    """Two blocks, one of them called twice (shared weights), and a head."""

    def __init__(self, d=8, classes=3):
        super().__init__()
        self.embed = torch.nn.Linear(4, d)
        self.blocks = torch.nn.ModuleList([Block(d), Block(d)])
        self.head = torch.nn.Linear(d, classes)

    def forward(self, x):
        h = self.embed(x)
        h = self.blocks[0](h)
        h = self.blocks[1](h)
        h = self.blocks[1](h)
        return self.head(h)


def make_net(seed=0):
    torch.manual_seed(seed)
    return Net().eval(), torch.randn(2, 5, 4)


def bits_equal(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


# -- names, op types, occurrences, order ---------------------------------------------------------

def test_module_names_types_occurrences_and_order(tmp_path):
    net, x = make_net()
    p = tmp_path / "run.tdump"
    with torch.no_grad(), dt.record(net, p) as rec:
        y = net(x)
    d = driftscope.open(p)
    seq = [(r.name, r.occurrence, r.op_type) for r in d]
    assert seq == [
        ("embed", 0, "Linear"),
        ("blocks.0.norm", 0, "LayerNorm"), ("blocks.0.fc", 0, "Linear"),
        ("blocks.0.act", 0, "GELU"), ("blocks.0", 0, "Block"),
        ("blocks.1.norm", 0, "LayerNorm"), ("blocks.1.fc", 0, "Linear"),
        ("blocks.1.act", 0, "GELU"), ("blocks.1", 0, "Block"),
        ("blocks.1.norm", 1, "LayerNorm"), ("blocks.1.fc", 1, "Linear"),
        ("blocks.1.act", 1, "GELU"), ("blocks.1", 1, "Block"),
        ("head", 0, "Linear"), ("<root>", 0, "Net"),
    ]
    assert [r.exec_index for r in d] == list(range(15))
    assert rec.records_written == 15 and rec.non_tensors == 0 and rec.hooks_active == 0
    assert bits_equal(torch.from_numpy(d["<root>"].copy()), y)
    # The second call of the shared block saw the first call's output as input.
    with torch.no_grad():
        h = net.blocks[1](net.blocks[0](net.embed(x)))
        assert np.array_equal(d.get("blocks.1", occurrence=0), h.numpy())


def test_inputs_are_recorded_before_the_module_runs(tmp_path):
    class Scale(torch.nn.Module):
        def forward(self, x, *, factor):
            return x * factor

    m = Scale()
    x = torch.arange(4.0)
    p = tmp_path / "run.tdump"
    with dt.record(m, p, inputs=True, root_name="scale"):
        m(x, factor=torch.tensor(3.0))
    d = driftscope.open(p)
    ins = [r for r in d if r.role == "input"]
    assert [(r.role_index, r.attrs["path"]) for r in ins] == [(0, "[0]"), (1, "['factor']")]
    assert d.get("scale", role="input").tolist() == [0, 1, 2, 3]
    assert d.get("scale").tolist() == [0, 3, 6, 9]
    assert [r.role for r in d] == ["input", "input", "output"]


def test_filter_limits_hooks_work_and_bytes(tmp_path):
    net, x = make_net()
    p = tmp_path / "run.tdump"
    with torch.no_grad(), dt.record(net, p, filter="blocks.1.* -*.act") as rec:
        net(x)
    d = driftscope.open(p)
    assert d.names() == ["blocks.1.norm", "blocks.1.fc"]
    assert [r.occurrence for r in d] == [0, 0, 1, 1]
    assert rec.records_written == 4 and rec.tensors_offered == 4


def test_hooks_removed_on_exit_and_on_exception(tmp_path):
    class Boom(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ok = torch.nn.Linear(2, 2)

        def forward(self, x):
            self.ok(x)
            raise RuntimeError("model failed")

    m = Boom()
    p = tmp_path / "run.tdump"
    with pytest.raises(RuntimeError, match="model failed"):
        with dt.record(m, p) as rec:
            m(torch.ones(1, 2))
    assert rec.hooks_active == 0
    assert not m._forward_hooks and not m._forward_pre_hooks
    assert not m.ok._forward_hooks and not m.ok._forward_pre_hooks
    d = driftscope.open(p)
    assert d.finished and d.names() == ["ok"]  # what ran before the exception is kept


def test_occurrence_stays_right_after_a_caught_exception(tmp_path):
    class Flaky(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            if self.calls == 1:
                raise ValueError("first call fails")
            return x + 1

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Flaky()

        def forward(self, x):
            try:
                self.inner(x)
            except ValueError:
                pass
            return self.inner(x)

    m = Outer()
    p = tmp_path / "run.tdump"
    with dt.record(m, p):
        m(torch.zeros(2))
    d = driftscope.open(p)
    assert [(r.name, r.occurrence) for r in d] == [("inner", 1), ("<root>", 0)]


# -- output structures -----------------------------------------------------------------------------

@dataclasses.dataclass
class DataOut:
    logits: "torch.Tensor"
    aux: object = None


class NT(NamedTuple):
    first: "torch.Tensor"
    second: "torch.Tensor"


class FakeModelOutput(collections.OrderedDict):
    """What transformers.ModelOutput is: an OrderedDict subclass with attribute access."""


class Structured(torch.nn.Module):
    def forward(self, x):
        return (
            x,
            [x + 1, "label", None],
            {"a": x * 2, "b": {"c": x * 3}},
            DataOut(logits=x - 1, aux=7),
            NT(x + 10, x + 20),
            FakeModelOutput(last_hidden_state=x + 30),
        )


def test_nested_outputs_are_flattened_with_stable_paths(tmp_path):
    m = Structured()
    p = tmp_path / "run.tdump"
    x = torch.zeros(2)
    with dt.record(m, p, root_name="s") as rec:
        m(x)
    d = driftscope.open(p)
    got = [(r.role_index, r.attrs["path"], float(d.get("s", role_index=r.role_index)[0]))
           for r in d]
    assert got == [
        (0, "[0]", 0.0), (1, "[1][0]", 1.0), (2, "[2]['a']", 0.0), (3, "[2]['b']['c']", 0.0),
        (4, "[3].logits", -1.0), (5, "[4].first", 10.0), (6, "[4].second", 20.0),
        (7, "[5]['last_hidden_state']", 30.0),
    ]
    # "label", None and aux=7 are not tensors: skipped and counted
    assert rec.non_tensors == 3
    assert rec.skipped["non-tensor str"] == 1 and rec.skipped["non-tensor NoneType"] == 1
    assert rec.skipped["non-tensor int"] == 1


def test_single_tensor_output_has_no_path_attribute(tmp_path):
    m = torch.nn.ReLU()
    p = tmp_path / "run.tdump"
    with dt.record(m, p):
        m(torch.ones(3))
    attrs = driftscope.open(p).record("<root>").attrs
    assert "path" not in attrs
    # Only the data-flow attributes (docs/format.md §3.3.3): computed from no recorded tensor.
    assert set(attrs) == {"ds.inputs", "ds.kind", "ds.source"} and attrs["ds.inputs"] == ""


# -- dtypes ----------------------------------------------------------------------------------------

ALL_DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn,
              torch.float8_e5m2, torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
              torch.bool, torch.uint16, torch.uint32, torch.uint64]


def sample(dtype):
    g = torch.Generator().manual_seed(1)
    if dtype == torch.bool:
        return torch.rand(3, 4, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.randn(3, 4, generator=g) * 4).to(dtype)
    hi = 100 if dtype in (torch.uint16, torch.uint32, torch.uint64) else 120
    lo = 0 if dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64) else -hi
    return torch.randint(lo, hi, (3, 4), generator=g, dtype=torch.int64).to(dtype)


class Emit(torch.nn.Module):
    def __init__(self, t):
        super().__init__()
        self.t = t

    def forward(self):
        return self.t


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: str(d).replace("torch.", ""))
def test_every_torch_dtype_round_trips_bit_exact(tmp_path, dtype):
    t = sample(dtype)
    p = tmp_path / "run.tdump"
    m = Emit(t)
    with dt.record(m, p):
        m()
    r = driftscope.open(p).record("<root>")
    assert r.dtype == dt.TORCH_TO_TDUMP[dtype]
    got = r.numpy()
    if dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
        assert got.dtype == np.float32
        # every bf16/fp8 value is exactly a float32
        assert np.array_equal(got, t.float().numpy(), equal_nan=True)
    else:
        want = t.numpy() if dtype not in (torch.uint16, torch.uint32, torch.uint64) else \
            t.to(torch.int64).numpy()
        assert np.array_equal(got.astype(want.dtype), want)
        assert got.dtype.itemsize == t.element_size()


def test_contiguous_cpu_tensors_are_not_copied():
    for dtype in (torch.float32, torch.bfloat16, torch.float8_e4m3fn):
        t = torch.ones(16, 16).to(dtype)
        payload, tdtype, shape = dt.tensor_payload(t)
        assert payload.ctypes.data == t.data_ptr() and payload.nbytes == t.nbytes
        assert shape == (16, 16)
    # a transposed view is copied (C order on disk), with the right values
    t = torch.arange(6.0).reshape(2, 3).T
    payload, _, shape = dt.tensor_payload(t)
    assert payload.ctypes.data != t.data_ptr() and shape == (3, 2)
    assert payload.view(np.float32).tolist() == [0, 3, 1, 4, 2, 5]


def test_writer_accepts_torch_tensors_directly(tmp_path):
    p = tmp_path / "w.tdump"
    t = torch.linspace(-2, 2, 12).reshape(3, 4).to(torch.bfloat16)
    param = torch.nn.Parameter(torch.ones(2, 2))
    with driftscope.Writer(p) as w:
        w.write("bf", t.T)                      # non-contiguous bf16: copied, raw bits kept
        w.write("param", param, role="parameter")
    d = driftscope.open(p)
    assert d.record("bf").dtype == "bf16" and np.array_equal(d["bf"], t.T.float().numpy())
    assert d.get("param", role="parameter").tolist() == [[1, 1], [1, 1]]


def test_requires_grad_and_non_contiguous_outputs(tmp_path):
    lin = torch.nn.Linear(3, 4)
    p = tmp_path / "run.tdump"
    x = torch.randn(2, 3)
    with dt.record(lin, p):
        y = lin(x)
    assert y.requires_grad
    assert np.array_equal(driftscope.open(p)["<root>"], y.detach().numpy())


def test_unsupported_dtype_warns_counts_or_raises(tmp_path):
    t = torch.ones(2, dtype=torch.complex64)
    with pytest.warns(RuntimeWarning, match=r"'<root>'.*complex64"):
        m = Emit(t)
        with dt.record(m, tmp_path / "a.tdump") as rec:
            m()
    assert rec.records_written == 0 and sum(rec.skipped.values()) == 1
    with pytest.raises(driftscope.UnsupportedError, match=r"output 0 of '<root>' \(Emit\)"):
        m = Emit(t)
        with dt.record(m, tmp_path / "b.tdump", strict=True):
            m()


def test_tensors_without_values_are_skipped_not_fatal(tmp_path):
    m = torch.nn.Linear(2, 2, device="meta")
    with pytest.warns(RuntimeWarning, match="meta tensor has no values"):
        with dt.record(m, tmp_path / "m.tdump") as rec:
            out = m(torch.ones(1, 2, device="meta"))
    assert out.device.type == "meta" and rec.records_written == 0
    assert driftscope.open(tmp_path / "m.tdump").finished


@pytest.mark.filterwarnings("ignore:.*quantized tensor creation functions.*:UserWarning")
def test_quantized_tensors_keep_scale_and_zero_point(tmp_path):
    x = torch.tensor([[-1.0, 0.0, 0.5], [1.0, 2.0, -0.25]])
    q = torch.quantize_per_tensor(x, scale=0.25, zero_point=3, dtype=torch.qint8)
    qc = torch.quantize_per_channel(x, torch.tensor([0.5, 0.125], dtype=torch.float64),
                                    torch.tensor([0, 2]), axis=0, dtype=torch.quint8)

    class Q(torch.nn.Module):
        def forward(self):
            return q, qc

    p = tmp_path / "run.tdump"
    m = Q()
    with dt.record(m, p):
        m()
    d = driftscope.open(p)
    r0 = d.record("<root>", role_index=0)
    assert r0.dtype == "i8" and r0.encoding["kind"] == "affine_tensor"
    assert np.array_equal(d.get("<root>", dtype="float64"), q.dequantize().double().numpy())
    r1 = d.record("<root>", role_index=1)
    assert r1.dtype == "u8" and r1.encoding["kind"] == "affine_channel"
    assert np.array_equal(d.get("<root>", role_index=1, dtype="float64"),
                          qc.dequantize().double().numpy())


# -- observer effect: hooks only read --------------------------------------------------------------

@pytest.mark.parametrize("options", [
    {}, {"inputs": True}, {"granularity": "op"}, {"summary": "*"},
    {"background": True, "filter": "blocks.*"},
], ids=["module", "inputs", "op", "summary", "background"])
def test_recording_gives_bit_identical_outputs(tmp_path, options):
    net, x = make_net(3)
    with torch.no_grad():
        plain = net(x)
        with dt.record(net, tmp_path / "run.tdump", **options):
            recorded = net(x)
        after = net(x)
    assert bits_equal(plain, recorded) and bits_equal(plain, after)
    # training mode with autograd: gradients unchanged too
    net.train()
    x1 = x.clone().requires_grad_(True)
    net(x1).sum().backward()
    g_plain = x1.grad.clone()
    x2 = x.clone().requires_grad_(True)
    with dt.record(net, tmp_path / "grad.tdump", **options):
        net(x2).sum().backward()
    assert bits_equal(g_plain, x2.grad)


@pytest.mark.parametrize("background", [False, True], ids=["sync", "background"])
def test_drop_behind_writes_the_same_bytes(tmp_path, background):
    """The recorder's default page-cache policy (drop_behind, issue 13 §5) changes no byte: a
    28 MiB recording (three 4 MiB windows evicted) equals the one written with the whole
    file kept cached, and reads back clean."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(6)]).eval()
    x = torch.randn(1024, 1024)
    paths = {}
    for drop in (True, False):
        paths[drop] = tmp_path / f"drop{int(drop)}.tdump"
        with torch.no_grad(), dt.record(net, paths[drop], background=background, queue_bytes=8 << 20,
                                        salt=7, meta={"start_time": "fixed"}, drop_behind=drop):
            net(x)
    data = paths[True].read_bytes()
    assert len(data) > 24 << 20
    assert data == paths[False].read_bytes()
    dump = driftscope.open(paths[True])
    assert dump.state == "clean" and len(dump) == 7


# -- op granularity --------------------------------------------------------------------------------

def test_op_granularity_names_ops_by_module_path(tmp_path):
    net, x = make_net()
    p = tmp_path / "run.tdump"
    with torch.no_grad(), dt.record(net, p, granularity="op") as rec:
        y = net(x)
    d = driftscope.open(p)
    names = [r.name for r in d]
    assert names[0] == "embed.addmm" or names[0] == "embed.linear"
    assert "blocks.0.norm.native_layer_norm" in names
    assert "blocks.0.act.gelu" in names and "blocks.0.add" in names
    norm = [r for r in d if r.name == "blocks.1.norm.native_layer_norm" and r.role_index == 0]
    assert [r.occurrence for r in norm] == [0, 1]  # the shared block, call by call
    assert all(r.op_type.startswith("aten.") for r in d)
    assert not any(r.op_type.startswith(("aten.view", "aten.t.", "aten._unsafe_view"))
                   for r in d)
    assert d.metadata["granularity"] == "op" and rec.hooks_active == 0
    last = [r for r in d if r.name.startswith("head.")][-1]
    assert np.array_equal(last.numpy(), y.reshape(-1, 3).numpy())  # the final view is not an op
    # Data flow at op level: the residual add reads the recorded ops it was computed from (through
    # views), and ds.source is the Python line that called the op, outside torch and driftscope.
    add = d.record("blocks.0.add")
    assert add.attrs["ds.inputs"] and all(
        ref.split(":", 1)[1] in names for ref in add.attrs["ds.inputs"].split(","))
    src = add.attrs["ds.source"]
    assert src.startswith(__file__ + ":") or os.path.basename(__file__) + ":" in src, src


def test_op_mode_is_left_on_exit(tmp_path):
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    net, x = make_net()
    with dt.record(net, tmp_path / "run.tdump", granularity="op"):
        assert _get_current_dispatch_mode() is not None
    assert _get_current_dispatch_mode() is None


# -- axes, metadata, light mode --------------------------------------------------------------------

def test_axes_from_pattern_map_and_callable(tmp_path):
    net, x = make_net()
    p = tmp_path / "run.tdump"
    with torch.no_grad(), dt.record(net, p, axes={"blocks.*": "batch,seq,hidden",
                                                  "head": "b,s,classes"}):
        net(x)
    d = driftscope.open(p)
    assert d.record("blocks.0.fc").axes == ("batch", "seq", "hidden")
    assert d.record("head").axes == ("b", "s", "classes")
    assert d.record("embed").axes == ()
    p2 = tmp_path / "run2.tdump"
    with torch.no_grad(), dt.record(net, p2, axes=lambda name, t: ["n"] * t.dim()
                                    if name == "embed" else None):
        net(x)
    assert driftscope.open(p2).record("embed").axes == ("n", "n", "n")


def test_metadata_is_filled_automatically(tmp_path):
    net, x = make_net()
    p = tmp_path / "run.tdump"
    with dt.record(net.to(torch.bfloat16), p, meta={"seed": 0, "device": "my-laptop"}):
        with torch.no_grad():
            net(x.to(torch.bfloat16))
    m = driftscope.open(p).metadata
    assert m["framework"] == f"pytorch {torch.__version__}"
    assert m["precision"] == "bfloat16" and m["default_dtype"] == "float32"
    assert m["backend"] == "cpu" and m["device"] == "my-laptop" and m["seed"] == "0"
    assert m["model"].endswith("Net") and m["writer"].startswith("driftscope ")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", m["start_time"])


def test_light_mode_summaries(tmp_path):
    net, x = make_net()
    p = tmp_path / "run.tdump"
    with torch.no_grad(), dt.record(net, p, summary="blocks.*", projection_dim=32):
        y = net(x)
    d = driftscope.open(p)
    kinds = {r.name: r.kind for r in d}
    assert kinds["blocks.0.fc"] == "summary" and kinds["head"] == "tensor"
    s = d.record("<root>").stats()
    assert s["count"] == y.numel()
    summ = d.record("blocks.1", occurrence=1).summary
    assert summ["projection"].shape == (32,) and summ["count"] == 2 * 5 * 8


def test_bad_arguments_are_reported_before_any_file(tmp_path):
    net, _ = make_net()
    p = tmp_path / "run.tdump"
    with pytest.raises(driftscope.FilterSyntaxError):
        dt.record(net, p, filter="rank<<1")
    with pytest.raises(driftscope.InvalidArgumentError, match="granularity"):
        dt.record(net, p, granularity="layer")
    with pytest.raises(driftscope.InvalidArgumentError, match="torch.nn.Module"):
        dt.record(lambda x: x, p)
    assert not p.exists()


# -- crash safety: SIGKILL mid-run -----------------------------------------------------------------

CHILD = textwrap.dedent("""
    import sys, torch, driftscope.torch as dt
    torch.manual_seed(0)
    net = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(8)]).eval()
    x = torch.randn(4, 64)
    def report(ev):
        if ev.status == "written":
            print(f"{ev.name} {ev.occurrence}", flush=True)
    with torch.no_grad(), dt.record(net, sys.argv[1], sync="record", on_record=report):
        while True:
            net(x)
""")


def test_sigkill_mid_run_loses_nothing_reported(tmp_path):
    p = tmp_path / "run.tdump"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.Popen([sys.executable, str(script), str(p)], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    reported = []
    try:
        for line in proc.stdout:
            reported.append(tuple(line.split()))
            if len(reported) >= 60:
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL and len(reported) >= 60
    d = driftscope.open(p)  # full checksum verification
    assert d.state in ("unfinished", "cut")
    have = {(r.name, str(r.occurrence)) for r in d}
    assert set(reported) <= have
    # The values are the model's, not garbage: layer 0's first output is reproducible.
    torch.manual_seed(0)
    net = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(8)]).eval()
    with torch.no_grad():
        want = net[0](torch.randn(4, 64))
    assert np.array_equal(d.get("0"), want.numpy())


# -- python -m driftscope record torch -------------------------------------------------------------

ENTRY = textwrap.dedent("""
    import torch

    def make(width="8"):
        torch.manual_seed(0)
        w = int(width)
        model = torch.nn.Sequential(torch.nn.Linear(4, w), torch.nn.ReLU(), torch.nn.Linear(w, 2))
        return model, (torch.randn(3, 4),)
""")


def test_cli_record_torch(tmp_path):
    (tmp_path / "entry.py").write_text(ENTRY)
    out = tmp_path / "run.tdump"
    r = subprocess.run([sys.executable, "-m", "driftscope", "record", "torch",
                        "--model", f"{tmp_path / 'entry.py'}:make", "--model-arg", "width=16",
                        "--dtype", "bfloat16", "--meta", "seed=0", "--axes", "*=batch,features",
                        "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "4 tensors recorded" in r.stderr
    d = driftscope.open(out)
    assert d.names() == ["0", "1", "2", "<root>"]
    assert d.record("0").shape == (3, 16) and d.record("0").dtype == "bf16"
    assert d.record("0").axes == ("batch", "features")
    assert d.metadata["seed"] == "0" and d.metadata["precision"] == "bfloat16"
    # module:function form, resolved through sys.path
    r = subprocess.run([sys.executable, "-m", "driftscope", "record", "torch", "--model",
                        "entry:make", "-o", str(tmp_path / "b.tdump"), "--filter", "2"],
                       capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(
                           filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))})
    assert r.returncode == 0, r.stderr
    assert driftscope.open(tmp_path / "b.tdump").names() == ["2"]


@pytest.mark.parametrize("args, message", [
    (["--model", "nocolon"], "expected MODULE:FUNCTION"),
    (["--model", "no_such_module_xyz:make"], "No module named 'no_such_module_xyz'"),
    (["--model", "ENTRY:nope"], "has no function 'nope'"),
    (["--model", "ENTRY:make", "--dtype", "float99"], "not a torch dtype"),
    (["--model", "ENTRY:make", "--filter", "rank<<2"], "filter_syntax"),
])
def test_cli_record_torch_errors(tmp_path, args, message):
    (tmp_path / "entry.py").write_text(ENTRY)
    args = [a.replace("ENTRY", str(tmp_path / "entry.py")) for a in args]
    r = subprocess.run([sys.executable, "-m", "driftscope", "record", "torch", *args, "-o",
                        str(tmp_path / "x.tdump")], capture_output=True, text=True)
    assert r.returncode == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1


# -- docs/howto/pytorch.md: the commands run as written --------------------------------------------

def test_howto_pytorch_commands_run(tmp_path):
    text = (ROOT / "docs" / "howto" / "pytorch.md").read_text()
    blocks = re.findall(r"```(bash|python)\n(.*?)```", text, re.S)
    assert blocks, "docs/howto/pytorch.md has no code blocks"
    bindir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    for lang, body in blocks:
        if lang == "python":
            cmd = [sys.executable, "-c", body]
        else:
            cmd = ["bash", "-euo", "pipefail", "-c", body]
        r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, f"{lang} block failed:\n{body}\n{r.stdout}\n{r.stderr}"
