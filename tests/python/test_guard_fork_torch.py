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


# Imports transformers (its lazy top level only, about a second) but builds a plain network: the
# server imports transformers' modeling code for any entry point whose source imports
# transformers. Each process that imports this file notes whether that code was already loaded.
FRAMEWORK = '''
import os
import sys

with open(os.environ["WHO_LOG"], "a") as f:
    f.write(f"{os.getpid()} {os.getppid()} {'transformers.modeling_utils' in sys.modules}\\n")

import torch
import transformers  # noqa: F401


def build():
    return torch.nn.Linear(4, 2).eval(), (torch.randn(3, 4),)
'''


@pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(os, "fork"),
                    reason="the fork server is Linux's")
def test_a_transformers_entry_points_children_find_its_modeling_code_loaded(tmp_path, monkeypatch):
    """Before: every child imported transformers.modeling_utils again (~2.7 CPU-seconds each,
    torchao's quantizer integration among it)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import driftscope

    (tmp_path / "framework.py").write_text(FRAMEWORK)
    log = tmp_path / "who.log"
    monkeypatch.setenv("WHO_LOG", str(log))
    monkeypatch.delenv("DRIFTSCOPE_GUARD_NO_FORK", raising=False)
    r = driftscope.guard(f"{tmp_path / 'framework.py'}:build", backends=["torch"], runs=1,
                         probe="never")
    assert r["torch"].error is None, r["torch"].error
    rows = [ln.split() for ln in log.read_text().splitlines()]
    children = [row for row in rows if row[0] != str(os.getpid())]
    assert children and {row[2] for row in children} == {"True"}, (os.getpid(), rows)


def test_what_the_server_imports_for_an_entry_point_is_read_from_its_source(tmp_path):
    from driftscope._guard._forker import model_preload

    (tmp_path / "hf.py").write_text("import torch\nfrom transformers import GPT2Model\n")
    (tmp_path / "hf_inside.py").write_text("def build():\n    import transformers as T\n")
    (tmp_path / "plain.py").write_text('import torch  # not transformers\n'
                                       'import transformers_like\nmy_transformers = 1\n'
                                       '"""\nimport transformers\n"""\n')
    assert model_preload(f"{tmp_path / 'hf.py'}:build") == ["transformers.modeling_utils"]
    assert model_preload(f"{tmp_path / 'hf_inside.py'}:build") == ["transformers.modeling_utils"]
    assert model_preload(f"{tmp_path / 'plain.py'}:build") == []
    assert model_preload(f"{tmp_path / 'missing.py'}:build") == []
    (tmp_path / "broken.py").write_text("import transformers\ndef (:\n")
    assert model_preload(f"{tmp_path / 'broken.py'}:build") == []
    assert model_preload("no_such_module_here:build") == []
    # A file of several entry points (tests/python/models/torch_export_models.py): the other
    # entry points' imports do not count, a helper the entry point calls does.
    (tmp_path / "several.py").write_text(
        "import torch\n\ndef gpt2():\n    from transformers import GPT2Model\n\n"
        "def plain():\n    return torch.nn.Linear(2, 2), torch.zeros(1, 2)\n\n"
        "def _helper():\n    import transformers\n\ndef built():\n    return _helper()\n")
    several = tmp_path / "several.py"
    assert model_preload(f"{several}:plain") == []
    assert model_preload(f"{several}:gpt2") == ["transformers.modeling_utils"]
    assert model_preload(f"{several}:built") == ["transformers.modeling_utils"]
    # Through a module of the user's that this process has loaded, on a line of several
    # imports (tests/python/models/tiny_llm.py imports transformers); MODULE:FUNCTION too.
    models = str(Path(__file__).resolve().parent / "models")
    sys.path.insert(0, models)
    try:
        import tiny_llm  # noqa: F401

        (tmp_path / "indirect.py").write_text("import os, tiny_llm\n")
        assert model_preload(f"{tmp_path / 'indirect.py'}:build") == \
            ["transformers.modeling_utils"]
        assert model_preload("tiny_llm:llama") == ["transformers.modeling_utils"]
    finally:
        sys.path.remove(models)


def test_backends_that_run_a_pytorch_model_elsewhere_preload_torch_and_their_runtime():
    """Before: onnx-*, tflite-* and executorch preloaded nothing; each child imported torch,
    its runtime (and executorch's partitioner, ~3.9 CPU-seconds) again."""
    from driftscope._guard.backends import registry as B

    for name, b in B.BACKENDS.items():
        if name.startswith(("onnx-", "tflite-")):
            assert b.preload[0] == "torch" and set(b.inner.preload) <= set(b.preload), name
    assert "onnxruntime" in B.BACKENDS["onnx-ort"].preload
    assert "executorch.backends.xnnpack.partition.xnnpack_partitioner" in \
        B.BACKENDS["executorch"].preload
