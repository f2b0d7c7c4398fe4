"""Non-regular inputs in the pure-Python paths (issue 7, bug 8): the one-file reference reader and
the recorders' --input loader refuse a FIFO at once instead of waiting for a writer forever.
Each call runs in a child process with a time limit, so a regression fails instead of hanging."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_py(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def test_reference_reader_refuses_a_fifo(tmp_path):
    os.mkfifo(tmp_path / "pipe.tdump")
    os.mkdir(tmp_path / "dir.tdump")
    code = f"""
import sys; sys.path.insert(0, {str(ROOT / 'python' / 'driftscope')!r})
import tdump_reader as t
for p in ('pipe.tdump', 'dir.tdump'):
    try:
        t.read(p)
    except t.TdumpError as e:
        print(e.code, e)
"""
    r = run_py(code, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "io_error io_error at offset 0: cannot read 'pipe.tdump': it is a FIFO, not a regular file",
        "io_error io_error at offset 0: cannot read 'dir.tdump': it is a directory, not a regular file",
    ]


def test_recorder_inputs_refuse_a_fifo(tmp_path):
    pytest.importorskip("onnxruntime")
    os.mkfifo(tmp_path / "x.npy")
    code = """
from driftscope.onnxruntime import load_cli_inputs
try:
    load_cli_inputs(['x=x.npy'])
except Exception as e:
    print(type(e).__name__, e)
"""
    r = run_py(code, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ("InputMismatchError --input 'x=x.npy': cannot read 'x.npy' as "
                                ".npy/.npz (it is a FIFO, not a regular file)")
