"""The golden vectors (tests/vectors/) against the reference reader, and their regeneration."""
import filecmp
import glob
import hashlib
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VECTORS = os.path.join(ROOT, "tests", "vectors")
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
import tdump_write  # noqa: E402

tdump_reader = tdump_write.load_reader()

# The TDUMP vectors by kind; other folders (hashinit/: the hash initialiser's golden values,
# docs/references.md) hold vectors of other specs.
KINDS = ("valid", "damaged", "rejected", "invalid")
SIDECARS = sorted(p for k in KINDS for p in glob.glob(os.path.join(VECTORS, k, "*.json")))


def ids(paths):
    return [os.path.relpath(p, VECTORS) for p in paths]


def num(v):
    return float(v) if isinstance(v, str) else v  # "nan", "inf", "-inf"


def same(a, b):
    a, b = num(a), num(b)
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b and (a != 0 or math.copysign(1, float(a)) == math.copysign(1, float(b)))


def test_every_kind_of_vector_exists():
    names = {os.path.relpath(p, VECTORS) for p in SIDECARS}
    for want in ["valid/example.json", "valid/dtypes.json", "valid/quantized.json",
                 "valid/structure.json", "valid/summary.json", "valid/appended.json",
                 "valid/unfinished.json", "damaged/cut_mid_payload.json",
                 "damaged/corrupt_record_crc.json", "damaged/corrupt_spliced.json",
                 "invalid/bad_header_crc.json"]:
        assert want in names
    dtypes = json.load(open(os.path.join(VECTORS, "valid", "dtypes.json")))
    assert {r["dtype"] for r in dtypes["records"]} == set(tdump_reader.DTYPES_BY_NAME)


@pytest.mark.parametrize("sidecar", SIDECARS, ids=ids(SIDECARS))
def test_reference_reader_matches_sidecar(sidecar):
    want = json.load(open(sidecar, encoding="utf-8"))
    path = os.path.join(os.path.dirname(sidecar), want["file"])
    blob = open(path, "rb").read()
    assert len(blob) == want["size"] and hashlib.sha256(blob).hexdigest() == want["sha256"]
    if "error" in want:
        with pytest.raises(tdump_reader.TdumpError) as e:
            tdump_reader.read(path)
        assert (e.value.code, e.value.offset) == (want["error"]["code"], want["error"]["offset"])
        return
    dump = tdump_reader.read(path, dequantize=True)
    assert list(dump.version) == want["header"]["version"]
    assert dump.salt == want["header"]["salt"]
    assert [list(kv) for kv in dump.metadata.items()] == want["header"]["metadata"]
    integ = want["integrity"]
    assert dump.state == integ["state"]
    assert dump.valid_end == integ["valid_end"]
    assert dump.cut_offset == integ["cut_offset"]
    assert dump.discarded_bytes == integ["discarded_bytes"]
    if integ["corruption"]:
        c = integ["corruption"]
        assert (dump.corruption.code, dump.corruption.offset, dump.corruption.name) == \
            (c["code"], c["offset"], c["name"])
    else:
        assert dump.corruption is None
    assert dump.warnings == []
    assert len(dump.records) == len(want["records"])
    for r, w in zip(dump.records, want["records"]):
        for key in ("kind", "name", "occurrence", "exec_index", "op_type", "role", "role_index",
                    "dtype", "axes", "offset", "size", "payload_offset"):
            assert getattr(r, key) == w[key], (w["name"], key)
        assert list(r.shape) == w["shape"]
        assert [list(kv) for kv in r.attrs.items()] == w["attrs"]
        assert r.encoding == w["encoding"]
        payload = blob[r.payload_offset:r.payload_offset + w["payload_length"]]
        assert hashlib.sha256(payload).hexdigest() == w["payload_sha256"]
        if r.kind == "summary":
            for k, v in w["summary"].items():
                got = r.summary[k]
                if k == "projection":
                    assert [float(x) for x in got] == v
                else:
                    assert same(got, v), (w["name"], k)
            assert r.array is None
            continue
        assert r.array.shape == tuple(w["shape"])
        flat = r.array.reshape(-1).tolist()
        assert len(flat) == len(w["values"])
        assert all(same(g, e) for g, e in zip(flat, w["values"])), w["name"]
        expect_np = {"bf16": np.float32, "f8e4m3fn": np.float32, "f8e5m2": np.float32,
                     "f16": np.float16, "bool": np.bool_}.get(r.dtype)
        if expect_np:
            assert r.array.dtype == expect_np
        if "dequantized" in w:
            assert r.dequantized.dtype == np.float64
            assert r.dequantized.reshape(-1).tolist() == w["dequantized"]
        else:
            assert r.dequantized is None


def test_regeneration_is_byte_identical(tmp_path):
    subprocess.run([sys.executable, os.path.join(VECTORS, "generate.py"), "--out", str(tmp_path)],
                   check=True)
    made = sorted(os.path.relpath(p, tmp_path) for p in glob.glob(str(tmp_path / "*" / "*")))
    committed = sorted(os.path.relpath(p, VECTORS) for k in KINDS
                       for p in glob.glob(os.path.join(VECTORS, k, "*")))
    assert made == committed
    for rel in made:
        assert filecmp.cmp(tmp_path / rel, os.path.join(VECTORS, rel), shallow=False), rel


def test_summary_recomputed_from_its_values():
    """docs/format.md §3.6 is enough to check a SUMMARY against the values it summarises."""
    want = json.load(open(os.path.join(VECTORS, "valid", "summary_checked.json"), encoding="utf-8"))
    dump = tdump_reader.read(os.path.join(VECTORS, "valid", want["file"]))
    checked = 0
    for i, w in enumerate(want["records"]):
        if "summary_of" not in w:
            continue
        s, values = dump.records[i].summary, dump.records[w["summary_of"]].array.astype(np.float64)
        proj = tdump_reader.countsketch(values, s["projection_seed"], s["projection_dim"])
        assert proj.tobytes() == np.asarray(s["projection"], np.float32).tobytes()
        fin = values[np.isfinite(values)]
        assert s["count"] == values.size and s["nan_count"] == np.isnan(values).sum()
        assert s["zero_count"] == (values == 0).sum()
        assert (s["min"], s["max"]) == (fin.min(), fin.max())
        assert math.isclose(s["mean"], fin.mean(), rel_tol=1e-12)
        assert math.isclose(s["std"], fin.std(), rel_tol=1e-12)
        checked += 1
    assert checked == 1
