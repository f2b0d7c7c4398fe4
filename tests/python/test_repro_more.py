"""`python -m driftscope repro` for .tflite models (LiteRT reference kernels against XNNPACK on the
planted tie-rounding FULLY_CONNECTED) and PyTorch models (torch.export of one module of the tiny
encoder, float16 NaN): the bundles' run.py alone reproduces (exit 1) and the control passes
(exit 0); --anonymize keeps no weight of the model and reports its re-run; the how-to's .tflite
and PyTorch commands run. Real runtimes throughout (ai-edge-litert, torch)."""

import os
import re
import sys

import numpy as np
import pytest

from test_repro import PY, ROOT, _env, _files, _ran, repro, repro_here, run_console_lines, run_py

sys.path.insert(0, os.path.join(ROOT, "tests", "python", "models"))
TINY = os.path.join(ROOT, "tests", "python", "models", "tiny_encoder_torch.py")


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    pytest.importorskip("ai_edge_litert")
    import tflite_planted

    path = tmp_path_factory.mktemp("planted") / "planted.tflite"
    path.write_bytes(tflite_planted.build())
    return path


def _weight_buffers(path):
    """Every constant buffer of more than one distinct value (a zero bias is one number)."""
    from ai_edge_litert import schema_py_generated as s

    m = s.ModelT.InitFromPackedBuf(path.read_bytes(), 0)
    out = {}
    for t in m.subgraphs[0].tensors:
        data = m.buffers[t.buffer].data if t.buffer else None
        if data is None or len(data) == 0:
            continue
        raw = bytes(bytearray(data))
        if len(set(raw)) > 1:
            out[t.name.decode()] = raw
    return out


def _ops(path):
    from ai_edge_litert import schema_py_generated as s

    m = s.ModelT.InitFromPackedBuf(path.read_bytes(), 0)
    return len(m.subgraphs[0].operators), [t.name.decode() for t in m.subgraphs[0].tensors]


def test_tflite_bundle_grows_from_an_inherited_op_and_reproduces(planted, tmp_path):
    out = tmp_path / "b"
    p = repro(planted, "--candidate", "litert", "--at", "fc5", "-o", out)
    assert p.returncode == 0, p.stderr
    # fc5 alone passes (it inherits); with its producer, the planted op, it fails; pruning
    # cannot drop the planted op.
    assert re.search(r"1 op\(s\): PASS", p.stderr) and "2 op(s): PRECISION_DEGRADATION" in p.stderr
    n, names = _ops(out / "model.tflite")
    assert n == 2 and "planted" in names and "fc5" in names and "fc2" not in names
    rc, text = run_py(out)
    assert rc == 1 and "fc5: litert: REPRODUCES" in text, text
    rc, text = run_py(out, "--backend", "litert-ref")
    assert rc == 0 and "passes" in text, text
    # Only the piece's weights: no other layer's buffer anywhere in the bundle.
    original = _weight_buffers(planted)
    kept = {k for k in original if k.startswith(("planted/", "fc5/"))}
    for f in _files(out):
        data = open(f, "rb").read()
        assert not [k for k, b in original.items() if k not in kept and b in data], f
    assert sorted(os.listdir(out)) == ["README.md", "SHA256SUMS", "expected.npz",
                                       "inputs.npz", "model.tflite", "run.py"]


def test_tflite_bundle_at_the_planted_op_is_one_op(planted, tmp_path):
    out = tmp_path / "one"
    p = repro(planted, "--reference", "litert-ref", "--candidate", "litert", "--at", "planted",
              "-o", out)
    assert p.returncode == 0, p.stderr
    assert _ops(out / "model.tflite")[0] == 1
    assert run_py(out)[0] == 1 and run_py(out, "--backend", "litert-ref")[0] == 0


def test_tflite_anonymized_bundle_keeps_no_weight_and_still_reproduces(planted, tmp_path):
    out = tmp_path / "anon"
    p = repro(planted, "--candidate", "litert", "--at", "fc5", "-o", out, "--anonymize",
              "--seed", "7")
    assert p.returncode == 0, p.stderr
    assert "the anonymized bundle reproduces" in p.stderr
    _, names = _ops(out / "model.tflite")
    assert names and all(re.fullmatch(r"t\d+", x) for x in names), names
    original = _weight_buffers(planted)
    assert len(original) == 6 and all(len(b) > 16 for b in original.values())
    for f in _files(out):
        data = open(f, "rb").read()
        assert [k for k, b in original.items() if b in data] == [], f
        assert b"planted" not in data and b"coarse" not in data and b"fc5" not in data, f
    readme = (out / "README.md").read_text()
    assert "seed 7" in readme and "it still reproduces" in readme
    assert not (out / "real-weights").exists()
    assert run_py(out)[0] == 1 and run_py(out, "--backend", "litert-ref")[0] == 0


def test_tflite_bad_input_is_one_line_exit_2(planted, tmp_path):
    for bad, says in ((["--at", "fc55", "--candidate", "litert"], "no tensor named 'fc55'"),
                      (["--at", "fc5", "--candidate", "ort-int8"], "not a .tflite backend"),
                      (["--at", "fc5", "--candidate", "litert", "--reference", "litert"],
                       "reference is litert-ref"),
                      (["--at", "input", "--candidate", "litert"], "model input")):
        p = repro(planted, *bad, "-o", tmp_path / "x")
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and says in p.stderr, p.stderr
        assert not (tmp_path / "x").exists()


def test_an_input_that_is_a_fifo_is_refused_not_waited_on(planted, tmp_path):
    """--input goes through the recorders' one loader: a FIFO (or a device) is refused before
    anything reads it; the copy repro had read it with np.load and waited for a writer."""
    fifo = tmp_path / "x.npy"
    os.mkfifo(fifo)
    p = repro(planted, "--at", "planted", "--candidate", "litert", "--input", f"input={fifo}",
              "-o", tmp_path / "x")
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "it is a FIFO, not a regular file" in p.stderr
    assert not (tmp_path / "x").exists()


@pytest.fixture(scope="module")
def torch_ok():
    pytest.importorskip("torch")


def test_torch_bundle_reproduces_float16_nan_alone(howto):
    # The how-to's own PyTorch lines (the howto fixture) made this bundle and ran its run.py:
    # `repro --model tiny_encoder_torch.py:build --reference torch --candidate torch-fp16
    # --at encoder.layers.2.norm1 -o pt`, then `python pt/run.py` and `... --backend torch`.
    d, ran = howto
    p = _ran(ran, " -o pt ")
    assert p.returncode == 0, p.stderr
    out = d / "pt"
    assert sorted(os.listdir(out)) == ["README.md", "SHA256SUMS", "expected.npz",
                                       "inputs.npz", "model.pt2", "run.py"]
    p = _ran(ran, "python pt/run.py  #")
    rc, text = p.returncode, p.stdout + p.stderr
    assert rc == 1 and "NaN/Inf where the reference is finite" in text, text
    p = _ran(ran, "python pt/run.py --backend torch")
    rc, text = p.returncode, p.stdout + p.stderr
    assert rc == 0 and "passes" in text, text
    # The exported module holds its own two parameters only (64 + 64 float32: 512 bytes).
    import zipfile

    with zipfile.ZipFile(out / "model.pt2") as z:
        weights = [i for i in z.infolist() if "/weights/weight_" in i.filename]
    assert len(weights) == 2 and sum(i.file_size for i in weights) == 512


def test_torch_grows_to_the_parent_module(torch_ok, tmp_path):
    out = tmp_path / "grow"
    p = repro("--model", f"{TINY}:build", "--candidate", "torch-fp16",
              "--at", "encoder.layers.2.attn", "-o", out)
    assert p.returncode == 0, p.stderr
    assert "encoder.layers.2.attn: PASS" in p.stderr
    assert "`encoder.layers.2` of" in (out / "README.md").read_text()
    assert run_py(out)[0] == 1


def test_torch_anonymized_bundle_has_no_parameter_of_the_model(howto):
    # The how-to's `repro --model tiny_encoder_torch.py:build --candidate torch-fp16 --at
    # encoder.layers.2.norm1 -o pt-shared --anonymize --seed 7` (the howto fixture).
    import tiny_encoder_torch as te

    d, ran = howto
    p = _ran(ran, " -o pt-shared ")
    out = d / "pt-shared"
    assert p.returncode == 0, p.stderr
    assert "the anonymized bundle reproduces" in p.stderr
    net, _ = te.build()
    params = {n: q.detach().numpy().tobytes() for n, q in net.named_parameters()}
    for f in _files(out):
        data = open(f, "rb").read()
        assert [n for n, b in params.items() if len(b) > 16 and b in data] == [], f
        assert b"tiny_encoder" not in data and b"layers" not in data, f
    readme = (out / "README.md").read_text()
    assert "seed 7" in readme and "it still reproduces" in readme
    assert _ran(ran, "python pt-shared/run.py").returncode == 1
    assert run_py(out, "--backend", "torch")[0] == 0


def test_torch_bad_input_is_one_line_exit_2(torch_ok, tmp_path, capfd):
    # Through python -m driftscope's entry point in this process (repro_here): the command runs
    # as a subprocess in the tests above; one per refusal re-imported torch and the guard.
    for bad, says in ((["--at", "encoder.layers.2.nrom1", "--candidate", "torch-fp16"],
                       "no module named 'encoder.layers.2.nrom1'"),
                      (["--at", "encoder.layers.2.norm1", "--candidate", "ort-int8"],
                       "candidate is one of torch-fp16, torch-bf16")):
        p = repro_here(capfd, "--model", f"{TINY}:build", *bad, "-o", tmp_path / "x")
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and says in p.stderr, p.stderr
        assert not (tmp_path / "x").exists()


@pytest.fixture(scope="module")
def howto(planted, torch_ok, tmp_path_factory):
    """docs/howto/repro.md's sections ".tflite" and "PyTorch" run once, every console line in one
    folder: (folder, [(line, stated exit status, CompletedProcess)]). The PyTorch tests above
    read the bundles its lines make (they built the same bundles again: ~2 torch repro runs
    and 3 run.py's)."""
    text = open(os.path.join(ROOT, "docs", "howto", "repro.md"), encoding="utf-8").read()
    section = text[text.index("\n## .tflite"):]
    section = section[:section.index("\n## Bad input")]
    d = tmp_path_factory.mktemp("howto")
    os.symlink(planted, d / "planted.tflite")
    os.symlink(TINY, d / "tiny_encoder_torch.py")
    return d, run_console_lines(section, d)


def test_howto_tflite_and_torch_commands_run(howto):
    """docs/howto/repro.md's sections ".tflite" and "PyTorch": every console line with its
    stated exit status."""
    _, ran = howto
    assert len(ran) >= 6
    for line, want, p in ran:
        assert p.returncode == want, (line, p.stdout, p.stderr)
