"""`driftscope show` with a misspelt name ("did you mean ...?") against the same dump's `show` of a
name that exists, at 10k/20k/40k/100k records (issue 7, bug 7: 26 s at 100k before the fix, from a
quadratic scan of the names already seen). Prints each time, its growth against the 10k run
beside the growth of the record count (near-linear: the two columns stay close), and the cost of
the suggestion against opening the dump and finding a name.

    .venv/bin/python bench/bench_show_suggest.py [--bin build/release/driftscope]
        [--sizes 10000,20000,40000,100000] [--repeat 3]
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
from tdump_write import write_tdump  # noqa: E402


def find_bin():
    if os.environ.get("DRIFTSCOPE_BIN"):
        return os.environ["DRIFTSCOPE_BIN"]
    found = sorted(glob.glob(os.path.join(ROOT, "build", "*", "driftscope")),
                   key=lambda p: ("release" not in p, -os.path.getmtime(p)))
    if not found:
        sys.exit("driftscope not found: cmake --preset release && cmake --build build/release")
    return found[0]


def best_of(cmd, repeat, want_rc):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if p.returncode != want_rc:
            sys.exit(f"{cmd}: exit {p.returncode}, expected {want_rc}: {p.stderr}")
    return min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=None)
    ap.add_argument("--sizes", default="10000,20000,40000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    binary = a.bin or find_bin()
    sizes = [int(s) for s in a.sizes.split(",")]
    one = np.zeros(1, np.float32)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for n in sizes:
            path = os.path.join(d, f"{n}.tdump")
            write_tdump(path, [], ({"name": f"model.encoder.layers.{i}.attention.output.dense",
                                    "dtype": "f32", "shape": [1], "data": one} for i in range(n)),
                        salt=1)
            hit = best_of([binary, "show", path, "model.encoder.layers.7.attention.output.dense",
                           "--limit", "0"], a.repeat, 0)
            miss = best_of([binary, "show", path, "model.encoder.layers.7.attention.output.dens"],
                           a.repeat, 2)
            rows.append((n, hit, miss))
    n0, _, m0 = rows[0]
    print(f"{'records':>8}  {'show (found)':>12}  {'show (misspelt)':>15}  {'misspelt/found':>14}  "
          f"{'time growth':>11}  {'record growth':>13}")
    for n, hit, miss in rows:
        print(f"{n:>8}  {hit * 1e3:>10.1f}ms  {miss * 1e3:>13.1f}ms  {miss / hit:>13.2f}x  "
              f"{miss / m0:>10.2f}x  {n / n0:>12.2f}x")


if __name__ == "__main__":
    main()
