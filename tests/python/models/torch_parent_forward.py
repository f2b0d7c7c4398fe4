"""A parent module whose own forward overflows float16 between its children: Attn computes
q @ k^T * 1e6 itself (inf in float16, NaN after the softmax), then calls its child Linear proj,
which is handed the NaN (issue 33, item 6)."""
import torch
from torch import nn


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.proj = (nn.Linear(16, 16) for _ in range(4))

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        scores = q @ k.transpose(-1, -2) * 1e6  # overflows float16 here, between children
        return (self.proj(torch.softmax(scores, -1) @ v),)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(16, 16)
        self.attn = Attn()
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.attn(self.inp(x))[0])


def build():
    torch.manual_seed(0)
    return Net().eval(), torch.randn(2, 8, 16)
