"""A verified FP32 fallback for a failing precision backend (docs/howto/guard.md, "Fallback").

Search (in one child process, so a variant that crashes takes only the search down): start with
the node the probe names; while the variant fails, add the next node: the one a re-probe of the
variant names (recorded intermediates compared with the reference's), else the next node in
topological / execution order; once it passes, drop nodes one at a time (last added first) while
it still passes. Then the ladder (Backend.keep_precisions): the same set kept in each precision
cheaper than float32 the backend supports (ort-qdq: INT16 activations; torch-fp16: bfloat16),
cheapest first. Every variant build counts against the budget (--fallback-budget BUILDS[,SECONDS]);
when it is spent the search says what it would have built next. Then the guard rebuilds every
passing rung's variant in a fresh process, asks the backend to prove that each kept node
really runs in that precision in the built variant (Session.precision_evidence), re-runs every
sample and times it: only a variant that passes with every node proven is "verified". The
cheapest verified rung is kept; with --latency-budget PCT, the cheapest whose measured latency is
within PCT% of the failing variant's.
"""

from __future__ import annotations

import os
import re
import time
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
    # The ladder: the precision the kept nodes run in ("float32", or a rung below it), each
    # verified candidate built (precision, status, cosine, proven, verified, latency_ms,
    # latency_change, error; cheapest first), why the kept one was chosen, --latency-budget.
    precision: str = "float32"
    candidates: List[Dict[str, Any]] = field(default_factory=list)
    choice: Optional[str] = None
    latency_budget: Optional[float] = None
    # The budget (--fallback-budget): its seconds (None: builds only), the seconds the search
    # and the verification took, the verification's rebuilds, why the search stopped early and
    # what it would have built next.
    seconds_cap: Optional[float] = None
    seconds: Optional[float] = None
    verify_builds: int = 0
    stopped: Optional[str] = None
    next_try: Optional[str] = None

    @property
    def kept_as(self) -> str:
        return RUNG_LABEL.get(self.precision, self.precision)

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
        proven = "float32" if self.precision == "float32" else self.kept_as
        from .._text import printable as shown

        names = ", ".join(f"{shown(n)}: {shown(op)}" for n, op in self.nodes[:6]) + (
            f", ... {len(self.nodes) - 6} more" if len(self.nodes) > 6 else "")
        head = (f"keeping {len(self.nodes)} node(s) in {self.kept_as} ({names})"
                + (f" ({self.start_note})" if self.start_note else ""))
        if self.status_after is None:
            return f"{self.backend}: {head}: not verified: {self.error}"
        lat = ""
        if self.latency_change is not None:
            lat = f"; latency {self.latency_change * 100:+.1f}%"
        if self.verified:
            where = f"verified: every node proven {proven} in the built variant"
            if self.names_where:
                where = (f"verified on {self._where()}: every node proven {proven} in each "
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
            why = f"not proven {proven} in the built variant: " + ", ".join(self.unproven)
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
                   and t.get("precision", "float32") == self.precision for t in self.trail)

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
                "precision": self.precision,
                "candidates": [{k: (num(v) if k in ("cosine", "latency_ms", "latency_change",
                                                    "metric_drop") else v)
                                for k, v in c.items()} for c in self.candidates],
                "choice": self.choice, "latency_budget": self.latency_budget,
                "budget": {"builds": self.runs, "max_builds": self.cap,
                           "seconds": num(self.seconds), "max_seconds": self.seconds_cap,
                           "verification_builds": self.verify_builds,
                           "stopped": self.stopped, "next": self.next_try},
                "summary": self.sentence}

    @property
    def more_sentences(self) -> List[str]:
        """The ladder's choice and the budget, after the summary sentence."""
        out = []
        if self.choice:
            out.append(f"{self.backend}: {self.choice}")
        if self.stopped:
            out.append(f"{self.backend}: the fallback search stopped: {self.stopped}"
                       + (f"; it would have tried next {self.next_try}" if self.next_try
                          else ""))
        return out

    def budget_text(self) -> str:
        """builds and seconds used of the budget, one phrase."""
        sec = "" if self.seconds is None else (
            f", {self.seconds:.1f} s" + (f" of {self.seconds_cap:g} s" if self.seconds_cap
                                         else ""))
        ver = f" (+{self.verify_builds} verification)" if self.verify_builds else ""
        return f"{self.runs} of {self.cap} builds{ver}{sec}"

    def tradeoff_heads(self) -> List[str]:
        metric = any(c.get("metric_drop") is not None for c in self.candidates)
        return (["precision", "status", "cosine"] + (["metric drop"] if metric else [])
                + ["latency", "vs failing", "verdict"])

    def tradeoff_rows(self) -> List[List[str]]:
        """The candidates as table rows: precision, status, cosine, (--metric: its drop),
        latency, change, verdict."""
        metric = any(c.get("metric_drop") is not None for c in self.candidates)
        rows = []
        for c in self.candidates:
            cos = c.get("cosine")
            drop = c.get("metric_drop")
            rows.append([RUNG_LABEL.get(c["precision"], c["precision"]),
                         c.get("status") or "-",
                         "-" if cos is None else ("NaN/Inf" if cos != cos else f"{cos:.6f}")]
                        + ([("-" if drop is None else f"{drop:.4g}")] if metric else []) + [
                         "-" if c.get("latency_ms") is None else f"{c['latency_ms']:.3f} ms",
                         "-" if c.get("latency_change") is None
                         else f"{c['latency_change'] * 100:+.1f}%",
                         ("kept" if c["precision"] == self.precision and self.verified
                          else "verified" if c.get("verified") else
                          "not verified" + (f" ({c['error']})" if c.get("error") else ""))])
        return rows


# How the reports name a rung of the ladder.
RUNG_LABEL = {"float32": "FP32", "int16": "INT16 activations (A16W8)", "bfloat16": "bfloat16"}


def choose(candidates: List[Dict[str, Any]], budget: Optional[float]
           ) -> Tuple[Optional[int], Optional[str]]:
    """Which candidate (cheapest rung first) the fallback keeps, and why: the cheapest verified
    one; with a latency budget (PCT), the cheapest verified one whose measured latency is
    within PCT% of the failing variant's (a nominally cheaper precision can run slower: bfloat16
    emulated on a CPU without it), else the fastest verified one, said to be over budget."""
    ok = [i for i, c in enumerate(candidates) if c.get("verified")]
    if not ok:
        return None, None
    label = lambda i: RUNG_LABEL.get(candidates[i]["precision"], candidates[i]["precision"])  # noqa: E731

    def lat(i: int) -> str:
        ch = candidates[i].get("latency_change")
        return "latency not measured" if ch is None else f"latency {ch * 100:+.1f}%"

    if budget is None:
        if len(candidates) < 2:
            return ok[0], None
        return ok[0], (f"kept {label(ok[0])}, the cheapest verified rung of the ladder "
                       f"({lat(ok[0])})")
    within = [i for i in ok if candidates[i].get("latency_change") is not None
              and candidates[i]["latency_change"] * 100 <= budget]
    if within:
        skipped = [label(i) for i in ok if i < within[0]]
        return within[0], (f"kept {label(within[0])}, the cheapest verified rung within "
                           f"--latency-budget {budget:g}% ({lat(within[0])})"
                           + (f"; {', '.join(skipped)} measured over it" if skipped else ""))
    timed = [i for i in ok if candidates[i].get("latency_ms") is not None] or ok
    best = min(timed, key=lambda i: candidates[i].get("latency_ms") or 0.0)
    return best, (f"no verified rung is within --latency-budget {budget:g}%: kept the "
                  f"fastest, {label(best)} ({lat(best)})")


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
    began = time.monotonic()

    def spent() -> Optional[str]:
        """Why the budget allows no further build (None: it does)."""
        if runs >= cap:
            return f"the cap of {cap} variant builds was reached"
        if job.seconds is not None and time.monotonic() - began >= job.seconds:
            return (f"the budget of {job.seconds:g} s was spent "
                    f"({time.monotonic() - began:.1f} s, {runs} build(s))")
        return None

    def listed(nodes: List[str]) -> str:
        return ", ".join(nodes[:6]) + (f", ... {len(nodes) - 6} more" if len(nodes) > 6 else "")

    def done(**result: Any) -> Dict[str, Any]:
        result.setdefault("ladder", [])
        result.setdefault("next", None)
        result.setdefault("stopped", None)
        result["seconds"] = time.monotonic() - began
        return result

    def attempt(keep: List[str], why: str, precision: str = "float32"
                ) -> Tuple[str, Optional[float], Any]:
        nonlocal runs
        runs += 1
        work = os.path.join(job.work, f"variant{runs}")
        os.makedirs(work, exist_ok=True)
        try:
            session = (backend.load(job.model, work, job.seed,
                                    keep_precision={k: precision for k in keep})
                       if precision != "float32" else
                       backend.load(job.model, work, job.seed, keep_float32=list(keep)))
            if job.state:  # a stateful model: every step, carrying the state
                session = StatefulSession(session, job.state)
            outs = [by_position(session.run(f), ref_names) for f in samples]
        except Exception as err:  # noqa: BLE001 - a variant that fails is a failing step
            message = whole_message(err)
            failures[message] = failures.get(message, 0) + 1
            trail.append({"step": why, "keep": list(keep), "status": "RUNTIME_ERROR",
                          "cosine": None, "error": message, "precision": precision})
            return "RUNTIME_ERROR", None, None
        status, cos = _status(judge_all(refs, outs, t))
        trail.append({"step": why, "keep": list(keep), "status": status,
                      "cosine": cos if cos is None or cos == cos else None,
                      "precision": precision})
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
        return done(nodes=[], passed=False, runs=0, trail=[], removal_fails={},
                    ranges=seed.note, why=f"no node to start from; {seed.note}")
    step = "seed: the reference's ranges" if len(keep) > len(grown) else "grow"
    passed = False
    stopped: Optional[str] = None
    added: Optional[str] = None  # the node the next grow build adds
    while not spent():
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
        added = nxt
    if not passed:
        budget = spent()
        why = stopped or budget or "no node is left to keep in float32"
        nxt_try = (f"a build keeping {added} too ({len(keep)} node(s): {listed(keep)})"
                   if budget and not stopped and added else None)
        return done(nodes=keep, passed=False, runs=runs, trail=trail, removal_fails={},
                    ranges=seed.note, stopped=budget if not stopped else None, next=nxt_try,
                    why=f"{why} ({tried(trail, seed)}); {seed.note}" if seed.note else why)
    removal: Dict[str, str] = {}
    budget = None
    nxt_try = None
    for node in list(reversed(keep)):
        if len(keep) == 1:
            break
        budget = spent()
        if budget:
            nxt_try = f"a build without {node} (shrinking the passing set of {len(keep)})"
            break
        trial = [k for k in keep if k != node]
        status, _, _ = attempt(trial, f"shrink: without {node}")
        if status == PASS:
            keep = trial
        else:
            removal[node] = status
    # The ladder: the set found, in each precision cheaper than float32, cheapest first.
    ladder: List[Dict[str, Any]] = []
    rungs = list(job.rungs)
    for k, rung in enumerate(rungs):
        if budget is None:
            budget = spent()
        if budget:
            later = ", ".join(RUNG_LABEL.get(r, r) for r in rungs[k:])
            nxt_try = (nxt_try + ", then " if nxt_try else "") + (
                f"the {len(keep)} node(s) in {later} instead of float32")
            break
        status, cos, _ = attempt(keep, f"ladder: {rung}", rung)
        last = trail[-1]
        ladder.append({"precision": rung, "status": status, "cosine": last["cosine"],
                       "error": last.get("error")})
    return done(nodes=keep, passed=True, runs=runs, trail=trail, removal_fails=removal,
                ranges=seed.note, ladder=ladder, stopped=budget, next=nxt_try)
