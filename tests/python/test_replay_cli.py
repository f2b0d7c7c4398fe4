"""`driftscope replay` end to end (issue 26; docs/howto/replay.md): ONNX models through the same
core / attribution / isolation code as PyTorch, names as compare prints them, each part in a
child process (a segfault is a RUNTIME_ERROR row, the rest of the report written), the HTML
page, and every command of the how-to run as written."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pkgenv import env_with_package  # noqa: E402

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto as T, helper, numpy_helper  # noqa: E402

from driftscope._replay import core, report  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def _env():
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env_with_package(env)


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "driftscope", "replay", *args], cwd=cwd,
                          env=_env(), capture_output=True, text=True, timeout=900)


def _split_model(path):
    """x -> l1 (MatMul, Relu) -> split (Split: two outputs) -> add -> l2 (MatMul) -> out."""
    rng = np.random.default_rng(26)
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"], name="/l1/MatMul"),
             helper.make_node("Relu", ["h"], ["r"], name="/l1/Relu"),
             helper.make_node("Split", ["r", "sp"], ["a", "b"], name="/split/Split", axis=1),
             helper.make_node("Add", ["a", "b"], ["s"], name="/add/Add"),
             helper.make_node("MatMul", ["s", "W2"], ["m"], name="/l2/MatMul"),
             helper.make_node("Mul", ["m", "c"], ["y"], name="/out/Mul")]
    inits = [numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), "W1"),
             numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "W2"),
             numpy_helper.from_array(np.array([8, 8], np.int64), "sp"),
             numpy_helper.from_array(np.float32(0.5), "c")]
    g = helper.make_graph(nodes, "split", [helper.make_tensor_value_info("x", T.FLOAT, [2, 8])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [2, 4])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, str(path))
    return str(path)


@pytest.fixture
def split(tmp_path):
    return _split_model(tmp_path / "split.onnx")


def test_second_output_is_named_as_compare_prints_it(split, tmp_path):
    """compare prints a node's second output "NAME (output 1)"; replay takes and prints that."""
    from driftscope._guard.backends.registry import BACKENDS
    from driftscope._replay.onnx import OnnxReplayable

    import driftscope

    feeds = {"x": np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32)}
    for b in ("ort", "ort-int8"):
        BACKENDS[b].load(split, str(tmp_path), 0).record(feeds, str(tmp_path / f"{b}.tdump"))
    text = driftscope.compare(str(tmp_path / "ort.tdump"),
                              str(tmp_path / "ort-int8.tdump")).to_text()
    assert re.search(r"^\s+3 split \(output 1\)\s+fail", text, re.M), text
    r = OnnxReplayable(split, "ort")
    try:
        assert r.tensors() == ["l1.MatMul", "l1", "split", "split (output 1)", "add", "l2",
                               "out"]
        assert r.resolve("split (output 1)") == r.resolve("split:b") == r.resolve("split:1") \
            == "b"
    finally:
        r.close()


def test_onnx_end_to_end_replay_isolate_attribution_and_every_format(split, tmp_path):
    r = _cli(split, "--reference", "ort", "--candidate", "ort-int8", "--at", "split (output 1)",
             "--at", "l1", "--isolate", "--max-isolate", "4", "--json", "r.json",
             "--markdown", "r.md", "--html", "r.html", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "split (output 1) -> y: removes" in r.stdout
    assert "l1: within tolerance (alone: sse 0, rel 0" in r.stdout  # Relu is not quantized
    assert "limit: the first 4 nodes (--max-isolate); 2 node(s) after them not scanned" \
        in r.stdout
    j = json.loads((tmp_path / "r.json").read_text())
    assert [x["at"] for x in j["replays"]] == [["split (output 1)"], ["l1"]]
    assert j["isolation"]["how"] == "one op at a time"
    assert (j["isolation"]["scanned"], j["isolation"]["left_out"]) == (4, 2)
    att = j["attribution"]
    assert att["origins"] == ["split (output 1)", "l1"] and att["runs"] == 4
    y = att["outputs"]["y"]
    assert y["remainder"] == pytest.approx(1 - y["together"])
    assert j["runtime_errors"] == []
    assert (tmp_path / "r.md").read_text().startswith("# driftscope replay:")
    page = (tmp_path / "r.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<h2>Isolation scan" in page
    assert "split (output 1) -&gt; y: removes" in page
    assert not re.search(r"<(script|link)\b|src=", page)  # self-contained, nothing loaded


def test_onnx_without_at_attributes_compare_origins(split, tmp_path):
    r = _cli(split, "--candidate", "ort-int8", "--json", "-", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout[r.stdout.index("{\n"):])
    att = j["attribution"]
    assert att["source"] == "compare's origins" and att["origins"] == ["l1.MatMul"]
    share = att["outputs"]["y"]["ranked"][0]["share"]
    assert 0 < share < 1 and att["outputs"]["y"]["remainder"] == pytest.approx(1 - share)


def test_onnx_unknown_tensor_one_line_exit_2_report_written(split, tmp_path):
    r = _cli(split, "--candidate", "ort-int8", "--at", "split (output 2)", "--at", "l2",
             "--json", "r.json", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "driftscope replay: error: no tensor 'split (output 2)' in the model; nearest: "
        "split (output 1), split"]
    assert [x["at"] for x in json.loads((tmp_path / "r.json").read_text())["replays"]] \
        == [["l2"]]


CRASHY = '''"""Two Linears; the process segfaults on its fourth float16 forward (the attribution
part's: the replay part makes three, the isolation part two)."""
import os
import signal

import torch

CALLS = [0]


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 4)

    def forward(self, x):
        if x.dtype == torch.float16:
            CALLS[0] += 1
            if CALLS[0] == 4:
                os.kill(os.getpid(), signal.SIGSEGV)
        return self.b(torch.relu(self.a(x)))


def build():
    return Net().eval(), (torch.randn(2, 4),)
'''


def test_a_segfault_is_a_runtime_error_row_and_the_rest_is_written(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "crashy.py").write_text(CRASHY)
    r = _cli("--model", "crashy.py:build", "--candidate", "torch-fp16", "--at", "a",
             "--isolate", "--json", "r.json", "--html", "r.html", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "attribution: RUNTIME_ERROR: the runtime's process was killed by SIGSEGV" \
        in r.stdout
    j = json.loads((tmp_path / "r.json").read_text())
    assert j["runtime_errors"] == [{"part": "attribution", "status": "RUNTIME_ERROR",
                                    "error": "the runtime's process was killed by SIGSEGV"}]
    assert j["attribution"]["error"].startswith("RUNTIME_ERROR")
    assert j["ops"][0]["name"] == "a" and j["ops"][0]["verdict"]  # the replay part survived
    assert j["isolation"]["error"] is None and j["isolation"]["scanned"] == 3
    assert "RUNTIME_ERROR" in (tmp_path / "r.html").read_text()


def test_html_escapes_every_name():
    rep = core.Replay("ort", "ort-int8", "<script>alert(1)</script>.onnx", ["y"])
    rep.notes.append('a "note" & <b>')
    page = report.html(rep)
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;.onnx" in page
    assert "&quot;note&quot; &amp; &lt;b&gt;" in page


# -- docs/howto/replay.md: every bash block, run as written -------------------------------------

@pytest.fixture(scope="module")
def howto(minilm_onnx, tmp_path_factory):
    pytest.importorskip("torch")
    d = tmp_path_factory.mktemp("howto")
    shutil.copy(HERE / "models" / "tiny_encoder_torch.py", d)
    shutil.copy(minilm_onnx, d / "minilm.onnx")
    sys.path.insert(0, str(HERE / "models"))
    import tflite_planted

    (d / "planted.tflite").write_bytes(tflite_planted.build())  # the page's .tflite section
    text = (ROOT / "docs" / "howto" / "replay.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    outs = []
    for body in blocks:
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", body], cwd=d, env=_env(),
                           capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, f"block failed:\n{body}\n{r.stdout}\n{r.stderr}"
        outs.append(r.stdout)
    return d, blocks, outs


def test_howto_replay_commands_run(howto):
    d, blocks, outs = howto
    assert len(blocks) == 7
    assert "encoder.layers.2.norm1 -> output: removes 0.0% of its error" in outs[0]
    assert "5 introduce error beyond tolerance" in outs[1]
    assert "all together 100.0%; unexplained 0.0%" in outs[1]
    assert (d / "replay.json").exists() and (d / "replay.md").exists()
    assert "limit: the first 40 nodes (--max-isolate)" in outs[4]
    assert (d / "tiny.html").read_text().startswith("<!DOCTYPE html>")
    assert "planted -> out: removes 100.0% of its error" in outs[6], outs[6]


def test_minilm_int8_attribution_ranks_the_gather_and_the_worst_matmul(howto):
    """The issue's must-show: the word-embedding Gather's and the worst MatMul's shares of
    MiniLM's ort-int8 error (the worst MatMul: the largest own error of the 48 run alone on
    the reference's inputs, encoder.layer.4.output.dense, relative error 0.109)."""
    d, _, outs = howto
    j = json.loads((d / "minilm.json").read_text())
    att = j["attribution"]
    assert set(att["origins"]) == {"embeddings.word_embeddings",
                                   "encoder.layer.4.output.dense.MatMul"}
    tol = att["additive_tolerance"]
    out = att["outputs"]["last_hidden_state"]
    shares = [r["share"] for r in out["ranked"]]
    assert shares == sorted(shares, reverse=True)  # larger first
    assert all(-tol <= s <= 1 + tol for s in shares)
    assert out["ranked"][0]["origin"] == "encoder.layer.4.output.dense.MatMul"
    assert 0 < out["together"] <= 1 and out["remainder"] == pytest.approx(1 - out["together"])
    assert re.search(r"last_hidden_state: encoder\.layer\.4\.output\.dense\.MatMul \d+\.\d%; "
                     r"embeddings\.word_embeddings -?\d+\.\d%; all together \d+\.\d%; "
                     r"unexplained \d+\.\d%", outs[5])
    assert not math.isnan(out["together"])


# -- the parts' processes: forked from one server that imported torch once -------------------------

WHO = '''"""Two Linears; build() notes which process called it and that process's parent."""
import os

import torch

with open(os.environ["WHO_LOG"], "a") as f:
    f.write(f"{os.getpid()} {os.getppid()}\\n")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def build():
    return Net().eval(), (torch.randn(2, 4),)
'''


def _parts(tmp_path, tag, **env):
    """Runs a three-part replay (output and op replay, attribution, isolation); returns the
    replay command's pid, the (pid, parent pid) of each process that imported the model, the
    JSON report and the text one."""
    log = tmp_path / f"{tag}.log"
    (tmp_path / "who.py").write_text(WHO)
    proc = subprocess.Popen([sys.executable, "-m", "driftscope", "replay", "--model",
                             "who.py:build", "--candidate", "torch-fp16", "--at", "a",
                             "--isolate", "--json", f"{tag}.json"], cwd=tmp_path,
                            env={**_env(), "WHO_LOG": str(log), **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err
    rows = {tuple(ln.split()) for ln in log.read_text().splitlines()}
    return proc.pid, rows, (tmp_path / f"{tag}.json").read_text(), out


def test_parts_are_forked_from_one_server_and_report_the_same_as_fresh_interpreters(tmp_path):
    pytest.importorskip("torch")
    pid, forked, report_forked, text_forked = _parts(tmp_path, "forked")
    # Three parts, three processes, all children of one server, not of the command itself.
    assert len({p for p, _ in forked}) == 3, forked
    servers = {pp for _, pp in forked}
    assert len(servers) == 1 and str(pid) not in servers, (pid, forked)
    # Without the server (DRIFTSCOPE_GUARD_NO_FORK, or where fork is missing): a fresh
    # interpreter per part, children of the command; the same report, byte for byte.
    pid, fresh, report_fresh, text_fresh = _parts(tmp_path, "fresh", DRIFTSCOPE_GUARD_NO_FORK="1")
    assert len({p for p, _ in fresh}) == 3 and {pp for _, pp in fresh} == {str(pid)}, fresh
    assert json.loads(report_forked)["attribution"] and json.loads(report_forked)["isolation"]
    assert report_forked == report_fresh and text_forked == text_fresh


# -- where a part's cut models go ----------------------------------------------------------------

def test_a_parts_cut_models_go_below_the_parents_folder(tmp_path, monkeypatch):
    # The ONNX and .tflite mechanisms cut models into a work folder; a child of its own made it
    # with mkdtemp and removed it in close(), so a child killed by a signal or a timeout left it
    # in /tmp (3.2 GB once). The parent's folder now holds it, and the parent removes that.
    from driftscope._replay.cli import Job, run_part

    x = helper.make_tensor_value_info("x", T.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", T.FLOAT, [2, 4])
    w = numpy_helper.from_array(np.eye(4, dtype=np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"], name="/a/MatMul"),
                           helper.make_node("Relu", ["h"], ["y"], name="/b/Relu")],
                          "g", [x], [y], initializer=[w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "m.onnx"))
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(private))
    parent = tmp_path / "part"
    got = run_part(Job("isolation", str(tmp_path / "m.onnx"), "onnx", "ort", "ort", 0, limit=5,
                       work=str(parent)))
    assert "isolation" in got, got
    assert sorted(os.listdir(parent)) == ["candidate", "reference"]
    assert not [p for p in os.listdir(private) if p.startswith("driftscope-replay-")]
