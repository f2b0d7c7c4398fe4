"""The float64 ordering rule as a table, and argmax flips on every output (docs/references.md
"Checking a candidate"). The rule itself is compare's `--reference64` (docs/compare.md, "The
float64 ordering rule"): this module runs that one comparison and lays its per-tensor numbers
out as candidate-vs-float64, float32-vs-float64 and the decision; it does not judge again."""

from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

MAX_LISTED_FLIPS = 20  # positions listed per tensor; the count is always complete


def argmax_flips(ref: np.ndarray, cand: np.ndarray) -> Optional[Dict[str, Any]]:
    """Rows (all axes but the last) whose argmax over the last axis differs; None for tensors
    without a last axis of at least 2. Ties go to the first index, as numpy's argmax does; a row
    with NaN in either side counts as flipped when its NaN-aware argmax differs."""
    if ref.ndim == 0 or ref.shape[-1] < 2 or ref.shape != cand.shape:
        return None
    r = np.asarray(ref, dtype=np.float64).reshape(-1, ref.shape[-1])
    c = np.asarray(cand, dtype=np.float64).reshape(-1, ref.shape[-1])
    ar, ac = np.argmax(r, axis=1), np.argmax(c, axis=1)
    rows = np.nonzero(ar != ac)[0]
    lead = ref.shape[:-1]
    listed = [{"position": [int(x) for x in np.unravel_index(int(i), lead)] if lead else [],
               "reference": int(ar[i]), "candidate": int(ac[i])} for i in rows[:MAX_LISTED_FLIPS]]
    return {"rows": int(r.shape[0]), "flips": int(rows.size), "listed": listed}


def _real(v: Any) -> float:
    """A number of compare's JSON report: infinities are "inf"/"-inf", NaN is null."""
    if v is None:
        return math.nan
    return float(v)


def _decode(rec: Any) -> Optional[np.ndarray]:
    try:
        return np.asarray(rec.numpy())
    except Exception:  # noqa: BLE001 - summaries and undecodable dtypes carry no values
        return None


def check(reference32: str, candidate: str, reference64: str, *,
          r64_k: Union[Sequence[str], Mapping[str, float]] = (),
          r64_floor: Optional[float] = None, policy: Optional[str] = None) -> Dict[str, Any]:
    """Runs compare(reference32, candidate, reference64=...) once and returns the ordering table:
    one row per tensor the float64 run holds, plus argmax flips of every output (candidate
    against float64, and float32's own flips against float64 for scale)."""
    import driftscope

    report = driftscope.compare(reference32, candidate, reference64=reference64, r64_k=r64_k,
                                r64_floor=r64_floor, policy=policy)
    r32, c, r64 = (driftscope.open(p) for p in (reference32, candidate, reference64))
    rows: List[Dict[str, Any]] = []
    for t in report.tensors:
        r64info = t.get("reference64")
        name = t.get("name")
        row: Dict[str, Any] = {
            "name": name, "role": t.get("role"), "status": t.get("status"),
            "candidate_vs_float64": None, "float32_vs_float64": None, "limit": None, "k": None,
            "rule": "not in the float64 run" if r64info is None else
            ("pass" if _real(r64info["error_candidate"]) <= _real(r64info["limit"]) else "fail"),
            "argmax": None, "argmax_float32": None,
        }
        if r64info is not None:
            row.update(candidate_vs_float64=r64info["error_candidate"],
                       float32_vs_float64=r64info["error_reference"], limit=r64info["limit"],
                       k=r64info["k"])
        if t.get("role") == "output" and name is not None:
            occ, role_index = t.get("occurrence", 0), t.get("role_index", 0)
            a64 = r64.find(name, occ, "output", role_index)
            ac = c.find(name, occ, "output", role_index)
            a32 = r32.find(name, occ, "output", role_index)
            x64 = _decode(a64) if a64 is not None else None
            if x64 is not None:
                xc = _decode(ac) if ac is not None else None
                x32 = _decode(a32) if a32 is not None else None
                if xc is not None and xc.size == x64.size:
                    row["argmax"] = argmax_flips(x64, xc.reshape(x64.shape))
                if x32 is not None and x32.size == x64.size:
                    row["argmax_float32"] = argmax_flips(x64, x32.reshape(x64.shape))
        rows.append(row)
    judged = [r for r in rows if r["rule"] != "not in the float64 run"]
    failed = [r["name"] for r in judged if r["rule"] == "fail"]
    flips = sum(r["argmax"]["flips"] for r in rows if r["argmax"])
    flips32 = sum(r["argmax_float32"]["flips"] for r in rows if r["argmax_float32"])
    return {
        "schema": "driftscope.reference.check/1",
        "reference": reference32, "candidate": candidate, "reference64": reference64,
        "compare_verdict": report.verdict, "compare_summary": report.summary,
        "judged": len(judged), "failed": failed, "passed": not failed and bool(judged),
        "argmax_flips": flips, "argmax_flips_float32": flips32,
        "rows": rows,
    }


def _num(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):  # "inf" / "-inf" as compare writes them
        return x
    if isinstance(x, float) and not math.isfinite(x):
        return "inf" if x > 0 else ("nan" if x != x else "-inf")
    return f"{x:.3g}"


def _flip_cell(f: Optional[Dict[str, Any]]) -> str:
    return "-" if f is None else f"{f['flips']}/{f['rows']}"


def verdict_line(result: Dict[str, Any]) -> str:
    if not result["judged"]:
        return "no tensor of the candidate has a float64 counterpart: nothing judged by the rule"
    n, bad = result["judged"], len(result["failed"])
    head = (f"ordering rule: {n - bad}/{n} intermediates within k x float32's own error against "
            f"float64 + floor")
    if bad:
        head += f"; first failing: {result['failed'][0]}"
    return head + (f"; argmax flips on outputs: {result['argmax_flips']} "
                   f"(float32 itself: {result['argmax_flips_float32']})")


def render(result: Dict[str, Any], fmt: str) -> str:
    """The table as text, json or markdown (names are printed as recorded, made printable)."""
    if fmt == "json":
        return json.dumps(result, indent=1, allow_nan=False, default=str) + "\n"
    def p(s: Any) -> str:  # control characters spelled out, as driftscope::printable does
        return "".join(c if c.isprintable() or c == " " else
                       (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")
                       for c in str(s))

    head = ("tensor", "cand vs f64", "f32 vs f64", "limit", "rule", "argmax flips (f32)")
    body = [(p(r["name"]) + ("" if r["role"] in (None, "output") else f" [{r['role']}]"),
             _num(r["candidate_vs_float64"]), _num(r["float32_vs_float64"]), _num(r["limit"]),
             r["rule"] if r["rule"] != "not in the float64 run" else "-",
             "-" if r["argmax"] is None else
             f"{_flip_cell(r['argmax'])} ({_flip_cell(r['argmax_float32'])})")
            for r in result["rows"]]
    if fmt == "markdown":
        def md(s: str) -> str:
            return s.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace("`", "\\`")
        out = ["| " + " | ".join(head) + " |", "|---|---:|---:|---:|---|---:|"]
        out += ["| " + " | ".join(md(c) for c in row) + " |" for row in body]
        return "\n".join(out) + "\n\n" + md(verdict_line(result)) + "\n"
    widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h)
              for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in body]
    return "\n".join(lines) + "\n" + verdict_line(result) + "\n"
