"""driftscope.litert: recording LiteRT interpreter runs (issue 4 §4, §6).

The models are written by tests/python/models/tflite_models.py as flatbuffers: a float32 CNN and
its full-integer int8 twin (per-channel conv weights)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

import driftscope  # noqa: E402
import driftscope.litert as dl  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))
import tflite_models as tm  # noqa: E402

ACTIVATIONS = ["conv1", "dwconv", "pool", "flatten", "logits", "probs"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("tflite")
    (d / "float.tflite").write_bytes(tm.build_float())
    (d / "int8.tflite").write_bytes(tm.build_int8())
    return d


@pytest.fixture(scope="module")
def x():
    return tm.sample_input(seed=42)


def interpreter_quantization(model_path, name):
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(model_path))
    d = next(t for t in it.get_tensor_details() if t["name"] == name)
    q = d["quantization_parameters"]
    return q["scales"], q["zero_points"], q["quantized_dimension"]


def test_float_model_every_op_in_order_matches_numpy(models, x, tmp_path):
    rec = dl.record(models / "float.tflite", {"input": x}, tmp_path / "f.tdump",
                    kernels="reference")
    assert rec.observer_effect == "none"
    dump = driftscope.open(tmp_path / "f.tdump")
    assert dump.finished
    assert [r.name for r in dump] == ACTIVATIONS
    assert [r.op_type for r in dump] == ["CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D",
                                         "RESHAPE", "FULLY_CONNECTED", "SOFTMAX"]
    ref = tm.reference_forward(x)
    for name in ACTIVATIONS:
        np.testing.assert_allclose(dump[name], ref[name], rtol=1e-5, atol=1e-5, err_msg=name)
    # NHWC names on the image activations only.
    assert dump.record("conv1").axes == ("batch", "height", "width", "channels")
    assert dump.record("pool").axes == ("batch", "height", "width", "channels")
    assert dump.record("logits").axes == ()
    meta = dump.metadata
    assert meta["backend"] == "litert:reference" and meta["kernels"] == "reference"
    assert meta["precision"] == "float32" and meta["framework"].startswith("litert ")
    np.testing.assert_array_equal(rec.outputs["probs"], dump["probs"])


def test_int8_tensors_keep_their_affine_encoding(models, x, tmp_path):
    dl.record(models / "int8.tflite", {"input": x}, tmp_path / "q.tdump", kernels="reference",
              parameters=True)
    dump = driftscope.open(tmp_path / "q.tdump")
    assert dump.metadata["precision"] == "int8"
    conv = dump.record("conv1")
    assert conv.dtype == "i8"
    scales, zps, _ = interpreter_quantization(models / "int8.tflite", "conv1")
    assert conv.encoding["kind"] == "affine_tensor"
    assert conv.encoding["scales"] == [pytest.approx(float(scales[0]), rel=0, abs=0)]
    assert conv.encoding["zero_points"] == [int(zps[0])]
    # Dequantized by the reader exactly as LiteRT defines it: scale * (q - zero_point).
    q = dump["conv1"].astype(np.float64)
    np.testing.assert_array_equal(dump.get("conv1", dtype="float64"),
                                  float(scales[0]) * (q - int(zps[0])))
    # ... and within a couple of quantization steps of the float network.
    ref = tm.reference_forward(x)
    for name in ("conv1", "dwconv", "logits"):
        step = dump.record(name).encoding["scales"][0]
        err = np.abs(dump.get(name, dtype="float64") - ref[name]).max()
        assert err <= 4 * step, (name, err, step)
    # Per-channel weights: one scale per output channel along the quantized dimension.
    w = dump.record("conv1/weights", role="parameter", role_index=1)
    wscales, _, wdim = interpreter_quantization(models / "int8.tflite", "conv1/weights")
    assert w.encoding["kind"] == "affine_channel" and w.encoding["axis"] == wdim == 0
    np.testing.assert_array_equal(w.encoding["scales"], wscales)
    dw = dump.record("dwconv/weights", role="parameter", role_index=1)
    assert dw.encoding["axis"] == 3 and len(dw.encoding["scales"]) == tm.C1
    np.testing.assert_allclose(dump.get("conv1/weights", role="parameter", role_index=1,
                                        dtype="float64"),
                               tm.weights()["conv1.w"], atol=float(np.max(wscales)) / 2 + 1e-12)
    # Raw integer tensors (a reshape's shape) stay raw.
    assert not dump.record("flatten/shape", role="parameter", role_index=1).encoding


@pytest.mark.parametrize("model", ["float", "int8"])
def test_optimized_vs_reference_kernels_compare(models, x, tmp_path, model):
    path = models / f"{model}.tflite"
    dl.record(path, {"input": x}, tmp_path / "ref.tdump", kernels="reference")
    dl.record(path, {"input": x}, tmp_path / "opt.tdump", kernels="optimized")
    dl.record(path, {"input": x}, tmp_path / "builtin.tdump", kernels="builtin")
    opt = driftscope.open(tmp_path / "opt.tdump")
    assert opt.metadata["backend"] == "litert:xnnpack"
    assert driftscope.open(tmp_path / "builtin.tdump").metadata["backend"] == "litert:builtin"
    for cand in ("opt", "builtin"):
        report = driftscope.compare(tmp_path / "ref.tdump", tmp_path / f"{cand}.tdump")
        assert report.verdict == "pass", report.to_text()
        names = [t.name for t in report.tensors]
        assert [n for n in names if n in ACTIVATIONS] == ACTIVATIONS
        assert not report.only_in_reference and not report.only_in_candidate
    # The kernels really are different code: somewhere the float results differ in the last bits
    # (XNNPACK's GEMM accumulates in another order than the reference loops).
    if model == "float":
        ref = driftscope.open(tmp_path / "ref.tdump")
        assert any(not np.array_equal(ref[n], opt[n]) for n in ACTIVATIONS)


def test_int8_against_float_localises_the_first_quantized_op(models, x, tmp_path):
    dl.record(models / "float.tflite", {"input": x}, tmp_path / "f.tdump", kernels="reference")
    dl.record(models / "int8.tflite", {"input": x}, tmp_path / "q.tdump", kernels="reference")
    # Judged by what int8 can deliver (the default for quantized pairs), the model is healthy.
    default = driftscope.compare(tmp_path / "f.tdump", tmp_path / "q.tdump", allow_unpaired=True)
    assert default.verdict == "pass", default.to_text()
    assert {t["name"] for t in default.only_in_candidate} == {"input_q", "probs_float"}
    assert all("quantized" in t.criteria["source"] for t in default.tensors)
    # Judged by a float32 standard, the first op that fails is the first quantized one, and the
    # engine's error there is the error of the dequantized values.
    strict = driftscope.compare(tmp_path / "f.tdump", tmp_path / "q.tdump", allow_unpaired=True,
                                max_rel_l2=1e-3)
    assert strict.verdict == "diverged"
    # Over that tolerance by the quantization step int8 makes anyway (docs/metrics.md §7a): the
    # first tensor over it is named, and it is no divergence (issue 26 §5).
    first = next(t for t in strict.tensors if t.status == "fail")
    assert first.name == "conv1" and not first.beyond_rounding
    assert strict.first_divergence is None
    assert "none beyond rounding (first: conv1" in strict.summary, strict.summary
    f, q = driftscope.open(tmp_path / "f.tdump"), driftscope.open(tmp_path / "q.tdump")
    a, b = f.get("conv1", dtype="float64"), q.get("conv1", dtype="float64")
    assert first.rel_l2 == pytest.approx(
        np.linalg.norm(b - a) / np.linalg.norm(a), rel=1e-9)


def test_inputs_by_signature_name_or_position(models, x, tmp_path):
    # Converters name input tensors "serving_default_image:0"; the SignatureDef keeps "image".
    dl.record(models / "float.tflite", {"image": x}, tmp_path / "a.tdump")
    dl.record((models / "float.tflite").read_bytes(), x, tmp_path / "b.tdump")
    a, b = driftscope.open(tmp_path / "a.tdump"), driftscope.open(tmp_path / "b.tdump")
    np.testing.assert_array_equal(a["probs"], b["probs"])
    assert b.metadata["model"] == "model.tflite"


def test_filter_and_summary(models, x, tmp_path):
    rec = dl.record(models / "float.tflite", [x], tmp_path / "s.tdump", filter="-pool",
                    summary="conv1")
    dump = driftscope.open(tmp_path / "s.tdump")
    assert [r.name for r in dump] == [n for n in ACTIVATIONS if n != "pool"]
    assert dump.record("conv1").kind == "summary" and dump.record("dwconv").kind == "tensor"
    assert rec.records == 5


def test_bad_models_and_inputs(models, tmp_path):
    out = tmp_path / "x.tdump"
    with pytest.raises(dl.ModelLoadError, match="no such file"):
        dl.record(tmp_path / "missing.tflite", {}, out)
    (tmp_path / "junk.tflite").write_bytes(b"PK\x03\x04 definitely not a flatbuffer" * 4)
    with pytest.raises(dl.ModelLoadError, match="not a TFLite flatbuffer"):
        dl.record(tmp_path / "junk.tflite", {}, out)
    data = (models / "int8.tflite").read_bytes()
    for cut in (64, len(data) // 3, len(data) - 200):
        (tmp_path / "cut.tflite").write_bytes(data[:cut])
        with pytest.raises(dl.ModelLoadError, match="cut.tflite"):
            dl.record(tmp_path / "cut.tflite", {"input": tm.sample_input()}, out)
    with pytest.raises(dl.InputMismatchError,
                       match=r"input 'input' has shape \(1, 8, 8, 3\), the model expects "
                             r"float32 \[1, 16, 16, 3\]"):
        dl.record(models / "float.tflite", {"input": np.zeros((1, 8, 8, 3), np.float32)}, out)
    with pytest.raises(dl.InputMismatchError, match=r"input 'input' has dtype float64"):
        dl.record(models / "float.tflite", {"input": np.zeros((1, 16, 16, 3))}, out)
    with pytest.raises(dl.InputMismatchError,
                       match=r"unknown input 'pixels'; the model's inputs are: input \(float32 "
                             r"\[1, 16, 16, 3\], signature name 'image'\)"):
        dl.record(models / "float.tflite", {"pixels": tm.sample_input()}, out)
    with pytest.raises(dl.InputMismatchError, match="kernels='gpu'"):
        dl.record(models / "float.tflite", {"input": tm.sample_input()}, out, kernels="gpu")
    assert not out.exists()


def test_corrupted_models_never_crash_the_process(models, tmp_path):
    # The interpreter trusts flatbuffer offsets; corrupt files must end in an exception, not a
    # segfault, so this runs in a child process and checks its exit status.
    script = f"""
import sys, numpy as np
sys.path.insert(0, {str(Path(__file__).resolve().parent / 'models')!r})
import driftscope.litert as dl
data = bytearray(open({str(models / 'int8.tflite')!r}, 'rb').read())
rng = np.random.default_rng(5)
outcomes = set()
for trial in range(25):
    bad = bytearray(data)
    for _ in range(4):
        bad[int(rng.integers(8, len(bad)))] = int(rng.integers(0, 256))
    p = {str(tmp_path / 'fz.tflite')!r}
    open(p, 'wb').write(bytes(bad))
    try:
        dl.record(p, {{'input': np.zeros((1, 16, 16, 3), np.float32)}}, p + '.tdump',
                  check_observer=False)
        outcomes.add('ok')
    except dl.Error as e:
        outcomes.add(type(e).__name__)
print(sorted(outcomes))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ModelLoadError" in proc.stdout


def test_cli(models, x, tmp_path, capsys):
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "cli.tdump"
    rc = dl.cli_main([str(models / "int8.tflite"), "--input", f"input={tmp_path / 'x.npy'}",
                      "-o", str(out), "--kernels", "reference", "--meta", "device=pixel"])
    assert rc == 0, capsys.readouterr().err
    dump = driftscope.open(out)
    assert dump.metadata["device"] == "pixel" and dump.metadata["kernels"] == "reference"
    assert dump.record("conv1").dtype == "i8"
    capsys.readouterr()
    np.save(tmp_path / "bad.npy", np.zeros((2, 2), np.float32))
    rc = dl.cli_main([str(models / "int8.tflite"), "--input", f"input={tmp_path / 'bad.npy'}",
                      "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "[1, 16, 16, 3]" in err
    proc = subprocess.run(
        [sys.executable, "-m", "driftscope", "record", "tflite", str(models / "float.tflite"),
         "--input", f"input={tmp_path / 'x.npy'}", "-o", str(tmp_path / "m.tdump")],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert driftscope.open(tmp_path / "m.tdump").names() == ACTIVATIONS


def test_nhwc_activations_meet_an_nchw_reference(models, x, tmp_path):
    # A PyTorch-style NCHW reference with axis names: compare permutes the LiteRT NHWC tensors
    # by name instead of reporting garbage.
    dl.record(models / "float.tflite", {"input": x}, tmp_path / "lite.tdump", kernels="reference")
    ref = tm.reference_forward(x)
    with driftscope.Writer(tmp_path / "nchw.tdump", meta={"framework": "numpy"}) as w:
        for name in ("conv1", "dwconv"):
            w.write(name, np.ascontiguousarray(ref[name].astype(np.float32).transpose(0, 3, 1, 2)),
                    axes="batch,channels,height,width")
    report = driftscope.compare(tmp_path / "nchw.tdump", tmp_path / "lite.tdump",
                                allow_unpaired=True)
    assert report.verdict == "pass", report.to_text()
    conv = report.tensor("conv1")
    assert conv.permutation and conv.cosine > 0.999999


# ---- state in resource variables (issue 7, bug 17) ---------------------------------------------

STATEFUL_VARS = 3
HANDLES = [f"state{k}/handle" for k in range(STATEFUL_VARS)]


def stateful_expected(x):
    """Values after the first invoke: variable k starts at k+1 and is added to the running sum."""
    out, cur = {}, x.astype(np.float64)
    for k in range(STATEFUL_VARS):
        out[f"state{k}/read"] = np.full_like(cur, k + 1)
        cur = cur + (k + 1)
        out[f"add{k}"] = cur
    out["out"] = 2 * cur
    return out


@pytest.mark.parametrize("kernels", dl.KERNELS)
def test_resource_variable_tensors_are_skipped_not_read(tmp_path, kernels):
    # Before the fix LiteRT's get_tensor on the third VAR_HANDLE output (resource id 2) killed
    # the process with SIGSEGV, leaving an empty unfinished dump. Run as the command does, in a
    # process of its own, so a crash shows as the exit status.
    (tmp_path / "s.tflite").write_bytes(tm.build_stateful(STATEFUL_VARS))
    x = np.array([[0.5, -1.0, 2.0, 4.0]], np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "s.tdump"
    proc = subprocess.run(
        [sys.executable, "-m", "driftscope", "record", "tflite", str(tmp_path / "s.tflite"),
         "--input", f"input={tmp_path / 'x.npy'}", "--kernels", kernels, "-o", str(out)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    assert ("driftscope record tflite: warning: 3 tensor(s) not recorded: "
            + ", ".join(f"{h} (RESOURCE tensor)" for h in HANDLES) + "\n") in proc.stderr
    dump = driftscope.open(out)
    assert dump.finished
    want = stateful_expected(x)
    assert dump.names() == [n for k in range(STATEFUL_VARS)
                            for n in (f"state{k}/read", f"add{k}")] + ["out"]
    for name, value in want.items():
        np.testing.assert_array_equal(dump[name], value.astype(np.float32), err_msg=name)


def test_resource_variables_in_the_python_api(tmp_path):
    x = np.zeros((1, 4), np.float32)
    with pytest.warns(RuntimeWarning, match=r"3 tensor\(s\) not recorded: state0/handle "
                                            r"\(RESOURCE tensor\)"):
        rec = dl.record(tm.build_stateful(STATEFUL_VARS), x, tmp_path / "s.tdump",
                        parameters=True)
    assert rec.skipped == HANDLES
    np.testing.assert_array_equal(rec.outputs["out"], stateful_expected(x)["out"])
    dump = driftscope.open(tmp_path / "s.tdump")
    assert dump.finished and "add2" in dump and not any(h in dump for h in HANDLES)


class _FakeInterpreter:
    """Stands in for a LiteRT interpreter whose reads of some tensors kill or hang the
    process in ways no type check can foresee."""

    def __init__(self, crash=(), hang=()):
        self.crash, self.hang = set(crash), set(hang)

    def get_tensor(self, i):
        import os
        import signal
        import time

        if i in self.crash:
            os.kill(os.getpid(), signal.SIGSEGV)
        if i in self.hang:
            time.sleep(3600)
        return np.full(3, i, np.float32)


def test_reads_that_crash_or_hang_are_isolated_in_a_probe_process():
    bad = dl._probe_reads(_FakeInterpreter(crash={2, 5}, hang={3}), [0, 1, 2, 3, 4, 5, 6],
                          timeout=2.0)
    assert sorted(bad) == [2, 3, 5]
    assert bad[2] == "reading it crashes LiteRT (SIGSEGV, in a probe process)"
    assert bad[3] == "reading it hangs LiteRT (no progress in 2 s, in a probe process)"
    # The parent is alive and reads the rest.
    assert dl._probe_reads(_FakeInterpreter(), [0, 1], timeout=2.0) == {}


def test_records_carry_the_graph_data_flow(models, x, tmp_path):
    # docs/format.md §3.3.3: each op output names the recorded output it read; the first op
    # reads only the model input (not recorded) and its weights (constants): an empty list.
    dl.record(models / "float.tflite", {"input": x}, tmp_path / "f.tdump", kernels="reference",
              filter="-dwconv")
    recs = list(driftscope.open(tmp_path / "f.tdump"))
    inputs = [r.attrs["ds.inputs"] for r in recs]
    names = [r.name for r in recs]
    assert len(recs) == len(ACTIVATIONS) - 1 and inputs[0] == ""
    for k in range(1, len(recs)):
        # The filtered-out depthwise conv is followed through to what it read.
        assert inputs[k] == f"output/0/0:{names[k - 1]}", (names[k], inputs[k])
    assert all(r.attrs["ds.kind"] == "float" for r in recs)


# ---- tensors a delegate never writes (issue 24, item 4) ----------------------------------------

import tflite_f16  # noqa: E402


def test_xnnpack_unwritten_dequantize_outputs_are_skipped_with_the_reason(tmp_path, x):
    # XNNPACK folds the DEQUANTIZE of float16 weights into the layers and never writes its
    # float32 output. Before the fix the recorder read those untouched buffers (zeros, or
    # whatever the memory held) as values: compare said silent_failure (exit 3) on a model the
    # two kernels compute alike, and the guard's probe named conv1/weights.
    model = tmp_path / "f16.tflite"
    model.write_bytes(tflite_f16.build_f16_weights())
    ref = dl.record(model, {"input": x}, tmp_path / "ref.tdump", kernels="reference")
    assert ref.skipped == []
    with pytest.warns(RuntimeWarning, match=r"6 tensor\(s\) not recorded: conv1/weights \(never "
                                            r"written: XNNPACK computes this DEQUANTIZE "
                                            r"internally\), conv1/bias"):
        opt = dl.record(model, {"input": x}, tmp_path / "opt.tdump")
    assert opt.skipped == tflite_f16.DEQUANTIZED
    assert opt.observer_effect == "none"  # filling the buffers before the run changed nothing
    dump = driftscope.open(tmp_path / "opt.tdump")
    assert dump.metadata["backend"] == "litert:xnnpack"
    assert dump.names() == ACTIVATIONS
    assert dump.metadata["not_recorded"].startswith(
        "6 tensor(s) not recorded: conv1/weights (never written: XNNPACK computes this "
        "DEQUANTIZE internally)")
    assert all(n in dump.metadata["not_recorded"] for n in tflite_f16.DEQUANTIZED)
    report = driftscope.compare(tmp_path / "ref.tdump", tmp_path / "opt.tdump")
    assert report.verdict == "diverged", report.to_text()  # unpaired only, nothing failing
    assert [t["name"] for t in report.only_in_reference] == tflite_f16.DEQUANTIZED
    report = driftscope.compare(tmp_path / "ref.tdump", tmp_path / "opt.tdump",
                                allow_unpaired=True)
    assert report.verdict == "pass", report.to_text()
    assert [t.name for t in report.tensors] == ACTIVATIONS
    # The reference kernels do write them: the float16 weights, widened exactly.
    r = driftscope.open(tmp_path / "ref.tdump")
    np.testing.assert_array_equal(r["conv1/weights"],
                                  tm.weights()["conv1.w"].astype(np.float16).astype(np.float32))


def test_xnnpack_unwritten_tensors_on_the_command_line(tmp_path, x):
    model = tmp_path / "f16.tflite"
    model.write_bytes(tflite_f16.build_f16_weights())
    np.save(tmp_path / "x.npy", x)
    outs = {}
    for kernels in ("optimized", "reference"):
        outs[kernels] = subprocess.run(
            [sys.executable, "-m", "driftscope", "record", "tflite", str(model), "--input",
             f"input={tmp_path / 'x.npy'}", "--kernels", kernels, "-o",
             str(tmp_path / f"{kernels}.tdump")], capture_output=True, text=True, timeout=120)
        assert outs[kernels].returncode == 0, outs[kernels].stderr
    assert ("driftscope record tflite: warning: 6 tensor(s) not recorded: conv1/weights (never "
            "written: XNNPACK computes this DEQUANTIZE internally)") in outs["optimized"].stderr
    assert "not recorded" not in outs["reference"].stderr
    import os

    binary = os.environ.get("DRIFTSCOPE_BIN") or str(
        Path(__file__).resolve().parents[2] / "build" / "dev" / "driftscope")
    if not Path(binary).is_file():
        pytest.skip(f"no driftscope executable at {binary} (set DRIFTSCOPE_BIN)")
    compare = [binary, "compare", str(tmp_path / "reference.tdump"),
               str(tmp_path / "optimized.tdump")]
    # Exit 3 (58 silent failures on a real model) before the fix; now the tensors XNNPACK never
    # wrote are only in the reference (exit 1), and accepted as such everything passes.
    proc = subprocess.run(compare, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout
    assert "6 tensor(s) only in the reference (first: conv1/weights)" in proc.stdout
    proc = subprocess.run(compare + ["--allow-unpaired"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout


class _Interp:
    """An interpreter whose tensors hold fixed bytes (the second run of _unwritten)."""

    def __init__(self, values):
        self.values = values

    def _get_tensor_details(self, t, s):
        return {"dtype": self.values[t].dtype, "shape": self.values[t].shape}

    def set_tensor(self, t, v):
        pass  # the kernels below "write" every tensor but 1

    def invoke(self):
        pass

    def get_tensor(self, t):
        return self.values[t]


class _Read:
    def __init__(self, values):
        self.values = values

    def read(self, t):
        return self.values[t], ""


def test_a_value_equal_to_the_fill_pattern_is_not_taken_for_unwritten():
    # Tensor 2 really computed int8 -91 (byte 0xA5, the first fill pattern): the second run,
    # filled with 0x5A, shows its kernel wrote it. Tensor 1 holds each run's pattern: unwritten.
    a = np.array([-91], np.int8)
    first = _Read({1: a, 2: a, 3: np.array([7], np.int8)})
    second = _Interp({1: np.array([0x5A], np.int8), 2: a})
    ops = [{"op_name": "DEQUANTIZE", "inputs": [0], "outputs": [1]},
           {"op_name": "ADD", "inputs": [1, 1], "outputs": [2]},
           {"op_name": "DELEGATE", "inputs": [0], "outputs": [1]}]
    got = dl._unwritten(first, [1, 2, 3], ops, "fake.tflite", lambda: second)
    assert got == {1: "never written: XNNPACK computes this DEQUANTIZE internally"}
