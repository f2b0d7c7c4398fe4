"""Checking one run without a reference: ``driftscope.check(run)``.

The checks are the C++ library's, the ones ``driftscope check`` runs (docs/axes.md "Checking one
run"); the report's fields are those of its JSON rendering (schema ``driftscope.check.report/1``).
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Sequence, Union

from .. import _core
from .._dump import Dump
from .api import Fields, _reader

__all__ = ["check", "CheckReport", "Finding"]

# The library's table of check options (include/driftscope/check.hpp, the command's flags): each
# keyword of check() is a row's, and lands in that row's CheckOptions field.
_ROWS: List[Dict[str, Any]] = _core.check_options()
_AS_FIELD = {"number": float, "list": lambda v: [str(x) for x in v]}


class Finding(Fields):
    """One finding: a dict of the JSON fields (code, name, occurrence, role, role_index, op_type,
    index, message, value), also readable as attributes (``f.code``, ``f.message``)."""

    def __repr__(self) -> str:
        return f"<Finding {self.get('code')} {self.get('name')!r}: {self.get('message')}>"


class CheckReport:
    """The result of :func:`check`.

    verdict: "clean", "findings" or "nothing_checked"; exit_code: 0, 1 or 2 as the command.
    findings: every finding in file order; notes: what could not be checked; warnings: damage.
    """

    def __init__(self, json_text: str, text: str, html: str) -> None:
        self.data: Dict[str, Any] = json.loads(json_text)
        self._json = json_text
        self._text = text
        self._html = html

    verdict = property(lambda self: self.data["verdict"])
    exit_code = property(lambda self: self.data["exit_code"])
    summary = property(lambda self: self.data["summary"])
    notes = property(lambda self: list(self.data["notes"]))
    warnings = property(lambda self: list(self.data["warnings"]))

    @property
    def findings(self) -> List[Finding]:
        return [Finding(f) for f in self.data["findings"]]

    def by_code(self, code: str) -> List[Finding]:
        return [f for f in self.findings if f["code"] == code]

    def to_json(self, indent: int = 2) -> str:
        return json.dumps(self.data, indent=indent) + "\n"

    def to_text(self) -> str:
        return self._text

    def to_html(self) -> str:
        """The self-contained offline page ``driftscope check --html`` writes."""
        return self._html

    def __repr__(self) -> str:
        return f"<CheckReport {self.verdict}: {self.summary}>"


def check(run: Union[str, "os.PathLike[str]", Dump], *, dynamic_axes: Sequence[str] = (),
          ignore: Sequence[str] = (), norm_tolerance: float = 0.05,
          softmax_tolerance: float = 1e-3, bad_slice_fraction: float = 0.01,
          f16_near_overflow: float = 32768.0, saturation_fraction: float = 0.01) -> CheckReport:
    """Checks one run by itself (the ``driftscope check`` command; docs/axes.md).

    dynamic_axes: axis names that may take several sizes; ignore: finding codes not to report.
    The tolerances are those of the command's flags (one table: ``_core.check_options()``); a
    value out of range is InvalidArgumentError with the library's message.
    """
    given = locals()
    o = _core.CheckOptions()
    for row in _ROWS:
        if row["keyword"]:
            setattr(o, row["name"], _AS_FIELD[row["type"]](given[row["keyword"]]))
    return CheckReport(*_core.check(_reader(run), o))
