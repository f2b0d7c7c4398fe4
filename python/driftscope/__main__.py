"""``python -m driftscope``: the Python side of the ``driftscope`` command.

    python -m driftscope record torch  --model MODULE:FUNCTION -o run.tdump [...]
    python -m driftscope record onnx   MODEL.onnx --input NAME=FILE.npy -o run.tdump [...]
    python -m driftscope record tflite MODEL.tflite --input NAME=FILE.npy -o run.tdump [...]
    python -m driftscope guard MODEL.onnx|MODEL.tflite|--model FILE.py:FUNCTION [...]
    python -m driftscope replay --model FILE.py:FUNCTION --candidate BACKEND --at TENSOR [...]
    python -m driftscope reference {init,run,check} ...   (docs/references.md)
    python -m driftscope evidence {declare,measure,verify} LEDGER ...
    python -m driftscope compare REF CAND --engine ray [...]   (docs/howto/cluster.md)
    python -m driftscope repro MODEL.onnx --candidate B --at TENSOR -o DIR   (docs/howto/repro.md)
    python -m driftscope record llm --model FILE.py:FN --new-tokens N -o run.tdump  (docs/howto/llm.md)
    python -m driftscope llm-compare REF.tdump CAND.tdump [--json F]

The C++ ``driftscope record ...`` executes ``PYTHON -m driftscope record ...`` with the same
arguments (PYTHON: $DRIFTSCOPE_PYTHON, else the Python installed next to the command, else
python3 on PATH; cli/cmd_record.cpp), so every recorder has one entry point:
``driftscope.<adapter>.cli_main(argv)``, which returns the exit status (0 success, 2 error).
Exit codes follow the driftscope command: 2 for usage errors and for a recorder whose framework is not installed.
"""

from __future__ import annotations

import importlib
import sys
from typing import List, Optional, Sequence

# framework name on the command line -> (adapter module, what to pip install when missing)
RECORDERS = {
    "torch": ("driftscope.torch", "torch", "pip install torch"),
    "onnx": ("driftscope.onnxruntime", "onnxruntime", "pip install onnx onnxruntime"),
    "tflite": ("driftscope.litert", "ai_edge_litert", "pip install ai-edge-litert"),
    "llm": ("driftscope.llm", "transformers", "pip install torch transformers"),
}

USAGE = """usage: python -m driftscope record {torch,onnx,tflite,llm} ARGS...
       python -m driftscope llm-compare REF.tdump CAND.tdump [--json F]   (docs/howto/llm.md)
       python -m driftscope guard MODEL [OPTIONS]   (python -m driftscope guard --help)
       python -m driftscope replay MODEL --candidate BACKEND [--at TENSOR ...]   (--help)
       python -m driftscope reference {init,run,check} ...
       python -m driftscope evidence {declare,measure,verify} LEDGER ...
       python -m driftscope repro MODEL.onnx --candidate B --at TENSOR -o DIR [OPTIONS]
       python -m driftscope --version

Record the intermediate tensors of one run of a model into a .tdump file.
  torch   a PyTorch model from a Python entry point (--model MODULE:FUNCTION)
  onnx    an ONNX model run with ONNX Runtime
  tflite  a LiteRT (TensorFlow Lite) model
  llm     a greedy generation of a causal LM, step by step (--model FILE.py:FN --new-tokens N)
'python -m driftscope record FRAMEWORK --help' lists the options of each recorder.
Compare two dumps with the driftscope command: driftscope compare REF.tdump CAND.tdump"""


def _missing_framework(framework: str, package: str, hint: str, err: ImportError) -> int:
    print(f"driftscope record {framework}: error: the {package} package is not installed "
          f"({err}); install it with: {hint}", file=sys.stderr)
    return 2


def record_main(argv: Sequence[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    framework, rest = argv[0], list(argv[1:])
    if framework not in RECORDERS:
        print(f"driftscope record: error: unknown framework {framework!r} (choose from "
              f"{', '.join(RECORDERS)})", file=sys.stderr)
        return 2
    module_name, package, hint = RECORDERS[framework]
    try:
        importlib.import_module(package)
    except ImportError as e:
        return _missing_framework(framework, package, hint, e)
    adapter = importlib.import_module(module_name)
    cli = getattr(adapter, "cli_main", None)
    if cli is None:
        print(f"driftscope record {framework}: error: {module_name} has no cli_main",
              file=sys.stderr)
        return 2
    try:
        return int(cli(rest) or 0)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return int(e.code) if isinstance(e.code, int) else (0 if e.code is None else 2)


class Terminated(BaseException):
    """SIGTERM or SIGHUP, raised like ^C's KeyboardInterrupt so that every `finally` runs:
    the guard's fork server and backend child are killed, temporary folders removed and a
    partly written output discarded, as on ^C (SECURITY.md, "Signals")."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def _interrupted(args: Sequence[str], signum: int) -> int:
    import signal

    verb = args[0] if args else ""
    print(f"driftscope {verb}: interrupted by {signal.Signals(signum).name}; "
          "its child processes were ended", file=sys.stderr)
    return 128 + signum


def main(argv: Optional[List[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    import signal
    import threading

    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            previous[sig] = signal.signal(sig, _raise_terminated)
    try:
        return _dispatch(args)
    except KeyboardInterrupt:
        return _interrupted(args, signal.SIGINT)
    except Terminated as t:
        return _interrupted(args, t.signum)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _dispatch(args: List[str]) -> int:
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    if args[0] == "--version":
        from . import __version__
        from . import _core
        print(f"driftscope {__version__} (python)\nsimd: {_core.simd_target()} (this CPU runs: "
              f"{' '.join(_core.simd_targets())}; DRIFTSCOPE_SIMD=NAME picks one)")
        return 0
    if args[0] == "record":
        return record_main(args[1:])
    if args[0] == "reference":
        from .reference._cli import reference_main

        return reference_main(args[1:])
    if args[0] == "evidence":
        from .reference._cli import evidence_main

        return evidence_main(args[1:])
    if args[0] == "compare":  # `driftscope compare --engine ray` (cli/cmd_compare.cpp)
        from ._compare.cli import main as compare_main

        return compare_main(args[1:])
    if args[0] == "guard":
        from ._guard import cli_main as guard_main

        return guard_main(args[1:])
    if args[0] == "replay":
        from ._replay.cli import cli_main as replay_main

        try:
            return replay_main(args[1:])
        except SystemExit as e:  # argparse: --help (0) or a usage error (2)
            return int(e.code) if isinstance(e.code, int) else (0 if e.code is None else 2)
    if args[0] == "llm-compare":  # two generations (docs/howto/llm.md)
        from .recorders.llm import compare_main as llm_compare_main

        return llm_compare_main(args[1:])
    if args[0] == "repro":
        from . import reference
        from ._replay.repro_cli import cli_main as repro_main

        return repro_main(args[1:], hasher=reference)
    print(f"driftscope: error: unknown command {args[0]!r}; the Python entry point runs "
          f"'record', 'guard', 'replay', 'repro', 'reference', 'evidence', 'llm-compare' and 'compare --engine ray' (other commands are in the driftscope executable)",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
