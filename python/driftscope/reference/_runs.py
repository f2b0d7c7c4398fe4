"""Reference runs in one call (docs/references.md "Reference runs"): the same model and inputs
recorded in float32 and in float64, named alike, so that compare --reference64 can apply the
ordering rule to any candidate."""

from __future__ import annotations

import copy
import os
from typing import Any, Dict, Optional

import torch


def reference_runs(model: torch.nn.Module, inputs: Any, out_dir: str, *, filter: str = "",
                   meta: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """Records `model(inputs)` twice into out_dir/float32.tdump and out_dir/float64.tdump. The
    float64 run uses a copy of the model cast with .double() (the float32 weights, exactly) and
    floating inputs cast the same way, so the two runs differ only in arithmetic width."""
    from ..recorders.api import (torch_call as _call, torch_convert_inputs as _convert_inputs,
                                 torch_record as record)

    os.makedirs(out_dir, exist_ok=True)
    paths = {}
    for tag, dtype in (("float32", torch.float32), ("float64", torch.float64)):
        m = copy.deepcopy(model).to(dtype).eval()
        if hasattr(model, "driftscope_reference"):
            m.driftscope_reference = model.driftscope_reference
        x = _convert_inputs(inputs, dtype, None)
        path = os.path.join(out_dir, f"{tag}.tdump")
        with torch.no_grad():
            with record(m, path, filter=filter,
                        meta=dict(meta or {}, **{"reference.precision": tag})):
                _call(m, x)
        paths[tag] = path
    return paths
