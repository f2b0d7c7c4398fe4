"""TDUMP v1 reference reader, written from docs/format.md alone and in its section order.

Standard library + numpy; copy this one file to use it.  ``read(path)`` returns a ``Dump``: the
header, run metadata, every valid TENSOR/SUMMARY record with its numpy array, and the file's
integrity (clean, unfinished, cut, corrupt).  A file whose header is invalid raises ``TdumpError``.

    python tdump_reader.py FILE            print a summary
    python tdump_reader.py --example OUT   write the worked example of §8, then read it
"""
import math, mmap, os, stat, struct, sys, zlib
from dataclasses import dataclass, field

import numpy as np


class TdumpError(Exception):
    """A check of the spec failed: ``code`` is the error name of docs/format.md."""
    def __init__(self, code, offset, message, name=None):
        super().__init__(f"{code} at offset {offset}: {message}")
        self.code, self.offset, self.name = code, offset, name


def check(ok, code, offset, message):
    if not ok:
        raise TdumpError(code, offset, message)


# §1 Conventions: little-endian, align64, strict UTF-8, CRC-32 as in zlib.
def align64(x):
    return (x + 63) & ~63


def utf8(b, offset, what):
    try:
        return bytes(b).decode("utf-8")  # Python's strict codec rejects overlongs and surrogates
    except UnicodeDecodeError as e:
        raise TdumpError("bad_utf8", offset, f"{what} is not valid UTF-8 ({e.reason})")


def zero(b):
    return not any(b)


def nonzero_at(buf, start, end):
    """Offset of the first non-zero byte of buf[start:end], None if all are zero."""
    for i in range(start, end):
        if buf[i]:
            return i
    return None


# §2.1 File header and §2.3 metadata block.
MAGIC, REC_MAGIC, BYTE_ORDER = b"\x89TDUMP\r\n", b"\x8aREC", 0x01020304


def read_header(buf):
    check(len(buf) >= 64, "truncated_header", len(buf), f"file has {len(buf)} bytes, header needs 64")
    check(buf[0:8] == MAGIC, "bad_magic", 0, "not a TDUMP file")
    major, minor, order, salt, req, opt, hlen, mlen, mcount = struct.unpack_from("<HHIQIIIII", buf, 8)
    check(major == 1, "unsupported_version", 8, f"version {major}.{minor}, this reader knows 1.x")
    check(order == BYTE_ORDER, "bad_byte_order", 12, f"byte_order 0x{order:08x}, expected 0x01020304")
    check(hlen <= 1 << 20, "limit_exceeded", 32, f"header_length {hlen} > 1 MiB")
    check(hlen == align64(64 + mlen), "length_mismatch", 32, f"header_length {hlen} != align64(64 + {mlen})")
    check(len(buf) >= hlen, "truncated_header", len(buf), f"file has {len(buf)} bytes, header needs {hlen}")
    stored, = struct.unpack_from("<I", buf, 60)
    check(zlib.crc32(buf[64:64 + mlen], zlib.crc32(buf[0:60])) == stored, "bad_header_checksum", 60,
          "header_crc does not match")
    check(req == 0, "unsupported_feature", 24, f"required_features 0x{req:08x} has unknown bits")
    check(mcount <= 1024, "limit_exceeded", 40, f"metadata_count {mcount} > 1024")
    bad = nonzero_at(buf, 44, 60)
    check(bad is None, "reserved_nonzero", bad, "header reserved bytes are not zero")
    bad = nonzero_at(buf, 64 + mlen, hlen)
    check(bad is None, "nonzero_padding", bad, "header padding is not zero")
    meta, pos, end = {}, 64, 64 + mlen
    for _ in range(mcount):  # errors in an entry point at the entry's start
        entry = pos
        key, pos = lp_string(buf, pos, end, 4, 1, 256, "metadata key", entry)
        check(key not in meta, "duplicate_key", entry, f"metadata key {key!r} repeated")
        meta[key], pos = lp_string(buf, pos, end, 4, 0, 65536, "metadata value", entry)
    check(pos == end, "length_mismatch", pos, "metadata entries do not fill metadata_length")
    return dict(version=(major, minor), salt=salt, optional_features=opt, header_length=hlen, metadata=meta)


def lp_string(buf, pos, end, width, lo, hi, what, entry):
    """A length-prefixed string with its length checked against the limits and the block."""
    check(pos + width <= end, "length_mismatch", entry, f"{what} runs past its block")
    n = int.from_bytes(buf[pos:pos + width], "little")
    check(lo <= n <= hi, "limit_exceeded", entry, f"{what} length {n} not in {lo}..{hi}")
    check(pos + width + n <= end, "length_mismatch", entry, f"{what} runs past its block")
    return utf8(buf[pos + width:pos + width + n], entry, what), pos + width + n


# §3.3 TENSOR meta (also the SUMMARY meta), §3.3.1 dtypes, §3.3.2 encodings.
DTYPES = {1: ("f64", "<f8"), 2: ("f32", "<f4"), 3: ("f16", "<f2"), 4: ("bf16", "<u2"), 5: ("f8e4m3fn", "u1"),
          6: ("f8e5m2", "u1"), 7: ("i64", "<i8"), 8: ("i32", "<i4"), 9: ("i16", "<i2"), 10: ("i8", "i1"),
          11: ("u8", "u1"), 12: ("bool", "u1"), 13: ("u16", "<u2"), 14: ("u32", "<u4"), 15: ("u64", "<u8")}
INTEGER = {"i64", "i32", "i16", "i8", "u8", "u16", "u32", "u64"}
ROLES, ENCODINGS = ("output", "input", "parameter", "other"), ("raw", "affine_tensor", "affine_channel")


def fp8_table(exp_bits, bias, fn):
    """All 256 values of an OCP FP8 format as float32 (fn: no infinities, S.1111.111 is NaN)."""
    man_bits, out = 7 - exp_bits, []
    for b in range(256):
        s, e, m = -1.0 if b & 0x80 else 1.0, (b >> man_bits) & ((1 << exp_bits) - 1), b & ((1 << man_bits) - 1)
        if fn and e == 15 and m == 7 or not fn and e == 31 and m:
            out.append(math.nan)
        elif not fn and e == 31:
            out.append(s * math.inf)
        elif e == 0:
            out.append(s * m / (1 << man_bits) * 2.0 ** (1 - bias))
        else:
            out.append(s * (1 + m / (1 << man_bits)) * 2.0 ** (e - bias))
    return np.array(out, dtype=np.float32)


FP8 = {"f8e4m3fn": fp8_table(4, 7, True), "f8e5m2": fp8_table(5, 15, False)}


META_FIELDS, META_WIDTHS = (0, 8, 12, 14, 15, 16, 18, 19, 20, 24, 26, 28, 30), (8, 4, 2, 1, 1, 2, 1, 1, 4, 2, 2, 2, 2)


def shape_bytes(shape, itemsize, at):
    """§3.3: dtype size times every non-zero dim, so zero-element shapes are judged in any order."""
    n = itemsize
    for d in shape:
        n *= d or 1
    check(n < 1 << 64, "shape_overflow", at, f"shape {list(shape)} overflows u64")
    check(n <= 1 << 48, "limit_exceeded", at, f"shape {list(shape)} spans {n} bytes > 2^48")
    return n if all(shape) else 0


def parse_tensor_meta(buf, at, n, r):
    """Fills `r` field by field, so that after an error the caller still knows the name."""
    end = at + n
    # a meta too short for its fixed part fails at the first field that runs past its end
    short = next((f for f, w in zip(META_FIELDS, META_WIDTHS) if f + w > n), None)
    check(short is None, "length_mismatch", at + (short or 0), f"meta_length {n} < 32")
    (exec_index, occ, code, rank, role, role_index, enc, res, flags, name_n, op_n, axes_n,
     attr_n) = struct.unpack_from("<QIHBBHBBIHHHH", buf, at)
    check(code in DTYPES, "bad_dtype", at + 12, f"dtype code {code} is not defined")
    check(rank <= 16, "limit_exceeded", at + 14, f"rank {rank} > 16")
    check(role < 4, "bad_enum", at + 15, f"role {role} not in 0..3")
    check(enc < 3, "bad_enum", at + 18, f"encoding {enc} not in 0..2")
    bad = nonzero_at(buf, at + 19, at + 24)  # reserved byte and flags: wholly reserved
    check(bad is None, "reserved_nonzero", bad, "reserved meta bytes are not zero")
    check(name_n >= 1, "empty_name", at + 24, "name_length is 0")
    for key, field_at, hi, n_ in (("name", 24, 4096, name_n), ("op_type", 26, 256, op_n),
                                  ("axes", 28, 1024, axes_n), ("attr_count", 30, 256, attr_n)):
        check(n_ <= hi, "limit_exceeded", at + field_at, f"{key} {n_} > {hi}")
    check(at + 32 + 8 * rank <= end, "length_mismatch", at + 32 + (end - at - 32) // 8 * 8 if end - at >= 32 else at,
          "dims run past meta_length")
    shape, pos = struct.unpack_from(f"<{rank}Q", buf, at + 32), at + 32 + 8 * rank
    r.update(exec_index=exec_index, occurrence=occ, dtype=DTYPES[code][0], shape=shape,
             role=ROLES[role], role_index=role_index)
    for key, n_ in (("name", name_n), ("op_type", op_n), ("axes", axes_n)):
        check(pos + n_ <= end, "length_mismatch", pos, f"{key} runs past meta_length")
        r[key], pos = utf8(buf[pos:pos + n_], pos, key), pos + n_
        if key == "name":  # checked once the name is known, reported at the dims
            shape_bytes(shape, DTYPES_BY_NAME[r["dtype"]].itemsize, at + 32)
            check(not enc or r["dtype"] in INTEGER, "bad_encoding", at + 18,
                  f"affine encoding of a {r['dtype']} tensor")
    r["axes"] = r["axes"].split(",") if r["axes"] else []
    r["attrs"] = {}
    for _ in range(attr_n):  # every failure inside an attribute is reported at its start
        check(pos + 6 <= end, "length_mismatch", pos, "attribute runs past meta_length")
        kn, vn = struct.unpack_from("<HI", buf, pos)
        check(1 <= kn <= 256 and vn <= 65536, "limit_exceeded", pos, f"attribute lengths {kn}, {vn}")
        check(pos + 6 + kn + vn <= end, "length_mismatch", pos, "attribute runs past meta_length")
        k = utf8(buf[pos + 6:pos + 6 + kn], pos, "attribute key")
        v = utf8(buf[pos + 6 + kn:pos + 6 + kn + vn], pos, "attribute value")
        check(k not in r["attrs"], "duplicate_key", pos, f"attribute {k!r} repeated")
        r["attrs"][k], pos = v, pos + 6 + kn + vn
    r["encoding"] = {"kind": ENCODINGS[enc]}
    if enc:
        count = 1
        if enc == 2:
            check(pos + 8 <= end, "length_mismatch", pos if pos + 4 > end else pos + 4,
                  "encoding parameters run past meta_length")
            axis, count = struct.unpack_from("<II", buf, pos)
            check(axis < rank and count == shape[axis], "bad_encoding", pos,
                  f"per-channel axis {axis}, count {count} do not fit shape {list(shape)}")
            r["encoding"]["axis"], pos = axis, pos + 8
            check(pos + 16 * count <= end, "length_mismatch", pos - 8, "encoding parameters run past meta_length")
        scales = []
        for i in range(count):  # each scale is reported at its own offset
            check(pos + 8 * i + 8 <= end, "length_mismatch", pos + 8 * i, "scale runs past meta_length")
            sc, = struct.unpack_from("<d", buf, pos + 8 * i)
            check(math.isfinite(sc), "bad_value", pos + 8 * i, f"scale {sc} is not finite")
            scales.append(sc)
        check(pos + 16 * count <= end, "length_mismatch", pos + 8 * count, "zero points run past meta_length")
        zps = struct.unpack_from(f"<{count}q", buf, pos + 8 * count)
        r["encoding"].update(scales=scales, zero_points=list(zps))
        pos += 16 * count
    check(pos == end, "length_mismatch", pos, "meta fields do not fill meta_length")
    check(not r["axes"] or len(r["axes"]) == rank and all(r["axes"]), "bad_axes", at,
          f"axes {','.join(r['axes'])!r} are not {rank} non-empty names")
    return r


def decode(buf, r, off, dequantize):
    dt = DTYPES_BY_NAME[r["dtype"]]
    raw = np.frombuffer(buf, dtype=dt, count=math.prod(r["shape"]), offset=off).reshape(r["shape"])
    if r["dtype"] == "bool":
        bad = np.flatnonzero(raw.reshape(-1) > 1)
        check(bad.size == 0, "bad_value", off + int(bad[0]) if bad.size else off, "bool element other than 0 or 1")
        return raw.astype(bool), None
    arr = (raw.astype(np.uint32) << 16).view(np.float32) if r["dtype"] == "bf16" else \
        FP8[r["dtype"]][raw] if r["dtype"] in FP8 else raw
    enc = r["encoding"]
    if not dequantize or enc["kind"] == "raw":
        return arr, None
    shape = [1] * len(r["shape"])
    if enc["kind"] == "affine_channel":
        shape[enc["axis"]] = -1
    scale = np.reshape(enc["scales"], shape)
    zps = enc["zero_points"]
    if arr.dtype.itemsize <= 4 and all(abs(z) <= 1 << 52 for z in zps):
        # |q| < 2^32 and |zp| <= 2^52: both exact in binary64, and so is their difference
        diff = arr.astype(np.float64) - np.reshape(np.array(zps, np.float64), shape)
    else:  # §3.3.2: q − zero_point exactly (it may need 65 bits), rounded once to binary64
        zp = np.broadcast_to(np.reshape(np.array(zps, object), shape), arr.shape)
        diff = np.array([float(int(q) - int(z)) for q, z in zip(arr.reshape(-1).tolist(), zp.reshape(-1).tolist())],
                        np.float64).reshape(arr.shape)
    with np.errstate(over="ignore", invalid="ignore"):  # a huge scale gives ±inf, 0 × inf NaN: values
        return arr, scale * diff


DTYPES_BY_NAME = {name: np.dtype(dt) for name, dt in DTYPES.values()}

# §3.6 SUMMARY payload.
SUMMARY_FIELDS = ("count", "nan_count", "posinf_count", "neginf_count", "zero_count", "min", "max",
                  "mean", "std", "l2_norm", "projection_seed", "projection_dim", "projection_kind")


def parse_summary(buf, off, n, numel):
    """§3.6, checked in the order given there."""
    check(n >= 112, "length_mismatch", off, f"summary payload of {n} bytes < 112")
    s = dict(zip(SUMMARY_FIELDS, struct.unpack_from("<5Q5dQII", buf, off)))
    check(s["projection_dim"] <= 4096, "limit_exceeded", off + 88, f"projection_dim {s['projection_dim']} > 4096")
    check(n == 112 + 4 * s["projection_dim"], "length_mismatch", off, "payload_length != 112 + 4 x projection_dim")
    check(s["projection_kind"] == 1, "bad_enum", off + 92, f"projection_kind {s['projection_kind']} is not 1")
    bad = nonzero_at(buf, off + 96, off + 112)
    check(bad is None, "reserved_nonzero", bad, "summary reserved bytes are not zero")
    check(s["count"] == numel, "bad_value", off, f"summary counts {s['count']} elements, shape has {numel}")
    counted = s["nan_count"] + s["posinf_count"] + s["neginf_count"] + s["zero_count"]
    check(counted <= s["count"], "bad_value", off + 8, "nan, inf and zero counts add up to more than count")
    s["projection"] = np.frombuffer(buf, "<f4", s["projection_dim"], off + 112)
    return s


def splitmix64(v):
    """docs/format.md §3.6 (projection_kind 1), on u64 wrapping modulo 2^64."""
    m = (1 << 64) - 1
    z = (v + 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


def countsketch(values, seed, dim):
    """The projection of a SUMMARY from the decoded values (flat, row-major), as f32 values."""
    p = [0.0] * dim
    for i, v in enumerate(np.asarray(values, np.float64).reshape(-1).tolist()):
        if dim and math.isfinite(v):
            h = splitmix64((seed + i) & ((1 << 64) - 1))
            p[(h >> 32) % dim] += -v if h & 1 else v
    return np.array(p, np.float32)


@dataclass
class Record:
    kind: str; name: str; occurrence: int; exec_index: int; op_type: str; role: str; role_index: int
    dtype: str; shape: tuple; axes: list; attrs: dict; encoding: dict; offset: int; size: int
    payload_offset: int; array: object = None; dequantized: object = None; summary: dict = None


@dataclass
class Dump:
    version: tuple; salt: int; optional_features: int; header_length: int; metadata: dict
    file_size: int; records: list = field(default_factory=list); state: str = "unfinished"
    valid_end: int = 0; cut_offset: int = None; discarded_bytes: int = 0; corruption: TdumpError = None
    warnings: list = field(default_factory=list)


# §3.1 record frame, §3.2 kinds, §3.4 INDEX, §3.5 END, checked in the order of §3.1 and §4.
def read_record(buf, pos, salt):
    """Returns (kind, flags, meta_off, meta_len, payload_off, payload_len, length), or 'cut'."""
    size = len(buf)
    if size - pos < 48:
        return "cut"                                                          # step 1
    kind, flags, length, plen, mlen, res, rsalt, fcrc, rcrc = struct.unpack_from("<HHQQIIQII", buf, pos + 4)
    if buf[pos:pos + 4] != REC_MAGIC or zlib.crc32(buf[pos:pos + 40]) != fcrc:  # step 2
        if zero(buf[pos:]):
            return "cut"  # a file system extended the file with zeros before the writer died
        check(buf[pos:pos + 4] == REC_MAGIC, "bad_record_magic", pos, "record magic is not 8A 52 45 43")
        check(False, "bad_frame_checksum", pos, f"frame_crc 0x{fcrc:08x} does not match")
    check(rsalt == salt, "salt_mismatch", pos + 32, f"record salt 0x{rsalt:016x} is not the file's (spliced record)")
    bad = nonzero_at(buf, pos + 28, pos + 32)
    check(bad is None, "reserved_nonzero", bad, "frame reserved field is not zero")
    known = 1 <= kind <= 4  # SKIPPABLE is reserved on the kinds every reader knows (§3.2)
    check(flags & (0xFFFF if known else 0xFFFE) == 0, "reserved_nonzero", pos + 6, f"flags 0x{flags:04x} use reserved bits")
    check(mlen <= 1 << 20, "limit_exceeded", pos + 24, f"meta_length {mlen} > 1 MiB")
    check(plen <= 1 << 48, "limit_exceeded", pos + 16, f"payload_length {plen} > 2^48")
    p = align64(48 + mlen)
    check(length == align64(p + plen), "length_mismatch", pos + 8, f"record_length {length} != align64({p} + {plen})")
    if pos + length > size:
        return "cut"                                                          # step 3
    crc = zlib.crc32(buf[pos:pos + 44])
    crc = zlib.crc32(buf[pos + p:pos + p + plen], zlib.crc32(buf[pos + 48:pos + 48 + mlen], crc))
    if crc != rcrc:                                                           # step 4
        if pos + length == size:
            return "cut"  # the frame reached the disk, the rest of the record did not
        check(False, "bad_record_checksum", pos + 44, f"record_crc 0x{rcrc:08x}, computed 0x{crc:08x}")
    for start, end in ((pos + 48 + mlen, pos + p), (pos + p + plen, pos + length)):
        bad = nonzero_at(buf, start, end)
        check(bad is None, "nonzero_padding", bad, "record padding is not zero")
    return kind, flags, pos + 48, mlen, pos + p, plen, length


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def check_index(buf, at, meta_off, mlen, poff, plen, records):
    """§3.4: the INDEX record against the TENSOR/SUMMARY records a scan found before it."""
    check(mlen == 24, "length_mismatch", at + 24, f"INDEX meta_length {mlen} != 24")
    n, slots, hash_kind = struct.unpack_from("<QQI", buf, meta_off)
    check(hash_kind == 1, "bad_index", meta_off + 16, f"INDEX hash {hash_kind} is not 1 (FNV-1a 64)")
    bad = nonzero_at(buf, meta_off + 20, meta_off + 24)
    check(bad is None, "reserved_nonzero", bad, "INDEX reserved field is not zero")
    check(n == len(records), "bad_index", meta_off, f"INDEX entry_count {n}, a scan finds {len(records)} records")
    want_slots = 1
    while want_slots < 2 * n:
        want_slots *= 2
    check(slots == want_slots, "bad_index", meta_off + 8, f"INDEX slot_count {slots}, expected {want_slots}")
    check(plen == 24 * n + 4 * slots, "length_mismatch", at + 16, f"INDEX payload_length {plen} != 24 x {n} + 4 x {slots}")
    # Linear probing in entry order, without walking the probe sequences: nxt[s] leads (by
    # path-halved links) to the first empty slot cyclically at or after s, so names whose hashes
    # share their low bits cost O(n log n), not O(n^2) (issue 23 item 4); the table is the same.
    table, nxt = [0] * slots, list(range(slots))
    for e, r in enumerate(records):
        h = fnv1a64(r.name.encode())
        want = (r.offset, h, r.occurrence, 1 if r.kind == "tensor" else 2)
        got = struct.unpack_from("<QQII", buf, poff + 24 * e)
        for field_at, g, w, what in zip((0, 8, 16, 20), got, want, ("offset", "name_hash", "occurrence", "kind")):
            check(g == w, "bad_index", poff + 24 * e + field_at, f"INDEX entry {e} {what} is {g:#x}, a scan finds {w:#x}")
        s = h % slots
        while nxt[s] != s:
            nxt[s] = nxt[nxt[s]]
            s = nxt[s]
        table[s] = e + 1
        nxt[s] = (s + 1) % slots
    base = poff + 24 * n
    for s, (got,) in enumerate(struct.iter_unpack("<I", buf[base:base + 4 * slots])):
        check(got == table[s], "bad_index", base + 4 * s, f"INDEX slot {s} holds {got}, linear probing puts {table[s]}")


# §4 Reading: validation, recovery and corruption.
def read(path, dequantize=False):
    """`path` is a file name (mapped, not copied) or the file's bytes."""
    if isinstance(path, (bytes, bytearray, memoryview)):
        buf = bytes(path)
    else:
        # Regular files only, checked before anything can block: opening a FIFO for reading
        # waits for a writer forever (O_NONBLOCK returns at once; SECURITY.md promise 3).
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                    else "a character device" if stat.S_ISCHR(mode) else "a block device"
                    if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file")
            raise TdumpError("io_error", 0, f"cannot read '{path}': it is {kind}, not a regular file")
        with open(fd, "rb") as f:
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if f.seek(0, 2) else b""
    dump = Dump(file_size=len(buf), **read_header(buf))
    pos = dump.valid_end = dump.header_length
    index_at, seen = None, set()
    while pos < len(buf):
        m = {}
        try:
            check(dump.state != "clean", "record_after_end", pos, f"{len(buf) - pos} bytes follow the END record")
            rec = read_record(buf, pos, dump.salt)
            if rec == "cut":
                dump.state, dump.cut_offset, dump.discarded_bytes = "cut", pos, len(buf) - pos
                break
            kind, flags, moff, mlen, poff, plen, length = rec
            check(index_at is None or kind == 4, "bad_index", pos,
                  f"the INDEX record at {index_at} is followed by kind {kind}; only END may follow INDEX")
            if kind in (1, 2):
                parse_tensor_meta(buf, moff, mlen, m)
                numel = math.prod(m["shape"])
                r = Record(kind="tensor" if kind == 1 else "summary", offset=pos, size=length,
                           payload_offset=poff, **m)
                if kind == 1:
                    nbytes = numel * DTYPES_BY_NAME[r.dtype].itemsize
                    check(plen == nbytes, "length_mismatch", pos + 16, f"payload_length {plen}, shape needs {nbytes}")
                    r.array, r.dequantized = decode(buf, m, poff, dequantize)
                else:
                    r.summary = parse_summary(buf, poff, plen, numel)
                key = (r.name, r.role, r.role_index, r.occurrence)
                if key in seen:
                    dump.warnings.append(TdumpError("duplicate_tensor", pos, f"{key} repeated; lookup uses the first"))
                seen.add(key)
                dump.records.append(r)
            elif kind == 3:
                check_index(buf, pos, moff, mlen, poff, plen, dump.records)
                index_at = pos
            elif kind == 4:
                check(mlen == 16 and plen == 0, "length_mismatch", pos, "END needs a 16-byte meta and no payload")
                named, count = struct.unpack_from("<QQ", buf, moff)
                check(named == index_at, "bad_index", moff, f"END index_offset {named}, the INDEX before END is at {index_at}")
                check(count == len(dump.records), "bad_index", moff + 8,
                      f"END record_count {count}, a scan finds {len(dump.records)} records")
                dump.state = "clean"
            else:
                check(flags & 1, "unknown_record_kind", pos + 4, f"record kind {kind} is unknown and not skippable")
            if kind != 3:
                index_at = None
        except TdumpError as e:
            e.name = m.get("name")
            dump.state, dump.corruption = "corrupt", e
            break
        pos = dump.valid_end = pos + length
    return dump


# §8 Worked example: the smallest complete file, written without any other driftscope code.
EXAMPLE_SALT = 0x0123456789ABCDEF


def example_bytes():
    def record(kind, meta, payload):
        p = align64(48 + len(meta))
        length = align64(p + len(payload))
        frame = REC_MAGIC + struct.pack("<HHQQIIQ", kind, 0, length, len(payload), len(meta), 0, EXAMPLE_SALT)
        frame += struct.pack("<I", zlib.crc32(frame))
        frame += struct.pack("<I", zlib.crc32(meta + payload, zlib.crc32(frame)))
        return (frame + meta).ljust(p, b"\0") + payload.ljust(length - p, b"\0")
    kv = [(b"framework", b"demo"), (b"writer", b"driftscope example")]
    block = b"".join(struct.pack("<I", len(k)) + k + struct.pack("<I", len(v)) + v for k, v in kv)
    hlen = align64(64 + len(block))
    head = MAGIC + struct.pack("<HHIQIIIII16x", 1, 0, BYTE_ORDER, EXAMPLE_SALT, 0, 0, hlen, len(block), len(kv))
    out = (head + struct.pack("<I", zlib.crc32(block, zlib.crc32(head))) + block).ljust(hlen, b"\0")
    meta = struct.pack("<QIHBBHBBIHHHHQ", 0, 0, 2, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2) + b"x"
    tensor_at, out = len(out), out + record(1, meta, struct.pack("<2f", 1.0, -2.0))
    index_at, table = len(out), struct.pack("<2I", *([1, 0] if fnv1a64(b"x") % 2 == 0 else [0, 1]))
    out += record(3, struct.pack("<QQII", 1, 2, 1, 0), struct.pack("<QQII", tensor_at, fnv1a64(b"x"), 0, 1) + table)
    return out + record(4, struct.pack("<QQ", index_at, 1), b"")


def esc(s):
    """File-supplied text for a terminal: control characters as escapes (§1), the rest as is."""
    return "".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode() for c in s)


def main(argv):
    if len(argv) == 3 and argv[1] == "--example":
        with open(argv[2], "wb") as f:
            f.write(example_bytes())
        argv = argv[:1] + argv[2:]
    if len(argv) != 2:
        sys.exit("usage: tdump_reader.py FILE | --example OUT")
    try:
        d = read(argv[1])
    except (TdumpError, OSError) as e:
        sys.exit(f"{argv[1]}: {e}")
    print(f"TDUMP {d.version[0]}.{d.version[1]}  salt 0x{d.salt:016x}  {d.file_size} bytes  "
          f"{len(d.records)} records  {d.state}")
    for k, v in d.metadata.items():
        print(f"  {esc(k)} = {esc(v)}")
    if d.state == "cut":
        print(f"  cut at offset {d.cut_offset}: {d.discarded_bytes} bytes discarded")
    if d.corruption:
        print(f"  corrupt: {esc(str(d.corruption))}" + (f" (tensor {esc(d.corruption.name)})" if d.corruption.name else ""))
    for w in d.warnings:
        print(f"  warning: {esc(str(w))}")
    for r in d.records:
        print(f"{r.exec_index:6d} {esc(r.name)}#{r.occurrence} {esc(r.op_type) or '-'} {r.role}{r.role_index} "
              f"{r.dtype}{list(r.shape)} {esc(','.join(r.axes))} {r.encoding['kind']} {describe(r)}")


def describe(r):
    """Finite min/max/mean and NaN/Inf counts of a tensor; the stored statistics of a summary."""
    if r.summary:
        s = r.summary
        return f"summary of {s['count']}: mean {s['mean']:.6g} std {s['std']:.6g} nan {s['nan_count']}"
    if r.array.size == 0:
        return "empty"
    x = r.array.astype(np.float64).reshape(-1)
    fin = x[np.isfinite(x)]
    out = f"min {fin.min():.6g} max {fin.max():.6g} mean {fin.mean():.6g}" if fin.size else "no finite values"
    nan, inf = int(np.isnan(x).sum()), int(np.isinf(x).sum())
    return out + (f" nan {nan}" if nan else "") + (f" inf {inf}" if inf else "")

if __name__ == "__main__":
    main(sys.argv)
