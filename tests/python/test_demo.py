"""The `make demo` fixture (examples/tiny_encoder.cpp) and its known answer.

The fixture is checked with the reference reader alone (independent of the C++ reader and of
compare): the float16 run's first non-finite value is in encoder.layers.2.norm1, nothing before
it is non-finite, and the float32 run is finite throughout. Then `driftscope compare --json` must
name exactly that LayerNorm as the first divergence.

Binaries: $DRIFTSCOPE_BIN (default build/dev/driftscope) and $DRIFTSCOPE_TINY_ENCODER (default
examples/tiny_encoder next to the driftscope binary).
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# The reference reader is loaded by path: putting python/driftscope on sys.path would make
# `import torch` find driftscope's torch.py in every later test module.
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
from tdump_write import load_reader  # noqa: E402

tdump_reader = load_reader()

DRIFTSCOPE = os.environ.get("DRIFTSCOPE_BIN", os.path.join(ROOT, "build", "dev", "driftscope"))
ENCODER = os.environ.get("DRIFTSCOPE_TINY_ENCODER",
                         os.path.join(os.path.dirname(DRIFTSCOPE), "examples", "tiny_encoder"))
EXPECTED = "encoder.layers.2.norm1"
LAYERS = 4


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    assert os.access(ENCODER, os.X_OK), f"{ENCODER} is not built (cmake --build build/dev)"
    out = tmp_path_factory.mktemp("demo")
    subprocess.run([ENCODER, str(out)], check=True, capture_output=True)
    subprocess.run([ENCODER, "--precision", "fp16-safe", str(out / "fp16-safe.tdump")],
                   check=True, capture_output=True)
    return out


def first_nonfinite(dump):
    for r in sorted(dump.records, key=lambda r: r.exec_index):
        if not np.isfinite(r.array.astype(np.float64)).all():
            return r.name
    return None


def test_fixture_runs_are_complete_and_described(dumps):
    ref = tdump_reader.read(str(dumps / "fp32.tdump"))
    cand = tdump_reader.read(str(dumps / "fp16.tdump"))
    assert ref.state == cand.state == "clean"
    assert ref.metadata["precision"] == "float32" and cand.metadata["precision"] == "float16"
    assert ref.metadata["model"] == cand.metadata["model"]
    assert "framework" in ref.metadata and ref.metadata["writer"].startswith("driftscope")
    # Same modules in the same execution order; dtypes as the two engines store them.
    assert [r.name for r in ref.records] == [r.name for r in cand.records]
    assert [r.exec_index for r in ref.records] == list(range(len(ref.records)))
    assert {r.dtype for r in ref.records} == {"f32"} and {r.dtype for r in cand.records} == {"f16"}
    names = {r.name: r for r in ref.records}
    for layer in range(LAYERS):
        for module, op in [("norm1", "LayerNorm"), ("attn.softmax", "Softmax"),
                           ("mlp.act", "GELU"), ("residual2", "Add")]:
            assert names[f"encoder.layers.{layer}.{module}"].op_type == op
    norm = names[EXPECTED]
    assert norm.axes == ["batch", "seq", "hidden"] and list(norm.shape) == [1, 16, 64]
    assert names[f"encoder.layers.0.attn.softmax"].axes == ["batch", "heads", "query", "key"]


def test_fixture_float16_overflows_first_in_the_block2_layernorm(dumps):
    ref = tdump_reader.read(str(dumps / "fp32.tdump"))
    cand = tdump_reader.read(str(dumps / "fp16.tdump"))
    assert first_nonfinite(ref) is None
    assert first_nonfinite(cand) == EXPECTED
    by_name = {r.name: r for r in cand.records}
    # The LayerNorm's input is large but finite in float16: the overflow is inside the norm.
    norm_input = by_name["encoder.layers.1.residual2"].array.astype(np.float64)
    assert np.isfinite(norm_input).all()
    assert 1000 < np.abs(norm_input).max() < 65504
    # x^2 of the largest input exceeds the largest binary16: why the variance overflows.
    assert np.abs(norm_input).max() ** 2 > 65504
    # The fixed engine (float32 statistics) stays finite everywhere.
    assert first_nonfinite(tdump_reader.read(str(dumps / "fp16-safe.tdump"))) is None


def compare(dumps, candidate):
    assert os.access(DRIFTSCOPE, os.X_OK), f"{DRIFTSCOPE} is not built"
    report = dumps / f"{candidate}.json"
    proc = subprocess.run([DRIFTSCOPE, "compare", str(dumps / "fp32.tdump"),
                           str(dumps / f"{candidate}.tdump"), "--json", str(report),
                           "--no-progress"], capture_output=True, text=True)
    return proc, json.loads(report.read_text())


def test_compare_names_the_block2_layernorm(dumps):
    proc, report = compare(dumps, "fp16")
    assert proc.returncode in (1, 3), proc.stderr
    assert report["verdict"] in ("silent_failure", "diverged")
    assert report["first_divergence"]["name"] == EXPECTED
    assert report["first_nonfinite"]["name"] == EXPECTED
    first = report["first_divergence"]
    assert first["op_type"] == "LayerNorm" and first["dtype_cand"] == "f16"
    assert first["nan_ref"] == 0 and first["nan_cand"] > 0
    assert first["origin"] == "introduced"  # born here, not carried in from block 1
    statuses = [(t["name"], t["status"]) for t in report["tensors"]]
    position = [n for n, _ in statuses].index(EXPECTED)
    assert all(s == "pass" for _, s in statuses[:position]), statuses[:position]
    assert EXPECTED in proc.stdout  # the summary a CI log shows names it too


def test_compare_passes_the_fixed_engine(dumps):
    proc, report = compare(dumps, "fp16-safe")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report["verdict"] == "pass" and report["first_divergence"] is None


def test_fixture_is_byte_reproducible(dumps, tmp_path):
    # Fixed weights, inputs and salts: the demo's files are the same bytes on every run.
    subprocess.run([ENCODER, str(tmp_path)], check=True, capture_output=True)
    for name in ("fp32.tdump", "fp16.tdump"):
        assert (tmp_path / name).read_bytes() == (dumps / name).read_bytes()
