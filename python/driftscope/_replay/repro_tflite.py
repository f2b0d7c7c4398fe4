"""The repro bundle of a .tflite model (issue 26 item 4; docs/howto/repro.md, ".tflite"):
``python -m driftscope repro MODEL.tflite --reference litert-ref --candidate litert --at TENSOR
-o DIR``.

The same search as the ONNX bundle's (repro.py): start at the operator producing TENSOR, fed
with the reference's values of its inputs; while the candidate's output of the piece passes the
guard's verdict, add the producers of its inputs one ring at a time up to --max-nodes; prune a
piece that reproduces. Pieces are cut by flatbuffer surgery (_guard/surgery/tflite.py: only the
piece's operators, tensors and buffers) and run through the guard's own backends in a child.

The reference values are the raw tensors (quantized ones as their integers) of one run of the
whole model on LiteRT's reference kernels with every tensor preserved: a piece's quantized input
gets the very integers the reference computed there.

ai-edge-quantizer rows (litert-int8, litert-w8...) quantize the model before running it; the
quantizer is no runtime, so the bundle ships the quantized piece itself as candidate.tflite (the
backend's own build of model.tflite) and run.py runs it on LiteRT's default kernels.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import repro as RP

TFLITE_FILES = ("model.tflite", "candidate.tflite", "inputs.npz", "expected.npz", "run.py",
                "README.md", "SHA256SUMS")
REFERENCES = ("litert-ref",)


def _graph(model: str) -> Any:
    from .._guard.surgery import tflite as cut

    try:
        return cut.load(model)
    except (cut.CutRefused, OSError) as err:
        raise RP.ReproError(f"{model}: {err}") from None


def _resolve(g: Any, at: str) -> Tuple[int, int]:
    """(tensor index, producing operator) of TENSOR named as the LiteRT recorder names it (or
    by its unique raw name)."""
    import difflib

    from .._text import printable
    from .tflite import recorder_names

    shown = recorder_names(g)
    for name, t, k in shown:
        if name == at:
            return t, k
    found = g.by_name.get(at, [])
    if len(found) == 1 and found[0] in g.producer:
        return found[0], g.producer[found[0]]
    if found and found[0] in g.inputs:
        raise RP.ReproError(f"'{printable(at)}' is a model input, which no operator produces")
    near = difflib.get_close_matches(at, [n for n, _, _ in shown], n=3, cutoff=0.6)
    hint = f" (nearest: {', '.join(printable(x) for x in near)})" if near else ""
    raise RP.ReproError(f"no tensor named '{printable(at)}' in the model{hint}")


def _interpreter(content: bytes, kernels: str, preserve: bool = False) -> Any:
    import warnings

    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kind = {"reference": OpResolverType.BUILTIN_REF, "optimized": OpResolverType.BUILTIN}[kernels]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = Interpreter(model_content=content, experimental_op_resolver_type=kind,
                         experimental_preserve_all_tensors=preserve)
    it.allocate_tensors()
    return it


def _feeds(model: str, specs: Sequence[str], seed: int) -> Dict[str, np.ndarray]:
    from .._guard import _inputs as I

    given = RP.given_inputs(specs)
    with open(model, "rb") as f:
        it = _interpreter(f.read(), "reference")
    samples, _ = I.make_samples(I.litert_signature(it.get_input_details()), given, {}, seed, 1)
    return samples[0]


def _capture(g: Any, model: str, feeds: Dict[str, np.ndarray]) -> Dict[int, np.ndarray]:
    """Every tensor of one run on the reference kernels, raw (quantized ones as integers)."""
    with open(model, "rb") as f:
        it = _interpreter(f.read(), "reference", preserve=True)
    details = it.get_input_details()
    values = list(feeds.values())
    for j, d in enumerate(details):
        v = feeds.get(d["name"], values[j] if j < len(values) else None)
        if v is None:
            raise RP.ReproError(f"no value for the model input {d['name']!r}")
        it.set_tensor(d["index"], np.asarray(v).astype(d["dtype"]))
    it.invoke()
    out: Dict[int, np.ndarray] = {}
    for t in range(len(g.tensors)):
        if g.constant(t):
            continue
        try:
            out[t] = np.array(it.get_tensor(t))
        except ValueError:  # a tensor LiteRT does not hand out (no data)
            pass
    return out


def _boundary(g: Any, ops: Sequence[int]) -> List[int]:
    made = {int(o) for k in ops for o in g.operators[k].outputs if o >= 0}
    out: List[int] = []
    for k in ops:
        for x in g.operators[k].inputs:
            x = int(x)
            if x >= 0 and not g.constant(x) and x not in made and x not in out:
                out.append(x)
    return out


def _dequantized(g: Any, t: int, v: np.ndarray) -> np.ndarray:
    q = g.tensors[t].quantization
    scales = list(q.scale) if q is not None and q.scale is not None else []
    if scales and v.dtype.kind in "iu" and len(scales) == 1:
        zero = int(q.zeroPoint[0]) if q.zeroPoint is not None and len(q.zeroPoint) else 0
        return float(scales[0]) * (v.astype(np.float64) - zero)
    return v


def _try(g: Any, ops: List[int], t: int, values: Dict[int, np.ndarray], reference: str,
         candidate: str, work: str, seed: int, timeout: float
         ) -> Tuple[RP.Attempt, Any, Dict[str, np.ndarray], Dict[str, np.ndarray]]:
    from .._guard._metrics import RUNTIME_ERROR
    from .._guard.surgery import tflite as cut

    try:
        piece = cut.middle(g, _boundary(g, ops), [t])
    except cut.CutRefused as err:
        raise RP.ReproError(f"the piece cannot be cut: {err}") from None
    path = os.path.join(work, f"piece{len(os.listdir(work))}.tflite")
    with open(path, "wb") as f:
        f.write(piece.data)
    feeds = {}
    for name in piece.inputs:
        x = g.index(name)
        if x not in values:
            raise RP.ReproError(f"the reference run holds no value of {name!r}")
        feeds[name] = values[x]
    ref = RP._run_on(reference, path, feeds, seed, timeout)
    out = piece.outputs[0]
    attempt_ops = [g.op_label(k) for k in piece.ops]
    try:
        cand = RP._run_on(candidate, path, feeds, seed, timeout)
    except RuntimeError as err:
        return RP.Attempt(attempt_ops, RUNTIME_ERROR, str(err)), piece, feeds, ref
    v = RP._judge(out, ref[out], cand[out])
    return RP.Attempt(attempt_ops, v.status, v.detail, v.cosine, v.rel_error), piece, feeds, ref


def search(g: Any, values: Dict[int, np.ndarray], start: int, t: int, reference: str,
           candidate: str, max_nodes: int, work: str, seed: int = 0, timeout: float = 300.0,
           log=lambda s: None) -> Tuple[RP.Attempt, Any, Dict[str, np.ndarray],
                                        Dict[str, np.ndarray], List[RP.Attempt]]:
    """repro.grow_and_prune over operator indices."""
    def inputs_of(k: int) -> List[int]:
        return [int(x) for x in g.operators[k].inputs]

    best, attempts = RP.grow_and_prune(
        start, lambda k: [g.producer[x] for x in inputs_of(k) if x in g.producer], lambda k: k,
        lambda ops: _try(g, ops, t, values, reference, candidate, work, seed, timeout),
        lambda ops: RP.reaches(ops, start, inputs_of,
                               lambda k: [int(o) for o in g.operators[k].outputs if o >= 0]),
        lambda b, ops, first: len(b[1].ops), "op(s)", g.op_label, max_nodes, log)
    return best[0], best[1], best[2], best[3], attempts


# ---- anonymizing ------------------------------------------------------------------------------

def anonymize(data: bytes, feeds: Dict[str, np.ndarray], seed: int, hasher: Any
              ) -> Tuple[bytes, Dict[str, np.ndarray], Dict[str, str]]:
    """(the piece with tensors named t0.., every constant buffer of more than one distinct value
    re-drawn from the hash initialiser at its own mean and spread (integers rounded and clipped
    to the values the type holds: quantized weights keep their scales), re-drawn inputs,
    old -> new names)."""
    import flatbuffers

    from .._guard.surgery import tflite as cut

    g = cut.load(data)
    m = g.model
    names: Dict[str, str] = {}
    for i, tensor in enumerate(g.tensors):
        old = g.name(i)
        names.setdefault(old, f"t{i}")
        tensor.name = f"t{i}"
    done = set()
    for i, tensor in enumerate(g.tensors):
        b = tensor.buffer
        if not g.constant(i) or b in done:
            continue
        done.add(b)
        kind = g.type_names[i]
        dtype = np.dtype({"FLOAT32": np.float32, "FLOAT16": np.float16, "INT8": np.int8,
                          "UINT8": np.uint8, "INT16": np.int16, "INT32": np.int32,
                          "INT64": np.int64}.get(kind, np.uint8))
        raw = bytes(bytearray(m.buffers[b].data))
        if kind not in ("FLOAT32", "FLOAT16", "INT8", "UINT8", "INT16", "INT32", "INT64"):
            # INT4 and other packed types: re-drawn as bytes (the values' bits, not the model's)
            dtype = np.dtype(np.uint8)
        a = np.frombuffer(raw, dtype=dtype)
        if a.size <= 1 or np.all(a == a[0]):
            continue  # one value (a zero bias, an epsilon): the op's arithmetic, no weight
        x = a.astype(np.float64)
        mean, std = float(x.mean()), float(x.std())
        v = hasher.hash_tensor(f"t{i}", a.shape, "normal", std, "float32", seed) + mean
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            lo = info.min + 1 if dtype == np.int8 and a.min() >= -127 else info.min
            v = np.clip(np.round(v), lo, info.max)
        m.buffers[b].data = np.frombuffer(v.astype(dtype).tobytes(), np.uint8).copy()
    sg = m.subgraphs[0]
    sg.name = "repro"
    m.description = "driftscope repro"
    m.metadata, m.metadataBuffer, m.signatureDefs = None, None, None
    fb = flatbuffers.Builder(1024)
    fb.Finish(m.Pack(fb), file_identifier=b"TFL3")
    H = hasher
    drawn: Dict[str, np.ndarray] = {}
    for old, a in feeds.items():
        name = names.get(old, old)
        if a.dtype.kind in "iu":
            drawn[name] = H.hash_integers("input:" + name, a.shape, int(a.min()),
                                          int(a.max()) + 1, seed).astype(a.dtype)
        elif a.dtype.kind == "b":
            drawn[name] = H.hash_integers("input:" + name, a.shape, 0, 2, seed).astype(bool)
        else:
            x = a[np.isfinite(a)].astype(np.float64)
            mean, std = (float(x.mean()), float(x.std())) if x.size else (0.0, 1.0)
            drawn[name] = (H.hash_tensor("input:" + name, a.shape, "normal", std, "float32",
                                         seed) + mean).astype(a.dtype)
    return bytes(fb.Output()), drawn, names


# ---- the bundle -------------------------------------------------------------------------------

def _versions() -> List[str]:
    import platform

    out = [f"python {platform.python_version()}, numpy {np.__version__}"]
    for mod in ("ai_edge_litert", "ai_edge_quantizer"):
        try:
            from importlib.metadata import version

            out.append(f"{mod} {version(mod.replace('_', '-'))}")
        except Exception:  # noqa: BLE001 - not installed: not used
            pass
    return out


def _readme(model: str, at: str, reference: str, candidate: str, best: RP.Attempt, nops: int,
            kinds: str, attempts: List[RP.Attempt], reproduces: bool, max_nodes: int,
            run_line: str, control_line: str, anonymized: Optional[str],
            quantized: bool) -> str:
    intro = [f"Candidate `{candidate}` against reference `{reference}` on a piece of "
             f"{nops} operator(s) ({kinds})" +
             ("" if anonymized else f" around `{at}` of `{os.path.basename(model)}`") + ".", ""]
    if quantized:
        intro += [f"`{candidate}` is a model quantized by ai-edge-quantizer, which is not a "
                  "runtime: `candidate.tflite` is its build of `model.tflite` (the same recipe "
                  "the guard's backend applies), run on LiteRT's default kernels (XNNPACK).", ""]
    if not reproduces and not anonymized:
        intro += [f"No piece of at most {max_nodes} operators reproduced the candidate's error: "
                  "this is the largest one tried; the error is inherited from further up.", ""]
    return RP.readme_text(
        reproduces, intro, best, run_line, reference, control_line, anonymized,
        ["python run.py                       # exit 1: it reproduces",
         f"python run.py --backend {reference}  # the control: exit 0"],
        "Thresholds are driftscope guard's (cosine >= 0.99, relative error and norm ratio "
        "bounds); run.py needs numpy and ai-edge-litert only. Quantized outputs are judged "
        "dequantized (what the integers stand for).",
        [f"- {len(a.nodes)} op(s): {a.status}"
         + (f" (cosine {a.cosine:.6f})" if a.cosine is not None else "") for a in attempts],
        _versions())


def _check_output(out: str, inputs: Sequence[str], force: bool) -> None:
    RP._check_output(out, inputs, force)
    from .._cli import refuse_output_onto_inputs

    for name in TFLITE_FILES:
        same = refuse_output_onto_inputs(os.path.join(out, name), inputs)
        if same:
            raise RP.ReproError(same)


def make_repro(model: str, reference: str, candidate: str, at: str, out: str,
               inputs: Sequence[str] = (), anonymize_: bool = False, seed: int = 0,
               max_nodes: int = 16, force: bool = False, timeout: float = 300.0,
               log=lambda s: None, hasher: Any = None) -> RP.ReproResult:
    from .._guard.backends.registry import BACKENDS

    tfl = [n for n, x in BACKENDS.items() if x.family == "tflite"]
    if reference not in REFERENCES:
        raise RP.ReproError(f"--reference {reference}: a .tflite bundle's reference is "
                            f"{' or '.join(REFERENCES)} (LiteRT's reference kernels)")
    if candidate not in BACKENDS or BACKENDS[candidate].family != "tflite":
        raise RP.ReproError(f"--candidate {candidate}: not a .tflite backend (choose from "
                            f"{', '.join(tfl)})")
    for role, b in (("--reference", reference), ("--candidate", candidate)):
        why = BACKENDS[b].unavailable()
        if why:
            raise RP.ReproError(f"{role} {b}: unavailable: {why}")
    if anonymize_ and hasher is None:
        raise RP.ReproError("anonymizing needs the hash initialiser (hasher=driftscope.reference)")
    if max_nodes < 1:
        raise RP.ReproError(f"--max-nodes {max_nodes}: must be at least 1")
    if not os.path.isfile(model):
        raise RP.ReproError(f"{model}: not a file")
    _check_output(out, [model] + [s.partition("=")[2] or s for s in inputs], force)
    g = _graph(model)
    t, start = _resolve(g, at)
    feeds = _feeds(model, inputs, seed)
    values = _capture(g, model, feeds)
    quantized = bool(getattr(BACKENDS[candidate], "recipe_name", None))
    parent = os.path.dirname(os.path.abspath(out))
    result = RP.ReproResult(False)
    with RP.own_forker([reference, candidate]):
        with tempfile.TemporaryDirectory(prefix="driftscope-repro-") as work:
            pieces = os.path.join(work, "pieces")
            os.makedirs(pieces)
            best, piece, sub_feeds, ref_out, attempts = search(
                g, values, start, t, reference, candidate, max_nodes, pieces, seed, timeout, log)
            result.attempts, result.reproduces = attempts, best.reproduces
            result.nodes = [g.op_label(k) for k in piece.ops]
            kinds = ", ".join(g.op_types[k] for k in piece.ops)
            builds: Dict[bytes, Optional[bytes]] = {}

            def files(data: bytes, fd: Dict[str, np.ndarray], expected: Dict[str, np.ndarray],
                      readme: str) -> Dict[str, bytes]:
                got = {"model.tflite": data}
                if quantized:
                    if data not in builds:
                        builds[data] = _candidate_build(candidate, data, work, seed)
                    got["candidate.tflite"] = builds[data]
                run_py = RP.run_py_text("repro_run_tflite.py.tmpl", reference, candidate,
                                        quantized=quantized)
                got.update({"inputs.npz": RP._npz(fd), "expected.npz": RP._npz(expected),
                            "run.py": run_py.encode("utf-8"), "README.md": readme.encode("utf-8")})
                return got

            with RP.staged_bundle(parent, out) as staged:
                real = os.path.join(staged, "real-weights") if anonymize_ else staged
                expected = {o: ref_out[o] for o in piece.outputs}
                RP.write_files(real, files(piece.data, sub_feeds, expected, ""))
                run = RP.run_bundle(real, timeout=timeout)
                control = RP.run_bundle(real, reference, timeout=timeout)
                result.run_py_exit = run[0]
                readme = _readme(model, at, reference, candidate, best, len(piece.ops), kinds,
                                 attempts, best.reproduces, max_nodes, f"exit {run[0]}: {run[1]}",
                                 f"exit {control[0]}: {control[1]}", None, quantized)
                RP.write_files(real, files(piece.data, sub_feeds, expected, readme))
                if anonymize_:
                    data, drawn, _ = anonymize(piece.data, sub_feeds, seed, hasher)
                    path = os.path.join(work, "anon.tflite")
                    with open(path, "wb") as f:
                        f.write(data)
                    ref_anon = RP._run_on(reference, path, drawn, seed, timeout)
                    ag = _graph(path)
                    outs = [ag.name(x) for x in ag.outputs]
                    expected = {o: ref_anon[o] for o in outs}
                    RP.write_files(staged, files(data, drawn, expected, ""))
                    arun = RP.run_bundle(staged, timeout=timeout)
                    acontrol = RP.run_bundle(staged, reference, timeout=timeout)
                    result.anonymized_exit = arun[0]
                    result.anonymized = arun[0] == 1
                    note = (f"Tensor names replaced (t0..); every constant buffer of more than "
                            f"one value re-drawn from the hash initialiser (docs/references.md, "
                            f"seed {seed}) at its own mean and spread (integer weights rounded "
                            f"and clipped, their quantization scales kept); inputs re-drawn "
                            f"from it (integers in their observed range). Re-run: "
                            + ("it still reproduces." if result.anonymized else
                               "it NO LONGER reproduces: the fault needs the real weights (or "
                               "inputs); the real-weights bundle, which reproduces, is kept "
                               "apart in real-weights/ (not for sharing)."))
                    try:
                        cand_v = RP._run_on(candidate, path, drawn, seed, timeout)
                        v = RP._judge(outs[0], ref_anon[outs[0]], cand_v[outs[0]])
                        anon_best = RP.Attempt(result.nodes, v.status, v.detail, v.cosine,
                                               v.rel_error)
                    except RuntimeError as err:
                        from .._guard._metrics import RUNTIME_ERROR

                        anon_best = RP.Attempt(result.nodes, RUNTIME_ERROR, str(err))
                    readme = _readme(model, at, reference, candidate, anon_best,
                                     len(piece.ops), kinds, [anon_best], result.anonymized,
                                     max_nodes, f"exit {arun[0]}: {arun[1]}",
                                     f"exit {acontrol[0]}: {acontrol[1]}", note, quantized)
                    RP.write_files(staged, files(data, drawn, expected, readme))
                    if result.anonymized:
                        shutil.rmtree(real)
    return result
