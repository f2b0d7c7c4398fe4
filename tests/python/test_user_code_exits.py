"""User code that ends the process its own way, and a model with nothing to compare: found by a
hostile-input sweep (2026-12-06). A FILE.py:FUNCTION entry point (driftscope._entry, the one
loader of --model, --data and --metric) that calls sys.exit() or raises a BaseException while
its file is imported or when it is called used to end `record torch` and `reference run` with
its own exit code (0: success, with no output written; 3: driftscope's "silent failure") or a
traceback; and a guard of a model whose forward returns no tensor said PASS.

    DRIFTSCOPE_BIN=build/dev/driftscope pytest tests/python/test_user_code_exits.py
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("DRIFTSCOPE_BIN", ROOT / "build" / "dev" / "driftscope")).absolute()

MODELS = '''
import sys
import torch

def exits():
    sys.exit(0)

def exits_3():
    sys.exit(3)

def exits_text():
    sys.exit("bye")

def base():
    raise BaseException("base")

def returns_text():
    class M(torch.nn.Module):
        def forward(self, x):
            return "hello"
    return M(), (torch.randn(1, 4),)

def returns_numbers():
    class M(torch.nn.Module):
        def forward(self, x):
            return ("a", 3)
    return M(), (torch.randn(1, 4),)

def linear():
    torch.manual_seed(0)
    return torch.nn.Linear(4, 2), (torch.randn(1, 4),)
'''


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("usercode")
    (d / "m.py").write_text(MODELS)
    (d / "exits_on_import.py").write_text("import sys\nsys.exit(0)\ndef f():\n    pass\n")
    (d / "base_on_import.py").write_text("raise BaseException('at import')\ndef f():\n    pass\n")
    return d


def run(folder, *args, timeout=300):
    env = dict(os.environ, DRIFTSCOPE_PYTHON=sys.executable, NO_COLOR="1")
    return subprocess.run([str(BIN), *args], cwd=folder, capture_output=True, text=True,
                          timeout=timeout, env=env)


def one_line_error(p, *words):
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    err = p.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, err
    return err


@pytest.mark.parametrize("spec, words", [
    ("m.py:exits", ["--model m.py:exits: the function called sys.exit(0)"]),
    ("m.py:exits_3", ["the function called sys.exit(3)"]),
    ("m.py:exits_text", ["the function called sys.exit('bye')"]),
    ("m.py:base", ["the function raised BaseException: base"]),
    ("exits_on_import.py:f", ["importing its module called sys.exit(0)"]),
    ("base_on_import.py:f", ["importing its module raised BaseException: at import"]),
])
def test_record_torch_reports_an_entry_point_that_exits(folder, spec, words):
    out = folder / "run.tdump"
    one_line_error(run(folder, "record", "torch", "--model", spec, "-o", str(out)), *words)
    assert not out.exists()


def test_reference_run_reports_it_too(folder):
    p = run(folder, "reference", "run", "--model", "m.py:exits", "-o", str(folder / "ref"))
    one_line_error(p, "the function called sys.exit(0)")
    assert not (folder / "ref").exists()


def test_guard_reports_it_too(folder):
    one_line_error(run(folder, "guard", "--model", "m.py:base", "--no-progress"),
                   "the function raised BaseException: base")


@pytest.mark.parametrize("spec, what", [("m.py:returns_text", "it returned str)"),
                                        ("m.py:returns_numbers", "it returned tuple of int, str)")])
def test_guard_of_a_model_without_a_tensor_output_is_not_a_pass(folder, spec, what):
    p = run(folder, "guard", "--model", spec, "--no-progress")
    one_line_error(p, "the model's output holds no tensor", what)
    assert "PASS" not in p.stdout


@pytest.mark.parametrize("args, words", [
    (["--timeout", "-1"], ["--timeout -1: allowed a number of seconds above 0"]),
    (["--timeout", "nan"], ["--timeout nan"]),
    (["--input-range", "x=5:1"], ["--input-range 'x=5.0:1.0': needs finite LO < HI"]),
    (["--input-range", "x=-inf:1"], ["--input-range 'x=-inf:1.0'"]),
])
def test_guard_refuses_impossible_option_values_before_running(folder, args, words):
    one_line_error(run(folder, "guard", "--model", "m.py:linear", "--no-progress", *args,
                       timeout=60), *words)


def test_a_healthy_model_still_passes(folder):
    p = run(folder, "guard", "--model", "m.py:linear", "--no-progress")
    assert p.returncode == 0 and p.stdout.startswith("PASS"), (p.stdout, p.stderr)
