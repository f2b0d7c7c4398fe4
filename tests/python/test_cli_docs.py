"""Every option of every command is documented: each long option that `driftscope VERB --help`
prints appears in docs/cli.md or in the page that documents the command (the --help text says
where the reference is). A flag added without its documentation fails here, whichever command
it joins (the guard's own test only covered guard)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pkgenv import env_with_package  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
BIN = os.environ.get("DRIFTSCOPE_BIN") or str(ROOT / "build" / "dev" / "driftscope")

# command -> the pages besides docs/cli.md that document it
PAGES = {
    "info": [], "ls": [], "show": [], "verify": [], "filter": [], "export": [], "import": [],
    "check": ["axes.md"],
    "compare": ["compare.md", "dumpsets.md", "howto/cluster.md"],
    "record torch": ["howto/pytorch.md", "python.md", "axes.md"],
    "record onnx": ["howto/onnxruntime.md", "python.md", "axes.md"],
    "record tflite": ["howto/litert.md", "python.md", "axes.md"],
    "record llm": ["howto/llm.md"],
    "reference init": ["references.md", "howto/references.md"],
    "reference run": ["references.md", "howto/references.md"],
    "reference check": ["references.md", "howto/references.md"],
    "evidence declare": ["references.md", "howto/references.md"],
    "evidence measure": ["references.md", "howto/references.md"],
    "evidence verify": ["references.md", "howto/references.md"],
    "replay": ["howto/replay.md", "howto/proof.md"],
    "repro": ["howto/repro.md"],
    "llm-compare": ["howto/llm.md"],
    "guard": ["howto/guard.md", "howto/guard-backends.md"],
}
# A long option documented by its short spelling.
SHORT = {"--quiet": "-q", "--output": "-o"}


def _help(verb: str) -> str:
    env = env_with_package()
    env.setdefault("DRIFTSCOPE_PYTHON", sys.executable)
    env["COLUMNS"] = "100"
    p = subprocess.run([BIN, *verb.split(), "--help"], capture_output=True, text=True,
                       env=env, timeout=300)
    assert p.returncode == 0, (verb, p.stderr[-2000:])
    return p.stdout


def _mentions(text: str, option: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


@pytest.mark.parametrize("verb", sorted(PAGES))
def test_every_option_is_documented(verb):
    options = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", _help(verb))) - {"--help"}
    assert options or verb in ("info",), f"{verb} --help lists no option"
    text = "\n".join((DOCS / page).read_text(encoding="utf-8")
                     for page in ["cli.md", *PAGES[verb]])
    missing = sorted(o for o in options
                     if not _mentions(text, o) and not _mentions(text, SHORT.get(o, o)))
    assert not missing, (f"`driftscope {verb}`: options not in docs/cli.md or "
                         f"{', '.join(PAGES[verb]) or '-'}: {', '.join(missing)}")


def test_every_command_of_the_top_level_help_is_covered():
    verbs = re.findall(r"^  ([a-z][a-z-]+)\s{2,}", _help(""), re.M)
    assert "compare" in verbs and "guard" in verbs, verbs
    covered = {v.split()[0] for v in PAGES}
    assert set(verbs) <= covered, sorted(set(verbs) - covered)
