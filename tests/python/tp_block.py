"""A small Megatron-style tensor-parallel transformer block for tests/python/test_distributed.py.

The same classes build the TP=1 reference (world 1: no collective) and each TP rank's shard of
it, from one full set of weights: column-parallel Linears (q, k, v, mlp.fc1) keep rows
[r*n/tp, (r+1)*n/tp) of the weight, so their outputs (and the attention heads) are split along
the last axis; row-parallel Linears (attn.out, mlp.fc2) keep the matching input columns, their
``matmul`` submodule outputs a partial sum, the module adds the bias after the all-reduce
(Megatron's RowParallelLinear).
"""
from __future__ import annotations

import datetime

import torch
import torch.nn.functional as F
from torch import nn

HIDDEN, HEADS, FFN, SEQ, BATCH = 32, 4, 64, 5, 2

# What a TP rank's records are (docs/dumpsets.md "Shard annotations").
SHARDS = {
    "attn.[qkv]": "hidden@tp",
    "attn.core": "batch,heads@tp,seq,head_dim",
    "*.matmul": "+tp",
    "mlp.fc1": "hidden@tp",
    "mlp.act": "hidden@tp",
}


def full_weights(seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)

    def w(*shape):
        return torch.randn(*shape, generator=g) / shape[-1] ** 0.5

    return {"ln1.weight": 1 + 0.1 * w(HIDDEN), "ln1.bias": 0.1 * w(HIDDEN),
            "q.weight": w(HIDDEN, HIDDEN), "q.bias": w(HIDDEN),
            "k.weight": w(HIDDEN, HIDDEN), "k.bias": w(HIDDEN),
            "v.weight": w(HIDDEN, HIDDEN), "v.bias": w(HIDDEN),
            "out.weight": w(HIDDEN, HIDDEN), "out.bias": w(HIDDEN),
            "ln2.weight": 1 + 0.1 * w(HIDDEN), "ln2.bias": 0.1 * w(HIDDEN),
            "fc1.weight": w(FFN, HIDDEN), "fc1.bias": w(FFN),
            "fc2.weight": w(HIDDEN, FFN), "fc2.bias": w(HIDDEN)}


def inputs(seed: int = 1) -> torch.Tensor:
    return torch.randn(BATCH, SEQ, HIDDEN, generator=torch.Generator().manual_seed(seed))


class ColumnParallelLinear(nn.Module):
    def __init__(self, weight: torch.Tensor, bias: torch.Tensor, rank: int, tp: int) -> None:
        super().__init__()
        n = weight.shape[0] // tp
        self.weight = nn.Parameter(weight[rank * n:(rank + 1) * n].clone())
        self.bias = nn.Parameter(bias[rank * n:(rank + 1) * n].clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


class MatMul(nn.Module):
    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)


class RowParallelLinear(nn.Module):
    def __init__(self, weight: torch.Tensor, bias: torch.Tensor, rank: int, tp: int) -> None:
        super().__init__()
        n = weight.shape[1] // tp
        self.tp = tp
        self.matmul = MatMul(weight[:, rank * n:(rank + 1) * n].clone())
        self.bias = nn.Parameter(bias.clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.matmul(x).clone()  # the recorded partial sum stays as it was
        if self.tp > 1:
            torch.distributed.all_reduce(y)
        return y + self.bias


class CoreAttention(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
        return torch.softmax(s, dim=-1) @ v


class Attention(nn.Module):
    def __init__(self, w: dict, rank: int, tp: int) -> None:
        super().__init__()
        self.heads = HEADS // tp
        self.q = ColumnParallelLinear(w["q.weight"], w["q.bias"], rank, tp)
        self.k = ColumnParallelLinear(w["k.weight"], w["k.bias"], rank, tp)
        self.v = ColumnParallelLinear(w["v.weight"], w["v.bias"], rank, tp)
        self.core = CoreAttention()
        self.out = RowParallelLinear(w["out.weight"], w["out.bias"], rank, tp)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, s, self.heads, -1).transpose(1, 2)

        ctx = self.core(heads(self.q(x)), heads(self.k(x)), heads(self.v(x)))
        return self.out(ctx.transpose(1, 2).reshape(b, s, -1))


class MLP(nn.Module):
    def __init__(self, w: dict, rank: int, tp: int) -> None:
        super().__init__()
        self.fc1 = ColumnParallelLinear(w["fc1.weight"], w["fc1.bias"], rank, tp)
        self.act = nn.GELU()
        self.fc2 = RowParallelLinear(w["fc2.weight"], w["fc2.bias"], rank, tp)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, w: dict, rank: int = 0, tp: int = 1) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(HIDDEN)
        self.ln2 = nn.LayerNorm(HIDDEN)
        with torch.no_grad():
            for ln in ("ln1", "ln2"):
                getattr(self, ln).weight.copy_(w[f"{ln}.weight"])
                getattr(self, ln).bias.copy_(w[f"{ln}.bias"])
        self.attn = Attention(w, rank, tp)
        self.mlp = MLP(w, rank, tp)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


def worker(rank: int, world: int, port: int, out_dir: str) -> None:
    """One TP rank (torch.multiprocessing.spawn): records the block into out_dir/good and, with
    rank 1's copy of ln2.weight scaled (a fault on rank 1 only), into out_dir/fault."""
    import driftscope.torch

    torch.distributed.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=60))
    try:
        torch.set_num_threads(1)
        w = full_weights()
        x = inputs()
        for variant in ("good", "fault"):
            block = Block(w, rank, world).eval()
            if variant == "fault" and rank == 1:
                with torch.no_grad():
                    block.ln2.weight.mul_(1.5)
            with torch.no_grad(), driftscope.torch.record(
                    block, f"{out_dir}/{variant}", groups={"tp": world}, shards=SHARDS,
                    meta={"variant": variant}):
                block(x)
    finally:
        torch.distributed.destroy_process_group()
