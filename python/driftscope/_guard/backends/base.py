"""The runner interface: a backend is one runtime + precision (``ort-fp16``: ONNX Runtime, CPU
provider, the model converted to float16). The guard asks it, in its own process, whether it can
run here (:meth:`Backend.unavailable`, with the reason), and then, in a child process per
backend, to load the model (:meth:`Backend.load`, which builds the variant: a float16 or INT8
copy) and run it (:meth:`Session.run`). A backend that crashes its child (a segfault in a
runtime) takes only the child down.

The backends are in the modules beside this one, one per runtime; registry.py lists them and
loads the plugins. This module imports no runtime and no other module of the guard.
"""

from __future__ import annotations

import importlib
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

FAMILIES = ("onnx", "tflite", "torch")


class Session:
    """A loaded model. ``notes`` say what the variant really is (nodes kept in float32, how many
    nodes were quantized); they go into the report row."""

    notes: List[str]

    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        raise NotImplementedError

    def float32_evidence(self, nodes: Sequence[str]) -> Dict[str, str]:
        """For each of `nodes` (the SOURCE model's node names / module paths) that the built
        variant provably runs in float32: how the variant shows it (the optimized graph's types,
        the parameters' and the recorded output's dtype). A node missing from the answer is not
        proven, and a fallback that keeps it is not reported as verified. Call after run()."""
        return {}

    def precision_evidence(self, nodes: Sequence[str], precision: str) -> Dict[str, str]:
        """float32_evidence for a rung of the fallback ladder below float32: for each of `nodes`
        the built variant provably runs in `precision` (one of Backend.keep_precisions()), how
        the variant shows it. The default proves float32 only."""
        return self.float32_evidence(nodes) if precision == "float32" else {}

    def record(self, feeds: Mapping[str, np.ndarray], path: str) -> Dict[str, np.ndarray]:
        """Runs once and records the intermediate tensors into the TDUMP file `path` through
        driftscope's recorders, named by the source model's node / module names; returns that
        run's outputs (the guard compares them with run()'s: an observer effect makes it bisect
        instead). NotImplementedError: this backend cannot expose intermediates."""
        raise NotImplementedError


class Backend:
    """One runtime + precision. Subclasses set the class attributes and implement load()."""

    name: str = ""
    family: str = ""        # which models it runs: "onnx", "tflite" or "torch"
    also_runs: Tuple[str, ...] = ()  # other families whose models it runs too (by file suffix)
    summary: str = ""       # one line: what runs
    # What it really exercises where that is less than its name suggests; completes the
    # sentence "NAME exercises ..." in every report that runs it.
    note: str = ""
    # Run when --backends is not given (the slow opt-in ones, such as the ONNX backends of a
    # PyTorch model through an export, are not).
    default: bool = True

    def unavailable(self) -> Optional[str]:
        """None when this backend can run on this machine, else the reason it cannot."""
        return None

    def can_keep_float32(self) -> bool:
        """Does load(..., keep_float32=...) work: can this backend's variant keep chosen nodes
        in float32 (the FP32 fallback)?"""
        return False

    def keep_precisions(self) -> Tuple[str, ...]:
        """The fallback ladder's rungs below float32, cheapest first: precisions ("int16":
        INT16 activations with INT8 weights, "bfloat16") this backend's variant can keep chosen
        nodes in through load(..., keep_precision=...), with Session.precision_evidence proving
        them. () (the default, and every plugin written before the ladder): float32 only."""
        return ()

    def load(self, model: str, work: str, seed: int,
             keep_float32: Sequence[str] = ()) -> Session:
        """In the child process: build this backend's variant of `model` (files go in the
        folder `work`) and load it. Raise on failure; the message becomes the report's.
        keep_float32: nodes named by the SOURCE model's node names (ONNX node names, torch
        module paths) that the variant keeps in float32 (only when can_keep_float32()).
        A backend with keep_precisions() also takes keep_precision={node: precision}: nodes
        kept in a rung below float32. The guard passes it only to such backends, and only when
        it tries such a rung, so a load() without the parameter keeps working."""
        raise NotImplementedError

    def recipe(self, model: str, nodes: Sequence[str], precision: str = "float32") -> str:
        """How to build the variant with `nodes` kept in float32, in the runtime's own terms
        (code a user pastes); "" when there is no such mechanism. A backend with
        keep_precisions() also takes precision= (one of them, or "float32"); the guard passes
        it only for a rung below float32, so an override without it keeps working."""
        return ""

    # Op types worth keeping in float32 (None: every node). INT8 backends name the ops they
    # quantize, so the fallback does not spend re-runs on nodes the variant never changed.
    fallback_ops: Optional[frozenset] = None
    # Only nodes that read float32 weights (initializers) are worth keeping: dynamic INT8
    # quantizes weights, and activations only at the nodes that read quantized weights.
    fallback_weights_only: bool = False
    # The type the variant stores values and weights in (_ranges.TargetRange): the fallback
    # search starts from the nodes the reference's ranges say it cannot hold (None: no seed).
    fallback_range: Any = None
    # What the guard's fork server imports before it forks this backend's children, so that
    # each child does not import its runtime again (_forker.py): modules, or MODULE:FUNCTION
    # to call after the import. Only imports that create no session and start no thread pool
    # belong here: torch's import starts none (its OpenMP pool starts at the first parallel op,
    # which the server never runs, and would not survive a fork once started), so each child
    # starts its own.
    preload: Tuple[str, ...] = ()
    # The deployment precision it stands for ("float16", "bfloat16"; None: float32, INT8) and
    # whether it computes in it (False: storage only, as ort-fp16 on the CPU). A fallback for a
    # precision is searched and verified where it is computed (_fallback.check_backends).
    precision: Optional[str] = None
    computes: bool = False


def _missing(module: str, pip: str) -> Optional[str]:
    try:
        importlib.import_module(module)
    except ImportError as err:
        return f"the {module} package is not installed ({err}); pip install {pip}"
    return None


def _gpu_device() -> Optional[str]:
    import glob

    found = sorted(glob.glob("/dev/nvidia[0-9]*") + glob.glob("/dev/dri/renderD*"))
    return found[0] if found else None
