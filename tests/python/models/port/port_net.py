# The same network re-written by hand (a port), loading the same weights; one planted bug:
# block 1's LayerNorm epsilon is 1e-2 instead of 1e-5.
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_net  # noqa: E402


class HandNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))
        self.eps = eps

    def forward(self, x):
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + self.eps) * self.weight + self.bias


class PortBlock(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.fc1 = nn.Linear(32, 32)
        self.norm = HandNorm(32, eps)
        self.fc2 = nn.Linear(32, 32)
        self.drop = nn.Identity()

    def forward(self, x):
        return x + self.drop(self.fc2(F.gelu(self.norm(self.fc1(x)))))


class Port(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([PortBlock(1e-5), PortBlock(1e-2)])
        self.head = nn.Linear(32, 8)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def build():
    net = Port()
    net.load_state_dict(ref_net.weights())
    torch.manual_seed(1)
    return net.eval(), (torch.randn(1, 8, 32),)
