"""Replay on ONNX models (issue 26): graph surgery (driftscope._guard.surgery.onnx) run on the
guard's real ONNX backends (ONNX Runtime float32 / float16 / INT8, OpenVINO)."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto as T, helper, numpy_helper  # noqa: E402

from driftscope._replay.mechanism import CannotReplay, UnknownTensor  # noqa: E402
from driftscope._replay.onnx import OnnxReplayable, isolate, relative_error  # noqa: E402
from driftscope._guard.surgery.onnx import Surgeon  # noqa: E402

RNG = np.random.default_rng(26)
W1 = RNG.standard_normal((8, 16)).astype(np.float32)
W2 = RNG.standard_normal((16, 4)).astype(np.float32)
FEEDS = {"x": RNG.standard_normal((2, 8)).astype(np.float32)}


def _save(graph, path, opset=17):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, str(path))
    return str(path)


def _mlp(path, w1=W1):
    """x -> l1 (MatMul, Relu) -> l2 (MatMul) -> out (Mul 0.5) -> y; recorded names l1.MatMul,
    l1, l2, out."""
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"], name="/l1/MatMul"),
             helper.make_node("Relu", ["h"], ["r"], name="/l1/Relu"),
             helper.make_node("MatMul", ["r", "W2"], ["m"], name="/l2/MatMul"),
             helper.make_node("Mul", ["m", "c"], ["y"], name="/out/Mul")]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", T.FLOAT, [2, 8])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [2, 4])],
                          initializer=[numpy_helper.from_array(w1, "W1"),
                                       numpy_helper.from_array(W2, "W2"),
                                       numpy_helper.from_array(np.float32(0.5), "c")])
    return _save(g, path)


@pytest.fixture
def mlp(tmp_path):
    return _mlp(tmp_path / "mlp.onnx")


def _need(backend):
    from driftscope._guard.backends.registry import BACKENDS

    why = BACKENDS[backend].unavailable()
    if why:
        pytest.skip(f"{backend}: {why}")


def test_names_are_the_recorders(mlp):
    r = OnnxReplayable(mlp, "ort")
    try:
        assert r.tensors() == ["l1.MatMul", "l1", "l2", "out"]
        assert r.outputs() == ["y"]
        # a raw ONNX value name and a node name reach the same tensor
        assert r.resolve("m") == r.resolve("/l2/MatMul") == r.resolve("l2") == "m"
    finally:
        r.close()


def test_replay_before_the_output_is_bit_exact_on_ort(mlp):
    ref, cand = OnnxReplayable(mlp, "ort"), OnnxReplayable(mlp, "ort")
    try:
        want = ref.capture(FEEDS, ["l2"])
        got = cand.run(FEEDS, replace={"l2": want["l2"]})
        assert list(got) == ["y"]
        assert np.array_equal(got["y"], ref.run(FEEDS)["y"])
        # the cut is really a cut: a different value at l2 gives a different output
        other = cand.run(FEEDS, replace={"l2": want["l2"] + 1})["y"]
        assert np.allclose(other, want["y"] + 0.5)
    finally:
        ref.close()
        cand.close()


@pytest.mark.parametrize("backend", ["ort-fp16", "ort-int8", "openvino", "ort-fp16-exact"])
def test_replay_before_the_output_on_each_variant(mlp, backend):
    _need(backend)
    ref, cand = OnnxReplayable(mlp, "ort"), OnnxReplayable(mlp, backend)
    try:
        want = ref.capture(FEEDS, ["l2"])
        plain = np.abs(cand.run(FEEDS)["y"] - want["y"]).max()
        replayed = np.abs(cand.run(FEEDS, replace={"l2": want["l2"]})["y"] - want["y"]).max()
        if backend in ("ort-int8", "openvino"):
            # what is left after l2 (a Mul by 0.5) is exact on both: only l2's error was there
            assert replayed == 0.0
        else:
            # float16: the substituted value and the Mul rounded to float16, nothing inherited
            assert replayed <= np.abs(want["y"]).max() * 2 ** -10
        if backend == "ort-int8":
            assert plain > 1e-3
        assert replayed <= plain
        assert any(n.startswith("l2: substituted as float32") for n in cand.notes), cand.notes
    finally:
        ref.close()
        cand.close()


def test_fault_output_replay_op_replay_and_isolation(tmp_path):
    """The candidate is the model with l1.MatMul's weight perturbed (a port with one faulted
    op): output replay at it removes the output error, op replay says l1.MatMul introduced its
    error and the nodes after it inherited theirs."""
    good = _mlp(tmp_path / "good.onnx")
    w = W1.copy()
    w[0, :] += 0.5
    bad = _mlp(tmp_path / "bad.onnx", w)
    ref, cand = OnnxReplayable(good, "ort"), OnnxReplayable(bad, "ort")
    try:
        want = ref.capture(FEEDS, ["l1.MatMul", "l2"])
        before = relative_error(cand.run(FEEDS)["y"], want["y"])
        after = relative_error(cand.run(FEEDS, replace={"l1.MatMul": want["l1.MatMul"]})["y"],
                               want["y"])
        assert before > 0.01
        assert after <= 0.01 * before
        own = cand.run_op("l1.MatMul", ref.op_inputs(FEEDS, "l1.MatMul"))
        assert relative_error(own, want["l1.MatMul"]) > 0.01  # introduced
        down = cand.run_op("l2", ref.op_inputs(FEEDS, "l2"))
        assert relative_error(down, want["l2"]) < 1e-6        # inherited
        scan = isolate(ref, cand, FEEDS)
        rows = {r.name: r for r in scan.rows}
        assert [r.name for r in scan.rows] == ["l1.MatMul", "l1", "l2", "out"]
        assert rows["l1.MatMul"].own > 0.01
        assert all(rows[n].own < 1e-6 and rows[n].plain > 0.01 for n in ("l1", "l2", "out"))
        capped = isolate(ref, cand, FEEDS, limit=2)
        assert len(capped.rows) == 2 and capped.left_out == 2
        assert "2 node(s) after the first 2" in capped.notes[0]
    finally:
        ref.close()
        cand.close()


def test_float16_overflow_replayed_on_ort_fp16_exact(tmp_path):
    """A Mul whose value overflows float16 (3e5 > 65504) then is scaled back: NaN/Inf on
    float16 arithmetic. Replaying the reference's value after it makes the output finite; op
    replay says the Mul introduced it and the normalisation after the scale inherited it."""
    _need("ort-fp16-exact")
    nodes = [helper.make_node("Mul", ["x", "k"], ["big"], name="/big/Mul"),
             helper.make_node("Div", ["big", "k"], ["small"], name="/scale/Div"),
             helper.make_node("ReduceMean", ["small"], ["mean"], name="/norm/ReduceMean",
                              axes=[-1]),
             helper.make_node("Sub", ["small", "mean"], ["y"], name="/norm/Sub")]
    g = helper.make_graph(nodes, "overflow", [helper.make_tensor_value_info("x", T.FLOAT, [2, 8])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [2, 8])],
                          initializer=[numpy_helper.from_array(np.float32(1e4), "k")])
    path = _save(g, tmp_path / "overflow.onnx", opset=17)
    feeds = {"x": (RNG.standard_normal((2, 8)) * 30).astype(np.float32)}
    ref, cand = OnnxReplayable(path, "ort"), OnnxReplayable(path, "ort-fp16-exact")
    try:
        want = ref.capture(feeds, ["scale"])
        plain = cand.run(feeds)["y"]
        assert not np.all(np.isfinite(plain))
        fixed = cand.run(feeds, replace={"scale": want["scale"]})["y"]
        assert np.all(np.isfinite(fixed))
        assert relative_error(fixed, want["y"]) < 1e-2
        own = cand.run_op("big", ref.op_inputs(feeds, "big"))
        assert not np.all(np.isfinite(own))                      # introduced
        down = cand.run_op("norm.ReduceMean", ref.op_inputs(feeds, "norm.ReduceMean"))
        assert relative_error(down, ref.capture(feeds, ["norm.ReduceMean"])["norm.ReduceMean"]) < 1e-2
    finally:
        ref.close()
        cand.close()


MINILM_MATMUL = "encoder.layer.0.attention.self.query.MatMul"


@pytest.fixture(scope="module")
def minilm_feeds(bert):
    _, ids, mask = bert
    return {"input_ids": ids.numpy().astype(np.int64),
            "attention_mask": mask.numpy().astype(np.int64)}


def test_minilm_matmul_alone_on_ort_and_ort_int8(minilm_onnx, minilm_feeds):
    _need("ort-int8")
    ref, int8 = OnnxReplayable(str(minilm_onnx), "ort"), OnnxReplayable(str(minilm_onnx), "ort-int8")
    try:
        assert MINILM_MATMUL in ref.tensors()
        want = ref.capture(minilm_feeds, [MINILM_MATMUL])[MINILM_MATMUL]
        inputs = ref.op_inputs(minilm_feeds, MINILM_MATMUL)
        assert [a is not None for a in inputs.args] == [True, False]  # the weight stays inside
        alone = ref.run_op(MINILM_MATMUL, inputs)
        # the one-node model computes the whole model's value up to float32 rounding
        assert np.abs(alone - want).max() <= 64 * np.finfo(np.float32).eps * np.abs(want).max()
        got = int8.run_op(MINILM_MATMUL, inputs)
        assert any("alone: int8 nodes:" in n and "MatMulInteger" in n for n in int8.notes), int8.notes
        err = relative_error(got, want)
        assert 1e-4 < err < 0.1  # INT8's own error, and only that
        # the cut quantizes as the whole model does: fed the INT8 model's own inputs, the INT8
        # one-node model gives the INT8 model's value at that tensor
        whole = int8.capture(minilm_feeds, [MINILM_MATMUL])[MINILM_MATMUL]
        same = int8.run_op(MINILM_MATMUL, int8.op_inputs(minilm_feeds, MINILM_MATMUL))
        assert relative_error(same, whole) < 1e-6
    finally:
        ref.close()
        int8.close()


# -- bad input ---------------------------------------------------------------------------------


def test_unknown_tensor_is_named(mlp):
    r = OnnxReplayable(mlp, "ort")
    try:
        # the node-derived name of a module's last node is the module's name in a dump
        with pytest.raises(UnknownTensor, match=r"no tensor named 'l2\.MatMul' in the model "
                                                r"\(nearest: l1\.MatMul"):
            r.run(FEEDS, replace={"l2.MatMul": np.zeros((2, 4), np.float32)})
        with pytest.raises(UnknownTensor, match="'nope'"):
            r.op_inputs(FEEDS, "nope")
        with pytest.raises(CannotReplay, match="'W1' is a weight"):
            r.capture(FEEDS, ["W1"])
    finally:
        r.close()


def test_unknown_backend_and_wrong_family(mlp):
    with pytest.raises(CannotReplay, match="no backend named 'ort-int3'"):
        OnnxReplayable(mlp, "ort-int3")
    with pytest.raises(CannotReplay, match="torch does not run ONNX"):
        OnnxReplayable(mlp, "torch")


def test_tensor_inside_an_if_body_cannot_be_cut(tmp_path):
    then = helper.make_graph([helper.make_node("Neg", ["x"], ["inner"], name="/then/Neg")],
                             "then", [], [helper.make_tensor_value_info("inner", T.FLOAT, [2])])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["inner2"])], "else", [],
                              [helper.make_tensor_value_info("inner2", T.FLOAT, [2])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], name="/sum", keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["cond"], name="/cond"),
             helper.make_node("If", ["cond"], ["y"], name="/branch", then_branch=then,
                              else_branch=other)]
    g = helper.make_graph(nodes, "if", [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [2])],
                          initializer=[numpy_helper.from_array(np.float32(0), "zero")])
    path = _save(g, tmp_path / "if.onnx")
    feeds = {"x": np.array([1.0, 2.0], np.float32)}
    r = OnnxReplayable(path, "ort")
    try:
        with pytest.raises(CannotReplay, match="'inner' is computed inside the subgraph of If "
                                               "node '/branch'"):
            r.run(feeds, replace={"inner": np.zeros(2, np.float32)})
        # the If node itself reads x from the enclosing graph inside its branches: op replay
        # feeds it, and the cut before it keeps x as an input
        assert np.array_equal(r.run_op("branch", r.op_inputs(feeds, "branch")), -feeds["x"])
        s = r.capture(feeds, ["s"])["s"]
        assert np.array_equal(r.run(feeds, replace={"s": -s})["y"], feeds["x"])
    finally:
        r.close()


def test_custom_op_cannot_run_alone(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="/r"),
             helper.make_node("Frobnicate", ["r"], ["y"], name="/custom", domain="acme.ops")]
    g = helper.make_graph(nodes, "custom", [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("acme.ops", 1)])
    s = Surgeon(m)
    with pytest.raises(CannotReplay, match="custom op acme.ops.Frobnicate"):
        s.single_node("y")
    # the node before it runs alone as usual
    alone, inputs = s.single_node("r")
    assert [n.op_type for n in alone.graph.node] == ["Relu"] and inputs == ["x"]


# -- surgery -----------------------------------------------------------------------------------


def test_suffix_keeps_what_the_outputs_need_and_renames_a_cut_output():
    """Split's first output is cut; its second is still read: the node stays, its cut output
    renamed (a value is defined once); the original input the outputs still need stays an
    input, the one they no longer need is gone."""
    nodes = [helper.make_node("Add", ["a", "b"], ["s"], name="/add"),
             helper.make_node("Split", ["s"], ["p", "q"], name="/split", axis=0),
             helper.make_node("Mul", ["p", "q"], ["pq"], name="/mul"),
             helper.make_node("Add", ["pq", "b2"], ["y"], name="/out")]
    g = helper.make_graph(nodes, "split",
                          [helper.make_tensor_value_info(n, T.FLOAT, [4]) for n in ("a", "b")]
                          + [helper.make_tensor_value_info("b2", T.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    s = Surgeon(m)
    cut = s.suffix(["pq"], {"pq": np.zeros(2, np.float32)})
    assert [i.name for i in cut.graph.input] == ["pq", "b2"]
    assert [n.name for n in cut.graph.node] == ["/out"]
    cut = s.suffix(["p"], {"p": np.zeros(2, np.float32)})
    onnx.checker.check_model(cut)
    assert [i.name for i in cut.graph.input] == ["p", "a", "b", "b2"]
    split = next(n for n in cut.graph.node if n.op_type == "Split")
    assert split.output[0] != "p" and split.output[1] == "q"
    import onnxruntime as ort

    sess = ort.InferenceSession(cut.SerializeToString(), providers=["CPUExecutionProvider"])
    a, b = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    got = sess.run(None, {"p": np.array([10, 20], np.float32), "a": a, "b": b,
                          "b2": np.zeros(2, np.float32)})[0]
    assert np.array_equal(got, np.array([10 * 3, 20 * 4], np.float32))
    assert len(m.graph.node) == 4 and m.graph.node[1].output[0] == "p"  # source untouched
