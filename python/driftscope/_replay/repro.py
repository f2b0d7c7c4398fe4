"""The repro bundle of an ONNX model (issue 26 item 4; docs/howto/repro.md):
``python -m driftscope repro MODEL.onnx --reference B --candidate B --at TENSOR -o DIR``.

The smallest subgraph around TENSOR that still shows the candidate's error on its own: start at
the node producing TENSOR, fed with the reference's values of its inputs (the float32 model run
on ONNX Runtime with every tensor exposed as an output); while the candidate's output of that
subgraph passes the guard's verdict (_guard/_metrics.py: the error is inherited, not made here),
add the producers of its inputs, one ring at a time, up to --max-nodes. A subgraph that
reproduces is then pruned: each node but the start whose removal keeps it connected and
reproducing is dropped (a ring adds every producer, most of them innocent).

Every run of a subgraph goes through the guard's own backends (Backend.load, in a child process
as the guard runs them, so a runtime that crashes is an error line, not a dead driftscope). The
bundle's run.py rebuilds the candidate with the runtime's own API, and is run once more on the
written bundle: what the README states is what run.py measured.

--anonymize renames every node and tensor, replaces the weights by the hash initialiser's
(reference/_onnx.py rewrite, the same rules as `reference init`; the float tensors it keeps are
re-drawn too, at their own mean and spread), re-draws the inputs from the same generator at the
inputs' scale and re-runs run.py: a fault that needs the real weights (an outlier) does not
reproduce then, and the real-weights bundle is kept in DIR/real-weights/ and said so.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

PROG = "driftscope repro"
BUNDLE_FILES = ("model.onnx", "inputs.npz", "expected.npz", "run.py", "README.md", "SHA256SUMS")
# The backends run.py can rebuild with the runtime's own API (repro_run.py.tmpl, build()).
RUN_PY_BACKENDS = ("float32", "ort", "ort-noopt", "ort-int8", "ort-fp16", "ort-fp16-exact",
                   "openvino", "openvino-f16", "openvino-bf16")


class ReproError(ValueError):
    """Bad input: one line, exit 2."""


@dataclass
class Attempt:
    nodes: List[str]                 # node names in model order
    status: str                      # the guard's verdict of the candidate's subgraph output
    detail: str
    cosine: Optional[float] = None
    rel_error: Optional[float] = None

    @property
    def reproduces(self) -> bool:
        from .._guard._metrics import PASS

        return self.status != PASS


@dataclass
class ReproResult:
    reproduces: bool
    attempts: List[Attempt] = field(default_factory=list)
    nodes: List[str] = field(default_factory=list)
    run_py_exit: Optional[int] = None        # run.py on the written bundle
    anonymized: Optional[bool] = None        # None: not asked; else does it reproduce
    anonymized_exit: Optional[int] = None
    message: str = ""


def _one_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


# ---- the model, the tensor, the reference's values ---------------------------------------------

def _node_of(graph: Any, at: str) -> Tuple[Any, str]:
    """(node, output tensor) for TENSOR as the ONNX Runtime recorder names it: a node's name (its
    first output), NODE:OUTPUT for another output, or a tensor's own name."""
    by_name = {n.name: n for n in graph.node if n.name}
    if at in by_name:
        node = by_name[at]
        return node, node.output[0]
    if ":" in at:
        name, _, out = at.rpartition(":")
        node = by_name.get(name)
        if node is not None:
            if out in node.output:
                return node, out
            if out.isdigit() and int(out) < len(node.output):
                return node, node.output[int(out)]
    for n in graph.node:
        if at in n.output:
            return n, at
    from .._text import printable

    near = difflib.get_close_matches(at, list(by_name), n=3, cutoff=0.6)
    hint = f" (nearest: {', '.join(printable(x) for x in near)})" if near else ""
    raise ReproError(f"no tensor named '{printable(at)}' in the model{hint}")


def given_inputs(specs: Sequence[str], expected: Optional[Dict[str, Any]] = None
                 ) -> Dict[str, np.ndarray]:
    """--input NAME=FILE.npy / FILE.npz, read by the recorders' one loader (regular files only,
    no pickles, each array's size checked from its header before its data is read, against
    `expected`: input name -> (most bytes, description) where the model fixes it), its errors
    as ReproError."""
    from ..errors import Error
    from ..recorders.api import onnx_load_cli_inputs

    try:
        return onnx_load_cli_inputs(specs, expected=expected)
    except Error as err:
        raise ReproError(str(err)) from None


def _static_sizes(specs: Sequence[Any]) -> Dict[str, Any]:
    """Input name -> (bytes, "float32 [2, 4]") for the inputs whose every dimension is fixed."""
    from .._limits import numel, shape_text

    return {s.name: (numel(s.shape) * s.dtype.itemsize, shape_text(s.dtype.name, s.shape))
            for s in specs if all(isinstance(d, int) for d in s.shape)}


def _load_feeds(model: Any, specs: Sequence[str], seed: int) -> Dict[str, np.ndarray]:
    """--input arrays, and for the rest the guard's own generated inputs; an --input that does
    not fit the model is a ReproError, as the guard says it."""
    from .._guard import _inputs as I

    try:
        signature = I.onnx_signature(model)
        given = given_inputs(specs, _static_sizes(signature))
        samples, _ = I.make_samples(signature, given, {}, seed, 1)
    except I.InputError as err:
        raise ReproError(str(err)) from None
    return samples[0]


def _capture(model: Any, feeds: Dict[str, np.ndarray],
             what: str = "the model") -> Dict[str, np.ndarray]:
    """Every tensor of one float32 ONNX Runtime run (the reference values the subgraphs are fed).
    A model ONNX Runtime cannot load or run is the recorder's one-line ModelLoadError /
    ModelRunError (RuntimeError), as guard and replay report it."""
    import onnx
    import onnxruntime as ort

    from ..recorders.api import onnx_make_session, onnx_run

    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for n in m.graph.node:
        for o in n.output:
            if o and o not in have:
                m.graph.output.append(onnx.ValueInfoProto(name=o))
                have.add(o)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = onnx_make_session(m.SerializeToString(), ["CPUExecutionProvider"], options, None,
                                what)
    names = [o.name for o in session.get_outputs()]
    values = dict(zip(names, onnx_run(session, feeds, what)))
    values.update(feeds)
    return values


def _typed(model: Any, values: Dict[str, np.ndarray]) -> Any:
    """A copy whose value_info gives every captured tensor its type and concrete shape:
    onnx.utils.Extractor needs them for the cut's inputs and outputs."""
    import onnx
    from onnx import helper

    m = onnx.ModelProto()
    m.CopyFrom(model)
    known = {v.name for v in list(m.graph.value_info) + list(m.graph.input)
             + list(m.graph.output)}
    for k, a in values.items():
        if k not in known and a.dtype.kind in "biuf":
            m.graph.value_info.append(helper.make_tensor_value_info(
                k, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape))
    return m


def _boundary(graph: Any, nodes: Sequence[str]) -> List[str]:
    """The tensors the nodes read that none of them produces and no initializer holds."""
    inits = {t.name for t in graph.initializer}
    by_name = {n.name: n for n in graph.node}
    inside = [by_name[x] for x in nodes]
    made = {o for n in inside for o in n.output}
    out: List[str] = []
    for n in inside:
        for x in n.input:
            if x and x not in inits and x not in made and x not in out:
                out.append(x)
    return out


def _cut(typed: Any, nodes: Sequence[str], output: str) -> Any:
    """The subgraph (onnx.utils.Extractor: only the nodes between the cut and `output`, only the
    initializers they read), with TENSOR's value as its one output."""
    from onnx.utils import Extractor

    sub = Extractor(typed).extract_model(_boundary(typed.graph, nodes), [output])
    sub.doc_string = ""
    sub.graph.doc_string = ""
    del sub.metadata_props[:]
    return sub


def _counted(sub: Any) -> int:
    return sum(1 for n in sub.graph.node if n.op_type != "Constant")


# ---- running a subgraph on the guard's backends -----------------------------------------------

def _run_on(backend: str, path: str, feeds: Dict[str, np.ndarray], seed: int,
            timeout: float) -> Dict[str, np.ndarray]:
    from .._guard import _process as R

    result = R.run_backend(backend, path, [feeds], 0, seed, timeout)
    if result.get("error"):
        raise RuntimeError(f"{backend}: {result['error']}")
    return result["outputs"][0]


def _judge(name: str, ref: np.ndarray, cand: np.ndarray) -> Any:
    from .._guard._metrics import Thresholds, judge

    # An inner tensor has no class axis: the guard's argmax rule is for softmax/logits outputs.
    return judge(name, ref, cand, Thresholds(class_axes={}), 0)


def _try(typed: Any, nodes: List[str], output: str, values: Dict[str, np.ndarray],
         reference: str, candidate: str, work: str, seed: int,
         timeout: float) -> Tuple[Attempt, Any, Dict[str, np.ndarray], Dict[str, np.ndarray]]:
    import onnx

    sub = _cut(typed, nodes, output)
    path = os.path.join(work, f"sub{len(os.listdir(work))}.onnx")
    onnx.save(sub, path)
    feeds = {i.name: values[i.name] for i in sub.graph.input}
    ref = _run_on(reference, path, feeds, seed, timeout)
    try:
        cand = _run_on(candidate, path, feeds, seed, timeout)
    except RuntimeError as err:  # a crash on the candidate reproduces a crash
        from .._guard._metrics import RUNTIME_ERROR

        return Attempt(list(nodes), RUNTIME_ERROR, str(err)), sub, feeds, ref
    verdict = _judge(output, ref[output], cand[output])
    return (Attempt(list(nodes), verdict.status, verdict.detail, verdict.cosine,
                    verdict.rel_error), sub, feeds, ref)


def reaches(items: Sequence[Any], start: Any, inputs_of: Callable[[Any], Sequence[Any]],
            outputs_of: Callable[[Any], Sequence[Any]]) -> bool:
    """Does every item (an ONNX node, a .tflite operator) reach `start` through producers inside
    the set?"""
    producers = {o: x for x in items for o in outputs_of(x)}
    reach, todo = {start}, [start]
    while todo:
        x = todo.pop()
        for i in inputs_of(x):
            p = producers.get(i)
            if p is not None and p not in reach:
                reach.add(p)
                todo.append(p)
    return reach == set(items)


def grow_and_prune(start: Any, producers_of: Callable[[Any], Sequence[Any]],
                   order: Callable[[Any], Any], attempt: Callable[[List[Any]], Tuple],
                   connected: Callable[[List[Any]], bool],
                   count: Callable[[Tuple, List[Any], bool], int], unit: str,
                   label: Callable[[Any], str], max_nodes: int,
                   log: Callable[[str], None]) -> Tuple[Tuple, List[Attempt]]:
    """The search of every bundle, over ONNX nodes or .tflite operators: from `start`, grow ring
    by ring through the producers of what the piece reads (at most `max_nodes`, as `count` says
    of a tried piece) until the piece reproduces; then drop the outer ones first, while the rest
    stays connected and still reproduces. `attempt(items)` is (Attempt, piece, its inputs, the
    reference's outputs); returns the chosen one and every Attempt in order."""
    items = [start]
    attempts: List[Attempt] = []
    best = attempt(items)
    attempts.append(best[0])
    log(f"{count(best, items, True)} {unit}: {best[0].status} {best[0].detail}")
    ring = [start]
    while not best[0].reproduces:
        nxt: List[Any] = []
        for x in ring:
            for p in producers_of(x):
                if p not in items and p not in nxt:
                    nxt.append(p)
        room = max_nodes - count(best, items, False)
        if not nxt or room <= 0:
            break
        nxt = nxt[:room]
        items, ring = sorted(items + nxt, key=order), nxt
        best = attempt(items)
        attempts.append(best[0])
        log(f"{count(best, items, False)} {unit}: {best[0].status} {best[0].detail}")
    if best[0].reproduces:
        # Last added first: the outer ring is where the innocent producers came in. Passes
        # until none drops: an item becomes removable once what it fed alone is gone.
        dropped = True
        while dropped:
            dropped = False
            for x in sorted(items, key=order, reverse=True):
                if x == start or x not in items:
                    continue
                fewer = [y for y in items if y != x]
                if not connected(fewer):
                    continue
                tried = attempt(fewer)
                attempts.append(tried[0])
                log(f"without {label(x)}: {tried[0].status}")
                if tried[0].reproduces:
                    items, best, dropped = fewer, tried, True
    return best, attempts


def search(model: Any, values: Dict[str, np.ndarray], start: Any, output: str, reference: str,
           candidate: str, max_nodes: int, work: str, seed: int = 0, timeout: float = 300.0,
           log=lambda s: None) -> Tuple[Attempt, Any, Dict[str, np.ndarray],
                                        Dict[str, np.ndarray], List[Attempt]]:
    """grow_and_prune over the model's nodes; returns (the chosen attempt, its subgraph, its
    inputs, the reference's outputs, every attempt in order)."""
    typed = _typed(model, values)
    graph = typed.graph
    producer = {o: n for n in graph.node for o in n.output if o}
    order = {n.name: k for k, n in enumerate(graph.node)}
    by_name = {n.name: n for n in graph.node}
    best, attempts = grow_and_prune(
        start.name,
        lambda x: [producer[i].name for i in by_name[x].input if i in producer],
        order.__getitem__,
        lambda nodes: _try(typed, nodes, output, values, reference, candidate, work, seed,
                           timeout),
        lambda nodes: reaches(nodes, start.name, lambda x: by_name[x].input,
                              lambda x: by_name[x].output),
        lambda b, nodes, first: len(nodes) if first else _counted(b[1]), "node(s)", str,
        max_nodes, log)
    return best[0], best[1], best[2], best[3], attempts


# ---- anonymizing ------------------------------------------------------------------------------

def _reference_init(src: str, dst: str, seed: int, timeout: float) -> Dict[str, Any]:
    """`driftscope reference init SRC -o DST --seed N` run as a user runs it (the reference
    layer's rewrite, the same rules as for a whole model); returns its record."""
    import json

    from .._guard._env import child_env as _child_env
    from .._pyexec import module_command

    p = subprocess.run(module_command("driftscope", "reference", "init", src, "-o", dst,
                                      "--seed", str(seed), "--json"),
                       capture_output=True, text=True, timeout=timeout, env=_child_env())
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"reference init of the subgraph failed: {last}")
    return json.loads(p.stdout)


def anonymize(sub: Any, feeds: Dict[str, np.ndarray], seed: int, hasher: Any, work: str,
              timeout: float = 300.0) -> Tuple[Any, Dict[str, np.ndarray], Dict[str, str]]:
    """(renamed model with hash-initialised weights, re-drawn inputs, old -> new tensor names).
    `hasher` is driftscope.reference (hash_tensor, hash_integers), handed in by the front: the
    replay layer does not import the reference layer."""
    import onnx
    from onnx import numpy_helper

    m = onnx.ModelProto()
    m.CopyFrom(sub)
    g = m.graph
    names: Dict[str, str] = {}

    def new(x: str) -> str:
        if not x:
            return x
        if x not in names:
            names[x] = f"t{len(names)}"
        return names[x]

    for v in g.input:
        v.name = new(v.name)
    for t in g.initializer:
        t.name = new(t.name)
    for k, n in enumerate(g.node):
        n.name = f"n{k}"
        n.doc_string = ""
        for j, x in enumerate(n.input):
            n.input[j] = new(x)
        for j, x in enumerate(n.output):
            n.output[j] = new(x)
    for v in g.output:
        v.name = new(v.name)
    kept_vi = [v for v in g.value_info if v.name in names]
    del g.value_info[:]
    for v in kept_vi:
        v.name = names[v.name]
        g.value_info.append(v)
    g.name = "repro"
    m.producer_name, m.producer_version, m.doc_string, m.domain = "driftscope repro", "", "", ""
    del m.metadata_props[:]
    src, dst = os.path.join(work, "renamed.onnx"), os.path.join(work, "hashed.onnx")
    onnx.save(m, src)
    record = _reference_init(src, dst, seed, timeout)
    m = onnx.load(dst)
    g = m.graph
    # What `reference init` leaves (float tensors no weight-consuming op reads: a bias added
    # without its MatMul in the cut, a scale) is re-drawn too, at its own mean and spread: the
    # bundle holds no value of the model's but the scalars of its arithmetic.
    for i, t in enumerate(g.initializer):
        if t.name in record.get("parameters", {}) or t.data_type not in (1, 10, 11):
            continue
        a = numpy_helper.to_array(t)
        if a.size <= 1:
            continue  # a scalar (an epsilon, a divisor): the op's arithmetic, not a weight
        mean, std = float(np.mean(a)), float(np.std(a))
        v = hasher.hash_tensor(t.name, a.shape, "normal", std, "float32", seed) + mean
        g.initializer[i].CopyFrom(numpy_helper.from_array(v.astype(a.dtype), t.name))
    H = hasher
    drawn: Dict[str, np.ndarray] = {}
    for old, a in feeds.items():
        name = names[old]
        if a.dtype.kind in "iu":
            lo, hi = int(a.min()), int(a.max()) + 1
            drawn[name] = H.hash_integers("input:" + name, a.shape, lo, hi, seed).astype(a.dtype)
        elif a.dtype.kind == "b":
            drawn[name] = H.hash_integers("input:" + name, a.shape, 0, 2, seed).astype(bool)
        else:
            x = a[np.isfinite(a)].astype(np.float64)
            mean, std = (float(x.mean()), float(x.std())) if x.size else (0.0, 1.0)
            drawn[name] = (H.hash_tensor("input:" + name, a.shape, "normal", std, "float32", seed)
                           + mean).astype(a.dtype)
    return m, drawn, names


# ---- writing the bundle -----------------------------------------------------------------------

def _versions() -> List[str]:
    out = []
    import platform

    out.append(f"python {platform.python_version()}, numpy {np.__version__}")
    for mod in ("onnx", "onnxruntime", "onnxconverter_common", "openvino"):
        try:
            m = __import__(mod)
            out.append(f"{mod} {getattr(m, '__version__', '?')}")
        except Exception:  # noqa: BLE001 - not installed: not used
            pass
    return out


def _npz(arrays: Dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def run_py_text(template: str, reference: str, candidate: str, **fields: Any) -> str:
    """A bundle's run.py: `template` (beside this module) filled with the guard's thresholds and
    `fields`. The .tflite and PyTorch templates take the ONNX one's judge() at "# @JUDGE@": the
    guard's verdict as run.py states it, one text for the three bundles."""
    from .._guard._metrics import Thresholds

    def read(name: str) -> str:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), name),
                  encoding="utf-8") as f:
            return f.read()

    t = Thresholds()
    text = read(template)
    if "# @JUDGE@" in text:
        onnx_text = read("repro_run.py.tmpl")
        judge = onnx_text[onnx_text.index("def judge("):onnx_text.index("\n\n\ndef main")]
        text = text.replace("# @JUDGE@", judge)
    return text.format(candidate=candidate, reference=reference, min_cosine=t.min_cosine,
                       max_rel_error=t.rel_error_limit(), max_norm_ratio=t.max_norm_ratio,
                       min_norm=t.min_norm, small_atol=t.small_atol, small_rtol=t.small_rtol,
                       **fields)


def _write_bundle(folder: str, sub: Any, feeds: Dict[str, np.ndarray],
                  expected: Dict[str, np.ndarray], reference: str, candidate: str,
                  readme: str) -> None:
    write_files(folder, {"model.onnx": sub.SerializeToString(), "inputs.npz": _npz(feeds),
                         "expected.npz": _npz(expected),
                         "run.py": run_py_text("repro_run.py.tmpl", reference, candidate,
                                               choices=", ".join(RUN_PY_BACKENDS)).encode("utf-8"),
                         "README.md": readme.encode("utf-8")})


def write_files(folder: str, files: Dict[str, bytes]) -> None:
    """Every bundle format: its files, then SHA256SUMS over them in the order given."""
    os.makedirs(folder, exist_ok=True)
    for name, data in files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    sums = "".join(f"{hashlib.sha256(d).hexdigest()}  {n}\n" for n, d in files.items())
    with open(os.path.join(folder, "SHA256SUMS"), "w", encoding="utf-8") as f:
        f.write(sums)


def run_bundle(folder: str, backend: Optional[str] = None, timeout: float = 300.0
               ) -> Tuple[int, str]:
    """(exit status, last line) of the bundle's run.py, run by this Python."""
    cmd = [sys.executable, os.path.join(folder, "run.py")]
    if backend:
        cmd += ["--backend", backend]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # no driftscope needed
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                       cwd=folder)
    lines = [ln for ln in (p.stdout or p.stderr).splitlines() if ln.strip()]
    return p.returncode, (lines[-1] if lines else "")


def _readme(model: str, at: str, reference: str, candidate: str, best: Attempt, sub: Any,
            attempts: List[Attempt], reproduces: bool, max_nodes: int, run_line: str,
            control_line: str, anonymized: Optional[str]) -> str:
    ops = ", ".join(n.op_type for n in sub.graph.node)
    intro = [f"Candidate `{candidate}` against reference `{reference}` on a subgraph of "
             f"{_counted(sub)} node(s) ({ops})" +
             ("" if anonymized else f" around `{at}` of `{os.path.basename(model)}`") + ".", ""]
    if not reproduces and not anonymized:
        intro += [f"No subgraph of at most {max_nodes} nodes reproduced the candidate's error: "
                  "this is the largest one tried; the error is inherited from further up.", ""]
    return readme_text(
        reproduces, intro, best, run_line, "float32", control_line, anonymized,
        ["python run.py                    # exit 1: it reproduces",
         "python run.py --backend float32  # the control: exit 0"],
        "Thresholds are driftscope guard's (cosine >= 0.99, relative error and norm "
        "ratio bounds); run.py needs numpy, onnx and the runtime only.",
        [f"- {len(a.nodes)} node(s): {a.status}"
         + (f" (cosine {a.cosine:.6f})" if a.cosine is not None else "") for a in attempts],
        _versions())


def readme_text(reproduces: bool, intro: List[str], best: Attempt, run_line: str,
                control: str, control_line: str, anonymized: Optional[str],
                run_commands: List[str], needs: str, search: List[str],
                versions: List[str]) -> str:
    """The README.md every bundle format writes: the verdict, `intro` (what the piece is), the
    measured lines, the anonymisation note, how to run it, the search and the versions."""
    verdict = "REPRODUCES" if reproduces else "DOES NOT REPRODUCE"
    lines = [f"# driftscope repro bundle: {verdict}", ""] + intro
    lines += ["## Measured", "",
              f"- the candidate's output against the reference's: {best.status}"
              + (f" (cosine {best.cosine:.6f}" if best.cosine is not None else "")
              + (f", relative error {best.rel_error:.4g})" if best.rel_error is not None
                 else ")" if best.cosine is not None else "")
              + (f": {best.detail}" if best.detail else ""),
              f"- `python run.py`: {run_line}",
              f"- `python run.py --backend {control}`: {control_line}", ""]
    if anonymized:
        lines += ["## Anonymized", "", anonymized, ""]
    lines += ["## Run", "", "```"] + run_commands + ["```", "", needs, "", "## Search", ""]
    lines += search
    lines += ["", "## Versions", ""] + [f"- {v}" for v in versions] + [""]
    return "\n".join(lines)


def _check_output(out: str, inputs: Sequence[str], force: bool) -> None:
    from .._cli import refuse_output_onto_inputs

    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise ReproError(f"-o {out}: the folder {parent} does not exist")
    if os.path.lexists(out) and not os.path.isdir(out):
        raise ReproError(f"-o {out}: exists and is not a folder")
    if os.path.isdir(out) and os.listdir(out) and not force:
        raise ReproError(f"-o {out}: the folder is not empty (use --force to write into it)")
    for name in BUNDLE_FILES + ("real-weights",):
        same = refuse_output_onto_inputs(os.path.join(out, name), inputs)
        if same:
            raise ReproError(same)
    real = os.path.realpath(out)
    for path in inputs:
        if os.path.dirname(os.path.realpath(path)) in (real, os.path.join(real, "real-weights")):
            if os.path.basename(path) in BUNDLE_FILES:
                raise ReproError(f"-o {out}: would overwrite the input {path}")


def _install(staged: str, out: str) -> None:
    """The staged bundle into place: renamed whole where `out` does not exist, else file by file
    (each a rename in the same file system)."""
    if not os.path.exists(out):
        os.replace(staged, out)
        return
    for name in os.listdir(staged):
        target = os.path.join(out, name)
        if os.path.isdir(target) and not os.path.islink(target):
            shutil.rmtree(target)
        os.replace(os.path.join(staged, name), target)
    os.rmdir(staged)


@contextlib.contextmanager
def staged_bundle(parent: str, out: str) -> Iterator[str]:
    """A hidden folder in `parent` to write a bundle in: installed at `out` (_install) when the
    block ends, removed when it fails."""
    staged = tempfile.mkdtemp(prefix=".repro-", dir=parent)
    try:
        yield staged
        _install(staged, out)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise


@contextlib.contextmanager
def own_forker(backends: Sequence[str]) -> Iterator[None]:
    """This thread's fork server for `backends` while a bundle is searched and written (the
    guard's), the caller's own restored after."""
    from .._guard._process import _local, _start_forker

    previous = getattr(_local, "forker", None)
    _local.forker = _start_forker(list(backends))
    try:
        yield
    finally:
        if _local.forker is not None:
            _local.forker.close()
        _local.forker = previous


def make_repro(model: str, reference: str, candidate: str, at: str, out: str,
               inputs: Sequence[str] = (), anonymize_: bool = False, seed: int = 0,
               max_nodes: int = 16, force: bool = False, timeout: float = 300.0,
               log=lambda s: None, hasher: Any = None) -> ReproResult:
    """Writes the bundle; `hasher` (driftscope.reference) is needed with anonymize_."""
    import onnx

    from .._guard.backends.registry import BACKENDS

    for role, b in (("--reference", reference), ("--candidate", candidate)):
        if b not in BACKENDS:
            raise ReproError(f"{role} {b}: not a backend (choose from "
                             f"{', '.join(n for n, x in BACKENDS.items() if x.family == 'onnx')})")
        if BACKENDS[b].family != "onnx":
            raise ReproError(f"{role} {b}: not an ONNX backend (repro writes ONNX bundles)")
        if b not in RUN_PY_BACKENDS:
            raise ReproError(f"{role} {b}: run.py cannot rebuild it with the runtime's own API "
                             f"(it rebuilds {', '.join(RUN_PY_BACKENDS[1:])})")
        why = BACKENDS[b].unavailable()
        if why:
            raise ReproError(f"{role} {b}: unavailable: {why}")
    if anonymize_ and hasher is None:
        raise ReproError("anonymizing needs the hash initialiser (hasher=driftscope.reference)")
    if max_nodes < 1:
        raise ReproError(f"--max-nodes {max_nodes}: must be at least 1")
    if not os.path.isfile(model):
        raise ReproError(f"{model}: not a file")
    _check_output(out, [model] + [s.partition("=")[2] or s for s in inputs], force)
    try:
        proto = onnx.load(model)
    except Exception as err:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise ReproError(f"{model}: not a valid ONNX file ({str(err).splitlines()[0]})") from None
    start, output = _node_of(proto.graph, at)
    feeds = _load_feeds(proto, inputs, seed)
    values = _capture(proto, feeds, f"'{model}'")
    parent = os.path.dirname(os.path.abspath(out))
    result = ReproResult(False)
    with own_forker([reference, candidate]):
        with tempfile.TemporaryDirectory(prefix="driftscope-repro-") as work:
            best, sub, sub_feeds, ref_out, attempts = search(
                proto, values, start, output, reference, candidate, max_nodes, work, seed,
                timeout, log)
            result.attempts, result.reproduces = attempts, best.reproduces
            result.nodes = [n.name for n in sub.graph.node]
            with staged_bundle(parent, out) as staged:
                real = os.path.join(staged, "real-weights") if anonymize_ else staged
                expected = {o.name: ref_out[o.name] for o in sub.graph.output}
                _write_bundle(real, sub, sub_feeds, expected, reference, candidate, "")
                run = run_bundle(real, timeout=timeout)
                control = run_bundle(real, "float32", timeout=timeout)
                result.run_py_exit = run[0]
                readme = _readme(model, at, reference, candidate, best, sub, attempts,
                                 best.reproduces, max_nodes, f"exit {run[0]}: {run[1]}",
                                 f"exit {control[0]}: {control[1]}", None)
                _write_bundle(real, sub, sub_feeds, expected, reference, candidate, readme)
                if anonymize_:
                    anon, drawn, _ = anonymize(sub, sub_feeds, seed, hasher, work, timeout)
                    path = os.path.join(work, "anon.onnx")
                    onnx.save(anon, path)
                    ref_anon = _run_on(reference, path, drawn, seed, timeout)
                    expected = {o.name: ref_anon[o.name] for o in anon.graph.output}
                    _write_bundle(staged, anon, drawn, expected, reference, candidate, "")
                    arun = run_bundle(staged, timeout=timeout)
                    acontrol = run_bundle(staged, "float32", timeout=timeout)
                    result.anonymized_exit = arun[0]
                    result.anonymized = arun[0] == 1
                    note = (f"Node and tensor names replaced (n0.., t0..); weights replaced by "
                            f"the hash initialiser (docs/references.md, seed {seed}); inputs "
                            f"re-drawn from it at the reference inputs' mean and spread. "
                            f"Re-run: {'it still reproduces' if result.anonymized else 'it NO LONGER reproduces: the fault needs the real weights (or inputs); the real-weights bundle, which reproduces, is kept apart in real-weights/ (not for sharing)'}.")
                    cand_v = _run_on(candidate, path, drawn, seed, timeout)
                    out_name = anon.graph.output[0].name
                    v = _judge(out_name, ref_anon[out_name], cand_v[out_name])
                    anon_best = Attempt([n.name for n in anon.graph.node], v.status, v.detail,
                                        v.cosine, v.rel_error)
                    readme = _readme(model, at, reference, candidate, anon_best, anon,
                                     [anon_best], result.anonymized, max_nodes,
                                     f"exit {arun[0]}: {arun[1]}",
                                     f"exit {acontrol[0]}: {acontrol[1]}", note)
                    _write_bundle(staged, anon, drawn, expected, reference, candidate, readme)
                    if result.anonymized:
                        shutil.rmtree(real)  # shareable: the real weights stay home
    return result


def cli_main(argv: Optional[Sequence[str]] = None, hasher: Any = None,
             makers: Optional[Dict[str, Any]] = None) -> int:
    """`python -m driftscope repro`; `hasher` is driftscope.reference (for --anonymize);
    `makers` the make_repro of the other formats ({"tflite": ..., "torch": ...}: repro_cli.py
    hands them in, as they build on this module)."""
    from .._cli import parse_args

    p = argparse.ArgumentParser(
        prog=PROG, description="Write the smallest subgraph of an ONNX or .tflite model (or, with "
        "--model FILE.py:FN, the smallest PyTorch module, exported with torch.export) that "
        "reproduces a "
        "backend's error at TENSOR as a standalone bundle (model.onnx, inputs.npz, "
        "expected.npz, run.py, README.md, SHA256SUMS). Exit 0: written, it reproduces; 1: "
        "written, it does not (no subgraph of --max-nodes nodes, or the anonymized one); "
        "2: bad input.")
    p.add_argument("model", nargs="?", help="the ONNX model, or a .tflite model "
                   "(repro_tflite.py)")
    p.add_argument("--model", dest="torch_model", metavar="FILE.py:FN",
                   help="a PyTorch model instead: FN returns (model, inputs) as for guard "
                        "--model; TENSOR is then a module path (repro_torch.py)")
    p.add_argument("--reference", default=None, help="the reference backend (guard's names; "
                   "default ort, litert-ref for a .tflite model, torch for --model)")
    p.add_argument("--candidate", required=True, help="the backend whose error to reproduce "
                   "(ort-int8, ort-fp16, openvino...)")
    p.add_argument("--at", required=True, metavar="TENSOR",
                   help="the tensor as the ONNX Runtime recorder names it (a node name; "
                        "NODE:OUTPUT for another output)")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="the bundle's folder")
    p.add_argument("--input", "-i", action="append", default=[], metavar="NAME=FILE.npy",
                   help="a model input (repeat; FILE.npz alone feeds each array by name); the "
                        "others are generated as guard generates them")
    p.add_argument("--anonymize", action="store_true",
                   help="replace names, weights and inputs by hash-initialised ones and re-run "
                        "the bundle to prove it still reproduces")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated inputs and the "
                   "hash initialiser (recorded in the README)")
    p.add_argument("--max-nodes", type=int, default=16,
                   help="grow the subgraph to at most this many nodes (default 16)")
    p.add_argument("--force", action="store_true", help="write into a non-empty folder")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds each backend run may take (default 300)")
    try:
        args = parse_args(p, argv)
    except SystemExit as e:
        return int(e.code) if isinstance(e.code, int) else 2
    from .._guard._inputs import InputError
    from .._text import printable

    make, model = make_repro, args.model
    makers = makers or {}
    kind = "torch" if args.torch_model else "tflite" if (
        args.model and args.model.lower().endswith(".tflite")) else ""
    if kind and kind not in makers:
        print(f"{PROG}: error: this entry point writes ONNX bundles only", file=sys.stderr)
        return 2
    if kind:
        make = makers[kind]
    if args.torch_model:
        model = args.torch_model
        if args.model:
            print(f"{PROG}: error: give either MODEL or --model FILE.py:FN, not both",
                  file=sys.stderr)
            return 2
    if not model:
        print(f"{PROG}: error: a model is needed (MODEL.onnx, MODEL.tflite or --model "
              "FILE.py:FN)", file=sys.stderr)
        return 2
    reference = args.reference or ("torch" if args.torch_model else "litert-ref"
                                   if make is not make_repro else "ort")
    try:
        r = make(model, reference, args.candidate, args.at, args.output,
                 args.input, args.anonymize, args.seed, args.max_nodes, args.force,
                 args.timeout, log=lambda s: print(f"{PROG}: {printable(s)}",
                                                  file=sys.stderr), hasher=hasher)
    except (ReproError, InputError) as err:  # InputError: an --input the model does not take
        print(f"{PROG}: error: {printable(_one_line(err))}", file=sys.stderr)
        return 2
    except (RuntimeError, OSError) as err:  # a backend that failed; a file that cannot be written
        print(f"{PROG}: error: {printable(_one_line(err))}", file=sys.stderr)
        return 2
    except Exception as err:  # noqa: BLE001
        if kind != "torch":
            raise
        # The user's FN may return anything ("abc" for a model, whose .eval() fails): one line
        # naming it, as guard and replay say it (_guard/_run.py, _replay/cli.py run_part).
        print(f"{PROG}: error: --model {model}: {type(err).__name__}: "
              f"{printable(_one_line(err))}", file=sys.stderr)
        return 2
    n = len([x for x in r.nodes])
    if not r.reproduces:
        print(f"{PROG}: does not reproduce: no subgraph of at most {args.max_nodes} node(s) "
              f"around {printable(args.at)} shows {args.candidate}'s error (the largest, "
              f"{n} node(s), written to {args.output} marked so)", file=sys.stderr)
        return 1
    print(f"{PROG}: wrote a {n}-node bundle to {args.output}; run.py exit {r.run_py_exit}",
          file=sys.stderr)
    if r.anonymized is not None:
        if not r.anonymized:
            print(f"{PROG}: the anonymized bundle does not reproduce (run.py exit "
                  f"{r.anonymized_exit}); the real-weights bundle is in "
                  f"{os.path.join(args.output, 'real-weights')}", file=sys.stderr)
            return 1
        print(f"{PROG}: the anonymized bundle reproduces (run.py exit {r.anonymized_exit})",
              file=sys.stderr)
    return 0
