"""Replay of PyTorch models (issue 26 items 1-3; docs/howto/replay.md): output replay by forward
hooks, op replay on the reference's captured arguments, the one-pass isolation scan, attribution
and `python -m driftscope replay`. Real torch, real models, no mocks."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from driftscope._replay import attribution, core, isolation  # noqa: E402
from driftscope._replay.torch import TorchReplayable  # noqa: E402

HERE = Path(__file__).resolve().parent
TINY = str(HERE / "models" / "tiny_encoder_torch.py") + ":build"
# Every LayerNorm from block 2 on squares the massive activations in float16 on its own
# (tiny_encoder_torch.py): five independent overflows, of which a dump comparison sees one.
TINY_NORMS = ["encoder.layers.2.norm1", "encoder.layers.2.norm2", "encoder.layers.3.norm1",
              "encoder.layers.3.norm2", "encoder.norm"]


@pytest.fixture(scope="module")
def tiny():
    ref = TorchReplayable.load(TINY, "torch")
    cand = TorchReplayable.load(TINY, "torch-fp16")
    return ref, cand, ref.example_feeds()


def test_tiny_encoder_fp16_norm1_introduces_and_all_norms_remove_the_nan(tiny):
    ref, cand, feeds = tiny
    rep = core.replay(ref, cand, feeds, ["encoder.layers.2.norm1"])
    assert rep.plain["output"].nonfinite > 0 and rep.plain["output"].sse == float("inf")
    (op,) = rep.ops
    assert op.verdict == core.INTRODUCED  # the LayerNorm alone on float32's inputs overflows
    # The issue expected norm1 alone to remove >= 99%: it cannot, since norm2 of the same block
    # squares the same residual stream and overflows by itself (the scan below names it).
    assert rep.replays[0].share("output") == 0.0
    iso = isolation.isolate(ref, cand, feeds)
    assert [r.name for r in iso.introduced] == TINY_NORMS
    assert iso.runs == 2
    att = attribution.attribute(ref, cand, feeds, TINY_NORMS)
    assert att.together["output"] == 1.0  # NaN -> finite: 100% removed
    values = ref.capture(feeds, TINY_NORMS)
    out = cand.run(feeds, replace={n: values[n] for n in TINY_NORMS})
    assert float(abs(out["output"]).max()) < 1e3 and not (out["output"] != out["output"]).any()


class _Residual(torch.nn.Module):
    """x += 0.5 * Linear_k(tanh(x)), four blocks: a fault in one block's branch reaches the
    output along the residual stream, mostly untouched by the other branches."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(32, 32) for _ in range(4))

    def forward(self, x):
        for b in self.blocks:
            x = x + 0.5 * b(torch.tanh(x))
        return x


def test_attribution_ranks_two_weight_faults_and_adds_up():
    torch.manual_seed(0)
    net, x = _Residual().eval(), torch.randn(8, 32)
    bad = copy.deepcopy(net)
    with torch.no_grad():
        g = torch.Generator().manual_seed(1)
        bad.blocks[0].weight += 0.3 * torch.randn(32, 32, generator=g) / 32 ** 0.5
        bad.blocks[2].weight += 0.15 * torch.randn(32, 32, generator=g) / 32 ** 0.5
    ref, cand = TorchReplayable.from_module(net, x), TorchReplayable.from_module(bad, x)
    feeds = ref.example_feeds()
    # Given smaller first: the ranking, not the order given, puts the larger first.
    att = attribution.attribute(ref, cand, feeds, ["blocks.2", "blocks.0"])
    assert att.ranked("output") == ["blocks.0", "blocks.2"]
    s = att.shares["output"]
    assert s["blocks.0"] > 0.5 and 0.1 < s["blocks.2"] < 0.5
    assert att.together["output"] > 0.999
    assert abs(s["blocks.0"] + s["blocks.2"] + att.remainder("output") - 1.0) \
        <= attribution.ADDITIVE_TOLERANCE
    assert att.additive("output") is True
    assert att.runs == 4  # the plain run, one per origin, one with both
    capped = attribution.attribute(ref, cand, feeds, ["blocks.0", "blocks.2"], max_replays=1)
    assert capped.origins == ["blocks.0"] and capped.cut == ["blocks.2"] and capped.runs == 3


def test_isolate_names_a_second_fault_hidden_behind_the_first_in_minilm(bert):
    model, ids, mask = bert
    bad = copy.deepcopy(model)
    first, second = "encoder.layer.1.intermediate.dense", "encoder.layer.4.output.dense"
    with torch.no_grad():
        g = torch.Generator().manual_seed(2)
        for name, scale in ((first, 0.5), (second, 0.4)):
            w = bad.get_submodule(name).weight
            w += scale * w.std() * torch.randn(w.shape, generator=g)
    example = {"input_ids": ids, "attention_mask": mask}
    ref = TorchReplayable.from_module(model, example)
    cand = TorchReplayable.from_module(bad, example)
    feeds = ref.example_feeds()
    iso = isolation.isolate(ref, cand, feeds)
    assert [r.name for r in iso.introduced] == [first, second]
    row = iso.introduced[1]
    # Its own error is smaller than what it carries in the plain run: two dumps call it
    # inherited, the scan names it.
    assert row.own.rel < row.plain.rel
    assert iso.scanned > 100


def _cli(*args, cwd):
    from pkgenv import env_with_package

    env = env_with_package()
    return subprocess.run([sys.executable, "-m", "driftscope", "replay", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=600)


def test_cli_unknown_tensor_is_one_line_and_exit_2(tmp_path):
    r = _cli("--model", TINY, "--candidate", "torch-fp16", "--at", "encoder.layers.2.norm",
             "--json", "out.json", cwd=tmp_path)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert lines == ["driftscope replay: error: no tensor 'encoder.layers.2.norm' in the model; "
                     "nearest: encoder.layers.2.norm2, encoder.layers.2.norm1, "
                     "encoder.layers.3.norm2"]
    assert json.loads((tmp_path / "out.json").read_text())["candidate"] == "torch-fp16"


def test_cli_end_to_end_json_and_markdown(tmp_path):
    r = _cli("--model", TINY, "--candidate", "torch-fp16", "--at", "encoder.layers.2.norm1",
             "--isolate", "--json", "r.json", "--markdown", "r.md", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "encoder.layers.2.norm1: introduced" in r.stdout
    assert "5 introduce error beyond tolerance" in r.stdout
    j = json.loads((tmp_path / "r.json").read_text())
    assert j["schema"] == "driftscope.replay.report/1"
    assert j["ops"][0]["verdict"] == "introduced"
    assert j["replays"][0]["outputs"]["output"]["removed"] == 0.0
    assert [r["name"] for r in j["isolation"]["introduced"]] == TINY_NORMS
    assert j["outputs"]["output"]["sse"] == "inf"
    md = (tmp_path / "r.md").read_text()
    assert md.startswith("# driftscope replay:") and "## Isolation scan" in md
    assert r"encoder\.layers\.2\.norm1: introduced" in md


def test_cli_without_at_attributes_compare_origins(tmp_path):
    r = _cli("--model", TINY, "--candidate", "torch-fp16", "--json", "-", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout[r.stdout.index("{\n"):])
    att = j["attribution"]
    assert att["source"] == "compare's origins" and att["origins"] == ["encoder.layers.2.norm1"]
    assert att["outputs"]["output"]["remainder"] == 1.0


# docs/howto/replay.md's commands are run by test_replay_cli.py (torch and ONNX sections).
