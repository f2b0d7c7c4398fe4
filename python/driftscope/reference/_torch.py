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
    cls = type(module).__name__
    if "RMSNorm" in cls and param_name in ("weight", "bias"):
        # transformers' own RMSNorm classes (LlamaRMSNorm, Qwen2RMSNorm, ...) are not
        # torch.nn.RMSNorm; their __init__ sets ones, except Gemma's (1 + weight): zeros
        gemma = param_name == "weight" and cls.startswith("Gemma")
        return ("constant", 1.0 if param_name == "weight" and not gemma else 0.0)
    if cls == "Conv1D" and type(module).__module__.startswith("transformers"):
        # GPT-2's transposed Linear: Conv1D.__init__ draws normal(0.02), bias zeros
        return ("normal", 0.02) if param_name == "weight" else ("constant", 0.0)
    return None


# -- the transformers rules (docs/references.md "Hugging Face transformers models") ------------
# A re-statement of transformers' own PreTrainedModel._init_weights and of the listed families'
# overrides (transformers 5.x), keyed by class names so that the bytes depend on the module tree
# and its config only, never on the transformers version installed.
TRANSFORMERS_FAMILIES = ("Bert", "ViT", "GPT2", "Llama", "Qwen2", "Gemma", "Whisper", "T5")
_HF_CONVS = (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d,
             torch.nn.ConvTranspose1d, torch.nn.ConvTranspose2d)
_HF_NORMS = (torch.nn.GroupNorm, torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)
# the hash's normal is Irwin-Hall of 4, bounded by 2*sqrt(3)*std: inside trunc_normal_'s
# default (-2, 2) cut up to this std, where the truncated and the plain normal agree
_TRUNC_MAX_STD = 2.0 / (2.0 * math.sqrt(3.0))


def _mro_names(obj: Any) -> set:
    return {c.__name__ for c in type(obj).__mro__}


def _pretrained_base(obj: Any) -> bool:
    return any(c.__name__ == "PreTrainedModel" and c.__module__.startswith("transformers")
               for c in type(obj).__mro__)


def _family(owner: torch.nn.Module) -> Optional[str]:
    """The listed family whose _init_weights `owner` (a PreTrainedModel) runs; "" for the base
    class's alone; None for an init this module does not restate."""
    fn = getattr(type(owner), "_init_weights", None)
    defined = getattr(fn, "__qualname__", "").split(".")[0]
    if defined == "PreTrainedModel":
        return ""
    for fam in TRANSFORMERS_FAMILIES:
        if defined == f"{fam}PreTrainedModel":
            return fam
    return None


def _hf_std(config: Any) -> float:
    if hasattr(config, "initializer_range"):
        return float(config.initializer_range or 0.02)
    if hasattr(config, "init_std"):
        return float(config.init_std)
    if hasattr(config, "initializer_factor"):
        return float(config.initializer_factor)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return float(getattr(text, "initializer_range", 0.02))


def _hf_module_rules(module: torch.nn.Module, fam: str, config: Any) -> Dict[str, Rule]:
    """Rules by parameter name relative to `module`, as PreTrainedModel._init_weights and the
    family's override set them when called on `module`."""
    std = _hf_std(config)
    out: Dict[str, Rule] = {}
    names = _mro_names(module)

    def own(attr: str) -> bool:
        return isinstance(getattr(module, attr, None), torch.nn.Parameter)

    if isinstance(module, _HF_CONVS):
        if own("weight"):
            out["weight"] = ("normal", std)
        if own("bias"):
            out["bias"] = ("constant", 0.0)
    elif isinstance(module, torch.nn.LSTM):
        for pn, p in module.named_parameters(recurse=False):
            if "weight" in pn:
                fi, fo = _fan_in_out(p)
                out[pn] = ("uniform", math.sqrt(2.0 / (fi + fo)))  # xavier_uniform
            elif "bias" in pn:
                out[pn] = ("constant", 0.0)
    elif isinstance(module, torch.nn.Embedding):
        out["weight"] = ("normal", std)  # padding_idx row: zeroed by hash_init_ afterwards
    elif isinstance(module, torch.nn.MultiheadAttention):
        for pn, p in module.named_parameters(recurse=False):
            r = native_rule(module, pn, p)
            if r is not None:
                out[pn] = r
        if module.out_proj.bias is not None:
            out["out_proj.bias"] = ("constant", 0.0)
    elif (isinstance(module, _HF_NORMS) or "LayerNorm" in type(module).__name__
          or "RMSNorm" in type(module).__name__):
        if own("weight"):
            out["weight"] = ("constant", 1.0)
        if own("bias"):
            out["bias"] = ("constant", 0.0)

    if fam == "Bert" and "BertLMPredictionHead" in names and own("bias"):
        out["bias"] = ("constant", 0.0)
    elif fam == "ViT" and "ViTEmbeddings" in names:
        r = float(config.initializer_range)
        if r > _TRUNC_MAX_STD:
            raise ValueError(f"ViT initializer_range {r} is above {_TRUNC_MAX_STD:.4f}, where "
                             f"trunc_normal_(-2, 2) cuts the normal; give overrides for "
                             f"cls_token and position_embeddings")
        for attr in ("position_embeddings", "cls_token"):
            if own(attr):
                out[attr] = ("normal", r)  # trunc_normal_(std=initializer_range), cut at +-2
        if own("mask_token"):
            out["mask_token"] = ("constant", 0.0)
    elif fam == "GPT2":
        if "Conv1D" in names:
            out["weight"] = ("normal", float(config.initializer_range))
            if own("bias"):
                out["bias"] = ("constant", 0.0)
        if names & {"GPT2Attention", "GPT2MLP"}:
            out["c_proj.weight"] = ("normal", float(config.initializer_range)
                                    / math.sqrt(2 * config.n_layer))
    elif fam == "Gemma" and "RMSNorm" in type(module).__name__ and own("weight"):
        out["weight"] = ("constant", 0.0)  # Gemma's RMSNorm multiplies by (1 + weight)
    elif fam == "Whisper":
        if "WhisperEncoder" in names:
            # the library copies fixed sinusoids here (values in [-1, 1]); their bits would depend
            # on the platform's sin/cos, so the hash draws uniform in [-1, 1) instead
            out["embed_positions.weight"] = ("uniform", 1.0 / math.sqrt(3.0))
        elif ("WhisperForAudioClassification" in names and config.use_weighted_layer_sum
              and own("layer_weights")):
            out["layer_weights"] = ("constant", 1.0 / (config.num_hidden_layers + 1))
    elif fam == "T5":
        f = float(config.initializer_factor)
        dm, dkv, dff, nh = config.d_model, config.d_kv, config.d_ff, config.num_heads

        def lin(attr: str, s: float) -> None:
            sub = getattr(module, attr, None)
            if sub is None:
                return
            out[f"{attr}.weight"] = ("normal", s)
            if getattr(sub, "bias", None) is not None:
                out[f"{attr}.bias"] = ("constant", 0.0)

        if "T5LayerNorm" in names:
            out["weight"] = ("constant", f * 1.0)
        elif names & {"T5Model", "T5ForConditionalGeneration", "T5EncoderModel",
                      "T5ForQuestionAnswering"}:
            out["shared.weight"] = ("normal", f * 1.0)
            if hasattr(module, "lm_head") and not config.tie_word_embeddings:
                out["lm_head.weight"] = ("normal", f * 1.0)
            if hasattr(module, "qa_outputs"):
                lin("qa_outputs", f * dm ** -0.5)
        elif "T5ForTokenClassification" in names and hasattr(module, "classifier"):
            lin("classifier", f * 1.0)
        elif "T5ClassificationHead" in names:
            lin("dense", f * dm ** -0.5)
            lin("out_proj", f * dm ** -0.5)
        elif "T5DenseActDense" in names:
            lin("wi", f * dm ** -0.5)
            lin("wo", f * dff ** -0.5)
        elif "T5DenseGatedActDense" in names:
            lin("wi_0", f * dm ** -0.5)
            lin("wi_1", f * dm ** -0.5)
            lin("wo", f * dff ** -0.5)
        elif "T5Attention" in names:
            out["q.weight"] = ("normal", f * (dm * dkv) ** -0.5)
            out["k.weight"] = ("normal", f * dm ** -0.5)
            out["v.weight"] = ("normal", f * dm ** -0.5)
            out["o.weight"] = ("normal", f * (nh * dkv) ** -0.5)
            if getattr(module, "has_relative_attention_bias", False):
                out["relative_attention_bias.weight"] = ("normal", f * dm ** -0.5)
    return out


def transformers_rules(model: torch.nn.Module) -> Dict[int, Rule]:
    """id(parameter) -> rule, applied in the library's order (children first, then the module;
    the later rule wins; a PreTrainedModel inside the tree brings its own config and family)."""
    rules: Dict[int, Rule] = {}

    def visit(module: torch.nn.Module, owner: Optional[torch.nn.Module], fam: str) -> None:
        if _pretrained_base(module):
            owner, f = module, _family(module)
            if f is None:
                raise ValueError(f"{type(module).__name__}: its _init_weights is not one of the "
                                 f"families hash_init_ restates "
                                 f"({', '.join(TRANSFORMERS_FAMILIES)}); use rules='torch' or "
                                 f"overrides")
            fam = f
        for child in module.children():
            visit(child, owner, fam)
        if owner is None:
            return  # outside every PreTrainedModel: PyTorch's defaults (native_rule)
        for rel, rule in _hf_module_rules(module, fam, owner.config).items():
            rules[id(module.get_parameter(rel))] = rule
        if module is owner:
            for p in module.parameters():
                rules.setdefault(id(p), None)  # type: ignore[arg-type]  # inside, no rule

    visit(model, None, "")
    return rules


def _rules_kind(model: torch.nn.Module, rules: str) -> str:
    if rules not in ("auto", "torch", "transformers"):
        raise ValueError(f"rules={rules!r}: one of 'auto', 'torch', 'transformers'")
    if rules != "auto":
        if rules == "transformers" and not any(_pretrained_base(m) for m in model.modules()):
            raise ValueError("rules='transformers' needs a transformers PreTrainedModel in the "
                             "module tree")
        return rules
    hf = [m for m in model.modules() if _pretrained_base(m)]
    return "transformers" if hf and all(_family(m) is not None for m in hf) else "torch"


def _as_rule(value: Union[Rule, Sequence[Any]], where: str) -> Rule:
    if (not isinstance(value, (tuple, list)) or len(value) != 2
            or value[0] not in ("uniform", "normal", "constant")):
        raise ValueError(f"{where}: a rule is ('uniform', std), ('normal', std) or "
                         f"('constant', value), got {value!r}")
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
               prefix: str = "", rules: str = "auto") -> Dict[str, Any]:
    """Fills every parameter of `model` in place: parameter NAME (as named_parameters() spells it,
    after `prefix`) gets hash_tensor(prefix + NAME, shape, dist, std, seed) where dist and std are
    those of its native initializer (constants such as LayerNorm's ones stay constants).

    `rules` says whose initializer is native: "torch" (native_rule: PyTorch's defaults per module
    type), "transformers" (the library's _init_weights, restated per family for
    TRANSFORMERS_FAMILIES: Linear/Embedding normal(initializer_range), GPT-2's scaled c_proj, T5's
    per-projection std, ...), or "auto" (the default): "transformers" when the tree holds
    transformers models of those families (or of families that keep the base class's
    _init_weights), "torch" otherwise. `overrides` maps parameter names or globs to rules and wins
    over the native rule: {"*.weight": ("normal", 0.02)}; a rule is ("uniform", std),
    ("normal", std) or ("constant", value). A parameter with no rule is an error naming it.

    With BatchNorm layers, `calibrate` (an iterable of input batches, each a tensor or a tuple of
    positional inputs; or a function called with the model) re-estimates their running statistics;
    use calibration_inputs() for integer-generated batches. Without it the statistics are reset to
    their native values (mean 0, variance 1).

    Returns the record of what was done (also stored as `model.driftscope_reference` and written
    by driftscope.torch recordings as the run metadata key "reference.init")."""
    kind = _rules_kind(model, rules)
    hf = transformers_rules(model) if kind == "transformers" else {}
    chosen: Dict[str, Rule] = {}
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
            rule = (hf[id(param)] if id(param) in hf
                    else native_rule(module, pn, param, parent, attr))
            if rule is None:
                unknown.append(f"{name} ({type(module).__name__})")
                continue
        if not param.is_floating_point():
            raise ValueError(f"parameter {name} has dtype {param.dtype}; the hash initialiser "
                             f"fills floating-point parameters")
        chosen[name] = rule
    if unknown:
        raise ValueError(f"no native initializer known ({kind} rules) for " + ", ".join(unknown) +
                         "; give one with overrides={name_or_glob: rule}, a rule being "
                         "('uniform', std), ('normal', std) or ('constant', value)")
    for name, param in model.named_parameters():
        _fill(param, prefix + name, chosen[name], seed)
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
        "scheme": SCHEME, "seed": str(seed), "prefix": prefix, "rules": kind,
        "parameters": {n: [k, v] for n, (k, v) in chosen.items()},
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
