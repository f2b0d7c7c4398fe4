"""The growth chart of two generations (issue 31 item 3; docs/howto/llm.md "Heatmap"): how a
difference grows over the steps and layers of a decoder, as one self-contained HTML page that
``driftscope llm-compare --html FILE`` writes (no script, no style sheet or font fetched: it opens
offline).

Rows are the decoder layers (the output of ``layers.N`` / ``h.N`` / ``blk.N``: the residual
stream after that layer), then the logits; columns are the steps; a cell is the relative error
||cand - ref||_2 / ||ref||_2 of that layer's output at that step, in float64, on a log colour
scale. A recorder that keeps no layer outputs (hf-compile: logits and cache only) gives rows of
the cache keys that layer wrote at that step. The first flipped step's column and the cell of the
first tensor beyond tolerance (the report's first_crossing, and the flip_layer at the flip) are
marked.
"""

from __future__ import annotations

import html
import math
import os
import re
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

_LAYER_OUT = re.compile(r"^step\.(\d+)/((?:.*\.)?(?:layers|h|blk|blocks|block)\.(\d+))(\.0)?$")
_CACHE_KEY = re.compile(r"^step\.(\d+)/cache\.layers\.(\d+)\.key$")
_LAYER_IN = re.compile(r"(?:^|[./])(?:layers|h|blk|blocks|block)\.(\d+)(?:$|[./])")


def _rel(a: np.ndarray, b: np.ndarray) -> Optional[float]:
    if a.shape != b.shape:
        return None
    a = a.astype(np.float64, copy=False)
    b = b.astype(np.float64, copy=False)
    na = float(np.linalg.norm(a))
    d = float(np.linalg.norm(b - a))
    if na == 0.0:
        return 0.0 if d == 0.0 else math.inf
    return d / na


def growth(reference: str, candidate: str, steps: int) -> Dict[str, Any]:
    """{"rows": [label...], "layers": [layer index or None...], "source": "layer outputs" |
    "cache keys", "cells": rows x steps of relative errors (None: a tensor one run lacks)}."""
    import driftscope

    with driftscope.open(reference) as r, driftscope.open(candidate) as c:
        rnames, cnames = set(r.names()), set(c.names())
        common = rnames & cnames
        found: Dict[int, Dict[int, str]] = {}  # layer -> step -> name
        source = "layer outputs"
        for name in common:
            m = _LAYER_OUT.match(name)
            if m and int(m.group(1)) < steps:
                # a tuple output's first tensor (.0) only when the module has no plain one
                if m.group(4) and f"step.{m.group(1)}/{m.group(2)}" in common:
                    continue
                found.setdefault(int(m.group(3)), {})[int(m.group(1))] = name
        if not found:
            source = "cache keys"
            for name in common:
                m = _CACHE_KEY.match(name)
                if m and int(m.group(1)) < steps:
                    found.setdefault(int(m.group(2)), {})[int(m.group(1))] = name
        labels: List[str] = []
        layers: List[Optional[int]] = []
        cells: List[List[Optional[float]]] = []
        for layer in sorted(found):
            by_step = found[layer]
            sample = next(iter(by_step.values()))
            labels.append(sample.partition("/")[2])
            layers.append(layer)
            cells.append([_rel(np.asarray(r.get(by_step[k], dtype="float64")),
                               np.asarray(c.get(by_step[k], dtype="float64")))
                          if k in by_step else None for k in range(steps)])
        labels.append("logits")
        layers.append(None)
        cells.append([_rel(np.asarray(r.get(f"step.{k}/logits", dtype="float64")),
                           np.asarray(c.get(f"step.{k}/logits", dtype="float64")))
                      if f"step.{k}/logits" in common else None for k in range(steps)])
    return {"rows": labels, "layers": layers, "source": source, "cells": cells}


def _colour(v: Optional[float], lo: float, hi: float) -> str:
    if v is None:
        return "#eeeeee"
    if v == 0.0:
        return "#ffffff"
    if not math.isfinite(v):
        return "#000000"
    t = 0.0 if hi <= lo else (math.log10(max(v, lo)) - math.log10(lo)) / (
        math.log10(hi) - math.log10(lo))
    t = min(max(t, 0.0), 1.0)
    # white-yellow to dark red
    r = int(255 - 120 * t)
    g = int(245 - 225 * t)
    b = int(200 - 180 * t)
    return f"#{r:02x}{g:02x}{b:02x}"


def _layer_of(name: Optional[str]) -> Optional[int]:
    m = _LAYER_IN.search(name or "")
    return int(m.group(1)) if m else None


def _marks(data: Dict[str, Any]) -> List[Tuple[Optional[int], Optional[int], str, str]]:
    """(layer, step, name, what) of the first tensor beyond tolerance and the flip's layer."""
    out = []
    fc = data.get("first_crossing")
    if fc:
        out.append((_layer_of(fc.get("name")), fc.get("step"), str(fc.get("name")),
                    "first tensor beyond tolerance"))
    fl = data.get("flip_layer")
    if fl and data.get("first_flip") is not None:
        out.append((_layer_of(fl.get("name")), data["first_flip"], str(fl.get("name")),
                    f"first tensor beyond tolerance at the flipped step {data['first_flip']}"))
    return out


def to_html(report: Any) -> str:
    """The page for a GenerationReport (driftscope.llm.compare)."""
    d = report.data
    steps = d["compared_steps"]
    g = growth(d["reference"], d["candidate"], steps)
    vals = [v for row in g["cells"] for v in row if v is not None and v > 0 and math.isfinite(v)]
    lo, hi = (min(vals), max(vals)) if vals else (1.0, 1.0)
    flip = d.get("first_flip")
    marks = _marks(d)
    marked = {}
    for layer, step, name, what in marks:
        if step is None:
            continue
        row = (g["layers"].index(layer) if layer in g["layers"] else
               len(g["rows"]) - 1 if name.endswith("/logits") else None)
        if row is not None:
            marked.setdefault((row, step), []).append(f"{what}: {name}")
    e = html.escape
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>driftscope llm-compare: {e(os.path.basename(d['reference']))} vs "
           f"{e(os.path.basename(d['candidate']))}</title>",
           "<style>body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}"
           "table{border-collapse:collapse}td,th{padding:3px 6px;text-align:right}"
           "table.heatmap td{min-width:2.6em;border:1px solid #fff;font-size:11px}"
           "table.heatmap th.flip{background:#c00;color:#fff}"
           "table.heatmap td.flip{border-left:2px solid #c00;border-right:2px solid #c00}"
           "table.heatmap td.first-fail{outline:3px solid #00f;outline-offset:-3px;"
           "font-weight:bold}th.row{text-align:left;font-family:monospace}"
           "table.steps td,table.steps th{border-bottom:1px solid #ddd}"
           ".legend span{display:inline-block;width:2em;height:1em}</style></head><body>",
           f"<h1>Generation compare: <code>{e(d['reference'])}</code> vs "
           f"<code>{e(d['candidate'])}</code></h1>",
           f'<p id="verdict" data-verdict="{e(d["verdict"])}">Verdict: <b>{e(d["verdict"])}'
           f"</b>; {steps} steps compared (reference {d['reference_steps']}, candidate "
           f"{d['candidate_steps']}); teacher-forced: {d['teacher_forced']}; backends "
           f"{e(str(d.get('reference_backend')))} vs {e(str(d.get('candidate_backend')))}.</p>"]
    out.append('<p id="first-flip" data-step="%s">First flipped token: %s</p>' % (
        "" if flip is None else flip,
        "none" if flip is None else
        f"step {flip} (reference {d['steps'][flip]['ref_token']}, candidate "
        f"{d['steps'][flip]['cand_token']})"))
    for layer, step, name, what in marks:
        out.append(f'<p class="mark" data-layer="{"" if layer is None else layer}" '
                   f'data-step="{"" if step is None else step}">{e(what)}: <code>{e(name)}'
                   f"</code>" + ("" if layer is not None or name.endswith("/logits") else
                                 " (not a decoder layer: no row of the chart)") + "</p>")
    if d.get("unmatched"):
        out.append(f"<p>Not compared: {e(d['unmatched'])}</p>")
    out.append(f"<h2>Growth over steps and layers</h2><p>Rows: the decoder layers' "
               f"{e(g['source'])} (the residual stream after each layer), then the logits; "
               f"columns: steps; a cell: the relative error ||cand - ref|| / ||ref|| of that "
               f"tensor at that step (float64), colour on a log scale from {lo:.2g} (light) to "
               f"{hi:.2g} (dark). Red column: the first flipped step; blue outline: the first "
               f"tensor beyond tolerance.</p>")
    out.append('<table class="heatmap" data-source="%s" data-steps="%d"><thead><tr><th></th>'
               % (e(g["source"]), steps))
    for k in range(steps):
        head = ' class="flip"' if k == flip else ""
        out.append(f'<th data-step="{k}"{head}>{k}</th>')
    out.append("</tr></thead><tbody>")
    for i, (label, layer) in enumerate(zip(g["rows"], g["layers"])):
        out.append(f'<tr data-layer="{"logits" if layer is None else layer}"><th class="row">'
                   f"{e(label)}</th>")
        for k, v in enumerate(g["cells"][i]):
            cls = [c for c, on in (("flip", k == flip), ("first-fail", (i, k) in marked)) if on]
            title = ("not recorded" if v is None else f"{label} at step {k}: {v:.3g}")
            if (i, k) in marked:
                title += "; " + "; ".join(marked[(i, k)])
            text = "-" if v is None else f"{v:.1e}"
            attr = f' class="{" ".join(cls)}"' if cls else ""
            out.append(f'<td data-step="{k}" data-value="{"" if v is None else repr(v)}"'
                       f'{attr} style="background:{_colour(v, lo, hi)}" title="{e(title)}">{text}</td>')
        out.append("</tr>")
    out.append("</tbody></table>")
    out.append('<p class="legend">' + "".join(
        f'<span style="background:{_colour(lo * (hi / lo) ** (j / 4) if hi > lo else lo, lo, hi)}'
        f'"></span>' for j in range(5)) + f" {lo:.2g} &hellip; {hi:.2g}</p>")
    out.append('<h2>Per step</h2><table class="steps"><thead><tr><th>step</th><th>ref</th>'
               f"<th>cand</th><th>top-1</th><th>top-{d['top_k']}</th><th>KL</th>"
               "<th>max|diff|</th><th>inputs</th></tr></thead><tbody>")
    for k, s in enumerate(d["steps"]):
        out.append(f'<tr data-step="{k}"><td>{k}</td><td>{s["ref_token"]}</td>'
                   f'<td>{s["cand_token"]}</td><td>{"yes" if s["top1_agree"] else "NO"}</td>'
                   f'<td>{s["topk_overlap"]:.2f}</td><td>{s["kl"]:.3e}</td>'
                   f'<td>{s["max_abs_diff"]:.3e}</td>'
                   f'<td>{"same" if s["inputs_identical"] else "DIFFER"}</td></tr>')
    out.append("</tbody></table></body></html>")
    return "\n".join(out) + "\n"
