"""The record triggers found in a block's raw bytes by one compiled multi-pattern scan (Hyperscan).

The trigger vocabulary (every record format's literals, :func:`parsers.lineparser.trigger_literals`)
is compiled once into one literal database. A block is scanned as bytes: each hit is mapped to its
line by counting newlines between hits, and only the candidate lines and their neighbours are cut
out and decoded; the other lines are never split or decoded. The verification is the formats' own
regexes, later, on those lines only.

A line is a candidate when it holds a trigger, also when escape sequences split the trigger's words
(:func:`parsers.lineparser.is_candidate`). For that, the block is scanned a second time with its
escape sequences removed: every ``ESC`` starts exactly one sequence of the ANSI pattern, so when
every ``ESC`` of the block starts one of a few known SGR sequences (learnt from the block), removing
those literals is the pattern's removal, and newlines stay where they were. A block with any other
escape sequence, a compressed-looking head, or no Hyperscan on this platform returns None: the
caller takes the polars path, which gives the same answer more slowly.
"""

from __future__ import annotations

import io
import re
import threading
from bisect import bisect_right
from typing import Any

import polars as pl

from .lineparser import ANSI_PATTERN, TRIGGER_PATTERN, trigger_literals

try:  # a compiled wheel; without it the polars path runs everywhere
    import hyperscan
except ImportError:  # pragma: no cover - the platform has no wheel
    hyperscan = None

# An SGR/CSI sequence of digits and ';' then one final byte is exactly one match of the ANSI pattern.
_CSI_LITERAL = re.compile(rb"\x1b\[[0-9;]*[@-~]")
_COMMON_CSI = (b"\x1b[0m", b"\x1b[2m", b"\x1b[3m", b"\x1b[1m", b"\x1b[32m", b"\x1b[33m", b"\x1b[31m",
               b"\x1b[34m", b"\x1b[35m", b"\x1b[36m", b"\x1b[0;36m", b"\x1b[0;0m", b"\x1b[1;33m", b"\x1b[K")
_LEARN_BYTES = 1 << 16


def compressed_magic(block: bytes) -> bool:
    """polars' line reader inflates a buffer that starts like gzip, zlib or zstd data."""
    return block[:2] == b"\x1f\x8b" or block[:4] == b"\x28\xb5\x2f\xfd" or \
        (block[:1] == b"\x78" and block[1:2] in (b"\x01", b"\x5e", b"\x9c", b"\xda"))


class _Database:
    """The trigger literals compiled once; one scratch space per thread (a scan needs its own)."""

    def __init__(self) -> None:
        lits = [t.encode() for t in trigger_literals()]
        self.db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        self.db.compile(expressions=lits, ids=list(range(len(lits))), elements=len(lits), literal=True)
        self._local = threading.local()

    def scratch(self) -> Any:
        s = getattr(self._local, "scratch", None)
        if s is None:
            s = self._local.scratch = hyperscan.Scratch(self.db)
        return s

    def hit_ends(self, data: bytes) -> list[int]:
        """End offsets of the hits, at most one per line (later hits on a line are skipped)."""
        ends: list[int] = []
        line_end = [-1]

        def on_hit(_id: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            if end > line_end[0]:
                ends.append(end)
                e = data.find(b"\n", end)
                line_end[0] = len(data) if e < 0 else e

        self.db.scan(data, match_event_handler=on_hit, scratch=self.scratch())
        return ends


_DB: _Database | None = None
_DB_LOCK = threading.Lock()


def available() -> bool:
    return hyperscan is not None


def _database() -> _Database:
    global _DB
    if _DB is None:
        with _DB_LOCK:
            if _DB is None:
                _DB = _Database()
    return _DB


class BlockScan:
    """A block's line count and its candidate lines: index in the block -> (start, end) byte offsets
    of the line without its newline (in line order); its lines split on demand (once)."""

    def __init__(self, block: bytes, n: int, spans: dict[int, tuple[int, int]]) -> None:
        self.block, self.n, self.spans = block, n, spans
        self._lines: pl.Series | None = None

    def lines(self) -> pl.Series:
        if self._lines is None:
            self._lines = split_lines(self.block)
        return self._lines


def decode(block: bytes) -> str:
    return block.decode("utf-8", errors="replace")


def _lines(block: bytes) -> pl.LazyFrame:
    """A block's lines as ``scan_lines`` splits them (one ``\\r`` off each line end)."""
    if not compressed_magic(block):
        return pl.scan_lines(io.BytesIO(block))
    lines = decode(block).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return pl.LazyFrame({"line": [x.removesuffix("\r") for x in lines]}, schema={"line": pl.Utf8})


def split_lines(block: bytes) -> pl.Series:
    """Every line of a block (decoded as the streaming path does when it is not UTF-8)."""
    try:
        return _lines(block).collect()["line"]
    except pl.exceptions.ComputeError:
        return _lines(decode(block).encode("utf-8")).collect()["line"]


def _line_of(block: bytes, ends: list[int]) -> dict[int, tuple[int, int]]:
    """Line index and byte span of each hit (hits in offset order)."""
    out: dict[int, tuple[int, int]] = {}
    line, pos = 0, 0
    for end in ends:
        line += block.count(b"\n", pos, end - 1)
        pos = end - 1
        start = block.rfind(b"\n", 0, end - 1) + 1
        stop = block.find(b"\n", end - 1)
        out.setdefault(line, (start, len(block) if stop < 0 else stop))
    return out


def _learnt(block: bytes) -> list[str]:
    """The SGR/CSI sequences of the block's head, and the usual ones."""
    return sorted({x.decode() for x in (*_COMMON_CSI, *_CSI_LITERAL.findall(block[:_LEARN_BYTES]))})


def _escaped(block: bytes, lines: pl.Series, raw: dict[int, tuple[int, int]]) -> list[int]:
    """Lines with escape sequences and no trigger in their raw text whose text without the sequences
    holds one. The learnt CSI literals come off in one Aho-Corasick pass: when every ``ESC`` of a line
    starts one of them, that is exactly the ANSI pattern's removal; a line with any other sequence
    left has the ANSI pattern itself removed."""
    col, plain = pl.col("line"), pl.col("plain")
    df = pl.DataFrame({"line": lines}).with_row_index("i").filter(col.str.contains("\x1b", literal=True))
    if raw:
        df = df.filter(~pl.col("i").is_in(pl.Series(list(raw), dtype=pl.UInt32).implode()))
    if df.height == 0:
        return []
    lits = _learnt(block)
    df = df.with_columns(col.str.replace_many(lits, [""] * len(lits)).alias("plain"))
    left = plain.str.contains("\x1b", literal=True)
    hits = pl.concat([df.filter(~left & plain.str.contains(TRIGGER_PATTERN))["i"],
                      df.filter(left).filter(col.str.replace_all(ANSI_PATTERN, "").str.contains(TRIGGER_PATTERN))["i"]])
    return sorted(hits.to_list())


def _line_start(block: bytes, known: list[tuple[int, int]], line: int) -> tuple[int, int]:
    """Byte span of line ``line``, walking from the nearest known line before it."""
    i = bisect_right(known, (line, 1 << 62)) - 1
    at, pos = known[i] if i >= 0 else (0, 0)
    while at < line:
        pos = block.find(b"\n", pos) + 1
        at += 1
    stop = block.find(b"\n", pos)
    return pos, len(block) if stop < 0 else stop


def scan(block: bytes) -> BlockScan | None:
    """The candidate lines of a newline-aligned block, or None when only the polars path runs here."""
    if hyperscan is None or compressed_magic(block):
        return None
    n = block.count(b"\n") + (0 if not block or block.endswith(b"\n") else 1)
    spans = _line_of(block, _database().hit_ends(block))
    out = BlockScan(block, n, spans)
    if b"\x1b" in block:
        extra = _escaped(block, out.lines(), spans)
        if extra:
            anchors = [(i, s) for i, (s, _) in spans.items()]
            for i in extra:
                span = _line_start(block, anchors, i)
                spans[i] = span
                anchors.insert(bisect_right(anchors, (i, span[0])), (i, span[0]))
            out.spans = dict(sorted(spans.items()))
    return out
