"""`driftscope record` as installed, and option values that start with '-' (issue 7, bug 15).

The pip-installed command must run the Python of the environment it was installed into, not
whatever `python3` PATH finds first; and `--filter '-*dropout*'` (a filter that excludes) must be
taken as the option's value by every verb, in the C++ command and in the Python recorders.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import driftscope
from driftscope._cli import parse_args

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("DRIFTSCOPE_BIN", ROOT / "build" / "dev" / "driftscope")).absolute()
needs_bin = pytest.mark.skipif(not BIN.exists(), reason=f"driftscope binary not built: {BIN}")


def onnx_model(path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", ["X"], ["h"], name="/enc/Relu"),
             helper.make_node("Neg", ["h"], ["d"], name="/enc/dropout/Neg"),
             helper.make_node("Abs", ["d"], ["Y"], name="/head/Abs")]
    graph = helper.make_graph(nodes, "g",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


# ---- the installed command finds its own environment's Python --------------------------------

def fresh_venv(where: Path) -> Path:
    """A new venv (no --system-site-packages) that sees this test's packages only through a
    .pth file, as a `pip install .` into it would provide them; the driftscope command copied
    into its bin/ as pip's scripts install puts it there."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True,
                   timeout=120)
    ver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = where / "lib" / ver / "site-packages"
    assert site.is_dir()
    paths = [p for p in sys.path if p and Path(p).is_dir() and "site-packages" in p]
    (site / "zz_test_packages.pth").write_text("\n".join(paths) + "\n")
    shutil.copy2(BIN, where / "bin" / "driftscope")
    return where


def impostor_path(tmp: Path) -> str:
    """A PATH whose python3 and python are not the venv's: if the command used them it fails
    with their message."""
    fake = tmp / "impostor"
    fake.mkdir()
    for name in ("python3", "python"):
        (fake / name).write_text("#!/bin/sh\necho \"impostor python ran: $0 $*\" >&2\nexit 97\n")
        (fake / name).chmod(0o755)
    return os.pathsep.join([str(fake), "/usr/bin", "/bin"])


@needs_bin
def test_installed_command_records_with_its_own_environments_python(tmp_path):
    venv = fresh_venv(tmp_path / "venv")
    onnx_model(tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.array([-1.0, 0.5, 2.0], np.float32))
    env = {k: v for k, v in os.environ.items() if k not in ("DRIFTSCOPE_PYTHON", "PYTHONPATH",
                                                          "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = impostor_path(tmp_path)
    # Not activated, called by its path; then through a symlink from elsewhere.
    link = tmp_path / "elsewhere" / "driftscope"
    link.parent.mkdir()
    link.symlink_to(venv / "bin" / "driftscope")
    for n, command in enumerate([venv / "bin" / "driftscope", link]):
        out = tmp_path / f"r{n}.tdump"
        proc = subprocess.run(
            [str(command), "record", "onnx", str(tmp_path / "m.onnx"),
             "--input", f"X={tmp_path / 'x.npy'}", "-o", str(out), "--filter", "-*dropout*"],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        assert proc.returncode == 0, (command, proc.stderr)
        assert "impostor" not in proc.stderr
        assert driftscope.open(out).names() == ["enc.Relu", "enc", "head", "<root>"]
    # record --help reaches the recorder of that Python too.
    proc = subprocess.run([str(venv / "bin" / "driftscope"), "record", "onnx", "--help"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0 and "usage: driftscope record onnx" in proc.stdout, proc.stderr


@needs_bin
def test_without_a_python_that_has_the_package_the_error_names_each_one_tried(tmp_path):
    # The dev build has no Python next to it: only PATH's python3 is tried, as before.
    env = {k: v for k, v in os.environ.items() if k != "DRIFTSCOPE_PYTHON"}
    env["PATH"] = impostor_path(tmp_path)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shutil.copy2(BIN, bindir / "driftscope")
    (bindir / "python3").symlink_to(tmp_path / "impostor" / "python3")
    proc = subprocess.run([str(bindir / "driftscope"), "record", "onnx", "m.onnx", "-o", "r.tdump"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"driftscope: error: record: none of {bindir / 'python3'}, python3 can import the "
        "driftscope Python package; install it with `pip install <driftscope checkout>` plus the "
        "runtime you record with (torch, onnxruntime or ai-edge-litert), or set DRIFTSCOPE_PYTHON "
        "to a Python that has them\n")


# ---- option values that start with '-' -------------------------------------------------------

def test_parse_args_takes_the_next_argument_as_an_options_value():
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--filter")
    p.add_argument("-o", "--output")
    p.add_argument("--meta", action="append", default=[])
    p.add_argument("--flag", action="store_true")
    p.add_argument("rest", nargs="*")
    a = parse_args(p, ["--filter", "-*dropout*", "-o", "-x.tdump", "--meta", "-k=v", "--flag",
                       "--", "-positional"])
    assert (a.filter, a.output, a.meta, a.flag, a.rest) == (
        "-*dropout*", "-x.tdump", ["-k=v"], True, ["-positional"])
    assert parse_args(p, ["--filter=-a*"]).filter == "-a*"
    assert parse_args(p, ["--output", "-"]).output == "-"
    with pytest.raises(SystemExit):  # a flag still takes no value; a missing value is an error
        parse_args(p, ["--filter"])


def test_recorders_accept_filters_that_start_with_a_dash(tmp_path):
    onnx_model(tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.array([-1.0, 0.5, 2.0], np.float32))
    base = [sys.executable, "-m", "driftscope", "record", "onnx", str(tmp_path / "m.onnx"),
            "--input", f"X={tmp_path / 'x.npy'}"]
    for n, extra in enumerate([["--filter", "-*dropout*"], ["--filter=-*dropout*"],
                               ["--filter", "-*dropout* -head*", "--summary", "-nothing*"]]):
        out = tmp_path / f"o{n}.tdump"
        proc = subprocess.run([*base, *extra, "-o", str(out)], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        names = driftscope.open(out).names()
        assert "enc.dropout" not in names and "enc.Relu" in names
        assert ("head" in names) == (n < 2)


def test_torch_recorder_accepts_a_filter_that_starts_with_a_dash(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "entry.py").write_text(textwrap.dedent("""
        import torch

        def make():
            torch.manual_seed(0)
            return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(),
                                       torch.nn.Linear(4, 2)), (torch.randn(2, 4),)
    """))
    out = tmp_path / "t.tdump"
    proc = subprocess.run([sys.executable, "-m", "driftscope", "record", "torch", "--model",
                           f"{tmp_path / 'entry.py'}:make", "--filter", "-1", "-o", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert driftscope.open(out).names() == ["0", "2", "<root>"]


@needs_bin
def test_every_cpp_verb_takes_a_filter_that_starts_with_a_dash(tmp_path):
    np.savez(tmp_path / "a.npz", **{"l1.dropout": np.ones(3, np.float32),
                                    "l1.fc": np.arange(2, dtype=np.float32)})

    def run(*args):
        p = subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True,
                           cwd=tmp_path, timeout=120)
        assert p.returncode == 0, (args, p.stderr)
        return p.stdout

    def names(dump):
        return [r["name"] for r in json.loads(run("ls", dump, "--json"))]

    run("import", "a.npz", "all.tdump")
    for flag in (["--filter", "-*dropout*"], ["-f", "-*dropout*"], ["--filter=-*dropout*"]):
        assert names("all.tdump") == ["l1.dropout", "l1.fc"]
        run("import", "a.npz", "i.tdump", *flag)
        assert names("i.tdump") == ["l1.fc"]
        run("filter", "all.tdump", "f.tdump", *flag)
        assert names("f.tdump") == ["l1.fc"]
        run("export", "all.tdump", "e.npz", *flag)
        assert sorted(np.load(tmp_path / "e.npz").files) == ["l1.fc"]
        listed = run("ls", "all.tdump", *flag)
        assert "l1.fc" in listed and "dropout" not in listed
        if flag[0] != "-f":  # compare has only the long form
            report = json.loads(run("compare", "all.tdump", "all.tdump", *flag, "--json", "-"))
            assert [t["name"] for t in report["tensors"]] == ["l1.fc"]
