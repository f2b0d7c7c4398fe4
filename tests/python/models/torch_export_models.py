"""Small PyTorch entry points for the guard's torch.onnx.export and torch.compile tests
(tests/python/test_guard_torch_export.py). Each FUNCTION returns (model, inputs), built from
code and seeded, no download: ``path/to/torch_export_models.py:FUNCTION``."""

import torch


class Cancel(torch.nn.Module):
    """x @ w1 - x @ w2 with w2 = w1 + 1e-4 d: exact in float32; with both weights rounded to
    float16 (relative error 2**-11, five times their difference) the result is rounding noise."""

    def __init__(self, n_in, n_out):
        super().__init__()
        w = torch.randn(n_in, n_out)
        self.w1 = torch.nn.Parameter(w)
        self.w2 = torch.nn.Parameter(w + 1e-4 * torch.randn(n_in, n_out))

    def forward(self, h):
        return h @ self.w1 - h @ self.w2


class CancelWithDropout(torch.nn.Module):
    """A Dropout (in eval mode the identity: exported to no ONNX node) between a Linear and the
    module whose float16 weights break it."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 16)
        self.drop = torch.nn.Dropout(0.1)
        self.cancel = Cancel(16, 4)

    def forward(self, x):
        return self.cancel(self.drop(self.proj(x)))


def cancel_dropout():
    return CancelWithDropout(), torch.randn(2, 8)


class _Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.lin(x))


class ScriptInside(torch.nn.Module):
    """A ScriptModule inside a Module: it runs in the TorchScript runtime, which dynamo does not
    trace (torch.compile captures no graph)."""

    def __init__(self):
        super().__init__()
        self.inner = torch.jit.script(_Inner())

    def forward(self, x):
        return self.inner(x)


def script_inside():
    return ScriptInside(), torch.randn(2, 8)


class Printing(torch.nn.Module):
    """A print between two Linears: a graph break, two compiled graphs."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.a(x)
        print("between the graphs")
        return self.b(h)


def printing():
    return Printing(), torch.randn(2, 8)


# -- transformers models from configs (tiny: 2 layers, hidden 32, no download) ----------------

def _ids(n):
    return torch.randint(3, 128, (1, n), generator=torch.Generator().manual_seed(0))


def gpt2():
    from transformers import GPT2Config, GPT2Model

    cfg = GPT2Config(n_layer=2, n_embd=32, n_head=2, n_positions=64, vocab_size=128,
                     use_cache=False)
    return GPT2Model(cfg), {"input_ids": _ids(8)}


def llama():
    from transformers import LlamaConfig, LlamaModel

    cfg = LlamaConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                      num_attention_heads=2, num_key_value_heads=2, vocab_size=128,
                      max_position_embeddings=64, use_cache=False)
    return LlamaModel(cfg), {"input_ids": _ids(8)}


def whisper():
    from transformers import WhisperConfig, WhisperModel

    cfg = WhisperConfig(encoder_layers=2, decoder_layers=2, d_model=32, encoder_attention_heads=2,
                        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                        num_mel_bins=16, max_source_positions=16, max_target_positions=16,
                        vocab_size=128, use_cache=False, pad_token_id=0, bos_token_id=1,
                        eos_token_id=2, decoder_start_token_id=1)
    return WhisperModel(cfg), {"input_features": torch.randn(1, 16, 32),
                               "decoder_input_ids": _ids(4)}
