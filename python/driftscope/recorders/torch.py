"""PyTorch recorder: write a model's intermediate tensors to a TDUMP file while it runs.

    import driftscope.torch
    with driftscope.torch.record(model, "run.tdump", filter="encoder.layer.*") as rec:
        model(x)
    print(rec.records_written, rec.skipped)

Module granularity (default) registers forward hooks on every module, named by module path
(``encoder.layer.0.attention``), op type = module class, occurrence = how many times that module
was called before, execution order = call order. ``granularity="op"`` records every operator
call through a TorchDispatchMode, named ``<module path>.<op>``. Hooks only read tensors: model
outputs are bit-identical with and without recording (tests/python/test_torch_recorder.py).

Data flow (docs/format.md §3.3.3): every record carries ``ds.inputs``, the recorded tensors it
was computed from, found by following tensor identity through every torch function (a
TorchFunctionMode tags each result with the records its arguments came from), ``ds.kind``, and
``ds.source``, the module class and the file:line of its ``forward``. ``parameters=True`` also
records each module's own parameters and buffers once (role ``parameter``).

See docs/howto/pytorch.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import inspect
import os
import platform
import sys
import warnings
import weakref
from collections import Counter
from typing import (Any, Callable, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence,
                    Tuple, Union)

import torch

from .. import _core
from .._cli import parse_args, refuse_output_onto_inputs
from .._progress import Progress
from .._entry import load_function
from .torch_sets import SetRecording
from . import axes_rules as _rules
from .axes_graph import Named as _Named, event_line as _event_line, names_text as _names_text, \
    writable as _writable
from .._torch_tensor import TORCH_TO_TDUMP, tensor_payload
from .._torch_tensor import Unsupported as _Unsupported, dim_names as _dim_names, prepare as _prepare
from .._writer import Writer
from ..errors import InvalidArgumentError, UnsupportedError

__all__ = ["record", "Recorder", "RecordEvent", "tensor_payload", "TORCH_TO_TDUMP", "cli_main"]


_MAX_ROLE_INDEX = 0xFFFF  # role_index is a u16 (docs/format.md §3.3)


class RecordEvent(NamedTuple):
    """Passed to ``on_record`` after each tensor offered to the writer."""

    name: str
    op_type: str
    role: str
    role_index: int
    occurrence: int
    exec_index: int
    status: str            # "written", "filtered", "over_budget"
    offset: Optional[int]  # record offset when written
    summary: bool          # light mode record



# Axis names of the 4-D activations of convolution-family modules (PyTorch lays images out NCHW;
# LiteRT's NHWC ones are named batch,height,width,channels: compare pairs them by these names).
NCHW_AXES = ("batch", "channels", "height", "width")
_CONV_FAMILY = (torch.nn.Conv2d, torch.nn.ConvTranspose2d, torch.nn.MaxPool2d, torch.nn.AvgPool2d,
                torch.nn.AdaptiveAvgPool2d, torch.nn.AdaptiveMaxPool2d, torch.nn.BatchNorm2d,
                torch.nn.InstanceNorm2d, torch.nn.Upsample, torch.nn.PixelShuffle)
_LAYOUT_KEEPING = (torch.nn.ReLU, torch.nn.ReLU6, torch.nn.LeakyReLU, torch.nn.PReLU,
                   torch.nn.Hardswish, torch.nn.Hardsigmoid, torch.nn.SiLU, torch.nn.GELU,
                   torch.nn.Sigmoid, torch.nn.Tanh, torch.nn.ELU, torch.nn.Hardtanh,
                   torch.nn.Dropout, torch.nn.Dropout2d, torch.nn.Identity, torch.nn.GroupNorm,
                   torch.nn.ZeroPad2d, torch.nn.ConstantPad2d, torch.nn.ReflectionPad2d)


def _declared_heads(module: "torch.nn.Module") -> Optional[int]:
    """The head count an attention module declares (torch's MultiheadAttention: num_heads;
    Hugging Face: num_attention_heads or num_heads), or None."""
    for attr in ("num_heads", "num_attention_heads", "n_heads", "n_head"):
        v = getattr(module, attr, None)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def module_axis_attrs(module: "torch.nn.Module") -> Dict[str, str]:
    """Reserved attributes (docs/axes.md) of a module's first output: the axes a LayerNorm or
    RMSNorm normalises (``norm_axes``, negative: counted from the last), ``norm_kind``
    (layer/rms), ``norm_affine`` (whether learned weight/bias differ from 1/0, which hides the
    statistics from ``driftscope check``), and the axis a Softmax sums to one along
    (``softmax_axis``)."""
    out: Dict[str, str] = {}
    kind = type(module).__name__
    weight = getattr(module, "weight", None)
    bias = getattr(module, "bias", None)

    def affine() -> str:
        with torch.no_grad():
            w = isinstance(weight, torch.Tensor) and not bool(torch.all(weight == 1))
            b = isinstance(bias, torch.Tensor) and not bool(torch.all(bias == 0))
        return "true" if w or b else "false"

    if isinstance(module, torch.nn.LayerNorm) or kind.endswith("RMSNorm"):
        shape = getattr(module, "normalized_shape", None)
        n = len(shape) if isinstance(shape, (tuple, list)) and len(shape) > 0 else 1
        out["norm_axes"] = ",".join(str(-i) for i in range(n, 0, -1))
        out["norm_kind"] = "rms" if kind.endswith("RMSNorm") else "layer"
        out["norm_affine"] = affine()
    elif isinstance(module, torch.nn.Softmax) and module.dim is not None:
        out["softmax_axis"] = str(module.dim)
    return out


# -- flattening outputs of any structure --------------------------------------------------------

def _flatten(obj: Any, path: str, out: List[Tuple[str, "torch.Tensor"]], skipped: List[str],
             seen: set) -> None:
    """Appends (path, tensor) leaves in a stable order: tuples/lists by position (``[0]``),
    mappings (dict, HF ModelOutput) by key (``['last_hidden_state']``), dataclasses and named
    tuples by field (``.logits``). Anything else is skipped and its type name collected."""
    if isinstance(obj, torch.Tensor):
        out.append((path, obj))
        return
    if obj is None or isinstance(obj, (str, bytes, int, float, bool, complex)):
        skipped.append(type(obj).__name__)
        return
    if id(obj) in seen:  # a structure that contains itself
        skipped.append(type(obj).__name__)
        return
    seen.add(id(obj))
    try:
        if isinstance(obj, Mapping):
            for k, v in obj.items():
                _flatten(v, f"{path}[{k!r}]", out, skipped, seen)
        elif isinstance(obj, tuple) and hasattr(obj, "_fields"):
            for k in obj._fields:
                _flatten(getattr(obj, k), f"{path}.{k}", out, skipped, seen)
        elif isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj):
                _flatten(v, f"{path}[{i}]", out, skipped, seen)
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            for f in dataclasses.fields(obj):
                _flatten(getattr(obj, f.name), f"{path}.{f.name}", out, skipped, seen)
        else:
            skipped.append(type(obj).__name__)
    finally:
        seen.discard(id(obj))


def _flat(obj: Any) -> Tuple[List[Tuple[str, "torch.Tensor"]], List[str]]:
    out: List[Tuple[str, torch.Tensor]] = []
    skipped: List[str] = []
    _flatten(obj, "", out, skipped, set())
    return out, skipped


# -- run metadata -------------------------------------------------------------------------------

def _model_device_dtype(model: "torch.nn.Module") -> Tuple[Optional[torch.device],
                                                           Optional[torch.dtype]]:
    device = dtype = None
    for p in model.parameters():
        device = device or p.device
        if p.is_floating_point():
            return device, p.dtype
    for b in model.buffers():
        device = device or b.device
        if b.is_floating_point():
            return device, b.dtype
    return device, dtype


def _device_description(device: torch.device) -> str:
    if device.type == "cuda" and torch.cuda.is_available():
        return f"{device} ({torch.cuda.get_device_name(device)})"
    if device.type == "cpu":
        return f"cpu ({platform.machine()}{', ' + platform.processor() if platform.processor() else ''})"
    return str(device)


def default_metadata(model: "torch.nn.Module", granularity: str) -> Dict[str, str]:
    """The run metadata a recording gets without asking (user keys override these)."""
    device, dtype = _model_device_dtype(model)
    device = device or torch.device("cpu")
    default_dtype = str(torch.get_default_dtype()).replace("torch.", "")
    cls = type(model)
    extra: Dict[str, str] = {}
    reference = getattr(model, "driftscope_reference", None)
    if reference:  # set by driftscope.reference.hash_init_ (docs/references.md)
        import json

        extra["reference.init"] = json.dumps(reference, sort_keys=True, separators=(",", ":"))
    return {
        **extra,
        "framework": f"pytorch {torch.__version__}",
        "backend": device.type,
        "device": _device_description(device),
        "precision": str(dtype).replace("torch.", "") if dtype is not None else default_dtype,
        "default_dtype": default_dtype,
        "model": f"{cls.__module__}.{cls.__qualname__}",
        "start_time": datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%S.%fZ"),
        "host": platform.node(),
        "granularity": granularity,
        "writer": f"driftscope {_core.__version__} (python, torch)",
    }


# -- axis names that flow (docs/axes.md §1.1) ----------------------------------------------------

def _parse_input_axes(spec: Any) -> Dict[str, Tuple[str, ...]]:
    """input_axes= checked before anything is created: one clear error for the whole call."""
    if spec is None:
        return {}
    if not isinstance(spec, Mapping):
        raise InvalidArgumentError(f"input_axes: expected a dict {{input name: 'a,b,c'}}, got "
                                   f"{type(spec).__name__}", 1, "invalid_argument")
    out: Dict[str, Tuple[str, ...]] = {}
    for k, v in spec.items():
        if not isinstance(k, str) or not k:
            raise InvalidArgumentError(f"input_axes: the key {k!r} is not an input name", 1,
                                       "invalid_argument")
        try:
            out[k] = _rules.parse_axes(v, f"input_axes[{k!r}]")
        except _rules.AxesError as e:
            raise InvalidArgumentError(str(e), 1, "invalid_argument") from None
    return out


# -- the recorder -------------------------------------------------------------------------------

AxesSpec = Union[None, Mapping[str, Union[str, Sequence[str]]],
                 Callable[[str, "torch.Tensor"], Optional[Sequence[str]]]]


class Recorder:
    """Records a model's tensors while active; use through :func:`record`.

    After the ``with`` block: ``records_written``, ``tensors_offered``, ``non_tensors`` (outputs
    skipped because they are not tensors), ``skipped`` (a Counter of reasons), ``path``.
    """

    def __init__(self, model: "torch.nn.Module", path: Union[str, "os.PathLike[str]"], *,
                 filter: str = "", inputs: bool = False, summary: Optional[str] = None,
                 axes: AxesSpec = None, granularity: str = "module",
                 meta: Optional[Mapping[str, Any]] = None, sync: Union[str, bool, int] = "close",
                 background: bool = False, queue_bytes: int = 256 << 20,
                 root_name: str = "<root>", strict: bool = False,
                 on_record: Optional[Callable[[RecordEvent], None]] = None,
                 projection_dim: int = _core.DEFAULT_PROJECTION_DIM,
                 salt: Optional[int] = None, parameters: bool = False,
                 distributed: Optional[bool] = None,
                 groups: Optional[Mapping[str, int]] = None,
                 coords: Optional[Mapping[str, int]] = None, rank: Optional[int] = None,
                 world_size: Optional[int] = None, shards: Optional[Mapping[str, str]] = None,
                 order: Optional[str] = None, drop_behind: bool = True,
                 input_axes: Optional[Mapping[str, Union[str, Sequence[str]]]] = None) -> None:
        if not isinstance(model, torch.nn.Module):
            raise InvalidArgumentError(
                f"record() needs a torch.nn.Module, got {type(model).__name__}", 1,
                "invalid_argument")
        if granularity not in ("module", "op"):
            raise InvalidArgumentError(
                f"granularity={granularity!r} is not 'module' or 'op'", 1, "invalid_argument")
        if not root_name:
            raise InvalidArgumentError("root_name must not be empty", 1, "invalid_argument")
        self.model = model
        self.path = os.fspath(path)
        self._input_axes = _parse_input_axes(input_axes)
        # Parse the filter before creating the file, so a typo does not leave an empty dump.
        _core.Filter(filter or "")
        # A dump set (docs/dumpsets.md): `path` is its directory, this rank writes one file.
        self.set = SetRecording.resolve(self.path, distributed=distributed, groups=groups,
                                        coords=coords, rank=rank, world_size=world_size,
                                        shards=shards, order=order)
        self.file = self.set.file if self.set is not None else self.path
        self.granularity = granularity
        self.inputs = inputs
        self.root_name = root_name
        self.strict = strict
        self.on_record = on_record
        self.projection_dim = projection_dim
        self._axes = axes
        self._summary = _core.Filter(summary) if summary else None
        metadata = default_metadata(model, granularity)
        if self.set is not None:
            metadata.update(self.set.layout.run_metadata())
        metadata.update({str(k): str(v) for k, v in (meta or {}).items()})
        self._metadata = metadata
        self._writer_args = dict(meta=metadata, filter=filter or "", sync=sync,
                                 background=background, queue_bytes=queue_bytes, salt=salt,
                                 drop_behind=drop_behind)
        self.writer: Optional[Writer] = None
        self.records_written = 0
        self.tensors_offered = 0
        self.non_tensors = 0
        self.skipped: Counter = Counter()
        self._handles: List[Any] = []
        self._calls: Counter = Counter()
        self._open_calls: Dict[str, List[int]] = {}
        self._module_stack: List[str] = []
        self._mode: Optional[Any] = None
        self._warned: set = set()
        self._module_attrs: Dict[str, Dict[str, str]] = {}
        self._nchw: Dict[int, Any] = {}
        self.parameters = parameters
        self._params_done: set = set()
        # Data flow: tensor -> identities of the records it was computed from (docs/format.md
        # §3.3.3), held weakly so that tagging never keeps a tensor alive.
        from torch.utils.weak import WeakIdKeyDictionary
        self._lineage: Any = WeakIdKeyDictionary()
        self._lineage_mode: Optional[Any] = None
        self._sources: Dict[type, str] = {}
        self._finished = False
        # Axis names carried through the data flow (docs/axes.md §1.1): tensor -> _Named, weakly.
        self._axn: Any = WeakIdKeyDictionary()
        self._widths: Dict[str, int] = {}
        self._splits: Dict[Tuple[str, ...], str] = {}
        self._events: Dict[str, List[str]] = {}
        self._heads_of: Dict[str, int] = {}

    # -- lifetime --------------------------------------------------------------------------
    def start(self) -> "Recorder":
        if self.writer is not None:
            raise InvalidArgumentError("this recorder was already started", 1, "invalid_argument")
        self._name_parameters()  # a declaration the model contradicts: no file is created
        self.writer = Writer(self.file, **self._writer_args)
        try:
            heads: Dict[str, int] = {}
            for name, module in self.model.named_modules():
                self._hook(name or self.root_name, module)
                declared = module_axis_attrs(module)
                h = _declared_heads(module)
                parent = name.rpartition(".")[0] if name else None
                if h is None and parent is not None and parent in heads:
                    h = heads[parent]  # the q/k/v projections inside an attention module
                elif h is not None:
                    heads[name] = h
                if h is not None:
                    declared["num_heads"] = str(h)
                    self._heads_of[name or self.root_name] = h
                if declared:
                    self._module_attrs[name or self.root_name] = declared
            if self.granularity == "op":
                self._mode = _op_mode_class()(self)
                self._mode.__enter__()
            else:
                self._lineage_mode = _lineage_mode_class()(self)
                self._lineage_mode.__enter__()
        except BaseException:
            self._remove_hooks()
            self.writer.close()
            raise
        return self

    def stop(self, completed: bool = True) -> None:
        """Removes every hook, leaves the dispatch mode and closes the file. Idempotent. In a
        dump set, then waits for every rank and rank 0 writes the manifest (not when
        ``completed`` is False: the recording ended in an exception)."""
        writer, closed = self.writer, False
        try:
            self._stop()
            closed = True
        finally:
            if self.set is not None and writer is not None and not self._finished:
                self._finished = True
                self.set.finish(self._metadata, completed and closed)

    def _stop(self) -> None:
        try:
            if self._mode is not None:
                mode, self._mode = self._mode, None
                mode.__exit__(None, None, None)
            if self._lineage_mode is not None:
                mode, self._lineage_mode = self._lineage_mode, None
                mode.__exit__(None, None, None)
        finally:
            self._remove_hooks()
            if self.writer is not None:
                self.writer.close()

    def __enter__(self) -> "Recorder":
        return self.start()

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.stop(completed=exc_type is None)

    def _remove_hooks(self) -> None:
        handles, self._handles = self._handles, []
        for h in handles:
            h.remove()

    def _hook(self, name: str, module: "torch.nn.Module") -> None:
        op_type = type(module).__name__

        def pre(mod: Any, args: Any, kwargs: Any) -> None:
            if mod is self.model and self.granularity == "module":
                self._name_inputs(args, kwargs)  # raises on a declaration the call contradicts
            occurrence = self._calls[name]
            self._calls[name] = occurrence + 1
            self._open_calls.setdefault(name, []).append(occurrence)
            self._module_stack.append(name)
            if self.parameters and name not in self._params_done:
                self._params_done.add(name)
                self._emit_parameters(name, op_type, mod)
            if self.inputs and self.granularity == "module":
                self._emit_structure(name, op_type, "input", (args, kwargs), occurrence,
                                     inputs=True)

        def post(mod: Any, args: Any, output: Any) -> None:
            # always_call=True: runs even when forward raised (output is None then), so the
            # call stacks stay balanced for the rest of the recording.
            if isinstance(output, torch.Tensor) and output.dim() == 4:
                self._mark_nchw(mod, args, output)
            stack = self._open_calls.get(name)
            occurrence = stack.pop() if stack else 0
            if self._module_stack and self._module_stack[-1] == name:
                self._module_stack.pop()
            if self.granularity == "module" and output is not None:
                self._emit_structure(name, op_type, "output", output, occurrence,
                                     source=self._source_of(mod))
            events = self._events.pop(name, None)
            if events and self._module_stack:  # not written here (filtered): the caller's record
                self._add_events(self._module_stack[-1], events)

        self._handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
        self._handles.append(module.register_forward_hook(post, always_call=True))

    # -- axis names --------------------------------------------------------------------------
    def _axn_on(self) -> bool:
        return self.granularity == "module"

    def _declare(self, t: "torch.Tensor", names: Tuple[str, ...], what: str, how: str) -> None:
        if "hidden" in names:
            self._widths.setdefault("hidden", int(t.shape[names.index("hidden")]))
        try:
            self._axn[t] = _Named(names, (f"{what}: {_names_text(names)} ({how})",), (), 1)
        except TypeError:
            pass  # a tensor subclass without weak references: not followed

    def _name_parameters(self) -> None:
        """input_axes keys that are parameter/buffer paths name those tensors for the run."""
        if not self._input_axes or not self._axn_on():
            return
        tensors = dict(self.model.named_parameters())
        tensors.update(dict(self.model.named_buffers()))
        for key, names in self._input_axes.items():
            t = tensors.get(key)
            if t is None:
                continue
            if t.dim() != len(names):
                raise InvalidArgumentError(
                    f"input_axes[{key!r}]: {len(names)} names ({','.join(names)}) for a rank-"
                    f"{t.dim()} parameter of shape {tuple(t.shape)}", 1, "invalid_argument")
            self._declare(t, names, key, "declared")

    def _name_inputs(self, args: Any, kwargs: Any) -> None:
        """Names the model's inputs at each call of its forward: declared ones (a rank that
        contradicts the declaration is an error), then the conventions for common names."""
        try:
            sig = inspect.signature(self.model.forward)
            bound = sig.bind_partial(*args, **(kwargs or {})).arguments
        except (TypeError, ValueError):
            bound = {}
            sig = None
        values: Dict[str, Any] = {}
        for k, v in bound.items():
            p = sig.parameters.get(k) if sig is not None else None
            if p is not None and p.kind == inspect.Parameter.VAR_KEYWORD and isinstance(v, dict):
                values.update(v)
            else:
                values[k] = v
        params = set(sig.parameters) if sig is not None else set()
        takes_any = any(p.kind == inspect.Parameter.VAR_KEYWORD
                        for p in (sig.parameters.values() if sig is not None else ()))
        for key, names in self._input_axes.items():
            t = values.get(key)
            if isinstance(t, torch.Tensor):
                if t.dim() != len(names):
                    raise InvalidArgumentError(
                        f"input_axes[{key!r}]: {len(names)} names ({','.join(names)}) for a "
                        f"rank-{t.dim()} input of shape {tuple(t.shape)}", 1, "invalid_argument")
                self._declare(t, names, key, "declared")
            elif key not in params and not takes_any and not self._is_model_tensor(key):
                raise InvalidArgumentError(
                    f"input_axes: {key!r} is neither an argument of "
                    f"{type(self.model).__name__}.forward{sig} nor a parameter of the model", 1,
                    "invalid_argument")
        for key, names in _rules.CONVENTIONS.items():
            t = values.get(key)
            if key not in self._input_axes and isinstance(t, torch.Tensor) and \
                    t.dim() == len(names):
                self._declare(t, names, key, "convention")

    def _is_model_tensor(self, path: str) -> bool:
        owner, _, leaf = path.rpartition(".")
        try:
            mod = self.model.get_submodule(owner) if owner else self.model
        except AttributeError:
            return False
        return isinstance(getattr(mod, leaf, None), torch.Tensor)

    def _add_events(self, module: str, events: List[str]) -> None:
        have = self._events.setdefault(module, [])
        for e in events:
            if e not in have and len(have) < _rules.MAX_EVENTS:
                have.append(e)

    def _axes_step(self, func: Any, args: Any, kwargs: Any, out: Any) -> None:
        """Names of `out` from the names of the arguments by the rule table; never raises
        into the model (an unexpected failure ends the names, as an op without a rule does)."""
        try:
            outs = [out] if isinstance(out, torch.Tensor) else [
                o for o in out if isinstance(o, torch.Tensor)]
            if not outs:
                return
            found: List[_Named] = []

            def conv(x: Any, depth: int = 0) -> Any:
                if isinstance(x, torch.Tensor):
                    e = self._axn.get(x)
                    if e is not None:
                        found.append(e)
                    return _rules.Arg(e.names if e is not None else None, tuple(x.shape))
                if depth < 2 and isinstance(x, list):
                    return [conv(v, depth + 1) for v in x]
                if depth < 2 and isinstance(x, tuple) and not isinstance(x, torch.Size):
                    return tuple(conv(v, depth + 1) for v in x)
                return x

            a = [conv(x) for x in args]
            kw = {k: conv(v) for k, v in (kwargs or {}).items()}
            if not found:
                return
            op, swapped = _rules.op_name(getattr(func, "__name__", "") or "")
            if swapped and len(a) >= 2:
                a[0], a[1] = a[1], a[0]
            module = self._module_stack[-1] if self._module_stack else ""
            where = "" if not module or module == self.root_name else f" in {module}"
            base = next((e for e in found if e.names is not None), None)
            if base is None:  # names stopped upstream: say where, once
                for o in outs:
                    self._axn[o] = found[0]
                return
            heads = next((self._heads_of[m] for m in reversed(self._module_stack)
                          if m in self._heads_of), None)
            ctx = _rules.Ctx(op, a, kw, [tuple(o.shape) for o in outs],
                             module="" if module == self.root_name else module, num_heads=heads,
                             widths=self._widths, splits=self._splits)
            res = _rules.propagate(ctx)
            if res is None:
                stop = f"names stop at {op or type(func).__name__}{where} (no rule)"
                for o in outs:
                    self._axn[o] = _Named(None, stop=stop)
                return
            for o, n in zip(outs, res):
                if n is not None and any(x is not None for x in n):
                    was = base.names
                    change = "" if n == was else f"{_names_text(was)} -> "
                    self._axn[o] = base.then(n, f"{op}{where}: {change}{_names_text(n)}")
                else:
                    self._axn[o] = _Named(None, stop=f"names stop at {op}{where}")
            if ctx.events:
                trail = base.trail_text()
                self._add_events(module or self.root_name,
                                 [_event_line(e, trail) for e in ctx.events])
        except Exception:  # noqa: BLE001 - naming never breaks a model's run
            return

    # -- layouts -----------------------------------------------------------------------------
    def _is_nchw(self, t: Any) -> bool:
        ref = self._nchw.get(id(t))
        return ref is not None and ref() is t

    def _mark_nchw(self, mod: Any, args: Any, out: "torch.Tensor") -> None:
        """4-D outputs of convolution-family modules are NCHW; so are those of layout-keeping
        modules (activations, norms, dropout) fed an NCHW tensor, and a container's output that
        is such a tensor (docs/axes.md). Tensors are tracked by identity, weakly."""
        first = next((a for a in (args or ()) if isinstance(a, torch.Tensor)), None)
        if isinstance(mod, _CONV_FAMILY) or (
                isinstance(mod, _LAYOUT_KEEPING) and first is not None and self._is_nchw(first)):
            if len(self._nchw) > 4096:  # drop entries whose tensors are gone
                self._nchw = {k: r for k, r in self._nchw.items() if r() is not None}
            try:
                self._nchw[id(out)] = weakref.ref(out)
            except TypeError:
                pass

    # -- writing ---------------------------------------------------------------------------
    def _emit_parameters(self, name: str, op_type: str, mod: "torch.nn.Module") -> None:
        """The module's own parameters, then buffers, once (role parameter, attr path)."""
        assert self.writer is not None
        if not self.writer.wants(name):
            return
        leaves = list(mod.named_parameters(recurse=False)) + list(mod.named_buffers(recurse=False))
        for role_index, (path, t) in enumerate(leaves[:_MAX_ROLE_INDEX + 1]):
            self._write(name, op_type, "parameter", role_index, 0, path, t, dataflow=False)

    def _source_of(self, mod: "torch.nn.Module") -> Optional[str]:
        """``Linear  .../linear.py:124``: the class and where its forward is defined."""
        cls = type(mod)
        if cls not in self._sources:
            where = ""
            try:
                fwd = inspect.unwrap(cls.forward)
                where = f"{inspect.getsourcefile(fwd)}:{inspect.getsourcelines(fwd)[1]}"
            except (TypeError, OSError, AttributeError):
                pass  # builtins, generated classes: the class alone
            self._sources[cls] = f"{cls.__module__}.{cls.__qualname__}" + (
                f" {where}" if where else "")
        return self._sources[cls]

    # -- data flow ---------------------------------------------------------------------------
    def _sources_in(self, obj: Any, out: Dict[Tuple[str, str, int, int], None],
                    depth: int = 0) -> None:
        """Adds, in order, the record identities the tensors in `obj` were computed from."""
        if isinstance(obj, torch.Tensor):
            for ref in self._lineage.get(obj, ()):
                out[ref] = None
        elif depth < 4 and isinstance(obj, (list, tuple)):
            for v in obj:
                self._sources_in(v, out, depth + 1)
        elif depth < 4 and isinstance(obj, dict):
            for v in obj.values():
                self._sources_in(v, out, depth + 1)

    def _tag(self, obj: Any, refs: Tuple[Tuple[str, str, int, int], ...], depth: int = 0) -> None:
        if isinstance(obj, torch.Tensor):
            try:
                self._lineage[obj] = refs
            except TypeError:
                pass  # a tensor subclass without weak references: not followed
        elif depth < 4 and isinstance(obj, (list, tuple)):
            for v in obj:
                self._tag(v, refs, depth + 1)

    def _emit_structure(self, name: str, op_type: str, role: str, obj: Any,
                        occurrence: Optional[int], inputs: bool = False,
                        source: Optional[str] = None) -> None:
        assert self.writer is not None
        if not self.writer.wants(name):
            return  # filtered by name: no flatten, no device copy, no bytes
        if inputs:
            args, kwargs = obj
            leaves, skipped = _flat(list(args))
            kw_leaves, kw_skipped = _flat(dict(kwargs or {}))
            leaves += kw_leaves
            skipped += kw_skipped
        else:
            leaves, skipped = _flat(obj)
        if skipped:
            self.non_tensors += len(skipped)
            for s in skipped:
                self.skipped[f"non-tensor {s}"] += 1
        for role_index, (path, t) in enumerate(leaves):
            if role_index > _MAX_ROLE_INDEX:
                self.skipped["more than 65536 tensors in one output"] += len(leaves) - role_index
                break
            self._write(name, op_type, role, role_index, occurrence, path, t, source=source)

    def _write(self, name: str, op_type: str, role: str, role_index: int,
               occurrence: Optional[int], path: str, t: "torch.Tensor", *,
               source: Optional[str] = None, dataflow: bool = True) -> None:
        assert self.writer is not None
        names = _dim_names(t)
        try:
            try:
                payload, dtype, shape, encoding = _prepare(t)
            except _Unsupported:
                raise
            except Exception as e:  # meta/fake tensors, exotic subclasses: skip, never break
                raise _Unsupported(f"cannot read a {type(t).__name__} on {t.device} "
                                   f"({type(e).__name__}: {e})") from None
        except _Unsupported as e:
            where = f"{role} {path or role_index} of {name!r} ({op_type})"
            self.skipped[str(e).split(" (")[0]] += 1
            if self.strict:
                raise UnsupportedError(f"{where}: {e}", 5, "unsupported") from None
            if (name, str(e)) not in self._warned:
                self._warned.add((name, str(e)))
                warnings.warn(f"driftscope: not recorded: {where}: {e}", RuntimeWarning,
                              stacklevel=3)
            return
        axes = self._axes_for(name, t, names, len(shape))
        attrs = {"path": path} if path else {}
        if axes is None and names is None:
            named = self._axn.get(t) if self._axn_on() else None
            if named is not None:
                if named.names is not None and _writable(named.names):
                    axes = list(named.names)
                    attrs["axes_from"] = named.trail_text()
                elif named.stop:
                    attrs["axes_stop"] = named.stop
        elif axes is not None and names is None and self._axn_on():
            named = self._axn.get(t)
            if named is not None and named.names is not None and tuple(axes) == named.names:
                attrs["axes_from"] = named.trail_text()
        if role == "output" and role_index == 0 and self._events.get(name):
            attrs["axes_ops"] = "\n".join(self._events.pop(name))
        declared = self._module_attrs.get(name)
        if declared and role == "output":
            # norm/softmax axes describe the first output only; num_heads every output
            extra = declared if role_index == 0 else {
                k: v for k, v in declared.items() if k == "num_heads"}
            attrs.update(extra)
        if dataflow:
            froms: Dict[Tuple[str, str, int, int], None] = {}
            self._sources_in(t, froms)
            attrs["ds.inputs"] = _core.format_inputs(list(froms))
        attrs["ds.kind"] = _kind_of(t)
        if source:
            attrs["ds.source"] = source
        summarise = self._summary is not None and self._summary.accepts(
            name, op_type, role, dtype, list(shape), self.tensors_offered)
        self.tensors_offered += 1
        if self.set is not None and role == "output" and self.set.shards:
            axes = self.set.axes(name, axes, len(shape))
        kwargs = dict(op_type=op_type, axes=axes, role=role, role_index=role_index, attrs=attrs,
                      occurrence=occurrence, encoding=encoding, dtype=dtype, shape=shape)
        if summarise:
            r = self.writer.write_summary(name, payload, projection_dim=self.projection_dim,
                                          **kwargs)
        else:
            r = self.writer.write(name, payload, **kwargs)
        if r.written:
            self.records_written += 1
            if dataflow:  # later consumers of `t` were computed from this record
                self._tag(t, ((name, role, role_index, r.occurrence),))
        else:
            self.skipped[r.status] += 1
        if self.on_record is not None:
            self.on_record(RecordEvent(name, op_type, role, role_index, r.occurrence,
                                       r.exec_index, r.status, r.offset, summarise))

    def _axes_for(self, name: str, t: "torch.Tensor", names: Optional[Sequence[Optional[str]]],
                  rank: int) -> Optional[List[str]]:
        if names is not None:
            return [n if n is not None else f"dim{i}" for i, n in enumerate(names)]
        spec = self._axes
        if spec is None or rank == 0:
            return list(NCHW_AXES) if rank == 4 and self._is_nchw(t) else None
        if callable(spec):
            got = spec(name, t)
            return list(got) if got else None
        for pattern, axes in spec.items():
            if _core.glob_match(pattern, name):
                axes = axes.split(",") if isinstance(axes, str) else list(axes)
                if len(axes) == rank:
                    return axes
        return list(NCHW_AXES) if rank == 4 and self._is_nchw(t) else None

    # -- op granularity --------------------------------------------------------------------
    def _on_op(self, func: Any, args: Any, kwargs: Any, out: Any) -> None:
        if getattr(func, "is_view", False):
            # Views compute nothing; their values are their input's, and so is their data flow.
            froms: Dict[Tuple[str, str, int, int], None] = {}
            self._sources_in((args, kwargs), froms)
            if froms:
                self._tag(out, tuple(froms))
            return
        scope = self._module_stack[-1] if self._module_stack else self.root_name
        scope = "" if scope == self.root_name else scope
        op = func.overloadpacket.__name__
        name = f"{scope}.{op}" if scope else op
        op_type = str(func)
        if self.inputs:
            self._emit_structure(name, op_type, "input", (args, kwargs), None, inputs=True)
        else:
            # Outputs are computed from the arguments: tag them so _write finds the sources.
            froms = {}
            self._sources_in((args, kwargs), froms)
            self._tag(out, tuple(froms))
        self._emit_structure(name, op_type, "output", out, None, source=_calling_frame())

    @property
    def hooks_active(self) -> int:
        """Number of hooks currently registered (0 after the recording ended)."""
        return len(self._handles)


_SKIPPED_DIRS = tuple(os.path.dirname(m.__file__) + os.sep for m in (torch,)) + (
    os.path.dirname(os.path.abspath(__file__)) + os.sep,)


def _calling_frame() -> Optional[str]:
    """``file.py:LINE (function)`` of the Python code that called the op (op granularity's
    ds.source): the innermost frame outside torch and driftscope."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_SKIPPED_DIRS):
        f = f.f_back
    if f is None:
        return None
    return f"{f.f_code.co_filename}:{f.f_lineno} ({f.f_code.co_name})"


def _kind_of(t: "torch.Tensor") -> str:
    """ds.kind by dtype: integers are indices, booleans masks (docs/format.md §3.3.3)."""
    if t.is_quantized or t.is_floating_point() or t.is_complex():
        return "float"
    return "mask" if t.dtype == torch.bool else "index"


def _lineage_mode_class() -> type:
    from torch.overrides import TorchFunctionMode

    class _Lineage(TorchFunctionMode):
        """Tags every torch function's tensor results with the records its arguments came from,
        so a module's output names the records it was computed from, through functional code
        between modules (residual adds, reshapes). Values are never touched."""

        def __init__(self, recorder: Recorder) -> None:
            super().__init__()
            self.recorder = recorder

        def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            out = func(*args, **(kwargs or {}))
            rec = self.recorder
            if len(rec._axn) and isinstance(out, (torch.Tensor, tuple, list)):
                rec._axes_step(func, args, kwargs, out)
            if len(rec._lineage) and isinstance(out, (torch.Tensor, tuple, list)):
                froms: Dict[Tuple[str, str, int, int], None] = {}
                rec._sources_in((args, kwargs), froms)
                if froms:
                    rec._tag(out, tuple(froms))
            return out

    return _Lineage


def _op_mode_class() -> type:
    from torch.utils._python_dispatch import TorchDispatchMode

    class _OpRecorder(TorchDispatchMode):
        def __init__(self, recorder: Recorder) -> None:
            super().__init__()
            self.recorder = recorder

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            out = func(*args, **(kwargs or {}))
            # The mode is disabled while this runs, so the copies below are not recorded.
            self.recorder._on_op(func, args, kwargs, out)
            return out

    return _OpRecorder


def record(model: "torch.nn.Module", path: Union[str, "os.PathLike[str]"], *, filter: str = "",
           inputs: bool = False, summary: Optional[str] = None, axes: AxesSpec = None,
           granularity: str = "module", meta: Optional[Mapping[str, Any]] = None,
           sync: Union[str, bool, int] = "close", background: bool = False,
           queue_bytes: int = 256 << 20, root_name: str = "<root>", strict: bool = False,
           on_record: Optional[Callable[[RecordEvent], None]] = None,
           projection_dim: int = _core.DEFAULT_PROJECTION_DIM,
           salt: Optional[int] = None, parameters: bool = False,
           distributed: Optional[bool] = None, groups: Optional[Mapping[str, int]] = None,
           coords: Optional[Mapping[str, int]] = None, rank: Optional[int] = None,
           world_size: Optional[int] = None, shards: Optional[Mapping[str, str]] = None,
           order: Optional[str] = None, drop_behind: bool = True,
           input_axes: Optional[Mapping[str, Union[str, Sequence[str]]]] = None) -> Recorder:
    """Records ``model``'s tensors into ``path`` while the returned context is active.

    filter: which tensors to keep (docs/filters.md), e.g. ``"encoder.layer.* -*.dropout"``.
    inputs: also record each module's inputs (role "input"; positional then keyword).
    summary: a filter choosing tensors stored as SUMMARY records (stats + projection).
    axes: {"glob": "batch,seq,hidden"} (first pattern whose axis count equals the rank wins),
        or a callable (name, tensor) -> names. Named tensors use their own names.
    input_axes: axis names of the model's inputs, keyed by the forward's parameter name (or a
        parameter's/buffer's path, ``"bias": "hidden"``): ``{"x": "batch,seq,hidden"}``. The
        names flow through every op the recorder sees (docs/axes.md §1.1) and become the axis
        names of every record they reach; ``input_ids``, ``attention_mask``, ``token_type_ids``,
        ``position_ids``, ``inputs_embeds`` and ``pixel_values`` are named without a declaration.
        A malformed declaration, or one the call contradicts (rank), raises
        InvalidArgumentError. Module granularity only.
    granularity: "module" (forward hooks) or "op" (every aten operator, ``<module>.<op>``).
    meta: extra run metadata; overrides the automatic keys.
    sync / background / queue_bytes: see :class:`driftscope.Writer`.
    root_name: the name of the model's own output (module path "").
    strict: raise UnsupportedError on a tensor TDUMP cannot hold instead of warning.
    on_record: called with a :class:`RecordEvent` after every tensor offered to the writer.
    parameters: also record each module's own parameters and buffers once, at its first call
        (role "parameter", attribute ``path`` = the parameter's name), so compare can tell a
        changed weight from a changed computation.

    Multi-rank runs (docs/dumpsets.md, docs/howto/pytorch.md "Multi-rank runs"): under an
    initialised ``torch.distributed`` process group ``path`` is a set directory; each rank writes
    ``rank-%05d.tdump`` with run metadata ds.rank / ds.world_size / ds.coords, and when the
    recording ends every rank waits for the others and rank 0 writes ``driftscope-set.json``.
    distributed: force (True) or refuse (False) set mode; None: a set when a process group is
        initialised or any of groups / coords / rank / world_size is given.
    groups: the parallel layout, e.g. ``{"pp": 2, "tp": 2}`` (default ``{"dp": world}``);
        coordinates come from the rank in row-major order (the last group varies fastest)
        unless ``coords`` gives them.
    rank / world_size: for runs without torch.distributed (every rank must use the same path).
    shards: ``{"module glob": annotation}`` for module outputs that are shards: ``"hidden@tp"``
        (split across tp along the axis named hidden; on a record without axis names, the last
        axis), ``"2@tp"`` (axis 2), ``"+tp"`` (a partial sum awaiting all-reduce), or a whole
        annotated axis list ``"batch,heads@tp,seq,dim"``. The first matching glob applies.
    order: "lockstep" (default) or "pipeline" (default when a pp group has several stages).
    drop_behind: keep only about the last 20 MiB of the dump in the page cache (see
        :class:`driftscope.Writer`); on by default, since a recording of every activation can be
        many GB. ``False`` leaves the whole file cached for an immediate compare.
    """
    return Recorder(model, path, filter=filter, inputs=inputs, summary=summary, axes=axes,
                    granularity=granularity, meta=meta, sync=sync, background=background,
                    queue_bytes=queue_bytes, root_name=root_name, strict=strict,
                    on_record=on_record, projection_dim=projection_dim, salt=salt,
                    parameters=parameters, distributed=distributed, groups=groups,
                    coords=coords, rank=rank, world_size=world_size, shards=shards, order=order,
                    drop_behind=drop_behind, input_axes=input_axes)


# -- python -m driftscope record torch -----------------------------------------------------------

def _load_entry_point(spec: str) -> Callable[..., Any]:
    # One loader for every FILE.py:FUNCTION on the command line (driftscope._entry).
    return load_function(spec, "--model")


def _convert_inputs(obj: Any, dtype: Optional[torch.dtype], device: Optional[str]) -> Any:
    if isinstance(obj, torch.Tensor):
        if dtype is not None and obj.is_floating_point():
            obj = obj.to(dtype)
        return obj.to(device) if device else obj
    if isinstance(obj, Mapping):
        return {k: _convert_inputs(v, dtype, device) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_convert_inputs(v, dtype, device) for v in obj)
    return obj


def _call(model: "torch.nn.Module", inputs: Any) -> Any:
    if isinstance(inputs, Mapping):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def cli_main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m driftscope record torch --model MODULE:FUNCTION -o run.tdump [...]``.

    FUNCTION(**model_args) returns (model, inputs): inputs is a tensor, a tuple of positional
    arguments, or a dict of keyword arguments. Exit 0 on success, 2 on any error.
    """
    p = argparse.ArgumentParser(
        prog="driftscope record torch",
        description="Run a PyTorch model once and record its intermediate tensors.")
    p.add_argument("--model", required=True, metavar="MODULE:FUNCTION",
                   help="function returning (model, inputs); MODULE may be a dotted module "
                        "name or a path to a .py file")
    p.add_argument("--model-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="keyword argument (a string) passed to FUNCTION; repeatable")
    p.add_argument("-o", "--output", required=True, help="the .tdump file to write")
    p.add_argument("--filter", default="", help="which tensors to keep (docs/filters.md)")
    p.add_argument("--inputs", action="store_true", help="also record module inputs")
    p.add_argument("--parameters", action="store_true",
                   help="also record each module's own parameters and buffers once (role "
                        "'parameter'), so compare can say whether an origin's weights differ")
    p.add_argument("--summary", default=None, metavar="FILTER",
                   help="tensors matching FILTER are stored as summaries (light mode)")
    p.add_argument("--granularity", choices=("module", "op"), default="module")
    p.add_argument("--dtype", default=None, metavar="DTYPE",
                   help="cast the model and floating inputs first (float32, float16, bfloat16)")
    p.add_argument("--device", default=None, help="move model and inputs first (cpu, cuda, mps)")
    p.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE",
                   help="run metadata entry; repeatable")
    p.add_argument("--axes", action="append", default=[], metavar="GLOB=AXES",
                   help="axis names for tensors whose name matches GLOB, e.g. "
                        "'encoder.*=batch,seq,hidden'; repeatable")
    p.add_argument("--input-axes", action="append", default=[], metavar="NAME=AXES",
                   help="axis names of the model input NAME (the forward's argument), e.g. "
                        "'x=batch,seq,hidden'; they flow through the recorded ops "
                        "(docs/axes.md); input_ids, attention_mask, pixel_values... are named "
                        "without it; repeatable")
    p.add_argument("--sync", choices=("close", "record"), default="close",
                   help="fdatasync on close (default) or after every record")
    p.add_argument("--seed", type=int, default=None, help="torch.manual_seed before loading")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress line on stderr (it is drawn only when stderr is a terminal)")
    args = parse_args(p, argv)
    # The entry point's file (MODULE may be a path "file.py:function"): never the output.
    module_file = args.model.rpartition(":")[0]
    same = refuse_output_onto_inputs(args.output, [module_file] if module_file else [])
    if same:
        print(f"driftscope record torch: error: {same}", file=sys.stderr)
        return 2

    def pairs(items: Sequence[str], flag: str) -> Dict[str, str]:
        out = {}
        for item in items:
            k, sep, v = item.partition("=")
            if not sep or not k:
                raise InvalidArgumentError(f"{flag} {item!r}: expected KEY=VALUE", 1,
                                           "invalid_argument")
            out[k] = v
        return out

    try:
        dtype = None
        if args.dtype:
            dtype = getattr(torch, args.dtype, None)
            if not isinstance(dtype, torch.dtype):
                raise InvalidArgumentError(f"--dtype {args.dtype!r} is not a torch dtype", 1,
                                           "invalid_argument")
        input_axes = pairs(args.input_axes, "--input-axes") or None
        _parse_input_axes(input_axes)  # a malformed declaration fails before the model loads
        if args.seed is not None:
            torch.manual_seed(args.seed)
        made = _load_entry_point(args.model)(**pairs(args.model_arg, "--model-arg"))
        if not (isinstance(made, tuple) and len(made) == 2):
            raise InvalidArgumentError(
                f"--model {args.model}: the function must return (model, inputs), got "
                f"{type(made).__name__}", 1, "invalid_argument")
        model, inputs = made
        if dtype is not None:
            model = model.to(dtype)
        if args.device:
            model = model.to(args.device)
        inputs = _convert_inputs(inputs, dtype, args.device)
        meta = pairs(args.meta, "--meta")
        if args.seed is not None:
            meta.setdefault("seed", str(args.seed))
        axes = {k: v for k, v in pairs(args.axes, "--axes").items()} or None
        model.eval()
        # The number of tensors is known only at the end: a count, not a bar.
        with Progress("recording", "tensors written",
                      enabled=False if args.no_progress else None) as bar, torch.no_grad():
            rec = record(model, args.output, filter=args.filter, inputs=args.inputs,
                         summary=args.summary, axes=axes, granularity=args.granularity, meta=meta,
                         sync=args.sync, parameters=args.parameters, input_axes=input_axes,
                         on_record=lambda ev: bar.update(rec.records_written, None, ev.name))
            with rec:
                _call(model, inputs)
    except Exception as e:  # noqa: BLE001 - the CLI reports any failure as one line, exit 2
        print(f"driftscope record torch: error: {e}", file=sys.stderr)
        return 2
    extra = f", {rec.non_tensors} non-tensor outputs skipped" if rec.non_tensors else ""
    print(f"{args.output}: {rec.records_written} tensors recorded{extra}", file=sys.stderr)
    return 0
