"""compare on a real local Ray cluster (issue 13 item 4): the report equals the local one, from
Python and from `driftscope compare --engine ray`; a worker killed mid-run is retried into the same
complete report, and without retries the run is a clear error, never a partial report."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")

import driftscope  # noqa: E402
from driftscope._compare import ray as _ray  # noqa: E402
from driftscope._compare.api import Report, options  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.abspath(os.environ.get("DRIFTSCOPE_BIN", os.path.join(ROOT, "build", "dev", "driftscope")))


@pytest.fixture(scope="module")
def cluster():
    """A local cluster of one node with 2 worker CPUs, its files in a short temp dir (Ray's
    socket paths must stay under 108 bytes); shut down and removed after the module."""
    tmp = tempfile.mkdtemp(prefix="dsray")
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=tmp, logging_level="ERROR",
             log_to_driver=False, configure_logging=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    d = tmp_path_factory.mktemp("dumps")
    rng = np.random.default_rng(7)
    with driftscope.Writer(d / "ref.tdump", salt=1) as a, driftscope.Writer(d / "cand.tdump", salt=2) as b:
        for i in range(40):
            x = rng.standard_normal(200 + 50 * i).astype(np.float32)
            y = x * np.float32(1 + (1e-3 if i >= 25 else 1e-7))
            if i == 33:
                y[5] = np.nan
            a.write(f"block.{i}", x, op_type="Linear")
            b.write(f"block.{i}", y, op_type="Linear")
    return d / "ref.tdump", d / "cand.tdump"


def test_report_equals_the_local_one(cluster, dumps):
    ref, cand = dumps
    for kw in ({}, {"details": True, "min_cosine": 0.9999}, {"stop_at_first": True}):
        local = driftscope.compare(ref, cand, **kw)
        on_ray = driftscope.compare(ref, cand, engine="ray", ray_parts=3, **kw)
        assert on_ray.to_json() == local.to_json(), kw
        assert on_ray.verdict == local.verdict != "pass"
    with pytest.raises(driftscope.InvalidArgumentError, match="engine='spark'"):
        driftscope.compare(ref, cand, engine="spark")


def _cli(*args, **env):
    e = dict(os.environ, DRIFTSCOPE_PYTHON=sys.executable, NO_COLOR="1", **env)
    e["PYTHONPATH"] = os.pathsep.join(
        p for p in (os.path.dirname(os.path.dirname(driftscope.__file__)), e.get("PYTHONPATH")) if p)
    return subprocess.run([BIN, "compare", *map(str, args)], capture_output=True, text=True,
                          env=e, timeout=120)


def test_cli_engine_ray_equals_local(cluster, dumps, tmp_path):
    ref, cand = dumps
    local = _cli(ref, cand, "--json", tmp_path / "local.json", "--min-sqnr", "70.5")
    remote = _cli(ref, cand, "--json", tmp_path / "ray.json", "--min-sqnr", "70.5",
                  "--engine", "ray", "--ray-address", cluster, "--ray-parts", "4")
    assert remote.returncode == local.returncode == 3, remote.stderr
    assert remote.stdout == local.stdout
    assert (tmp_path / "ray.json").read_bytes() == (tmp_path / "local.json").read_bytes()
    assert json.loads((tmp_path / "ray.json").read_text())["verdict"] == "silent_failure"
    # No cluster there: one clear line, exit 2, no report.
    none = _cli(ref, cand, "--json", tmp_path / "none.json", "--engine", "ray",
                "--ray-address", "127.0.0.1:1")
    assert none.returncode == 2 and "cannot connect to a Ray cluster" in none.stderr, none.stderr
    assert not (tmp_path / "none.json").exists()
    bad = _cli(ref, cand, "--ray-parts", "2")
    assert bad.returncode == 2 and "need --engine ray" in bad.stderr


def _parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    return int(stat[stat.rindex(b")") + 2:].split()[1])  # the field after the state


def _ours(pid: int) -> bool:
    """Whether `pid` descends from this test process: the workers of the cluster ray.init
    started here, never those of another test run's cluster on the same machine."""
    me = os.getpid()
    try:
        while pid > 1:
            pid = _parent_of(pid)
            if pid == me:
                return True
    except (OSError, ValueError, IndexError):
        pass
    return False


def _kill_one_running_task(done: threading.Event, killed: list) -> None:
    """SIGKILLs the first worker process of this test's cluster found running a measuring task
    (Ray titles it ray::_measure_part while it runs)."""
    while not done.is_set() and not killed:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if cmd.startswith(b"ray::_measure_part") and _ours(int(pid)):
                os.kill(int(pid), signal.SIGKILL)
                killed.append(int(pid))
                return
        time.sleep(0.05)


def _run_with_a_kill(ref, cand, retries):
    done, killed, out = threading.Event(), [], {}
    killer = threading.Thread(target=_kill_one_running_task, args=(done, killed))
    killer.start()
    try:
        out["report"] = Report(_ray.compare_on_ray(ref, cand, options({}), parts=2,
                                                   max_retries=retries, _task_delay_s=2.0))
    except driftscope.Error as e:
        out["error"] = e
    finally:
        done.set()
        killer.join()
    assert killed, "no measuring task was running to be killed"
    return out


def test_killed_worker_is_retried_into_the_complete_report(cluster, dumps):
    ref, cand = dumps
    out = _run_with_a_kill(ref, cand, retries=3)
    assert "error" not in out, out.get("error")
    assert out["report"].to_json() == driftscope.compare(ref, cand).to_json()


def test_killed_worker_without_retries_is_an_error_never_a_partial_report(cluster, dumps):
    ref, cand = dumps
    out = _run_with_a_kill(ref, cand, retries=0)
    assert "report" not in out
    msg = str(out["error"])
    assert "failed after 0 retries" in msg and "no report" in msg, msg


def test_cluster_howto_runs_as_written(cluster, tmp_path, monkeypatch):
    from test_howtos import HOWTO, run_page

    monkeypatch.setenv("RAY_ADDRESS", cluster)
    ran = run_page(HOWTO / "cluster.md", tmp_path)
    assert ran.count("python") == 2 and len(ran) == 4, ran


# ---- dump sets (docs/dumpsets.md; docs/howto/cluster.md "Dump sets") ----------------------------

@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    """A TP=1 reference and a TP=2 set (test_dumpsets' MLP) whose rank 1 recorded a wrong input
    and a wrong shard of a gathered activation, and a faultless TP=2 set."""
    from test_dumpsets import model, reference, tp_set

    d = tmp_path_factory.mktemp("sets")
    x, w1, w2 = model()
    reference(str(d / "ref.tdump"), x, w1, w2)
    bad = x.copy()
    bad[0, 0] += 1.0

    def fault(r, name, arr):
        if r == 1 and name == "embed":
            return bad
        return arr * np.float32(1.01) if (r == 1 and name == "mlp.act") else arr
    tp_set(str(d / "tp2-fault"), x, w1, w2, fault)
    tp_set(str(d / "tp2"), x, w1, w2)
    return d


def _leftovers(d):
    return sorted(n for n in os.listdir(d) if n.startswith("driftscope-"))


def test_set_report_equals_the_local_one(cluster, sets, tmp_path):
    ref, fault = sets / "ref.tdump", sets / "tp2-fault"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    local = _cli(ref, fault, "--json", tmp_path / "local.json")
    remote = _cli(ref, fault, "--json", tmp_path / "ray.json", "--engine", "ray",
                  "--ray-address", cluster, "--ray-parts", "3", "--ray-scratch", scratch)
    assert remote.returncode == local.returncode == 1, remote.stderr
    assert remote.stdout == local.stdout and "First divergence: embed on rank 1 (of 2)" in local.stdout
    rep = (tmp_path / "ray.json").read_bytes()
    assert rep == (tmp_path / "local.json").read_bytes()
    # embed is rank 1's alone; the gathered mlp.act fails in rank 1's shard only, which each
    # shard measured against its slice of the reference names (docs/dumpsets.md §7.1).
    assert json.loads(rep)["first_divergence_ranks"] == [1]
    assert json.loads(rep)["affected_ranks"] == [1]
    act = next(t for t in json.loads(rep)["tensors"] if t["name"] == "mlp.act")
    assert act["status"] == "fail" and act["shard_check"] == "shards" and act["ranks"] == [1]
    assert os.listdir(scratch) == []  # the logical dumps' directory is gone
    # Python, sets on both sides, reversed, a filter (applied before the shards are put
    # together) and the default scratch directory (next to the candidate set, removed).
    before = _leftovers(sets)
    for args, kw in (((sets / "tp2", fault), {}), ((fault, ref), {"filter": "mlp.*"}),
                     ((sets / "tp2", sets / "tp2"), {})):
        local = driftscope.compare(*args, **kw)
        on_ray = driftscope.compare(*args, engine="ray", ray_parts=2, **kw)
        assert on_ray.to_json() == local.to_json(), (args, kw)
        assert on_ray.to_text(width=100) == local.to_text(width=100)
        assert on_ray.exit_code == local.exit_code
    assert _leftovers(sets) == before == []


def test_set_with_a_killed_worker_is_retried_into_the_complete_report(cluster, sets):
    ref, fault = sets / "ref.tdump", sets / "tp2-fault"
    out = _run_with_a_kill(ref, fault, retries=3)
    assert "error" not in out, out.get("error")
    assert out["report"].to_json() == driftscope.compare(ref, fault).to_json()
    assert _leftovers(sets) == []


def test_bad_set_is_one_line_before_any_cluster_work(sets, tmp_path):
    from test_dumpsets import manifest, write_manifest

    write_manifest(str(tmp_path / "bad"), manifest(world_size=3))
    # No cluster at that address: the manifest's error, not a connection error, proves the set
    # was refused first.
    p = _cli(sets / "ref.tdump", tmp_path / "bad", "--json", tmp_path / "r.json",
             "--engine", "ray", "--ray-address", "127.0.0.1:1")
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert lines[0].startswith("driftscope: error: bad_value: candidate '") and "groups" in lines[0], lines
    assert not (tmp_path / "r.json").exists() and _leftovers(tmp_path) == []
    nowhere = _cli(sets / "ref.tdump", sets / "tp2", "--engine", "ray", "--ray-address",
                   "127.0.0.1:1", "--ray-scratch", tmp_path / "missing")
    assert nowhere.returncode == 2 and "--ray-scratch" in nowhere.stderr, nowhere.stderr
    local = _cli(sets / "ref.tdump", sets / "tp2", "--ray-scratch", tmp_path)
    assert local.returncode == 2 and "need --engine ray" in local.stderr
