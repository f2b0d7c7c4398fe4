"""Replay of .tflite models (issue 26 item 1): flatbuffer surgery run on LiteRT's XNNPACK
(`litert`) and reference kernels (`litert-ref`), through the backends' own load(). Before
_replay/tflite.py, core.replayable("m.tflite", ...) raised CannotReplay("replay of tflite models
is not available yet") and every test here failed there."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

import driftscope  # noqa: E402
from driftscope._replay import core  # noqa: E402
from driftscope._replay.mechanism import CannotReplay, UnknownTensor  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))
import tflite_f16  # noqa: E402
import tflite_models as tm  # noqa: E402
import tflite_planted  # noqa: E402

pytestmark = [pytest.mark.filterwarnings(
    "ignore:Warning. Enabling .experimental_preserve_all_tensors"),
    pytest.mark.filterwarnings("ignore:driftscope. .* not recorded:RuntimeWarning")]


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    path = tmp_path_factory.mktemp("planted") / "planted.tflite"
    path.write_bytes(tflite_planted.build())
    return str(path)


def _x(seed=0):
    return {"input": np.random.default_rng(seed).standard_normal((1, 16)).astype(np.float32)}


def _pair(model):
    return core.replayable(model, "litert-ref"), core.replayable(model, "litert")


def test_output_replay_at_the_planted_op_removes_the_output_error(planted):
    ref, cand = _pair(planted)
    try:
        rep = core.replay(ref, cand, _x(), ["planted", "coarse"], model=planted)
        assert rep.errors == [] and rep.plain["out"].beyond, rep.plain["out"]
        at_planted, at_coarse = rep.replays
        assert at_planted.error == "" and at_planted.share("out") >= 0.99, at_planted.to_json()
        assert not at_planted.after["out"].beyond
        # Upstream of the fault, putting the reference's value back changes nothing.
        assert at_coarse.share("out") == pytest.approx(0.0, abs=1e-12)
        # The substituted INT8 value went in quantized with the tensor's own parameters.
        assert any(n.startswith("planted: substituted as int8, quantized with the tensor's "
                                "scale 0.0078125 and zero point 0") for n in cand.notes), \
            cand.notes
    finally:
        ref.close()
        cand.close()


def test_op_replay_planted_introduced_its_consumer_inherited(planted):
    ref, cand = _pair(planted)
    try:
        rep = core.replay(ref, cand, _x(), ["planted", "fc5"])
        verdicts = {o.name: o.verdict for o in rep.ops}
        assert verdicts == {"planted": core.INTRODUCED, "fc5": core.INHERITED}, \
            [o.to_json() for o in rep.ops]
        fc5 = rep.ops[1]
        assert fc5.alone.sse == 0.0 and fc5.plain.beyond
    finally:
        ref.close()
        cand.close()


def _chained_bit_for_bit(model, feeds):
    """On the reference kernels, every suffix fed the reference's own value and every op run
    alone on the reference's recorded inputs give the whole model's values bit for bit."""
    ref = core.replayable(model, "litert-ref")
    try:
        names = ref.tensors()
        values = ref.capture(feeds, names)
        whole = ref.run(feeds)
        for n in names:
            got = ref.run(feeds, replace={n: values[n]})
            for o, v in whole.items():
                assert np.array_equal(got[o], v), (n, o)
            alone = ref.run_op(n, ref.op_inputs(feeds, n))
            assert np.array_equal(alone, values[n]), n
        return names
    finally:
        ref.close()


def test_pieces_chained_on_the_reference_kernels_are_bit_for_bit(planted, tmp_path):
    assert _chained_bit_for_bit(planted, _x()) == tflite_planted.OPS
    for name, build in (("float", tm.build_float), ("int8", tm.build_int8),
                        ("f16", tflite_f16.build_f16_weights)):
        path = tmp_path / f"{name}.tflite"
        path.write_bytes(build())
        _chained_bit_for_bit(str(path), {"input": tm.sample_input()})


def test_tensor_names_are_the_recorder_s(tmp_path):
    # The float test model and a converted one (fused ";" names, unnamed tensors) where the
    # PyPI package shipping it is installed: replay takes the names a dump holds, in its order.
    import driftscope.litert as dl

    models = [(tmp_path / "int8.tflite", {"input": tm.sample_input()})]
    models[0][0].write_bytes(tm.build_int8())
    try:
        import pymicro_wakeword

        nabu = Path(pymicro_wakeword.__file__).parent / "models" / "okay_nabu.tflite"
        if nabu.is_file():
            models.append((nabu, None))
    except ImportError:
        pass
    for path, feeds in models:
        r = core.replayable(str(path), "litert-ref")
        try:
            if feeds is None:
                from ai_edge_litert.interpreter import Interpreter

                d = Interpreter(model_path=str(path)).get_input_details()[0]
                feeds = {d["name"]: np.zeros(d["shape"], d["dtype"])}
            dump_path = tmp_path / f"{path.stem}.tdump"
            dl.record(path, feeds, dump_path, kernels="reference")
            with driftscope.open(dump_path) as dump:
                recorded = [rec.name for rec in dump if rec.role == "output"]
            assert [n for n in r.tensors() if n in set(recorded)] == recorded, path
            assert set(recorded) <= set(r.tensors())
        finally:
            r.close()


def test_unknown_tensors_and_refused_cuts(planted, tmp_path):
    ref = core.replayable(planted, "litert-ref")
    try:
        with pytest.raises(UnknownTensor, match="no tensor named 'plant' in the model "
                                                r"\(nearest: planted"):
            ref.run(_x(), replace={"plant": np.zeros((1, 16), np.float32)})
        with pytest.raises(UnknownTensor):
            ref.op_inputs(_x(), "nope")
    finally:
        ref.close()
    # The streaming prelude (CALL_ONCE, resource variables): op replay of the variable's read
    # is refused with surgery's one sentence; the ops after it replay as usual.
    path = tmp_path / "streaming.tflite"
    path.write_bytes(tflite_planted.build(stateful=True))
    ref, cand = _pair(str(path))
    try:
        with pytest.raises(CannotReplay, match=r"^op 2 \(READ_VARIABLE\) alone cannot be cut: "
                           r"op 2 \(READ_VARIABLE, output 'state/read'\) reads or writes a "
                           "resource variable"):
            cand.run_op("state/read", ref.op_inputs(_x(), "mixed"))
        # Each run starts from the model's initial state (a cached interpreter would add the
        # state to the input again at every run).
        assert np.array_equal(cand.run(_x())["out"], cand.run(_x())["out"])
        rep = core.replay(ref, cand, _x(), ["planted"])
        assert rep.ops[0].verdict == core.INTRODUCED and rep.replays[0].share("out") >= 0.99
    finally:
        ref.close()
        cand.close()
    with pytest.raises(CannotReplay, match="does not run .tflite models"):
        core.replayable(planted, "ort")


def test_isolation_scan_names_the_planted_op_only(planted):
    """--isolate on a .tflite model (issue 26 item 2): every op run alone on the candidate with
    the reference's recorded inputs, through the mechanism's interface (one-op pieces)."""
    from driftscope._replay import isolation

    ref, cand = _pair(planted)
    try:
        iso = isolation.isolate(ref, cand, _x())
        assert iso.error == "" and iso.how == "one op at a time", iso.to_json()
        assert iso.scanned >= 5 and [r.name for r in iso.introduced] == ["planted"]
        assert iso.left_out == 0
    finally:
        ref.close()
        cand.close()


def test_attribution_finds_origins_from_two_recordings(planted):
    """Without --at, attribution records both sides (the backend's own recorder) and takes
    compare's origins, as for PyTorch and ONNX; their shares and the remainder add up."""
    from driftscope._replay import attribution

    ref, cand = _pair(planted)
    try:
        origins = attribution.origins_from_compare(ref, cand, _x())
        assert origins and set(origins) <= set(ref.tensors()), origins
        att = attribution.attribute(ref, cand, _x(), origins, source="compare")
        assert att.error == "" and att.additive("out"), att.to_json()
        assert att.shares["out"][att.ranked("out")[0]] > 0.99
    finally:
        ref.close()
        cand.close()
