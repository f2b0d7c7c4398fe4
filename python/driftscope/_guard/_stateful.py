"""Stateful models: an output that is the next step's value of an input (a recurrent state).

The guard runs such a model for a few steps, each backend carrying its own state (its output of
step t is its input of step t+1, so error that accumulates shows), and judges every step's
outputs: output ``y`` of step 2 is reported as ``y[step 2]``.

The pairs come from ``--state IN=OUT``, or are found by name: an output named like an input with
in -> out, input -> output, past -> present, prev -> next, old -> new, or the suffix _out,
_next, _new, N, _n (``h_in``/``h_out``, ``state``/``state_out``, ``state``/``stateN``,
``past_key``/``present_key``), of the same element type and a compatible shape (same rank, each
dimension equal or dynamic on either side). The generic ``input``/``output`` (and ``in``/``out``,
with an index such as ``input_1``/``output_1``) are never paired by name: a VAD model's audio
``input`` and its probability ``output`` look like a state and are not one; ``--state`` says so
when it is.
"""

from __future__ import annotations

import functools
import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .backends.base import Session

DEFAULT_STEPS = 3

_SWAPS = (("in", "out"), ("input", "output"), ("past", "present"), ("prev", "next"),
          ("old", "new"))


# Names that say "an input" and nothing more: never half of a state pair found by name.
_GENERIC = re.compile(r"^(input|in|inputs|x)([_:.\-]?\d+)?$", re.I)

Shape = Tuple[object, ...]  # int for a fixed dimension, anything else for a dynamic one


def _candidates(name: str) -> List[str]:
    out = [f"{name}_out", f"{name}_next", f"{name}_new", f"{name}out", f"next_{name}",
           f"new_{name}", f"{name}N", f"{name}_n"]
    for a, b in _SWAPS:
        for sep in ("_", ".", ":", "/", "-"):
            out.append(re.sub(rf"(^|{re.escape(sep)}){a}($|{re.escape(sep)})",
                              lambda m: f"{m.group(1)}{b}{m.group(2)}", name))
        out.append(re.sub(rf"^{a}(?=[A-Z0-9_])", b, name))
        out.append(re.sub(rf"(?<=[a-z0-9_]){a.capitalize()}(?=$|[A-Z0-9_])", b.capitalize(),
                          name))
    return [c for c in dict.fromkeys(out) if c != name]


def shapes_compatible(a: Optional[Shape], b: Optional[Shape]) -> bool:
    """Same rank, and each dimension equal or dynamic (not an int) on either side; unknown
    shapes (None) are compatible with anything."""
    if a is None or b is None:
        return True
    if len(a) != len(b):
        return False
    return all(not isinstance(x, int) or not isinstance(y, int) or x == y
               for x, y in zip(a, b))


def find_pairs(inputs: Mapping[str, str], outputs: Mapping[str, str],
               in_shapes: Optional[Mapping[str, Shape]] = None,
               out_shapes: Optional[Mapping[str, Shape]] = None) -> Dict[str, str]:
    """input name -> output name for the state pairs found by name; `inputs` and `outputs` map
    names to dtype names (a pair must have one dtype), the shapes (when known) must be
    compatible, and a generic input name (input, in, input_1, ...) is never paired."""
    pairs: Dict[str, str] = {}
    taken = set()
    in_shapes, out_shapes = in_shapes or {}, out_shapes or {}
    for name, dtype in inputs.items():
        if _GENERIC.match(name):
            continue
        for cand in _candidates(name):
            if (cand in outputs and cand not in taken and outputs[cand] == dtype
                    and shapes_compatible(in_shapes.get(name), out_shapes.get(cand))):
                pairs[name] = cand
                taken.add(cand)
                break
    return pairs


# --state none: no state pairs, not even those found by name.
NO_STATE = "none"


def parse_state(specs: Sequence[str]) -> Union[Dict[str, str], str]:
    if list(specs) == [NO_STATE]:
        return NO_STATE
    pairs: Dict[str, str] = {}
    for spec in specs:
        a, sep, b = spec.partition("=")
        if not sep or not a or not b:
            raise ValueError(f"--state '{spec}': expected INPUT=OUTPUT (the output that is the "
                             "input's value at the next step)")
        pairs[a] = b
    return pairs


class Steps(list):
    """The inputs of one sample of a stateful model: one dict per step; the state inputs are
    in the first step only (later steps take the backend's own outputs)."""


def step_name(output: str, step: int) -> str:
    return f"{output}[step {step + 1}]"


def step_dump(path: str, step: int) -> str:
    """The recording of step `step` (0-based) of a stateful run recorded as `path`: one TDUMP
    file per step (every step runs the same graph, so the files compare step by step)."""
    stem = path[:-6] if path.endswith(".tdump") else path
    return f"{stem}.step{step + 1}.tdump"


class StatefulSession(Session):
    """Runs a session step by step, feeding each state output back as the next step's input."""

    def __init__(self, inner: Session, pairs: Mapping[str, str]) -> None:
        self.inner, self.pairs = inner, dict(pairs)
        self.notes = list(getattr(inner, "notes", []))

    def run(self, feeds) -> Dict[str, np.ndarray]:  # type: ignore[override]
        if not isinstance(feeds, Steps):
            return self.inner.run(feeds)
        return self._steps(feeds, lambda t, f: self.inner.run(f))

    def record(self, feeds, path: str) -> Dict[str, np.ndarray]:  # type: ignore[override]
        """Runs every step as run() does, recording step t into step_dump(path, t)."""
        if not isinstance(feeds, Steps):
            return self.inner.record(feeds, path)
        return self._steps(feeds, lambda t, f: self.inner.record(f, step_dump(path, t)))

    def _steps(self, feeds: "Steps", call) -> Dict[str, np.ndarray]:
        result: Dict[str, np.ndarray] = {}
        state: Dict[str, np.ndarray] = {}
        for t, step in enumerate(feeds):
            out = call(t, {**step, **state})
            for name, value in out.items():
                result[step_name(name, t)] = value
            missing = [o for o in self.pairs.values() if o not in out]
            if missing:
                raise RuntimeError(f"step {t + 1}: the backend returned no state output "
                                   f"{', '.join(missing)}")
            state = {i: out[o] for i, o in self.pairs.items()}
        return result

    def float32_evidence(self, nodes: Sequence[str]) -> Dict[str, str]:
        return self.inner.float32_evidence(nodes)

    def precision_evidence(self, nodes: Sequence[str], precision: str) -> Dict[str, str]:
        return self.inner.precision_evidence(nodes, precision)


def check_pairs(pairs: Mapping[str, str], inputs: Mapping[str, str],
                outputs: Optional[Mapping[str, str]]) -> Optional[str]:
    """The one-line error for --state pairs that do not name an input and an output."""
    for i, o in pairs.items():
        if i not in inputs:
            return (f"--state '{i}={o}': the model has no input '{i}' (inputs: "
                    f"{', '.join(inputs)})")
        if outputs is not None and o not in outputs:
            return (f"--state '{i}={o}': the model has no output '{o}' (outputs: "
                    f"{', '.join(outputs)})")
    return None


def make_steps(samples: List[Dict[str, np.ndarray]], per_step: List[List[Dict[str, np.ndarray]]],
               pairs: Mapping[str, str]) -> List[Steps]:
    """Sample k: step 1 is samples[k] (state inputs included), step t > 1 is per_step[k][t-1]
    without the state inputs."""
    out: List[Steps] = []
    for k, first in enumerate(samples):
        steps = Steps([first])
        for later in per_step[k][1:]:
            steps.append({n: v for n, v in later.items() if n not in pairs})
        out.append(steps)
    return out


def first_steps(samples: Sequence[object]) -> List[Dict[str, np.ndarray]]:
    """One feed dict per sample (the first step of a stateful one): for calibration."""
    return [s[0] if isinstance(s, Steps) else s for s in samples]  # type: ignore[misc]


def onnx_proto(model: str):
    """The ONNX graph without external data, parsed once per guard run for the signature and
    the state pairs (a 90 MB model takes ~0.4 s to parse)."""
    import os

    st = os.stat(model)
    return _onnx_proto(model, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=2)
def _onnx_proto(path: str, size: int, mtime_ns: int):
    from ..recorders.api import onnx_load_model as _load_model

    return _load_model(path)[0]


def io_types(family: str, model: str) -> Tuple[Dict[str, str], Optional[Dict[str, str]]]:
    """(input name -> dtype, output name -> dtype or None where outputs are known only by
    running: PyTorch)."""
    ins, outs, _, _ = io_specs(family, model)
    return ins, outs


def io_specs(family: str, model: str) -> Tuple[Dict[str, str], Optional[Dict[str, str]],
                                               Dict[str, Shape], Dict[str, Shape]]:
    """io_types and the declared shapes: (input dtypes, output dtypes or None, input shapes,
    output shapes); a dynamic dimension is its name or None."""
    if family == "onnx":
        from ._inputs import _ONNX_ELEM

        proto = onnx_proto(model)
        inits = {t.name for t in proto.graph.initializer}

        def dt(vi) -> str:
            e = vi.type.tensor_type.elem_type
            return np.dtype(_ONNX_ELEM[e]).name if e in _ONNX_ELEM else f"onnx{e}"

        def shape(vi) -> Optional[Shape]:
            tt = vi.type.tensor_type
            if not tt.HasField("shape"):
                return None
            return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                         for d in tt.shape.dim)

        ins = [vi for vi in proto.graph.input if vi.name not in inits]
        return ({vi.name: dt(vi) for vi in ins}, {vi.name: dt(vi) for vi in proto.graph.output},
                {vi.name: shape(vi) for vi in ins},
                {vi.name: shape(vi) for vi in proto.graph.output})
    if family == "tflite":
        from ..recorders.api import litert_open

        it, _ = litert_open(model)

        def tshape(d) -> Shape:
            sig = d.get("shape_signature")
            dims = sig if sig is not None and len(sig) == len(d["shape"]) else d["shape"]
            return tuple(int(x) if int(x) >= 0 else None for x in dims)

        ind, outd = it.get_input_details(), it.get_output_details()
        return ({d["name"]: np.dtype(d["dtype"]).name for d in ind},
                {d["name"]: np.dtype(d["dtype"]).name for d in outd},
                {d["name"]: tshape(d) for d in ind}, {d["name"]: tshape(d) for d in outd})
    return {}, None, {}, {}
