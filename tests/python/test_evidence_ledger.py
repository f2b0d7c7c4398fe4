"""The evidence ledger against hostile input and against the ways to fake a result (issue 23
item 9, docs/references.md section 4 "What the ledger proves"). Every case runs the real
command with a timeout, so a hang fails instead of blocking the suite.

Hostile: a FIFO ledger, /proc and device files named by a ledger, one file named many times,
control characters in what verify prints, a line nested too deep for json.
Faking a result: (L1) a failing measurement cut and measured again, (L2) a head pinned right
after declare, (L3) a failing result rewritten as passing with its hashes recomputed, (L4) a
ledger declared after the results were seen."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import driftscope

ROOT = Path(__file__).resolve().parents[2]
DRIFTSCOPE = os.environ.get("DRIFTSCOPE_BIN", str(ROOT / "build" / "dev" / "driftscope"))
ZERO = "0" * 64


def _env():
    env = dict(os.environ, DRIFTSCOPE_PYTHON=sys.executable)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in [str(Path(driftscope.__file__).parents[1]), env.get("PYTHONPATH", "")] if p)
    return env


def run(*args, timeout=120):
    """`driftscope evidence ...`; a hang raises TimeoutExpired, which fails the test."""
    return subprocess.run([DRIFTSCOPE, "evidence", *map(str, args)], capture_output=True,
                          text=True, env=_env(), timeout=timeout)


def head_of(proc):
    return proc.stdout.strip().split("head ")[-1].strip()


# The line format, written here from docs/references.md, not from the module under test.
def canon(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def write_ledger(path, entries):
    """A ledger whose every hash is right: what anyone who can edit the file can make."""
    prev, out = ZERO, []
    for seq, entry in enumerate(entries, start=1):
        body = {"entry": entry, "prev": prev, "seq": seq}
        raw = canon(dict(body, sha256=hashlib.sha256(canon(body).encode()).hexdigest())).encode()
        out.append(raw + b"\n")
        prev = hashlib.sha256(raw).hexdigest()
    Path(path).write_bytes(b"".join(out))
    return prev


def entries_of(path):
    return [json.loads(line)["entry"] for line in Path(path).read_bytes().splitlines()]


def sha(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def declaration(files, ident="x"):
    return {"kind": "declare", "schema": "driftscope.evidence/1", "id": ident, "design": "",
            "time": "2026-12-01T00:00:00Z", "tool": "driftscope test", "tolerances": {"r64_k": {}},
            "files": [{"role": r, "path": str(p), "sha256": s} for r, p, s in files]}


@pytest.fixture()
def two_files(tmp_path):
    a, b = tmp_path / "ref32.bin", tmp_path / "ref64.bin"
    a.write_bytes(os.urandom(3000))
    b.write_bytes(os.urandom(5000))
    return a, b


# -- hostile input ----------------------------------------------------------------------------

def test_fifo_ledger_is_refused_without_blocking(tmp_path, two_files):
    a, b = two_files
    fifo = tmp_path / "ledger.jsonl"
    os.mkfifo(fifo)
    # before: declare and measure blocked forever reading the FIFO
    for args in (("declare", fifo, "--id", "x", "--reference", a, "--reference64", b),
                 ("measure", fifo, "--id", "x", "--candidate", a),
                 ("verify", fifo)):
        proc = run(*args, timeout=30)
        assert proc.returncode == 2, (args[0], proc.stdout, proc.stderr)
        assert proc.stderr.count("\n") == 1 and "FIFO" in proc.stderr, proc.stderr
    # a FIFO given as a declared file is refused too, and nothing is written
    ledger = tmp_path / "real.jsonl"
    proc = run("declare", ledger, "--id", "x", "--reference", a, "--reference64", b,
               "--input", fifo, timeout=30)
    assert proc.returncode == 2 and "input" in proc.stderr and "FIFO" in proc.stderr
    assert not ledger.exists() or ledger.read_bytes() == b""


@pytest.mark.parametrize("named", ["/proc/self/pagemap", "/proc/self/mem", "/dev/zero", "fifo"])
def test_verify_refuses_proc_device_and_fifo_files_a_ledger_names(tmp_path, two_files, named):
    a, b = two_files
    if named == "fifo":
        named = tmp_path / "named.fifo"
        os.mkfifo(named)
    if not os.path.exists(named):
        pytest.skip(f"{named} is not on this system")
    ledger = tmp_path / "ledger.jsonl"
    write_ledger(ledger, [declaration([("reference", a, sha(a)), ("reference64", b, sha(b)),
                                       ("input", named, "0" * 64)])])
    # before: /proc/self/pagemap was read to its end (hundreds of GiB), /dev/zero for ever
    proc = run("verify", ledger, timeout=30)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stderr.count("\n") == 1 and str(named) in proc.stderr
    assert "only regular files are read" in proc.stderr
    # and declare refuses it in the same words
    proc = run("declare", tmp_path / "new.jsonl", "--id", "x", "--reference", a,
               "--reference64", b, "--input", named, timeout=30)
    assert proc.returncode == 2 and "only regular files are read" in proc.stderr


RCHAR = ("import atexit, runpy, sys\n"
         "def report():\n"
         "    io = dict(l.split(': ') for l in open('/proc/self/io').read().split('\\n') if l)\n"
         "    sys.stderr.write('RCHAR %s\\n' % io['rchar'])\n"
         "atexit.register(report)\n"
         "sys.argv = ['driftscope'] + sys.argv[1:]\n"
         "runpy.run_module('driftscope', run_name='__main__', alter_sys=True)\n")


def bytes_read(*args):
    """`python -m driftscope evidence ARGS` and the bytes it read (rchar of /proc/self/io):
    a count, not a time, so the test does not depend on the machine's speed."""
    proc = subprocess.run([sys.executable, "-c", RCHAR, "evidence", *map(str, args)],
                          capture_output=True, text=True, env=_env(), timeout=120)
    rchar = [int(line.split()[1]) for line in proc.stderr.splitlines() if line.startswith("RCHAR")]
    return proc, rchar[-1]


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs /proc/self/io")
def test_a_file_named_many_times_is_hashed_once(tmp_path, two_files):
    a, b = two_files
    big = tmp_path / "inputs.bin"
    size, times = 16 << 20, 24
    with open(big, "wb") as f:
        f.write(os.urandom(1 << 20) * 16)
    ledger = tmp_path / "ledger.jsonl"
    inputs = [x for _ in range(times) for x in ("--input", big)]
    proc, declared = bytes_read("declare", ledger, "--id", "x", "--reference", a,
                                "--reference64", b, *inputs)
    assert proc.returncode == 0, proc.stderr
    assert len(entries_of(ledger)[0]["files"]) == 2 + times  # every naming is recorded
    proc, verified = bytes_read("verify", ledger)
    assert proc.returncode == 0 and "1 lines, intact" in proc.stdout, proc.stdout
    # before: 24 x 16 MiB = 384 MiB read by each; now the file once (plus the interpreter's own)
    assert declared < 2 * size and verified < 2 * size, (declared, verified)
    assert declared >= size and verified >= size


def test_control_characters_from_a_ledger_are_escaped(tmp_path, two_files):
    a, b = two_files
    role = "input\x1b]0;owned\x07"
    path = str(tmp_path / "gone\x1b[2J\rOK.bin")
    ledger = tmp_path / "ledger.jsonl"
    write_ledger(ledger, [declaration([("reference", a, sha(a)), ("reference64", b, sha(b)),
                                       (role, path, "0" * 64)], ident="id\x1b[31m"),
                          {"kind": "measure", "id": "id\x1b[31m", "result": {},
                           "candidate": {"path": "/nowhere/\u202ecand\x07", "sha256": ZERO}}])
    proc = run("verify", ledger, timeout=60)
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout + proc.stderr
    for raw in ("\x1b", "\x07", "\r", "\u202e"):
        assert raw not in out  # before: the role and path reached the terminal as they were
    assert "input\\x1b]0;owned\\x07" in proc.stdout and "gone\\x1b[2J\\x0dOK.bin" in proc.stdout
    assert "\\u202ecand\\x07" in proc.stdout
    # the error path (exit 2, stderr) too: a FIFO with control characters in its name
    fifo = tmp_path / "f\x1b[5mifo"
    os.mkfifo(fifo)
    write_ledger(ledger, [declaration([("reference", fifo, ZERO), ("reference64", b, sha(b))])])
    proc = run("verify", ledger, timeout=30)
    assert proc.returncode == 2 and "\x1b" not in proc.stderr and "f\\x1b[5mifo" in proc.stderr


def test_a_line_nested_too_deep_for_json_is_one_problem(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_bytes(b"[" * 100000 + b"\n")
    proc = run("verify", ledger, timeout=60)
    # before: RecursionError, a traceback
    assert proc.returncode == 1 and "line 1 (offset 0): not a ledger line" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_head_must_be_a_hash(tmp_path, two_files):
    a, b = two_files
    ledger = tmp_path / "ledger.jsonl"
    assert run("declare", ledger, "--id", "x", "--reference", a, "--reference64", b).returncode == 0
    proc = run("verify", ledger, "--head", "deadbeef")
    assert proc.returncode == 2 and "64 hex digits" in proc.stderr


# -- what the ledger proves -------------------------------------------------------------------

@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """float32 and float64 reference runs of a small hash-initialised classifier, a bfloat16
    candidate (fails the strict rule k = 1, floor 0) and a float32 copy (passes it)."""
    pytest.importorskip("torch")
    sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))
    from reference_runs import classifier_runs

    d = tmp_path_factory.mktemp("ledger")
    paths = classifier_runs(d)
    shutil.copy(paths["float32"], d / "f32copy.tdump")
    paths.update(bf16=str(d / "bf16.tdump"), good=str(d / "f32copy.tdump"))
    return paths


STRICT = ["--r64-k", "bf16=1", "--r64-k", "f32=1", "--r64-floor", "0"]


def declare(runs, ledger, ident, *extra):
    proc = run("declare", ledger, "--id", ident, "--reference", runs["float32"],
               "--reference64", runs["float64"], *extra)
    assert proc.returncode == 0, proc.stderr
    return head_of(proc)


def test_L1_a_cut_tail_needs_a_pinned_head_and_a_pin_after_each_measure_catches_it(runs, tmp_path):
    ledger = tmp_path / "evidence.jsonl"
    declare(runs, ledger, "bf16", *STRICT)
    proc = run("measure", ledger, "--id", "bf16", "--candidate", runs["bf16"])
    assert proc.returncode == 1 and "first failing" in proc.stdout, proc.stderr
    pinned = head_of(proc)  # the reviewer pins the head after the failing measurement
    honest = ledger.read_bytes()

    # honest work goes on after the pin: the pin still verifies (before: --head was equality)
    declare(runs, ledger, "next", *STRICT)
    assert run("measure", ledger, "--id", "next", "--candidate", runs["good"]).returncode == 0
    proc = run("verify", ledger, "--head", pinned)
    assert proc.returncode == 0, proc.stdout
    assert "the pinned head is line 2 of 4; the 2 line(s) after it are not covered" in proc.stdout

    # the failing line is cut and a passing candidate measured under the same id
    ledger.write_bytes(honest.splitlines(keepends=True)[0])
    proc = run("measure", ledger, "--id", "bf16", "--candidate", runs["good"])
    assert proc.returncode == 0, proc.stderr
    proc = run("verify", ledger)
    # undetectable from the ledger alone, and verify says so instead of claiming more
    assert proc.returncode == 0 and "2 lines, intact" in proc.stdout
    assert "without a --head pinned after the last measurement, that no line was cut" in proc.stdout
    proc = run("verify", ledger, "--head", pinned)
    assert proc.returncode == 1 and f"the pinned head {pinned} is no line" in proc.stdout


def test_L2_a_head_pinned_right_after_declare_anchors_the_prefix(runs, tmp_path):
    ledger = tmp_path / "evidence.jsonl"
    pinned = declare(runs, ledger, "bf16", "--r64-k", "bf16=3")
    proc = run("measure", ledger, "--id", "bf16", "--candidate", runs["bf16"])
    assert proc.returncode in (0, 1), proc.stderr
    proc = run("verify", ledger, "--head", pinned)
    # before: "head is ..., expected ..." and exit 1 for the honest ledger
    assert proc.returncode == 0 and "2 lines, intact" in proc.stdout, proc.stdout
    assert "the pinned head is line 1 of 2" in proc.stdout
    assert run("verify", ledger, "--head", ZERO).returncode == 0  # the empty prefix
    # the declaration rewritten (a looser k) with every hash recomputed: the chain alone cannot
    # show it; the pinned line is gone (and re-measuring under the new k gives another table)
    entries = entries_of(ledger)
    entries[0]["tolerances"]["r64_k"]["bf16"] = 30.0
    write_ledger(ledger, entries)
    proc = run("verify", ledger, "--head", pinned)
    assert proc.returncode == 1 and f"the pinned head {pinned} is no line" in proc.stdout


def forge_pass(entry):
    """The failing measurement rewritten as passing: the verdict, and optionally the table."""
    from driftscope.reference._check import verdict_line

    res = entry["result"]
    res.update(passed=True, failed=[])
    res["line"] = verdict_line(dict(res, judged=res["judged"]))


def test_L3_a_rewritten_verdict_is_recomputed_and_re_measured(runs, tmp_path):
    ledger = tmp_path / "evidence.jsonl"
    cand = tmp_path / "cand.tdump"
    shutil.copy(runs["bf16"], cand)
    declare(runs, ledger, "bf16", *STRICT)
    assert run("measure", ledger, "--id", "bf16", "--candidate", cand).returncode == 1
    honest = ledger.read_bytes()
    proc = run("verify", ledger)
    assert proc.returncode == 0, proc.stdout
    assert ("measurement 'bf16': verdict recomputed from its recorded table and the declared "
            "rule; re-measured from the named dumps: fail as recorded") in proc.stdout

    # (a) only the verdict rewritten, the line's hash recomputed: the table contradicts it
    entries = entries_of(ledger)
    forge_pass(entries[1])
    write_ledger(ledger, entries)
    proc = run("verify", ledger)
    # before: "2 lines, intact"
    assert proc.returncode == 1, proc.stdout
    assert "recorded pass (passed, failed, line), but its table under the declared rule gives " \
           "fail" in proc.stdout

    # (b) the table rewritten to match, its hash recomputed: self-consistent, so only running
    # the check again shows it
    for row in entries[1]["table"]:
        if row["k"] is not None:
            row.update(candidate_vs_float64=row["float32_vs_float64"], rule="pass",
                       argmax=row["argmax_float32"])
    t = entries[1]["table"]
    entries[1]["result"].update(
        argmax_flips=sum(r["argmax"]["flips"] for r in t if r["argmax"]),
        table_sha256=hashlib.sha256(canon(t).encode()).hexdigest())
    forge_pass(entries[1])
    write_ledger(ledger, entries)
    proc = run("verify", ledger)
    assert proc.returncode == 1, proc.stdout
    assert "re-measured, the table differs from the recorded one (recorded pass, re-measured " \
           "fail" in proc.stdout
    assert "recorded pass (" not in proc.stdout  # the table itself agrees with the verdict

    # (b') and with the declaration's files dropped, so that nothing could be re-measured
    forged = [dict(entries[0], files=[])] + entries[1:]
    write_ledger(ledger, forged)
    proc = run("verify", ledger)
    assert proc.returncode == 1 and "'bf16' names 0 reference dumps, expected 1" in proc.stdout
    write_ledger(ledger, entries)

    # (c) the same forgery without the candidate: verify says it could not re-measure
    os.unlink(cand)
    proc = run("verify", ledger)
    assert proc.returncode == 1
    assert ("verdict recomputed from its recorded table and the declared rule; not re-measured "
            "(a dump it used is absent or changed)") in proc.stdout
    assert "candidate" in proc.stdout and "no such file" in proc.stdout

    # (d) a row's decision flipped without its numbers: caught from the table alone
    ledger.write_bytes(honest)
    entries = entries_of(ledger)
    row = next(r for r in entries[1]["table"] if r["rule"] == "fail")
    row["rule"] = "pass"
    entries[1]["result"]["table_sha256"] = hashlib.sha256(
        canon(entries[1]["table"]).encode()).hexdigest()
    write_ledger(ledger, entries)
    proc = run("verify", ledger)
    assert proc.returncode == 1 and f"({row['name']}): recorded 'pass', but" in proc.stdout


def test_L4_a_ledger_declared_after_the_results_cannot_show_it(runs, tmp_path):
    # the results are seen first...
    proc = subprocess.run([DRIFTSCOPE, "reference", "check", runs["float32"], runs["bf16"],
                           "--reference64", runs["float64"], *STRICT], capture_output=True,
                          text=True, env=_env(), timeout=120)
    assert proc.returncode == 1
    # ...then a fresh ledger declares a tolerance that passes, and measures once
    ledger = tmp_path / "evidence.jsonl"
    declare(runs, ledger, "bf16", "--r64-k", "bf16=1000")
    assert run("measure", ledger, "--id", "bf16", "--candidate", runs["bf16"]).returncode == 0
    proc = run("verify", ledger)
    assert proc.returncode == 0 and "2 lines, intact" in proc.stdout
    # the ledger cannot prove its own timing; verify says what "intact" does not cover
    assert "it does not show when a line was written, that nothing was measured elsewhere " \
           "first" in proc.stdout
