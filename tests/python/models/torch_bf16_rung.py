"""A module whose values exceed float16's range (65504) but fit bfloat16's (float32's exponent):
torch-fp16 fails, and the fallback ladder keeps the module in bfloat16, not float32 (issue 28
item 5). Its output is normalised, so the rest of the model stays in float16."""
import torch
from torch import nn


class Scaled(nn.Module):
    """h / rms(h) with h ~ 1e3: h * h ~ 1e6 is inf in float16 (h / inf = 0), finite in bfloat16."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)
        with torch.no_grad():
            self.proj.weight.mul_(2000.0)

    def forward(self, x):
        h = self.proj(x)
        return h / torch.sqrt((h * h).mean(-1, keepdim=True))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = Scaled()
        self.head = nn.Linear(16, 8)

    def forward(self, x):
        return self.head(self.norm(x))


def build():
    return Net().eval(), torch.randn(4, 16)
