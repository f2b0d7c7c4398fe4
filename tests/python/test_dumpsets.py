"""Dump sets (docs/dumpsets.md) from the outside: a tensor-parallel (TP=2) column/row-parallel MLP
simulated in numpy, written per rank with driftscope.Writer plus a manifest, compared by the CLI
against a TP=1 reference. Gathered and summed pairs are checked against the independent numpy
float64 metrics (numpy_metrics.py) on the concatenated / summed arrays.
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
sys.path.insert(0, os.path.dirname(__file__))
from numpy_metrics import pair_metrics  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.exists(BIN), reason=f"{BIN} not built")

TP = 2


def model(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    w1 = rng.standard_normal((16, 8)).astype(np.float32)
    w2 = rng.standard_normal((8, 16)).astype(np.float32)
    return x, w1, w2


def reference(path, x, w1, w2):
    h = x @ w1.T
    a = np.maximum(h, 0)
    y = (a @ w2.T).astype(np.float32)
    with driftscope.Writer(path, meta={"framework": "numpy"}) as w:
        w.write("embed", x, axes="batch,hidden")
        w.write("mlp.fc1", w1, axes="ffn,hidden", role="parameter")
        w.write("mlp.fc1", h, axes="batch,ffn", op_type="Linear")
        w.write("mlp.act", a, axes="batch,ffn", op_type="ReLU")
        w.write("mlp.fc2", y, axes="batch,hidden", op_type="Linear")
        w.write("mlp.out", y, axes="batch,hidden", op_type="AllReduce")
    return h, a, y


def tp_set(d, x, w1, w2, fault=None):
    """Column-parallel fc1 (ffn split), row-parallel fc2 (partial sums), all-reduced output.
    fault(rank, name, array) -> array may change what one rank records."""
    os.makedirs(d, exist_ok=True)
    f = fault or (lambda r, n, a: a)
    shards = {}
    for r in range(TP):
        sl = slice(r * 8, (r + 1) * 8)
        h = x @ w1[sl].T
        a = np.maximum(h, 0)
        shards[r] = (h, a, (a @ w2[:, sl].T).astype(np.float32))
    out = (shards[0][2].astype(np.float64) + shards[1][2].astype(np.float64)).astype(np.float32)
    ranks = []
    for r in range(TP):
        sl = slice(r * 8, (r + 1) * 8)
        h, a, y = shards[r]
        name = f"rank-{r:05d}.tdump"
        meta = {"framework": "numpy", "ds.rank": str(r), "ds.world_size": str(TP), "ds.coords": f"tp={r}"}
        with driftscope.Writer(os.path.join(d, name), meta=meta) as w:
            w.write("embed", f(r, "embed", x), axes="batch,hidden")
            w.write("mlp.fc1", f(r, "w1", w1[sl]), axes="ffn@tp,hidden", role="parameter")
            w.write("mlp.fc1", f(r, "mlp.fc1", h), axes="batch,ffn@tp", op_type="Linear")
            w.write("mlp.act", f(r, "mlp.act", a), axes="batch,ffn@tp", op_type="ReLU")
            w.write("mlp.fc2", f(r, "mlp.fc2", y), axes="batch,hidden+tp", op_type="Linear")
            w.write("mlp.out", f(r, "mlp.out", out), axes="batch,hidden", op_type="AllReduce")
        ranks.append({"rank": r, "file": name, "coords": {"tp": r}})
    manifest = {"format": "driftscope.set/1", "world_size": TP, "groups": {"tp": TP},
                "order": "lockstep", "ranks": ranks, "metadata": {"model": "mlp"}}
    with open(os.path.join(d, "driftscope-set.json"), "w") as fh:
        json.dump(manifest, fh)
    return shards


def run(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("sets")
    x, w1, w2 = model()
    ref = str(d / "ref.tdump")
    expected = reference(ref, x, w1, w2)
    shards = tp_set(str(d / "tp2"), x, w1, w2)
    return d, ref, expected, shards, (x, w1, w2)


def report(*args):
    p = run("compare", *args, "--json", "-")
    return p, json.loads(p.stdout) if p.stdout.startswith("{") else None


def test_tp2_against_tp1_passes_and_metrics_match_numpy(runs):
    d, ref, (h, a, y), shards, _ = runs
    p, rep = report(ref, str(d / "tp2"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert rep["verdict"] == "pass"
    by = {(t["name"], t["role"], tuple(t["ranks"])): t for t in rep["tensors"]}
    # Replicated tensors pair once per rank; sharded ones once, with every shard's rank.
    assert sorted(k for k in by) == sorted([
        ("embed", "output", (0,)), ("embed", "output", (1,)),
        ("mlp.fc1", "parameter", (0, 1)), ("mlp.fc1", "output", (0, 1)),
        ("mlp.act", "output", (0, 1)), ("mlp.fc2", "output", (0, 1)),
        ("mlp.out", "output", (0,)), ("mlp.out", "output", (1,))])
    assert rep["affected_ranks"] == [] and rep["first_divergence_ranks"] == []
    assert rep["candidate"]["world_size"] == 2


def test_gathered_and_summed_metrics_equal_numpy_float64(runs, tmp_path):
    d, ref, (h, a, y), _, (x, w1, w2) = runs
    rng = np.random.default_rng(7)

    def noisy(r, name, arr):
        if name in ("mlp.fc1", "mlp.fc2"):
            arr = (arr * (1 + 1e-3 * rng.standard_normal(arr.shape))).astype(np.float32)
        return arr
    shards = {}

    def keep(r, name, arr):
        arr = noisy(r, name, arr)
        shards[(r, name)] = arr
        return arr
    tp_set(str(tmp_path / "q"), x, w1, w2, keep)
    p, rep = report(ref, str(tmp_path / "q"), "--min-cosine", "0")
    assert p.returncode == 0, p.stdout + p.stderr
    by = {(t["name"], t["role"]): t for t in rep["tensors"] if t["role"] == "output"}
    gathered = np.concatenate([shards[(0, "mlp.fc1")], shards[(1, "mlp.fc1")]], axis=1)
    summed = (shards[(0, "mlp.fc2")].astype(np.float64) + shards[(1, "mlp.fc2")].astype(np.float64))
    for name, r, c, axes in [("mlp.fc1", h, gathered, ["batch", "ffn"]),
                             ("mlp.fc2", y, summed.astype(np.float32), ["batch", "hidden"])]:
        t = by[(name, "output")]
        assert t["shape_cand"] == list(r.shape) and t["axes_cand"] == axes
        assert t["ranks"] == [0, 1]
        m = pair_metrics(r.astype(np.float64), c.astype(np.float64))
        assert m["rel_l2"] > 1e-5
        for k in ("max_abs_diff", "rel_l2", "cosine", "rmse", "sqnr_db"):
            assert t[k] == pytest.approx(m[k], rel=1e-12), k


def test_fault_on_rank_1_is_named_with_its_rank(runs, tmp_path):
    d, ref, _, _, (x, w1, w2) = runs
    bad = x.copy()
    bad[0, 0] += 1.0

    def fault(r, name, arr):
        return bad if (r == 1 and name == "embed") else arr
    tp_set(str(tmp_path / "f"), x, w1, w2, fault)
    p, rep = report(ref, str(tmp_path / "f"))
    assert p.returncode == 1
    first = rep["tensors"][rep["first_divergence"]["pair"]]
    assert first["name"] == "embed" and first["ranks"] == [1]
    assert rep["first_divergence_ranks"] == [1]
    assert rep["affected_ranks"] == [1]
    assert "first divergence at embed on rank 1 (of 2)" in rep["summary"]
    import jsonschema
    with open(os.path.join(ROOT, "docs", "report-schema.json")) as f:
        jsonschema.Draft202012Validator(json.load(f)).validate(rep)
    text = run("compare", ref, str(tmp_path / "f")).stdout
    assert "First divergence: embed on rank 1 (of 2)" in text
    assert "affected   ranks 1 (of 2)" in text
    md = run("compare", ref, str(tmp_path / "f"), "--markdown", "-").stdout
    assert "### First divergence: `embed` on rank 1 (of 2)" in md
    html = tmp_path / "r.html"
    run("compare", ref, str(tmp_path / "f"), "--html", str(html), "-q")
    page = html.read_text()
    assert '"ranks":[1]' in page.replace(" ", "") and 'p.ranks.join(",")' in page


def test_nan_on_rank_0_is_the_first_nonfinite(runs, tmp_path):
    d, ref, _, _, (x, w1, w2) = runs

    def fault(r, name, arr):
        if r == 0 and name == "mlp.out":
            arr = arr.copy()
            arr[1, 2] = np.nan
        return arr
    tp_set(str(tmp_path / "n"), x, w1, w2, fault)
    p, rep = report(ref, str(tmp_path / "n" / "driftscope-set.json"))
    assert p.returncode in (1, 3)
    assert rep["first_nonfinite_ranks"] == [0]
    assert rep["tensors"][rep["first_nonfinite"]["pair"]]["name"] == "mlp.out"


def test_set_against_itself_and_reversed_sides(runs):
    d, ref, *_ = runs
    for a, b in [(str(d / "tp2"), str(d / "tp2")), (str(d / "tp2"), ref)]:
        p, rep = report(a, b)
        assert p.returncode == 0, p.stderr
        assert rep["verdict"] == "pass"


def write_manifest(d, text):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "driftscope-set.json"), "w") as fh:
        fh.write(text)


def manifest(**over):
    m = {"format": "driftscope.set/1", "world_size": 2, "groups": {"tp": 2}, "order": "lockstep",
         "ranks": [{"rank": 0, "file": "rank-00000.tdump", "coords": {"tp": 0}},
                   {"rank": 1, "file": "rank-00001.tdump", "coords": {"tp": 1}}]}
    m.update(over)
    return json.dumps(m)


@pytest.mark.parametrize("text,needle", [
    ("{\n  \"format\": \"driftscope.set/1\",\n  \"world_size\": 2,,\n}", ":3:"),
    (manifest(world_size=10**12), "world_size"),
    (manifest(world_size=3), "groups"),
    (manifest(ranks=[{"rank": 0, "file": "a", "coords": {"tp": 0}},
                     {"rank": 0, "file": "b", "coords": {"tp": 1}}]), "ranks[1].rank"),
    (manifest(ranks=[{"rank": 0, "file": "../x.tdump", "coords": {"tp": 0}},
                     {"rank": 1, "file": "b", "coords": {"tp": 1}}]), "ranks[0].file"),
    (manifest(ranks=[{"rank": 0, "file": "/etc/passwd", "coords": {"tp": 0}},
                     {"rank": 1, "file": "b", "coords": {"tp": 1}}]), "ranks[0].file"),
    (manifest(ranks=[{"rank": 0, "file": "a", "coords": {"tp": 0}},
                     {"rank": 1, "file": "b", "coords": {"tp": 2}}]), "ranks[1].coords.tp"),
    (manifest(format="driftscope.set/9"), "format"),
    (manifest(order="sideways"), "order"),
    ("[" * 100000 + "]" * 100000, "nested"),
    ("{\"format\": \"driftscope.set/1\", \"format\": \"driftscope.set/1\"}", "twice"),
    (manifest(), "rank-00000.tdump"),  # files missing
])
def test_damaged_manifests_exit_2_with_one_line(runs, tmp_path, text, needle):
    d, ref, *_ = runs
    write_manifest(str(tmp_path / "s"), text)
    for args in (["compare", ref, str(tmp_path / "s")], ["verify", str(tmp_path / "s")],
                 ["info", str(tmp_path / "s")], ["ls", str(tmp_path / "s")]):
        p = run(*args)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        lines = p.stderr.strip().splitlines()
        # verify checks every rank's file, one line each (the others stop at the first).
        want = 2 if args[0] == "verify" and needle == "rank-00000.tdump" else 1
        assert len(lines) == want and needle in lines[0], (args, p.stderr)
        assert all(ln.startswith("driftscope: error: ") for ln in lines)


def test_manifest_over_16_mib_is_refused(runs, tmp_path):
    d, ref, *_ = runs
    write_manifest(str(tmp_path / "big"), manifest(metadata={"pad": "x" * (16 << 20)}))
    p = run("compare", ref, str(tmp_path / "big"))
    assert p.returncode == 2 and "limit_exceeded" in p.stderr


def test_verify_and_ls_and_info_of_a_set(runs, tmp_path):
    d, ref, *_ = runs
    p = run("verify", str(d / "tp2"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "rank-00001.tdump: OK" in p.stdout and "OK: set of 2 ranks (tp=2)" in p.stdout
    p = run("ls", str(d / "tp2"))
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0].split()[0] == "rank"
    assert sum(1 for ln in p.stdout.splitlines()[1:] if ln.split() and ln.split()[0] == "1") == 6
    p = run("info", str(d / "tp2"))
    assert p.returncode == 0, p.stderr
    assert "world size 2, groups tp=2" in p.stdout and "rank 1" in p.stdout
    # A rank whose metadata disagrees with the manifest makes the set invalid.
    x, w1, w2 = model()
    tp_set(str(tmp_path / "m"), x, w1, w2)
    m = json.load(open(tmp_path / "m" / "driftscope-set.json"))
    m["ranks"][0]["file"], m["ranks"][1]["file"] = m["ranks"][1]["file"], m["ranks"][0]["file"]
    write_manifest(str(tmp_path / "m"), json.dumps(m))
    p = run("verify", str(tmp_path / "m"))
    assert p.returncode != 0 and "ds.rank" in p.stdout + p.stderr


def test_python_compare_accepts_a_set(runs):
    d, ref, *_ = runs
    rep = driftscope.compare(ref, str(d / "tp2"))
    assert rep.exit_code == 0


def test_python_open_set(runs, tmp_path):
    d, ref, *_ = runs
    s = driftscope.open_set(d / "tp2")
    assert s.world_size == 2 and s.groups == {"tp": 2} and s.order == "lockstep"
    assert [r.coords for r in s.ranks] == [{"tp": 0}, {"tp": 1}]
    assert s.metadata == {"model": "mlp"}
    assert s.ranks[1].dump.metadata["ds.rank"] == "1"
    write_manifest(str(tmp_path / "bad"), manifest(world_size=3))
    with pytest.raises(driftscope.errors.Error) as e:
        driftscope.open_set(tmp_path / "bad")
    assert "'groups'" in str(e.value)
