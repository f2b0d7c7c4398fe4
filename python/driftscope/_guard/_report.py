"""The guard's report: verdict, one row per backend, findings in plain words; text, Markdown and
JSON (docs/guard-schema.json)."""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from .._text import markdown_code, markdown_text, printable
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


# Names from tf2onnx graphs join every op they fuse with ';' (hundreds of characters): in text
# and Markdown a longer run without spaces shows its head and tail and a stable short form (a
# hash of the whole run, so two long names never read alike); the JSON keeps every name whole.
NAME_CHARS = 80
# Quotes end a run: a name quoted in a recipe or a sentence is shortened alone.
_LONG = re.compile(r"[^\s'\"]{%d,}" % (NAME_CHARS + 1))
_OPEN, _CLOSE = "([{", ")]},:;."


def short_name(token: str) -> str:
    """`token` when it has at most NAME_CHARS characters, else HEAD...TAIL~HASH (74 characters;
    the quotes and brackets around it are kept)."""
    if len(token) <= NAME_CHARS:
        return token
    core = token.lstrip(_OPEN)
    lead = token[:len(token) - len(core)]
    stripped = core.rstrip(_CLOSE)
    trail = core[len(stripped):]
    core = stripped
    tag = hashlib.sha1(core.encode("utf-8", "surrogatepass")).hexdigest()[:6]
    return f"{lead}{core[:32]}...{core[-32:]}~{tag}{trail}"


def shorten(text: str) -> str:
    """Every run of more than NAME_CHARS non-space characters in `text` as short_name gives it."""
    return _LONG.sub(lambda m: short_name(m.group(0)), text)


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

    def _samples_text(self) -> str:
        src, n = self.inputs_source, self.samples
        if src == "real":
            return f"{n} real sample(s)"
        if src == "mixed":
            return f"{n} sample(s) of real and synthetic inputs, seed {self.seed}"
        return f"{n} synthetic sample(s) (generated; --data judges real ones), seed {self.seed}"

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

    # -- renderings ---------------------------------------------------------------------------

    def _cells(self, b: BackendResult) -> List[str]:
        w = b.worst
        lat = "-"
        if b.latency_ms is not None:
            lat = f"{b.latency_ms:.3g} ms"
            if b.latency_ratio is not None:
                lat += f" ({b.latency_ratio:.2f}x)"
        norms = "-"
        if w is not None and w.norm_ref is not None:
            norms = f"{_fmt(w.norm_ref, '.4g')}/{_fmt(w.norm_cand, '.4g')}"
        cos = "-" if w is None or w.cosine is None else (
            "1" if w.cosine == 1.0 else _fmt(w.cosine, ".6f"))
        diff = "-" if w is None else _fmt(w.max_diff, ".3g")
        return [b.name, b.status, cos, norms, diff, lat, b.diagnostics]

    def to_text(self) -> str:
        heads = ["backend", "status", "cosine", "norm ref/cand", "max diff", "latency",
                 "diagnostics"]
        # Every cell and line holds names from the model (outputs, inputs, nodes, errors):
        # each goes through driftscope's one escaping rule, once, here.
        rows = [[shorten(printable(c)) for c in self._cells(b)] for b in self.backends]
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads[:-1])]
        lines = [printable(self.summary), "",
                 f"model      {printable(self.model)} ({self.family}); reference "
                 f"{printable(self.reference)}; "
                 f"{self._samples_text()}; latency = median of {self.runs} "
                 "runs of sample 1 (ratio to the reference)",
                 "inputs     " + "; ".join(shorten(printable(i.text())) for i in self.inputs),
                 f"thresholds min cosine {self.thresholds.min_cosine:g}, max relative error "
                 f"{self.thresholds.rel_error_limit():.3g}, norm ratio within "
                 f"{self.thresholds.max_norm_ratio:g}x, min norm "
                 f"{self.thresholds.min_norm:g}, max argmax flip "
                 f"{self.thresholds.max_argmax_flip:g}",
                 "argmax     " + printable(self.argmax_text())]
        if self.metric:
            lines.append(f"metric     {printable(self.metric)}: a backend fails when its mean "
                         f"drop over the samples exceeds {self.max_drop:g} (--max-drop); the "
                         "cosine rules no longer decide a degradation")
        lines.append("")

        def line(cells: List[str]) -> str:
            return "  ".join(c.ljust(w) for c, w in zip(cells, widths)) + "  " + cells[-1]

        lines.append(line(heads).rstrip())
        lines.extend(line(r).rstrip() for r in rows)
        lines.append("")
        lines.append("Findings")
        lines.extend(f"  - {shorten(printable(f))}" for f in self.findings)
        for b in self.backends:
            fb = b.fallback
            if fb is not None and (len(fb.candidates) > 1 or fb.stopped):
                lines += ["", f"Fallback candidates for {printable(b.name)} "
                              f"(budget used: {fb.budget_text()}):"]
                heads = fb.tradeoff_heads()
                rows = fb.tradeoff_rows()
                if not rows:  # the budget stopped a search that found no passing set
                    lines[-1] = (f"Fallback search for {printable(b.name)} (budget used: "
                                 f"{fb.budget_text()}).")
                    continue
                rows = [[shorten(printable(x)) for x in r] for r in rows]
                wid = [max(len(r[i]) for r in rows + [heads]) for i in range(len(heads))]
                lines.extend("  " + "  ".join(c.ljust(w) for c, w in zip(r, wid)).rstrip()
                             for r in [heads] + rows)
        for name, fb in self.recipes:
            state = _recipe_state(fb)
            lines += ["", f"{fb.kept_as} fallback recipe for {printable(name)} ({state}):"]
            lines.extend("    " + ln for ln in _recipe_lines(fb.printed_recipe))
        return "\n".join(lines) + "\n"

    def to_markdown(self) -> str:
        esc = markdown_text  # names from the model, escaped once for Markdown and terminals
        out = [f"### driftscope guard: {esc(self.summary)}", "",
               f"Model {markdown_code(self.model)} ({self.family}), reference "
               f"{markdown_code(self.reference)}, "
               f"{self._samples_text()}.", "",
               "| backend | status | cosine | norm ref/cand | max diff | latency | diagnostics |",
               "|---|---|---:|---:|---:|---:|---|"]
        for b in self.backends:
            c = self._cells(b)
            out.append("| " + " | ".join(esc(shorten(printable(x))) for x in c) + " |")
        out += ["", "**Findings**", ""] + [f"- {esc(shorten(printable(f)))}"
                                            for f in self.findings]
        for b in self.backends:
            fb = b.fallback
            if fb is not None and (len(fb.candidates) > 1 or fb.stopped):
                rows = fb.tradeoff_rows()
                if not rows:
                    out += ["", f"**Fallback search for {esc(b.name)}** (budget used: "
                                f"{esc(fb.budget_text())})."]
                    continue
                out += ["", f"**Fallback candidates for {esc(b.name)}** (budget used: "
                            f"{esc(fb.budget_text())}):", "",
                        "| " + " | ".join(fb.tradeoff_heads()) + " |",
                        "|---|---|" + "---:|" * (len(fb.tradeoff_heads()) - 3) + "---|"]
                out += ["| " + " | ".join(esc(shorten(printable(x))) for x in r) + " |"
                        for r in rows]
        for name, fb in self.recipes:
            state = _recipe_state(fb)
            # A fence longer than any run of backticks in the recipe (node names are the
            # model's text) cannot be closed by it (CommonMark 4.5).
            recipe = "\n".join(_recipe_lines(fb.printed_recipe))
            runs = [len(r) for r in re.findall("`+", recipe)]
            fence = "`" * max(3, max(runs, default=0) + 1)
            out += ["", f"**{esc(fb.kept_as)} fallback recipe for {esc(name)}** ({state}):", "",
                    fence + "python", recipe, fence]
        return "\n".join(out) + "\n"

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
        from .. import _core

        data = self.to_dict()
        for row, b in zip(data["backends"], self.backends):
            row["diagnostics"] = b.diagnostics
        return _core.guard_report_html(json.dumps(data, allow_nan=False))

    def __repr__(self) -> str:
        return f"<GuardReport {self.verdict} {self.model!r}: {len(self.backends)} backends>"


def _recipe_state(fb: Any) -> str:
    """"verified", or where: a float16 recipe says on which backends, and whether only where
    float16 is stored (never plain "verified" then)."""
    if not fb.verified:
        return "NOT verified"
    if not fb.names_where:
        return "verified"
    return "verified on " + fb._where() + (
        " only: storage only, arithmetic not verified" if fb.storage_only else "")


def _recipe_lines(recipe: str) -> List[str]:
    """A recipe's lines for text and Markdown, long names shortened; a first comment says so,
    for the shortened code no longer runs as printed."""
    lines = [printable(ln) for ln in recipe.rstrip("\n").splitlines()]
    short = [shorten(ln) for ln in lines]
    if short == lines:
        return lines
    return ["# long names shortened (HEAD...TAIL~HASH); the JSON report's "
            "backends[].fallback.recipe has them in full"] + short
