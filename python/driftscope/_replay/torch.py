"""Replay for a PyTorch model on the guard's torch backends (torch, torch-bf16, torch-fp16).

The model is built exactly as the guard's backend builds it (TorchBackend.load: the entry point
called after torch.manual_seed(seed), then cast to the backend's dtype), so the candidate that
is replayed is the one the guard judged. Everything is done with hooks, never by wrapping or
replacing modules, so module paths stay those of the dump:

- output replay: a forward hook on the module returns its output with the substituted leaf
  (cast to the dtype the module produced it in);
- op replay: a forward pre-hook on the reference captures the module's arguments, and the
  candidate's module is called alone on them (floating tensors cast to the candidate's dtype);
- teacher forcing (isolation.py): pre-hooks on every module replace its arguments by the
  reference's, forward hooks record the candidate's output and then hand the reference's on.

Tensor names are the recorder's identities (recorders/torch.py, printed as compare prints
them): the module path (``<root>`` for the model itself), `` (output K)`` for the K-th tensor
of a structured output, `` #N`` for the N-th call of a module called more than once.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .mechanism import CannotReplay, OpInputs, Replayable, UnknownTensor

ROOT = "<root>"  # the recorder's name for the model itself (Recorder.root_name)
_IDENTITY = re.compile(r"^(?P<path>.*?)(?: \(output (?P<k>\d+)\))?(?: #(?P<occ>\d+))?$")


def identity(path: str, role_index: int = 0, occurrence: int = 0) -> str:
    """The name compare prints for a module output (src/compare/verdict_line.cpp fmt_identity)."""
    s = path or ROOT
    if role_index:
        s += f" (output {role_index})"
    if occurrence:
        s += f" #{occurrence}"
    return s


def parse_identity(name: str) -> Tuple[str, int, int]:
    """(module path, output index, occurrence) of a name identity() made."""
    m = _IDENTITY.match(name)
    assert m is not None  # the pattern matches every string
    return m["path"], int(m["k"] or 0), int(m["occ"] or 0)


def _module_path(path: str) -> str:
    return "" if path == ROOT else path


def _to_numpy(t: Any) -> np.ndarray:
    import torch

    t = t.detach().cpu()
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.float()  # exact: every bfloat16/float16 value is a float32
    return t.numpy().copy()


def _replace_leaf(obj: Any, index: int, value: Any) -> Any:
    """obj with its index-th tensor leaf (in recorders.torch._flatten's order) replaced."""
    import dataclasses
    import copy

    import torch

    count = [0]

    def walk(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            k = count[0]
            count[0] += 1
            return value(x) if k == index else x
        if isinstance(x, Mapping):
            out = copy.copy(x)
            for key, v in x.items():
                out[key] = walk(v)
            return out
        if isinstance(x, tuple) and hasattr(x, "_fields"):
            return type(x)(*(walk(getattr(x, f)) for f in x._fields))
        if isinstance(x, (list, tuple)):
            return type(x)(walk(v) for v in x)
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return dataclasses.replace(x, **{f.name: walk(getattr(x, f.name))
                                             for f in dataclasses.fields(x) if f.init})
        return x

    return walk(obj)


def _convert(x: Any, fn: Callable[[Any], Any]) -> Any:
    """x with every tensor / array leaf mapped by fn (containers rebuilt, other values kept)."""
    import torch

    if isinstance(x, (torch.Tensor, np.ndarray)):
        return fn(x)
    if isinstance(x, dict):
        return {k: _convert(v, fn) for k, v in x.items()}
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(_convert(v, fn) for v in x))
    if isinstance(x, (list, tuple)):
        return type(x)(_convert(v, fn) for v in x)
    return x


def _nearest(name: str, known: Sequence[str]) -> List[str]:
    import difflib

    return difflib.get_close_matches(name, list(known), n=3, cutoff=0.4)


def unknown(name: str, known: Sequence[str]) -> UnknownTensor:
    near = _nearest(name, known)
    hint = f"; nearest: {', '.join(near)}" if near else ""
    return UnknownTensor(f"no tensor {name!r} in the model{hint}")


class TorchReplayable(Replayable):
    """One PyTorch model on one of the guard's torch backends."""

    def __init__(self, session: Any, backend: str) -> None:
        import torch

        self.session, self.backend, self.notes = session, backend, []
        self.net = session.model
        self.dtype = session.dtype or torch.float32
        self._names: Optional[List[str]] = None
        self._leaf_dtypes: Dict[str, Any] = {}
        if session.dtype is not None:
            self.notes.append(f"{backend}: substituted values and op inputs are cast to "
                              f"{str(self.dtype).replace('torch.', '')}")

    # -- construction ----------------------------------------------------------------------

    @classmethod
    def load(cls, model: str, backend: str, seed: int = 0, work: str = "") -> "TorchReplayable":
        """`model` (FILE.py:FN) on guard backend `backend`, built by the backend's own load."""
        from .._guard.backends.registry import BACKENDS

        b = BACKENDS.get(backend)
        if b is None or b.family != "torch" or b.__class__.__name__ != "TorchBackend":
            raise CannotReplay(f"backend {backend!r} cannot replay a PyTorch model (replay runs "
                               "on torch, torch-bf16 and torch-fp16)")
        return cls(b.load(model, work, seed), backend)

    @classmethod
    def from_module(cls, net: Any, example: Any, backend: str = "torch") -> "TorchReplayable":
        """An in-memory model (a test's faulted copy): cast as backend `backend` casts it."""
        import torch

        from .._guard.backends.registry import BACKENDS
        from .._guard.backends.torch import _TorchSession

        b = BACKENDS[backend]
        dtype = getattr(torch, b.dtype) if getattr(b, "dtype", None) else None
        if dtype is not None:
            net = net.to(dtype)
        net.eval()
        return cls(_TorchSession(net, example, dtype, {}), backend)

    def example_feeds(self) -> Dict[str, np.ndarray]:
        """The entry point's own inputs under the guard's names (the guard's sample 0)."""
        import torch

        from .._guard.backends.torch import torch_leaves

        return {k: (v.detach().float() if v.dtype == torch.bfloat16 else v.detach()).cpu().numpy()
                for k, v in torch_leaves(self.session.example).items()}

    # -- hooks -------------------------------------------------------------------------------

    @contextmanager
    def _hooks(self, pre: Optional[Callable[..., Any]] = None,
               post: Optional[Callable[..., Any]] = None,
               only: Optional[Sequence[str]] = None) -> Iterator[None]:
        """pre(path, occurrence, args, kwargs) -> None | (args, kwargs) and
        post(path, occurrence, output) -> None | output on every module (or those in `only`),
        the occurrence counted per module as the recorder counts it."""
        handles = []
        calls: Dict[str, int] = {}
        open_calls: Dict[str, List[int]] = {}
        wanted = None if only is None else set(only)
        for name, module in self.net.named_modules():
            path = name or ROOT
            if wanted is not None and path not in wanted:
                continue

            def pre_hook(mod: Any, args: Any, kwargs: Any, path: str = path) -> Any:
                occ = calls.get(path, 0)
                calls[path] = occ + 1
                open_calls.setdefault(path, []).append(occ)
                return pre(path, occ, args, kwargs) if pre else None

            def post_hook(mod: Any, args: Any, output: Any, path: str = path) -> Any:
                stack = open_calls.get(path)
                occ = stack.pop() if stack else 0
                return post(path, occ, output) if post and output is not None else None

            handles.append(module.register_forward_pre_hook(pre_hook, with_kwargs=True))
            handles.append(module.register_forward_hook(post_hook, always_call=True))
        try:
            yield
        finally:
            for h in handles:
                h.remove()

    def _run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        return self.session.run(feeds)

    # -- the interface -----------------------------------------------------------------------

    def tensors(self, feeds: Optional[Mapping[str, np.ndarray]] = None) -> List[str]:
        if self._names is None or feeds is not None:
            from ..recorders.api import torch_flat

            names: List[str] = []

            def post(path: str, occ: int, out: Any) -> None:
                for k, (_, t) in enumerate(torch_flat(out)[0]):
                    if t.is_floating_point():
                        n = identity(path, k, occ)
                        names.append(n)
                        self._leaf_dtypes[n] = t.dtype

            with self._hooks(post=post):
                self._run(self.example_feeds() if feeds is None else feeds)
            self._names = names
        return list(self._names)

    def outputs(self) -> List[str]:
        import torch

        from ..recorders.api import torch_call, torch_flat
        from .._guard.backends.torch import _rebuild

        with torch.no_grad():
            out = torch_call(self.net, _rebuild(self.session.example, self.example_feeds(),
                                                self.session.dtype))
        return [p.lstrip(".") or "output" for p, _ in torch_flat(out)[0]]

    def _check(self, names: Sequence[str]) -> None:
        known = self.tensors()
        have = set(known)
        for n in names:
            if n not in have:
                raise unknown(n, known)

    def capture(self, feeds: Mapping[str, np.ndarray],
                names: Sequence[str]) -> Dict[str, np.ndarray]:
        from ..recorders.api import torch_flat

        self._check(names)
        wanted: Dict[Tuple[str, int], Dict[int, str]] = {}
        for n in names:
            path, k, occ = parse_identity(n)
            wanted.setdefault((path, occ), {})[k] = n
        got: Dict[str, np.ndarray] = {}

        def post(path: str, occ: int, out: Any) -> None:
            leaves = wanted.get((path, occ))
            if leaves:
                flat = torch_flat(out)[0]
                for k, n in leaves.items():
                    got[n] = _to_numpy(flat[k][1])

        with self._hooks(post=post, only={p for p, _ in wanted}):
            outs = self._run(feeds)
        got.update(outs)
        return got

    def run(self, feeds: Mapping[str, np.ndarray],
            replace: Mapping[str, np.ndarray] = {}) -> Dict[str, np.ndarray]:
        import torch

        self._check(list(replace))
        by_call: Dict[Tuple[str, int], Dict[int, np.ndarray]] = {}
        for n, v in replace.items():
            path, k, occ = parse_identity(n)
            by_call.setdefault((path, occ), {})[k] = v

        def post(path: str, occ: int, out: Any) -> Any:
            subs = by_call.get((path, occ))
            if not subs:
                return None
            for k, v in subs.items():
                def cast(t: Any, v: np.ndarray = v) -> Any:
                    if tuple(t.shape) != tuple(v.shape):
                        raise CannotReplay(f"{identity(path, k, occ)}: the substituted value "
                                           f"has shape {list(v.shape)}, the model's "
                                           f"{list(t.shape)}")
                    return torch.from_numpy(np.ascontiguousarray(v)).to(t.dtype).to(t.device)
                out = _replace_leaf(out, k, cast)
            return out

        with self._hooks(post=post, only={p for p, _ in by_call}):
            return self._run(feeds)

    def op_inputs(self, feeds: Mapping[str, np.ndarray], name: str) -> OpInputs:
        self._check([name])
        path, _, occ = parse_identity(name)
        got: Dict[str, Any] = {}

        def pre(p: str, o: int, args: Any, kwargs: Any) -> None:
            if o == occ:
                got["args"], got["kwargs"] = (_convert(list(args), _to_numpy),
                                              _convert(dict(kwargs or {}), _to_numpy))

        with self._hooks(pre=pre, only=[path]):
            self._run(feeds)
        # Arguments that are not tensors (flags, None, a config) are kept as they are: the
        # module needs them to run alone.
        return OpInputs(args=got["args"], kwargs=got["kwargs"], names=[""] * len(got["args"]))

    def _cast_in(self, x: Any) -> Any:
        import torch

        def conv(v: Any) -> Any:
            t = torch.from_numpy(np.ascontiguousarray(v)) if isinstance(v, np.ndarray) else v
            return t.to(self.dtype) if t.is_floating_point() else t

        return _convert(x, conv)

    def run_op(self, name: str, inputs: OpInputs) -> np.ndarray:
        import torch

        from ..recorders.api import torch_flat

        self._check([name])
        path, k, _ = parse_identity(name)
        module = self.net.get_submodule(_module_path(path))
        with torch.no_grad():
            out = module(*self._cast_in(list(inputs.args)), **self._cast_in(dict(inputs.kwargs)))
        return _to_numpy(torch_flat(out)[0][k][1])

    def record(self, feeds: Mapping[str, np.ndarray], path: str) -> None:
        """A dump of one plain run (module outputs), as the torch recorder writes it."""
        import torch

        from ..recorders.api import torch_call, torch_record
        from .._guard.backends.torch import _rebuild

        with torch.no_grad(), torch_record(self.net, path):
            torch_call(self.net, _rebuild(self.session.example, feeds, self.session.dtype))

    # -- teacher forcing (isolation.py) ------------------------------------------------------

    def reference_calls(self, feeds: Mapping[str, np.ndarray]
                        ) -> Tuple[Dict[Tuple[str, int], Any], Dict[str, np.ndarray]]:
        """Every module call's arguments ((args, kwargs) as numpy) and every floating output
        leaf by name, from one plain run."""
        from ..recorders.api import torch_flat

        calls: Dict[Tuple[str, int], Any] = {}
        outs: Dict[str, np.ndarray] = {}

        def pre(path: str, occ: int, args: Any, kwargs: Any) -> None:
            calls[(path, occ)] = (_convert(list(args), _to_numpy),
                                  _convert(dict(kwargs or {}), _to_numpy))

        def post(path: str, occ: int, out: Any) -> None:
            for k, (_, t) in enumerate(torch_flat(out)[0]):
                if t.is_floating_point():
                    outs[identity(path, k, occ)] = _to_numpy(t)

        with self._hooks(pre=pre, post=post):
            self._run(feeds)
        return calls, outs

    def teacher_forced(self, feeds: Mapping[str, np.ndarray],
                       calls: Mapping[Tuple[str, int], Any],
                       ref_outs: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """One candidate pass in which every module reads the reference's arguments and hands
        the reference's output on after its own is recorded: each module's output then carries
        only the error of its own forward (a parent's: the arithmetic between its children)."""
        import torch

        from ..recorders.api import torch_flat

        own: Dict[str, np.ndarray] = {}

        def pre(path: str, occ: int, args: Any, kwargs: Any) -> Any:
            got = calls.get((path, occ))
            if got is None:
                return None  # a call the reference did not make (data-dependent control flow)
            return tuple(self._cast_in(list(got[0]))), self._cast_in(dict(got[1]))

        def post(path: str, occ: int, out: Any) -> Any:
            for k, (_, t) in enumerate(torch_flat(out)[0]):
                n = identity(path, k, occ)
                if t.is_floating_point() and n in ref_outs:
                    own[n] = _to_numpy(t)
                    ref = ref_outs[n]
                    if tuple(ref.shape) == tuple(t.shape):
                        out = _replace_leaf(out, k, lambda x, ref=ref: torch.from_numpy(
                            np.ascontiguousarray(ref)).to(x.dtype))
            return out

        with self._hooks(pre=pre, post=post):
            self._run(feeds)
        return own

    def module_parents(self) -> Dict[str, str]:
        """module path -> its parent's path (ROOT for a top-level module)."""
        out = {}
        for name, _ in self.net.named_modules():
            if name:
                out[name] = name.rpartition(".")[0] or ROOT
        return out
