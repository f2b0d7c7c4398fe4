"""`guard --metric`: judge a backend by the user's task metric instead of cosine alone.

A metric is a function (reference outputs, candidate outputs, sample) -> float, higher is
better, where outputs are {output name: numpy array} of one sample and `sample` is that sample's
inputs plus any label arrays its --data file holds (names that are not model inputs). The
guard evaluates it once per sample on the reference's own outputs (metric(reference):
m(ref, ref, s)) and on each backend's (metric(candidate): m(ref, cand, s)), inside the backend's
child process (a metric that crashes takes only that child down), and judges

    drop = mean_s [ m(ref, ref, s) - m(ref, cand, s) ]     > --max-drop  ->  PRECISION_DEGRADATION

with the spread (population standard deviation of the per-sample drops) shown beside it.
Silent failures (NaN/Inf, zero or constant outputs) are still judged by their own rules.

Built-in metrics (docs/howto/guard.md, "Task metric"); OUTPUT defaults to the model's first:
  top1[:OUTPUT]        share of positions whose argmax over the last axis agrees with the
                       reference's (agreement, so metric(reference) = 1)
  topk:K[:OUTPUT]      mean overlap |topK(ref) & topK(cand)| / K over positions
  cosine[:OUTPUT]      cosine of the pooled embeddings (mean over every axis but the last)
  neg-max-abs[:OUTPUT] -max |cand - ref| (0 for the reference)
  iou[:OUTPUT]         mean IoU of boxes [..., 4] as (x1, y1, x2, y2), box i with box i
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

Outputs = Mapping[str, np.ndarray]
Metric = Callable[[Outputs, Outputs, Mapping[str, Any]], float]

BUILTINS = ("top1", "topk", "cosine", "neg-max-abs", "iou")


class MetricError(ValueError):
    """A metric that cannot be loaded or that returned something other than a finite number."""


def _pick(outputs: Outputs, name: Optional[str]) -> np.ndarray:
    if name is None:
        name = next(iter(outputs))
    if name not in outputs:
        raise MetricError(f"the model has no output {name!r} (outputs: {', '.join(outputs)})")
    return np.asarray(outputs[name], dtype=np.float64)


def _top1(out: Optional[str]) -> Metric:
    def m(ref: Outputs, cand: Outputs, sample: Mapping[str, Any]) -> float:
        r, c = _pick(ref, out), _pick(cand, out)
        return float(np.mean(np.argmax(r, axis=-1) == np.argmax(c, axis=-1)))
    return m


def _topk(k: int, out: Optional[str]) -> Metric:
    def m(ref: Outputs, cand: Outputs, sample: Mapping[str, Any]) -> float:
        r, c = _pick(ref, out), _pick(cand, out)
        kk = min(k, r.shape[-1])
        tr = np.argsort(-r, axis=-1, kind="stable")[..., :kk].reshape(-1, kk)
        tc = np.argsort(-c, axis=-1, kind="stable")[..., :kk].reshape(-1, kk)
        return float(np.mean([len(set(a) & set(b)) / kk for a, b in zip(tr, tc)]))
    return m


def _cosine(out: Optional[str]) -> Metric:
    def m(ref: Outputs, cand: Outputs, sample: Mapping[str, Any]) -> float:
        r, c = _pick(ref, out), _pick(cand, out)
        pr = r.reshape(-1, r.shape[-1]).mean(axis=0) if r.ndim > 1 else r
        pc = c.reshape(-1, c.shape[-1]).mean(axis=0) if c.ndim > 1 else c
        nr, nc = float(np.linalg.norm(pr)), float(np.linalg.norm(pc))
        if nr == 0.0 and nc == 0.0:
            return 1.0
        if nr == 0.0 or nc == 0.0 or not (math.isfinite(nr) and math.isfinite(nc)):
            return 0.0
        return float(np.dot(pr, pc) / (nr * nc))
    return m


def _neg_max_abs(out: Optional[str]) -> Metric:
    def m(ref: Outputs, cand: Outputs, sample: Mapping[str, Any]) -> float:
        r, c = _pick(ref, out), _pick(cand, out)
        return -float(np.max(np.abs(c - r))) if r.size else 0.0
    return m


def _iou(out: Optional[str]) -> Metric:
    def m(ref: Outputs, cand: Outputs, sample: Mapping[str, Any]) -> float:
        r, c = _pick(ref, out), _pick(cand, out)
        if r.shape[-1] != 4:
            raise MetricError(f"iou: output's last axis is {r.shape[-1]}, boxes need 4")
        r, c = r.reshape(-1, 4), c.reshape(-1, 4)
        ix = np.clip(np.minimum(r[:, 2], c[:, 2]) - np.maximum(r[:, 0], c[:, 0]), 0, None)
        iy = np.clip(np.minimum(r[:, 3], c[:, 3]) - np.maximum(r[:, 1], c[:, 1]), 0, None)
        inter = ix * iy
        area = lambda b: np.clip(b[:, 2] - b[:, 0], 0, None) * np.clip(b[:, 3] - b[:, 1], 0, None)  # noqa: E731
        union = area(r) + area(c) - inter
        iou = np.where(union > 0, inter / np.where(union > 0, union, 1), 1.0)
        return float(np.mean(iou)) if iou.size else 1.0
    return m


def load(spec: str) -> Metric:
    """The metric `spec` names: a built-in (top1, topk:K, cosine, neg-max-abs, iou, each with an
    optional :OUTPUT) or FILE.py:FUNCTION / MODULE:FUNCTION. MetricError when it cannot."""
    head, _, rest = spec.partition(":")
    if head in BUILTINS:
        if head == "topk":
            k_text, _, out = rest.partition(":")
            if not k_text.isdigit() or int(k_text) < 1:
                raise MetricError(f"--metric {spec!r}: topk needs K >= 1 (topk:5)")
            return _topk(int(k_text), out or None)
        return {"top1": _top1, "cosine": _cosine, "neg-max-abs": _neg_max_abs,
                "iou": _iou}[head](rest or None)
    if ":" not in spec:
        raise MetricError(f"--metric {spec!r}: not a built-in ({', '.join(BUILTINS)}) and not "
                          "FILE.py:FUNCTION")
    from .._entry import load_function
    from ..errors import Error

    try:
        return load_function(spec, "--metric")
    except Error as err:
        raise MetricError(str(err)) from None


def evaluate(spec: str, refs: Sequence[Outputs], cands: Sequence[Outputs],
             samples: Sequence[Mapping[str, Any]], finite: bool = True) -> List[float]:
    """metric(refs[k], cands[k], samples[k]) for every sample; MetricError naming the sample
    when the metric raises or returns anything but a number. finite=False (a candidate): a
    NaN/Inf value is kept (a candidate whose outputs hold NaN may well score NaN; the guard
    counts it as the worst score); the reference's must be finite."""
    fn = load(spec)
    values = []
    for k, (r, c, s) in enumerate(zip(refs, cands, samples)):
        try:
            v = fn(r, c, s)
        except MetricError as err:
            raise MetricError(f"--metric {spec} on sample {k + 1}: {err}") from None
        except Exception as err:  # noqa: BLE001 - the user's code
            raise MetricError(f"--metric {spec} raised on sample {k + 1}: "
                              f"{type(err).__name__}: {err}") from None
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer,
                                                                  np.floating)):
            raise MetricError(f"--metric {spec} returned {type(v).__name__} on sample {k + 1}; "
                              "it must return a number (higher is better)")
        if finite and not math.isfinite(float(v)):
            raise MetricError(f"--metric {spec} returned {float(v)} on sample {k + 1}; it must "
                              "return a finite number")
        values.append(float(v))
    return values


def summary(ref_values: Sequence[float], cand_values: Sequence[float]) -> Tuple[float, float,
                                                                                float, float]:
    """(mean metric(reference), mean metric(candidate), mean drop, spread of the drops); a
    candidate's NaN score counts as -inf (its drop as +inf)."""
    cand_values = [v if math.isfinite(v) or v == math.inf else -math.inf for v in cand_values]
    drops = [a - b for a, b in zip(ref_values, cand_values)]
    if not all(math.isfinite(d) for d in drops):
        return (float(np.mean(ref_values)), float(np.mean(cand_values)), math.inf, math.nan)
    return (float(np.mean(ref_values)), float(np.mean(cand_values)), float(np.mean(drops)),
            float(np.std(drops)))
