"""Cut a .tflite model into pieces at named tensors.

    from driftscope._guard.surgery import tflite as cut
    head = cut.prefix("model.tflite", ["dwconv"])     # the cut tensors become its outputs
    tail = cut.suffix("model.tflite", ["dwconv"])     # ... and the inputs of the rest
    mid = cut.middle("model.tflite", ["conv1"], ["pool"])
    one = cut.one_op("model.tflite", 2)
    head = cut.cut_after("model.tflite", 3)           # outputs: what ops 0..3 hand on

Each returns a Piece: the flatbuffer of a model (`bytes(piece)`), the names of its inputs and
outputs, and the indices of the source's operators it holds. A piece is a model of its own: the
main subgraph's operators that compute its outputs from its inputs, in the source's order (the
order LiteRT runs them), each tensor with its shape, shape signature, type and quantization
parameters as they were, the weights it reads and no others (unused buffers and operator codes
are dropped). Tensor names are kept, so a piece's outputs feed the next piece's inputs by name,
and pieces chained on the same kernels give the whole model's values bit for bit.

The flatbuffer is read and written with the object API of the schema LiteRT itself ships
(ai_edge_litert.schema_py_generated: ModelT unpacked from the file, packed back), so every
field the schema knows survives a cut, including ones this module never looks at.

Cuts it cannot honour are refused with CutRefused and one sentence: a piece that would hold a
custom op (its kernel is not LiteRT's), a control-flow op (WHILE, IF, CALL_ONCE, StableHLO
regions: they run other subgraphs, and a piece is one subgraph), a resource variable or a
variable tensor (state kept between invocations, which a piece cannot carry in or out), or
weights stored outside the flatbuffer. A model with several subgraphs is cut in its main one
(subgraph 0, what the guard runs); pieces whose operators call no other subgraph are honoured.
cut_after_refused cuts around refused operators: the values they hand on (a variable's read)
become inputs of the piece, for the caller to feed from a run of the whole model.
"""

from __future__ import annotations

import copy
import numbers
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple, Union

__all__ = ["CutRefused", "Graph", "Piece", "load", "prefix", "suffix", "middle", "one_op",
           "cut_after", "cut_after_refused", "frontier", "refusal"]

# Ops that read or write state kept between invocations.
_VARIABLE_OPS = frozenset({"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "HASHTABLE",
                           "HASHTABLE_FIND", "HASHTABLE_IMPORT", "HASHTABLE_SIZE"})
# Ops that run other subgraphs (the options of most also name them: see _calls).
_CONTROL_FLOW = frozenset({"WHILE", "IF", "CALL_ONCE", "CALL", "STABLEHLO_WHILE",
                           "STABLEHLO_CASE", "STABLEHLO_COMPOSITE", "STABLEHLO_REDUCE",
                           "STABLEHLO_REDUCE_WINDOW", "STABLEHLO_SCATTER", "STABLEHLO_SORT",
                           "REDUCE_WINDOW"})
_STATE_TYPES = ("RESOURCE", "VARIANT")

TensorRef = Union[str, int]


class CutRefused(ValueError):
    """A cut this module cannot honour; the message is one sentence saying why."""


def _schema() -> Any:
    from ai_edge_litert import schema_py_generated as s

    return s


def _names(enum: Any) -> Dict[int, str]:
    return {v: k for k, v in vars(enum).items() if not k.startswith("_") and isinstance(v, int)}


@dataclass
class Piece:
    data: bytes
    inputs: List[str]
    outputs: List[str]
    ops: List[int] = field(default_factory=list)  # the source's operator indices, in order

    def __bytes__(self) -> bytes:
        return self.data


class Graph:
    """A parsed model and what surgery needs to know about its main subgraph."""

    def __init__(self, model: Any) -> None:
        s = _schema()
        data = _read(model)
        if len(data) < 8 or data[4:8] != b"TFL3":
            raise CutRefused(f"not a TFLite flatbuffer (file identifier {bytes(data[4:8])!r} "
                             "at offset 4, expected b'TFL3')")
        try:
            self.model = s.ModelT.InitFromPackedBuf(data, 0)
        except Exception as err:  # a truncated or corrupt flatbuffer
            raise CutRefused(f"the flatbuffer cannot be read: {err}") from None
        if not self.model.subgraphs:
            raise CutRefused("the model has no subgraph")
        self.sg = self.model.subgraphs[0]
        self.tensors = list(self.sg.tensors or [])
        self.operators = list(self.sg.operators or [])
        codes = _names(s.BuiltinOperator)
        self.op_types: List[str] = []
        for op in self.operators:
            oc = self.model.operatorCodes[op.opcodeIndex]
            code = max(oc.builtinCode, oc.deprecatedBuiltinCode)
            name = codes.get(code, f"builtin {code}")
            if name == "CUSTOM" or oc.customCode:
                name = f"CUSTOM:{_text(oc.customCode)}"
            self.op_types.append(name)
        types = _names(s.TensorType)
        self.type_names = [types.get(t.type, f"type {t.type}") for t in self.tensors]
        self.producer: Dict[int, int] = {}
        for k, op in enumerate(self.operators):
            for o in op.outputs if op.outputs is not None else ():
                if o >= 0:
                    self.producer[o] = k
        self.inputs = [int(i) for i in (self.sg.inputs if self.sg.inputs is not None else ())]
        self.outputs = [int(i) for i in (self.sg.outputs if self.sg.outputs is not None else ())]
        self.by_name: Dict[str, List[int]] = {}
        for i, t in enumerate(self.tensors):
            self.by_name.setdefault(_text(t.name), []).append(i)

    def name(self, t: int) -> str:
        return _text(self.tensors[t].name)

    def constant(self, t: int) -> bool:
        b = self.tensors[t].buffer
        if not 0 < b < len(self.model.buffers or []):
            return False
        buf = self.model.buffers[b]
        return (buf.data is not None and len(buf.data) > 0) or buf.offset > 1

    def index(self, ref: TensorRef) -> int:
        if isinstance(ref, numbers.Integral) and not isinstance(ref, bool):
            ref = int(ref)
            if not 0 <= ref < len(self.tensors):
                raise CutRefused(f"tensor index {ref} is outside the main subgraph's "
                                 f"{len(self.tensors)} tensors")
            return ref
        found = self.by_name.get(str(ref), [])
        if not found:
            raise CutRefused(f"the main subgraph has no tensor named {str(ref)!r}")
        if len(found) > 1:
            raise CutRefused(f"{len(found)} tensors are named {str(ref)!r} (indices "
                             f"{', '.join(map(str, found))}): give the cut by index")
        return found[0]

    def op_label(self, k: int) -> str:
        outs = [self.name(o) for o in self.operators[k].outputs if o >= 0]
        return f"op {k} ({self.op_types[k]}{', output ' + repr(outs[0]) if outs else ''})"


def _text(v: Any) -> str:
    if v is None:
        return ""
    return v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else str(v)


def _read(model: Any) -> bytes:
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    with open(os.fspath(model), "rb") as f:
        return f.read()


def load(model: Any) -> Graph:
    """A model (path, bytes or an already loaded Graph) as a Graph."""
    return model if isinstance(model, Graph) else Graph(model)


def _calls(op: Any) -> List[int]:
    """The subgraphs an operator's options name (WHILE's cond and body, IF's branches, ...)."""
    out: List[int] = []
    for opts in (op.builtinOptions, op.builtinOptions2):
        if opts is None:
            continue
        for key, v in vars(opts).items():
            if "subgraphindex" in key.lower():
                out.extend(v if isinstance(v, (list, tuple)) else [v])
    return [int(x) for x in out if x is not None]


def refusal(model: Any, k: int) -> Optional[str]:
    """Why operator k cannot be in a piece (one sentence), or None."""
    g = load(model)
    op, kind = g.operators[k], g.op_types[k]
    where = g.op_label(k)
    if kind.startswith("CUSTOM:"):
        return (f"{where} is the custom op {kind[7:]!r}, whose kernel is not LiteRT's: a "
                "piece holding it may not load where the whole model does")
    calls = _calls(op)
    if kind in _CONTROL_FLOW or calls:
        called = f" runs subgraph(s) {', '.join(map(str, calls))}" if calls else " is control flow"
        return f"{where}{called}, and a piece is the main subgraph alone"
    if kind in _VARIABLE_OPS:
        return (f"{where} reads or writes a resource variable, state kept between invocations "
                "that a piece cannot carry")
    for t in list(op.inputs if op.inputs is not None else ()) + \
            list(op.outputs if op.outputs is not None else ()):
        if t < 0:
            continue
        if g.type_names[t] in _STATE_TYPES:
            return (f"{where} uses {g.type_names[t]} tensor {g.name(t)!r}, state that a piece "
                    "cannot carry")
        if g.tensors[t].isVariable:
            return (f"{where} uses variable tensor {g.name(t)!r}, state kept between "
                    "invocations that a piece cannot carry")
        b = g.tensors[t].buffer
        if 0 < b < len(g.model.buffers or []) and g.model.buffers[b].offset > 1:
            return (f"{where} reads {g.name(t)!r}, whose data is stored outside the flatbuffer "
                    f"(offset {g.model.buffers[b].offset}), which surgery does not copy")
        if getattr(g.tensors[t], "externalBuffer", 0):
            return (f"{where} reads {g.name(t)!r}, whose data is in an external buffer, which "
                    "surgery does not copy")
    return None


def middle(model: Any, inputs: Sequence[TensorRef], outputs: Sequence[TensorRef]) -> Piece:
    """The piece that computes `outputs` from `inputs`: the operators between them (walking up
    from the outputs, stopping at the inputs). A model input it still needs becomes one of its
    inputs too (after the given ones); a given input that no kept operator reads is left out."""
    g = load(model)
    ins = list(dict.fromkeys(g.index(t) for t in inputs))
    outs = list(dict.fromkeys(g.index(t) for t in outputs))
    if not outs:
        raise CutRefused("a piece needs at least one output")
    for t in ins + outs:
        if g.constant(t):
            raise CutRefused(f"tensor {g.name(t)!r} is a constant (weights), not a value to cut at")
    given = set(ins)
    keep: Set[int] = set()
    extra: List[int] = []
    stack = [t for t in outs if t not in given]
    seen: Set[int] = set()
    while stack:
        t = stack.pop()
        if t in seen or t < 0:
            continue
        seen.add(t)
        if t in given or g.constant(t):
            continue
        k = g.producer.get(t)
        if k is None:
            if t in g.inputs:
                extra.append(t)
                continue
            raise CutRefused(f"tensor {g.name(t)!r} has no producer and is neither a model "
                             "input nor a constant, so no piece can compute it")
        if k in keep:
            continue
        keep.add(k)
        op = g.operators[k]
        stack.extend(x for x in list(op.inputs if op.inputs is not None else ())
                     + list(op.intermediates if op.intermediates is not None else ()) if x >= 0)
    order = sorted(keep)
    for k in order:
        why = refusal(g, k)
        if why is not None:
            raise CutRefused(f"cannot cut here: {why}")
    read: Set[int] = set()
    for k in order:
        op = g.operators[k]
        read.update(x for x in (op.inputs if op.inputs is not None else ()) if x >= 0)
    piece_inputs = [t for t in ins if t in read or t in outs] + \
        [t for t in g.inputs if t in extra and t not in ins]
    return _build(g, order, piece_inputs, outs)


def prefix(model: Any, tensors: Sequence[TensorRef]) -> Piece:
    """The model up to `tensors`, which become its outputs; its inputs are the model inputs
    they need."""
    g = load(model)
    return middle(g, g.inputs, tensors)


def suffix(model: Any, tensors: Sequence[TensorRef]) -> Piece:
    """The model after `tensors`, which become its inputs; its outputs are the model's."""
    g = load(model)
    return middle(g, tensors, g.outputs)


def one_op(model: Any, op_index: int) -> Piece:
    """Operator `op_index` alone: its non-constant inputs are the piece's inputs, its outputs
    the piece's outputs."""
    g = load(model)
    if not 0 <= op_index < len(g.operators):
        raise CutRefused(f"operator index {op_index} is outside the main subgraph's "
                         f"{len(g.operators)} operators")
    why = refusal(g, op_index)
    if why is not None:
        raise CutRefused(f"cannot cut here: {why}")
    op = g.operators[op_index]
    ins = [t for t in op.inputs if t >= 0 and not g.constant(t)]
    outs = [t for t in op.outputs if t >= 0]
    return middle(g, ins, outs)


def frontier(model: Any, k: int) -> List[int]:
    """The tensors operators 0..k compute that a later operator or the model's output reads:
    what a cut after operator k must hand on."""
    g = load(model)
    later: Set[int] = set(g.outputs)
    for op in g.operators[k + 1:]:
        later.update(x for x in op.inputs if x >= 0)
    out: List[int] = []
    for op in g.operators[:k + 1]:
        out.extend(int(o) for o in op.outputs if o >= 0 and o in later and o not in out)
    return out


def cut_after(model: Any, k: int) -> Piece:
    """The prefix cut after operator k (model order): its outputs are frontier(k). Refused when
    one of operators 0..k cannot be in a piece, even one nothing after the cut reads (a
    CALL_ONCE, an ASSIGN_VARIABLE): the prefix stands for running the model up to k."""
    g = load(model)
    if not 0 <= k < len(g.operators):
        raise CutRefused(f"operator index {k} is outside the main subgraph's "
                         f"{len(g.operators)} operators")
    for j in range(k + 1):
        why = refusal(g, j)
        if why is not None:
            raise CutRefused(f"cannot cut here: {why}")
    return prefix(g, frontier(g, k))


def cut_after_refused(model: Any, k: int) -> Piece:
    """The cut after operator k of a model some of whose operators are refused (a streaming
    model's CALL_ONCE and resource variables): the values refused operators among 0..k hand on
    (a variable's read) become inputs of the piece, to be fed from a run of the whole model;
    its outputs are frontier(k) less those. Refused when operator k itself is, or when nothing
    but such values crosses the cut."""
    g = load(model)
    if not 0 <= k < len(g.operators):
        raise CutRefused(f"operator index {k} is outside the main subgraph's "
                         f"{len(g.operators)} operators")
    why = refusal(g, k)
    if why is not None:
        raise CutRefused(f"cannot cut here: {why}")
    given: List[int] = []
    handed: Set[int] = set()
    for j in range(k + 1):
        if refusal(g, j) is not None:
            handed.update(int(o) for o in g.operators[j].outputs if o >= 0)
            given.extend(int(o) for o in g.operators[j].outputs
                         if o >= 0 and g.type_names[o] not in _STATE_TYPES)
    outs = [t for t in frontier(g, k) if t not in handed]
    if not outs:
        raise CutRefused(f"cannot cut here: only values of refused operators cross the cut "
                         f"after {g.op_label(k)}")
    return middle(g, list(g.inputs) + given, outs)


def _build(g: Graph, order: List[int], inputs: List[int], outputs: List[int]) -> Piece:
    import flatbuffers

    s = _schema()
    used: List[int] = []
    for k in order:
        op = g.operators[k]
        for x in list(op.inputs) + list(op.outputs) + list(op.intermediates or ()):
            if x >= 0:
                used.append(x)
    used.extend(inputs)
    used.extend(outputs)
    tmap = {t: i for i, t in enumerate(dict.fromkeys(sorted(set(used))))}
    old_buffers = list(g.model.buffers or [])
    bmap: Dict[int, int] = {0: 0}
    buffers: List[Any] = [old_buffers[0] if old_buffers else s.BufferT()]

    def buffer(b: int) -> int:
        if b not in bmap:
            bmap[b] = len(buffers)
            buffers.append(old_buffers[b])
        return bmap[b]

    tensors = []
    for t in tmap:
        nt = copy.copy(g.tensors[t])
        if 0 < nt.buffer < len(old_buffers):
            nt.buffer = buffer(nt.buffer)
        else:
            nt.buffer = 0
        tensors.append(nt)
    cmap: Dict[int, int] = {}
    codes: List[Any] = []
    ops = []
    for k in order:
        op = copy.copy(g.operators[k])
        if op.opcodeIndex not in cmap:
            cmap[op.opcodeIndex] = len(codes)
            codes.append(g.model.operatorCodes[op.opcodeIndex])
        op.opcodeIndex = cmap[op.opcodeIndex]
        op.inputs = [tmap[x] if x >= 0 else x for x in op.inputs]
        op.outputs = [tmap[x] if x >= 0 else x for x in op.outputs]
        if op.intermediates is not None:
            op.intermediates = [tmap[x] if x >= 0 else x for x in op.intermediates]
        # Debug metadata indexes the source's tables, which a piece does not carry.
        if hasattr(op, "debugMetadataIndex"):
            op.debugMetadataIndex = -1
        ops.append(op)
    sg = copy.copy(g.sg)
    sg.tensors, sg.operators = tensors, ops
    sg.inputs = [tmap[t] for t in inputs]
    sg.outputs = [tmap[t] for t in outputs]
    m = copy.copy(g.model)
    m.subgraphs = [sg]
    m.operatorCodes = codes
    # Metadata (min_runtime_version, conversion metadata) keeps its buffers; signatures index
    # the source's tensors and are dropped (a piece's inputs and outputs go by tensor name).
    if m.metadata:
        meta = []
        for md in m.metadata:
            md = copy.copy(md)
            if 0 < md.buffer < len(old_buffers):
                md.buffer = buffer(md.buffer)
            meta.append(md)
        m.metadata = meta
    if m.metadataBuffer is not None:
        m.metadataBuffer = [buffer(b) for b in m.metadataBuffer if 0 < b < len(old_buffers)]
    m.signatureDefs = None
    m.buffers = buffers
    fb = flatbuffers.Builder(1024)
    fb.Finish(m.Pack(fb), file_identifier=b"TFL3")
    return Piece(bytes(fb.Output()), [g.name(t) for t in inputs], [g.name(t) for t in outputs],
                 list(order))
