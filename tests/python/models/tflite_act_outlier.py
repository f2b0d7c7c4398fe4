"""A float .tflite whose op `first` reads one activation of 1000 beside ones of about 1 (issue
28 item 5): `shift` adds a constant 1000 to feature 0 of the input. Static INT8 activations
(step about 1000 / 127) round the small features to zero, INT16 ones (1000 / 32767) keep them.
The outlier's weights in `first` are zero, so the float model's output does not depend on it.
(The outlier is made inside the model: ai-edge-quantizer quantizes the graph input itself, so
an outlier in the input could not be kept out of INT8 by any op's recipe.)

    input float32[1,16] -> shift (ADD) -> first -> second -> output (FULLY_CONNECTED)
"""

from __future__ import annotations

import numpy as np

import tflite_models as tm

N = 16


def build() -> bytes:
    s = tm._schema()
    T, Op, Opt = s.TensorType, s.BuiltinOperator, s.BuiltinOptions
    b = tm._Builder()
    rng = np.random.default_rng(5)
    x = b.tensor("input", [1, N], T.FLOAT32)
    c = np.zeros((1, N), np.float32)
    c[0, 0] = 1000.0
    ct = b.tensor("shift/constant", [1, N], T.FLOAT32, c)
    cur = b.tensor("shift", [1, N], T.FLOAT32)
    b.op(Op.ADD, 1, [x, ct], [cur], Opt.AddOptions, s.AddOptionsT())
    for name in ("first", "second"):
        w = rng.normal(0, 0.3, (N, N))
        if name == "first":
            w[:, 0] = 0.0  # the outlier feature adds nothing
        wt = b.tensor(f"{name}/weights", [N, N], T.FLOAT32, w.astype(np.float32))
        bt = b.tensor(f"{name}/bias", [N], T.FLOAT32, np.zeros(N, np.float32))
        y = b.tensor(name, [1, N], T.FLOAT32)
        b.op(Op.FULLY_CONNECTED, 1, [cur, wt, bt], [y], Opt.FullyConnectedOptions,
             s.FullyConnectedOptionsT())
        cur = y
    return b.finish([x], [cur], "driftscope test model (float, one activation outlier)")


