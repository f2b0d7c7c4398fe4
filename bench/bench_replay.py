"""Replay cost per origin as a ratio to one plain candidate run, measured side by side in one
process (issue 26; docs/howto/replay.md "Cost").

For each model: the candidate loaded once, then
  plain   one plain run (median of --repeat)
  cold    a replay at an origin not replayed before: for ONNX this builds the cut model and the
          backend's variant of it (ort-int8: quantize_dynamic) and opens a session, which is what
          attribution pays once per origin; for PyTorch hooks cost nothing to set up
  warm    the same replay again (the cut's session cached)
and prints each as milliseconds and as a ratio to `plain`. Models: the demo's tiny encoder in
PyTorch (torch-fp16) and the same network exported to ONNX (ort-int8).

    python bench/bench_replay.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "tests" / "python" / "models"))


def _median_s(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _measure(ref, cand, feeds, origins, repeat):
    values = ref.capture(feeds, origins)
    cand.run(feeds)  # the whole model's session built before anything is timed
    plain = _median_s(lambda: cand.run(feeds), repeat)
    cold, warm = [], []
    for o in origins:
        t = time.perf_counter()
        cand.run(feeds, replace={o: values[o]})
        cold.append(time.perf_counter() - t)
        warm.append(_median_s(lambda o=o: cand.run(feeds, replace={o: values[o]}), repeat))
    return plain, statistics.median(cold), statistics.median(warm)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    import torch

    import tiny_encoder_torch
    from driftscope._replay.cli import _feeds
    from driftscope._replay.onnx import OnnxReplayable
    from driftscope._replay.torch import TorchReplayable

    torch.set_num_threads(1)
    import logging

    logging.getLogger().setLevel(logging.ERROR)  # quantize_dynamic's pre-processing advice
    rows = []
    tiny = str(ROOT / "tests" / "python" / "models" / "tiny_encoder_torch.py") + ":build"
    ref, cand = TorchReplayable.load(tiny, "torch"), TorchReplayable.load(tiny, "torch-fp16")
    origins = ["encoder.layers.1.norm1", "encoder.layers.2.norm1", "encoder.layers.3.norm1"]
    rows.append(("tiny encoder, torch-fp16 (hooks)", len(origins),
                 *_measure(ref, cand, ref.example_feeds(), origins, args.repeat)))
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as d:
        path = os.path.join(d, "tiny_encoder.onnx")
        model, inputs = tiny_encoder_torch.build()
        with torch.no_grad():
            torch.onnx.export(model, inputs, path, dynamo=False, opset_version=17)
        ref, cand = OnnxReplayable(path, "ort"), OnnxReplayable(path, "ort-int8")
        names = ref.tensors()
        origins = [n for n in ("layers.1.norm1", "layers.2.norm1", "layers.3.norm1")
                   if n in names] or names[len(names) // 4::len(names) // 4][:3]
        rows.append(("tiny encoder ONNX, ort-int8 (cut + variant)", len(origins),
                     *_measure(ref, cand, _feeds(path, "onnx", 0), origins, args.repeat)))
        ref.close()
        cand.close()
    print(f"{'model':<46} {'origins':>7} {'plain ms':>9} {'cold ms':>9} {'cold/plain':>10} "
          f"{'warm ms':>9} {'warm/plain':>10}")
    for name, n, plain, cold, warm in rows:
        print(f"{name:<46} {n:>7} {plain * 1e3:>9.2f} {cold * 1e3:>9.1f} {cold / plain:>10.1f} "
              f"{warm * 1e3:>9.2f} {warm / plain:>10.2f}")
    print("cold: the first replay at an origin (attribution pays it once per origin); "
          "warm: again, its session cached")
    return 0


if __name__ == "__main__":
    sys.exit(main())
