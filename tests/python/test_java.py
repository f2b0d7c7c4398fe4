"""The Java TDUMP library (java/, issue 14) against the C++ and Python sides.

* a Java-written file with every dtype is byte-identical to the same tensors written by the Python
  writer (same salt and metadata), compares as identical (`driftscope compare` exit 0), and reads
  back correctly through the C++ reader (driftscope.open) and the reference reader;
* the Java reader gives every golden vector the same verdict as the C++ reader, word for word;
* a JVM writing with sync-per-record, killed with SIGKILL at random points, loses no record it
  reported durable (checked by the C++ reader);
* docs/howto/android.md runs as written.

The Java side is built with ``java/build.sh --no-tests`` when its build is older than its sources
(the Java unit tests run in ctest, ``java.tdump``).
"""

from __future__ import annotations

import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import driftscope
from driftscope import tdump_reader as ref

ROOT = Path(__file__).resolve().parents[2]
JAR = ROOT / "build" / "java" / "driftscope-tdump.jar"
TEST_CLASSES = ROOT / "build" / "java" / "test-classes"
SALT = 0x1234


def driftscope_bin() -> str:
    exe = os.environ.get("DRIFTSCOPE_BIN") or shutil.which("driftscope")
    if not exe:
        built = [p for p in ROOT.glob("build/*/driftscope") if p.is_file() and os.access(p, os.X_OK)]
        assert built, "the driftscope command is not built"
        exe = str(max(built, key=lambda p: p.stat().st_mtime))
    return exe


@pytest.fixture(scope="module")
def java():
    assert shutil.which("javac") and shutil.which("java"), \
        "a JDK is needed (scripts/install-deps.sh installs openjdk-17-jdk-headless)"
    # Rebuilt unless the jar and the test classes are newer than every source (ctest's java.tdump,
    # which runs before the Python stage of `make test`, has usually just built them).
    sources = [ROOT / "java" / "build.sh", *(ROOT / "java" / "src").rglob("*.java")]
    tool = TEST_CLASSES / "org" / "driftscope" / "tdump" / "InteropTool.class"
    built = [JAR, tool]
    if not all(p.exists() for p in built) or \
            min(p.stat().st_mtime for p in built) <= max(p.stat().st_mtime for p in sources):
        subprocess.run([str(ROOT / "java" / "build.sh"), "--no-tests"], check=True, capture_output=True, timeout=300)
    cp = f"{JAR}{os.pathsep}{TEST_CLASSES}"

    def run(*args, **kw):
        return subprocess.run(["java", "-cp", cp, "org.driftscope.tdump.InteropTool", *map(str, args)],
                              capture_output=True, text=True, timeout=120, **kw)
    run.cp = cp
    return run


# The tensors InteropTool.dtypes writes, as numpy arrays (bf16 and fp8 as their raw bits).
I = np.iinfo
CODES = np.arange(256, dtype=np.uint8)
TENSORS = [
    ("t.f64", np.array([0.0, -0.0, 1.5, -1e308, 5e-324, np.inf, -np.inf, np.nan]), {}),
    ("t.f32", np.array([[1.0, -2.5, 3.4028235e38, 1e-45], [np.inf, np.nan, -0.0, 0.1]], np.float32),
     dict(op_type="Linear", axes="batch,hidden", attrs={"bias": "true", "note": "ünïcödé ✓"})),
    ("t.f16", np.array([0x0000, 0x8000, 0x0001, 0x3c00, 0x7bff, 0x7c00, 0xfc00, 0x7e00], np.uint16).view(np.float16), {}),
    ("t.bf16", np.array([0x3F80, 0xC000, 0x7F80, 0xFF80, 0x7FC0, 0x0001, 0x4049, 0], np.uint16), dict(dtype="bf16")),
    ("t.f8e4m3fn", CODES.reshape(16, 16), dict(dtype="f8e4m3fn", axes="hi,lo")),
    ("t.f8e5m2", CODES, dict(dtype="f8e5m2")),
    ("t.i64", np.array([I(np.int64).min, -1, 0, I(np.int64).max], np.int64), {}),
    ("t.i32", np.array([I(np.int32).min, -1, 0, I(np.int32).max], np.int32), {}),
    ("t.i16", np.array([I(np.int16).min, -1, 0, I(np.int16).max], np.int16), {}),
    ("t.i8", np.array([-128, -1, 0, 127], np.int8), {}),
    ("t.u8", np.array([0, 1, 128, 255], np.uint8), {}),
    ("t.bool", np.array([True, False, True]), {}),
    ("t.u16", np.array([0, 1, 65535], np.uint16), {}),
    ("t.u32", np.array([0, 1, 2 ** 32 - 1], np.uint32), {}),
    ("t.u64", np.array([0, 1, 2 ** 64 - 1], np.uint64), {}),
    ("q.per_tensor", np.array([[-128, -3, 0], [17, 100, 127]], np.int8),
     dict(op_type="QuantizeLinear", encoding={"kind": "affine_tensor", "scale": 0.05, "zero_point": -3})),
    ("q.per_channel", np.array([[0, 1, 2], [128, 255, 255]], np.uint8),
     dict(encoding={"kind": "affine_channel", "axis": 1, "scales": [0.5, 0.25, 0.125], "zero_points": [128, 0, 255]})),
    ("block", np.array([1, 2], np.float32), dict(role="input")),
    ("block.weight", np.array([3, 4], np.float32), dict(role="parameter", op_type="Parameter")),
    ("block", np.array([5, 6], np.float32), {}),
    ("block", np.array([7, 8], np.float32), {}),
    ("scalar", np.array(0.5, np.float32), {}),
    ("empty", np.zeros((3, 0), np.float32), {}),
]


def expected_values(name, data, kw):
    """Decoded values by independent means: bf16 by its bit layout, fp8 by torch's own types."""
    dt = kw.get("dtype")
    if dt == "bf16":
        return (data.astype(np.uint32) << 16).view(np.float32)
    if dt in ("f8e4m3fn", "f8e5m2"):
        import torch
        t = torch.from_numpy(data.copy()).view(torch.float8_e4m3fn if dt == "f8e4m3fn" else torch.float8_e5m2)
        return t.float().numpy()
    return data


def same(a, b):
    """Equal values, NaN where NaN (of any sign: §3.3.1 leaves an fp8 NaN's sign open), and the
    sign of zero counts."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        x, y = a.astype(np.float64), b.astype(np.float64)
        num = ~np.isnan(x)
        return a.shape == b.shape and np.array_equal(x, y, equal_nan=True) \
            and np.array_equal(np.signbit(x[num]), np.signbit(y[num]))
    return a.shape == b.shape and np.array_equal(a, b)


def test_java_file_is_the_python_file_and_reads_everywhere(java, tmp_path):
    jfile, pfile = tmp_path / "java.tdump", tmp_path / "python.tdump"
    r = java("dtypes", jfile, SALT)
    assert r.returncode == 0, r.stderr
    python_write(pfile, {"framework": "interop", "writer": "interop-test", "device": "jvm"}, TENSORS)
    assert jfile.read_bytes() == pfile.read_bytes(), "the Java and the Python writer made different bytes"

    # The C++ reader (through the Python package) and the reference reader.
    cpp = driftscope.open(jfile)
    assert cpp.state == "clean" and cpp.metadata["device"] == "jvm"
    dump = ref.read(str(jfile), dequantize=True)
    assert dump.state == "clean" and dump.salt == SALT
    assert len(cpp.records()) == len(dump.records) == len(TENSORS)
    for i, (name, data, kw) in enumerate(TENSORS):
        want = expected_values(name, data, kw)
        c, p = cpp.records()[i], dump.records[i]
        assert c.name == p.name == name
        assert c.role == p.role == kw.get("role", "output")
        assert tuple(c.shape) == tuple(p.shape) == data.shape
        assert c.op_type == p.op_type == kw.get("op_type", "")
        assert same(c.numpy(), want), (name, c.numpy(), want)
        assert same(p.array, want), (name, p.array, want)
        c.verify()
    assert [r.occurrence for r in cpp.records() if r.name == "block" and r.role == "output"] == [0, 1]
    assert cpp.record("t.f32").attrs == {"bias": "true", "note": "ünïcödé ✓"}
    assert list(cpp.record("t.f8e4m3fn").axes) == ["hi", "lo"]
    np.testing.assert_array_equal(dump.records[15].dequantized, 0.05 * (TENSORS[15][1].astype(np.float64) + 3))
    deq = dump.records[16].dequantized
    np.testing.assert_array_equal(deq, np.array([0.5, 0.25, 0.125]) * (TENSORS[16][1] - np.array([128, 0, 255])))


FINITE = [
    ("f.f64", np.array([0.0, -0.0, 1.5, -1e300, 5e-324]), {}),
    ("f.f32", np.array([[1.0, -2.5, 3.4028235e38, 1e-45], [0.1, -0.0, 7, 8]], np.float32),
     dict(op_type="Linear", axes="batch,hidden")),
    ("f.f16", np.array([0x0000, 0x8000, 0x0001, 0x3c00, 0x7bff], np.uint16).view(np.float16), {}),
    ("f.bf16", np.array([0x3F80, 0xC000, 0x0001, 0x4049], np.uint16), dict(dtype="bf16")),
    ("f.f8e4m3fn", np.arange(120, dtype=np.uint8), dict(dtype="f8e4m3fn")),
    ("f.f8e5m2", np.arange(120, dtype=np.uint8), dict(dtype="f8e5m2")),
    ("f.i64", np.array([I(np.int64).min, -1, 0, I(np.int64).max], np.int64), {}),
    ("f.i32", np.array([I(np.int32).min, -1, 0, I(np.int32).max], np.int32), {}),
    ("f.i16", np.array([I(np.int16).min, -1, 0, I(np.int16).max], np.int16), {}),
    ("f.i8", np.array([-128, -1, 0, 127], np.int8), {}),
    ("f.u8", np.array([0, 1, 128, 255], np.uint8), {}),
    ("f.bool", np.array([True, False, True]), {}),
    ("f.u16", np.array([0, 1, 65535], np.uint16), {}),
    ("f.u32", np.array([0, 1, 2 ** 32 - 1], np.uint32), {}),
    ("f.u64", np.array([0, 1, 2 ** 64 - 1], np.uint64), {}),
    ("f.q", np.array([[-128, -3, 0], [17, 100, 127]], np.int8),
     dict(encoding={"kind": "affine_tensor", "scale": 0.05, "zero_point": -3})),
]


def python_write(path, meta, tensors):
    with driftscope.Writer(path, meta, salt=SALT) as w:
        for name, data, kw in tensors:
            kw = dict(kw)
            if "dtype" in kw:
                w.write(name, data.tobytes(), shape=data.shape, **kw)
            else:
                w.write(name, data, **kw)


def test_java_dump_compares_identical_to_the_python_dump(java, tmp_path):
    """Every dtype with finite values (compare counts NaN against NaN as a mismatch)."""
    jfile, pfile = tmp_path / "java.tdump", tmp_path / "python.tdump"
    r = java("finite", jfile, SALT)
    assert r.returncode == 0, r.stderr
    python_write(pfile, {"writer": "interop-test"}, FINITE)
    assert jfile.read_bytes() == pfile.read_bytes()
    proc = subprocess.run([driftscope_bin(), "compare", str(pfile), str(jfile)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "16" in proc.stdout, proc.stdout


def cpp_verdict(path: Path) -> str:
    try:
        d = driftscope.open(path)
    except driftscope.Error as e:
        return f"error:{e.code_name}\t{e.offset}\t{e.message.removeprefix(e.code_name + ': ')}"
    c = d.integrity.corruption
    if c is None:
        return f"{d.state}\t-\t-"
    # The binding reports a corruption as Error::to_string(), "code: message".
    return f"corrupt:{c.code_name}\t{c.offset}\t{c.message.removeprefix(c.code_name + ': ')}"


def test_java_reader_words_match_the_cpp_reader_on_every_vector(java):
    files = sorted(p for sub in ("valid", "damaged", "rejected", "invalid")
                   for p in (ROOT / "tests" / "vectors" / sub).glob("*.tdump"))
    assert len(files) >= 60
    r = java("verdict", *files)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(files)
    for f, line in zip(files, lines):
        name, _, got = line.partition("\t")
        assert name == f.name
        assert got == cpp_verdict(f), f"{f.name}: Java and C++ readers disagree"


def mutants(rng, seeds, n):
    """Golden vectors with bit flips, random bytes, truncations and extreme u32/u64 fields."""
    extremes = [0, 1, 2 ** 64 - 1, 2 ** 63 - 1, 2 ** 63, 2 ** 48, 2 ** 48 + 1, 2 ** 20 + 1, 2 ** 32 - 1, 64, 65]
    for _ in range(n):
        b = bytearray(rng.choice(seeds))
        k = rng.randrange(4)
        if k == 0:
            for _ in range(rng.randint(1, 3)):
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif k == 1:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif k == 2:
            del b[rng.randrange(len(b)):]
        else:
            at = rng.randrange(max(1, len(b) - 8)) & ~7
            b[at:at + 8] = (rng.choice(extremes) & (2 ** 64 - 1)).to_bytes(8, "little")
        yield bytes(b)


def test_java_reader_words_match_the_cpp_reader_on_mutated_vectors(java, tmp_path):
    seeds = [p.read_bytes() for p in sorted((ROOT / "tests" / "vectors").rglob("*.tdump"))]
    files = []
    for i, blob in enumerate(mutants(random.Random(1414), seeds, 400)):
        f = tmp_path / f"m{i:03d}.tdump"
        f.write_bytes(blob)
        files.append(f)
    r = java("verdict", *files)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(files)
    kinds = set()
    for f, line in zip(files, lines):
        got = line.partition("\t")[2]
        assert got == cpp_verdict(f), f"{f.name}: Java and C++ readers disagree"
        kinds.add(got.split("\t")[0])
    assert len(kinds) >= 8, kinds


# ---- filters: the Java parser and matcher against the C++ one ---------------------------------

FILTER_TENSORS = [
    ("encoder.layers.3", "Linear", "output", "f32", (1, 8, 768), 0),
    ("encoder.layers.30.mlp", "GELU", "output", "f16", (1, 8, 3072), 3),
    ("encoder.layers.13", "LayerNorm", "input", "bf16", (8,), 4),
    ("encoder.layers.3.attn.dropout", "Dropout", "output", "f32", (2, 2), 8),
    ("m.layers.2.bias", "Parameter", "parameter", "f32", (768,), 12),
    ("módulo.ñame", "Op", "other", "i8", (), 5),
    ("x", "", "output", "u8", (3, 0), 16),
    ("rank=2", "MatMul", "output", "f64", (2, 2), 20),
    ("-x", "Add", "output", "bool", (1,), 7),
    ("my layer", "Mul", "output", "f8e4m3fn", (1500,), 100),
    ("a[b]", "Conv", "output", "i64", (4, 3, 3, 3), 1000000),
]

FILTER_CORPUS = [
    "", " ;; ", "encoder.layers.3*", "*.attn.* -*.dropout", "op=Linear,MatMul role=output",
    "dtype=f16,bf16 numel>=1M", "dim[-1]=768 rank>=3", "every=10 budget=2GiB",
    "*.layers.[0-3].* -*.bias !*.weight", "budget=1KiB every=4 dim[-1]=3 numel>1k dtype=half role=input op=Add -z +a",
    "+rank=2", "+-x", "my\\ layer", "a\\[b\\]", "op===x", "op=a\\,b", "numel=1.5k", "numel=1.5", "rank<=x",
    "foo=3", "layers.[0-3", "budget=1 budget=2", "x[9-0]", "a\\", "every=0", "role=boss", "dim[16]=1",
    "dim[-17]=1", "dim[x]=1", "rank=99999999999999999999", "budget=1.5GiB", "budget=3TB", "budget=1.2.3",
    "budget=12XB", "numel>=2G", "numel<1T", "dtype=float32,int8,uint8,boolean", "role=input role=output",
    "op=*Norm op=Layer*", "[!a-z]*", "[^e]*", "[]]", "[!]]*", "[a-]*", "?", "??*", "*é*", "ñ*", "op=",
    "rank>", "-", "+", "!", "dim!=0", "dim=0", "rank!=0 rank<5", "numel=0", "numel=1", "every=3 every=2",
    "op=\\=x,y", "rank=1;rank>=1", "\\;x", "a\tb", "*\x00*",
]


def random_filters(rng, n):
    keys = ["op=", "role=", "dtype=", "rank", "numel", "dim", "dim[-1]", "dim[2]", "every=", "budget="]
    cmp = ["=", "==", "!=", "<", "<=", ">", ">="]
    atoms = ["a", "encoder", ".", "layers", "3", "*", "?", "[0-3]", "[!a]", "\\*", "é", "-", "+", "!", ",", "k",
             "M", "GiB", "1", "0", "768", "1.5", "output", "f32", "half", "Linear", "Norm", " ", ";", "[", "]"]
    out = []
    for _ in range(n):
        clauses = []
        for _ in range(rng.randint(1, 4)):
            r = rng.random()
            if r < 0.4:
                clauses.append(rng.choice(["", "+", "-", "!"]) + "".join(rng.choice(atoms) for _ in range(rng.randint(1, 5))))
            else:
                k = rng.choice(keys)
                op = "" if k.endswith("=") else rng.choice(cmp)
                clauses.append(k + op + "".join(rng.choice(atoms) for _ in range(rng.randint(0, 3))))
        out.append(rng.choice([" ", ";", "  "]).join(clauses))
    return out


def test_java_filters_match_the_cpp_filter(java):
    rng = random.Random(14)
    filters = FILTER_CORPUS + random_filters(rng, 600)
    lines = ["\t".join(["T", n, op, role, dt, ",".join(map(str, shape)), str(ex)])
             for n, op, role, dt, shape, ex in FILTER_TENSORS]
    lines += ["F\t" + f.encode().hex() for f in filters]
    r = java("filter", input="\n".join(lines) + "\n")
    assert r.returncode == 0, r.stderr
    got = r.stdout.split("\n")[:-1]
    assert len(got) == len(filters)
    parsed = errors = 0
    for text, line in zip(filters, got):
        try:
            f = driftscope.Filter(text)
        except driftscope.FilterSyntaxError as e:
            errors += 1
            assert line == "error\t" + e.message.removeprefix("filter_syntax: "), text
            continue
        parsed += 1
        bits = "".join("1" if f.accepts(n, op, role, dt, shape, ex) else "0"
                       for n, op, role, dt, shape, ex in FILTER_TENSORS)
        budget = "-" if f.byte_budget is None else str(f.byte_budget)
        assert line == f"ok\t{f}\t{budget}\t{bits}", text
    assert parsed > 100 and errors > 50, (parsed, errors)


def parse_durable(line: str):
    """'durable I OFFSET': printed by the writer after write() returned for record I."""
    m = re.fullmatch(r"durable (\d+) (\d+)\n", line)
    assert m, line
    return int(m.group(1)), int(m.group(2))


def crash_values(i: int) -> np.ndarray:
    n = 1000 + (i * 7919) % 20000  # InteropTool.crashSize
    return (i * 1000 + np.arange(n, dtype=np.float32) * np.float32(0.25)).astype(np.float32)


def test_sigkill_loses_no_durable_record(java, tmp_path):
    seed = int(time.time())
    rng = random.Random(seed)
    total = 0
    for run in range(4):
        path = tmp_path / f"crash{run}.tdump"
        proc = subprocess.Popen(["java", "-cp", java.cp, "org.driftscope.tdump.InteropTool", "crash", str(path)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        durable = {}
        # Killed after a random number of durable records, or (odd runs) at a random moment, when
        # the JVM may be anywhere, mid-write included. That moment is counted from the first
        # durable record: a fixed delay from the start ran out before a loaded machine's JVM had
        # created the file (a kill before anything is written tests nothing).
        if run % 2:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            i, off = parse_durable(line)
            durable[i] = off
            time.sleep(rng.random())
        else:
            target, deadline = rng.randint(1, 60), time.monotonic() + 60
            while len(durable) < target and time.monotonic() < deadline:
                line = proc.stdout.readline()
                assert line, proc.stderr.read()
                i, off = parse_durable(line)
                durable[i] = off
        proc.send_signal(signal.SIGKILL)
        for line in proc.stdout:  # lines printed before the kill, still in the pipe
            i, off = parse_durable(line)
            durable[i] = off
        proc.wait(timeout=30)
        dump = driftscope.open(path)
        what = f"seed {seed} run {run}: {len(durable)} durable, state {dump.state}"
        assert dump.state in ("unfinished", "cut"), what
        recs = dump.records()
        n = max(durable) + 1 if durable else 0
        assert sorted(durable) == list(range(n)), what
        assert len(recs) >= n, what
        for i in range(n):
            r = recs[i]
            assert (r.name, r.offset) == (f"layer.{i}", durable[i]), what
            np.testing.assert_array_equal(r.numpy(), crash_values(i), err_msg=what)
            r.verify()
        total += n
    assert total > 0, f"seed {seed}: no record was reported durable in any run"


# ---- docs/howto/android.md runs as written --------------------------------------------------

_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)


def test_android_howto_runs(java, tmp_path):
    pytest.importorskip("torch")
    page = ROOT / "docs" / "howto" / "android.md"
    # The scratch folder looks like a checkout: the page's commands use java/ and examples/.
    for entry in ("java", "examples"):
        (tmp_path / entry).symlink_to(ROOT / entry)
    env = dict(os.environ, NO_COLOR="1")
    env["PATH"] = os.pathsep.join([str(Path(driftscope_bin()).parent), str(Path(sys.executable).parent), env["PATH"]])
    ran = []
    for lang, body in ((m.group(1), m.group(2)) for m in _FENCE.finditer(page.read_text())):
        if lang == "python":
            proc = subprocess.run([sys.executable, "-c", body], cwd=tmp_path, env=env, capture_output=True,
                                  text=True, timeout=300)
            assert proc.returncode == 0, proc.stderr[-3000:]
            ran.append("python")
        elif lang == "sh":
            for line in body.splitlines():
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                argv = shlex.split(line, comments=True)
                assert argv[0] in ("java/build.sh", "javac", "java", "driftscope"), line
                if argv[0] == "driftscope":
                    argv[0] = driftscope_bin()
                proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
                assert proc.returncode == 0, f"`{line}` exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
                ran.append(argv[0])
    assert "python" in ran and "java" in ran and "javac" in ran
    phone = driftscope.open(tmp_path / "phone.tdump")
    desktop = driftscope.open(tmp_path / "desktop.tdump")
    assert phone.state == desktop.state == "clean"
    assert [r.name for r in phone.records()] == [r.name for r in desktop.records()]
    assert phone.metadata["device"] == "pixel-8"
