"""More backends for a PyTorch model: ``torch-compile`` (torch.compile, inductor, CPU) and the
ONNX backends through an export (``onnx-ort``, ``onnx-ort-fp16``, ``onnx-openvino-f16``, ...:
the model exported by ``torch.onnx.export`` into the backend's work folder, then run by the
named ONNX backend).

Names map back to the PyTorch model: the TorchScript exporter names every node after the module
scope it was traced in (``/encoder/layer.0/attention/self/query/MatMul``), so a node of the
exported graph belongs to module ``encoder.layer.0.attention.self.query``
(driftscope._naming.split_scope). Nodes to keep in float32 are given as module paths (or ONNX
node names) and mapped to every node of the module.
"""

from __future__ import annotations

import os
import shutil
import time
import warnings
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from ._backends import (Backend, Session, TorchBackend, _missing, _TorchSession, torch_example,
                        torch_leaves)


# -- torch.compile -----------------------------------------------------------------------------

class TorchCompileBackend(TorchBackend):
    def __init__(self) -> None:
        super().__init__("torch-compile", "torch.compile (inductor), CPU, float32: generated "
                         "C++/OpenMP kernels with fused operations", None)
        self.default = False  # compiling takes seconds to minutes: run when named

    def unavailable(self) -> Optional[str]:
        why = _missing("torch", "torch")
        if why:
            return why
        cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
        if not cxx:
            return "inductor compiles C++ kernels on the CPU and no C++ compiler (g++) is on PATH"
        return None

    def load(self, model: str, work: str, seed: int, keep_float32: Sequence[str] = ()
             ) -> Session:
        import torch

        net, example = torch_example(model, seed)
        net.eval()
        # One process compiles: a pool of compile workers costs more to start than a small
        # model's kernels take to build.
        os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
        compiled = torch.compile(net, backend="inductor")
        session = _TorchSession(compiled, example, None, {})
        start = time.perf_counter()
        leaves = torch_leaves(example)
        session.run({k: v.detach().cpu().numpy() for k, v in leaves.items()})
        session.notes = [f"inductor compiled the model in {time.perf_counter() - start:.1f} s "
                         "(first call, included in the load time)"]
        return session


# -- the ONNX backends through an export --------------------------------------------------------

def module_of(node_name: str) -> str:
    """The PyTorch module path of an exported node (``""`` for a node outside any module)."""
    from .._naming import split_scope

    scope, _ = split_scope(node_name)
    return ".".join(scope)


def export(spec: str, seed: int, path: str) -> List[str]:
    """Exports the model of entry point `spec` to `path` (the TorchScript exporter, whose node
    names carry module scopes); returns the output names, the ones the torch backends give."""
    import torch

    from ..torch import _call, _flat

    net, example = torch_example(spec, seed)
    net.eval()
    leaves = torch_leaves(example)
    with torch.no_grad():
        out = _call(net, example)
    names = [p.lstrip(".") or "output" for p, _ in _flat(out)[0]]
    if isinstance(example, torch.Tensor):
        args: Any = (example,)
    elif isinstance(example, Mapping):
        args = ((), {k: v for k, v in example.items()})
    else:
        args = tuple(example)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, args, path, input_names=list(leaves), output_names=names,
                          opset_version=17, dynamo=False)
    return names


class _ExportedSession(Session):
    def __init__(self, inner: Session, nodes: List[str], inputs: List[str],
                 notes: List[str]) -> None:
        self.inner, self.nodes, self.inputs = inner, nodes, inputs
        self.notes = notes + list(getattr(inner, "notes", []))

    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        # The exporter drops inputs the graph does not use.
        return self.inner.run({k: v for k, v in feeds.items() if k in self.inputs})

    def float32_evidence(self, nodes: Sequence[str]) -> Dict[str, str]:
        ask = {n: _nodes_of(n, self.nodes) for n in nodes}
        got = self.inner.float32_evidence(sorted({x for v in ask.values() for x in v})) \
            if hasattr(self.inner, "float32_evidence") else {}
        proof: Dict[str, str] = {}
        for n, onnx_nodes in ask.items():
            if onnx_nodes and all(x in got for x in onnx_nodes):
                proof[n] = (f"all {len(onnx_nodes)} exported node(s): "
                            + got[onnx_nodes[0]])
        return proof


def _nodes_of(name: str, nodes: Sequence[str]) -> List[str]:
    """The exported nodes a name means: the node of that name, else every node of the module."""
    if name in nodes:
        return [name]
    return [n for n in nodes if module_of(n) == name or module_of(n).startswith(name + ".")]


class ExportedBackend(Backend):
    family = "torch"
    default = False

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name = f"onnx-{inner.name}"
        self.summary = f"torch.onnx.export, then {inner.summary}"
        self.note = inner.note

    def unavailable(self) -> Optional[str]:
        return _missing("torch", "torch") or _missing("onnx", "onnx") or self.inner.unavailable()

    def can_keep_float32(self) -> bool:
        return bool(getattr(self.inner, "can_keep_float32", lambda: False)())

    def load(self, model: str, work: str, seed: int, keep_float32: Sequence[str] = ()
             ) -> Session:
        import onnx

        path = os.path.join(work, "exported.onnx")
        start = time.perf_counter()
        export(model, seed, path)
        took = time.perf_counter() - start
        graph = onnx.load(path, load_external_data=False).graph
        nodes = [n.name for n in graph.node]
        inputs = [i.name for i in graph.input]
        keep = sorted({x for n in keep_float32 for x in _nodes_of(n, nodes)})
        missing = [n for n in keep_float32 if not _nodes_of(n, nodes)]
        if missing:
            raise ValueError(f"no exported node belongs to {', '.join(missing[:5])}")
        inner_work = os.path.join(work, "inner")
        os.makedirs(inner_work, exist_ok=True)
        if os.path.isfile(os.path.join(work, "job.pkl")):  # the guard's samples (ort-qdq)
            shutil.copyfile(os.path.join(work, "job.pkl"), os.path.join(inner_work, "job.pkl"))
        if keep:
            inner = self.inner.load(path, inner_work, seed, keep_float32=keep)
        else:
            inner = self.inner.load(path, inner_work, seed)
        scoped = sum(1 for n in nodes if module_of(n))
        return _ExportedSession(inner, nodes, inputs, [
            f"exported in {took:.1f} s to {len(nodes)} ONNX node(s), {scoped} named by module "
            "path (node /a/b/Op is module a.b)"])


def exported_backends(onnx_backends: Sequence[Backend]) -> List[Backend]:
    return [ExportedBackend(b) for b in onnx_backends]
