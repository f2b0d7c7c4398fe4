"""Compare options and policy files from every front end (issue 7): one validator in the library
(CompareSettings::resolve) refuses the same bad value with the same code and message from
`driftscope compare`, the C ABI (tests/c/test_c_api.c holds the same table) and
driftscope.compare(); and a policy or mapping file nested without bound is a clean error, not a
stack overflow (bug 3).

    DRIFTSCOPE_BIN=build/dev/driftscope pytest tests/python/test_compare_options.py
"""
from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import driftscope

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("DRIFTSCOPE_BIN", ROOT / "build" / "dev" / "driftscope")).absolute()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("options")
    rng = np.random.default_rng(7)
    with driftscope.Writer(d / "ref.tdump") as w:
        for i in range(3):
            w.write(f"layer{i}", rng.standard_normal((4, 8)).astype(np.float32), op_type="Linear")
    return d


def cli(runs, *args):
    return subprocess.run([str(BIN), "compare", "ref.tdump", "ref.tdump", "-q", *args], cwd=runs,
                          capture_output=True, text=True, timeout=60)


# Python keyword arguments, the same value as command-line arguments, the library's message.
BAD = [
    ({"atol": -1.0}, ["--atol", "-1"], "compare option 'atol' is -1, allowed 0 .. inf"),
    ({"atol": math.nan}, ["--atol", "nan"], "compare option 'atol' is nan, allowed 0 .. inf"),
    ({"rtol": math.nan}, ["--rtol", "nan"], "compare option 'rtol' is nan, allowed 0 .. inf"),
    ({"min_cosine": 2.0}, ["--min-cosine", "2"], "compare option 'min_cosine' is 2, allowed -1 .. 1"),
    ({"min_cosine": -1.5}, ["--min-cosine", "-1.5"],
     "compare option 'min_cosine' is -1.5, allowed -1 .. 1"),
    ({"min_sqnr": math.nan}, ["--min-sqnr", "nan"],
     "compare option 'min_sqnr' is nan, allowed -inf .. inf"),
    ({"max_rel_l2": -0.1}, ["--max-rel-l2", "-0.1"],
     "compare option 'max_rel_l2' is -0.1, allowed 0 .. inf"),
    ({"max_ulp": -1}, ["--max-ulp", "-1"],
     "compare option 'max_ulp' is -1, allowed 0 .. 9223372036854775807"),
    ({"min_argmax_agreement": 1.5}, ["--min-argmax", "1.5"],
     "compare option 'min_argmax' is 1.5, allowed 0 .. 1"),
    ({"min_topk_overlap": -0.1}, ["--min-topk", "-0.1"],
     "compare option 'min_topk' is -0.1, allowed 0 .. 1"),
    ({"max_mismatch_fraction": 0.1}, ["--max-mismatch-fraction", "0.1"],
     "compare option 'max_mismatch_fraction' needs 'atol' or 'rtol' (it loosens the allclose rule)"),
    ({"threads": -1}, ["--threads", "-1"], "compare option 'threads' is -1, allowed 0 .. 4096"),
    ({"threads": 100000}, ["--threads", "100000"],
     "compare option 'threads' is 100000, allowed 0 .. 4096"),
    ({"top_k": 0}, ["--top-k", "0"], "compare option 'top_k' is 0, allowed 1 .. 1000"),
    ({"top_k": -3}, ["--top-k", "-3"], "compare option 'top_k' is -3, allowed 1 .. 1000"),
    ({"r64_floor": -1.0}, ["--r64-floor", "-1"],
     "compare option 'r64_floor' is -1, allowed 0 .. 1e+12"),
    ({"r64_k": ["f16"]}, ["--r64-k", "f16"],
     "compare option 'r64_k' entry 'f16': expected DTYPE=K with K in 0 .. 1e+12, e.g. f16=3"),
    ({"pairs": "sideways"}, ["--pairs", "sideways"],
     "compare option 'pairs' is 'sideways', allowed name, positional"),
]
IDS = [" ".join(b[1]) for b in BAD]


@pytest.mark.parametrize("kwargs,args,message", BAD, ids=IDS)
def test_python_refuses_like_the_library(runs, kwargs, args, message):
    with pytest.raises(driftscope.InvalidArgumentError) as e:
        driftscope.compare(runs / "ref.tdump", runs / "ref.tdump", **kwargs)
    assert e.value.code_name == "invalid_argument"
    assert str(e.value) == f"invalid_argument: {message}"


@pytest.mark.skipif(not BIN.exists(), reason=f"driftscope binary not built: {BIN}")
@pytest.mark.parametrize("kwargs,args,message", BAD, ids=IDS)
def test_cli_refuses_with_the_same_message(runs, kwargs, args, message):
    r = cli(runs, *args)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == f"driftscope: error: invalid_argument: {message}\n"


def test_python_amplifier_settings_are_checked(runs):
    ref = runs / "ref.tdump"
    with pytest.raises(driftscope.InvalidArgumentError, match="'max_amplifiers' is -1, allowed 0 .. 1000"):
        driftscope.compare(ref, ref, max_amplifiers=-1)
    with pytest.raises(driftscope.InvalidArgumentError, match="'amplification_threshold' is nan"):
        driftscope.compare(ref, ref, amplification_threshold=math.nan)


def test_valid_edge_values_pass_everywhere(runs):
    ref = runs / "ref.tdump"
    report = driftscope.compare(ref, ref, min_cosine=-1.0, atol=0.0, threads=4096, top_k=1000,
                                classes=["layer*"], r64_k={"f16": 3}, r64_floor=0.0)
    assert report.verdict == "pass"
    if BIN.exists():
        r = cli(runs, "--min-cosine", "-1", "--atol", "0", "--threads", "4096", "--top-k", "1000")
        assert r.returncode == 0, r.stderr


# ---- bug 3: nesting without bound ------------------------------------------------------------

def nested(n: int) -> str:
    return "x = " + "{a=" * n + "1" + "}" * n + "\n"


@pytest.mark.parametrize("text", [
    nested(100_000),
    "x = " + "[{a=" * 50_000 + "1" + "}]" * 50_000 + "\n",
    "x = " + "[" * (1 << 20),
    "a." * 100_000 + "a = 1\n",
], ids=["inline-tables", "arrays-of-inline-tables", "brackets-1MiB", "dotted-key"])
def test_deep_policy_and_mapping_files_are_refused(runs, tmp_path, text):
    path = tmp_path / "deep.toml"
    path.write_text(text)
    ref = runs / "ref.tdump"
    with pytest.raises(driftscope.PolicyError) as e:
        driftscope.compare(ref, ref, policy=path)
    msg = str(e.value)
    assert msg.startswith(f"bad_policy: {path}:1:") and "\n" not in msg
    assert "nested more than 32 deep" in msg or "dotted key has more than 32 parts" in msg
    with pytest.raises(driftscope.PolicyError):
        driftscope.compare(ref, ref, mapping=path)


@pytest.mark.skipif(not BIN.exists(), reason=f"driftscope binary not built: {BIN}")
def test_cli_refuses_a_deep_mapping_file(runs, tmp_path):
    path = tmp_path / "deep_map.toml"
    path.write_text("a = [" + "{b=" * 100_000 + "}" * 100_000 + "]\n")
    r = cli(runs, "--map-file", str(path))
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == f"driftscope: error: bad_policy: {path}:1:99: values nested more than 32 deep\n"


def test_policy_errors_name_line_and_column(runs, tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('version = 1\n[default]\nmin_cosine = 0.9 junk\n')
    ref = runs / "ref.tdump"
    with pytest.raises(driftscope.PolicyError) as e:
        driftscope.compare(ref, ref, policy=path)
    assert str(e.value).startswith(f"bad_policy: {path}:3:18: ")
