"""Verdicts for one output of one backend against the reference, in float64 numpy.

Formulas (docs/howto/guard.md §5, "Verdicts"), with r = reference, c = candidate, both float64
and flattened, F = positions finite in both:
  norm_ref = ||r[finite r]||_2,  norm_cand = ||c[finite c]||_2
  cosine   = <r_F, c_F> / (||r_F|| ||c_F||); 1 when both are zero, 0 when only one is
  max_diff = max |r_F - c_F|
  rel_error = ||r_F - c_F||_2 / ||r_F||_2             (when ||r_F|| >= min_norm)
  norm_ratio = norm_cand / norm_ref                    (when norm_ref >= min_norm)
  few values: an output of at most FEW (4) elements, where a cosine says nothing (two
              one-element vectors always have cosine +-1): judged element-wise,
              |c - r| <= small_atol + small_rtol |r|
  decision flip: for a few-values output, or one whose last axis is 1, whose reference lies in
              [0, 1] (a score), a position where r and c fall on different sides of
              decision_threshold (0.5), r more than flip_rtol from it
  argmax_flip = share of positions (all axes but the class axis) whose argmax over the class
              axis differs by more than a near-tie: r[i] - r[j] > flip_rtol * max|r| over the
              position (i the reference's top-1, j the candidate's); only where the output has a
              class axis (class_axes: a softmax/logits producer, or --class-axis)
Checked in this order, the first that holds is the output's status:
  NUMERICAL_INSTABILITY  c has NaN or Inf where r is finite
  SILENT_ZERO_VECTOR     norm_cand < min_norm while norm_ref >= min_norm
  CONSTANT_OUTPUT        c (> 1 element) is one value where r varies
  PRECISION_DEGRADATION  cosine < min_cosine, rel_error > max_rel_error (default: the bound the
                         cosine and norm-ratio rules imply, Thresholds.rel_error_limit), norm_ratio outside
                         [1/max_norm_ratio, max_norm_ratio], or (few values) an element beyond
                         its tolerance
  ARGMAX_FLIP            a decision flip, or argmax_flip > max_argmax_flip
  PASS
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

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


# At most this many elements: a cosine cannot judge the output.
FEW = 4


@dataclass
class Thresholds:
    """The verdict's thresholds; every field is a documented flag of `driftscope guard`.
    class_axes: output name ("*": every output) -> the axis argmax runs over; an output without
    one is not judged by argmax (_classaxis.py); None: every output's last axis."""

    min_cosine: float = 0.99
    min_norm: float = 1e-4
    max_argmax_flip: float = 0.0
    max_rel_error: Optional[float] = None  # None: rel_error_limit()'s derived bound
    max_norm_ratio: float = 1.25
    small_atol: float = 0.01
    small_rtol: float = 0.01
    decision_threshold: float = 0.5
    flip_rtol: float = 1e-4
    class_axes: Optional[Dict[str, int]] = None

    def rel_error_limit(self) -> float:
        """--max-rel-error, or by default the largest relative error the cosine and norm-ratio
        rules allow together: with cos >= C and rho = norm ratio <= R,
        ||c - r||^2 / ||r||^2 = rho^2 - 2 rho cos + 1 <= R^2 - 2 R C + 1 (0.296 at C = 0.99,
        R = 1.25), so the default never contradicts a relaxed --min-cosine."""
        if self.max_rel_error is not None:
            return self.max_rel_error
        r, c = self.max_norm_ratio, self.min_cosine
        return math.sqrt(max(r * r - 2.0 * r * c + 1.0, 0.0))

    def to_json(self) -> Dict[str, Any]:
        return {"min_cosine": self.min_cosine, "min_norm": self.min_norm,
                "max_argmax_flip": self.max_argmax_flip, "max_rel_error": self.rel_error_limit(),
                "max_norm_ratio": self.max_norm_ratio, "small_atol": self.small_atol,
                "small_rtol": self.small_rtol, "decision_threshold": self.decision_threshold,
                "flip_rtol": self.flip_rtol,
                "class_axes": dict(self.class_axes) if self.class_axes is not None else None}


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
    rel_error: Optional[float] = None
    detail: str = ""

    def to_json(self) -> Dict[str, Any]:
        def num(x: Optional[float]) -> Optional[float]:
            return None if x is None or not math.isfinite(x) else float(x)

        return {"name": self.name, "status": self.status, "sample": self.sample,
                "cosine": num(self.cosine), "norm_ref": num(self.norm_ref),
                "norm_cand": num(self.norm_cand), "max_diff": num(self.max_diff),
                "rel_error": num(self.rel_error),
                "nan": self.nan, "inf": self.inf, "argmax_flip": num(self.argmax_flip),
                "detail": self.detail}


def _as_f64(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind == "V" or a.dtype.kind == "O":
        raise TypeError(f"output of dtype {a.dtype} cannot be judged")
    return a.astype(np.float64, copy=False).reshape(a.shape)


def class_axis(name: str, t: Thresholds, ndim: int) -> Optional[int]:
    """The axis argmax runs over for output `name` ("y[step 2]" is y), or None. Without
    class_axes (a direct call of judge()), the last axis, as before class axes existed."""
    from ._classaxis import TORCH_RULE, torch_class_axis

    if ndim < 1:
        return None
    base = name.split("[step ", 1)[0]
    if t.class_axes is None:
        return torch_class_axis(base, ndim)
    if base not in t.class_axes and "*" not in t.class_axes and TORCH_RULE in t.class_axes:
        return torch_class_axis(base, ndim)
    axis = t.class_axes.get(base, t.class_axes.get("*"))
    if axis is None or not -ndim <= axis < ndim:
        return None
    return axis % ndim


def _argmax_flips(r: np.ndarray, c: np.ndarray, rf: np.ndarray, cf: np.ndarray, axis: int,
                  flip_rtol: float) -> Tuple[float, int]:
    """(share of positions whose top-1 changed beyond a near-tie, number of near-ties)."""
    rr = np.moveaxis(np.where(rf, r, -np.inf), axis, -1)
    cc = np.moveaxis(np.where(cf, c, -np.inf), axis, -1)
    i = np.argmax(rr, axis=-1)[..., None]
    j = np.argmax(cc, axis=-1)[..., None]
    differ = (i != j)[..., 0]
    with np.errstate(invalid="ignore"):
        margin = (np.take_along_axis(rr, i, -1) - np.take_along_axis(rr, j, -1))[..., 0]
        scale = np.max(np.abs(np.where(np.moveaxis(rf, axis, -1), rr, 0.0)), axis=-1)
        tie = differ & (margin <= flip_rtol * scale)
    flips = differ & ~tie
    return float(np.mean(flips)), int(np.count_nonzero(tie))


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
    healthy = res.norm_ref >= t.min_norm
    if healthy and na > 0.0:
        res.rel_error = float(np.linalg.norm(a - b) / na)
    ties = 0
    axis = class_axis(name, t, r.ndim)
    if axis is not None and r.shape[axis] >= 2:
        res.argmax_flip, ties = _argmax_flips(r, c, rf, cf, axis, t.flip_rtol)

    # A cosine says nothing about a few values (two one-element vectors have cosine +-1): such
    # outputs are judged element by element. Scores (values in [0, 1], few of them or one per
    # position: a last axis of 1) are judged by their decisions too; a reference within
    # flip_rtol of the threshold is a tie, not a decision. (A face detector's [1, 896, 1]
    # logits are many values: the cosine judges them.)
    few = r.size <= FEW
    beyond = decisions = 0
    if few and a.size:
        beyond = int(np.count_nonzero(np.abs(a - b) > t.small_atol + t.small_rtol * np.abs(a)))
    if (few or r.shape[-1] == 1) and a.size and bool(np.all((a >= 0.0) & (a <= 1.0))):
        crossed = ((a >= t.decision_threshold) != (b >= t.decision_threshold)) & (
            np.abs(a - t.decision_threshold) > t.flip_rtol)
        decisions = int(np.count_nonzero(crossed))
    ratio = res.norm_cand / res.norm_ref if healthy else None

    reasons: List[str] = []
    if res.nan or res.inf:
        res.status = NUMERICAL_INSTABILITY
        reasons.append(f"{res.nan} NaN and {res.inf} Inf of {c.size} values where the reference "
                       "is finite")
    elif healthy and res.norm_cand < t.min_norm:
        res.status = SILENT_ZERO_VECTOR
        reasons.append(f"L2 norm {res.norm_cand:.3g} < {t.min_norm:g} where the reference's is "
                       f"{res.norm_ref:.4g}")
    elif (c.size > 1 and bool(cf.all()) and bool(np.all(c == c.flat[0])) and bool(rf.any())
          and float(np.ptp(r[rf])) > 0):
        res.status = CONSTANT_OUTPUT
        reasons.append(f"every value is {float(c.flat[0]):.6g} where the reference varies")
    else:
        if res.cosine is not None and not (res.cosine >= t.min_cosine):
            reasons.append(f"cosine {res.cosine:.6f} < {t.min_cosine:g}")
        limit = t.rel_error_limit()
        if res.rel_error is not None and res.rel_error > limit:
            reasons.append(f"relative error {res.rel_error:.4g} > {limit:.3g}")
        if ratio is not None and not (1.0 / t.max_norm_ratio <= ratio <= t.max_norm_ratio):
            reasons.append(f"norm ratio cand/ref {ratio:.4g} outside "
                           f"[{1.0 / t.max_norm_ratio:.4g}, {t.max_norm_ratio:g}]")
        if beyond:
            k = int(np.argmax(np.abs(a - b)))
            reasons.append(f"{beyond} of {a.size} values beyond |diff| <= {t.small_atol:g} + "
                           f"{t.small_rtol:g}|ref| (worst {float(a[k]):.6g} -> {float(b[k]):.6g};"
                           " a cosine cannot judge so few values)")
        if reasons:
            res.status = PRECISION_DEGRADATION
        if decisions:
            k = int(np.argmax(crossed))
            reasons.append(f"decision flip: {decisions} score(s) cross "
                           f"{t.decision_threshold:g} ({float(a[k]):.6g} -> {float(b[k]):.6g})")
            if res.status == PASS:
                res.status = ARGMAX_FLIP
        if res.status == PASS and res.argmax_flip is not None \
                and res.argmax_flip > t.max_argmax_flip:
            res.status = ARGMAX_FLIP
            assert axis is not None
            positions = int(r.size // r.shape[axis])
            reasons.append(f"top-1 over axis {axis} changes at {res.argmax_flip:.1%} of "
                           f"{positions} positions")
    if ties:
        reasons.append(f"{ties} near-tie(s) whose top-1 swapped within {t.flip_rtol:g} of the "
                       "row's largest value, not counted as flips")
    if not healthy:
        reasons.append(f"the reference's norm {res.norm_ref:.3g} is below {t.min_norm:g}, so a "
                       "vanished output cannot be told apart")
    res.detail = "; ".join(reasons)
    return res


def worse(a: OutputResult, b: OutputResult) -> bool:
    """Is `a` worse than `b`? (status severity, then lower cosine)."""
    sa, sb = SEVERITY[a.status], SEVERITY[b.status]
    if sa != sb:
        return sa > sb
    ca = a.cosine if a.cosine is not None and math.isfinite(a.cosine) else -2.0
    cb = b.cosine if b.cosine is not None and math.isfinite(b.cosine) else -2.0
    return ca < cb


def judge_named(name: str, ref: np.ndarray, cand_outputs: Dict[str, Any], t: Thresholds,
                sample: int) -> OutputResult:
    """The reference's output `name` against the candidate's output of that name: RUNTIME_ERROR
    when the candidate has none or it cannot be compared (the guard's rows and judge_all)."""
    if name not in cand_outputs:
        return OutputResult(name, RUNTIME_ERROR, sample,
                            detail="the backend returned no output of this name")
    try:
        return judge(name, ref, cand_outputs[name], t, sample)
    except TypeError as err:
        return OutputResult(name, RUNTIME_ERROR, sample, detail=str(err))


def judge_all(refs: Any, cands: Any, t: Thresholds) -> Optional[OutputResult]:
    """The worst output over every sample (lists of {output name: array}); None when nothing
    numeric was compared. An output the candidate lacks is RUNTIME_ERROR."""
    worst: Optional[OutputResult] = None
    for k, (r_out, c_out) in enumerate(zip(refs, cands)):
        for name, rv in r_out.items():
            if not isinstance(rv, np.ndarray) or rv.dtype.kind not in "biuf":
                continue
            res = judge_named(name, rv, c_out, t, k)
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
