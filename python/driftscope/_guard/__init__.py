"""The guard behind ``driftscope guard`` and ``driftscope.guard(...)``: run one model on every runtime and precision this machine has, compare
each against a reference backend, and give one verdict.

    import driftscope
    report = driftscope.guard("model.onnx", backends=["ort", "ort-fp16", "ort-int8"])
    print(report.verdict, report.exit_code)
    for row in report.backends:
        print(row.name, row.status, row.worst.cosine if row.worst else None)
    open("guard.json", "w").write(report.to_json())

Every backend runs in its own child process (a runtime that crashes becomes RUNTIME_ERROR with
the signal; the others go on). More backends: a module named in $DRIFTSCOPE_GUARD_PLUGINS
subclasses :class:`Backend` and calls :func:`register_backend` (docs/howto/guard.md). See docs/howto/guard.md for the backends, the input rules, the
verdicts and their formulas, and docs/guard-schema.json for the JSON report.
"""

from __future__ import annotations

# Plugins subclass Backend and Session and call register_backend (docs/howto/guard-backends.md).
from .backends.base import Backend, Session
from .backends.registry import BACKENDS, DEFAULT_REFERENCE, family_backends, register_backend
from ._command import cli_main
from ._run import GuardError, guard
from ._inputs import InputInfo
from ._metrics import (ARGMAX_FLIP, CONSTANT_OUTPUT, NUMERICAL_INSTABILITY, PASS,
                       PRECISION_DEGRADATION, REFERENCE, RUNTIME_ERROR, SILENT_ZERO_VECTOR,
                       UNAVAILABLE, OutputResult, Thresholds)
from ._fallback import FallbackResult
from ._probe import ProbeFinding, ProbeResult
from ._report import EXIT_CODES, SCHEMA, BackendResult, GuardReport

__all__ = [
    "guard", "GuardReport", "BackendResult", "OutputResult", "GuardError", "Thresholds",
    "InputInfo", "Backend", "Session", "register_backend", "BACKENDS", "DEFAULT_REFERENCE",
    "family_backends", "cli_main", "EXIT_CODES", "SCHEMA", "ProbeResult", "ProbeFinding",
    "FallbackResult",
    "PASS", "REFERENCE", "NUMERICAL_INSTABILITY", "SILENT_ZERO_VECTOR", "CONSTANT_OUTPUT",
    "PRECISION_DEGRADATION", "ARGMAX_FLIP", "RUNTIME_ERROR", "UNAVAILABLE",
]
