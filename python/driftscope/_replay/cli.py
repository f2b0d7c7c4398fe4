"""`python -m driftscope replay` (the driftscope command forwards `driftscope replay` here)."""

from __future__ import annotations

import argparse
import sys
from typing import Dict, List, Optional, Sequence

import numpy as np

from .. import _cli
from .._text import printable
from ..errors import Error
from .mechanism import CannotReplay, UnknownTensor

PROG = "driftscope replay"

DESCRIPTION = """\
Is this tensor really where the candidate goes wrong? Replay answers it by running the model
again on the candidate backend with the reference backend's value put back at a tensor.

  output replay   the candidate runs with the reference's value at --at TENSOR (cast to the
                  candidate's dtype); each output's error before and after, and the share of it
                  the replay removed. Removed ~100%: this tensor is the cause.
  op replay       the module producing TENSOR runs alone on the candidate with the inputs it had
                  in the reference run: "introduced" (it makes the error itself) or "inherited"
                  (its inputs brought it).
  --isolate       every module run on the reference's inputs in one pass: the modules that make
                  error of their own, in execution order, even one hidden behind a bigger error.
  attribution     with several origins (--at more than once, or the origins compare finds when
                  --at is not given): the share of each output's error each one removes alone,
                  all of them together, and the unexplained rest.

Tensors are named as `driftscope compare` prints them (PyTorch: module paths; "NAME #2" for a
module's third call, "NAME (output 1)" for its second output tensor). Inputs are the guard's
(the entry point's own inputs for a PyTorch model, --seed for the generated ones)."""

EPILOG = """\
examples:
  driftscope replay --model tiny_encoder_torch.py:build --candidate torch-fp16 \\
      --at encoder.layers.2.norm1
  driftscope replay --model net.py:build --candidate torch-bf16 --isolate --json replay.json

exit status: 0 the replay ran (whatever it found); 2 bad input (an unknown tensor, a backend
that cannot replay this model, a model that does not load). The report is still written for the
tensors that were known. docs/howto/replay.md explains every number."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, as every driftscope usage error
        print(f"{PROG}: error: {printable(message)} (try {PROG} --help)", file=sys.stderr)
        sys.exit(2)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description=DESCRIPTION, epilog=EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model_file", nargs="?", metavar="MODEL",
                   help="an .onnx or .tflite model (for PyTorch use --model)")
    p.add_argument("--model", metavar="FILE.py:FUNCTION",
                   help="a PyTorch model: FUNCTION() returns (model, inputs), as for "
                        "`driftscope guard`; called after torch.manual_seed(SEED)")
    p.add_argument("--reference", metavar="BACKEND",
                   help="the trusted backend (guard's names; default: torch, ort or litert-ref)")
    p.add_argument("--candidate", metavar="BACKEND", required=True,
                   help="the backend under test (guard's names: torch-fp16, torch-bf16, ...)")
    p.add_argument("--at", action="append", default=[], metavar="TENSOR",
                   help="replay at this tensor (repeatable); without --at, the origins "
                        "`driftscope compare` finds between the two runs are attributed")
    p.add_argument("--isolate", action="store_true",
                   help="also run every module on the reference's inputs and list those that "
                        "make error of their own")
    p.add_argument("--max-replays", type=int, default=None, metavar="N",
                   help="attribute at most N origins (one candidate run each); the report "
                        "names those cut")
    p.add_argument("--seed", type=int, default=0, metavar="SEED",
                   help="seed of torch.manual_seed and of the generated inputs (default 0, as "
                        "the guard)")
    p.add_argument("--json", metavar="FILE", help="also write the report as JSON ('-': stdout)")
    p.add_argument("--markdown", metavar="FILE", help="also write the report as Markdown")
    return p


def _feeds(model: str, family: str, seed: int) -> Dict[str, np.ndarray]:
    """Sample 0 of the guard's inputs (a PyTorch entry point's own example)."""
    from .._guard import _inputs as I
    from .._guard._run import _signature

    specs = _signature(family, model, seed)
    made, _ = I.make_samples(specs, {}, {}, seed, 1)
    return made[0]


def cli_main(argv: Optional[Sequence[str]] = None) -> int:
    args = _cli.parse_args(_parser(), argv)
    if (args.model is None) == (args.model_file is None):
        print(f"{PROG}: error: give the model: MODEL.onnx|MODEL.tflite, or --model "
              f"FILE.py:FUNCTION for PyTorch (try {PROG} --help)", file=sys.stderr)
        return 2
    if args.max_replays is not None and args.max_replays < 0:
        print(f"{PROG}: error: --max-replays {args.max_replays}: must be >= 0", file=sys.stderr)
        return 2
    model = args.model or args.model_file
    inputs = [model.rpartition(":")[0] if args.model else model]
    for out in (args.json, args.markdown):
        if out and out != "-":
            why = _cli.refuse_output_onto_inputs(out, inputs)
            if why:
                print(f"{PROG}: error: {why}", file=sys.stderr)
                return 2
    from . import core

    family = core.family_of(model) if args.model_file else "torch"
    if args.model and family != "torch":
        family = "torch"
    from .._guard.backends.registry import DEFAULT_REFERENCE

    reference = args.reference or DEFAULT_REFERENCE[family]
    try:
        ref = core.replayable(model, reference, seed=args.seed)
        cand = core.replayable(model, args.candidate, seed=args.seed)
        feeds = _feeds(model, family, args.seed)
    except (CannotReplay, Error, ValueError, OSError, ImportError) as e:
        print(f"{PROG}: error: {printable(str(e).splitlines()[0] if str(e) else type(e).__name__)}",
              file=sys.stderr)
        return 2
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the user's entry point may raise anything
        print(f"{PROG}: error: --model {printable(model)}: {type(e).__name__}: "
              f"{printable(str(e).splitlines()[0] if str(e) else '')}", file=sys.stderr)
        return 2
    status = 0
    known = ref.tensors()
    good: List[str] = []
    from .torch import unknown

    for name in args.at:
        if name in set(known):
            good.append(name)
        else:
            print(f"{PROG}: error: {printable(str(unknown(name, known)))}", file=sys.stderr)
            status = 2
    from . import attribution, isolation, report

    try:
        rep = core.replay(ref, cand, feeds, good, model=model)
        source = "--at"
        origins = list(good)
        if not args.at:
            origins = attribution.origins_from_compare(ref, cand, feeds)
            source = "compare's origins"
        if origins:
            rep.attribution = attribution.attribute(ref, cand, feeds, origins, args.max_replays,
                                                    source=source)
        if args.isolate:
            rep.isolation = isolation.isolate(ref, cand, feeds)
    except UnknownTensor as e:  # a name known to the reference, not to the candidate
        print(f"{PROG}: error: {printable(str(e))}", file=sys.stderr)
        return 2
    except CannotReplay as e:
        print(f"{PROG}: error: {printable(str(e))}", file=sys.stderr)
        return 2
    sys.stdout.write(report.text(rep))
    try:
        if args.json:
            _cli.write_output(args.json, report.to_json(rep))
        if args.markdown:
            _cli.write_output(args.markdown, report.markdown(rep))
    except OSError as e:
        print(f"{PROG}: error: cannot write the report: {printable(str(e))}", file=sys.stderr)
        return 2
    return status
