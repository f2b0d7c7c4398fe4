#!/usr/bin/env python3
"""Writes golden.json: known answers of the hash initialiser (docs/references.md), checked by
the C++ unit test, the C ABI test, the Python tests and HashInitTest.java. Regenerate only with
a spec change (and its change log): every implementation must then be updated to match.

    python3 tests/vectors/hashinit/generate.py
"""

import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "python", "driftscope", "reference"))
import _hash as h  # noqa: E402  (the numpy implementation, imported without the package)

CASES = [
    # name, seed, distribution, std, count
    ("", 0, "uniform", 1.0, 8),
    ("weight", 0, "uniform", 1.0, 8),
    ("encoder.layer.0.attention.self.query.weight", 0, "uniform", 1.0 / (3.0 * 384) ** 0.5, 8),
    ("encoder.layer.0.attention.self.query.weight", 7, "uniform", 1.0 / (3.0 * 384) ** 0.5, 8),
    ("embeddings.word_embeddings.weight", 0, "normal", 1.0, 8),
    ("gewicht.\u00fc\u00df.\u65e5\u672c", 0, "normal", 0.02, 8),
    ("big", 18446744073709551615, "normal", 3.5, 8),
    ("zero", 0, "uniform", 0.0, 4),
]
DIGEST_CASES = [  # whole tensors, pinned by the SHA-256 of their little-endian float32 bytes
    ("layer.weight", 0, "uniform", 0.05, 1000),
    ("layer.weight", 0, "normal", 0.05, 1000),
]
INT_CASES = [("input_ids", 0, 0, 30522, 8), ("calibration.x.0", 3, -128, 128, 8)]


def bits64(v):
    return "%016x" % struct.unpack("<Q", struct.pack("<d", float(v)))[0]


def bits32(v):
    return "%08x" % struct.unpack("<I", struct.pack("<f", float(v)))[0]


def main():
    out = {"spec": "docs/references.md, hash initialiser version 1",
           "splitmix64_seed0": [("%016x" % int(x)) for x in h.draws(0, 0, 3)],
           "values": [], "digests": [], "integers": []}
    for name, seed, dist, std, n in CASES:
        v = h.hash_values(name, n, dist, std, seed)
        out["values"].append({"name": name, "seed": str(seed), "distribution": dist,
                              "std_bits": bits64(std), "key": "%016x" % h.name_key(name, seed),
                              "float64_bits": [bits64(x) for x in v],
                              "float32_bits": [bits32(x) for x in v.astype("float32")]})
    for name, seed, dist, std, n in DIGEST_CASES:
        t = h.hash_tensor(name, (n,), dist, std, "float32", seed)
        out["digests"].append({"name": name, "seed": str(seed), "distribution": dist,
                               "std_bits": bits64(std), "count": n,
                               "float32_sha256": h.digest_values(t)})
    for name, seed, low, high, n in INT_CASES:
        out["integers"].append({"name": name, "seed": str(seed), "low": low, "high": high,
                                "values": [int(x) for x in h.hash_integers(name, (n,), low, high,
                                                                            seed)]})
    with open(os.path.join(HERE, "golden.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=True)
        f.write("\n")


if __name__ == "__main__":
    main()
