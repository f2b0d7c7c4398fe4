"""`driftscope guard --model FILE.py:FN` for a language model, and `driftscope llm-compare
--html`'s growth chart (issue 31 items 3 and 4; docs/howto/llm.md "Guard" and "Heatmap"): the tiny
hash-initialised Llama of tests/python/models/tiny_llm.py (2 layers, hidden 64, vocab 128)."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import driftscope  # noqa: E402
import tiny_llm  # noqa: E402
from pkgenv import env_with_package  # noqa: E402

from driftscope import _guard as G  # noqa: E402
from driftscope import llm  # noqa: E402
from driftscope._guard._command import cli_main  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "tests" / "python" / "models" / "tiny_llm.py"
LLAMA = f"{MODELS}:llama"


def _schema_check(data):
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(data, json.loads((ROOT / "docs" / "guard-schema.json").read_text()))


@pytest.fixture
def faulty_fp16(monkeypatch):
    """A planted fault in one runtime: the `hf-fp16` backend runs a copy of the model changed
    by `fault(model)` (by default layer L's attention output projection scaled by 1.5). The
    guard reaches the recorder through driftscope.recorders.api at call time, so the patched
    record() is what it runs."""
    import driftscope.recorders.llm as R

    real = R.record

    def plant(layer, fault=None):
        def record(model, prompt, path, **kw):
            if kw.get("backend") == "hf-fp16":
                model = copy.deepcopy(model)
                with torch.no_grad():
                    if fault is None:
                        model.model.layers[layer].self_attn.o_proj.weight.mul_(1.5)
                    else:
                        fault(model.model.layers[layer])
            return real(model, prompt, path, **kw)

        monkeypatch.setattr(R, "record", record)

    return plant


def test_every_backend_of_the_table_runs_and_the_honest_ones_pass(tmp_path):
    rep = driftscope.guard(LLAMA, samples=1)
    assert rep.family == "llm" and rep.reference == "hf"
    # every backend of the recorder's table, in its order, the reference first
    assert [b.name for b in rep.backends] == ["hf"] + [b for b in llm.BACKENDS if b != "hf"]
    ran = {b.name: b for b in rep.backends if b.status != G.UNAVAILABLE}
    assert {"hf-bf16", "hf-fp16", "hf-compile"} <= set(ran)
    for name in ("hf-bf16", "hf-fp16", "hf-compile"):
        row = rep[name]
        assert row.status == G.PASS, (name, row.worst.detail)
        info = rep.rows_llm[name]
        assert info["steps"] == 8 and info["flipped_steps"] == 0
        assert info["max_kl"] < 1e-6 and info["probe"] is None  # passing rows are not probed
    assert rep.rows_llm["hf-bf16"]["max_kl"] > 1e-8  # really another precision
    for b in rep.backends:  # what cannot run here says why, never a pass
        if b.status == G.UNAVAILABLE:
            assert b.reason and not b.reason.startswith(b.name + ":")
    assert rep.exit_code == 0 and rep.verdict == "pass"
    data = json.loads(rep.to_json())
    _schema_check(data)
    assert data["family"] == "llm" and data["llm"]["new_tokens"] == 8
    assert data["llm"]["prompts"] == [tiny_llm.PROMPT] and data["llm"]["prompts_given"]
    assert data["backends"][0]["llm"] is None
    assert data["backends"][1]["llm"]["prompts"][0]["first_flip"] is None
    md = rep.to_markdown()
    assert "| hf-bf16 | PASS |" in md
    assert "hf-compile" in rep.to_html()  # the guard's page renders this report too


def test_a_tight_kl_threshold_degrades_bfloat16_but_not_float16():
    # measured on this prompt: bfloat16 max KL 4.1e-7, float16 7.9e-9
    rep = driftscope.guard(LLAMA, backends=["hf-bf16", "hf-fp16"], max_kl=5e-8)
    assert rep["hf-bf16"].status == G.PRECISION_DEGRADATION
    assert "max KL" in rep["hf-bf16"].worst.detail and "> 5e-08" in rep["hf-bf16"].worst.detail
    assert rep["hf-fp16"].status == G.PASS
    assert rep.exit_code == 1
    # the failing row is probed; no recorded tensor crosses bfloat16's own tolerance
    probe = rep.rows_llm["hf-bf16"]["probe"]
    assert probe is not None and probe["first_crossing"] is None
    assert any("hf-bf16 probe" in f and "no recorded tensor crosses" in f for f in rep.findings)
    low = driftscope.guard(LLAMA, backends=["hf-fp16"], min_topk_overlap=1.0, top_k=50)
    assert low["hf-fp16"].status in (G.PASS, G.PRECISION_DEGRADATION)
    assert low.llm["top_k"] == 50 and low.llm["min_topk_overlap"] == 1.0


@pytest.mark.parametrize("layer, flip_step", [(0, 2), (1, 5)])
def test_planted_fault_in_one_runtime_is_a_flip_probed_at_its_layer(faulty_fp16, layer,
                                                                    flip_step):
    faulty_fp16(layer)
    rep = driftscope.guard(LLAMA, backends=["hf-fp16", "hf-bf16"])
    row = rep["hf-fp16"]
    assert row.status == G.ARGMAX_FLIP and rep.exit_code == 1
    assert rep["hf-bf16"].status == G.PASS  # the fault is in one runtime only
    assert f"first token flip at step {flip_step} of prompt 1" in row.worst.detail
    probe = rep.rows_llm["hf-fp16"]["probe"]
    assert probe["first_crossing"] == f"step.0/model.layers.{layer}.self_attn.o_proj"
    assert probe["first_crossing_layer"] == layer and probe["first_crossing_step"] == 0
    assert probe["flip_step"] == flip_step and probe["flip_layer_index"] == layer
    text = rep.to_text()
    assert text.startswith("DEGRADED: hf-fp16 ARGMAX_FLIP")
    assert "heatmap" not in rep.rows_llm["hf-fp16"]  # no --out: nothing written
    assert (f"hf-fp16 probe (prompt 1, llm-compare): first tensor beyond tolerance "
            f"step.0/model.layers.{layer}.self_attn.o_proj (step 0, layer {layer})") in text
    _schema_check(json.loads(rep.to_json()))


def test_planted_large_fault_is_a_degradation_and_a_nan_is_a_silent_failure(faulty_fp16,
                                                                            tmp_path):
    faulty_fp16(1, lambda layer: layer.mlp.down_proj.weight.mul_(1e6))
    rep = driftscope.guard(LLAMA, backends=["hf-fp16"], out=tmp_path / "o")
    row = rep["hf-fp16"]
    # every step flips and the distribution moves: the worse status, both reasons named
    assert row.status == G.PRECISION_DEGRADATION and rep.exit_code == 1
    assert "8 of 8 steps flipped" in row.worst.detail and "> 0.01" in row.worst.detail
    probe = rep.rows_llm["hf-fp16"]["probe"]
    assert probe["first_crossing"] == "step.0/model.layers.1.mlp.down_proj"
    assert probe["first_crossing_layer"] == 1 and probe["flip_step"] == 0
    # with --out, the probed prompt's growth chart beside the dumps, the fault's cell marked
    page = tmp_path / "o" / "hf-fp16" / "prompt0.html"
    assert rep.rows_llm["hf-fp16"]["heatmap"] == str(page)
    assert f"the growth chart over steps x layers of prompt 1 is {page}" in rep.to_text()
    cells = _Cells()
    cells.feed(page.read_text())
    assert [(layer, c["data-step"]) for layer, cells_ in cells.rows for c in cells_
            if "first-fail" in (c.get("class") or "")] == [("1", "0")]
    _schema_check(json.loads(rep.to_json()))
    faulty_fp16(0, lambda layer: layer.mlp.down_proj.weight.__setitem__((0, 0), float("nan")))
    rep = driftscope.guard(LLAMA, backends=["hf-fp16"])
    assert rep["hf-fp16"].status == G.NUMERICAL_INSTABILITY and rep.exit_code == 3
    assert rep.rows_llm["hf-fp16"]["max_kl"] is None  # not finite: null in the JSON
    assert rep.rows_llm["hf-fp16"]["probe"]["first_crossing_layer"] == 0
    _schema_check(json.loads(rep.to_json()))


def test_checkpoint_folder_and_generated_prompts(tmp_path):
    model, _ = tiny_llm.llama()
    model.save_pretrained(tmp_path / "ckpt")
    fn = tmp_path / "ckpt_fn.py"
    fn.write_text(f"def build():\n    return {str(tmp_path / 'ckpt')!r}\n")
    out = tmp_path / "out"
    rep = driftscope.guard(f"{fn}:build", backends=["hf-fp16"], samples=2, steps=4, seed=3,
                           out=out)
    assert rep.llm["source"] == "a checkpoint folder" and not rep.llm["prompts_given"]
    assert [len(p) for p in rep.llm["prompts"]] == [8, 8] and rep.samples == 2
    assert rep.inputs_source == "synthetic"
    assert rep["hf-fp16"].status == G.PASS and rep.rows_llm["hf-fp16"]["steps"] == 8
    # --out keeps the dumps: the reference's and the candidate's per prompt
    assert sorted(p.name for p in (out / "hf").iterdir()) == ["prompt0.tdump", "prompt1.tdump"]
    with driftscope.open(out / "hf-fp16" / "prompt1.tdump") as d:
        assert d.metadata["llm.teacher"] == "prompt1.tdump"


def test_a_causal_lm_with_tensors_stays_a_pytorch_model_unless_an_llm_backend_is_named(
        tmp_path):
    """examples/guard_architectures.py's gpt2 and llama return (causal LM, {"input_ids":
    tensor}) for the torch-* and onnx-* backends (guard.md section 11): still the PyTorch
    guard's; naming a generation backend makes the same entry point a language model."""
    import contextlib

    from driftscope._guard import _llm

    fn = tmp_path / "tensors.py"
    # the torch backends' children import this file afresh: it finds tiny_llm itself
    fn.write_text(f"import sys\nsys.path.insert(0, {str(MODELS.parent)!r})\n"
                  "import torch, tiny_llm\n"
                  "def build():\n"
                  "    model, prompt = tiny_llm.llama()\n"
                  "    return model, {'input_ids': torch.tensor([prompt])}\n")
    entry = f"{fn}:build"
    assert _llm.detect(entry, 0, ValueError, contextlib.nullcontext) is None
    found = _llm.detect(entry, 0, ValueError, contextlib.nullcontext, llm_named=True)
    assert found.prompts == [tiny_llm.PROMPT]
    rep = driftscope.guard(entry, backends=["hf-fp16"])
    assert rep.family == "llm" and rep.llm["prompts"] == [tiny_llm.PROMPT]
    assert rep["hf-fp16"].status == G.PASS
    rep = driftscope.guard(entry, backends=["torch-fp16"], runs=1, probe="never")
    assert rep.family == "torch" and [b.name for b in rep.backends] == ["torch", "torch-fp16"]
    assert rep["torch-fp16"].status not in (G.RUNTIME_ERROR, G.UNAVAILABLE)


BAD_FNS = """
import torch, transformers as T
from driftscope.reference import hash_init_
import tiny_llm

def base_model():
    m = T.LlamaModel(tiny_llm.llama_config())  # no LM head: cannot generate
    hash_init_(m)
    return m, [1, 2, 3]

def number():
    return 42

def not_a_folder():
    return "/nonexistent/checkpoint"

def linear():
    return torch.nn.Linear(4, 2), torch.zeros(1, 4)
"""


@pytest.mark.parametrize("args, message", [
    (["--model", "{f}:base_model"], "LlamaModel is not a causal LM"),
    (["--model", "{f}:number"], "the function returned an int: expected (model, inputs)"),
    (["--model", "{f}:not_a_folder"], "which is not a checkpoint folder"),
    (["--model", f"{MODELS}:llama_long_prompt"],
     "prompt 1 (70 tokens) and 8 new tokens need 77 positions; the model's context is 64"),
    # Refused before the entry point runs, so both backend lists are offered.
    (["--model", LLAMA, "--backends", "ort-fp16"], "'ort-fp16' runs onnx models, not torch ones"),
    (["--model", LLAMA, "--backends", "hf-bf61"], "for a language model: hf, hf-bf16, hf-fp16"),
    (["--model", LLAMA, "--steps", "0"], "steps=0: the new tokens per prompt"),
    (["--model", LLAMA, "--data", "x.npz"], "--data: not supported for a language model"),
    (["--model", LLAMA, "--min-topk-overlap", "1.5"], "min_topk_overlap=1.5"),
    (["--model", "{f}:linear", "--max-kl", "0.1"], "max_kl: a threshold of a language model"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capfd, monkeypatch, args, message):
    (tmp_path / "bad.py").write_text(BAD_FNS)
    monkeypatch.chdir(tmp_path)
    code = cli_main([a.format(f=tmp_path / "bad.py") for a in args] + ["--no-progress"])
    out, err = capfd.readouterr()
    lines = [ln for ln in err.splitlines() if ln.startswith("driftscope guard")]
    assert code == 2, (out, err)
    assert len(lines) == 1 and "Traceback" not in err, err
    assert message in lines[0], lines[0]


def test_cli_writes_every_format_and_a_bad_model_is_exit_2_without_traceback(tmp_path, capfd,
                                                                            monkeypatch):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "driftscope", "guard", *args],
                              cwd=tmp_path, env=env_with_package(), capture_output=True,
                              text=True, timeout=600)

    p = run("--model", LLAMA, "--backends", "hf-fp16", "--json", "g.json", "--markdown", "g.md",
            "--no-progress")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("PASS: every available backend matches hf")
    assert "teacher-forced with hf's tokens" in p.stdout
    data = json.loads((tmp_path / "g.json").read_text())
    _schema_check(data)
    assert data["exit_code"] == 0 and data["backends"][1]["llm"]["steps"] == 8
    assert "| hf-fp16 | PASS |" in (tmp_path / "g.md").read_text()
    # The refusal through the same entry point in this process: a second subprocess re-imported
    # torch and transformers (~6 CPU-seconds) to print one line.
    from driftscope.__main__ import main

    monkeypatch.chdir(tmp_path)
    capfd.readouterr()
    code = main(["guard", "--model", f"{MODELS}:llama_long_prompt", "--no-progress"])
    err = capfd.readouterr().err
    assert code == 2 and "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("driftscope")]
    assert len(lines) == 1 and "the model's context is 64" in lines[0], err


# -- the heatmap of llm-compare --html ------------------------------------------------------------

class _Cells(HTMLParser):
    """The heatmap's rows (data-layer) and cells (data-step, data-value, class), and every
    reference the page makes to another resource."""

    def __init__(self):
        super().__init__()
        self.rows, self.heads, self.external, self.marks, self.in_map = [], [], [], [], False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and "heatmap" in (a.get("class") or ""):
            self.in_map = True
        if tag in ("script", "link", "img", "iframe") or any(
                k in ("src", "href") for k in a):
            self.external.append((tag, a))
        if tag == "p" and a.get("class") == "mark":
            self.marks.append(a)
        if not self.in_map:
            return
        if tag == "th" and "data-step" in a:
            self.heads.append(a)
        if tag == "tr" and "data-layer" in a:
            self.rows.append((a["data-layer"], []))
        if tag == "td" and self.rows:
            self.rows[-1][1].append(a)

    def handle_endtag(self, tag):
        if tag == "table":
            self.in_map = False


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("heat")
    model, prompt = tiny_llm.llama()
    faulty, _ = tiny_llm.llama_o_proj_fault()  # layer 1's o_proj x1.5
    llm.record(model, prompt, d / "ref.tdump", new_tokens=8)
    llm.record(faulty, prompt, d / "fault.tdump", teacher=d / "ref.tdump")
    return d


def test_llm_compare_html_heatmap_marks_the_flip_and_the_first_failing_layer(pair, tmp_path):
    before = (pair / "ref.tdump").read_bytes()
    code = llm.compare_main([str(pair / "ref.tdump"), str(pair / "fault.tdump"),
                             "--html", str(tmp_path / "r.html")])
    assert code == 1
    page = (tmp_path / "r.html").read_text()
    p = _Cells()
    p.feed(page)
    assert not p.external, p.external  # self-contained: nothing fetched
    assert [r[0] for r in p.rows] == ["0", "1", "logits"]  # rows layers, then the logits
    assert all(len(cells) == 8 for _, cells in p.rows)  # columns steps
    rep = llm.compare(pair / "ref.tdump", pair / "fault.tdump")
    flips = [h["data-step"] for h in p.heads if "flip" in (h.get("class") or "")]
    assert flips == [str(rep.first_flip)] == ["5"]
    values = {layer: [float(c["data-value"]) for c in cells] for layer, cells in p.rows}
    # layer 0 is before the fault: bit-identical; layer 1 carries it at every step
    assert values["0"] == [0.0] * 8
    assert all(v > 1e-3 for v in values["1"]) and all(v > 0 for v in values["logits"])
    marked = [(layer, c["data-step"]) for layer, cells in p.rows for c in cells
              if "first-fail" in (c.get("class") or "")]
    assert marked == [("1", "0"), ("1", "5")]  # the first crossing, and the layer at the flip
    assert [(m["data-layer"], m["data-step"]) for m in p.marks] == [("1", "0"), ("1", "5")]
    assert (pair / "ref.tdump").read_bytes() == before
    if shutil.which(os.environ.get("CHROMIUM", "chromium")):
        from test_html_report import RecordingProxy, browse, page_requests

        proxy = RecordingProxy()
        try:
            dom = browse("file://" + str(tmp_path / "r.html"), str(tmp_path / "profile"),
                         "--dump-dom", proxy=proxy)
        finally:
            proxy.close()
        assert not page_requests(proxy.requests)  # offline in a real browser too
        assert 'class="heatmap"' in dom and 'class="flip first-fail"' in dom


def test_heatmap_of_a_logits_only_backend_uses_the_cache_keys(pair, tmp_path):
    from driftscope.recorders import llm_heatmap

    # a dump without layer outputs, as hf-compile records: logits and cache only
    with driftscope.open(pair / "fault.tdump") as src, \
            driftscope.Writer(tmp_path / "lean.tdump", dict(src.metadata)) as w:
        for name in src.names():
            if name.endswith("/logits") or "/cache." in name:
                w.write(name, src.get(name))
    g = llm_heatmap.growth(str(pair / "ref.tdump"), str(tmp_path / "lean.tdump"), 8)
    assert g["source"] == "cache keys" and g["layers"] == [0, 1, None]
    # the fault is after layer 1's k_proj: its cache keys match; the logits do not
    assert g["cells"][1] == [0.0] * 8 and all(v > 0 for v in g["cells"][2])


def test_llm_compare_html_refuses_an_input_as_output(pair, capfd):
    before = (pair / "fault.tdump").read_bytes()
    code = llm.compare_main([str(pair / "ref.tdump"), str(pair / "fault.tdump"),
                             "--html", str(pair / "fault.tdump")])
    assert code == 2
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "is the input file" in err
    assert (pair / "fault.tdump").read_bytes() == before
