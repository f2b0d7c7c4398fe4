"""driftscope compare_pair against a straightforward numpy float64 implementation of the same
metrics (tests/python/numpy_metrics.py, exact=False), on the same dump files, plus driftscope's
throughput against plain memory-read bandwidth measured in the same run (issue 3 §6: targets
>= 20x numpy, >= 70% of read bandwidth with all cores).

    .venv/bin/python bench/compare_vs_numpy.py [--bin build/release/bench/ds_bench_kernels]
        [--tensors 8] [--elements 2000000] [--dtype f32] [--repeat 3]

numpy's time starts from arrays already in memory (file reading is not charged to it) and covers
decoding to float64 and every metric; driftscope's time covers decoding and every metric from the
memory-mapped files, with all cores and with one.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
from numpy_metrics import decode, pair_metrics  # noqa: E402
from tdump_write import write_tdump  # noqa: E402


def find_bin():
    found = sorted(glob.glob(os.path.join(ROOT, "build", "*", "bench", "ds_bench_kernels")),
                   key=lambda p: ("release" not in p, -os.path.getmtime(p)))
    if not found:
        sys.exit("ds_bench_kernels not found: cmake --preset release && "
                 "cmake --build build/release --target ds_bench_kernels")
    return found[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=None)
    ap.add_argument("--tensors", type=int, default=8)
    ap.add_argument("--elements", type=int, default=2_000_000, help="per tensor")
    ap.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16", "f64"])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    exe = args.bin or find_bin()

    rng = np.random.default_rng(1)
    pairs = []
    for t in range(args.tensors):
        a = rng.standard_normal(args.elements)
        b = a + rng.standard_normal(args.elements) * 1e-3
        if args.dtype == "f64":
            ra, rb = a, b
        elif args.dtype == "f32":
            ra, rb = a.astype("<f4"), b.astype("<f4")
        elif args.dtype == "f16":
            ra, rb = a.astype("<f2").view("<u2"), b.astype("<f2").view("<u2")
        else:  # bf16 by truncation: fine for a benchmark
            ra = (a.astype("<f4").view("<u4") >> 16).astype("<u2")
            rb = (b.astype("<f4").view("<u4") >> 16).astype("<u2")
        pairs.append((f"layer{t}", ra, rb))

    with tempfile.TemporaryDirectory() as d:
        fa, fb = os.path.join(d, "ref.tdump"), os.path.join(d, "cand.tdump")
        write_tdump(fa, [("writer", "bench")], [
            {"name": n, "dtype": args.dtype, "shape": [args.elements], "data": ra} for n, ra, _ in pairs],
            salt=1)
        write_tdump(fb, [("writer", "bench")], [
            {"name": n, "dtype": args.dtype, "shape": [args.elements], "data": rb} for n, _, rb in pairs],
            salt=2)
        p = subprocess.run([exe, "--pairs", fa, fb, "--repeat", str(args.repeat), "--json"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"{exe} failed: {p.stderr}")
        ds = json.loads(p.stdout)

    ulp = args.dtype in ("f32", "f16", "bf16")
    best = float("inf")
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        for _, ra, rb in pairs:
            r, c = decode(args.dtype, ra), decode(args.dtype, rb)
            pair_metrics(r, c, atol=1e-5, rtol=1e-3, ulp=(args.dtype, ra, rb) if ulp else None,
                         exact=False)
        best = min(best, time.perf_counter() - t0)

    mb = ds["bytes"] / 1e6
    print(f"{args.tensors} pairs of {args.elements} {args.dtype} elements ({mb:.0f} MB of payload),"
          f" best of {args.repeat}")
    print(f"  numpy float64 (1 thread)       {best:8.3f} s")
    print(f"  driftscope, 1 thread           {ds['seconds_one_thread']:8.3f} s   "
          f"{best / ds['seconds_one_thread']:6.1f}x numpy")
    print(f"  driftscope, {ds['threads']:2d} threads         {ds['seconds_all_threads']:8.3f} s   "
          f"{best / ds['seconds_all_threads']:6.1f}x numpy   (target >= 20x)")
    bw = ds["bytes"] / ds["read_seconds_all_threads"] / 1e9
    thr = ds["bytes"] / ds["seconds_all_threads"] / 1e9
    print(f"  memory read, {ds['threads']:2d} threads        {bw:8.2f} GB/s")
    print(f"  driftscope, {ds['threads']:2d} threads         {thr:8.2f} GB/s   "
          f"{100 * thr / bw:5.1f}% of read bandwidth   (target >= 70%)")


if __name__ == "__main__":
    main()
