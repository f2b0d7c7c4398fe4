"""The reference runs the reference and evidence tests share: float32 and float64 runs of a small
hash-initialised classifier on hash-integer inputs, and a bfloat16 candidate of the same model."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Dict


def classifier_runs(d: Path) -> Dict[str, str]:
    """{"float32", "float64", "bf16"}: dump paths under folder `d`."""
    import numpy as np
    import torch

    import driftscope.torch as dt
    from driftscope import reference as R

    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 10))
    R.hash_init_(m)
    x = torch.from_numpy(R.hash_integers("input", (64, 16), -8, 8).astype(np.float32) / 8)
    paths = dict(R.reference_runs(m, x, str(d / "refs")))
    c = copy.deepcopy(m).to(torch.bfloat16)
    with torch.no_grad(), dt.record(c, d / "bf16.tdump"):
        c(x.to(torch.bfloat16))
    paths["bf16"] = str(d / "bf16.tdump")
    return paths
