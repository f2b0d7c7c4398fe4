""".tflite surgery (issue 27 item 1): prefix / suffix / middle / one-op pieces of a flatbuffer
model, checked by running the pieces chained on LiteRT's reference kernels (the litert-ref
backend's BuiltinRefOpResolver) and getting the whole model's values bit for bit, on every
.tflite model the tests build (float, INT8, INT8 in and out, float16 weights, resource
variables) and on a real model from a PyPI package (pymicro_wakeword) where it is installed."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

from driftscope._guard.surgery import tflite as cut  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))
import tflite_f16  # noqa: E402
import tflite_models as tm  # noqa: E402


def _wakeword():
    try:
        import pymicro_wakeword
    except ImportError:
        return None
    path = Path(pymicro_wakeword.__file__).parent / "models" / "okay_nabu.tflite"
    return path.read_bytes() if path.is_file() else None


def _two_outputs():
    """The float model with conv1 an output too: a cut tensor that is also the model's output
    is both an input and an output of the suffix."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as s

    data = tm.build_float()
    g = cut.load(data)
    m = s.ModelT.InitFromPackedBuf(data, 0)
    m.subgraphs[0].outputs = [g.index("conv1"), g.index("probs")]
    fb = flatbuffers.Builder(1024)
    fb.Finish(m.Pack(fb), file_identifier=b"TFL3")
    return bytes(fb.Output())


MODELS = {
    "float": tm.build_float,
    "two_outputs": _two_outputs,
    "int8": tm.build_int8,
    "int8io": tflite_f16.build_int8_io,
    "f16": tflite_f16.build_f16_weights,
    "stateful": tm.build_stateful,
}


def _model(name):
    if name == "okay_nabu":
        data = _wakeword()
        if data is None:
            pytest.skip("pymicro_wakeword (a PyPI package shipping .tflite models) is not "
                        "installed")
        return data
    return MODELS[name]()


def _interpreter(data, preserve=False):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                     experimental_preserve_all_tensors=preserve)
    it.allocate_tensors()
    return it


def _feeds(data):
    rng = np.random.default_rng(3)
    out = {}
    for d in _interpreter(data).get_input_details():
        if np.dtype(d["dtype"]).kind == "f":
            out[d["name"]] = rng.uniform(-1, 1, d["shape"]).astype(d["dtype"])
        else:
            info = np.iinfo(d["dtype"])
            out[d["name"]] = rng.integers(max(info.min, -100), min(info.max, 100),
                                          d["shape"]).astype(d["dtype"])
    return out


def _run(data, feeds):
    it = _interpreter(data)
    for d in it.get_input_details():
        it.set_tensor(d["index"], feeds[d["name"]])
    it.invoke()
    return {d["name"]: it.get_tensor(d["index"]).copy() for d in it.get_output_details()}


def _whole(data, feeds):
    """Every tensor's value after one run of the whole model (by index: names need not be
    unique), and its outputs."""
    it = _interpreter(data, preserve=True)
    for d in it.get_input_details():
        it.set_tensor(d["index"], feeds[d["name"]])
    it.invoke()
    g = cut.load(data)
    values = {}
    for i, name in enumerate(g.type_names):
        if name in ("RESOURCE", "VARIANT", "STRING") or g.constant(i):
            continue
        try:
            values[i] = it.get_tensor(i).copy()
        except ValueError:
            pass
    return values, {d["name"]: it.get_tensor(d["index"]).copy() for d in it.get_output_details()}


ALL = list(MODELS) + ["okay_nabu"]


@pytest.mark.parametrize("name", ALL)
def test_prefix_and_suffix_chained_give_the_whole_model_bit_for_bit(name):
    data = _model(name)
    g = cut.load(data)
    feeds = _feeds(data)
    _, whole = _whole(data, feeds)
    honoured = refused = 0
    for k in range(len(g.operators) - 1):
        try:
            head = cut.cut_after(g, k)
            tail = cut.suffix(g, head.outputs)
        except cut.CutRefused as err:
            refused += 1
            assert str(err).startswith("cannot cut here: op ") and "\n" not in str(err)
            continue
        honoured += 1
        mid = _run(head.data, feeds)
        assert sorted(mid) == sorted(head.outputs)
        got = _run(tail.data, {**feeds, **mid})
        assert sorted(got) == sorted(whole)
        for out, v in whole.items():
            assert got[out].dtype == v.dtype and np.array_equal(got[out], v), (name, k, out)
    if name in ("stateful", "okay_nabu"):
        # Every prefix holds CALL_ONCE and the variable reads: refused, each with its reason.
        assert honoured == 0 and refused == len(g.operators) - 1
    else:
        assert refused == 0 and honoured == len(g.operators) - 1


@pytest.mark.parametrize("name", ALL)
def test_one_op_pieces_chained_give_every_value_bit_for_bit(name):
    """Each operator alone, fed what the pieces before it computed (a value whose producer
    cannot be cut, a resource variable's read, comes from the whole model's run): every value
    the whole model computes, bit for bit. The refused operators are the state and control
    flow ones, named with their reason."""
    data = _model(name)
    g = cut.load(data)
    feeds = _feeds(data)
    values, whole = _whole(data, feeds)
    by_name = {g.name(t): t for t in range(len(g.tensors))}
    have = {by_name[n]: v for n, v in feeds.items()}
    checked, refused = 0, set()
    for k in range(len(g.operators)):
        why = cut.refusal(g, k)
        if why is not None:
            refused.add(g.op_types[k])
            with pytest.raises(cut.CutRefused, match="cannot cut here: op "):
                cut.one_op(g, k)
            for o in g.operators[k].outputs:
                if o in values:
                    have[int(o)] = values[int(o)]
            continue
        piece = cut.one_op(g, k)
        got = _run(piece.data, {n: have[g.index(n)] for n in piece.inputs})
        for n, v in got.items():
            t = g.index(n)
            assert np.array_equal(v, values[t]) and v.dtype == values[t].dtype, (name, k, n)
            have[t] = v
            checked += 1
    for out, v in whole.items():
        assert np.array_equal(have[g.index(out)], v)
    expected = {"stateful": {"CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"},
                "okay_nabu": {"CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"}}
    assert refused == expected.get(name, set())
    assert checked >= len(g.operators) - 4 * len(refused) - 20 * (name == "okay_nabu")


def test_a_middle_piece_keeps_shapes_types_and_quantization_and_drops_unused_buffers():
    data = tm.build_int8()
    g = cut.load(data)
    piece = cut.middle(g, ["conv1"], ["pool"])
    assert piece.inputs == ["conv1"] and piece.outputs == ["pool"]
    assert [g.op_types[k] for k in piece.ops] == ["DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D"]
    whole = {d["name"]: d for d in _interpreter(data).get_tensor_details()}
    it = _interpreter(piece.data)
    for d in it.get_tensor_details():
        w = whole[d["name"]]
        assert list(d["shape"]) == list(w["shape"]) and d["dtype"] == w["dtype"], d["name"]
        for key in ("scales", "zero_points"):
            assert np.array_equal(d["quantization_parameters"][key],
                                  w["quantization_parameters"][key]), (d["name"], key)
        assert d["quantization_parameters"]["quantized_dimension"] == \
            w["quantization_parameters"]["quantized_dimension"]
    p = cut.load(piece.data)
    # The depthwise weights and bias, nothing of conv1 or fc; two operator codes.
    assert sum(p.constant(t) for t in range(len(p.tensors))) == 2
    assert len([b for b in p.model.buffers if b.data is not None and len(b.data)]) == 2
    assert len(p.model.operatorCodes) == 2
    assert len(piece.data) < len(data) // 2
    # The piece's own inputs and outputs, and nothing else of the source's signature.
    assert [d["name"] for d in it.get_input_details()] == ["conv1"]
    assert [d["name"] for d in it.get_output_details()] == ["pool"]


def test_middle_adds_the_model_inputs_a_piece_still_needs():
    data = tm.build_stateful(2)
    g = cut.load(data)
    # add1 = add0 + state1/read; out = add1 * 2: from add0 alone it still needs the read.
    piece = cut.middle(g, ["add0", "state1/read"], ["out"])
    assert piece.inputs == ["add0", "state1/read"] and piece.outputs == ["out"]
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    got = _run(piece.data, {"add0": x, "state1/read": x + 1})["out"]
    assert np.array_equal(got, 2 * (2 * x + 1))


def _with_custom_op(data, k):
    import flatbuffers
    from ai_edge_litert import schema_py_generated as s

    m = s.ModelT.InitFromPackedBuf(data, 0)
    oc = s.OperatorCodeT()
    oc.builtinCode = oc.deprecatedBuiltinCode = s.BuiltinOperator.CUSTOM
    oc.customCode = "MyVendorConv"
    m.operatorCodes.append(oc)
    m.subgraphs[0].operators[k].opcodeIndex = len(m.operatorCodes) - 1
    fb = flatbuffers.Builder(1024)
    fb.Finish(m.Pack(fb), file_identifier=b"TFL3")
    return bytes(fb.Output())


def test_cuts_it_cannot_honour_are_refused_with_one_reason():
    data = _with_custom_op(tm.build_float(), 1)
    with pytest.raises(cut.CutRefused) as e:
        cut.prefix(data, ["pool"])
    assert str(e.value) == ("cannot cut here: op 1 (CUSTOM:MyVendorConv, output 'dwconv') is the "
                            "custom op 'MyVendorConv', whose kernel is not LiteRT's: a piece "
                            "holding it may not load where the whole model does")
    # Around it the model is cut as usual.
    assert cut.prefix(data, ["conv1"]).ops == [0]
    assert cut.suffix(data, ["dwconv"]).ops == [2, 3, 4, 5]
    state = tm.build_stateful(2)
    with pytest.raises(cut.CutRefused, match=r"^cannot cut here: op 0 \(CALL_ONCE\) runs "
                                             r"subgraph\(s\) 1, and a piece is the main subgraph "
                                             r"alone$"):
        cut.cut_after(state, 3)
    with pytest.raises(cut.CutRefused, match=r"^cannot cut here: op 1 \(VAR_HANDLE, output "
                                             r"'state0/handle'\) reads or writes a resource "
                                             "variable, state kept between invocations that a "
                                             "piece cannot carry$"):
        cut.prefix(state, ["add0"])
    with pytest.raises(cut.CutRefused, match=r"op 2 \(READ_VARIABLE, output 'state0/read'\) "
                                             "reads or writes a resource variable"):
        cut.one_op(state, 2)
    for bad, fragment in [(lambda: cut.prefix(b"junk" * 4, ["x"]), "not a TFLite flatbuffer"),
                          (lambda: cut.prefix(tm.build_float()[:200], ["x"]), "cannot be read"),
                          (lambda: cut.prefix(tm.build_float(), ["nope"]),
                           "no tensor named 'nope'"),
                          (lambda: cut.suffix(tm.build_float(), ["conv1/weights"]),
                           "is a constant (weights)"),
                          (lambda: cut.one_op(tm.build_float(), 6),
                           "outside the main subgraph's 6"),
                          (lambda: cut.prefix(tm.build_float(), [99]), "tensor index 99")]:
        with pytest.raises(cut.CutRefused, match=fragment.replace("(", r"\(").replace(")", r"\)")):
            bad()


def test_surgery_never_changes_its_input(tmp_path):
    path = tmp_path / "m.tflite"
    data = tm.build_int8()
    path.write_bytes(data)
    g = cut.load(path)
    for k in range(len(g.operators) - 1):
        cut.suffix(g, cut.cut_after(g, k).outputs)
    assert path.read_bytes() == data
    # The parsed model is shared by every cut and left as it was: cutting again gives the same.
    assert cut.cut_after(g, 3).data == cut.cut_after(cut.load(data), 3).data


# -- the guard bisects a .tflite backend with prefix models (issue 27 item 2) ---------------------

import math  # noqa: E402

import driftscope  # noqa: E402
from driftscope import _guard as G  # noqa: E402

import tflite_planted  # noqa: E402


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    path = tmp_path_factory.mktemp("planted") / "planted.tflite"
    path.write_bytes(tflite_planted.build())
    return path


@pytest.mark.filterwarnings("ignore:Warning. Enabling .experimental_preserve_all_tensors")
def test_the_planted_fault_is_xnnpack_s_alone():
    # The reference kernels agree with the pieces chained (the model is sound), and only the
    # planted op's value differs between them and the default kernels (XNNPACK).
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    data = tflite_planted.build()
    x = np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32)
    got = {}
    for kind in (OpResolverType.BUILTIN_REF, OpResolverType.BUILTIN):
        it = Interpreter(model_content=data, experimental_op_resolver_type=kind,
                         experimental_preserve_all_tensors=True)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        got[kind] = {d["name"]: it.get_tensor(d["index"]).copy()
                     for d in it.get_tensor_details() if d["name"] in tflite_planted.OPS}
    ref, opt = got[OpResolverType.BUILTIN_REF], got[OpResolverType.BUILTIN]
    assert [n for n in tflite_planted.OPS if not np.array_equal(ref[n], opt[n])][:1] == ["planted"]


def test_a_failing_tflite_backend_is_bisected_with_prefix_models(planted):
    """Before: "bisection needs an ONNX graph or a PyTorch model to cut (this is a tflite
    model)". Now the guard cuts the .tflite after each candidate op and names the planted one
    within ceil(log2(ops)) + 2 runs, and the report says bisection found it."""
    r = driftscope.guard(planted, backends=["litert"], runs=1, probe_method="bisect")
    row = r["litert"]
    assert row.status == G.PRECISION_DEGRADATION, row.status
    p = row.probe
    assert p.method == "bisect" and p.error is None, (p.why, p.error)
    assert p.origin.node == "planted" and p.origin.op_type == "FULLY_CONNECTED"
    ops = len(tflite_planted.OPS)
    assert p.runs <= math.ceil(math.log2(ops)) + 2, p.runs
    text = r.to_text()
    assert ("litert probe (bisection over the model's operator order "
            f"({p.runs} prefix runs); --probe-method bisect)" in text
            and "names planted (FULLY_CONNECTED)" in text), text
    assert f"prefix runs of each backend for {ops} operators" in text
    # Both methods: the recording names the same op, and the report says they agree.
    both = driftscope.guard(planted, backends=["litert"], runs=1,
                            probe_method="both")["litert"]
    assert both.probe.method == "recorded" and both.probe.origin.node == "planted"
    assert both.probe.other.method == "bisect" and both.probe.agrees is True


def test_bisection_runs_over_the_cuts_surgery_honours(tmp_path):
    """A streaming prelude (CALL_ONCE, VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE) before the
    planted op: no prefix holding it can be cut, so those operators are never cut after and the
    variable's read is fed to both backends' prefixes from one reference-kernel run."""
    model = tmp_path / "streaming.tflite"
    model.write_bytes(tflite_planted.build(stateful=True))
    g = cut.load(model)
    ops = len(g.operators)
    assert ops == 13 and sum(cut.refusal(g, k) is not None for k in range(ops)) == 4
    r = driftscope.guard(model, backends=["litert"], runs=1, probe_method="bisect")
    p = r["litert"].probe
    assert p.method == "bisect" and p.origin is not None, (p.why, p.error)
    assert p.origin.node == "planted" and p.runs <= math.ceil(math.log2(ops)) + 2, p.runs
    assert any(n.startswith("4 operator(s) surgery cannot cut (custom, control flow, resource "
                            "variables) left out") for n in p.notes), p.notes
    # A passing backend: the whole model cut at its last op passes, in one run.
    (tmp_path / "s.tflite").write_bytes(tm.build_stateful(2))
    p = driftscope.guard(tmp_path / "s.tflite", backends=["litert"], runs=1, probe="always",
                         probe_method="bisect")["litert"].probe
    assert p.method == "bisect" and p.origin is None and p.runs == 1
    assert p.error.startswith("the whole model cut at its last operator passes")


def test_cut_after_refused_feeds_what_refused_ops_hand_on():
    # Every cut of the streaming test model and of okay_nabu that is not after a refused
    # operator, fed the model inputs and the refused operators' values: bit for bit.
    for data, expected in ((tm.build_stateful(3), 4), (_wakeword(), 42)):
        if data is None:
            continue
        g = cut.load(data)
        feeds = _feeds(data)
        values, _ = _whole(data, feeds)
        honoured = 0
        for k in range(len(g.operators)):
            try:
                piece = cut.cut_after_refused(g, k)
            except cut.CutRefused as err:
                assert cut.refusal(g, k) is not None or "only values of refused" in str(err)
                continue
            honoured += 1
            got = _run(piece.data, {n: feeds[n] if n in feeds else values[g.index(n)]
                                    for n in piece.inputs})
            for n, v in got.items():
                assert np.array_equal(v, values[g.index(n)]), (k, n)
        assert honoured == expected  # 3 ADDs and the output's; okay_nabu: 42 of 61


def test_openvino_rows_of_a_tflite_model_are_bisected_too(planted):
    """OpenVINO exposes no intermediates, so its rows on a .tflite were not probed ("this
    backend cannot expose its intermediate tensors" and nothing more). Its float requantization
    rounds the planted ties to even as XNNPACK does; bisection now names the op, and no
    fallback search is started for a .tflite model (it could build nothing)."""
    pytest.importorskip("openvino")
    r = driftscope.guard(planted, backends=["openvino", "openvino-bf16"], runs=1)
    row = r["openvino"]
    assert row.status == G.PRECISION_DEGRADATION, row.status
    assert row.probe.method == "bisect" and row.probe.origin.node == "planted"
    assert row.probe.why == "this backend cannot expose its intermediate tensors"
    bf16 = r["openvino-bf16"]
    if bf16.status != G.UNAVAILABLE:  # it keeps ONNX nodes in float32, not a .tflite's
        assert bf16.probe.origin.node == "planted"
        assert bf16.fallback is not None and bf16.fallback.runs == 0
        assert bf16.fallback.error.startswith("a .tflite model's nodes cannot be kept in "
                                              "float32")
