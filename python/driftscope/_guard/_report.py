"""The guard's report: verdict, one row per backend, findings in plain words. This module assembles
the report's model, the JSON report (docs/guard-schema.json) with each row's diagnostics and what
the tables show beyond it; the library renders it as text, Markdown and HTML
(src/report/guard_text.cpp, guard_html.cpp), as it renders the compare and check reports."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from .. import _core
from .._text import printable
from ._inputs import InputInfo
from ._metrics import (DEGRADED, PASS, REFERENCE, RUNTIME_ERROR, SEVERITY, SILENT, UNAVAILABLE,
                       OutputResult, Thresholds)

SCHEMA = "driftscope.guard.report/1"

EXIT_CODES = {"pass": 0, "degraded": 1, "incomplete": 2, "silent_failure": 3}
_HEADLINE = {"pass": "PASS", "degraded": "DEGRADED", "incomplete": "INCOMPLETE",
             "silent_failure": "SILENT FAILURE"}


# Lines of a runtime's message that say where, not why: OpenVINO's "Exception from
# src/inference/src/cpp/core.cpp:84:", "Check '...' failed at ..." and "While validating node
# '...':", IREE's closing hint, Python's traceback frames.
_WHERE_NOT_WHY = re.compile(
    r"^(Exception from \S+:\d+:?|Check '.*' failed at \S+.*|While validating .*:"
    r"|Need more information\?.*"
    r"|.*IREE_SAVE_TEMPS.*|Traceback \(most recent call last\):|File \".*\", line \d+.*|[\^~ ]+)$")
_WHERE_INLINE = re.compile(r"Exception from \S+:\d+:\s*")
REASON_CHARS = 300
# Python's and TorchScript's tracebacks: this header, then frames (indented File, source and
# marker lines), then the unindented line that states the exception. A TorchScript error opens
# with a sentence that names the interpreter, not the cause; chained exceptions join their
# tracebacks with one of two sentences.
_TRACEBACK = re.compile(r"^([\w.]+: )?Traceback (\(most recent call last\)|of TorchScript\b.*"
                        r"\(most recent call last\)):$")
_BOILERPLATE = re.compile(
    r"^(\w+: )?(The following operation failed in the TorchScript interpreter\."
    r"|The above exception was the direct cause of the following exception:"
    r"|During handling of the above exception, another exception occurred:)$")


def _after_traceback(lines: List[str]) -> Optional[List[str]]:
    """The lines after the frames of the message's last traceback (the exception it ends with),
    or None when the message holds no traceback or ends inside one."""
    heads = [i for i, ln in enumerate(lines) if _TRACEBACK.match(ln.strip())]
    if not heads:
        return None
    k = heads[-1] + 1
    while k < len(lines) and (not lines[k].strip() or lines[k][:1].isspace()):
        k += 1
    rest = [ln for ln in lines[k:] if ln.strip() and not _BOILERPLATE.match(ln.strip())]
    return rest or None


def reason_line(message: str) -> str:
    """The text report's one line for a runtime's message: when it holds a Python or
    TorchScript traceback, the lines after the last one's frames (the exception that states the
    cause); else its lines that say why (where-lines dropped), from the first compiler-style
    "error: " line when there is one (after the message's first line). Whitespace collapsed, at
    most REASON_CHARS characters. The JSON report keeps the whole message."""
    raw = message.splitlines()
    raw = _after_traceback(raw) or raw
    lines = [_WHERE_INLINE.sub("", ln).strip() for ln in raw]
    lines = [ln for ln in lines if ln]
    why = [ln for ln in lines if not (_WHERE_NOT_WHY.match(ln) or _BOILERPLATE.match(ln))
           ] or lines or [message.strip()]
    start = next((i for i, ln in enumerate(why) if i and re.search(r"\berror: ", ln)), 0)
    text = " ".join(" ".join(why[:1] + (["..."] if start > 1 else []) + why[max(start, 1):])
                    .split())
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 3].rstrip() + "..."


def _task_json(task: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    if not task:
        return None

    def num(x: Any) -> Any:
        return None if isinstance(x, float) and not math.isfinite(x) else x

    return {k: ([num(v) for v in val] if isinstance(val, list) else num(val))
            for k, val in task.items()}


def repro_sentence(backend: str, r: Dict[str, Any]) -> str:
    """The finding for a row's --repro bundle (_reproing.py)."""
    if r.get("error"):
        return f"{backend}: no repro bundle: {r['error'].rstrip('.')}."
    how = ("it reproduces (run.py exits 1)" if r["reproduces"] else
           "it does NOT reproduce: no subgraph of at most 16 nodes shows the error on its own "
           "(the largest tried is written, marked so)")
    return (f"{backend}: repro bundle of {r['nodes']} node(s) around {printable(r['at'])} in "
            f"{printable(r['dir'])}: {how}.")


def sensitivity_sentence(name: str, s: Dict[str, Any]) -> str:
    """The finding for a row's --sensitivity ranking (_sensitivity.py)."""
    if s.get("error"):
        return f"{name} sensitivity: not measured: {s['error']}."
    top = [r for r in s["nodes"] if r["share"] is not None][:5]
    parts = ", ".join(f"{r['node']} ({r['op']}) {100 * r['share']:.0f}%" for r in top)
    cut = (f"; {s['cut']} more node(s) not ranked (--sensitivity caps the builds)"
           if s["cut"] else "")
    return (f"{name} sensitivity on {s['on']} (each node alone kept in float32, {s['builds']} "
            f"builds): share of the error each removes: {parts or 'none measured'}{cut}.")


def _sensitivity_json(s: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    if not s:
        return None
    return {k: v for k, v in s.items() if k != "ranked"}


@dataclass
class BackendResult:
    """One backend's row. ``status`` is its worst output over every sample (``REFERENCE`` for
    the reference); ``outputs`` holds each output's worst sample."""

    name: str
    summary: str
    note: str
    status: str
    required: bool = False
    reference: bool = False
    reason: Optional[str] = None           # UNAVAILABLE: why
    error: Optional[str] = None            # RUNTIME_ERROR: what the backend said
    signal: Optional[str] = None           # RUNTIME_ERROR: the signal that killed it
    notes: List[str] = field(default_factory=list)
    outputs: List[OutputResult] = field(default_factory=list)
    worst: Optional[OutputResult] = None
    load_s: Optional[float] = None
    latency_ms: Optional[float] = None
    latency_ratio: Optional[float] = None
    runs: int = 0
    probe: Optional[Any] = None            # _probe.ProbeResult when probed
    fallback: Optional[Any] = None         # _fallback.FallbackResult when searched
    task: Optional[Dict[str, Any]] = None  # --metric: reference, candidate, drop, spread, ...
    search: Optional[Dict[str, Any]] = None  # --search-inputs: evaluations, start, found, file
    sensitivity: Optional[Dict[str, Any]] = None  # --sensitivity: nodes ranked by own effect
    repro: Optional[Dict[str, Any]] = None  # --repro: dir, reproduces, nodes, error (_reproing)

    def search_sentence(self) -> str:
        """What --search-inputs found for this row, one sentence ('' when it did not run)."""
        s = self.search
        if not s:
            return ""
        if s.get("error"):
            return f"{self.name}: the input search failed: {s['error']}."

        def d(x: float) -> str:
            return "NaN/Inf" if not math.isfinite(x) else f"{x:.3g}"

        return (f"{self.name}: searching {s['evaluations']} inputs raised the {s['measure']} "
                f"from {d(s['start'])} (the guard's samples) to {d(s['found'])}, "
                f"{s['status'] or 'not judged'} on that input; it is {s['file']} "
                f"(sample {s['sample'] + 1}; --data {s['file']} runs it again).")

    def task_text(self) -> str:
        """The task metric's cell: 'top1 1 -> 0.875, drop 0.125 +- 0.217 > 0.01'."""
        t = self.task
        if not t:
            return ""
        if self.reference:
            return f"{t['metric']} {t['reference']:.4g} (reference, {t['samples']} samples)"
        rel = ">" if t["drop"] > t["max_drop"] else "<="
        spread = "" if not math.isfinite(t["spread"]) else f" +- {t['spread']:.3g}"
        return (f"{t['metric']} {t['reference']:.4g} -> {t['candidate']:.4g}, drop "
                f"{t['drop']:.3g}{spread} {rel} {t['max_drop']:g}")

    @property
    def diagnostics(self) -> str:
        parts: List[str] = []
        if self.task and self.status != UNAVAILABLE:
            parts.append("task metric " + self.task_text())
        if self.status == UNAVAILABLE:
            parts.append(self.reason or "")
        elif self.error:
            parts.append(reason_line(self.error))
        elif self.worst is not None and self.worst.detail and self.status != REFERENCE:
            w = self.worst
            where = f"{w.name}" + (f", sample {w.sample + 1}" if w.sample else "")
            parts.append(f"{where}: {w.detail}")
        parts.extend(self.notes)
        if self.note:
            parts.append(self.note)
        return "; ".join(p for p in parts if p)

    def to_json(self) -> Dict[str, Any]:
        def num(x: Optional[float]) -> Optional[float]:
            return None if x is None or not math.isfinite(x) else float(x)

        return {"name": self.name, "status": self.status, "reference": self.reference,
                "required": self.required, "summary": self.summary, "note": self.note,
                "available": self.status != UNAVAILABLE, "reason": self.reason,
                "error": self.error, "signal": self.signal, "notes": list(self.notes),
                "load_s": num(self.load_s),
                "latency_ms": {"median": num(self.latency_ms), "runs": self.runs,
                               "ratio_to_reference": num(self.latency_ratio)},
                "worst_output": self.worst.name if self.worst else None,
                "outputs": [o.to_json() for o in self.outputs],
                "probe": self.probe.to_json() if self.probe is not None else None,
                "fallback": self.fallback.to_json() if self.fallback is not None else None,
                "task_metric": _task_json(self.task),
                "search": _task_json(self.search),
                "sensitivity": _sensitivity_json(self.sensitivity),
                "repro": self.repro}


def _fmt(x: Optional[float], spec: str) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    return format(x, spec)


class GuardReport:
    """What :func:`driftscope.guard` found.

    verdict: "pass", "degraded", "silent_failure" or "incomplete" (a --require'd backend is
    unavailable); exit_code: 0, 1, 3, 2 as the command. backends: one BackendResult per
    backend, the reference first. findings: plain sentences. to_json() / to_text() /
    to_markdown() / to_html()."""

    def __init__(self, *, model: str, family: str, reference: str,
                 backends: List[BackendResult], inputs: List[InputInfo], samples: int, seed: int,
                 runs: int, thresholds: Thresholds, required: List[str],
                 reference_nonfinite: Dict[str, int], probe: str = "never",
                 fallback: str = "never", out: Optional[str] = None,
                 output_names: Sequence[str] = (), metric: Optional[str] = None,
                 max_drop: Optional[float] = None) -> None:
        self.metric, self.max_drop = metric, max_drop
        self.model, self.family, self.reference = model, family, reference
        self.output_names = list(output_names)  # the reference's, for the argmax line
        self.backends, self.inputs = backends, inputs
        self.samples, self.seed, self.runs = samples, seed, runs
        self.thresholds, self.required = thresholds, required
        self.reference_nonfinite = reference_nonfinite
        self.probe, self.fallback, self.out = probe, fallback, out

    def argmax_text(self) -> str:
        """Where an argmax flip is judged: over which axis of which output (guard.md §5)."""
        from ._classaxis import TORCH_RULE, torch_class_axis

        axes = self.thresholds.class_axes
        if axes is None or (TORCH_RULE in axes and "*" not in axes):
            axes = {n: a for n, a in (axes or {}).items() if n != TORCH_RULE}
            for n in self.output_names:  # the PyTorch rule: -1 (last axis) or None
                if n not in axes:
                    axes[n] = None if torch_class_axis(n, 1) is None else -1
            named = [n for n in self.output_names if axes.get(n) is None]
            over = [n if axes[n] == -1 else f"{n} (axis {axes[n]})"
                    for n in self.output_names if axes.get(n) is not None]
            parts = [("over the last axis of " + ", ".join(over)) if len(over) < len(
                self.output_names) or any("(axis" in o for o in over)
                else "over the last axis of every output"] if over else []
            if named:
                parts.append("not applied to " + ", ".join(named) + " (named outputs other "
                             "than logits/scores/probabilities/classes; --class-axis names one)")
            return "; ".join(parts) or "not applied"
        every = axes.get("*")
        over = [f"{n} (axis {axes.get(n, every)})" for n in self.output_names
                if axes.get(n, every) is not None]
        over += [f"{n} (axis {a})" for n, a in axes.items()
                 if n != "*" and n not in self.output_names]
        skipped = [n for n in self.output_names if axes.get(n, every) is None]
        parts = ["over " + ", ".join(over)] if over else []
        if skipped:
            parts.append("not applied to " + ", ".join(skipped) +
                         " (no class axis: no softmax or logits producer; --class-axis names one)")
        return "; ".join(parts) or "not applied (no class axis; --class-axis names one)"

    def __getitem__(self, name: str) -> BackendResult:
        for b in self.backends:
            if b.name == name:
                return b
        raise KeyError(name)

    @property
    def verdict(self) -> str:
        if any(b.required and b.status == UNAVAILABLE for b in self.backends):
            return "incomplete"
        if any(b.status in SILENT for b in self.backends):
            return "silent_failure"
        if any(b.status in DEGRADED for b in self.backends):
            return "degraded"
        return "pass"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    @property
    def inputs_source(self) -> str:
        """Where the values judged came from: "synthetic" (generated from the signature: a
        verdict reached on them alone may not hold on real data), "real" (every input from
        --data, --input or the entry point's own example) or "mixed"."""
        from ._inputs import REAL

        made = [i for i in self.inputs if i.value is None]
        real = [i.how.startswith((REAL, "given", "the entry point")) for i in made]
        if not made or all(real):
            return "real" if made else "synthetic"
        return "mixed" if any(real) else "synthetic"

    @property
    def summary(self) -> str:
        """The first line of the text report."""
        rows = [b for b in self.backends if not b.reference]
        counts: Dict[str, int] = {}
        for b in rows:
            counts[b.status] = counts.get(b.status, 0) + 1
        worst = sorted((b for b in rows if b.status not in (PASS, UNAVAILABLE)),
                       key=lambda b: -SEVERITY[b.status])
        head = _HEADLINE[self.verdict]
        if self.verdict == "incomplete":
            missing = [b.name for b in rows if b.required and b.status == UNAVAILABLE]
            text = f"{head}: required backend(s) unavailable: {', '.join(missing)}"
        elif worst:
            text = f"{head}: " + ", ".join(f"{b.name} {b.status}" for b in worst[:4])
            if len(worst) > 4:
                text += f" and {len(worst) - 4} more"
        else:
            text = f"{head}: every available backend matches {self.reference}"
        tally = ", ".join(f"{n} {s.lower().replace('_', ' ')}" for s, n in
                          sorted(counts.items(), key=lambda kv: -SEVERITY[kv[0]]))
        return f"{text} ({tally}; reference {self.reference})" if tally else text

    @property
    def findings(self) -> List[str]:
        out: List[str] = []
        ref = self.reference
        for name, n in self.reference_nonfinite.items():
            out.append(f"The reference {ref} itself has {n} NaN/Inf values in output '{name}'; "
                       "those positions are left out of every comparison.")
        for b in self.backends:
            if b.reference:
                continue
            w = b.worst
            where = (f"output '{w.name}'" + (f" (sample {w.sample + 1})" if w and w.sample else "")
                     if w else "")
            if b.status == UNAVAILABLE:
                req = " It is required, so the guard is incomplete." if b.required else ""
                out.append(f"{b.name} was not checked: {b.reason}.{req}")
            elif b.task and b.status in (PASS, "PRECISION_DEGRADATION"):
                t = b.task
                worst = max(range(len(t["per_sample"])), key=lambda k: t["per_sample"][k])
                verdict = ("loses more than --max-drop" if b.status != PASS
                           else "stays within --max-drop")
                cos = (f"; worst cosine {_fmt(w.cosine, '.6f')}" if w is not None
                       and w.cosine is not None else "")
                out.append(f"{b.name} {verdict} of the task metric {t['metric']}: "
                           f"{b.task_text()} over {t['samples']} sample(s), the worst sample "
                           f"{worst + 1}{cos}.")
            elif b.status == RUNTIME_ERROR:
                if b.signal:
                    out.append(f"{b.name} crashed ({b.signal}); the other backends ran on.")
                elif b.error:
                    out.append(f"{b.name} failed: {reason_line(b.error)}")
                elif w is not None:
                    out.append(f"{b.name}: {where}: {w.detail}.")
            elif b.status == PASS:
                if w is not None:
                    out.append(f"{b.name} matches {ref}: worst cosine {_fmt(w.cosine, '.6f')}, "
                               f"max |difference| {_fmt(w.max_diff, '.3g')}.")
            elif w is not None:
                plain = {
                    "NUMERICAL_INSTABILITY": "produces NaN/Inf where the reference is finite",
                    "SILENT_ZERO_VECTOR": "returns a vanished (all-zero) output while the "
                                          "reference's is healthy",
                    "CONSTANT_OUTPUT": "returns one constant value where the reference varies",
                    "PRECISION_DEGRADATION": "drifts from the reference beyond --min-cosine",
                    "ARGMAX_FLIP": "changes the top-1 class at some positions",
                }[b.status]
                out.append(f"{b.name} {plain} ({b.status}) on {where}: {w.detail}.")
            if b.note and b.status != UNAVAILABLE:
                out.append(f"{b.name} exercises {b.note}.")
            if b.search:
                out.append(b.search_sentence())
            if b.probe is not None:
                out.extend(b.probe.sentences(b.name))
            if b.sensitivity:
                out.append(sensitivity_sentence(b.name, b.sensitivity))
            if b.fallback is not None:
                out.append(b.fallback.sentence + ".")
                out.extend(x + "." for x in b.fallback.more_sentences)
            if b.repro is not None:
                out.append(repro_sentence(b.name, b.repro))
        return out + self._unbuilt()

    @property
    def recipes(self) -> List[Any]:
        """(backend, FallbackResult) of every fallback that found a set, verified or not, whose
        variant was built and loaded (its recipe: FallbackResult.printed_recipe)."""
        return [(b.name, b.fallback) for b in self.backends
                if b.fallback is not None and b.fallback.printed_recipe]

    def _unbuilt(self) -> List[str]:
        """A sentence per fallback whose set has a recipe that was never built and loaded."""
        out = []
        for b in self.backends:
            fb = b.fallback
            if fb is None or not fb.recipe or not fb.nodes or fb.printed_recipe:
                continue
            want = sorted(n for n, _ in fb.nodes)
            errors = [t.get("error") for t in fb.trail
                      if sorted(t.get("keep") or []) == want and t.get("error")]
            why = (f": {reason_line(errors[-1]).rstrip('.')}" if errors else
                   f" ({fb.error})" if fb.error else "")
            out.append(f"No FP32 fallback recipe for {b.name}: the variant keeping its "
                       f"{len(fb.nodes)} node(s) was never built and loaded{why}.")
        return out

    def _model(self) -> str:
        """The model the library renders (include/driftscope/report.hpp): the JSON report, each
        row's diagnostics, and "render", what the text and Markdown reports show beyond the JSON
        report (non-finite numbers, which it writes as null; the fallback's tradeoff table)."""
        data = self.to_dict()
        for row, b in zip(data["backends"], self.backends):
            row["diagnostics"] = b.diagnostics
        data["render"] = {"argmax": self.argmax_text(),
                          "rows": [_render_row(b) for b in self.backends]}
        return json.dumps(_spelled(data), allow_nan=False)

    def to_text(self) -> str:
        return _core.guard_report_text(self._model())

    def to_markdown(self) -> str:
        return _core.guard_report_markdown(self._model())

    def to_dict(self) -> Dict[str, Any]:
        return {"schema": SCHEMA, "model": self.model, "family": self.family,
                "reference": self.reference, "verdict": self.verdict,
                "exit_code": self.exit_code, "summary": self.summary,
                "samples": self.samples, "seed": self.seed, "runs": self.runs,
                "inputs_source": self.inputs_source,
                "metric": ({"name": self.metric, "max_drop": self.max_drop}
                           if self.metric else None),
                "thresholds": self.thresholds.to_json(), "required": list(self.required),
                "inputs": [i.to_json() for i in self.inputs],
                "backends": [b.to_json() for b in self.backends],
                "probe": self.probe, "fallback": self.fallback, "out": self.out,
                "findings": self.findings}

    def to_json(self, indent: Optional[int] = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False) + "\n"

    def to_html(self) -> str:
        """The self-contained offline page ``driftscope guard --html`` writes, rendered by the
        library like the compare and check pages (one stylesheet, one escaping)."""
        return _core.guard_report_html(self._model())

    def __repr__(self) -> str:
        return f"<GuardReport {self.verdict} {self.model!r}: {len(self.backends)} backends>"


def _shown(x: Optional[float]) -> Any:
    """A number of the tables: the non-finite values the JSON report writes as null, as text."""
    if x is None:
        return None
    x = float(x)
    if math.isnan(x):
        return "nan"
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")


def _render_row(b: BackendResult) -> Dict[str, Any]:
    """A row's "render" entry (include/driftscope/report.hpp)."""
    w, fb = b.worst, b.fallback
    out: Dict[str, Any] = {
        "worst": None if w is None else {k: _shown(getattr(w, k)) for k in
                                         ("cosine", "norm_ref", "norm_cand", "max_diff")},
        "latency_ms": _shown(b.latency_ms), "latency_ratio": _shown(b.latency_ratio),
        "fallback": None}
    if fb is not None:
        table = len(fb.candidates) > 1 or fb.stopped
        out["fallback"] = {
            "heads": fb.tradeoff_heads() if table else [],
            "rows": fb.tradeoff_rows() if table else [], "budget": fb.budget_text(),
            "kept_as": fb.kept_as,
            # a float16 recipe says where it was verified (the registry knows which backends
            # compute the precision)
            "where": fb._where() if fb.verified and fb.names_where else None}
    return out


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _spelled(obj: Any) -> Any:
    """`obj` with every lone surrogate (a byte that was not UTF-8, surrogate-escaped) spelt as
    printable() spells it: JSON text carries no such string, and every text the renderers show
    goes through printable(), which leaves the spelling as it is."""
    if isinstance(obj, str):
        return _SURROGATE.sub(lambda m: printable(m.group(0)), obj)
    if isinstance(obj, dict):
        return {_spelled(k): _spelled(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_spelled(v) for v in obj]
    return obj
