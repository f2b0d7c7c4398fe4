"""`python -m driftscope replay` (the driftscope command forwards `driftscope replay` here)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import pickle
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from .. import _cli
from .._text import printable
from ..errors import Error
from .mechanism import CannotReplay

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
  --isolate       every op run on the reference's inputs: the ops that make error of their own,
                  in execution order, even one hidden behind a bigger error (PyTorch: every
                  module in one teacher-forced pass; ONNX: each node alone as a one-node
                  model, the first --max-isolate of them).
  attribution     with several origins (--at more than once, or the origins compare finds when
                  --at is not given): the share of each output's error each one removes alone,
                  all of them together, and the unexplained rest.

Tensors are named as `driftscope compare` prints them (PyTorch: module paths; ONNX: the
recorder's names; "NAME #2" for the third tensor of that name, "NAME (output 1)" for an op's
second output). Inputs are the guard's (the entry point's own inputs for a PyTorch model, --seed
for the generated ones). Each part (output and op replay, attribution, the isolation scan) runs
in its own child process: a runtime that crashes is a RUNTIME_ERROR for that part, the rest of
the report is still written."""

EPILOG = """\
examples:
  driftscope replay --model tiny_encoder_torch.py:build --candidate torch-fp16 \\
      --at encoder.layers.2.norm1
  driftscope replay --model net.py:build --candidate torch-bf16 --isolate --json replay.json
  driftscope replay model.onnx --reference ort --candidate ort-int8 --html replay.html

exit status: 0 the replay ran (whatever it found); 1 a part crashed or failed in the runtime
(RUNTIME_ERROR in the report, the other parts still there); 2 bad input (an unknown tensor, a
backend that cannot replay this model, a model that does not load). The report is still written
for the tensors that were known. docs/howto/replay.md explains every number."""


def _parser() -> argparse.ArgumentParser:
    p = _cli.OneLineParser(prog=PROG, description=DESCRIPTION, epilog=EPILOG,
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
    p.add_argument("--candidate-model", metavar="FILE.py:FUNCTION|MODEL.onnx",
                   help="a port: run this second model (the same network re-implemented) as "
                        "the candidate; tensors are paired by name as compare pairs them (PyTorch "
                        "module paths, ONNX node names), the unmatched ones listed")
    p.add_argument("--at", action="append", default=[], metavar="TENSOR",
                   help="replay at this tensor (repeatable); without --at, the origins "
                        "`driftscope compare` finds between the two runs are attributed")
    p.add_argument("--isolate", action="store_true",
                   help="also run every op on the reference's inputs and list those that make "
                        "error of their own")
    p.add_argument("--max-isolate", type=int, default=None, metavar="N",
                   help="--isolate on a model whose ops run one at a time (ONNX): at most the "
                        "first N nodes (default 200); the report says how many were left out")
    p.add_argument("--max-replays", type=int, default=None, metavar="N",
                   help="attribute at most N origins (one candidate run each); the report "
                        "names those cut")
    p.add_argument("--seed", type=int, default=0, metavar="SEED",
                   help="seed of torch.manual_seed and of the generated inputs (default 0, as "
                        "the guard)")
    p.add_argument("--json", metavar="FILE", help="also write the report as JSON ('-': stdout)")
    p.add_argument("--markdown", metavar="FILE", help="also write the report as Markdown")
    p.add_argument("--html", metavar="FILE",
                   help="also write the report as a self-contained HTML page")
    return p


def _feeds(model: str, family: str, seed: int) -> Dict[str, np.ndarray]:
    """Sample 0 of the guard's inputs (a PyTorch entry point's own example)."""
    from .._guard import _inputs as I
    from .._guard._run import _signature

    specs = _signature(family, model, seed)
    made, _ = I.make_samples(specs, {}, {}, seed, 1)
    return made[0]


# -- one part of the command in a child process ------------------------------------------------
#
# One child per part (output and op replay; attribution; the isolation scan), not per replay:
# each child loads both sides once (a model load is most of a replay's cost on ONNX: an INT8
# variant is quantized at load), and a crash costs only the part it happened in.

PARTS = {"replay": "output and op replay", "attribution": "attribution",
         "isolation": "isolation scan"}


@dataclass
class Job:
    part: str
    model: str
    family: str
    reference: str
    candidate: str
    seed: int
    at: List[str] = field(default_factory=list)
    origins: List[str] = field(default_factory=list)
    find_origins: bool = False
    max_replays: Optional[int] = None
    limit: Optional[int] = None
    candidate_model: Optional[str] = None  # --candidate-model: the port run as the candidate
    # The parent's folder for this part: the mechanisms' cut models go below it, so a child
    # killed by a signal leaves nothing behind (the parent removes the folder).
    work: str = ""


def _one_line(e: BaseException) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def run_part(job: Job) -> Dict[str, Any]:
    """What a child computes: {"fatal": message} for bad input (exit 2), {"runtime_error":
    message} when the runtime failed, else the part's result."""
    from . import attribution, core, isolation
    from .torch import unknown

    try:
        ref = core.replayable(job.model, job.reference, seed=job.seed,
                              work=os.path.join(job.work, "reference") if job.work else "")
        cand = core.replayable(job.candidate_model or job.model, job.candidate, seed=job.seed,
                               work=os.path.join(job.work, "candidate") if job.work else "")
        feeds = _feeds(job.model, job.family, job.seed)
        pairing = _pair(job, ref, cand) if job.candidate_model else None
    except (CannotReplay, Error, ValueError, OSError, ImportError) as e:
        return {"fatal": _one_line(e)}
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the user's entry point may raise anything
        return {"fatal": f"--model {job.model}: {type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else ''}"}
    try:
        if job.part == "replay":
            known = set(ref.tensors())
            bad = [str(unknown(n, ref.tensors())) for n in job.at if n not in known]
            good = [n for n in job.at if n in known]
            if pairing is not None:
                theirs = set(cand.tensors())
                bad += [f"--at {n}: the candidate model {job.candidate_model} has no tensor of "
                        "that name (--candidate-model pairs tensors by name)"
                        for n in good if n not in theirs]
                good = [n for n in good if n in theirs]
            rep = core.replay(ref, cand, feeds, good, model=job.model)
            if pairing is not None:
                rep.pairing = pairing
                rep.notes += _pairing_notes(pairing)
            out: Dict[str, Any] = {"replay": rep, "unknown": bad, "origins": good,
                                   "source": "--at"}
            if job.find_origins:
                out["source"] = "compare's origins"
                try:
                    out["origins"] = attribution.origins_from_compare(ref, cand, feeds)
                    if pairing is not None:
                        theirs = set(cand.tensors())
                        out["origins"] = [n for n in out["origins"] if n in theirs]
                except CannotReplay as e:
                    out["origins_error"] = str(e)
            return out
        if job.part == "attribution":
            return {"attribution": attribution.attribute(
                ref, cand, feeds, job.origins, job.max_replays,
                source="--at" if job.at else "compare's origins")}
        return {"isolation": isolation.isolate(ref, cand, feeds, job.limit)}
    except CannotReplay as e:  # UnknownTensor included: a name the candidate does not have
        return {"fatal": str(e)}
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the runtime's failure, reported
        from .._guard._messages import whole_message

        return {"runtime_error": whole_message(e)}
    finally:
        ref.close()
        cand.close()


def _pair(job: Job, ref: Any, cand: Any) -> Dict[str, Any]:
    """The reference's tensors matched by name to the candidate model's, as compare pairs two
    dumps; no name in common is bad input (two unrelated models, or another naming)."""
    mine, theirs = ref.tensors(), cand.tensors()
    have, had = set(theirs), set(mine)
    matched = [n for n in mine if n in have]
    from .torch import ROOT, parse_identity

    # A PyTorch model's root module pairs with any other's: it is the model's output, not a
    # tensor the two share by construction.
    if not [n for n in matched if parse_identity(n)[0] not in ("", ROOT)]:
        raise CannotReplay(f"--candidate-model {job.candidate_model}: no tensor name in common "
                           f"with {job.model} ({len(mine)} and {len(theirs)} tensors): replay "
                           "pairs tensors by name (module paths, ONNX node names)")
    return {"candidate_model": job.candidate_model, "matched": len(matched),
            "unmatched_reference": [n for n in mine if n not in have],
            "unmatched_candidate": [n for n in theirs if n not in had]}


def _pairing_notes(pairing: Dict[str, Any]) -> List[str]:
    out = [f"candidate model {pairing['candidate_model']}: {pairing['matched']} tensor(s) paired "
           "by name with the reference's"]
    for key, who in (("unmatched_reference", "of the reference with no tensor of that name in "
                                             "the candidate model"),
                     ("unmatched_candidate", "of the candidate model with no tensor of that "
                                             "name in the reference")):
        names = pairing[key]
        if names:
            shown = ", ".join(names[:20]) + (f", ... ({len(names) - 20} more)"
                                             if len(names) > 20 else "")
            out.append(f"unmatched: {len(names)} tensor(s) {who}: {shown}")
    return out


def _child_main(job_path: str, out_path: str) -> int:
    from .._pyexec import run_pickled_job

    # The user's entry point and the runtimes may print: stdout is the parent's report.
    return run_pickled_job(job_path, out_path, run_part)


def _forked_child_main(job_path: str, out_path: str) -> int:
    """_child_main in a child of the fork server (_parts_server), with the exit status a
    `sys.exit()` would give a fresh interpreter."""
    try:
        return _child_main(job_path, out_path)
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
        return 1


# What every part's child imports before it runs: the family's runtime and replay's own modules.
# A PyTorch model's parts are forked from a server that has imported torch (about 2 CPU-seconds
# a child otherwise pays again). torch's OpenMP pool does not survive a fork once started (why
# the guard's server leaves torch out); this server only imports, never runs an op, so no pool
# exists at fork and each part starts its own.
_PRELOAD = ("driftscope._replay.cli", "driftscope._replay.core", "driftscope._replay.attribution",
            "driftscope._replay.isolation", "driftscope._guard._run")
_FAMILY_PRELOAD = {
    "torch": ("torch", "driftscope._replay.torch", "driftscope.recorders.api"),
    "onnx": ("onnxruntime", "driftscope._replay.onnx"),
    "tflite": ("ai_edge_litert.interpreter", "driftscope._replay.tflite"),
}


def _parts_server(family: str, backends: Sequence[str]) -> Any:
    """The fork server (driftscope._guard._forker) the parts' children come from: one
    interpreter pays the imports once, each part is still a process of its own (a crash takes
    that part alone). None where fork is not available or $DRIFTSCOPE_GUARD_NO_FORK is set:
    then each part is a fresh interpreter."""
    if os.environ.get("DRIFTSCOPE_GUARD_NO_FORK") or not hasattr(os, "fork"):
        return None
    from .._guard._env import child_env
    from .._guard._forker import Forker
    from .._guard.backends.registry import BACKENDS

    preload = [m for n in backends if n in BACKENDS for m in BACKENDS[n].preload]
    preload += list(_PRELOAD) + list(_FAMILY_PRELOAD.get(family, ()))
    try:
        return Forker(child_env(), list(dict.fromkeys(preload)))
    except OSError:
        return None


def _in_child(job: Job, server: Any = None) -> Dict[str, Any]:
    """`job` in a process of its own (as the guard runs a backend: _run.run_backend), forked
    from `server` (_parts_server) or else a fresh interpreter: a signal or an exit without a
    result is a runtime_error naming it."""
    from .._guard._env import child_env as _child_env
    from .._pyexec import run_module, signal_name

    with tempfile.TemporaryDirectory(prefix="driftscope-replay-") as work:
        job_path, out_path = os.path.join(work, "job.pkl"), os.path.join(work, "result.pkl")
        with open(job_path, "wb") as f:
            pickle.dump(dataclasses.replace(job, work=work), f, protocol=pickle.HIGHEST_PROTOCOL)
        ran = None
        if server is not None and not any(c in work for c in "\0\n"):
            try:
                ran = server.run(job_path, out_path, os.path.join(work, "stderr.txt"), None,
                                 entry="driftscope._replay.cli:_forked_child_main")
            except BaseException:  # ^C or SIGTERM: the server's group, the child in it
                server.close(kill=True)
                raise
        if ran is None:  # no server, or it is gone: a fresh interpreter
            ran = run_module("driftscope._replay.cli", ["--child", job_path, out_path],
                             _child_env())
        returncode, tail = ran[0], ran[1]
        if returncode < 0:
            return {"runtime_error": f"the runtime's process was killed by "
                                     f"{signal_name(-returncode)}"}
        if returncode != 0 or not os.path.exists(out_path):
            return {"runtime_error": f"the runtime's process exited with status "
                                     f"{returncode}: {tail[-1] if tail else 'no message'}"}
        with open(out_path, "rb") as f:
            return pickle.load(f)


def cli_main(argv: Optional[Sequence[str]] = None) -> int:
    args = _cli.parse_args(_parser(), argv)
    if (args.model is None) == (args.model_file is None):
        print(f"{PROG}: error: give the model: MODEL.onnx|MODEL.tflite, or --model "
              f"FILE.py:FUNCTION for PyTorch (try {PROG} --help)", file=sys.stderr)
        return 2
    for flag, n in (("--max-replays", args.max_replays), ("--max-isolate", args.max_isolate)):
        if n is not None and n < 0:
            print(f"{PROG}: error: {flag} {n}: must be >= 0", file=sys.stderr)
            return 2
    model = args.model or args.model_file
    inputs = [model.rpartition(":")[0] if args.model else model]
    port = args.candidate_model
    if port is not None:
        low = port.lower()
        if low.endswith(".onnx"):
            where = port
        elif ":" in port and port.rpartition(":")[0].lower().endswith(".py"):
            where = port.rpartition(":")[0]
        else:
            print(f"{PROG}: error: --candidate-model {printable(port)}: give FILE.py:FUNCTION "
                  "or MODEL.onnx", file=sys.stderr)
            return 2
        if not os.path.isfile(where):
            print(f"{PROG}: error: --candidate-model {printable(port)}: {printable(where)} is "
                  "not a file", file=sys.stderr)
            return 2
        inputs.append(where)
    for out in (args.json, args.markdown, args.html):
        if out and out != "-":
            why = _cli.refuse_output_onto_inputs(out, inputs)
            if why:
                print(f"{PROG}: error: {why}", file=sys.stderr)
                return 2
    from . import core

    family = core.family_of(model) if args.model_file else "torch"
    from .._guard.backends.registry import DEFAULT_REFERENCE

    reference = args.reference or DEFAULT_REFERENCE[family]
    server = _parts_server(family, [reference, args.candidate])
    try:
        return _run_parts(args, model, family, reference, port, server)
    finally:
        if server is not None:
            server.close()


def _run_parts(args: argparse.Namespace, model: str, family: str, reference: str,
               port: Optional[str], server: Any) -> int:
    from . import attribution, core, isolation, report

    base = dict(model=model, family=family, reference=reference, candidate=args.candidate,
                seed=args.seed, candidate_model=port)
    first = _in_child(Job("replay", at=list(args.at), find_origins=not args.at, **base), server)
    if "fatal" in first:
        print(f"{PROG}: error: {printable(first['fatal'])}", file=sys.stderr)
        return 2
    status = 0
    runtime: Dict[str, str] = {}
    if "runtime_error" in first:
        runtime["replay"] = first["runtime_error"]
        rep = core.Replay(reference, args.candidate, model, [])
        origins, source = list(args.at), "--at"
        origins_error = "" if args.at else "the origins could not be found: " \
            "output and op replay crashed (RUNTIME_ERROR)"
    else:
        rep = first["replay"]
        for line in first["unknown"]:
            print(f"{PROG}: error: {printable(line)}", file=sys.stderr)
            status = 2
        origins, source = first["origins"], first["source"]
        origins_error = first.get("origins_error", "")
    if origins or origins_error:
        if origins_error:
            rep.attribution = attribution.Attribution([], source=source, error=origins_error)
        else:
            got = _in_child(Job("attribution", at=list(args.at), origins=list(origins),
                                max_replays=args.max_replays, **base), server)
            if "fatal" in got:
                print(f"{PROG}: error: {printable(got['fatal'])}", file=sys.stderr)
                return 2
            if "runtime_error" in got:
                runtime["attribution"] = got["runtime_error"]
                kept = origins if args.max_replays is None else origins[:args.max_replays]
                rep.attribution = attribution.Attribution(
                    kept, cut=origins[len(kept):], source=source,
                    error=f"RUNTIME_ERROR: {got['runtime_error']}")
            else:
                rep.attribution = got["attribution"]
    if args.isolate:
        got = _in_child(Job("isolation", limit=args.max_isolate, **base), server)
        if "fatal" in got:
            print(f"{PROG}: error: {printable(got['fatal'])}", file=sys.stderr)
            return 2
        if "runtime_error" in got:
            runtime["isolation"] = got["runtime_error"]
            rep.isolation = isolation.Isolation(error=f"RUNTIME_ERROR: {got['runtime_error']}")
        else:
            rep.isolation = got["isolation"]
    rep.runtime_errors = {PARTS[k]: v for k, v in runtime.items()}
    if runtime and status == 0:
        status = 1
    sys.stdout.write(report.text(rep))
    try:
        if args.json:
            _cli.write_output(args.json, report.to_json(rep))
        if args.markdown:
            _cli.write_output(args.markdown, report.markdown(rep))
        if args.html:
            _cli.write_output(args.html, report.html(rep))
    except OSError as e:
        print(f"{PROG}: error: cannot write the report: {printable(str(e))}", file=sys.stderr)
        return 2
    return status


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"] and len(sys.argv) == 4:
        from .._pyexec import die_with_parent

        die_with_parent()
        sys.exit(_child_main(sys.argv[2], sys.argv[3]))
    sys.exit(cli_main(sys.argv[1:]))
