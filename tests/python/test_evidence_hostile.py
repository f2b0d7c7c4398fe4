"""The evidence ledger against the inputs of a hostile-input sweep: integers too large for a
float in a correctly hashed line, a ledger of millions of blank or short lines, tolerances and
text that a ledger cannot hold given to declare, a write that fails half way, and a declared
path that is not a string. Each case runs the real command with a timeout and checks the
project rule: a clear one-line error (exit 2) or reported problems (exit 1), never a traceback,
a hang or an unbounded output, and never a ledger left empty, cut or changed."""

from __future__ import annotations

import hashlib
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_evidence_ledger import (  # noqa: E402
    DRIFTSCOPE, _env, canon, declaration, sha, two_files, write_ledger)

__all__ = ["two_files"]  # the fixture, used by name


def run(*args, timeout=60, **kw):
    return subprocess.run([DRIFTSCOPE, "evidence", *map(str, args)], capture_output=True,
                          text=True, env=_env(), timeout=timeout, errors="replace", **kw)


def one_line_error(proc, *words):
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    for w in words:
        assert w in proc.stderr, (w, proc.stderr)


ROW = {"name": "t", "role": "output", "status": "ok", "k": 2.0, "rule": "pass",
       "float32_vs_float64": 1e-7, "candidate_vs_float64": 1e-7, "limit": 3e-7,
       "argmax": None, "argmax_float32": None}


def measurement(table, cand, ident="x"):
    result = {"passed": True, "judged": 1, "failed": [], "argmax_flips": 0,
              "argmax_flips_float32": 0, "compare_verdict": "pass", "line": "-",
              "table_sha256": hashlib.sha256(canon(table).encode()).hexdigest()}
    return {"kind": "measure", "schema": "driftscope.evidence/1", "id": ident,
            "time": "2026-12-01T00:00:00Z", "tool": "driftscope test",
            "candidate": {"path": str(cand), "sha256": sha(cand)}, "result": result,
            "table": table}


# -- 1. an integer of 400 digits where a real number belongs ----------------------------------

@pytest.mark.parametrize("where", ["k", "candidate_vs_float64", "r64_k"])
def test_an_integer_too_large_for_a_float_is_a_problem(tmp_path, two_files, where):
    a, b = two_files
    decl = declaration([("reference", a, sha(a)), ("reference64", b, sha(b))])
    table = [dict(ROW)]
    if where == "r64_k":
        decl["tolerances"] = {"r64_k": {"f32": 10 ** 400}}
    else:
        table[0][where] = 10 ** 400
    ledger = tmp_path / "ledger.jsonl"
    write_ledger(ledger, [decl, measurement(table, a)])
    proc = run("verify", ledger)
    # before: OverflowError: int too large to convert to float, a traceback
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    if where == "r64_k":
        assert "line 1: declaration 'x': its r64_k 'f32' is an integer of about 401 digits, " \
               "not a number in 0 .. 1e+12" in proc.stdout, proc.stdout
    else:
        assert "its recorded table is malformed" in proc.stdout
        assert "is not a finite real number" in proc.stdout, proc.stdout
    assert max(map(len, proc.stdout.splitlines())) < 400  # the number is not printed whole
    if where == "r64_k":  # and measure refuses the declaration in one line
        write_ledger(ledger, [decl])
        before = ledger.read_bytes()
        one_line_error(run("measure", ledger, "--id", "x", "--candidate", a), "r64_k",
                       "nothing measured")
        assert ledger.read_bytes() == before


# -- 2. millions of blank and short lines -----------------------------------------------------

def test_many_blank_and_short_lines_cost_little_and_print_little(tmp_path, two_files):
    ledger = tmp_path / "ledger.jsonl"
    blank, short, long_ = 3 << 20, 1 << 18, 2000
    ledger.write_bytes(b"\n" * blank + b"x\n" * short + b"{not json, long enough to parse}\n"
                       * long_)
    total = blank + short + long_
    t0 = time.monotonic()
    proc = run("verify", ledger)
    took = time.monotonic() - t0
    # before: 3 M problem lines, 20 s and more than 400 MB (a 50 MB ledger: > 120 s, 5.8 GB)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 100 + 3, lines[-3:]
    assert lines[0].endswith("line 1 (offset 0): not a ledger line")
    assert lines[99].endswith("line 100 (offset 99): not a ledger line")
    assert lines[100].endswith(f"... and {total - 100} more problems")
    assert lines[-1].startswith(f"{ledger}: {total} lines, {total} problem(s); head ")
    assert took < 10, took

    # with a pinned head: the short lines are looked at one by one until the pin is found
    last = hashlib.sha256(b"{not json, long enough to parse}").hexdigest()
    proc = run("verify", ledger, "--head", last)
    assert proc.returncode == 1 and len(proc.stdout.splitlines()) == 104, proc.stdout[-500:]
    assert f"the pinned head is line {blank + short + 1} of {total}" in proc.stdout
    assert time.monotonic() - t0 < 20


def test_a_damaged_line_among_blank_ones_keeps_the_chain_checks(tmp_path, two_files):
    a, b = two_files
    ledger = tmp_path / "ledger.jsonl"
    good = ledger.with_suffix(".good")
    write_ledger(good, [declaration([("reference", a, sha(a)), ("reference64", b, sha(b))])])
    ledger.write_bytes(b"\n" * 500 + good.read_bytes())
    proc = run("verify", ledger)
    assert proc.returncode == 1
    # 500 blank lines, then the declaration's seq and prev; its files are checked all the same
    assert "... and 402 more problems" in proc.stdout
    assert "501 lines, 502 problem(s)" in proc.stdout


# -- 3. declare: values a ledger cannot hold are refused before it is touched -------------------

BAD_DECLARE = [
    (["--r64-k", "f32=nan"], ["--r64-k f32=nan", "0 .. 1e+12"]),
    (["--r64-k", "bf16=-1"], ["--r64-k bf16=-1.0", "0 .. 1e+12"]),
    (["--r64-floor", "inf"], ["--r64-floor inf", "0 .. 1e+12"]),
    (["--design", "a\udcffb"], ["--design 'a\\xffb'", "UTF-8"]),
    (["--id", "\udcff"], ["--id '\\xff'", "UTF-8"]),
]


def declare_args(a, b, extra):
    return ["--reference", a, "--reference64", b, *extra] + \
        ([] if "--id" in extra else ["--id", "x"])


@pytest.mark.parametrize("extra,words", BAD_DECLARE, ids=[" ".join(e) for e, _ in BAD_DECLARE])
def test_declare_refuses_bad_values_and_leaves_no_ledger(tmp_path, two_files, extra, words):
    a, b = two_files
    ledger = tmp_path / "ledger.jsonl"
    # before: "Out of range float values are not JSON compliant" or "'utf-8' codec can't
    # encode" (no option named), and a 0-byte ledger left behind
    one_line_error(run("declare", ledger, *declare_args(a, b, extra)), *words)
    assert not ledger.exists()


def test_declare_refuses_bad_values_and_leaves_a_ledger_as_it_was(tmp_path, two_files):
    a, b = two_files
    ledger = tmp_path / "ledger.jsonl"
    assert run("declare", ledger, "--id", "first", "--reference", a,
               "--reference64", b).returncode == 0
    before = ledger.read_bytes()
    for extra, words in (BAD_DECLARE[0], BAD_DECLARE[-1]):
        one_line_error(run("declare", ledger, *declare_args(a, b, extra)), *words)
        assert ledger.read_bytes() == before


def test_a_path_that_is_not_utf8(tmp_path, two_files):
    a, b = two_files
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/r\xff.bin"))
    odd.write_bytes(a.read_bytes())
    ledger = tmp_path / "ledger.jsonl"
    one_line_error(run("declare", ledger, "--id", "x", "--reference", odd, "--reference64", b),
                   "--reference", "r\\xff.bin", "UTF-8")
    assert not ledger.exists()
    # the ledger's own name may be any bytes: it is never written into the ledger
    odd_ledger = Path(os.fsdecode(bytes(tmp_path) + b"/l\xff.jsonl"))
    proc = run("declare", odd_ledger, "--id", "x", "--reference", a, "--reference64", b)
    assert proc.returncode == 0, proc.stderr
    one_line_error(run("declare", odd_ledger, "--id", "y", "--reference", odd_ledger,
                       "--reference64", b), "is one of the declared files")
    one_line_error(run("measure", odd_ledger, "--id", "x", "--candidate", odd),
                   "--candidate", "UTF-8")
    assert len(odd_ledger.read_bytes().splitlines()) == 1


def _small_files(limit):
    def limit_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a killed process
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return limit_files


def test_a_failed_write_leaves_the_ledger_complete_or_absent(tmp_path, two_files):
    a, b = two_files
    ledger = tmp_path / "ledger.jsonl"
    args = ["--reference", a, "--reference64", b]
    # a file size limit lets the line be written in part only
    # before: the part was left in place and declare said "declared" (exit 0)
    proc = run("declare", ledger, "--id", "x", *args, preexec_fn=_small_files(100))
    one_line_error(proc, "cannot write", "nothing appended")
    assert not ledger.exists()
    assert run("declare", ledger, "--id", "x", *args).returncode == 0
    before = ledger.read_bytes()
    proc = run("declare", ledger, "--id", "y", *args, preexec_fn=_small_files(len(before) + 50))
    one_line_error(proc, "cannot write")
    assert ledger.read_bytes() == before
    proc = run("verify", ledger)
    assert proc.returncode == 0 and "1 lines, intact" in proc.stdout, proc.stdout


# -- 4. a declared path that is not a string --------------------------------------------------

def test_a_declared_path_that_is_not_a_string_is_not_a_path(tmp_path, two_files):
    a, b = two_files
    ledger = tmp_path / "ledger.jsonl"
    decl = declaration([("reference", a, sha(a)), ("reference64", b, sha(b))])
    decl["files"][0]["path"] = 123  # 123 would be a file descriptor to os.stat
    write_ledger(ledger, [decl])
    before = ledger.read_bytes()
    proc = run("measure", ledger, "--id", "x", "--candidate", a)
    # before: "cannot read 123: Bad file descriptor"
    one_line_error(proc, "reference 123 is not a path", "nothing measured")
    assert ledger.read_bytes() == before
    proc = run("verify", ledger)
    assert proc.returncode == 1 and "line 1: reference 123 is not a path" in proc.stdout
    assert "Traceback" not in proc.stderr
