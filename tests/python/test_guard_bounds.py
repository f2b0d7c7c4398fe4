"""Issue 23 items 2, 7 and 8: sizes a model declares are bounded before anything is allocated,
and no output names a file the command reads, an ONNX model's external data included.

  item 2  guard sizes generated inputs from declared dims: a budget (--max-input-bytes, 1 GiB by
          default) checked in Python ints before numpy allocates; exit 2, one line
  item 7  guard's --json/--markdown/--html and reference init's -o onto the model's external
          data (the same path, or a hard link to it), --input, --reference-model's external data
  item 8  reference init trusts declared initializer dims: dims that disagree with the data held
          are refused, and the rewritten initializers are bounded (--max-weight-bytes)

Every case runs the built `driftscope` command through a small wrapper process that caps its
address space (RLIMIT_AS, so the code before the fix failed with MemoryError instead of taking
the machine's memory) and reports the peak RSS of everything it started (RUSAGE_CHILDREN of a
fresh process counts only its own descendants)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import driftscope  # noqa: E402
from driftscope._guard import _inputs as I  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("DRIFTSCOPE_BIN", ROOT / "build" / "dev" / "driftscope")).absolute()
AS_LIMIT = 3 << 30      # the wrapper's address-space cap: the runtimes start well within it
RSS_LIMIT_MB = 1000     # a refused model costs what the interpreter and its imports cost

WRAPPER = r"""
import resource, subprocess, sys
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[2]), int(sys.argv[2])))
proc = subprocess.run(sys.argv[3:])
with open(sys.argv[1], "w") as f:
    f.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(proc.returncode)
"""


def run(tmp_path, *args, limit=AS_LIMIT):
    """(CompletedProcess, peak RSS of the command and its children in MB)."""
    env = dict(os.environ, DRIFTSCOPE_PYTHON=sys.executable, DRIFTSCOPE_GUARD_PLUGINS="")
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in [str(Path(driftscope.__file__).parents[1]), env.get("PYTHONPATH", "")] if p)
    rss = tmp_path / "maxrss"
    proc = subprocess.run([sys.executable, "-c", WRAPPER, str(rss), str(limit), str(BIN),
                           *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=300)
    return proc, int(rss.read_text()) / 1024


def digest(*paths):
    return [hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in paths]


def save(model, path, **kw):
    model.ir_version = 8
    onnx.save(model, str(path), **kw)


def identity_model(path, shape, elem=TensorProto.FLOAT):
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", elem, shape)],
                              [helper.make_tensor_value_info("y", elem, shape)])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def external_model(folder, name="ext.onnx", weights="weights.bin"):
    """x[1,8] @ w[8,8], w stored in the external file `weights` next to the model."""
    w = numpy_helper.from_array(np.arange(64, dtype=np.float32).reshape(8, 8) / 64, "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
                              [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    save(model, folder / name, save_as_external_data=True, all_tensors_to_one_file=True,
         location=weights, size_threshold=0)
    return folder / name, folder / weights


def one_error_line(proc):
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


# -- item 2: generated inputs ----------------------------------------------------------------------

@pytest.mark.parametrize("shape,size", [
    ([24000, 16000], "1,536,000,000 bytes (1.43 GiB)"),        # 22 GB RSS before
    ([2 ** 40], "4,398,046,511,104 bytes (4 TiB)"),             # MemoryError traceback, exit 1
    ([2 ** 62], "18,446,744,073,709,551,616 bytes (16 EiB)"),   # ValueError traceback, exit 1
])
def test_guard_refuses_inputs_over_the_budget(tmp_path, shape, size):
    model = identity_model(tmp_path / "big.onnx", shape)
    before = digest(model)
    proc, rss = run(tmp_path, "guard", model, "--backends", "ort", "--no-progress")
    line = one_error_line(proc)
    assert proc.returncode == 2, proc.stderr
    dims = ", ".join(map(str, shape))
    assert line.startswith(f"driftscope guard: error: input 'x' float32 [{dims}] would be "
                           f"generated as {size}, more than the 1,073,741,824 bytes (1 GiB) "
                           "allowed (raise it with --max-input-bytes SIZE"), line
    assert proc.stdout == ""
    assert digest(model) == before
    assert rss < RSS_LIMIT_MB, rss


def test_guard_budget_counts_samples_and_steps_and_the_flag_raises_it(tmp_path):
    model = identity_model(tmp_path / "dyn.onnx", ["seq"])
    # 40M float32 = 160 MB per sample: 4 samples fit in 1 GiB, 8 do not.
    proc, _ = run(tmp_path, "guard", model, "--backends", "ort", "--dim", "seq=40000000",
                  "--samples", "8", "--runs", "1", "--no-progress")
    line = one_error_line(proc)
    assert proc.returncode == 2
    assert ("the generated inputs of 8 sample(s) x 1 step(s) (the largest: input 'x' float32 "
            "[40000000], 160,000,000 bytes (153 MiB)) would take 1,280,000,000 bytes") in line
    assert "--max-input-bytes 2G" in line
    # The flag's value is the budget: 100M refuses one sample of 160 MB, 2G lets 8 run.
    proc, _ = run(tmp_path, "guard", model, "--backends", "ort", "--dim", "seq=40000000",
                  "--max-input-bytes", "100M", "--no-progress")
    assert proc.returncode == 2 and "more than the 104,857,600 bytes (100 MiB)" in proc.stderr
    proc, _ = run(tmp_path, "guard", model, "--backends", "ort", "--dim", "seq=1000",
                  "--samples", "8", "--runs", "1", "--max-input-bytes", "2G", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    proc, _ = run(tmp_path, "guard", model, "--max-input-bytes", "lots")
    assert proc.returncode == 2 and "--max-input-bytes: 'lots': expected a size" in \
        one_error_line(proc)


def test_make_samples_checks_before_allocating_and_never_leaks_numpy_errors():
    spec = I.InputSpec("x", np.dtype(np.float32), [2 ** 62])
    with pytest.raises(I.InputError, match=r"input 'x' float32 \[4611686018427387904\] would be"):
        I.make_samples([spec], {}, {}, 0, 1)
    # A budget raised past what numpy can address: numpy's own refusal, as a one-line InputError.
    with pytest.raises(I.InputError, match="cannot allocate it"):
        I.make_samples([spec], {}, {}, 0, 1, max_bytes=1 << 70)
    with I.input_budget(100):
        with pytest.raises(I.InputError, match="more than the 100 bytes allowed"):
            I.make_samples([I.InputSpec("x", np.dtype(np.float32), [26])], {}, {}, 0, 1)
    assert I.make_samples([I.InputSpec("x", np.dtype(np.float32), [25])], {}, {}, 0, 1,
                          max_bytes=100)[0][0]["x"].shape == (25,)
    assert [I.parse_size(s) for s in ("512M", "2G", "1.5GiB", "4096", "1k")] == \
        [512 << 20, 2 << 30, 3 << 29, 4096, 1024]


# -- item 7: outputs onto external data ------------------------------------------------------------

def test_guard_reports_never_replace_external_data(tmp_path):
    model, weights = external_model(tmp_path)
    link = tmp_path / "link.bin"
    os.link(weights, link)
    plain = identity_model(tmp_path / "plain.onnx", [1, 8])
    files = [model, weights, link]
    before = digest(*files)
    for flag, out, extra in [("--json", weights, []), ("--markdown", weights, []),
                             ("--html", link, []), ("--json", link, []),
                             # the reference model's external data is read too
                             ("--json", link, ["--reference-model", model])]:
        target = plain if extra else model
        proc, _ = run(tmp_path, "guard", target, "--backends", "ort", "--runs", "1",
                      "--no-progress", flag, out, *extra)
        line = one_error_line(proc)
        assert proc.returncode == 2
        assert line == (f"driftscope guard: error: {flag} {out} is the input file {weights} "
                        f"(external data of {model}); choose another name (driftscope never "
                        "modifies its inputs)"), line
        assert digest(*files) == before
    # --input files are inputs too (named by the flag that reads them)
    npy = tmp_path / "x.npy"
    np.save(npy, np.ones((1, 8), np.float32))
    proc, _ = run(tmp_path, "guard", plain, "--input", f"x={npy}", "--json", npy)
    assert proc.returncode == 2 and f"is the input file {npy} (--input)" in one_error_line(proc)
    # and the model still runs, its report written elsewhere
    os.unlink(link)
    proc, _ = run(tmp_path, "guard", model, "--backends", "ort", "--runs", "1", "--no-progress",
                  "--json", tmp_path / "report.json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "report.json").read_text())["verdict"]
    assert digest(model, weights) == before[:2]


def test_reference_init_never_replaces_external_data(tmp_path):
    model, weights = external_model(tmp_path)
    before = digest(model, weights)
    proc, _ = run(tmp_path, "reference", "init", model, "-o", weights)
    assert proc.returncode == 2
    assert one_error_line(proc) == (
        f"driftscope reference init: error: -o {weights} is the input file {weights} (external "
        f"data of {model}); choose another name (driftscope never modifies its inputs)")
    assert digest(model, weights) == before
    link = tmp_path / "link.bin"
    os.link(weights, link)
    proc, _ = run(tmp_path, "reference", "init", model, "-o", link)
    assert proc.returncode == 2
    assert f"-o {link} is the input file {weights}" in one_error_line(proc)
    assert digest(model, weights, link) == before + before[1:]
    os.unlink(link)
    proc, _ = run(tmp_path, "reference", "init", model, "-o", tmp_path / "hash.onnx")
    assert proc.returncode == 0, proc.stderr
    assert digest(model, weights) == before


# -- item 8: reference init and declared initializer dims ------------------------------------------

def _matmul_with(path, w):
    k, n = w.dims
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])],
                              [w])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_reference_init_refuses_dims_without_data(tmp_path):
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[20000, 20000])
    model = _matmul_with(tmp_path / "nodata.onnx", w)
    assert model.stat().st_size < 120
    before = digest(model)
    out = tmp_path / "out.onnx"
    proc, rss = run(tmp_path, "reference", "init", model, "-o", out)   # 1.6 GB, 4.7 GB RSS before
    assert proc.returncode == 2
    assert one_error_line(proc) == (
        f"driftscope reference init: error: {model}: initializer 'w' declares float "
        "[20000, 20000], 400,000,000 values, but holds 0 values of data")
    assert not out.exists() and digest(model) == before
    assert rss < RSS_LIMIT_MB, rss
    # raw data shorter than the dims say
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[300, 300], raw_data=b"\0" * 16)
    proc, _ = run(tmp_path, "reference", "init", _matmul_with(tmp_path / "short.onnx", w),
                  "-o", out)
    assert proc.returncode == 2 and "360,000 bytes, but holds 16 bytes" in one_error_line(proc)
    # external data shorter than the dims say
    model, weights = external_model(tmp_path)
    m = onnx.load(str(model), load_external_data=False)
    m.graph.initializer[0].dims[:] = [8, 8000]
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 8
    onnx.save(m, str(model))
    proc, _ = run(tmp_path, "reference", "init", model, "-o", out)
    assert proc.returncode == 2
    assert "initializer 'w' declares float [8, 8000], 256,000 bytes, but holds 256 bytes" in \
        one_error_line(proc)
    assert not out.exists()


def test_reference_init_budget(tmp_path):
    w = numpy_helper.from_array(np.zeros((64, 64), np.float32), "w")
    model = _matmul_with(tmp_path / "m.onnx", w)
    out = tmp_path / "out.onnx"
    proc, _ = run(tmp_path, "reference", "init", model, "-o", out, "--max-weight-bytes", "16000")
    assert proc.returncode == 2
    assert one_error_line(proc) == (
        f"driftscope reference init: error: {model}: the 1 initializer(s) to rewrite (the "
        "largest: 'w' float [64, 64], 16,384 bytes (16 KiB)) take 16,384 bytes (16 KiB), more "
        "than the 16,000 bytes (15.6 KiB) allowed (raise it with --max-weight-bytes SIZE, e.g. "
        "--max-weight-bytes 16384)")
    assert not out.exists()
    proc, _ = run(tmp_path, "reference", "init", model, "-o", out, "--max-weight-bytes", "16K")
    assert proc.returncode == 0, proc.stderr
