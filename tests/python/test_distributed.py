"""A real torch.distributed run (gloo, CPU, 2 processes) recorded as a dump set (issue 13 item 1).

Two tensor-parallel ranks run tests/python/tp_block.py's column/row-parallel attention + MLP
block and record it with ``driftscope.torch.record(..., groups={"tp": 2}, shards=...)``; a
single process records the TP=1 reference with the same weights. The set is checked twice:
directly (manifest, rank metadata, shard annotations, and the shards gathered / summed with
numpy per docs/dumpsets.md equal the reference's tensors), and through ``driftscope compare SET
ref.tdump`` (passes; a fault on rank 1 only is named with its rank).
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import driftscope  # noqa: E402
import driftscope.torch  # noqa: E402
from driftscope import sets  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import tp_block  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.abspath(os.environ.get("DRIFTSCOPE_BIN", os.path.join(ROOT, "build", "dev", "driftscope")))
WORLD = 2
HARD_TIMEOUT_S = 90


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    out = tmp_path_factory.mktemp("tp")
    ctx = torch.multiprocessing.spawn(tp_block.worker, args=(WORLD, _free_port(), str(out)),
                                      nprocs=WORLD, join=False)
    deadline = time.monotonic() + HARD_TIMEOUT_S
    try:
        while not ctx.join(timeout=1):
            if time.monotonic() > deadline:
                pytest.fail(f"the gloo run did not finish in {HARD_TIMEOUT_S} s")
    finally:
        for p in ctx.processes:  # never leave a rank behind, whatever happened
            if p.is_alive():
                p.kill()
                p.join(5)
    ref_model = tp_block.Block(tp_block.full_weights()).eval()  # TP=1, same weights
    ref = out / "ref.tdump"
    with torch.no_grad(), driftscope.torch.record(ref_model, ref):
        ref_model(tp_block.inputs())
    return out


def _gather(records, axes_list):
    """The full tensor from per-rank shards per the annotations (docs/dumpsets.md)."""
    axes = axes_list[0]
    split = [i for i, a in enumerate(axes) if "@tp" in a]
    if any("+tp" in a for a in axes):
        return np.sum([r.astype(np.float64) for r in records], axis=0)
    if split:
        return np.concatenate(records, axis=split[0]).astype(np.float64)
    return None


def test_set_layout_metadata_and_annotations(recorded):
    m = sets.read_manifest(recorded / "good")
    assert m["format"] == "driftscope.set/1" and m["world_size"] == 2
    assert m["groups"] == {"tp": 2} and m["order"] == "lockstep"
    assert [(r["rank"], r["file"], r["coords"]) for r in m["ranks"]] == [
        (0, "rank-00000.tdump", {"tp": 0}), (1, "rank-00001.tdump", {"tp": 1})]
    assert not [f for f in os.listdir(recorded / "good") if f.endswith(".tmp")]
    for r in m["ranks"]:
        d = driftscope.open(r["path"])
        md = d.metadata
        assert (md["ds.rank"], md["ds.world_size"], md["ds.coords"]) == (
            str(r["rank"]), "2", f"tp={r['rank']}")
        assert md["variant"] == "good" and d.integrity.finished
        axes = {rec.name: list(rec.axes) for rec in d}
        assert axes["attn.q"] == ["dim0", "dim1", "hidden@tp"]
        assert axes["attn.core"] == ["batch", "heads@tp", "seq", "head_dim"]
        assert axes["attn.out.matmul"] == ["dim0", "dim1", "dim2+tp"]
        assert axes["mlp.fc2.matmul"] == ["dim0", "dim1", "dim2+tp"]
        assert axes["mlp.act"] == ["dim0", "dim1", "hidden@tp"]
        for replicated in ("ln1", "attn.out", "attn", "ln2", "mlp.fc2", "mlp", "<root>"):
            assert axes[replicated] == [], replicated
        # Data flow under torch.distributed (docs/format.md §3.3.3): every record names the
        # records of its own rank it came from; the all-reduce works in place, so the replicated
        # output names the rank's partial sum (docs/dumpsets.md §7.2 makes that the sum of all).
        inputs = {rec.name: rec.attrs.get("ds.inputs") for rec in d}
        assert None not in inputs.values(), inputs
        assert inputs["attn.q"] == "output/0/0:ln1"
        assert inputs["mlp.fc1"] == "output/0/0:ln2"
        assert inputs["mlp.fc2"] == "output/0/0:mlp.fc2.matmul"
        assert inputs["attn.out"] == "output/0/0:attn.out.matmul"


def test_shards_gather_to_the_reference(recorded):
    """Concatenating split shards / summing partial sums gives the TP=1 tensors; each replica
    equals the reference's: the annotations say the truth about the run."""
    ranks = [driftscope.open(recorded / "good" / sets.rank_file(r)) for r in range(WORLD)]
    ref = driftscope.open(recorded / "ref.tdump")
    names = [rec.name for rec in ranks[0]]
    assert set(names) == {rec.name for rec in ref} and len(names) == 15
    kinds = {"split": 0, "partial": 0, "replicated": 0}
    for name in names:
        shards = [d[name] for d in ranks]
        want = ref[name].astype(np.float64)
        full = _gather(shards, [list(d.record(name).axes) for d in ranks])
        if full is None:
            kinds["replicated"] += 1
            for s in shards:
                np.testing.assert_allclose(s, want, rtol=1e-5, atol=1e-5, err_msg=name)
        else:
            kinds["partial" if "+tp" in ",".join(ranks[0].record(name).axes) else "split"] += 1
            assert full.shape == want.shape, name
            np.testing.assert_allclose(full, want, rtol=1e-5, atol=1e-5, err_msg=name)
            assert not np.allclose(shards[0], shards[1]), name  # really different shards
    assert kinds == {"split": 6, "partial": 2, "replicated": 7}


def test_fault_on_rank_1_is_only_in_rank_1s_dump(recorded):
    r0 = driftscope.open(recorded / "fault" / sets.rank_file(0))
    r1 = driftscope.open(recorded / "fault" / sets.rank_file(1))
    ref = driftscope.open(recorded / "ref.tdump")
    np.testing.assert_allclose(r0["ln2"], ref["ln2"], rtol=1e-5, atol=1e-5)
    assert not np.allclose(r1["ln2"], ref["ln2"], rtol=1e-3, atol=1e-3)
    for d in (r0, r1):  # everything before ln2 is untouched on both ranks
        np.testing.assert_allclose(d["attn"], ref["attn"], rtol=1e-5, atol=1e-5)


def _cli(*args):
    return subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=60)


def test_compare_set_against_reference(recorded):
    """`driftscope compare ref.tdump SET`: the TP=2 set, gathered and summed per its
    annotations (docs/dumpsets.md), against the one-process reference."""
    good = _cli("compare", recorded / "ref.tdump", recorded / "good", "--json", "-")
    assert good.returncode == 0, good.stderr
    rep = json.loads(good.stdout)
    assert rep["verdict"] == "pass" and rep["candidate"]["world_size"] == 2
    by_ranks = {tuple(t["ranks"]) for t in rep["tensors"]}
    assert (0, 1) in by_ranks and (0,) in by_ranks and (1,) in by_ranks  # gathered and replicas

    bad = _cli("compare", recorded / "ref.tdump", recorded / "fault", "--json", "-")
    assert bad.returncode == 1, bad.stderr
    rep = json.loads(bad.stdout)
    assert rep["verdict"] == "diverged"
    assert rep["first_divergence"]["name"] == "ln2" and rep["first_divergence_ranks"] == [1]
    # Later split tensors gather rank 0's good shard and rank 1's bad one: each shard measured
    # against its slice of the reference names rank 1 alone (docs/dumpsets.md §7.1).
    for name in ("mlp.fc1", "mlp.act"):
        (t,) = [t for t in rep["tensors"] if t["name"] == name]
        assert t["status"] == "fail" and t["shard_check"] == "shards", t
        assert t["ranks"] == [1] and t["ranks_cand"] == [0, 1], t
    # The row-parallel partial sum cannot be split into the ranks' contributions, and its
    # all-reduce hands the fault to rank 0's replicas too: rank 0 really holds failing tensors.
    (fc2,) = [t for t in rep["tensors"] if t["name"] == "mlp.fc2.matmul"]
    assert fc2["shard_check"] == "partial_sum" and fc2["ranks"] == [0, 1]
    after = {tuple(t["ranks"]): t["status"] for t in rep["tensors"] if t["name"] == "mlp.fc2"}
    assert after == {(0,): "fail", (1,): "fail"}
    assert rep["affected_ranks"] == [0, 1]
    ln2 = [t for t in rep["tensors"] if t["name"] == "ln2"]
    assert {tuple(t["ranks"]): t["status"] for t in ln2} == {(0,): "pass", (1,): "fail"}
    before = [t for t in rep["tensors"] if t["name"] in ("ln1", "attn.q", "attn.core", "attn")]
    assert before and all(t["status"] == "pass" for t in before)
    text = _cli("compare", recorded / "ref.tdump", recorded / "fault")
    assert "ln2 on rank 1 (of 2)" in text.stdout, text.stdout


def test_dataflow_origin_across_ranks(recorded):
    """Origins on the recorded data flow across ranks (docs/dumpsets.md §7.2): rank 1's ln2 is
    where the error is born (introduced), everything computed from it inherits it: rank 1's
    shards of the split tensors, the partial sum over both ranks, and through the all-reduce
    rank 0's replicas too. Once with the TP=1 reference's data flow, once with the set's own."""
    downstream = {("mlp.fc1", (0, 1)), ("mlp.act", (0, 1)), ("mlp.fc2.matmul", (0, 1)),
                  ("mlp.fc2", (0,)), ("mlp.fc2", (1,)), ("mlp", (0,)), ("mlp", (1,)),
                  ("<root>", (0,)), ("<root>", (1,))}
    for ref, cand in ((recorded / "ref.tdump", recorded / "fault"),
                      (recorded / "good", recorded / "fault")):
        out = _cli("compare", ref, cand, "--json", "-")
        assert out.returncode == 1, out.stderr
        rep = json.loads(out.stdout)
        assert rep["localisation"]["basis"] == "dataflow"
        assert [(o["name"], o["origin"], o["ranks"]) for o in rep["origins"]] == [
            ("ln2", "introduced", [1])], rep["origins"]
        assert rep["origins"][0]["reach"] == rep["origins"][0]["reach_failing"] == len(downstream)
        tensors = rep["tensors"]
        by = {(t["name"], tuple(t["ranks_cand"])): t for t in tensors}
        assert by[("ln2", (1,))]["origin"] == "introduced" and by[("ln2", (0,))]["status"] == "pass"
        for key in downstream:
            t = by[key]
            assert (t["status"], t["origin"], t["basis"]) == ("fail", "inherited", "dataflow"), key
        # The gathered mlp.fc1 was computed from both ranks' ln2; rank 0's mlp.fc2 replica from
        # the partial sum over both ranks (the all-reduce), not from its own rank alone.
        names = [(t["name"], tuple(t["ranks_cand"])) for t in tensors]
        assert {names[j] for j in by[("mlp.fc1", (0, 1))]["basis_pairs"]} == {("ln2", (0,)), ("ln2", (1,))}
        assert [names[j] for j in by[("mlp.fc2", (0,))]["basis_pairs"]] == [("mlp.fc2.matmul", (0, 1))]
    text = _cli("compare", recorded / "good", recorded / "fault")
    assert "ln2 on rank 1 (of 2)  introduced" in text.stdout, text.stdout


def test_layout_errors_are_clear(tmp_path):
    m = torch.nn.Linear(2, 2)
    with pytest.raises(driftscope.InvalidArgumentError, match="multiply to 4"):
        driftscope.torch.record(m, tmp_path / "s", rank=0, world_size=2, groups={"tp": 4})
    with pytest.raises(driftscope.InvalidArgumentError, match="rank 2 is not in 0 .. 1"):
        driftscope.torch.record(m, tmp_path / "s", rank=2, world_size=2)
    with pytest.raises(driftscope.InvalidArgumentError, match="not in the layout"):
        driftscope.torch.record(m, tmp_path / "s", rank=0, world_size=2, groups={"tp": 2},
                                shards={"*": "hidden@pp"})
    with pytest.raises(driftscope.InvalidArgumentError, match="both split and partial"):
        driftscope.torch.record(m, tmp_path / "s", rank=0, world_size=2, groups={"tp": 2},
                                shards={"*": "hidden@tp,+tp"})
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(driftscope.InvalidArgumentError, match="is a file"):
        driftscope.torch.record(m, tmp_path / "file", rank=0, world_size=1)


def test_explicit_ranks_without_torch_distributed(tmp_path):
    """Any framework (here: two recordings in one process) can write a set: rank= and
    world_size=, pipeline layout from a pp group, manifest by rank 0."""
    w = tp_block.full_weights()
    for rank in (1, 0):  # rank 0 last: it writes the manifest when it finishes
        block = tp_block.Block(w).eval()
        with torch.no_grad(), driftscope.torch.record(
                block, tmp_path / "pp", rank=rank, world_size=2, groups={"pp": 2},
                filter="ln1" if rank == 0 else "mlp*"):
            block(tp_block.inputs())
    m = sets.read_manifest(tmp_path / "pp" / sets.MANIFEST)
    assert m["order"] == "pipeline" and m["groups"] == {"pp": 2}
    assert [r["coords"] for r in m["ranks"]] == [{"pp": 0}, {"pp": 1}]
    stage1 = driftscope.open(tmp_path / "pp" / "rank-00001.tdump")
    assert stage1.metadata["ds.coords"] == "pp=1" and stage1.names()[0] == "mlp.fc1"


def test_manifest_reader_rejects_bad_sets(tmp_path):
    sets.write_manifest(tmp_path, world_size=2, groups={"tp": 2})
    with pytest.raises(driftscope.errors.Error, match="rank-00000.tdump"):
        sets.read_manifest(tmp_path)
    path = tmp_path / sets.MANIFEST
    m = json.loads(path.read_text())
    for mutate, msg in ((lambda m: m["ranks"][1].update(file="../x.tdump"), "'..'"),
                        (lambda m: m["ranks"][1].update(coords={"tp": 0}), "same coordinates"),
                        (lambda m: m.update(groups={"tp": 3}), "product of the group sizes"),
                        (lambda m: m.update(format="other"), "'format'")):
        bad = json.loads(json.dumps(m))
        mutate(bad)
        path.write_text(json.dumps(bad))
        with pytest.raises(driftscope.FormatError, match=msg):
            sets.read_manifest(tmp_path)


def test_annotate_axes_grammar():
    spec = sets.ShardSpec.parse
    assert sets.annotate_axes(None, 3, spec("hidden@tp")) == ["dim0", "dim1", "hidden@tp"]
    assert sets.annotate_axes(["b", "s", "h"], 3, spec("s@sp,+tp")) == ["b", "s@sp", "h+tp"]
    assert sets.annotate_axes(None, 2, spec("-2@tp")) == ["dim0@tp", "dim1"]
    assert sets.annotate_axes(None, 2, spec("a,b@tp")) == ["a", "b@tp"]
    for bad, msg in (("h@tp,k@tp", "splits at most one axis"), ("@tp", "not AXIS@GROUP"),
                     ("h@1x", "not a group name")):
        with pytest.raises(driftscope.InvalidArgumentError, match=msg):
            spec(bad)
    with pytest.raises(driftscope.InvalidArgumentError, match="no axis named"):
        sets.annotate_axes(["b", "s"], 2, spec("h@tp"))
    with pytest.raises(driftscope.InvalidArgumentError, match="2 axes for a tensor of rank 3"):
        sets.annotate_axes(None, 3, spec("a,b@tp"))
