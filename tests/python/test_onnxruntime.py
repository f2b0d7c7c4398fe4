"""driftscope.onnxruntime: recording ONNX Runtime runs (issue 4 §3)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import driftscope  # noqa: E402
import driftscope.onnxruntime as dort  # noqa: E402
from driftscope.recorders.naming import NodeInfo, plan_names, split_scope  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(1234)
W1 = RNG.standard_normal((4, 6)).astype(np.float32)
B1 = RNG.standard_normal(6).astype(np.float32)


# --------------------------------------------------------------------------------------------
# Naming plan (pure Python)


def test_split_scope_torch_and_tf_styles():
    assert split_scope("/encoder/layer.0/attention/self/query/MatMul") == (
        ("encoder", "layer.0", "attention", "self", "query"), "MatMul")
    assert split_scope("model/conv/Conv2D") == (("model", "conv"), "Conv2D")
    assert split_scope("/Cast_1") == ((), "Cast_1")
    assert split_scope("Relu_3") == ((), "Relu_3")
    assert split_scope("") == ((), "")


def test_plan_names_last_node_of_each_scope_takes_the_module_path():
    nodes = [
        NodeInfo("/enc/layer.0/fc/MatMul", "MatMul", ("a",)),
        NodeInfo("/enc/layer.0/fc/Add", "Add", ("b",)),
        NodeInfo("/enc/layer.0/Constant", "Constant", ("c",)),
        NodeInfo("/enc/layer.0/norm/LayerNormalization", "LayerNormalization", ("d",)),
        NodeInfo("/Shape", "Shape", ("e",)),
        NodeInfo("/head/Split", "Split", ("f0", "f1")),
        NodeInfo("", "Relu", ("g",)),
    ]
    plan = plan_names(nodes, skip={"c"}, graph_outputs=["f1", "g"])
    got = {e.tensor: (e.records(), e.module_output) for e in plan}
    assert "c" not in got  # Constant outputs are weights, never recorded
    assert got["a"] == ([("enc.layer.0.fc.MatMul", 0)], False)
    assert got["b"] == ([("enc.layer.0.fc", 0)], True)
    # The norm ends layer.0 and enc as well: innermost first, as forward hooks fire.
    assert got["d"] == ([("enc.layer.0.norm", 0), ("enc.layer.0", 0), ("enc", 0)], True)
    assert got["e"] == ([("Shape", 0)], False)
    # A two-output last node: the module's outputs 0 and 1; graph output k is <root> output k.
    assert got["f0"] == ([("head", 0)], True)
    assert got["f1"] == ([("head", 1), ("<root>", 0)], True)
    # An unnamed node is named after its output.
    assert got["g"] == ([("g", 0), ("<root>", 1)], False)
    assert [e.tensor for e in plan] == ["a", "b", "d", "e", "f0", "f1", "g"]


def test_plan_names_dequantized_gather_carries_the_module_but_qdq_plumbing_does_not():
    nodes = [
        # quantize_dynamic: a Gather of uint8 weights, then its DequantizeLinear: the float value.
        NodeInfo("/emb/Gather", "Gather", ("g_q",), inputs=("w_q", "ids")),
        NodeInfo("/emb/Gather_output_0_DequantizeLinear", "DequantizeLinear", ("g",),
                 inputs=("g_q", "s", "z")),
        # static QDQ: a float op, then Q -> DQ of its output: the float op stays the module's.
        NodeInfo("/fc/MatMul", "MatMul", ("m",), inputs=("g", "w")),
        NodeInfo("/fc/MatMul_output_0_QuantizeLinear", "QuantizeLinear", ("m_q",), inputs=("m", "s", "z")),
        NodeInfo("/fc/MatMul_output_0_DequantizeLinear", "DequantizeLinear", ("m_dq",),
                 inputs=("m_q", "s", "z")),
    ]
    got = {e.tensor: (e.records(), e.module_output) for e in plan_names(nodes, root_name=None)}
    assert got["g"] == ([("emb", 0)], True)
    assert got["g_q"] == ([("emb.Gather", 0)], False)
    assert got["m"] == ([("fc", 0)], True)
    assert got["m_dq"][1] is False and got["m_q"][1] is False


def test_plan_names_never_reuses_a_name():
    nodes = [
        NodeInfo("/a/b", "Relu", ("x",)),      # node-derived "a.b"
        NodeInfo("/a/b/Relu", "Relu", ("y",)),  # module "a.b" (and "a")
        NodeInfo("dup", "Relu", ("z1",)),
        NodeInfo("dup", "Relu", ("z2",)),
    ]
    plan = plan_names(nodes, root_name=None)
    names = [n for e in plan for n, _ in e.records()]
    assert len(names) == len(set(names)), names
    by = {e.tensor: e.records() for e in plan}
    assert by["y"] == [("a.b", 0), ("a", 0)]
    assert by["x"] == [("a.b#1", 0)]
    assert by["z1"] == [("dup", 0)] and by["z2"] == [("dup#1", 0)]


# --------------------------------------------------------------------------------------------
# Small hand-built graphs


def scoped_model(shuffle: bool = False) -> "onnx.ModelProto":
    """X[n,4] -> block.fc (MatMul+Add) -> block.act (Relu) -> head (Split in 2) -> Y0, Y1 and
    a Constant-scaled copy: Z = Y1 * 2."""
    nodes = [
        helper.make_node("MatMul", ["X", "W1"], ["mm"], name="/block/fc/MatMul"),
        helper.make_node("Add", ["mm", "B1"], ["fc"], name="/block/fc/Add"),
        helper.make_node("Relu", ["fc"], ["act"], name="/block/act/Relu"),
        helper.make_node("Constant", [], ["split_sizes"], name="/head/Constant",
                         value=numpy_helper.from_array(np.array([2, 4], np.int64))),
        helper.make_node("Split", ["act", "split_sizes"], ["Y0", "Y1"], name="/head/Split", axis=1),
        helper.make_node("Constant", [], ["two"], name="Constant_9",
                         value=numpy_helper.from_array(np.array(2.0, np.float32))),
        helper.make_node("Mul", ["Y1", "two"], ["Z"], name="/Mul"),
    ]
    if shuffle:
        nodes = [nodes[i] for i in (6, 2, 0, 4, 1, 5, 3)]
    graph = helper.make_graph(
        nodes, "scoped",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("Y0", TensorProto.FLOAT, ["n", 2]),
         helper.make_tensor_value_info("Z", TensorProto.FLOAT, ["n", 4])],
        [numpy_helper.from_array(W1, "W1"), numpy_helper.from_array(B1, "B1")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def numpy_forward(x):
    fc = x @ W1 + B1
    act = np.maximum(fc, 0)
    return {"block.fc.MatMul": x @ W1, "block.fc": fc, "block.act": act, "block": act,
            "head": act[:, :2], "Mul": act[:, 2:] * 2}


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "scoped.onnx"
    onnx.save(scoped_model(), str(path))
    return path


def test_record_names_values_order_and_metadata(model_file, tmp_path):
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    out = tmp_path / "run.tdump"
    rec = dort.record(model_file, {"X": x}, out)
    assert rec.observer_effect == "none"
    assert set(rec.outputs) == {"Y0", "Z"}

    dump = driftscope.open(out)
    assert dump.finished
    ids = [(r.name, r.role_index) for r in dump]
    assert ids == [("block.fc.MatMul", 0), ("block.fc", 0), ("block.act", 0), ("block", 0),
                   ("head", 0), ("<root>", 0), ("head", 1), ("Mul", 0), ("<root>", 1)]
    assert rec.records == len(ids)
    exec_idx = [r.exec_index for r in dump]
    assert exec_idx == sorted(exec_idx)
    ref = numpy_forward(x)
    for name in ("block.fc.MatMul", "block.fc", "block.act", "block", "head", "Mul"):
        np.testing.assert_allclose(dump[name], ref[name], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(dump.get("head", role_index=1), ref["block.act"][:, 2:], rtol=1e-6)
    r = dump.record("block.fc")
    assert r.op_type == "Add" and r.dtype == "f32" and r.shape == (3, 6)
    attrs = dict(r.attrs)
    assert attrs["onnx_node"] == "/block/fc/Add" and attrs["onnx_output"] == "fc"
    assert dump.record("head", role_index=1).op_type == "Split"
    meta = dump.metadata
    assert meta["framework"] == f"onnxruntime {ort.__version__}"
    assert meta["backend"] == "onnxruntime:CPUExecutionProvider"
    assert meta["observer_effect"] == "none"
    assert meta["precision"] == "float32"
    assert meta["model"] == "scoped.onnx"


def test_metadata_names_the_provider_that_ran(model_file, tmp_path):
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("CUDA is available here: nothing falls back")
    with pytest.warns(UserWarning, match="CUDAExecutionProvider"):
        rec = dort.record(model_file, {"X": np.ones((1, 4), np.float32)}, tmp_path / "p.tdump",
                          providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    meta = driftscope.open(tmp_path / "p.tdump").metadata
    assert meta["backend"] == "onnxruntime:CPUExecutionProvider" == rec.metadata["backend"]
    assert meta["providers"] == "CPUExecutionProvider"


def test_values_computed_from_weights_alone_are_not_recorded():
    nodes = [
        helper.make_node("Identity", ["W1"], ["w_copy"], name="Identity_0"),
        helper.make_node("Constant", [], ["c"], name="/m/Constant",
                         value=numpy_helper.from_array(np.array(2.0, np.float32))),
        helper.make_node("Mul", ["w_copy", "c"], ["w2"], name="/m/Mul"),
        helper.make_node("RandomNormal", [], ["noise"], name="/m/RandomNormal", shape=[4, 6]),
        helper.make_node("MatMul", ["X", "w2"], ["y0"], name="/m/MatMul"),
        helper.make_node("Add", ["y0", "noise"], ["Y"], name="/m/Add"),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4, 4])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [4, 6])],
                              [numpy_helper.from_array(W1, "W1")])
    plan = dort._plan(helper.make_model(graph))
    assert [e.tensor for e in plan] == ["noise", "y0", "Y"]
    assert plan[-1].records() == [("m", 0), ("<root>", 0)]


def test_unsorted_graph_is_recorded_in_topological_order(tmp_path):
    path = tmp_path / "shuffled.onnx"
    onnx.save(scoped_model(shuffle=True), str(path))
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    # ONNX Runtime itself refuses unsorted graphs only when the checker runs; ours sorts anyway.
    plan = dort._plan(onnx.load(str(path)))
    assert [e.tensor for e in plan] == ["mm", "fc", "act", "Y0", "Y1", "Z"]
    try:
        dort.record(path, {"X": x}, tmp_path / "s.tdump")
    except dort.ModelLoadError:
        pytest.skip("this ONNX Runtime rejects unsorted graphs")
    names = [r.name for r in driftscope.open(tmp_path / "s.tdump")]
    assert names.index("block.fc") < names.index("block.act") < names.index("head")


def test_meta_filter_and_summary(model_file, tmp_path):
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    out = tmp_path / "f.tdump"
    rec = dort.record(model_file, [x], out, filter="block*", summary="block.fc",
                      meta={"device": "laptop", "seed": 7})
    dump = driftscope.open(out)
    assert [r.name for r in dump] == ["block.fc.MatMul", "block.fc", "block.act", "block"]
    assert rec.records == 4
    kinds = {r.name: r.kind for r in dump}
    assert kinds["block.fc"] == "summary" and kinds["block.act"] == "tensor"
    assert kinds["block.fc.MatMul"] == "tensor"  # the summary filter matched one name exactly
    assert dump.metadata["device"] == "laptop" and dump.metadata["seed"] == "7"


def test_filter_leaves_unwanted_values_inside_the_graph(model_file, tmp_path, monkeypatch):
    exposed = []
    real = dort._with_outputs

    def spy(proto, names, numpyless):
        exposed.extend(names)
        return real(proto, names, numpyless)

    monkeypatch.setattr(dort, "_with_outputs", spy)
    dort.record(model_file, {"X": np.ones((1, 4), np.float32)}, tmp_path / "h.tdump", filter="head")
    assert exposed == ["Y0", "Y1"]


def test_fp16_conversion_keeps_io_types_and_records_float16(model_file, tmp_path):
    x = RNG.standard_normal((4, 4)).astype(np.float32)
    rec32 = dort.record(model_file, {"X": x}, tmp_path / "a.tdump")
    rec16 = dort.record(model_file, {"X": x}, tmp_path / "b.tdump", fp16=True)
    assert rec16.outputs["Z"].dtype == np.float32  # I/O types kept
    d16 = driftscope.open(tmp_path / "b.tdump")
    assert d16.record("block.fc").dtype == "f16"
    assert d16.metadata["precision"] == "float16"
    np.testing.assert_allclose(d16["block.fc"].astype(np.float32),
                               driftscope.open(tmp_path / "a.tdump")["block.fc"], rtol=5e-3,
                               atol=5e-3)
    assert not np.array_equal(rec16.outputs["Z"], rec32.outputs["Z"])


def test_fp16_of_a_graph_output_that_is_also_consumed(tmp_path):
    # onnxconverter-common mistypes a graph output that other nodes read; we isolate it.
    nodes = [helper.make_node("Relu", ["X"], ["H"], name="/a/Relu"),
             helper.make_node("Neg", ["H"], ["Y"], name="/b/Neg")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("H", TensorProto.FLOAT, [2]),
                               helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    rec = dort.record(model, {"X": np.array([-1.0, 2.5], np.float32)}, tmp_path / "o.tdump",
                      fp16=True)
    np.testing.assert_array_equal(rec.outputs["H"], [0.0, 2.5])
    np.testing.assert_array_equal(rec.outputs["Y"], [0.0, -2.5])
    dump = driftscope.open(tmp_path / "o.tdump")
    assert dump.record("a").dtype == "f16" and "b" in dump


def streaming_model(celu: bool = False):
    """A small streaming model like real keyword spotters and speech front ends: the state comes
    in and goes out as float32 tensors, a frame counter is an int64 cast to float, a float32
    value is cast to float again, an If picks a branch that casts, a Loop carries a float state
    with a cast inside. onnxconverter-common declares every Cast(to=FLOAT) output float16 but
    keeps the cast producing float32: ONNX Runtime refuses the converted graph (bug 19).
    `celu`: add a Celu, an op ONNX defines for float32 only, which cannot be converted."""
    F = TensorProto.FLOAT
    then = helper.make_graph([helper.make_node("Cast", ["x"], ["t"], to=F)], "then", [],
                             [helper.make_tensor_value_info("t", F, [1, 4])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", F, [1, 4])])
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c2"]),
         helper.make_node("Cast", ["i"], ["fi"], to=F),
         helper.make_node("Add", ["s", "fi"], ["s2"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s", F, [1, 4])],
        [helper.make_tensor_value_info("c2", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s2", F, [1, 4])])
    nodes = [
        helper.make_node("Cast", ["step"], ["step_f"], to=F),  # unnamed, as exporters leave them
        helper.make_node("Add", ["x", "state"], ["mixed"], name="/frontend/Add"),
        helper.make_node("Cast", ["mixed"], ["mixed_f"], name="/frontend/Cast", to=F),
        helper.make_node("Mul", ["mixed_f", "step_f"], ["scaled"], name="/frontend/Mul"),
        helper.make_node("If", ["flag"], ["branch"], name="/gate/If", then_branch=then,
                         else_branch=other),
        helper.make_node("Loop", ["trips", "", "scaled"], ["looped"], name="/acc/Loop", body=body),
        helper.make_node("Add", ["looped", "branch"], ["new_state"], name="/state/Add"),
        helper.make_node("MatMul", ["new_state", "W"], ["out"], name="/head/MatMul"),
    ]
    if celu:
        nodes[-1].output[0] = "pre"
        nodes.append(helper.make_node("Celu", ["pre"], ["out"], name="/head/Celu"))
    graph = helper.make_graph(
        nodes, "streaming",
        [helper.make_tensor_value_info("x", F, [1, 4]),
         helper.make_tensor_value_info("state", F, [1, 4]),
         helper.make_tensor_value_info("step", TensorProto.INT64, [1, 1]),
         helper.make_tensor_value_info("flag", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("out", F, [1, 3]),
         helper.make_tensor_value_info("new_state", F, [1, 4])],
        [numpy_helper.from_array(RNG.standard_normal((4, 3)).astype(np.float32), "W"),
         numpy_helper.from_array(np.array(2, np.int64), "trips")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


STREAM_FEEDS = {"x": np.array([[0.5, -1.0, 2.0, 0.25]], np.float32),
                "state": np.array([[1.0, 0.5, -0.5, 0.0]], np.float32),
                "step": np.array([[3]], np.int64), "flag": np.array(True)}


def test_fp16_of_a_streaming_model_with_casts_loads_and_records(tmp_path):
    import warnings

    model = streaming_model()
    ref = dort.record(model, STREAM_FEEDS, tmp_path / "f32.tdump")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing had to be kept in float32
        rec = dort.record(model, STREAM_FEEDS, tmp_path / "f16.tdump", fp16=True)
    for name in ("out", "new_state"):
        assert rec.outputs[name].dtype == np.float32
        np.testing.assert_allclose(rec.outputs[name], ref.outputs[name], rtol=2e-3, atol=2e-3)
    dump = driftscope.open(tmp_path / "f16.tdump")
    assert dump.finished and "fp16_kept_float32" not in dump.metadata
    # The casts produce float16 now, as the rest of the converted graph expects.
    assert dump.record("frontend.Cast").dtype == "f16"
    assert dump.record("step_f").dtype == "f16"  # the unnamed Cast of the int64 counter
    assert dump.record("state").dtype == "f16"
    report = driftscope.compare(tmp_path / "f32.tdump", tmp_path / "f16.tdump")
    assert report.verdict == "pass", report.to_text()
    # A valid ONNX file too: the casts added for values the If and Loop bodies read come
    # before those nodes.
    onnx.checker.check_model(dort.to_float16(model))


def test_fp16_keeps_in_float32_what_cannot_be_converted_and_says_so(tmp_path):
    model = streaming_model(celu=True)
    ref = dort.record(model, STREAM_FEEDS, tmp_path / "f32.tdump")
    with pytest.warns(RuntimeWarning, match=r"kept 1 node\(s\) in float32 .*: /head/Celu$"):
        rec = dort.record(model, STREAM_FEEDS, tmp_path / "f16.tdump", fp16=True)
    np.testing.assert_allclose(rec.outputs["out"], ref.outputs["out"], rtol=2e-3, atol=2e-3)
    dump = driftscope.open(tmp_path / "f16.tdump")
    assert dump.metadata["fp16_kept_float32"] == "/head/Celu"
    celu = dump.record("head")  # the scope's last node: its module name
    assert celu.op_type == "Celu" and celu.dtype == "f32"
    assert dump.record("head.MatMul").dtype == "f16"
    # The public converter warns the same way and gives a loadable model.
    with pytest.warns(RuntimeWarning, match="/head/Celu"):
        converted = dort.to_float16(model)
    ort.InferenceSession(converted.SerializeToString(), providers=["CPUExecutionProvider"])
    # From the command line: a one-line warning naming the node, exit 0.
    for k, v in STREAM_FEEDS.items():
        np.save(tmp_path / f"{k}.npy", v)
    onnx.save(model, str(tmp_path / "m.onnx"))
    proc = subprocess.run(
        [sys.executable, "-m", "driftscope", "record", "onnx", str(tmp_path / "m.onnx"), "--fp16",
         *[a for k in STREAM_FEEDS for a in ("--input", f"{k}={tmp_path / (k + '.npy')}")],
         "-o", str(tmp_path / "cli.tdump")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert ("driftscope record onnx: warning: float16 conversion kept 1 node(s) in float32 "
            "(converted, ONNX Runtime cannot load them): /head/Celu\n") in proc.stderr


def test_fp16_conversion_that_cannot_be_repaired_names_the_problem(tmp_path, monkeypatch):
    # A converter that breaks a node beyond what keeping nodes in float32 can mend: the error
    # says so and quotes ONNX Runtime's reason with the node's name, not a traceback.
    real = dort._match_dtype_attributes

    def breaks_head(proto):
        real(proto)
        for node in proto.graph.node:
            if node.name == "/head/MatMul":
                node.input[1] = "no_such_value"
    monkeypatch.setattr(dort, "_match_dtype_attributes", breaks_head)
    with pytest.raises(dort.ModelLoadError, match=r"float16 conversion .*cannot load.*"
                                                  r"(/head/MatMul|no_such_value)"):
        dort.record(streaming_model(), STREAM_FEEDS, tmp_path / "x.tdump", fp16=True)


def test_external_data_model(tmp_path):
    model = scoped_model()
    folder = tmp_path / "ext"
    folder.mkdir()
    onnx.save_model(model, str(folder / "m.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    assert (folder / "weights.bin").is_file()
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    # With the caller's SessionOptions too (both sessions share them).
    dort.record(folder / "m.onnx", {"X": x}, tmp_path / "e.tdump",
                session_options=ort.SessionOptions())
    np.testing.assert_allclose(driftscope.open(tmp_path / "e.tdump")["block.fc"],
                               numpy_forward(x)["block.fc"], rtol=1e-6, atol=1e-6)


def test_non_tensor_values_are_skipped_and_counted(tmp_path):
    nodes = [helper.make_node("Relu", ["X"], ["r"], name="/m/Relu"),
             helper.make_node("SequenceConstruct", ["r", "X"], ["seq"], name="/m/Seq"),
             helper.make_node("SequenceAt", ["seq", "zero"], ["Y"], name="/At")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(np.array(0, np.int64), "zero")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    rec = dort.record(model, {"X": np.array([-1, 0, 1], np.float32)}, tmp_path / "s.tdump")
    assert rec.skipped == ["seq"]
    names = [r.name for r in driftscope.open(tmp_path / "s.tdump")]
    assert "m.Relu" in names and "At" in names and "m" not in names


def test_bfloat16_values_numpy_cannot_hold_are_recorded_as_bf16(tmp_path):
    # ONNX Runtime's Python API refuses to return bfloat16 outputs; the recorder fetches them
    # through an exact Cast to float32 and writes them back as bf16.
    nodes = [helper.make_node("Cast", ["X"], ["xb"], name="/enc/Cast", to=TensorProto.BFLOAT16),
             helper.make_node("Identity", ["xb"], ["sq"], name="/enc/Identity"),
             helper.make_node("Cast", ["sq"], ["Y"], name="/Cast", to=TensorProto.FLOAT)]
    graph = helper.make_graph(nodes, "bf16", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3]),
                               helper.make_tensor_value_info("sq", TensorProto.BFLOAT16, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    x = np.array([1.5, -2.25, 3.1], np.float32)
    rec = dort.record(model, {"X": x}, tmp_path / "b.tdump")
    dump = driftscope.open(tmp_path / "b.tdump")
    assert dump.record("enc.Cast").dtype == "bf16" and dump.record("enc").dtype == "bf16"
    xb = np.array([1.5, -2.25, 3.09375], np.float32)  # 3.1 rounded to 8 significant bits
    np.testing.assert_array_equal(dump.get("enc.Cast", dtype="float32"), xb)
    np.testing.assert_array_equal(dump.get("<root>", role_index=1, dtype="float32"),
                                  dump.get("enc", dtype="float32"))
    assert rec.observer_effect == "none"  # Y compared; the bf16 output cannot be fetched plainly


def test_observer_check_can_be_skipped(model_file, tmp_path):
    rec = dort.record(model_file, {"X": np.ones((1, 4), np.float32)}, tmp_path / "n.tdump",
                      check_observer=False)
    assert rec.observer_effect == "not checked"
    assert "observer_effect" not in driftscope.open(tmp_path / "n.tdump").metadata


def test_observer_effect_text():
    a = {"y": np.array([1.0, np.nan], np.float32), "i": np.array([1, 2])}
    assert dort._observer_effect(a, {k: v.copy() for k, v in a.items()}) == "none"
    b = {"y": np.array([1.5, np.nan], np.float32), "i": np.array([1, 3])}
    text = dort._observer_effect(a, b)
    assert text.startswith("outputs differ") and "y: max_abs_diff=0.5" in text
    assert "i: 1 elements differ" in text


# --------------------------------------------------------------------------------------------
# Bad input: one clear message naming what was expected


def test_missing_model_file(tmp_path):
    with pytest.raises(dort.ModelLoadError, match="no such file"):
        dort.record(tmp_path / "nope.onnx", {}, tmp_path / "x.tdump")


def test_garbage_model_file(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\x01 this is not a protobuf \xff" * 20)
    with pytest.raises(dort.ModelLoadError, match="bad.onnx"):
        dort.record(bad, {}, tmp_path / "x.tdump")
    assert not (tmp_path / "x.tdump").exists()


def test_model_onnxruntime_cannot_load(tmp_path):
    graph = helper.make_graph([helper.make_node("NoSuchOp", ["X"], ["Y"], name="n")], "g",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with pytest.raises(dort.ModelLoadError, match="ONNX Runtime cannot load"):
        dort.record(model, {"X": np.zeros(1, np.float32)}, tmp_path / "x.tdump")


def test_input_errors_name_the_input_and_the_expected_shape(model_file, tmp_path):
    out = tmp_path / "x.tdump"
    with pytest.raises(dort.InputMismatchError,
                       match=r"input 'X' has shape \(3, 5\), the model expects float \[n, 4\]"):
        dort.record(model_file, {"X": np.zeros((3, 5), np.float32)}, out)
    with pytest.raises(dort.InputMismatchError, match=r"input 'X' has shape \(4,\)"):
        dort.record(model_file, {"X": np.zeros(4, np.float32)}, out)
    with pytest.raises(dort.InputMismatchError, match=r"input 'X' has dtype float64"):
        dort.record(model_file, {"X": np.zeros((1, 4))}, out)
    with pytest.raises(dort.InputMismatchError, match=r"missing input 'X': expected float \[n, 4\]"):
        dort.record(model_file, {}, out)
    with pytest.raises(dort.InputMismatchError, match=r"unknown input 'x'; the model's inputs are: X"):
        dort.record(model_file, {"x": np.zeros((1, 4), np.float32)}, out)
    assert isinstance(dort.InputMismatchError("m"), (ValueError, driftscope.Error))
    assert not out.exists()


def test_run_failure_is_reported(tmp_path):
    # Reshape to a shape whose element count does not match: fails only at run time.
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["X", "S"], ["Y"], name="/r/Reshape")], "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["n"]),
         helper.make_tensor_value_info("S", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with pytest.raises(dort.ModelRunError, match="ONNX Runtime failed to run"):
        dort.record(model, {"X": np.zeros(6, np.float32), "S": np.array([4], np.int64)},
                    tmp_path / "x.tdump")


# --------------------------------------------------------------------------------------------
# Command line


def test_cli_main(model_file, tmp_path, capsys):
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "cli.tdump"
    rc = dort.cli_main([str(model_file), "--input", f"X={tmp_path / 'x.npy'}", "-o", str(out),
                        "--filter", "block.*", "--meta", "device=ci"])
    assert rc == 0, capsys.readouterr().err
    dump = driftscope.open(out)
    assert [r.name for r in dump] == ["block.fc.MatMul", "block.fc", "block.act"]
    assert dump.metadata["device"] == "ci"
    np.savez(tmp_path / "in.npz", X=x)
    rc = dort.cli_main([str(model_file), "--input", str(tmp_path / "in.npz"), "-o", str(out),
                        "--fp16"])
    assert rc == 0
    assert driftscope.open(out).record("block.fc").dtype == "f16"


def test_cli_errors_are_one_line_with_exit_code_2(model_file, tmp_path, capsys):
    np.save(tmp_path / "bad.npy", np.zeros((2, 3), np.float32))
    rc = dort.cli_main([str(model_file), "--input", f"X={tmp_path / 'bad.npy'}",
                        "-o", str(tmp_path / "o.tdump")])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and "input 'X' has shape (2, 3)" in err and "[n, 4]" in err
    rc = dort.cli_main([str(model_file), "--input", "X", "-o", str(tmp_path / "o.tdump")])
    assert rc == 2 and "no such file" in capsys.readouterr().err
    rc = dort.cli_main([str(model_file), "--input", f"X={tmp_path / 'bad.npy'}",
                        "-o", str(tmp_path / "o.tdump"), "--filter", "rank<<"])
    assert rc == 2 and "rank<<" in capsys.readouterr().err


def test_python_m_driftscope_record_onnx(model_file, tmp_path):
    np.save(tmp_path / "x.npy", np.ones((1, 4), np.float32))
    out = tmp_path / "m.tdump"
    proc = subprocess.run(
        [sys.executable, "-m", "driftscope", "record", "onnx", str(model_file),
         "--input", f"X={tmp_path / 'x.npy'}", "-o", str(out)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "block.fc" in driftscope.open(out)


# --------------------------------------------------------------------------------------------
# Alignment with driftscope.torch on a small exported model (the MiniLM test does it at scale)


def test_exported_torch_model_lines_up_with_the_torch_dump(tmp_path):
    torch = pytest.importorskip("torch")
    import driftscope.torch as dt

    class Block(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.norm = torch.nn.LayerNorm(d)
            self.fc = torch.nn.Linear(d, d)
            self.act = torch.nn.GELU()

        def forward(self, x):
            return x + self.act(self.fc(self.norm(x)))

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([Block(8), Block(8)])
            self.head = torch.nn.Linear(8, 3)

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return self.head(x)

    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(4, 8)
    with torch.no_grad(), dt.record(net, tmp_path / "torch.tdump"):
        net(x)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(net, (x,), str(tmp_path / "net.onnx"), input_names=["x"],
                          output_names=["y"], dynamo=False, opset_version=17)
    dort.record(tmp_path / "net.onnx", {"x": x.numpy()}, tmp_path / "ort.tdump")
    report = driftscope.compare(tmp_path / "torch.tdump", tmp_path / "ort.tdump",
                                allow_unpaired=True)
    # Same names, same tensors, no map: every module PyTorch recorded has its ONNX value.
    assert report.verdict == "pass", report.to_text(all=True)
    assert not report.only_in_reference
    names = {t.name for t in report.tensors}
    # Only ONNX has the inside of a module: opset 17 spells GELU as Div, Erf, Add, Mul, Mul, the
    # last of which is the module's output.
    extra = {t["name"] for t in report.only_in_candidate}
    assert extra == {f"blocks.{i}.act.{op}" for i in (0, 1)
                     for op in ("Div", "Erf", "Add", "Mul")}, extra
    assert names == {"blocks.0.norm", "blocks.0.fc", "blocks.0.act", "blocks.0",
                     "blocks.1.norm", "blocks.1.fc", "blocks.1.act", "blocks.1", "head", "<root>"}
    assert max(t.rel_l2 for t in report.tensors) < 1e-5
