"""Dumps for the `driftscope compare` CLI tests, written with the independent spec writer
(tests/support/tdump_write.py) so the CLI is tested on files the C++ writer did not produce.

    python tests/cli/compare/fixtures.py OUT_DIR

Deterministic: a chain of ops y = tanh(M x + c) over 8x8 float32 matrices (ops "layers.0" ..
"layers.5", op type "Layer"), recorded as a reference and as candidates with a known fault:

  ref.tdump        the reference run (metadata: framework=fixture, precision=float32)
  same.tdump       an identical run                              -> pass
  scaled.tdump     op 3's output scaled by 1.5, later ops from it -> diverged at layers.3
  zeroed.tdump     op 2's output all zeros                        -> silent failure at layers.2
  nan.tdump        op 4's output has a NaN                        -> silent failure at layers.4
  partial.tdump    only ops 0..3 (a run cut short) plus "extra"   -> unpaired tensors
  renamed.tdump    the same values under ONNX-like names "/layers/N/output_0"
  ref64.tdump      the reference chain computed and stored in float64 (for --reference64)
  half.tdump       the chain with every op's result rounded to float16, stored as f16
  logits_a/b.tdump a [4,5] "head" tensor whose argmax differs in one of four rows
"""
from __future__ import annotations

import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support"))
import tdump_write as tw  # noqa: E402

N = 8
OPS = 6
SALT = 0x5EED


def _rng_matrix(seed: int, scale: float) -> np.ndarray:
    return (np.random.default_rng(seed).uniform(-1.0, 1.0, (N, N)) * scale).astype(np.float64)


def chain(fault: str | None = None, at: int = -1, dtype=np.float32) -> list[np.ndarray]:
    m = _rng_matrix(100, 1.5 / np.sqrt(N))
    c = _rng_matrix(200, 0.1)
    x = _rng_matrix(300, 1.0).astype(np.float32).astype(np.float64)
    outs = []
    for i in range(OPS):
        y = np.tanh(m @ x + c)
        if i == at:
            if fault == "scale":
                y = y * 1.5
            elif fault == "zero":
                y = np.zeros_like(y)
            elif fault == "nan":
                y = y.copy()
                y[0, 5] = np.nan
        y = y.astype(dtype)
        outs.append(y)
        x = y.astype(np.float64)
    return outs


def tensors(outs, names=None, dtype="f32"):
    return [{"name": names[i] if names else f"layers.{i}", "op_type": "Layer", "dtype": dtype,
             "shape": [N, N], "axes": "row,col", "data": o} for i, o in enumerate(outs)]


META = [("framework", "fixture"), ("precision", "float32")]


def write_all(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    ref = chain()
    tw.write_tdump(os.path.join(out, "ref.tdump"), META, tensors(ref), SALT)
    tw.write_tdump(os.path.join(out, "same.tdump"), META, tensors(chain()), SALT)
    tw.write_tdump(os.path.join(out, "scaled.tdump"), META, tensors(chain("scale", 3)), SALT)
    tw.write_tdump(os.path.join(out, "zeroed.tdump"), META, tensors(chain("zero", 2)), SALT)
    tw.write_tdump(os.path.join(out, "nan.tdump"), META, tensors(chain("nan", 4)), SALT)
    partial = tensors(ref[:4]) + [{"name": "extra", "op_type": "Layer", "dtype": "f32", "shape": [2],
                                   "data": np.array([1, 2], np.float32)}]
    tw.write_tdump(os.path.join(out, "partial.tdump"), META, partial, SALT)
    tw.write_tdump(os.path.join(out, "renamed.tdump"), META,
                   tensors(ref, [f"/layers/{i}/output_0" for i in range(OPS)]), SALT)
    tw.write_tdump(os.path.join(out, "ref64.tdump"), [("precision", "float64")],
                   tensors(chain(dtype=np.float64), dtype="f64"), SALT)
    tw.write_tdump(os.path.join(out, "half.tdump"), [("precision", "float16")],
                   tensors(chain(dtype=np.float16), dtype="f16"), SALT)
    a = np.array([[0.1, 0.9, 0.2, 0.3, 0.0], [1, 2, 3, 4, 5], [5, 4, 3, 2, 1], [0, 0, 1, 0, 0]], np.float32)
    b = a.copy()
    b[0, 1] = 0.29
    for name, v in (("logits_a.tdump", a), ("logits_b.tdump", b)):
        tw.write_tdump(os.path.join(out, name), META,
                       [{"name": "head", "op_type": "Linear", "dtype": "f32", "shape": [4, 5], "data": v}], SALT)


if __name__ == "__main__":
    write_all(sys.argv[1] if len(sys.argv) > 1 else ".")
