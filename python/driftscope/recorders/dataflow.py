"""Data flow of a graph for the reserved attributes ``ds.inputs`` and ``ds.kind``
(docs/format.md §3.3.3), shared by the graph recorders (ONNX Runtime, LiteRT).

A record's ``ds.inputs`` names the *nearest recorded* tensors it was computed from: the node's
inputs, and through every value that was not recorded (filtered out, never exposed) the recorded
values that value came from. Constants (initializers, weights) and graph inputs that are not
recorded contribute nothing. ``ds.kind`` says what a value holds: ``float`` values carry rounding
error, ``index`` / ``shape`` / ``mask`` tensors are exact by construction (integer ids, shape
arithmetic, booleans and floats computed from integers or booleans only, e.g. an additive
attention mask) and are never an error source.

Pure Python, no framework import, so the rules are testable on their own.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from .. import _core

__all__ = ["GraphNode", "DataFlow", "SHAPE_OPS", "MASK_OPS", "INDEX_OPS"]

Ref = Tuple[str, str, int, int]  # (name, role, role_index, occurrence)

# Ops whose outputs are shapes or sizes of their input, booleans, or positions.
SHAPE_OPS = frozenset({"Shape", "Size", "SHAPE", "RANK"})
MASK_OPS = frozenset({"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And",
                      "Or", "Xor", "IsNaN", "IsInf", "EQUAL", "LESS", "GREATER", "LESS_EQUAL",
                      "GREATER_EQUAL", "NOT_EQUAL", "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT"})
GATHER_OPS = frozenset({"Gather", "GatherElements", "GatherND", "GATHER", "GATHER_ND"})
INDEX_OPS = frozenset({"ArgMax", "ArgMin", "NonZero", "ARG_MAX", "ARG_MIN", "WHERE"})


class GraphNode:
    """One node in topological order. `cast_to` is "float", "int" or "bool" for a cast."""

    __slots__ = ("op_type", "inputs", "outputs", "cast_to")

    def __init__(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str],
                 cast_to: Optional[str] = None) -> None:
        self.op_type = op_type
        self.inputs = [x for x in inputs if x]
        self.outputs = list(outputs)
        self.cast_to = cast_to


class DataFlow:
    """Walk the graph in step with the records written in topological order.

    constants: value name -> True for floating-point constants (weights), False for integer
    ones. graph_inputs: value name -> "float", "index" or "mask" (by element type)."""

    def __init__(self, nodes: Sequence[GraphNode], constants: Mapping[str, bool],
                 graph_inputs: Mapping[str, str]) -> None:
        self._nodes = list(nodes)
        self._producer: Dict[str, int] = {}
        for i, n in enumerate(self._nodes):
            for o in n.outputs:
                if o:
                    self._producer.setdefault(o, i)
        # "cfloat"/"cint": constants; otherwise a ds.kind value.
        self.kinds: Dict[str, str] = {k: ("cfloat" if f else "cint") for k, f in constants.items()}
        self.kinds.update(graph_inputs)
        for n in self._nodes:
            k = self._node_kind(n)
            for o in n.outputs:
                if o and o not in self.kinds:
                    self.kinds[o] = k
        self._frontier: Dict[str, Tuple[Ref, ...]] = {}
        self._next = 0

    def _node_kind(self, n: GraphNode) -> str:
        ins = [self.kinds.get(x, "float") for x in n.inputs]
        if n.op_type in SHAPE_OPS:
            return "shape"
        if all(k in ("cfloat", "cint") for k in ins):
            return "cfloat" if ("cfloat" in ins or n.cast_to == "float") else "cint"
        if n.cast_to is not None:
            src = next((k for k in ins if k not in ("cfloat", "cint")), "float")
            if n.cast_to == "bool":
                return "mask"
            if n.cast_to == "int":
                return "shape" if src == "shape" else "index"
            return "float" if src == "float" else "mask"
        # A lookup in a float weight table is a float value whatever computed the indices (BERT's
        # position ids come from Equal/Where on the input ids: "mask" by the rules below); a
        # dequantized value is a float value whatever its integer input was.
        if n.op_type in GATHER_OPS and ins and ins[0] == "cfloat":
            return "float"
        if n.op_type == "DequantizeLinear":
            return "float"
        if n.op_type in MASK_OPS:
            return "mask"
        if n.op_type in INDEX_OPS:
            return "index"
        if "float" in ins:
            return "float"
        if "cfloat" in ins and "index" in ins:
            return "float"  # a lookup in a weight table (embedding Gather)
        if "mask" in ins:
            return "mask"
        if all(k in ("shape", "cint", "cfloat") for k in ins):
            return "shape"
        return "index"

    def kind(self, value: str, numpy_kind: str) -> str:
        """ds.kind of a recorded value, its numpy dtype kind ("f", "i", "u", "b") deciding
        where the graph rules cannot (an integer value is never "float")."""
        k = self.kinds.get(value, "float")
        if numpy_kind == "b":
            return "mask"
        if numpy_kind in "iu":
            return "shape" if k == "shape" else "index"
        return "mask" if k in ("mask", "index", "shape", "cint") else "float"

    def _advance(self, upto: int) -> None:
        while self._next <= upto and self._next < len(self._nodes):
            n = self._nodes[self._next]
            merged: Dict[Ref, None] = {}
            for x in n.inputs:
                for r in self._frontier.get(x, ()):
                    merged[r] = None
            for o in n.outputs:
                if o and o not in self._frontier:
                    self._frontier[o] = tuple(merged)
            self._next += 1

    def inputs_of(self, value: str) -> str:
        """The ds.inputs value for the first record of `value`: the nearest recorded tensors
        its node was computed from."""
        i = self._producer.get(value)
        if i is None:
            return ""
        self._advance(i)
        n = self._nodes[i]
        merged: Dict[Ref, None] = {}
        for x in n.inputs:
            for r in self._frontier.get(x, ()):
                merged[r] = None
        return _core.format_inputs(list(merged))

    def recorded(self, value: str, ref: Ref) -> None:
        """`value` was written as `ref`: later consumers were computed from that record."""
        i = self._producer.get(value)
        if i is not None:
            self._advance(i)
        self._frontier[value] = (ref,)


def format_refs(refs: Iterable[Ref]) -> str:
    return _core.format_inputs(list(refs))
