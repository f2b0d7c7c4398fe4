"""The data-flow rounding bound (docs/metrics.md §7a), checked against numpy float64.

A small transformer block (Linear, GELU, Linear, residual, LayerNorm, softmax) recorded by the
PyTorch recorder in float32 (reference) and in bfloat16 / float16 (candidates). For every
compared value tensor with recorded inputs the test recomputes, in numpy float64 from the dumped
values, its relative L2 error and the bound

    2 * max(error of its inputs that are within rounding) + 2 u + sqrt(K) * 2^-24

(u of the half dtype, K the longest last axis of the tensor and its inputs), checks driftscope's
numbers against it, then that the half-precision noise of every op is within rounding and a
genuine fault (one of 64 rows scaled by 1.3: relative error ~0.04, which the former fixed bound
16 u = 1/16 of bfloat16 would have called rounding) is beyond it.
"""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import driftscope  # noqa: E402
import driftscope.torch as dt  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.abspath(os.environ.get("DRIFTSCOPE_BIN", os.path.join(ROOT, "build", "dev", "driftscope")))
UNIT = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}


class Block(torch.nn.Module):
    def __init__(self, d=256, h=1024):
        super().__init__()
        self.fc1 = torch.nn.Linear(d, h)
        self.act = torch.nn.GELU()
        self.fc2 = torch.nn.Linear(h, d)
        self.norm = torch.nn.LayerNorm(d)
        self.softmax = torch.nn.Softmax(dim=-1)

    def forward(self, x):
        return self.softmax(self.norm(x + self.fc2(self.act(self.fc1(x)))))


def scale_row(mod, args, out):
    out = out.clone()
    out[3] *= 1.3  # a local bug: one of 64 rows off by 30 %
    return out


def run(model, x, path):
    with torch.no_grad(), dt.record(model, path):
        model(x)
    return path


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    d = tmp_path_factory.mktemp("rounding")
    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(64, 256)
    out = {"ref": run(model, x, d / "ref.tdump")}
    for dtype in UNIT:
        cand = copy.deepcopy(model).to(getattr(torch, dtype))
        out[dtype] = run(cand, x.to(getattr(torch, dtype)), d / f"{dtype}.tdump")
    faulty = copy.deepcopy(model).to(torch.bfloat16)
    faulty.fc2.register_forward_hook(scale_row)
    out["fault"] = run(faulty, x.to(torch.bfloat16), d / "fault.tdump")
    return out


def compare(ref, cand):
    js = str(cand) + ".json"
    r = subprocess.run([BIN, "compare", str(ref), str(cand), "--json", js], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode in (0, 1), r.stderr
    with open(js) as f:
        return json.load(f)


def values(path):
    return {(r.name, r.role): r.numpy().astype(np.float64) for r in driftscope.open(path)}


def checked(ref, cand, u):
    """Recomputes error and bound of every value tensor with inputs in float64; returns them."""
    rep = compare(ref, cand)
    R, C = values(ref), values(cand)
    tensors = rep["tensors"]
    rows = {}
    for i, t in enumerate(tensors):
        if t["value_kind"] != "float" or t["basis"] != "dataflow":
            continue
        r, c = R[(t["name"], t["role"])], C[(t["name"], t["role"])]
        err = np.linalg.norm(c - r) / np.linalg.norm(r)
        assert t["error"] == pytest.approx(err, rel=1e-9), t["name"]
        # The inputs' error as recomputed here (a tensor without inputs of its own, e.g. the
        # model's input, keeps the report's judgement: its bound is not the data-flow one).
        k = max([t["shape_ref"][-1]] + [tensors[j]["shape_ref"][-1] for j in t["basis_pairs"]])
        inherited = max([rows[j][0] if j in rows else tensors[j]["error"] for j in t["basis_pairs"]
                         if not (rows[j][2] if j in rows else tensors[j]["beyond_rounding"])] + [0.0])
        bound = 2 * inherited + 2 * u + math.sqrt(k) * 2.0 ** -24
        assert t["rounding"] == pytest.approx(bound, rel=1e-9), t["name"]
        beyond = bool(err > bound)
        assert t["beyond_rounding"] is beyond, t["name"]
        rows[i] = (err, bound, beyond)
    return rep, {tensors[i]["name"]: v for i, v in rows.items()}


@pytest.mark.parametrize("dtype", list(UNIT))
def test_half_precision_noise_of_every_op_is_within_rounding(dumps, dtype):
    rep, rows = checked(dumps["ref"], dumps[dtype], UNIT[dtype])
    assert {"fc1", "act", "fc2", "norm", "softmax"} <= set(rows)
    for name, (err, bound, beyond) in rows.items():
        assert err > 0 and not beyond, (name, err, bound)  # rounded, not exact, within the bound
    assert rep["origins"] == []


def test_a_genuine_fault_is_beyond_rounding_and_the_origin(dumps):
    rep, rows = checked(dumps["ref"], dumps["fault"], UNIT["bfloat16"])
    assert rows["fc1"][2] is False and rows["act"][2] is False  # bf16 noise before the fault
    assert rows["fc2"][2] is True                                # the fault
    assert rows["fc2"][0] < 16 * UNIT["bfloat16"]  # the former fixed bound 16u called it rounding
    assert [o["name"] for o in rep["origins"]] == ["fc2"]
    assert rep["origins"][0]["origin"] == "introduced"

