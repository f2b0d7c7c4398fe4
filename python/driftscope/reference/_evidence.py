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
import stat
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

ZERO = "0" * 64
SCHEMA = "driftscope.evidence/1"
ROLES = ("reference", "reference64", "model", "input", "policy")
LEDGER_MAX_BYTES = 256 << 20  # a ledger is parsed whole; thousands of measurements fit
_CHUNK = 1 << 20
_PROBLEMS_PER_MEASUREMENT = 10  # a hostile table cannot flood the output
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


def _split(ledger: str, data: bytes) -> List[bytes]:
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        raise LedgerError(f"{ledger}: the last line is incomplete (offset {cut})")
    return data.split(b"\n")[:-1] if data else []


def _read_ledger_fd(fd: int, st: os.stat_result, ledger: str) -> List[bytes]:
    if st.st_size > LEDGER_MAX_BYTES:
        raise LedgerError(f"{ledger}: {st.st_size} bytes, over the ledger limit of "
                          f"{LEDGER_MAX_BYTES} bytes")
    parts: List[bytes] = []
    _read_exactly(fd, ledger, "ledger", st.st_size, parts.append)
    return _split(ledger, b"".join(parts))


def read_lines(ledger: str, must_exist: bool = False) -> List[bytes]:
    if not must_exist and not os.path.lexists(ledger):
        return []
    fd, st = _open_regular(ledger, "ledger")
    try:
        return _read_ledger_fd(fd, st, ledger)
    finally:
        os.close(fd)


def _line_problems(lines: List[bytes]) -> Tuple[List[str], List[Dict[str, Any]]]:
    """Chain problems (one string each, 'line N: ...') and the entries of the lines that parse."""
    problems: List[str] = []
    entries: List[Dict[str, Any]] = []
    prev = ZERO
    offset = 0
    for n, raw in enumerate(lines, start=1):
        where = f"line {n} (offset {offset})"
        offset += len(raw) + 1
        try:
            obj = json.loads(raw.decode("utf-8"))
            body = {"entry": obj["entry"], "prev": obj["prev"], "seq": obj["seq"]}
            canon_body = _canon(body).encode("utf-8")
            canon_line = _canon(obj).encode("utf-8")
        except (ValueError, KeyError, TypeError, UnicodeError, RecursionError):
            problems.append(f"{where}: not a ledger line")
            prev = hashlib.sha256(raw).hexdigest()
            continue
        if obj["seq"] != n:
            problems.append(f"{where}: seq is {obj['seq']!r}, expected {n} (a line was removed, "
                            f"added or moved)")
        if obj["prev"] != prev:
            problems.append(f"{where}: prev does not match the previous line (it was edited, "
                            f"removed or moved)")
        if hashlib.sha256(canon_body).hexdigest() != obj.get("sha256"):
            problems.append(f"{where}: its content was edited (sha256 mismatch)")
        if raw != canon_line:
            problems.append(f"{where}: not in canonical form (edited by hand)")
        entries.append(dict(obj["entry"], _line=n) if isinstance(obj["entry"], dict) else {"_line": n})
        prev = hashlib.sha256(raw).hexdigest()
    return problems, entries


def head(lines: List[bytes]) -> str:
    return hashlib.sha256(lines[-1]).hexdigest() if lines else ZERO


def _append(ledger: str, entry: Dict[str, Any],
            check: Optional[Any] = None) -> Tuple[str, List[Dict[str, Any]]]:
    """Appends one line under an exclusive lock, after verifying the chain; `check(entries)`
    may refuse (raise LedgerError) while the lock is held. Returns the new head."""
    fd, st = _open_regular(ledger, "ledger", os.O_RDWR | os.O_APPEND, create=True)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        lines = _read_ledger_fd(fd, os.fstat(fd), ledger)
        problems, entries = _line_problems(lines)
        if problems:
            raise LedgerError(f"{ledger} does not verify ({problems[0]}); nothing appended")
        if check is not None:
            check(entries)
        body = {"entry": entry, "prev": head(lines), "seq": len(lines) + 1}
        line = dict(body, sha256=hashlib.sha256(_canon(body).encode("utf-8")).hexdigest())
        raw = _canon(line).encode("utf-8")
        os.write(fd, raw + b"\n")
        os.fsync(fd)
        return hashlib.sha256(raw).hexdigest(), entries
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


def declare(ledger: str, ident: str, files: Sequence[Tuple[str, str]],
            tolerances: Dict[str, Any], design: str = "") -> str:
    """Appends a declaration: `files` are (role, path) pairs, hashed now; `tolerances` are the
    options measure will pass to the ordering check (r64_k, r64_floor). Refuses an id in use."""
    if not ident:
        raise LedgerError("the declaration needs an id")
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
    table. Refuses an unknown id, an id measured before, and declared files whose bytes
    changed."""
    lines = read_lines(ledger)
    problems, entries = _line_problems(lines)
    if problems:
        raise LedgerError(f"{ledger} does not verify ({problems[0]}); nothing measured")
    decl = next((e for e in entries if e.get("kind") == "declare" and e.get("id") == ident), None)
    if decl is None:
        raise LedgerError(f"no declaration {ident!r} in {ledger}; declare before measuring")
    if any(e.get("kind") == "measure" and e.get("id") == ident for e in entries):
        raise LedgerError(f"declaration {ident!r} was measured already; a declaration is "
                          f"measured once (declare a new id for a new design)")
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
        raise TypeError(f"{v!r} is not a number")
    if isinstance(v, str) and v not in ("inf", "-inf"):
        raise ValueError(f"{v!r} is not a number")
    return float(v)


def _table_problems(table: List[Any], decl: Dict[str, Any]) -> List[str]:
    """Each judged row's decision recomputed from its own numbers and the declared rule:
    rule = pass iff cand <= limit; limit = k * float32's error + floor with floor >= 0 (exactly
    k * error when the declaration fixed the floor at 0); k one the declaration allows."""
    tol = decl.get("tolerances") or {}
    has_policy = any(isinstance(f, dict) and f.get("role") == "policy"
                     for f in decl.get("files") or [])
    allowed_k = {float(v) for v in (tol.get("r64_k") or {}).values()} | set(_DEFAULT_K)
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
        except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as err:
            mine.append(f"{where}: its recorded table is malformed ({err!r})")
    if decl is not None and files_ok:
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
        done.append("not re-measured (a dump it used is absent or changed)")
    if table is None and not (decl is not None and files_ok):
        mine.append(f"{where}: its verdict cannot be re-checked (no table recorded and not "
                    f"re-measured)")
    if len(mine) > _PROBLEMS_PER_MEASUREMENT:
        mine[_PROBLEMS_PER_MEASUREMENT:] = [f"{where}: and {len(mine) - _PROBLEMS_PER_MEASUREMENT}"
                                            f" more problems"]
    problems += mine
    state = "as recorded" if not mine else "PROBLEMS below"
    notes.append(f"{where}: {'; '.join(done)}: {_verdict(summary)} {state}")


def verify(ledger: str, expect_head: Optional[str] = None
           ) -> Tuple[List[str], List[str], str, int]:
    """(problems, notes, head, lines). Checks the chain, each line's own hash, every named file's
    bytes (each distinct file hashed once), that each id is declared once, measured at most
    once and after its declaration, each measurement's verdict (see _recheck), and, with
    `expect_head`, that the pinned line is still in the chain. Raises LedgerError (exit 2) for
    an unreadable ledger and NotRegularFile for a named FIFO, device or /proc file."""
    if expect_head is not None:
        expect_head = expect_head.strip().lower()
        if len(expect_head) != 64 or any(c not in "0123456789abcdef" for c in expect_head):
            raise LedgerError(f"--head {expect_head!r}: expected 64 hex digits (a head that "
                              f"verify or measure printed)")
    lines = read_lines(ledger, must_exist=True)
    problems, entries = _line_problems(lines)
    notes: List[str] = []
    cache: _Cache = {}
    declared: Dict[Any, Dict[str, Any]] = {}
    measured: Dict[Any, int] = {}

    def file_ok(f: Any, n: int) -> bool:
        try:
            role, path, want = str(f["role"]), f["path"], f["sha256"]
            if not isinstance(path, str):
                raise TypeError(path)
        except (KeyError, TypeError):
            problems.append(f"line {n}: a file entry lacks a role, path or sha256")
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
    h = head(lines)
    if expect_head is not None:
        hashes = [hashlib.sha256(raw).hexdigest() for raw in lines]
        if expect_head == ZERO:
            at = 0
        elif expect_head in hashes:
            at = hashes.index(expect_head) + 1
        else:
            at = -1
            problems.append(f"the pinned head {expect_head} is no line of this ledger (a line at "
                            f"or before the pinned one was removed or rewritten)")
        if at >= 0:
            notes.append(f"the pinned head is line {at} of {len(lines)}" +
                         (f"; the {len(lines) - at} line(s) after it are not covered by the pin"
                          if at < len(lines) else ""))
    return problems, notes, h, len(lines)
