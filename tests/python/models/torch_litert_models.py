"""Small PyTorch models for the LiteRT rows of a PyTorch model (tflite-litert, ...: converted by
litert-torch, backends/torch_litert.py), built from code.

``small``: Linear, Tanh, Linear, Linear; converts and runs on LiteRT within float32
rounding. litert-torch's converter moves the bias of ``body.fc2`` into ``head`` (two Linear
layers in a row): the FULLY_CONNECTED named after fc2 computes fc2 without its bias, which is
not fc2's output, and the conversion's check by value leaves it unnamed. ``planted_f16``: the same model with one weight of ``body.fc2`` at 1e5, beyond
float16's largest finite value (65504): stored as float16 weights (litert-fp16) it becomes
Inf, so fc2's output is Inf where PyTorch's is finite, and fc2 is the first module that fails.
Its bias is zero, so that the converter's bias move changes nothing and fc2's own tensor is its
output.
The Tanh keeps fc1's output its own tensor (a ReLU would be fused into the FULLY_CONNECTED before
it, and the Linear's own output would then not exist in the .tflite); no Tanh after fc2, which
would turn Inf and PyTorch's large finite value into the same 1.
"""

from __future__ import annotations

import torch


class Body(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.act1 = torch.nn.Tanh()
        self.fc2 = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act1(self.fc1(x)))


class Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = Body()
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def _inputs() -> torch.Tensor:
    g = torch.Generator().manual_seed(7)
    return torch.randn(2, 8, generator=g)


def small():
    torch.manual_seed(0)
    return Small().eval(), _inputs()


def planted_f16():
    net, x = small()
    with torch.no_grad():
        net.body.fc2.weight[3, 5] = 1e5
        net.body.fc2.bias.zero_()
    return net, x


class Branchy(torch.nn.Module):
    """Python control flow on a tensor's value: torch.export (and so litert-torch) cannot
    trace it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        if y.sum() > 0:
            return y
        return -y


def branchy():
    torch.manual_seed(0)
    return Branchy().eval(), _inputs()


def planted_outlier():
    """``small`` with an INT8 outlier in ``body.fc2`` (as tests/python/models/tflite_outlier.py
    plants one in a .tflite): fc1's channels 0 and 1 are made equal, and fc2 reads them with
    weights +120 and -120, which cancel in float; quantized per output channel, every other
    weight of fc2 falls below one int8 step (120/127) and rounds to zero. Its bias is zero (the
    converter would move it into head)."""
    net, x = small()
    with torch.no_grad():
        net.body.fc1.weight[1] = net.body.fc1.weight[0]
        net.body.fc1.bias[1] = net.body.fc1.bias[0]
        net.body.fc2.weight[:, 0] = 120.0
        net.body.fc2.weight[:, 1] = -120.0
        net.body.fc2.bias.zero_()
    return net, x


class Keywords(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * 2.0 + bias


def keywords():
    """Keyword inputs out of alphabetical order: litert-torch's signature lists them sorted
    (bias, x), so feeding them by position would swap them."""
    torch.manual_seed(0)
    return Keywords().eval(), {"x": _inputs(), "bias": torch.arange(8.0).reshape(2, 4)}


class Eleven(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> tuple:
        y = self.fc(x)
        return tuple(y * k for k in range(1, 12))


def eleven_outputs():
    """Eleven outputs: litert-torch's signature lists them sorted as text (output_10 before
    output_2), so pairing them with PyTorch's by the signature's order would swap them."""
    torch.manual_seed(0)
    return Eleven().eval(), _inputs()
