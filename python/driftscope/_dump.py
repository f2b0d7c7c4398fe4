"""Reading dumps: ``driftscope.open(path)`` and the :class:`Dump` it returns."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import numpy as np

from . import _core
from .errors import Error, FormatError, NotFoundError

__all__ = ["Dump", "Integrity", "Record", "open"]

Record = _core.Record

_MISSING: Any = object()


@dataclass(frozen=True)
class Integrity:
    """How the file ended and what the reader found (docs/format.md §4)."""

    state: str
    """"clean" (ends with INDEX + END), "unfinished" (no END: crashed or still running), "cut"
    (torn tail dropped) or "corrupt" (a record failed a check and more data followed)."""
    file_size: int
    valid_end: int
    cut_offset: Optional[int]
    discarded_bytes: int
    corruption: Optional[Error]
    corrupt_name: Optional[str]
    warnings: Tuple[Error, ...] = field(default_factory=tuple)
    index_used: bool = False
    checksums_verified: bool = False

    @property
    def finished(self) -> bool:
        """The run ended cleanly (END record present)."""
        return self.state == "clean"

    @property
    def damaged(self) -> bool:
        """Something was dropped: a torn tail or corruption."""
        return self.state in ("cut", "corrupt")


class Dump:
    """A TDUMP file opened for reading. Arrays it returns stay valid after it is closed."""

    def __init__(self, reader: Any) -> None:
        self._reader = reader
        self._path: str = reader.path
        self._metadata: Dict[str, str] = dict(reader.metadata)
        self._header: Dict[str, Any] = dict(reader.header)
        raw = reader.integrity
        raw["warnings"] = tuple(raw["warnings"])
        self._integrity = Integrity(**raw)

    # -- file-level attributes -------------------------------------------------------------
    @property
    def path(self) -> str:
        return self._path

    @property
    def metadata(self) -> Dict[str, str]:
        """Run metadata (framework, backend, device, precision, model, start_time, writer, ...)."""
        return dict(self._metadata)

    @property
    def header(self) -> Dict[str, Any]:
        """version (major, minor), salt, required/optional feature bits, header_length."""
        return dict(self._header)

    @property
    def integrity(self) -> Integrity:
        return self._integrity

    @property
    def state(self) -> str:
        """Shortcut for ``integrity.state``."""
        return self._integrity.state

    @property
    def finished(self) -> bool:
        return self._integrity.finished

    def check_unchanged(self) -> None:
        """Raise DumpIOError ("file changed while reading") when the file was truncated since it
        was opened. Arrays are views of the mapped file: what lay past the cut now reads as
        zeros (the process does not crash), so call this before trusting values read from a dump
        that a writer may still be changing. Growth (a writer appending) is not a change."""
        self._live().check_unchanged()

    # -- records ---------------------------------------------------------------------------
    def _live(self) -> Any:
        if self._reader is None:
            raise ValueError(f"dump {self._path} is closed")
        return self._reader

    def __len__(self) -> int:
        return len(self._live())

    def __iter__(self) -> Iterator[Record]:
        """Every TENSOR and SUMMARY record, in file (execution) order."""
        reader = self._live()
        for i in range(len(reader)):
            yield reader.record(i)

    def records(self, name: Optional[str] = None) -> List[Record]:
        """All records, or all records named ``name`` (any role and occurrence), in file order."""
        reader = self._live()
        if name is None:
            return [reader.record(i) for i in range(len(reader))]
        return list(reader.find_all(name))

    def names(self) -> List[str]:
        """Distinct tensor names in order of first appearance."""
        seen: Dict[str, None] = {}
        for r in self:
            seen.setdefault(r.name, None)
        return list(seen)

    def find(self, name: str, occurrence: int = 0, role: str = "output",
             role_index: int = 0) -> Optional[Record]:
        """The record with this identity, or None."""
        return self._live().find(name, occurrence, role, role_index)

    def record(self, name: str, occurrence: int = 0, role: str = "output",
               role_index: int = 0) -> Record:
        """The record with this identity; NotFoundError (a KeyError) when absent."""
        r = self.find(name, occurrence, role, role_index)
        if r is None:
            raise self._not_found(name, occurrence, role, role_index)
        return r

    def get(self, name: str, occurrence: int = 0, role: str = "output", role_index: int = 0,
            *, dtype: Optional[str] = None, default: Any = _MISSING) -> Any:
        """The values of a tensor as a numpy array.

        Zero-copy and read-only when numpy has the stored dtype; bf16 and fp8 are decoded to
        float32. ``dtype="float32"`` or ``"float64"`` decodes any dtype, dequantising affine
        encodings. ``default`` is returned instead of raising NotFoundError when absent.
        """
        r = self.find(name, occurrence, role, role_index)
        if r is None:
            if default is not _MISSING:
                return default
            raise self._not_found(name, occurrence, role, role_index)
        return r.numpy(dtype or "")

    def __getitem__(self, key: Union[str, int]) -> Any:
        """``dump["name"]``: output 0 of the first occurrence; ``dump[i]``: the i-th Record."""
        if isinstance(key, (int, np.integer)):
            n = len(self)
            i = int(key)
            if not -n <= i < n:
                raise IndexError(f"record index {i} out of range ({n} records)")
            return self._live().record(i % n if n else i)
        return self.get(key)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and bool(self._live().find_all(name))

    def raise_if_damaged(self) -> None:
        """Raises the recorded corruption (FormatError) of a corrupt file; a cut tail raises too."""
        i = self._integrity
        if i.corruption is not None:
            raise i.corruption
        if i.state == "cut":
            raise FormatError(
                f"{self._path} is cut at offset {i.cut_offset}: {i.discarded_bytes} bytes of a "
                f"torn record were discarded", 62, "length_mismatch", i.cut_offset)

    # -- lifetime --------------------------------------------------------------------------
    def close(self) -> None:
        """Drops this Dump's reference to the mapping; arrays already returned keep it alive."""
        self._reader = None

    @property
    def closed(self) -> bool:
        return self._reader is None

    def __enter__(self) -> "Dump":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        n = "closed" if self._reader is None else f"{len(self._reader)} records"
        return f"<driftscope.Dump {self._path!r} {n} state={self.state}>"

    def _not_found(self, name: str, occurrence: int, role: str, role_index: int) -> NotFoundError:
        # A lookup through a footer index that was cut away finds nothing: say why instead.
        self._live().check_unchanged()
        what = f"no tensor {name!r} (occurrence {occurrence}, {role}[{role_index}]) in {self._path}"
        same = self._live().find_all(name)
        if same:
            have = ", ".join(f"occurrence {r.occurrence} {r.role}[{r.role_index}]" for r in same[:8])
            what += f"; that name has: {have}"
        else:
            close = difflib.get_close_matches(name, self.names(), n=3)
            if close:
                what += "; did you mean " + ", ".join(repr(c) for c in close) + "?"
        return NotFoundError(what, 3, "not_found", None)


def open(path: Union[str, "os.PathLike[str]"], *, verify: bool = True, use_index: bool = True,
         resync: bool = False, strict: bool = False) -> Dump:  # noqa: A001 - the package's verb
    """Opens a TDUMP file.

    verify: check every record checksum now (False: frames only; ``record.verify()`` later).
    use_index: on a cleanly closed file, let the footer index vouch for the scan
        (``integrity.index_used``); the index is checked at open either way and the verdict is
        the same. Lookups by name use a keyed in-memory table in both cases: O(1) expected for
        any names, even ones whose index hashes were chosen to collide.
    resync: after corruption, search for the next valid record and continue (docs/format.md §4).
    strict: raise FormatError when the file is corrupt or cut instead of returning what was
    recovered (an unfinished run is never an error).
    Raises DumpIOError when the file cannot be read, FormatError when its header is invalid.
    """
    dump = Dump(_core.Reader.open(os.fspath(path), verify, use_index, resync))
    if strict:
        dump.raise_if_damaged()
    return dump
