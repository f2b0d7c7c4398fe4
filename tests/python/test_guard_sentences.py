"""The sentences of a guard output's detail come from the library (issue 25 item 2): the report
layer words a judgement from its codes and figures (include/driftscope/report.hpp
guard_output_detail), _core.judge_output returns them as "detail" and the guard's judge() only
carries the string. The expected strings are what judge() wrote when the words were Python
(python/driftscope/_guard/_metrics.py at 1d9b98d) on the same arrays: the bytes did not change.
tests/unit/report/guard_detail_test.cpp holds the C++ function to the old wording on crafted
judgements with the edge values of Python's format specs."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from driftscope import _core
from driftscope._guard import _metrics as M

nan, inf = np.nan, np.inf
R10 = np.arange(1.0, 11.0)
LOGITS = np.array([[10.0, 9.9, 0.0], [0.0, 10.0, 9.9], [9.9, 0.0, 10.0], [5.0, 5.00001, 1.0]])
SWAPPED = np.array([[9.9, 10.0, 0.0], [0.0, 10.0, 9.9], [9.9, 0.0, 10.0], [5.00001, 5.0, 1.0]])

# name: (reference, candidate, status, detail written by the Python wording at 1d9b98d)
CASES = {
    "nonfinite": ([1.0, 2.0, 3.0], [nan, 2.0, inf], "NUMERICAL_INSTABILITY",
                  "1 NaN and 1 Inf of 3 values where the reference is finite"),
    "all_zero": ([1.0, 2.0, 3.0], [0.0, 0.0, 0.0], "SILENT_ZERO_VECTOR",
                 "L2 norm 0 < 0.0001 where the reference's is 3.742"),
    "norm_vanished": ([1.0, 2.0, 3.0], [1e-6, 0.0, 0.0], "SILENT_ZERO_VECTOR",
                      "L2 norm 1e-06 < 0.0001 where the reference's is 3.742"),
    "constant": ([1.0, 2.0, 3.0, 4.0, 5.0], [-2.5] * 5, "CONSTANT_OUTPUT",
                 "every value is -2.5 where the reference varies"),
    "cosine_rel_l2": (R10, R10[::-1].copy(), "PRECISION_DEGRADATION",
                      "cosine 0.571429 < 0.99; relative error 0.9258 > 0.296"),
    "norm_ratio": (R10, 1.26 * R10, "PRECISION_DEGRADATION",
                   "norm ratio cand/ref 1.26 outside [0.8, 1.25]"),
    "few_values": ([100.0, -0.0], [100.0, 0.25], "PRECISION_DEGRADATION",
                   "1 of 2 values beyond |diff| <= 0.01 + 0.01|ref| (worst -0 -> 0.25; a cosine "
                   "cannot judge so few values)"),
    "scores": (np.array([[0.2], [0.7], [0.9]]), np.array([[0.2], [0.3], [0.1]]),
               "PRECISION_DEGRADATION",
               "cosine 0.784987 < 0.99; relative error 0.7727 > 0.296; norm ratio cand/ref 0.3232 "
               "outside [0.8, 1.25]; 2 of 3 values beyond |diff| <= 0.01 + 0.01|ref| (worst 0.9 "
               "-> 0.1; a cosine cannot judge so few values); decision flip: 2 score(s) cross 0.5 "
               "(0.7 -> 0.3)"),
    "decision_flip": ([0.501, 0.1], [0.499, 0.1], "ARGMAX_FLIP",
                      "decision flip: 1 score(s) cross 0.5 (0.501 -> 0.499)"),
    "argmax_ties": (LOGITS, SWAPPED, "ARGMAX_FLIP",
                    "top-1 over axis 1 changes at 25.0% of 4 positions; 1 near-tie(s) whose top-1 "
                    "swapped within 0.0001 of the row's largest value, not counted as flips"),
    "unhealthy": ([1e-6, 2e-6, 3e-6], [1e-6, 2e-6, 3e-6], "PASS",
                  "the reference's norm 3.74e-06 is below 0.0001, so a vanished output cannot be "
                  "told apart"),
    "pass": ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], "PASS", ""),
    "empty": (np.zeros((0, 3)), np.zeros((0, 3)), "PASS", "empty output"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_library_words_the_detail_as_python_did(case):
    ref, cand, status, detail = CASES[case]
    r, c = np.asarray(ref, dtype=np.float64), np.asarray(cand, dtype=np.float64)
    name = "logits" if case == "argmax_ties" else "y"
    t = M.Thresholds()
    axis = M.class_axis(name, t, r.ndim)
    assert _core.judge_output(r, c, axis, **t.criteria())["detail"] == detail
    res = M.judge(name, r, c, t, 0)
    assert (res.status, res.detail) == (status, detail)


def test_judge_words_nothing_itself():
    """Python keeps only the shape mismatch (the library refuses to judge one): no sentence of a
    reason code is left in _metrics.py."""
    source = inspect.getsource(M)
    for words in ("Inf of", "where the reference varies", "cosine {", "relative error {",
                  "norm ratio cand/ref", "values beyond", "score(s) cross", "top-1 over axis",
                  "near-tie(s)", "cannot be told apart", "empty output"):
        assert words not in source, words
    res = M.judge("y", np.ones(3), np.ones(4), M.Thresholds(), 0)
    assert (res.status, res.detail) == (M.RUNTIME_ERROR, "shape (4,) where the reference has (3,)")
