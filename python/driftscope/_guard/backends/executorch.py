"""``executorch``: a PyTorch model through ExecuTorch with the XNNPACK delegate, as a mobile app
runs it: ``torch.export`` -> ``to_edge_transform_and_lower(partitioner=[XnnpackPartitioner()])``
-> ``.pte`` in the work folder -> ``executorch.runtime`` (the portable runtime with XNNPACK).
Operations XNNPACK does not take run in ExecuTorch's portable kernels; the row counts both.
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Any, Dict, List, Mapping, Optional, Sequence

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
        import torch
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import \
            XnnpackPartitioner
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
                exported, partitioner=[XnnpackPartitioner()]).to_executorch()
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
        pte = os.path.join(work, "model.pte")
        with open(pte, "wb") as f:
            f.write(program.buffer)
        method = Runtime.get().load_program(pte).load_method("forward")
        note = (f"lowered in {took:.1f} s: {delegated} XNNPACK partition(s), {portable} "
                "operation(s) in ExecuTorch's portable kernels")
        if not delegated:
            note += " (XNNPACK took nothing: only the portable kernels were exercised)"
        return _EtSession(method, inputs, names, [note])
