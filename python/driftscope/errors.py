"""Exceptions raised by driftscope, one class per family of C++ error codes.

Every error of the C++ core (include/driftscope/error.hpp) arrives as an instance of
:class:`Error` whose ``code`` is the stable numeric code, ``code_name`` its snake_case name and
``offset`` the file offset it refers to (or ``None``). The class is chosen by the table below,
which docs/python.md reproduces; the classes also derive from the built-in exception a Python
programmer would catch for that situation (``OSError`` for I/O, ``KeyError`` for a missing
tensor, ``ValueError`` for bad arguments and invalid files).
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple, Type

__all__ = [
    "Error",
    "InvalidArgumentError",
    "DumpIOError",
    "NotFoundError",
    "FilterSyntaxError",
    "UnsupportedError",
    "ClosedError",
    "FormatError",
    "ImportFormatError",
    "IncomparableError",
    "PolicyError",
    "CODE_TO_EXCEPTION",
    "exception_for_code",
]


class Error(Exception):
    """Base class of every driftscope error."""

    code: int
    code_name: str
    offset: Optional[int]

    def __init__(self, message: str, code: int = 0, code_name: str = "unknown",
                 offset: Optional[int] = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.code_name = code_name
        self.offset = offset

    def __str__(self) -> str:
        # KeyError's str() would quote the message; every driftscope error prints it as is.
        return self.message

    def __reduce__(self):  # picklable across multiprocessing
        return (type(self), (self.message, self.code, self.code_name, self.offset))


class InvalidArgumentError(Error, ValueError):
    """A value outside the documented range was passed (invalid_argument)."""


class DumpIOError(Error, OSError):
    """Opening, reading, writing, syncing or mapping a file failed (io_error)."""


class NotFoundError(Error, KeyError):
    """A lookup by name found nothing (not_found)."""


class FilterSyntaxError(Error, ValueError):
    """A filter string did not parse (filter_syntax); docs/filters.md."""


class UnsupportedError(Error):
    """A valid request the implementation does not support (unsupported)."""


class ClosedError(Error, ValueError):
    """An operation on a closed writer (closed)."""


class FormatError(Error, ValueError):
    """The file is not a valid TDUMP file: header and record checks of docs/format.md (codes 20-73)."""


class ImportFormatError(FormatError):
    """An npz or safetensors input is malformed (bad_npz, bad_safetensors)."""


class IncomparableError(Error):
    """Two tensors cannot be compared: shapes, dtypes or layouts do not meet (incomparable)."""


class PolicyError(Error, ValueError):
    """A comparison policy is invalid (bad_policy)."""


# code -> class. Codes not listed (future ones) fall back by range, then to Error.
CODE_TO_EXCEPTION: Dict[int, Type[Error]] = {
    1: InvalidArgumentError,
    2: DumpIOError,
    3: NotFoundError,
    4: FilterSyntaxError,
    5: UnsupportedError,
    6: ClosedError,
    80: ImportFormatError,
    81: ImportFormatError,
    90: IncomparableError,
    91: PolicyError,
}

# Header (20-39), record (40-59) and field (60-79) codes are all "this file is invalid".
_FORMAT_RANGES: Tuple[Tuple[int, int], ...] = ((20, 80),)


def exception_for_code(code: int) -> Type[Error]:
    """The exception class for a C++ error code (docs/python.md, "Errors")."""
    cls = CODE_TO_EXCEPTION.get(code)
    if cls is not None:
        return cls
    for lo, hi in _FORMAT_RANGES:
        if lo <= code < hi:
            return FormatError
    return Error


def _from_core(code: int, code_name: str, message: str, offset: Optional[int]) -> Error:
    """Called by driftscope._core to build the exception for a C++ Error."""
    return exception_for_code(code)(message, code, code_name, offset)
