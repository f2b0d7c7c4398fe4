"""Progress bars (issue 12): record, compare and guard draw one line on stderr when stderr is a
terminal and nothing otherwise. compare's bar is C++ (cli/cmd_compare.cpp); the Python commands
share driftscope._progress.Progress, drawn the same way."""
import io
import os
import pty
import subprocess
import sys

import numpy as np

import driftscope
from driftscope._progress import Progress

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DRIFTSCOPE = os.environ.get("DRIFTSCOPE_BIN", os.path.join(ROOT, "build", "dev", "driftscope"))


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_bar_only_on_a_terminal():
    quiet = io.StringIO()
    with Progress("guard", "backends", stream=quiet) as bar:
        bar.update(1, 3, "onnxruntime-cpu")
    assert quiet.getvalue() == ""

    tty = Tty()
    with Progress("guard", "backends", stream=tty) as bar:
        bar.update(1, 3, "onnxruntime-cpu")
        assert tty.getvalue() == "\r\x1b[Kguard [##########....................] 1/3 backends (onnxruntime-cpu)"
        bar.update(3, 3)
    assert tty.getvalue().endswith("3/3 backends\r\x1b[K")  # the last state drawn, then erased

    off = Tty()
    with Progress("recording", enabled=False, stream=off) as bar:
        bar.update(5, None)
    assert off.getvalue() == ""


def dumps(d):
    rng = np.random.default_rng(0)
    with driftscope.Writer(d / "a.tdump", salt=1) as a, driftscope.Writer(d / "b.tdump", salt=1) as b:
        for i in range(3):
            x = rng.standard_normal(64).astype(np.float32)
            a.write(f"t{i}", x)
            b.write(f"t{i}", x)
    return str(d / "a.tdump"), str(d / "b.tdump")


def on_pty(args, env=None):
    """Runs `args` with stderr on a pseudo-terminal; (exit code, what the terminal got)."""
    master, slave = pty.openpty()
    try:
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=slave, env=env)
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO once the last writer is gone
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
    return r.returncode, seen


def test_compare_draws_its_bar_on_a_tty_only(tmp_path):
    a, b = dumps(tmp_path)
    piped = subprocess.run([DRIFTSCOPE, "compare", a, b], capture_output=True, text=True)
    assert piped.returncode == 0 and piped.stderr == ""
    rc, seen = on_pty([DRIFTSCOPE, "compare", a, b])
    assert rc == 0 and b"comparing [" in seen and b"3/3 pairs" in seen
    rc, seen = on_pty([DRIFTSCOPE, "compare", a, b, "--no-progress"])
    assert rc == 0 and seen == b""


def test_count_without_total_turns_a_spinner_and_hides_escapes():
    tty = Tty()
    bar = Progress("recording", "tensors written", stream=tty)
    bar.update(1, None, "encoder.\x1b[2Jlayer")
    assert tty.getvalue() == "\r\x1b[Krecording | 1 tensors written (encoder.\\x1b[2Jlayer)"
    bar._last = 0.0  # past the redraw interval
    bar.update(2, None, "x" * 200)
    line = tty.getvalue().rsplit("\r\x1b[K", 1)[1]
    assert line.startswith("recording / 2 tensors written (xxx") and line.endswith("...)")
    assert len(line) < 120
    bar.close()
    assert tty.getvalue().endswith("\r\x1b[K")


def test_record_torch_counts_on_a_tty_only(tmp_path):
    model = tmp_path / "m.py"
    model.write_text("import torch\n"
                     "def make():\n"
                     "    torch.manual_seed(0)\n"
                     "    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())\n"
                     "    return m, torch.ones(1, 4)\n")
    base = [DRIFTSCOPE, "record", "torch", "--model", f"{model}:make"]
    env = dict(os.environ, DRIFTSCOPE_PYTHON=sys.executable)
    rc, seen = on_pty(base + ["-o", str(tmp_path / "a.tdump")], env)
    assert rc == 0 and b"recording | 1 tensors written" in seen, seen
    assert b"tensors written" not in seen.rsplit(b"\x1b[K", 1)[1], seen  # erased when done
    rc, seen = on_pty(base + ["-o", str(tmp_path / "b.tdump"), "--no-progress"], env)
    assert rc == 0 and b"recording " not in seen and b"tensors recorded" in seen, seen
    piped = subprocess.run(base + ["-o", str(tmp_path / "c.tdump")], capture_output=True,
                           text=True, env=env)
    assert piped.returncode == 0 and "recording " not in piped.stderr, piped.stderr
