"""The record triggers found in a block's raw bytes by one compiled multi-pattern scan (Hyperscan).

The trigger vocabulary (every record format's literals, :func:`parsers.lineparser.trigger_literals`)
is compiled once into one literal database. A block is scanned as bytes: each hit is mapped to its
line against the block's newline offsets (numpy), and only the candidate lines and their neighbours
are cut out and decoded. The verification is the formats' own regexes, later, on those lines only.

A line is a candidate when it holds a trigger, also when escape sequences split the trigger's words
(:func:`parsers.lineparser.is_candidate`). A block with escape sequences is therefore split into
lines, and its escape lines without a raw trigger have their sequences removed in polars (one
Aho-Corasick pass of the SGR literals learnt from the block, the ANSI pattern where others remain);
the same split lines give its exact ANSI line count. An escape-free block is never split: its ANSI
lines (the pattern's forms without ``ESC``) come from a second small database. A block with a
compressed-looking head, or no Hyperscan on this platform, returns None: the caller takes the polars
path, which gives the same answer more slowly.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import polars as pl

from .blocklines import compressed_magic, split_lines
from .columns import escaped_hits
from .counts import ansi_lines
from .lineparser import trigger_literals

try:  # a compiled wheel; without it the polars path runs everywhere
    import hyperscan
except ImportError:  # pragma: no cover - the platform has no wheel
    hyperscan = None

# The ANSI pattern's forms without an ESC, as Hyperscan reads them (a bare "[32m" after any other byte).
_PLAIN_ANSI = (rb"\^\[\[", rb"#033\[", rb"(?:^|[^\x1b])\[[0-9]{1,3}(?:;[0-9]{1,3})*m")


class _Database:
    """The trigger literals compiled once, and the ANSI pattern's forms that carry no ``ESC`` (those with
    one are counted from the bytes); one scratch space per thread and database (a scan needs its own)."""

    def __init__(self) -> None:
        lits = [t.encode() for t in trigger_literals()]
        self.db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        self.db.compile(expressions=lits, ids=list(range(len(lits))), elements=len(lits), literal=True)
        self.plain = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        self.plain.compile(expressions=list(_PLAIN_ANSI), ids=list(range(len(_PLAIN_ANSI))),
                           elements=len(_PLAIN_ANSI))
        self._local = threading.local()

    def _scratch(self, name: str, db: Any) -> Any:
        s = getattr(self._local, name, None)
        if s is None:
            s = hyperscan.Scratch(db)
            setattr(self._local, name, s)
        return s

    def hit_ends(self, data: bytes | bytearray) -> list[int]:
        """End offsets of every trigger hit."""
        ends: list[int] = []
        self.db.scan(data, match_event_handler=lambda _i, _s, end, _f, _c: ends.append(end),
                     scratch=self._scratch("scratch", self.db))
        return ends

    def plain_ansi_ends(self, data: bytes) -> list[int]:
        """End offsets of the ANSI pattern's matches that do not start at an ``ESC``."""
        ends: list[int] = []
        self.plain.scan(data, match_event_handler=lambda _i, _s, end, _f, _c: ends.append(end),
                        scratch=self._scratch("plain", self.plain))
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
    """A block's newline offsets and line count, its candidate lines (indices in the block, ascending)
    and its exact count of lines with ANSI escapes; its lines split on demand (all once, or a range)."""

    def __init__(self, block: bytes, nl: np.ndarray, cand: np.ndarray, ansi: int) -> None:
        self.block, self.nl, self.cand, self.ansi = block, nl, cand, ansi
        self.n = nl.size + (0 if not block or block.endswith(b"\n") else 1)
        self._lines: pl.Series | None = None

    def lines(self) -> pl.Series:
        if self._lines is None:
            self._lines = split_lines(self.block)
        return self._lines

    def line_range(self, a: int, b: int) -> pl.Series:
        """Lines ``[a, b)`` of the block, split from their bytes only."""
        if self._lines is not None:
            return self._lines.slice(a, b - a)
        start = 0 if a == 0 else int(self.nl[a - 1]) + 1
        stop = len(self.block) if b >= self.nl.size else int(self.nl[b - 1]) + 1
        return split_lines(self.block[start:stop])

    def texts(self, lines: np.ndarray) -> list[str]:
        """The text of lines given by index (decoded as the polars path does, one ``\\r`` off the end)."""
        starts, stops = line_bounds(self.nl, len(self.block), lines)
        b = self.block
        return [b[x:y].decode("utf-8", errors="replace").removesuffix("\r")
                for x, y in zip(starts.tolist(), stops.tolist(), strict=True)]


def _escaped(block: bytes, lines: pl.Series, raw: np.ndarray) -> list[int]:
    """Lines with escape sequences and no trigger in their raw text (``raw``: those with one) whose text
    without the sequences holds one (:func:`parsers.columns.escaped_hits`)."""
    df = pl.DataFrame({"line": lines}).with_row_index("i").filter(pl.col("line").str.contains("\x1b", literal=True))
    if raw.size:
        df = df.filter(~pl.col("i").is_in(pl.Series(raw, dtype=pl.UInt32).implode()))
    if df.height == 0:
        return []
    return sorted(escaped_hits(df, block).to_list())


def line_bounds(nl: np.ndarray, length: int, lines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end offsets (end without its newline) of lines given by index."""
    starts, stops = np.zeros_like(lines), np.full_like(lines, length)
    later, closed = lines > 0, lines < nl.size
    starts[later] = nl[lines[later] - 1] + 1
    stops[closed] = nl[lines[closed]]
    return starts, stops


def _plain_ansi(block: bytes, nl: np.ndarray, n: int) -> int:
    """Lines of an escape-free block that the ANSI pattern (:data:`parsers.counts.ANSI_PATTERN`)
    matches: its forms without an ``ESC`` (``^[[``, ``#033[``, a bare ``[32m``), by one scan."""
    ends = _database().plain_ansi_ends(block)
    if not ends:
        return 0
    return int(np.unique(np.searchsorted(nl, np.asarray(ends, dtype=np.int64) - 1)).size)


def scan(block: bytes) -> BlockScan | None:
    """The candidate lines of a newline-aligned block, or None when only the polars path runs here.
    A block with escape sequences is split into lines (its escape-split triggers and its ANSI lines
    are found in polars); an escape-free one is never split."""
    if hyperscan is None or compressed_magic(block):
        return None
    nl = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10)
    n = nl.size + (0 if not block or block.endswith(b"\n") else 1)
    hits = _database().hit_ends(block)
    cand = np.unique(np.searchsorted(nl, np.asarray(hits, dtype=np.int64) - 1)) if hits else \
        np.zeros(0, dtype=np.int64)
    lines: pl.Series | None = None
    if b"\x1b" in block:
        lines = split_lines(block)
        extra = _escaped(block, lines, cand)
        if extra:
            cand = np.union1d(cand, np.asarray(extra, dtype=np.int64))
        ansi = ansi_lines(lines)
    else:
        ansi = _plain_ansi(block, nl, n)
    out = BlockScan(block, nl, cand, ansi)
    out._lines = lines
    return out
