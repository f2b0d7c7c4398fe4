"""Modules that overflow in float16 and return a tuple (with a keyword tensor argument) and a
dict (issue 33, item 5): the FP32 fallback keeps both, and its printed recipe must run."""
import torch
from torch import nn


class TupleOut(nn.Module):
    """h^2 / mean(h^2): float16 overflows h^2 (inf / inf = NaN); returns (y, mean square)."""

    def forward(self, x, *, mix):
        h = (x @ mix) * 300.0  # matmul needs x and mix in one dtype: mix must be cast too
        ms = (h * h).mean(-1, keepdim=True)
        return (h * h) / ms, ms


class DictOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(16, 16) / 4)

    def forward(self, x):
        h = (x @ self.w) * 300.0
        ms = (h * h).mean(-1, keepdim=True)
        return {"y": (h * h) / ms, "ms": ms}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(16, 16)
        self.mix = nn.Parameter(torch.randn(16, 16) / 4)
        self.a = TupleOut()
        self.b = DictOut()
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        y, _ = self.a(self.inp(x), mix=self.mix)
        return self.head(self.b(y - 1.0)["y"])


def build():
    torch.manual_seed(0)
    return Net().eval(), torch.randn(2, 8, 16)
