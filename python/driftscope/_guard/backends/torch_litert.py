"""The LiteRT backends of a PyTorch model through a litert-torch conversion: ``tflite-litert``,
``tflite-litert-ref`` and the quantized ``tflite-litert-int8`` / ``-w8`` / ``-w4`` / ``-a8w8`` /
``-a16w8`` / ``-fp16`` (named as the ONNX backends of a PyTorch model are, ``onnx-ort``: the
format the model is converted to, then the backend that runs it).

The conversion (``litert_torch.convert(model, sample_args).export(path)``, Google's PyTorch to
LiteRT converter) is made once per guard run in the folder every child shares (the export folder
of torch_extra.use_export_dir) and every tflite-* row, probe run and variant reads the same
file; the quantized rows quantize it with ai-edge-quantizer in their child, as litert_quant does
for a .tflite model. All are opt-in: a conversion takes seconds (8.7 s for the demo's 4-block
encoder on this machine's CPU, plus about 10 s to import litert-torch and JAX).

Names map back to the PyTorch model: litert-torch names an op's output tensor after the module
stack of the FX node it lowers (``pkg.Model/pkg.Block_0/torch.nn.modules.linear.Linear_fc;``:
each frame ``CLASS_LASTNAME``, the module path's last component), several frames joined by
``;`` where the converter fused ops. That text does not name the module path by itself (a
ModuleList's index is kept, its parents are not), so the conversion resolves each frame against
the model's own modules and then checks the claim by value: a tensor is named module M only
where the converted model, run once on the reference kernels with the entry point's inputs,
gives M's output as PyTorch computes it (the op that writes M's output may carry a fused
activation's frame, or a reshape's). Modules with no such tensor (a Linear whose ReLU was fused
into it) are simply not recorded; the guard's probe compares the recordings by module path.
A tensor named by no module stack (a model output) is the output of the module it equals.

Keeping a module in float32 (the precision-boundary bisection, the verified fallback) keeps
the ops whose name's first module stack is that module or one under it, through the quantized
row's ai-edge-quantizer ``no_quantize`` entry; the proof is the quantized row's, from the built
.tflite, for every one of those ops.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import time
import warnings
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .base import Backend, Session
from .torch import torch_example, torch_leaves

# Why litert-torch is not a dependency of driftscope's own test environment: pip installs JAX
# with it and downgrades typing_extensions below what the project's other packages ask for.
NOT_INSTALLED = ("the litert_torch package is not installed (it converts the PyTorch model to "
                 ".tflite for these rows); pip install litert-torch")


def _found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a None in sys.modules: blocked
        return False


def _key(spec: str, seed: int) -> str:
    return hashlib.sha256(f"litert\0{seed}\0{spec}".encode("utf-8", "surrogatepass")
                          ).hexdigest()[:24]


def _frames(name: str) -> List[List[str]]:
    """The module stacks a converted tensor's name carries: one list of frames per location
    (``a/b;N`` or several fused, ``a/b;;c/d;``), the root frame first."""
    out = []
    for loc in name.split(";"):
        loc = loc.strip()
        if "/" in loc or "." in loc:
            out.append([f for f in loc.split("/") if f])
    return out


def _class_fullname(cls: type) -> str:
    return cls.__qualname__ if cls.__module__ == "builtins" else \
        f"{cls.__module__}.{cls.__qualname__}"


def _resolver(net: Any) -> Any:
    """frames -> the module path they stand for, or None where the frames name no module of
    `net` or more than one: each frame below the root is the class of a module under the last
    one found and that module's own last path component."""
    mods = [(p, _class_fullname(type(m)) + "_" + p.rsplit(".", 1)[-1])
            for p, m in net.named_modules() if p]

    def resolve(frames: Sequence[str]) -> Optional[str]:
        path = ""
        for frame in frames[1:]:
            under = [p for p, tag in mods if tag == frame and
                     (not path or p.startswith(path + "."))]
            if not under:
                return None
            shortest = min(len(p) for p in under)
            under = [p for p in under if len(p) == shortest]
            if len(under) != 1:
                return None
            path = under[0]
        return path or None
    return resolve


def _agrees(got: np.ndarray, want: np.ndarray) -> bool:
    if got.shape != want.shape:
        return False
    got, want = got.astype(np.float64), want.astype(np.float64)
    if not (np.all(np.isfinite(got)) and np.all(np.isfinite(want))):
        return False
    return float(np.max(np.abs(got - want), initial=0.0)) <= \
        1e-4 * (1.0 + float(np.max(np.abs(want), initial=0.0)))


def _convert(spec: str, seed: int, folder: str) -> Dict[str, Any]:
    """Converts the model of entry point `spec` into `folder`/converted.tflite; returns what the
    rows read (seconds, input and output tensors in the torch inputs' and outputs' order, tensor
    name -> module path, verified by value)."""
    os.environ.setdefault("LITERT_TORCH_SHOW_PROGRESS", "n")
    import litert_torch
    import torch
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    from ...recorders.api import torch_call as _call, torch_flat as _flat

    net, example = torch_example(spec, seed)
    net.eval()
    leaves = torch_leaves(example)
    seen: Dict[str, np.ndarray] = {}
    hooks = []
    for path, mod in net.named_modules():
        if not path:
            continue

        def hook(m: Any, a: Any, out: Any, path: str = path) -> None:
            t = out if isinstance(out, torch.Tensor) else next(
                (x for _, x in _flat(out)[0] if isinstance(x, torch.Tensor)), None)
            if t is not None and t.is_floating_point() and path not in seen:
                seen[path] = t.detach().float().cpu().numpy().copy()
        hooks.append(mod.register_forward_hook(hook))
    with torch.no_grad():
        out = _call(net, example)
    for h in hooks:
        h.remove()
    flat = _flat(out)[0]
    names = [p.lstrip(".") or "output" for p, _ in flat]
    if isinstance(example, torch.Tensor):
        args, kwargs = (example,), {}
    elif isinstance(example, Mapping):
        args, kwargs = (), dict(example)
    else:
        args, kwargs = tuple(example), {}
    path = os.path.join(folder, "converted.tflite")
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        litert_torch.convert(net, args, kwargs or None).export(path)
    seconds = time.perf_counter() - start
    it = Interpreter(model_path=path, experimental_preserve_all_tensors=True,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF, num_threads=1)
    it.allocate_tensors()
    ins = sorted(it.get_input_details(), key=lambda d: d["index"])
    sig = it.get_signature_list().get("serving_default", {})
    if sig:
        # Positional arguments are args_0, args_1, ... in order; keyword arguments keep their
        # names, and the signature lists them sorted.
        by_name = {d["name"]: d for d in ins}
        names_in = sig.get("inputs", [])
        order = list(leaves) if set(names_in) == set(leaves) else \
            sorted(names_in, key=lambda n: int(n[5:]) if re.fullmatch(r"args_\d+", n) else -1)
        ordered = [by_name.get(f"serving_default_{n}") for n in order]
        if all(ordered) and len(ordered) == len(ins):
            ins = ordered
    if len(ins) != len(leaves):
        raise RuntimeError(f"the converted model has {len(ins)} input(s), the entry point "
                           f"{len(leaves)} tensor input(s)")
    for d, v in zip(ins, leaves.values()):
        it.set_tensor(d["index"], v.detach().cpu().numpy().astype(d["dtype"]))
    it.invoke()
    outs = it.get_output_details()
    # Output k of the traced program is tensor serving_default_output_k[_output] (the
    # signature lists them sorted as text: output_10 before output_2).
    numbered = [re.match(r"serving_default_output_(\d+)(?:_|$)", d["name"]) for d in outs]
    if len(outs) > 1 and all(numbered):
        outs = [d for _, d in sorted(zip((int(m.group(1)) for m in numbered), outs),
                                     key=lambda x: x[0])]
    if len(outs) != len(names):
        raise RuntimeError(f"the converted model has {len(outs)} output(s), the PyTorch model "
                           f"{len(names)}")
    worst = 0.0
    for d, (_, t) in zip(outs, flat):
        got, want = it.get_tensor(d["index"]), t.detach().float().cpu().numpy()
        if got.shape != want.shape:
            raise RuntimeError(f"output {d['name']} of the converted model has shape "
                               f"{list(got.shape)}, PyTorch's {list(want.shape)}")
        worst = max(worst, float(np.max(np.abs(got.astype(np.float64) - want), initial=0.0)))
    # The last op (execution order) under each module whose output is that module's output.
    resolve = _resolver(net)
    details = {t["index"]: t["name"] for t in it.get_tensor_details()}
    modules: Dict[str, List[str]] = {}
    found = set()
    ops = it._get_ops_details()
    for op in reversed(ops):
        for t in op["outputs"]:
            name = details.get(int(t), "")
            frames = _frames(name)
            # A tensor named by no module stack (a model output: serving_default_output_0)
            # may be any module's output: the check by value decides.
            paths = {p for p in (resolve(f) for f in frames) if p} if frames else set(seen)
            # A fused op's output can also be the output of the modules that enclose it (a
            # Block whose last op is its MLP's residual add).
            chain = sorted({p.rsplit(".", k)[0] for p in paths for k in range(p.count(".") + 1)}
                           - found, key=len, reverse=True)
            if not chain:
                continue
            try:
                value = it.get_tensor(int(t))
            except ValueError:
                continue
            for m in chain:
                if m in seen and _agrees(value, seen[m]):
                    modules.setdefault(name, []).append(m)
                    found.add(m)
                    if not frames:
                        break  # the deepest module it equals; scopes below names it
    # Every op's output named by the module its first frame stands for (unchecked: a scope, for
    # the rows' notes, which name ops by their output tensors).
    scopes = {}
    for op in ops:
        for t in op["outputs"]:
            name = details.get(int(t), "")
            frames = _frames(name)
            if frames:
                scopes[name] = resolve(frames[0]) or "<root>"
            elif modules.get(name):
                scopes[name] = modules[name][0]
    return {"seconds": seconds, "outputs": names, "inputs": [d["name"] for d in ins],
            "leaves": list(leaves),
            "input_dtypes": [np.dtype(d["dtype"]).name for d in ins], "scopes": scopes,
            "tflite_outputs": [d["name"] for d in outs], "ops": len(ops),
            "modules": modules, "max_abs_error": worst, "version": litert_torch.__version__,
            "unfound": [p for p in seen if p not in found],
            "known": [p for p, _ in net.named_modules() if p]}


def convert(spec: str, seed: int, work: str) -> Tuple[str, Dict[str, Any], bool]:
    """The converted model of `spec`: (path, what _convert returned, reused), made once per
    guard run in the export folder (torch_extra.use_export_dir) and read from there by every
    later row; a failure is kept too, so that eight rows do not fail the same conversion."""
    from . import torch_extra

    if torch_extra._EXPORT_DIR is None:
        folder, reused = os.path.join(work, "litert-torch"), False
    else:
        folder = os.path.join(torch_extra._EXPORT_DIR, _key(spec, seed))
        reused = os.path.isfile(os.path.join(folder, "convert.json"))

    def build(tmp: str) -> Dict[str, Any]:
        meta = _convert(spec, seed, tmp)
        meta["spec"] = spec
        return meta

    meta = torch_extra.build_once(
        folder, reused, "convert.json", build,
        lambda err: f"litert_torch.convert failed: {torch_extra._reason(err)}",
        "the conversion of this guard run, tried once")
    return os.path.join(folder, "converted.tflite"), meta, reused


def tflite_feeds(meta: Mapping[str, Any], feeds: Mapping[str, Any]) -> Dict[str, np.ndarray]:
    """The PyTorch model's feeds as the converted model's: by position (the entry point's
    tensors in order are its arguments), 64-bit integers as 32-bit (litert-torch's
    enable_x64=False)."""
    out = {}
    values = list(feeds.values())
    for k, (name, want) in enumerate(zip(meta["inputs"], meta["input_dtypes"])):
        leaf = meta["leaves"][k] if k < len(meta.get("leaves", ())) else None
        v = np.asarray(feeds[leaf] if leaf in feeds else values[k])
        out[name] = v.astype(want) if v.dtype.kind in "iub" and np.dtype(want).kind in "iub" \
            else v
    return out


def _job_for_tflite(src: str, dst: str, meta: Mapping[str, Any]) -> None:
    """The child's job file with its samples fed as the converted model's (a static quantized
    row calibrates on them through the .tflite's own inputs)."""
    import pickle

    with open(src, "rb") as f:
        job = pickle.load(f)
    for attr in ("calibration", "samples"):
        got = getattr(job, attr, None)
        if got:
            setattr(job, attr, [tflite_feeds(meta, s) if isinstance(s, Mapping) else s
                                for s in got])
    with open(dst, "wb") as f:
        pickle.dump(job, f)


def _made_for(spec: str) -> Optional[Dict[str, Any]]:
    """In the guard's process (the fallback's recipe): the conversion this guard run made of
    `spec`, read from its export folder; None when there is none."""
    import sys

    from . import torch_extra

    # The guard's process has _run loaded (it is what asks for the recipe) and keeps the run's
    # export folder there; importing it here would tie the backends to the guard in a circle.
    run = sys.modules.get(f"{__package__.rsplit('.', 1)[0]}._run")
    folder = torch_extra._EXPORT_DIR or getattr(getattr(run, "_local", None), "export_dir", None)
    if not folder or not os.path.isdir(folder):
        return None
    for name in sorted(os.listdir(folder)):
        try:
            with open(os.path.join(folder, name, "convert.json"), encoding="utf-8") as f:
                meta = json.load(f)
        except (OSError, ValueError):
            continue
        if meta.get("spec") == spec and not meta.get("error"):
            return meta
    return None


def ops_of(meta: Mapping[str, Any], module: str) -> List[str]:
    """The output tensors of the converted model's ops named after `module` or a module under
    it (the first module stack of each name, resolved at conversion)."""
    return [t for t, p in (meta.get("scopes") or {}).items()
            if p == module or p.startswith(module + ".")]


class _ConvertedSession(Session):
    """The inner LiteRT session, fed and read by the PyTorch model's input and output names,
    and recorded by module path."""

    def __init__(self, inner: Any, meta: Dict[str, Any], notes: List[str]) -> None:
        self.inner, self.meta = inner, meta
        self.notes = notes + list(getattr(inner, "notes", []))

    def float32_evidence(self, nodes: Sequence[str]) -> Dict[str, str]:
        """A module is proven float32 when every op of the converted model named after it is
        (the inner row's proof from the built .tflite)."""
        ask = {n: ops_of(self.meta, n) for n in nodes}
        got = self.inner.float32_evidence(sorted({x for v in ask.values() for x in v})) \
            if hasattr(self.inner, "float32_evidence") else {}
        scopes = self.meta.get("scopes") or {}
        proof: Dict[str, str] = {}
        for n, ops in ask.items():
            if ops and all(x in got for x in ops):
                proof[n] = (f"all {len(ops)} op(s) of the converted model named after it: "
                            + got[ops[0]].replace(ops[0], scopes.get(ops[0], ops[0])))
        return proof

    def _feeds(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        return tflite_feeds(self.meta, feeds)

    def _named(self, got: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        return {t: got[o] for t, o in zip(self.meta["outputs"], self.meta["tflite_outputs"])
                if o in got}

    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        return self._named(self.inner.run(self._feeds(feeds)))

    def record(self, feeds: Mapping[str, np.ndarray], path: str) -> Dict[str, np.ndarray]:
        """The inner backend's recording of the .tflite, rewritten under module paths (the
        tensors the conversion showed to be a module's output), in model order."""
        import driftscope

        raw = path + ".tflite.tdump"
        outputs = self.inner.record(self._feeds(feeds), raw)
        modules = self.meta["modules"]
        try:
            with driftscope.open(raw) as d, \
                    driftscope.Writer(path, meta={"converted_by": "litert-torch"}) as w:
                for rec in d:
                    # the recorder's own name is the first of the fused names
                    names = modules.get(rec.attrs.get("tflite_tensor", ""))
                    if not names or rec.role != "output" or rec.role_index != 0 or \
                            rec.occurrence != 0:
                        continue
                    value = np.ascontiguousarray(rec.numpy("float32"))
                    for m in names:
                        w.write(m, value, op_type=rec.op_type)
        finally:
            if os.path.exists(raw):
                os.remove(raw)
        return self._named(outputs)


class ConvertedBackend(Backend):
    family = "torch"
    default = False  # a conversion takes seconds and imports JAX: run when named

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name = f"tflite-{inner.name}"
        self.summary = f"litert_torch.convert, then {inner.summary}"
        self.note = getattr(inner, "note", "")
        self.precision = getattr(inner, "precision", None)
        self.computes = getattr(inner, "computes", False)
        # The child builds the model in torch (and the run's first converts it), then runs the
        # .tflite in the inner backend's runtime.
        self.preload = ("torch",) + tuple(inner.preload)

    def unavailable(self) -> Optional[str]:
        # find_spec, not an import: importing litert-torch takes seconds (JAX), and this runs
        # in the guard's own process for every listing.
        if not _found("litert_torch"):
            return NOT_INSTALLED
        if not _found("torch"):
            return "the torch package is not installed; pip install torch"
        return self.inner.unavailable()

    def can_keep_float32(self) -> bool:
        # The quantized rows keep ops float32 by ai-edge-quantizer's no_quantize; a module is
        # the ops named after it.
        return bool(getattr(self.inner, "can_keep_float32", lambda: False)())

    def modules_without_nodes(self, model: str, work: str, seed: int,
                              names: Sequence[str]) -> List[str]:
        """Those of the modules `names` no op of the converted model is named after (a ReLU
        fused into the FULLY_CONNECTED before it): nothing of theirs to keep in float32."""
        _, meta, _ = convert(model, seed, work)
        return [n for n in names if not ops_of(meta, n)]

    def recipe(self, model: str, nodes: Sequence[str]) -> str:
        meta = _made_for(model)
        if meta is None:
            return ""
        ops = sorted({x for n in nodes for x in ops_of(meta, n)})
        inner = self.inner.recipe("converted.tflite", ops) if ops else ""
        if not inner:
            return ""
        return ("import litert_torch\n\n"
                "# the model converted as guard did: litert_torch.convert(model, sample_args)\n"
                "litert_torch.convert(model, sample_args).export('converted.tflite')\n"
                f"# {', '.join(nodes[:6])}{' ...' if len(nodes) > 6 else ''}: the ops named "
                "after these modules\n" + inner)

    def load(self, model: str, work: str, seed: int, keep_float32: Sequence[str] = ()
             ) -> Session:
        path, meta, reused = convert(model, seed, work)
        keep = sorted({x for n in keep_float32 for x in ops_of(meta, n)})
        missing = [n for n in keep_float32 if not ops_of(meta, n)
                   and n not in (meta.get("unfound") or []) and n not in meta.get("known", ())]
        if missing:
            raise ValueError(f"no op of the converted model is named after "
                             f"{', '.join(missing[:5])}")
        inner_work = os.path.join(work, "inner")
        os.makedirs(inner_work, exist_ok=True)
        if os.path.isfile(os.path.join(work, "job.pkl")):  # the guard's samples (calibration)
            _job_for_tflite(os.path.join(work, "job.pkl"), os.path.join(inner_work, "job.pkl"),
                            meta)
        inner = self.inner.load(path, inner_work, seed, keep_float32=keep) if keep else \
            self.inner.load(path, inner_work, seed)
        # The inner row's notes name ops by their output tensors; litert-torch's names are the
        # module stacks, shown as the module path they stand for.
        scopes = meta.get("scopes") or {}
        if scopes and getattr(inner, "notes", None):
            pattern = re.compile("|".join(re.escape(n) for n in
                                          sorted(scopes, key=len, reverse=True)))
            inner.notes = [pattern.sub(lambda m: scopes[m.group(0)], n) for n in inner.notes]
        when = (f"once for this guard run in {meta['seconds']:.1f} s, reused here" if reused
                else f"in {meta['seconds']:.1f} s, once for this guard run")
        named = len({m for ms in meta["modules"].values() for m in ms})
        notes = [f"converted by litert-torch {meta.get('version', '')} "
                 f"(litert_torch.convert) {when}: {meta['ops']} op(s), outputs within "
                 f"{meta['max_abs_error']:.3g} of PyTorch's on the entry point's inputs "
                 f"(reference kernels); {named} module output(s) "
                 "found in the converted model by name and checked by value in that run, "
                 "recorded by module path"]
        unfound = meta.get("unfound") or []
        if unfound:
            notes.append(f"{len(unfound)} module output(s) are no tensor of the converted model "
                         "(fused or folded by the converter), not recorded: "
                         + ", ".join(unfound[:6]) + (" ..." if len(unfound) > 6 else ""))
        return _ConvertedSession(inner, meta, notes)


def converted_backends(tflite_backends: Sequence[Backend]) -> List[Backend]:
    return [ConvertedBackend(b) for b in tflite_backends
            if not re.search(r"-gpu$", b.name)]
