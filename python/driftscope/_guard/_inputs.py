"""The guard's inputs: read the model's signature, then make deterministic values for it.

Rules (docs/howto/guard.md, "Inputs"), per input, in this order:
  given with --input          that array, for every sample
  bool                        all True
  integer named *mask*        ones
  integer ids of an embedding uniform in [0, V) where the graph feeds the input (through
                              Cast/Reshape/Unsqueeze/...) into a Gather over a constant table of
                              V rows (ONNX)
  other integer               zeros (give real values with --input)
  float, image-like           uniform in [0, 1): rank 4 with 1, 3 or 4 channels on axis 1 or 3
  float                       standard normal
Quantized LiteRT inputs get the float rule's values quantized with the tensor's scale/zero point.
Sample k uses numpy's default_rng(seed + k). Dynamic dimensions: --dim NAME=SIZE (NAME a symbolic
dimension such as "seq", or INPUT:AXIS), else the size an --input array gives them, else 1 for
axis 0 and 16 for every other axis.

Generated inputs are sized from declared dims, which a hostile or mistaken model can set to
anything ([2^62]); their bytes (all samples and steps together) are summed in Python ints and
checked against a budget (DEFAULT_MAX_BYTES, --max-input-bytes) before numpy allocates anything.
`reference init` bounds the initializers it rewrites with the same helpers (max_bytes_error).
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .._limits import (DEFAULT_MAX_BYTES, format_size, max_bytes_error, numel, output_onto_input,
                       parse_size, shape_text)

DEFAULT_BATCH = 1
DEFAULT_DIM = 16

Dim = Union[int, str, None]  # a static size, a symbolic name, or unnamed dynamic


class InputError(ValueError):
    """--input / --dim values that do not fit the model's signature (one line)."""


# -- byte budgets: the helpers are shared with `reference init` (driftscope._limits) ----------

# The budget of make_samples() when its caller gives none: the guard command sets it from
# --max-input-bytes for the guard() call it makes; guard(max_input_bytes=) passes it directly.
_MAX_BYTES: contextvars.ContextVar[int] = contextvars.ContextVar(
    "driftscope_guard_max_input_bytes", default=DEFAULT_MAX_BYTES)


def budget() -> int:
    """The input byte budget in force (--max-input-bytes, else DEFAULT_MAX_BYTES)."""
    return _MAX_BYTES.get()


@contextlib.contextmanager
def input_budget(max_bytes: int) -> Iterator[None]:
    token = _MAX_BYTES.set(int(max_bytes))
    try:
        yield
    finally:
        _MAX_BYTES.reset(token)


def onnx_external_files(proto: Any, model_path: str) -> List[str]:
    """The external-data files an ONNX model reads (driftscope.onnxruntime.external_data_files):
    for the no-overwrite rule, they are inputs too."""
    from ..recorders.api import onnx_external_data_files as external_data_files

    return external_data_files(proto, model_path)


@dataclass
class InputSpec:
    name: str
    dtype: np.dtype
    shape: List[Dim]
    vocab: Optional[int] = None                     # rows of the embedding table it indexes
    quant: Optional[Tuple[float, int]] = None       # LiteRT (scale, zero_point)
    example: Optional[np.ndarray] = None            # torch: the entry point's own value
    vocab_from: str = "embedding table"             # where vocab came from (for the report)


@dataclass
class InputInfo:
    """How one input was made (goes into the report). `guessed`: the dynamic dimensions no
    --dim, --input or other input sized, given the default size (for the error when the
    reference fails on them; not in the JSON report, where `how` says it)."""

    name: str
    dtype: str
    shape: List[int]
    how: str
    guessed: List[str] = field(default_factory=list)
    resizable: bool = False  # a guessed dimension other than the first axis (a retry can grow it)
    value: Optional[str] = None  # an entry point's argument that is not a tensor: its repr

    def to_json(self) -> Dict[str, Any]:
        out = {"name": self.name, "dtype": self.dtype, "shape": list(self.shape), "how": self.how}
        if self.value is not None:
            out["value"] = self.value
        return out


VALUE_CHARS = 200
AS_IS = "the entry point's value, passed as is to every backend (not a tensor)"


def constant_infos(example: Any, tensors: Mapping[str, Any]) -> List[InputInfo]:
    """A PyTorch entry point's arguments that are not tensors (``sr=16000``), named as
    torch_leaves names the tensors: they reach the model unchanged, and the report says so."""
    if isinstance(example, Mapping):
        named = [(str(k), v) for k, v in example.items()]
    elif isinstance(example, (list, tuple)):
        named = [(f"input{i}", v) for i, v in enumerate(example)]
    else:
        return []
    out = []
    for name, v in named:
        if name in tensors:
            continue
        try:
            text = repr(v)
        except Exception:  # noqa: BLE001 - the user's object
            text = f"<{type(v).__name__}>"
        if len(text) > VALUE_CHARS:
            text = text[:VALUE_CHARS - 3] + "..."
        out.append(InputInfo(name, type(v).__name__, [], AS_IS, value=text))
    return out


# -- signatures --------------------------------------------------------------------------------

_ONNX_ELEM = {1: np.float32, 10: np.float16, 11: np.float64, 7: np.int64, 6: np.int32,
              5: np.int16, 3: np.int8, 13: np.uint64, 12: np.uint32, 4: np.uint16, 2: np.uint8,
              9: np.bool_}
_PASSTHROUGH = frozenset({"Cast", "Identity", "Reshape", "Unsqueeze", "Squeeze", "Flatten"})


def onnx_signature(proto) -> List[InputSpec]:
    """The graph inputs that are not initializers, with the vocabulary size of the embedding
    table each integer input indexes, when the graph shows one."""
    graph = proto.graph
    inits = {t.name: t for t in graph.initializer}
    consumers: Dict[str, List[Tuple[Any, int]]] = {}
    for node in graph.node:
        for k, x in enumerate(node.input):
            consumers.setdefault(x, []).append((node, k))
    specs = []
    for vi in graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        if tt.elem_type not in _ONNX_ELEM:
            raise InputError(f"input '{vi.name}' has ONNX element type {tt.elem_type}, which the "
                             f"guard cannot generate")
        shape: List[Dim] = []
        for d in tt.shape.dim:
            if d.HasField("dim_value") and d.dim_value >= 0:
                shape.append(int(d.dim_value))
            else:
                shape.append(d.dim_param if named_dim(d.dim_param) else None)
        spec = InputSpec(vi.name, np.dtype(_ONNX_ELEM[tt.elem_type]), shape)
        if spec.dtype.kind in "iu":
            spec.vocab = _embedding_rows(vi.name, consumers, inits)
        specs.append(spec)
    return specs


def _embedding_rows(name: str, consumers, inits) -> Optional[int]:
    rows: List[int] = []
    frontier, seen = [name], {name}
    while frontier:
        value = frontier.pop()
        for node, k in consumers.get(value, []):
            if node.op_type == "Gather" and k == 1 and node.input[0] in inits:
                dims = list(inits[node.input[0]].dims)
                axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
                if len(dims) == 2 and axis == 0:
                    rows.append(int(dims[0]))
            elif node.op_type in _PASSTHROUGH and k == 0:
                for out in node.output:
                    if out and out not in seen:
                        seen.add(out)
                        frontier.append(out)
    return min(rows) if rows else None


def litert_signature(details: Sequence[Mapping[str, Any]]) -> List[InputSpec]:
    specs = []
    for d in details:
        sig = d.get("shape_signature")
        dims = list(sig) if sig is not None and len(sig) else list(d["shape"])
        shape: List[Dim] = [int(x) if int(x) >= 0 else None for x in dims]
        scale, zero = d.get("quantization", (0.0, 0))
        quant = (float(scale), int(zero)) if scale else None
        specs.append(InputSpec(d["name"], np.dtype(d["dtype"]), shape, quant=quant))
    return specs


def example_signature(named: Mapping[str, np.ndarray]) -> List[InputSpec]:
    """Torch: the entry point's example inputs give names, dtypes and shapes; the ids of an
    integer example bound the ids of the other samples."""
    specs = []
    for n, v in named.items():
        spec = InputSpec(n, v.dtype, [int(s) for s in v.shape], example=v)
        if v.dtype.kind in "iu" and v.size and int(v.min()) >= 0:
            spec.vocab, spec.vocab_from = int(v.max()) + 1, "the example's range"
        specs.append(spec)
    return specs


# -- values ------------------------------------------------------------------------------------

def parse_dims(specs: Sequence[str]) -> Dict[str, int]:
    dims: Dict[str, int] = {}
    for spec in specs:
        name, sep, size = spec.rpartition("=")
        try:
            value = int(size)
        except ValueError:
            value = -1
        if not sep or not name or value < 1:
            raise InputError(f"--dim '{spec}': expected NAME=SIZE with SIZE >= 1 (NAME a "
                             f"symbolic dimension such as seq, or INPUT:AXIS)")
        dims[name] = value
    return dims


def _describe(spec: InputSpec) -> str:
    dims = ", ".join("?" if d is None else str(d) for d in spec.shape)
    return f"{spec.dtype.name} [{dims}]"


# Exporters write "?" (tf2onnx, Keras), "None" or "-1" for a dimension they know nothing about:
# each such dimension is its own unknown, not one symbol shared by every input and axis.
_ANONYMOUS_DIMS = frozenset({"", "?", "None", "none", "-1", "unk", "dynamic"})


def named_dim(name: Optional[str]) -> bool:
    """Is this dim_param a real symbol (seq, batch_size) rather than "unknown"?"""
    return bool(name) and name not in _ANONYMOUS_DIMS


def resolve(specs: Sequence[InputSpec], given: Mapping[str, np.ndarray],
            dims: Mapping[str, int],
            guessed: Optional[Dict[str, List[str]]] = None,
            default_dim: int = DEFAULT_DIM,
            where: Optional[Mapping[str, str]] = None) -> Dict[str, List[int]]:
    """Concrete shapes for every input; checks --input arrays and --dim names. `guessed`
    receives, per input, the dynamic dimensions given the default size ("x:1 (seq) = 16").
    where: input name -> how the errors name a given array (default "--input 'NAME'"; --data
    names the sample's file)."""
    by_name = {s.name: s for s in specs}

    def said(name: str) -> str:
        return (where or {}).get(name, f"--input '{name}'")

    for name in given:
        if name not in by_name:
            raise InputError(f"{said(name)}: the model has no input of that name; its inputs "
                             "are: " + ", ".join(f"{s.name} ({_describe(s)})" for s in specs))
    symbolic = {d for s in specs for d in s.shape if isinstance(d, str)}
    for key in dims:
        base, colon, axis = key.rpartition(":")
        if colon and base in by_name and axis.isdigit():
            if int(axis) >= len(by_name[base].shape):
                raise InputError(f"--dim '{key}': input '{base}' has only "
                                 f"{len(by_name[base].shape)} axes")
            continue
        if key not in symbolic:
            known = sorted(symbolic)
            raise InputError(f"--dim '{key}': the model has no dynamic dimension of that name "
                             f"(named dynamic dimensions: {', '.join(known) or 'none'}; an "
                             f"unnamed one is INPUT:AXIS)")
    bound: Dict[str, int] = dict((k, v) for k, v in dims.items() if ":" not in k)
    for name, value in given.items():
        spec = by_name[name]
        if value.dtype != spec.dtype:
            raise InputError(f"{said(name)} has dtype {value.dtype}, the model expects "
                             f"{_describe(spec)}")
        if value.ndim != len(spec.shape) or any(
                isinstance(d, int) and d != s for d, s in zip(spec.shape, value.shape)):
            raise InputError(f"{said(name)} has shape {tuple(value.shape)}, the model "
                             f"expects {_describe(spec)}")
        for d, s in zip(spec.shape, value.shape):
            if isinstance(d, str):
                if d in bound and bound[d] != s and d not in dims:
                    raise InputError(f"{said(name)} gives dimension '{d}' size {s}, another "
                                     f"input gives it {bound[d]}")
                bound.setdefault(d, int(s))
    shapes: Dict[str, List[int]] = {}
    for spec in specs:
        if spec.name in given:
            shapes[spec.name] = [int(s) for s in given[spec.name].shape]
            continue
        out = []
        for axis, d in enumerate(spec.shape):
            key = f"{spec.name}:{axis}"
            if key in dims:
                out.append(dims[key])
            elif isinstance(d, int):
                out.append(d)
            elif isinstance(d, str) and d in bound:
                out.append(bound[d])
            else:
                out.append(DEFAULT_BATCH if axis == 0 else default_dim)
                if isinstance(d, str):
                    bound[d] = out[-1]
                if guessed is not None:
                    label = f"{spec.name}:{axis}" + (f" ({d})" if isinstance(d, str) else "")
                    guessed.setdefault(spec.name, []).append(f"{label} = {out[-1]}")
        shapes[spec.name] = out
    return shapes


def _image_like(shape: Sequence[int]) -> bool:
    return len(shape) == 4 and (shape[1] in (1, 3, 4) or shape[3] in (1, 3, 4))


def _rule(spec: InputSpec, shape: Sequence[int]) -> str:
    kind = spec.dtype.kind
    if kind == "b":
        return "ones (bool)"
    if spec.quant is not None or kind == "f":
        base = "uniform [0,1) (image-like)" if _image_like(shape) else "standard normal"
        return base + (f", quantized (scale {spec.quant[0]:g}, zero point {spec.quant[1]})"
                       if spec.quant is not None and kind != "f" else "")
    if "mask" in spec.name.lower():
        return "ones (mask)"
    if spec.vocab:
        return f"ids uniform in [0, {spec.vocab}) ({spec.vocab_from})"
    return "zeros (integer; give real values with --input)"


def _value(spec: InputSpec, shape: Sequence[int], rng: np.random.Generator) -> np.ndarray:
    kind = spec.dtype.kind
    shape = tuple(shape)
    if kind == "b":
        return np.ones(shape, dtype=spec.dtype)
    if spec.quant is not None or kind == "f":
        x = rng.random(shape) if _image_like(shape) else rng.standard_normal(shape)
        if kind == "f":
            return x.astype(spec.dtype)
        scale, zero = spec.quant  # type: ignore[misc]
        info = np.iinfo(spec.dtype)
        return np.clip(np.round(x / scale) + zero, info.min, info.max).astype(spec.dtype)
    if "mask" in spec.name.lower():
        return np.ones(shape, dtype=spec.dtype)
    if spec.vocab:
        return rng.integers(0, spec.vocab, size=shape).astype(spec.dtype)
    return np.zeros(shape, dtype=spec.dtype)


def adapt_scalars(specs: Sequence[InputSpec], given: Mapping[str, Any]) -> Dict[str, np.ndarray]:
    """A plain number given for an input (``--input sr=16000``, ``inputs={"sr": 16000}``) takes
    the input's dtype and shape (rank 0, or static dims that are all 1), if it fits exactly."""
    by_name = {s.name: s for s in specs}
    out: Dict[str, np.ndarray] = {}
    for name, value in given.items():
        if isinstance(value, (bool, int, float, np.number)) and not isinstance(value, np.ndarray) \
                and name in by_name:
            spec = by_name[name]
            if not all(d == 1 for d in spec.shape):
                raise InputError(f"--input '{name}={value}': a single number fits only an input "
                                 f"of rank 0 or size 1; the model expects {_describe(spec)}")
            arr = np.asarray(value).astype(spec.dtype)
            if spec.dtype.kind != "f" and arr.item() != value:
                raise InputError(f"--input '{name}={value}': the value does not fit the "
                                 f"model's {spec.dtype.name}")
            out[name] = arr.reshape([1] * len(spec.shape))
        else:
            out[name] = np.asarray(value)
    return out


MAX_INPUT_BYTES_FLAG = "--max-input-bytes"


def check_input_bytes(specs: Sequence[InputSpec], given: Mapping[str, Any],
                      shapes: Mapping[str, Sequence[int]], samples: int, steps: int,
                      max_bytes: int) -> None:
    """Refuses (InputError) before anything is allocated when the generated inputs of all
    samples and steps, which are all held at once, would exceed max_bytes."""
    total, largest = 0, None
    for spec in specs:
        if spec.name in given:
            continue  # the user's own array, already in memory, shared by every sample
        shape = shapes[spec.name]
        per = numel(shape) * spec.dtype.itemsize
        count = samples * steps - (1 if spec.example is not None else 0)
        total += per * max(count, 0)
        if largest is None or per > largest[1]:
            largest = (spec, per)
        if per > max_bytes:
            raise InputError(max_bytes_error(
                per, max_bytes, MAX_INPUT_BYTES_FLAG,
                f"input '{spec.name}' {shape_text(spec.dtype.name, shape)} would be generated "
                f"as"))
    if largest is not None:
        spec, per = largest
        over = max_bytes_error(
            total, max_bytes, MAX_INPUT_BYTES_FLAG,
            f"the generated inputs of {samples} sample(s) x {steps} step(s) (the largest: input "
            f"'{spec.name}' {shape_text(spec.dtype.name, shapes[spec.name])}, "
            f"{format_size(per)}) would take")
        if over:
            raise InputError(over)


def make_samples(specs: Sequence[InputSpec], given: Mapping[str, Any],
                 dims: Mapping[str, int], seed: int, samples: int, steps: int = 1,
                 max_bytes: Optional[int] = None, default_dim: int = DEFAULT_DIM,
                 data: Any = None) -> Tuple[List[Dict[str, np.ndarray]], List[InputInfo]]:
    """`samples` input dicts (sample k seeded with seed + k) and how each input was made.
    A torch entry point's own example inputs are sample 0. With steps > 1 each sample is a list
    of `steps` dicts, drawn in turn from the sample's generator (step 1 is what steps=1 gives).
    The generated arrays may take max_bytes in all (default: input_budget()'s, else
    DEFAULT_MAX_BYTES); more is an InputError before anything is allocated.
    data: a _data.DataSet (--data): one sample per data sample, `samples` ignored; the inputs a
    data sample does not give are generated for it."""
    given = adapt_scalars(specs, given)
    budget = _MAX_BYTES.get() if max_bytes is None else max_bytes
    if data is not None:
        return _data_samples(specs, given, dims, seed, steps, budget, default_dim, data)
    guessed: Dict[str, List[str]] = {}
    shapes = resolve(specs, given, dims, guessed, default_dim)
    check_input_bytes(specs, given, shapes, samples, steps, budget)
    out: List[Any] = []
    for k in range(samples):
        rng = np.random.default_rng(seed + k)
        per_step: List[Dict[str, np.ndarray]] = []
        for t in range(steps):
            feeds: Dict[str, np.ndarray] = {}
            for spec in specs:
                if spec.name in given:
                    feeds[spec.name] = given[spec.name]
                elif spec.example is not None and k == 0 and t == 0:
                    feeds[spec.name] = spec.example
                else:
                    try:
                        feeds[spec.name] = _value(spec, shapes[spec.name], rng)
                    except (MemoryError, ValueError) as err:  # within budget, yet too big here
                        raise InputError(
                            f"input '{spec.name}' {shape_text(spec.dtype.name, shapes[spec.name])}"
                            f": cannot allocate it ({type(err).__name__}: {err}); lower "
                            f"{MAX_INPUT_BYTES_FLAG} or give the input with --input") from None
            per_step.append(feeds)
        out.append(per_step if steps > 1 else per_step[0])
    infos = []
    for spec in specs:
        if spec.name in given:
            how = "given (--input)"
        elif spec.example is not None:
            how = ("the entry point's value" + (f"; samples 2..{samples}: {_rule(spec, shapes[spec.name])}"
                                                if samples > 1 else ""))
        else:
            how = _rule(spec, shapes[spec.name])
        infos.append(InputInfo(spec.name, spec.dtype.name, shapes[spec.name], how,
                               guessed.get(spec.name, []),
                               any(not g.startswith(f"{spec.name}:0")
                                   for g in guessed.get(spec.name, []))))
    return out, infos


REAL = "real"  # InputInfo.how starts with it when the values came from --data


def _as_dtype(value: np.ndarray, spec: InputSpec) -> np.ndarray:
    """A --data array in the input's dtype where that loses nothing a user would miss: float64
    data for a float32 input (numpy's default), int64 ids for an int32 input when every value
    fits. Anything else is left for resolve() to refuse with the dtype it expected."""
    want = spec.dtype
    if value.dtype == want:
        return value
    if value.dtype.kind == "f" and want.kind == "f":
        return value.astype(want)
    if value.dtype.kind in "iu" and want.kind in "iu":
        cast = value.astype(want)
        if np.array_equal(cast.astype(value.dtype), value):
            return cast
    return value


def _data_samples(specs: Sequence[InputSpec], given: Mapping[str, Any], dims: Mapping[str, int],
                  seed: int, steps: int, budget: int, default_dim: int, data: Any
                  ) -> Tuple[List[Any], List[InputInfo]]:
    by_name = {s.name: s for s in specs}
    out: List[Any] = []
    first_shapes: Dict[str, List[int]] = {}
    guessed: Dict[str, List[str]] = {}
    generated = 0
    for k, raw in enumerate(data.samples):
        origin = data.origins[k]
        sample = {n: _as_dtype(a, by_name[n]) if n in by_name else a for n, a in raw.items()}
        merged = {**sample, **given}  # --input fixes an input for every sample
        where = {n: f"--data {origin}: input '{n}'" for n in sample if n not in given}
        shapes = resolve(specs, merged, dims, guessed if k == 0 else None, default_dim, where)
        if k == 0:
            first_shapes = shapes
        for spec in specs:
            if spec.name not in merged:
                generated += numel(shapes[spec.name]) * spec.dtype.itemsize * steps
        over = max_bytes_error(generated, budget, MAX_INPUT_BYTES_FLAG,
                               f"the inputs generated beside --data's (up to sample {origin}) "
                               "would take")
        if over:
            raise InputError(over)
        rng = np.random.default_rng(seed + k)
        per_step: List[Dict[str, np.ndarray]] = []
        for _ in range(steps):
            per_step.append({spec.name: merged[spec.name] if spec.name in merged
                             else _value(spec, shapes[spec.name], rng) for spec in specs})
        out.append(per_step if steps > 1 else per_step[0])
    n = len(data.samples)
    infos = []
    for spec in specs:
        count = sum(spec.name in s for s in data.samples)
        if spec.name in given:
            how = "given (--input)"
        elif count == n:
            how = f"{REAL}: --data {data.source} ({n} sample{'s' if n != 1 else ''})"
        elif count:
            how = (f"{REAL} in {count} of {n} samples (--data {data.source}); the others: "
                   f"{_rule(spec, first_shapes[spec.name])} (synthetic)")
        else:
            how = f"{_rule(spec, first_shapes[spec.name])} (synthetic: not in --data)"
        infos.append(InputInfo(spec.name, spec.dtype.name, first_shapes[spec.name], how,
                               guessed.get(spec.name, []), False))
    return out, infos


def synthetic(infos: Sequence[InputInfo]) -> bool:
    """Were the verdicts reached on generated values only (no --data, no --input, no entry
    point's own example)?"""
    return not any(i.how.startswith((REAL, "given", "the entry point")) for i in infos
                   if i.value is None)
