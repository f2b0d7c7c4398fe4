"""Tiny hash-initialised causal LMs for the generation tests and docs/howto/llm.md (issue 31):
2 layers, hidden 64, vocab 128, nothing downloaded. Each function returns (model, prompt_ids),
the form `driftscope record llm --model tiny_llm.py:FN` takes."""

import torch
import transformers as T

from driftscope.reference import hash_init_

PROMPT = [3, 17, 42, 99, 5, 64, 7]


def llama_config(**over):
    cfg = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
               bos_token_id=None, eos_token_id=None)
    cfg.update(over)
    return T.LlamaConfig(**cfg)


def llama():
    model = T.LlamaForCausalLM(llama_config())
    hash_init_(model)
    return model, list(PROMPT)


def llama_o_proj_fault():
    """The planted fault: layer 1's attention output projection scaled by 1.5."""
    model, prompt = llama()
    with torch.no_grad():
        model.model.layers[1].self_attn.o_proj.weight.mul_(1.5)
    return model, prompt


def llama_long_prompt():
    """A prompt of 70 tokens for a model whose context is 64."""
    model, _ = llama()
    return model, [i % 128 for i in range(70)]


# A prompt on which float32 and bfloat16 pick different greedy tokens at step 3 (found by trying
# prompts on llama(): the reference's top-2 margin there is 1.2e-4, a near tie).
NEAR_TIE_PROMPT = [8, 21, 60, 125, 88, 77, 92]


def llama_near_tie():
    model, _ = llama()
    return model, list(NEAR_TIE_PROMPT)


def llama_near_tie_o_proj_fault():
    model, _ = llama_o_proj_fault()
    return model, list(NEAR_TIE_PROMPT)
