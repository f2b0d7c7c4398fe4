#!/usr/bin/env python3
"""Overhead of recording a generation (issue 31): driftscope.llm.record on the tiny
hash-initialised Llama of tests/python/models/tiny_llm.py (2 layers, hidden 64, vocab 128),
per generated token, as a ratio to plain generation, measured side by side in one run:
  * plain:    the same greedy loop, one forward per token with the KV cache, no hooks, no file;
  * generate: transformers' own model.generate(do_sample=False, max_new_tokens=N);
  * record:   driftscope.llm.record (every module's output, the cache entries written, the
              logits; kept in memory, written at the end, file closed).
Median of --repeat runs each, after a warm-up.

    .venv/bin/python bench/bench_llm_record.py [--tokens 32] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python" / "models"))

import torch  # noqa: E402

import driftscope.llm as llm  # noqa: E402
import tiny_llm  # noqa: E402


def plain(model, prompt, n):
    import inspect

    arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    cache, ids, out = None, prompt, []
    with torch.no_grad():
        for _ in range(n):
            o = model(input_ids=torch.tensor([ids]), use_cache=True, **{arg: cache})
            cache = getattr(o, arg)
            tok = int(o.logits[0, -1].argmax())
            out.append(tok)
            ids = [tok]
    return out


def median_time(fn, repeat):
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    model, prompt = tiny_llm.llama()
    model.eval()
    n = args.tokens
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "gen.tdump")
        tokens = llm.record(model, prompt, path, new_tokens=n)["llm.tokens"]
        assert [int(t) for t in tokens.split(",")] == plain(model, prompt, n)
        t_plain = median_time(lambda: plain(model, prompt, n), args.repeat)
        t_gen = median_time(lambda: model.generate(torch.tensor([prompt]), max_new_tokens=n,
                                                   do_sample=False, min_new_tokens=n),
                            args.repeat)
        t_rec = median_time(lambda: llm.record(model, prompt, path, new_tokens=n), args.repeat)
        size = os.path.getsize(path)
    per = lambda t: 1e3 * t / n  # noqa: E731
    print(f"tiny Llama (2 layers, hidden 64, vocab 128), prompt {len(prompt)} tokens, {n} new "
          f"tokens, 1 thread, median of {args.repeat}")
    print(f"  plain greedy loop   {per(t_plain):8.3f} ms/token")
    print(f"  model.generate      {per(t_gen):8.3f} ms/token")
    print(f"  driftscope record   {per(t_rec):8.3f} ms/token   ({size / n / 1024:.1f} KiB/token "
          f"written)")
    print(f"  ratio record / plain loop: {t_rec / t_plain:.2f}x   record / generate: "
          f"{t_rec / t_gen:.2f}x")


if __name__ == "__main__":
    main()
