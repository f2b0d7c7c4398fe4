"""More backends for a PyTorch model: ``torch-compile`` (torch.compile, inductor, CPU) and the
ONNX backends through an export (``onnx-ort``, ``onnx-ort-fp16``, ``onnx-openvino-f16``, ...:
the model exported once per guard run by ``torch.onnx.export``, then run by the named ONNX
backend).

The export: the dynamo exporter (``torch.onnx.export(..., dynamo=True)``, what PyTorch itself
uses by default since 2.9) first, the TorchScript exporter where it fails; the row says which
ran. It is made once per guard run (a folder the guard hands every child, use_export_dir) and
every onnx-* backend, probe run and fallback variant reads the same file.

Names map back to the PyTorch model: the dynamo exporter records each node's module stack in
its ``pkg.torch.onnx.name_scopes`` metadata (``['', 'h.0', 'h.0.attn', 'h.0.attn.c_attn',
'addmm']``: module ``h.0.attn.c_attn``); the TorchScript exporter names every node after the
module scope it was traced in (``/encoder/layer.0/attention/self/query/MatMul`` is module
``encoder.layer.0.attention.self.query``, driftscope.recorders.naming.split_scope). Nodes to keep in
float32 are given as module paths (or ONNX node names) and mapped to every node of the module;
a module that exports to no node (an eval-mode Dropout, an Identity, anything folded away) has
nothing to keep and is skipped.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import time
import warnings
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .base import Backend, Session, _missing
from .torch import TorchBackend, _TorchSession, torch_example, torch_leaves


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
        return self._compile(model, seed, ())

    # -- the probe's bisection over what inductor compiles (_delegate_bisect.py) ----------------
    def partial_units(self, model: str, work: str, seed: int, leaves: Sequence[str] = ()
                      ) -> List[Tuple[str, str, str]]:
        """The leaf modules, execution order (the reference's recording): the units compiled."""
        return [(m, "", m) for m in leaves]

    def load_partial(self, model: str, work: str, seed: int, delegated: Sequence[str],
                     units: Sequence[str] = ()) -> Session:
        """The model compiled with every leaf module of `units` not in `delegated` run eagerly
        (torch.compiler.disable on its forward: dynamo breaks the graph around it). The compiled
        rest, the parents' own forward included, is one inductor graph per stretch between the
        eager modules, so fusion across the boundaries of the compiled modules stays."""
        keep = set(delegated)
        return self._compile(model, seed, [u for u in units if u not in keep])

    partial_what = ("leaf modules torch.compile compiles", "compiled by inductor",
                    "run eagerly (torch.compiler.disable)")

    def _compile(self, model: str, seed: int, eager: Sequence[str]) -> Session:
        import torch

        net, example = torch_example(model, seed)
        net.eval()
        for name in eager:
            mod = net.get_submodule(name)
            mod.forward = torch.compiler.disable(mod.forward)
        # One process compiles: a pool of compile workers costs more to start than a small
        # model's kernels take to build.
        os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
        from torch._dynamo.utils import counters

        torch._dynamo.reset()
        counters.clear()
        compiled = torch.compile(net, backend="inductor")
        session = _TorchSession(compiled, example, None, {})
        start = time.perf_counter()
        leaves = torch_leaves(example)
        session.run({k: v.detach().cpu().numpy() for k, v in leaves.items()})
        took = time.perf_counter() - start
        graphs = int(counters["stats"].get("unique_graphs", 0))
        # A graph break splits the model (each piece compiled, eager Python between them);
        # "unimplemented" is what dynamo refused to trace at all (a ScriptModule runs in the
        # TorchScript runtime): with no graph, nothing ran through inductor.
        breaks: Dict[str, int] = {}
        for kind in ("graph_break", "unimplemented"):
            for reason, n in counters[kind].items():
                line = next((x.strip() for x in str(reason).splitlines() if x.strip()), "?")
                breaks[line] = breaks.get(line, 0) + int(n)
        listed = "; ".join(f"{r}" + (f" (x{n})" if n > 1 else "") for r, n in
                           list(breaks.items())[:5]) + ("; ..." if len(breaks) > 5 else "")
        count = sum(breaks.values())
        if graphs == 0 and not eager:
            raise NothingCompiled(
                "torch.compile compiled nothing: dynamo captured 0 graphs"
                + (f" ({count} graph break(s): {listed})" if breaks else "")
                + "; the model ran uncompiled, so inductor was not exercised")
        session.notes = [f"inductor compiled the model in {took:.1f} s (first call, included in "
                         f"the load time): dynamo captured {graphs} graph(s), {count} graph "
                         "break(s)" + (f" ({listed}; eager Python between the graphs)"
                                       if breaks else "")]
        return session


class NothingCompiled(RuntimeError):
    """The backend ran but did not exercise what it is named for: the row is UNAVAILABLE with
    this message as the reason (_child.run_job), never PASS."""

    unavailable = True


# -- the ONNX backends through an export --------------------------------------------------------

def module_of(node_name: str) -> str:
    """The PyTorch module path of a node of the TorchScript exporter (``""`` for a node outside
    any module)."""
    from ...recorders.api import split_scope

    scope, _ = split_scope(node_name)
    return ".".join(scope)


def node_modules(graph: Any) -> Dict[str, str]:
    """Node name -> module path of an exported graph: the innermost module of the node's
    ``pkg.torch.onnx.name_scopes`` metadata (dynamo exporter: every scope but the last, the
    operation, is a full module path), else the TorchScript exporter's scope in the name."""
    out: Dict[str, str] = {}
    for n in graph.node:
        meta = {p.key: p.value for p in n.metadata_props}
        scopes = meta.get("pkg.torch.onnx.name_scopes")
        module = None
        if scopes:
            try:
                parsed = ast.literal_eval(scopes)
            except (ValueError, SyntaxError):
                parsed = None
            if isinstance(parsed, list) and parsed:
                # A module called again is "path@1" in the module stack.
                module = re.sub(r"@\d+$", "", str(parsed[-2])) if len(parsed) >= 2 else ""
        out[n.name] = module_of(n.name) if module is None else module
    return out


# The folder of this guard run's export (None: each load exports into its own work folder).
_EXPORT_DIR: Optional[str] = None


def use_export_dir(path: Optional[str]) -> None:
    """In a child: the guard run's folder for the one export every onnx-* backend reads."""
    global _EXPORT_DIR
    _EXPORT_DIR = path


def _reason(err: BaseException) -> str:
    """The innermost cause's first line (torch.export wraps the real reason in a "step 1/3"
    message), without terminal colours, at most 300 characters."""
    while err.__cause__ is not None and err.__cause__ is not err:
        err = err.__cause__
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(err))
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")
    line = f"{type(err).__name__}: {line}" if line else type(err).__name__
    return line if len(line) <= 300 else line[:297] + "..."


# Above this many bytes of parameters the export keeps them in a data file beside the graph
# (protobuf cannot hold 2 GiB); below, one file, which every ONNX backend reads whole.
_EXTERNAL_BYTES = 1 << 30


def _export(spec: str, seed: int, folder: str) -> Dict[str, Any]:
    """Exports the model of entry point `spec` into `folder`/exported.onnx: the dynamo exporter,
    else the TorchScript one. Returns what export() caches (exporter, seconds, output names, the
    model's module paths, the dynamo exporter's failure); raises when both fail."""
    import torch

    from ...recorders.api import torch_call as _call, torch_flat as _flat

    net, example = torch_example(spec, seed)
    net.eval()
    leaves = torch_leaves(example)
    with torch.no_grad():
        out = _call(net, example)
    names = [p.lstrip(".") or "output" for p, _ in _flat(out)[0]]
    modules = [n for n, _ in net.named_modules() if n]
    path = os.path.join(folder, "exported.onnx")
    kwargs: Dict[str, Any] = {}
    if isinstance(example, torch.Tensor):
        args: Any = (example,)
    elif isinstance(example, Mapping):
        args, kwargs = (), {k: v for k, v in example.items()}
    else:
        args = tuple(example)
    size = sum(p.numel() * p.element_size() for p in net.parameters())
    meta: Dict[str, Any] = {"outputs": names, "modules": modules, "dynamo_error": None}
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(net, args, path, kwargs=kwargs or None,
                              input_names=list(leaves), output_names=names, dynamo=True,
                              external_data=size > _EXTERNAL_BYTES, verbose=False)
        meta["exporter"] = "dynamo"
    except Exception as err:  # noqa: BLE001 - the TorchScript exporter is the fallback
        meta["dynamo_error"] = _reason(err)
        for f in os.listdir(folder):
            os.remove(os.path.join(folder, f))
        # The TorchScript exporter takes keyword arguments as a trailing dict.
        legacy = ((), kwargs) if kwargs else args
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(net, legacy, path, input_names=list(leaves),
                                  output_names=names, opset_version=17, dynamo=False)
        except Exception as err2:  # noqa: BLE001 - both failed: the row's error
            raise RuntimeError(f"torch.onnx.export failed with both exporters: dynamo: "
                               f"{meta['dynamo_error']}; TorchScript: {_reason(err2)}") from None
        meta["exporter"] = "torchscript"
    meta["seconds"] = time.perf_counter() - start
    return meta


def export(spec: str, seed: int, work: str) -> Tuple[str, Dict[str, Any], bool]:
    """The exported model of `spec`: (path, what _export returned, reused). Made once per guard
    run in its export folder (use_export_dir) and read from there by every later backend; a
    failure is kept too, so that eight onnx-* rows do not fail the same export eight times."""
    if _EXPORT_DIR is None:
        folder, reused = os.path.join(work, "export"), False
    else:
        key = hashlib.sha256(f"{seed}\0{spec}".encode("utf-8", "surrogatepass")).hexdigest()
        folder = os.path.join(_EXPORT_DIR, key[:24])
        reused = os.path.isfile(os.path.join(folder, "export.json"))
    meta = build_once(folder, reused, "export.json", lambda tmp: _export(spec, seed, tmp),
                      str, "the export of this guard run, tried once")
    return os.path.join(folder, "exported.onnx"), meta, reused


def build_once(folder: str, reused: bool, meta_file: str,
               build: Callable[[str], Dict[str, Any]], reason: Callable[[Exception], str],
               again: str) -> Dict[str, Any]:
    """What `build(tmp)` returned, built once per guard run into `folder` (its files and
    `meta_file`) unless `reused`; a failure is kept as {"error": reason(err)} and raised for
    every row, the later ones saying `again`."""
    if not reused:
        # Built beside the final folder and renamed into place: a half-written one is never read.
        tmp = f"{folder}.{os.getpid()}.part"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        try:
            meta = build(tmp)
        except Exception as err:  # noqa: BLE001 - cached as the run's build failure
            meta = {"error": reason(err)}
            for f in os.listdir(tmp):
                os.remove(os.path.join(tmp, f))
        with open(os.path.join(tmp, meta_file), "w", encoding="utf-8") as f:
            json.dump(meta, f)
        if os.path.isdir(folder):
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    with open(os.path.join(folder, meta_file), encoding="utf-8") as f:
        meta = json.load(f)
    if meta.get("error"):
        raise RuntimeError(meta["error"] + (f" ({again})" if reused else ""))
    return meta


def _export_note(meta: Dict[str, Any], reused: bool, nodes: int, scoped: int) -> str:
    how = ("the dynamo exporter (torch.onnx.export(dynamo=True))" if meta["exporter"] == "dynamo"
           else "the TorchScript exporter (torch.onnx.export(dynamo=False)) after the dynamo "
                f"exporter failed: {meta.get('dynamo_error')}")
    named = ("by the nodes' name_scopes metadata" if meta["exporter"] == "dynamo"
             else "node /a/b/Op is module a.b")
    when = (f"once for this guard run in {meta['seconds']:.1f} s, reused here" if reused
            else f"in {meta['seconds']:.1f} s, once for this guard run")
    return (f"exported by {how} {when}: {nodes} ONNX node(s), {scoped} named by module path "
            f"({named})")


class _ExportedSession(Session):
    def __init__(self, inner: Session, nodes: List[str], inputs: List[str],
                 notes: List[str], modules: Optional[Dict[str, str]] = None,
                 empty: Sequence[str] = ()) -> None:
        self.inner, self.nodes, self.inputs = inner, nodes, inputs
        self.modules = modules if modules is not None else {n: module_of(n) for n in nodes}
        self.empty = set(empty)  # modules of the model that export to no node
        self.notes = notes + list(getattr(inner, "notes", []))

    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        # The exporter drops inputs the graph does not use.
        return self.inner.run({k: v for k, v in feeds.items() if k in self.inputs})

    def float32_evidence(self, nodes: Sequence[str]) -> Dict[str, str]:
        ask = {n: _nodes_of(n, self.nodes, self.modules) for n in nodes}
        got = self.inner.float32_evidence(sorted({x for v in ask.values() for x in v})) \
            if hasattr(self.inner, "float32_evidence") else {}
        proof: Dict[str, str] = {}
        for n, onnx_nodes in ask.items():
            if onnx_nodes and all(x in got for x in onnx_nodes):
                proof[n] = (f"all {len(onnx_nodes)} exported node(s): "
                            + got[onnx_nodes[0]])
            elif not onnx_nodes and n in self.empty:
                proof[n] = "exports to no ONNX node: none of its arithmetic is in the graph"
        return proof


def _nodes_of(name: str, nodes: Sequence[str],
              modules: Optional[Mapping[str, str]] = None) -> List[str]:
    """The exported nodes a name means: the node of that name, else every node of the module."""
    if name in nodes:
        return [name]
    mod = modules if modules is not None else {n: module_of(n) for n in nodes}
    return [n for n in nodes if mod.get(n, "") == name or mod.get(n, "").startswith(name + ".")]


def _empty_modules(names: Sequence[str], meta: Dict[str, Any], nodes: Sequence[str],
                   modules: Mapping[str, str]) -> List[str]:
    """Those of `names` that are modules of the model with no exported node."""
    known = set(meta.get("modules") or ())
    return [n for n in names if n in known and not _nodes_of(n, nodes, modules)]


class ExportedBackend(Backend):
    family = "torch"
    default = False

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name = f"onnx-{inner.name}"
        self.summary = f"torch.onnx.export, then {inner.summary}"
        self.note = inner.note
        # The child builds the model in torch, then loads the export in the inner runtime.
        self.preload = ("torch",) + tuple(inner.preload)

    def unavailable(self) -> Optional[str]:
        return _missing("torch", "torch") or _missing("onnx", "onnx") or self.inner.unavailable()

    def can_keep_float32(self) -> bool:
        return bool(getattr(self.inner, "can_keep_float32", lambda: False)())

    def _graph(self, model: str, work: str, seed: int) -> Tuple[str, Dict[str, Any], bool, Any]:
        import onnx

        path, meta, reused = export(model, seed, work)
        return path, meta, reused, onnx.load(path, load_external_data=False).graph

    def modules_without_nodes(self, model: str, work: str, seed: int,
                              names: Sequence[str]) -> List[str]:
        """Those of the modules `names` that export to no node: nothing of theirs to keep in
        float32 (the probe's precision-boundary bisection skips them)."""
        _, meta, _, graph = self._graph(model, work, seed)
        nodes = [n.name for n in graph.node]
        return _empty_modules(names, meta, nodes, node_modules(graph))

    def load(self, model: str, work: str, seed: int, keep_float32: Sequence[str] = ()
             ) -> Session:
        path, meta, reused, graph = self._graph(model, work, seed)
        nodes = [n.name for n in graph.node]
        modules = node_modules(graph)
        inputs = [i.name for i in graph.input]
        keep = sorted({x for n in keep_float32 for x in _nodes_of(n, nodes, modules)})
        empty = _empty_modules(keep_float32, meta, nodes, modules)
        missing = [n for n in keep_float32 if not _nodes_of(n, nodes, modules)
                   and n not in empty]
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
        scoped = sum(1 for n in nodes if modules.get(n))
        notes = [_export_note(meta, reused, len(nodes), scoped)]
        if empty:
            notes.append(f"{len(empty)} module(s) to keep in float32 export to no node, "
                         f"nothing to keep: {', '.join(empty[:5])}"
                         + (" ..." if len(empty) > 5 else ""))
        return _ExportedSession(inner, nodes, inputs, notes, modules, empty)


def exported_backends(onnx_backends: Sequence[Backend]) -> List[Backend]:
    return [ExportedBackend(b) for b in onnx_backends]
