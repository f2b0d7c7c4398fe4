"""``iree``: IREE's llvm-cpu target. The ONNX model is imported to MLIR
(``python -m iree.compiler.tools.import_onnx``), compiled ahead of time for this CPU
(``iree.compiler.compile_file``, ``--iree-llvmcpu-target-cpu=host``) and run by ``iree.runtime``
with the local-task driver. Float32 throughout: IREE compiles the graph's own types.
"""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from ..._pyexec import module_command
from .base import Backend, Session, _missing


class _IreeSession(Session):
    def __init__(self, function: Any, inputs: List[str], outputs: List[str],
                 notes: List[str]) -> None:
        self.function, self.inputs, self.outputs, self.notes = function, inputs, outputs, notes

    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        missing = [n for n in self.inputs if n not in feeds]
        if missing:
            raise ValueError(f"no value for input(s) {', '.join(missing)}")
        result = self.function(*[np.asarray(feeds[n], order="C") for n in self.inputs])
        if not isinstance(result, (tuple, list)):
            result = (result,)
        values = [np.array(r.to_host() if hasattr(r, "to_host") else r) for r in result]
        return dict(zip(self.outputs, values))


class IreeBackend(Backend):
    name = "iree"
    family = "onnx"
    summary = ("IREE, llvm-cpu target for this CPU (iree-import-onnx, iree-compile, "
               "iree.runtime local-task), float32")
    default = False  # compiling ahead of time takes seconds to minutes: run when named

    def unavailable(self) -> Optional[str]:
        return (_missing("iree.compiler", "iree-base-compiler")
                or _missing("iree.runtime", "iree-base-runtime"))

    def load(self, model: str, work: str, seed: int, keep_float32: Sequence[str] = ()
             ) -> Session:
        import iree.compiler as ic
        import iree.runtime as rt

        from .._stateful import onnx_proto

        proto = onnx_proto(model)
        inits = {t.name for t in proto.graph.initializer}
        inputs = [i.name for i in proto.graph.input if i.name not in inits]
        outputs = [o.name for o in proto.graph.output]
        mlir = os.path.join(work, "model.mlir")
        start = time.perf_counter()
        model = _typed_outputs(proto, model, work)
        proc = subprocess.run(module_command("iree.compiler.tools.import_onnx",
                                             os.fspath(model), "-o", mlir),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"iree-import-onnx failed: {proc.stderr.strip() or 'no message'}")
        try:
            vmfb = ic.compile_file(mlir, target_backends=["llvm-cpu"],
                                   extra_args=["--iree-llvmcpu-target-cpu=host"])
        except Exception as err:  # noqa: BLE001 - the compiler's diagnostics, one line
            raise RuntimeError(f"iree-compile failed: {str(err).strip() or 'no message'}") from None
        took = time.perf_counter() - start
        ctx = rt.SystemContext(config=rt.Config("local-task"))
        module = rt.VmModule.copy_buffer(ctx.instance, vmfb)
        ctx.add_vm_module(module)
        names = [f for f in module.function_names
                 if not f.startswith("__") and not f.endswith("$async")]
        if len(names) != 1:
            raise RuntimeError(f"the compiled module exports {', '.join(names) or 'nothing'}; "
                               "expected one entry function")
        function = ctx.modules.module[names[0]]
        version = getattr(ic, "__version__", None) or _version("iree-base-compiler")
        return _IreeSession(function, inputs, outputs, [
            f"IREE {version}: imported and compiled for llvm-cpu (host CPU) in {took:.1f} s"])


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


def _typed_outputs(proto: Any, model: str, work: str) -> str:
    """iree-import-onnx runs the ONNX checker, which refuses a graph output without a type: the
    probe's prefix models (_probe.prefix_model) cut at values the source model never typed. Such
    outputs get the types ONNX shape inference gives them, in a copy in `work`."""
    import onnx

    if all(o.type.HasField("tensor_type") for o in proto.graph.output):
        return model
    inferred = onnx.shape_inference.infer_shapes(proto)
    typed = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)
             if v.type.HasField("tensor_type")}
    for o in proto.graph.output:
        if not o.type.HasField("tensor_type") and o.name in typed:
            o.CopyFrom(typed[o.name])
    path = os.path.join(work, "typed.onnx")
    onnx.save(proto, path)
    return path
