"""`python -m driftscope repro` for every format: repro.cli_main with the .tflite and PyTorch
paths (repro_tflite.py, repro_torch.py), which build on repro.py and so cannot be imported by it.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from . import repro, repro_tflite, repro_torch


def cli_main(argv: Optional[Sequence[str]] = None, hasher: Any = None) -> int:
    return repro.cli_main(argv, hasher, makers={"tflite": repro_tflite.make_repro,
                                                "torch": repro_torch.make_repro})
