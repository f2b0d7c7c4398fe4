"""The demo's tiny encoder (examples/tiny_encoder.cpp) in PyTorch, for `driftscope guard
--model tiny_encoder_torch.py:build`.

Same architecture (pre-norm, 4 blocks, hidden 64, 4 heads, MLP 256, 16 tokens of a 96-word
vocabulary), same SplitMix64 weights and tokens, same module names (encoder.layers.2.norm1, ...).
Block 1's MLP writes "massive activations" (~6000, Sun et al. 2024) into 4 hidden channels of
the residual stream. The LayerNorm is written the way the demo's float16 kernel computes it, in
the tensor's own dtype with the one-pass variance E[x^2] - E[x]^2 (torch.nn.LayerNorm would keep
its statistics in float32 on the CPU). In float16 eager (real float16 arithmetic: every op's
result is a float16) the first LayerNorm that sees the massive channels, encoder.layers.2.norm1,
squares ~6000 (3.6e7 > 65504) and its mean (~375, 1.4e5 > 65504): Inf - Inf = NaN. Every later
LayerNorm sees them too; float32 statistics in those LayerNorms fix it, as the demo's fp16-safe
run shows.
"""

from __future__ import annotations

import math

import numpy as np
import torch

VOCAB, SEQ, HIDDEN, HEADS, FFN, LAYERS = 96, 16, 64, 4, 256, 4
MASSIVE_LAYER, MASSIVE_CHANNELS, MASSIVE_VALUE = 1, 4, 6000.0
EPS = 1e-5
SEED = 20261129
_M64 = (1 << 64) - 1


class _SplitMix64:
    """Steele, Lea, Flood 2014; the demo's generator, vectorised (uint64 arithmetic wraps)."""

    def __init__(self, seed: int) -> None:
        self.s = seed & _M64

    def next(self, n: int) -> np.ndarray:
        with np.errstate(over="ignore"):
            k = np.arange(1, n + 1, dtype=np.uint64)
            z = np.uint64(self.s) + k * np.uint64(0x9E3779B97F4A7C15)
            self.s = int(z[-1])
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            return z ^ (z >> np.uint64(31))

    def uniform(self, n: int) -> np.ndarray:
        # Uniform in [-1, 1): the top 24 bits make an exact float32.
        return ((self.next(n) >> np.uint64(40)).astype(np.float32) / np.float32(8388608.0)
                - np.float32(1.0)).astype(np.float32)


class LayerNorm(torch.nn.Module):
    """LayerNorm with one-pass statistics in the input's dtype (as a fused fp16 kernel)."""

    def __init__(self, gamma: np.ndarray, beta: np.ndarray) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.from_numpy(gamma))
        self.bias = torch.nn.Parameter(torch.from_numpy(beta))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)
        var = (x * x).mean(dim=-1, keepdim=True) - mean * mean
        return (x - mean) * torch.rsqrt(var + EPS) * self.weight + self.bias


def _linear(rng: _SplitMix64, n_in: int, n_out: int) -> torch.nn.Linear:
    # U(-a, a), a = sqrt(3 / fan_in); weights stored [in][out] in the demo.
    a = np.float32(math.sqrt(3.0 / n_in))
    w = (a * rng.uniform(n_in * n_out)).reshape(n_in, n_out)
    b = np.float32(0.02) * rng.uniform(n_out)
    lin = torch.nn.Linear(n_in, n_out)
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(np.ascontiguousarray(w.T)))
        lin.bias.copy_(torch.from_numpy(b))
    return lin


def _norm(rng: _SplitMix64) -> LayerNorm:
    gamma = (np.float32(1.0) + np.float32(0.1) * rng.uniform(HIDDEN)).astype(np.float32)
    beta = (np.float32(0.05) * rng.uniform(HIDDEN)).astype(np.float32)
    return LayerNorm(gamma, beta)


class Attention(torch.nn.Module):
    def __init__(self, rng: _SplitMix64) -> None:
        super().__init__()
        self.q_proj = _linear(rng, HIDDEN, HIDDEN)
        self.k_proj = _linear(rng, HIDDEN, HIDDEN)
        self.v_proj = _linear(rng, HIDDEN, HIDDEN)
        self.out_proj = _linear(rng, HIDDEN, HIDDEN)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        b, s, _ = h.shape

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, s, HEADS, HIDDEN // HEADS).transpose(1, 2)

        q, k, v = heads(self.q_proj(h)), heads(self.k_proj(h)), heads(self.v_proj(h))
        p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(HIDDEN // HEADS), dim=-1)
        return self.out_proj((p @ v).transpose(1, 2).reshape(b, s, HIDDEN))


class MLP(torch.nn.Module):
    def __init__(self, rng: _SplitMix64) -> None:
        super().__init__()
        self.fc1 = _linear(rng, HIDDEN, FFN)
        self.act = torch.nn.GELU()
        self.fc2 = _linear(rng, FFN, HIDDEN)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(h)))


class Block(torch.nn.Module):
    def __init__(self, rng: _SplitMix64) -> None:
        super().__init__()
        self.norm1 = _norm(rng)
        self.attn = Attention(rng)
        self.norm2 = _norm(rng)
        self.mlp = MLP(rng)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Encoder(torch.nn.Module):
    def __init__(self, rng: _SplitMix64) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(Block(rng) for _ in range(LAYERS))


class TinyEncoder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        rng = _SplitMix64(SEED)
        self.tok_emb = torch.nn.Parameter(torch.from_numpy(rng.uniform(VOCAB * HIDDEN)
                                                           .reshape(VOCAB, HIDDEN)))
        self.pos_emb = torch.nn.Parameter(torch.from_numpy(
            (np.float32(0.1) * rng.uniform(SEQ * HIDDEN)).reshape(SEQ, HIDDEN)))
        self.encoder = Encoder(rng)
        with torch.no_grad():
            fc2 = self.encoder.layers[MASSIVE_LAYER].mlp.fc2
            for c in range(MASSIVE_CHANNELS):
                fc2.bias[7 + 13 * c] = float(np.float32(MASSIVE_VALUE)
                                             * (np.float32(1.0) + np.float32(0.01) * c))
        self.encoder.norm = _norm(rng)
        self.lm_head = _linear(rng, HIDDEN, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.tok_emb[tokens] + self.pos_emb[: tokens.shape[-1]]
        for block in self.encoder.layers:
            x = block(x)
        return self.lm_head(self.encoder.norm(x))


def tokens() -> torch.Tensor:
    ids = _SplitMix64(SEED ^ 0x70CE55).next(SEQ) % np.uint64(VOCAB)
    return torch.from_numpy(ids.astype(np.int64)).reshape(1, SEQ)


def build():
    """(model, inputs) for `driftscope guard --model tiny_encoder_torch.py:build`."""
    return TinyEncoder().eval(), tokens()
