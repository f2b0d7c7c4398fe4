"""The same reports on every SIMD target (docs/metrics.md §8: every kernel returns the same bits
on every target): `driftscope compare` (text, --json, --markdown, --html), `check` and `ls` run
under DRIFTSCOPE_SIMD for each target this CPU runs, on pairs that take every route of the
kernels (the all-finite stretches, NaN/Inf, zeros, sign changes, subnormals, huge values, float16
and bfloat16 straight from their bytes, the --html columns route of 2-D tensors), and their bytes
must equal those of the CPU's best target. The unit tests compare each kernel with its scalar
reference; this checks the whole report, so a machine without AVX-512 writes what this one does.

    DRIFTSCOPE_BIN=build/dev/driftscope pytest tests/python/test_simd_targets.py
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import driftscope

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("DRIFTSCOPE_BIN", ROOT / "build" / "dev" / "driftscope")).absolute()


def run(*args, simd=None, cwd=None):
    env = dict(os.environ, COLUMNS="100", NO_COLOR="1")
    env.pop("DRIFTSCOPE_SIMD", None)
    if simd is not None:
        env["DRIFTSCOPE_SIMD"] = simd
    return subprocess.run([str(BIN), *args], capture_output=True, env=env, cwd=cwd, timeout=300)


def version_lines(simd=None):
    out = run("--version", simd=simd)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.decode().splitlines()
    assert len(lines) == 2 and lines[0].startswith("driftscope "), lines
    return lines


def targets():
    # "simd: AVX3 (this CPU runs: AVX3 AVX2 SSE4 SSSE3 SCALAR scalar; DRIFTSCOPE_SIMD=...)"
    line = version_lines()[1]
    return line.split("this CPU runs: ", 1)[1].split(";", 1)[0].split()


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, round to nearest even (NaN kept a NaN)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    r = np.where(np.isnan(x), (u >> 16) | 0x40, r)
    return r.astype(np.uint16)


def cases(rng):
    """(name, reference, candidate) in float64; each is written as f32, f16 and bf16."""
    n = 70_001  # 17 chunks of 4096 and a tail of 369
    r = rng.standard_normal(n)
    out = [
        ("relative", r, r * (1 + 1e-3 * rng.standard_normal(n))),
        ("absolute", r, r + rng.uniform(-1e-3, 1e-3, n)),
        ("wide", r * np.exp(rng.uniform(-20, 20, n)), r * np.exp(rng.uniform(-20, 20, n))),
        ("sign_flips", r, np.where(rng.random(n) < 0.01, -r, r)),
        ("relu_zeros", np.maximum(r, 0), np.maximum(r + 1e-2 * rng.standard_normal(n), 0)),
        ("tiny", r * 1e-39, r * 1e-39 * (1 + 1e-2 * rng.standard_normal(n))),
        ("huge", r * 6e4, r * 6.5e4),
        ("equal", r, r.copy()),
    ]
    special = r.copy()
    cand = r + 1e-4 * rng.standard_normal(n)
    idx = rng.choice(n, 40, replace=False)
    special[idx[:10]] = np.nan
    cand[idx[5:15]] = np.nan
    special[idx[15:25]] = np.inf
    cand[idx[20:30]] = -np.inf
    cand[idx[30:]] = 0.0
    out.append(("nan_inf", special, cand))
    return out


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("simd")
    rng = np.random.default_rng(11)
    with driftscope.Writer(d / "ref.tdump") as wr, driftscope.Writer(d / "cand.tdump") as wc:
        for name, r, c in cases(rng):
            with np.errstate(over="ignore", invalid="ignore"):
                wr.write(f"{name}.f32", r.astype(np.float32))
                wc.write(f"{name}.f32", c.astype(np.float32))
                wr.write(f"{name}.f16", r.astype(np.float16))
                wc.write(f"{name}.f16", c.astype(np.float16))
                wr.write(f"{name}.bf16", bf16_bits(r.astype(np.float32)), dtype="bf16")
                wc.write(f"{name}.bf16", bf16_bits(c.astype(np.float32)), dtype="bf16")
        # 2-D tensors: the --html heat grid's columns route; a float64 pair: the decoded route.
        r2 = rng.standard_normal((300, 257))
        c2 = r2 + rng.uniform(-1e-3, 1e-3, r2.shape)
        wr.write("grid.f32", r2.astype(np.float32))
        wc.write("grid.f32", c2.astype(np.float32))
        wr.write("grid.f16", r2.astype(np.float16))
        wc.write("grid.f16", c2.astype(np.float16))
        wr.write("grid.bf16", bf16_bits(r2.astype(np.float32)), dtype="bf16")
        wc.write("grid.bf16", bf16_bits(c2.astype(np.float32)), dtype="bf16")
        wr.write("decoded.f64", r2)
        wc.write("decoded.f64", c2 * (1 + 1e-9))
    return d


def outputs(pair: Path, simd, tag: str) -> dict[str, bytes]:
    got = {}
    cmp = run("compare", "ref.tdump", "cand.tdump", "--all", "--json", f"{tag}.json", "--markdown",
              f"{tag}.md", "--html", f"{tag}.html", simd=simd, cwd=pair)
    assert cmp.returncode == 1, cmp.stderr  # the pairs differ
    got["compare stdout"] = cmp.stdout
    for ext in ("json", "md", "html"):
        got[f"compare --{ext}"] = (pair / f"{tag}.{ext}").read_bytes()
    chk = run("check", "cand.tdump", "--json", f"{tag}.check.json", simd=simd, cwd=pair)
    got["check stdout"] = chk.stdout
    got["check --json"] = (pair / f"{tag}.check.json").read_bytes()
    got["ls"] = run("ls", "ref.tdump", simd=simd, cwd=pair).stdout
    return got


def test_every_target_writes_the_same_reports(pair):
    names = targets()
    assert names[-1] == "scalar" and len(names) >= 2, names
    want = outputs(pair, None, "best")
    assert b"relative.f16" in want["compare --json"] and len(want["compare --html"]) > 10_000
    for t in names[1:]:
        assert version_lines(t)[1].startswith(f"simd: {t} "), t
        got = outputs(pair, t, t)
        for what, data in want.items():
            assert got[what] == data, f"{what} differs under DRIFTSCOPE_SIMD={t}"


def test_a_target_this_cpu_cannot_run_is_refused():
    out = run("compare", "a.tdump", "b.tdump", simd="AVX9")
    err = out.stderr.decode()
    assert out.returncode == 2 and len(err.strip().splitlines()) == 1, err
    assert "DRIFTSCOPE_SIMD: SIMD target 'AVX9' is not one this build runs on this CPU" in err
    assert err.rstrip().endswith(f"({', '.join(targets())})"), err
    # Empty is unset: the CPU's best.
    assert version_lines("")[1] == version_lines()[1]


def test_python_reads_it_too():
    env = dict(os.environ, DRIFTSCOPE_SIMD="scalar")
    code = "import driftscope._core as c; print(c.simd_target(), c.simd_targets()[-1])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and out.stdout.split() == ["scalar", "scalar"], out.stderr
    env["DRIFTSCOPE_SIMD"] = "AVX9"
    out = subprocess.run([sys.executable, "-c", "import driftscope"], capture_output=True, text=True,
                         env=env)
    assert out.returncode != 0 and "DRIFTSCOPE_SIMD: SIMD target 'AVX9'" in out.stderr
