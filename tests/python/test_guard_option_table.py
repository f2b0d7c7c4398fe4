"""The guard criteria profile is declared once (issue 25 item 4): the library's table
(DRIFTSCOPE_GUARD_CRITERIA in include/driftscope/judge.hpp, ``_core.guard_criteria_options()``)
makes GuardCriteria's fields and defaults, the ranges of its one validator, and the flags of
`driftscope guard` (spelling, value name, default, help). The copies kept for readers
(guard()'s keywords, Thresholds' fields, the type stub's keywords, docs/metrics.md's list) are
held to it here; `driftscope guard --help` is held byte for byte by tests/cli/guard/help.sh.

    pytest tests/python/test_guard_option_table.py
"""
from __future__ import annotations

import ast
import dataclasses
import inspect
import math
import re
import sys
from pathlib import Path

import pytest

from driftscope import _core

sys.path.insert(0, str(Path(__file__).resolve().parent))
from doc_blocks import assert_doc_block  # noqa: E402
from driftscope.errors import InvalidArgumentError

ROOT = Path(__file__).resolve().parents[2]
ROWS = _core.guard_criteria_options()
FLAGGED = [r for r in ROWS if r["flags"]]
BEGIN, END = "<!-- guard criteria: begin -->", "<!-- guard criteria: end -->"


def _g(v: float) -> str:
    """A bound as the library prints it ({:g})."""
    return "inf" if v == math.inf else "-inf" if v == -math.inf else ("%g" % v)


def test_the_table_is_the_profile():
    assert [r["name"] for r in ROWS] == list(_core.GUARD_CRITERIA_DEFAULTS)
    assert [r["name"] for r in FLAGGED] == ["min_cosine", "min_norm", "max_argmax_flip",
                                            "max_rel_error", "max_norm_ratio",
                                            "decision_threshold"]
    for r in ROWS:
        assert r["keyword"] == r["name"] and r["help"] and r["range"], r
        assert r["type"] in ("number", "optional_number"), r
        # A flag is the row's name spelt as a flag, with a one-letter value name.
        assert r["flags"] in ([], ["--" + r["name"].replace("_", "-")]), r
        assert bool(r["flags"]) == bool(re.fullmatch(r"[A-Z]", r["metavar"])), r


def test_the_command_s_flags_are_the_rows():
    from driftscope._guard import _command

    parser = _command._parser()
    actions = {a.dest: a for a in parser._actions}
    for r in FLAGGED:
        a = actions[r["name"]]
        assert a.option_strings == r["flags"], r["name"]
        assert (a.metavar, a.help, a.type) == (r["metavar"], r["help"], float), r["name"]
        assert a.default == _core.GUARD_CRITERIA_DEFAULTS[r["name"]], r["name"]
    args = parser.parse_args(["m.onnx", "--min-cosine", "0.5", "--max-rel-error", "0.25"])
    assert (args.min_cosine, args.max_rel_error, args.min_norm) == (0.5, 0.25, 1e-4)


def test_the_defaults_the_help_states_are_the_profile_s():
    stated = 0
    for r in FLAGGED:
        default = _core.GUARD_CRITERIA_DEFAULTS[r["name"]]
        m = re.search(r"\(default:? ([^):]+)", r["help"])
        assert m, r["name"]
        if default is None:
            continue  # "default: what --min-cosine and --max-norm-ratio allow together"
        assert float(m.group(1)) == default, r["name"]
        stated += 1
    assert stated == 5


def test_every_row_is_a_guard_keyword_and_a_thresholds_field():
    from driftscope._guard import _metrics, _run

    params = inspect.signature(_run.guard).parameters
    for r in FLAGGED:
        assert params[r["keyword"]].default == _core.GUARD_CRITERIA_DEFAULTS[r["name"]], r
    fields = {f.name: f.default for f in dataclasses.fields(_metrics.Thresholds)}
    for r in ROWS:
        assert fields[r["name"]] == _core.GUARD_CRITERIA_DEFAULTS[r["name"]], r["name"]
    assert set(_metrics.Thresholds().criteria()) == {r["keyword"] for r in ROWS}


def test_the_ranges_are_the_ones_the_validator_enforces():
    """A value just outside each row's range is refused naming that range, and each end is
    accepted, so the table (shown by the docs) cannot drift from the checks."""
    for r in ROWS:
        lo, hi = r["range"]
        for ok in (lo, hi if math.isfinite(hi) else 1e300):
            _core.validate_guard_criteria(**{r["keyword"]: ok})
        bad = lo - 1
        with pytest.raises(InvalidArgumentError) as e:
            _core.validate_guard_criteria(**{r["keyword"]: bad})
        if r["name"] == "min_norm":  # must also be finite
            assert f"'min_norm' is {_g(bad)}, allowed: finite and >= {_g(lo)}" in str(e.value)
            with pytest.raises(InvalidArgumentError, match="allowed: finite"):
                _core.validate_guard_criteria(min_norm=math.inf)
            continue
        assert f"guard option '{r['name']}' is {_g(bad)}, allowed {_g(lo)} .. {_g(hi)}" in str(
            e.value), r
        if math.isfinite(hi):
            with pytest.raises(InvalidArgumentError, match=f"'{r['name']}' is {_g(hi * 2 + 1)},"):
                _core.validate_guard_criteria(**{r["keyword"]: hi * 2 + 1})


def test_type_stub_spells_every_keyword():
    tree = ast.parse((ROOT / "python" / "driftscope" / "_core.pyi").read_text())
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    for name in ("validate_guard_criteria", "judge_output", "guard_rel_error_limit"):
        kws = [a.arg for a in funcs[name].args.kwonlyargs]
        assert [k for k in kws if k in _core.GUARD_CRITERIA_DEFAULTS] == [
            r["keyword"] for r in ROWS], name
    assert "guard_criteria_options" in funcs


def _docs_list() -> str:
    lines = ["| field | flag | default | range | what |", "|---|---|---|---|---|"]
    for r in ROWS:
        flag = f"`{r['flags'][0]} {r['metavar']}`" if r["flags"] else "—"
        default = _core.GUARD_CRITERIA_DEFAULTS[r["name"]]
        default = "derived" if default is None else _g(default)
        lo, hi = (_g(v) for v in r["range"])
        what = r["help"].replace("|", "\\|")
        lines.append(f"| `{r['name']}` | {flag} | {default} | {lo} … {hi} | {what} |")
    return "\n".join(lines)


def test_docs_list_the_profile_as_the_table_has_it():
    assert_doc_block(ROOT / "docs" / "metrics.md", BEGIN, END, _docs_list(), "guard criteria")
