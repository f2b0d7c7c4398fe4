"""The guard's reports rendered by the library (src/report/guard_text.cpp, guard_html.cpp) from the
model Python assembles (issue 25 item 2): byte for byte what the Python renderer they replaced
wrote, on reports built by hand (guard_render_cases.py) that hold every part of them: long names,
hostile and non-ASCII names, non-finite numbers, fallback tables and recipes, a task metric, class
axes, a language model's report. The golden text and Markdown files and the hashes of the pages
and JSON reports in data/guard_render/ were written by the Python renderer before the move."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from driftscope import _core
from driftscope.errors import InvalidArgumentError

import guard_render_cases as cases

DATA = Path(__file__).parent / "data" / "guard_render"
HASHES = json.loads((DATA / "sha256.json").read_text())


@pytest.mark.parametrize("name", sorted(cases.CASES))
@pytest.mark.parametrize("ext", ["txt", "md"])
def test_text_and_markdown_are_the_bytes_python_wrote(name, ext):
    report = cases.CASES[name]()
    got = getattr(report, cases.RENDERINGS[ext])().encode("utf-8")
    assert got == (DATA / f"{name}.{ext}").read_bytes()


@pytest.mark.parametrize("name", sorted(cases.CASES))
@pytest.mark.parametrize("ext", ["html", "json"])
def test_page_and_json_are_the_bytes_python_wrote(name, ext):
    text = getattr(cases.CASES[name](), cases.RENDERINGS[ext])()
    if f"{name}.{ext}" not in HASHES:
        # The old page refused a name that was not UTF-8 ("not a JSON object"); the page now
        # shows it as printable() spells it (a JSON string, so its backslash doubled).
        assert (name, ext) == ("evil", "html") and "bad\\\\x80byte" in text
        return
    assert hashlib.sha256(text.encode("utf-8")).hexdigest() == HASHES[f"{name}.{ext}"]


def _short(token: str) -> str:
    """The documented short form of a long name (docs/howto/guard.md): HEAD...TAIL~HASH, the
    first and last 32 characters and the SHA-1 of the name, brackets and quotes around it kept."""
    core = token.lstrip("([{")
    lead = token[:len(token) - len(core)]
    stripped = core.rstrip(")]},:;.")
    trail, core = core[len(stripped):], stripped
    return f"{lead}{core[:32]}...{core[-32:]}~{hashlib.sha1(core.encode()).hexdigest()[:6]}{trail}"


def test_long_names_are_shown_by_head_tail_and_hash():
    text = cases.long_names().to_text()
    short = _short(cases.LONG)
    assert len(short) == 74 and cases.LONG not in text
    # every run of more than 80 characters without a space or quote, shortened alone
    assert f"(['{short}', '{short}:'])" in text
    runs = re.split(r"[\s'\"]", text)
    assert max(len(t) for t in runs) <= 80


def test_the_renderers_refuse_what_is_not_a_model():
    for render in (_core.guard_report_text, _core.guard_report_markdown):
        for bad in ("[]", "{", '{"summary": "x", "backends": []}',
                    '{"summary": 1, "backends": [], "render": {}}',
                    '{"summary": "x", "backends": [1], "render": {}}'):
            with pytest.raises(InvalidArgumentError, match="guard report"):
                render(bad)
