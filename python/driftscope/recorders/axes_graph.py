"""Axis names carried over a graph's op list (ONNX, .tflite) by the one rule table (axes_rules).

The PyTorch recorder follows tensors as the model runs; a graph recorder knows its whole op list
and every value's shape after the run. Both apply the same rules: this module is the bookkeeping
between a graph's values and :func:`axes_rules.propagate` (names and trails per value, the names
stop where an op has no rule, the events each op's output record carries as ``axes_ops``), so
the ONNX Runtime and LiteRT recorders only translate their op types into rule calls.
Framework-free: tested without ONNX or TensorFlow (tests/python/test_axes_graph.py).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

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
                how: str) -> None:
        names = tuple(names)
        if "hidden" in names:
            self.widths.setdefault("hidden", int(shape[names.index("hidden")]))
        self.named[value] = Named(names, (f"{value}: {names_text(names)} ({how})",), (), 1)

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
