"""What this CPU computes natively, as the runtimes report it, less what the user hides.

Results of the float16/bfloat16 backends depend on the machine: OpenVINO's `openvino-f16` computes
float16 only where its CPU plugin reports FP16 (AVX512-FP16 or AMX-FP16) and is UNAVAILABLE
elsewhere. $DRIFTSCOPE_HIDE_CPU makes every availability check behave as on a CPU without the
named capabilities, so the other path of the guard (and of its tests) runs on any machine:

    DRIFTSCOPE_HIDE_CPU=fp16        no native float16
    DRIFTSCOPE_HIDE_CPU=bf16,amx    no native bfloat16, no AMX
    DRIFTSCOPE_HIDE_CPU=all         none of them

It can only take capabilities away: a CPU without float16 arithmetic cannot be made to have it.
"""

from __future__ import annotations

import os
from typing import FrozenSet, Iterable, List

ENV = "DRIFTSCOPE_HIDE_CPU"
CAPABILITIES = ("fp16", "bf16", "amx")

# OpenVINO CPU plugin's OPTIMIZATION_CAPABILITIES entries that each capability stands for.
_OPENVINO = {"fp16": ("FP16",), "bf16": ("BF16",), "amx": ("AMX", "AMX_BF16", "AMX_FP16")}


class HideError(ValueError):
    """$DRIFTSCOPE_HIDE_CPU names something that is not a capability."""


def hidden() -> FrozenSet[str]:
    """The capabilities $DRIFTSCOPE_HIDE_CPU hides (empty when unset)."""
    raw = os.environ.get(ENV, "")
    names = {n.strip().lower() for n in raw.split(",") if n.strip()}
    if "all" in names:
        return frozenset(CAPABILITIES)
    unknown = sorted(names - set(CAPABILITIES))
    if unknown:
        raise HideError(f"${ENV}={raw!r}: unknown capability {', '.join(unknown)} "
                        f"(choose from {', '.join(CAPABILITIES)}, all)")
    return frozenset(names)


def openvino_capabilities(reported: Iterable[str]) -> List[str]:
    """OpenVINO's OPTIMIZATION_CAPABILITIES for the CPU, less the hidden ones."""
    gone = {c for name in hidden() for c in _OPENVINO[name]}
    return [c for c in reported if c not in gone]


def openvino_has(capability: str) -> bool:
    """Whether OpenVINO's CPU plugin computes `capability` (fp16, bf16) natively here, after
    $DRIFTSCOPE_HIDE_CPU: the check `openvino-f16`/`openvino-bf16` make, for tests and docs."""
    try:
        import openvino as ov
    except ImportError:
        return False
    caps = openvino_capabilities(ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))
    return _OPENVINO[capability][0] in caps
