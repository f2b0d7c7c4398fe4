"""The PyTorch backends (torch, torch-bf16, torch-fp16): the model from MODULE:FUNCTION run in
eager mode on the CPU, in float32 or with the model and its float inputs in bfloat16/float16;
the fallback's recipe keeps chosen modules in float32 with forward hooks.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from .base import Backend, Session, _missing


def torch_example(spec: str, seed: int) -> Any:
    """Calls FUNCTION of ``file.py:FUNCTION`` (or ``module:FUNCTION``) after seeding torch, and
    returns its (model, inputs)."""
    import torch

    from ...errors import InvalidArgumentError
    from ...recorders.api import torch_load_entry_point as _load_entry_point

    torch.manual_seed(seed)
    made = _load_entry_point(spec)()
    if not (isinstance(made, tuple) and len(made) == 2):
        raise InvalidArgumentError(f"--model {spec}: the function must return (model, inputs), "
                                   f"got {type(made).__name__}", 1, "invalid_argument")
    return made


def torch_leaves(inputs: Any) -> Dict[str, Any]:
    """The tensors of an entry point's inputs, by the name guard gives them: the key of a dict,
    ``input0``, ``input1``... of a tuple, ``input`` of a single tensor."""
    import torch

    if isinstance(inputs, torch.Tensor):
        return {"input": inputs}
    if isinstance(inputs, Mapping):
        return {str(k): v for k, v in inputs.items() if isinstance(v, torch.Tensor)}
    if isinstance(inputs, (list, tuple)):
        return {f"input{i}": v for i, v in enumerate(inputs) if isinstance(v, torch.Tensor)}
    raise TypeError(f"the entry point's inputs are a {type(inputs).__name__}; expected a "
                    "tensor, a tuple of positional arguments or a dict of keyword arguments")


def _rebuild(inputs: Any, feeds: Mapping[str, np.ndarray], dtype: Any) -> Any:
    import torch

    def conv(v: np.ndarray) -> Any:
        t = torch.from_numpy(np.ascontiguousarray(v))
        return t.to(dtype) if dtype is not None and t.is_floating_point() else t

    if isinstance(inputs, torch.Tensor):
        return conv(feeds["input"])
    if isinstance(inputs, Mapping):
        return {k: conv(feeds[str(k)]) if isinstance(v, torch.Tensor) else v
                for k, v in inputs.items()}
    return type(inputs)(conv(feeds[f"input{i}"]) if isinstance(v, torch.Tensor) else v
                        for i, v in enumerate(inputs))


class _TorchSession(Session):
    def __init__(self, model: Any, example: Any, dtype: Any, kept: Dict[str, Any]) -> None:
        self.model, self.example, self.dtype, self.notes = model, example, dtype, []
        # Module path -> the dtype of the last output its forward computed, before the cast
        # back to the model's dtype (the evidence that it ran in float32).
        self.kept, self.seen = kept, {}

    def _outputs(self, feeds: Mapping[str, np.ndarray], path: Optional[str]) -> Dict[str, Any]:
        import torch

        from ...recorders.api import torch_call as _call, torch_flat as _flat, torch_record as record

        with torch.no_grad():
            args = _rebuild(self.example, feeds, self.dtype)
            if path is None:
                out = _call(self.model, args)
            else:
                # Module inputs too: the probe tells an error born in a parent's own forward,
                # between its children, from one its child made (_probe._own_forward).
                with record(self.model, path, inputs=True,
                            meta={"precision": str(self.dtype or torch.float32)}):
                    out = _call(self.model, args)
        leaves, skipped = _flat(out)
        if not leaves:
            # Nothing to compare is not a pass (a guard of it would say every backend matches).
            kind = type(out).__name__
            inside = sorted(set(skipped) - {kind}) if skipped != [kind] else []
            raise ValueError(f"the model's output holds no tensor (it returned {kind}"
                             f"{' of ' + ', '.join(inside) if inside else ''})")
        result: Dict[str, np.ndarray] = {}
        for p, t in leaves:
            t = t.detach().cpu()
            if t.dtype in (torch.bfloat16, torch.float16):
                t = t.float()  # exact: every bf16/f16 value is a float32
            result[p.lstrip(".") or "output"] = t.numpy().copy()
        return result

    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        return self._outputs(feeds, None)

    def record(self, feeds: Mapping[str, np.ndarray], path: str) -> Dict[str, np.ndarray]:
        return self._outputs(feeds, path)

    def float32_evidence(self, nodes: Sequence[str]) -> Dict[str, str]:
        return self.precision_evidence(nodes, "float32")

    def precision_evidence(self, nodes: Sequence[str], precision: str) -> Dict[str, str]:
        import torch

        want = getattr(torch, precision, None)
        found: Dict[str, str] = {}
        for name in nodes:
            mod = self.kept.get(name)
            if mod is None or want is None or self.seen.get(name) != want:
                continue  # not kept, or its forward never produced an output in `precision`
            params = [(n, p.dtype) for n, p in mod.named_parameters()]
            bufs = [(n, b.dtype) for n, b in mod.named_buffers() if b.is_floating_point()]
            if any(d != want for _, d in params + bufs):
                continue
            what = (f"{len(params)} parameter(s) ({', '.join(n for n, _ in params[:4])}"
                    f"{', ...' if len(params) > 4 else ''}) {precision}, " if params else
                    "no parameters, ")
            found[name] = (f"{name} ({type(mod).__name__}): {what}its forward's output was "
                           f"{precision} (cast to {str(self.dtype).replace('torch.', '')} after)")
        return found


def _keep_module_float32(net: Any, name: str, seen: Dict[str, Any]) -> Any:
    """Module `name` of a model the fallback recipe has run on: watches its forward's output
    before the recipe's hook casts it back (prepended, so it runs first), the evidence that the
    module computed in float32 (_TorchSession.float32_evidence). Hooks, not a wrapper: module
    paths stay the same."""
    import torch

    from ...recorders.api import torch_flat as _flat

    mod = net.get_submodule(name)

    def watch(m: Any, args: Any, out: Any) -> None:
        floats = [t for _, t in _flat(out)[0]
                  if isinstance(t, torch.Tensor) and t.is_floating_point()]
        if floats:
            seen[name] = floats[0].dtype

    mod.register_forward_hook(watch, prepend=True)
    return mod


# The fallback recipe of a PyTorch model, as printed and as run: TorchBackend.load executes this
# very text on a freshly built model, so the variant verified is the code the user pastes. Its
# hooks reach every tensor of the module's arguments (positional and keyword) and of its output
# (tensor, tuple, list, dict, namedtuple, dataclass such as transformers' ModelOutput).
_TORCH_RECIPE = """\
import copy
import dataclasses

import torch

RUN_DTYPE = torch.{dtype}  # the precision guard ran the model in (feed float inputs in it too)


def cast_floats(x, dtype):
    \"\"\"x with every floating-point tensor in it cast to dtype (a copy; x is left as it is).\"\"\"
    if isinstance(x, torch.Tensor):
        return x.to(dtype) if x.is_floating_point() else x
    if isinstance(x, tuple) and hasattr(x, "_fields"):  # a namedtuple
        return type(x)(*(cast_floats(v, dtype) for v in x))
    if isinstance(x, (tuple, list)):
        return type(x)(cast_floats(v, dtype) for v in x)
    if isinstance(x, dict):  # also transformers' ModelOutput (a dict and a dataclass)
        out = copy.copy(x)
        for k, v in x.items():
            out[k] = cast_floats(v, dtype)
        return out
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return dataclasses.replace(x, **{{f.name: cast_floats(getattr(x, f.name), dtype)
                                         for f in dataclasses.fields(x) if f.init}})
    return x


def {keep}_on_entry(module, args, kwargs):
    return cast_floats(args, torch.{keep}), cast_floats(kwargs, torch.{keep})


def run_dtype_on_exit(module, args, output):
    return cast_floats(output, RUN_DTYPE)


model = model.to(RUN_DTYPE)
for name in {listed}:
    module = model.get_submodule(name).{to}
    module.register_forward_pre_hook({keep}_on_entry, with_kwargs=True)
    module.register_forward_hook(run_dtype_on_exit)
"""


class TorchBackend(Backend):
    family = "torch"
    # Importing torch is most of a child's start (about 2 CPU-seconds); the server pays it once.
    preload = ("torch",)

    def __init__(self, name: str, summary: str, dtype: Optional[str]) -> None:
        self.name, self.summary, self.dtype = name, summary, dtype

    def unavailable(self) -> Optional[str]:
        return _missing("torch", "torch")

    def can_keep_float32(self) -> bool:
        return self.dtype is not None

    def keep_precisions(self) -> Tuple[str, ...]:
        # bfloat16 has float32's exponent range: a module whose values overflow float16 can
        # stay 16-bit in it, at bfloat16's coarser mantissa.
        return ("bfloat16",) if self.dtype == "float16" else ()

    def load(self, model: str, work: str, seed: int, keep_float32: Sequence[str] = (),
             keep_precision: Optional[Mapping[str, str]] = None) -> Session:
        import torch

        if keep_float32 and not self.can_keep_float32():
            raise ValueError(f"{self.name} cannot keep modules in float32")
        precision = "float32"
        if keep_precision:
            wanted = set(keep_precision.values())
            if len(wanted) != 1 or not wanted <= set(self.keep_precisions()):
                raise ValueError(f"{self.name} keeps modules in one of "
                                 f"{', '.join(self.keep_precisions()) or 'float32'} only, not "
                                 f"{', '.join(sorted(wanted))}")
            if keep_float32:
                raise ValueError("keep_float32 and keep_precision in one variant")
            precision, keep_float32 = wanted.pop(), list(keep_precision)
        net, example = torch_example(model, seed)
        dtype = getattr(torch, self.dtype) if self.dtype else None
        seen: Dict[str, Any] = {}
        kept: Dict[str, Any] = {}
        if keep_float32:
            for n in keep_float32:
                try:
                    net.get_submodule(n)
                except AttributeError:
                    raise ValueError(f"the model has no module {n!r} (keep_float32)") from None
            # The printed recipe itself, run on this fresh model: what is verified is what the
            # user pastes (a recipe that fails here fails the variant).
            scope: Dict[str, Any] = {"model": net}
            # precision= only below float32: a subclass's recipe(model, nodes) keeps working.
            text = (self.recipe(model, keep_float32) if precision == "float32" else
                    self.recipe(model, keep_float32, precision=precision))
            code = compile(text, "<fallback recipe>", "exec")
            exec(code, scope)  # noqa: S102 - the recipe is the product
            net = scope["model"]
            kept = {n: _keep_module_float32(net, n, seen) for n in keep_float32}
        elif dtype is not None:
            net = net.to(dtype)
        net.eval()
        session = _TorchSession(net, example, dtype, kept)
        session.seen = seen
        if kept:
            session.notes.append(f"{len(kept)} module(s) kept in {precision} (fallback)")
        return session

    def recipe(self, model: str, nodes: Sequence[str], precision: str = "float32") -> str:
        listed = "[" + ", ".join(repr(n) for n in nodes) + "]"
        to = "float()" if precision == "float32" else f"to(torch.{precision})"
        return _TORCH_RECIPE.format(dtype=self.dtype, listed=listed, keep=precision, to=to)


# In --list-backends order (registry.py registers them).
BUILT_IN = (
    TorchBackend("torch", "PyTorch eager, CPU, float32", None),
    TorchBackend("torch-bf16", "PyTorch eager, CPU, model and float inputs in bfloat16",
                 "bfloat16"),
    TorchBackend("torch-fp16", "PyTorch eager, CPU, model and float inputs in float16 (float16 "
                 "arithmetic)", "float16"),
)
