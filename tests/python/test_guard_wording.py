"""The guard's words on real models (issue 24 item 11 and its "also seen"): the observer effect
read against the output's scale, only recipes of variants that were built and loaded, INT8 proof
text that does not speak of float16, tf2onnx's `;`-joined names shortened in text and Markdown
(whole in JSON and in the HTML page's titles), and --list-backends in columns."""

from __future__ import annotations

import contextlib
import io
import json
import re

import numpy as np
import pytest

from driftscope import onnxruntime as dort
from driftscope._guard.backends import registry as B
from driftscope._guard._fallback import FallbackResult
from driftscope._guard._inputs import InputInfo
from driftscope._guard._metrics import OutputResult, Thresholds
from driftscope._guard._report import BackendResult, GuardReport

# A tf2onnx node name: every op it fused, joined with ';'.
LONG = ";".join(f"StatefulPartitionedCall/model/block_{k}/conv2d_{k}/Conv2D" for k in range(8))


def test_observer_effect_is_read_against_the_outputs_range():
    """0.446 on a probability in [0, 1] is half its scale, not "slightly"."""
    plain = {"p": np.array([0.001, 0.999], np.float32),
             "logit": np.array([-100.0, 100.0], np.float32)}
    captured = {"p": np.array([0.447, 0.999], np.float32),
                "logit": np.array([-100.446, 100.0], np.float32)}
    text = dort._observer_effect(plain, captured)
    assert "p: max_abs_diff=0.446 (44.7% of the output's range 0.998)" in text
    assert "logit: max_abs_diff=0.446 (0.223% of the output's range 200)" in text
    assert dort.observer_effect_relative(plain, captured) == pytest.approx(0.446 / 0.998, rel=1e-3)
    zero = dort._observer_effect({"z": np.zeros(3, np.float32)}, {"z": np.ones(3, np.float32)})
    assert "the output is all zero or non-finite without capture" in zero


def _report(fb: FallbackResult, name: str = "ort-fp16", diag: str = "") -> GuardReport:
    bad = OutputResult("y", "NUMERICAL_INSTABILITY", 0, cosine=None, norm_ref=1.0,
                       norm_cand=None, max_diff=None, detail="2 Inf where the reference is finite")
    ref = BackendResult("ort", "ONNX Runtime", "", "REFERENCE", reference=True)
    row = BackendResult(name, "variant", "", "NUMERICAL_INSTABILITY", outputs=[bad], worst=bad,
                        notes=[diag] if diag else [], fallback=fb)
    return GuardReport(model="m.onnx", family="onnx", reference="ort", backends=[ref, row],
                       inputs=[InputInfo("x", "float32", [1, 4], "standard normal")], samples=1,
                       seed=0, runs=1, thresholds=Thresholds(), required=[],
                       reference_nonfinite={}, probe="auto", fallback="auto")


def _onnx(path) -> str:
    """y = (x * 2) + 1: nodes /a/Mul and /b/Add (the fp16 recipe reads the model)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto as T
    from onnx import helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["m"], name="/a/Mul"),
         helper.make_node("Add", ["m", "one"], ["y"], name="/b/Add")], "m",
        [helper.make_tensor_value_info("x", T.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", T.FLOAT, [1, 4])],
        [numpy_helper.from_array(np.array(2, np.float32), "two"),
         numpy_helper.from_array(np.array(1, np.float32), "one")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


def test_the_fp16_recipe_printed_is_the_variant_that_was_built(tmp_path):
    """The converter's node_block_list alone writes models ONNX Runtime cannot load; the guard
    built driftscope.onnxruntime.to_float16's variant, and only that one is printed."""
    recipe = B.BACKENDS["ort-fp16"].recipe(_onnx(tmp_path / "m.onnx"), ["/a/Mul"])
    assert "convert_float_to_float16" in recipe  # what the backend offers
    fb = FallbackResult("ort-fp16", nodes=[("/a/Mul", "Mul")], verified=True,
                        status_before="NUMERICAL_INSTABILITY", status_after="PASS",
                        cosine_after=1.0, recipe=recipe)
    printed = fb.printed_recipe
    assert "convert_float_to_float16" not in printed and "node_block_list" not in printed
    assert printed == ("import onnx\n"
                       "from driftscope.onnxruntime import to_float16\n\n"
                       "model = to_float16('m.onnx', keep_float32=['/a/Mul'])\n"
                       "onnx.save(model, 'm.fp16.onnx')\n")
    r = _report(fb)
    text, md, data = r.to_text(), r.to_markdown(), r.to_dict()
    for out in (text, md):
        assert "keep_float32=['/a/Mul']" in out and "convert_float_to_float16" not in out
    assert data["backends"][1]["fallback"]["recipe"] == printed
    # An INT8 recipe has one variant: printed as it is.
    int8 = B.BACKENDS["ort-int8"].recipe("m.onnx", ["/a/MatMul"])
    assert FallbackResult("ort-int8", nodes=[("/a/MatMul", "MatMul")], status_after="PASS",
                          recipe=int8).printed_recipe == int8


def test_a_set_that_never_loaded_prints_no_recipe(tmp_path):
    """The search stopped with a set whose variant failed to build (or was never tried): no
    recipe for it, and the report says why."""
    recipe = B.BACKENDS["ort-fp16"].recipe(_onnx(tmp_path / "m.onnx"), ["/a/Mul", "/b/Add"])
    trail = [{"step": "grow", "keep": ["/a/Mul"], "status": "NUMERICAL_INSTABILITY"},
             {"step": "grow", "keep": ["/b/Add", "/a/Mul"], "status": "RUNTIME_ERROR",
              "error": "ONNX Runtime cannot load 'm.onnx': Type Error: Type (tensor(float16)) "
                       "of input parameter (b) of operator (Add) in node (/b/Add) is invalid."}]
    fb = FallbackResult("ort-fp16", nodes=[("/a/Mul", "Mul"), ("/b/Add", "Add")],
                        status_before="NUMERICAL_INSTABILITY", recipe=recipe, trail=trail,
                        error="no passing set within the search: 3 variant builds failed")
    assert not fb.loaded and fb.printed_recipe == ""
    r = _report(fb)
    text, md, data = r.to_text(), r.to_markdown(), r.to_dict()
    assert "FP32 fallback recipe for ort-fp16 (" not in text
    assert "FP32 fallback recipe for ort-fp16\\*\\*" not in md and "```python" not in md
    assert "to_float16" not in text and "to_float16" not in md
    line = ("No FP32 fallback recipe for ort-fp16: the variant keeping its 2 node(s) was never "
            "built and loaded: ONNX Runtime cannot load 'm.onnx': Type Error")
    assert line in text and line in data["findings"][-1]
    assert data["backends"][1]["fallback"]["recipe"] == "" and r.recipes == []
    # A set tried and judged (even failing) was loaded: its recipe is printed, NOT verified.
    trail[1]["status"], trail[1]["error"] = "NUMERICAL_INSTABILITY", None
    assert fb.loaded and "FP32 fallback recipe for ort-fp16 (NOT verified):" in r.to_text()


def test_int8_evidence_does_not_speak_of_float16():
    said = ("ONNX Runtime's optimized graph runs /a/MatMul as MatMul with 3 float32 "
            "input/output value(s) and no float16 one")
    for name, has in (("ort-int8", False), ("ort-fp16", True)):
        fb = FallbackResult(name, nodes=[("/a/MatMul", "MatMul")], verified=True,
                            status_after="PASS", evidence={"/a/MatMul": said})
        ev = fb.to_json()["nodes"][0]["evidence"]
        assert ("float16" in ev) == has, (name, ev)
        assert ev.startswith("ONNX Runtime's optimized graph runs /a/MatMul as MatMul with 3 "
                             "float32 input/output value(s)")


def test_long_names_are_shortened_in_text_and_markdown_and_whole_in_json():
    assert len(LONG) > 300

    def short_name(name: str) -> str:  # as the text report shows it (src/report/guard_text.cpp)
        text = _report(None, diag=f"(['{name}', '{name}:'])").to_text()
        found = re.findall(re.escape(name[:32]) + r"\.\.\." + re.escape(name[-32:])
                           + r"~[0-9a-f]{6}", text)
        assert len(found) >= 2 and len(set(found)) == 1  # quoted alone, each one shortened
        return found[0]

    short = short_name(LONG)
    assert len(short) == 74 and short.startswith(LONG[:32] + "...")
    other = LONG[:150] + "X" + LONG[151:]
    assert short_name(other) != short and short_name(LONG) == short  # stable, distinct
    recipe = B.BACKENDS["ort-int8"].recipe("m.onnx", [LONG])
    fb = FallbackResult("ort-int8", nodes=[(LONG, "Conv")], verified=True,
                        status_before="PRECISION_DEGRADATION", status_after="PASS",
                        cosine_after=1.0, recipe=recipe)
    r = _report(fb, "ort-int8", diag=f"probe names {LONG} (Conv)")
    text, md = r.to_text(), r.to_markdown()
    for out in (text, md):
        assert LONG not in out and LONG[:20] in out
        runs = re.split(r"[\s'\"]", out)
        assert max(len(t) for t in runs) <= 80, max(runs, key=len)
    assert short in text and "# long names shortened (HEAD...TAIL~HASH)" in text
    assert f"nodes_to_exclude=['{short}'])" in text
    data = json.loads(r.to_json())
    assert data["backends"][1]["fallback"]["nodes"][0]["node"] == LONG
    assert LONG in data["backends"][1]["fallback"]["recipe"]
    assert any(LONG in f for f in data["findings"])


def test_the_html_page_lets_the_backend_table_grow_and_keeps_long_names_whole(tmp_path):
    fb = FallbackResult("ort-int8", nodes=[(LONG, "Conv")], verified=True,
                        status_before="PRECISION_DEGRADATION", status_after="PASS",
                        cosine_after=1.0, recipe=B.BACKENDS["ort-int8"].recipe("m.onnx", [LONG]))
    page = _report(fb, "ort-int8", diag=f"probe names {LONG} (Conv)").to_html()
    if "tablewrap grow" not in page:
        pytest.fail("driftscope._core embeds an older src/report/guard.html: rebuild the "
                    "Python extension")
    css = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    assert ".tablewrap.grow{max-height:none" in css
    assert "ul.findings li{overflow-wrap:anywhere}" in css
    assert '{class: "wrap", title: printable(b.diagnostics || "")}' in page
    assert 'el("td", {class: "name mono", title: printable(n.node)}, n.node)' in page


def test_list_backends_columns_line_up():
    from driftscope._guard._command import _list_backends

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert _list_backends() == 0
    lines = [ln for ln in out.getvalue().splitlines() if ln.startswith("  ")]
    names = [b.name for f in B.FAMILIES for b in B.family_backends(f)]
    assert max(map(len, names)) > 12  # onnx-openvino-f16: wider than the old fixed column
    # Every line's second column (summary, then state) starts at the same offset.
    column = 2 + max(map(len, names)) + 1
    for ln in lines:
        assert ln[2:column].rstrip() in names + [""] and ln[column - 1] == " ", ln
        assert not ln[column].isspace(), ln
