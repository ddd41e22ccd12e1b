"""Lines hard-wrapped by a terminal or a paste at a fixed column, joined back.

A log copied from a terminal that wraps at W columns carries each record longer than W as several physical lines:
every one but the last exactly W characters, the next cut mid-word with no head of its own. The signature of
such a file is its longest line length W recurring, each time followed by a line that starts no record (no head
once its prefixes are peeled, no traceback line, not indented as a traceback's code line). Where a file's first
:data:`SAMPLE` bytes show it at least :data:`MIN_WRAPS` times, each line of W characters is joined with such a
successor; the successor's place becomes an empty line, so every record keeps its line number. A file without
the signature is not touched (one look at its first bytes: the parsers hold them until they are read,
:class:`parsers.ingest.BlockParser`).
"""

from __future__ import annotations

import re
from itertools import pairwise

from .blocklines import decode
from .clean import logical_lines
from .headers import parse_header

SAMPLE = 64 << 10      # the bytes of a file's start read for its signature
MIN_WIDTH = 60         # narrower "wraps" are short lines of a table, not a terminal's
MIN_WRAPS = 3
# A line that starts something of its own: a traceback's head, frame or code (indented), a JSON record, or nothing.
_OWN_START = re.compile(r"\s\s|\s*$|Traceback \(most recent|\s*File \"|\s*\^+\s*$|\{\"")


def _continues(line: str) -> bool:
    """Whether ``line`` can be the rest of the line before it: no head, nothing a traceback starts a line with."""
    if _OWN_START.match(line):
        return False
    pieces = logical_lines(line)
    return bool(pieces) and pieces[0][0] == line and parse_header(line).cls == "unknown"


def wrap_width(sample: bytes) -> int | None:
    """The column a file's lines were wrapped at, from its first bytes; None when it shows no wrap."""
    lines = [decode(b).removesuffix("\r") for b in sample[: SAMPLE].split(b"\n")[:-1]]
    width = max(map(len, lines), default=0)
    if width < MIN_WIDTH:
        return None
    wraps = sum(1 for a, b in pairwise(lines) if len(a) == width and _continues(b))
    return width if wraps >= MIN_WRAPS else None


def hold_tail(block: bytes, width: int) -> tuple[bytes, bytes]:
    """``block`` (newline-aligned) cut before its last lines of ``width`` characters, which the next block may
    continue, and those lines."""
    end = len(block)
    while end > 0:
        start = block.rfind(b"\n", 0, end - 1) + 1
        if len(decode(block[start: end - 1]).removesuffix("\r")) != width:
            break
        end = start
    return block[:end], block[end:]


def unwrap(block: bytes, width: int) -> bytes:
    """``block`` with each line of ``width`` characters joined to the line after it where that one continues it
    (repeatedly: a record may span several), an empty line left in each joined line's place."""
    lines = block.split(b"\n")
    out = list(lines)
    i = 0
    while i < len(lines) - 1:
        j = i
        while (j + 1 < len(lines) and len(decode(lines[j]).removesuffix("\r")) == width
               and _continues(decode(lines[j + 1]).removesuffix("\r"))):
            j += 1
        if j > i:
            out[i] = b"".join(line.removesuffix(b"\r") for line in lines[i: j + 1])
            out[i + 1: j + 1] = [b""] * (j - i)
        i = j + 1
    return b"\n".join(out)
