"""One backend in its own process: ``python -m driftscope._guard._child JOB.pkl RESULT.pkl``.

The guard writes the job (a pickled _job.Job: backend name, model, input samples, timed runs,
seed; or the probe's or the fallback's work on that backend), this process
loads the model through the backend, runs every sample once, times `runs` more runs of sample 0,
and writes the result. Whatever goes wrong in Python comes back as an error message; a crash
(a signal) is seen by the parent as the child's exit status, so the guard goes on.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Dict, List

from ._job import Job
from ._messages import whole_message


def run_job(job: Job) -> Dict[str, Any]:
    from .backends.registry import BACKENDS, load_plugins

    load_plugins()
    if job.export_dir:  # the guard run's one export of a PyTorch model (onnx-*)
        from .backends.torch_extra import use_export_dir

        use_export_dir(job.export_dir)
    kind = job.kind
    if kind == "bisect":
        from ._probe import bisect_job

        return _guarded(bisect_job, job)
    if kind == "bisect_torch":
        from ._probe import torch_bisect_job

        return _guarded(torch_bisect_job, job)
    if kind == "fallback":
        from ._fallback import search_job

        return _guarded(search_job, job)
    if kind == "search":
        from ._search import search_job as input_search_job

        return _guarded(input_search_job, job)
    if kind == "replay":
        from ._replaying import replay_job

        return _guarded(replay_job, job)
    result: Dict[str, Any] = {"outputs": [], "latency_s": [], "load_s": None, "notes": [],
                              "error": None, "stage": "load"}
    try:
        backend = BACKENDS[job.backend]
        keep = list(job.keep_float32 or ())
        start = time.perf_counter()
        # Only a fallback passes keep_float32: plugins written before it keep working.
        if job.keep_precision:  # a rung of the fallback ladder below float32
            session = backend.load(job.model, job.work, job.seed,
                                   keep_precision=dict(job.keep_precision))
        else:
            session = (backend.load(job.model, job.work, job.seed, keep_float32=keep)
                       if keep else backend.load(job.model, job.work, job.seed))
        if job.state:  # a stateful model: run step by step, carrying the state
            from ._stateful import StatefulSession

            session = StatefulSession(session, job.state)
        result["load_s"] = time.perf_counter() - start
        result["notes"] = list(getattr(session, "notes", []))
        for k, feeds in enumerate(job.samples):
            result["stage"] = f"sample {k + 1}"
            start = time.perf_counter()
            outputs = session.run(feeds)
            first = time.perf_counter() - start
            result["outputs"].append(outputs)
            if k == 0:
                result["first_run_s"] = first
                times: List[float] = []
                for _ in range(job.runs):
                    start = time.perf_counter()
                    session.run(feeds)
                    times.append(time.perf_counter() - start)
                result["latency_s"] = times
        if job.metric:
            result["stage"] = "task metric"
            from ._task import MetricError, evaluate

            refs = job.metric_refs if job.metric_refs is not None else result["outputs"]
            try:
                result["metric"] = evaluate(job.metric, refs, result["outputs"],
                                            job.metric_samples or [{}] * len(refs),
                                            finite=job.metric_refs is None)
            except MetricError as err:
                result["metric_error"] = str(err)
        if job.evidence is not None:
            result["stage"] = "float32 evidence"
            rung = set((job.keep_precision or {}).values())
            result["evidence"] = (dict(session.precision_evidence(list(job.evidence), rung.pop()))
                                  if len(rung) == 1 else
                                  dict(session.float32_evidence(list(job.evidence))))
        if job.save_variant and getattr(session, "variant_proto", None) is not None:
            import onnx

            onnx.save(session.variant_proto, job.save_variant)
        if job.record:
            result["stage"] = "recording intermediates"
            result.update(record_session(session, job.samples[job.record["sample"]],
                                         job.record["path"]))
        result["stage"] = "done"
    # Every failure is reported, a build() that calls sys.exit() too; the guard goes on.
    except (Exception, SystemExit) as err:  # noqa: BLE001
        result["error"] = whole_message(err)
        if getattr(err, "unavailable", False):  # it ran, but not what it is named for
            result["error"], result["unavailable"] = str(err), True
    return result


def record_session(session: Any, feeds: Dict[str, Any], path: str) -> Dict[str, Any]:
    """Records one run with intermediates; says whether recording changed the final outputs
    (observer effect) or whether the backend cannot record at all."""
    from ..recorders.api import onnx_observer_effect as _observer_effect

    plain = session.run(feeds)
    try:
        captured = session.record(feeds, path)
    except NotImplementedError:
        return {"recorded": False, "observer_effect": None,
                "record_error": "this backend cannot expose its intermediate tensors"}
    return {"recorded": True, "observer_effect": _observer_effect(plain, captured),
            "record_error": None, "plain_outputs": plain, "captured_outputs": captured}


def _guarded(fn: Any, job: Job) -> Dict[str, Any]:
    try:
        return fn(job)
    except (Exception, SystemExit) as err:  # noqa: BLE001 - reported, the guard goes on
        return {"error": whole_message(err)}


def main(argv: List[str]) -> int:
    from .._pyexec import run_pickled_job

    job_path, out_path = argv
    return run_pickled_job(job_path, out_path, run_job)

if __name__ == "__main__":
    from .._pyexec import die_with_parent

    die_with_parent()  # a plain interpreter per job (the fork server's children do the same)
    sys.exit(main(sys.argv[1:]))
