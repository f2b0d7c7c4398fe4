"""The repro bundle of a PyTorch model (issue 26 item 4; docs/howto/repro.md, "PyTorch"):
``python -m driftscope repro --model FILE.py:FN --reference torch --candidate torch-fp16
--at MODULE -o DIR``.

The module at MODULE is run alone on the inputs it received in one float32 run of the whole
model (captured by a forward pre-hook, its first call), in float32 and as the candidate backend
builds it (torch-fp16 / torch-bf16: the module and its float inputs cast to that dtype, as
_guard/backends/torch.py casts the model). While the candidate's output passes the guard's
verdict, the parent module is tried instead, up to the root.

The bundle holds the module exported alone with torch.export (model.pt2: its graph and its own
parameters, nothing else of the model), loaded by run.py with torch.export.load and run in
float32 and in the candidate's dtype.
"""

from __future__ import annotations

import copy
import difflib
import os
import shutil
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import repro as RP

DTYPES = {"torch-fp16": "float16", "torch-bf16": "bfloat16"}
TORCH_FILES = ("model.pt2", "inputs.npz", "expected.npz", "run.py", "README.md", "SHA256SUMS")


def _call(net: Any, example: Any) -> Any:
    if isinstance(example, dict):
        return net(**example)
    if isinstance(example, (tuple, list)):
        return net(*example)
    return net(example)


def _capture(net: Any, example: Any, paths: Sequence[str]) -> Dict[str, Tuple[tuple, Any]]:
    """{path: (positional inputs, output)} of each module's first call in one float32 run."""
    import torch

    got: Dict[str, Tuple[tuple, Any]] = {}
    handles = []
    for path in paths:
        mod = net.get_submodule(path)

        def pre(m: Any, args: Any, kwargs: Any, path: str = path) -> None:
            if path not in got:
                got[path] = (tuple(a.detach().clone() if torch.is_tensor(a) else a
                                   for a in args), dict(kwargs))

        def post(m: Any, args: Any, out: Any, path: str = path) -> None:
            if path in got and len(got[path]) == 2:
                got[path] = got[path] + (out,)

        handles.append(mod.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(mod.register_forward_hook(post))
    try:
        with torch.no_grad():
            _call(net, example)
    finally:
        for h in handles:
            h.remove()
    return {p: (v[0], v[2]) for p, v in got.items() if len(v) == 3 and not v[1]}


def _first_tensor(out: Any) -> Any:
    import torch

    if torch.is_tensor(out):
        return out
    if isinstance(out, (tuple, list)) and out and torch.is_tensor(out[0]):
        return out[0]
    if isinstance(out, dict):
        for v in out.values():
            if torch.is_tensor(v):
                return v
    return None


def _cast(args: tuple, dtype: Any) -> tuple:
    import torch

    return tuple(a.to(dtype) if torch.is_tensor(a) and a.is_floating_point() else a
                 for a in args)


def _judged(path: str, sub: Any, args: tuple, dtype: Any) -> Tuple[RP.Attempt, np.ndarray]:
    import torch

    with torch.no_grad():
        ref = _first_tensor(sub(*args)).float().numpy()
        cand = _first_tensor(copy.deepcopy(sub).to(dtype)(*_cast(args, dtype))).float().numpy()
    v = RP._judge(path, ref, cand)
    return RP.Attempt([path], v.status, v.detail, v.cosine, v.rel_error), ref


def _anonymized(sub: Any, args: tuple, seed: int, hasher: Any) -> Tuple[Any, tuple, str]:
    """(a copy with hash-initialised parameters, re-drawn inputs, how the parameters were
    drawn)."""
    import torch

    anon = copy.deepcopy(sub)
    how = "hash_init_ (each parameter at its module type's native scale)"
    try:
        hasher.hash_init_(anon, seed)
    except Exception:  # noqa: BLE001 - a module type with no native rule: its own mean/spread
        over = {}
        for n, p in anon.named_parameters():
            a = p.detach().double()
            if a.numel() <= 1 or bool(torch.all(a == a.flatten()[0])):
                over[n] = ("constant", float(a.flatten()[0]) if a.numel() else 0.0)
            else:
                over[n] = ("normal", float(a.std(unbiased=False)))
        hasher.hash_init_(anon, seed, overrides=over)
        how = ("hash_init_ with each parameter drawn at its own spread (the module types have "
               "no native rule)")
    drawn = []
    for k, a in enumerate(args):
        if not torch.is_tensor(a):
            drawn.append(a)
            continue
        x = a.detach().double().numpy()
        name = f"input:arg{k}"
        if a.is_floating_point():
            f = x[np.isfinite(x)]
            mean, std = (float(f.mean()), float(f.std())) if f.size else (0.0, 1.0)
            v = hasher.hash_tensor(name, tuple(a.shape), "normal", std, "float32", seed) + mean
            drawn.append(torch.from_numpy(np.asarray(v, np.float32)).to(a.dtype))
        else:
            v = hasher.hash_integers(name, tuple(a.shape), int(x.min()), int(x.max()) + 1, seed)
            drawn.append(torch.from_numpy(np.asarray(v)).to(a.dtype))
    return anon, tuple(drawn), how


def _versions() -> List[str]:
    import platform

    import torch

    return [f"python {platform.python_version()}, numpy {np.__version__}",
            f"torch {torch.__version__}"]


def _write(folder: str, sub: Any, args: tuple, expected: np.ndarray, reference: str,
           candidate: str, readme: str, anonymous: bool = False) -> None:
    import io

    import torch

    ep = torch.export.export(sub.eval(), args)
    for node in ep.graph.nodes:  # the user's source paths and lines: not the bundle's business
        node.meta.pop("stack_trace", None)
        if anonymous:  # the model's module paths and class names
            for key in ("nn_module_stack", "source_fn_stack", "torch_fn", "from_node"):
                node.meta.pop(key, None)
    buf = io.BytesIO()
    torch.export.save(ep, buf)
    arrays = {f"arg{k}": (a.detach().float() if a.dtype == torch.bfloat16 else a.detach()).numpy()
              for k, a in enumerate(args)}
    files = {"model.pt2": buf.getvalue(), "inputs.npz": RP._npz(arrays),
             "expected.npz": RP._npz({"output": expected}),
             "run.py": RP.run_py_text("repro_run_torch.py.tmpl", reference,
                                      candidate).encode("utf-8"),
             "README.md": readme.encode("utf-8")}
    RP.write_files(folder, files)


def _readme(spec: str, at: str, path: str, reference: str, candidate: str, best: RP.Attempt,
            attempts: List[RP.Attempt], reproduces: bool, run_line: str, control_line: str,
            anonymized: Optional[str], kind: str) -> str:
    intro = [f"Candidate `{candidate}` against reference `{reference}` on one module ({kind})"
             + ("" if anonymized else f", `{path}` of `{os.path.basename(spec)}`"
                + (f" (the search started at `{at}`)" if path != at else ""))
             + ", exported alone with torch.export (model.pt2).", ""]
    if not reproduces and not anonymized:
        intro += ["No module from the start up to the root reproduced the candidate's error: "
                  "this is the largest one tried.", ""]
    return RP.readme_text(
        reproduces, intro, best, run_line, reference, control_line, anonymized,
        ["python run.py                  # exit 1: it reproduces",
         f"python run.py --backend {reference}  # the control, float32: exit 0"],
        "run.py loads model.pt2 with torch.export.load and runs its module in float32 "
        "and in the candidate's dtype (parameters and float inputs cast, as driftscope "
        "guard's torch backends cast the model); thresholds are the guard's. It needs "
        "numpy and torch only.",
        [f"- `{a.nodes[0]}`: {a.status}"
         + (f" (cosine {a.cosine:.6f})" if a.cosine is not None else "") for a in attempts],
        _versions())


def make_repro(model: str, reference: str, candidate: str, at: str, out: str,
               inputs: Sequence[str] = (), anonymize_: bool = False, seed: int = 0,
               max_nodes: int = 16, force: bool = False, timeout: float = 300.0,
               log=lambda s: None, hasher: Any = None) -> RP.ReproResult:
    """`model` is FILE.py:FN; --max-nodes bounds the levels climbed (module, parent, ...)."""
    from .._text import printable

    if reference != "torch":
        raise RP.ReproError(f"--reference {reference}: a PyTorch bundle's reference is torch "
                            "(float32 eager)")
    if candidate not in DTYPES:
        raise RP.ReproError(f"--candidate {candidate}: a PyTorch bundle's candidate is one of "
                            f"{', '.join(DTYPES)} (run.py reruns the exported module in that "
                            "dtype)")
    if inputs:
        raise RP.ReproError("--input: a PyTorch model's inputs are the ones FN returns")
    if anonymize_ and hasher is None:
        raise RP.ReproError("anonymizing needs the hash initialiser (hasher=driftscope.reference)")
    if max_nodes < 1:
        raise RP.ReproError(f"--max-nodes {max_nodes}: must be at least 1")
    file = model.rpartition(":")[0] or model
    _check = [file] if os.path.exists(file) else []
    RP._check_output(out, _check, force)
    import torch

    from .._guard.backends.torch import torch_example

    try:
        net, example = torch_example(model, seed)
    except Exception as err:  # noqa: BLE001 - the user's file: one line
        raise RP.ReproError(f"--model {model}: {str(err).splitlines()[0] if str(err) else err!r}"
                            ) from None
    net.eval()
    known = [n for n, _ in net.named_modules() if n]
    if at not in known:
        near = difflib.get_close_matches(at, known, n=3, cutoff=0.6)
        hint = f" (nearest: {', '.join(printable(x) for x in near)})" if near else ""
        raise RP.ReproError(f"no module named '{printable(at)}' in the model{hint}")
    chain = [at]
    while "." in chain[-1] and len(chain) < max_nodes:
        chain.append(chain[-1].rpartition(".")[0])
    captured = _capture(net, example, chain)
    dtype = getattr(torch, DTYPES[candidate])
    result = RP.ReproResult(False)
    best: Optional[RP.Attempt] = None
    path, expected = at, None
    for path in chain:
        if path not in captured:
            log(f"{path}: not called with positional tensors only, or not called: skipped")
            continue
        best, expected = _judged(path, net.get_submodule(path), captured[path][0], dtype)
        result.attempts.append(best)
        log(f"{path}: {best.status} {best.detail}")
        if best.reproduces:
            break
    if best is None:
        raise RP.ReproError(f"'{printable(at)}' is never called with positional tensor inputs "
                            "in the model's run: nothing to export")
    result.reproduces, result.nodes = best.reproduces, [path]
    sub, args = net.get_submodule(path), captured[path][0]
    kind = type(sub).__name__
    parent = os.path.dirname(os.path.abspath(out))
    with RP.staged_bundle(parent, out) as staged:
        real = os.path.join(staged, "real-weights") if anonymize_ else staged
        _write(real, sub, args, expected, reference, candidate, "")
        run = RP.run_bundle(real, timeout=timeout)
        control = RP.run_bundle(real, reference, timeout=timeout)
        result.run_py_exit = run[0]
        readme = _readme(model, at, path, reference, candidate, best, result.attempts,
                         best.reproduces, f"exit {run[0]}: {run[1]}",
                         f"exit {control[0]}: {control[1]}", None, kind)
        _write(real, sub, args, expected, reference, candidate, readme)
        if anonymize_:
            anon, drawn, how = _anonymized(sub, args, seed, hasher)
            a_best, a_expected = _judged("output", anon, drawn, dtype)
            _write(staged, anon, drawn, a_expected, reference, candidate, "", True)
            arun = RP.run_bundle(staged, timeout=timeout)
            acontrol = RP.run_bundle(staged, reference, timeout=timeout)
            result.anonymized_exit, result.anonymized = arun[0], arun[0] == 1
            note = (f"Parameters replaced by the hash initialiser ({how}; docs/references.md, "
                    f"seed {seed}); inputs re-drawn from it at their own mean and spread "
                    f"(integers in their observed range); the module path is not in the "
                    f"bundle. Re-run: "
                    + ("it still reproduces." if result.anonymized else
                       "it NO LONGER reproduces: the fault needs the real weights (or inputs); "
                       "the real-weights bundle, which reproduces, is kept apart in "
                       "real-weights/ (not for sharing)."))
            readme = _readme(model, at, path, reference, candidate, a_best, [a_best],
                             result.anonymized, f"exit {arun[0]}: {arun[1]}",
                             f"exit {acontrol[0]}: {acontrol[1]}", note, kind)
            _write(staged, anon, drawn, a_expected, reference, candidate, readme, True)
            if result.anonymized:
                shutil.rmtree(real)
    return result
