"""ONNX graph surgery on a float32 source model (issue 26): the cut models that replay and the
guard's bisection hand to a backend's own ``load()``, so that the backend builds its variant
(float16 conversion, INT8 quantization, OpenVINO) from the cut model exactly as from the whole.

* :meth:`Surgeon.suffix`: named tensors become graph inputs (their producers' outputs cut), the
  original graph outputs kept, only the nodes the outputs still need carried over;
* :meth:`Surgeon.single_node`: the node producing a tensor alone, its run-time inputs as graph
  inputs, its weights kept (initializers, and the Constant nodes and constant arithmetic that
  compute weights: what a variant converts or quantizes with the node);
* :meth:`Surgeon.with_outputs`: the whole model with intermediate tensors exposed as outputs.

Why not ``onnx.utils.Extractor``: it walks only ``node.input``, so the values an If/Loop/Scan
body reads from the enclosing graph are neither kept nor made inputs (a broken model), and each
extraction scans every initializer and value_info of the model, which an isolation pass over
every node of a 100k-node graph cannot afford. The walk here is Extractor's (a producer map, an
explicit stack) plus the outer-scope reads; the index is built once per model, and each cut costs
what it keeps.

Refusals are :class:`CannotReplay` (one sentence): a tensor computed inside a subgraph (it is
not a value of the main graph: no cut can reach it), a node of a custom domain run alone (the
runtime's kernel library for it is not ours to load), a weight; an unknown name is
:class:`UnknownTensor`.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from ..._replay.mechanism import CannotReplay, UnknownTensor

# Domains any ONNX backend of the guard runs (ONNX Runtime's contrib ops are com.microsoft; a
# model's local functions are carried with the cut). Anything else is a custom op.
STANDARD_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "com.microsoft"})


def _subgraphs(node: Any) -> List[Any]:
    import onnx

    found: List[Any] = []
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            found.append(a.g)
        elif a.type == onnx.AttributeProto.GRAPHS:
            found.extend(a.graphs)
    return found


def _outer_reads(node: Any) -> Set[str]:
    """Names a node's subgraphs read from the enclosing graph (they are its inputs too)."""
    names: Set[str] = set()
    for g in _subgraphs(node):
        local = ({i.name for i in g.input} | {t.name for t in g.initializer}
                 | {o for n in g.node for o in n.output})
        for n in g.node:
            names |= {x for x in n.input if x and x not in local}
            names |= {x for x in _outer_reads(n) if x not in local}
        names |= {o.name for o in g.output if o.name not in local}
    return names


def elem_type(dtype: Any) -> int:
    from onnx import helper

    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def value_info_of(name: str, value: np.ndarray) -> Any:
    from onnx import helper

    return helper.make_tensor_value_info(name, elem_type(value.dtype), list(value.shape))


class Surgeon:
    """Index of one ModelProto's main graph (built once, linear in its size) and the cuts made
    from it. The model is not modified; every cut is a new ModelProto sharing nothing with it."""

    def __init__(self, model: Any) -> None:
        self.model = model
        g = model.graph
        self.nodes = list(g.node)  # one wrapper per node (protobuf makes new ones per access)
        self.producer: Dict[str, int] = {}
        for i, n in enumerate(self.nodes):
            for o in n.output:
                if o:
                    self.producer[o] = i
        self.initializers = {t.name: t for t in g.initializer}
        self.inputs = [i for i in g.input if i.name not in self.initializers]
        self.input_names = {i.name for i in self.inputs}
        self.outputs = list(g.output)
        self.infos: Dict[str, Any] = {v.name: v for v in g.value_info}
        self.infos.update({v.name: v for v in list(g.input) + list(g.output)})
        self._deps: Dict[int, List[str]] = {}
        self._inner: Optional[Dict[str, str]] = None
        self._inferred: Optional[Dict[str, Any]] = None
        self._static: Optional[Set[str]] = None

    # -- what a name is -------------------------------------------------------------------------

    def inner_values(self) -> Dict[str, str]:
        """Values computed inside a subgraph -> the main-graph node that owns the subgraph."""
        if self._inner is None:
            inner: Dict[str, str] = {}
            for n in self.nodes:
                stack = list(_subgraphs(n))
                while stack:
                    sub = stack.pop()
                    for m in sub.node:
                        for o in m.output:
                            if o and o not in self.producer:
                                inner.setdefault(o, f"{n.op_type} node {n.name or n.output[0]!r}")
                        stack.extend(_subgraphs(m))
            self._inner = inner
        return self._inner

    def check(self, name: str) -> None:
        """Raises unless `name` is an activation of the main graph (a node's output or a graph
        input)."""
        if name in self.producer or name in self.input_names:
            return
        owner = self.inner_values().get(name)
        if owner is not None:
            raise CannotReplay(f"tensor {name!r} is computed inside the subgraph of {owner}: "
                               "only values of the main graph can be cut (the node owning the "
                               "subgraph can)")
        if name in self.initializers:
            raise CannotReplay(f"{name!r} is a weight (an initializer), not a computed tensor")
        raise UnknownTensor(f"no tensor named {name!r} in the model")

    def static_values(self) -> Set[str]:
        """Values computed from initializers and constants alone (weights: Constant outputs,
        a Reshape of an initializer), as the recorder counts them."""
        if self._static is None:
            from ...recorders.api import onnx_static_values, onnx_topological_nodes

            self._static = onnx_static_values(self.model.graph,
                                              onnx_topological_nodes(self.model.graph))
        return self._static

    def node_of(self, name: str) -> Any:
        self.check(name)
        i = self.producer.get(name)
        if i is None:
            raise CannotReplay(f"{name!r} is a graph input: no node produces it")
        return self.nodes[i]

    def run_inputs(self, name: str) -> List[str]:
        """The inputs of the node producing `name` that change from run to run, in order
        (weights and constant arithmetic left out: single_node keeps them), outer-scope reads
        of its subgraphs last."""
        node = self.node_of(name)
        static = self.static_values()
        seen: Set[str] = set()
        found: List[str] = []
        for x in list(node.input) + sorted(_outer_reads(node)):
            if x and x not in seen and x not in self.initializers and x not in static:
                seen.add(x)
                found.append(x)
        return found

    # -- types ----------------------------------------------------------------------------------

    def _info(self, name: str, values: Mapping[str, np.ndarray]) -> Any:
        """A ValueInfoProto for `name`: the captured value's dtype and shape where one is given
        (the run being replayed), else the model's declared or inferred type."""
        v = values.get(name)
        if v is not None:
            return value_info_of(name, np.asarray(v))
        info = self.infos.get(name)
        if info is None:
            info = self.inferred().get(name)
        if info is None or not info.type.tensor_type.elem_type:
            raise CannotReplay(f"the type of tensor {name!r} is not known (shape inference "
                               "cannot tell it and no captured value was given)")
        return info

    def inferred(self) -> Dict[str, Any]:
        """onnx shape inference over the model once (a failure leaves the declared types)."""
        if self._inferred is None:
            import onnx

            try:
                inferred = onnx.shape_inference.infer_shapes(self.model)
                self._inferred = {v.name: v for v in inferred.graph.value_info}
            except Exception:  # noqa: BLE001 - contrib ops, >2 GiB: captured values instead
                self._inferred = {}
        return self._inferred

    def elem_type_of(self, name: str) -> Optional[int]:
        info = self.infos.get(name) or self.inferred().get(name)
        t = info.type.tensor_type.elem_type if info is not None else 0
        return t or None

    # -- the walk -------------------------------------------------------------------------------

    def _node_deps(self, i: int) -> List[str]:
        deps = self._deps.get(i)
        if deps is None:
            n = self.nodes[i]
            deps = [x for x in n.input if x]
            if _subgraphs(n):
                deps += sorted(_outer_reads(n))
            self._deps[i] = deps
        return deps

    def _reach(self, wanted: Iterable[str], stops: Set[str]) -> Tuple[List[int], Set[str]]:
        """(indexes of the nodes computing `wanted` from `stops`, in file order; the values read
        that no kept node produces: graph inputs, initializers, stops)."""
        kept: Set[int] = set()
        read: Set[str] = set()
        seen: Set[str] = set()
        stack = [w for w in wanted if w]
        while stack:
            x = stack.pop()
            if x in seen:
                continue
            seen.add(x)
            i = None if x in stops else self.producer.get(x)
            if i is None:
                read.add(x)
                continue
            if i not in kept:
                kept.add(i)
                stack.extend(self._node_deps(i))
        return sorted(kept), read

    def _build(self, kept: List[int], inputs: List[Any], outputs: List[Any],
               read: Set[str], rename: Mapping[str, str] = {}, tag: str = "") -> Any:
        import onnx
        from onnx import helper

        nodes = []
        for i in kept:
            n = self.nodes[i]
            if rename and any(o in rename for o in n.output):
                c = onnx.NodeProto()
                c.CopyFrom(n)
                for k, o in enumerate(c.output):
                    if o in rename:
                        c.output[k] = rename[o]
                n = c
            nodes.append(n)
        inits = [self.initializers[x] for x in sorted(read) if x in self.initializers]
        used = {x for n in nodes for x in list(n.input) + list(n.output)}
        io = {o.name for o in outputs} | {i.name for i in inputs}
        infos = [self.infos[k] for k in sorted(used)
                 if k in self.infos and k not in read and k not in io]
        graph = helper.make_graph(nodes, f"{self.model.graph.name or 'model'} {tag}".strip(),
                                  inputs, outputs, initializer=inits, value_info=infos)
        made = helper.make_model(graph, ir_version=self.model.ir_version,
                                 opset_imports=list(self.model.opset_import),
                                 producer_name="driftscope surgery",
                                 functions=list(self.model.functions))
        return made

    # -- the cuts -------------------------------------------------------------------------------

    def suffix(self, cut: Sequence[str], values: Mapping[str, np.ndarray] = {}) -> Any:
        """The model whose graph inputs are `cut` (values of the main graph) and the original
        inputs still needed, in that order, and whose outputs are the original outputs: every
        node upstream of the cut that no output needs any more is gone. `values`: captured
        values giving the cut inputs' types and shapes (else the model's declared/inferred
        types)."""
        for c in cut:
            self.check(c)
        stops = set(cut)
        kept, read = self._reach([o.name for o in self.outputs], stops)
        inputs = [self._info(c, values) for c in cut if c not in self.input_names]
        inputs += [i for i in self.inputs if i.name in read or i.name in stops]
        # A node whose cut output is replaced but whose other outputs are still needed stays;
        # its cut output gets a name nothing reads (a value is defined once in a graph).
        taken = set(self.producer) | set(self.initializers) | self.input_names
        rename: Dict[str, str] = {}
        alive = set(kept)
        for c in cut:
            if c in self.producer and self.producer[c] in alive:
                new = f"{c}__driftscope_cut"
                while new in taken:
                    new += "_"
                taken.add(new)
                rename[c] = new
        return self._build(kept, inputs, list(self.outputs), read, rename,
                           tag=f"(cut at {len(cut)} tensor(s))")

    def single_node(self, name: str, values: Mapping[str, np.ndarray] = {}) -> Tuple[Any, List[str]]:
        """The node producing `name` alone: (model, its graph inputs in order). Its run-time
        inputs are graph inputs (types from `values`, the reference's captured inputs, where
        given); its weights come with it (initializers, and the nodes computing weights from
        constants alone); every output of the node is a graph output."""
        node = self.node_of(name)
        if node.domain not in STANDARD_DOMAINS and not any(
                f.name == node.op_type and f.domain == node.domain for f in self.model.functions):
            raise CannotReplay(f"node {node.name or name!r} is the custom op "
                               f"{node.domain}.{node.op_type}: it cannot be run alone "
                               "(its kernel library is the application's)")
        run_inputs = self.run_inputs(name)
        kept, read = self._reach([o for o in node.output if o], set(run_inputs))
        inputs = [self._info(x, values) for x in run_inputs]
        outputs = [self._output_info(o) for o in node.output if o]
        return self._build(kept, inputs, outputs, read, tag=f"(node {node.name or name})"), \
            run_inputs

    def _output_info(self, name: str) -> Any:
        from onnx import helper

        info = self.infos.get(name) or self.inferred().get(name)
        if info is not None:
            return info
        # Untyped: ONNX Runtime infers an output's type itself (the recorder's own rule).
        return helper.make_empty_tensor_value_info(name)

    def with_outputs(self, names: Sequence[str]) -> Any:
        """A copy of the model that also outputs `names` (values of the main graph). Each added
        output is typed with its element type where the model or shape inference tells it (a
        float16 converter needs to know a float output to keep it float32), shape left open."""
        import onnx
        from onnx import helper

        for n in names:
            self.check(n)
        out = onnx.ModelProto()
        out.CopyFrom(self.model)
        have = {o.name for o in out.graph.output}
        for n in names:
            if n in have:
                continue
            have.add(n)
            elem = self.elem_type_of(n)
            out.graph.output.append(helper.make_tensor_value_info(n, elem, None) if elem
                                    else helper.make_empty_tensor_value_info(n))
        return out
