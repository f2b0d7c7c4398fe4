"""Names for tensors of exported graphs, so they line up with PyTorch module paths.

``torch.onnx.export`` (the TorchScript exporter) names every node after the module scope it was
traced in: ``/encoder/layer.0/attention/self/query/MatMul`` is the ``MatMul`` node of module
``encoder.layer.0.attention.self.query``. A module's output is the value its last node computes, so
the last node (in topological order) inside each scope is recorded under the module path, exactly
the name ``driftscope.torch.record`` gives that module's output. Every other node output keeps a
name derived from its node (``encoder.layer.0.attention.self.query.MatMul``).

This module is pure Python (no framework import) so the planning logic is testable on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

__all__ = ["NodeInfo", "PlannedName", "split_scope", "plan_names", "QUANT_PLUMBING"]

# Quantisation plumbing (a dynamically quantized graph's DynamicQuantizeLinear before each
# MatMulInteger, the Q/DQ pairs of a static one): it never carries a module's value, so a module
# name lands on the float tensor that does (issue 9).
QUANT_PLUMBING = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"})


@dataclass(frozen=True)
class NodeInfo:
    """One node of a graph, in topological order."""

    name: str
    op_type: str
    outputs: Tuple[str, ...]
    # A node the recorder itself inserted (a float16 conversion's casts): it belongs to no module
    # and its outputs are recorded only as the model's outputs (`<root>`), if they are that.
    inserted: bool = False
    inputs: Tuple[str, ...] = ()


@dataclass
class PlannedName:
    """A record to write for one node output. A module output can carry several names (a module
    and its parents that end with the same node), written innermost first like forward hooks fire."""

    tensor: str                 # the graph's value name (what the runtime returns)
    node: str                   # node name
    op_type: str
    role_index: int             # which output of the node
    names: List[str] = field(default_factory=list)
    module_output: bool = False
    # Extra (name, role_index) records: a graph output k is also output k of the root module,
    # which driftscope.torch names "<root>" (its ModelOutput flattened in field order).
    aliases: List[Tuple[str, int]] = field(default_factory=list)

    def records(self) -> List[Tuple[str, int]]:
        """(name, role_index) of every record to write for this value, in writing order."""
        return [(n, self.role_index) for n in self.names] + list(self.aliases)


def split_scope(node_name: str) -> Tuple[Tuple[str, ...], str]:
    """``/a/b.0/c/MatMul_1`` -> (("a", "b.0", "c"), "MatMul_1"). Names without '/' have no scope.

    Empty components (a leading '/', doubled slashes) are dropped, so ``a/b/Op`` (tf2onnx style)
    and ``/a/b/Op`` (torch style) mean the same scope."""
    parts = [p for p in node_name.split("/") if p]
    if len(parts) <= 1:
        return (), (parts[0] if parts else "")
    return tuple(parts[:-1]), parts[-1]


def plan_names(nodes: Sequence[NodeInfo], skip: Iterable[str] = (),
               graph_outputs: Sequence[str] = (), root_name: Optional[str] = "<root>"
               ) -> List[PlannedName]:
    """Names for every output of `nodes` (topologically ordered), in the same order.

    `skip` holds value names that are not recorded (weights: values computed from constants
    alone); a node with only such outputs cannot be a module's last node.
    `graph_outputs` (in graph order) are also recorded as outputs of `root_name` (None: not)."""
    skipped = set(skip)
    scopes: List[Tuple[str, ...]] = []
    locals_: List[str] = []
    last_in_scope: Dict[Tuple[str, ...], int] = {}
    producer: Dict[str, int] = {}
    for i, node in enumerate(nodes):
        scope, local = split_scope(node.name)
        scopes.append(scope)
        locals_.append(local)
        producer.update((o, i) for o in node.outputs if o)
        # A DequantizeLinear of the value its module ended with is the float form of that value
        # (quantize_dynamic's Gather of uint8 embedding weights, a static graph's quantized
        # Gather): the module's name goes to it. Q -> DQ after a float op stays plumbing: the
        # producer of its input is a QuantizeLinear, never a module's last node.
        dq_of_module = (node.op_type == "DequantizeLinear" and node.inputs and scope
                        and last_in_scope.get(scope) == producer.get(node.inputs[0], -1))
        if not dq_of_module and (node.inserted or node.op_type in QUANT_PLUMBING
                                 or not any(o and o not in skipped for o in node.outputs)):
            continue
        # Every enclosing module (not the root: it has no name) sees this node as its latest.
        for depth in range(1, len(scope) + 1):
            last_in_scope[scope[:depth]] = i

    modules_ending_at: Dict[int, List[Tuple[str, ...]]] = {}
    for prefix, i in last_in_scope.items():
        modules_ending_at.setdefault(i, []).append(prefix)

    plan: List[PlannedName] = []
    taken: Dict[Tuple[str, int], int] = {}
    for i, node in enumerate(nodes):
        prefixes = sorted(modules_ending_at.get(i, []), key=len, reverse=True)
        for j, out in enumerate(node.outputs):
            if not out or out in skipped:
                continue
            entry = PlannedName(tensor=out, node=node.name, op_type=node.op_type, role_index=j)
            if node.inserted:
                pass  # named only by a `<root>` alias below, else dropped
            elif prefixes:
                entry.module_output = True
                entry.names = [".".join(p) for p in prefixes]
            else:
                base = ".".join(scopes[i] + (locals_[i],)) if locals_[i] else out
                entry.names = [base]
            plan.append(entry)
    if root_name:
        by_tensor = {e.tensor: e for e in plan}
        for k, out in enumerate(graph_outputs):
            if out in by_tensor:
                by_tensor[out].aliases.append((root_name, k))
    plan = [e for e in plan if e.names or e.aliases]
    # Module names are claimed first so that a node-derived name never steals a module's name.
    for entry in plan:
        if entry.module_output:
            for n in entry.names:
                taken[(n, entry.role_index)] = taken.get((n, entry.role_index), 0) + 1
    for entry in plan:
        if entry.module_output or not entry.names:
            continue
        base = entry.names[0]
        key = (base, entry.role_index)
        if key in taken:
            # Two nodes with the same derived name (unnamed nodes, or a node named like a module):
            # the later one gets '#k'; '#' never appears in a PyTorch module path.
            k = taken[key]
            while (f"{base}#{k}", entry.role_index) in taken:
                k += 1
            taken[key] = k + 1
            entry.names = [f"{base}#{k}"]
            taken[(entry.names[0], entry.role_index)] = 1
        else:
            taken[key] = 1
    return plan

