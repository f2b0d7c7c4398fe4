"""driftscope.reference: numerical references both sides of a port can rebuild
(docs/references.md).

    from driftscope import reference
    w = reference.hash_tensor("layer.weight", (64, 32), "uniform", std=0.1)   # numpy
    reference.hash_init_(model)            # PyTorch, in place, native scale per parameter
    reference.reference_runs(model, inputs, "refs/")   # refs/float32.tdump, refs/float64.tdump
    table = reference.check("refs/float32.tdump", "cand.tdump", "refs/float64.tdump")

The numpy functions need nothing but numpy; hash_init_, calibration_inputs and reference_runs
import torch when first used.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._check import argmax_flips, check, render
from ._hash import digest_values, hash_integers, hash_tensor, hash_values, mix64, name_key

__all__ = ["hash_tensor", "hash_values", "hash_integers", "name_key", "mix64", "digest_values",
           "hash_init_", "native_rule", "linear_std", "calibration_inputs", "reference_runs",
           "check", "render", "argmax_flips"]

_LAZY = {"hash_init_": "._torch", "native_rule": "._torch", "linear_std": "._torch",
         "calibration_inputs": "._torch", "reference_runs": "._runs"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
