"""Text from files made safe to show: the Python twin of driftscope::printable
(include/driftscope/text.hpp), so every front end spells a hostile name the same way.

Names, op types and error messages come from models written by anyone. Printed raw, an ESC
sequence drives the reader's terminal, a CR or LF rewrites or splits a report line, and a bidi
override shows a name other than the one stored.
"""

from __future__ import annotations

# Code points above ASCII that change how a terminal shows the text around them (text.cpp).
_TERMINAL = frozenset([*range(0x80, 0xA0), 0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F),
                       *range(0x2066, 0x206A), 0x2028, 0x2029])


def printable(text: str) -> str:
    """`text` as one line a terminal shows as stored: C0 controls (TAB, LF, CR included) and DEL
    become \\xNN, C1 controls, bidi controls and the line/paragraph separators \\uNNNN; a byte
    that was not valid UTF-8 (a surrogate escape, U+DC80..U+DCFF) \\xNN, any other lone
    surrogate \\uNNNN. A backslash is kept, so printable(printable(s)) == printable(s)."""
    out = []
    for c in text:
        cp = ord(c)
        if cp < 0x20 or cp == 0x7F:
            out.append(f"\\x{cp:02x}")
        elif 0xDC80 <= cp <= 0xDCFF:
            out.append(f"\\x{cp - 0xDC00:02x}")
        elif cp in _TERMINAL or 0xD800 <= cp <= 0xDFFF:
            out.append(f"\\u{cp:04x}")
        else:
            out.append(c)
    return "".join(out)


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


def markdown_code(text: str) -> str:
    """printable(text) as one inline code span, whatever backticks it holds: the fence is one
    longer than its longest run of backticks, padded with spaces when it starts or ends with one
    (CommonMark 6.1). A `|` is escaped for GitHub tables (GFM 4.10, which splits cells first)."""
    s = printable(text)
    run = longest = 0
    for c in s:
        run = run + 1 if c == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or not s.strip(" ") else ""
    return f"{fence}{pad}{s.replace('|', chr(92) + '|')}{pad}{fence}"
