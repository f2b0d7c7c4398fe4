"""The options of `driftscope check` are declared once (issue 25 item 4): the library's table
(include/driftscope/check.hpp, ``_core.check_options()``) drives the command's flags, the
nanobind CheckOptions fields, driftscope.check()'s keyword handling and CheckOptions::validate's
ranges and finding codes. The copies kept for readers (check()'s signature with its defaults,
the type stub, docs/cli.md's list, docs/python.md's signature, the defaults the help texts
state) are held to it here.

    DRIFTSCOPE_BIN=build/dev/driftscope pytest tests/python/test_check_option_table.py
"""
from __future__ import annotations

import ast
import inspect
import math
import os
import re
import sys
import subprocess
from pathlib import Path

import numpy as np
import pytest

import driftscope
from driftscope import _core

sys.path.insert(0, str(Path(__file__).resolve().parent))
from doc_blocks import assert_doc_block  # noqa: E402
from driftscope._compare import check as check_module

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("DRIFTSCOPE_BIN", ROOT / "build" / "dev" / "driftscope")).absolute()
ROWS = _core.check_options()
SETTINGS = [r for r in ROWS if r["scope"] == "settings"]
BEGIN, END = "<!-- check options: begin -->", "<!-- check options: end -->"

needs_bin = pytest.mark.skipif(not BIN.exists(), reason=f"driftscope binary not built: {BIN}")


def _g(v: float) -> str:
    """A number as the library prints it ({:g})."""
    return "inf" if v == math.inf else "-inf" if v == -math.inf else ("%g" % v)


def test_the_table_has_every_check_option_once():
    names = [r["name"] for r in ROWS]
    assert len(names) == len(set(names)) and len(names) == 10
    flags = [f for r in ROWS for f in r["flags"]]
    assert len(flags) == len(set(flags)) and all(r["flags"] for r in ROWS)
    assert {r["name"] for r in ROWS if r["role"] == "output_file"} == {"json", "html"}
    fresh = _core.CheckOptions()
    for r in ROWS:
        assert r["help"], r["name"]
        # Every settings row is a CheckOptions field and a check() keyword of the same name.
        assert hasattr(fresh, r["name"]) == (r["scope"] == "settings"), r["name"]
        assert r["keyword"] == (r["name"] if r["scope"] == "settings" else ""), r["name"]


@needs_bin
def test_every_flag_is_in_the_command_help_with_its_help_text():
    out = subprocess.run([str(BIN), "check", "--help"], capture_output=True, text=True,
                         timeout=60).stdout
    for r in ROWS:
        assert re.search(rf"^  {re.escape(','.join(r['flags']))}\b", out, re.M), r["name"]
        assert r["help"] in out, r["name"]


def test_the_defaults_the_help_states_are_the_fields_defaults():
    """"(default 0.05)" in a help text is a copy of the field's default; "max 65504" of its
    range."""
    fresh = _core.CheckOptions()
    stated = 0
    for r in SETTINGS:
        m = re.search(r"\(default ([^;)]+)", r["help"])
        if r["type"] == "number":
            assert m and m.group(1) == _g(getattr(fresh, r["name"])), r
            stated += 1
        m = re.search(r"max ([0-9.e+]+)", r["help"])
        if m:
            assert m.group(1) == _g(r["range"][1]), r
    assert stated == 5


def test_check_keywords_are_the_table_s_with_the_fields_defaults():
    params = inspect.signature(driftscope.check).parameters
    keywords = {n: p for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert set(keywords) == {r["keyword"] for r in ROWS if r["keyword"]}
    fresh = _core.CheckOptions()
    for r in SETTINGS:
        default = keywords[r["keyword"]].default
        if r["type"] == "list":
            assert list(default) == getattr(fresh, r["name"]) == [], r["name"]
        else:
            assert default == getattr(fresh, r["name"]), r["name"]


def test_every_keyword_lands_in_its_field(monkeypatch, run):
    seen = {}

    def fake_check(reader, options):
        seen.update({r["name"]: getattr(options, r["name"]) for r in SETTINGS})
        return _core_check(reader, options)

    _core_check = _core.check
    monkeypatch.setattr(check_module._core, "check", fake_check)
    given = {"dynamic_axes": ("seq", "batch"), "ignore": ["dead_channels"],
             "norm_tolerance": 0.25, "softmax_tolerance": 0.125, "bad_slice_fraction": 0.5,
             "f16_near_overflow": 1000, "saturation_fraction": 0.75}
    assert set(given) == {r["keyword"] for r in SETTINGS}
    driftscope.check(run, **given)
    assert seen == {"dynamic_axes": ["seq", "batch"], "ignore": ["dead_channels"],
                    "norm_tolerance": 0.25, "softmax_tolerance": 0.125,
                    "bad_slice_fraction": 0.5, "f16_near_overflow": 1000.0,
                    "saturation_fraction": 0.75}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("checktable") / "run.tdump"
    rng = np.random.default_rng(5)
    with driftscope.Writer(path) as w:
        for i in range(2):
            w.write(f"layer{i}", rng.standard_normal((4, 8)).astype(np.float32), op_type="Linear")
    return path


def test_the_ranges_and_codes_are_the_ones_the_validator_enforces(run):
    """A value just outside each row's range is refused by CheckOptions::validate naming that
    range, and a code outside the `ignore` row's choices names exactly those choices, so the
    table (which --help, the docs and Python show) cannot drift from the checks."""
    checked = 0
    for r in SETTINGS:
        if r["type"] == "number":
            lo, hi = r["range"]
            for bad in (hi * 2 + 1, lo - 1):
                with pytest.raises(driftscope.InvalidArgumentError) as e:
                    driftscope.check(run, **{r["keyword"]: bad})
                assert (f"check option '{r['name']}' is {_g(bad)}, allowed {_g(lo)} .. {_g(hi)}"
                        in str(e.value)), r
            checked += 1
            # Both ends are allowed.
            driftscope.check(run, **{r["keyword"]: lo})
            driftscope.check(run, **{r["keyword"]: hi})
        elif r["choices"]:
            with pytest.raises(driftscope.InvalidArgumentError) as e:
                driftscope.check(run, **{r["keyword"]: ["no_such_code"]})
            assert str(e.value).endswith(
                f"check option '{r['name']}': unknown finding code 'no_such_code', allowed: "
                + ", ".join(r["choices"])), str(e.value)
            assert driftscope.check(run, **{r["keyword"]: r["choices"]}).exit_code == 0
            checked += 1
    assert checked == 6


def test_the_finding_codes_are_the_documented_ones():
    """The `ignore` row's choices are the codes docs/axes.md and the command's --help explain."""
    (ignore,) = [r for r in ROWS if r["name"] == "ignore"]
    axes = (ROOT / "docs" / "axes.md").read_text()
    assert len(ignore["choices"]) == 14
    for code in ignore["choices"]:
        assert f"`{code}`" in axes, code
    if BIN.exists():
        footer = subprocess.run([str(BIN), "check", "--help"], capture_output=True, text=True,
                                timeout=60).stdout
        codes = footer.split("Each finding has a code:")[1].split("The recorders declare")[0]
        listed = re.findall(r"^  ([a-z0-9_]+) +\S", codes, re.M)
        assert listed == ignore["choices"]


def _docs_table() -> str:
    """The options list of docs/cli.md's check section, rendered from the library's table."""
    lines = ["| flag | Python keyword | type | what |", "|---|---|---|---|"]
    types = {"number": "number", "list": "list of strings (repeatable)", "text": "FILE",
             "flag": "flag"}
    for r in ROWS:
        flag = ", ".join(f"`{f}`" for f in r["flags"])
        kw = f"`{r['keyword']}`" if r["keyword"] else "—"
        what = r["help"].replace("|", "\\|")
        if r["range"]:
            what += " [{} … {}]".format(*(_g(v) for v in r["range"]))
        if r["choices"]:
            what += "; allowed: " + ", ".join(f"`{c}`" for c in r["choices"])
        lines.append(f"| {flag} | {kw} | {types[r['type']]} | {what} |")
    return "\n".join(lines)


def test_docs_list_every_option_as_the_table_has_it():
    assert_doc_block(ROOT / "docs" / "cli.md", BEGIN, END, _docs_table(), "check options")


def test_python_docs_show_the_signature_s_defaults():
    """docs/python.md spells check()'s signature: every keyword, with check()'s default."""
    text = " ".join((ROOT / "docs" / "python.md").read_text().split())
    m = re.search(r"`driftscope\.check\(run, \*, (.*?)\)` runs", text)
    assert m, "docs/python.md: no check() signature"
    documented = {k: ast.literal_eval(v) for k, v in re.findall(r"(\w+)=([^,]+)", m.group(1))}
    params = inspect.signature(driftscope.check).parameters
    assert documented == {r["keyword"]: params[r["keyword"]].default for r in SETTINGS}


def test_type_stub_declares_every_field():
    tree = ast.parse((ROOT / "python" / "driftscope" / "_core.pyi").read_text())
    fields = {node.name: {a.target.id for a in node.body if isinstance(a, ast.AnnAssign)}
              for node in tree.body if isinstance(node, ast.ClassDef)}
    assert fields["CheckOptions"] == {r["name"] for r in SETTINGS}
    assert "check_options" in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
