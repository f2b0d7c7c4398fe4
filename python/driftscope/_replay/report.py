"""Text, JSON and Markdown of a `driftscope replay` (core.Replay)."""

from __future__ import annotations

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


def _lines(rep: core.Replay, md: bool) -> List[str]:
    p = (lambda s: _md(s)) if md else printable
    out: List[str] = []
    h = "## " if md else ""
    item = "- " if md else "  "
    sub = "  - " if md else "    "
    out.append(f"{'# ' if md else ''}driftscope replay: {p(rep.model)}: candidate "
               f"{p(rep.candidate)} against reference {p(rep.reference)}")
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
        out.append(f"{h}Isolation scan (every module on the reference's inputs, "
                   f"{iso.runs} candidate passes)")
        if iso.error:
            out.append(f"{item}not done: {p(iso.error)}")
        else:
            out.append(f"{item}{iso.scanned} module outputs scanned; {len(iso.introduced)} "
                       "introduce error beyond tolerance (execution order):")
            for r in iso.introduced:
                out.append(f"{sub}{p(r.name)}: own {_err(r.own)}; plain run {_err(r.plain)}")
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


def to_json(rep: core.Replay) -> str:
    return json.dumps(rep.to_json(), indent=2, allow_nan=False) + "\n"
