"""Inputs that change or are not files, outputs that are inputs (issue 7, bugs 4, 5 and 8): the
command reports a clear error with exit 2 and leaves no temporary file; it never dies of a signal.

A writer truncating a live dump while driftscope reads it is made deterministic by an LD_PRELOAD
shim (tests/tools/shrink_on_map.c, built with the CLI): the file named by DS_SHRINK_FILE is cut to
DS_SHRINK_SIZE bytes right after the process maps it, so every later access past the cut is a
SIGBUS on the old code.

    DRIFTSCOPE_BIN=build/dev/driftscope pytest tests/python/test_cli_io.py
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("DRIFTSCOPE_BIN", ROOT / "build" / "dev" / "driftscope")).absolute()
SHIM = Path(os.environ.get("DRIFTSCOPE_SHRINK_SHIM",
                           BIN.parent / "tests" / "tools" / "libds_shrink_on_map.so")).absolute()

sys.path.insert(0, str(ROOT / "tests" / "support"))
import tdump_write as tw  # noqa: E402

pytestmark = pytest.mark.skipif(not BIN.exists(), reason=f"driftscope binary not built: {BIN}")

CUT = 8192  # the header and the first records survive; the rest of the file is gone
CHANGED = "file changed while reading (it shrank from {} to 8192 bytes); read it again once its writer is done"


def tensors(offset: float = 0.0) -> list[dict]:
    return [{"name": f"layer.{i}", "op_type": "Linear", "dtype": "f32", "shape": [4096],
             "data": (np.arange(4096, dtype="<f4") + i + offset)} for i in range(64)]


def run(args, cwd, shrink=None, timeout=60):
    env = dict(os.environ)
    if shrink:
        assert SHIM.exists(), f"shim not built: {SHIM}"
        env.update(LD_PRELOAD=str(SHIM), DS_SHRINK_FILE=shrink, DS_SHRINK_SIZE=str(CUT))
    return subprocess.run([str(BIN), *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=timeout)


@pytest.fixture()
def work(tmp_path: Path) -> Path:
    tw.write_tdump(tmp_path / "a.tdump", [("writer", "tests")], tensors(), salt=1)
    tw.write_tdump(tmp_path / "b.tdump", [("writer", "tests")], tensors(0.25), salt=2)
    np.savez(tmp_path / "acts.npz", **{f"t{i}": np.arange(4096, dtype=np.float32) + i
                                       for i in range(32)})
    return tmp_path


# (arguments, the file cut under the command)
SHRINKING = {
    "verify": (["verify", "b.tdump"], "b.tdump"),
    "ls": (["ls", "b.tdump"], "b.tdump"),
    "info": (["info", "b.tdump"], "b.tdump"),
    "show": (["show", "b.tdump", "layer.40"], "b.tdump"),
    "filter": (["filter", "b.tdump", "out.tdump", "-q"], "b.tdump"),
    "export": (["export", "b.tdump", "out.npz", "-q"], "b.tdump"),
    "import": (["import", "acts.npz", "out.tdump", "-q"], "acts.npz"),
    "compare": (["compare", "a.tdump", "b.tdump", "-q", "--no-progress"], "b.tdump"),
    "compare-json": (["compare", "a.tdump", "b.tdump", "--no-progress", "--json", "r.json"],
                     "b.tdump"),
}


@pytest.mark.parametrize("verb", list(SHRINKING))
def test_input_cut_while_read_is_an_error_not_a_crash(work, verb):
    args, victim = SHRINKING[verb]
    size = (work / victim).stat().st_size
    before = set(os.listdir(work))
    p = run(args, work, shrink=victim)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)  # -7 was SIGBUS
    assert CHANGED.format(size) in p.stderr, p.stderr
    assert p.stderr.startswith("driftscope: error: ") and p.stderr.count("\n") == 1, p.stderr
    assert (work / victim).stat().st_size == CUT  # the shim did cut it
    assert set(os.listdir(work)) == before, "an output or temporary file was left behind"


def test_shim_leaves_other_files_alone(work):
    # The same commands without a cut pass: the failures above come from the cut alone.
    p = run(["compare", "a.tdump", "a.tdump", "-q", "--no-progress"], work, shrink="absent.tdump")
    assert p.returncode == 0, p.stderr
    p = run(["import", "acts.npz", "out.tdump", "-q"], work, shrink="absent.npz")
    assert p.returncode == 0, p.stderr


def test_growing_input_is_fine(work):
    # A writer appending to a live dump is normal: what was mapped stays valid.
    tw.write_tdump(work / "live.tdump", [("writer", "tests")], tensors(), salt=3, close=False)
    before = (work / "live.tdump").read_bytes()
    p = run(["verify", "live.tdump"], work)
    assert p.returncode == 0, p.stderr
    with open(work / "live.tdump", "ab") as f:
        f.write(b"\0" * 100)
    assert (work / "live.tdump").read_bytes()[:len(before)] == before


def test_report_onto_an_input_is_refused_and_nothing_runs(work):
    os.symlink("b.tdump", work / "link.json")
    before = (work / "b.tdump").read_bytes()
    for out in ["b.tdump", "link.json", str(work / "a.tdump")]:
        for flag in ["--json", "--markdown"]:
            p = run(["compare", "a.tdump", "b.tdump", flag, out], work)
            assert p.returncode == 2, (out, flag, p.stderr)
            assert p.stderr == (f"driftscope: error: output {out} is the input file; choose another "
                                "name (driftscope never modifies its inputs)\n")
            assert p.stdout == ""
    assert (work / "b.tdump").read_bytes() == before


def test_the_output_rule_holds_for_names_that_are_not_utf8(tmp_path):
    """refuse_output_onto_inputs and write_output take a path's bytes (os.fsencode): a file
    name that is not UTF-8 is still refused as an output when it is an input, also through a
    hard link, and a report is written to such a name (the library took text and raised
    TypeError before)."""
    from driftscope._cli import refuse_output_onto_inputs, write_output

    name = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"in\xff.onnx"))
    Path(name).write_bytes(b"model")
    link = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"link\xfe.onnx"))
    os.link(name, link)
    same = refuse_output_onto_inputs(link, [name])
    assert same is not None and "is the input file" in same
    assert refuse_output_onto_inputs(name + ".json", [name]) is None
    out = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"report\xfd.json"))
    write_output(out, "{}\n", [name])
    assert Path(out).read_text() == "{}\n" and Path(name).read_bytes() == b"model"
