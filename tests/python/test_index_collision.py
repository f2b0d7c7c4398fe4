"""Names whose FNV-1a-64 hashes share their low bits put every footer-index entry in one
linear-probing cluster (issue 23 item 4). The writer builds the spec's table (§3.4: linear probing
in entry order) without walking probe sequences, lookups (``Dump.find``, through the C++ core)
use a keyed in-memory table, and the reference reader (tdump_reader.py) checks the table in
O(n log n). Here: such a file round-trips through every reader, byte for byte as the spec's
probing loop lays it out. The growth is shown by bench/bench_index.cpp (make bench)."""
import os
import struct
import sys

import numpy as np

import driftscope

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# The reference reader is loaded by path: python/driftscope on sys.path would make `import torch`
# find driftscope's torch.py in every later test of this worker (test_distributed's spawned
# ranks failed so).
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
from tdump_write import load_reader  # noqa: E402

tr = load_reader()

ALPHABET = b"abcdefghijklmnopqrstuvwxyz0123456789"
PRIME, BASIS, M64 = 0x100000001B3, 0xCBF29CE484222325, (1 << 64) - 1


def step(h, data):
    for c in data:
        h = ((h ^ c) * PRIME) & M64
    return h


def block(c):
    return bytes(ALPHABET[(c // 36 ** k) % 36] for k in range(4))


def colliding_names(n, bits, home):
    """n names whose hashes agree in their low `bits` bits, the low 16 on `home` (a Joux
    multicollision: FNV-1a's low bits depend only on the low bits before)."""
    mask, state, pairs = (1 << bits) - 1, step(BASIS, b"adv."), []
    while (1 << len(pairs)) < n:
        seen, c = {}, 0
        while True:
            b = block(c)
            h = step(state, b)
            if h & mask in seen:
                pairs.append((seen[h & mask], b))
                state = h
                break
            seen[h & mask] = b
            c += 1
    tail = next(block(c) for c in range(36 ** 4) if step(state, block(c)) & 0xFFFF == home)
    return [(b"adv." + b"".join(p[(i >> s) & 1] for s, p in enumerate(pairs)) + tail).decode()
            for i in range(n)]


def probing_loop(hashes, slots):
    """The spec's rule as every earlier writer ran it: the oracle for the bytes."""
    t = [0] * slots
    for i, h in enumerate(hashes):
        s = h % slots
        while t[s]:
            s = (s + 1) % slots
        t[s] = i + 1
    return t


def slots_of(data):
    (index,) = struct.unpack_from("<Q", data, len(data) - 64 + 48)
    n, m = struct.unpack_from("<QQ", data, index + 48)
    return list(struct.unpack_from(f"<{m}I", data, index + 128 + 24 * n))


def test_generator_makes_one_cluster():
    names = colliding_names(1000, 20, 0xBCDE)
    assert len(set(names)) == 1000
    low = {tr.fnv1a64(n.encode()) & 0xFFFFF for n in names}
    assert low == {tr.fnv1a64(names[0].encode()) & 0xFFFFF} and low.pop() & 0xFFFF == 0xBCDE


def test_colliding_names_round_trip(tmp_path):
    # 5000 names, one home: the last of 16384 slots, so the cluster wraps to slot 0; then
    # ordinary names and a second cluster interleaved.
    names = colliding_names(5000, 24, 16383)
    names += [x for i, s in enumerate(colliding_names(1000, 24, 9000)) for x in (s, f"layer.{i}")]
    path = tmp_path / "collide.tdump"
    with driftscope.Writer(str(path), salt=7) as w:
        for i, name in enumerate(names):
            w.write(name, np.array([i], dtype=np.float32))
    data = path.read_bytes()
    slots = slots_of(data)
    assert slots == probing_loop([tr.fnv1a64(n.encode()) for n in names], len(slots))
    assert slots[0] != 0  # the cluster wrapped
    for use_index in (True, False):
        d = driftscope.open(str(path), use_index=use_index)
        assert d.state == "clean" and d.integrity.index_used == use_index and not d.integrity.warnings
        for i, name in enumerate(names):
            r = d.find(name)
            assert r is not None and r.name == name and float(r.numpy()[0]) == i
        assert d.find(names[0] + "x") is None and d.find(names[0], occurrence=1) is None
    ref = tr.read(str(path))
    assert ref.state == "clean" and [r.name for r in ref.records] == names
