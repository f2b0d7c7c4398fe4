"""Evidence that cannot be re-tuned (docs/references.md "Declare, measure, verify"): an
append-only, hash-chained JSONL ledger. A declaration fixes the reference design, the files
and the tolerances before anything is measured; a measurement runs the declared check once;
verify re-hashes the chain and every file the ledger names.

Line format (one JSON object per line, keys sorted, no spaces, UTF-8):
    {"entry": {...}, "prev": SHA256(previous line's bytes) | 64 zeros, "seq": N,
     "sha256": SHA256 of the canonical JSON of {"entry", "prev", "seq"}}
Editing any byte of a line breaks its own "sha256" or the next line's "prev"; deleting or
reordering lines breaks "seq"/"prev". Rewriting the chain from some line to the end is caught
only against a head recorded elsewhere: verify prints the head, `--head` checks it (commit it
next to the code, or paste it in the review)."""

from __future__ import annotations

import datetime
import fcntl
import hashlib
import json
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

ZERO = "0" * 64
SCHEMA = "driftscope.evidence/1"
ROLES = ("reference", "reference64", "model", "input", "policy")


class LedgerError(Exception):
    """Trouble reading or writing (exit 2)."""


def _canon(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def file_digest(path: str) -> str:
    """SHA-256 of a regular file's bytes (inputs must be regular files: no FIFO, no device)."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise LedgerError(f"cannot read {path}: {e.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise LedgerError(f"{path} is not a regular file")
        h = hashlib.sha256()
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return h.hexdigest()
            h.update(chunk)
    finally:
        os.close(fd)


def read_lines(ledger: str) -> List[bytes]:
    if not os.path.exists(ledger):
        return []
    with open(ledger, "rb") as f:
        data = f.read()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        raise LedgerError(f"{ledger}: the last line is incomplete (offset {cut})")
    return data.split(b"\n")[:-1] if data else []


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
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            problems.append(f"{where}: not a ledger line")
            prev = hashlib.sha256(raw).hexdigest()
            continue
        if obj["seq"] != n:
            problems.append(f"{where}: seq is {obj['seq']}, expected {n} (a line was removed, "
                            f"added or moved)")
        if obj["prev"] != prev:
            problems.append(f"{where}: prev does not match the previous line (it was edited, "
                            f"removed or moved)")
        if hashlib.sha256(_canon(body).encode("utf-8")).hexdigest() != obj.get("sha256"):
            problems.append(f"{where}: its content was edited (sha256 mismatch)")
        if raw != _canon(obj).encode("utf-8"):
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
    fd = os.open(ledger, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        lines = read_lines(ledger)
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
        from driftscope import __version__
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
        if need not in roles:
            raise LedgerError(f"a declaration needs a {need} dump")
    listed = [{"role": r, "path": os.path.abspath(p), "sha256": file_digest(p)} for r, p in files]
    entry = {"kind": "declare", "schema": SCHEMA, "id": ident, "time": _now(),
             "tool": f"driftscope {_version()}", "design": design, "files": listed,
             "tolerances": tolerances}

    def unique(entries: List[Dict[str, Any]]) -> None:
        if any(e.get("kind") == "declare" and e.get("id") == ident for e in entries):
            raise LedgerError(f"declaration {ident!r} exists already; declare a new id")

    return _append(ledger, entry, unique)[0]


def measure(ledger: str, ident: str, candidate: str) -> Tuple[str, Dict[str, Any]]:
    """Runs the declared ordering check on `candidate` once and appends its result. Refuses an
    unknown id, an id measured before, and declared files whose bytes changed."""
    from ._check import check, verdict_line

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
    for f in decl["files"]:
        if file_digest(f["path"]) != f["sha256"]:
            raise LedgerError(f"{f['role']} {f['path']} changed since it was declared; "
                              f"nothing measured")
    by_role = {f["role"]: f["path"] for f in decl["files"]}
    tol = decl.get("tolerances", {})
    cand_digest = file_digest(candidate)
    result = check(by_role["reference"], candidate, by_role["reference64"],
                   r64_k=tol.get("r64_k", {}), r64_floor=tol.get("r64_floor"),
                   policy=by_role.get("policy"))
    if file_digest(candidate) != cand_digest:
        raise LedgerError(f"candidate {candidate} changed while it was measured")
    summary = {"passed": result["passed"], "judged": result["judged"],
               "failed": result["failed"], "argmax_flips": result["argmax_flips"],
               "argmax_flips_float32": result["argmax_flips_float32"],
               "compare_verdict": result["compare_verdict"], "line": verdict_line(result),
               "table_sha256": hashlib.sha256(_canon(result["rows"]).encode()).hexdigest()}
    entry = {"kind": "measure", "schema": SCHEMA, "id": ident, "time": _now(),
             "tool": f"driftscope {_version()}",
             "candidate": {"path": os.path.abspath(candidate), "sha256": cand_digest},
             "result": summary}

    def once(entries: List[Dict[str, Any]]) -> None:  # again, under the lock
        if any(e.get("kind") == "measure" and e.get("id") == ident for e in entries):
            raise LedgerError(f"declaration {ident!r} was measured already")

    return _append(ledger, entry, once)[0], result


def verify(ledger: str, expect_head: Optional[str] = None) -> Tuple[List[str], str, int]:
    """(problems, head, lines): the chain, each line's own hash, every named file's bytes, and
    that each measurement follows its declaration."""
    if not os.path.isfile(ledger):
        raise LedgerError(f"{ledger}: no such ledger file")
    lines = read_lines(ledger)
    problems, entries = _line_problems(lines)
    declared = set()
    for e in entries:
        n = e["_line"]
        kind = e.get("kind")
        files = list(e["files"]) if isinstance(e.get("files"), list) else []
        if kind == "declare":
            declared.add(e.get("id"))
        elif kind == "measure":
            if e.get("id") not in declared:
                problems.append(f"line {n}: measurement of {e.get('id')!r} has no earlier "
                                f"declaration")
            cand = e.get("candidate")
            files.append(dict(cand, role="candidate") if isinstance(cand, dict) else {})
        for f in files:
            try:
                if file_digest(f["path"]) != f["sha256"]:
                    problems.append(f"line {n}: {f['role']} {f['path']} changed since it was "
                                    f"recorded")
            except (LedgerError, KeyError, TypeError) as err:
                problems.append(f"line {n}: {f.get('role') if isinstance(f, dict) else '?'}: "
                                f"cannot check ({err})")
    h = head(lines)
    if expect_head is not None and expect_head != h:
        problems.append(f"head is {h}, expected {expect_head} (lines were rewritten or added)")
    return problems, h, len(lines)
