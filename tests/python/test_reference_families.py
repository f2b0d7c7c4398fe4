"""hash_init_ on the Hugging Face families (docs/references.md "transformers models"): tiny models
built from config objects (nothing downloaded), filled with no overrides, checked three ways:
against the library's own initialize_weights (traced: every init call recorded, nothing drawn),
against hard-coded golden values (a change of the hash or of a rule changes them), and against
the rule's statistics (std, ones/zeros, padding rows)."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
T = pytest.importorskip("transformers")

from driftscope import reference as R  # noqa: E402


def _tiny():
    dec = dict(vocab_size=99, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return {
        "bert": lambda: T.BertForMaskedLM(T.BertConfig(
            vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=37, max_position_embeddings=64)),
        "vit": lambda: T.ViTForImageClassification(T.ViTConfig(
            image_size=8, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=37, num_labels=3)),
        "gpt2": lambda: T.GPT2LMHeadModel(T.GPT2Config(
            vocab_size=99, n_positions=64, n_embd=32, n_layer=2, n_head=2, bos_token_id=0,
            eos_token_id=0)),
        "llama": lambda: T.LlamaForCausalLM(T.LlamaConfig(**dec)),
        "qwen2": lambda: T.Qwen2ForCausalLM(T.Qwen2Config(**dec)),
        "gemma": lambda: T.GemmaForCausalLM(T.GemmaConfig(**dec, head_dim=8)),
        "whisper": lambda: T.WhisperForConditionalGeneration(T.WhisperConfig(
            vocab_size=99, num_mel_bins=8, d_model=32, encoder_layers=2, decoder_layers=2,
            encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=37,
            decoder_ffn_dim=37, max_source_positions=16, max_target_positions=16,
            pad_token_id=1, decoder_start_token_id=2, bos_token_id=2, eos_token_id=3)),
        "t5": lambda: T.T5ForConditionalGeneration(T.T5Config(
            vocab_size=99, d_model=32, d_kv=8, d_ff=37, num_layers=2, num_heads=4,
            relative_attention_num_buckets=8)),
    }


FAMILIES = sorted(_tiny())

# The one documented deviation from the library: Whisper's encoder positions are sinusoids there.
DEVIATIONS = {"whisper": {"model.encoder.embed_positions.weight": ["uniform", 1 / math.sqrt(3)]}}

# Computed once from the implementation (float32, seed 0), then checked to follow the rule below.
GOLDEN = {
    "bert": ("bert.encoder.layer.0.attention.self.query.weight", slice(0, 3),
             [-0.043214958161115646, -0.001811655587516725, -0.0005824592080898583]),
    "vit": ("vit.embeddings.cls_token", slice(0, 3),
            [0.024550607427954674, 0.00572858564555645, 0.009532884694635868]),
    "gpt2": ("transformer.h.1.attn.c_proj.weight", slice(0, 3),
             [0.006087549030780792, 0.005620309617370367, -0.0006249319994822145]),
    "llama": ("model.layers.0.mlp.down_proj.weight", slice(0, 3),
              [0.01249376405030489, 0.024517133831977844, -0.006977402605116367]),
    "qwen2": ("model.layers.1.self_attn.k_proj.weight", slice(0, 3),
              [0.021234238520264626, 0.008183496072888374, 0.00858310516923666]),
    # row 0 is Gemma's padding row (zero), so the last three values
    "gemma": ("model.embed_tokens.weight", slice(-3, None),
              [-0.015455914661288261, -0.0006360472762025893, -0.02146100625395775]),
    "whisper": ("model.decoder.layers.0.fc1.weight", slice(0, 3),
                [-0.045796193182468414, -0.026274211704730988, 0.012221384793519974]),
    "t5": ("encoder.block.0.layer.0.SelfAttention.q.weight", slice(0, 3),
           [0.027880927547812462, 0.021715320646762848, 0.00839755404740572]),
}


def library_rules(model):
    """name -> [dist, std] as the library's own initialize_weights sets it: its init functions
    (transformers.initialization, through which torch.nn.init is routed too) are replaced by
    recorders, so nothing is drawn; the last call on a parameter wins, as it does there."""
    import transformers.initialization as I

    by_ptr = {(p.data_ptr(), tuple(p.shape)): n for n, p in model.named_parameters()}
    seen = {}

    def rec(t, rule):
        n = by_ptr.get((t.data_ptr(), tuple(t.shape)))  # a padding-row view has another shape
        if n is not None:
            seen[n] = rule
        return t

    def fans(t):
        return sum(torch.nn.init._calculate_fan_in_and_fan_out(t))

    fake = {
        "normal_": lambda t, mean=0.0, std=1.0, generator=None:
            rec(t, ["normal", std] if mean == 0 else ["normal+mean", mean]),
        "trunc_normal_": lambda t, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None:
            rec(t, ["normal", std] if (mean, a, b) == (0, -2, 2) else ["trunc", std]),
        "uniform_": lambda t, a=0.0, b=1.0, generator=None:
            rec(t, ["uniform", (b - a) / math.sqrt(12)] if a == -b else ["shifted", a]),
        "constant_": lambda t, val: rec(t, ["constant", float(val)]),
        "zeros_": lambda t: rec(t, ["constant", 0.0]),
        "ones_": lambda t: rec(t, ["constant", 1.0]),
        "xavier_uniform_": lambda t, gain=1.0, generator=None:
            rec(t, ["uniform", gain * math.sqrt(2.0 / fans(t))]),
    }
    saved, saved_copy = dict(I.TORCH_INIT_FUNCTIONS), I.copy_
    try:
        for k in list(I.TORCH_INIT_FUNCTIONS):
            I.TORCH_INIT_FUNCTIONS[k] = fake.get(k, lambda t, *a, _k=k, **kw: rec(t, [_k, None]))
        I.copy_ = lambda t, other: rec(t, ["copy", None])
        for m in model.modules():
            m._is_hf_initialized = False
        model.initialize_weights()
    finally:
        I.TORCH_INIT_FUNCTIONS.update(saved)
        I.copy_ = saved_copy
    return seen


@pytest.mark.parametrize("family", FAMILIES)
def test_family_follows_the_library_init_with_no_overrides(family):
    model = _tiny()[family]()
    lib = library_rules(model)
    lib.update(DEVIATIONS.get(family, {}))
    rec = R.hash_init_(model)  # refused before: Conv1D, LlamaRMSNorm, ViT's cls_token, ...
    assert rec["rules"] == "transformers"
    params = dict(model.named_parameters())
    assert set(rec["parameters"]) == set(params) == set(lib)
    for name, (dist, std) in rec["parameters"].items():
        assert [dist, pytest.approx(std, rel=1e-12)] == lib[name], name
        p = params[name].detach().numpy()
        if dist == "constant":
            assert (p == std).all(), name
            continue
        want = R.hash_tensor(name, p.shape, dist, std)
        mod = model.get_submodule(name.rpartition(".")[0])
        if isinstance(mod, torch.nn.Embedding) and mod.padding_idx is not None:
            want[mod.padding_idx] = 0  # the library zeroes it too
        assert p.tobytes() == want.tobytes(), name
    name, where, values = GOLDEN[family]
    got = params[name].detach().flatten()[where].tolist()
    assert got == values, (family, got)


def _std_ok(t, std):
    """The sample std of a hashed tensor against the rule's, within 5 standard errors."""
    s = float(t.detach().double().std())
    return abs(s - std) <= 5 * std / math.sqrt(2 * (t.numel() - 1)), s


def test_the_rules_statistics_per_family():
    m = {k: f() for k, f in _tiny().items()}
    for mod in m.values():
        R.hash_init_(mod)
    # Linear weights: normal(initializer_range); big enough tensors for the sample std to tell
    for fam, name in [("bert", "bert.encoder.layer.0.intermediate.dense.weight"),
                      ("llama", "model.layers.0.mlp.gate_proj.weight"),
                      ("qwen2", "model.layers.0.mlp.up_proj.weight"),
                      ("whisper", "model.encoder.layers.0.fc1.weight"),
                      ("vit", "vit.layers.0.mlp.fc1.weight")]:
        cfg = m[fam].config
        std = getattr(cfg, "initializer_range", None) or cfg.init_std
        ok, s = _std_ok(m[fam].get_parameter(name), std)
        assert ok, (fam, s, std)
    # GPT-2: Conv1D normal(0.02), the residual projections scaled by 1/sqrt(2 n_layer)
    g = m["gpt2"]
    assert _std_ok(g.transformer.h[0].mlp.c_fc.weight, 0.02)[0]
    c_proj = torch.cat([g.transformer.h[i].mlp.c_proj.weight.flatten() for i in range(2)]
                       + [g.transformer.h[i].attn.c_proj.weight.flatten() for i in range(2)])
    assert _std_ok(c_proj, 0.02 / math.sqrt(2 * 2))[0] and not _std_ok(c_proj, 0.02)[0]
    assert not g.transformer.h[0].mlp.c_fc.bias.any()
    # T5: q by (d_model d_kv)^-1/2, wo by d_ff^-1/2, shared embedding by factor 1
    t5 = m["t5"]
    att = t5.encoder.block[0].layer[0].SelfAttention
    assert _std_ok(att.q.weight, (32 * 8) ** -0.5)[0] and _std_ok(att.k.weight, 32 ** -0.5)[0]
    assert _std_ok(t5.encoder.block[0].layer[1].DenseReluDense.wo.weight, 37 ** -0.5)[0]
    assert _std_ok(t5.shared.weight, 1.0)[0]
    # norms: LayerNorm/RMSNorm weight ones (bias zeros), Gemma's (1 + weight) RMSNorm zeros
    assert (m["llama"].model.norm.weight == 1).all()
    assert (m["qwen2"].model.layers[0].input_layernorm.weight == 1).all()
    assert (m["gemma"].model.norm.weight == 0).all()
    ln = m["bert"].bert.embeddings.LayerNorm
    assert (ln.weight == 1).all() and (ln.bias == 0).all()
    assert (t5.encoder.final_layer_norm.weight == 1).all()
    # biases zero, padding rows zero where the embedding has a padding_idx
    assert not m["bert"].bert.encoder.layer[0].attention.self.query.bias.any()
    assert not m["bert"].bert.embeddings.word_embeddings.weight[0].any()
    assert m["bert"].bert.embeddings.word_embeddings.weight[1].any()
    assert not m["whisper"].model.decoder.embed_tokens.weight[1].any()
    # ViT: cls_token and positions normal(0.02) (trunc_normal_ cut at +-2 never binds)
    emb = m["vit"].vit.embeddings
    assert _std_ok(torch.cat([emb.cls_token.flatten(), emb.position_embeddings.flatten()]), 0.02)[0]
    # Whisper's encoder positions: uniform in [-1, 1), the range of the library's sinusoids
    pos = m["whisper"].model.encoder.embed_positions.weight
    assert float(pos.abs().max()) <= 1 and float(pos.abs().max()) > 0.9


def test_second_build_is_bit_identical():
    def build(seed):
        torch.manual_seed(seed)  # the library's own random init differs; the hash must not care
        m = _tiny()["gpt2"]()
        R.hash_init_(m)
        return {k: v.numpy().tobytes() for k, v in m.state_dict().items()}

    assert build(1) == build(2)


def test_torch_rules_keep_the_old_bytes_and_name_every_accepted_form():
    bert = _tiny()["bert"]().bert  # BertModel: its MLM head's bias is no PyTorch module's
    rec = R.hash_init_(bert, rules="torch")  # what hash_init_(bert) gave before the families
    q = "encoder.layer.0.attention.self.query.weight"
    assert rec["rules"] == "torch" and rec["parameters"][q] == ["uniform", 1 / math.sqrt(3 * 32)]
    assert bert.get_parameter(q).detach().numpy().tobytes() == R.hash_tensor(
        q, (32, 32), "uniform", 1 / math.sqrt(3 * 32)).tobytes()
    # a module no rule knows (GPT-2's Conv1D was one until its constructor's normal(0.02) was
    # restated for issue 31): the error names it and every form of a rule
    class Scale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gain = torch.nn.Parameter(torch.ones(3))

    with pytest.raises(ValueError) as e:
        R.hash_init_(torch.nn.Sequential(torch.nn.Linear(3, 3), Scale()), rules="torch")
    msg = str(e.value)
    assert "1.gain (Scale)" in msg and "\n" not in msg
    for form in ("('uniform', std)", "('normal', std)", "('constant', value)"):
        assert form in msg
    with pytest.raises(ValueError, match=r"\('uniform', std\), \('normal', std\) or \('constant'"):
        R.hash_init_(bert, overrides={"*": ("ones", 1)})
    with pytest.raises(ValueError, match="one of 'auto', 'torch', 'transformers'"):
        R.hash_init_(bert, rules="hf")
    with pytest.raises(ValueError, match="needs a transformers PreTrainedModel"):
        R.hash_init_(torch.nn.Linear(2, 2), rules="transformers")


def test_unlisted_family_with_its_own_init_keeps_torch_rules():
    cfg = T.RobertaConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=37, max_position_embeddings=64)
    m = T.RobertaModel(cfg, add_pooling_layer=False)
    assert R.hash_init_(m)["rules"] == "torch"  # Roberta's own _init_weights is not restated
    with pytest.raises(ValueError, match="RobertaModel: its _init_weights is not one of"):
        R.hash_init_(m, rules="transformers")
    # a listed family inside a plain container: the library's rules inside, PyTorch's outside
    box = torch.nn.ModuleDict({"lm": _tiny()["llama"](), "head": torch.nn.Linear(32, 3)})
    rec = R.hash_init_(box)
    assert rec["rules"] == "transformers"
    assert rec["parameters"]["head.weight"] == ["uniform", 1 / math.sqrt(3 * 32)]
    assert rec["parameters"]["lm.model.layers.0.mlp.up_proj.weight"] == ["normal", 0.02]
