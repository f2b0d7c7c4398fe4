"""Declare, measure, verify (docs/references.md section 4): an append-only, hash-chained JSONL
ledger. A declaration fixes the reference design, the files and the tolerances; a measurement
runs the declared check once and records its whole table; verify re-hashes the chain and every
file the ledger names, recomputes each verdict from its recorded table and the declared rule, and
re-measures when the named dumps are present.

Line format (one JSON object per line, keys sorted, no spaces, UTF-8):
    {"entry": {...}, "prev": SHA256(previous line's bytes) | 64 zeros, "seq": N,
     "sha256": SHA256 of the canonical JSON of {"entry", "prev", "seq"}}

What the chain shows, and what it cannot: editing a line breaks its own "sha256" (or, with the
hash recomputed, the next line's "prev"). Anyone can recompute hashes, so a ledger rewritten from
some line to its end, or cut at its end and measured again, verifies on its own; only a head
pinned elsewhere catches that (`--head`, a prefix anchor: the pinned line must still be in the
chain). The ledger never proves when a line was written, nor that nothing was measured in
private before the declaration."""

from __future__ import annotations

import datetime
import fcntl
import hashlib
import json
import math
import os
import re
import stat
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

ZERO = "0" * 64
SCHEMA = "driftscope.evidence/1"
ROLES = ("reference", "reference64", "model", "input", "policy")
LEDGER_MAX_BYTES = 256 << 20  # a ledger is parsed whole; thousands of measurements fit
_CHUNK = 1 << 20
_PROBLEMS_PER_MEASUREMENT = 10  # a hostile table cannot flood the output
MAX_PROBLEMS = 100  # verify prints this many problem lines, then how many more there are
# The shortest line that can hold a ledger line's keys, {"entry":0,"prev":0,"seq":0}: a shorter
# line is damaged without being parsed, and, once MAX_PROBLEMS are kept, a run of them is counted
# in one step (a ledger of millions of blank lines costs no time per line).
_MIN_LINE = 28
_LONG_LINE = re.compile(rb"[^\n]{%d}" % _MIN_LINE)
_BLANK_LINES = re.compile(rb"\n+")
_EMPTY_DIGEST = hashlib.sha256(b"").digest()
_MAX_TOLERANCE = 1e12  # compare's bound for --r64-k and --r64-floor (docs/compare.md)
# What "intact" does not cover (docs/references.md "What the ledger proves"): printed by verify.
LIMITS = ("intact means the lines agree with each other, with the files they name and with the "
          "declared rule; it does not show when a line was written, that nothing was measured "
          "elsewhere first, or, without a --head pinned after the last measurement, that no "
          "line was cut from the end")


class LedgerError(Exception):
    """Trouble reading or writing (exit 2)."""


class NotRegularFile(LedgerError):
    """A FIFO, device, socket or /proc-like file where a regular file belongs: refused (exit 2),
    also when verify meets it among the files a ledger names."""


_Cache = Dict[Tuple[int, int, int, int], str]


class Problems(list):  # type: ignore[type-arg]
    """Problem lines, one string each: the first `limit` are kept, every one is counted in
    `total`, so a ledger damaged on millions of lines costs neither memory nor output per
    line."""

    def __init__(self, limit: int = MAX_PROBLEMS) -> None:
        super().__init__()
        self.limit, self.total = limit, 0

    def append(self, problem: str) -> None:
        self.total += 1
        if len(self) < self.limit:
            super().append(problem)

    def extend(self, problems: Any) -> None:
        for p in problems:
            self.append(p)

    def __iadd__(self, problems: Any) -> "Problems":
        self.extend(problems)
        return self

    @property
    def full(self) -> bool:
        return len(self) >= self.limit


def _short(v: Any, most: int = 80) -> str:
    """repr(v), cut: a value from a ledger may be megabytes long."""
    text = repr(v) if not isinstance(v, int) or isinstance(v, bool) or abs(v) < 10 ** 30 \
        else f"an integer of about {v.bit_length() * 30103 // 100000 + 1} digits"
    return text if len(text) <= most else text[:most] + "..."


def _canon(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def _refuse_special(path: str, st: os.stat_result, what: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else
                "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else
                "a directory" if stat.S_ISDIR(st.st_mode) else
                "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise NotRegularFile(f"{what} {path} is {kind}; only regular files are read")


def _open_regular(path: str, what: str, flags: int = os.O_RDONLY,
                  create: bool = False) -> Tuple[int, os.stat_result]:
    """Opens a regular file without ever blocking: a stat first (a device is never opened),
    then O_NONBLOCK (a FIFO swapped in meanwhile cannot hang the open) and an fstat of what was
    opened."""
    try:
        _refuse_special(path, os.stat(path), what)
    except FileNotFoundError:
        if not create:
            raise LedgerError(f"cannot read {path}: no such file") from None
    except OSError as e:
        raise LedgerError(f"cannot read {path}: {e.strerror}") from None
    except ValueError:  # a NUL in a path taken from a ledger
        raise LedgerError(f"cannot read {path!r}: a path cannot hold a NUL byte") from None
    extra = os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags | extra | (os.O_CREAT if create else 0), 0o644)
    except OSError as e:
        raise LedgerError(f"cannot open {path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        _refuse_special(path, st, what)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def _read_exactly(fd: int, path: str, what: str, size: int,
                  sink: Callable[[bytes], None]) -> None:
    """Reads the `size` bytes fstat promised, then one more to make sure there are none: a
    /proc or /sys file claims 0 or 4096 bytes and reads on (/proc/self/pagemap for hundreds of
    GiB), so reading to EOF would not be bounded by anything the file declared."""
    off = 0
    try:
        while off < size:
            chunk = os.pread(fd, min(_CHUNK, size - off), off)
            if not chunk:
                raise LedgerError(f"{path} shrank while it was read (offset {off} of {size})")
            sink(chunk)
            off += len(chunk)
    except OSError as e:
        raise LedgerError(f"cannot read {path} at offset {off}: {e.strerror}") from None
    try:
        more = os.pread(fd, 8, off)  # 8: /proc/PID/pagemap refuses reads of other sizes
    except OSError:
        more = b"?"  # a regular file reads b"" at its end; this one is something else
    if more:
        raise NotRegularFile(f"{what} {path} reads past its size of {size} bytes (a /proc or "
                             f"/sys file); only regular files are read")


def file_digest(path: str, cache: Optional[_Cache] = None, what: str = "file") -> str:
    """SHA-256 of a regular file's bytes. With `cache`, a file seen before with the same device,
    inode, size and modification time is not read again (a ledger may name one file many
    times)."""
    fd, st = _open_regular(path, what)
    try:
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if cache is not None and key in cache:
            return cache[key]
        h = hashlib.sha256()
        _read_exactly(fd, path, what, st.st_size, h.update)
        after = os.fstat(fd)
        if (after.st_size, after.st_mtime_ns) != (st.st_size, st.st_mtime_ns):
            raise LedgerError(f"{path} changed while it was read")
        digest = h.hexdigest()
        if cache is not None:
            cache[key] = digest
        return digest
    finally:
        os.close(fd)


def _read_ledger_fd(fd: int, st: os.stat_result, ledger: str) -> bytes:
    """The whole ledger, which must end with a newline (or be empty)."""
    if st.st_size > LEDGER_MAX_BYTES:
        raise LedgerError(f"{ledger}: {st.st_size} bytes, over the ledger limit of "
                          f"{LEDGER_MAX_BYTES} bytes")
    parts: List[bytes] = []
    _read_exactly(fd, ledger, "ledger", st.st_size, parts.append)
    data = b"".join(parts)
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        raise LedgerError(f"{ledger}: the last line is incomplete (offset {cut})")
    return data


def read_ledger(ledger: str, must_exist: bool = False) -> bytes:
    if not must_exist and not os.path.lexists(ledger):
        return b""
    fd, st = _open_regular(ledger, "ledger")
    try:
        return _read_ledger_fd(fd, st, ledger)
    finally:
        os.close(fd)


class _Chain:
    """What walking a ledger's lines found: `entries` of the lines that parse (each with its
    line number as "_line"), the number of `lines`, the `head` (the hash of the last line) and
    `pinned`, the number of the first line whose hash is the pin asked for (None: no line)."""

    def __init__(self, entries: List[Dict[str, Any]], lines: int, head: str,
                 pinned: Optional[int]) -> None:
        self.entries, self.lines, self.head, self.pinned = entries, lines, head, pinned


def _walk(data: bytes, problems: Problems, pin: Optional[str] = None) -> _Chain:
    """Checks the chain of `data` (whole lines), one problem string per finding ('line N
    (offset O): ...') into `problems`. Work per line is small: a line too short to be a ledger
    line is not parsed, the hash of a damaged line is taken only when the next line needs it,
    and once `problems` is full a run of short lines is counted in one step (while `pin` is
    still to be looked for, only a run of blank lines: the others are hashed one by one)."""
    entries: List[Dict[str, Any]] = []
    prev: Optional[str] = ZERO  # the previous line's hash; None: not taken yet, see last
    last = (0, 0)  # where the previous line is in data
    pin_digest = bytes.fromhex(pin) if pin else None
    pinned: Optional[int] = None
    n = pos = 0
    size = len(data)
    while pos < size:
        if problems.full and (pin_digest is None or pinned is not None):
            m = _LONG_LINE.search(data, pos)
            cut = size if m is None else data.rfind(b"\n", pos, m.start()) + 1
        elif problems.full and pin_digest != _EMPTY_DIGEST:  # blank lines cannot be the pin
            m = _BLANK_LINES.match(data, pos)
            cut = pos if m is None else m.end()
        else:
            cut = pos
        if cut > pos:  # whole lines, each too short to be a ledger line: counted
            k = data.count(b"\n", pos, cut)
            problems.total += k
            n += k
            last = (data.rfind(b"\n", pos, cut - 1) + 1 or pos, cut - 1)
            prev, pos = None, cut
            continue
        end = data.index(b"\n", pos)
        raw = data[pos:end]
        n += 1
        if pin_digest is not None and pinned is None and \
                hashlib.sha256(raw).digest() == pin_digest:
            pinned = n
        obj: Any = None
        if len(raw) >= _MIN_LINE:
            try:
                obj = json.loads(raw.decode("utf-8"))
                body = {"entry": obj["entry"], "prev": obj["prev"], "seq": obj["seq"]}
                canon_body = _canon(body).encode("utf-8")
                canon_line = _canon(obj).encode("utf-8")
            except (ValueError, KeyError, TypeError, UnicodeError, RecursionError):
                obj = None
        if obj is None:
            problems.append(f"line {n} (offset {pos}): not a ledger line")
            prev, last, pos = None, (pos, end), end + 1
            continue
        where = f"line {n} (offset {pos})"
        if prev is None:
            prev = hashlib.sha256(data[last[0]:last[1]]).hexdigest()
        if obj["seq"] != n:
            problems.append(f"{where}: seq is {_short(obj['seq'])}, expected {n} (a line was "
                            f"removed, added or moved)")
        if obj["prev"] != prev:
            problems.append(f"{where}: prev does not match the previous line (it was edited, "
                            f"removed or moved)")
        if hashlib.sha256(canon_body).hexdigest() != obj.get("sha256"):
            problems.append(f"{where}: its content was edited (sha256 mismatch)")
        if raw != canon_line:
            problems.append(f"{where}: not in canonical form (edited by hand)")
        entries.append(dict(obj["entry"], _line=n) if isinstance(obj["entry"], dict) else {"_line": n})
        prev, last, pos = hashlib.sha256(raw).hexdigest(), (pos, end), end + 1
    if prev is None:
        prev = hashlib.sha256(data[last[0]:last[1]]).hexdigest()
    return _Chain(entries, n, prev, pinned)


def _open_for_append(ledger: str) -> Tuple[int, bool]:
    """The ledger opened for appending and locked, and whether this call created it. A ledger
    that another writer created and removed again (its append failed) while this one waited for
    the lock is opened again."""
    for _ in range(100):
        created = not os.path.lexists(ledger)
        try:
            fd, st = _open_regular(ledger, "ledger", os.O_RDWR | os.O_APPEND |
                                   (os.O_EXCL if created else 0), create=created)
        except LedgerError:
            if created and os.path.lexists(ledger):
                continue  # made meanwhile by another writer
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                now: Optional[os.stat_result] = os.stat(ledger)
            except OSError:
                now = None
        except BaseException:
            os.close(fd)
            raise
        if now is not None and (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
            return fd, created
        os.close(fd)
    raise LedgerError(f"{ledger} was replaced again and again while it was opened; nothing "
                      f"appended")


def _append(ledger: str, entry: Dict[str, Any],
            check: Optional[Any] = None) -> Tuple[str, List[Dict[str, Any]]]:
    """Appends one line under an exclusive lock, after verifying the chain; `check(entries)`
    may refuse (raise LedgerError) while the lock is held. Returns the new head. Complete or
    absent: a failed write is cut off again, and a ledger this call created is removed when
    nothing was appended to it."""
    try:
        _canon(entry).encode("utf-8")
    except (ValueError, UnicodeError) as e:
        raise LedgerError(f"the entry cannot be written as UTF-8 JSON ({e}); nothing "
                          f"appended") from None
    fd, created = _open_for_append(ledger)
    size: Optional[int] = None
    try:
        data = _read_ledger_fd(fd, os.fstat(fd), ledger)
        problems = Problems(1)
        chain = _walk(data, problems)
        if problems:
            raise LedgerError(f"{ledger} does not verify ({problems[0]}); nothing appended")
        if check is not None:
            check(chain.entries)
        body = {"entry": entry, "prev": chain.head, "seq": chain.lines + 1}
        line = dict(body, sha256=hashlib.sha256(_canon(body).encode("utf-8")).hexdigest())
        raw = _canon(line).encode("utf-8")
        size, left = len(data), memoryview(raw + b"\n")
        try:
            while left:
                left = left[os.write(fd, left):]
            os.fsync(fd)
        except OSError as e:
            raise LedgerError(f"cannot write {ledger}: {e.strerror}; nothing appended") from None
        size = None
        return hashlib.sha256(raw).hexdigest(), chain.entries
    except BaseException:
        try:
            if size is not None:
                os.ftruncate(fd, size)  # a line written in part is no line
            if created and os.fstat(fd).st_size == 0:
                os.unlink(ledger)  # still ours: the lock is held and the inode was checked
        except OSError:
            pass
        raise
    finally:
        os.close(fd)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _version() -> str:
    try:
        from .._core import __version__
        return __version__
    except ImportError:  # pragma: no cover - the package without its extension
        return "unknown"


def _utf8(option: str, text: str) -> None:
    """A ledger is UTF-8 text: a command-line value holding bytes that are not UTF-8 (surrogate
    escapes) is refused before anything is written."""
    try:
        text.encode("utf-8")
    except UnicodeError:
        raise LedgerError(f"{option} '{text}': not valid UTF-8 text (a ledger holds UTF-8)") \
            from None  # the command prints the bytes that are not UTF-8 as \\xNN


def _tolerance_ok(v: Any) -> bool:
    """A k or floor compare accepts: a number in 0 .. 1e12 (NaN and infinities are not)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= _MAX_TOLERANCE


def _tolerance_problems(tol: Any) -> List[str]:
    """What is wrong with a declaration's recorded tolerances, one string each."""
    if tol is None:
        return []
    if not isinstance(tol, dict):
        return [f"its tolerances are {_short(tol)}, not an object"]
    out = []
    ks = tol.get("r64_k")
    if ks is not None and not isinstance(ks, dict):
        out.append(f"its r64_k is {_short(ks)}, not an object of DTYPE: K")
    for dt, k in (ks.items() if isinstance(ks, dict) else ()):
        if not _tolerance_ok(k):
            out.append(f"its r64_k {_short(dt)} is {_short(k)}, not a number in 0 .. 1e+12")
    floor = tol.get("r64_floor")
    if floor is not None and not _tolerance_ok(floor):
        out.append(f"its r64_floor is {_short(floor)}, not a number in 0 .. 1e+12")
    return out


def declare(ledger: str, ident: str, files: Sequence[Tuple[str, str]],
            tolerances: Dict[str, Any], design: str = "") -> str:
    """Appends a declaration: `files` are (role, path) pairs, hashed now; `tolerances` are the
    options measure will pass to the ordering check (r64_k, r64_floor). Refuses an id in use,
    and, before any file is read or the ledger touched, a value compare would refuse or that
    is not UTF-8 (messages name the command's options)."""
    if not ident:
        raise LedgerError("the declaration needs an id")
    _utf8("--id", ident)
    _utf8("--design", design)
    for role, path in files:
        _utf8(f"--{role}", os.path.abspath(path))
    for dt, k in (tolerances.get("r64_k") or {}).items():
        if not _tolerance_ok(k):
            raise LedgerError(f"--r64-k {dt}={k!r}: K must be a finite number in 0 .. 1e+12")
    floor = tolerances.get("r64_floor")
    if floor is not None and not _tolerance_ok(floor):
        raise LedgerError(f"--r64-floor {floor!r}: must be a finite number in 0 .. 1e+12")
    roles = [r for r, _ in files]
    for need in ("reference", "reference64"):
        if roles.count(need) != 1:
            raise LedgerError(f"a declaration needs one {need} dump")
    if roles.count("policy") > 1:
        raise LedgerError("a declaration names at most one policy")
    cache: _Cache = {}
    listed = [{"role": r, "path": os.path.abspath(p), "sha256": file_digest(p, cache, r)}
              for r, p in files]
    entry = {"kind": "declare", "schema": SCHEMA, "id": ident, "time": _now(),
             "tool": f"driftscope {_version()}", "design": design, "files": listed,
             "tolerances": tolerances}

    def unique(entries: List[Dict[str, Any]]) -> None:
        if any(e.get("kind") == "declare" and e.get("id") == ident for e in entries):
            raise LedgerError(f"declaration {ident!r} exists already; declare a new id")

    return _append(ledger, entry, unique)[0]


def _summary(result: Dict[str, Any]) -> Dict[str, Any]:
    from ._check import verdict_line

    return {"passed": result["passed"], "judged": result["judged"],
            "failed": result["failed"], "argmax_flips": result["argmax_flips"],
            "argmax_flips_float32": result["argmax_flips_float32"],
            "compare_verdict": result["compare_verdict"], "line": verdict_line(result),
            "table_sha256": hashlib.sha256(_canon(result["rows"]).encode()).hexdigest()}


def _run_check(decl: Dict[str, Any], candidate: str) -> Dict[str, Any]:
    from ._check import check

    by_role = {f["role"]: f["path"] for f in decl["files"]}
    tol = decl.get("tolerances") or {}
    return check(by_role["reference"], candidate, by_role["reference64"],
                 r64_k=tol.get("r64_k") or {}, r64_floor=tol.get("r64_floor"),
                 policy=by_role.get("policy"))


def measure(ledger: str, ident: str, candidate: str) -> Tuple[str, Dict[str, Any]]:
    """Runs the declared ordering check on `candidate` once and appends its result and its whole
    table. Refuses an unknown id, an id measured before, a declaration whose files or
    tolerances are malformed, and declared files whose bytes changed."""
    _utf8("--candidate", os.path.abspath(candidate))
    problems = Problems(1)
    entries = _walk(read_ledger(ledger), problems).entries
    if problems:
        raise LedgerError(f"{ledger} does not verify ({problems[0]}); nothing measured")
    decl = next((e for e in entries if e.get("kind") == "declare" and e.get("id") == ident), None)
    if decl is None:
        raise LedgerError(f"no declaration {ident!r} in {ledger}; declare before measuring")
    if any(e.get("kind") == "measure" and e.get("id") == ident for e in entries):
        raise LedgerError(f"declaration {ident!r} was measured already; a declaration is "
                          f"measured once (declare a new id for a new design)")
    where = f"line {decl['_line']}: declaration {ident!r}"
    bad = _tolerance_problems(decl.get("tolerances"))
    if bad:
        raise LedgerError(f"{where}: {bad[0]}; nothing measured")
    if not isinstance(decl.get("files"), list):
        raise LedgerError(f"{where} lists no files; nothing measured")
    for f in decl["files"]:
        if not (isinstance(f, dict) and isinstance(f.get("role"), str) and
                isinstance(f.get("sha256"), str)):
            raise LedgerError(f"{where}: a file entry lacks a role or sha256; nothing measured")
        if not isinstance(f.get("path"), str):
            raise LedgerError(f"{where}: {f['role']} {_short(f.get('path'))} is not a path; "
                              f"nothing measured")
    cache: _Cache = {}
    for f in decl["files"]:
        if file_digest(f["path"], cache, f["role"]) != f["sha256"]:
            raise LedgerError(f"{f['role']} {f['path']} changed since it was declared; "
                              f"nothing measured")
    cand_digest = file_digest(candidate, None, "candidate")
    result = _run_check(decl, candidate)
    if file_digest(candidate, None, "candidate") != cand_digest:
        raise LedgerError(f"candidate {candidate} changed while it was measured")
    entry = {"kind": "measure", "schema": SCHEMA, "id": ident, "time": _now(),
             "tool": f"driftscope {_version()}",
             "candidate": {"path": os.path.abspath(candidate), "sha256": cand_digest},
             "result": _summary(result), "table": result["rows"]}

    def once(entries: List[Dict[str, Any]]) -> None:  # again, under the lock
        if any(e.get("kind") == "measure" and e.get("id") == ident for e in entries):
            raise LedgerError(f"declaration {ident!r} was measured already")

    return _append(ledger, entry, once)[0], result


# -- verify ---------------------------------------------------------------------------------------

_NOT_JUDGED = "not in the float64 run"
_DEFAULT_K = (2.0, 3.0, 4.0)  # compare's default_r64_k for every dtype (docs/compare.md)


def _real(v: Any) -> float:
    """A number as compare's JSON writes it: "inf"/"-inf" strings, null for NaN."""
    if v is None:
        return math.nan
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise TypeError(f"{_short(v)} is not a number")
    if isinstance(v, str) and v not in ("inf", "-inf"):
        raise ValueError(f"{_short(v)} is not a number")
    try:
        return float(v)
    except OverflowError:  # an integer of hundreds of digits: json reads it, float cannot
        raise ValueError(f"{_short(v)} is not a finite real number") from None


def _table_problems(table: List[Any], decl: Dict[str, Any]) -> List[str]:
    """Each judged row's decision recomputed from its own numbers and the declared rule:
    rule = pass iff cand <= limit; limit = k * float32's error + floor with floor >= 0 (exactly
    k * error when the declaration fixed the floor at 0); k one the declaration allows."""
    tol = decl.get("tolerances") or {}
    has_policy = any(isinstance(f, dict) and f.get("role") == "policy"
                     for f in decl.get("files") or [])
    # a malformed declared k is a problem of the declaration's line (verify), allowing nothing
    allowed_k = {float(v) for v in (tol.get("r64_k") or {}).values()
                 if _tolerance_ok(v)} | set(_DEFAULT_K)
    floor0 = tol.get("r64_floor") == 0
    out = []
    for i, row in enumerate(table):
        name = row["name"]
        if row["k"] is None:
            if row["rule"] != _NOT_JUDGED:
                out.append(f"row {i} ({name}): rule {row['rule']!r} without a float64 limit")
            continue
        k, e32 = _real(row["k"]), _real(row["float32_vs_float64"])
        err, lim = _real(row["candidate_vs_float64"]), _real(row["limit"])
        rule = "pass" if err <= lim else "fail"
        if row["rule"] != rule:
            out.append(f"row {i} ({name}): recorded {row['rule']!r}, but {err!r} against the "
                       f"limit {lim!r} is {rule!r}")
        if not has_policy and k not in allowed_k:
            out.append(f"row {i} ({name}): k = {k!r} is neither declared nor a default")
        if math.isfinite(lim) and math.isfinite(e32):
            if lim < k * e32 or (floor0 and lim != k * e32):
                out.append(f"row {i} ({name}): limit {lim!r} is not k x float32's error "
                           f"{k!r} x {e32!r}" + (" (floor 0 declared)" if floor0 else " + floor"))
    return out


def _from_table(table: List[Any]) -> Dict[str, Any]:
    from ._check import verdict_line

    judged = [r for r in table if r["k"] is not None]
    failed = [r["name"] for r in judged
              if not _real(r["candidate_vs_float64"]) <= _real(r["limit"])]
    result = {"judged": len(judged), "failed": failed, "passed": not failed and bool(judged),
              "argmax_flips": sum(int(r["argmax"]["flips"]) for r in table if r["argmax"]),
              "argmax_flips_float32": sum(int(r["argmax_float32"]["flips"])
                                          for r in table if r["argmax_float32"])}
    result["line"] = verdict_line(result)
    return result


def _verdict(summary: Dict[str, Any]) -> str:
    return "pass" if summary.get("passed") is True else "fail"


def _recheck(e: Dict[str, Any], decl: Optional[Dict[str, Any]], files_ok: bool,
             problems: List[str], notes: List[str]) -> None:
    """A measurement's verdict, checked twice over: from its recorded table and the declared
    rule, and by running the declared check again when every dump it used is present and
    unchanged. `notes` says which was done."""
    n, ident = e["_line"], e.get("id")
    where = f"line {n}: measurement {ident!r}"
    mine: List[str] = []
    summary = e.get("result")
    if not isinstance(summary, dict):
        problems.append(f"{where}: no recorded result")
        return
    table = e.get("table")
    done = []
    if table is None:
        done.append("no table recorded (a ledger line of an earlier driftscope)")
    else:
        try:
            if hashlib.sha256(_canon(table).encode()).hexdigest() != summary.get("table_sha256"):
                mine.append(f"{where}: its recorded table does not match its recorded table_sha256")
            elif decl is not None:
                mine += [f"{where}: {p}" for p in _table_problems(table, decl)]
                got = _from_table(table)
                diff = [k for k in ("passed", "judged", "failed", "argmax_flips",
                                    "argmax_flips_float32", "line") if summary.get(k) != got[k]]
                if diff:
                    mine.append(f"{where}: recorded {_verdict(summary)} ({', '.join(diff)}), but "
                                f"its table under the declared rule gives {_verdict(got)}: "
                                f"{got['line']}")
            done.append("verdict recomputed from its recorded table and the declared rule")
        except (KeyError, TypeError, ValueError, AttributeError, RecursionError,
                OverflowError) as err:
            mine.append(f"{where}: its recorded table is malformed ({err!r})")
    # malformed declared tolerances are reported on the declaration's line; compare would
    # refuse them, so the check is not run again
    tol_ok = decl is not None and not _tolerance_problems(decl.get("tolerances"))
    if tol_ok and files_ok:
        cand = e["candidate"]["path"]
        try:
            again = _summary(_run_check(decl, cand))
        except Exception as err:  # noqa: BLE001 - whatever compare says, as one problem line
            mine.append(f"{where}: cannot re-measure ({err})")
        else:
            if again["table_sha256"] != summary.get("table_sha256") or \
                    any(again[k] != summary.get(k) for k in again):
                tool = f"driftscope {_version()}"
                by = "" if e.get("tool") == tool else \
                    f"; recorded by {e.get('tool')}, re-measured by {tool}"
                mine.append(f"{where}: re-measured, the table differs from the recorded one "
                            f"(recorded {_verdict(summary)}, re-measured {_verdict(again)}: "
                            f"{again['line']}{by})")
            done.append("re-measured from the named dumps")
    elif decl is not None:
        done.append("not re-measured (" + ("a dump it used is absent or changed" if tol_ok else
                                           "the declared tolerances are malformed") + ")")
    if table is None and not (tol_ok and files_ok):
        mine.append(f"{where}: its verdict cannot be re-checked (no table recorded and not "
                    f"re-measured)")
    if len(mine) > _PROBLEMS_PER_MEASUREMENT:
        mine[_PROBLEMS_PER_MEASUREMENT:] = [f"{where}: and {len(mine) - _PROBLEMS_PER_MEASUREMENT}"
                                            f" more problems"]
    problems += mine
    state = "as recorded" if not mine else "PROBLEMS below"
    notes.append(f"{where}: {'; '.join(done)}: {_verdict(summary)} {state}")


def verify(ledger: str, expect_head: Optional[str] = None
           ) -> Tuple[Problems, List[str], str, int]:
    """(problems, notes, head, lines); problems keeps the first MAX_PROBLEMS and counts all in
    problems.total. Checks the chain, each line's own hash, every named file's
    bytes (each distinct file hashed once), that each id is declared once, measured at most
    once and after its declaration, each measurement's verdict (see _recheck), and, with
    `expect_head`, that the pinned line is still in the chain. Raises LedgerError (exit 2) for
    an unreadable ledger and NotRegularFile for a named FIFO, device or /proc file."""
    if expect_head is not None:
        expect_head = expect_head.strip().lower()
        if len(expect_head) != 64 or any(c not in "0123456789abcdef" for c in expect_head):
            raise LedgerError(f"--head {expect_head!r}: expected 64 hex digits (a head that "
                              f"verify or measure printed)")
    problems = Problems()
    chain = _walk(read_ledger(ledger, must_exist=True), problems,
                  expect_head if expect_head not in (None, ZERO) else None)
    entries = chain.entries
    notes: List[str] = []
    cache: _Cache = {}
    declared: Dict[Any, Dict[str, Any]] = {}
    measured: Dict[Any, int] = {}

    def file_ok(f: Any, n: int) -> bool:
        try:
            role, path, want = str(f["role"]), f["path"], f["sha256"]
        except (KeyError, TypeError):
            problems.append(f"line {n}: a file entry lacks a role, path or sha256")
            return False
        if not isinstance(path, str):
            problems.append(f"line {n}: {role} {_short(path)} is not a path")
            return False
        try:
            got = file_digest(path, cache, role)
        except NotRegularFile:
            raise
        except LedgerError as err:
            problems.append(f"line {n}: {role} {path}: cannot check ({err})")
            return False
        if got != want:
            problems.append(f"line {n}: {role} {path} changed since it was recorded")
            return False
        return True

    for e in entries:
        n, kind, ident = e["_line"], e.get("kind"), e.get("id")
        files = e.get("files") if isinstance(e.get("files"), list) else []
        if e.get("schema") != SCHEMA:
            problems.append(f"line {n}: schema {e.get('schema')!r}, expected {SCHEMA!r}")
        if kind == "declare":
            for p in _tolerance_problems(e.get("tolerances")):
                problems.append(f"line {n}: declaration {ident!r}: {p}")
            ok = [file_ok(f, n) for f in files]
            roles = [f.get("role") for f in files if isinstance(f, dict)]
            for need in ("reference", "reference64"):
                if roles.count(need) != 1:
                    problems.append(f"line {n}: declaration {ident!r} names {roles.count(need)} "
                                    f"{need} dumps, expected 1")
            if roles.count("policy") > 1:
                problems.append(f"line {n}: declaration {ident!r} names {roles.count('policy')} "
                                f"policies, expected at most 1")
            if ident in declared:
                problems.append(f"line {n}: declaration {ident!r} repeats line "
                                f"{declared[ident]['_line']}'s id")
                continue
            used = [o for f, o in zip(files, ok) if isinstance(f, dict) and
                    f.get("role") in ("reference", "reference64", "policy")]
            declared[ident] = dict(e, _files_ok=bool(used) and all(used))
        elif kind == "measure":
            decl = declared.get(ident)
            if decl is None:
                problems.append(f"line {n}: measurement of {ident!r} has no earlier "
                                f"declaration")
            if ident in measured:
                problems.append(f"line {n}: {ident!r} was measured already on line "
                                f"{measured[ident]}")
            measured.setdefault(ident, n)
            cand = e.get("candidate")
            cand_ok = file_ok(dict(cand, role="candidate") if isinstance(cand, dict) else {}, n)
            _recheck(e, decl, cand_ok and bool(decl and decl["_files_ok"]), problems, notes)
        else:
            problems.append(f"line {n}: unknown entry kind {kind!r}")
            for f in files:
                file_ok(f, n)
    h, lines = chain.head, chain.lines
    if expect_head is not None:
        if expect_head == ZERO:
            at = 0
        elif chain.pinned is not None:
            at = chain.pinned
        else:
            at = -1
            problems.append(f"the pinned head {expect_head} is no line of this ledger (a line at "
                            f"or before the pinned one was removed or rewritten)")
        if at >= 0:
            notes.append(f"the pinned head is line {at} of {lines}" +
                         (f"; the {lines - at} line(s) after it are not covered by the pin"
                          if at < lines else ""))
    return problems, notes, h, lines
