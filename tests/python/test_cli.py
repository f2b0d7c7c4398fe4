"""Tests of the `driftscope` command (issue 2 §5), in zstd's tests/cli-tests layout: every
`tests/cli/<area>/<name>.sh` (area: the subcommand, or a concern such as usage or fifo) is a bash
script run in a scratch folder holding the fixture files below, beside its exact expected output
`<name>.sh.stdout.exact`, `<name>.sh.stderr.exact` and exit status `<name>.sh.exit`. Then the properties a sidecar
cannot show: hostile .npz/.safetensors inputs each rejected with exit 2 and their exact message,
import -> export round trips equal in numpy, verify's exit status at every cut offset, and the
examples of docs/cli.md run as written.

    DRIFTSCOPE_BIN=build/dev/driftscope pytest tests/python/test_cli.py
    DRIFTSCOPE_UPDATE_CASES=1 ...   rewrites the sidecars from the current output (review the diff!)

Fixture files (made fresh per session from numpy arrays, through `driftscope import` or the
independent writer tests/support/tdump_write.py):
  acts.npz        six arrays (f32, f16 with Inf, f32 with NaN, i64, bool, a 20x30 f32)
  run.tdump       acts.npz imported with --salt 0x1 --meta framework=numpy
  weights.safetensors   BF16, F32, I8 tensors plus __metadata__
  multi.tdump     tdump_write: occurrences, roles, axes, attrs, bf16, affine int8, a summary
                  record, a rank-0 tensor; closed cleanly
  unfinished.tdump  the same records without INDEX/END
  cut.tdump       run.tdump cut 100 bytes into its last tensor record
  corrupt.tdump   run.tdump with one payload byte of its third record flipped
  badindex.tdump  run.tdump whose INDEX names a wrong hash for one entry (CRC fixed up)
  badslots.tdump  run.tdump whose INDEX hash slots are all 0xFFFFFFFF (CRC fixed up)
  fakepy/         fake Python interpreters for the `record` seam
"""
from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests" / "cli"
DOC = ROOT / "docs" / "cli.md"
BIN = Path(os.environ.get("DRIFTSCOPE_BIN", ROOT / "build" / "dev" / "driftscope")).absolute()
UPDATE = os.environ.get("DRIFTSCOPE_UPDATE_CASES") == "1"

sys.path.insert(0, str(ROOT / "tests" / "support"))
import tdump_write as tw  # noqa: E402

pytestmark = pytest.mark.skipif(not BIN.exists(), reason=f"driftscope binary not built: {BIN}")


# ---- fixtures ----------------------------------------------------------------------------------

def acts() -> dict[str, np.ndarray]:
    return {
        "embed": np.arange(8, dtype=np.float32).reshape(2, 4) / 4,
        "encoder.layers.0.attn": np.array([[1, -2, 3], [0.5, 0, np.inf]], dtype=np.float16),
        "encoder.layers.0.mlp": np.array([[1, np.nan, 3], [4, 5, 6]], dtype=np.float32),
        "ids": np.arange(6, dtype=np.int64).reshape(2, 3),
        "mask": np.array([True, False, True, True]),
        "big": np.arange(600, dtype=np.float32).reshape(20, 30),
    }


def safetensors_bytes(tensors, metadata=None, pad_to=8) -> bytes:
    """A safetensors file from (name, dtype, shape, raw bytes) in data order."""
    header, data, off = {}, b"", 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        data += raw
        off += len(raw)
    js = json.dumps(header).encode()
    js += b" " * (-len(js) % pad_to)
    return struct.pack("<Q", len(js)) + js + data


def bf16_bits(x) -> np.ndarray:
    """Round-to-nearest-even float32 -> bfloat16 bit patterns."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def multi_tensors() -> list[dict]:
    f = np.float32
    return [
        {"name": "embeddings", "op_type": "Embedding", "role": "input", "dtype": "i64",
         "shape": [1, 4], "axes": "batch,seq", "data": np.array([[101, 7592, 2088, 102]], "<i8")},
        {"name": "embeddings", "op_type": "Embedding", "dtype": "f32", "shape": [1, 4, 3],
         "axes": "batch,seq,hidden", "attrs": [("onnx_name", "/embeddings/Add_1_output_0")],
         "data": (np.arange(12, dtype=f).reshape(1, 4, 3) - 6) / 8},
        {"name": "encoder.layer.0", "op_type": "BertLayer", "dtype": "bf16", "shape": [2, 3],
         "data": bf16_bits([[0.1, -1.5, 3.0], [1e10, -0.0, 7.25]])},
        {"name": "encoder.layer.0", "op_type": "BertLayer", "dtype": "bf16", "shape": [2, 3],
         "data": bf16_bits([[0.2, -1.0, 2.0], [1e9, 0.0, 7.5]])},
        {"name": "encoder.layer.0.weight", "op_type": "Linear", "role": "parameter",
         "dtype": "i8", "shape": [2, 2],
         "encoding": {"kind": "affine_tensor", "scale": 0.5, "zero_point": 1},
         "data": np.array([[1, 3], [-1, 127]], "i1")},
        {"name": "pooler", "op_type": "BertPooler", "dtype": "f32", "shape": [],
         "data": np.array(0.75, "<f4")},
        {"kind": "summary", "name": "encoder.layer.1", "op_type": "BertLayer", "dtype": "f32",
         "shape": [1, 4, 384],
         "summary": {"count": 1536, "nan_count": 0, "posinf_count": 0, "neginf_count": 0,
                     "zero_count": 2, "min": -3.5, "max": 4.25, "mean": 0.125, "std": 1.5,
                     "l2_norm": 59.0, "projection_seed": 0x5DEECE66D, "projection_kind": 1,
                     "projection": [0.5, -0.25, 1.0, 2.0]}},
    ]


def run(args, cwd, env=None, check=None):
    p = subprocess.run([str(BIN), *args], cwd=cwd, capture_output=True, text=True, env=env,
                       timeout=120)
    if check is not None:
        assert p.returncode == check, (p.returncode, p.stdout, p.stderr)
    return p


def fix_index_hash(src: Path, dst: Path) -> None:
    """Copies src with the first INDEX entry's name hash changed and the INDEX record's CRC
    recomputed, so only the index's agreement with the records is wrong."""
    b = bytearray(src.read_bytes())
    end = len(b) - 64
    index_off = struct.unpack_from("<Q", b, end + 48)[0]
    meta_len = struct.unpack_from("<I", b, index_off + 24)[0]
    payload_len = struct.unpack_from("<Q", b, index_off + 16)[0]
    pstart = index_off + tw.align64(48 + meta_len)
    struct.pack_into("<Q", b, pstart + 8, struct.unpack_from("<Q", b, pstart + 8)[0] ^ 1)
    crc = zlib.crc32(bytes(b[index_off:index_off + 44]) + bytes(b[index_off + 48:index_off + 48 + meta_len])
                     + bytes(b[pstart:pstart + payload_len]))
    struct.pack_into("<I", b, index_off + 44, crc)
    dst.write_bytes(bytes(b))


def fill_index_slots(src: Path, dst: Path, value: int) -> None:
    """Copies src with every INDEX hash slot set to `value` and the INDEX CRC recomputed."""
    b = bytearray(src.read_bytes())
    index_off = struct.unpack_from("<Q", b, len(b) - 64 + 48)[0]
    n, slots = struct.unpack_from("<QQ", b, index_off + 48)
    pstart = index_off + tw.align64(48 + 24)
    for i in range(slots):
        struct.pack_into("<I", b, pstart + 24 * n + 4 * i, value)
    struct.pack_into("<I", b, index_off + 44, tw.crc32(bytes(b[index_off:index_off + 44]),
                                                      bytes(b[index_off + 48:index_off + 72]),
                                                      bytes(b[pstart:pstart + 24 * n + 4 * slots])))
    dst.write_bytes(bytes(b))


FAKE_NO_PACKAGE = "#!/bin/sh\n# a Python without driftscope: every import fails\nexit 1\n"
FAKE_ECHO = """#!/bin/sh
# a Python with driftscope: the import probe passes; a real run prints its arguments, the
# bootstrap that keeps the working directory off sys.path (SECURITY.md 8) as [-c SAFE-RUN]
case "$2" in
  *find_spec*) exit 0 ;;
  *"del sys.path[0]"*"run_module('driftscope'"*) shift 2; printf 'fake python got: [-c SAFE-RUN]' ;;
  *) printf 'fake python got:' ;;
esac
for a in "$@"; do printf ' [%s]' "$a"; done; echo
exit 7
"""


@pytest.fixture(scope="session")
def fixtures(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("fixtures")
    np.savez(d / "acts.npz", **acts())
    run(["import", "acts.npz", "run.tdump", "--salt", "0x1", "--meta", "framework=numpy", "-q"],
        d, check=0)
    (d / "weights.safetensors").write_bytes(safetensors_bytes(
        [("lm_head.weight", "BF16", [2, 2], bf16_bits([[1, -2], [0.5, 3]]).tobytes()),
         ("norm.bias", "F32", [3], np.array([0.25, 0, -1], "<f4").tobytes()),
         ("q.weight", "I8", [4], np.array([-128, 0, 1, 127], "i1").tobytes())],
        metadata={"format": "pt", "model": "tiny"}))
    meta = [("framework", "pytorch 2.13.0"), ("backend", "cpu"), ("precision", "float32"),
            ("writer", "tests/support/tdump_write.py")]
    tw.write_tdump(d / "multi.tdump", meta, multi_tensors(), salt=0x0123456789ABCDEF)
    tw.write_tdump(d / "unfinished.tdump", meta, multi_tensors(), salt=0x0123456789ABCDEF,
                   close=False)
    b = (d / "run.tdump").read_bytes()
    recs = json.loads(run(["ls", "run.tdump", "--json", "--no-stats"], d, check=0).stdout)
    (d / "cut.tdump").write_bytes(b[:recs[-1]["offset"] + 100])
    bad = bytearray(b)
    bad[recs[2]["payload_offset"]] ^= 0x01
    (d / "corrupt.tdump").write_bytes(bytes(bad))
    fix_index_hash(d / "run.tdump", d / "badindex.tdump")
    fill_index_slots(d / "run.tdump", d / "badslots.tdump", 0xFFFFFFFF)
    fp = d / "fakepy"
    fp.mkdir()
    for name, text in [("nopackage", FAKE_NO_PACKAGE), ("echo", FAKE_ECHO)]:
        (fp / name).write_text(text)
        (fp / name).chmod(0o755)
    return d


@pytest.fixture(scope="session")
def bindir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bin")
    (d / "driftscope").symlink_to(BIN.resolve())
    return d


@pytest.fixture(scope="session")
def version() -> str:
    return subprocess.run([str(BIN), "--version"], capture_output=True, text=True).stdout.splitlines()[0].split()[-1]


def scratch(fixtures: Path, tmp_path: Path) -> Path:
    work = tmp_path / "work"
    shutil.copytree(fixtures, work, symlinks=True)
    return work


def case_env(bindir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLUMNS", "DRIFTSCOPE_PYTHON", "NO_COLOR")}
    env["PATH"] = f"{bindir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHON"] = sys.executable
    env["LC_ALL"] = "C.UTF-8"
    return env


def normalise(text: str, version: str) -> str:
    # The writer's identity carries the version; sidecars say <VERSION> so a release needs no
    # sidecar edits.
    return text.replace(f"driftscope {version}", "driftscope <VERSION>")


# ---- sidecar cases ------------------------------------------------------------------------------

# "<area>/<name>" for every tests/cli/<area>/<name>.sh
CASE_NAMES = sorted(str(p.relative_to(CASES).with_suffix(""))
                    for p in CASES.glob("*/*.sh")) if CASES.exists() else []
SIDECARS = {"stdout": ".sh.stdout.exact", "stderr": ".sh.stderr.exact", "exit": ".sh.exit"}


def sidecar(case: str, kind: str) -> Path:
    return CASES / (case + SIDECARS[kind])


@pytest.mark.parametrize("case", CASE_NAMES)
def test_case(case, fixtures, bindir, version, tmp_path):
    work = scratch(fixtures, tmp_path)
    p = subprocess.run(["bash", "-o", "pipefail", str(CASES / (case + ".sh"))], cwd=work,
                       capture_output=True, text=True, env=case_env(bindir), timeout=120)
    got = {"stdout": normalise(p.stdout, version), "stderr": normalise(p.stderr, version),
           "exit": f"{p.returncode}\n"}
    if UPDATE:
        for k, v in got.items():
            sidecar(case, k).write_text(v)
    for k, v in got.items():
        want = sidecar(case, k).read_text()
        assert v == want, f"{case}: {k} differs\n--- want\n{want}\n--- got\n{v}"


def test_every_case_has_sidecars():
    assert len(CASE_NAMES) >= 73, f"CLI cases missing: {len(CASE_NAMES)} found"
    for c in CASE_NAMES:
        for k in SIDECARS:
            assert sidecar(c, k).exists(), f"{c}{SIDECARS[k]} missing"
    # A sidecar without its script is a case that silently stopped running.
    for p in CASES.glob("*/*.sh.*"):
        assert p.name.split(".sh.")[0] + ".sh" in {q.name for q in p.parent.glob("*.sh")}, p


# ---- help ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("sub", ["info", "ls", "show", "verify", "filter", "export", "import"])
def test_help_has_examples(sub, tmp_path):
    p = run([sub, "--help"], tmp_path, check=0)
    assert "Examples:" in p.stdout and f"driftscope {sub} " in p.stdout
    assert p.stderr == ""


def test_usage_error_is_one_line_exit_2(tmp_path):
    p = run(["ls"], tmp_path, check=2)
    assert p.stdout == ""
    assert p.stderr.startswith("driftscope: error: ") and p.stderr.count("\n") == 1


# ---- import -> export round trips ---------------------------------------------------------------

def roundtrip_arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    out = {}
    for dt in ["<f8", "<f4", "<f2", "<i8", "<i4", "<i2", "i1", "u1", "<u2", "<u4", "<u8"]:
        a = rng.integers(-100, 100, size=(3, 5)).astype(dt) if dt[-2] in "iu" or dt[0] in "iu" \
            else rng.standard_normal((3, 5)).astype(dt)
        out[f"t.{np.dtype(dt).name}"] = a
    out["bool"] = rng.integers(0, 2, size=7).astype(bool)
    out["scalar"] = np.array(3.5, dtype=np.float32)
    out["empty"] = np.zeros((0, 4), dtype=np.float32)
    out["specials"] = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-45], dtype=np.float32)
    out["rank5"] = np.arange(2 * 3 * 1 * 2 * 2, dtype=np.int32).reshape(2, 3, 1, 2, 2)
    out["unicode.名前"] = np.ones(2, dtype=np.float64)
    return out


@pytest.mark.parametrize("compressed_in", [False, True])
@pytest.mark.parametrize("compressed_out", [False, True])
def test_npz_roundtrip(tmp_path, compressed_in, compressed_out):
    arrays = roundtrip_arrays()
    (np.savez_compressed if compressed_in else np.savez)(tmp_path / "in.npz", **arrays)
    run(["import", "in.npz", "x.tdump", "-q"], tmp_path, check=0)
    run(["verify", "x.tdump"], tmp_path, check=0)
    run(["export", "x.tdump", "out.npz", "-q"] + (["-z"] if compressed_out else []), tmp_path, check=0)
    got = np.load(tmp_path / "out.npz", allow_pickle=False)
    assert list(got.keys()) == list(arrays.keys())  # archive order is execution order
    for k, a in arrays.items():
        b = got[k]
        assert b.dtype == a.dtype and b.shape == a.shape, k
        assert a.tobytes() == b.tobytes(), k  # bit-exact, NaN payloads and -0.0 included


def test_npz_layouts_are_converted(tmp_path):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.savez(tmp_path / "in.npz", big_endian=a.astype(">f4"), fortran=np.asfortranarray(a),
             be_int=a.astype(">i8"))
    run(["import", "in.npz", "x.tdump", "-q"], tmp_path, check=0)
    run(["export", "x.tdump", "out.npz", "-q"], tmp_path, check=0)
    got = np.load(tmp_path / "out.npz")
    assert got["big_endian"].dtype == np.dtype("<f4") and np.array_equal(got["big_endian"], a)
    assert np.array_equal(got["fortran"], a) and got["fortran"].flags.c_contiguous
    assert got["be_int"].dtype == np.dtype("<i8") and np.array_equal(got["be_int"], a.astype("<i8"))


def test_hand_written_safetensors_fixture_matches_the_real_package(fixtures):
    """The golden CLI cases read weights.safetensors, written by safetensors_bytes() above so that
    its data order is fixed; the real package must read it as the tensors meant."""
    import safetensors.torch
    import torch
    got = safetensors.torch.load_file(str(fixtures / "weights.safetensors"))
    assert got["lm_head.weight"].dtype == torch.bfloat16
    assert got["lm_head.weight"].float().tolist() == [[1, -2], [0.5, 3]]
    assert got["norm.bias"].tolist() == [0.25, 0, -1]
    assert got["q.weight"].tolist() == [-128, 0, 1, 127]
    from safetensors import safe_open
    with safe_open(str(fixtures / "weights.safetensors"), framework="pt") as f:
        assert f.metadata() == {"format": "pt", "model": "tiny"}


def test_safetensors_import_export(fixtures, tmp_path):
    work = scratch(fixtures, tmp_path)
    run(["import", "weights.safetensors", "w.tdump", "-q"], work, check=0)
    ls = json.loads(run(["ls", "w.tdump", "--json"], work, check=0).stdout)
    assert [(r["name"], r["dtype"], r["shape"]) for r in ls] == [
        ("lm_head.weight", "bf16", [2, 2]), ("norm.bias", "f32", [3]), ("q.weight", "i8", [4])]
    info = json.loads(run(["info", "w.tdump", "--json"], work, check=0).stdout)
    assert info["metadata"]["format"] == "pt" and info["metadata"]["model"] == "tiny"
    assert info["metadata"]["source_format"] == "safetensors"
    p = run(["export", "w.tdump", "w.npz"], work, check=0)
    assert "1 bf16 tensor exported as float32" in p.stderr
    got = np.load(work / "w.npz")
    assert got["lm_head.weight"].dtype == np.float32
    assert np.array_equal(got["lm_head.weight"], np.array([[1, -2], [0.5, 3]], np.float32))
    assert np.array_equal(got["q.weight"], np.array([-128, 0, 1, 127], np.int8))


def test_export_keys_and_dequantization(fixtures, tmp_path):
    work = scratch(fixtures, tmp_path)
    run(["export", "multi.tdump", "m.npz", "-q"], work, check=0)
    got = np.load(work / "m.npz")
    assert list(got.keys()) == ["embeddings[input:0]", "embeddings", "encoder.layer.0",
                                "encoder.layer.0@1", "encoder.layer.0.weight[parameter:0]",
                                "pooler"]
    # value = scale * (q - zero_point) = 0.5 * (q - 1)
    assert np.array_equal(got["encoder.layer.0.weight[parameter:0]"],
                          np.array([[0, 1], [-1, 63]], np.float32))
    assert got["pooler"].shape == () and got["pooler"] == np.float32(0.75)
    run(["export", "multi.tdump", "r.npz", "-q", "--raw-quantized"], work, check=0)
    raw = np.load(work / "r.npz")["encoder.layer.0.weight[parameter:0]"]
    assert raw.dtype == np.int8 and np.array_equal(raw, [[1, 3], [-1, 127]])


def test_filter_preserves_records(fixtures, tmp_path):
    work = scratch(fixtures, tmp_path)
    run(["filter", "multi.tdump", "f.tdump", "--filter", "encoder.*", "-q"], work, check=0)
    src = json.loads(run(["ls", "multi.tdump", "--json"], work, check=0).stdout)
    dst = json.loads(run(["ls", "f.tdump", "--json"], work, check=0).stdout)
    strip = lambda r: {k: v for k, v in r.items() if k not in ("offset", "size", "payload_offset")}
    assert [strip(r) for r in dst] == [strip(r) for r in src if r["name"].startswith("encoder.")]
    a = json.loads(run(["info", "multi.tdump", "--json"], work, check=0).stdout)
    b = json.loads(run(["info", "f.tdump", "--json"], work, check=0).stdout)
    assert a["metadata"] == b["metadata"] and a["salt"] == b["salt"]
    before = (work / "multi.tdump").read_bytes()
    run(["filter", "multi.tdump", "f.tdump", "-q"], work, check=0)
    assert (work / "multi.tdump").read_bytes() == before  # never modifies its input


# ---- verify at every cut ------------------------------------------------------------------------

def test_verify_every_cut(fixtures, tmp_path):
    work = scratch(fixtures, tmp_path)
    data = (work / "run.tdump").read_bytes()
    recs = json.loads(run(["ls", "run.tdump", "--json", "--no-stats"], work, check=0).stdout)
    header_len = recs[0]["offset"]
    ends = [r["offset"] + r["size"] for r in recs]
    for cut in list(range(0, len(data), 23)) + ends + [len(data) - 64]:
        (work / "c.tdump").write_bytes(data[:cut])
        p = run(["verify", "c.tdump"], work)
        complete = sum(e <= cut for e in ends)
        if cut < header_len:
            assert p.returncode == 2 and p.stderr.startswith("driftscope: error: c.tdump: "), cut
        elif cut in ends or cut == header_len or cut == len(data) - 64:
            # On a record boundary nothing is torn: an unfinished run.
            assert p.returncode == 0 and "OK: unfinished" in p.stdout, (cut, p.stdout)
            assert f" {complete} records" in p.stdout, (cut, p.stdout)
        else:
            assert p.returncode == 1, (cut, p.stdout, p.stderr)
            assert f"{complete} complete records recovered" in p.stdout, (cut, p.stdout)
            assert f"cut at offset {max([header_len] + [e for e in ends if e <= cut])}" in p.stdout \
                or cut > ends[-1], (cut, p.stdout)


def test_verify_every_flipped_payload_byte_is_caught(fixtures, tmp_path):
    work = scratch(fixtures, tmp_path)
    data = (work / "run.tdump").read_bytes()
    recs = json.loads(run(["ls", "run.tdump", "--json", "--no-stats"], work, check=0).stdout)
    r = recs[1]
    for off in range(r["offset"], r["offset"] + r["size"]):
        bad = bytearray(data)
        bad[off] ^= 0x10
        (work / "b.tdump").write_bytes(bytes(bad))
        p = run(["verify", "b.tdump"], work)
        assert p.returncode == 1 and "DAMAGED: corrupt: " in p.stdout, (off, p.stdout, p.stderr)


# ---- hostile inputs -----------------------------------------------------------------------------

def npy_bytes(header: str, data: bytes = b"", version=(1, 0)) -> bytes:
    h = header.encode("latin1")
    if version == (1, 0):
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + data
    return b"\x93NUMPY" + bytes(version) + struct.pack("<I", len(h)) + h + data


def zip_of(members: dict[str, bytes], method=None) -> bytes:
    import io
    import zipfile
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method or zipfile.ZIP_STORED) as z:
        for k, v in members.items():
            z.writestr(k, v)
    return buf.getvalue()


def good_npz() -> bytes:
    return zip_of({"a.npy": npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n",
                                      struct.pack("<2f", 1, 2))})


def patched(b: bytes, offset: int, new: bytes) -> bytes:
    return b[:offset] + new + b[offset + len(new):]


def central(b: bytes) -> int:
    return b.rindex(b"PK\x01\x02")


def hostile_npz():
    import zipfile
    obj = npy_bytes("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }\n", b"\x80\x04N.")
    g = good_npz()
    cd = central(g)
    yield "object_array", zip_of({"x.npy": obj}), \
        "member 'x.npy': object array (dtype '|O') refused: loading it would unpickle arbitrary Python objects"
    yield "header_too_large", zip_of({"x.npy": npy_bytes("{" + " " * 70000 + "}\n", version=(2, 0))}), \
        "member 'x.npy': .npy header of 70003 bytes exceeds the limit of 65536 (at offset"
    yield "data_short", zip_of({"x.npy": npy_bytes(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1000,), }\n", b"\0" * 8)}), \
        "member 'x.npy': shape [1000] of <f4 needs 4000 data bytes, the array has 8 (at offset"
    yield "shape_overflow", zip_of({"x.npy": npy_bytes(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }\n")}), \
        "member 'x.npy': shape [4294967296, 4294967296] overflows 64 bits"
    yield "rank_17", zip_of({"x.npy": npy_bytes(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (" + "1, " * 17 + "), }\n", b"\0" * 4)}), \
        "member 'x.npy': shape has more than 16 dimensions, the TDUMP limit"
    yield "code_in_header", zip_of({"x.npy": npy_bytes(
        "{'descr': '<f4', 'fortran_order': False, 'shape': __import__('os').system('id'), }\n")}), \
        "member 'x.npy': malformed .npy header (shape is not a tuple)"
    yield "structured", zip_of({"x.npy": npy_bytes(
        "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }\n", b"\0" * 4)}), \
        "member 'x.npy': structured dtype (a record array) is not supported"
    yield "complex", zip_of({"x.npy": npy_bytes(
        "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }\n", b"\0" * 8)}), \
        "member 'x.npy': dtype '<c8' (complex) is not supported: TDUMP has no complex dtype"
    yield "bool_not_0_1", zip_of({"x.npy": npy_bytes(
        "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }\n", b"\x01\x02")}), \
        "member 'x.npy': bool element 1 holds byte 2, not 0 or 1"
    yield "bzip2_member", zip_of({"a.npy": b"x" * 10}, zipfile.ZIP_BZIP2), \
        "member 'a.npy' uses compression method 12; only stored (0) and deflate (8) are supported"
    yield "crc_mismatch", patched(g, 30 + len("a.npy") + 70, b"\xff"), \
        "member 'a.npy': CRC-32 is 0x"
    yield "cut_archive", g[:len(g) // 2], \
        "zip archive has no end of central directory record (the file is cut short or was still being written)"
    yield "cd_past_end", patched(g, len(g) - 6, struct.pack("<I", 0x7FFFFFFF)), \
        "central directory (offset 2147483647, "
    yield "encrypted", patched(g, cd + 8, struct.pack("<H", 1)), "member 'a.npy' is encrypted"
    yield "duplicate_member", zip_of({"a.npy": b"1", "b.npy": b"2"}).replace(b"b.npy", b"a.npy"), \
        "member 'a.npy' appears twice in the archive"
    yield "local_name_differs", patched(g, 30, b"b"), \
        "member 'a.npy': local header name differs from the central directory's"
    yield "not_npy_magic", zip_of({"a.npy": b"hello world"}), \
        "member 'a.npy': not a .npy array (no \\x93NUMPY magic)"
    yield "bad_version", zip_of({"a.npy": b"\x93NUMPY\x09\x00" + b"\0" * 10}), \
        "member 'a.npy': .npy format version 9.0 is not supported (1.0, 2.0, 3.0)"


def deflate_bomb() -> bytes:
    import zipfile
    b = zip_of({"a.npy": b"\0" * 100}, zipfile.ZIP_DEFLATED)
    cd = central(b)
    return patched(b, cd + 24, struct.pack("<I", 0xFFFFFFF0))


def corrupt_deflate() -> bytes:
    import zipfile
    b = bytearray(zip_of({"a.npy": bytes(range(256)) * 4}, zipfile.ZIP_DEFLATED))
    start = 30 + len("a.npy")
    b[start] = 0xFF  # reserved block type 3
    return bytes(b)


HOSTILE_NPZ = list(hostile_npz()) + [
    ("deflate_bomb_claim", deflate_bomb(), "member 'a.npy': claims 4294967280 bytes from "),
    ("deflate_corrupt", corrupt_deflate(), "member 'a.npy': deflate stream is corrupt"),
]


@pytest.mark.parametrize("name,data,message", HOSTILE_NPZ, ids=[c[0] for c in HOSTILE_NPZ])
def test_hostile_npz(name, data, message, tmp_path):
    (tmp_path / "in.npz").write_bytes(data)
    p = run(["import", "in.npz", "out.tdump"], tmp_path)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stdout == ""
    prefix = "driftscope: error: in.npz: bad_npz: "
    assert p.stderr.startswith(prefix + message), p.stderr
    assert p.stderr.count("\n") == 1, p.stderr
    assert not (tmp_path / "out.tdump").exists()
    assert [f.name for f in tmp_path.iterdir()] == ["in.npz"]  # no temporary left behind


def st_raw(header, data: bytes = b"") -> bytes:
    """A safetensors file with exactly this header (a dict, or JSON text) and data."""
    js = (header if isinstance(header, str) else json.dumps(header)).encode()
    return struct.pack("<Q", len(js)) + js + data


def hostile_safetensors():
    f4 = np.array([1, 2], "<f4").tobytes()
    ok = safetensors_bytes([("a", "F32", [2], f4)])
    yield "too_small", b"\x01\x00", "file of 2 bytes is shorter than the 8-byte header size"
    yield "header_too_large", struct.pack("<Q", 100_000_001) + b"{}", \
        "header size 100000001 exceeds the limit of 100000000 bytes (at offset 0)"
    yield "header_past_eof", struct.pack("<Q", 1000) + b"{}", \
        "header size 1000 runs past the end of the file (10 bytes) (at offset 0)"
    yield "not_json", struct.pack("<Q", 4) + b"{abc", \
        "header is not valid JSON (or not valid UTF-8) (at offset 8)"
    yield "not_utf8", struct.pack("<Q", 7) + b'{"\xff":1}', \
        "header is not valid JSON (or not valid UTF-8) (at offset 8)"
    t = lambda b, e: {"dtype": "F32", "shape": [2], "data_offsets": [b, e]}
    yield "hole", st_raw({"a": t(8, 16)}, f4 + f4), \
        "tensor 'a': data_offsets begin at 8, expected 0 (holes and overlaps are invalid)"
    yield "overlap", st_raw({"a": t(0, 8), "b": t(4, 12)}, f4 + f4), \
        "tensor 'b': data_offsets begin at 4, expected 8"
    yield "size_mismatch", safetensors_bytes([("a", "F32", [3], f4)]), \
        "tensor 'a': shape [3] of F32 needs 12 bytes, data_offsets [0, 8] hold 8"
    yield "trailing_bytes", ok + b"\0" * 4, \
        "tensors cover 8 bytes but the data buffer has 12"
    yield "end_past_buffer", ok[:-4], "tensor 'a': data_offsets end at 8, past the 4-byte data buffer"
    yield "shape_overflow", safetensors_bytes([("a", "F32", [2**40, 2**40], b"")]), \
        "tensor 'a': shape product overflows 64 bits"
    yield "byte_size_overflow", safetensors_bytes([("a", "F64", [2**62], b"")]), \
        "tensor 'a': byte size overflows 64 bits"
    yield "unknown_dtype", safetensors_bytes([("a", "C64", [1], b"\0" * 8)]), \
        "tensor 'a': dtype 'C64' is not supported by TDUMP"
    yield "negative_dim", safetensors_bytes([("a", "F32", [-1], b"")]), \
        "tensor 'a': shape entry is not a non-negative integer"
    yield "duplicate_name", st_raw('{"a": %s, "a": %s}' % (json.dumps(t(0, 8)), json.dumps(t(8, 16))),
                                   f4 + f4), "key 'a' appears twice in the header"
    yield "metadata_not_string", safetensors_bytes([("a", "F32", [2], f4)], metadata={"k": 1}), \
        "__metadata__ value of 'k' is not a string"
    yield "deep_nesting", st_raw('{"a":' + "[" * 999 + "]" * 999 + "}"), \
        "header JSON is nested deeper than 4 levels"
    yield "unknown_field", st_raw({"a": {"dtypx": "F32", "shape": [2], "data_offsets": [0, 8]}}, f4), \
        "tensor 'a': unknown field 'dtypx'"
    yield "bool_value", safetensors_bytes([("a", "BOOL", [2], b"\x01\x05")]), \
        "tensor 'a': bool element 1 holds byte 5, not 0 or 1"


HOSTILE_ST = list(hostile_safetensors())


@pytest.mark.parametrize("name,data,message", HOSTILE_ST, ids=[c[0] for c in HOSTILE_ST])
def test_hostile_safetensors(name, data, message, tmp_path):
    (tmp_path / "in.safetensors").write_bytes(data)
    p = run(["import", "in.safetensors", "out.tdump"], tmp_path)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stdout == ""
    assert p.stderr.startswith("driftscope: error: in.safetensors: bad_safetensors: " + message), p.stderr
    assert p.stderr.count("\n") == 1, p.stderr
    assert [f.name for f in tmp_path.iterdir()] == ["in.safetensors"]


# ---- docs/cli.md examples -----------------------------------------------------------------------

def doc_examples():
    """(command, expected output) for every `$ ` line of the ```console blocks of docs/cli.md;
    the output shown is stderr then stdout, as a terminal shows them for these commands."""
    if not DOC.exists():
        return []
    out, block = [], None
    for line in DOC.read_text().splitlines():
        if line.startswith("```console"):
            block = []
            continue
        if block is not None and line.startswith("```"):
            out.extend(block)
            block = None
            continue
        if block is not None:
            if line.startswith("$ "):
                block.append([line[2:], []])
            elif block:
                block[-1][1].append(line)
    return [(c, "\n".join(o) + ("\n" if o else "")) for c, o in out]


def test_doc_examples(fixtures, bindir, version, tmp_path):
    examples = doc_examples()
    assert examples, "docs/cli.md has no ```console examples"
    work = scratch(fixtures, tmp_path)
    for cmd, want in examples:  # in order, in one folder: later examples use earlier outputs
        p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=work, capture_output=True,
                           text=True, env=case_env(bindir), timeout=120)
        got = normalise(p.stderr + p.stdout, version)
        assert got == want, f"docs/cli.md: $ {cmd}\n--- documented\n{want}\n--- actual\n{got}"


# ---- mutated archives: never a crash, a hang or a half-written output ---------------------------

def test_mutated_archives_fail_cleanly(tmp_path):
    """Random byte flips, cuts and insertions into valid .npz/.npy/.safetensors files: each
    import either succeeds with a dump that verifies, or fails with exit 2 and one line. Run
    with an ASan+UBSan binary (DRIFTSCOPE_BIN=build/asan/driftscope) to check memory safety."""
    import io
    import random
    import zipfile

    rng = random.Random(20261129)
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([1, 0, 1], bool),
              "c": np.arange(4, dtype=">i8")}
    seeds = []
    for compress in (False, True):
        buf = io.BytesIO()
        (np.savez_compressed if compress else np.savez)(buf, **arrays)
        seeds.append((".npz", buf.getvalue()))
    buf = io.BytesIO()
    np.save(buf, arrays["a"])
    seeds.append((".npy", buf.getvalue()))
    import safetensors.torch  # a seed the real package wrote (requirements-dev)
    import torch
    seeds.append((".safetensors", safetensors.torch.save(
        {"x": torch.tensor([1.0, 2.0]), "y": torch.tensor([True, False]),
         "z": torch.tensor([1.0], dtype=torch.bfloat16)}, metadata={"k": "v"})))
    outcomes = {0: 0, 2: 0}
    for i in range(300):
        ext, seed = seeds[i % len(seeds)]
        data = bytearray(seed)
        for _ in range(rng.randint(1, 3)):
            op = rng.random()
            if op < 0.6 and data:
                data[rng.randrange(len(data))] = rng.randrange(256)
            elif op < 0.8:
                del data[rng.randrange(len(data) + 1):]
            else:
                at = rng.randrange(len(data) + 1)
                data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 9)))
        src = tmp_path / f"in{ext}"
        src.write_bytes(bytes(data))
        out = tmp_path / "out.tdump"
        p = run(["import", src.name, out.name, "-q"], tmp_path)
        assert p.returncode in (0, 2), (i, p.returncode, p.stderr)
        assert "Sanitizer" not in p.stderr and "runtime error" not in p.stderr, (i, p.stderr)
        if p.returncode == 2:
            assert p.stderr.startswith("driftscope: error: ") and p.stderr.count("\n") == 1, (i, p.stderr)
            assert not out.exists(), i
        else:
            run(["verify", "-q", out.name], tmp_path, check=0)
            out.unlink()
        outcomes[p.returncode] += 1
    assert outcomes[2] > 100  # the mutations really do break things


# ---- edge cases ---------------------------------------------------------------------------------

def test_empty_and_zero_size(tmp_path):
    np.savez(tmp_path / "empty.npz")
    run(["import", "empty.npz", "e.tdump", "-q"], tmp_path, check=0)
    assert run(["ls", "e.tdump"], tmp_path, check=0).stdout.splitlines()[0].startswith("#  name")
    run(["export", "e.tdump", "e.npz", "-q"], tmp_path, check=0)
    assert list(np.load(tmp_path / "e.npz").keys()) == []
    np.savez(tmp_path / "z.npz", z=np.zeros((3, 0), np.float16))
    run(["import", "z.npz", "z.tdump", "-q"], tmp_path, check=0)
    p = run(["show", "z.tdump", "z"], tmp_path, check=0)
    assert "shape       [3, 0] (0 elements)" in p.stdout and p.stdout.endswith("(no elements)\n")
    run(["export", "z.tdump", "z2.npz", "-q"], tmp_path, check=0)
    assert np.load(tmp_path / "z2.npz")["z"].shape == (3, 0)


def test_show_exact_integers_and_high_rank(tmp_path):
    big = np.array([2**63 - 1, -2**63, 2**53 + 1], dtype=np.int64)
    np.savez(tmp_path / "i.npz", big=big, cube=np.arange(5**4, dtype=np.int16).reshape(5, 5, 5, 5))
    run(["import", "i.npz", "i.tdump", "-q"], tmp_path, check=0)
    p = run(["show", "i.tdump", "big"], tmp_path, check=0)
    assert p.stdout.splitlines()[-1].split() == ["[:]", "9223372036854775807",
                                                 "-9223372036854775808", "9007199254740993"]
    p = run(["show", "i.tdump", "cube", "--limit", "20", "--edge", "1"], tmp_path, check=0)
    lines = p.stdout.splitlines()
    assert "[0, 0, 0, :]    0  ...    4" in lines
    assert "[4, 4, 4, :]  620  ...  624" in lines
    assert lines.count("  ...") == 1 and lines.count("    ...") == 2 and lines.count("      ...") == 4


def test_export_safetensors(fixtures, tmp_path):
    """Export to .safetensors keeps bf16 as BF16 and the run metadata as __metadata__; the
    safetensors library itself loads the file, and importing it back gives the same bytes."""
    work = scratch(fixtures, tmp_path)
    p = run(["export", "multi.tdump", "m.safetensors"], work, check=0)
    assert "bf16" not in p.stderr  # nothing widened: safetensors has BF16
    b = (work / "m.safetensors").read_bytes()
    n = struct.unpack_from("<Q", b)[0]
    assert n % 8 == 0
    header = json.loads(b[8:8 + n])
    assert header["__metadata__"]["framework"] == "pytorch 2.13.0"
    assert header["encoder.layer.0@1"]["dtype"] == "BF16"
    assert list(header)[1:] == ["embeddings[input:0]", "embeddings", "encoder.layer.0",
                                "encoder.layer.0@1", "encoder.layer.0.weight[parameter:0]", "pooler"]
    run(["import", "m.safetensors", "back.tdump", "-q"], work, check=0)
    run(["export", "back.tdump", "back.npz", "-q"], work, check=0)
    run(["export", "multi.tdump", "orig.npz", "-q"], work, check=0)
    x, y = np.load(work / "orig.npz"), np.load(work / "back.npz")
    assert list(x.keys()) == list(y.keys())
    for k in x:
        assert x[k].dtype == y[k].dtype and x[k].tobytes() == y[k].tobytes(), k
    from safetensors.numpy import load_file  # the reference implementation (requirements-dev)
    run(["export", "multi.tdump", "nobf16.safetensors", "-q", "--filter", "-encoder.layer.0"], work, check=0)
    got = load_file(str(work / "nobf16.safetensors"))
    assert np.array_equal(got["embeddings[input:0]"], [[101, 7592, 2088, 102]])


def test_import_zip64_members(tmp_path):
    """Members written with ZIP64 extra fields (what numpy/zipfile produce past 4 GiB) import."""
    import io
    import zipfile
    a = np.arange(10, dtype=np.float64)
    npy = io.BytesIO()
    np.save(npy, a)
    with zipfile.ZipFile(tmp_path / "z.npz", "w") as z:
        with z.open("big.npy", "w", force_zip64=True) as f:
            f.write(npy.getvalue())
    assert b"\x01\x00\x10\x00" in (tmp_path / "z.npz").read_bytes()  # a ZIP64 extra field
    run(["import", "z.npz", "z.tdump", "-q"], tmp_path, check=0)
    run(["export", "z.tdump", "o.npz", "-q"], tmp_path, check=0)
    assert np.array_equal(np.load(tmp_path / "o.npz")["big"], a)
