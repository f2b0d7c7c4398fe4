"""``compare(..., engine="ray")``: the pairs of a comparison measured as Ray tasks (docs/howto/cluster.md).

The driver lists the pairs that need measuring (``_core.compare_work``), cuts them into parts,
runs one Ray task per part on the cluster (each opens both dumps by absolute path, so every
node must see them at that path: shared storage, and measures its pairs:
``_core.compare_measure``), then assembles the parts (``_core.compare_assemble``): the same
judging, localisation and report code as a local run, so the report is the local one, bit for
bit. A task whose worker or node dies is retried by Ray (``max_retries``); a part that still
fails is an error naming it, and the assembler refuses to report with a pair missing.
Dump sets (docs/dumpsets.md) go through the library's prepare_sets / SetComparison.finish around
the same steps (_sets_on_ray): the steps of the local set compare, so again the local report.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence

from .. import _core
from .._dump import Dump, open as _open
from ..errors import Error, InvalidArgumentError
from .settings import copy, rows, settings

DEFAULT_MAX_RETRIES = 3


class RayEngineError(Error, RuntimeError):
    """The Ray engine could not produce a complete report (no cluster, a part failed)."""

    def __init__(self, message: str, code: int = 2, code_name: str = "io_error",
                 offset: Optional[int] = None) -> None:
        super().__init__(message, code, code_name, offset)


def _path(x: Any) -> str:
    return x.path if isinstance(x, Dump) else os.fspath(x)


def _measure_part(reference: str, candidate: str, settings_json: str, pairs: List[int],
                  delay_s: float) -> bytes:
    """One Ray task: the measured blob of `pairs` (compare.hpp measure_pairs). The settings come
    as the driver resolved them, the library's JSON of them (compare_options_to_json)."""
    if delay_s:
        time.sleep(delay_s)  # tests: keeps a task running while its worker is killed
    s, _ = _core.compare_options_from_json(settings_json)
    ref, cand = _open(reference), _open(candidate)
    try:
        return _core.compare_measure(ref._live(), cand._live(), s, pairs)
    finally:
        ref.close()
        cand.close()


def _connect(address: Optional[str]) -> bool:
    """Connects to the cluster unless this process already is; True when we connected."""
    try:
        import ray
    except ImportError as e:
        raise RayEngineError(f"engine 'ray' needs the ray package ({e}); pip install ray",
                             2, "io_error") from None
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS") or "auto"
    _probe(address)
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False,
                 include_dashboard=False)
    except Exception as e:  # ConnectionError, ValueError, RuntimeError: all "no cluster there"
        raise RayEngineError(f"engine 'ray': cannot connect to a Ray cluster at {address!r}: "
                             f"{type(e).__name__}: {e}".splitlines()[0], 2, "io_error") from None
    return True


def _probe(address: str, timeout_s: float = 5.0) -> None:
    """Ray retries an unreachable HOST:PORT for minutes; a refused or silent port is said at
    once instead."""
    import socket

    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto", "local": Ray finds the cluster itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise RayEngineError(f"engine 'ray': cannot connect to a Ray cluster at {address!r}: "
                             f"{e.strerror or e}", 2, "io_error") from None


def split(work: Sequence[int], parts: int) -> List[List[int]]:
    """`parts` contiguous runs of the work list, sizes differing by at most one, none empty."""
    parts = max(1, min(parts, len(work)))
    q, r = divmod(len(work), parts)
    out, pos = [], 0
    for i in range(parts):
        n = q + (i < r)
        out.append(list(work[pos:pos + n]))
        pos += n
    return out


def compare_on_ray(reference: Any, candidate: Any, s: Any, *,
                   address: Optional[str] = None, parts: Optional[int] = None,
                   scratch: Optional[Any] = None, max_retries: int = DEFAULT_MAX_RETRIES,
                   _task_delay_s: float = 0.0) -> Any:
    if parts is not None and (isinstance(parts, bool) or not isinstance(parts, int) or parts < 1):
        raise InvalidArgumentError(f"ray_parts={parts!r} is not a positive integer", 1,
                                   "invalid_argument")
    if isinstance(s, Mapping):  # compare()'s keyword arguments (api.options)
        s = settings(s)
    run = dict(address=address, parts=parts, max_retries=max_retries, delay_s=_task_delay_s)
    if any(not isinstance(x, Dump) and _core.is_dump_set_path(os.fspath(x))
           for x in (reference, candidate)):
        return _sets_on_ray(_path(reference), _path(candidate), s, scratch, run)
    return _pairs_on_ray(reference, candidate, s, **run)


def _sets_on_ray(reference: str, candidate: str, s: Any,
                 scratch: Optional[Any], run: Dict[str, Any]) -> Any:
    """Dump sets (docs/dumpsets.md): the library writes the two logical dumps into a scratch
    directory every worker sees (compare.hpp prepare_sets), the workers measure their pairs,
    and the library's finish() makes the report the sets' one: the steps of the local set
    compare, so the report is the local one. The scratch directory is removed afterwards."""
    directory = _scratch_directory(reference, candidate, scratch)
    try:
        prepared = _core.prepare_sets(reference, candidate, s, directory)
        # prepare_sets applied the filter to the stored records (SetComparison::options).
        logical = copy(s, filter="")
        report = _pairs_on_ray(prepared.reference_dump, prepared.candidate_dump, logical, **run)
        return prepared.finish(report)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _scratch_directory(reference: str, candidate: str, scratch: Optional[Any]) -> str:
    """A fresh directory inside `scratch`, else next to the candidate set (the reference set when
    only it is one): shared storage wherever the sets are. Nothing is written into a set."""
    if scratch is not None:
        parent = os.path.abspath(os.fspath(scratch))
    else:
        side = candidate if _core.is_dump_set_path(candidate) else reference
        set_dir = side if os.path.isdir(side) else os.path.dirname(os.path.abspath(side))
        parent = os.path.dirname(os.path.abspath(set_dir))
    try:
        return tempfile.mkdtemp(prefix="driftscope-ray-", dir=parent)
    except OSError as e:
        for side in (reference, candidate):  # a missing or bad set says so first
            if _core.is_dump_set_path(side):
                _core.open_set(side)
        raise RayEngineError(f"engine 'ray': cannot create a scratch directory in '{parent}': "
                             f"{e.strerror or e}; name one on storage every worker sees with "
                             f"--ray-scratch DIR", 2, "io_error") from None


def _pairs_on_ray(reference: Any, candidate: Any, s: Any, *,
                  address: Optional[str], parts: Optional[int], max_retries: int,
                  delay_s: float) -> Any:
    """The report (_core.Report) of two single dumps, their pairs measured as Ray tasks."""
    # s is checked (resolve) by compare_work below, before any task runs.
    ref_path, cand_path = _path(reference), _path(candidate)
    ref = reference if isinstance(reference, Dump) else _open(ref_path)
    cand = candidate if isinstance(candidate, Dump) else _open(cand_path)
    work = _core.compare_work(ref._live(), cand._live(), s)
    # Files named by the settings (the table's input_file rows) as absolute paths, for workers
    # elsewhere; one CPU per task, as Ray schedules it (threads never change results).
    paths = {r["name"]: os.path.abspath(getattr(s, r["name"])) for r in rows("settings")
             if r["role"] == "input_file" and getattr(s, r["name"])}
    task_settings = _core.compare_options_to_json(copy(s, threads=1, **paths))

    blobs: List[bytes] = []
    if work:
        import ray

        connected = _connect(address)
        try:
            if parts is None:
                parts = 2 * max(1, int(ray.cluster_resources().get("CPU", 1)))
            remote = ray.remote(num_cpus=1, max_retries=max_retries,
                                retry_exceptions=False)(_measure_part)
            chunks = split(work, parts)
            refs = [remote.remote(os.path.abspath(ref_path), os.path.abspath(cand_path),
                                  task_settings, chunk, delay_s) for chunk in chunks]
            for i, r in enumerate(refs):
                try:
                    blobs.append(ray.get(r))
                except Exception as e:  # RayTaskError, WorkerCrashedError, NodeDiedError...
                    for other in refs[i + 1:]:
                        ray.cancel(other, force=True)
                    cause = getattr(e, "cause", None)
                    if isinstance(cause, Error):
                        raise cause from None
                    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
                    raise RayEngineError(
                        f"engine 'ray': part {i + 1} of {len(refs)} ({len(chunks[i])} pairs) "
                        f"failed after {max_retries} retries: {type(e).__name__}: {first}; no "
                        f"report (it would be incomplete)", 2, "io_error") from None
        finally:
            if connected:
                ray.shutdown()
    try:
        return _core.compare_assemble(ref._live(), cand._live(), s, blobs)
    finally:
        for mine, given in ((ref, reference), (cand, candidate)):
            if mine is not given:
                mine.close()
