"""Command-line plumbing shared by the recorders' ``cli_main`` functions."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import Any, Callable, List, NoReturn, Optional, Sequence, TypeVar, Union

from ._progress import Progress
from .errors import Error

T = TypeVar("T")


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line, as every driftscope usage error, exit 2."""

    def error(self, message: str) -> NoReturn:
        from ._text import printable

        print(f"{self.prog}: error: {printable(message)} (try {self.prog} --help)",
              file=sys.stderr)
        sys.exit(2)


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


def add_record_inputs(p: argparse.ArgumentParser, model_help: str) -> None:
    """The model, its inputs and the dump: the first arguments of every `record` front end."""
    p.add_argument("model", help=model_help)
    p.add_argument("--input", "-i", action="append", default=[], metavar="NAME=FILE.npy",
                   help="an input from a .npy file (repeat per input); FILE.npz alone feeds every "
                        "array of the archive by its name")
    p.add_argument("-o", "--output", required=True, metavar="RUN.tdump", help="the dump to write")


def add_record_options(p: argparse.ArgumentParser) -> None:
    """What to record and how to show it, shared by every `record` front end."""
    p.add_argument("--filter", default=None, help="which tensors to record (docs/filters.md)")
    p.add_argument("--summary", default=None,
                   help="which tensors to record as summaries instead of values (filter syntax)")
    p.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE",
                   help="extra run metadata (repeatable)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar on stderr (it is drawn only when stderr is a terminal)")
    p.add_argument("--no-observer-check", action="store_true",
                   help="skip the second, plain run that checks the capture changed nothing")


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


def input_paths(model: str, input_specs: Sequence[str] = ()) -> List[str]:
    """The files a recorder reads: the model and each ``--input`` (``NAME=FILE`` or ``FILE``)."""
    return [model] + [spec.partition("=")[2] or spec for spec in input_specs]


def refuse_output_onto_inputs(output: str, inputs: Sequence[str]) -> Optional[str]:
    """The rule every driftscope verb follows, the library's (include/driftscope/file.hpp,
    refuse_input_as_output): an output never names an input, also not through a symbolic or a
    hard link (same device and inode). A recorder writes its dump in place, record by record, so
    ``-o model.onnx`` would destroy the model at the first record. Returns the one-line message,
    worded as the command's, or None when the output is safe."""
    from . import _core

    same = _core.refuse_input_as_output(os.fsencode(output), [os.fsencode(p) for p in inputs])
    return None if same is None else same.decode("utf-8", "surrogateescape")


def run_recorder(prog: str, args: argparse.Namespace,
                 load_inputs: Callable[[Sequence[str]], Any],
                 record: Callable[[Any, Callable[..., None]], Any]) -> int:
    """The body of every `record` front end's ``cli_main`` after parsing: refuse an output that
    names an input, load the ``--input`` files, call ``record(feeds, progress)`` under a progress
    bar with its warnings as one ``PROG: warning:`` line each, and print the one-line result.
    Returns the exit code: 0 recorded, 2 bad usage or input, a model that fails to load or run."""
    same = refuse_output_onto_inputs(args.output, input_paths(args.model, args.input))
    if same:
        print(f"{prog}: error: {same}", file=sys.stderr)
        return 2
    try:
        feeds = load_inputs(args.input)
        with Progress("recording", "tensors written",
                      enabled=False if args.no_progress else None) as bar:
            result = warnings_to_stderr(prog, lambda: record(feeds, bar.update))
    except (Error, OSError) as err:  # recorder and driftscope errors carry a one-line message
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    note = ("" if result.observer_effect in ("none", "not checked")
            else f"; warning: {result.observer_effect}")
    print(f"{prog}: wrote {result.records} tensors to {result.path}{note}", file=sys.stderr)
    return 0


def write_output(path: str, data: Union[str, bytes], inputs: Sequence[str] = ()) -> None:
    """Writes a report (text, or bytes such as a PNG) by the library's output rules
    (include/driftscope/file.hpp, write_output_file): "-" is stdout; an existing FIFO or character
    device (/dev/null, a pipe) is written in place, as the stream it is; anything else goes to a
    temporary file in the same folder, renamed into place, so the file is complete or absent. An
    output that is one of `inputs` is refused (check refuse_output_onto_inputs first to refuse it
    before any work)."""
    if path == "-":
        if isinstance(data, str):
            sys.stdout.write(data)
        else:
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
        return
    from . import _core

    raw = data if isinstance(data, bytes) else data.encode("utf-8")
    _core.write_output_file(os.fsencode(path), raw, [os.fsencode(p) for p in inputs])
