"""Verdicts for one output of one backend against the reference, in float64 numpy.

Formulas (docs/howto/guard.md, "Verdicts"), with r = reference, c = candidate, both float64 and
flattened, F = positions finite in both:
  norm_ref = ||r[finite r]||_2,  norm_cand = ||c[finite c]||_2
  cosine   = <r_F, c_F> / (||r_F|| ||c_F||); 1 when both are zero, 0 when only one is
  max_diff = max |r_F - c_F|
  argmax_flip = share of positions (all axes but the last) whose argmax over the last axis
                differs; only for outputs whose last axis has >= 2 elements
Checked in this order, the first that holds is the output's status:
  NUMERICAL_INSTABILITY  c has NaN or Inf where r is finite
  SILENT_ZERO_VECTOR     norm_cand < min_norm while norm_ref >= min_norm
  CONSTANT_OUTPUT        c (> 1 element) is one value where r varies
  PRECISION_DEGRADATION  cosine < min_cosine
  ARGMAX_FLIP            argmax_flip > max_argmax_flip
  PASS
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import numpy as np

PASS = "PASS"
NUMERICAL_INSTABILITY = "NUMERICAL_INSTABILITY"
SILENT_ZERO_VECTOR = "SILENT_ZERO_VECTOR"
CONSTANT_OUTPUT = "CONSTANT_OUTPUT"
PRECISION_DEGRADATION = "PRECISION_DEGRADATION"
ARGMAX_FLIP = "ARGMAX_FLIP"
RUNTIME_ERROR = "RUNTIME_ERROR"
UNAVAILABLE = "UNAVAILABLE"
REFERENCE = "REFERENCE"

SILENT = frozenset({NUMERICAL_INSTABILITY, SILENT_ZERO_VECTOR, CONSTANT_OUTPUT})
DEGRADED = frozenset({PRECISION_DEGRADATION, ARGMAX_FLIP, RUNTIME_ERROR})

# Worst first: a backend's status is its worst output over every sample.
SEVERITY = {NUMERICAL_INSTABILITY: 7, SILENT_ZERO_VECTOR: 6, CONSTANT_OUTPUT: 5,
            RUNTIME_ERROR: 4, PRECISION_DEGRADATION: 3, ARGMAX_FLIP: 2, UNAVAILABLE: 1,
            PASS: 0, REFERENCE: 0}


@dataclass
class Thresholds:
    min_cosine: float = 0.99
    min_norm: float = 1e-4
    max_argmax_flip: float = 0.0

    def to_json(self) -> Dict[str, float]:
        return {"min_cosine": self.min_cosine, "min_norm": self.min_norm,
                "max_argmax_flip": self.max_argmax_flip}


@dataclass
class OutputResult:
    """One output of one backend on one sample."""

    name: str
    status: str
    sample: int
    cosine: Optional[float] = None
    norm_ref: Optional[float] = None
    norm_cand: Optional[float] = None
    max_diff: Optional[float] = None
    nan: int = 0
    inf: int = 0
    argmax_flip: Optional[float] = None
    detail: str = ""

    def to_json(self) -> Dict[str, Any]:
        def num(x: Optional[float]) -> Optional[float]:
            return None if x is None or not math.isfinite(x) else float(x)

        return {"name": self.name, "status": self.status, "sample": self.sample,
                "cosine": num(self.cosine), "norm_ref": num(self.norm_ref),
                "norm_cand": num(self.norm_cand), "max_diff": num(self.max_diff),
                "nan": self.nan, "inf": self.inf, "argmax_flip": num(self.argmax_flip),
                "detail": self.detail}


def _as_f64(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind == "V" or a.dtype.kind == "O":
        raise TypeError(f"output of dtype {a.dtype} cannot be judged")
    return a.astype(np.float64, copy=False).reshape(a.shape)


def judge(name: str, ref: np.ndarray, cand: np.ndarray, t: Thresholds,
          sample: int) -> OutputResult:
    r, c = _as_f64(ref), _as_f64(cand)
    if r.shape != c.shape:
        return OutputResult(name, RUNTIME_ERROR, sample,
                            detail=f"shape {tuple(c.shape)} where the reference has "
                                   f"{tuple(r.shape)}")
    if r.size == 0:  # nothing to disagree about
        return OutputResult(name, PASS, sample, detail="empty output")
    rf, cf = np.isfinite(r), np.isfinite(c)
    both = rf & cf
    res = OutputResult(name, PASS, sample)
    res.nan = int(np.count_nonzero(np.isnan(c) & rf))
    res.inf = int(np.count_nonzero(np.isinf(c) & rf))
    res.norm_ref = float(np.linalg.norm(r[rf]))
    res.norm_cand = float(np.linalg.norm(c[cf]))
    a, b = r[both], c[both]
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 and nb == 0.0:
        res.cosine = 1.0 if a.size else float("nan")
    elif na == 0.0 or nb == 0.0:
        res.cosine = 0.0
    else:
        res.cosine = float(np.dot(a, b) / (na * nb))
    res.max_diff = float(np.max(np.abs(a - b))) if a.size else None
    if r.ndim >= 1 and r.shape[-1] >= 2 and r.size:
        flips = np.argmax(np.where(rf, r, -np.inf), axis=-1) != np.argmax(
            np.where(cf, c, -np.inf), axis=-1)
        res.argmax_flip = float(np.mean(flips))

    healthy = res.norm_ref >= t.min_norm
    if res.nan or res.inf:
        res.status = NUMERICAL_INSTABILITY
        res.detail = (f"{res.nan} NaN and {res.inf} Inf of {c.size} values where the reference "
                      "is finite")
    elif healthy and res.norm_cand < t.min_norm:
        res.status = SILENT_ZERO_VECTOR
        res.detail = (f"L2 norm {res.norm_cand:.3g} < {t.min_norm:g} where the reference's is "
                      f"{res.norm_ref:.4g}")
    elif (c.size > 1 and bool(cf.all()) and bool(np.all(c == c.flat[0])) and bool(rf.any())
          and float(np.ptp(r[rf])) > 0):
        res.status = CONSTANT_OUTPUT
        res.detail = f"every value is {float(c.flat[0]):.6g} where the reference varies"
    elif res.cosine is not None and not (res.cosine >= t.min_cosine):
        res.status = PRECISION_DEGRADATION
        res.detail = f"cosine {res.cosine:.6f} < {t.min_cosine:g}"
    elif res.argmax_flip is not None and res.argmax_flip > t.max_argmax_flip:
        res.status = ARGMAX_FLIP
        res.detail = (f"top-1 changes at {res.argmax_flip:.1%} of "
                      f"{int(np.prod(r.shape[:-1]))} positions")
    if not healthy:
        note = (f"the reference's norm {res.norm_ref:.3g} is below {t.min_norm:g}, so a "
                "vanished output cannot be told apart")
        res.detail = f"{res.detail}; {note}" if res.detail else note
    return res


def worse(a: OutputResult, b: OutputResult) -> bool:
    """Is `a` worse than `b`? (status severity, then lower cosine)."""
    sa, sb = SEVERITY[a.status], SEVERITY[b.status]
    if sa != sb:
        return sa > sb
    ca = a.cosine if a.cosine is not None and math.isfinite(a.cosine) else -2.0
    cb = b.cosine if b.cosine is not None and math.isfinite(b.cosine) else -2.0
    return ca < cb


def judge_all(refs: Any, cands: Any, t: Thresholds) -> Optional[OutputResult]:
    """The worst output over every sample (lists of {output name: array}); None when nothing
    numeric was compared. An output the candidate lacks is RUNTIME_ERROR."""
    worst: Optional[OutputResult] = None
    for k, (r_out, c_out) in enumerate(zip(refs, cands)):
        for name, rv in r_out.items():
            if not isinstance(rv, np.ndarray) or rv.dtype.kind not in "biuf":
                continue
            if name not in c_out:
                res = OutputResult(name, RUNTIME_ERROR, k,
                                   detail="the backend returned no output of this name")
            else:
                try:
                    res = judge(name, rv, c_out[name], t, k)
                except TypeError as err:
                    res = OutputResult(name, RUNTIME_ERROR, k, detail=str(err))
            if worst is None or worse(res, worst):
                worst = res
    return worst


def by_position(outputs: Dict[str, Any], ref_names: List[str]) -> Dict[str, Any]:
    """--reference-model: two model files may name their outputs differently (a quantized
    model's dequantized output); with as many outputs on both sides, the candidate's take the
    reference's names by position. Unchanged otherwise."""
    names = list(outputs)
    if set(ref_names) == set(names) or len(ref_names) != len(names):
        return outputs
    return dict(zip(ref_names, outputs.values()))
