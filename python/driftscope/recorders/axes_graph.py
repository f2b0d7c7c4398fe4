"""Axis names carried over a graph's op list (ONNX, .tflite) by the one rule table (axes_rules).

The PyTorch recorder follows tensors as the model runs; a graph recorder knows its whole op list
and every value's shape after the run. Both apply the same rules: this module is the bookkeeping
between a graph's values and :func:`axes_rules.propagate` (names and trails per value, the names
stop where an op has no rule, the events each op's output record carries as ``axes_ops``), so
the ONNX Runtime and LiteRT recorders only translate their op types into rule calls.
Framework-free: tested without ONNX or TensorFlow (tests/python/test_axes_graph.py).
"""

from __future__ import annotations

from typing import (Any, Callable, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence,
                    Tuple, Type)

from . import axes_rules as _rules

Names = Optional[Tuple[Optional[str], ...]]


class Named:
    """A value's names and where they came from: the first three propagation steps, the last
    three and how many there were; or, with no names, where they stopped."""

    __slots__ = ("names", "steps", "tail", "count", "stop")

    def __init__(self, names: Names, steps: Tuple[str, ...] = (), tail: Tuple[str, ...] = (),
                 count: int = 0, stop: str = "") -> None:
        self.names, self.steps, self.tail, self.count, self.stop = names, steps, tail, count, stop

    def then(self, names: Names, step: str) -> "Named":
        if len(self.steps) < 3:
            return Named(names, self.steps + (step,), (), self.count + 1)
        return Named(names, self.steps, (self.tail + (step,))[-3:], self.count + 1)

    def trail_text(self) -> str:
        more = self.count - len(self.steps) - len(self.tail)
        return " -> ".join(self.steps + ((f"... ({more} more)",) if more > 0 else ()) + self.tail)


def names_text(names: Optional[Sequence[Optional[str]]]) -> str:
    return ",".join(n or "?" for n in names) if names is not None else ""


def writable(names: Names) -> bool:
    """Whole names only (a record's axes are all named or none, docs/format.md §3.3), within
    the format's 1024 bytes."""
    return (names is not None and all(n for n in names)
            and len(",".join(names).encode()) <= 1024  # type: ignore[arg-type]
            and not any("," in n for n in names))  # type: ignore[union-attr]


def event_line(event: Sequence[Any], trail: str, op: Optional[str] = None) -> str:
    """One ``axes_ops`` line (docs/axes.md §1.1): kind op names sizes axes names2 sizes2 trail."""
    kind, name, n1, s1, ax, n2, s2 = event
    return "\t".join((kind, op or name, names_text(n1), ",".join(map(str, s1)),
                      ",".join(map(str, ax)), names_text(n2), ",".join(map(str, s2 or ())),
                      trail))


class GraphNames:
    """Names of a graph's values, applied op by op in topological order."""

    def __init__(self) -> None:
        self.named: Dict[str, Named] = {}
        self.events: Dict[str, List[str]] = {}  # output value -> axes_ops lines
        self.widths: Dict[str, int] = {}
        self.splits: Dict[Tuple[str, ...], str] = {}

    def declare(self, value: str, names: Sequence[Optional[str]], shape: Sequence[int],
                how: str, label: str = "") -> None:
        """`label`: what the trail calls the value (default: `value`)."""
        names = tuple(names)
        if "hidden" in names:
            self.widths.setdefault("hidden", int(shape[names.index("hidden")]))
        self.named[value] = Named(names, (f"{label or value}: {names_text(names)} ({how})",),
                                  (), 1)

    def arg(self, value: str, shape: Sequence[int]) -> _rules.Arg:
        n = self.named.get(value)
        return _rules.Arg(n.names if n is not None else None, shape)

    def apply(self, op: Optional[str], label: str, where: str, inputs: Sequence[str],
              args: Sequence[Any], kwargs: Mapping[str, Any],
              outs: Sequence[Tuple[str, Sequence[int]]], num_heads: Optional[int] = None,
              module: str = "") -> None:
        """One op: `op` is the rule's name (None: no rule), `label` the graph's op type (what the
        trails and findings say), `inputs` the values it reads (whose names and stops it
        inherits), `args`/`kwargs` the rule's arguments (:class:`axes_rules.Arg` for tensors),
        `outs` its outputs with their shapes, `module` the scope a new feature axis is named
        after (``dense`` -> ``dense.out``). Never raises."""
        try:
            self._apply(op, label, where, inputs, args, kwargs, outs, num_heads, module)
        except Exception:  # noqa: BLE001 - naming never breaks a recording: the names stop
            for v, _ in outs:
                self.named[v] = Named(None, stop=f"names stop at {label} (no rule)")

    def _apply(self, op: Optional[str], label: str, where: str, inputs: Sequence[str],
               args: Sequence[Any], kwargs: Mapping[str, Any],
               outs: Sequence[Tuple[str, Sequence[int]]], num_heads: Optional[int],
               module: str) -> None:
        found = [self.named[v] for v in inputs if v in self.named]
        if not found or not outs:
            return
        base = next((e for e in found if e.names is not None), None)
        if base is None:  # names stopped upstream: carry where
            for v, _ in outs:
                self.named[v] = found[0]
            return
        res = None
        ctx = None
        if op is not None:
            ctx = _rules.Ctx(op, args, kwargs, [tuple(s) for _, s in outs], module=module or where,
                             num_heads=num_heads, widths=self.widths, splits=self.splits)
            res = _rules.propagate(ctx)
        at = f" at {where}" if where else ""
        if res is None or ctx is None:
            for v, _ in outs:
                self.named[v] = Named(None, stop=f"names stop at {label}{at} (no rule)")
            return
        for (v, _), n in zip(outs, res):
            if n is not None and any(x is not None for x in n):
                change = "" if n == base.names else f"{names_text(base.names)} -> "
                self.named[v] = base.then(n, f"{label}{at}: {change}{names_text(n)}")
            else:
                self.named[v] = Named(None, stop=f"names stop at {label}{at}")
        if ctx.events:
            trail = base.trail_text()
            have = self.events.setdefault(outs[0][0], [])
            for e in ctx.events:
                line = event_line(e, trail, label)
                if line not in have and len(have) < _rules.MAX_EVENTS:
                    have.append(line)

    def step(self, label: str, where: str, inputs: Sequence[str],
             outs: Sequence[Tuple[str, Optional[Sequence[int]]]],
             in_shapes: Mapping[str, Optional[Sequence[int]]],
             translate: Callable[[Callable[[str], _rules.Arg]],
                                 Tuple[Optional[str], List[Any], Dict[str, Any]]],
             num_heads: Optional[int] = None, module: str = "") -> None:
        """One graph op through its format's adapter: `translate(A)` turns the op into a rule
        call ``(rule name or None, args, kwargs)``, with ``A(value)`` the rule's view of an input.
        What every graph format shares: an op none of whose inputs has names is left alone, a
        value without a recorded shape cannot be followed, and an adapter that fails on an
        unusual op is an op without a rule."""
        if not any(x in self.named for x in inputs):
            return
        known = [(o, tuple(s)) for o, s in outs if s is not None]
        if not known:
            return
        if any(in_shapes.get(x) is None for x in inputs):
            for o, _ in known:  # a value the run did not return (filtered): no shape to follow
                self.named[o] = Named(None, stop=f"names stop at {label} (shape not recorded)")
            return
        try:
            op, args, kw = translate(lambda x: self.arg(x, in_shapes[x]))  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - an unusual op is an op without a rule
            op, args, kw = None, [], {}
        self.apply(op, label, where, inputs, args, kw, known, num_heads=num_heads, module=module)

    def attrs(self, value: str) -> Tuple[Optional[List[str]], Dict[str, str]]:
        """(axis names to write or None, the attributes axes_from / axes_stop / axes_ops)."""
        out: Dict[str, str] = {}
        n = self.named.get(value)
        axes = None
        if n is not None:
            if writable(n.names):
                axes = list(n.names)  # type: ignore[arg-type]
                out["axes_from"] = n.trail_text()
            elif n.stop:
                out["axes_stop"] = n.stop
        if self.events.get(value):
            out["axes_ops"] = "\n".join(self.events[value])
        return axes, out


def input_names(name: str, rank: int, declared: Mapping[str, Sequence[str]],
                dim_params: Optional[Sequence[Any]] = None
                ) -> Tuple[Optional[Tuple[Optional[str], ...]], str]:
    """A graph input's names and where they come from: a declaration; else its symbolic dims
    when every axis has one; else the convention for its name (when the rank matches); else
    the symbolic dims it has (the others unnamed)."""
    if name in declared:
        return tuple(declared[name]), "declared"
    syms = [d if isinstance(d, str) and d else None for d in (dim_params or ())]
    if syms and all(syms):
        return tuple(syms), "dim_param"
    conv = _rules.CONVENTIONS.get(name)
    if conv is not None and len(conv) == rank:
        return tuple(conv), "convention"
    if any(syms) and len(syms) == rank:
        return tuple(syms), "dim_param"
    return None, ""


def declared_input_axes(input_axes: Any, ranks: Mapping[str, Optional[int]],
                        error: Type[Exception],
                        aliases: Optional[Mapping[str, str]] = None) -> Dict[str, Tuple[str, ...]]:
    """``input_axes=`` of a graph recorder checked against the graph's inputs (`ranks`: input
    name -> rank, None where unknown; `aliases`: other names of an input, such as a LiteRT
    signature's, -> its name): names well formed (:func:`axes_rules.parse_axes`), a known input,
    one name per axis. Raises `error` with one line; returns input name -> names."""
    if not input_axes:
        return {}
    if not isinstance(input_axes, Mapping):
        raise error(f"input_axes: expected a dict {{input name: 'a,b,c'}}, got "
                    f"{type(input_axes).__name__}")
    out: Dict[str, Tuple[str, ...]] = {}
    for key, spec in input_axes.items():
        try:
            names = _rules.parse_axes(spec, f"input_axes[{key!r}]")
        except _rules.AxesError as e:
            raise error(str(e)) from None
        target = key if key in ranks else (aliases or {}).get(key)
        if target is None:
            raise error(f"input_axes: {key!r} is not an input of the model (its inputs: "
                        f"{', '.join(ranks)})")
        rank = ranks[target]
        if rank is not None and rank != len(names):
            raise error(f"input_axes[{key!r}]: {len(names)} names ({','.join(names)}) for a "
                        f"rank-{rank} input")
        if target in out:
            raise error(f"input_axes: {key!r} names input {target!r} a second time")
        out[target] = names
    return out


class GraphOp(NamedTuple):
    """An op as :func:`head_counts` sees it: `kind` is "matmul" (a batched product of two
    activations), "reshape", "pass" (an op attention puts between the two: transpose, scale,
    cast) or anything else; `key` names it in the result."""
    kind: str
    inputs: Sequence[str]
    outputs: Sequence[str]
    key: str


def head_counts(ops: Iterable[GraphOp], shapes: Mapping[str, Sequence[int]],
                static: Iterable[str]) -> Dict[str, int]:
    """Reshape key -> head count, for the reshapes whose parts feed a batched product of two
    activations (attention's QK^T and probabilities @ V): ``[b, s, H*D] -> [b, s, H, D]``. A
    graph has no num_heads attribute; this structure is where the head axis is."""
    ops = list(ops)
    fixed = set(static)
    producer = {o: op for op in ops for o in op.outputs if o}
    heads: Dict[str, int] = {}
    for op in ops:
        if op.kind != "matmul" or len(op.inputs) < 2 or any(x in fixed for x in op.inputs[:2]):
            continue
        if not op.outputs or len(shapes.get(op.outputs[0], ())) != 4:
            continue
        for x in op.inputs[:2]:
            p = producer.get(x)
            for _ in range(6):
                if p is None or p.kind == "reshape":
                    break
                if p.kind != "pass" or not p.inputs:
                    p = None
                    break
                p = producer.get(p.inputs[0])
            if p is None or p.kind != "reshape" or not p.inputs or not p.outputs:
                continue
            si, so = shapes.get(p.inputs[0], ()), shapes.get(p.outputs[0], ())
            if len(so) == 4 and len(si) == 3 and si[-1] == so[-2] * so[-1] and so[-2] > 1:
                heads[p.key] = int(so[-2])
    return heads
