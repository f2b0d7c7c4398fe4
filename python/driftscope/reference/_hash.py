"""The counter-based SplitMix64 hash initialiser in numpy (docs/references.md, "The hash
initialiser"). Written from the spec alone, like the reference reader: the C++ implementation
(src/reference/hash_init.cpp), the C ABI and HashInit.java agree with it bit for bit, which the
shared golden vectors in tests/vectors/hashinit/ check in every language."""

from __future__ import annotations

import math
from typing import Sequence, Union

import numpy as np

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15  # SplitMix64's increment, 2^64 / phi rounded to odd
M1 = 0xBF58476D1CE4E5B9
M2 = 0x94D049BB133111EB
DISTRIBUTIONS = ("uniform", "normal")
DRAWS = {"uniform": 1, "normal": 4}  # SplitMix64 outputs per element (spec step 3)
_CHUNK = 1 << 20  # elements per vectorised block: bounds the temporaries to ~40 MB


def mix64(z: int) -> int:
    """SplitMix64's finaliser (spec step 2) on one Python int."""
    z &= MASK
    z = ((z ^ (z >> 30)) * M1) & MASK
    z = ((z ^ (z >> 27)) * M2) & MASK
    return z ^ (z >> 31)


def name_key(name: Union[str, bytes], seed: int = 0) -> int:
    """The 64-bit key of a parameter name (spec step 1): seed, then each UTF-8 byte, then the
    byte count, each folded in by one mix64."""
    if not 0 <= seed <= MASK:
        raise ValueError(f"seed {seed} is outside 0..2^64-1")
    data = name.encode("utf-8") if isinstance(name, str) else bytes(name)
    k = mix64(seed + GOLDEN)
    for b in data:
        k = mix64((k ^ b) + GOLDEN)
    return mix64(k ^ len(data))


def _mix_array(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(M1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(M2)
    return z ^ (z >> np.uint64(31))


def draws(key: int, first: int, count: int) -> np.ndarray:
    """SplitMix64 outputs number first..first+count-1 of the stream keyed by `key` (spec step 2):
    output c is mix64(key + (c + 1) * GOLDEN), all modulo 2^64."""
    c = np.arange(first, first + count, dtype=np.uint64) + np.uint64(1)
    with np.errstate(over="ignore"):
        return _mix_array(c * np.uint64(GOLDEN) + np.uint64(key))


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        if int(d) < 0:
            raise ValueError(f"shape {tuple(shape)} has a negative dimension")
        n *= int(d)
    return n


def _check_std(std: float) -> float:
    std = float(std)
    if not (math.isfinite(std) and std >= 0):
        raise ValueError(f"std {std} must be finite and >= 0")
    return std


def hash_values(name: Union[str, bytes], count: int, distribution: str = "uniform",
                std: float = 1.0, seed: int = 0) -> np.ndarray:
    """The float64 values of elements 0..count-1 (spec steps 3-4), before the cast to the
    parameter's dtype. Mean 0, standard deviation `std`."""
    if distribution not in DRAWS:
        raise ValueError(f"distribution {distribution!r} is not one of {', '.join(DISTRIBUTIONS)}")
    scale = _check_std(std) * math.sqrt(3.0)
    key = name_key(name, seed)
    per = DRAWS[distribution]
    out = np.empty(count, dtype=np.float64)
    for start in range(0, count, _CHUNK):
        n = min(_CHUNK, count - start)
        x = draws(key, start * per, n * per)
        if distribution == "uniform":
            # 53 high bits as k * 2^-52 in [0, 2), minus 1: exact, in [-1, 1).
            v = (x >> np.uint64(11)).astype(np.float64) * 2.0 ** -52 - 1.0
        else:
            # Irwin-Hall of 4: the sum of four 51-bit integers is below 2^53, so exact; centred
            # and scaled by 2^-51 it is exact too, with variance 1/3 (times sqrt(3) -> 1).
            s = (x >> np.uint64(13)).reshape(n, 4).sum(axis=1, dtype=np.uint64)
            v = (s.astype(np.int64) - (1 << 52)).astype(np.float64) * 2.0 ** -51
        out[start:start + n] = v * scale
    return out


def hash_tensor(name: Union[str, bytes], shape: Sequence[int], distribution: str = "uniform",
                std: float = 1.0, dtype: Union[str, np.dtype] = "float32",
                seed: int = 0) -> np.ndarray:
    """A tensor filled by the hash initialiser: element at flat row-major index i is value i of
    `hash_values`, rounded to nearest-even in `dtype` (float64 or float32; float16 is made from
    the float32 values, as the spec makes every other float dtype)."""
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.float16)):
        raise ValueError(f"dtype {dt} is not float64, float32 or float16 (cast the float32 "
                         f"values for other types)")
    shape = tuple(int(d) for d in shape)
    v = hash_values(name, _numel(shape), distribution, std, seed)
    if dt == np.dtype(np.float16):
        v = v.astype(np.float32)
    return v.astype(dt).reshape(shape)


def hash_integers(name: Union[str, bytes], shape: Sequence[int], low: int, high: int,
                  seed: int = 0) -> np.ndarray:
    """Integer inputs (token ids, calibration data; spec "Integer inputs"): element i is
    low + (output i mod (high - low)), as int64."""
    low, high = int(low), int(high)
    if not (-(1 << 63) <= low < high <= (1 << 63) - 1 and high - low <= (1 << 63) - 1):
        raise ValueError(f"range [{low}, {high}) must be non-empty and fit int64")
    shape = tuple(int(d) for d in shape)
    n = _numel(shape)
    x = draws(name_key(name, seed), 0, n) % np.uint64(high - low)
    return (x.astype(np.int64) + np.int64(low)).reshape(shape)


def digest_values(values: np.ndarray) -> str:
    """SHA-256 of a tensor's little-endian bytes: how the golden vectors pin a whole tensor."""
    import hashlib

    a = np.ascontiguousarray(values)
    return hashlib.sha256(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()).hexdigest()


