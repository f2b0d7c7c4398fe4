"""The one interface a model family implements for replay (issue 26).

A :class:`Replayable` is one model loaded on one backend (the guard's backend names:
``torch-fp16``, ``ort-int8``, ``litert``...). Tensors are named as the recorders name them in a
dump and ``driftscope compare`` prints them (PyTorch: module paths; ONNX: node names,
``NAME (output K)`` for a node's output K >= 1, ``NAME #N`` for a repeated name;
.tflite: the recorder's tensor names), so a name read off ``driftscope compare`` or the guard's
probe can be replayed as printed.

Values cross the interface as numpy arrays in the reference's dtype (float32 for a float32
reference); a mechanism casts a substituted value to the dtype its backend holds that tensor in
(float16 for ``torch-fp16``, the graph's own type after an ONNX conversion) and says so in
:attr:`Replayable.notes`. A backend that cannot take a substituted value at a tensor raises
:class:`CannotReplay` naming the reason: replay never silently runs a different backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Sequence

import numpy as np


class CannotReplay(Exception):
    """This backend cannot substitute a value at / isolate this tensor (a fused node, control
    flow, a custom op, a delegate that hides it). The message is one sentence for the report."""


class UnknownTensor(CannotReplay):
    """The name is not a tensor of this model (the CLI's exit-2 error names the nearest ones)."""


@dataclass
class OpInputs:
    """What one op read in one run: its positional tensor arguments in order (numpy arrays,
    None where an argument is not a tensor), keyword tensor arguments by name, and the names
    those arguments had in the dump where known (ONNX input tensor names; "" for PyTorch
    positional arguments)."""

    args: List[Any] = field(default_factory=list)
    kwargs: Dict[str, Any] = field(default_factory=dict)
    names: List[str] = field(default_factory=list)


class Replayable:
    """One model on one backend, able to run with values substituted at named tensors."""

    backend: str = ""
    # Sentences the report shows beside this backend's results: how a value was substituted
    # (cast to float16 at the cut), what could not be replayed and why.
    notes: List[str]

    def tensors(self) -> List[str]:
        """The replayable tensors in execution order (the order a dump of this model records
        them in): the names ``run(..., replace=)`` and ``run_op`` accept."""
        raise NotImplementedError

    def outputs(self) -> List[str]:
        """The model's output names, the keys of run()'s result."""
        raise NotImplementedError

    def capture(self, feeds: Mapping[str, np.ndarray],
                names: Sequence[str]) -> Dict[str, np.ndarray]:
        """One plain run: the values of `names` (and of every output) as float arrays. On the
        reference this gives the values to substitute."""
        raise NotImplementedError

    def run(self, feeds: Mapping[str, np.ndarray],
            replace: Mapping[str, np.ndarray] = {}) -> Dict[str, np.ndarray]:
        """The model's outputs when each tensor in `replace` takes the given value instead of
        the one this backend computes (everything downstream of it computed by this backend
        from the substituted value). replace={} is a plain run."""
        raise NotImplementedError

    def op_inputs(self, feeds: Mapping[str, np.ndarray], name: str) -> OpInputs:
        """What the op producing `name` read in a plain run (on the reference: the recorded
        inputs op replay feeds the candidate)."""
        raise NotImplementedError

    def run_op(self, name: str, inputs: OpInputs) -> np.ndarray:
        """The op producing `name` run alone on this backend on `inputs` (cast to this
        backend's dtypes): its own error, whatever its inputs would have inherited."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the runtime's session (files stay for the report)."""
