"""A generated block of a docs page (between two HTML comments) held to what the code says: the
option tables' tests render their table and check the page holds it verbatim;
DRIFTSCOPE_UPDATE_CASES=1 rewrites the block instead."""
from __future__ import annotations

import os
import re
from pathlib import Path


def assert_doc_block(doc: Path, begin: str, end: str, body: str, what: str) -> None:
    text = doc.read_text()
    want = f"{begin}\n{body}\n{end}"
    if os.environ.get("DRIFTSCOPE_UPDATE_CASES") == "1":
        doc.write_text(re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: want, text, flags=re.S))
        text = doc.read_text()
    assert want in text, f"{doc.name}'s {what} differ (DRIFTSCOPE_UPDATE_CASES=1)"
