"""The plain-head fast path of the line parser: a record under an engine's commonest head (nothing to peel, split
or unmangle) read in one match, the same head the general path gives."""

from __future__ import annotations

import re

from . import engines
from .records import Header

# real CSI sequences, which come off a line before its head is matched
CSI = re.compile(r"\x1b\[[0-9;]*m|\x1b\[[0-?]*[ -/]*[@-~]")
# The engines' commonest heads, each a whole plain record, with the header class they give.
_PLAIN_HEADS = tuple((re.compile(a.plain_head), a.header_classes[0]) for a in engines.adapters() if a.plain_head)
# Anything the general path would have to undo: a second record glued on, a mangled escape, a ^M.
_UNSIMPLE_LITERALS = ("pid=", "^[", "^M", "#033[", "\ufffd", "\\x1b", "\\033", "\\e[")
_LEVEL_WORDS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_GLUED_LEVEL = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d ")
_GLUED_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")
_BARE_SGR = re.compile(r"\[\d{1,3}(?:;\d{1,3})*m")


def _unsimple(msg: str) -> bool:
    if any(s in msg for s in _UNSIMPLE_LITERALS):
        return True
    if any(w in msg for w in _LEVEL_WORDS) and _GLUED_LEVEL.search(msg):
        return True
    if "T" in msg and _GLUED_ISO.search(msg):
        return True
    return "[" in msg and bool(_BARE_SGR.search(msg))


def simple_head(raw: str) -> tuple[str, Header] | None:
    """The head of a plain record of an engine's commonest head (nothing to peel, split or unmangle),
    parsed in one match; None sends the line through the general path. Both give the same head."""
    text = CSI.sub("", raw) if "\x1b" in raw else raw
    text = text.removesuffix("\r")
    for plain, cls in _PLAIN_HEADS:
        m = plain.fullmatch(text)
        if m is not None:
            if _unsimple(m["msg"]):
                return None
            return text, Header(cls, m["level"], md=m["md"], proc=m["proc"],
                                pid=int(m["pid"]) if m["pid"] else None, source=m["src"], msg=m["msg"])
    return None
