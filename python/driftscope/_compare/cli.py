"""``python -m driftscope compare REF CAND --engine ray [...]``: the command `driftscope compare
--engine ray` forwards to (cli/cmd_compare.cpp rebuilds its flags; the names are the command's).
Reports are the library's renderings, written by the command's output rules, so they equal the
local command's byte for byte. Exit status as the command: 0 pass, 1 diverged, 2 error or nothing
compared, 3 silent failure."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import List, Optional, Sequence

from .._cli import parse_args, refuse_output_onto_inputs, write_output
from .._text import printable


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="driftscope compare",
                                description="Compare two dumps on a Ray cluster (--engine ray).")
    p.add_argument("reference")
    p.add_argument("candidate")
    for flag in ("atol", "rtol", "max-mismatch-fraction", "min-cosine", "min-sqnr", "max-rel-l2",
                 "min-argmax", "min-topk", "r64-floor"):
        p.add_argument(f"--{flag}", type=float)
    p.add_argument("--max-ulp", type=int)
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("-j", "--threads", type=int, default=0)
    for flag in ("policy", "reference64", "map-file", "json", "markdown", "html", "plot",
                 "model-explorer", "ray-address", "ray-scratch"):
        p.add_argument(f"--{flag}")
    for flag in ("map-a", "map-b", "classes", "r64-k"):
        p.add_argument(f"--{flag}", action="append", default=[])
    p.add_argument("--pairs", default="name")
    p.add_argument("--filter", default="")
    for flag in ("nan-equal", "reshape", "stop-at-first", "allow-unpaired", "allow-incomparable",
                 "all", "quiet", "no-progress"):
        p.add_argument(f"--{flag}", action="store_true")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    p.add_argument("--engine", choices=("local", "ray"), default="ray")
    p.add_argument("--ray-parts", type=int)
    return p


def cli_main(argv: Optional[Sequence[str]] = None) -> int:
    from .api import compare

    a = parse_args(_parser(), argv)
    inputs = [a.reference, a.candidate] + [x for x in (a.reference64, a.policy, a.map_file) if x]
    outputs = [("--json", a.json), ("--markdown", a.markdown), ("--html", a.html),
               ("--plot", a.plot), ("--model-explorer", a.model_explorer)]
    for flag, out in outputs:
        same = out and out != "-" and refuse_output_onto_inputs(out, inputs)
        if same:
            print(f"driftscope: error: {same}", file=sys.stderr)
            return 2
    if sum(out == "-" for _, out in outputs) > 1:
        print("driftscope: error: only one report can go to stdout ('-')", file=sys.stderr)
        return 2
    try:
        rep = compare(
            a.reference, a.candidate, atol=a.atol, rtol=a.rtol, min_cosine=a.min_cosine,
            min_sqnr=a.min_sqnr, max_ulp=a.max_ulp, max_rel_l2=a.max_rel_l2,
            max_mismatch_fraction=a.max_mismatch_fraction, min_argmax_agreement=a.min_argmax,
            min_topk_overlap=a.min_topk, policy=a.policy, map_a=a.map_a, map_b=a.map_b,
            mapping=a.map_file, pairs=a.pairs, filter=a.filter, reshape=a.reshape,
            nan_equal=a.nan_equal, stop_at_first=a.stop_at_first,
            allow_unpaired=a.allow_unpaired, allow_incomparable=a.allow_incomparable,
            threads=a.threads, classes=a.classes, top_k=a.top_k, reference64=a.reference64,
            r64_k=a.r64_k, r64_floor=a.r64_floor, details=bool(a.html), engine=a.engine,
            ray_address=a.ray_address, ray_parts=a.ray_parts, ray_scratch=a.ray_scratch)
        renders = [(a.json, lambda: rep.to_json(2)), (a.markdown, rep.to_markdown),
                   (a.html, rep.to_html), (a.model_explorer, rep.to_model_explorer)]
        for out, render in renders:
            if out:
                write_output(out, render())
        if a.plot:
            write_output(a.plot, rep.to_png())
    except Exception as e:  # noqa: BLE001 - one line, exit 2, as the command
        print(f"driftscope: error: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
              file=sys.stderr)
        return 2
    if not any(out == "-" for _, out in outputs):
        if a.quiet:
            print(printable(rep.summary))
        else:
            tty = sys.stdout.isatty()
            color = a.color == "always" or (a.color == "auto" and tty and
                                            not os.environ.get("NO_COLOR"))
            width = _terminal_width(tty)
            sys.stdout.write(rep.to_text(color=color, width=max(width, 60) if width else 120,
                                         all=a.all))
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

