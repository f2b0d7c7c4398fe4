"""Generations on ONNX Runtime and OpenVINO (issue 31; docs/howto/llm.md): the tiny
hash-initialised Llama (2 layers, hidden 64) exported once by driftscope.llm.export_onnx, no
optimum; a planted fault in layer 1's KV-cache write named at the right step, layer and cache
entry on both runtimes with no map; names across runtimes and families (recorders/llm_names.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))

import driftscope  # noqa: E402
import tiny_llm  # noqa: E402
from tiny_llm_faults import plant_cache_write_fault  # noqa: E402

from driftscope import llm  # noqa: E402
from driftscope.recorders import llm_names  # noqa: E402

STEPS = 6


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("llm_rt")
    model, prompt = tiny_llm.llama()
    llm.record(model, prompt, d / "ref.tdump", new_tokens=STEPS)
    info = llm.export_onnx(model, d / "step.onnx")
    assert info["layers"] == 2
    plant_cache_write_fault(d / "step.onnx", d / "fault.onnx")
    return d, model, prompt


def _meta(path):
    with driftscope.open(path) as dump:
        return dict(dump.metadata)


def _pairs(ref, cand, step):
    rep = driftscope.compare(ref, cand, filter=f"step.{step}/*", allow_unpaired=True)
    return {t["name"]: t["status"] for t in rep.tensors}


@pytest.mark.parametrize("backend", ["ort", "openvino"])
def test_runtime_generation_matches_transformers_layer_by_layer(runs, tmp_path, backend):
    if backend == "openvino":
        pytest.importorskip("openvino")
    d, model, prompt = runs
    out = tmp_path / f"{backend}.tdump"
    # free-running: the runtime picks its own tokens, and they are transformers' tokens
    meta = llm.record(model, prompt, out, backend=backend, new_tokens=STEPS,
                      onnx=d / "step.onnx")
    assert meta["llm.tokens"] == _meta(d / "ref.tdump")["llm.tokens"]
    assert meta["backend"] == backend and meta["llm.export"] == "given: step.onnx"
    rep = llm.compare(d / "ref.tdump", out)
    assert rep.verdict == "pass" and rep.first_flip is None, rep.to_text()
    assert rep.same_inputs["max_kl"] < 1e-10
    assert rep.names["map_a"] == [] and rep.names["map_b"] == []  # same names: none renamed
    pairs = _pairs(d / "ref.tdump", out, 3)
    # the cache entries written at that step and the logits, in every runtime
    for name in ("step.3/cache.layers.0.key", "step.3/cache.layers.1.value", "step.3/logits"):
        assert pairs.get(name) == "pass", (name, pairs)
    with driftscope.open(out) as dump:
        assert dump.get("step.3/cache.layers.1.key").shape == (1, 2, 1, 16)
        assert dump.get("step.0/cache.layers.1.key").shape == (1, 2, len(prompt), 16)
    # every module of every layer pairs with transformers' module output by name
    for layer in (0, 1):
        for mod in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                    "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
                    "input_layernorm", "post_attention_layernorm", "mlp", "self_attn", ""):
            name = f"step.3/model.layers.{layer}" + (f".{mod}" if mod else "")
            assert pairs.get(name) == "pass", (name, sorted(pairs)[:20])
    assert meta["observer_effect"] == "none" or "differ by up to" in meta["observer_effect"]
    assert "every node output" in meta["llm.intermediates"]
    if backend == "openvino":
        assert meta["openvino.inference_precision"] == "f32"


@pytest.mark.parametrize("backend", ["ort", "openvino"])
def test_planted_cache_write_fault_named_at_its_step_layer_and_cache_entry(runs, tmp_path,
                                                                          backend):
    if backend == "openvino":
        pytest.importorskip("openvino")
    d, model, prompt = runs
    out = tmp_path / f"fault_{backend}.tdump"
    llm.record(model, prompt, out, backend=backend, teacher=d / "ref.tdump",
               onnx=d / "fault.onnx")
    rep = llm.compare(d / "ref.tdump", out)  # no map, no flags
    assert rep.verdict != "pass"
    # positions 0..6 are the prompt (step 0), step 1 writes 7, step 2 writes 8: the first
    # faulty write
    assert rep.first_crossing["step"] == 2, rep.to_text()
    assert ".layers.1." in rep.first_crossing["name"], rep.to_text()
    assert rep.first_cache["name"] == "step.2/cache.layers.1.key", rep.to_text()
    text = rep.to_text()
    assert "first KV-cache entry beyond tolerance: step.2/cache.layers.1.key" in text
    for step in (0, 1):  # before the fault everything agrees, cache and logits included
        pairs = _pairs(d / "ref.tdump", out, step)
        assert pairs and all(s == "pass" for s in pairs.values()), pairs
    pairs = _pairs(d / "ref.tdump", out, 2)
    assert pairs["step.2/cache.layers.0.key"] == "pass"
    assert pairs["step.2/cache.layers.1.value"] == "pass"
    # the module-level name of the first tensor: layer 1's attention (k_proj, before the
    # write, passes)
    assert rep.first_crossing["name"].startswith("step.2/model.layers.1.self_attn")
    assert pairs["step.2/model.layers.1.self_attn.k_proj"] == "pass"
    assert pairs["step.2/model.layers.0"] == "pass"


def test_cli_records_ort_and_refuses_bad_exports(runs, tmp_path, capfd, monkeypatch):
    d, _, _ = runs
    model_file = str(Path(tiny_llm.__file__))
    env_py = [sys.executable, "-m", "driftscope"]
    p = subprocess.run(env_py + ["record", "llm", "--model", f"{model_file}:llama", "--backend",
                                 "ort", "--onnx", str(d / "fault.onnx"), "--teacher",
                                 str(d / "ref.tdump"), "-o", str(tmp_path / "o.tdump")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    p = subprocess.run(env_py + ["llm-compare", str(d / "ref.tdump"), str(tmp_path / "o.tdump")],
                       capture_output=True, text=True)
    assert p.returncode == 1 and "step.2/cache.layers.1.key" in p.stdout, p.stdout + p.stderr
    # an ONNX file that is not a generation step: one line, exit 2
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    onnx.save(helper.make_model(g), str(tmp_path / "relu.onnx"))
    (tmp_path / "junk.onnx").write_bytes(b"\x08\x07not a protobuf at all" * 10)
    # The refusals through the same entry point in this process: a subprocess each re-imported
    # torch and transformers (~6 CPU-seconds apiece) to print one line; the command line itself
    # is run end to end above.
    from driftscope.__main__ import main

    monkeypatch.chdir(tmp_path)
    capfd.readouterr()
    for extra, message in (
            (["--backend", "openvino", "--onnx", str(tmp_path / "junk.onnx")],
             "not a valid ONNX file"),
            (["--backend", "ort", "--onnx", str(tmp_path / "relu.onnx")],
             "not a generation step exported by driftscope.llm.export_onnx"),
            (["--backend", "hf", "--onnx", str(d / "step.onnx")], "only for the ort and openvino"),
            (["--backend", "llamacpp-q8_0"], "llama-cpp-python is not installed")):
        code = main(["record", "llm", "--model", f"{model_file}:llama", "--new-tokens", "2",
                     "-o", str(tmp_path / "x.tdump")] + extra)
        err = capfd.readouterr().err
        lines = [l for l in err.splitlines() if l.startswith("driftscope")]
        assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
        assert message in lines[0], lines[0]
        assert not (tmp_path / "x.tdump").exists()


# -- names across runtimes without a map ----------------------------------------------------------

def _gguf_name(name):
    """transformers Llama paths as llama.cpp's GGUF tensor names (gguf-py's tensor map)."""
    import re

    table = [(r"model\.layers\.(\d+)\.self_attn\.q_proj", r"blk.\1.attn_q"),
             (r"model\.layers\.(\d+)\.self_attn\.k_proj", r"blk.\1.attn_k"),
             (r"model\.layers\.(\d+)\.self_attn\.v_proj", r"blk.\1.attn_v"),
             (r"model\.layers\.(\d+)\.self_attn\.o_proj", r"blk.\1.attn_output"),
             (r"model\.layers\.(\d+)\.mlp\.gate_proj", r"blk.\1.ffn_gate"),
             (r"model\.layers\.(\d+)\.mlp\.up_proj", r"blk.\1.ffn_up"),
             (r"model\.layers\.(\d+)\.mlp\.down_proj", r"blk.\1.ffn_down"),
             (r"model\.layers\.(\d+)\.input_layernorm", r"blk.\1.attn_norm"),
             (r"model\.layers\.(\d+)\.post_attention_layernorm", r"blk.\1.ffn_norm"),
             (r"model\.layers\.(\d+)$", r"blk.\1"), (r"model\.norm$", "output_norm"),
             (r"model\.embed_tokens$", "token_embd"), (r"lm_head$", "output"),
             (r"cache\.layers\.(\d+)\.key", r"cache_k_l\1"),
             (r"cache\.layers\.(\d+)\.value", r"cache_v_l\1")]
    step, _, rest = name.partition("/")
    for pat, rep in table:
        new = re.sub("^" + pat + "$" if pat.endswith("$") else "^" + pat + "$", rep, rest)
        if new != rest:
            return f"{step}/{new}"
    return name


def test_gguf_named_generation_pairs_layer_by_layer_with_no_map(runs, tmp_path):
    """A generation whose tensors carry GGUF names (blk.N.attn_q, cache_k_lN) against the
    transformers one: llm-compare recognises both conventions, renames through the compare
    engine's map_a/map_b, prints the table, and the planted layer-1 fault is named in canonical
    form; --names exact pairs nothing but logits."""
    d, model, prompt = runs
    faulty, _ = tiny_llm.llama_o_proj_fault()
    llm.record(faulty, prompt, tmp_path / "fault.tdump", teacher=d / "ref.tdump")
    with driftscope.open(tmp_path / "fault.tdump") as src:
        meta = dict(src.metadata)
        with driftscope.Writer(str(tmp_path / "gguf.tdump"), meta) as w:
            for name in src.names():
                w.write(_gguf_name(name), src.get(name), op_type=src.record(name).op_type)
    rep = llm.compare(d / "ref.tdump", tmp_path / "gguf.tdump")
    # the candidate keeps transformers names where GGUF has none (self_attn, rotary_emb)
    assert rep.names["reference"] == ["hf"] and rep.names["candidate"] == ["gguf", "hf"]
    assert rep.names["map_a"] == [] and rep.names["map_b"]
    assert rep.first_crossing["name"] == "step.0/model.layers.1.self_attn.o_proj", rep.to_text()
    text = rep.to_text()
    assert "rename table" in text
    assert "model.layers.N.self_attn.q_proj -> model.layers.N.self_attn.q_proj <- blk.N.attn_q" \
        in text, text
    assert "cache.layers.N.key -> cache.layers.N.key <- cache_k_lN" in text
    pairs = {t["name"] for t in driftscope.compare(
        d / "ref.tdump", tmp_path / "gguf.tdump", map_b=rep.names["map_b"],
        allow_unpaired=True, filter="step.0/*").tensors}
    for layer in (0, 1):
        for mod in ("self_attn.q_proj", "self_attn.o_proj", "mlp.down_proj", "input_layernorm"):
            assert f"step.0/model.layers.{layer}.{mod}" in pairs
    assert "step.0/cache.layers.1.value" in pairs and "step.0/model.norm" in pairs
    # names="exact": only what is named alike pairs (logits, self_attn, mlp, rotary_emb)
    exact = llm.compare(d / "ref.tdump", tmp_path / "gguf.tdump", names="exact")
    assert exact.names is None
    assert exact.first_crossing is None or "o_proj" not in exact.first_crossing["name"]
    # a rule given by the caller replaces that side's automatic rules
    own = llm.compare(d / "ref.tdump", tmp_path / "gguf.tdump",
                      map_b=[r"blk\.(\d+)\.attn_output=>model.layers.$1.self_attn.o_proj"])
    assert own.first_crossing["name"] == "step.0/model.layers.1.self_attn.o_proj"
    assert own.first_cache is None  # cache_k_lN stayed unpaired under the caller's rules
    p = subprocess.run([sys.executable, "-m", "driftscope", "llm-compare", str(d / "ref.tdump"),
                        str(tmp_path / "gguf.tdump"), "--names", "exact"],
                       capture_output=True, text=True)
    assert p.returncode in (0, 1) and "rename table" not in p.stdout, p.stderr


def _module_names(model):
    return [n for n, _ in model.named_modules() if n] + ["logits", "cache.layers.0.key"]


FAMILIES = {
    "llama": (lambda: transformers.LlamaForCausalLM(tiny_llm.llama_config()), "hf",
              {"q", "k", "v", "o", "gate", "up", "down", "attn_norm", "ffn_norm", "layer"}),
    "qwen2": (lambda: transformers.Qwen2ForCausalLM(transformers.Qwen2Config(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2)), "hf",
        {"q", "k", "v", "o", "gate", "up", "down", "attn_norm", "ffn_norm", "layer"}),
    "gemma": (lambda: transformers.GemmaForCausalLM(transformers.GemmaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16)), "hf",
        {"q", "k", "v", "o", "gate", "up", "down", "attn_norm", "ffn_norm", "layer"}),
    "phi": (lambda: transformers.PhiForCausalLM(transformers.PhiConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4)), "phi", {"q", "k", "v", "o", "up", "down", "attn_norm",
                                         "layer"}),
    "phi3": (lambda: transformers.Phi3ForCausalLM(transformers.Phi3Config(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, pad_token_id=0)), "hf",
        {"qkv", "o", "gate_up", "down", "attn_norm", "ffn_norm", "layer"}),
    "gpt2": (lambda: transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=128, n_embd=64, n_layer=2, n_head=4)), "gpt2",
        {"qkv", "o", "up", "down", "attn_norm", "ffn_norm", "layer"}),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_roles_of_every_family_from_transformers_module_names(family):
    build, convention, roles = FAMILIES[family]
    names = ["step.0/" + n for n in _module_names(build())]
    conv = llm_names.detect(names)
    assert conv[0] == convention, conv
    rules = llm_names.rename_rules(conv)
    found = {}
    for n in names:
        canon = llm_names._apply(rules, n)
        got = llm_names.role_of(canon)
        if got:
            found.setdefault(got[1], set()).add(got[0])
    for role in roles:
        assert found.get(role) == {0, 1}, (role, found)  # both layers, by number
    assert None in found.get("final_norm", set()) and None in found.get("logits", set())
    assert found.get("cache_k") == {0}


@pytest.mark.parametrize("names, convention, expect", [
    (["/model/layers.3/self_attn/q_proj/MatMul", "/model/norm/Mul_1"], ["onnx-node-paths", "hf"],
     {"/model/layers.3/self_attn/q_proj/MatMul": ("model.layers.3.self_attn.q_proj.MatMul",
                                                   (3, "q"))}),
    (["step.4//transformer/h.2/mlp/c_fc/Gemm"], ["onnx-node-paths", "gpt2"],
     {"step.4//transformer/h.2/mlp/c_fc/Gemm": ("step.4/model.layers.2.mlp.up_proj.Gemm",
                                                 (2, "up"))}),
    (["blk.3.attn_q", "blk.3.ffn_gate", "cache_v_l3", "output"], ["gguf"],
     {"blk.3.attn_q": ("model.layers.3.self_attn.q_proj", (3, "q")),
      "cache_v_l3": ("cache.layers.3.value", (3, "cache_v")),
      "output": ("lm_head", (None, "lm_head"))}),
    (["blk.0.attn_qkv", "blk.0.ffn_up", "blk.0.ffn_down"], ["gguf-phi3+", "gguf"],
     {"blk.0.ffn_up": ("model.layers.0.mlp.gate_up_proj", (0, "gate_up"))}),
    (["blk.0.attn_qkv", "blk.0.ffn_up", "position_embd"], ["gguf-gpt2", "gguf"],
     {"blk.0.ffn_up": ("model.layers.0.mlp.up_proj", (0, "up"))}),
    (["blk.1.ffn_norm", "blk.1.post_ffw_norm", "blk.1.post_attention_norm"],
     ["gguf-gemma2", "gguf"],
     {"blk.1.ffn_norm": ("model.layers.1.pre_feedforward_layernorm", (1, "pre_ffn_norm")),
      "blk.1.post_attention_norm": ("model.layers.1.post_attention_layernorm",
                                    (1, "ffn_norm"))}),
])
def test_runtime_name_conventions(names, convention, expect):
    assert llm_names.detect(names) == convention
    rules = llm_names.rename_rules(convention)
    for name, (canon, role) in expect.items():
        got = llm_names._apply(rules, name)
        assert got == canon and llm_names.role_of(got) == role


def test_rename_rules_are_the_compare_engines_regexes(tmp_path):
    """The rules run in the C++ engine (std::regex ECMAScript) exactly as in Python."""
    names = ["step.0//model/layers.1/self_attn/q_proj/MatMul", "step.0/blk.1.attn_q",
             "step.2/transformer.h.1.attn.c_attn", "step.0/cache_k_l1", "step.0/output_norm"]
    conv = []
    for n in names:
        conv += [c for c in llm_names.detect([n]) if c not in conv]
    rules = llm_names.rename_rules(conv)
    a = tmp_path / "a.tdump"
    b = tmp_path / "b.tdump"
    with driftscope.Writer(str(a), {}) as w:
        for n in names:
            w.write(llm_names._apply(rules, n), np.ones(3, np.float32))
    with driftscope.Writer(str(b), {}) as w:
        for n in names:
            w.write(n, np.ones(3, np.float32))
    rep = driftscope.compare(a, b, map_b=[f"{p}=>{r}" for p, r, _ in rules])
    assert rep.verdict == "pass" and not rep.only_in_candidate, rep.to_text()
    assert len(rep.tensors) == len(names)


def test_gpt2_on_onnx_runtime_pairs_its_own_module_names(tmp_path):
    """A second family through the same export: GPT-2 (Conv1D, fused c_attn, learned
    positions) on ONNX Runtime equals transformers, module by module under GPT-2's names."""
    from driftscope.reference import hash_init_

    model = FAMILIES["gpt2"][0]()
    hash_init_(model)
    prompt = [3, 17, 42, 99, 5]
    llm.record(model, prompt, tmp_path / "hf.tdump", new_tokens=3, eos=None)
    llm.record(model, prompt, tmp_path / "ort.tdump", new_tokens=3, eos=None, backend="ort")
    rep = llm.compare(tmp_path / "hf.tdump", tmp_path / "ort.tdump")
    assert rep.verdict == "pass" and rep.names["reference"] == rep.names["candidate"] == ["gpt2"]
    pairs = _pairs(tmp_path / "hf.tdump", tmp_path / "ort.tdump", 2)
    for name in ("transformer.h.1.attn.c_attn", "transformer.h.1.attn.c_proj",
                 "transformer.h.1.mlp.c_fc", "transformer.h.1.ln_2", "transformer.h.1",
                 "cache.layers.1.key", "logits"):
        assert pairs.get(f"step.2/{name}") == "pass", (name, sorted(pairs))
