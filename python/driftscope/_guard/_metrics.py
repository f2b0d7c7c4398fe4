"""Verdicts for one output of one backend against the reference: the library's judge.

Every output is judged by driftscope._core.judge_output (include/driftscope/judge.hpp,
src/judge/output_judge.cpp) with the guard criteria profile, whose defaults are the seed
thresholds below and whose ranges src/options/option_validate.cpp checks. The statuses and their
order are the one status table of compare, check and guard (docs/metrics.md §9); the metrics come
from compare's float64 pass (compare_pair). Formulas (docs/howto/guard.md §5, "Verdicts"), with
r = reference, c = candidate, both float64 and flattened, F = positions finite in both:
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
Checked in this order, the first that holds is the output's status (status table code):
  NUMERICAL_INSTABILITY  c has NaN or Inf where r is finite (nonfinite)
  SILENT_ZERO_VECTOR     norm_cand < min_norm while norm_ref >= min_norm (all_zero, norm_vanished)
  CONSTANT_OUTPUT        c (> 1 element) is one value where r varies (constant)
  PRECISION_DEGRADATION  cosine < min_cosine (cosine), rel_error > max_rel_error (rel_l2; default:
                         the bound the cosine and norm-ratio rules imply,
                         Thresholds.rel_error_limit),
                         norm_ratio outside [1/max_norm_ratio, max_norm_ratio] (norm_ratio), or
                         (few values) an element beyond its tolerance (few_values)
  ARGMAX_FLIP            a decision flip (decision_flip), or argmax_flip > max_argmax_flip (argmax)
  PASS
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import numpy as np

from .. import _core

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
FEW = _core.FEW_VALUES
# The guard criteria profile's defaults (judge.hpp GuardCriteria): the seed thresholds.
SEED = _core.GUARD_CRITERIA_DEFAULTS
# Its table (DRIFTSCOPE_GUARD_CRITERIA): name, flags, keyword, range, help, metavar per field;
# the command's flags are built from it (_command.py).
CRITERIA: List[Dict[str, Any]] = _core.guard_criteria_options()


@dataclass
class Thresholds:
    """The verdict's thresholds; every field is a documented flag of `driftscope guard`.
    class_axes: output name ("*": every output) -> the axis argmax runs over; an output without
    one is not judged by argmax (_classaxis.py); None: every output's last axis."""

    min_cosine: float = SEED["min_cosine"]
    min_norm: float = SEED["min_norm"]
    max_argmax_flip: float = SEED["max_argmax_flip"]
    max_rel_error: Optional[float] = None  # None: rel_error_limit()'s derived bound
    max_norm_ratio: float = SEED["max_norm_ratio"]
    small_atol: float = SEED["small_atol"]
    small_rtol: float = SEED["small_rtol"]
    decision_threshold: float = SEED["decision_threshold"]
    flip_rtol: float = SEED["flip_rtol"]
    class_axes: Optional[Dict[str, int]] = None

    def rel_error_limit(self) -> float:
        """--max-rel-error, or by default the largest relative error the cosine and norm-ratio
        rules allow together (GuardCriteria::rel_error_limit: sqrt(R^2 - 2RC + 1), 0.296 at
        C = 0.99, R = 1.25), so the default never contradicts a relaxed --min-cosine."""
        return _core.guard_rel_error_limit(**self.criteria())

    def criteria(self) -> Dict[str, Any]:
        """The guard criteria profile's keywords of _core.judge_output (one per table row)."""
        return {r["keyword"]: getattr(self, r["name"]) for r in CRITERIA}

    def validate(self) -> None:
        """The library's validator of the profile (src/options/option_validate.cpp): raises
        driftscope.errors.InvalidArgumentError ("guard option 'min_cosine' is 1.5, allowed -1 ..
        1")."""
        _core.validate_guard_criteria(**self.criteria())

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


def _contiguous(a: np.ndarray) -> np.ndarray:
    """Row-major, as the library reads it (np.ascontiguousarray would make 0-d arrays 1-d)."""
    return a if a.flags.c_contiguous else a.copy(order="C")


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


def judge(name: str, ref: np.ndarray, cand: np.ndarray, t: Thresholds,
          sample: int) -> OutputResult:
    """The library's judge (driftscope._core.judge_output: include/driftscope/judge.hpp) with the
    guard criteria profile `t`: the statuses, their order and the metrics are compare's (one
    status table, docs/metrics.md §9; one float64 pass) and the sentences of the detail
    (report.hpp guard_output_detail); only a shape mismatch is worded here, as the library
    refuses to judge one."""
    r, c = _as_f64(ref), _as_f64(cand)
    if r.shape != c.shape:
        return OutputResult(name, RUNTIME_ERROR, sample,
                            detail=f"shape {tuple(c.shape)} where the reference has "
                                   f"{tuple(r.shape)}")
    axis = class_axis(name, t, r.ndim)
    j = _core.judge_output(_contiguous(r), _contiguous(c), axis, **t.criteria())
    if r.size == 0:  # nothing to disagree about, and no figures to report
        return OutputResult(name, PASS, sample, detail=j["detail"])
    # detail: the library's sentences for the codes that held (report.hpp guard_output_detail).
    return OutputResult(name, j["status"], sample, cosine=j["cosine"], norm_ref=j["norm_ref"],
                        norm_cand=j["norm_cand"], max_diff=j["max_diff"], nan=j["nan"],
                        inf=j["inf"], argmax_flip=j["argmax_flip"], rel_error=j["rel_error"],
                        detail=j["detail"])


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
