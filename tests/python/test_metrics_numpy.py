"""compare_pair (C++) against the independent numpy implementation (numpy_metrics.py) on random
and adversarial inputs of every dtype, quantized ones included: agreement to 1e-12 relative.

The pairs are written as TDUMP files by the independent Python writer (tests/support) and measured
by the helper tests/tools/ds_pair_metrics, which prints every PairMetrics field. Fields that are
exact by definition (counts, indices, extremes, max_abs_diff, max_rel_diff, ULP) must be equal;
sums are compared relative to the sum of the magnitudes of their terms (a sum that cancels to
near zero is accurate relative to those terms, not to itself — docs/metrics.md §8).
"""
import glob
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
sys.path.insert(0, os.path.dirname(__file__))
from numpy_metrics import decode, pair_metrics  # noqa: E402
from tdump_write import write_tdump  # noqa: E402

REL = 1e-12
EXACT = {"max_abs_diff", "max_rel_diff", "min_ref", "max_ref", "min_cand", "max_cand",
         "max_abs_ref", "max_abs_cand", "first_mismatch_ref", "first_mismatch_cand",
         "mismatch_fraction", "argmax_agreement", "topk_overlap"}


def tool_path():
    if os.environ.get("DRIFTSCOPE_PAIR_TOOL"):
        return os.environ["DRIFTSCOPE_PAIR_TOOL"]
    if os.environ.get("DRIFTSCOPE_BIN"):
        # run-tests.sh builds everything: a missing helper is a failure, not a skip.
        return os.path.join(os.path.dirname(os.environ["DRIFTSCOPE_BIN"]), "tests", "tools",
                            "ds_pair_metrics")
    found = sorted(glob.glob(os.path.join(ROOT, "build", "*", "tests", "tools", "ds_pair_metrics")),
                   key=os.path.getmtime)
    if not found:
        pytest.skip("ds_pair_metrics is not built (cmake --build <dir> --target ds_pair_metrics)")
    return found[-1]


def num(v):
    return float(v) if isinstance(v, str) else v


# ---- cases ---------------------------------------------------------------------------------

RNG = np.random.default_rng(20261129)

UINT = {"f16": np.uint16, "bf16": np.uint16, "f8e4m3fn": np.uint8, "f8e5m2": np.uint8}
NP = {"f64": "<f8", "f32": "<f4", "i64": "<i8", "i32": "<i4", "i16": "<i2", "i8": "i1",
      "u8": "u1", "u16": "<u2", "u32": "<u4", "u64": "<u8", "bool": "u1"}


def side(dtype, data, shape=None, encoding=None):
    data = np.asarray(data)
    if dtype in UINT:
        data = data.astype(UINT[dtype])
    else:
        with np.errstate(over="ignore"):  # 1e300 -> inf in f32 is part of the adversarial cases
            data = data.astype(NP[dtype])
    shape = list(data.shape) if shape is None else list(shape)
    return {"dtype": dtype, "data": data.reshape(-1), "shape": shape, "encoding": encoding}


def bf16_bits(x):
    """Round-to-nearest-even float64 -> bf16 bits (via float32, exact for the values used)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def adversarial(n):
    r = RNG.standard_normal(n)
    c = r + RNG.standard_normal(n) * 1e-3
    pick = RNG.integers(0, 14, n)
    r[pick == 0] = np.nan
    c[pick == 1] = np.nan
    both = pick == 2
    r[both] = c[both] = np.nan
    r[pick == 3] = np.inf
    c[pick == 3] = np.where(RNG.random(int((pick == 3).sum())) < 0.5, np.inf, -np.inf)
    c[pick == 4] = -np.inf
    r[pick == 5], c[pick == 5] = -0.0, 0.0
    sub = pick == 6
    r[sub] = 5e-324 * RNG.integers(1, 1000, int(sub.sum()))
    c[sub] = -r[sub]
    r[pick == 7] *= 1e300
    c[pick == 8] *= 1e-300
    return r, c


def cases():
    out = {}

    def add(name, ref, cand, **attrs):
        out[name] = (ref, cand, {k: str(v) for k, v in attrs.items()})

    n = 300_001  # more than one task of 256 Ki elements
    r = RNG.standard_normal(n).astype(np.float32)
    add("f32_random", side("f32", r), side("f32", r + RNG.standard_normal(n).astype(np.float32) * 1e-3),
        rtol=1e-2, atol=1e-4)
    r, c = adversarial(5000)
    add("f64_adversarial", side("f64", r), side("f64", c), atol=1e-3)
    add("f64_adversarial_nan_equal", side("f64", r), side("f64", c), nan_equal=1, rtol=0.5)
    add("f32_adversarial", side("f32", r), side("f32", c))
    r = RNG.standard_normal(4000) * 1e300
    add("f64_huge", side("f64", r), side("f64", r * (1 + RNG.standard_normal(4000) * 1e-6)))
    t = RNG.standard_normal(4000) * 1e-300
    add("f64_tiny", side("f64", t), side("f64", t * (1 + RNG.standard_normal(4000) * 1e-3)))
    add("f64_diff_overflows", side("f64", [1.5e308, -1.7e308, 1.0, 2.0]),
        side("f64", [-1.5e308, 1.7e308, 1.0, 3.0]))
    add("f64_huge_vs_tiny", side("f64", RNG.standard_normal(3000) * 1e250),
        side("f64", RNG.standard_normal(3000) * 1e-250))
    # Every bit pattern of the narrow float types, in random pairings.
    for dt, count in (("f16", 65536), ("bf16", 65536), ("f8e4m3fn", 256), ("f8e5m2", 256)):
        a = RNG.permutation(count)
        b = np.where(RNG.random(count) < 0.5, a, RNG.permutation(count))
        add(f"{dt}_all_patterns", side(dt, a), side(dt, b))
    x = RNG.standard_normal(5000)
    add("f16_close", side("f16", x.astype(np.float16).view(np.uint16)),
        side("f16", (x * (1 + 1e-3)).astype(np.float16).view(np.uint16)), rtol=1e-3)
    add("bf16_close", side("bf16", bf16_bits(x)), side("bf16", bf16_bits(x * 1.001)))
    add("f32_vs_f16", side("f32", x), side("f16", x.astype(np.float16).view(np.uint16)))
    add("f64_vs_bf16", side("f64", x), side("bf16", bf16_bits(x)))
    add("f16_vs_f8e5m2", side("f16", x.astype(np.float16).view(np.uint16)),
        side("f8e5m2", (x.astype(np.float16).view(np.uint16) >> 8).astype(np.uint8)))
    # The fused kernels of raw f32, f16 and bf16 (read in place, docs/metrics.md §8) on data that
    # is hard on accumulation: 2^18 + 77 elements (a task boundary and a ragged tail), magnitudes
    # over the whole range of the format, each odd element the negation of the one before (so
    # sum_ref, sum_cand and dot cancel to a tiny fraction of their terms), exact zeros, and the
    # candidate off by 1e-3 relative (or rounded to the format).
    m = 2**18 + 77
    for dt, lo, hi in (("f32", -60, 60), ("f16", -24, 15), ("bf16", -100, 100)):
        x = RNG.choice([-1.0, 1.0], m) * np.exp2(RNG.uniform(lo, hi, m))
        x[-1] = 1.0  # m is odd: the last element has no partner
        zero = np.flatnonzero(RNG.random(m // 2) < 0.01) * 2
        x[zero] = 0.0
        x[1::2] = -x[0::2][: m // 2]
        y = x * (1 + RNG.standard_normal(m) * 1e-3)
        if dt == "f16":
            x, y = (np.clip(v, -65504, 65504).astype(np.float16).view(np.uint16) for v in (x, y))
        elif dt == "bf16":
            x, y = bf16_bits(x), bf16_bits(y)
        add(f"{dt}_range_cancel", side(dt, x), side(dt, y), rtol=1e-3, atol=1e-30)
    q = RNG.integers(-128, 128, 6000)
    add("i8_affine_vs_f32", side("f32", 0.05 * (q - 3) + RNG.standard_normal(6000) * 0.01),
        side("i8", q, encoding={"kind": "affine_tensor", "scale": 0.05, "zero_point": 3}))
    shape = [4, 8, 30]
    qc = RNG.integers(0, 256, int(np.prod(shape)))
    scales = list(RNG.uniform(0.01, 0.1, 8))
    zps = [int(z) for z in RNG.integers(100, 150, 8)]
    enc = {"kind": "affine_channel", "axis": 1, "scales": scales, "zero_points": zps}
    deq = decode("u8", qc, enc, tuple(shape))
    add("u8_channel_vs_f64", side("f64", deq + RNG.standard_normal(deq.size) * 1e-3, shape),
        side("u8", qc, shape, encoding=enc))
    add("u8_channel_vs_u8_channel", side("u8", qc, shape, encoding=enc),
        side("u8", np.clip(qc + RNG.integers(-1, 2, qc.size), 0, 255), shape, encoding=enc))
    add("i32_vs_i64", side("i32", RNG.integers(-2**31, 2**31 - 1, 3000)),
        side("i64", RNG.integers(-2**40, 2**40, 3000)))
    add("u64_large", side("u64", RNG.integers(0, 2**63, 1000, dtype=np.uint64) * 2),
        side("u64", RNG.integers(0, 2**63, 1000, dtype=np.uint64)))
    add("bool", side("bool", RNG.integers(0, 2, 1000)), side("bool", RNG.integers(0, 2, 1000)))
    add("constant", side("f32", np.full(1000, 3.5)), side("f32", np.full(1000, 3.5)))
    add("constant_vs_varying", side("f32", np.full(1000, 3.5)), side("f32", 3.5 + RNG.standard_normal(1000)))
    add("empty", side("f32", np.zeros(0), [0, 5]), side("f32", np.zeros(0), [0, 5]))
    add("rank0", side("f64", np.array(2.5), []), side("f64", np.array(-1.0), []))
    add("all_nan", side("f32", np.full(10, np.nan)), side("f32", np.full(10, np.nan)), nan_equal=1)
    add("silent_zero", side("f32", RNG.standard_normal(2000)), side("f32", np.zeros(2000)))
    add("both_zero", side("f32", np.zeros(100)), side("f32", -np.zeros(100)))
    # NCHW reference against an NHWC candidate: cand_index maps positions.
    N, C, H, W = 2, 3, 5, 7
    ref = RNG.standard_normal((N, C, H, W))
    nhwc = ref.transpose(0, 2, 3, 1).copy()
    nhwc[0, 1, 2, 0] += 0.5
    perm = np.arange(N * H * W * C).reshape(N, H, W, C).transpose(0, 3, 1, 2).reshape(-1)
    add("nchw_vs_nhwc", side("f64", ref), side("f64", nhwc), perm="perm_idx")
    # Logits: rows of 50 classes with ties and NaNs.
    logits = np.round(RNG.standard_normal((400, 50)), 1)
    noisy = np.round(logits + RNG.standard_normal((400, 50)) * 0.05, 1)
    logits[5, 7] = np.nan
    noisy[9, :] = np.nan
    add("logits", side("f32", logits), side("f32", noisy), classes=50, top_k=5)
    add("logits_top1", side("f32", logits), side("f32", noisy), classes=50, top_k=1)
    return out, {"perm_idx": perm.astype(np.uint64)}


def expected(ref, cand, attrs):
    r = decode(ref["dtype"], ref["data"], ref["encoding"], tuple(ref["shape"]))
    c = decode(cand["dtype"], cand["data"], cand["encoding"], tuple(cand["shape"]))
    if "perm" in attrs:
        c = c[PERM[attrs["perm"]]]
    ulp = None
    if ref["dtype"] == cand["dtype"] and ref["encoding"] is None and cand["encoding"] is None \
            and ref["dtype"] in ("f64", "f32", "f16", "bf16", "f8e4m3fn", "f8e5m2"):
        cb = cand["data"][PERM[attrs["perm"]]] if "perm" in attrs else cand["data"]
        ulp = (ref["dtype"], ref["data"], cb)
    want = pair_metrics(r, c, atol=float(attrs.get("atol", 0)), rtol=float(attrs.get("rtol", 0)),
                        nan_equal=attrs.get("nan_equal") == "1",
                        classes=int(attrs.get("classes", 0)), top_k=int(attrs.get("top_k", 5)),
                        ulp=ulp)
    fin = np.isfinite(r) & np.isfinite(c)
    with np.errstate(over="ignore"):
        scale = {"sum_ref": float(np.sum(np.abs(r[fin]))), "sum_cand": float(np.sum(np.abs(c[fin]))),
                 "dot": float(np.sum(np.abs(r[fin] * c[fin]))), "cosine": 1.0, "sqnr_db": 1.0}
    return want, scale


CASES, EXTRA = cases()
PERM = EXTRA


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    d = tmp_path_factory.mktemp("pairs")

    def record(name, s, attrs=None):
        t = {"name": name, "dtype": s["dtype"], "shape": s["shape"], "data": s["data"]}
        if s["encoding"] is not None:
            t["encoding"] = s["encoding"]
        if attrs:
            t["attrs"] = sorted(attrs.items())
        return t

    refs = [record(k, v[0], v[2]) for k, v in CASES.items()]
    cands = [record(k, v[1]) for k, v in CASES.items()]
    cands.append({"name": "perm_idx", "dtype": "u64", "shape": [len(PERM["perm_idx"])],
                  "data": PERM["perm_idx"]})
    a, b = str(d / "ref.tdump"), str(d / "cand.tdump")
    write_tdump(a, [("writer", "test_metrics_numpy")], refs, salt=1)
    write_tdump(b, [("writer", "test_metrics_numpy")], cands, salt=2)
    return a, b


def run_tool(a, b, *args):
    p = subprocess.run([tool_path(), a, b, *args], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return {item["name"]: item for item in json.loads(p.stdout)}


@pytest.fixture(scope="module")
def measured(dumps):
    return run_tool(*dumps)


@pytest.mark.parametrize("name", list(CASES))
def test_matches_numpy(name, measured):
    item = measured[name]
    assert "error" not in item, item
    got = item["metrics"]
    want, scale = expected(*CASES[name])
    for key, w in want.items():
        g = num(got[key])
        if isinstance(w, bool) or isinstance(w, int):
            assert g == w, f"{name}.{key}: C++ {g}, numpy {w}"
            continue
        w = float(w)
        if math.isnan(w):
            assert math.isnan(g), f"{name}.{key}: C++ {g}, numpy nan"
        elif math.isinf(w) or key in EXACT:
            assert g == w, f"{name}.{key}: C++ {g!r}, numpy {w!r}"
        else:
            tol = REL * max(abs(w), scale.get(key, 0.0))
            assert abs(g - w) <= tol, f"{name}.{key}: C++ {g!r}, numpy {w!r}, |diff| {abs(g - w):.3g} > {tol:.3g}"


def test_case_sanity(measured):
    """The cases exercise what they claim (guards against a vacuous comparison)."""
    m = {k: v["metrics"] for k, v in measured.items()}
    assert m["f64_adversarial"]["nan_ref"] > 0 and m["f64_adversarial"]["inf_cand"] > 0
    assert m["f64_huge"]["norm_ref"] > 1e300 and math.isfinite(num(m["f64_huge"]["rmse"]))
    assert 0 < m["f64_tiny"]["norm_ref"] < 1e-290
    assert m["nchw_vs_nhwc"]["mismatch_count"] == 1
    assert m["silent_zero"]["cosine"] == 0 and m["silent_zero"]["norm_cand"] == 0
    assert m["both_zero"]["cosine"] == 1
    assert m["f16_all_patterns"]["max_ulp"] > 0 and m["f32_vs_f16"]["max_ulp"] == -1
    assert 0 < m["logits"]["argmax_agreement"] < 1 and m["logits"]["rows"] == 400
    assert m["empty"]["count"] == 0 and m["rank0"]["count"] == 1


def test_range_cancel_cases_cancel(measured):
    """The *_range_cancel cases do cancel: sum_ref is a tiny fraction of the sum of its terms' magnitudes,
    so test_matches_numpy checks the documented bound relative to Σ|terms| where it is tight."""
    for dt in ("f32", "f16", "bf16"):
        name = f"{dt}_range_cancel"
        r = decode(dt, CASES[name][0]["data"], None, tuple(CASES[name][0]["shape"]))
        got = measured[name]["metrics"]
        assert abs(num(got["sum_ref"])) < 1e-3 * float(np.sum(np.abs(r))), name
        assert got["zero_ref"] > 0 and got["mismatch_count"] > 0, name


def test_every_target_and_thread_count_gives_the_same_bits(dumps):
    targets = subprocess.run([tool_path(), "--list-targets"], capture_output=True, text=True,
                             check=True).stdout.split()
    assert targets[-1] == "scalar" and len(targets) >= 2, targets
    base = run_tool(*dumps, "--target", "scalar", "--threads", "1")
    for t in targets:
        for threads in ("1", "8"):
            got = run_tool(*dumps, "--target", t, "--threads", threads)
            assert got == base, f"target {t} threads {threads} differs from scalar"
