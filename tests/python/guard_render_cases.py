"""Guard reports built by hand for tests/python/test_guard_render.py: every part of the text and
Markdown reports (long names, hostile and non-ASCII names, non-finite numbers, fallback tables and
recipes, task metrics, class axes, a language model's report), without running a backend.

The golden files in tests/python/data/guard_render/ were written by the Python renderer the
library's (src/report/guard_text.cpp) replaced (issue 25): `python tests/python/guard_render_cases.py
DIR` writes them again.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Dict, List

from driftscope._guard._fallback import FallbackResult
from driftscope._guard._inputs import InputInfo
from driftscope._guard._llm import LLMGuardReport
from driftscope._guard._metrics import OutputResult, Thresholds
from driftscope._guard._report import BackendResult, GuardReport

# A tf2onnx node name: every op it fused, joined with ';'.
LONG = ";".join(f"StatefulPartitionedCall/model/block_{k}/conv2d_{k}/Conv2D" for k in range(8))
EVIL = ('</script><img src="http://evil.invalid/x.png" onerror="document.title=1">'
        "\x1b[31mred\nline `code` |pipe *b* \u202eevil")
UNI = "caf\u00e9_\u00e9t\u00e9 \u2192_x \u6a21\u578b_\u540d \u00a0//a.b@c.d #1 ~x~ !x & _y_"


def _ref(**kw) -> BackendResult:
    out = OutputResult("y", "PASS", 0, cosine=1.0, norm_ref=3.5, norm_cand=3.5, max_diff=0.0)
    return BackendResult("ort", "ONNX Runtime", "", "REFERENCE", reference=True, outputs=[out],
                         worst=out, latency_ms=1.5, runs=3, **kw)


def _report(rows: List[BackendResult], **kw) -> GuardReport:
    args = dict(model="m.onnx", family="onnx", reference="ort", backends=[_ref()] + rows,
                inputs=[InputInfo("x", "float32", [1, 4], "standard normal")], samples=2,
                seed=7, runs=3, thresholds=Thresholds(), required=[], reference_nonfinite={},
                probe="auto", fallback="auto", output_names=["y"])
    args.update(kw)
    return GuardReport(**args)


def evil() -> GuardReport:
    bad = OutputResult(EVIL, "NUMERICAL_INSTABILITY", 1, cosine=None, norm_ref=3.5,
                       norm_cand=None, max_diff=None, inf=16,
                       detail="16 Inf where the reference is finite")
    fb = FallbackResult("ort-fp16", nodes=[(EVIL, "Pow")], verified=True,
                        status_before="NUMERICAL_INSTABILITY", status_after="PASS",
                        cosine_after=0.99999, evidence={EVIL: "float32 in the built variant"},
                        runs=3, recipe="keep = [%r]\nconvert(model, keep)  # ``` ````\n" % EVIL)
    row = BackendResult("ort-fp16", "float16", "", "NUMERICAL_INSTABILITY", outputs=[bad],
                        worst=bad, latency_ms=0.9, latency_ratio=0.6, runs=3, fallback=fb,
                        notes=[EVIL, "bad\udc80byte"])
    return _report([row], model=EVIL + ".onnx",
                   inputs=[InputInfo(EVIL, "float32", [1, 4], "random normal"),
                           InputInfo("sr", "int", [], "as is", value="16000")])


def long_names() -> GuardReport:
    from driftscope._guard.backends import registry as B

    recipe = B.BACKENDS["ort-int8"].recipe("m.onnx", [LONG])
    fb = FallbackResult("ort-int8", nodes=[(LONG, "Conv")], verified=True,
                        status_before="PRECISION_DEGRADATION", status_after="PASS",
                        cosine_after=1.0, recipe=recipe, precision="int16", runs=4, cap=20,
                        verify_builds=2, seconds=12.345, seconds_cap=60.0,
                        candidates=[
                            {"precision": "int16", "status": "PASS", "cosine": 0.9999,
                             "verified": True, "latency_ms": 1.234, "latency_change": -0.25,
                             "error": None},
                            {"precision": "float32", "status": "PASS",
                             "cosine": float("nan"), "verified": False, "latency_ms": None,
                             "latency_change": None, "error": "no " + LONG}])
    w = OutputResult(LONG, "PRECISION_DEGRADATION", 0, cosine=0.9, norm_ref=float("inf"),
                     norm_cand=2.0, max_diff=float("nan"),
                     detail=f"cosine 0.9 < 0.99 at ({LONG}),")
    row = BackendResult("ort-int8", "INT8 " + LONG, "", "PRECISION_DEGRADATION", outputs=[w],
                        worst=w, latency_ms=float("nan"), latency_ratio=float("inf"), runs=3,
                        fallback=fb, notes=[f"probe names (['{LONG}', '{LONG}:'])"])
    stopped = FallbackResult("ort-fp16", nodes=[], stopped="the budget of 2 builds is spent",
                             next_try=LONG, runs=2, cap=2, error="budget spent")
    row2 = BackendResult("ort-fp16", "f16", "", "PASS", fallback=stopped, latency_ms=2.0,
                         runs=3, notes=["\u3000" + "x" * 90 + "\u00a0"])
    return _report([row, row2], inputs=[InputInfo(LONG, "float32", [1, 3, 224, 224],
                                                  "given")], samples=3)


def unicode_and_axes() -> GuardReport:
    ok = OutputResult(UNI, "PASS", 0, cosine=0.99999999, norm_ref=12345.678, norm_cand=12345.6,
                      max_diff=1.5e-7)
    flip = OutputResult("logits", "ARGMAX_FLIP", 2, cosine=0.995, norm_ref=1e-5, norm_cand=2e20,
                        max_diff=123456789.0, detail="3 of 8 positions flip")
    rows = [BackendResult(UNI, UNI, UNI, "PASS", outputs=[ok], worst=ok, latency_ms=0.000123,
                          latency_ratio=12.5, runs=3),
            BackendResult("ov", "OpenVINO", "", "ARGMAX_FLIP", outputs=[flip], worst=flip,
                          latency_ms=1234.5, latency_ratio=0.005, runs=3),
            BackendResult("gone", "x", "", "UNAVAILABLE", required=True,
                          reason="not installed: " + UNI),
            BackendResult("crash", "x", "", "RUNTIME_ERROR", signal="SIGSEGV"),
            BackendResult("err", "x", "", "RUNTIME_ERROR",
                          error="Traceback (most recent call last):\n  File \"x.py\", line 1\n"
                                "ValueError: shapes " + LONG)]
    th = Thresholds(min_cosine=0.995, max_rel_error=0.05, min_norm=1e-6,
                    class_axes={"logits": 1, "*": None, "extra": 2})
    return _report(rows, thresholds=th, output_names=["logits", UNI, "z"],
                   model="`tick` model.onnx", required=["gone"],
                   inputs=[InputInfo("x", "float32", [2], "--data d.npz (real)")],
                   reference_nonfinite={"y": 3})


def task_metric() -> GuardReport:
    w = OutputResult("y", "PRECISION_DEGRADATION", 0, cosine=0.97, norm_ref=1.0, norm_cand=1.1,
                     max_diff=0.2, detail="cosine 0.97 < 0.99")
    task = {"metric": "top1", "reference": 1.0, "candidate": 0.875, "drop": 0.125,
            "spread": 0.217, "max_drop": 0.01, "samples": 8,
            "per_sample": [0, 0.5, 0, 0, 0, 0.5, 0, 0]}
    row = BackendResult("ort-fp16", "f16", "", "PRECISION_DEGRADATION", outputs=[w], worst=w,
                        task=task, latency_ms=3.0, latency_ratio=1.0, runs=5)
    ref = _ref(task={"metric": "top1", "reference": 1.0, "samples": 8})
    return GuardReport(model="m.onnx", family="onnx", reference="ort", backends=[ref, row],
                       inputs=[InputInfo("x", "float32", [1], "given"),
                               InputInfo("y", "float32", [1], "standard normal")],
                       samples=8, seed=1, runs=5, thresholds=Thresholds(class_axes={}),
                       required=[], reference_nonfinite={}, metric="top1", max_drop=0.01)


def storage_only() -> GuardReport:
    fb = FallbackResult("ort-fp16", nodes=[("/n", "Mul")], status_before="NUMERICAL_INSTABILITY",
                        status_after="PASS", cosine_after=1.0, verified=True, recipe="x = 1\n",
                        )
    fb.checks = [{"backend": "ort-fp16", "status": "PASS", "cosine": 1.0, "proven": True,
                  "computes": False, "error": None}]
    w = OutputResult("y", "NUMERICAL_INSTABILITY", 0, cosine=float("nan"), norm_ref=1.0,
                     norm_cand=float("-inf"), max_diff=float("inf"), detail="1 Inf")
    row = BackendResult("ort-fp16", "f16", "", "NUMERICAL_INSTABILITY", outputs=[w], worst=w,
                        fallback=fb)
    return _report([row])


def llm() -> LLMGuardReport:
    w = OutputResult("logits", "ARGMAX_FLIP", 0, cosine=0.999, norm_ref=100.0, norm_cand=99.0,
                     max_diff=0.5, detail="2 of 16 steps flip")
    ref = _ref()
    rows = [ref, BackendResult("ort-fp16", "f16 " + EVIL, "", "ARGMAX_FLIP", outputs=[w],
                               worst=w, latency_ms=10.0, latency_ratio=1.5, runs=1)]
    return LLMGuardReport(
        llm={"source": "gpt2 " + EVIL, "prompts": [[1, 2, 3], [4, 5]], "prompts_given": False,
             "new_tokens": 8, "teacher_forced": True, "top_k": 5, "max_kl": 0.05,
             "min_topk_overlap": 0.8, "backends": ["ort", "ort-fp16"]},
        rows_llm={"ort-fp16": {"flipped_steps": 2, "steps": 16, "max_kl": 0.125,
                               "min_mean_topk_overlap": 0.9}},
        model="m.py:build", family="llm", reference="ort", backends=rows, inputs=[], samples=2,
        seed=3, runs=1, thresholds=Thresholds(max_argmax_flip=0.1), required=[],
        reference_nonfinite={}, probe="never", fallback="never")


CASES: Dict[str, Callable[[], GuardReport]] = {
    "evil": evil, "long_names": long_names, "unicode_and_axes": unicode_and_axes,
    "task_metric": task_metric, "storage_only": storage_only, "llm": llm}


RENDERINGS = {"txt": "to_text", "md": "to_markdown", "html": "to_html", "json": "to_json"}


if __name__ == "__main__":
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name, make in CASES.items():
        for ext, method in RENDERINGS.items():
            try:
                text = getattr(make(), method)()
            except Exception as e:  # the old page refused a name that was not UTF-8
                print(f"{name}.{ext}: {type(e).__name__}: {e}")
                continue
            (out / f"{name}.{ext}").write_bytes(text.encode("utf-8", "surrogateescape"))
