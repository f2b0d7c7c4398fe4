"""Replay for .tflite models (issue 26): flatbuffer surgery (driftscope._guard.surgery.tflite)
run on the guard's LiteRT backends (`litert`: default kernels + XNNPACK, `litert-ref`: reference
kernels) and on any backend whose load() takes a .tflite file.

Every piece (the suffix after the substituted tensors, one operator alone, the prefix that
exposes intermediates) is written to a file and handed to the backend's own ``load()``, so the
candidate builds it as the guard builds the whole model (XNNPACK takes the piece's nodes as it
takes the model's); a cut surgery refuses (a custom op, control flow, a resource variable) is
:class:`CannotReplay` with surgery's sentence, never a run on another backend.

Values cross the interface as float arrays: a quantized tensor is handed out dequantized with
its own scale and zero point (what the integers stand for, as the guard judges them), and a
value substituted at a quantized tensor is quantized back with that tensor's scale and zero point
(exact for a value that came from the same tensor on another LiteRT backend: the integers
round-trip); the notes say so per tensor.

Tensor names are the LiteRT recorder's (driftscope.litert.record): an operator output's tensor
name up to its first ";" (converter-fused names), ``op_type_K`` (``:J`` for output J > 0) for an
unnamed one, ``NAME#N`` for the N-th repeat of a name, in model order; the model's inputs by
their tensor names. The raw tensor name is accepted too where it is unique.
"""

from __future__ import annotations

import difflib
import os
import shutil
import tempfile
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .mechanism import CannotReplay, OpInputs, Replayable, UnknownTensor

_NUMPY = {"FLOAT32": np.float32, "FLOAT16": np.float16, "FLOAT64": np.float64,
          "INT8": np.int8, "UINT8": np.uint8, "INT16": np.int16, "UINT16": np.uint16,
          "INT32": np.int32, "UINT32": np.uint32, "INT64": np.int64, "BOOL": np.bool_}


# Ops that keep state between invocations (surgery refuses them too).
_STATE_OPS = frozenset({"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE"})


def _first_line(err: BaseException) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    return lines[0] if lines else type(err).__name__


def recorder_names(g: Any) -> List[Tuple[str, int, int]]:
    """(name, tensor index, operator index) of every operator output in model order, named as
    the LiteRT recorder names them (its _display_name and _plan_reads' repeat rule)."""
    out: List[Tuple[str, int, int]] = []
    used: Dict[str, int] = {}
    for k, op in enumerate(g.operators):
        kind = g.op_types[k]
        for j, t in enumerate(int(x) for x in (op.outputs if op.outputs is not None else ())):
            if t < 0:
                continue
            first = g.name(t).split(";", 1)[0].strip()
            name = first or f"{kind.lower()}_{k}" + (f":{j}" if j else "")
            if name in used:
                used[name] += 1
                name = f"{name}#{used[name] - 1}"
            else:
                used[name] = 1
            out.append((name, t, k))
    return out


class _Refused(CannotReplay):
    """A piece surgery refuses to cut."""


class TfliteReplayable(Replayable):
    """A .tflite model on one backend that loads .tflite files."""

    def __init__(self, model: str, backend: str = "litert", work: Optional[str] = None,
                 seed: int = 0) -> None:
        from .._guard.backends.registry import BACKENDS
        from .._guard.surgery import tflite as cut

        b = BACKENDS.get(backend)
        if b is None:
            raise CannotReplay(f"no backend named {backend!r}")
        if b.family != "tflite" and "tflite" not in getattr(b, "also_runs", ()):
            raise CannotReplay(f"backend {backend} does not run .tflite models")
        why = b.unavailable()
        if why:
            raise CannotReplay(f"{backend} cannot run here: {why}")
        self.backend, self._backend, self.seed = backend, b, seed
        self.model_path = os.fspath(model)
        self._cut = cut
        try:
            self.g = cut.load(self.model_path)
        except (cut.CutRefused, OSError) as err:
            raise CannotReplay(f"cannot read {self.model_path}: {_first_line(err)}") from None
        self.notes: List[str] = []
        self._own_work = work is None
        self.work = tempfile.mkdtemp(prefix="driftscope-replay-") if work is None else work
        os.makedirs(self.work, exist_ok=True)
        self._sessions: Dict[Any, Any] = {}
        g = self.g
        self._order: List[str] = []
        self._index: Dict[str, int] = {}     # every accepted spelling -> tensor index
        self._shown: Dict[int, str] = {}     # tensor index -> its name in tensors()
        self._op: Dict[int, int] = {}        # tensor index -> producing operator
        for t in g.inputs:
            n = g.name(t)
            self._index.setdefault(n, t)
            self._shown.setdefault(t, n)
        for name, t, k in recorder_names(g):
            self._order.append(name)
            self._index[name] = t
            self._shown[t] = name
            self._op[t] = k
        for raw, found in g.by_name.items():
            if len(found) == 1 and raw:
                self._index.setdefault(raw, found[0])
        self._outputs = [self._shown.get(t, g.name(t)) for t in g.outputs]
        self._stateful = any(kind in _STATE_OPS for kind in g.op_types) or \
            any(t.isVariable for t in g.tensors)

    # -- names ----------------------------------------------------------------------------------

    def tensors(self) -> List[str]:
        return list(self._order)

    def outputs(self) -> List[str]:
        return list(self._outputs)

    def resolve(self, name: str) -> int:
        """The tensor index of a tensor named as the recorder (or the flatbuffer) names it."""
        t = self._index.get(name)
        if t is None:
            near = difflib.get_close_matches(name, self._order, n=3)
            raise UnknownTensor(f"no tensor named {name!r} in the model"
                                + (f" (nearest: {', '.join(near)})" if near else ""))
        return t

    # -- pieces ---------------------------------------------------------------------------------

    def _piece(self, key: Any, make: Any, what: str) -> Tuple[Any, Any]:
        """(session, piece) of the piece `make()` builds, loaded once per key on this backend."""
        got = self._sessions.get(key)
        if got is not None:
            return got
        try:
            piece = make()
        except self._cut.CutRefused as err:
            why = str(err).replace("cannot cut here: ", "", 1)
            raise _Refused(f"{what} cannot be cut: {why}") from None
        folder = os.path.join(self.work, f"p{len(self._sessions)}")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "piece.tflite")
        with open(path, "wb") as f:
            f.write(piece.data)
        try:
            session = self._backend.load(path, folder, self.seed)
        except Exception as err:  # noqa: BLE001 - the runtime's own message, one line
            raise CannotReplay(f"{self.backend} cannot load {what}: {_first_line(err)}") \
                from None
        for note in getattr(session, "notes", []) or []:
            self._note(f"{what}: {note}")
        self._sessions[key] = (session, piece)
        return session, piece

    def _whole(self) -> Any:
        got = self._sessions.get(("whole",))
        if got is None or self._stateful:
            # A model with resource variables changes its state at every invoke: each run
            # starts from a fresh load, as the guard's does.
            try:
                session = self._backend.load(self.model_path, self.work, self.seed)
            except Exception as err:  # noqa: BLE001
                raise CannotReplay(f"{self.backend} cannot load the model: "
                                   f"{_first_line(err)}") from None
            got = self._sessions[("whole",)] = (session, None)
        return got[0]

    def _note(self, line: str) -> None:
        if line not in self.notes:
            self.notes.append(line)

    def _encode(self, t: int, v: np.ndarray, note: bool) -> np.ndarray:
        """A float value for tensor t in the type the piece's input takes: quantized with the
        tensor's own scale and zero point where it is quantized."""
        g = self.g
        kind = g.type_names[t]
        want = _NUMPY.get(kind)
        if want is None:
            raise CannotReplay(f"tensor {self._shown.get(t, g.name(t))!r} is {kind}, which "
                               "replay cannot substitute")
        v = np.asarray(v)
        q = g.tensors[t].quantization
        scales = list(q.scale) if q is not None and q.scale is not None else []
        shown = self._shown.get(t, g.name(t))
        if np.dtype(want).kind in "iu" and scales and v.dtype.kind == "f":
            if len(scales) != 1:
                raise CannotReplay(f"tensor {shown!r} is quantized per channel ({len(scales)} "
                                   "scales), which replay does not substitute")
            zero = int(q.zeroPoint[0]) if q.zeroPoint is not None and len(q.zeroPoint) else 0
            info = np.iinfo(want)
            out = np.clip(np.round(np.asarray(v, np.float64) / scales[0]) + zero,
                          info.min, info.max).astype(want)
            if note:
                self._note(f"{shown}: substituted as {np.dtype(want).name}, quantized with "
                           f"the tensor's scale {scales[0]:.9g} and zero point {zero}")
            return out
        if v.dtype != np.dtype(want):
            if note:
                self._note(f"{shown}: substituted as {np.dtype(want).name}, the tensor's type "
                           "in the model")
            return v.astype(want)
        return v

    @staticmethod
    def _run(session: Any, feeds: Mapping[str, np.ndarray], what: str) -> Dict[str, np.ndarray]:
        try:
            return {k: np.asarray(v) for k, v in session.run(feeds).items()}
        except Exception as err:  # noqa: BLE001
            raise CannotReplay(f"{what} failed to run: {_first_line(err)}") from None

    def _feeds(self, feeds: Mapping[str, np.ndarray], given: Mapping[int, np.ndarray],
               piece: Any, noted: Sequence[int]) -> Dict[str, np.ndarray]:
        """The piece's inputs by tensor name: substituted tensors from `given` (encoded), the
        model's inputs from `feeds`."""
        g = self.g
        out: Dict[str, np.ndarray] = {}
        for name in piece.inputs:
            t = g.index(name)
            if t in given:
                out[name] = self._encode(t, given[t], t in noted)
            else:
                v = feeds.get(name, feeds.get(self._shown.get(t, name)))
                if v is None:
                    raise CannotReplay(f"no value for input {name!r} of the piece")
                out[name] = np.asarray(v)
        return out

    def _model_feeds(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        names = [self.g.name(t) for t in self.g.inputs]
        # Samples named by the model's signature go by position (a piece has no SignatureDef).
        if not all(n in feeds for n in names) and len(feeds) == len(names):
            return dict(zip(names, feeds.values()))
        return dict(feeds)

    def _capture_indices(self, feeds: Mapping[str, np.ndarray],
                         ts: Sequence[int]) -> Dict[int, np.ndarray]:
        """Tensor values of one run of this backend: the model inputs from `feeds`, the others
        from one prefix piece whose outputs they are (a whole model under XNNPACK keeps no
        intermediates)."""
        g = self.g
        feeds = self._model_feeds(feeds)
        got: Dict[int, np.ndarray] = {}
        inner = [t for t in dict.fromkeys(ts) if t not in g.inputs]
        for t in ts:
            if t in g.inputs:
                got[t] = np.asarray(feeds[g.name(t)])
        if inner:
            what = "the prefix ending at " + ", ".join(self._shown[t] for t in inner[:3]) + \
                (" ..." if len(inner) > 3 else "")
            try:
                session, piece = self._piece(("prefix", tuple(inner)),
                                             lambda: self._cut.middle(g, g.inputs, inner), what)
            except _Refused as err:
                got.update(self._recorded(feeds, inner, str(err)))
                return got
            values = self._run(session, self._feeds(feeds, {}, piece, ()), what)
            for name in piece.outputs:
                got[g.index(name)] = values[name]
        return got

    def _recorded(self, feeds: Mapping[str, np.ndarray], ts: Sequence[int],
                  why: str) -> Dict[int, np.ndarray]:
        """Tensor values from one recorded run of the whole model on this backend (the
        backend's own record(): driftscope.litert.record on its kernels), where no prefix can
        be cut (a streaming model's resource variables)."""
        import driftscope

        session = self._whole()
        path = os.path.join(self.work, f"capture{len(self.notes)}.tdump")
        try:
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                session.record(feeds, path)
        except NotImplementedError:
            raise CannotReplay(f"{why}; and {self.backend} cannot record the whole model") \
                from None
        except Exception as err:  # noqa: BLE001
            raise CannotReplay(f"{why}; and recording the whole model on {self.backend} "
                               f"failed: {_first_line(err)}") from None
        self._note(f"values captured from a recording of the whole model on {self.backend} "
                   f"({why[0].lower() + why[1:]})")
        got: Dict[int, np.ndarray] = {}
        with driftscope.open(path) as dump:
            for t in ts:
                name = self._shown[t]
                quantized = np.dtype(_NUMPY.get(self.g.type_names[t], np.float32)).kind in "iu"
                v = dump.get(name, dtype="float64" if quantized else "", default=None)
                if v is None:
                    raise CannotReplay(f"{why}; and the recording on {self.backend} holds no "
                                       f"value of {name!r}")
                got[t] = np.array(v)
        os.unlink(path)
        return got

    def record(self, feeds: Mapping[str, np.ndarray], path: str) -> None:
        """A dump of one plain run of the whole model on this backend, recorded by the backend's
        own Session.record (driftscope.litert.record's names, which tensors() follows):
        attribution compares two of them for compare's origins."""
        import warnings

        session = self._whole()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                session.record(self._model_feeds(feeds), path)
        except NotImplementedError:
            raise CannotReplay(f"{self.backend} cannot record its intermediate tensors") from None

    # -- the interface --------------------------------------------------------------------------

    def capture(self, feeds: Mapping[str, np.ndarray],
                names: Sequence[str]) -> Dict[str, np.ndarray]:
        idx = [self.resolve(n) for n in names]
        got = self._capture_indices(feeds, idx)
        result = {n: got[t] for n, t in zip(names, idx)}
        whole = self.run(feeds)
        for o in self._outputs:
            result.setdefault(o, whole[o])
        return result

    def run(self, feeds: Mapping[str, np.ndarray],
            replace: Mapping[str, np.ndarray] = {}) -> Dict[str, np.ndarray]:
        g = self.g
        feeds = self._model_feeds(feeds)
        given: Dict[int, np.ndarray] = {}
        for name, v in replace.items():
            t = self.resolve(name)
            if t in g.inputs:
                feeds[g.name(t)] = np.asarray(v)
            else:
                given[t] = np.asarray(v)
        if not given:
            session = self._whole()
            got = self._run(session, feeds, "the model")
            return {self._shown.get(t, g.name(t)): got[g.name(t)] for t in g.outputs}
        order = sorted(given)
        what = "the model cut at " + ", ".join(self._shown[t] for t in order)
        session, piece = self._piece(("suffix", tuple(order)),
                                     lambda: self._cut.middle(g, order, g.outputs), what)
        got = self._run(session, self._feeds(feeds, given, piece, order), what)
        out: Dict[str, np.ndarray] = {}
        for t in g.outputs:
            name = g.name(t)
            # An output the cut itself gives (replaced at an output): the piece passes it on.
            out[self._shown.get(t, name)] = got[name] if name in got else given[t]
        return out

    def _op_of(self, name: str) -> Tuple[int, int]:
        t = self.resolve(name)
        k = self._op.get(t)
        if k is None:
            raise CannotReplay(f"{name!r} is a model input, which no operator produces")
        return t, k

    def op_inputs(self, feeds: Mapping[str, np.ndarray], name: str) -> OpInputs:
        t, k = self._op_of(name)
        g = self.g
        ins = [int(x) for x in g.operators[k].inputs]
        read = [x for x in ins if x >= 0 and not g.constant(x)]
        got = self._capture_indices(feeds, read)
        return OpInputs(args=[got.get(x) if x >= 0 and x in got else None for x in ins],
                        names=[self._shown.get(x, g.name(x)) if x >= 0 else "" for x in ins])

    def run_op(self, name: str, inputs: OpInputs) -> np.ndarray:
        t, k = self._op_of(name)
        g = self.g
        given: Dict[int, np.ndarray] = {}
        for n, a in zip(inputs.names, inputs.args):
            if n and a is not None:
                x = self._index.get(n)
                if x is not None:
                    given[x] = np.asarray(a)
        for n, a in inputs.kwargs.items():
            x = self._index.get(n)
            if x is not None:
                given[x] = np.asarray(a)
        what = f"op {k} ({g.op_types[k]}) alone"
        session, piece = self._piece(("op", k), lambda: self._cut.one_op(g, k), what)
        missing = [n for n in piece.inputs if g.index(n) not in given]
        if missing:
            raise CannotReplay(f"no value for input {missing[0]!r} of {what} (op replay needs "
                               "every input it reads)")
        got = self._run(session, self._feeds({}, given, piece, list(given)), what)
        return got[g.name(t)]

    def close(self) -> None:
        self._sessions.clear()
        if self._own_work:
            shutil.rmtree(self.work, ignore_errors=True)


def replayable(model: str, backend: str, seed: int = 0, work: str = "",
               **_: Any) -> TfliteReplayable:
    """The factory core.replayable() calls for a .tflite model."""
    return TfliteReplayable(model, backend, work=work or None, seed=seed)
