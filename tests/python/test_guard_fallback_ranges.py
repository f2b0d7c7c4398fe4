"""The range-seeded FP32 fallback search (issue 32 item 3; docs/howto/guard.md, "Fallback").

Before growing node by node, the search keeps every node whose weights or recorded values the
target type cannot hold (ort-fp16: weights above the converter's 1e4 clip, values above 65504 or
wholly below float16's smallest subnormal) in its first build, then shrinks as before. The
models here are OCR detectors in miniature: Conv -> BatchNormalization whose statistics
(variance 1e7..5e7) are Constant nodes, which the float16 conversion clips to 1e4.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxconverter_common")

import onnx  # noqa: E402
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

import driftscope  # noqa: E402
from driftscope._guard.backends import registry as B  # noqa: E402
from driftscope._guard._ranges import FLOAT16, BFLOAT16, range_seed  # noqa: E402

C = 16  # a multiple of ONNX Runtime's NCHWc block: it runs these BatchNormalizations as Convs


def _const(name, a):
    return h.make_node("Constant", [], [name], name=f"{name}_node", value=nh.from_array(a, name))


def _save(path, nodes, outputs, inits, tail=()):
    g = h.make_graph(nodes + list(tail), "g", [h.make_tensor_value_info("x", T.FLOAT,
                                                                         [1, C, 4, 4])],
                     outputs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, str(path))
    return m


def _blocks(k, decoy=True):
    """k blocks of Conv 1x1 -> BatchNormalization -> Relu. Each Conv's output has the variance
    its BatchNormalization's Constant states (1e7..5e7: |x| up to ~3e4, inside float16), so the
    float32 output is ~N(0, 1); clipped to 1e4, a BatchNormalization's output is 30-70x too
    large. The decoy (decoy=True) is a BatchNormalization with a 1e8 variance whose output is
    added at 1e-3: clipped or not, it moves nothing."""
    rng = np.random.default_rng(7)
    nodes, inits, x = [], [], "x"
    for i in range(1, k + 1):
        var = rng.uniform(1e7, 5e7, C).astype(np.float32)
        w = (rng.standard_normal((C, C, 1, 1)) * np.sqrt(var / C)[:, None, None, None])
        inits.append(nh.from_array(w.astype(np.float32), f"W{i}"))
        stats = {f"s{i}": np.ones(C, np.float32), f"b{i}": np.full(C, 0.1, np.float32),
                 f"m{i}": np.zeros(C, np.float32), f"v{i}": var}
        nodes += [_const(n, a) for n, a in stats.items()]
        nodes += [h.make_node("Conv", [x, f"W{i}"], [f"c{i}"], name=f"conv{i}"),
                  h.make_node("BatchNormalization", [f"c{i}", *stats], [f"n{i}"], name=f"bn{i}"),
                  h.make_node("Relu", [f"n{i}"], [f"r{i}"], name=f"relu{i}")]
        x = f"r{i}"
    if not decoy:
        return nodes, inits, x
    stats = {"sd": np.ones(C, np.float32), "bd": np.zeros(C, np.float32),
             "md": np.zeros(C, np.float32), "vd": np.full(C, 1e8, np.float32)}
    nodes += [_const(n, a) for n, a in stats.items()] + [
        _const("tiny", np.array(1e-3, np.float32)),
        h.make_node("BatchNormalization", [x, *stats], ["d"], name="decoy"),
        h.make_node("Mul", ["d", "tiny"], ["dt"], name="decoy_scale"),
        h.make_node("Add", [x, "dt"], ["y"], name="out")]
    return nodes, inits, "y"


def _chain(path, k, decoy=True):
    nodes, inits, y = _blocks(k, decoy)
    return _save(path, nodes, [h.make_tensor_value_info(y, T.FLOAT, [1, C, 4, 4])], inits)


def test_seeded_search_keeps_every_clipped_batchnorm_in_one_build_and_is_verified(tmp_path):
    _chain(tmp_path / "det.onnx", 6)
    r = driftscope.guard(tmp_path / "det.onnx", backends=["ort-fp16"], runs=1,
                         fallback_runs=5)
    row = r["ort-fp16"]
    assert row.status == "PRECISION_DEGRADATION"
    fb = row.fallback
    # Before: the search started from bn1 and grew in topological order (bn1, relu1, conv2,
    # bn2, relu2): "the cap of 5 variant builds was reached", not verified.
    assert fb.verified and fb.status_after == "PASS", fb.sentence
    first = fb.trail[0]
    assert first["step"].startswith("seed") and first["status"] == "PASS"
    # Every clipped variance and the decoy's; the decoy's ~1e-7 outputs, read from the
    # reference's recording, may be seeded as underflowing too (decoy_scale, out).
    seeded = set(first["keep"])
    assert {f"bn{i}" for i in range(1, 7)} | {"decoy"} <= seeded
    assert seeded <= {f"bn{i}" for i in range(1, 7)} | {"decoy", "decoy_scale", "out"}
    # The shrink (last added first) drops the decoy and what it flagged; bn6 is needed.
    assert sorted(n for n, _ in fb.nodes) == [f"bn{i}" for i in range(1, 7)]
    assert fb.runs == 5 and fb.trail[1]["step"].startswith("shrink: without ")
    assert fb.cosine_after > 0.999
    assert f"the first build kept {len(seeded)} node(s): the reference's ranges" in fb.sentence
    # ONNX Runtime's NCHWc layout ran the kept BatchNormalizations as Convs under new names:
    # before, none of them was proven float32 ("NOT verified").
    assert any("com.microsoft.nchwc" in e for e in fb.evidence.values()), fb.evidence


def test_the_seed_reads_weights_in_constants_and_recorded_values(tmp_path):
    """A value above 65504 seeds its producer and its consumers; a value wholly below 2^-24 (all
    zeros in float16) too; a weight above the converter's clip seeds its consumer; bfloat16
    (float32's range) names nothing."""
    nodes, inits, y = _blocks(1, decoy=False)
    nodes += [_const("big", np.array(1e4, np.float32)), _const("eight", np.array(8, np.float32)),
              _const("small", np.array(1e-13, np.float32)),
              h.make_node("Mul", [y, "big"], ["huge"], name="scale_up"),      # ~1e4..3e4
              h.make_node("Mul", ["huge", "eight"], ["over"], name="double"),  # > 65504
              h.make_node("Mul", ["over", "small"], ["under"], name="scale_down"),  # < 2^-24
              h.make_node("Sigmoid", ["under"], ["y"], name="sig")]
    model = _save(tmp_path / "m.onnx", nodes,
                  [h.make_tensor_value_info("y", T.FLOAT, [1, C, 4, 4])], inits)
    x = np.random.default_rng(0).standard_normal((1, C, 4, 4)).astype(np.float32)
    dump = str(tmp_path / "ref.tdump")
    driftscope.onnxruntime.record(str(tmp_path / "m.onnx"), {"x": x}, dump, check_observer=False)
    ref = driftscope.open(dump)
    over = ref.record("double").stats()
    assert over["max"] > 65504 and 0 < ref.record("scale_down").stats()["max"] < 2.0 ** -24
    ref.close()
    names = [n.name for n in model.graph.node if n.op_type != "Constant"]
    ort16 = B.BACKENDS["ort-fp16"].fallback_range
    seed = range_seed(str(tmp_path / "m.onnx"), ort16, names, dump, {"x": x})
    assert seed.nodes == ["bn1", "double", "scale_down", "sig"]
    assert "v1" in seed.reasons["bn1"] and "clips" in seed.reasons["bn1"]
    assert "65504" in seed.reasons["double"] and "all zeros" in seed.reasons["sig"]
    # 1e4 itself (scale_up's weight) is not clipped; its output fits float16; 1e-13 (below the
    # converter's 1e-7) is not a reason: scale_down is seeded for what it reads.
    assert "input over" in seed.reasons["scale_down"] and "v1" not in seed.reasons["double"]
    assert "scale_up" not in seed.reasons
    # Without a recording but with the sample, the seed records the float32 reference itself
    # (a bisected probe records nothing); without either, weights alone: the BatchNormalization.
    assert range_seed(str(tmp_path / "m.onnx"), ort16, names, None, {"x": x}).nodes == \
        seed.nodes
    assert range_seed(str(tmp_path / "m.onnx"), ort16, names, None, None).nodes == ["bn1"]
    assert range_seed(str(tmp_path / "m.onnx"), BFLOAT16, names, dump, {"x": x}).nodes == []
    assert FLOAT16.value_max == 65504.0


def _cancelling(path):
    """The BatchNormalization block, then two Mul by (1000.25 - 1000), each computed from two
    Constants: in float16 both Constants are 1000 and each factor is 0 (a precision loss no
    range shows), so the output is zeros until both Mul (and the Sub computing their factor)
    stay float32, besides the clipped BatchNormalization."""
    nodes, inits, y = _blocks(1, decoy=False)
    nodes += [_const("hi", np.array(1000.25, np.float32)), _const("lo", np.array(1000, np.float32)),
              h.make_node("Sub", ["hi", "lo"], ["q"], name="quarter"),
              h.make_node("Mul", [y, "q"], ["m"], name="mul1"),
              h.make_node("Mul", ["m", "q"], ["y"], name="mul2")]
    return _save(path, nodes, [h.make_tensor_value_info("y", T.FLOAT, [1, C, 4, 4])], inits)


def test_a_search_out_of_builds_says_what_it_tried_and_what_the_ranges_suggest(tmp_path):
    _cancelling(tmp_path / "c.onnx")
    r = driftscope.guard(tmp_path / "c.onnx", backends=["ort-fp16"], runs=1, fallback_runs=1)
    fb = r["ort-fp16"].fallback
    assert not fb.verified and fb.status_after is None
    # Before: "no passing set within the search: the cap of 1 variant builds was reached".
    assert "the cap of 1 variant builds was reached (1 build(s)" in fb.error, fb.error
    assert "the first kept the probed node(s) and the 1 the ranges name (2 node(s))" in fb.error
    assert "name 1 node(s)" in fb.error and "bn1: weight v1" in fb.error
    assert "\n" not in fb.error
