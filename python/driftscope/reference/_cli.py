"""`driftscope reference {init,run,check}` and `driftscope evidence {declare,measure,verify}`
(docs/references.md). The C++ command forwards both verbs here, as it does `record` and `guard`:
they need onnx, torch and the recorders, which live in Python."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Dict, List, Optional, Sequence

from .._cli import parse_args, refuse_output_onto_inputs, write_output

REFERENCE_USAGE = """usage: driftscope reference init MODEL.onnx -o MODEL.hash.onnx [--seed N] [--max-weight-bytes SIZE]
       driftscope reference run --model FILE.py:FUNCTION -o DIR [--hash-init] [--seed N]
       driftscope reference check REF32.tdump CAND.tdump --reference64 REF64.tdump
                                  [--format text|json|markdown] [-o OUT] [--r64-k DT=K]

  init   rewrite an ONNX model's weights with the hash initialiser at native scale
  run    record a PyTorch model in float32 and float64 on the same inputs
  check  the float64 ordering rule per intermediate, and argmax flips on every output
See docs/references.md; `driftscope reference VERB --help` lists each verb's options."""

EVIDENCE_USAGE = """usage: driftscope evidence declare LEDGER --id ID --reference REF32.tdump
                                   --reference64 REF64.tdump [--model F] [--input F]...
                                   [--policy F] [--r64-k DT=K] [--r64-floor F] [--design TEXT]
       driftscope evidence measure LEDGER --id ID --candidate CAND.tdump
       driftscope evidence verify LEDGER [--head SHA256]

An append-only, hash-chained JSONL ledger: declare the reference design and tolerances, measure
the declared check once (its whole table is recorded), verify that the lines, the declared files
and the measured candidates are as recorded and that each verdict follows from its table and the
declared rule (re-measured when the dumps are present). Pin the head that declare, measure and
verify print somewhere the ledger's writer cannot change it, and pass it to --head: it must still
be a line of the ledger. The ledger alone does not prove when it was written, that nothing was
measured before it, or that no line was cut from its end. See docs/references.md section 4."""


def _err(prog: str, msg: str) -> int:
    print(f"{prog}: error: {msg}", file=sys.stderr)
    return 2


def _r64_k(items: Sequence[str], prog: str) -> Dict[str, float]:
    out = {}
    for item in items:
        k, sep, v = item.partition("=")
        try:
            out[k] = float(v)
        except ValueError:
            sep = ""
        if not sep or not k:
            raise ValueError(f"--r64-k {item!r}: expected DTYPE=NUMBER, e.g. bf16=3")
    return out


def _init(argv: Sequence[str]) -> int:
    prog = "driftscope reference init"
    p = argparse.ArgumentParser(prog=prog, description=(
        "Rewrites the weight initializers of an ONNX model with the hash initialiser at the "
        "native scale of the op that consumes each (MatMul/Gemm/Conv weights and their biases: "
        "uniform, std 1/sqrt(3 fan_in); Gather tables: normal, std 1; normalisation scales 1, "
        "biases 0). Scalars, shapes and integer tensors stay as they were. The record of what "
        "was done goes into the model's metadata_props (driftscope.reference.init)."))
    p.add_argument("model", help="the ONNX model to read (never modified)")
    p.add_argument("-o", "--output", required=True, help="the rewritten model to write")
    p.add_argument("--seed", type=int, default=0, help="hash seed, 0 .. 2^64-1 (default 0)")
    p.add_argument("--json", action="store_true", help="print the record as JSON on stdout")
    p.add_argument("--max-weight-bytes", default="1G", metavar="SIZE",
                   help="the initializers rewritten may take this much in all (512M, 2G, ...; "
                        "default 1G); a larger model is refused before anything is allocated")
    args = parse_args(p, argv)
    if not 0 <= args.seed < 1 << 64:
        return _err(prog, f"--seed {args.seed} is outside 0 .. 2^64-1")
    same = refuse_output_onto_inputs(args.output, [args.model])
    if same:
        return _err(prog, same)
    if not os.path.isfile(args.model):
        return _err(prog, f"{args.model}: no such regular file")
    try:
        import onnx  # noqa: F401
    except ImportError as e:
        return _err(prog, f"the onnx package is not installed ({e}); pip install onnx")
    from .._limits import output_onto_input, parse_size
    from .._text import printable
    from ._onnx import InitError, model_files, read_model, rewrite_file, summary

    try:
        max_bytes = parse_size(args.max_weight_bytes)
    except ValueError as e:
        return _err(prog, f"--max-weight-bytes {e}")
    try:
        model = read_model(args.model)
        # Its external data is an input too: -o weights.bin would replace the weights.
        same = output_onto_input(args.output, "-o", model_files(model, args.model))
        if same:
            return _err(prog, printable(same))
        record = rewrite_file(args.model, args.output, args.seed, max_bytes, model=model)
    except InitError as e:  # names the file itself
        return _err(prog, str(e))
    except Exception as e:  # noqa: BLE001 - one line, exit 2
        return _err(prog, printable(f"{args.model}: {e}"))
    if args.json:
        print(json.dumps(record, indent=1, sort_keys=True))
    print(f"{args.output}: {summary(record)}", file=sys.stderr)
    return 0


def _run(argv: Sequence[str]) -> int:
    prog = "driftscope reference run"
    p = argparse.ArgumentParser(prog=prog, description=(
        "Records a PyTorch model in float32 and float64 on the same inputs: DIR/float32.tdump "
        "and DIR/float64.tdump (the float64 run casts the float32 weights exactly)."))
    p.add_argument("--model", required=True, metavar="FILE.py:FUNCTION",
                   help="function returning (model, inputs), as for `driftscope record torch`")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="folder for the dumps")
    p.add_argument("--hash-init", action="store_true",
                   help="fill the model with driftscope.reference.hash_init_ first")
    p.add_argument("--seed", type=int, default=0, help="hash seed for --hash-init")
    p.add_argument("--filter", default="", help="which tensors to keep (docs/filters.md)")
    args = parse_args(p, argv)
    try:
        import torch  # noqa: F401
    except ImportError as e:
        return _err(prog, f"the torch package is not installed ({e})")
    from ..recorders.api import torch_load_entry_point as _load_entry_point
    from ._runs import reference_runs
    from ._torch import hash_init_

    try:
        made = _load_entry_point(args.model)()
        if not (isinstance(made, tuple) and len(made) == 2):
            return _err(prog, f"--model {args.model}: the function must return (model, inputs)")
        model, inputs = made
        if args.hash_init:
            hash_init_(model, args.seed)
        paths = reference_runs(model, inputs, args.output, filter=args.filter)
    except Exception as e:  # noqa: BLE001
        return _err(prog, str(e))
    print(f"{paths['float32']}, {paths['float64']}: recorded", file=sys.stderr)
    return 0


def _check(argv: Sequence[str]) -> int:
    prog = "driftscope reference check"
    p = argparse.ArgumentParser(prog=prog, description=(
        "Compares CAND against REF32 with the float64 ordering rule (compare --reference64, "
        "docs/compare.md) and prints one row per intermediate: candidate vs float64, float32 vs "
        "float64, the limit, the decision, and argmax flips over the last axis of every output "
        "(candidate vs float64, float32's own in brackets). Exit 0 all pass, 1 any fails, "
        "2 trouble."))
    p.add_argument("reference")
    p.add_argument("candidate")
    p.add_argument("--reference64", required=True)
    p.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    p.add_argument("-o", "--output", default="-", help="write the table here (default stdout)")
    p.add_argument("--r64-k", action="append", default=[], metavar="DTYPE=K")
    p.add_argument("--r64-floor", type=float, default=None)
    p.add_argument("--policy", default=None)
    args = parse_args(p, argv)
    inputs = [args.reference, args.candidate, args.reference64] + ([args.policy] if args.policy else [])
    if args.output != "-":
        same = refuse_output_onto_inputs(args.output, inputs)
        if same:
            return _err(prog, same)
    from ._check import check, render

    try:
        result = check(args.reference, args.candidate, args.reference64,
                       r64_k=_r64_k(args.r64_k, prog), r64_floor=args.r64_floor,
                       policy=args.policy)
        write_output(args.output, render(result, args.format))
    except Exception as e:  # noqa: BLE001
        return _err(prog, str(e))
    return 0 if result["passed"] else 1


def reference_main(argv: Sequence[str]) -> int:
    verbs = {"init": _init, "run": _run, "check": _check}
    if not argv or argv[0] in ("-h", "--help"):
        print(REFERENCE_USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] not in verbs:
        return _err("driftscope reference", f"unknown verb {argv[0]!r} (init, run, check)")
    try:
        return verbs[argv[0]](list(argv[1:]))
    except SystemExit as e:
        return int(e.code) if isinstance(e.code, int) else (0 if e.code is None else 2)


def _ledger_is_input(ledger: str, inputs: Sequence[str]) -> bool:
    """refuse_output_onto_inputs for the ledger (any path: the library takes its bytes)."""
    return bool(refuse_output_onto_inputs(ledger, inputs))


def evidence_main(argv: Sequence[str]) -> int:
    from .._text import printable
    from ._evidence import LIMITS, LedgerError, declare, measure, verify

    if not argv or argv[0] in ("-h", "--help"):
        print(EVIDENCE_USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    verb, rest = argv[0], list(argv[1:])
    prog = f"driftscope evidence {printable(verb)}"
    p = argparse.ArgumentParser(prog=prog)
    p.add_argument("ledger")
    if verb == "declare":
        p.add_argument("--id", required=True)
        p.add_argument("--reference", required=True)
        p.add_argument("--reference64", required=True)
        p.add_argument("--model", action="append", default=[])
        p.add_argument("--input", action="append", default=[])
        p.add_argument("--policy", default=None)
        p.add_argument("--r64-k", action="append", default=[], metavar="DTYPE=K")
        p.add_argument("--r64-floor", type=float, default=None)
        p.add_argument("--design", default="", help="what the reference is, in words")
    elif verb == "measure":
        p.add_argument("--id", required=True)
        p.add_argument("--candidate", required=True)
    elif verb == "verify":
        p.add_argument("--head", default=None, metavar="SHA256", help=(
            "a head printed earlier and kept where the ledger's writer cannot change it: that "
            "line must still be in the chain (lines appended after it are fine)"))
    else:
        return _err("driftscope evidence", f"unknown verb {printable(repr(verb))} "
                    f"(declare, measure, verify)")
    try:
        args = parse_args(p, rest)
    except SystemExit as e:
        return int(e.code) if isinstance(e.code, int) else (0 if e.code is None else 2)
    # Paths, ids, roles and table names come from the command line or from the ledger, which
    # anyone may have written: every line printed goes through printable().
    name = printable(args.ledger)
    try:
        if verb == "declare":
            files: List = [("reference", args.reference), ("reference64", args.reference64)]
            files += [("model", m) for m in args.model] + [("input", i) for i in args.input]
            if args.policy:
                files.append(("policy", args.policy))
            if _ledger_is_input(args.ledger, [f for _, f in files]):
                return _err(prog, f"the ledger {name} is one of the declared files")
            tol: Dict = {"r64_k": _r64_k(args.r64_k, prog)}
            if args.r64_floor is not None:
                tol["r64_floor"] = args.r64_floor
            h = declare(args.ledger, args.id, files, tol, args.design)
            print(f"{name}: declared {printable(args.id)}; head {h}")
            return 0
        if verb == "measure":
            from ._check import verdict_line

            if _ledger_is_input(args.ledger, [args.candidate]):
                return _err(prog, f"the ledger {name} is the candidate")
            h, result = measure(args.ledger, args.id, args.candidate)
            print(f"{name}: measured {printable(args.id)}: {printable(verdict_line(result))}; "
                  f"head {h}")
            return 0 if result["passed"] else 1
        problems, notes, h, n = verify(args.ledger, args.head)
        for line in notes + list(problems):
            print(f"{name}: {printable(line)}")
        if problems.total > len(problems):  # the first MAX_PROBLEMS are printed
            print(f"{name}: ... and {problems.total - len(problems)} more problems")
        state = "intact" if not problems.total else f"{problems.total} problem(s)"
        print(f"{name}: {LIMITS}")
        print(f"{name}: {n} lines, {state}; head {h}")  # last, as scripts read it
        return 1 if problems.total else 0
    except (LedgerError, ValueError, OSError) as e:
        return _err(prog, printable(str(e)))
    except (KeyError, TypeError, AttributeError, OverflowError) as e:
        # a hand-made entry that hashes correctly
        return _err(prog, f"{name}: a ledger entry lacks or mistypes a field "
                    f"({printable(repr(e))})")


def main(argv: Optional[Sequence[str]] = None) -> int:  # pragma: no cover - python -m
    return reference_main(list(sys.argv[1:] if argv is None else argv))
