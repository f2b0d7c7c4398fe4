"""The ONNX Runtime and OpenVINO backends of driftscope.llm.record (issue 31; docs/howto/llm.md).

No optimum: its exporter pins transformers 4.x. The causal LM is exported here with
``torch.onnx.export`` (the TorchScript exporter) through a wrapper whose inputs are explicit
tensors (``input_ids``, ``position_ids``, ``past.L.key`` / ``past.L.value``) and whose outputs
are ``logits`` and ``present.L.key`` / ``present.L.value``; the transformers cache object is
built inside the wrapper from the past tensors, so the graph holds the model's own cache update
(a Concat per layer and part). The prefill feeds a past of length 0, so one graph serves every
step. The wrapper's own scope (``/lm``) is removed from the node names, so node paths are the
model's module paths (``/model/layers.1/self_attn/q_proj/MatMul``) and the ONNX Runtime
recorder's naming (recorders/naming.py) gives its node outputs the names transformers' forward
hooks give them (``model.layers.1.self_attn.q_proj``): an ``hf`` dump and an ``ort`` dump pair
up layer by layer with no map.

Both runtimes record every node output of every step: the recorder's extra graph outputs live
in a second session (ONNX Runtime) or a second compiled model (OpenVINO, whose ONNX frontend
keeps the ONNX value names), while the plain one drives the generation and its logits and
cache are what is recorded, so extra outputs blocking fusions cannot change the tokens
(``observer_effect`` says whether the two runs' logits agree). OpenVINO reads the same ONNX file
and runs it with ``INFERENCE_PRECISION_HINT=f32`` (its CPU plugin would otherwise run bfloat16
where the CPU has it).
"""

from __future__ import annotations

import copy
import os
import tempfile
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import InvalidArgumentError, UnsupportedError

__all__ = ["export_onnx", "generate"]

_WRAPPER = "lm"  # the wrapper's attribute holding the model: the scope removed from node names


def _cache_arg(model: Any) -> str:
    import inspect

    # transformers 5 renamed past_key_values to cache (the old name still works, with a warning)
    return ("cache" if "cache" in inspect.signature(model.forward).parameters
            else "past_key_values")


def cache_layers(cache: Any) -> List[Tuple[Any, Any]]:
    """(keys, values) per layer of a transformers cache object or the legacy tuple (llm.py's
    recorder reads the cache through this one too)."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        return [(getattr(l, "keys", None), getattr(l, "values", None)) for l in layers]
    if isinstance(cache, (tuple, list)):  # the legacy tuple of (key, value) per layer
        return [(kv[0], kv[1]) for kv in cache]
    return []


def _cache_shapes(model: Any) -> List[Tuple[Tuple[int, ...], Tuple[int, ...]]]:
    """(key shape, value shape) of one position, per layer: read from a one-token run, so every
    family's cache layout (GQA heads, head size) is the model's own."""
    import torch

    with torch.no_grad():
        out = model(input_ids=torch.zeros((1, 1), dtype=torch.long), use_cache=True)
    layers = cache_layers(getattr(out, _cache_arg(model)))
    if not layers or any(k is None or v is None for k, v in layers):
        raise UnsupportedError(f"{type(model).__name__}: its cache is not a key/value pair per "
                               f"layer; the ONNX export covers decoders whose cache is", 5,
                               "unsupported")
    return [(tuple(k.shape), tuple(v.shape)) for k, v in layers]


def export_onnx(model: Any, path: "str | os.PathLike[str]", *, opset: int = 17) -> Dict[str, Any]:
    """Exports a transformers causal LM (float32) to `path` as one step of a generation with the
    KV cache: inputs ``input_ids [1, seq]``, ``position_ids [1, seq]``, ``past.L.key``,
    ``past.L.value`` ``[1, heads, past, head_dim]``; outputs ``logits [1, seq, vocab]``,
    ``present.L.key``, ``present.L.value`` (past and this step's positions). The model is not
    modified. Returns {"layers", "opset"}."""
    import torch

    model = model if next(model.parameters()).dtype == torch.float32 else (
        copy.deepcopy(model).to(torch.float32))
    model.eval()
    shapes = _cache_shapes(model)
    n_layers = len(shapes)
    cache_arg = _cache_arg(model)
    config = model.config

    class Step(torch.nn.Module):
        def __init__(self, lm: Any) -> None:
            super().__init__()
            setattr(self, _WRAPPER, lm)

        def forward(self, input_ids: Any, position_ids: Any, *past: Any) -> Any:
            from transformers import DynamicCache

            lm = getattr(self, _WRAPPER)
            cache = DynamicCache(ddp_cache_data=[(past[2 * i], past[2 * i + 1])
                                                 for i in range(n_layers)], config=config)
            out = lm(input_ids=input_ids, position_ids=position_ids, use_cache=True,
                     **{cache_arg: cache})

            res = [out.logits]
            for k, v in cache_layers(getattr(out, cache_arg)):
                res += [k, v]
            return tuple(res)

    # traced with 2 new positions after 3 past ones: both axes are then dynamic, and no branch
    # of the attention code is taken for the single-token case only
    past = []
    for kshape, vshape in shapes:
        past += [torch.zeros(kshape[:2] + (3,) + kshape[3:]),
                 torch.zeros(vshape[:2] + (3,) + vshape[3:])]
    ids = torch.tensor([[1, 2]])
    pos = torch.tensor([[3, 4]])
    names_in = ["input_ids", "position_ids"] + [f"past.{i}.{p}" for i in range(n_layers)
                                                for p in ("key", "value")]
    names_out = ["logits"] + [f"present.{i}.{p}" for i in range(n_layers)
                              for p in ("key", "value")]
    dynamic: Dict[str, Dict[int, str]] = {"input_ids": {1: "seq"}, "position_ids": {1: "seq"},
                                          "logits": {1: "seq"}}
    dynamic.update({n: {2: "past"} for n in names_in[2:]})
    dynamic.update({n: {2: "total"} for n in names_out[1:]})
    out_path = os.fspath(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarnings about the cache's Python branches
        try:
            with torch.no_grad():
                torch.onnx.export(Step(model), (ids, pos, *past), out_path,
                                  input_names=names_in, output_names=names_out,
                                  dynamic_axes=dynamic, dynamo=False, opset_version=opset)
        except Exception as err:  # the exporter raises anything from tracing to ONNX checks
            raise UnsupportedError(f"{type(model).__name__}: torch.onnx.export of one "
                                   f"generation step failed: {_first_line(err)}", 5,
                                   "unsupported") from err
    import onnx

    proto = onnx.load(out_path)
    prefix = f"/{_WRAPPER}/"
    for node in proto.graph.node:
        if node.name.startswith(prefix):
            node.name = node.name[len(prefix) - 1:]
    onnx.save(proto, out_path)
    return {"layers": n_layers, "opset": opset}


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _graph_io(proto: Any, path: str) -> Tuple[int, List[Tuple[int, ...]]]:
    """The number of layers and each past input's static dims (-1 for the past axis), checked
    against the interface export_onnx writes."""
    inputs = {i.name: i for i in proto.graph.input}
    outputs = {o.name for o in proto.graph.output}
    n = 0
    while f"past.{n}.key" in inputs:
        n += 1
    need = ["input_ids", "position_ids"] + [f"past.{i}.{p}" for i in range(n)
                                            for p in ("key", "value")]
    missing = [x for x in need if x not in inputs] + [
        x for x in ["logits"] + [f"present.{i}.{p}" for i in range(n) for p in ("key", "value")]
        if x not in outputs]
    if n == 0 or missing:
        raise InvalidArgumentError(
            f"{path}: not a generation step exported by driftscope.llm.export_onnx (needs inputs "
            f"input_ids, position_ids, past.L.key/value and outputs logits, present.L.key/value; "
            f"missing {', '.join(missing) or 'past.0.key'})", 1, "invalid_argument")
    dims = []
    for name in need[2:]:
        shape = inputs[name].type.tensor_type.shape.dim
        dims.append(tuple(d.dim_value if d.HasField("dim_value") else -1 for d in shape))
    return n, dims


class _OrtRunner:
    def __init__(self, proto: Any, path: str, intermediates: bool) -> None:
        import onnxruntime as ort

        from .onnxruntime import _make_session, _plan, _with_outputs

        self.version = f"onnxruntime {ort.__version__}"
        data = proto.SerializeToString()
        self.plain = _make_session(data, ["CPUExecutionProvider"], None, None, path)
        self.outputs = [o.name for o in self.plain.get_outputs()]
        self.capture = None
        self.plan: List[Any] = []
        if intermediates:
            # the ONNX Runtime recorder's names and extra outputs (module scopes -> paths)
            self.plan = [e for e in _plan(proto) if e.names]
            cap = _with_outputs(proto, [e.tensor for e in self.plan], {})
            self.capture = _make_session(cap.SerializeToString(), ["CPUExecutionProvider"], None,
                                         None, path + " with intermediate outputs")
            self.fetch = [e.tensor for e in self.plan]
        self.effect = 0.0

    def run(self, feeds: Dict[str, np.ndarray]) -> Tuple[Dict[str, np.ndarray], List[Any]]:
        from .onnxruntime import _run

        out = dict(zip(self.outputs, _run(self.plain, feeds, "the generation step")))
        rows: List[Any] = []
        if self.capture is not None:
            got = dict(zip(self.fetch, _run(self.capture, feeds, "the generation step with "
                                            "intermediate outputs", self.fetch)))
            if "logits" in got:
                self.effect = max(self.effect, float(np.max(np.abs(
                    got["logits"].astype(np.float64) - out["logits"]))))
            rows = _rows(self.plan, got)
        return out, rows


class _OvRunner:
    def __init__(self, proto: Any, path: str, intermediates: bool) -> None:
        import openvino as ov

        from .onnxruntime import _plan

        self.version = f"openvino {ov.__version__}"
        core = ov.Core()
        config = {"INFERENCE_PRECISION_HINT": "f32"}
        try:
            self.compiled = core.compile_model(path, "CPU", config)
            self.capture = None
            self.plan: List[Any] = []
            if intermediates:
                # OpenVINO's ONNX frontend keeps the ONNX value names on its tensors: the same
                # values as the ONNX Runtime recorder's plan, under the same names, exposed as
                # extra outputs of a second compiled model (fusions in the plain one stay)
                model = core.read_model(path)
                ports = {n: o for op in model.get_ops() for o in op.outputs()
                         for n in o.get_names()}
                self.plan = [e for e in _plan(proto) if e.names and e.tensor in ports]
                model.add_outputs([ports[e.tensor] for e in self.plan])
                self.capture = core.compile_model(model, "CPU", config)
        except Exception as err:
            raise InvalidArgumentError(f"{path}: OpenVINO cannot compile it: "
                                       f"{_first_line(err)}", 1, "invalid_argument") from err
        self.effect = 0.0

    @staticmethod
    def _by_name(compiled: Any, res: Any) -> Dict[str, np.ndarray]:
        out = {}
        for port in compiled.outputs:
            value = np.asarray(res[port])
            for name in port.get_names():
                out[name] = value
        return out

    @staticmethod
    def _infer(compiled: Any, feeds: Dict[str, np.ndarray]) -> Any:
        from .onnxruntime import ModelRunError

        try:
            return compiled(feeds)
        except Exception as err:
            raise ModelRunError(f"OpenVINO failed to run the generation step: "
                                f"{_first_line(err)}") from err

    def run(self, feeds: Dict[str, np.ndarray]) -> Tuple[Dict[str, np.ndarray], List[Any]]:
        out = self._by_name(self.compiled, self._infer(self.compiled, feeds))
        rows: List[Any] = []
        if self.capture is not None:
            got = self._by_name(self.capture, self._infer(self.capture, feeds))
            if "logits" in got:
                self.effect = max(self.effect, float(np.max(np.abs(
                    got["logits"].astype(np.float64) - out["logits"]))))
            rows = _rows(self.plan, got)
        return out, rows


def _rows(plan: Sequence[Any], got: Dict[str, np.ndarray]) -> List[Any]:
    rows = []
    for e in plan:
        v = got.get(e.tensor)
        if not isinstance(v, np.ndarray) or v.dtype.kind not in "fiub":
            continue
        for name in e.names:
            rows.append((name if e.role_index == 0 else f"{name}.{e.role_index}", e.op_type, v))
    return rows


def generate(backend: str, model: Any, prompt: Sequence[int], new_tokens: int,
             teacher_tokens: Optional[Sequence[int]], eos_id: Optional[int],
             onnx_path: Optional[str] = None) -> Tuple[List[List[Any]], List[int], List[int], str,
                                                       Dict[str, str]]:
    """The greedy loop of driftscope.llm.record on ONNX Runtime (`ort`) or OpenVINO
    (`openvino`): the model exported by export_onnx (or `onnx_path`, such an export, for
    instance a patched one). Returns (rows per step, tokens, fed, how it stopped, metadata)."""
    import onnx
    import torch

    with tempfile.TemporaryDirectory(prefix="driftscope-llm-") as tmp:
        if onnx_path is None:
            path = os.path.join(tmp, "step.onnx")
            info = export_onnx(model, path)
            export = f"torch.onnx.export (TorchScript exporter), opset {info['opset']}"
        else:
            path = os.fspath(onnx_path)
            if not os.path.isfile(path):
                raise InvalidArgumentError(f"--onnx {path}: no such file", 1, "invalid_argument")
            export = f"given: {os.path.basename(path)}"
        try:
            proto = onnx.load(path)
        except Exception as err:
            raise InvalidArgumentError(f"{path}: not a valid ONNX file ({_first_line(err)})", 1,
                                       "invalid_argument") from err
        n_layers, dims = _graph_io(proto, path)
        runner: Any = (_OrtRunner if backend == "ort" else _OvRunner)(proto, path, True)
        del proto
        past = {}
        for i, d in enumerate(dims):
            name = f"past.{i // 2}.{'key' if i % 2 == 0 else 'value'}"
            past[name] = np.zeros(tuple(0 if x < 0 else x for x in d[:2]) + (0,) +
                                  tuple(max(x, 0) for x in d[3:]), np.float32)
        steps: List[List[Any]] = []
        tokens: List[int] = []
        fed: List[int] = []
        stopped = f"new_tokens ({new_tokens})"
        length = 0
        for k in range(new_tokens):
            ids = list(prompt) if k == 0 else [fed[-1]]
            feeds = {"input_ids": np.array([ids], np.int64),
                     "position_ids": np.arange(length, length + len(ids), dtype=np.int64)[None]}
            feeds.update(past)
            out, rows = runner.run(feeds)
            rows = [(n, op, torch.from_numpy(np.ascontiguousarray(v))) for n, op, v in rows]
            for layer in range(n_layers):
                for part in ("key", "value"):
                    present = out[f"present.{layer}.{part}"]
                    # the positions this step appended (seq axis 2), as the hf backends write
                    rows.append((f"cache.layers.{layer}.{part}", "KVCache",
                                 torch.from_numpy(np.ascontiguousarray(present[:, :, length:]))))
                    past[f"past.{layer}.{part}"] = present
            logits = np.ascontiguousarray(out["logits"][0, -1])
            rows.append(("logits", "Logits", torch.from_numpy(logits)))
            steps.append(rows)
            length += len(ids)
            token = int(np.argmax(logits))
            tokens.append(token)
            if teacher_tokens is not None:
                fed.append(int(teacher_tokens[k]))
            else:
                fed.append(token)
                if eos_id is not None and token == eos_id and k + 1 < new_tokens:
                    stopped = f"eos (token {token}) at step {k}"
                    break
    meta = {"framework": runner.version, "llm.export": export,
            "llm.intermediates": "every node output, named by module scope (the ONNX Runtime "
                                 "recorder's naming)",
            "observer_effect": ("none" if runner.effect == 0.0 else
                                f"logits of the run with intermediate outputs differ by up to "
                                f"{runner.effect:.3g}")}
    if backend == "openvino":
        meta["openvino.inference_precision"] = "f32"
    return steps, tokens, fed, stopped, meta
