"""The ONNX Runtime backends (ort, ort-noopt, ort-fp16, ort-int8, ort-cuda): the model as is, as
float16 (onnxconverter-common plus driftscope.onnxruntime.to_float16's loading fixes) or as
dynamic INT8; the fallback's recipes and the proofs that a kept node runs in float32.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .base import Backend, Session, _gpu_device, _missing


class _OrtSession(Session):
    def __init__(self, session: Any, notes: List[str], record_model: Any, provider: str,
                 optimize: bool, optimized: Optional[str], variant_proto: Any) -> None:
        self.session = session
        self.notes = notes
        self.names = [o.name for o in session.get_outputs()]
        # What the recorder runs: the model path (float32) or the variant's ModelProto.
        self.record_model, self.provider, self.optimize = record_model, provider, optimize
        self.optimized, self._variant = optimized, variant_proto

    @property
    def variant_proto(self) -> Any:
        """The variant's ModelProto (None: the model itself); read on first use where the
        backend left it in a file."""
        if callable(self._variant):
            self._variant = self._variant()
        return self._variant

    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        from ...recorders.api import onnx_check_inputs as _check_inputs, onnx_run as _run

        checked = _check_inputs(self.session, dict(feeds))
        return dict(zip(self.names, _run(self.session, checked, "the model")))

    def record(self, feeds: Mapping[str, np.ndarray], path: str) -> Dict[str, np.ndarray]:
        from ...recorders.api import onnx_record

        if callable(self.record_model):  # built on first use (ort-int8's renamed copy)
            self.record_model = self.record_model()
        rec = onnx_record(self.record_model, dict(feeds), path, providers=[self.provider],
                          session_options=_ort_options(self.optimize), check_observer=False)
        return {k: v for k, v in rec.outputs.items() if v is not None}

    # The nodes this variant was built to keep in float32 (the fallback's): their weights must
    # be float32 too for the proof.
    kept: Sequence[str] = ()

    def float32_evidence(self, nodes: Sequence[str]) -> Dict[str, str]:
        return ort_float32_evidence(nodes, self.variant_proto, self.optimized, self.kept)


def save_optimized_graph(options: Any, path: str) -> None:
    """Has ONNX Runtime save the graph it really runs to `path`, with every initializer over
    1 KiB in a data file beside it: reading the graph back (which kernels, which types) then
    parses kilobytes instead of every weight again (about 0.7 s for all-MiniLM-L6-v2)."""
    options.optimized_model_filepath = path
    options.add_session_config_entry("session.optimized_model_external_initializers_file_name",
                                     os.path.basename(path) + ".data")
    options.add_session_config_entry(
        "session.optimized_model_external_initializers_min_size_in_bytes", "1024")


def _ort_options(optimize: bool) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return options


# Ops quantize_dynamic turns into integer ops (onnxruntime.quantization.registry,
# IntegerOpsRegistry): the only nodes an INT8 fallback can give back to float32.
_DYNAMIC_INT8_OPS = frozenset({"Conv", "MatMul", "Attention", "LSTM", "Gather", "Transpose",
                               "EmbedLayerNormalization"})


class OrtBackend(Backend):
    family = "onnx"

    def __init__(self, name: str, summary: str, note: str = "",
                 provider: str = "CPUExecutionProvider", optimize: bool = True,
                 variant: Optional[str] = None) -> None:
        self.name, self.summary, self.note = name, summary, note
        self.provider, self.optimize, self.variant = provider, optimize, variant
        self.preload = ("onnxruntime", "driftscope.onnxruntime") + (
            ("onnxruntime.quantization",) if variant == "int8" else
            ("onnxconverter_common.float16",) if variant == "fp16" else ())
        if variant == "int8":
            self.fallback_ops = _DYNAMIC_INT8_OPS
            self.fallback_weights_only = True
        elif variant == "fp16":
            from .._ranges import FLOAT16, TargetRange

            # onnxconverter-common clips weights at 1e4, below float16's own 65504.
            self.fallback_range = TargetRange("float16", FLOAT16.value_max, _CONVERTER_MAX,
                                              FLOAT16.value_min)

    def unavailable(self) -> Optional[str]:
        why = _missing("onnxruntime", "onnxruntime")
        if why:
            return why
        import onnxruntime as ort

        have = ort.get_available_providers()
        if self.provider not in have:
            gpu = "" if _gpu_device() else "; this machine has no GPU device"
            return (f"onnxruntime {ort.__version__} has no {self.provider} (it provides "
                    f"{', '.join(have)}){gpu}")
        if self.variant == "fp16":
            return _missing("onnxconverter_common", "onnxconverter-common")
        if self.variant == "int8":
            return _missing("onnxruntime.quantization", "onnxruntime")
        return None

    def can_keep_float32(self) -> bool:
        return self.variant in ("fp16", "int8")

    def load(self, model: str, work: str, seed: int,
             keep_float32: Sequence[str] = ()) -> Session:
        from ...recorders.api import onnx_load_model, onnx_make_session, onnx_to_float16

        keep = list(keep_float32)
        if keep and not self.can_keep_float32():
            raise ValueError(f"{self.name} cannot keep nodes in float32")
        if self.variant == "fp16" or keep:
            proto, external_dir, name = onnx_load_model(model)
        else:  # ONNX Runtime and quantize_dynamic read the file themselves
            proto, external_dir, name = None, None, os.path.basename(model)
        if keep:
            known = {n.name for n in proto.graph.node if n.name}
            missing = [k for k in keep if k not in known]
            if missing:
                raise ValueError(f"no node named {missing[0]!r} in the model (keep_float32)")
        notes: List[str] = []
        record_model: Any = model  # a path, a ModelProto, or a function that builds one
        if self.variant == "fp16":
            source = proto
            weights: List[str] = []
            if keep:
                # The converter converts (and clips) a kept node's Constant inputs all the
                # same; they are kept with it (the whole model: the copy is edited).
                import onnx

                full = proto if external_dir is None else onnx.load(model)
                source, weights = _with_weight_producers(full, keep)
                external_dir = None
            converted, kept = onnx_to_float16(source if external_dir is None else model,
                                               [self.provider], keep=keep + weights)
            if external_dir is None:  # a model with external data is not read whole for this
                clamped = _clamped_weights(source, set(keep + weights + kept))
                if clamped:
                    notes.append(clamped)
            proto = converted
            external_dir, record_model = None, proto
            if kept:
                notes.append(f"{len(kept)} node(s) kept in float32 (ONNX Runtime cannot load "
                             f"them converted): {', '.join(kept[:5])}"
                             + (" ..." if len(kept) > 5 else ""))
            if keep:
                notes.append(f"{len(keep)} node(s) kept in float32 (fallback, node_block_list)"
                             + (f", with the {len(weights)} node(s) computing their weights "
                                "(Constant inputs and what is computed from them alone)"
                                if weights else ""))
        elif self.variant == "int8":
            from onnxruntime.quantization import quantize_dynamic

            import onnx

            out = os.path.join(work, "int8.onnx")
            # Weights in a data file beside it: the notes need the graph only (kilobytes, not
            # the whole variant parsed again); the variant itself is read when a probe or a
            # fallback needs it.
            # Given a path, the quantizer shape-infers it into '<stem>-inferred.onnx' beside it
            # and deletes that: beside the user's model it replaced and removed a file of that
            # name, and two builds at once (--sensitivity's) raced on it (FileNotFoundError, or
            # a half-written file: "Failed to find proper ai.onnx domain"). A ModelProto is
            # shape-inferred in the quantizer's own temporary folder.
            quantize_dynamic(onnx.load(model), out, nodes_to_exclude=keep,
                             use_external_data_format=True)
            quantized, external_dir = onnx.load(out, load_external_data=False), None
            proto = functools.partial(onnx.load, out)
            # Renamed only when the probe records: it parses the source model once more.
            record_model = functools.partial(_int8_for_recorder, out, model)
            ops: Dict[str, int] = {}
            for n in quantized.graph.node:
                if "Integer" in n.op_type or n.op_type.startswith(("QLinear", "DynamicQuantize")):
                    ops[n.op_type] = ops.get(n.op_type, 0) + 1
            notes.append("int8 nodes: " + ", ".join(f"{v} {k}" for k, v in sorted(ops.items()))
                         if ops else "no node was quantized: int8 was not exercised")
            if keep:
                notes.append(f"{len(keep)} node(s) kept in float32 (fallback, "
                             "nodes_to_exclude)")
        options = _ort_options(self.optimize)
        optimized: Optional[str] = os.path.join(work, f"{self.name}.optimized.onnx")
        if self.variant in ("fp16", "int8"):
            save_optimized_graph(options, optimized)
        else:
            optimized = None
        # A file where there is one (the model itself, the INT8 variant quantize_dynamic wrote):
        # ONNX Runtime reads it faster than a re-serialised copy (bench/bench_guard.py).
        source = (model if self.variant is None else
                  os.path.join(work, "int8.onnx") if self.variant == "int8" else
                  proto.SerializeToString())
        session = onnx_make_session(source, [self.provider], options,
                                     None if self.variant is None else external_dir, f"'{name}'")
        active = session.get_providers()
        if not active or active[0] != self.provider:
            raise RuntimeError(f"ONNX Runtime ran {active[0] if active else 'nothing'} instead "
                               f"of {self.provider}")
        if optimized is not None and not os.path.isfile(optimized):
            optimized = None
        if self.variant == "fp16" and optimized is not None:
            notes.append(_float16_kernels(optimized, {n.name for n in proto.graph.node}))
        made = _OrtSession(session, notes, record_model, self.provider, self.optimize,
                           optimized, proto if self.variant else None)
        made.kept = tuple(keep)
        return made

    def recipe(self, model: str, nodes: Sequence[str]) -> str:
        base = os.path.basename(model)
        listed = "[" + ", ".join(repr(n) for n in nodes) + "]"
        stem = base[:-5] if base.lower().endswith(".onnx") else base
        if self.variant == "fp16":
            # The variant kept the nodes computing the kept nodes' weights too (load): named in
            # the lists where the model names them and no other node reads them.
            from ...recorders.api import onnx_load_model

            source = onnx_load_model(model)[0]
            extra = _with_weight_producers(source, nodes)[1]
            named = {n.name for n in source.graph.node if n.name}
            note = ""
            if all(e in named for e in extra):
                listed = "[" + ", ".join(repr(n) for n in list(nodes) + extra) + "]"
            else:
                note = (f"# NOT exactly the variant guard built: it also kept {len(extra)} "
                        "node(s) computing these\n# nodes' weights in float32 (unnamed, or read "
                        "by other nodes too: copied)\n")
            return ("import onnx\n"
                    "from onnxconverter_common import float16\n\n"
                    "# onnxconverter-common's own mechanism:\n"
                    f"model = float16.convert_float_to_float16(onnx.load({base!r}), "
                    "keep_io_types=True,\n"
                    f"                                         node_block_list={listed})\n"
                    "# exactly the variant guard verified: the same call, plus the float32\n"
                    "# link between two kept nodes (the converter alone passes it through\n"
                    "# float16) and the loading fixes of driftscope.onnxruntime.to_float16:\n"
                    "from driftscope.onnxruntime import to_float16\n\n"
                    + note +
                    f"model = to_float16({base!r}, keep_float32={listed})\n"
                    f"onnx.save(model, {stem + '.fp16.onnx'!r})\n")
        if self.variant == "int8":
            return ("from onnxruntime.quantization import quantize_dynamic\n\n"
                    f"quantize_dynamic({base!r}, {stem + '.int8.onnx'!r},\n"
                    f"                 nodes_to_exclude={listed})\n")
        return ""


def _int8_for_recorder(variant: str, model: str) -> Any:
    import onnx

    from ...recorders.api import onnx_load_model

    return _named_like_source(onnx.load(variant), onnx_load_model(model)[0])


def _named_like_source(variant: Any, source: Any) -> Any:
    """A copy of a quantized model whose nodes are named for the recorder as in the source:
    the node that now produces a value the source's node S produced is named S (quantize_dynamic
    calls it "S_quant..." or the like), and the nodes it added (DynamicQuantizeLinear, scale
    casts and multiplies) are tagged as inserted, so that they belong to no module scope (the
    recorder would otherwise name a module after its quantization node) and are not recorded."""
    import onnx

    from ...recorders.api import onnx_float16_marker as _INSERTED

    made = {o: n.name for n in source.graph.node for o in n.output if o}
    out = onnx.ModelProto()
    out.CopyFrom(variant)
    # A node keeps or takes the name of the source node whose value it produces; one that
    # produces no source value (a quantized Gather under its old name, a DynamicQuantizeLinear)
    # is internal to the quantization.
    nodes = list(out.graph.node)  # one wrapper per node (protobuf makes new ones per iteration)
    src = [next((made[o] for o in n.output if o in made), None) for n in nodes]
    taken = {n.name for n, s in zip(nodes, src) if s == n.name}
    for n, s in zip(nodes, src):
        if s is not None and s == n.name:
            continue
        if s is not None and s not in taken:
            n.name = s
            taken.add(s)
        else:
            n.name, n.doc_string = "", _INSERTED
    return out


def ort_float32_evidence(nodes: Sequence[str], variant: Any,
                         optimized: Optional[str], kept: Sequence[str] = ()) -> Dict[str, str]:
    """Which of `nodes` the built variant runs in float32. Proof comes from the graph ONNX
    Runtime optimised and saved (what it really runs): the node, under its source name, whose
    float inputs and outputs are all float32. A node ONNX Runtime fused away or renamed is looked
    up in the variant itself only for an INT8 model (a node quantize_dynamic left as a float op
    with float32 weights); otherwise it is not proven. A node of `kept` (the variant was built
    to keep it in float32: the fallback) is proven only if its weights are float32 up to their
    initializers and Constant nodes in the variant; another node's float16 weight is said."""
    import onnx

    if variant is None:
        return {}
    FLOAT, FLOAT16 = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16
    BF16 = onnx.TensorProto.BFLOAT16
    floats = (FLOAT, FLOAT16, BF16, onnx.TensorProto.DOUBLE)

    def typed(g: Any) -> Dict[str, int]:
        t = {vi.name: vi.type.tensor_type.elem_type
             for vi in list(g.value_info) + list(g.input) + list(g.output)}
        t.update({i.name: i.data_type for i in g.initializer})
        return t

    found: Dict[str, str] = {}
    want = set(nodes)
    if optimized is not None:
        q = onnx.load(optimized, load_external_data=False)
        types = typed(q.graph)
        nchwc = _nchwc_names(variant, want)
        for n in q.graph.node:
            src = nchwc.get(n.name) or nchwc.get(n.name.rsplit("_token_", 1)[0])
            if n.domain == "com.microsoft.nchwc" and src is not None and src not in found:
                # ONNX Runtime's NCHWc layout (x86 CPUs) replaces a Conv, pool or
                # BatchNormalization by a node named after its output; its kernels exist for
                # float only (contrib_ops/cpu/nchwc_ops.cc) and its values have no saved type.
                found[src] = (f"ONNX Runtime's optimized graph runs {src} as {n.op_type} "
                              f"{n.name} of the com.microsoft.nchwc domain, whose kernels are "
                              "float32 only")
                continue
            if n.name not in want or n.name in found:
                continue
            vals = [x for x in list(n.input) + list(n.output) if x]
            # ONNX Runtime saves no type for the values its cast insertion created; those
            # named InsertedPrecisionFreeCast_ are the float32 side of a cast it removed.
            kinds = [types.get(x, FLOAT if x.startswith("InsertedPrecisionFreeCast_") else None)
                     for x in vals]
            if any(k is None for k in kinds):
                continue  # a type ONNX Runtime did not save: no proof
            fl = [k for k in kinds if k in floats]
            if fl and all(k == FLOAT for k in fl):
                found[n.name] = (f"ONNX Runtime's optimized graph runs {n.name} as {n.op_type} "
                                 f"with {len(fl)} float32 input/output value(s) and no float16 "
                                 "one")
        # ONNX Runtime folds constants: a weight the converter made float16 (and clipped) and
        # cast back reaches the node as a float32 initializer there. What the node's weights
        # were before the folding is in the variant itself.
        strict = set(kept)
        for name, why in _weights_not_float32(variant, list(found)).items():
            if not why:
                found[name] += ("; its weights are float32 up to their initializers and "
                                "Constant nodes in the variant")
            elif name in strict:
                del found[name]
            else:  # float32 arithmetic on a weight stored in float16 (the probe says so)
                found[name] += f", but its {why} in the variant (read through a cast)"
    integer_ops = ("Integer", "QLinear", "DynamicQuantize", "QuantizeLinear", "DequantizeLinear")
    quantized = any(any(t in n.op_type for t in integer_ops) for n in variant.graph.node)
    if quantized:
        types = typed(variant.graph)
        producer = {o: n for n in variant.graph.node for o in n.output}
        inits = {i.name: i for i in variant.graph.initializer}
        for n in variant.graph.node:
            if n.name not in want or n.name in found:
                continue
            if any(t in n.op_type for t in integer_ops):
                continue
            weights = [inits[x] for x in n.input if x in inits]
            fed_int = [x for x in n.input if x in producer
                       and any(t in producer[x].op_type for t in integer_ops)]
            if fed_int or any(w.data_type not in (FLOAT,) and w.data_type in floats
                              for w in weights):
                continue
            if any(types.get(x) == onnx.TensorProto.INT8 or types.get(x) == onnx.TensorProto.UINT8
                   for x in n.input if x in inits):
                continue
            wdesc = ", ".join(f"{w.name} float32" for w in weights
                              if w.data_type == FLOAT) or "no weights"
            found[n.name] = (f"quantize_dynamic left {n.name} a float {n.op_type} ({wdesc}; no "
                             "quantized input)")
    return found


def _nchwc_names(variant: Any, want: set) -> Dict[str, str]:
    """The names ONNX Runtime's NchwcTransformer gives the node replacing each of `want`
    (GenerateNodeName(output + "_nchwc" or "_bn_nchwc"), "_token_N" added on a clash), mapped to
    the source name."""
    names: Dict[str, str] = {}
    for n in variant.graph.node:
        if n.name in want and n.output and n.output[0]:
            for suffix in ("_nchwc", "_bn_nchwc"):
                names[n.output[0] + suffix] = n.name
    return names


def _weights_not_float32(variant: Any, nodes: Sequence[str]) -> Dict[str, str]:
    """For each of `nodes` (main graph) that reads weights: "" when they are float32 all the
    way up, else the first value that is not. A node's weights are its inputs computed from
    initializers and Constant nodes alone; every value on the way (initializers, Constant and
    other tensor attributes, the declared types, a Cast's target) must be float32 where it is a
    float: a Constant converted to float16 and fed through Cast(to=float) holds the float16
    value, not a float32 one."""
    import onnx

    from ...recorders.api import (onnx_static_values as _static_values,
                                 onnx_topological_nodes as _topological_nodes)

    T = onnx.TensorProto
    FLOAT = T.FLOAT
    floats = (FLOAT, T.FLOAT16, T.BFLOAT16, T.DOUBLE)
    graph = variant.graph
    static = _static_values(graph, _topological_nodes(graph)) | {
        t.name for t in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output if o}
    inits = {t.name: t for t in graph.initializer}
    types = {vi.name: vi.type.tensor_type.elem_type
             for vi in list(graph.value_info) + list(graph.output)}
    by_name = {n.name: n for n in graph.node if n.name}
    bad: Dict[str, str] = {}
    for name in nodes:
        node = by_name.get(name)
        if node is None:
            continue
        seen: set = set()
        frontier = [x for x in node.input if x in static]
        if frontier:
            bad[name] = ""
        while frontier and not bad[name]:
            x = frontier.pop()
            if x in seen:
                continue
            seen.add(x)
            t = inits.get(x)
            if t is not None and t.data_type in floats and t.data_type != FLOAT:
                bad[name] = f"weight {x} is {T.DataType.Name(t.data_type).lower()}"
            elif types.get(x) in floats and types.get(x) != FLOAT:
                bad[name] = f"weight {x} is declared {T.DataType.Name(types[x]).lower()}"
            p = producer.get(x)
            if p is None or bad[name]:
                continue
            for a in p.attribute:
                held = ([a.t] if a.type == onnx.AttributeProto.TENSOR else []) + list(a.tensors)
                if any(h.data_type in floats and h.data_type != FLOAT for h in held):
                    bad[name] = f"weight {x} comes from {p.op_type} {p.name or x} holding a " \
                                "non-float32 tensor"
                if a.name == "to" and p.op_type == "Cast" and a.i in floats and a.i != FLOAT:
                    bad[name] = f"weight {x} goes through a Cast to {T.DataType.Name(a.i).lower()}"
            frontier.extend(i for i in p.input if i)
    return bad


# onnxconverter-common's convert_float_to_float16 defaults: weights are clipped into
# [1e-7, 1e4] in magnitude (zeros stay zero) before the cast, not to float16's own range.
_CONVERTER_MIN, _CONVERTER_MAX = 1e-7, 1e4
# The same bounds on |x|'s bit pattern: for non-negative float32, bits order as values do
# (infinity included; NaN patterns lie above it and are left out, as the comparison does).
_BITS_MIN = int(np.array(_CONVERTER_MIN, np.float32).view(np.uint32))
_BITS_MAX = int(np.array(_CONVERTER_MAX, np.float32).view(np.uint32))
_BITS_INF = 0x7F800000


def _float_tensors(proto, blocked: set) -> Iterator[Tuple[str, Any]]:
    """(where, TensorProto) of every float32 tensor the float16 conversion converts: initializers
    no blocked node reads, and the tensor attributes of nodes not blocked (a Constant's
    ``value``, ConstantOfShape's ...), subgraphs included. A Constant's value_float(s) is left
    as it is by the converter (onnxconverter-common 1.16): float32, not clipped; the nodes that
    read it then fail to load converted and are kept in float32 (onnxruntime._to_float16)."""
    import onnx

    from ...recorders.api import onnx_all_graphs as _all_graphs

    try:
        from onnxconverter_common.float16 import DEFAULT_OP_BLOCK_LIST as ops
    except ImportError:  # pragma: no cover - the backend is unavailable without it
        ops = []
    FLOAT = onnx.TensorProto.FLOAT
    for graph in _all_graphs(proto.graph):
        off = [n for n in graph.node if n.name in blocked or n.op_type in ops]
        read = {x for n in off for x in n.input}
        for t in graph.initializer:
            if t.data_type == FLOAT and t.name not in read:
                yield f"initializer {t.name}", t
        for n in graph.node:
            if n.name in blocked or n.op_type in ops:
                continue
            for a in n.attribute:
                what = (f"Constant {n.name or n.output[0]}" if n.op_type == "Constant" else
                        f"{n.op_type} {n.name or n.output[0]} attribute {a.name}")
                if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == FLOAT:
                    yield what, a.t
                for t in a.tensors:
                    if t.data_type == FLOAT:
                        yield what, t


def _clamped_weights(proto, blocked: set = frozenset()) -> Optional[str]:
    """Which float32 weights the float16 conversion changes by more than rounding: initializers
    and the tensors of Constant nodes (and other nodes' tensor attributes) alike, left out those
    `blocked` nodes (kept in float32) read or hold. Names the ones clipped above the bound: such
    a weight (a BatchNorm variance of 1e7) is the whole failure of a model."""
    from onnx import numpy_helper

    big = small = 0
    names: List[str] = []
    for where, t in _float_tensors(proto, blocked):
        # The bytes themselves where they are raw (no copy); |x| of float32 by its bits.
        a = (np.frombuffer(t.raw_data, "<f4") if t.raw_data and not t.external_data
             else numpy_helper.to_array(t).ravel())
        bits = a.view(np.uint32) & np.uint32(0x7FFFFFFF)
        over = int(np.count_nonzero((bits > _BITS_MAX) & (bits <= _BITS_INF)))
        big += over
        small += int(np.count_nonzero((bits > 0) & (bits < _BITS_MIN)))
        if over:
            names.append(f"{where} (max {float(np.max(np.abs(a))):.4g})")
    if not big and not small:
        return None
    listed = ""
    if names:
        from ..._text import printable as shown

        listed = ("; clipped: " + ", ".join(shown(n) for n in names[:5])
                  + (f" and {len(names) - 5} more" if len(names) > 5 else ""))
    return (f"the float16 conversion clipped {big} weight(s) above {_CONVERTER_MAX:g} and "
            f"{small} nonzero weight(s) below {_CONVERTER_MIN:g} in magnitude{listed}")


def _with_weight_producers(proto, keep: Sequence[str]) -> Tuple[Any, List[str]]:
    """The FP32 fallback keeps a node's weights float32 with it. The converter leaves the
    initializers a blocked node reads in float32, but converts (clipping above 1e4) the Constant
    nodes that feed it, and whatever is computed from constants alone before it (a Reshape of a
    Constant): those nodes are kept too. Returns (a copy of `proto` where they all have names, a
    node that also feeds nodes not kept is duplicated for the kept ones, so that those others
    still read the converted value; the names of the nodes to keep besides `keep`)."""
    import onnx

    from ...recorders.api import (onnx_static_values as _static_values,
                                 onnx_topological_nodes as _topological_nodes)

    out = onnx.ModelProto()
    out.CopyFrom(proto)
    graph = out.graph
    nodes = list(graph.node)  # one wrapper per node (protobuf makes new ones per iteration)
    static = _static_values(graph, _topological_nodes(graph))
    producer = {o: n for n in nodes for o in n.output if o}
    wanted = set(keep)
    kept = [n for n in nodes if n.name in wanted]
    found: Dict[int, Any] = {}
    frontier = [x for n in kept for x in n.input if x in static and x in producer]
    while frontier:
        p = producer[frontier.pop()]
        if id(p) in found:
            continue
        found[id(p)] = p
        frontier.extend(x for x in p.input if x in static and x in producer)
    if not found:
        return proto, []
    inside = {id(n) for n in kept} | set(found)
    outputs = {o.name for o in graph.output}
    shared = [p for p in found.values()
              if any(o in outputs for o in p.output)
              or any(id(n) not in inside and set(n.input) & set(p.output) for n in nodes)]
    taken = {n.name for n in nodes if n.name}

    def fresh(base: str) -> str:
        name, k = base, 1
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        taken.add(name)
        return name

    values = {o for n in nodes for o in list(n.input) + list(n.output)} | {
        i.name for i in graph.input} | {t.name for t in graph.initializer}
    rename: Dict[str, str] = {}
    clones: Dict[int, Any] = {}
    for p in shared:
        c = onnx.NodeProto()
        c.CopyFrom(p)
        for k, o in enumerate(c.output):
            if o:
                new = o + "/driftscope_fp32"
                while new in values:
                    new += "_"
                values.add(new)
                rename[o] = new
                c.output[k] = new
        c.name = fresh(f"{p.name or p.output[0]}/driftscope_fp32")
        clones[id(p)] = c
    for n in kept + [p for p in found.values() if id(p) not in clones] + list(clones.values()):
        for k, x in enumerate(n.input):
            if x in rename:
                n.input[k] = rename[x]
    added: List[str] = []
    for p in found.values():
        if id(p) in clones:
            added.append(clones[id(p)].name)
        else:
            if not p.name:
                p.name = fresh(f"driftscope_fp32/{p.output[0]}")
            added.append(p.name)
    if clones:  # each copy right after its original: the file order stays topological
        order: List[Any] = []
        for n in nodes:
            order.append(n)
            if id(n) in clones:
                order.append(clones[id(n)])
        del graph.node[:]
        graph.node.extend(order)
    return out, added


def _float16_kernels(optimized_path: str, source_names: Optional[set] = None) -> str:
    """What ONNX Runtime really computes in a float16 model: the graph it saved after its
    optimizations. Nodes without a float16 kernel for the provider (and isolated ones) get casts
    around them and run in float32; the values they produce have no float16 type there. Every
    node of that graph is counted: where ONNX Runtime left a value untyped (its NCHWc layout
    nodes, which it also renames), the node's type is its float inputs' (a Cast's, its target)."""
    import onnx

    q = onnx.load(optimized_path, load_external_data=False)
    types = {vi.name: vi.type.tensor_type.elem_type
             for vi in list(q.graph.value_info) + list(q.graph.output) + list(q.graph.input)}
    types.update({t.name: t.data_type for t in q.graph.initializer})
    f16, f32 = onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT
    half: Dict[str, int] = {}
    single = 0
    renamed: Dict[str, int] = {}
    for n in q.graph.node:  # saved in topological order
        outs = [o for o in n.output if o]
        if n.op_type == "Cast":
            to = next((a.i for a in n.attribute if a.name == "to"), None)
            for o in outs:
                types.setdefault(o, to)
            continue
        ins = [types.get(i) for i in n.input if i and types.get(i) in (f16, f32)]
        for o in outs:
            if types.get(o) is None and o.startswith("InsertedPrecisionFreeCast_"):
                types[o] = f32
            elif types.get(o) is None and ins:
                types[o] = f16 if f16 in ins else f32
        if any(types.get(o) == f16 for o in outs):
            half[n.op_type] = half.get(n.op_type, 0) + 1
        elif any(types.get(o) == f32 for o in outs):
            single += 1
        else:
            continue
        if source_names is not None and n.name not in source_names:
            kind = f"{n.domain}:{n.op_type}" if n.domain else n.op_type
            renamed[kind] = renamed.get(kind, 0) + 1
    why = ""
    if renamed:
        why = (f" ({sum(renamed.values())} of them under names ONNX Runtime's graph "
               "optimizations gave them: " + ", ".join(f"{v} {k}" for k, v in
                                                       sorted(renamed.items())) + ")")
    if not half:
        return (f"ONNX Runtime ran all {single} float node(s) of its optimized graph in "
                f"float32{why}: only the rounding of weights (and inputs) to float16 was "
                "exercised")
    kinds = ", ".join(f"{v} {k}" for k, v in sorted(half.items()))
    return (f"ONNX Runtime ran {sum(half.values())} node(s) with float16 kernels ({kinds}) and "
            f"{single} in float32 in its optimized graph{why}")


_FP16_NOTE = ("float16 storage, not float16 arithmetic: ONNX Runtime's CPU provider computes "
              "most float16 nodes in float32 behind inserted casts")

# In --list-backends order (registry.py registers them).
BUILT_IN = (
    OrtBackend("ort", "ONNX Runtime, CPU provider, float32, default graph optimizations"),
    OrtBackend("ort-noopt", "ONNX Runtime, CPU provider, float32, graph optimizations off",
               optimize=False),
    OrtBackend("ort-fp16", "ONNX Runtime, CPU provider, model converted to float16 (inputs "
               "and outputs stay float32)", note=_FP16_NOTE, variant="fp16"),
    OrtBackend("ort-int8", "ONNX Runtime, CPU provider, dynamic INT8 quantization "
               "(onnxruntime.quantization.quantize_dynamic)", variant="int8"),
    OrtBackend("ort-cuda", "ONNX Runtime, CUDA provider, float32",
               provider="CUDAExecutionProvider"),
)
