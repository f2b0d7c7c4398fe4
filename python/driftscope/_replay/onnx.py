"""Replay for ONNX models (issue 26): graph surgery (driftscope._guard.surgery.onnx) run on the
guard's own ONNX backends.

The cut float32 model (the suffix after the substituted tensors, one node alone, the model with
intermediates exposed) is written to a file and handed to the backend's own ``load()``, so the
variant (onnxconverter-common's float16 conversion, quantize_dynamic, quantize_static, OpenVINO's
compilation) is built from the cut model exactly as the guard builds it from the whole one; a
backend that cannot build its variant of a cut raises :class:`CannotReplay` with its reason,
never a run on another backend. A substituted value is cast to the type the variant's graph
input takes there (float32 for every built-in backend: the float16 converter keeps graph inputs
float32 and casts them where they are read; the notes say so).

ort-qdq calibrates every variant it builds (the whole model and each cut) on the feeds being
replayed, with the reference's values at the cut inputs: a cut has inputs no guard sample holds,
and calibrating the whole model on other inputs would be another variant.

Tensor names are the ONNX Runtime recorder's (driftscope.recorders.onnxruntime): module paths
for a torch.onnx.export-ed graph's module outputs, names derived from node names for the rest.
A node's output k > 0 is ``NAME (output k)`` and the N-th value carrying a name ``NAME #N``,
exactly as `driftscope compare` prints the record (torch.identity); ``NAME:VALUE`` (VALUE: the
ONNX value name), ``NAME:k``, a raw ONNX value name and a node name are accepted too.

Sessions run in this process; the caller that needs a runtime crash contained (the CLI, the
guard) runs this in a child, as the guard runs its backends.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .mechanism import CannotReplay, OpInputs, Replayable, UnknownTensor

_ORT_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16,
              "tensor(double)": np.float64, "tensor(int64)": np.int64,
              "tensor(int32)": np.int32, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8,
              "tensor(bool)": np.bool_}


def _first_line(err: BaseException) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    return lines[0] if lines else type(err).__name__


def _digest(feeds: Mapping[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for k in sorted(feeds):
        a = np.ascontiguousarray(feeds[k])
        h.update(f"{k}|{a.dtype}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def _input_dtypes(session: Any) -> Dict[str, np.dtype]:
    """The element type each graph input of a loaded variant takes (ONNX Runtime, OpenVINO)."""
    ort = getattr(session, "session", None)
    if ort is not None and hasattr(ort, "get_inputs"):
        return {a.name: np.dtype(_ORT_TYPES[a.type]) for a in ort.get_inputs()
                if a.type in _ORT_TYPES}
    compiled = getattr(session, "compiled", None)
    found: Dict[str, np.dtype] = {}
    if compiled is not None:
        for port in compiled.inputs:
            try:
                found[port.get_any_name()] = np.dtype(port.get_element_type().to_dtype())
            except Exception:  # noqa: BLE001 - a type numpy has no dtype for: left as given
                pass
    return found


class OnnxReplayable(Replayable):
    """An ONNX model (a float32 .onnx file) on one of the guard's ONNX backends."""

    def __init__(self, model: str, backend: str = "ort", work: Optional[str] = None,
                 seed: int = 0) -> None:
        import onnx

        from .._guard.backends.registry import BACKENDS
        from .._guard.surgery.onnx import Surgeon
        from ..recorders.api import onnx_load_model, onnx_plan_names

        b = BACKENDS.get(backend)
        if b is None:
            raise CannotReplay(f"no backend named {backend!r}")
        if b.family != "onnx" and "onnx" not in b.also_runs:
            raise CannotReplay(f"backend {backend} does not run ONNX models")
        why = b.unavailable()
        if why:
            raise CannotReplay(f"{backend} cannot run here: {why}")
        self.backend, self._backend, self.seed = backend, b, seed
        self.model_path = os.fspath(model)
        proto, external_dir, _ = onnx_load_model(self.model_path)
        self._external = external_dir is not None
        if self._external:  # the cuts are written elsewhere: their weights travel in them
            proto = onnx.load(self.model_path)
        self.proto = proto
        self.surgeon = Surgeon(proto)
        self.notes: List[str] = []
        self._own_work = work is None
        self.work = tempfile.mkdtemp(prefix="driftscope-replay-") if work is None else work
        os.makedirs(self.work, exist_ok=True)
        self._sessions: Dict[Any, Any] = {}
        self._suffix_inputs: Dict[Any, List[str]] = {}
        self._order: List[str] = []
        self._names: Dict[str, str] = {}   # every accepted spelling -> ONNX value name
        self._display: Dict[str, str] = {}  # ONNX value name -> its name in tensors()
        from .torch import identity

        # A name that several values carry is told apart as the dump does: the writer's
        # occurrence counter per (name, output index), printed "NAME #N" by compare.
        seen: Dict[Tuple[str, int], int] = {}
        for e in onnx_plan_names(proto):
            if not e.names:
                continue
            spellings = []
            for n in e.names:
                occ = seen.get((n, e.role_index), 0)
                seen[(n, e.role_index)] = occ + 1
                spellings.append(identity(n, e.role_index, occ))
                if e.role_index and not occ:
                    spellings += [f"{n}:{e.tensor}", f"{n}:{e.role_index}"]
                elif not occ:
                    spellings.append(n)
            # The canonical name is what `driftscope compare` prints for the record.
            shown = spellings[0]
            self._order.append(shown)
            self._display[e.tensor] = shown
            for s in spellings:
                self._names.setdefault(s, e.tensor)
        self._outputs = [o.name for o in proto.graph.output]

    # -- names ----------------------------------------------------------------------------------

    def tensors(self) -> List[str]:
        return list(self._order)

    def outputs(self) -> List[str]:
        return list(self._outputs)

    def resolve(self, name: str) -> str:
        """The ONNX value name of a tensor named as a dump (or the graph) names it."""
        value = self._names.get(name)
        if value is None:
            s = self.surgeon
            if name in s.producer or name in s.input_names:
                value = name
            else:
                node = next((n for n in s.nodes if n.name == name and n.output), None) \
                    if name else None
                if node is not None and node.output[0]:
                    value = node.output[0]
        if value is None:
            try:
                self.surgeon.check(name)
            except UnknownTensor:
                import difflib

                near = difflib.get_close_matches(name, self._order, n=3)
                raise UnknownTensor(f"no tensor named {name!r} in the model"
                                    + (f" (nearest: {', '.join(near)})" if near else ""))
        self.surgeon.check(value)
        return value

    def _shown(self, value: str) -> str:
        return self._display.get(value, value)

    # -- building variants ----------------------------------------------------------------------

    def _calibrates(self) -> bool:
        from .._guard.backends.ortqdq import OrtQdqBackend

        return isinstance(self._backend, OrtQdqBackend)

    def _session(self, key: Any, proto: Any, what: str,
                 feeds: Mapping[str, np.ndarray]) -> Any:
        """The backend's variant of `proto` (None: the model file itself; a function: builds
        it), loaded once per key.
        `feeds`: what a calibrating backend calibrates on (the run being replayed)."""
        if self._calibrates():
            key = (key, _digest(feeds))
        got = self._sessions.get(key)
        if got is not None:
            return got
        import onnx

        folder = os.path.join(self.work, f"v{len(self._sessions)}")
        os.makedirs(folder, exist_ok=True)
        if callable(proto):  # built only when no session of it is cached
            proto = proto()
        if proto is None:
            path = self.model_path
        else:
            path = os.path.join(folder, "model.onnx")
            if self._external:
                onnx.save_model(proto, path, save_as_external_data=True,
                                location="model.onnx.data", size_threshold=1024)
            else:
                onnx.save_model(proto, path)
        if self._calibrates():
            from .._guard.backends.ortqdq import use_row_samples

            use_row_samples([dict(feeds)])
        try:
            session = self._backend.load(path, folder, self.seed)
        except Exception as err:  # noqa: BLE001 - the runtime's own message, one line
            raise CannotReplay(f"{self.backend} cannot build its variant of {what}: "
                               f"{_first_line(err)}") from None
        finally:
            if self._calibrates():
                use_row_samples(None)
        for note in getattr(session, "notes", []) or []:
            line = f"{what}: {note}"
            if line not in self.notes:
                self.notes.append(line)
        if self._calibrates():
            self._note(f"{self.backend} calibrated {what} on the replayed feeds (one sample; "
                       "cut inputs: the substituted values)")
        self._sessions[key] = session
        return session

    def _note(self, line: str) -> None:
        if line not in self.notes:
            self.notes.append(line)

    def _source_dtype(self, value: str, given: np.ndarray) -> np.dtype:
        from onnx import helper

        elem = self.surgeon.elem_type_of(value)
        try:
            return np.dtype(helper.tensor_dtype_to_np_dtype(elem)) if elem else given.dtype
        except Exception:  # noqa: BLE001 - bfloat16 and the like: as given
            return given.dtype

    def _feed(self, session: Any, feeds: Mapping[str, np.ndarray],
              substituted: Sequence[str]) -> Dict[str, np.ndarray]:
        """`feeds` cast to the types the variant's graph inputs take; a note per substituted
        tensor says which."""
        types = _input_dtypes(session)
        out: Dict[str, np.ndarray] = {}
        for k, v in feeds.items():
            v = np.asarray(v)
            want = types.get(k)
            if want is not None and v.dtype != want:
                v = v.astype(want)
            out[k] = v
            if k in substituted:
                how = f"substituted as {out[k].dtype}, the type {self.backend}'s variant of " \
                      "the cut model takes there"
                if getattr(self._backend, "precision", None) in ("float16", "bfloat16") and \
                        out[k].dtype == np.float32:
                    how += (f" (its {self._backend.precision} conversion keeps graph inputs "
                            f"float32 and converts them where they are read)")
                self._note(f"{self._shown(k)}: {how}")
        return out

    @staticmethod
    def _run(session: Any, feeds: Mapping[str, np.ndarray], what: str) -> Dict[str, np.ndarray]:
        try:
            return {k: np.asarray(v) for k, v in session.run(feeds).items()}
        except Exception as err:  # noqa: BLE001
            raise CannotReplay(f"the variant of {what} failed to run: {_first_line(err)}") \
                from None

    # -- the interface --------------------------------------------------------------------------

    def _capture_values(self, feeds: Mapping[str, np.ndarray],
                        values: Sequence[str]) -> Dict[str, np.ndarray]:
        """One run exposing ONNX values `values` (graph inputs are the feeds themselves)."""
        inner = [v for v in dict.fromkeys(values) if v not in self.surgeon.input_names]
        if inner:
            proto = self.surgeon.with_outputs(inner)
            session = self._session(("capture", tuple(inner)), proto,
                                    "the model with intermediate outputs", feeds)
        else:
            session = self._session(("whole",), None, "the model", feeds)
        got = self._run(session, self._feed(session, feeds, ()), "the model")
        for v in values:
            if v in self.surgeon.input_names:
                got[v] = np.asarray(feeds[v])
        return got

    def capture(self, feeds: Mapping[str, np.ndarray],
                names: Sequence[str]) -> Dict[str, np.ndarray]:
        values = [self.resolve(n) for n in names]
        got = self._capture_values(feeds, values)
        result = {n: got[v] for n, v in zip(names, values)}
        for o in self._outputs:
            result.setdefault(o, got[o])
        return result

    def run(self, feeds: Mapping[str, np.ndarray],
            replace: Mapping[str, np.ndarray] = {}) -> Dict[str, np.ndarray]:
        feeds = dict(feeds)
        cut: Dict[str, np.ndarray] = {}
        for name, v in replace.items():
            value = self.resolve(name)
            v = np.asarray(v)
            if value in self.surgeon.input_names:
                feeds[value] = v
            else:
                cut[value] = v.astype(self._source_dtype(value, v), copy=False)
        if not cut:
            session = self._session(("whole",), None, "the model", feeds)
            return self._run(session, self._feed(session, feeds, ()), "the model")
        order = sorted(cut)
        what = "the model cut at " + ", ".join(self._shown(c) for c in order)
        shapes = tuple((k, cut[k].shape) for k in order)
        # The cut is made once per set of cut tensors: a replay at the same tensors again (the
        # warm row of bench/bench_replay.py) costs the session's run, not the graph surgery.
        kept = self._suffix_inputs.get(shapes)
        proto: Any = lambda: self.surgeon.suffix(order, cut)  # noqa: E731
        if kept is None:
            proto = proto()
            kept = self._suffix_inputs[shapes] = [i.name for i in proto.graph.input]
        sub = {k: (cut[k] if k in cut else feeds[k]) for k in kept}
        session = self._session(("suffix", shapes), proto, what, sub)
        got = self._run(session, self._feed(session, sub, order), what)
        return {o: got[o] for o in self._outputs}

    def op_inputs(self, feeds: Mapping[str, np.ndarray], name: str) -> OpInputs:
        value = self.resolve(name)
        node = self.surgeon.node_of(value)
        run_inputs = self.surgeon.run_inputs(value)
        got = self._capture_values(feeds, run_inputs)
        listed = set(node.input)
        return OpInputs(args=[got.get(x) if x else None for x in node.input],
                        kwargs={x: got[x] for x in run_inputs if x not in listed},
                        names=list(node.input))

    def run_op(self, name: str, inputs: OpInputs) -> np.ndarray:
        value = self.resolve(name)
        node = self.surgeon.node_of(value)
        given: Dict[str, np.ndarray] = {}
        for x, a in zip(inputs.names, inputs.args):
            if x and a is not None:
                given[x] = np.asarray(a)
        given.update({k: np.asarray(v) for k, v in inputs.kwargs.items()})
        needed = self.surgeon.run_inputs(value)
        missing = [x for x in needed if x not in given]
        if missing:
            raise CannotReplay(f"no value for input {missing[0]!r} of node "
                               f"{node.name or value!r} (op replay needs every input it reads)")
        typed = {x: given[x].astype(self._source_dtype(x, given[x]), copy=False)
                 for x in needed}
        what = f"node {node.name or value} alone"
        key = ("op", id(node), tuple((x, typed[x].shape) for x in needed))
        session = self._session(key, lambda: self.surgeon.single_node(value, typed)[0], what,
                                typed)
        got = self._run(session, self._feed(session, typed, needed), what)
        return got[value]

    def record(self, feeds: Mapping[str, np.ndarray], path: str) -> None:
        """A dump of one plain run of this backend's variant of the whole model, recorded by
        the backend's own Session.record (the guard's recorder: ONNX Runtime's names, which
        tensors() follows); attribution compares two of them for the origins."""
        session = self._session(("whole",), None, "the model", feeds)
        try:
            session.record(self._feed(session, feeds, ()), path)
        except NotImplementedError:
            raise CannotReplay(f"{self.backend} cannot record its intermediate tensors") \
                from None

    def isolate(self, reference: "OnnxReplayable", feeds: Mapping[str, np.ndarray],
                limit: Optional[int], metric: Any) -> "Isolation":
        """The isolation scan's capability (isolation.py): every node of this candidate run
        alone on `reference`'s captured inputs, the first `limit` of them."""
        return isolate(reference, self, feeds, limit=limit, metric=metric)

    def close(self) -> None:
        self._sessions.clear()
        if self._own_work:
            shutil.rmtree(self.work, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Isolation: every node on the candidate, fed the reference's recorded inputs.


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """||got - want|| / ||want|| in float64 (inf where one is non-finite and the other is not
    at the same place; 0 for two equal arrays)."""
    a = np.asarray(got, np.float64).ravel()
    b = np.asarray(want, np.float64).ravel()
    if a.shape != b.shape:
        return float("inf")
    fa, fb = np.isfinite(a), np.isfinite(b)
    if np.any(fa != fb) or np.any(a[~fa] != b[~fb]):
        return float("inf")
    d = float(np.linalg.norm(a[fa] - b[fb]))
    n = float(np.linalg.norm(b[fb]))
    return d / n if n > 0 else (0.0 if d == 0 else float("inf"))


@dataclass
class IsolatedNode:
    name: str          # as tensors() names it
    op_type: str
    own: Optional[float]    # error of the node run alone on the reference's inputs
    plain: float            # its error in the candidate's plain run (inherited + own)
    reason: str = ""        # why `own` is None (CannotReplay)


@dataclass
class Isolation:
    rows: List[IsolatedNode] = field(default_factory=list)
    left_out: int = 0       # nodes past the limit, not replayed
    notes: List[str] = field(default_factory=list)


def isolate(reference: OnnxReplayable, candidate: OnnxReplayable,
            feeds: Mapping[str, np.ndarray], limit: Optional[int] = None,
            metric: Any = relative_error) -> Isolation:
    """Each node (in execution order, the first `limit` of them) run alone as a one-node model
    on the candidate with the reference's captured inputs: (own error, plain-run error) per
    node, both measured by `metric(candidate value, reference value)` against the reference's
    value. One session per node; two capture runs (reference, candidate) in all."""
    seen_nodes = set()
    targets: List[Tuple[str, str]] = []  # (display name, ONNX value), one per node
    # A port (--candidate-model): only the candidate's nodes whose name and inputs the
    # reference model has too can be fed the reference's values; the rest are said.
    theirs = reference.surgeon
    known = set(theirs.producer) | set(theirs.input_names)
    names = set(reference.tensors())
    unpaired: List[str] = []
    for shown in candidate.tensors():
        value = candidate.resolve(shown)
        i = candidate.surgeon.producer.get(value)
        if i is None or i in seen_nodes:
            continue
        seen_nodes.add(i)
        if shown not in names or value not in known or any(
                x not in known for x in candidate.surgeon.run_inputs(value)):
            unpaired.append(shown)
            continue
        targets.append((shown, value))
    cap = len(targets) if limit is None else max(0, int(limit))
    chosen, left = targets[:cap], max(0, len(targets) - cap)
    needed = {x for _, v in chosen for x in candidate.surgeon.run_inputs(v)}
    values = [v for _, v in chosen]
    ref = reference._capture_values(feeds, sorted(needed | set(values)))
    plain = candidate._capture_values(feeds, values)
    result = Isolation(left_out=left)
    for shown, value in chosen:
        node = candidate.surgeon.node_of(value)
        args = [ref.get(x) if x else None for x in node.input]
        extra = {x: ref[x] for x in candidate.surgeon.run_inputs(value) if x not in node.input}
        row = IsolatedNode(shown, node.op_type, None, metric(plain[value], ref[value]))
        try:
            own = candidate.run_op(value, OpInputs(args, extra, list(node.input)))
            row.own = metric(own, ref[value])
        except CannotReplay as err:
            row.reason = str(err)
        result.rows.append(row)
    if left:
        result.notes.append(f"{left} node(s) after the first {cap} were not run alone (limit)")
    if unpaired:
        result.notes.append(f"{len(unpaired)} node(s) of the candidate model not run alone: the "
                            f"reference model has no value of that name for them or their "
                            f"inputs ({', '.join(unpaired[:20])})")
    result.notes.extend(candidate.notes)
    return result


def replayable(model: str, backend: str, seed: int = 0, work: str = "",
               **_: Any) -> OnnxReplayable:
    """core.replayable's entry for .onnx files."""
    if not os.path.isfile(model):
        raise CannotReplay(f"{model}: no such model file")
    return OnnxReplayable(model, backend, work=work or None, seed=seed)
