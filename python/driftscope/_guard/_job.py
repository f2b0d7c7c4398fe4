"""What the guard asks of one child process, as the child reads it from its job file: a
backend's run (kind "run"), or the probe's or the fallback's work on a backend ("bisect",
"bisect_torch", "fallback"), or the replay at the origin a probe named ("replay"). One typed
record instead of a dict: a caller's misspelt field is a TypeError in the guard, not a KeyError
in a child. It crosses the fork server pickled (_run.run_backend writes it, _child.run_job reads
it); the result comes back as a dict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

KINDS = ("run", "bisect", "bisect_torch", "fallback", "search", "replay")


@dataclass
class Job:
    backend: str                                  # the name in the registry
    model: str
    samples: List[Any]                            # one {input: array} per sample (or steps)
    runs: int                                     # timed runs of sample 0 after the first
    seed: int
    work: str                                     # the child's own working folder
    kind: str = "run"
    state: Dict[str, Any] = field(default_factory=dict)  # stateful models (_stateful.py)
    export_dir: Optional[str] = None              # the run's one export of a PyTorch model
    # kind "run"
    keep_float32: Sequence[str] = ()              # the fallback's nodes (a verification run)
    # the fallback's nodes kept in a rung below float32 ({node: "int16"/"bfloat16"}); evidence
    # then proves that precision (Session.precision_evidence)
    keep_precision: Optional[Dict[str, str]] = None
    evidence: Optional[Sequence[str]] = None      # nodes to prove float32 (Session.float32_evidence)
    save_variant: Optional[str] = None            # where to save the built ONNX variant
    record: Optional[Dict[str, Any]] = None       # {"sample": k, "path": tdump}: intermediates
    # the probe ("bisect", "bisect_torch") and the fallback ("fallback")
    reference: Optional[str] = None               # the reference backend (bisect)
    feeds: Any = None                             # the sample (or steps) bisected
    ref_outputs: Any = None                       # the reference's outputs to judge against
    thresholds: Dict[str, Any] = field(default_factory=dict)  # _metrics.Thresholds fields
    calibration: Optional[List[Any]] = None       # samples a static INT8 variant calibrates on
    leaves: Sequence[str] = ()                    # bisect_torch: modules in execution order
    ops: Optional[Dict[str, str]] = None          # bisect_torch: module -> op type
    order: Sequence[Tuple[str, str]] = ()         # fallback: (node, op type) in model order
    origins: Sequence[str] = ()                   # fallback: where the probe started it
    ranking: Sequence[str] = ()                   # fallback: nodes by their own effect, best first
    cap: int = 0                                  # fallback: at most this many variant builds
    seconds: Optional[float] = None               # fallback: and at most this long (None: no limit)
    rungs: Sequence[str] = ()                     # fallback: the ladder below float32, cheapest first
    ref_dump: Optional[str] = None                # fallback: the reference's recorded run
    probe_sample: Optional[int] = None
    probe_step: Optional[int] = None
    policy: Any = None
    names_from: Optional[str] = None              # "candidate" with --reference-model
    # kind "run" with --metric (_task.py): evaluated in this child on its own outputs against
    # metric_refs (None: the reference's own run, judged against itself), per sample with
    # metric_samples[k] (the inputs and --data's label arrays)
    metric: Optional[str] = None
    metric_refs: Optional[List[Any]] = None
    metric_samples: Optional[List[Any]] = None
    # kind "search" (_search.py): evaluations, ranges {input: (lo, hi)}, ref_model, metric
    search: Dict[str, Any] = field(default_factory=dict)
    at: Optional[str] = None                      # replay: the tensor the probe named

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"job kind {self.kind!r} is not one of {', '.join(KINDS)}")
