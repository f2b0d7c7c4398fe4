"""The guard's fork server imports PyTorch for the torch* backends (Backend.preload; docs/howto/
guard.md, "Every backend runs in its own process"): each backend child is forked from a server
that already has torch loaded, and its own OpenMP pool still works (the server never ran an op,
so none was started before the fork)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pkgenv import env_with_package  # noqa: E402

# build() notes its process, that process's parent and whether the parent has libtorch mapped;
# forward runs a matrix product large enough for ATen to split over the OpenMP pool.
WHO = '''
import os

import torch

with open(f"/proc/{os.getppid()}/maps") as m:
    loaded = "libtorch" in m.read()
with open(os.environ["WHO_LOG"], "a") as f:
    f.write(f"{os.getpid()} {os.getppid()} {loaded} {torch.get_num_threads()}\\n")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(512, 512)
        self.b = torch.nn.Linear(512, 8)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def build():
    return Net().eval(), (torch.randn(256, 512),)
'''


@pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(os, "fork"),
                    reason="the fork server and /proc are Linux's")
def test_torch_backends_are_forked_from_a_server_that_imported_torch(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "who.py").write_text(WHO)
    log = tmp_path / "who.log"
    env = env_with_package({**os.environ, "WHO_LOG": str(log)})
    env.pop("DRIFTSCOPE_GUARD_NO_FORK", None)
    proc = subprocess.Popen([sys.executable, "-m", "driftscope", "guard", "--model",
                             "who.py:build", "--backends", "torch,torch-bf16", "--probe", "never",
                             "--json", "-"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=900)
    assert proc.returncode in (0, 1), err
    report = json.loads(out)
    assert {b["name"]: b.get("error") for b in report["backends"]} == \
        {"torch": None, "torch-bf16": None}, report["backends"]
    rows = [ln.split() for ln in log.read_text().splitlines()]
    children = [r for r in rows if r[0] != str(proc.pid)]
    # One row per backend child at least, every one forked from one server (not from the guard)
    # that had libtorch loaded before the child imported the model.
    assert len({r[0] for r in children}) >= 2, rows
    assert len({r[1] for r in children}) == 1 and str(proc.pid) not in {r[1] for r in children}
    assert {r[2] for r in children} == {"True"}, (proc.pid, rows)
    assert {r[3] for r in children} == {str(torch_threads())}, rows


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()
