"""Text from files made safe to show: driftscope::printable (include/driftscope/text.hpp) bound
from the library, so every front end spells a hostile name the same way, and Markdown's escapes.

Names, op types and error messages come from models written by anyone. Printed raw, an ESC
sequence drives the reader's terminal, a CR or LF rewrites or splits a report line, and a bidi
override shows a name other than the one stored.
"""

from __future__ import annotations

from . import _core


def printable(text: str) -> str:
    """`text` as one line a terminal shows as stored: C0 controls (TAB, LF, CR included) and DEL
    become \\xNN, C1 controls, bidi controls and the line/paragraph separators \\uNNNN; a byte
    that was not valid UTF-8 (a surrogate escape, U+DC80..U+DCFF) \\xNN, any other lone
    surrogate \\uNNNN. A backslash is kept, so printable(printable(s)) == printable(s).

    The rule is driftscope::printable's, run by the library itself (_core.printable): a str is
    handed over as the bytes it stands for (surrogate escapes back to their raw bytes, which the
    library spells \\xNN as it does for a file's); a lone surrogate no byte stands for is spelt
    \\uNNNN here first, as the library would spell the code point."""
    if any(0xD800 <= ord(c) <= 0xDFFF and not 0xDC80 <= ord(c) <= 0xDCFF for c in text):
        text = "".join(f"\\u{ord(c):04x}" if 0xD800 <= ord(c) <= 0xDFFF
                       and not 0xDC80 <= ord(c) <= 0xDCFF else c for c in text)
    return _core.printable(text.encode("utf-8", "surrogateescape"))


# ASCII punctuation that Markdown (CommonMark 0.31, GitHub tables) acts on inside a line; a
# backslash before any ASCII punctuation shows it literally (CommonMark 2.4). '.' and '@' are
# escaped so that renderers which autolink bare text (GFM "www." and e-mail autolinks, linkify's
# fuzzy domains such as model.py) see no domain; a second '/' of "//" so that no scheme ("https://")
# or protocol-relative "//host" is seen. The escapes render as the characters themselves.
_MARKDOWN = frozenset("\\`*_[]<>|~!#&.@")


def markdown_text(text: str) -> str:
    """printable(text), then every Markdown-active character backslash-escaped: safe in a
    paragraph, a list item and a table cell."""
    s = printable(text)
    out = []
    for i, c in enumerate(s):
        # An underscore between two letters or digits never delimits emphasis (CommonMark 6.2):
        # NUMERICAL_INSTABILITY stays as it is written.
        if (c in _MARKDOWN and not (c == "_" and 0 < i < len(s) - 1 and s[i - 1].isalnum()
                                    and s[i + 1].isalnum())) or (c == "/" and i and s[i - 1] == "/"):
            out.append("\\")
        out.append(c)
    return "".join(out)
