"""driftscope.reference (issue 11, docs/references.md): the hash initialiser against the shared
golden vectors, the PyTorch helper (native scale, BatchNorm calibration, metadata), the C++
example bit-identical to it, the ONNX rewrite, the periodic-pattern failure it replaces, the
ordering-rule table with argmax flips, and the evidence ledger's round trip with tampering."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

import driftscope  # noqa: E402
from driftscope import reference as R  # noqa: E402
from driftscope.reference import _hash  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = json.loads((ROOT / "tests" / "vectors" / "hashinit" / "golden.json").read_text())
DRIFTSCOPE = os.environ.get("DRIFTSCOPE_BIN", str(ROOT / "build" / "dev" / "driftscope"))
EXAMPLE = os.environ.get("DRIFTSCOPE_HASH_REFERENCE",
                         os.path.join(os.path.dirname(DRIFTSCOPE), "examples", "hash_reference"))


def run(*args, cwd=None):
    env = dict(os.environ, DRIFTSCOPE_PYTHON=sys.executable)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in [str(Path(driftscope.__file__).parents[1]), env.get("PYTHONPATH", "")] if p)
    return subprocess.run([DRIFTSCOPE, *map(str, args)], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)


def bits64(v):
    return "%016x" % struct.unpack("<Q", struct.pack("<d", float(v)))[0]


# -- the hash initialiser ------------------------------------------------------------------------

def test_splitmix64_known_answer_and_golden_vectors():
    # Vigna's splitmix64.c seeded with 0 starts e220a8397b1dcdaf 6e789e6aa1b965f4 06c45d188009454f:
    # the spec's stream with key 0 is SplitMix64 itself.
    assert [int(x) for x in _hash.draws(0, 0, 3)] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4,
                                                      0x06C45D188009454F]
    assert len(GOLDEN["values"]) >= 6
    for c in GOLDEN["values"]:
        std = struct.unpack("<d", bytes.fromhex(c["std_bits"])[::-1])[0]
        seed = int(c["seed"])
        assert "%016x" % R.name_key(c["name"], seed) == c["key"]
        v = R.hash_values(c["name"], len(c["float64_bits"]), c["distribution"], std, seed)
        assert [bits64(x) for x in v] == c["float64_bits"], c["name"]
        f = R.hash_tensor(c["name"], (len(v),), c["distribution"], std, "float32", seed)
        assert ["%08x" % x for x in f.view(np.uint32)] == c["float32_bits"], c["name"]
    for c in GOLDEN["digests"]:
        std = struct.unpack("<d", bytes.fromhex(c["std_bits"])[::-1])[0]
        t = R.hash_tensor(c["name"], (c["count"],), c["distribution"], std, "float32", int(c["seed"]))
        assert R.digest_values(t) == c["float32_sha256"]
    for c in GOLDEN["integers"]:
        got = R.hash_integers(c["name"], (len(c["values"]),), c["low"], c["high"], int(c["seed"]))
        assert got.tolist() == c["values"]


def test_second_build_is_bit_identical_and_blocks_do_not_matter(monkeypatch):
    a = R.hash_tensor("layer.weight", (33, 65), "normal", 0.05)
    b = R.hash_tensor("layer.weight", (33, 65), "normal", 0.05)
    assert a.tobytes() == b.tobytes()
    monkeypatch.setattr(_hash, "_CHUNK", 100)  # many blocks: the counter, not the block, decides
    assert R.hash_tensor("layer.weight", (33, 65), "normal", 0.05).tobytes() == a.tobytes()
    assert R.hash_tensor("layer.weight", (33, 65), "normal", 0.05, seed=1).tobytes() != a.tobytes()
    assert R.hash_tensor("layer.weighT", (33, 65), "normal", 0.05).tobytes() != a.tobytes()


def test_moments_and_bounds():
    for dist, bound in (("uniform", 3 ** 0.5), ("normal", 2 * 3 ** 0.5)):
        v = R.hash_values("moments", 200_000, dist, 0.25)
        assert abs(v.mean()) < 0.005 and abs(v.std() - 0.25) < 0.0025
        assert np.abs(v).max() <= 0.25 * bound
    n = R.hash_values("moments", 200_000, "normal", 1.0)
    assert 2.6 < ((n - n.mean()) ** 4).mean() / n.var() ** 2 < 2.8  # Irwin-Hall(4): 2.7


def test_bad_arguments_are_clear_errors():
    for call in (lambda: R.hash_tensor("w", (2,), "uniform", -1.0),
                 lambda: R.hash_tensor("w", (2,), "uniform", float("nan")),
                 lambda: R.hash_tensor("w", (2,), "cauchy", 1.0),
                 lambda: R.hash_tensor("w", (2,), dtype="int8"),
                 lambda: R.hash_tensor("w", (-1, 2)),
                 lambda: R.hash_integers("w", (2,), 5, 5),
                 lambda: R.name_key("w", -1)):
        with pytest.raises(ValueError):
            call()


# -- the PyTorch helper --------------------------------------------------------------------------

def test_hash_init_native_scale_per_module_and_metadata(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.ModuleDict({
        "emb": torch.nn.Embedding(50, 16, padding_idx=0),
        "proj": torch.nn.Linear(16, 24),
        "conv": torch.nn.Conv1d(4, 6, 3, groups=2),
        "norm": torch.nn.LayerNorm(24),
        "attn": torch.nn.MultiheadAttention(16, 2),
    })
    rec = R.hash_init_(model, seed=5)
    p = dict(model.named_parameters())
    want = {"proj.weight": ("uniform", 1 / (3 * 16) ** 0.5),
            "conv.weight": ("uniform", 1 / (3 * 2 * 3) ** 0.5),
            "emb.weight": ("normal", 1.0),
            "attn.in_proj_weight": ("uniform", (2 / (16 + 48)) ** 0.5),
            "attn.out_proj.weight": ("uniform", 1 / (3 * 16) ** 0.5)}
    for name, (dist, std) in want.items():
        assert rec["parameters"][name] == [dist, pytest.approx(std, rel=1e-15)]
        expect = R.hash_tensor(name, tuple(p[name].shape), dist, rec["parameters"][name][1],
                               seed=5)
        if name == "emb.weight":
            expect[0] = 0  # padding_idx row, as nn.Embedding does
        assert p[name].detach().numpy().tobytes() == expect.tobytes(), name
    assert torch.equal(p["norm.weight"], torch.ones(24)) and torch.equal(p["norm.bias"], torch.zeros(24))
    assert torch.equal(p["attn.in_proj_bias"], torch.zeros(48))
    assert torch.equal(p["attn.out_proj.bias"], torch.zeros(16))  # MHA zeroes it; Linear would not
    # recorded as run metadata by the torch recorder
    lin = torch.nn.Sequential(torch.nn.Linear(16, 24))
    R.hash_init_(lin)
    with driftscope.torch.record(lin, tmp_path / "r.tdump"):
        lin(torch.ones(1, 16))
    meta = json.loads(driftscope.open(tmp_path / "r.tdump").metadata["reference.init"])
    assert meta["scheme"] == "driftscope-hash/1" and meta["parameters"]["0.weight"][0] == "uniform"


def test_hash_init_second_build_is_bit_identical():
    def build(seed):
        torch.manual_seed(seed)  # torch's own init differs; the hash must not care
        m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Linear(5, 6),
                                torch.nn.Embedding(7, 3))
        R.hash_init_(m)
        return {k: v.numpy().tobytes() for k, v in m.state_dict().items()}

    assert build(1) == build(2)


def test_hash_init_unknown_module_needs_an_override():
    class Scale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gain = torch.nn.Parameter(torch.ones(3))

    m = torch.nn.Sequential(torch.nn.Linear(3, 3), Scale())
    with pytest.raises(ValueError, match=r"1\.gain \(Scale\)"):
        R.hash_init_(m)
    rec = R.hash_init_(m, overrides={"*.gain": ("normal", 0.02)})
    assert rec["parameters"]["1.gain"] == ["normal", 0.02]
    assert m[1].gain.detach().numpy().tobytes() == R.hash_tensor("1.gain", (3,), "normal", 0.02).tobytes()


def test_batchnorm_is_calibrated_on_separate_integer_inputs():
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    batches = R.calibration_inputs((2, 3, 6, 6), batches=3)
    assert all(torch.equal(b * 64, b.mul(64).round()) for b in batches)  # integers / 64
    rec = R.hash_init_(m, calibrate=batches)
    assert rec["batchnorm"] == "calibrated" and rec["calibration_batches"] == 3
    # independent: the conv outputs of all batches, their per-channel mean and unbiased variance,
    # averaged over the batches as momentum=None does
    with torch.no_grad():
        outs = [m[0](b).double() for b in batches]
    mean = np.mean([o.mean(dim=(0, 2, 3)).numpy() for o in outs], axis=0)
    var = np.mean([o.var(dim=(0, 2, 3), unbiased=True).numpy() for o in outs], axis=0)
    np.testing.assert_allclose(m[1].running_mean.numpy(), mean, rtol=1e-5)
    np.testing.assert_allclose(m[1].running_var.numpy(), var, rtol=1e-5)
    assert m[1].momentum == 0.1 and m.training and m[0].training  # the modes it had, restored
    m.eval()
    R.hash_init_(m, calibrate=batches)
    assert not m.training and not m[1].training
    # the calibration inputs are not evaluation inputs: other names, other values
    assert not torch.equal(batches[0], R.calibration_inputs((2, 3, 6, 6), 1, name="eval")[0])


def test_cpp_example_builds_the_same_weights_and_layer_output(tmp_path):
    assert os.access(EXAMPLE, os.X_OK), f"{EXAMPLE} is not built (cmake --build build/dev)"
    out = tmp_path / "cpp.tdump"
    subprocess.run([EXAMPLE, str(out)], check=True, timeout=60)
    cpp = driftscope.open(out)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU())
    R.hash_init_(model)
    x = torch.from_numpy(R.hash_integers("input", (2, 16), -8, 8).astype(np.float32))
    for name in ("0.weight", "0.bias"):
        assert cpp.record(name, role="parameter").numpy().tobytes() == \
            dict(model.named_parameters())[name].detach().numpy().tobytes()
    assert cpp.record("input", role="input").numpy().tobytes() == x.numpy().tobytes()
    with torch.no_grad():
        y64 = model.double()(x.double()).numpy()
    assert cpp["output.float64"].tobytes() == y64.tobytes()
    assert cpp["output.float32"].tobytes() == y64.astype(np.float32).tobytes()


# -- the ONNX rewrite ----------------------------------------------------------------------------

def _small_onnx(path):
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.standard_normal((30, 8)).astype(np.float32), "emb"),
             numpy_helper.from_array(rng.standard_normal((8, 12)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.standard_normal(12).astype(np.float32), "b1"),
             numpy_helper.from_array(rng.standard_normal(12).astype(np.float32), "ln_s"),
             numpy_helper.from_array(rng.standard_normal(12).astype(np.float32), "ln_b"),
             numpy_helper.from_array(np.array(2.828427, np.float32), "scale")]
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["e"]),
             helper.make_node("MatMul", ["e", "w1"], ["h"]),
             helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("LayerNormalization", ["hb", "ln_s", "ln_b"], ["n"], axis=-1),
             helper.make_node("Div", ["n", "scale"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 12])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def test_onnx_rewrite_cli(tmp_path):
    from onnx import numpy_helper

    src, dst = tmp_path / "m.onnx", tmp_path / "m.hash.onnx"
    _small_onnx(src)
    before = src.read_bytes()
    proc = run("reference", "init", src, "-o", dst)
    assert proc.returncode == 0, proc.stderr
    assert "4 initializers rewritten" in proc.stderr or "5 initializers rewritten" in proc.stderr
    assert src.read_bytes() == before
    got = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(dst)).graph.initializer}
    std = 1 / (3 * 8) ** 0.5
    assert got["w1"].tobytes() == R.hash_tensor("w1", (8, 12), "uniform", std).tobytes()
    assert got["b1"].tobytes() == R.hash_tensor("b1", (12,), "uniform", std).tobytes()
    assert got["emb"].tobytes() == R.hash_tensor("emb", (30, 8), "normal", 1.0).tobytes()
    assert (got["ln_s"] == 1).all() and (got["ln_b"] == 0).all()
    assert got["scale"] == np.float32(2.828427)  # a constant, not a weight
    meta = {p.key: p.value for p in onnx.load(str(dst)).metadata_props}
    assert json.loads(meta["driftscope.reference.init"])["kept"] == ["scale"]
    # a second rewrite is byte-identical; the output may not be the input
    assert run("reference", "init", src, "-o", tmp_path / "again.onnx").returncode == 0
    assert (tmp_path / "again.onnx").read_bytes() == dst.read_bytes()
    proc = run("reference", "init", src, "-o", src)
    assert proc.returncode == 2 and "is the input file" in proc.stderr and src.read_bytes() == before
    proc = run("reference", "init", tmp_path / "missing.onnx", "-o", dst)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


# -- why the hash: a periodic pattern on a Linear stack ------------------------------------------

def periodic_vs_hash(layers=8, width=64, period=31):
    """{design: (smallest weight rank, rank of the last activations, peak |activation|)} for a
    stack of `layers` Linear(width, width) layers on hash-integer inputs: the periodic integer
    pattern ((flat index mod period) - period // 2), the same scaled by 1/fan_in, and the hash at
    PyTorch's native scale. docs/references.md shows these numbers."""
    x = R.hash_integers("input", (width, width), -8, 8).astype(np.float64) / 8
    pattern = ((np.arange(width * width) % period) - period // 2).reshape(width, width)
    out = {}
    for kind in ("periodic integers", "periodic / fan_in", "hash, native std"):
        h, ranks = x, []
        for i in range(layers):
            if kind == "periodic integers":
                w = pattern.astype(np.float64)
            elif kind == "periodic / fan_in":
                w = pattern / width
            else:
                w = R.hash_tensor(f"{i}.weight", (width, width), "uniform",
                                  1 / (3 * width) ** 0.5, "float64")
            ranks.append(int(np.linalg.matrix_rank(w)))
            h = h @ w.T
        out[kind] = (min(ranks), int(np.linalg.matrix_rank(h)), float(np.abs(h).max()))
    return out


def test_periodic_pattern_is_rank_deficient_and_blows_up():
    got = periodic_vs_hash()
    for kind in ("periodic integers", "periodic / fan_in"):
        assert got[kind][0] <= 30 and got[kind][1] <= 30  # rank <= period - 1, at every layer
    assert got["hash, native std"][0] == 64 and got["hash, native std"][1] >= 60
    assert got["periodic integers"][2] > 1e12  # the activation blow-up
    assert 1e-3 < got["hash, native std"][2] < 10


# -- reference runs, the ordering-rule table, argmax flips, evidence -----------------------------

@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """float32 and float64 reference runs of a small hash-initialised classifier, a bfloat16
    candidate and a float32 rerun, on hash-integer inputs."""
    from reference_runs import classifier_runs

    d = tmp_path_factory.mktemp("refs")
    paths = classifier_runs(d)
    paths.update(dir=d)
    return paths


def test_reference_runs_are_the_same_model_in_two_widths(runs):
    r32, r64 = driftscope.open(runs["float32"]), driftscope.open(runs["float64"])
    assert r32.metadata["reference.precision"] == "float32" and r64["2"].dtype == np.float64
    assert r32.record("2").dtype == "f32" and "reference.init" in r64.metadata
    # float32 vs float64 differ by rounding only
    np.testing.assert_allclose(r32["<root>"], r64["<root>"], rtol=1e-5, atol=1e-6)


def test_reference_run_cli(tmp_path):
    (tmp_path / "net.py").write_text(
        "import torch\n"
        "def make():\n"
        "    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh())\n"
        "    return m, torch.ones(2, 4)\n")
    proc = run("reference", "run", "--model", tmp_path / "net.py:make", "-o", tmp_path / "refs",
               "--hash-init", "--seed", "3")
    assert proc.returncode == 0, proc.stderr
    r32, r64 = (driftscope.open(tmp_path / "refs" / f"{w}.tdump") for w in ("float32", "float64"))
    assert json.loads(r64.metadata["reference.init"])["seed"] == "3"
    w = R.hash_tensor("0.weight", (3, 4), "uniform", 1 / (3 * 4) ** 0.5, seed=3)
    want = np.tanh(np.ones((2, 4)) @ w.astype(np.float64).T +
                   R.hash_tensor("0.bias", (3,), "uniform", 1 / (3 * 4) ** 0.5, seed=3))
    np.testing.assert_allclose(r64["1"], want, rtol=1e-12)
    np.testing.assert_allclose(r32["1"], want, rtol=1e-6)
    proc = run("reference", "run", "--model", tmp_path / "net.py:nothing", "-o", tmp_path / "x")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


def test_check_table_matches_compare_and_independent_argmax_flips(runs, tmp_path):
    proc = run("reference", "check", runs["float32"], runs["bf16"], "--reference64",
               runs["float64"], "--format", "json", "-o", tmp_path / "t.json")
    assert proc.returncode in (0, 1), proc.stderr
    table = json.loads((tmp_path / "t.json").read_text())
    rep = driftscope.compare(runs["float32"], runs["bf16"], reference64=runs["float64"])
    by_name = {t["name"]: t["reference64"] for t in rep.tensors}
    c, r32, r64 = (driftscope.open(runs[k]) for k in ("bf16", "float32", "float64"))
    assert table["judged"] == 4
    for row in table["rows"]:
        want = by_name[row["name"]]
        assert row["candidate_vs_float64"] == want["error_candidate"]
        assert row["limit"] == want["limit"]
        assert row["rule"] == ("pass" if want["error_candidate"] <= want["limit"] else "fail")
        # argmax flips counted here with numpy, independently
        ref = r64[row["name"]].reshape(-1, r64[row["name"]].shape[-1])
        cand = c[row["name"]].astype(np.float64).reshape(ref.shape)
        flipped = np.nonzero(ref.argmax(1) != cand.argmax(1))[0]
        assert row["argmax"]["flips"] == flipped.size and row["argmax"]["rows"] == ref.shape[0]
        assert [f["position"][0] for f in row["argmax"]["listed"]] == flipped[:20].tolist()
    assert table["passed"] == (proc.returncode == 0) == (not table["failed"])
    # a strict rule (k = 1, no floor) fails bfloat16: its error is far above float32's own
    proc = run("reference", "check", runs["float32"], runs["bf16"], "--reference64",
               runs["float64"], "--r64-k", "bf16=1", "--r64-floor", "0", "--format", "markdown")
    assert proc.returncode == 1 and "| tensor | cand vs f64 |" in proc.stdout
    assert "first failing: 0" in proc.stdout


def test_evidence_declare_measure_verify_and_tampering(runs, tmp_path):
    ledger = tmp_path / "evidence.jsonl"
    base = ["--reference", runs["float32"], "--reference64", runs["float64"]]
    cand = tmp_path / "cand.tdump"
    cand.write_bytes(Path(runs["bf16"]).read_bytes())
    proc = run("evidence", "measure", ledger, "--id", "bf16", "--candidate", cand)
    assert proc.returncode == 2 and "declare" in proc.stderr  # nothing declared yet
    proc = run("evidence", "declare", ledger, "--id", "bf16", *base, "--r64-k", "bf16=3",
               "--design", "hash init seed 0, inputs hash_integers('input')")
    assert proc.returncode == 0, proc.stderr
    assert run("evidence", "declare", ledger, "--id", "bf16", *base).returncode == 2  # id in use
    proc = run("evidence", "measure", ledger, "--id", "bf16", "--candidate", cand)
    assert proc.returncode in (0, 1) and "measured bf16" in proc.stdout, proc.stderr
    proc = run("evidence", "measure", ledger, "--id", "bf16", "--candidate", cand)
    assert proc.returncode == 2 and "measured already" in proc.stderr
    proc = run("evidence", "verify", ledger)
    assert proc.returncode == 0 and "2 lines, intact" in proc.stdout, proc.stdout
    head = proc.stdout.split("head ")[-1].strip()
    assert run("evidence", "verify", ledger, "--head", head).returncode == 0
    lines = ledger.read_bytes().splitlines(keepends=True)
    assert json.loads(lines[0])["entry"]["tolerances"] == {"r64_k": {"bf16": 3.0}}

    # an edited tolerance in the declaration is detected, and blocks further measuring
    edited = lines[0].replace(b'"bf16":3.0', b'"bf16":30.0')
    assert edited != lines[0]
    ledger.write_bytes(edited + lines[1])
    proc = run("evidence", "verify", ledger)
    assert proc.returncode == 1 and "line 1" in proc.stdout and "edited" in proc.stdout
    ledger.write_bytes(b"".join(lines))
    assert run("evidence", "verify", ledger).returncode == 0
    # a removed last line is caught against the recorded head (no longer a line of the ledger)
    ledger.write_bytes(lines[0])
    proc = run("evidence", "verify", ledger, "--head", head)
    assert proc.returncode == 1 and f"pinned head {head} is no line" in proc.stdout
    ledger.write_bytes(b"".join(lines))
    # an edited candidate (a measured file) is detected
    data = bytearray(cand.read_bytes())
    data[-200] ^= 1
    cand.write_bytes(bytes(data))
    proc = run("evidence", "verify", ledger)
    assert proc.returncode == 1 and "candidate" in proc.stdout and "changed" in proc.stdout
    # a declared file changed after the declaration: the measurement is refused
    ref_copy = tmp_path / "ref32.tdump"
    ref_copy.write_bytes(Path(runs["float32"]).read_bytes())
    proc = run("evidence", "declare", ledger, "--id", "again", "--reference", ref_copy,
               "--reference64", runs["float64"])
    assert proc.returncode == 0, proc.stderr
    data = bytearray(ref_copy.read_bytes())
    data[-200] ^= 1
    ref_copy.write_bytes(bytes(data))
    proc = run("evidence", "measure", ledger, "--id", "again", "--candidate", runs["bf16"])
    assert proc.returncode == 2 and "changed since it was declared" in proc.stderr
    assert ledger.read_bytes().count(b"\n") == 3  # nothing was appended


def test_check_with_a_nan_candidate_fails_and_stays_valid_json(runs, tmp_path):
    import copy

    import driftscope.torch as dt

    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 10))
    R.hash_init_(m)
    bad = copy.deepcopy(m)
    with torch.no_grad():
        bad[2].bias[3] = float("nan")
    x = torch.from_numpy(R.hash_integers("input", (64, 16), -8, 8).astype(np.float32) / 8)
    with torch.no_grad(), dt.record(bad, tmp_path / "nan.tdump"):
        bad(x)
    proc = run("reference", "check", runs["float32"], tmp_path / "nan.tdump", "--reference64",
               runs["float64"], "--format", "json")
    assert proc.returncode == 1, proc.stderr
    table = json.loads(proc.stdout)  # strict JSON: no NaN/Infinity literals
    row = next(r for r in table["rows"] if r["name"] == "2")
    assert row["rule"] == "fail" and row["candidate_vs_float64"] == "inf"
    assert table["failed"][0] == "2" and "0" not in table["failed"]
