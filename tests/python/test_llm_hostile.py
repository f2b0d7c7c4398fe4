"""llm-compare on hostile generation dumps (docs/howto/llm.md): a bad --top-k, logits with batch /
time axes, NaN/Inf logits. Bad input is one line and exit 2, never a traceback; NaN/Inf logits
are a silent failure (exit 3) with no numpy RuntimeWarning. Synthetic dumps written with
driftscope.Writer (no torch): each file runs in a few seconds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import driftscope
from driftscope import llm

ROOT = Path(__file__).resolve().parents[2]
V = np.random.RandomState(0).randn(16).astype(np.float32)


def _bin():
    return os.environ.get("DRIFTSCOPE_BIN") or str(ROOT / "build" / "dev" / "driftscope")


def _gen(path, logits, tokens=None):
    """A two-step generation: step.K/logits for K in 0, 1 (the arrays given), greedy tokens
    (default: each step's argmax), teacher-forced run metadata."""
    if tokens is None:
        tokens = [int(np.argmax(np.nan_to_num(np.asarray(x, np.float32)).reshape(-1)))
                  for x in logits]
    meta = {"llm.tokens": ",".join(map(str, tokens)), "llm.prompt_ids": "3,4",
            "llm.fed": ",".join(map(str, tokens[:-1])), "llm.steps": str(len(tokens))}
    with driftscope.Writer(path, meta) as w:
        for k, x in enumerate(logits):
            w.write(f"step.{k}/logits", np.asarray(x))
    return str(path)


def _main(capfd, *args):
    """`python -m driftscope llm-compare ARGS` in this process, numpy RuntimeWarnings raised."""
    from driftscope.__main__ import main

    capfd.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        code = main(["llm-compare", *map(str, args)])
    out, err = capfd.readouterr()
    return code, out, err


def _one_line(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and "Warning" not in err, err
    return lines[0]


@pytest.mark.parametrize("k", ["0", "-5", "x", "2.5"])
def test_top_k_below_1_or_not_an_integer_is_a_one_line_usage_error(tmp_path, capfd, k):
    ok = _gen(tmp_path / "ok.tdump", [V, V])
    code, out, err = _main(capfd, ok, ok, "--top-k", k)
    assert code == 2 and not out
    line = _one_line(err)
    assert line.startswith("driftscope llm-compare: error: argument --top-k:"), line
    assert "integer >= 1" in line and repr(k) in line, line
    with pytest.raises(driftscope.Error, match="top_k=0: must be an integer >= 1"):
        llm.compare(ok, ok, top_k=0)


def test_top_k_above_the_vocabulary_is_clamped_to_it(tmp_path, capfd):
    ok = _gen(tmp_path / "ok.tdump", [V, V])
    code, out, err = _main(capfd, ok, ok, "--top-k", str(10 ** 30), "--json",
                           tmp_path / "r.json")
    assert code == 0 and not err, err
    assert "top-16 overlap 1.000" in out, out
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["top_k"] == 16 and all(s["topk_overlap"] == 1.0 for s in data["steps"])
    assert llm.compare(ok, ok, top_k=3).top_k == 3


@pytest.mark.parametrize("shape", [(1, 16), (1, 1, 16)])
def test_logits_with_length_1_batch_and_time_axes_compare_as_the_vector(tmp_path, capfd, shape):
    flat = _gen(tmp_path / "flat.tdump", [V, -V])
    flip = _gen(tmp_path / "flip.tdump", [V, V])
    a = _gen(tmp_path / "a.tdump", [V.reshape(shape), (-V).reshape(shape)])
    b = _gen(tmp_path / "b.tdump", [V.reshape(shape), V.reshape(shape)])
    for pair in ((a, a), (a, flat)):  # [1, V] against itself and against [V]
        code, out, err = _main(capfd, *pair)
        assert code == 0 and not err, err
        assert "pass" in out.splitlines()[0], out
    want, got = llm.compare(flat, flip), llm.compare(a, b)
    assert got.first_flip == want.first_flip == 1 and got.verdict == "token_flip"
    assert [s["kl"] for s in got.steps] == [s["kl"] for s in want.steps]
    assert [s["topk_overlap"] for s in got.steps] == [s["topk_overlap"] for s in want.steps]


@pytest.mark.parametrize("shape", [(2, 2, 4), (2, 8), (1, 2, 8), (16, 1), (), (0,), (0, 16)])
def test_logits_with_a_real_batch_or_time_axis_are_one_line_and_exit_2(tmp_path, capfd, shape):
    x = np.resize(V, shape).astype(np.float32) if shape else np.float32(1.0)
    bad = _gen(tmp_path / "bad.tdump", [x, x], tokens=[1, 2])
    ok = _gen(tmp_path / "ok.tdump", [V, V])
    for pair in ((bad, bad), (ok, bad)):
        code, out, err = _main(capfd, *pair)
        assert code == 2 and not out, out
        line = _one_line(err)
        assert line.startswith(f"driftscope llm-compare: error: {bad}: step.0/logits (record at "
                               f"offset "), line
        assert f"has shape {list(shape)}; expected" in line and "[1, V]" in line, line


def test_logits_with_batch_axes_are_refused_by_reference64_too(tmp_path, capfd):
    ok = _gen(tmp_path / "ok.tdump", [V, V])
    flip = _gen(tmp_path / "flip.tdump", [-V, V])
    t = int(np.argmax(V))
    r64 = _gen(tmp_path / "r64.tdump", [np.resize(V, (2, 8)), V], tokens=[t, t])
    code, out, err = _main(capfd, ok, flip, "--reference64", r64)
    assert code == 2 and not out
    assert f"{r64}: step.0/logits (record at offset" in _one_line(err)


@pytest.mark.parametrize("case", ["inf_both", "mixed_inf_both", "nan_both", "inf_candidate",
                                  "nan_reference", "neginf_candidate"])
def test_nan_inf_logits_are_a_silent_failure_exit_3_without_warnings(tmp_path, capfd, case):
    pinf = np.full(16, np.inf, np.float32)
    mixed = np.where(np.arange(16) % 2 == 0, np.inf, -np.inf).astype(np.float32)
    nan = np.full(16, np.nan, np.float32)
    some_neginf = V.copy()
    some_neginf[3] = -np.inf
    ref, cand = {"inf_both": ([pinf, -pinf], [pinf, -pinf]),
                 "mixed_inf_both": ([mixed, V], [mixed, V]),
                 "nan_both": ([nan, V], [nan, V]),
                 "inf_candidate": ([V, V], [V, pinf]),
                 "nan_reference": ([V, nan], [V, V]),
                 "neginf_candidate": ([V, V], [some_neginf, V])}[case]
    a = _gen(tmp_path / "a.tdump", ref, tokens=[1, 2])
    b = _gen(tmp_path / "b.tdump", cand, tokens=[1, 2])
    code, out, err = _main(capfd, a, b, "--json", tmp_path / "r.json", "--markdown",
                           tmp_path / "r.md", "--html", tmp_path / "r.html")
    assert code == 3 and not err, err
    assert out.splitlines()[0].endswith(": non_finite"), out
    assert "non-finite logits (NaN/Inf: no softmax, a silent failure)" in out, out
    data = json.loads((tmp_path / "r.json").read_text())  # strict JSON: NaN/Inf are null
    assert data["verdict"] == "non_finite" and data["non_finite_steps"]
    k = data["non_finite_steps"][0]
    assert data["steps"][k]["kl"] is None and data["steps"][k]["non_finite"]
    assert "non_finite" in (tmp_path / "r.md").read_text()
    rep = llm.compare(a, b)
    assert rep.exit_code == 3 and not np.isfinite(rep.steps[k]["kl"])  # the guard reads this


def test_finite_logits_keep_their_verdicts(tmp_path, capfd):
    ok = _gen(tmp_path / "ok.tdump", [V, V])
    flip = _gen(tmp_path / "flip.tdump", [-V, V])
    code, out, err = _main(capfd, ok, ok)
    assert code == 0 and not err and "non-finite" not in out
    code, out, err = _main(capfd, ok, flip)
    assert code == 1 and not err and ": token_flip" in out.splitlines()[0], out
    rep = llm.compare(ok, flip)
    assert rep.steps[0]["non_finite"] is None and rep.non_finite_steps == []
    assert rep.steps[0]["kl"] > 0 and rep.steps[1]["kl"] == 0.0


def test_command_line_inf_logits_print_no_warning_and_exit_3(tmp_path):
    """End to end through the driftscope executable: stderr holds no RuntimeWarning."""
    pinf = np.full(16, np.inf, np.float32)
    a = _gen(tmp_path / "inf.tdump", [pinf, -pinf], tokens=[1, 2])
    env = dict(os.environ, PYTHONPATH=str(Path(driftscope.__file__).parents[1]))
    env.setdefault("DRIFTSCOPE_PYTHON", sys.executable)
    p = subprocess.run([_bin(), "llm-compare", a, a], capture_output=True, text=True,
                       timeout=120, env=env)
    assert p.returncode == 3, (p.stdout, p.stderr)
    assert p.stderr == "" and ": non_finite" in p.stdout, p.stderr
    p = subprocess.run([_bin(), "llm-compare", a, a, "--top-k", "0"], capture_output=True,
                       text=True, timeout=120, env=env)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
