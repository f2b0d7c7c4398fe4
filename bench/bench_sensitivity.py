"""The fallback search with the sensitivity ranking against the search without it, on
all-MiniLM-L6-v2 INT8 (issue 28's benchmark; docs/howto/guard.md §9, "Sensitivity").

    .venv/bin/python bench/bench_sensitivity.py [--bin DRIFTSCOPE] [--fallback-runs 120]
                                                [--sensitivity 64] [--work DIR]

Both runs are `driftscope guard minilm.onnx --backends ort-int8 --dim seq=16 --runs 2
--fallback-runs N --json ...`, one after the other on this machine, the second with
`--sensitivity K` (each keepable node alone in float32, ranked; the fallback grows in ranking
order). MiniLM is exported as bench_guard.py exports it (TorchScript exporter, module scopes in
node names). Per run: the ranking's builds, the fallback search's builds (the JSON row's
`fallback.runs`), their sum, whether the search ended on a verified passing set, the nodes it
kept, the cosine it reached (the verified one, else the best build's), and the wall time of the
whole guard command (reference, probe, ranking and search). The ratios are with/without: below 1
means the ranking made the search cheaper. The ranking's builds count against it: they are
builds the user waits for.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(cmd: List[str], out: str, env: Dict[str, str]) -> Dict[str, Any]:
    """One guard run, timed; the ort-int8 row's ranking and fallback from its JSON."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd + ["--json", out], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if p.returncode not in (0, 1, 3) or not os.path.exists(out):
        raise SystemExit(f"guard failed ({p.returncode}): {(p.stderr or p.stdout)[-2000:]}")
    with open(out) as f:
        row = [b for b in json.load(f)["backends"] if b["name"] == "ort-int8"][0]
    fb = row.get("fallback") or {}
    sens = row.get("sensitivity") or {}
    trail = fb.get("trail") or []
    best = max((t.get("cosine") or 0.0 for t in trail), default=None)
    return {"sens_builds": int(sens.get("builds") or 0), "fb_builds": int(fb.get("runs") or 0),
            "verified": bool(fb.get("verified")), "kept": len(fb.get("nodes") or []),
            "cosine": fb.get("cosine_after") if fb.get("verified") else best,
            "before": fb.get("cosine_before"), "wall": wall,
            "why": fb.get("error") or "", "ranking": [n["node"] for n in sens.get("nodes") or []],
            "failed": sum(1 for n in sens.get("nodes") or [] if n.get("failed")),
            "nodes": [n["node"] for n in fb.get("nodes") or []]}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", help="the driftscope executable (default: python -m driftscope)")
    ap.add_argument("--fallback-runs", type=int, default=120)
    ap.add_argument("--sensitivity", type=int, default=64)
    ap.add_argument("--work", help="folder for the model and reports (default: a temporary one)")
    args = ap.parse_args(argv)

    work = args.work or tempfile.mkdtemp(prefix="ds-bench-sens-")
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "minilm.onnx")
    if not os.path.exists(model):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from bench_guard import export_minilm

        export_minilm(model)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), HF_HUB_OFFLINE="1")
    guard = [args.bin] if args.bin else [sys.executable, "-m", "driftscope"]
    base = guard + ["guard", model, "--backends", "ort-int8", "--dim", "seq=16", "--runs", "2",
                    "--fallback-runs", str(args.fallback_runs)]
    rows = {"without": _run(base, os.path.join(work, "without.json"), env),
            "with": _run(base + ["--sensitivity", str(args.sensitivity)],
                         os.path.join(work, "with.json"), env)}

    print(f"all-MiniLM-L6-v2, ort-int8 (cosine before: {rows['without']['before']:.6f}), "
          f"--fallback-runs {args.fallback_runs}, --sensitivity {args.sensitivity}; "
          f"CPUs: {os.cpu_count()}")
    print(f"{'search':<28} {'rank builds':>11} {'fallback builds':>15} {'total':>6} "
          f"{'verified':>8} {'kept':>5} {'cosine':>9} {'wall':>8}")
    for name, label in (("without", "grow/shrink (no ranking)"),
                        ("with", f"ranked (--sensitivity {args.sensitivity})")):
        r = rows[name]
        cos = f"{r['cosine']:.6f}" if r["cosine"] is not None else "-"
        print(f"{label:<28} {r['sens_builds']:>11} {r['fb_builds']:>15} "
              f"{r['sens_builds'] + r['fb_builds']:>6} {'yes' if r['verified'] else 'no':>8} "
              f"{r['kept']:>5} {cos:>9} {r['wall']:>7.1f}s")
    w, o = rows["with"], rows["without"]
    builds = (w["sens_builds"] + w["fb_builds"]) / max(o["fb_builds"], 1)
    print(f"ratio with/without (lower is better): builds {builds:.2f}x, "
          f"fallback builds alone {w['fb_builds'] / max(o['fb_builds'], 1):.2f}x, "
          f"wall {w['wall'] / o['wall']:.2f}x")
    for name in ("without", "with"):
        if not rows[name]["verified"]:
            print(f"  {name}: not verified: {rows[name]['why']}")
    # Where the nodes each search kept stand in the ranking: a ranking that knows which nodes
    # matter puts them first.
    rank = {n: i + 1 for i, n in enumerate(w["ranking"])}
    print(f"  ranking: {len(w['ranking'])} node(s), {w['failed']} build(s) failed; top 3: "
          + ", ".join(w["ranking"][:3]))
    for name in ("without", "with"):
        print(f"  ranks of the nodes kept {name} the ranking: "
              + ", ".join(str(rank.get(n, "-")) for n in rows[name]["nodes"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
