"""Dump sets whose rank files or folders are symbolic links out of the set (issue 23 §6): the
manifest's names are checked by spelling (no '..', not absolute), so a link in the set's folder
read a dump from elsewhere and `verify` passed. Such a set is refused as traversal is: exit 2,
one line naming the file."""
from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

import driftscope
import driftscope.sets as sets

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.abspath(os.environ.get("DRIFTSCOPE_BIN", os.path.join(ROOT, "build", "dev", "driftscope")))

pytestmark = pytest.mark.skipif(not os.path.exists(BIN), reason=f"{BIN} not built")


def make_set(d, files=None):
    d.mkdir()
    names = files or [f"rank-{r:05d}.tdump" for r in range(2)]
    for r, name in enumerate(names):
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        meta = {"ds.rank": str(r), "ds.world_size": "2", "ds.coords": f"tp={r}"}
        with driftscope.Writer(str(d / name), meta=meta) as w:
            w.write("x", np.ones(4, np.float32))
    sets.write_manifest(str(d), world_size=2, groups={"tp": 2}, files=files) if files else \
        sets.write_manifest(str(d), world_size=2, groups={"tp": 2})
    return d


def run(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True)


def test_a_plain_set_verifies(tmp_path):
    s = make_set(tmp_path / "set")
    assert run("verify", str(s)).returncode == 0


def test_a_rank_file_linked_out_of_the_set_is_refused(tmp_path):
    s = make_set(tmp_path / "set")
    (tmp_path / "elsewhere").mkdir()
    os.replace(s / "rank-00001.tdump", tmp_path / "elsewhere" / "rank-00001.tdump")
    os.symlink(tmp_path / "elsewhere" / "rank-00001.tdump", s / "rank-00001.tdump")
    for verb in (["verify", str(s)], ["compare", str(s), str(s)], ["info", str(s)]):
        r = run(*verb)
        assert r.returncode == 2, (verb, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "rank-00001.tdump" in lines[0] and "leaves the set directory" in lines[0], r.stderr
        assert "Traceback" not in r.stderr


def test_a_folder_linked_out_of_the_set_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    s = tmp_path / "set"
    s.mkdir()
    os.symlink(outside, s / "ranks")
    for r in range(2):
        meta = {"ds.rank": str(r), "ds.world_size": "2", "ds.coords": f"tp={r}"}
        with driftscope.Writer(str(outside / f"rank-{r:05d}.tdump"), meta=meta) as w:
            w.write("x", np.ones(4, np.float32))
    sets.write_manifest(str(s), world_size=2, groups={"tp": 2})
    m = (s / "driftscope-set.json").read_text().replace('"rank-0', '"ranks/rank-0')
    (s / "driftscope-set.json").write_text(m)
    r = run("verify", str(s))
    assert r.returncode == 2 and "ranks/rank-00000.tdump" in r.stderr and "leaves the set directory" in r.stderr


def test_a_link_that_stays_inside_the_set_is_read(tmp_path):
    s = make_set(tmp_path / "set")
    (s / "real").mkdir()
    os.replace(s / "rank-00001.tdump", s / "real" / "r1.tdump")
    os.symlink("real/r1.tdump", s / "rank-00001.tdump")
    assert run("verify", str(s)).returncode == 0


def test_the_largest_set_is_read_and_one_rank_more_is_refused(tmp_path):
    """4,096 ranks (the spec's maximum since 2026-12-04; 65,536 could not be mapped by any
    reader): verified and compared with itself under a soft descriptor limit of 1,024, which the
    command raises. 4,097 is a one-line limit_exceeded error."""
    import resource

    n = 4096
    d = tmp_path / "big"
    d.mkdir()
    for r in range(n):
        meta = {"ds.rank": str(r), "ds.world_size": str(n), "ds.coords": f"dp={r}"}
        with driftscope.Writer(str(d / f"rank-{r:05d}.tdump"), meta=meta) as w:
            w.write("x", np.full(2, r, np.float32))
    sets.write_manifest(str(d), world_size=n, groups={"dp": n})
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))

    # Two open sets need 8,192 descriptors and more: the command raises its soft limit to the
    # hard one, which a machine may set lower (then only the one-set verbs are checked).
    both = hard == resource.RLIM_INFINITY or hard >= 2 * n + 256
    for args in (("verify", str(d)),) + ((("compare", str(d), str(d)),) if both else ()):
        p = subprocess.run([BIN, *args], capture_output=True, text=True, preexec_fn=low_limit,
                           timeout=600)
        assert p.returncode == 0, (args, p.stderr[-2000:])
    import json

    m = json.loads((d / "driftscope-set.json").read_text())
    m["world_size"] = n + 1
    m["groups"] = {"dp": n + 1}
    (d / "driftscope-set.json").write_text(json.dumps(m))
    p = run("verify", str(d))
    assert p.returncode == 2 and "limit_exceeded" in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr
