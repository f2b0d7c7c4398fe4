"""An independent numpy implementation of the pair metrics of docs/metrics.md, written from the
document (not from the C++): the oracle of tests/python/test_metrics_numpy.py and the baseline of
bench/compare_vs_numpy.py.

    from numpy_metrics import decode, pair_metrics
    r = decode("bf16", bits_uint16)                 # float64 values
    m = pair_metrics(r, c, atol=1e-5, ulp=("bf16", r_bits, c_bits))

`exact=True` (the test oracle) sums with math.fsum, so every sum is correctly rounded and the
C++ result can be judged against the true value; `exact=False` (the benchmark) is the
straightforward vectorised numpy a user would write. Both scale sums of squares by the largest
magnitude, so values near 1e300 or 1e-300 neither overflow nor underflow.
"""
from __future__ import annotations

import math

import numpy as np

INF = math.inf


# ---- decoding (docs/format.md §3.3) --------------------------------------------------------

def _fp8_e4m3fn(bits: np.ndarray) -> np.ndarray:
    b = bits.astype(np.int64)
    sign = np.where(b & 0x80, -1.0, 1.0)
    e = (b >> 3) & 0xF
    m = (b & 0x7).astype(np.float64)
    normal = (1.0 + m / 8.0) * np.exp2(e.astype(np.float64) - 7.0)
    sub = (m / 8.0) * 2.0 ** -6
    v = sign * np.where(e == 0, sub, normal)
    return np.where((b & 0x7F) == 0x7F, np.nan, v)  # S.1111.111 is NaN; no infinities


def decode(dtype: str, data: np.ndarray, encoding: dict | None = None,
           shape: tuple | None = None) -> np.ndarray:
    """Stored elements -> float64. bf16 arrives as uint16 bits, fp8 as uint8 bits."""
    a = np.asarray(data).reshape(-1)
    if dtype == "bf16":
        with np.errstate(invalid="ignore"):  # signalling-NaN patterns widen to quiet NaN
            v = (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    elif dtype == "f16":
        v = a.view(np.float16).astype(np.float64) if a.dtype != np.float16 else a.astype(np.float64)
    elif dtype == "f8e5m2":
        v = (a.astype(np.uint16) << 8).view(np.float16).astype(np.float64)  # the top byte of an f16
    elif dtype == "f8e4m3fn":
        v = _fp8_e4m3fn(a)
    elif dtype == "bool":
        v = a.astype(np.uint8).astype(np.float64)
    else:
        v = a.astype(np.float64)
    if encoding is None or encoding.get("kind", "raw") == "raw":
        return v
    q = a.astype(np.float64)  # |q| < 2^53 for the integer dtypes the tests quantize
    if encoding["kind"] == "affine_tensor":
        return encoding["scale"] * (q - float(encoding["zero_point"]))
    axis = encoding["axis"]
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64)) if shape is not None else 1
    channels = shape[axis]
    ch = (np.arange(a.size) // max(inner, 1)) % channels
    scales = np.asarray(encoding["scales"], np.float64)[ch]
    zps = np.asarray(encoding["zero_points"], np.float64)[ch]
    return scales * (q - zps)


# ---- ULP (docs/metrics.md §5) ----------------------------------------------------------------

_ULP = {  # bits, sign bit, test for "not finite" on the unsigned bit pattern
    "f64": (64, lambda b: (b & 0x7FF0000000000000) == 0x7FF0000000000000),
    "f32": (32, lambda b: (b & 0x7F800000) == 0x7F800000),
    "f16": (16, lambda b: (b & 0x7C00) == 0x7C00),
    "bf16": (16, lambda b: (b & 0x7F80) == 0x7F80),
    "f8e5m2": (8, lambda b: (b & 0x7C) == 0x7C),
    "f8e4m3fn": (8, lambda b: (b & 0x7F) == 0x7F),
}
_UINT = {64: np.uint64, 32: np.uint32, 16: np.uint16, 8: np.uint8}


def max_ulp(dtype: str, ref_bits: np.ndarray, cand_bits: np.ndarray) -> int:
    """max |ord(a) - ord(b)| over pairs where both are finite, ord(b) = sign ? -mag : mag,
    saturated at 2^63 - 1. Python integers: no overflow to reason about."""
    width, nonfinite = _ULP[dtype]
    ut = _UINT[width]
    a = np.asarray(ref_bits).reshape(-1).view(ut) if np.asarray(ref_bits).dtype.itemsize * 8 == width \
        else np.asarray(ref_bits).reshape(-1).astype(ut)
    b = np.asarray(cand_bits).reshape(-1).view(ut) if np.asarray(cand_bits).dtype.itemsize * 8 == width \
        else np.asarray(cand_bits).reshape(-1).astype(ut)
    keep = ~(nonfinite(a) | nonfinite(b))
    if not keep.any():
        return 0
    sign = 1 << (width - 1)
    if width <= 32:  # int64 holds every ord() and every difference exactly
        oa, ob = a[keep].astype(np.int64), b[keep].astype(np.int64)
        oa = np.where(oa & sign, -(oa & (sign - 1)), oa)
        ob = np.where(ob & sign, -(ob & (sign - 1)), ob)
        return int(np.max(np.abs(oa - ob)))
    best = 0
    for x, y in zip(a[keep].tolist(), b[keep].tolist()):
        ox = -(x & (sign - 1)) if x & sign else x
        oy = -(y & (sign - 1)) if y & sign else y
        best = max(best, abs(ox - oy))
    return min(best, 2**63 - 1)


# ---- classification (docs/metrics.md §6) -----------------------------------------------------

def _topk_rows(x: np.ndarray, k: int) -> np.ndarray:
    """Column indices of the k best of each row: NaN first, then descending value, ties to the
    lower column."""
    rows, cols = x.shape
    isn = np.isnan(x)
    val = np.where(isn, 0.0, x)
    col = np.broadcast_to(np.arange(cols), x.shape)
    out = np.empty((rows, k), np.int64)
    for i in range(rows):
        order = np.lexsort((col[i], -val[i], ~isn[i]))
        out[i] = order[:k]
    return out


# ---- the metrics ----------------------------------------------------------------------------

def _fsum(a: np.ndarray) -> float:
    try:
        return math.fsum(a.tolist())
    except OverflowError:  # the true sum is beyond float64, as it is for the C++
        return float(np.sum(a))


def _scaled_sumsq(x: np.ndarray, exact: bool) -> tuple[float, float]:
    """(m, s) with sum(x^2) = m * s^2, s = max |x| (1 when x is all zero or empty)."""
    s = float(np.max(np.abs(x))) if x.size else 0.0
    if s == 0.0:
        return 0.0, 1.0
    y = x / s
    return (_fsum(y * y) if exact else float(np.dot(y, y))), s


def pair_metrics(r: np.ndarray, c: np.ndarray, *, atol: float = 0.0, rtol: float = 0.0,
                 rel_eps: float = 1e-12, nan_equal: bool = False, classes: int = 0,
                 top_k: int = 5, ulp: tuple | None = None, exact: bool = True) -> dict:
    """Every metric of docs/metrics.md for float64 vectors r (reference) and c, paired by
    position. `ulp` = (dtype, ref_bits, cand_bits) when both sides share a raw float dtype."""
    r = np.asarray(r, np.float64).reshape(-1)
    c = np.asarray(c, np.float64).reshape(-1)
    n = r.size
    fsum = _fsum if exact else (lambda a: float(np.sum(a)))
    out: dict = {"count": n}

    nan_r, nan_c = np.isnan(r), np.isnan(c)
    inf_r, inf_c = np.isinf(r), np.isinf(c)
    out["nan_ref"], out["nan_cand"] = int(nan_r.sum()), int(nan_c.sum())
    out["nan_both"] = int((nan_r & nan_c).sum())
    out["inf_ref"], out["inf_cand"] = int(inf_r.sum()), int(inf_c.sum())
    same_inf = inf_r & inf_c & (r == c)
    out["inf_same"] = int(same_inf.sum())
    out["nan_positions_match"] = out["nan_ref"] == out["nan_both"] == out["nan_cand"]
    out["inf_positions_match"] = out["inf_ref"] == out["inf_same"] == out["inf_cand"]

    fin = np.isfinite(r) & np.isfinite(c)
    idx = np.flatnonzero(fin)
    rf, cf = r[fin], c[fin]
    m = rf.size
    out["finite_pairs"] = m
    with np.errstate(over="ignore", invalid="ignore"):
        d = rf - cf
    ad = np.abs(d)

    if m:
        k = int(np.argmax(ad))  # first maximum
        out["max_abs_diff"] = float(ad[k])
        out["max_abs_index"] = int(idx[k])
        out["max_abs_ref"], out["max_abs_cand"] = float(rf[k]), float(cf[k])
        with np.errstate(over="ignore"):
            out["mean_abs_diff"] = fsum(ad) / m
        out["max_rel_diff"] = float(np.max(ad / np.maximum(np.abs(rf), rel_eps)))
        out["min_ref"], out["max_ref"] = float(rf.min()) + 0.0, float(rf.max()) + 0.0
        out["min_cand"], out["max_cand"] = float(cf.min()) + 0.0, float(cf.max()) + 0.0
        out["const_ref"] = out["min_ref"] == out["max_ref"]
        out["const_cand"] = out["min_cand"] == out["max_cand"]
    else:
        out.update(max_abs_diff=0.0, max_abs_index=-1, max_abs_ref=0.0, max_abs_cand=0.0,
                   mean_abs_diff=0.0, max_rel_diff=0.0, min_ref=0.0, max_ref=0.0, min_cand=0.0,
                   max_cand=0.0, const_ref=False, const_cand=False)
    out["zero_ref"], out["zero_cand"] = int((rf == 0).sum()), int((cf == 0).sum())
    with np.errstate(over="ignore"):
        out["sum_ref"], out["sum_cand"] = fsum(rf) + 0.0, fsum(cf) + 0.0

    # Sums of squares, each as m * s^2 with s its largest magnitude.
    mr, sr = _scaled_sumsq(rf, exact)
    mc, sc = _scaled_sumsq(cf, exact)
    if m and np.isinf(ad).any():
        # r - c overflowed: take the difference of pre-scaled values instead.
        sd = max(sr, sc)
        ds = rf / sd - cf / sd  # |ds| <= 2: already scaled by sd
        md = _fsum(ds * ds) if exact else float(np.dot(ds, ds))
    else:
        md, sd = _scaled_sumsq(d, exact)
    dm = fsum((rf / sr) * (cf / sc)) if m else 0.0
    with np.errstate(over="ignore"):
        out["sumsq_ref"] = mr * sr * sr
        out["sumsq_cand"] = mc * sc * sc
        out["sumsq_diff"] = md * sd * sd
        out["dot"] = dm * sr * sc + 0.0
        out["norm_ref"] = math.sqrt(mr) * sr
        out["norm_cand"] = math.sqrt(mc) * sc
        out["rmse"] = math.sqrt(md / m) * sd if m else 0.0
    if mr == 0 and mc == 0:
        out["cosine"] = 1.0
    elif mr == 0 or mc == 0:
        out["cosine"] = 0.0
    elif md == 0:
        out["cosine"] = 1.0
    else:
        out["cosine"] = min(1.0, max(-1.0, dm / (math.sqrt(mr) * math.sqrt(mc))))
    if md == 0:
        out["sqnr_db"], out["nmse"], out["rel_l2"] = INF, 0.0, 0.0
    elif mr == 0:
        out["sqnr_db"], out["nmse"], out["rel_l2"] = -INF, INF, INF
    else:
        out["sqnr_db"] = 10 * math.log10(mr / md) + 20 * (math.log10(sr) - math.log10(sd))
        ratio = sd / sr
        with np.errstate(over="ignore"):
            out["nmse"] = float(np.float64(md / mr) * np.float64(ratio) * np.float64(ratio))
        out["rel_l2"] = math.sqrt(md / mr) * ratio

    # allclose (docs/metrics.md §4): the reference scales rtol.
    mis = ~fin & ~(same_inf | (nan_r & nan_c & nan_equal))
    with np.errstate(over="ignore", invalid="ignore"):
        fin_mis = np.zeros(n, bool)
        fin_mis[idx] = ad > atol + rtol * np.abs(rf)
    mis |= fin_mis
    out["mismatch_count"] = int(mis.sum())
    out["mismatch_fraction"] = out["mismatch_count"] / n if n else 0.0
    where = np.flatnonzero(mis)
    if where.size:
        i = int(where[0])
        out["first_mismatch"] = i
        out["first_mismatch_ref"], out["first_mismatch_cand"] = float(r[i]), float(c[i])
    else:
        out["first_mismatch"], out["first_mismatch_ref"], out["first_mismatch_cand"] = -1, 0.0, 0.0

    out["max_ulp"] = max_ulp(*ulp) if ulp is not None else -1

    out["rows"], out["argmax_agreement"], out["topk_overlap"] = 0, -1.0, -1.0
    if classes:
        rows = n // classes
        out["rows"] = rows
        if rows:
            k = min(top_k, classes)
            tr = _topk_rows(r.reshape(rows, classes), k)
            tc = _topk_rows(c.reshape(rows, classes), k)
            out["argmax_agreement"] = float(np.mean(tr[:, 0] == tc[:, 0]))
            hits = sum(len(set(a.tolist()) & set(b.tolist())) for a, b in zip(tr, tc))
            out["topk_overlap"] = hits / (rows * k)
    return out
