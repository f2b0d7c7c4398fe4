"""The PyTorch FP32 fallback recipe (issue 33, item 5).

* A verified float16 fallback keeping modules that return a tuple and a dict (one taking a
  keyword tensor): what is verified is the printed recipe itself, run on a freshly built model,
  and the recipe executed here on a fresh model gives the verified numbers.
* The recipe's hooks cast every tensor of positional and keyword arguments, and of outputs that
  are tuples, lists, dicts, namedtuples, dataclasses and transformers' ModelOutput.
"""

from __future__ import annotations

import collections
import dataclasses
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import driftscope  # noqa: E402
from driftscope import _guard as G  # noqa: E402

MODELS = Path(__file__).resolve().parent / "models"


def _build(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem + "_fresh", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.build()


@pytest.fixture(scope="module")
def structured():
    r = driftscope.guard(f"{MODELS / 'torch_structured_outputs.py'}:build",
                         backends=["torch-fp16"], runs=1)
    return r, json.loads(r.to_json())


def test_a_verified_fallback_of_tuple_and_dict_modules_runs_as_printed(structured):
    r, data = structured
    row = data["backends"][1]
    assert row["status"] == "NUMERICAL_INSTABILITY"
    fb = row["fallback"]
    assert fb["verified"], fb["summary"]
    assert sorted(n["node"] for n in fb["nodes"]) == ["a", "b"]
    assert [n["op_type"] for n in fb["nodes"]] == ["TupleOut", "DictOut"]
    # The ladder keeps them in bfloat16 (float16's overflow fits its range; issue 28 item 5):
    # the same hooks, with bfloat16 for float32.
    assert fb["precision"] == "bfloat16"
    for n in fb["nodes"]:
        assert "output was bfloat16" in n["evidence"]
    recipe = fb["recipe"]
    assert "register_forward_pre_hook(bfloat16_on_entry, with_kwargs=True)" in recipe
    # What the text report prints is that code, line for line.
    text = r.to_text()
    assert "\n".join("    " + ln for ln in recipe.rstrip("\n").split("\n")) in text

    # The printed recipe, pasted after building the model, gives the verified numbers.
    model, x = _build(MODELS / "torch_structured_outputs.py")
    with torch.no_grad():
        ref = model(x).numpy()
    scope = {"model": model}
    exec(recipe, scope)  # noqa: S102 - the recipe is the product under test
    with torch.no_grad():
        out = scope["model"](x.half())
    assert out.dtype == torch.float16 and torch.isfinite(out).all()
    got = G._metrics.judge("output", ref, out.float().numpy(), G.Thresholds(), 0)
    assert got.status == "PASS"
    assert got.cosine == pytest.approx(fb["cosine_after"], rel=1e-9, abs=0)


def test_the_backend_builds_the_variant_by_running_the_recipe_text(tmp_path):
    """TorchBackend.load executes recipe() itself: a recipe that fails fails the variant (it
    can never be verified), and one that works is the variant that runs."""
    spec = f"{MODELS / 'torch_structured_outputs.py'}:build"

    class Marked(G.backends.torch.TorchBackend):
        def recipe(self, model, nodes):
            return super().recipe(model, nodes) + "model.recipe_ran = list(" + repr(
                list(nodes)) + ")\n"

    class Broken(G.backends.torch.TorchBackend):
        def recipe(self, model, nodes):
            return super().recipe(model, nodes) + "raise RuntimeError('as printed')\n"

    s = Marked("m", "", "float16").load(spec, str(tmp_path), 0, keep_float32=["a", "b"])
    assert s.model.recipe_ran == ["a", "b"]
    assert set(s.float32_evidence(["a", "b"])) == set()  # nothing ran yet: no proof
    x = G.backends.torch.torch_leaves(G.backends.torch.torch_example(spec, 0)[1])["input"].numpy()
    assert np.isfinite(s.run({"input": x})["output"]).all()
    assert set(s.float32_evidence(["a", "b"])) == {"a", "b"}
    with pytest.raises(RuntimeError, match="as printed"):
        Broken("b", "", "float16").load(spec, str(tmp_path), 0, keep_float32=["a"])
    with pytest.raises(ValueError, match="no module 'nope'"):
        G.BACKENDS["torch-fp16"].load(spec, str(tmp_path), 0, keep_float32=["nope"])


@dataclasses.dataclass
class Pair:
    y: "torch.Tensor"
    count: "torch.Tensor"
    tag: str = "pair"


Named = collections.namedtuple("Named", "y extra")


class Seen(torch.nn.Module):
    """Returns what it was given, in every shape of output, and notes the dtypes inside."""

    def __init__(self, kind):
        super().__init__()
        self.kind, self.dtypes = kind, []

    def forward(self, x, *, scale, steps=3):
        self.dtypes = [x.dtype, scale.dtype]
        y = x * scale
        n = torch.tensor([steps])
        if self.kind == "dataclass":
            return Pair(y, n)
        if self.kind == "namedtuple":
            return Named(y, [y, {"n": n}])
        if self.kind == "modeloutput":
            from transformers.modeling_outputs import BaseModelOutput

            return BaseModelOutput(last_hidden_state=y, hidden_states=(y, y))
        return [y, {"n": n, "y": y}]


@pytest.mark.parametrize("kind", ["dataclass", "namedtuple", "list", "modeloutput"])
def test_the_recipe_casts_every_tensor_of_arguments_and_outputs(kind):
    if kind == "modeloutput":
        pytest.importorskip("transformers")
    model = torch.nn.ModuleDict({"m": Seen(kind)})
    scope = {"model": model}
    exec(G.BACKENDS["torch-bf16"].recipe("", ["m"]), scope)  # noqa: S102
    x = torch.ones(2, 3, dtype=torch.bfloat16)
    scale = torch.full((3,), 2.0, dtype=torch.bfloat16)
    kwargs = {"scale": scale}
    out = scope["model"]["m"](x, **kwargs)
    assert model["m"].dtypes == [torch.float32, torch.float32]  # keyword tensors too
    assert x.dtype == scale.dtype == kwargs["scale"].dtype == torch.bfloat16  # not mutated
    from driftscope.torch import _flat

    leaves = _flat(out)[0]
    floats = [t for _, t in leaves if t.is_floating_point()]
    ints = [t for _, t in leaves if not t.is_floating_point()]
    assert floats and all(t.dtype == torch.bfloat16 for t in floats)
    assert all(t.dtype == torch.int64 for t in ints)
    assert type(out).__name__ == {"dataclass": "Pair", "namedtuple": "Named", "list": "list",
                                  "modeloutput": "BaseModelOutput"}[kind]
    if kind == "dataclass":
        assert out.tag == "pair"
    if kind == "modeloutput":
        assert out[0].dtype == out.last_hidden_state.dtype == torch.bfloat16
