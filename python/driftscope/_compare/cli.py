"""``python -m driftscope compare REF CAND --engine ray [...]``: what `driftscope compare --engine
ray` runs. The command hands over its options as it resolved them, one JSON object by the names
of the library's table of compare options (``--options-json``, include/driftscope/
compare_options.hpp); given flags instead, this parser is built from the same table. Reports are
the library's renderings, written by the library's output rules, so they equal the local
command's byte for byte. Exit status as the command: 0 pass, 1 diverged, 2 error or nothing
compared, 3 silent failure."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import Any, List, Optional, Sequence, Tuple

from .. import _core
from .._cli import parse_args, write_output
from .._text import printable
from .settings import rows

_ARG_TYPES = {"number": float, "optional_number": float, "integer": int,
              "optional_integer": int, "text": str}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="driftscope compare",
                                description="Compare two dumps on a Ray cluster (--engine ray).")
    p.add_argument("reference")
    p.add_argument("candidate")
    fresh = {"settings": _core.CompareSettings(), "command": _core.CompareCommandOptions()}
    for row in rows():
        if not row["flags"]:
            continue
        kw: dict = dict(dest=row["name"], help=row["help"].replace("%", "%%"))
        if row["type"] == "flag":
            kw.update(action="store_true")
        elif row["type"] == "list":
            kw.update(action="append", default=[])
        else:
            kw.update(type=_ARG_TYPES[row["type"]],
                      default=getattr(fresh[row["scope"]], row["name"]))
            if row["choices"] and row["scope"] == "command":  # settings: the library checks
                kw.update(choices=row["choices"])
        p.add_argument(*row["flags"], **kw)
    p.set_defaults(engine="ray")  # this front end exists for the Ray engine
    p.add_argument("--options-json", help=argparse.SUPPRESS)
    return p


def _options(a: argparse.Namespace) -> Tuple[Any, Any]:
    """(CompareSettings, CompareCommandOptions): the command's JSON, else the parsed flags."""
    if a.options_json is not None:
        return _core.compare_options_from_json(a.options_json)
    s, c = _core.CompareSettings(), _core.CompareCommandOptions()
    for row in rows():
        if row["flags"]:
            setattr(s if row["scope"] == "settings" else c, row["name"], getattr(a, row["name"]))
    return s, c


def cli_main(argv: Optional[Sequence[str]] = None) -> int:
    from .api import run

    a = parse_args(_parser(), argv)
    try:
        s, c = _options(a)
        # A report that names an input, two reports in one file, two on stdout: refused before
        # anything is measured, by the library's rule (check_compare_outputs).
        refused = _core.check_compare_outputs(a.reference, a.candidate, s, c)
    except Exception as e:  # noqa: BLE001 - one line, exit 2, as the command
        print(f"driftscope: error: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
              file=sys.stderr)
        return 2
    if refused:
        print(f"driftscope: error: {refused}", file=sys.stderr)
        return 2
    outputs = [c.json, c.markdown, c.html, c.plot, c.model_explorer]
    try:
        s.details = s.details or bool(c.html)
        rep = run(a.reference, a.candidate, s, engine=c.engine, ray_address=c.ray_address or None,
                  ray_parts=c.ray_parts, ray_scratch=c.ray_scratch or None)
        inputs = _core.compare_inputs(a.reference, a.candidate, s)
        renders = [(c.json, lambda: rep.to_json(2)), (c.markdown, rep.to_markdown),
                   (c.html, rep.to_html), (c.plot, rep.to_png),
                   (c.model_explorer, rep.to_model_explorer)]
        for out, render in renders:
            if out:
                write_output(out, render(), inputs)
    except Exception as e:  # noqa: BLE001 - one line, exit 2, as the command
        print(f"driftscope: error: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
              file=sys.stderr)
        return 2
    if "-" not in outputs:
        if c.quiet:
            print(printable(rep.summary))
        else:
            tty = sys.stdout.isatty()
            color = c.color == "always" or (c.color == "auto" and tty and
                                            not os.environ.get("NO_COLOR"))
            width = _terminal_width(tty)
            sys.stdout.write(rep.to_text(color=color, width=max(width, 60) if width else 120,
                                         all=c.all))
    sys.stdout.flush()
    return rep.exit_code


def main(argv: List[str]) -> int:
    try:
        return cli_main(argv)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return int(e.code) if isinstance(e.code, int) else (0 if e.code is None else 2)


def _terminal_width(tty: bool) -> int:
    """The text report's width as the command's terminal_width() (cli/util.cpp) has it: $COLUMNS
    when it is a number, else the terminal's width, else 0 (not a terminal: 120 columns)."""
    c = os.environ.get("COLUMNS", "")
    if c.isdigit() and 0 < int(c) < 100000:
        return int(c)
    return shutil.get_terminal_size((0, 0)).columns if tty else 0

