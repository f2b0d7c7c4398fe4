"""Text from hostile dumps never reaches a terminal raw (issue 7, bug 6), and never renders as
anything but literal text in the Markdown report.

Names, op types, axis names, attribute keys and values and metadata carry ESC/CSI sequences, BEL,
CR, a C1 CSI (U+009B), a bidi override (U+202E) and Markdown/HTML. Every text output of ls, show,
info, verify and compare (text, quiet, Markdown) is checked for raw control characters, and for
the escaped spelling (driftscope::printable: \\xNN, \\uNNNN) of what was stored.

    DRIFTSCOPE_BIN=build/dev/driftscope pytest tests/python/test_cli_hostile_text.py
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("DRIFTSCOPE_BIN", ROOT / "build" / "dev" / "driftscope")).absolute()
sys.path.insert(0, str(ROOT / "tests" / "support"))
import tdump_write as tw  # noqa: E402

pytestmark = pytest.mark.skipif(not BIN.exists(), reason=f"driftscope binary not built: {BIN}")

# Terminal title, clear screen, carriage return over the line, a C1 CSI and a bidi override.
EVIL_NAME = "enc\x1b]0;pwned\x07.layer\x1b[2J\rfake\u009b31m\u202eevil"
EVIL_OP = "Op\x1b[31mRED"
EVIL_AXIS = "row\x1b[8m"
EVIL_ATTR = ("key\x07", "value\rover\u2028next")
EVIL_META = "torch\x1b[1K\x1b[Abackend\u202e"
MD_NAME = "[click](https://evil.example) <img src=x onerror=alert(1)> *em* `tick` | www.evil.example"


def printable(s: str) -> str:
    """The documented rule of driftscope::printable (include/driftscope/text.hpp)."""
    out = []
    for ch in s:
        cp = ord(ch)
        if cp < 0x20 or cp == 0x7F:
            out.append(f"\\x{cp:02x}")
        elif (0x80 <= cp <= 0x9F or cp in (0x061C, 0x200E, 0x200F, 0x2028, 0x2029)
              or 0x202A <= cp <= 0x202E or 0x2066 <= cp <= 0x2069):
            out.append(f"\\u{cp:04x}")
        else:
            out.append(ch)
    return "".join(out)


RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f\u0080-\u009f\u061c\u200e\u200f\u2028\u2029"
                 "\u202a-\u202e\u2066-\u2069]")


def assert_clean(text: str, where: str) -> None:
    m = RAW.search(text)
    assert m is None, f"{where}: raw {m.group()!r} at {m.start()}: {text[max(0, m.start() - 40):m.start() + 40]!r}"


def tensor(name, data, op=EVIL_OP, **kw):
    return {"name": name, "op_type": op, "dtype": "f32", "shape": [len(data)], "axes": [EVIL_AXIS],
            "attrs": [EVIL_ATTR], "data": np.array(data, "<f4"), **kw}


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("hostile")
    meta = [("framework", EVIL_META), ("model\x1b[5m", "m\x1b[5m")]
    ref = [tensor("ok", [1, 2, 3]), tensor(EVIL_NAME, [1, 2, 3]), tensor(MD_NAME, [4, 5, 6]),
           tensor("only." + EVIL_NAME, [1])]
    cand = [tensor("ok", [1, 2, 3]), tensor(EVIL_NAME, [1, 2, 9]), tensor(MD_NAME, [4, 5, 60]),
            tensor("cand." + MD_NAME, [1])]
    tw.write_tdump(d / "ref.tdump", meta, ref, salt=1)
    tw.write_tdump(d / "cand.tdump", meta, cand, salt=1)
    b = bytearray((d / "ref.tdump").read_bytes())
    recs = json.loads(run(["ls", "ref.tdump", "--json", "--no-stats"], d).stdout)
    bad = next(r for r in recs if r["name"] == EVIL_NAME)
    b[bad["payload_offset"]] ^= 1
    (d / "corrupt.tdump").write_bytes(bytes(b))
    return d


def run(args, cwd, columns="200"):
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR",)}
    env["COLUMNS"] = columns
    env["LC_ALL"] = "C.UTF-8"
    return subprocess.run([str(BIN), *args], cwd=cwd, capture_output=True, env=env, timeout=120)


def texts(p):
    out, err = p.stdout.decode("utf-8"), p.stderr.decode("utf-8")  # valid UTF-8 or this raises
    return out, err


@pytest.mark.parametrize("args", [
    ["ls", "ref.tdump"], ["ls", "ref.tdump", "--wide"], ["ls", "corrupt.tdump"],
    ["show", "ref.tdump", EVIL_NAME], ["show", "ref.tdump", "enc\x1b]0;pwned"],
    ["show", "ref.tdump", EVIL_NAME, "--occurrence", "4"], ["show", "corrupt.tdump", EVIL_NAME],
    ["info", "ref.tdump"], ["info", "corrupt.tdump"],
    ["verify", "ref.tdump"], ["verify", "corrupt.tdump"],
    ["compare", "ref.tdump", "cand.tdump"], ["compare", "ref.tdump", "cand.tdump", "--all"],
    ["compare", "ref.tdump", "cand.tdump", "-q"], ["compare", "ref.tdump", "corrupt.tdump"],
    ["compare", "ref.tdump", "cand.tdump", "--markdown", "-"],
], ids=lambda a: "-".join(x for x in a if x.isascii() and x.isprintable())[:60])
def test_no_raw_control_characters(work, args):
    out, err = texts(run(args, work))
    assert_clean(out, "stdout")
    assert_clean(err, "stderr")


def test_escaped_spelling_is_shown(work):
    out, _ = texts(run(["ls", "ref.tdump", "--wide"], work))
    assert printable(EVIL_NAME) in out and printable(EVIL_OP) in out and printable(EVIL_AXIS) in out
    out, _ = texts(run(["show", "ref.tdump", EVIL_NAME], work))
    assert f"name        {printable(EVIL_NAME)}\n" in out
    assert f"op          {printable(EVIL_OP)}\n" in out
    assert f"attr        {printable(EVIL_ATTR[0])} = {printable(EVIL_ATTR[1])}\n" in out
    out, _ = texts(run(["info", "ref.tdump"], work))
    assert printable(EVIL_META) in out and printable("model\x1b[5m") in out
    out, _ = texts(run(["compare", "ref.tdump", "cand.tdump", "--all"], work))
    assert printable(EVIL_NAME) in out and printable(EVIL_META) in out
    _, err = texts(run(["show", "ref.tdump", "enc\x1b]0;pwned"], work))
    assert printable(EVIL_NAME) in err  # the "did you mean" suggestion


def test_narrow_tables_cut_between_code_points(work):
    """Names shortened to fit the terminal stay valid UTF-8 (texts() decodes strictly)."""
    for cols in ("60", "70", "80", "90"):
        for args in (["ls", "ref.tdump"], ["compare", "ref.tdump", "cand.tdump", "--all"]):
            out, _ = texts(run(args, work, columns=cols))
            assert_clean(out, f"{args} at {cols} columns")


def test_json_outputs_escape_by_json_rules(work):
    """JSON keeps the stored text exactly; control characters appear only as JSON escapes."""
    for args in (["ls", "ref.tdump", "--json"], ["info", "ref.tdump", "--json"],
                 ["compare", "ref.tdump", "cand.tdump", "--json", "-"]):
        out, _ = texts(run(args, work))
        assert not re.search("[\x00-\x09\x0b-\x1f]", out), args
        assert EVIL_NAME in out or EVIL_META in out or json.loads(out)  # parses back
    doc = json.loads(texts(run(["ls", "ref.tdump", "--json"], work))[0])
    assert doc[1]["name"] == EVIL_NAME and doc[1]["op_type"] == EVIL_OP
    assert doc[1]["attrs"] == {EVIL_ATTR[0]: EVIL_ATTR[1]}


def inline_tokens(tokens):
    for t in tokens:
        yield t
        if t.children:
            yield from inline_tokens(t.children)


def test_markdown_renders_names_literally(work):
    out, _ = texts(run(["compare", "ref.tdump", "cand.tdump", "--markdown", "-"], work))
    assert_clean(out, "markdown")
    md = MarkdownIt("commonmark").enable("table").enable("strikethrough")
    tokens = list(inline_tokens(md.parse(out)))
    kinds = {t.type for t in tokens}
    # No links, images or raw HTML other than the report's own <details> block.
    assert not kinds & {"link_open", "image", "s_open", "em_open"}, kinds
    html = [t.content for t in tokens if t.type in ("html_inline", "html_block")]
    assert all(h.lstrip().startswith(("<details>", "</details>")) for h in html), html
    codes = [t.content for t in tokens if t.type == "code_inline"]
    assert MD_NAME in codes and f"cand.{MD_NAME}" in codes and printable(EVIL_NAME) in codes
    # Free text (the summary line, the reasons) shows the stored text once rendered.
    rendered = md.render(out)
    assert "evil.example" in rendered and 'href=' not in rendered and "<img" not in rendered
    summary = next(t for t in tokens if t.type == "inline" and t.content.startswith("**DIVERGED"))
    plain = "".join(c.content for c in summary.children if c.type == "text")
    assert plain.startswith("DIVERGED: first divergence at ")
    assert printable(EVIL_NAME) in plain or MD_NAME in plain


def test_library_error_messages_are_escaped(work):
    """Messages built inside the library (here Python's NotFoundError, with its suggestion) spell
    out what they quote from the file: make_error escapes every message once."""
    driftscope = pytest.importorskip("driftscope")
    dump = driftscope.open(str(work / "ref.tdump"))
    with pytest.raises(KeyError) as e:
        dump["enc\x1b]0;pwned"]
    assert_clean(str(e.value), "NotFoundError")
    assert printable("enc\x1b]0;pwned") in str(e.value)


# Bare link text (issue 23 item 10): renderers that autolink (GFM's "www." and scheme autolinks,
# markdown-it's linkify with its fuzzy domains, e-mails and protocol-relative "//host") must see
# none in a report; the text shown is still the stored text.
LINK_TEXTS = ["https://evil.example/a", "see www.evil.example now", "http://x.y", "mailto:a@b.co",
              "x@evil.com", "model.py", "a //localhost b", "ftp://x.y/z", "HTTPS://A.B", "1.2.3.4"]


def linkify_markdown():
    import importlib.util

    assert importlib.util.find_spec("linkify_it"), "linkify-it-py is not installed (requirements-dev.txt)"
    return MarkdownIt("gfm-like", {"linkify": True})


def visible(html: str) -> str:
    import html as h

    return h.unescape(re.sub(r"<[^>]+>", "", html)).strip()


def test_markdown_text_never_autolinks():
    """driftscope._text.markdown_text (the guard's Markdown report) shows each text as stored."""
    driftscope = pytest.importorskip("driftscope")  # noqa: F841
    from driftscope._text import markdown_text

    md = linkify_markdown()
    for s in LINK_TEXTS:
        html = md.render(markdown_text(s))
        assert "<a" not in html, (s, markdown_text(s), html)
        assert visible(html) == s, (s, html)
        row = md.render(f"| a |\n|---|\n| {markdown_text(s)} |\n")
        assert "<a" not in row and f"<td>{s.replace('&', '&amp;')}</td>" in row, row


def test_compare_markdown_never_autolinks(tmp_path):
    """Names (code spans), op types and metadata (escaped text) of compare --markdown."""
    def t(i, name, data):
        return {"name": name, "op_type": LINK_TEXTS[i], "dtype": "f32", "shape": [len(data)],
                "data": np.array(data, "<f4")}

    meta = [("framework", "www.meta.example")]
    tw.write_tdump(tmp_path / "ref.tdump", meta, [t(i, n, [1, 2, 3]) for i, n in enumerate(LINK_TEXTS)], salt=1)
    tw.write_tdump(tmp_path / "cand.tdump", meta, [t(i, n, [1, 2, 9]) for i, n in enumerate(LINK_TEXTS)], salt=1)
    out, _ = texts(run(["compare", "ref.tdump", "cand.tdump", "--markdown", "-"], tmp_path))
    md = linkify_markdown()
    tokens = list(inline_tokens(md.parse(out)))
    assert not [t for t in tokens if t.type == "link_open"]
    html = md.render(out)
    assert "<a " not in html
    codes = {t.content for t in tokens if t.type == "code_inline"}
    assert set(LINK_TEXTS) <= codes
    shown = visible(html)
    for s in LINK_TEXTS + ["www.meta.example"]:
        assert s in shown, s
