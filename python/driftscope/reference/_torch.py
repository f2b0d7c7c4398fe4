"""driftscope.reference.hash_init_ (docs/references.md "PyTorch"): fills a model's parameters in
place with the hash initialiser at each parameter's native scale, calibrates BatchNorm statistics
on separate integer-generated inputs, and records what it did as metadata."""

from __future__ import annotations

import fnmatch
import json
import math
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from ._hash import hash_integers, hash_tensor

SCHEME = "driftscope-hash/1"  # docs/references.md: bump with any change of the values
METADATA_KEY = "reference.init"
Rule = Tuple[str, float]  # ("uniform" | "normal" | "constant", std or the constant)

_LINEAR_LIKE = (torch.nn.Linear, torch.nn.Bilinear, torch.nn.modules.conv._ConvNd)
_NORMS = (torch.nn.modules.batchnorm._NormBase, torch.nn.LayerNorm, torch.nn.GroupNorm)
if hasattr(torch.nn, "RMSNorm"):
    _NORMS = _NORMS + (torch.nn.RMSNorm,)
_RNNS = (torch.nn.RNNBase,)


def _fan_in(weight: torch.Tensor) -> int:
    return int(torch.nn.init._calculate_fan_in_and_fan_out(weight)[0])


def _fan_in_out(weight: torch.Tensor) -> Tuple[int, int]:
    fi, fo = torch.nn.init._calculate_fan_in_and_fan_out(weight)
    return int(fi), int(fo)


def linear_std(fan_in: int) -> float:
    """std of PyTorch's Linear/Conv default (kaiming_uniform(a=sqrt(5)), bias U(+-1/sqrt(fan_in))):
    the bound is 1/sqrt(fan_in), so std = 1/sqrt(3 fan_in), computed exactly this way (the C++,
    Java and ONNX paths use the same expression)."""
    return 1.0 / math.sqrt(3.0 * fan_in)


def native_rule(module: torch.nn.Module, param_name: str, param: torch.Tensor,
                parent: Optional[torch.nn.Module] = None, attr: str = "") -> Optional[Rule]:
    """The native initializer of `module`'s own parameter `param_name`, as a hash rule; None when
    the module type is unknown (hash_init_ then needs an override)."""
    if isinstance(parent, torch.nn.MultiheadAttention) and attr == "out_proj" and param_name == "bias":
        return ("constant", 0.0)  # MultiheadAttention._reset_parameters zeroes out_proj.bias
    if isinstance(module, torch.nn.Bilinear):
        return ("uniform", linear_std(module.weight.size(1)))
    if isinstance(module, _LINEAR_LIKE):
        return ("uniform", linear_std(_fan_in(module.weight)))
    if isinstance(module, (torch.nn.Embedding, torch.nn.EmbeddingBag)):
        return ("normal", 1.0)
    if isinstance(module, _NORMS):
        return ("constant", 1.0 if param_name == "weight" else 0.0)
    if isinstance(module, _RNNS):
        return ("uniform", linear_std(module.hidden_size))
    if isinstance(module, torch.nn.MultiheadAttention):
        if param_name.endswith("_bias"):
            return ("constant", 0.0)
        if param_name in ("in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight"):
            fi, fo = _fan_in_out(param)
            return ("uniform", math.sqrt(2.0 / (fi + fo)))  # xavier_uniform
        if param_name in ("bias_k", "bias_v"):
            fi, fo = _fan_in_out(param)
            return ("normal", math.sqrt(2.0 / (fi + fo)))  # xavier_normal
    if isinstance(module, torch.nn.PReLU):
        return ("constant", 0.25)
    return None


def _as_rule(value: Union[Rule, Sequence[Any]], where: str) -> Rule:
    if (not isinstance(value, (tuple, list)) or len(value) != 2
            or value[0] not in ("uniform", "normal", "constant")):
        raise ValueError(f"{where}: a rule is (\"uniform\"|\"normal\"|\"constant\", number), "
                         f"got {value!r}")
    return (str(value[0]), float(value[1]))


def _fill(param: torch.Tensor, name: str, rule: Rule, seed: int) -> None:
    kind, value = rule
    with torch.no_grad():
        if kind == "constant":
            param.fill_(value)
            return
        wide = param.dtype == torch.float64
        arr = hash_tensor(name, tuple(param.shape), kind, value,
                          "float64" if wide else "float32", seed)
        # other float dtypes (bfloat16, float16) get the float32 values rounded by torch
        param.copy_(torch.from_numpy(arr).to(param.dtype))


def calibration_inputs(shape: Sequence[int], batches: int = 4, name: str = "calibration",
                       low: int = -128, high: int = 128, scale: float = 1.0 / 64,
                       dtype: torch.dtype = torch.float32, seed: int = 0) -> list:
    """Calibration batches made from integer hash draws (docs/references.md "Integer inputs"):
    batch b is hash_integers(f"{name}.{b}", shape, low, high) * scale. Keep `name` apart from the
    names of evaluation inputs, so calibration never sees the data it is judged on."""
    return [torch.from_numpy((hash_integers(f"{name}.{b}", shape, low, high, seed) * scale)
                             .astype(np.float64)).to(dtype) for b in range(batches)]


def _calibrate(model: torch.nn.Module,
               calibrate: Union[Callable[[torch.nn.Module], Any], Iterable[Any]]) -> int:
    """Cumulative BatchNorm statistics (momentum None) over the calibration batches, with every
    other module in eval mode (no dropout)."""
    norms = [m for m in model.modules()
             if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.track_running_stats]
    was_training = model.training
    saved = [(m, m.momentum) for m in norms]
    model.eval()
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
        m.train()
    batches = 0
    try:
        with torch.no_grad():
            if callable(calibrate):
                calibrate(model)
                batches = -1
            else:
                for batch in calibrate:
                    model(*batch) if isinstance(batch, (tuple, list)) else model(batch)
                    batches += 1
    finally:
        for m, momentum in saved:
            m.momentum = momentum
        model.train(was_training)
    return batches


def hash_init_(model: torch.nn.Module, seed: int = 0, *,
               overrides: Optional[Mapping[str, Union[Rule, Sequence[Any]]]] = None,
               calibrate: Union[None, Callable[[torch.nn.Module], Any], Iterable[Any]] = None,
               prefix: str = "") -> Dict[str, Any]:
    """Fills every parameter of `model` in place: parameter NAME (as named_parameters() spells it,
    after `prefix`) gets hash_tensor(prefix + NAME, shape, dist, std, seed) where dist and std are
    those of its native PyTorch initializer (native_rule; constants such as LayerNorm's ones stay
    constants). `overrides` maps parameter names or globs to rules and wins over the native rule:
    {"*.weight": ("normal", 0.02)}. A parameter of an unknown module type without an override is
    an error naming it.

    With BatchNorm layers, `calibrate` (an iterable of input batches, each a tensor or a tuple of
    positional inputs; or a function called with the model) re-estimates their running statistics;
    use calibration_inputs() for integer-generated batches. Without it the statistics are reset to
    their native values (mean 0, variance 1).

    Returns the record of what was done (also stored as `model.driftscope_reference` and written
    by driftscope.torch recordings as the run metadata key "reference.init")."""
    rules: Dict[str, Rule] = {}
    over = {k: _as_rule(v, f"overrides[{k!r}]") for k, v in (overrides or {}).items()}
    owners: Dict[str, Tuple[torch.nn.Module, str, Optional[torch.nn.Module], str]] = {}
    for mname, module in model.named_modules():
        parent, attr = None, ""
        if mname:
            pname, _, attr = mname.rpartition(".")
            parent = model.get_submodule(pname) if pname else model
        for pn, _ in module.named_parameters(recurse=False):
            owners[f"{mname}.{pn}" if mname else pn] = (module, pn, parent, attr)
    unknown = []
    for name, param in model.named_parameters():
        rule = over.get(name)
        if rule is None:
            for pattern, r in over.items():
                if fnmatch.fnmatchcase(name, pattern):
                    rule = r
                    break
        if rule is None:
            module, pn, parent, attr = owners[name]
            rule = native_rule(module, pn, param, parent, attr)
            if rule is None:
                unknown.append(f"{name} ({type(module).__name__})")
                continue
        if not param.is_floating_point():
            raise ValueError(f"parameter {name} has dtype {param.dtype}; the hash initialiser "
                             f"fills floating-point parameters")
        rules[name] = rule
    if unknown:
        raise ValueError("no native initializer known for " + ", ".join(unknown) +
                         "; give one with overrides={name_or_glob: ('uniform'|'normal', std)}")
    for name, param in model.named_parameters():
        _fill(param, prefix + name, rules[name], seed)
    for m in model.modules():
        if isinstance(m, torch.nn.Embedding) and m.padding_idx is not None:
            with torch.no_grad():
                m.weight[m.padding_idx].fill_(0)  # as nn.Embedding.reset_parameters does
    norms = [m for m in model.modules()
             if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.track_running_stats]
    for m in norms:
        m.reset_running_stats()
    batches = _calibrate(model, calibrate) if (norms and calibrate is not None) else 0
    record: Dict[str, Any] = {
        "scheme": SCHEME, "seed": str(seed), "prefix": prefix,
        "parameters": {n: [k, v] for n, (k, v) in rules.items()},
        "batchnorm": ("none" if not norms else
                      "calibrated" if calibrate is not None else "reset (not calibrated)"),
    }
    if norms and calibrate is not None:
        record["calibration_batches"] = batches
    try:
        model.driftscope_reference = record  # type: ignore[attr-defined]
    except (AttributeError, TypeError):
        pass
    return record


def metadata_of(model: torch.nn.Module) -> Optional[str]:
    """The "reference.init" run-metadata value of a model hash_init_ filled, as compact JSON."""
    rec = getattr(model, "driftscope_reference", None)
    return json.dumps(rec, sort_keys=True, separators=(",", ":")) if rec else None
