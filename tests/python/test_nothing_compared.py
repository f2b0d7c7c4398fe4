"""Nothing compared is not a pass (issue 7, bug 18): two dumps that hold no tensors (crashed
recordings), a filter or name map that pairs nothing, a one-sided comparison with
--allow-unpaired. The command exits 2 with a NOTHING COMPARED summary and still writes its reports
(JSON valid against docs/report-schema.json); Python's driftscope.compare says the same; `verify`
says a dump holds no records and --strict fails it.

    DRIFTSCOPE_BIN=build/dev/driftscope pytest tests/python/test_nothing_compared.py
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("DRIFTSCOPE_BIN", ROOT / "build" / "dev" / "driftscope")).absolute()
sys.path.insert(0, str(ROOT / "tests" / "support"))
import tdump_write as tw  # noqa: E402

pytestmark = pytest.mark.skipif(not BIN.exists(), reason=f"driftscope binary not built: {BIN}")


def run(args, cwd):
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS")}
    return subprocess.run([str(BIN), *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=60)


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("nothing")
    meta = [("framework", "test")]
    tw.write_tdump(d / "crashed_a.tdump", meta, [], salt=1, close=False)
    tw.write_tdump(d / "crashed_b.tdump", meta, [], salt=1, close=False)
    tw.write_tdump(d / "empty.tdump", meta, [], salt=1)
    x = {"name": "x", "dtype": "f32", "shape": [3], "data": np.array([1, 2, 3], np.float32)}
    tw.write_tdump(d / "one.tdump", meta, [x], salt=1)
    return d


def validate(doc):
    import jsonschema
    schema = json.loads((ROOT / "docs" / "report-schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(doc)


@pytest.mark.parametrize("args,summary", [
    (["crashed_a.tdump", "crashed_b.tdump"], "NOTHING COMPARED: neither dump holds a tensor (reference: 0 records, unfinished; candidate: 0 records, unfinished)"),
    (["empty.tdump", "empty.tdump"], "NOTHING COMPARED: neither dump holds a tensor (reference: 0 records, clean; candidate: 0 records, clean)"),
    (["one.tdump", "one.tdump", "--filter", "nothing.like.this"], "NOTHING COMPARED: no tensor of the reference passed --filter"),
    (["one.tdump", "crashed_a.tdump", "--allow-unpaired"], "NOTHING COMPARED: the candidate holds no tensor: 1 only in the reference (allowed)"),
    (["one.tdump", "one.tdump", "--map-b", "^(.*)$=>renamed.$1", "--allow-unpaired"], "NOTHING COMPARED: no tensor pair was compared: 1 only in the reference (allowed), 1 only in the candidate (allowed)"),
])
def test_nothing_compared_exits_2_with_reports(work, args, summary):
    p = run(["compare", *args, "--json", "r.json", "--markdown", "r.md"], work)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stdout.splitlines()[0].startswith(summary), p.stdout
    assert "PASS" not in p.stdout
    doc = json.loads((work / "r.json").read_text())
    validate(doc)
    assert doc["verdict"] == "nothing_compared" and doc["exit_code"] == 2
    assert doc["summary"].startswith(summary)
    assert (work / "r.md").read_text().startswith("## \u26a0\ufe0f driftscope compare: nothing_compared\n")
    q = run(["compare", *args, "-q"], work)
    assert q.returncode == 2 and q.stdout.startswith(summary) and len(q.stdout.splitlines()) == 1


def test_compared_pairs_still_pass(work):
    p = run(["compare", "one.tdump", "one.tdump", "-q"], work)
    assert p.returncode == 0 and p.stdout.startswith("PASS: 1 tensor pairs within tolerance")
    # Unpaired tensors without --allow-unpaired stay a divergence (exit 1), as before.
    assert run(["compare", "one.tdump", "crashed_a.tdump", "-q"], work).returncode == 1


def test_verify_says_a_dump_is_empty(work):
    p = run(["verify", "empty.tdump", "crashed_a.tdump"], work)
    assert p.returncode == 0
    lines = p.stdout.splitlines()
    assert lines[0].startswith("empty.tdump: OK: clean, no records (empty: the run recorded nothing), ")
    assert lines[1].startswith("crashed_a.tdump: OK: unfinished (no END record: the run crashed or is "
                               "still running), no records (empty: the run recorded nothing), ")
    p = run(["verify", "--strict", "empty.tdump"], work)
    assert p.returncode == 1 and p.stdout.startswith("empty.tdump: DAMAGED: clean, no records")
    assert run(["verify", "--strict", "one.tdump"], work).returncode == 0


def test_python_compare_nothing_compared(work):
    driftscope = pytest.importorskip("driftscope")
    r = driftscope.compare(str(work / "crashed_a.tdump"), str(work / "crashed_b.tdump"))
    assert r.verdict == "nothing_compared" and r.exit_code == 2 and not r.passed
    assert r.summary.startswith("NOTHING COMPARED: neither dump holds a tensor")
    r = driftscope.compare(str(work / "one.tdump"), str(work / "one.tdump"))
    assert r.verdict == "pass" and r.exit_code == 0 and r.passed
