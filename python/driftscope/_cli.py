"""Command-line plumbing shared by the recorders' ``cli_main`` functions."""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any, Callable, List, Optional, Sequence, TypeVar

T = TypeVar("T")


def parse_args(parser: argparse.ArgumentParser,
               argv: Optional[Sequence[str]]) -> argparse.Namespace:
    """``parser.parse_args`` with getopt's rule for option values: an option that takes a value
    takes the next argument whatever it looks like. argparse alone reads ``--filter '-*dropout*'``
    as two options (a filter that excludes starts with '-'); the driftscope command (CLI11)
    already accepts it, and the recorders behave the same. ``--filter=-*dropout*`` works too."""
    args = list(sys.argv[1:] if argv is None else argv)
    takes_value = {}
    for action in parser._actions:
        if action.nargs is None and isinstance(action, (argparse._StoreAction,
                                                        argparse._AppendAction)):
            for opt in action.option_strings:
                takes_value[opt] = opt.startswith("--")
    out: List[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            out.extend(args[i:])
            break
        if a in takes_value and i + 1 < len(args) and args[i + 1].startswith("-"):
            # "--filter=VALUE" for a long option, "-fVALUE" for a short one.
            out.append(f"{a}={args[i + 1]}" if takes_value[a] else a + args[i + 1])
            i += 2
            continue
        out.append(a)
        i += 1
    return parser.parse_args(out)


def warnings_to_stderr(prog: str, fn: Callable[[], T]) -> T:
    """Runs fn; the RuntimeWarnings it raises (tensors not recorded, nodes kept in float32) are
    printed as one ``PROG: warning: ...`` line each instead of Python's file:line format."""
    caught: List[Any] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RuntimeWarning)
            return fn()
    finally:
        for w in caught:
            if issubclass(w.category, RuntimeWarning):
                text = str(w.message)
                text = text[len("driftscope: "):] if text.startswith("driftscope: ") else text
                print(f"{prog}: warning: {text}", file=sys.stderr)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
