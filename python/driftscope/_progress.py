"""The progress bar of the Python commands (record, guard), drawn like `driftscope compare`'s
(cli/cmd_compare.cpp): one line on stderr, redrawn in place, erased when done, and only when
stderr is a terminal, so pipes, files and CI logs never see it."""

from __future__ import annotations

import sys
import time
from typing import Any, Optional, TextIO

_WIDTH = 30
_SPIN = "|/-\\"
_NOTE = 60


class Progress:
    """``label [#####.........] done/total unit note``; ``total`` None (work of unknown size,
    e.g. ``record torch``) shows a turning spinner and the count: ``label | done unit note``.
    ``enabled`` None: on when the stream is a terminal."""

    def __init__(self, label: str, unit: str = "", enabled: Optional[bool] = None,
                 stream: Optional[TextIO] = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.label, self.unit = label, unit
        self.drawn = False
        self._last = 0.0
        self._turn = 0

    def update(self, done: int, total: Optional[int] = None, note: str = "") -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        final = total is not None and done >= total
        if self.drawn and not final and now - self._last < 0.1:  # at most ten redraws a second
            return
        self._last = now
        if total:
            filled = min(done, total) * _WIDTH // total
            text = f"{self.label} [{'#' * filled}{'.' * (_WIDTH - filled)}] {done}/{total}"
        else:
            text = f"{self.label} {_SPIN[self._turn % len(_SPIN)]} {done}"
            self._turn += 1
        if self.unit:
            text += f" {self.unit}"
        if note:
            # A name from the model: escapes spelled out (never sent to the terminal), and
            # short enough that the line does not wrap, which would defeat the redraw.
            note = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                           for c in note)
            if len(note) > _NOTE:
                note = note[:_NOTE - 3] + "..."
            text += f" ({note})"
        self.stream.write("\r\x1b[K" + text)
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
        self.drawn = False

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
