"""Comparing two dumps: ``driftscope.compare(reference, candidate, **policy)``.

The engine is the C++ one the ``driftscope compare`` command runs (docs/compare.md); the report's
fields are those of its JSON rendering (docs/report-schema.json).
"""

from __future__ import annotations

import inspect
import json
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from .. import _core
from .._dump import Dump, open as _open
from ..errors import InvalidArgumentError, NotFoundError
from .settings import settings

__all__ = ["compare", "Report", "TensorResult"]

PathOrDump = Union[str, "os.PathLike[str]", Dump]


class Fields(dict):
    """A dict of a report's JSON fields, also readable as attributes."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


class TensorResult(Fields):
    """One tensor pair of a report: a dict of the JSON fields, also readable as attributes
    (``t.cosine``, ``t.status``, ``t.max_abs_diff``, ``t.first_mismatch_index``, ...)."""

    def __repr__(self) -> str:
        return (f"<TensorResult {self.get('name')!r} occurrence={self.get('occurrence')} "
                f"status={self.get('status')} cosine={self.get('cosine')}>")


class Report:
    """The result of :func:`compare`.

    verdict: "pass", "diverged", "silent_failure" or "nothing_compared" (no pair was compared:
    dumps without tensors, a filter that matched nothing; not a pass); exit_code: 0, 1, 3 or 2
    as the command.
    first_divergence / first_nonfinite / first_silent_zero: a TensorResult or None.
    tensors: every pair in reference execution order; origins; axes_findings. to_json() / to_markdown() / to_text() /
    to_html() / to_png() / to_model_explorer(): the renderings of `driftscope compare`.
    """

    def __init__(self, native: Any) -> None:
        self._native = native
        self._data: Optional[Dict[str, Any]] = None

    @property
    def data(self) -> Dict[str, Any]:
        """The whole report as the JSON schema's dict (parsed once, on first use)."""
        if self._data is None:
            self._data = json.loads(self._native.to_json(0))
        return self._data

    @property
    def verdict(self) -> str:
        return self._native.verdict

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    @property
    def exit_code(self) -> int:
        return self._native.exit_code

    @property
    def summary(self) -> str:
        """The one line a CI log shows first."""
        return self._native.summary

    def _pair(self, key: str) -> Optional[TensorResult]:
        v = self.data.get(key)
        return TensorResult(v) if v is not None else None

    @property
    def first_divergence(self) -> Optional[TensorResult]:
        return self._pair("first_divergence")

    @property
    def first_nonfinite(self) -> Optional[TensorResult]:
        return self._pair("first_nonfinite")

    @property
    def first_silent_zero(self) -> Optional[TensorResult]:
        return self._pair("first_silent_zero")

    @property
    def tensors(self) -> List[TensorResult]:
        return [TensorResult(t) for t in self.data["tensors"]]

    @property
    def counts(self) -> Dict[str, int]:
        return dict(self.data["counts"])

    @property
    def only_in_reference(self) -> List[Dict[str, Any]]:
        return list(self.data["only_in_reference"])

    @property
    def only_in_candidate(self) -> List[Dict[str, Any]]:
        return list(self.data["only_in_candidate"])

    @property
    def incomparable(self) -> List[Dict[str, Any]]:
        return list(self.data["incomparable"])

    @property
    def warnings(self) -> List[str]:
        return list(self.data["warnings"])

    @property
    def origins(self) -> List[Dict[str, Any]]:
        """Every independent origin of error in execution order (docs/compare.md §5): dicts of
        the JSON schema's ``origins`` (name, origin "introduced"/"amplified", factor, reach,
        reach_failing, source, parameters_differ, parameters, ...; ranks for dump sets)."""
        return list(self.data["origins"])

    @property
    def axes_findings(self) -> List[Dict[str, Any]]:
        """Findings by axis name on either run (docs/compare.md "Findings by axis name"): dicts
        of the JSON schema's ``axes_findings`` (code, side "reference"/"candidate"/"both", name,
        pair, index_ref, index_cand, reference_message, candidate_message); empty when none."""
        return list(self.data.get("axes_findings", ()))

    @property
    def localisation(self) -> Dict[str, Any]:
        """``{"basis": "dataflow" | "execution_order", "amplification_threshold": ...}``."""
        return dict(self.data["localisation"])

    def tensor(self, name: str, occurrence: int = 0, role: str = "output",
               role_index: int = 0) -> TensorResult:
        """The pair of this reference tensor; NotFoundError when it was not paired."""
        for t in self.data["tensors"]:
            if (t["name"], t["occurrence"], t["role"], t["role_index"]) == (
                    name, occurrence, role, role_index):
                return TensorResult(t)
        raise NotFoundError(f"no pair for {name!r} (occurrence {occurrence}, {role}"
                            f"[{role_index}]) in this report", 3, "not_found", None)

    def to_json(self, indent: int = 2) -> str:
        return self._native.to_json(indent)

    def to_markdown(self) -> str:
        return self._native.to_markdown()

    def to_text(self, color: bool = False, width: int = 100, all: bool = False) -> str:
        return self._native.to_text(color, width, all)

    def to_html(self) -> str:
        """The self-contained HTML report (docs/compare.md "The HTML report"), as `driftscope
        compare --html` writes it. Heatmaps, histograms and worst elements need
        ``compare(..., details=True)``; without it the page says so."""
        return self._native.to_html()

    def to_png(self, width: int = 960, height: int = 420) -> bytes:
        """A PNG image of the error growth (`driftscope compare --plot`)."""
        return self._native.to_png(width, height)

    def to_model_explorer(self) -> str:
        """Model Explorer node data (JSON) painting each node by its pair's error
        (`driftscope compare --model-explorer`)."""
        return self._native.to_model_explorer()

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return f"<driftscope.Report verdict={self.verdict} {self.summary!r}>"


def _reader(x: PathOrDump) -> Any:
    if isinstance(x, Dump):
        return x._live()
    return _open(x)._live()


def compare(reference: PathOrDump, candidate: PathOrDump, *,
            atol: Optional[float] = None, rtol: Optional[float] = None,
            min_cosine: Optional[float] = None, min_sqnr: Optional[float] = None,
            max_ulp: Optional[int] = None, max_rel_l2: Optional[float] = None,
            max_mismatch_fraction: Optional[float] = None,
            min_argmax_agreement: Optional[float] = None,
            min_topk_overlap: Optional[float] = None,
            policy: Union[None, str, "os.PathLike[str]", Mapping[str, Any]] = None,
            map_a: Sequence[str] = (), map_b: Sequence[str] = (),
            names: Optional[Mapping[str, str]] = None,
            mapping: Optional[Union[str, "os.PathLike[str]"]] = None, pairs: str = "name",
            filter: str = "", reshape: bool = False, nan_equal: bool = False,
            stop_at_first: bool = False, allow_unpaired: bool = False,
            allow_incomparable: bool = False, threads: int = 0,
            classes: Sequence[str] = (), top_k: int = 5,
            reference64: Optional[Union[str, "os.PathLike[str]"]] = None,
            r64_k: Union[Sequence[str], Mapping[str, float]] = (),
            r64_floor: Optional[float] = None,
            amplification_threshold: float = 10.0, max_amplifiers: int = 5,
            details: bool = False,
            progress: Optional[Callable[[int, int], None]] = None,
            engine: str = "local", ray_address: Optional[str] = None,
            ray_parts: Optional[int] = None,
            ray_scratch: Optional[Union[str, "os.PathLike[str]"]] = None) -> Report:
    """Compares a candidate run against a reference run and names the first divergence.

    reference, candidate: paths or open Dumps; a path may also be a dump set (a directory
    holding driftscope-set.json, or that file; docs/dumpsets.md). The reference's execution order defines "first"
    and relative errors are relative to it.
    Criteria (any combination; given ones replace the per-dtype defaults as a whole, like the
    command's flags): atol/rtol (allclose), min_cosine, min_sqnr (dB), max_ulp, max_rel_l2,
    max_mismatch_fraction, min_argmax_agreement, min_topk_overlap.
    policy: a policy file (TOML or JSON) or a dict in the JSON policy format (docs/compare.md).
    map_a / map_b: rename rules "REGEX=>REPLACEMENT" for reference / candidate names;
    names: exact {reference name: candidate name} pairs; mapping: a mapping file.
    pairs: "name" (default) or "positional" (i-th with i-th in execution order).
    classes / top_k: globs of tensors whose last axis holds classes, and k of top-k agreement.
    reference64: a float64 run of the reference for the float64 ordering rule; r64_k
    ({"f16": 3} or ["f16=3"]) and r64_floor tune it.
    details: also find where each pair's error sits (histogram, heatmap, worst elements) for
    Report.to_html(); one more pass over each pair's elements.
    Every value is checked by the library's one validator of compare options, as for the
    command and the C ABI: out of range is InvalidArgumentError with the same message.
    The GIL is released while the engine runs; ``progress(done, total)`` is called as pairs
    complete.
    engine: "local" (default: this process's thread pool) or "ray": the pairs are measured as
    Ray tasks on an existing cluster (``ray_address``, else $RAY_ADDRESS, else "auto"; a
    connection already made with ``ray.init`` is used as is) that reads both dumps from shared
    storage, in ``ray_parts`` parts (default: two per cluster CPU); the report is exactly the
    local one (docs/howto/cluster.md). A part that fails after Ray's retries is an error, never
    a partial report. With a dump set on either side the shards are put together on this machine
    into two logical dumps in a fresh directory inside ``ray_scratch`` (default: next to the
    candidate set, else the reference set; it must be storage every worker sees), removed
    afterwards; the report is the local set compare's.
    """
    kwargs = {k: v for k, v in locals().items()
              if k not in ("reference", "candidate", "progress", "engine", "ray_address",
                           "ray_parts", "ray_scratch")}
    if engine not in ("local", "ray"):
        raise InvalidArgumentError(f"engine={engine!r} is not 'local' or 'ray'", 1,
                                   "invalid_argument")
    return run(reference, candidate, settings(kwargs), progress=progress, engine=engine,
               ray_address=ray_address, ray_parts=ray_parts, ray_scratch=ray_scratch)


def run(reference: PathOrDump, candidate: PathOrDump, s: Any, *,
        progress: Optional[Callable[[int, int], None]] = None, engine: str = "local",
        ray_address: Optional[str] = None, ray_parts: Optional[int] = None,
        ray_scratch: Optional[Union[str, "os.PathLike[str]"]] = None) -> Report:
    """compare() with its settings as the engine's CompareSettings `s` (the command's path:
    cli.py resolves them from the table, not from keywords)."""
    if engine == "ray":
        from .ray import compare_on_ray

        return Report(compare_on_ray(reference, candidate, s, address=ray_address,
                                     parts=ray_parts, scratch=ray_scratch))
    if any(not isinstance(x, Dump) and _core.is_dump_set_path(os.fspath(x))
           for x in (reference, candidate)):
        # A dump set on either side (docs/dumpsets.md): the library gathers the shards.
        return Report(_core.compare_files(_path(reference), _path(candidate), s, progress))
    return Report(_core.compare(_reader(reference), _reader(candidate), s, progress))


def options(given: Mapping[str, Any]) -> Dict[str, Any]:
    """Every keyword argument of compare(): `given`, the others at compare()'s defaults (what
    the engines take: settings.settings, ray.compare_on_ray)."""
    o = {n: p.default for n, p in inspect.signature(compare).parameters.items()
         if p.kind is inspect.Parameter.KEYWORD_ONLY}
    o.update(given)
    return o


def _path(x: PathOrDump) -> str:
    return x.path if isinstance(x, Dump) else os.fspath(x)
