"""guard --repro DIR: a repro bundle per failing ONNX backend (issue 26 item 4; guard.md §8).

For each failing backend whose probe named an origin, `driftscope repro` (driftscope._replay.repro)
is run around that origin with the guard's reference and the probe's sample as the inputs, and
writes DIR/BACKEND/. It runs in a child process of its own (python -m driftscope._guard._reproing):
repro captures every tensor of the model in-process before its backend children start, and a
runtime that crashes there must take only that child down, as a backend's crash does in the guard.

A bundle never changes a verdict or the exit status: the row gains a "repro" object (where the
bundle is, whether it reproduces, its node count, or why none was written) and one sentence.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any, Dict, List, Optional

import numpy as np

NOT_ONNX = "repro bundles are written for ONNX models only"


class RefusedDir(ValueError):
    """--repro DIR cannot take bundles (one line; the guard makes it a usage error)."""


def check_dir(out: str) -> str:
    """Up front, before any backend runs: DIR is a folder that is empty or does not exist yet in
    an existing folder (guard has no --force: a bundle never replaces files). Returns the path."""
    out = os.fspath(out)
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise RefusedDir(f"--repro {out}: the folder {parent} does not exist")
    if os.path.lexists(out) and not os.path.isdir(out):
        raise RefusedDir(f"--repro {out}: exists and is not a folder (driftscope never "
                         "overwrites its inputs)")
    if os.path.isdir(out) and os.listdir(out):
        raise RefusedDir(f"--repro {out}: the folder is not empty (a repro bundle never "
                         "replaces files: give a new or empty folder)")
    return out


def _why_not(ctx: Any, row: Any) -> Optional[str]:
    from .._replay.repro import RUN_PY_BACKENDS

    if ctx.family != "onnx":
        return NOT_ONNX
    if row.probe is None or row.probe.origin is None:
        return "the probe named no origin to cut around"
    if ctx.ref_model:
        return ("a bundle runs one model on both backends, and --reference-model gives the "
                "reference another file")
    if ctx.state:
        return "a bundle runs one step, and this model carries its state from step to step"
    for role, b in (("the reference", ctx.reference), ("the backend", row.name)):
        if b not in RUN_PY_BACKENDS:
            return (f"{role} {b} is not one run.py can rebuild with the runtime's own API "
                    f"(it rebuilds {', '.join(RUN_PY_BACKENDS[1:])})")
    return None


def write_bundles(rows: List[Any], ctx: Any, out: str) -> None:
    """Sets row.repro of every failing row (the rows the probe localised)."""
    from ._investigate import _PROBED, _safe
    from ._replaying import replay_target

    made = False
    for row in rows:
        if row.reference or row.status not in _PROBED:
            continue
        why = _why_not(ctx, row)
        at = replay_target(ctx.family, row.probe.origin) if not why else None
        if why:
            row.repro = {"dir": None, "reproduces": None, "nodes": None, "error": why}
            continue
        if not made:
            os.makedirs(out, exist_ok=True)
            made = True
        folder = os.path.join(out, _safe(row.name))
        row.repro = _child(ctx, row.name, at, ctx.samples[row.probe.sample], folder)
        row.repro["at"] = at


def _child(ctx: Any, backend: str, at: str, feeds: Dict[str, np.ndarray],
           folder: str) -> Dict[str, Any]:
    from .._pyexec import run_module, signal_name
    from ._env import child_env as _child_env

    res: Dict[str, Any] = {"dir": None, "reproduces": None, "nodes": None, "error": None}
    with tempfile.TemporaryDirectory(prefix="driftscope-guard-repro-") as work:
        np.savez(os.path.join(work, "feeds.npz"), **feeds)
        job = {"model": ctx.model, "reference": ctx.reference, "candidate": backend, "at": at,
               "out": folder, "inputs": [os.path.join(work, "feeds.npz")], "seed": ctx.seed,
               "timeout": ctx.timeout, "result": os.path.join(work, "result.json")}
        with open(os.path.join(work, "job.json"), "w", encoding="utf-8") as f:
            json.dump(job, f)
        # Its own process group (the forker and the backends' children inside it), killed
        # whole on a time-out or when the guard is interrupted, as _run.run_backend does.
        limit = ctx.timeout * 20 + 60
        returncode, tail, timed_out = run_module(
            "driftscope._guard._reproing", [os.path.join(work, "job.json")], _child_env(), limit)
        if timed_out:
            res["error"] = f"the repro search gave no result after {limit:g} s (killed)"
            return res
        try:
            with open(job["result"], encoding="utf-8") as f:
                got = json.load(f)
        except (OSError, ValueError):
            if returncode < 0:
                res["error"] = f"the repro child was killed by {signal_name(-returncode)}"
            else:
                res["error"] = (f"the repro child exited with status {returncode}: "
                                f"{tail[-1] if tail else 'no message'}")
            return res
    res.update(got)
    return res


def _main(path: str) -> int:
    """In the child: make_repro for one backend; its result (or the one-line error) as JSON."""
    with open(path, encoding="utf-8") as f:
        job = json.load(f)
    from .._replay import repro as R

    out: Dict[str, Any]
    try:
        r = R.make_repro(job["model"], job["reference"], job["candidate"], job["at"],
                         job["out"], job["inputs"], seed=job["seed"], timeout=job["timeout"])
        out = {"dir": job["out"], "reproduces": bool(r.reproduces),
               "nodes": sum(1 for _ in r.nodes), "error": None}
    except Exception as err:  # noqa: BLE001 - ReproError, a backend that failed: one line
        msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        out = {"dir": None, "reproduces": None, "nodes": None, "error": msg}
    with open(job["result"], "w", encoding="utf-8") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":  # pragma: no cover - the child
    sys.exit(_main(sys.argv[1]))
