"""`python -m driftscope repro` (issue 26 item 4) on all-MiniLM-L6-v2 with ort-int8 against ort:
the bundle reproduces with run.py alone, holds nothing of the model beyond its subgraph, and
--anonymize replaces names, weights and inputs and reports its own re-run; bad input is one
line and exit 2. Real runtimes throughout (ONNX Runtime, its quantize_dynamic)."""

import hashlib
import os
import re
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

PY = os.environ.get("DRIFTSCOPE_PYTHON", sys.executable)
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _env():
    # The package this process imports (site-packages under make test), never the checkout's
    # python/ by path: its compiled _core is not there in a fresh clone (pkgenv.py).
    from pkgenv import env_with_package

    return env_with_package()


def repro(*args, cwd=None):
    return subprocess.run([PY, "-m", "driftscope", "repro", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, env=_env(), timeout=900)


def repro_here(capfd, *args):
    """`repro` refused through python -m driftscope's entry point in this process: the command
    runs as a subprocess in the other tests; one per refusal re-imported onnx and the guard."""
    from driftscope.__main__ import main

    capfd.readouterr()
    code = main(["repro", *map(str, args)])
    out, err = capfd.readouterr()
    return subprocess.CompletedProcess(args, code, out, err)


def run_py(folder, *args):
    # The bundle's own script, without driftscope on the path: it must stand alone.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([PY, os.path.join(folder, "run.py"), *args], capture_output=True,
                       text=True, env=env, cwd=folder, timeout=600)
    return p.returncode, p.stdout + p.stderr


@pytest.fixture(scope="module")
def minilm(bert, minilm_onnx, tmp_path_factory):
    """(model path, feeds .npz path, the tensor to reproduce: the first one of the ort-int8 run
    that the guard's verdict fails, found by comparing both runs' every tensor)."""
    import onnxruntime as ort
    from onnxruntime.quantization import quantize_dynamic

    from driftscope._guard._metrics import PASS, Thresholds, judge

    _, ids, mask = bert
    d = tmp_path_factory.mktemp("repro")
    feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
    np.savez(d / "feeds.npz", **feeds)
    quantize_dynamic(str(minilm_onnx), str(d / "int8.onnx"))

    def every_tensor(path):
        m = onnx.load(str(path))
        have = {o.name for o in m.graph.output}
        for n in m.graph.node:
            for o in n.output:
                if o and o not in have:
                    m.graph.output.append(onnx.ValueInfoProto(name=o))
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))

    ref, cand = every_tensor(minilm_onnx), every_tensor(d / "int8.onnx")
    first = None
    for n in onnx.load(str(minilm_onnx), load_external_data=False).graph.node:
        o = n.output[0]
        if o in cand and ref[o].dtype.kind == "f" and ref[o].size > 4:
            if judge(o, ref[o], cand[o], Thresholds(class_axes={}), 0).status != PASS:
                first = n.name
                break
    assert first is not None, "ort-int8 no longer degrades MiniLM: the test needs a new fault"
    return minilm_onnx, d / "feeds.npz", first


def _initializer_bytes(path):
    """Every initializer's bytes, but those holding one value repeated (MiniLM's pooler bias is
    384 zeros, as is every LayerNorm bias `reference init` writes): one number, no weights."""
    m = onnx.load(str(path))
    out = {}
    for t in m.graph.initializer:
        a = onnx.numpy_helper.to_array(t)
        if a.size > 1 and np.all(a == a.flat[0]):
            continue
        out[t.name] = a.tobytes()
    return out


def _files(folder, recurse=True):
    for root, dirs, files in os.walk(folder):
        if not recurse:
            dirs[:] = []
        for f in files:
            yield os.path.join(root, f)


def _leaks(folder, weights, recurse=True):
    """(file, initializer) for every initializer over 16 bytes whose bytes appear in a file."""
    found = []
    for f in _files(folder, recurse):
        with open(f, "rb") as fh:
            data = fh.read()
        found += [(os.path.basename(f), n) for n, b in weights.items()
                  if len(b) > 16 and b in data]
    return found


def test_bundle_reproduces_int8_and_holds_only_its_subgraph(minilm, howto):
    # The how-to's `repro minilm.onnx --candidate ort-int8 --at AT --input feeds.npz -o bundle`
    # (reference: ort, the default) and its two run.py lines made and ran it (howto fixture).
    model, feeds, at = minilm
    d, ran = howto
    out = d / "bundle"
    p = _ran(ran, " -o bundle ")
    assert p.returncode == 0, p.stderr
    sub = onnx.load(str(out / "model.onnx"))
    nodes = [n for n in sub.graph.node if n.op_type != "Constant"]
    assert 1 <= len(nodes) <= 5, [n.op_type for n in nodes]
    assert at in {n.name for n in sub.graph.node}
    # The candidate's INT8 build fails the guard's verdict; float32 is the control.
    rc, text = _ran_py(ran, "python bundle/run.py  #")
    assert rc == 1 and "REPRODUCES" in text, text
    rc, text = _ran_py(ran, "python bundle/run.py --backend float32")
    assert rc == 0 and "passes" in text, text
    readme = (out / "README.md").read_text()
    assert "REPRODUCES" in readme and "onnxruntime" in readme and "cosine" in readme
    # SHA-256 of every other file.
    sums = dict(reversed(line.split("  ")) for line in (out / "SHA256SUMS").read_text().split("\n")
                if line)
    assert set(sums) == {"model.onnx", "inputs.npz", "expected.npz", "run.py", "README.md"}
    for name, digest in sums.items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest, name
    # Only the initializers the subgraph reads, and none of the others' bytes anywhere.
    original = _initializer_bytes(model)
    read = {x for n in sub.graph.node for x in n.input}
    kept = {t.name for t in sub.graph.initializer}
    assert kept <= read
    others = {n: b for n, b in original.items() if n not in kept}
    assert len(others) > 90
    assert _leaks(out, others) == []


def test_anonymized_bundle_has_no_names_or_bytes_of_the_model(minilm, howto):
    # The how-to's `repro ... -o shared --anonymize --seed 7` and its run.py lines (howto).
    model, feeds, at = minilm
    d, ran = howto
    out = d / "shared"
    p = _ran(ran, " -o shared ")
    assert p.returncode in (0, 1), p.stderr
    sub = onnx.load(str(out / "model.onnx"))
    assert all(re.fullmatch(r"n\d+", n.name) for n in sub.graph.node)
    tensors = ([x for n in sub.graph.node for x in list(n.input) + list(n.output) if x]
               + [t.name for t in sub.graph.initializer])
    assert tensors and all(re.fullmatch(r"t\d+", x) for x in tensors)
    with np.load(out / "inputs.npz") as z:
        assert all(re.fullmatch(r"t\d+", k) for k in z.files)
    # Not one original initializer's bytes (over 16) in the shareable bundle, the subgraph's
    # own included; nothing of its names either.
    original = _initializer_bytes(model)
    assert _leaks(out, original, recurse=False) == []
    for f in _files(out, recurse=False):
        data = open(f, "rb").read()
        # (op types such as LayerNormalization are ONNX's, not the model's)
        assert b"/encoder/" not in data and b"LayerNorm/" not in data, f
        assert b"minilm" not in data and b"dense" not in data, f
    # Its re-run is reported, and decides what is kept: a bundle that no longer reproduces
    # keeps the real-weights one (which does) apart.
    readme = (out / "README.md").read_text()
    assert "seed 7" in readme
    rc, text = _ran_py(ran, "python shared/run.py")
    if "it still reproduces" in readme:
        assert p.returncode == 0 and rc == 1 and not (out / "real-weights").exists()
    else:
        assert "NO LONGER reproduces" in readme and rc == 0
        assert p.returncode == 1 and "anonymized bundle does not reproduce" in p.stderr
        assert _ran_py(ran, "python shared/real-weights/run.py")[0] == 1
    print(f"anonymized re-run: run.py exit {rc}: {text.strip().splitlines()[-1]}")


def test_max_nodes_reached_writes_the_largest_marked_and_exits_1(minilm, tmp_path):
    model, feeds, at = minilm
    out = tmp_path / "small"
    p = repro(model, "--candidate", "ort-int8", "--at", at, "-i", feeds, "-o", out,
              "--max-nodes", "2")
    assert p.returncode == 1, p.stderr
    assert "does not reproduce: no subgraph of at most 2 node(s)" in p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith("driftscope repro: does not reproduce")
    sub = onnx.load(str(out / "model.onnx"))
    assert len(sub.graph.node) == 2  # the LayerNorm and the residual Add: no MatMul yet
    assert "DOES NOT REPRODUCE" in (out / "README.md").read_text()
    assert run_py(out)[0] == 0


@pytest.mark.parametrize("candidate", ["ort-fp16", "ort-fp16-exact", "openvino"])
def test_run_py_builds_the_candidate_as_the_backend_does(minilm, tmp_path, candidate):
    """run.py's build in the runtime's own API (onnxconverter-common; OpenVINO's CPU plugin at
    the backend's precision hint) measures what the guard's backend measured on the same cut."""
    if candidate == "openvino":
        pytest.importorskip("openvino")
    model, feeds, at = minilm
    out = tmp_path / candidate
    p = repro(model, "--candidate", candidate, "--at", at, "-i", feeds, "-o", out,
              "--max-nodes", "1")
    assert p.returncode in (0, 1), p.stderr
    readme = (out / "README.md").read_text()
    guard_said = re.search(r"candidate's output against the reference's: \S+ \(cosine [0-9.]+, "
                           r"relative error ([0-9.e+-]+)\)", readme)
    rc, text = run_py(out)
    run_said = re.search(rf": {candidate}: \S+: cosine [0-9.]+ \(min 0.99\), relative error "
                         r"([0-9.e+-]+) ", text)
    assert guard_said and run_said, (readme, text)
    assert guard_said.group(1) == run_said.group(1)
    assert rc == (1 if p.returncode == 0 else 0)


def test_unknown_tensor_is_one_line_exit_2(minilm, tmp_path, capfd):
    model, feeds, _ = minilm
    p = repro_here(capfd, model, "--candidate", "ort-int8", "--at", "/encoder/layer.0/output/LayerNorm/Nope",
              "-i", feeds, "-o", tmp_path / "x")
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1, p.stderr
    assert "no tensor named '/encoder/layer.0/output/LayerNorm/Nope'" in p.stderr
    assert "LayerNormalization" in p.stderr  # the nearest names
    assert not (tmp_path / "x").exists()


def test_non_empty_output_folder_is_refused(minilm, tmp_path, capfd):
    model, feeds, at = minilm
    out = tmp_path / "busy"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    p = repro_here(capfd, model, "--candidate", "ort-int8", "--at", at, "-i", feeds, "-o", out)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "not empty" in p.stderr, p.stderr
    assert os.listdir(out) == ["notes.txt"] and (out / "notes.txt").read_text() == "mine"
    for bad, says in ((["--candidate", "torch-fp16"], "not an ONNX backend"),
                      (["--candidate", "ort-qdq"], "run.py cannot rebuild it"),
                      (["--candidate", "nope"], "not a backend"),
                      (["--candidate", "ort-int8", "-o", tmp_path / "no" / "such"],
                       "does not exist")):
        args = [model, "--at", at, "-i", feeds] + bad
        if "-o" not in bad:
            args += ["-o", tmp_path / "fresh"]
        p = repro_here(capfd, *args)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and says in p.stderr, p.stderr


@pytest.fixture(scope="module")
def howto(minilm, tmp_path_factory):
    """docs/howto/repro.md's console lines before its .tflite section (those: test_repro_more.py)
    run once in one folder: (folder, [(line, stated exit status, CompletedProcess)]). Two tests
    above read the bundles its lines make (they built the same two again, with their run.py's)."""
    model, feeds, _ = minilm
    text = open(os.path.join(ROOT, "docs", "howto", "repro.md"), encoding="utf-8").read()
    text = text[:text.index("\n## .tflite")]
    d = tmp_path_factory.mktemp("howto")
    os.symlink(model, d / "minilm.onnx")
    os.symlink(feeds, d / "feeds.npz")
    return d, run_console_lines(text, d)


def run_console_lines(text, folder):
    """Every `$ ` line of the ```console blocks of `text`, run in `folder` as the how-to states it
    ("# exit N" the status it states): [(line, N, CompletedProcess)]."""
    blocks = re.findall(r"```console\n(.*?)```", text, re.S)
    lines = [ln for b in blocks for ln in b.splitlines() if ln.startswith("$ ")]
    ran = []
    for line in lines:
        cmd, _, want = line[2:].partition("# exit ")
        args = [a.strip("'") for a in re.findall(r"'[^']*'|\S+", cmd.strip())]
        if args[0] == "python":
            args[0] = PY
        env = _env() if "driftscope" in args else {
            k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        p = subprocess.run(args, cwd=folder, capture_output=True, text=True, env=env,
                           timeout=900)
        ran.append((line, int(want), p))
    return ran


def _ran(ran, fragment):
    """The CompletedProcess of the one how-to line containing `fragment`."""
    found = [p for line, _, p in ran if fragment in line]
    assert len(found) == 1, (fragment, [line for line, _, _ in ran])
    return found[0]


def _ran_py(ran, fragment):
    """(exit status, output) of the how-to's run.py line containing `fragment`, as run_py."""
    p = _ran(ran, fragment)
    return p.returncode, p.stdout + p.stderr


def test_howto_commands_run(minilm, howto):
    """docs/howto/repro.md: every `python -m driftscope repro` and `python ... run.py` line of
    its console blocks, with its stated exit status (`# exit N`)."""
    _, _, at = minilm
    text = open(os.path.join(ROOT, "docs", "howto", "repro.md"), encoding="utf-8").read()
    # The .tflite and PyTorch sections' commands: test_repro_more.py
    text = text[:text.index("\n## .tflite")]
    _, ran = howto
    assert len(ran) >= 3
    assert f"--at {at} " in text  # the page names the tensor the dumps find
    for line, want, p in ran:
        assert p.returncode == want, (line, p.stdout, p.stderr)
