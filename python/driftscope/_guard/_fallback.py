"""A verified FP32 fallback for a failing precision backend (docs/howto/guard.md, "Fallback").

Search (in one child process, so a variant that crashes takes only the search down): start with
the node the probe names; while the variant fails, add the next node: the one a re-probe of the
variant names (recorded intermediates compared with the reference's), else the next node in
topological / execution order; once it passes, drop nodes one at a time (last added first) while
it still passes. Every variant build counts against the cap (--fallback-runs). Then the guard
rebuilds the final variant in a fresh process, asks the backend to prove that each kept node
really runs in float32 in the built variant (Session.float32_evidence), re-runs every sample and
times it: only a variant that passes with every node proven is "verified".
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ._job import Job
from ._metrics import PASS, OutputResult, Thresholds, by_position, judge_all

DEFAULT_FALLBACK_RUNS = 20
# Builds that fail for the same reason this many times stop the search: the next node will not
# change a failure that is not about which nodes are kept (inputs the variant cannot run, a
# converter that refuses the model), and the reason is the answer, not "the cap was reached".
SAME_FAILURE_STOP = 3


# The line before the part of a recipe that builds exactly the variant the guard built and
# loaded (OrtBackend.recipe); what comes before it (the converter's own call, alone) was never
# built, and on real models ONNX Runtime cannot load what it writes.
_BUILT_MARK = "# exactly the variant guard verified"


def _built_part(recipe: str) -> str:
    """The part of `recipe` that builds the variant the guard built, with the imports of the
    part before it that it uses."""
    lines = recipe.rstrip("\n").split("\n")
    at = next((i for i, ln in enumerate(lines) if ln.startswith(_BUILT_MARK)), None)
    if at is None:
        return recipe
    body = lines[at:]
    while body and (body[0].startswith("#") or not body[0].strip()):
        body.pop(0)
    text = "\n".join(body)
    imports = [ln for ln in lines[:at]
               if (m := re.fullmatch(r"(?:from \S+ )?import (\w+)", ln.strip()))
               and re.search(rf"\b{m.group(1)}\b", text)]
    return "\n".join(imports + body) + "\n"


@dataclass
class FallbackResult:
    backend: str
    nodes: List[Tuple[str, str]] = field(default_factory=list)  # (source name, op type)
    verified: bool = False
    status_before: str = ""
    cosine_before: Optional[float] = None
    status_after: Optional[str] = None
    cosine_after: Optional[float] = None
    evidence: Dict[str, str] = field(default_factory=dict)
    unproven: List[str] = field(default_factory=list)
    latency_ms: Optional[float] = None
    latency_change: Optional[float] = None   # fallback / failing variant - 1
    runs: int = 0
    cap: int = DEFAULT_FALLBACK_RUNS
    trail: List[Dict[str, Any]] = field(default_factory=list)
    removal_fails: Dict[str, str] = field(default_factory=dict)
    recipe: str = ""
    error: Optional[str] = None
    files: Dict[str, str] = field(default_factory=dict)
    start_note: Optional[str] = None
    # The backend the search ran on (the arithmetic one for a float16 deployment), and the
    # rebuilt variant's verdict on each backend it was checked on (check_backends): backend,
    # status, cosine, proven, computes (False: the precision's storage only), error.
    searched_on: Optional[str] = None
    checks: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def verified_on(self) -> List[str]:
        return [c["backend"] for c in self.checks
                if c["status"] == PASS and c["proven"] and not c.get("error")]

    @property
    def storage_only(self) -> bool:
        """Verified only where the precision is stored, never where it is computed."""
        return bool(self.checks) and not any(c["computes"] for c in self.checks
                                             if c["backend"] in self.verified_on)

    @property
    def names_where(self) -> bool:
        """A float16 / bfloat16 fallback says where it was verified; an INT8 one, on its row."""
        from .backends.registry import BACKENDS

        return len(self.checks) > 1 or any(
            getattr(BACKENDS.get(c["backend"]), "precision", None) for c in self.checks)

    def _where(self) -> str:
        from .backends.registry import BACKENDS

        def what(c: Dict[str, Any]) -> str:
            b = BACKENDS.get(c["backend"])
            p = getattr(b, "precision", None)
            if p is None:
                return c["backend"]
            return f"{c['backend']} ({p} {'arithmetic' if c['computes'] else 'storage only'})"

        return ", ".join(what(c) for c in self.checks if c["backend"] in self.verified_on)

    @property
    def sentence(self) -> str:
        def cos(x: Optional[float], status: Optional[str]) -> str:
            if status in ("NUMERICAL_INSTABILITY",):
                return "NaN/Inf"
            return "-" if x is None else ("1" if x == 1.0 else f"{x:.7g}")

        if self.error and not self.nodes:
            return f"{self.backend}: no FP32 fallback: {self.error}"
        from .._text import printable as shown

        names = ", ".join(f"{shown(n)}: {shown(op)}" for n, op in self.nodes[:6]) + (
            f", ... {len(self.nodes) - 6} more" if len(self.nodes) > 6 else "")
        head = (f"keeping {len(self.nodes)} node(s) in FP32 ({names})"
                + (f" ({self.start_note})" if self.start_note else ""))
        if self.status_after is None:
            return f"{self.backend}: {head}: not verified: {self.error}"
        lat = ""
        if self.latency_change is not None:
            lat = f"; latency {self.latency_change * 100:+.1f}%"
        if self.verified:
            where = "verified: every node proven float32 in the built variant"
            if self.names_where:
                where = (f"verified on {self._where()}: every node proven float32 in each "
                         "built variant")
            if self.storage_only:
                where += (" only (storage only: no backend that computes the precision "
                          "checked it, so its arithmetic is not verified)")
            return (f"{self.backend}: {head} restores cosine "
                    f"{cos(self.cosine_after, self.status_after)} (was "
                    f"{cos(self.cosine_before, self.status_before)}, {self.status_before})"
                    f"{lat}; {where}")
        if self.error:
            why = self.error
        elif self.status_after != PASS:
            why = f"the variant is {self.status_after}"
        elif self.unproven:
            why = "not proven float32 in the built variant: " + ", ".join(self.unproven)
        else:  # it passed on the row's backend, not on one that computes the precision
            why = "; ".join(f"on {c['backend']} the variant "
                            + (f"failed: {c['error']}" if c.get("error") else
                               f"is {c['status']}" if c["status"] != PASS else
                               "has nodes not proven float32")
                            for c in self.checks if c["backend"] not in self.verified_on)
        return f"{self.backend}: {head}: NOT verified ({why})"

    @property
    def loaded(self) -> bool:
        """Was the variant keeping exactly these nodes built and loaded (rebuilt and run, or a
        search build of this set ran to a verdict)?"""
        if self.status_after is not None:
            return True
        want = sorted(n for n, _ in self.nodes)
        return any(sorted(t.get("keep") or []) == want and t.get("status") != "RUNTIME_ERROR"
                   for t in self.trail)

    @property
    def printed_recipe(self) -> str:
        """The recipe of the variant the guard built and loaded ("" when this set was never
        loaded): the one the reports print."""
        if not self.recipe or not self.nodes or not self.loaded:
            return ""
        return _built_part(self.recipe)

    def evidence_text(self, node: str) -> Optional[str]:
        text = self.evidence.get(node)
        if text and "16" not in self.backend:
            # The proof reads float types; "no float16 one" says nothing of an INT8 variant.
            text = text.replace(" and no float16 one", "")
        return text

    def to_json(self) -> Dict[str, Any]:
        def num(x: Optional[float]) -> Optional[float]:
            import math

            return None if x is None or not math.isfinite(x) else float(x)

        return {"nodes": [{"node": n, "op_type": op, "evidence": self.evidence_text(n)}
                          for n, op in self.nodes],
                "verified": self.verified, "status_before": self.status_before,
                "cosine_before": num(self.cosine_before), "status_after": self.status_after,
                "cosine_after": num(self.cosine_after), "unproven": list(self.unproven),
                "latency_ms": num(self.latency_ms), "latency_change": num(self.latency_change),
                "runs": self.runs, "max_runs": self.cap,
                "removal_fails": dict(self.removal_fails), "trail": list(self.trail),
                "recipe": self.printed_recipe, "error": self.error, "files": dict(self.files),
                "start": self.start_note, "searched_on": self.searched_on,
                "verified_on": self.verified_on,
                "verification": (None if not self.verified else "storage only"
                                 if self.storage_only else "computed"),
                "checks": [{k: (num(v) if k == "cosine" else v) for k, v in c.items()}
                           for c in self.checks],
                "summary": self.sentence}


def check_backends(row: str, family: str, run: List[str]) -> Tuple[str, List[str]]:
    """(the backend to search on, the backends to verify on: `row` first) for a fallback of
    backend `row`. A float16 / bfloat16 deployment is searched on the arithmetic backend
    (ort-fp16-exact: ort-fp16's own variant with float16 computed) when `row` only stores the
    precision, and verified on `row`, on it, and on every backend of the run (`run`) that
    computes the precision and can keep nodes in float32."""
    from .backends.registry import BACKENDS, family_backends
    from .backends.fp16_arith import ARITH

    b = BACKENDS[row]
    precision = getattr(b, "precision", None)
    if precision is None:
        return row, [row]
    runs = {x.name for x in family_backends(family)}
    arith = ARITH.get(precision)
    if arith is not None and (arith.name not in runs or not arith.can_keep_float32()
                              or arith.unavailable()):
        arith = None
    verify = [row] + ([arith.name] if arith is not None and arith.name != row else [])
    for name in run:
        other = BACKENDS.get(name)
        if (other is not None and name not in verify and name in runs
                and getattr(other, "precision", None) == precision
                and getattr(other, "computes", False) and other.can_keep_float32()):
            verify.append(name)
    search = row if getattr(b, "computes", False) or arith is None else arith.name
    return search, verify


def _status(res: Optional[OutputResult]) -> Tuple[str, Optional[float]]:
    return (res.status, res.cosine) if res is not None else (PASS, None)


def search_job(job: Job) -> Dict[str, Any]:
    """In a child process: the grow-then-shrink search. Returns nodes, passed, runs, trail."""
    from .backends.registry import BACKENDS
    from ._messages import whole_message
    from .backends.ortqdq import use_row_samples
    from ._probe import compare_dumps, findings_from_report, pick_origin
    from ._ranges import range_seed_of, tried
    from ._report import reason_line
    from ._stateful import StatefulSession, step_dump

    backend = BACKENDS[job.backend]
    samples, refs = job.samples, job.ref_outputs
    # Every variant is calibrated (where its backend calibrates) on the feeds the row ran.
    use_row_samples(job.calibration or samples)
    ref_names = list(refs[0]) if refs else []
    t = Thresholds(**job.thresholds)
    order: List[str] = [n for n, _ in job.order]
    pos = {n: i for i, n in enumerate(order)}
    cap = job.cap
    trail: List[Dict[str, Any]] = []
    runs = 0
    failures: Dict[str, int] = {}  # a build's error message -> how many builds failed with it

    def attempt(keep: List[str], why: str) -> Tuple[str, Optional[float], Any]:
        nonlocal runs
        runs += 1
        work = os.path.join(job.work, f"variant{runs}")
        os.makedirs(work, exist_ok=True)
        try:
            session = backend.load(job.model, work, job.seed, keep_float32=list(keep))
            if job.state:  # a stateful model: every step, carrying the state
                session = StatefulSession(session, job.state)
            outs = [by_position(session.run(f), ref_names) for f in samples]
        except Exception as err:  # noqa: BLE001 - a variant that fails is a failing step
            message = whole_message(err)
            failures[message] = failures.get(message, 0) + 1
            trail.append({"step": why, "keep": list(keep), "status": "RUNTIME_ERROR",
                          "cosine": None, "error": message})
            return "RUNTIME_ERROR", None, None
        status, cos = _status(judge_all(refs, outs, t))
        trail.append({"step": why, "keep": list(keep), "status": status,
                      "cosine": cos if cos is None or cos == cos else None})
        return status, cos, session

    def reprobe(session: Any, keep: List[str], status: str) -> Optional[str]:
        if session is None or not job.ref_dump:
            return None
        path = os.path.join(job.work, f"reprobe{runs}.tdump")
        try:
            session.record(samples[job.probe_sample], path)
        except Exception:  # noqa: BLE001 - no recorder, or it failed: grow by order instead
            return None
        if job.probe_step is not None:  # the step the probe found the failure in
            path = step_dump(path, job.probe_step)
        report = compare_dumps(job.ref_dump, path, t, job.policy)
        names = path if job.names_from == "candidate" else job.ref_dump
        found = pick_origin(status, findings_from_report(report, names))
        if found is not None and found.node in pos and found.node not in keep:
            return found.node
        return None

    def same_failure() -> Optional[str]:
        for message, n in failures.items():
            if n >= SAME_FAILURE_STOP:
                return (f"{n} variant builds failed for the same reason, whichever nodes were "
                        f"kept: {reason_line(message)}")
        return None

    keep = list(job.origins)
    seed = range_seed_of(job, backend, order)
    grown = list(keep)  # where growing in topological order goes on from: not the seed
    keep += [n for n in seed.nodes if n not in keep]
    if not keep:
        return {"nodes": [], "passed": False, "runs": 0, "trail": [], "removal_fails": {},
                "ranges": seed.note, "why": f"no node to start from; {seed.note}"}
    step = "seed: the reference's ranges" if len(keep) > len(grown) else "grow"
    passed = False
    stopped: Optional[str] = None
    while runs < cap:
        status, cos, session = attempt(keep, step)
        step = "grow"
        if status == PASS:
            passed = True
            break
        stopped = same_failure()
        if stopped:
            break
        # A measured ranking (--sensitivity) says which node removes the most error alone: grow
        # in its order first, then as without one.
        nxt = next((n for n in job.ranking if n not in keep), None)
        if nxt is None:
            nxt = reprobe(session, keep, status)
        if nxt is None:  # the next node in topological order after the last one kept
            last = max(pos[k] for k in (grown or keep))
            rest = [n for n in order[last + 1:] if n not in keep] or [
                n for n in reversed(order[:last]) if n not in keep]
            nxt = rest[0] if rest else None
        if nxt is None:
            break
        keep.append(nxt)
        grown.append(nxt)
    if not passed:
        why = stopped or (f"the cap of {cap} variant builds was reached" if runs >= cap
                          else "no node is left to keep in float32")
        return {"nodes": keep, "passed": False, "runs": runs, "trail": trail,
                "removal_fails": {}, "ranges": seed.note,
                "why": f"{why} ({tried(trail, seed)}); {seed.note}" if seed.note else why}
    removal: Dict[str, str] = {}
    for node in list(reversed(keep)):
        if len(keep) == 1 or runs >= cap:
            break
        trial = [k for k in keep if k != node]
        status, _, _ = attempt(trial, f"shrink: without {node}")
        if status == PASS:
            keep = trial
        else:
            removal[node] = status
    return {"nodes": keep, "passed": True, "runs": runs, "trail": trail,
            "removal_fails": removal, "ranges": seed.note}
