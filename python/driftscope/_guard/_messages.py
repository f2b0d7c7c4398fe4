"""The message of a failure as the guard reports it: a backend's child (_child), the fallback's
re-runs and the reference's ranges word a runtime's exception the same way.
"""

from __future__ import annotations

# A runtime's whole message is kept (the JSON report has it); the text report shows the line
# that states the reason (_report.reason_line). Bounded: a runtime may print megabytes.
MAX_MESSAGE = 16384


def whole_message(err: BaseException) -> str:
    """The exception's whole message (named by its type unless it is one of driftscope's own
    sentences), at most MAX_MESSAGE characters."""
    text = str(err).strip()
    if len(text) > MAX_MESSAGE:  # head and tail: a traceback states its cause at the end
        half = MAX_MESSAGE // 2
        text = text[:half] + "\n    [...]\n" + text[-half:]  # indented: read as a frame
    from ..errors import Error

    if isinstance(err, Error):  # driftscope's own errors are written as sentences
        return text or type(err).__name__
    return f"{type(err).__name__}: {text}" if text else type(err).__name__
