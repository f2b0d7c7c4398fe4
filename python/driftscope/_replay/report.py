"""Text, JSON, Markdown and HTML of a `driftscope replay` (core.Replay).

The HTML page is the Markdown's structure as a minimal self-contained page (html.escape on the
printable text, a small inline stylesheet): the library's own page renderer (src/report, the
stylesheet of compare / check / guard pages) takes only those reports' JSON and is not exposed
for another schema."""

from __future__ import annotations

import html as _html
import json
import math
from typing import List, Optional

from .._text import markdown_text, printable
from . import core


def _pct(x: Optional[float]) -> str:
    if x is None:
        return "-"
    if not math.isfinite(x):
        return "-inf%" if x < 0 else "inf%"
    return f"{100.0 * x:.1f}%"


def _err(e: Optional[core.Error]) -> str:
    if e is None:
        return "-"
    if e.nonfinite:
        return f"{e.nonfinite} NaN/Inf ({e.status})"
    cos = "-" if e.cosine is None or math.isnan(e.cosine) else f"{e.cosine:.6f}"
    return (f"sse {e.sse:.4g}, rel {e.rel:.3g}, cosine {cos}, max|d| "
            f"{'-' if e.max_abs is None else f'{e.max_abs:.3g}'} ({e.status})")


# HTML mode: the Markdown's structure, each line tagged by its prefix (html() turns them into
# elements and escapes the whole line).
_H1, _H2, _LI, _SUB = "\x00h1 ", "\x00h2 ", "\x00li ", "\x00sub "


def _lines(rep: core.Replay, md: bool, web: bool = False) -> List[str]:
    p = (lambda s: _md(s)) if md else printable
    out: List[str] = []
    h = "## " if md else ""
    item = "- " if md else "  "
    sub = "  - " if md else "    "
    if web:
        h, item, sub = _H2, _LI, _SUB  # p stays printable: html() escapes whole lines
    out.append(f"{'# ' if md else (_H1 if web else '')}driftscope replay: {p(rep.model)}: "
               f"candidate {p(rep.candidate)}"
               + (f" running {p(rep.pairing['candidate_model'])}"
                  if getattr(rep, "pairing", None) else "")
               + f" against reference {p(rep.reference)}")
    out.append("")
    if rep.runtime_errors:
        out.append(f"{h}RUNTIME_ERROR (a part's process crashed or its runtime failed; the "
                   "other parts are below)")
        for part, why in rep.runtime_errors.items():
            out.append(f"{item}{p(part)}: RUNTIME_ERROR: {p(why)}")
        out.append("")
    out.append(f"{h}Outputs (plain candidate run)")
    for o, e in rep.plain.items():
        out.append(f"{item}{p(o)}: {_err(e)}")
    if rep.replays:
        out.append("")
        out.append(f"{h}Output replay (the reference's value put back at one tensor)")
        for r in rep.replays:
            if r.error:
                out.append(f"{item}{p(', '.join(r.at))}: cannot replay: {p(r.error)}")
                continue
            for o in r.before:
                out.append(f"{item}{p(', '.join(r.at))} -> {p(o)}: removes {_pct(r.share(o))} "
                           f"of its error (before: {_err(r.before[o])}; after: "
                           f"{_err(r.after.get(o))})")
    if rep.ops:
        out.append("")
        out.append(f"{h}Op replay (the op alone on the reference's inputs)")
        for op in rep.ops:
            if op.error:
                out.append(f"{item}{p(op.name)}: cannot replay the op: {p(op.error)}")
                continue
            out.append(f"{item}{p(op.name)}: {op.verdict} (alone: {_err(op.alone)}; in the "
                       f"plain run: {_err(op.plain)})")
    iso = rep.isolation
    if iso is not None:
        out.append("")
        how = getattr(iso, "how", "teacher forcing")
        alone = how != "teacher forcing"
        what = "node" if alone else "module"
        out.append(f"{h}Isolation scan (every {what} on the reference's inputs, "
                   f"{'one node alone per run' if alone else 'teacher forcing'}, "
                   f"{iso.runs} candidate {'runs' if alone else 'passes'})")
        if iso.error:
            out.append(f"{item}not done: {p(iso.error)}")
        else:
            out.append(f"{item}{iso.scanned} {what} outputs scanned; {len(iso.introduced)} "
                       "introduce error beyond tolerance (execution order):")
            for r in iso.introduced:
                out.append(f"{sub}{p(r.name)}: own {_err(r.own)}; plain run {_err(r.plain)}")
            left = getattr(iso, "left_out", 0)
            if alone:
                out.append(f"{item}limit: the first {iso.limit} nodes (--max-isolate); "
                           f"{left} node(s) after them not scanned")
            for why in getattr(iso, "not_alone", []):
                out.append(f"{item}cannot run alone: {p(why)}")
    att = rep.attribution
    if att is not None:
        out.append("")
        out.append(f"{h}Attribution ({len(att.origins)} origin(s) from {att.source}, "
                   f"{att.runs} candidate runs)")
        if att.cut:
            out.append(f"{item}--max-replays cut {len(att.cut)} origin(s), not replayed: "
                       f"{p(', '.join(att.cut))}")
        if att.error:
            out.append(f"{item}not done: {p(att.error)}")
        for o in att.shares:
            ranked = att.ranked(o)
            parts = [f"{p(k)} {_pct(att.shares[o][k])}" for k in ranked]
            out.append(f"{item}{p(o)}: " + "; ".join(parts) +
                       f"; all together {_pct(att.together.get(o))}; unexplained "
                       f"{_pct(att.remainder(o))}")
            add = att.additive(o)
            if add is not None:
                total = sum(v for v in att.shares[o].values() if v is not None)
                out.append(f"{sub}shares + unexplained = {_pct(total + att.remainder(o))} "
                           f"({'additive' if add else 'not additive: the origins interact'}, "
                           f"tolerance {100 * 0.05:.0f}%)")
    if rep.notes or rep.errors:
        out.append("")
        out.append(f"{h}Notes")
        for n in rep.notes + rep.errors:
            out.append(f"{item}{p(n)}")
    out.append(f"{item}{rep.runs + (att.runs if att else 0) + (iso.runs if iso else 0)} "
               "candidate runs in all")
    return out


def _md(s: str) -> str:
    return markdown_text(s)


def text(rep: core.Replay) -> str:
    return "\n".join(_lines(rep, False)) + "\n"


def markdown(rep: core.Replay) -> str:
    return "\n".join(_lines(rep, True)) + "\n"


_CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:70em;padding:0 1em;
color:#1a1a1a;line-height:1.45}h1{font-size:1.3em}h2{font-size:1.1em;margin-top:1.5em;
border-bottom:1px solid #ccc}p{margin:.2em 0}.li{margin-left:1em}.sub{margin-left:3em;
color:#333}.rt{color:#b00020}"""


def html(rep: core.Replay) -> str:
    """A self-contained page (no script, no external resource)."""
    body: List[str] = []
    for line in _lines(rep, False, web=True):
        if not line:
            continue
        for tag, el in ((_H1, "h1"), (_H2, "h2"), (_LI, "p class=\"li\""),
                        (_SUB, "p class=\"sub\"")):
            if line.startswith(tag):
                body.append(f"<{el}>{_html.escape(line[len(tag):])}</{el.split()[0]}>")
                break
        else:
            body.append(f"<p>{_html.escape(line)}</p>")
    title = _html.escape(printable(f"driftscope replay: {rep.model}"))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{title}</title><style>{_CSS}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def to_json(rep: core.Replay) -> str:
    return json.dumps(rep.to_json(), indent=2, allow_nan=False) + "\n"
