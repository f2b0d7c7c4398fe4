"""Planted faults for the bisection inside delegates and compilers (test_guard_inside.py): a stack
of Linear layers with one numerically fragile module, whose result depends on how a runtime
computes it. Both are formulas people really write, not switches on the runtime:

* CentredSigmoid (layers.5): sigmoid(x * 1e-7) - 0.5, scaled back up. The subtraction cancels
  all but the last few bits of the sigmoid, so it amplifies the ulp-level differences of the
  sigmoid's implementation: XNNPACK's polynomial sigmoid and IREE's expansion differ from
  eager PyTorch / ONNX Runtime there; inductor's and the portable kernels' are
  bit-identical to eager.
* MeanVar (layers.9): the variance as E[y^2] - E[y]^2 of values offset by 1e4. The
  cancellation amplifies the rounding of the sums, which depends on the order a runtime sums
  in: inductor's vectorised reduction, ExecuTorch's portable mean and IREE's differ from eager
  PyTorch / ONNX Runtime; XNNPACK does not take a mean over the last axis.
"""

import torch


class CentredSigmoid(torch.nn.Module):
    def forward(self, x):
        return (torch.sigmoid(x * 1e-7) - 0.5) * 4e7


class MeanVar(torch.nn.Module):
    def forward(self, x):
        y = x + 10000.0
        var = (y * y).mean(-1, keepdim=True) - y.mean(-1, keepdim=True) ** 2
        return x * var.abs().add(1.0).rsqrt()


class Stack(torch.nn.Module):
    def __init__(self, fragile, at):
        super().__init__()
        self.layers = torch.nn.ModuleList()
        for i in range(6):
            self.layers.append(torch.nn.Linear(64, 64))
            self.layers.append(fragile() if i == at else torch.nn.ReLU())

    def forward(self, x):
        for m in self.layers:
            x = m(x)
        return x


def sigmoid_net():
    return Stack(CentredSigmoid, 2).eval(), torch.randn(4, 64)


def meanvar_net():
    return Stack(MeanVar, 4).eval(), torch.randn(4, 64)
