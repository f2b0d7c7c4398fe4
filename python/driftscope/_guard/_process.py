"""The guard's child processes: one job (a backend's run, a probe's or a fallback's work) in a
process of its own, through the fork server of the guard() call running in this thread
(_forker.py) or a fresh interpreter, killed whole on a time-out or an interrupt. Everything that
runs a backend (the guard, replay, repro) goes through run_backend, so a runtime that crashes
takes only its child down."""

from __future__ import annotations

import os
import pickle
import tempfile
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence

from .._pyexec import run_module, signal_name
from .backends import registry as B
from ._env import child_env
from ._job import Job


def _child_env() -> Dict[str, str]:
    return child_env()


# The fork server of the guard() call running in this thread (_forker.py); None: one fresh
# interpreter per job.
_local = threading.local()


def _start_forker(backends: Sequence[str] = (), torch_models: Sequence[str] = ()
                  ) -> Optional[Any]:
    """The fork server, with the runtimes of `backends` imported (Backend.preload), and for
    each PyTorch entry point of `torch_models` the framework it builds its model with
    (_forker.model_preload)."""
    if os.environ.get("DRIFTSCOPE_GUARD_NO_FORK") or not hasattr(os, "fork"):
        return None
    from ._forker import Forker, model_preload

    preload = list(dict.fromkeys(m for n in backends if n in B.BACKENDS
                                 for m in B.BACKENDS[n].preload))
    for model in dict.fromkeys(torch_models):
        preload += [m for m in model_preload(model) if m not in preload]
    try:
        return Forker(_child_env(), preload)
    except OSError:
        return None


def run_backend(backend: str, model: str, samples: List[Any], runs: int,
                seed: int, timeout: float, state: Optional[Mapping[str, str]] = None,
                **extra: Any) -> Dict[str, Any]:
    """Runs one backend in a child process; returns the child's result, with "error" (and
    "signal") set when it failed or died. `extra` goes into the job (_child.py: kind,
    keep_float32, evidence, record, save_variant, ...)."""
    with tempfile.TemporaryDirectory(prefix="driftscope-guard-") as work:
        job_path = os.path.join(work, "job.pkl")
        out_path = os.path.join(work, "result.pkl")
        with open(job_path, "wb") as f:
            pickle.dump(Job(backend=backend, model=os.fspath(model), samples=samples,
                            runs=runs, seed=seed, work=work, state=dict(state or {}),
                            export_dir=getattr(_local, "export_dir", None), **extra), f,
                        protocol=pickle.HIGHEST_PROTOCOL)
        forker = getattr(_local, "forker", None)
        ran = None
        if forker is not None and not any(c in p for p in (job_path, out_path) for c in "\0\n"):
            ran = forker.run(job_path, out_path, os.path.join(work, "stderr.txt"), timeout)
            if ran is None:  # the server is gone: plain interpreters from now on
                _local.forker = None
        if ran is None:
            # Its own process group, killed whole on a timeout or when the guard is
            # interrupted; the working directory is not on its sys.path (_pyexec.py).
            ran = run_module("driftscope._guard._child", [job_path, out_path], _child_env(),
                             timeout)
        returncode, tail, timed_out = ran
        if timed_out:
            return {"error": f"no result after {timeout:g} s (killed)", "outputs": []}
        if returncode < 0:
            name = signal_name(-returncode)
            return {"error": f"the backend's process was killed by {name}", "signal": name,
                    "outputs": []}
        if returncode != 0 or not os.path.exists(out_path):
            last = tail[-1] if tail else "no message"
            return {"error": f"the backend's process exited with status {returncode}: "
                             f"{last}", "outputs": []}
        with open(out_path, "rb") as f:
            return pickle.load(f)


