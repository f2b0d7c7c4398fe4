"""``executorch``: a PyTorch model through ExecuTorch with the XNNPACK delegate, as a mobile app
runs it: ``torch.export`` -> ``to_edge_transform_and_lower(partitioner=[XnnpackPartitioner()])``
-> ``.pte`` in the work folder -> ``executorch.runtime`` (the portable runtime with XNNPACK).
Operations XNNPACK does not take run in ExecuTorch's portable kernels; the row counts both.
"""

from __future__ import annotations

import itertools
import os
import time
import warnings
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .base import Backend, Session
from .torch import torch_example, torch_leaves


class _EtSession(Session):
    def __init__(self, method: Any, inputs: List[str], outputs: List[str],
                 notes: List[str]) -> None:
        self.method, self.inputs, self.outputs, self.notes = method, inputs, outputs, notes

    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        import torch

        args = [torch.from_numpy(np.ascontiguousarray(feeds[n])) for n in self.inputs]
        out = self.method.execute(args)
        return {name: t.detach().float().numpy().copy() if t.dtype in (torch.float16,
                                                                      torch.bfloat16)
                else t.detach().numpy().copy() for name, t in zip(self.outputs, out)}


class ExecuTorchBackend(Backend):
    name = "executorch"
    family = "torch"
    summary = ("ExecuTorch, XNNPACK delegate, CPU, float32 (torch.export, "
               "to_edge_transform_and_lower, .pte, executorch.runtime)")

    default = False  # lowering takes seconds: run when named
    # What every child imports before lowering: executorch's XNNPACK partitioner is ~3.9
    # CPU-seconds (it pulls torchao), and starts no thread; the runtime's import loads no
    # program.
    preload = ("torch", "executorch.backends.xnnpack.partition.xnnpack_partitioner",
               "executorch.exir", "executorch.runtime")

    def unavailable(self) -> Optional[str]:
        # Found, not imported: importing executorch pulls torchao, which is slow and noisy.
        import importlib.util

        for module in ("executorch", "executorch.runtime"):
            try:
                found = importlib.util.find_spec(module) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                return f"the {module} package is not installed; pip install executorch"
        return None

    def load(self, model: str, work: str, seed: int, keep_float32: Sequence[str] = ()
             ) -> Session:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import \
            XnnpackPartitioner

        return self._lower(model, work, seed, XnnpackPartitioner())

    # -- the probe's bisection over what XNNPACK takes (_delegate_bisect.py) --------------------
    def partial_units(self, model: str, work: str, seed: int, leaves: Sequence[str] = ()
                      ) -> List[Tuple[str, str, str]]:
        """(edge node name, op, module path) of every operation the XnnpackPartitioner
        delegates, in the edge graph's topological order."""
        part = _partial_partitioner(None)
        self._lower(model, work, seed, part, "units.pte")
        return list(part.units)

    def load_partial(self, model: str, work: str, seed: int, delegated: Sequence[str],
                     units: Sequence[str] = ()) -> Session:
        """The model with only the operations `delegated` (edge node names) given to XNNPACK,
        the rest on ExecuTorch's portable kernels."""
        part = _partial_partitioner(set(delegated))
        session = self._lower(model, work, seed, part,
                              f"partial{next(_PARTIAL)}.pte")
        session.notes.append(f"{part.taken} of {len(part.units)} XNNPACK-delegable "
                             "operation(s) delegated")
        return session

    partial_what = ("operations the XnnpackPartitioner delegates", "delegated to XNNPACK",
                    "on ExecuTorch's portable kernels")

    def _lower(self, model: str, work: str, seed: int, partitioner: Any,
               pte_name: str = "model.pte") -> Session:
        import torch
        from executorch.exir import to_edge_transform_and_lower
        from executorch.runtime import Runtime

        from ...recorders.api import torch_call as _call, torch_flat as _flat

        net, example = torch_example(model, seed)
        net.eval()
        leaves = torch_leaves(example)
        with torch.no_grad():
            names = [p.lstrip(".") or "output" for p, _ in _flat(_call(net, example))[0]]
        kwargs: Dict[str, Any] = {}
        inputs = list(leaves)
        if isinstance(example, torch.Tensor):
            args: tuple = (example,)
        elif isinstance(example, Mapping) and all(isinstance(v, torch.Tensor)
                                                  for v in example.values()):
            # By keyword, as the model is called: bound by position, a dict whose order is not
            # forward()'s parameter order fed decoder_input_ids to Whisper's attention_mask.
            args, kwargs = (), dict(example)
        elif isinstance(example, Mapping):
            args = tuple(example[k] for k in leaves)  # positional, in the dict's order
        else:
            args = tuple(example)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exported = torch.export.export(net, args, kwargs=kwargs or None)
            if kwargs:  # the program's flat inputs follow its own (args, kwargs) order
                inputs = list(exported.example_inputs[1])
            program = to_edge_transform_and_lower(
                exported, partitioner=[partitioner]).to_executorch()
        took = time.perf_counter() - start
        graph = program.exported_program().graph_module.graph
        delegated = portable = 0
        for node in graph.nodes:
            if node.op != "call_function":
                continue
            target = str(node.target)
            if "executorch_call_delegate" in target:
                delegated += 1
            elif "memory" not in target and "getitem" not in target:
                portable += 1
        # A loaded program may map its file: each variant gets its own.
        pte = os.path.join(work, pte_name)
        with open(pte, "wb") as f:
            f.write(program.buffer)
        method = Runtime.get().load_program(pte).load_method("forward")
        note = (f"lowered in {took:.1f} s: {delegated} XNNPACK partition(s), {portable} "
                "operation(s) in ExecuTorch's portable kernels")
        if not delegated:
            note += " (XNNPACK took nothing: only the portable kernels were exercised)"
        return _EtSession(method, inputs, names, [note])


_PARTIAL = itertools.count()


def _partial_partitioner(allowed: Optional[set]) -> Any:
    """An XnnpackPartitioner that records the operations it delegates (`units`: edge node name,
    op, module path, topological order) and, given `allowed`, delegates only those. Each
    partition keeps its allowed operations and the constants they read; dropping the rest of a
    partition never makes it non-convex when the allowed set is a topological prefix (what the
    bisection asks for: an operation between two kept ones comes before the later one).
    Operations are lowered decomposed (ops_to_not_decompose below)."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from torch.fx.passes.infra.partitioner import Partition

    class Partial(XnnpackPartitioner):
        def __init__(self) -> None:
            super().__init__()
            self.units: List[Tuple[str, str, str]] = []
            self.taken = 0

        def ops_to_not_decompose(self, ep: Any) -> Tuple[List[Any], Any]:
            # XNNPACK keeps aten.linear and a few others whole, and a kept op it is then not
            # given has no portable kernel: the bisection lowers the decomposed graph (linear as
            # permute + addmm), the listing and every cut the same one.
            return [], None

        def generate_partitions(self, ep: Any) -> List[Any]:
            parts = super().generate_partitions(ep)
            order = {n: i for i, n in enumerate(ep.graph.nodes)}
            ops = sorted((n for p in parts for n in p.nodes if n.op == "call_function"),
                         key=order.__getitem__)
            self.units = [(n.name, _op_name(n.target), _module_path(n)) for n in ops]
            if allowed is None:
                self.taken = len(ops)
                return parts
            out = []
            for p in parts:
                keep = [n for n in p.nodes if n.op == "call_function" and n.name in allowed]
                kept = set(keep)
                keep += [n for n in p.nodes if n.op != "call_function"
                         and any(u in kept for u in n.users)]
                if any(n.op == "call_function" for n in keep):
                    out.append(Partition(id=p.id, nodes=sorted(keep, key=order.__getitem__)))
            self.taken = sum(1 for p in out for n in p.nodes if n.op == "call_function")
            return out

    return Partial()


def _op_name(target: Any) -> str:
    return str(getattr(target, "__name__", None) or target)  # aten.sigmoid.default


def _module_path(node: Any) -> str:
    """The PyTorch module path an edge node came from (torch.export's nn_module_stack: its
    innermost entry), "" for the model's own forward."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path = list(stack.values())[-1][0]
    return _clean_path(str(path))


def _clean_path(path: str) -> str:
    # torch.export writes L['self'].layers[5] style paths in some versions; module paths here
    # are dotted (layers.5), as named_modules() and the recorders name them.
    import re

    path = re.sub(r"^L\['self'\]\.?", "", path)
    path = re.sub(r"\[(\d+)\]", r".\1", path)
    path = re.sub(r"\._modules\['([^']+)'\]", r".\1", path)
    return path.lstrip(".")
