"""guard --search-inputs (issue 28 item 3): the input that breaks a backend, found, written as
.npz (loadable again with --data), judged and probed.

sq.onnx (test_guard_data.py) is y = x*x*0.001 + x: ort-fp16-exact passes it on standard-normal
inputs; inside --input-range x=-400:400 any |x| > 256 overflows float16 at the square.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_guard_data import _model, guard  # noqa: E402


def test_search_finds_the_overflow_and_the_probe_names_it(tmp_path):
    _model(tmp_path / "sq.onnx")
    base = ["sq.onnx", "--backends", "ort-fp16-exact", "--fallback", "never"]
    plain = guard(*base, "--probe", "never", cwd=tmp_path)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    p = guard(*base, "--search-inputs", "40", "--input-range", "x=-400:400",
              "--search-out", "found", "--json", "r.json", cwd=tmp_path)
    assert p.returncode == 3, p.stdout + p.stderr
    row = json.loads((tmp_path / "r.json").read_text())["backends"][1]
    s = row["search"]
    assert row["status"] == "NUMERICAL_INSTABILITY" and s["status"] == "NUMERICAL_INSTABILITY"
    assert s["found"] is None and s["start"] < 0.01 and 1 <= s["evaluations"] <= 40
    assert s["file"] == "found/ort-fp16-exact.npz" and s["sample"] == 1
    assert s["box"] == {"x": [-400.0, 400.0]}
    with np.load(tmp_path / s["file"]) as z:
        x = z["x"]
    assert x.dtype == np.float32 and np.abs(x).max() > 256 and np.abs(x).max() <= 400
    # The probe ran on the found input and names the op that overflows.
    assert row["probe"]["origin"]["node"] == "square", row["probe"]
    assert "searching" in p.stdout and "--data found/ort-fp16-exact.npz" in p.stdout
    # The written input fails again through --data.
    again = guard(*base, "--probe", "never", "--data", s["file"], cwd=tmp_path)
    assert again.returncode == 3 and "NUMERICAL_INSTABILITY" in again.stdout


def test_search_without_a_failure_reports_what_it_reached(tmp_path):
    _model(tmp_path / "sq.onnx")
    p = guard("sq.onnx", "--backends", "ort-fp16-exact", "--probe", "never",
              "--search-inputs", "12", "--json", "r.json", "--out", "o", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    s = json.loads((tmp_path / "r.json").read_text())["backends"][1]["search"]
    assert s["evaluations"] == 12 and s["found"] >= s["start"] and s["status"] == "PASS"
    assert s["file"] == "o/search/ort-fp16-exact.npz" and (tmp_path / s["file"]).exists()
    lo, hi = s["box"]["x"]
    assert -5 < lo < 0 < hi < 5  # the generated sample's own span


@pytest.mark.parametrize("args, message", [
    (["--input-range", "y=1:2"], "--input-range 'y': the model has no input of that name"),
    (["--input-range", "x=3:2"], "--input-range 'x=3.0:2.0': needs finite LO < HI"),
    (["--input-range", "x3:2"], "--input-range 'x3:2': expected NAME=LO:HI"),
])
def test_bad_ranges(tmp_path, args, message):
    _model(tmp_path / "sq.onnx")
    p = guard("sq.onnx", "--backends", "ort", "--search-inputs", "3", *args, cwd=tmp_path)
    assert p.returncode == 2 and message in p.stderr and p.stdout == "", p.stderr
