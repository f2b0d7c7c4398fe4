"""Data flow through a hub (issue 23 §5): K compared tensors, one tensor only in the reference
naming all K as inputs, and M compared tensors each naming that hub R times. Followed through the
hub, every one of the M used to get all K inputs R times over, kept at that capacity after
deduplication: peak RSS grew as M * K * R (M=400, K=3000, R=16: 169 MiB for 2 MiB of dumps).
The answer (each consumer's inputs are the K pairs) must stay the same while memory stays near
the dumps' size. The growth with M is a benchmark row (bench/bench_dataflow.cpp), not timed here.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import driftscope

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.abspath(os.environ.get("DRIFTSCOPE_BIN", os.path.join(ROOT, "build", "dev", "driftscope")))

pytestmark = pytest.mark.skipif(not os.path.exists(BIN), reason=f"{BIN} not built")

K, M, R = 3000, 400, 16
# The dumps are ~2 MiB; the compare itself (binary, pairs, reports) ~30 MiB before the hub
# fan-out, which alone took 140 MiB more. 96 MiB leaves room for a debug build's slack.
RSS_BOUND_MIB = 96


def write(path, reference):
    with driftscope.Writer(path) as w:
        inputs = []
        for i in range(K):
            w.write(f"p{i}", np.arange(4, dtype=np.float32) + i, attrs={"ds.inputs": "", "ds.kind": "float"})
            inputs.append(f"output/0/0:p{i}")
        if reference:
            w.write("hub", np.ones(4, np.float32), attrs={"ds.inputs": ",".join(inputs), "ds.kind": "float"})
        hub = ",".join(["output/0/0:hub"] * R)
        for i in range(M):
            v = np.arange(4, dtype=np.float32) + i
            w.write(f"c{i}", v if reference else v * np.float32(1.5), attrs={"ds.inputs": hub, "ds.kind": "float"})


@pytest.fixture(scope="module")
def hub_pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("hub")
    a, b = str(d / "a.tdump"), str(d / "b.tdump")
    write(a, True)
    write(b, False)
    return a, b


def peak_rss_mib(argv):
    """The peak RSS of one child, measured in a fresh interpreter so no earlier child counts."""
    probe = ("import resource, subprocess, sys\n"
             "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
             "print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    out = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, check=True).stdout
    rc, kib = out.split()
    return int(rc), int(kib) / 1024


def test_hub_fan_out_memory_stays_near_the_dumps(hub_pair):
    a, b = hub_pair
    rc, mib = peak_rss_mib([BIN, "compare", a, b, "-q"])
    assert rc == 1  # the consumers fail
    assert mib < RSS_BOUND_MIB, f"compare through a hub fanned out to {M} took {mib:.0f} MiB"


def test_hub_fan_out_gives_each_consumer_the_hubs_inputs_once(hub_pair, tmp_path):
    a, b = hub_pair
    out = tmp_path / "r.json"
    r = subprocess.run([BIN, "compare", a, b, "-q", "--json", str(out)], capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    rep = json.loads(out.read_text())
    pairs = rep["tensors"]
    index = {p["name"]: i for i, p in enumerate(pairs)}
    want = sorted(index[f"p{i}"] for i in range(K))
    for i in (0, M // 2, M - 1):
        p = pairs[index[f"c{i}"]]
        assert p["basis"] == "dataflow"
        assert p["basis_pairs"] == want
    # Each consumer fails on its own (its inputs pass): M origins, each reaching nothing.
    assert len(rep["origins"]) == M
    assert all(o["reach"] == 0 for o in rep["origins"])
