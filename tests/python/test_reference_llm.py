"""hash_init_ on the causal LMs the LLM comparison is built on (issue 31): Llama, Qwen2 and GPT-2
from small configs (2 layers, hidden 64, vocab 128), with no overrides, under every `rules=`:
norms at their native ones, rotary buffers left as the model computed them, tied embeddings
filled once."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
T = pytest.importorskip("transformers")

from driftscope import reference as R  # noqa: E402

DEC = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)


def _build(family, tie):
    torch.manual_seed(0)
    if family == "llama":
        return T.LlamaForCausalLM(T.LlamaConfig(**DEC, tie_word_embeddings=tie))
    if family == "qwen2":
        return T.Qwen2ForCausalLM(T.Qwen2Config(**DEC, tie_word_embeddings=tie))
    return T.GPT2LMHeadModel(T.GPT2Config(vocab_size=128, n_positions=64, n_embd=64, n_layer=2,
                                          n_head=4, bos_token_id=0, eos_token_id=0,
                                          tie_word_embeddings=tie))


@pytest.mark.parametrize("rules", ["auto", "torch", "transformers"])
@pytest.mark.parametrize("tie", [False, True])
@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt2"])
def test_causal_lm_needs_no_overrides(family, tie, rules):
    model = _build(family, tie)
    buffers = {n: b.clone() for n, b in model.named_buffers()}
    rec = R.hash_init_(model, rules=rules)
    names = [n for n, _ in model.named_parameters()]
    assert sorted(rec["parameters"]) == sorted(names)
    for name, buf in model.named_buffers():  # rotary inv_freq: as computed, not hashed
        assert torch.equal(buf, buffers[name]), name
    for mname, module in model.named_modules():
        if "RMSNorm" in type(module).__name__ or "LayerNorm" in type(module).__name__:
            assert torch.all(module.weight == 1), mname
            assert rec["parameters"][f"{mname}.weight"] == ["constant", 1.0]
    emb, head = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    if tie:
        # one parameter, filled once under the embedding's name
        assert head is emb
        assert not any(n.startswith("lm_head") for n in rec["parameters"])
    else:
        assert not torch.equal(head, emb[: head.shape[0]])
        assert "lm_head.weight" in rec["parameters"]
    again = _build(family, tie)
    R.hash_init_(again, rules=rules)
    for (n, a), (_, b) in zip(model.named_parameters(), again.named_parameters()):
        assert torch.equal(a, b), n
    with torch.no_grad():
        logits = model(torch.tensor([[1, 5, 9, 2]])).logits
    assert torch.isfinite(logits).all()
    assert len(set(logits[0].argmax(-1).tolist())) > 1  # not a degenerate constant model


def test_torch_rules_restate_the_modules_own_init():
    """rules='torch' is each module's constructor: transformers' Conv1D draws normal(0.02) with a
    zero bias, LlamaRMSNorm ones, Gemma's RMSNorm (1 + weight) zeros."""
    gpt2 = _build("gpt2", True)
    rec = R.hash_init_(gpt2, rules="torch")["parameters"]
    assert rec["transformer.h.0.attn.c_attn.weight"] == ["normal", 0.02]
    assert rec["transformer.h.1.mlp.c_proj.bias"] == ["constant", 0.0]
    w = gpt2.transformer.h[0].mlp.c_fc.weight
    assert abs(float(w.detach().std()) - 0.02) < 0.002
    gemma = T.GemmaForCausalLM(T.GemmaConfig(**DEC, head_dim=16))
    rec = R.hash_init_(gemma, rules="torch")["parameters"]
    assert rec["model.norm.weight"] == ["constant", 0.0]
    assert torch.all(gemma.model.norm.weight == 0)
