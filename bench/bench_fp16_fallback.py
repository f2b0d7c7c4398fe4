"""float16 fallbacks side by side: NVIDIA ModelOpt AutoCast against `driftscope guard`'s FP32
fallback, on the same models and the same inputs, each result evaluated where float16 is computed
(issue 32 item 4; docs/howto/guard.md, "Side by side with AutoCast").

    .venv/bin/python bench/bench_fp16_fallback.py [--autocast-python PY] [--fallback-runs 20]
                                                  [--models overflow,vanish,...] [--work DIR]

Per model:

* the float32 model's outputs with ONNX Runtime (CPU, default options): the reference;
* `convert`: onnxconverter-common alone (driftscope.onnxruntime.to_float16, nothing kept on
  purpose): what both tools start from;
* `autocast`: `python -m modelopt.onnx.autocast --low_precision_type fp16 --keep_io_types
  --providers cpu`, in its default mode (it draws random inputs to measure the ranges it keeps in
  float32, data_max 512) and `autocast+cal` with `--calibration_data` the bench's own inputs;
* `guard`: `driftscope guard MODEL --backends ort-fp16-exact --input ... --out DIR` (the row that
  computes float16; its fallback is searched and verified there), capped by --fallback-runs; the
  kept variant is the one guard wrote (DIR/ort-fp16-exact/fallback-variant.onnx), or, when the
  search did not pass, the one it ended on, rebuilt from the JSON's nodes by ort-fp16's own loader.

Every result is evaluated by one evaluator: driftscope._guard._fp16_arith.emulate (the model run
in float32 by ONNX Runtime with every float16 value rounded to float16 where it is produced, as a
GPU computes float16 with float32 accumulation), against the reference in float64: the worst
output's cosine, max |diff| and its norm ratio, the count of NaN/Inf where the reference is
finite, and guard's own verdict rule (driftscope._guard._metrics, default thresholds) as `status`.

Nodes kept in float32, the same rule for both tools: a node of the source model, other than a
Constant, that has a floating-point input or output, and whose floating-point inputs and outputs
in the tool's model (matched by node name, else by its first output) are all float32. Nodes the
converter adds (Casts) are not counted. Wall time: each tool's command as a user runs it (its
interpreter start and imports included).

AutoCast runs in its own virtual environment (bench/autocast-venv.sh makes it: CPU torch,
nvidia-modelopt with --no-deps and the pure-Python packages its ONNX part imports). The real
model comes from PyPI: rapidocr-onnxruntime 1.4.4's wheel (pip download --no-deps, cached in
build/bench-models/). silero-vad's models are not in the table: they run their network inside
`If` branches, which the float16 evaluator refuses (the nodes inside would not be rounded).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
import zipfile
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The tree's own package first (an installed one may predate ort-fp16-exact); the installed one
# where the tree's cannot be imported (no compiled core in python/).
sys.path.insert(0, os.path.join(ROOT, "python"))
try:
    import driftscope  # noqa: F401
    import driftscope._guard._fp16_arith  # noqa: F401
except ImportError:
    sys.path.pop(0)
    for m in [m for m in sys.modules if m == "driftscope" or m.startswith("driftscope.")]:
        del sys.modules[m]
    import driftscope  # noqa: F401

MODELS = "overflow,vanish,constant,tiny-encoder,minilm,ocr-det"
OCR_WHEEL = "rapidocr-onnxruntime==1.4.4"
OCR_MEMBER = "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx"


# ---------------------------------------------------------------------------------------------
# Models and their inputs (one sample; the same arrays go to every tool and to the evaluator)

def _shape_inferred(src: str, dst: str) -> None:
    """AutoCast's onnx.checker rejects an output without a shape ("Field 'shape' of 'type' is
    required but missing"), which the tests' models leave open; both tools get this same file."""
    import onnx

    m = onnx.shape_inference.infer_shapes(onnx.load(src), strict_mode=True)
    onnx.save(m, dst)


def _test_model(kind: str, work: str) -> Tuple[str, Dict[str, np.ndarray]]:
    sys.path.insert(0, os.path.join(ROOT, "tests", "python", "models"))
    import guard_models as gm

    raw = os.path.join(work, f"{kind}.raw.onnx")
    getattr(gm, f"{kind}_onnx")(raw)
    path = os.path.join(work, f"{kind}.onnx")
    _shape_inferred(raw, path)
    x = np.random.default_rng(0).standard_normal((1, 8)).astype(np.float32)
    return path, {"x": x}


def _tiny_encoder(work: str) -> Tuple[str, Dict[str, np.ndarray]]:
    """The demo's encoder (examples/tiny_encoder.cpp, in PyTorch in the tests) exported to ONNX:
    its LayerNorms compute E[x^2] - E[x]^2 of ~6000 in the tensor's dtype."""
    import torch

    sys.path.insert(0, os.path.join(ROOT, "tests", "python", "models"))
    import tiny_encoder_torch as te

    model, tokens = te.build()
    path = os.path.join(work, "tiny-encoder.onnx")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (tokens,), path, input_names=["tokens"],
                          output_names=["logits"], opset_version=17, dynamo=False)
    return path, {"tokens": tokens.numpy()}


def _minilm(work: str) -> Tuple[str, Dict[str, np.ndarray]]:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_guard import export_minilm

    path = os.path.join(work, "minilm.onnx")
    export_minilm(path)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 30522, (1, 16)).astype(np.int64)
    return path, {"input_ids": ids, "attention_mask": np.ones((1, 16), np.int64)}


def _ocr_det(work: str) -> Tuple[str, Dict[str, np.ndarray]]:
    """PP-OCRv4's text detector as rapidocr-onnxruntime ships it (BatchNorm statistics up to
    9.8e7 in Constant nodes), fed a synthetic page: dark strokes in lines on white,
    normalised as the package does, (x/255 - 0.5)/0.5."""
    cache = os.path.join(ROOT, "build", "bench-models")
    os.makedirs(cache, exist_ok=True)
    wheels = [f for f in os.listdir(cache) if f.startswith("rapidocr_onnxruntime-1.4.4")]
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", OCR_WHEEL,
                        "-d", cache], check=True)
        wheels = [f for f in os.listdir(cache) if f.startswith("rapidocr_onnxruntime-1.4.4")]
    path = os.path.join(work, "ch_PP-OCRv4_det_infer.onnx")
    with zipfile.ZipFile(os.path.join(cache, wheels[0])) as z, open(path, "wb") as f:
        f.write(z.read(OCR_MEMBER))
    rng = np.random.default_rng(0)
    page = np.full((192, 384), 255.0, np.float32)
    for top in range(16, 176, 24):  # text lines of 12-pixel glyph strokes
        x = 12
        while x < 360:
            w = int(rng.integers(2, 8))
            page[top:top + 12, x:x + w] = rng.uniform(0, 80)
            x += w + int(rng.integers(2, 10))
    img = np.repeat(page[None, None], 3, axis=1)
    return path, {"x": ((img / 255.0 - 0.5) / 0.5).astype(np.float32)}


def make_model(name: str, work: str) -> Tuple[str, Dict[str, np.ndarray]]:
    if name in ("overflow", "vanish", "constant"):
        return _test_model(name, work)
    return {"tiny-encoder": _tiny_encoder, "minilm": _minilm, "ocr-det": _ocr_det}[name](work)


# ---------------------------------------------------------------------------------------------
# The one evaluator and the one node-counting rule

def _reference(path: str, feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    import onnxruntime as ort

    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))


def fp16_computed(model: Any, feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """`model` (a float16 / mixed model) with float16 computed: guard's ort-fp16-exact evaluator."""
    import onnx
    import onnxruntime as ort

    from driftscope._guard._fp16_arith import emulate

    emulated, _ = emulate(model, onnx.TensorProto.FLOAT16)
    o = ort.SessionOptions()
    o.log_severity_level = 3
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(emulated.SerializeToString(), o, providers=["CPUExecutionProvider"])
    names = [i.name for i in s.get_inputs()]
    return dict(zip([x.name for x in s.get_outputs()],
                    s.run(None, {k: v for k, v in feeds.items() if k in names})))


def evaluate(path: str, ref: Dict[str, np.ndarray], got: Dict[str, np.ndarray]
             ) -> Dict[str, Any]:
    """The worst output by guard's verdict rule (its default thresholds, argmax over the class
    axes guard finds in the graph), with its cosine, max |diff|, norm ratio; and the NaN/Inf
    count over every output."""
    from driftscope._guard._classaxis import class_axes
    from driftscope._guard._metrics import Thresholds, judge_all

    t = Thresholds(class_axes=class_axes("onnx", path, None))
    worst = judge_all([ref], [{k: v.astype(np.float32) for k, v in got.items()}], t)
    bad = 0
    for k, r in ref.items():
        if k in got and r.dtype.kind == "f":
            bad += int(np.count_nonzero(~np.isfinite(got[k]) & np.isfinite(r)))
    return {"status": worst.status if worst else "PASS",
            "cosine": None if worst is None else worst.cosine,
            "max_diff": None if worst is None else worst.max_diff,
            "norm_ratio": (None if worst is None or not worst.norm_ref
                           else worst.norm_cand / worst.norm_ref),
            "nonfinite": bad}


def _float_kinds(model: Any) -> Dict[str, int]:
    from driftscope._guard._fp16_arith import _types

    return _types(model)


FLOATS = (1, 10, 11, 16)  # FLOAT, FLOAT16, DOUBLE, BFLOAT16


def float_nodes(source: Any) -> List[Tuple[str, str]]:
    """(name, first output) of the source's nodes the rule counts: not Constant, some float value."""
    t = _float_kinds(source)
    return [(n.name, n.output[0] if n.output else "") for n in source.graph.node
            if n.op_type != "Constant"
            and any(t.get(x) in FLOATS for x in list(n.input) + list(n.output) if x)]


def kept_float32(source: Any, tool: Any) -> int:
    t = _float_kinds(tool)
    by_name = {n.name: n for n in tool.graph.node if n.name}
    by_out = {n.output[0]: n for n in tool.graph.node if n.output}
    kept = 0
    for name, out in float_nodes(source):
        n = by_name.get(name) if name else None
        n = n or by_out.get(out)
        if n is None:
            continue
        kinds = [t.get(x) for x in list(n.input) + list(n.output) if x]
        fl = [k for k in kinds if k in FLOATS]
        if fl and all(k == 1 for k in fl):
            kept += 1
    return kept


# ---------------------------------------------------------------------------------------------
# The tools

def run_autocast(py: str, path: str, out: str, calibration: Optional[str]) -> Tuple[float, str]:
    cmd = [py, "-m", "modelopt.onnx.autocast", "--onnx_path", path, "--output_path", out,
           "--low_precision_type", "fp16", "--keep_io_types", "--providers", "cpu",
           "--log_level", "WARNING"]
    if calibration:
        cmd += ["--calibration_data", calibration]
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode != 0 or not os.path.isfile(out):
        lines = [ln for ln in (p.stderr + p.stdout).splitlines() if ln.strip()]
        err = next((ln for ln in reversed(lines) if "Error" in ln or "Exception" in ln),
                   lines[-1] if lines else f"exit {p.returncode}")
        return wall, err.strip()[:160]
    return wall, ""


def run_guard(path: str, inputs: Dict[str, str], work: str, runs: int, guard_cmd: List[str]
              ) -> Tuple[float, Dict[str, Any], str]:
    out, js = os.path.join(work, "guard-out"), os.path.join(work, "guard.json")
    cmd = guard_cmd + ["guard", path, "--backends", "ort-fp16-exact", "--runs", "1",
                       "--fallback-runs", str(runs), "--out", out, "--json", js]
    for k, v in inputs.items():
        cmd += ["--input", f"{k}={v}"]
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if not os.path.isfile(js):
        return wall, {}, (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
    row = next(b for b in json.load(open(js))["backends"] if b["name"] == "ort-fp16-exact")
    return wall, row, ""


def guard_variant(path: str, row: Dict[str, Any], work: str) -> Tuple[Any, str]:
    """The float16 model guard ends with, and how it ended."""
    import onnx

    from driftscope._guard._backends import BACKENDS

    fb = row.get("fallback")
    if row.get("status") == "PASS" or not fb:
        why = "passes as converted" if row.get("status") == "PASS" else "no fallback"
        nodes: List[str] = []
    else:
        files = fb.get("files") or {}
        if files.get("variant") and os.path.isfile(files["variant"]):
            return onnx.load(files["variant"]), ("verified" if fb["verified"]
                                                 else "NOT verified")
        nodes = [n["node"] for n in fb.get("nodes", [])]
        why = "NOT verified" if nodes else "no fallback"
    d = os.path.join(work, "rebuild")
    os.makedirs(d, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return BACKENDS["ort-fp16"].load(path, d, 0, keep_float32=nodes).variant_proto, why


# ---------------------------------------------------------------------------------------------

def _fmt(x: Optional[float], spec: str) -> str:
    return "-" if x is None else format(x, spec)


def bench_model(name: str, work: str, ac_py: Optional[str], runs: int,
                guard_cmd: List[str]) -> List[Dict[str, Any]]:
    import onnx

    from driftscope.onnxruntime import to_float16

    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    path, feeds = make_model(name, d)
    source = onnx.load(path)
    total = len(float_nodes(source))
    files = {}
    for k, v in feeds.items():
        files[k] = os.path.join(d, f"in-{re.sub(r'[^A-Za-z0-9_]', '_', k)}.npy")
        np.save(files[k], v)
    npz = os.path.join(d, "inputs.npz")
    np.savez(npz, **feeds)
    ref = _reference(path, feeds)
    rows: List[Dict[str, Any]] = []

    def add(tool: str, model: Any, wall: Optional[float], note: str) -> None:
        r = {"model": name, "tool": tool, "nodes": total, "wall_s": wall, "note": note}
        if model is not None:
            r["kept"] = kept_float32(source, model)
            try:
                r.update(evaluate(path, ref, fp16_computed(model, feeds)))
            except Exception as e:  # noqa: BLE001 - the row says why
                r["note"] = (note + "; " if note else "") + f"evaluator: {e}"[:160]
        rows.append(r)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        add("convert", to_float16(path), None, "onnxconverter-common alone")
    if ac_py:
        for tool, cal in (("autocast", None), ("autocast+cal", npz)):
            out = os.path.join(d, f"{tool}.onnx")
            wall, err = run_autocast(ac_py, path, out, cal)
            add(tool, None if err else onnx.load(out), wall, err)
    wall, row, err = run_guard(path, files, d, runs, guard_cmd)
    if err:
        add("guard", None, wall, err)
    else:
        variant, how = guard_variant(path, row, d)
        fb = row.get("fallback") or {}
        note = how + (f" ({fb.get('runs')} builds)" if fb.get("runs") else "")
        if how == "no fallback" and fb.get("error"):
            note += ": " + fb["error"][:120]
        add("guard", variant, wall, note)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--autocast-python", help="the python of a venv with nvidia-modelopt "
                   "(default: the one bench/autocast-venv.sh makes)")
    p.add_argument("--fallback-runs", type=int, default=20, help="guard's cap (its default)")
    p.add_argument("--models", default=MODELS)
    p.add_argument("--bin", help="the driftscope executable (default: python -m driftscope)")
    p.add_argument("--work", help="keep every file here instead of a temporary folder")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    ac_py = args.autocast_python
    if not ac_py:
        try:
            ac_py = subprocess.run([os.path.join(ROOT, "bench", "autocast-venv.sh")],
                                   capture_output=True, text=True, check=True
                                   ).stdout.strip().splitlines()[-1]
        except (subprocess.CalledProcessError, IndexError) as e:
            print(f"AutoCast unavailable (bench/autocast-venv.sh failed: {e}); guard only")
            ac_py = None
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(driftscope.__file__)))
    os.environ["PYTHONPATH"] = pkg + (os.pathsep + os.environ["PYTHONPATH"]
                                      if os.environ.get("PYTHONPATH") else "")
    os.environ.setdefault("DRIFTSCOPE_PYTHON", sys.executable)
    guard_cmd = [args.bin] if args.bin else [sys.executable, "-m", "driftscope"]
    work = args.work or tempfile.mkdtemp(prefix="ds-fp16-bench-")
    rows: List[Dict[str, Any]] = []
    try:
        print(f"{'model':<13} {'tool':<13} {'kept':>9}  {'cosine':>9} {'max diff':>9} "
              f"{'norm':>6} {'NaN/Inf':>7}  {'status':<22} {'wall':>7}  note")
        for name in args.models.split(","):
            for r in bench_model(name, work, ac_py, args.fallback_runs, guard_cmd):
                rows.append(r)
                kept = f"{r['kept']}/{r['nodes']}" if "kept" in r else "-"
                wall = "-" if r["wall_s"] is None else f"{r['wall_s']:.1f} s"
                print(f"{r['model']:<13} {r['tool']:<13} {kept:>9}  "
                      f"{_fmt(r.get('cosine'), '.6f'):>9} {_fmt(r.get('max_diff'), '.3g'):>9} "
                      f"{_fmt(r.get('norm_ratio'), '.3f'):>6} "
                      f"{r.get('nonfinite', '-'):>7}  {r.get('status', 'FAILED'):<22} "
                      f"{wall:>7}  {r['note']}", flush=True)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
