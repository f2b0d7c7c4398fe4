"""Generations of a causal LM recorded step by step and compared (issue 31, docs/howto/llm.md):
real transformers, a tiny hash-initialised Llama (2 layers, hidden 64, vocab 128)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))

import driftscope  # noqa: E402
import tiny_llm  # noqa: E402

from driftscope import llm  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
STEPS = 8


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The float32 reference, and the planted fault free-running and teacher-forced."""
    d = tmp_path_factory.mktemp("llm")
    model, prompt = tiny_llm.llama()
    faulty, _ = tiny_llm.llama_o_proj_fault()
    llm.record(model, prompt, d / "ref.tdump", new_tokens=STEPS)
    llm.record(faulty, prompt, d / "free.tdump", new_tokens=STEPS)
    llm.record(faulty, prompt, d / "forced.tdump", teacher=d / "ref.tdump")
    return d, model, prompt


def _meta(path):
    with driftscope.open(path) as d:
        return dict(d.metadata)


def _ids(text):
    return [int(t) for t in text.split(",")] if text else []


def test_recording_names_steps_cache_entries_and_tokens(runs):
    d, model, prompt = runs
    meta = _meta(d / "ref.tdump")
    assert _ids(meta["llm.prompt_ids"]) == prompt
    tokens = _ids(meta["llm.tokens"])
    assert len(tokens) == STEPS and _ids(meta["llm.fed"]) == tokens[:-1]
    # the same greedy tokens as the library's own generate()
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=STEPS, do_sample=False)
    assert out[0, len(prompt):].tolist() == tokens
    with driftscope.open(d / "ref.tdump") as dump:
        names = set(dump.names())
        assert {"step.0/model.layers.1.self_attn.o_proj", "step.7/model.layers.1",
                "step.3/logits", "step.3/cache.layers.1.key"} <= names
        # the prefill writes the prompt's positions; each later step one position
        assert dump.get("step.0/cache.layers.0.value").shape == (1, 2, len(prompt), 16)
        assert dump.get("step.5/cache.layers.0.key").shape == (1, 2, 1, 16)
        assert int(np.argmax(dump.get("step.4/logits"))) == tokens[4]
    assert "reference.init" in meta  # the hash initialiser's record travels with the run


@pytest.mark.parametrize("backend, dtype", [("hf-bf16", "bf16"), ("hf-fp16", "f16")])
def test_float32_vs_bfloat16_names_the_flip_or_says_none(runs, tmp_path, backend, dtype):
    d, model, prompt = runs
    llm.record(model, prompt, tmp_path / "bf16.tdump", backend=backend, teacher=d / "ref.tdump")
    assert next(model.parameters()).dtype == torch.float32  # the caller's model is not cast
    with driftscope.open(tmp_path / "bf16.tdump") as dump:
        assert dump.record("step.0/logits").dtype == dtype
        assert dump.record("step.0/model.layers.1.self_attn.o_proj").dtype == dtype
    rep = llm.compare(d / "ref.tdump", tmp_path / "bf16.tdump")
    assert rep.compared_steps == STEPS and rep.teacher_forced
    assert all(s["kl"] > 0 for s in rep.steps)  # really another precision
    text = rep.to_text()
    if rep.first_flip is None:
        assert f"no greedy token flipped in {STEPS} steps" in text
    else:
        assert f"first flipped token: step {rep.first_flip}" in text
        assert "first layer beyond tolerance at step" in text


def test_planted_o_proj_fault_is_named_at_step_0_layer_1(runs):
    d, _, _ = runs
    rep = llm.compare(d / "ref.tdump", d / "forced.tdump")
    assert rep.first_crossing["name"] == "step.0/model.layers.1.self_attn.o_proj"
    assert rep.first_crossing["step"] == 0
    assert rep.first_flip is not None
    assert rep.flip_layer["name"] == f"step.{rep.first_flip}/model.layers.1.self_attn.o_proj"
    assert rep.verdict == "token_flip" and rep.exit_code == 1
    # layer 1's cache entries are written before o_proj: not where the error is
    whole = driftscope.compare(d / "ref.tdump", d / "forced.tdump", filter="step.0/*")
    status = {t.name: t.status for t in whole.tensors}
    assert status["step.0/cache.layers.1.key"] == "pass"
    assert status["step.0/model.layers.0"] == "pass"


def test_wrong_rope_base_is_named_at_step_0_with_the_cache_keys_it_rotated(runs, tmp_path):
    import transformers as T

    from driftscope.reference import hash_init_

    d, _, prompt = runs
    cand = T.LlamaForCausalLM(tiny_llm.llama_config(rope_theta=500.0))  # the default is 10000
    hash_init_(cand)
    llm.record(cand, prompt, tmp_path / "rope.tdump", teacher=d / "ref.tdump")
    rep = llm.compare(d / "ref.tdump", tmp_path / "rope.tdump")
    assert rep.first_crossing["name"] == "step.0/model.rotary_emb.0"
    status = {t.name: t.status for t in driftscope.compare(
        d / "ref.tdump", tmp_path / "rope.tdump", filter="step.0/* step.1/*").tensors}
    # k_proj is computed before the rotation, the cache holds rotated keys; values never rotate
    assert status["step.0/model.layers.0.self_attn.k_proj"] == "pass"
    assert status["step.0/cache.layers.0.key"] == "fail"
    assert status["step.0/cache.layers.0.value"] == "pass"
    assert status["step.1/cache.layers.0.key"] == "fail"


def test_teacher_forcing_keeps_every_step_comparable(runs):
    d, _, _ = runs
    ref_tokens = _ids(_meta(d / "ref.tdump")["llm.tokens"])
    free = llm.compare(d / "ref.tdump", d / "free.tdump")
    forced = llm.compare(d / "ref.tdump", d / "forced.tdump")
    flip = free.first_flip
    assert flip is not None and flip < STEPS - 1 and forced.first_flip == flip
    # free-running: after the flip the two runs read different tokens
    assert not free.teacher_forced
    assert not free.steps[flip + 1]["inputs_identical"]
    # teacher-forced: the candidate was fed the reference's tokens at every step ...
    assert _ids(_meta(d / "forced.tdump")["llm.fed"]) == ref_tokens[:-1]
    assert forced.teacher_forced and all(s["inputs_identical"] for s in forced.steps)
    with driftscope.open(d / "ref.tdump") as r, driftscope.open(d / "forced.tdump") as c, \
            driftscope.open(d / "free.tdump") as f:
        for k in range(STEPS):  # ... so each step's embedded input is bit-identical
            assert np.array_equal(r.get(f"step.{k}/model.embed_tokens"),
                                  c.get(f"step.{k}/model.embed_tokens")), k
        assert not np.array_equal(r.get(f"step.{flip + 1}/model.embed_tokens"),
                                  f.get(f"step.{flip + 1}/model.embed_tokens"))
    assert free.same_inputs["steps"] == flip + 1 and forced.same_inputs["steps"] == STEPS
    assert forced.same_inputs["top1_agreement"] == (STEPS - 1) / STEPS
    assert f"over the {flip + 1} steps with identical inputs: top-1 agreement" in free.to_text()
    # and later steps measure the fault, not a different context
    for k in range(flip + 1, STEPS):
        assert forced.steps[k]["kl"] < free.steps[k]["kl"] / 5, k


@pytest.mark.parametrize("family", ["gpt2", "qwen2"])
def test_other_families_record_the_library_generation(tmp_path, family):
    import transformers as T

    from driftscope.reference import hash_init_

    if family == "gpt2":
        model = T.GPT2LMHeadModel(T.GPT2Config(vocab_size=128, n_positions=64, n_embd=64,
                                               n_layer=2, n_head=4, bos_token_id=None,
                                               eos_token_id=None))
        layer = "transformer.h.1.attn.c_proj"
    else:
        model = T.Qwen2ForCausalLM(T.Qwen2Config(
            vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
            bos_token_id=None, eos_token_id=None))
        layer = "model.layers.1.self_attn.o_proj"
    hash_init_(model)
    prompt = tiny_llm.PROMPT
    meta = llm.record(model, prompt, tmp_path / "g.tdump", new_tokens=4)
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=4, do_sample=False)
    assert _ids(meta["llm.tokens"]) == out[0, len(prompt):].tolist()
    with driftscope.open(tmp_path / "g.tdump") as dump:
        assert f"step.3/{layer}" in dump.names()
        assert dump.get("step.3/cache.layers.1.key").shape[-2] == 1
    with pytest.raises(driftscope.errors.InvalidArgumentError, match="context is 64"):
        llm.record(model, list(range(60)), tmp_path / "x.tdump", new_tokens=6)


def test_torch_compile_backend_records_logits_and_cache(runs, tmp_path):
    d, model, prompt = runs
    meta = llm.record(model, prompt, tmp_path / "c.tdump", backend="hf-compile", new_tokens=3)
    assert meta["llm.intermediates"].startswith("logits and cache only")
    with driftscope.open(tmp_path / "c.tdump") as dump:
        names = set(dump.names())
    assert "step.2/logits" in names and "step.2/cache.layers.1.value" in names
    assert not any("self_attn" in n for n in names)
    ref = _ids(_meta(d / "ref.tdump")["llm.tokens"])
    assert _ids(meta["llm.tokens"]) == ref[:3]
    rep = llm.compare(d / "ref.tdump", tmp_path / "c.tdump")
    assert rep.compared_steps == 3 and rep.first_flip is None and rep.first_crossing is None


def test_teacher_as_a_token_list_and_api_errors(runs, tmp_path):
    d, model, prompt = runs
    ref = _ids(_meta(d / "ref.tdump")["llm.tokens"])
    faulty, _ = tiny_llm.llama_o_proj_fault()
    meta = llm.record(faulty, prompt, tmp_path / "t.tdump", teacher=ref[:5])
    assert _ids(meta["llm.fed"]) == ref[:4] and meta["llm.teacher"] == "tokens"
    with pytest.raises(driftscope.errors.InvalidArgumentError, match="outside the model's vocab"):
        llm.record(model, prompt + [128], tmp_path / "x.tdump", new_tokens=2)
    with pytest.raises(driftscope.errors.InvalidArgumentError, match="is not this prompt"):
        llm.record(model, prompt[:-1], tmp_path / "x.tdump", teacher=d / "ref.tdump")
    with pytest.raises(driftscope.errors.InvalidArgumentError, match="the teacher has only 5"):
        llm.record(model, prompt, tmp_path / "x.tdump", new_tokens=6, teacher=ref[:5])
    assert not (tmp_path / "x.tdump").exists()


@pytest.mark.parametrize("at", [3, 6])  # the common steps named by includes / by excludes
def test_candidate_stopping_at_eos_compares_the_common_steps(runs, tmp_path, at):
    d, model, prompt = runs
    tokens = _ids(_meta(d / "ref.tdump")["llm.tokens"])
    assert tokens[at] not in tokens[:at]
    llm.record(model, prompt, tmp_path / "eos.tdump", new_tokens=STEPS, eos=tokens[at])
    meta = _meta(tmp_path / "eos.tdump")
    assert meta["llm.steps"] == str(at + 1)
    assert meta["llm.stopped"] == f"eos (token {tokens[at]}) at step {at}"
    rep = llm.compare(d / "ref.tdump", tmp_path / "eos.tdump")
    assert rep.compared_steps == at + 1 and rep.first_flip is None and rep.first_crossing is None
    assert rep.unmatched.startswith(f"steps {at + 1}..{STEPS - 1} of ref.tdump have no "
                                    f"candidate step")
    assert "eos" in rep.unmatched and rep.verdict == "steps_differ" and rep.exit_code == 1


def _py(*args, cwd):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(driftscope.__file__).parents[1]), str(ROOT / "tests" / "python" / "models")]))
    return subprocess.run([sys.executable, "-m", "driftscope", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def test_cli_record_and_compare(runs, tmp_path):
    d, _, _ = runs
    model_fn = str(ROOT / "tests/python/models/tiny_llm.py")
    p = _py("record", "llm", "--model", f"{model_fn}:llama_o_proj_fault", "--backend", "hf",
            "--teacher", str(d / "ref.tdump"), "-o", "cand.tdump", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "8 steps" in p.stdout
    p = _py("llm-compare", str(d / "ref.tdump"), "cand.tdump", "--json", "r.json", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert "first layer beyond tolerance at step" in p.stdout
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["first_crossing"]["name"] == "step.0/model.layers.1.self_attn.o_proj"
    assert len(data["steps"]) == STEPS


@pytest.mark.parametrize("args, message", [
    (["record", "llm", "--model", "{m}:llama_long_prompt", "--new-tokens", "4", "-o", "x.tdump"],
     "the prompt (70 tokens) and 4 new tokens need 73 positions; the model's context is 64"),
    (["record", "llm", "--model", "{m}:llama", "--new-tokens", "4", "--backend", "ort",
      "--onnx", "missing.onnx", "-o", "x.tdump"], "--onnx missing.onnx: no such file"),
    (["record", "llm", "--model", "{m}:llama", "--new-tokens", "4", "--backend",
      "llamacpp-q8_0", "-o", "x.tdump"], "llamacpp-q8_0: "),
    (["record", "llm", "--model", "{m}:llama", "--teacher", "{ref}", "-o", "{ref}"],
     "is the input file"),
    (["llm-compare", "{ref}", "{plain}"], "not a generation dump"),
    (["llm-compare", "{ref}", "{m}"], "not a TDUMP file"),
])
def test_bad_input_is_one_line_and_exit_2(runs, tmp_path, capfd, monkeypatch, args, message):
    """Through `python -m driftscope`'s entry point in this process (test_cli_record_and_compare
    runs the command line end to end): a subprocess per case re-imported torch and
    transformers, ~6 CPU-seconds each."""
    from driftscope.__main__ import main

    d, _, _ = runs
    m = str(ROOT / "tests/python/models/tiny_llm.py")
    before = (d / "ref.tdump").read_bytes()
    with driftscope.Writer(tmp_path / "plain.tdump") as w:
        w.write("step.0/logits", np.zeros(4, np.float32))
    monkeypatch.chdir(tmp_path)
    capfd.readouterr()
    code = main([a.format(m=m, ref=d / "ref.tdump", plain=tmp_path / "plain.tdump")
                 for a in args])
    out, err = capfd.readouterr()
    assert code == 2, (out, err)
    lines = [l for l in err.splitlines() if l.startswith("driftscope")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert message.lower() in lines[0].lower(), lines[0]
    assert not (tmp_path / "x.tdump").exists()
    assert (d / "ref.tdump").read_bytes() == before  # an input is never overwritten


def test_howto_page_runs(tmp_path, monkeypatch):
    """docs/howto/llm.md: its sh lines through the driftscope command (record is forwarded to
    python -m driftscope), its python blocks, and its `python -m driftscope` lines."""
    import shutil

    sys.path.insert(0, str(ROOT / "tests" / "python"))
    from test_howtos import HOWTO, blocks, run_page

    for f in ("tiny_llm.py", "tiny_llm_faults.py"):
        shutil.copy(ROOT / "tests/python/models" / f, tmp_path / f)
    if os.environ.get("DRIFTSCOPE_BIN"):  # a worktree without its own build uses this one
        monkeypatch.setenv("PATH", os.pathsep.join(
            [os.path.dirname(os.environ["DRIFTSCOPE_BIN"]), os.environ.get("PATH", "")]))
    # The first `record` and `guard` lines and python block run through the command
    # (python -c); the later ones through the same entry point in this process (a subprocess
    # each re-imported torch and transformers).
    ran = run_page(HOWTO / "llm.md", tmp_path, in_process=("record", "guard", "python"))
    assert len([r for r in ran if r.startswith("driftscope record llm")]) >= 3
    assert len([r for r in ran if r.startswith("driftscope llm-compare")]) == 9
    assert len([r for r in ran if "--reference64" in r]) == 3
    assert len([r for r in ran if "--backend ort" in r or "--backend openvino" in r]) == 3
    assert ran.count("python") >= 2
    assert (tmp_path / "report.json").exists()
