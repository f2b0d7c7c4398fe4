"""A float .tflite model with one outlier-weight op, for the quantized LiteRT backends (issue 27).

    input float32[1,16] -> fc1 -> quiet -> outlier -> fc4 -> fc5 -> output (FULLY_CONNECTED, ReLU-free)

`quiet` computes its first two output channels with the same weights, so they are equal (in
float and once quantized alike). `outlier` reads them through weights +60 and -60 in every output
row, which cancel exactly, the other weights of a row being normal(0, 0.3): the outliers add
nothing to the output, but quantized with a scale per output channel (max |w| / 127 = 0.47) every
other weight of the row rounds to -1, 0 or 1 steps of 0.47, and the op's output loses much of
its signal (dynamic and static INT8, weight-only INT8 alike). The other ops' weights are plain
normal(0, 0.3) and quantize to a cosine above 0.999. No
SignatureDef unless `signature` (as a hand-made model may have none)."""

from __future__ import annotations

import numpy as np

import tflite_models as tm

N = 16
OPS = ["fc1", "quiet", "outlier", "fc4", "fc5"]


def build(signature: bool = False) -> bytes:
    s = tm._schema()
    T, Op, Opt = s.TensorType, s.BuiltinOperator, s.BuiltinOptions
    b = tm._Builder()
    rng = np.random.default_rng(11)
    x = b.tensor("input", [1, N], T.FLOAT32)
    cur = x

    def fc(name: str, w: np.ndarray) -> None:
        nonlocal cur
        wt = b.tensor(f"{name}/weights", [N, N], T.FLOAT32, w.astype(np.float32))
        bt = b.tensor(f"{name}/bias", [N], T.FLOAT32, np.zeros(N, np.float32))
        y = b.tensor(name, [1, N], T.FLOAT32)
        b.op(Op.FULLY_CONNECTED, 1, [cur, wt, bt], [y], Opt.FullyConnectedOptions,
             s.FullyConnectedOptionsT())
        cur = y

    fc("fc1", rng.normal(0, 0.3, (N, N)))
    quiet = rng.normal(0, 0.3, (N, N))
    quiet[1] = quiet[0]
    fc("quiet", quiet)
    w = rng.normal(0, 0.3, (N, N))
    w[:, 0], w[:, 1] = 120.0, -120.0
    fc("outlier", w)
    fc("fc4", rng.normal(0, 0.3, (N, N)))
    fc("fc5", rng.normal(0, 0.3, (N, N)))
    return b.finish([x], [cur], "driftscope test model (float, one outlier-weight op)",
                    signature=("serving_default", ["x"], ["y"]) if signature else None)
