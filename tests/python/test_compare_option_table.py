"""The options of `driftscope compare` are declared once (issue 25 item 4): the library's table
(include/driftscope/compare_options.hpp, ``_core.compare_options()``) drives the command's flags,
the Python command's argparse, compare()'s keywords, the settings JSON of the C ABI and of the Ray
engine, and the docs. Every row must show up in each of them; the command hands `--engine ray`
its options as that JSON, not as a rebuilt command line; the Python front ends write and refuse
output files by the library's rules.

    DRIFTSCOPE_BIN=build/dev/driftscope pytest tests/python/test_compare_option_table.py
"""
from __future__ import annotations

import inspect
import json
import math
import os
import re
import sys
import stat
import subprocess
from pathlib import Path

import numpy as np
import pytest

import driftscope
from driftscope import _core

sys.path.insert(0, str(Path(__file__).resolve().parent))
from doc_blocks import assert_doc_block  # noqa: E402
from driftscope._cli import refuse_output_onto_inputs, write_output
from driftscope._compare import cli as compare_cli
from driftscope._compare.api import compare, options
from driftscope._compare.settings import settings

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("DRIFTSCOPE_BIN", ROOT / "build" / "dev" / "driftscope")).absolute()
DOC = ROOT / "docs" / "compare.md"
ROWS = _core.compare_options()
BEGIN, END = "<!-- compare options: begin -->", "<!-- compare options: end -->"

needs_bin = pytest.mark.skipif(not BIN.exists(), reason=f"driftscope binary not built: {BIN}")


def test_the_table_has_every_option_once():
    names = [r["name"] for r in ROWS]
    assert len(names) == len(set(names)) and len(names) >= 40
    flags = [f for r in ROWS for f in r["flags"]]
    assert len(flags) == len(set(flags))
    assert {r["name"] for r in ROWS if r["role"] == "output_file"} == {
        "json", "markdown", "html", "plot", "model_explorer"}
    assert {r["name"] for r in ROWS if r["role"] == "input_file"} == {
        "policy", "map_file", "reference64"}
    for r in ROWS:
        assert r["help"], r["name"]
        long = [f for f in r["flags"] if f.startswith("--")]
        assert not r["flags"] or long == ["--" + r["name"].replace("_", "-")], r


@needs_bin
def test_every_flag_is_in_the_command_help_with_its_help_text():
    out = subprocess.run([str(BIN), "compare", "--help"], capture_output=True, text=True,
                         timeout=60).stdout
    for r in ROWS:
        if r["flags"]:
            assert re.search(rf"^  {re.escape(','.join(r['flags']))}\b", out, re.M), r["name"]
            assert r["help"] in out, r["name"]
        else:
            assert "--" + r["name"].replace("_", "-") + " " not in out, r["name"]


def test_every_flag_is_in_the_python_command_parser():
    parser = compare_cli._parser()
    spelt = {s for a in parser._actions for s in a.option_strings}
    for r in ROWS:
        assert set(r["flags"]) <= spelt, r["name"]
    a = parser.parse_args(["r", "c", "--min-sqnr", "70.5", "--r64-k", "f16=3", "--r64-k",
                           "bf16=2", "-j", "3", "--nan-equal", "--json", "x.json"])
    s, c = compare_cli._options(a)
    assert (s.min_sqnr, s.r64_k, s.threads, s.nan_equal) == (70.5, ["f16=3", "bf16=2"], 3, True)
    assert (c.json, c.engine, c.color) == ("x.json", "ray", "auto")


def test_every_keyword_is_a_compare_keyword_and_lands_in_its_field():
    params = inspect.signature(compare).parameters
    samples = {"optional_number": 0.25, "number": 3.5, "integer": 7, "optional_integer": 9,
               "flag": True, "list": ["a=>b"], "text": "x"}
    for r in ROWS:
        if not r["keyword"]:
            continue
        assert params[r["keyword"]].kind is inspect.Parameter.KEYWORD_ONLY, r["name"]
        if r["scope"] != "settings" or r["name"] == "policy":
            continue
        if r["type"] == "names":
            s = settings(options({r["keyword"]: {"a": "b"}}))
            assert getattr(s, r["name"]) == [("a", "b")]
            continue
        s = settings(options({r["keyword"]: samples[r["type"]]}))
        assert getattr(s, r["name"]) == samples[r["type"]], r["name"]
    assert settings(options({"policy": {"default": {"min_cosine": 0.5}}})).policy_text
    assert settings(options({"policy": "p.toml"})).policy == "p.toml"


def test_settings_json_round_trips_every_row():
    s, c = _core.CompareSettings(), _core.CompareCommandOptions()
    s.atol, s.min_sqnr, s.max_ulp, s.r64_k = 1e-5, math.inf, 3, ["f16=3"]
    s.exact, s.pairs, s.threads, s.nan_equal = [("a", "b")], "positional", 2, True
    s.amplification_threshold, s.rtol = 12.5, math.nan
    c.json, c.ray_parts, c.engine = "r.json", 4, "ray"
    text = _core.compare_options_to_json(s, c)
    assert set(json.loads(text)) == {r["name"] for r in ROWS}
    t, d = _core.compare_options_from_json(text)
    assert _core.compare_options_to_json(t, d) == text
    assert (t.min_sqnr, math.isnan(t.rtol), t.exact, d.ray_parts) == (math.inf, True, [("a", "b")], 4)
    with pytest.raises(driftscope.InvalidArgumentError, match="unknown compare option 'atoll'"):
        _core.compare_options_from_json('{"atoll": 1}')
    with pytest.raises(driftscope.InvalidArgumentError, match="'top_k' must be an integer"):
        _core.compare_options_from_json('{"top_k": 1.5}')


def _bound(v: float) -> str:
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    return str(int(v)) if v.is_integer() and abs(v) < 1e9 else "%g" % v


def _docs_table() -> str:
    """The options table of docs/compare.md, rendered from the library's table."""
    json_types = {"number": "number", "optional_number": "number", "integer": "integer",
                  "optional_integer": "integer", "flag": "bool", "text": "string",
                  "list": "array of strings", "names": "object"}
    lines = ["| flag | JSON key (C ABI) | JSON type | Python keyword | what |",
             "|---|---|---|---|---|"]
    for r in ROWS:
        flag = ", ".join(f"`{f}`" for f in r["flags"]) or "—"
        key = f"`{r['name']}`" if r["scope"] == "settings" else "—"
        jtype = json_types[r["type"]] if r["scope"] == "settings" else "—"
        kw = f"`{r['keyword']}`" if r["keyword"] else "—"
        what = r["help"].replace("|", "\\|")
        if r["range"] and r["type"] != "list":
            lo, hi = (_bound(v) for v in r["range"])
            what += f" [{lo} … {hi}]"
        if r["choices"]:
            what += " (" + ", ".join(r["choices"]) + ")"
        lines.append(f"| {flag} | {key} | {jtype} | {kw} | {what} |")
    return "\n".join(lines)


def test_docs_list_every_option_as_the_table_has_it():
    assert_doc_block(DOC, BEGIN, END, _docs_table(), "options table")


def _fake_python(tmp_path: Path) -> Path:
    """A 'Python' that passes the command's probe and records what it is asked to run."""
    script = tmp_path / "python"
    script.write_text('#!/bin/sh\n[ $# -le 2 ] && exit 0\nshift 2\n'
                      f'printf "%s\\n" "$@" > {tmp_path / "argv.txt"}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@needs_bin
def test_engine_ray_gets_the_resolved_options_as_json(tmp_path):
    py = _fake_python(tmp_path)
    env = dict(os.environ, DRIFTSCOPE_PYTHON=str(py))
    args = ["ref.tdump", "cand.tdump", "--engine", "ray", "--min-sqnr", "70.5", "--map-a",
            "^x=>y", "--map-a", "^z=>w", "--r64-k", "f16=3", "-j", "2", "--json", "r.json",
            "--ray-parts", "4", "--stop-at-first", "-q"]
    r = subprocess.run([str(BIN), "compare", *args], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    argv = (tmp_path / "argv.txt").read_text().splitlines()
    assert argv[:4] == ["compare", "ref.tdump", "cand.tdump", "--options-json"]
    got = json.loads(argv[4])
    assert set(got) == {row["name"] for row in ROWS}
    assert (got["min_sqnr"], got["map_a"], got["r64_k"], got["threads"]) == (
        70.5, ["^x=>y", "^z=>w"], ["f16=3"], 2)
    assert (got["json"], got["ray_parts"], got["stop_at_first"], got["quiet"], got["engine"]) == (
        "r.json", 4, True, True, "ray")
    assert got["atol"] is None and got["policy"] == ""
    # A bad value is refused by the command before Python is asked.
    bad = subprocess.run([str(BIN), "compare", *args, "--min-cosine", "2"], capture_output=True,
                         text=True, env=env, timeout=60)
    assert bad.returncode == 2 and "'min_cosine' is 2" in bad.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("table")
    rng = np.random.default_rng(3)
    with driftscope.Writer(d / "ref.tdump") as w:
        for i in range(3):
            w.write(f"layer{i}", rng.standard_normal((4, 8)).astype(np.float32), op_type="Linear")
    return d


def test_python_command_takes_the_json_and_writes_by_the_library_rules(runs, capsys):
    ref = str(runs / "ref.tdump")
    s, c = _core.CompareSettings(), _core.CompareCommandOptions()
    c.engine, c.json, c.quiet = "local", str(runs / "r.json"), True
    code = compare_cli.main([ref, ref, "--options-json", _core.compare_options_to_json(s, c)])
    assert code == 0
    assert (runs / "r.json").read_text() == driftscope.compare(ref, ref).to_json(2)
    # The library's output rules, not a Python copy: two reports in one file are refused
    # before anything runs, like the command.
    c.markdown = c.json
    code = compare_cli.main([ref, ref, "--options-json", _core.compare_options_to_json(s, c)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("driftscope: error: ") and "--json and --markdown" in err


def test_output_rules_are_the_library_s(runs, tmp_path):
    ref = runs / "ref.tdump"
    link = tmp_path / "link.tdump"
    os.link(ref, link)
    msg = refuse_output_onto_inputs(str(link), [str(ref)])
    assert msg and msg.startswith("output ") and "is the input file" in msg
    with pytest.raises(driftscope.Error, match="is the input file"):
        write_output(str(link), "x", [str(ref)])
    write_output(str(tmp_path / "out.txt"), "hello")
    assert (tmp_path / "out.txt").read_text() == "hello"
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]


def test_type_stub_declares_every_field():
    import ast

    tree = ast.parse((ROOT / "python" / "driftscope" / "_core.pyi").read_text())
    fields = {node.name: {a.target.id for a in node.body if isinstance(a, ast.AnnAssign)}
              for node in tree.body if isinstance(node, ast.ClassDef)}
    for scope, cls in (("settings", "CompareSettings"), ("command", "CompareCommandOptions")):
        assert fields[cls] == {r["name"] for r in ROWS if r["scope"] == scope}, cls


def _g(v: float) -> str:
    """A bound as the library prints it (fmt's {:g}-like shortest form)."""
    return "inf" if v == math.inf else "-inf" if v == -math.inf else ("%g" % v)


def test_the_ranges_are_the_ones_the_validator_enforces(runs):
    """A value just outside each row's range is refused by CompareSettings::resolve naming that
    range, so the table (which --help, the docs and Python show) cannot drift from the checks."""
    ref = runs / "ref.tdump"
    checked = 0
    for r in ROWS:
        if (r["scope"] != "settings" or not r["range"] or not r["keyword"]
                or r["type"] not in ("number", "optional_number", "integer", "optional_integer")
                or r["name"] == "amplification_threshold"):  # "finite and > 1", said otherwise
            continue
        lo, hi = r["range"]
        if r["type"].endswith("integer"):
            value, bounds = int(lo) - 1, f"allowed {int(lo)} .. "
            if r["name"] != "max_ulp":  # INT64_MAX is not a double
                bounds += str(int(hi))
        else:
            value, bounds = math.nan, f"allowed {_g(lo)} .. {_g(hi)}"
        with pytest.raises(driftscope.InvalidArgumentError) as e:
            kw = {r["keyword"]: value}
            if r["name"] == "max_mismatch_fraction":
                kw["atol"] = 0.0
            driftscope.compare(ref, ref, **kw)
        assert f"compare option '{r['name']}' is " in str(e.value) and bounds in str(e.value), r
        checked += 1
    assert checked >= 12
