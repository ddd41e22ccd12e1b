"""One newline-aligned block of a log, as the bulk path needs it: the candidate lines the line parser
must see (with their neighbours), the stats and KV rows extracted in polars, the block's counts, and
its last stamped line.

Two ways to the candidates, one result: the compiled prefilter (:mod:`parsers.prefilter`) scans the
raw bytes and cuts out only the candidate lines and their neighbours; the polars path splits every
line and classifies it (the fallback: no Hyperscan, escape sequences other than plain SGR colours,
compressed-looking bytes). ANSI lines are counted on every line (from the bytes on the first way);
noise is classified on the sampled spans only (:func:`parsers.counts.classified_spans`), so only the
sampled lines are split.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

import polars as pl

from .blocklines import decode, lines_frame
from .columns import STATS_LITS, empty_kv, empty_stats, escaped_candidates, extract
from .counts import Counts, ansi_lines, classified_spans, classify_span
from .lineparser import TRIGGER_PATTERN, LineParser
from .timestamps import STAMP_HINT

if TYPE_CHECKING:
    from . import prefilter

CandidateRow = tuple[int, str, "str | None", "str | None"]
# DIAG_PREFILTER=0 forces the polars path (the reference the tests compare the prefilter with)
USE_PREFILTER = os.environ.get("DIAG_PREFILTER", "1") != "0"
# A smaller block (a small log, the tail of a large one) takes the polars path: compiling the trigger
# database costs a few tenths of a second once a process, the scan saves ~15 % of a block's time.
PREFILTER_MIN_BYTES = 4 << 20
# A block dense with stats lines takes it too: every stats line is a hit, and a hit costs the scan more
# than the polars path's pass (dense 200 MB bench: bulk/pyloop 3.14x with the scan, 2.56x without).
PREFILTER_MAX_STATS_SHARE = 0.05
_STATS_BYTES = tuple(lit.encode() for lit in STATS_LITS)
_SHARE_SAMPLE = 256 << 10   # the head of a block its stats share is judged on


def _bulk_classify(block: bytes) -> pl.DataFrame:
    """Per line of a block: the text and whether it holds a record trigger (also when escape sequences
    split a trigger's words: such a line is a candidate by its text without them)."""
    col = pl.col("line")
    return escaped_candidates(lines_frame(block).select(col, col.str.contains(TRIGGER_PATTERN).alias("cand")).collect(),
                              block)


class BlockLines:
    """A block's lines as far as they are needed: the last few always, all of them on demand."""

    def __init__(self, n: int, tail: list[str], every: Callable[[], pl.Series]) -> None:
        self.n, self.tail, self._every = n, tail, every

    def head(self, k: int) -> pl.Series:
        return self._every().head(k)


def block_frame(block: bytes, first_line: int) -> tuple[list[CandidateRow], pl.DataFrame, pl.DataFrame, Counts,
                                                        BlockLines]:
    """One block: the candidate lines the line parser must see (number, text, next line, previous
    non-candidate line), the stats and KV rows extracted in polars (``ts`` still null), the block's
    counts and its lines."""
    bs = None
    if _scan_pays(block):
        from . import prefilter  # numpy and the Hyperscan database: loaded with the first large block
        bs = prefilter.scan(block)
    if bs is None:
        return _polars_frame(block, first_line)
    return _scan_frame(block, first_line, bs)


def _scan_pays(block: bytes) -> bool:
    """Whether the compiled scan is the faster way through ``block``: a large block whose candidates are
    sparse (the engines' stats lines, by their literals, counted in C on the block's head: a count holds the GIL,
    and either path reads the block exactly)."""
    if not (USE_PREFILTER and len(block) >= PREFILTER_MIN_BYTES):
        return False
    head = block[:_SHARE_SAMPLE]
    return sum(map(head.count, _STATS_BYTES)) <= PREFILTER_MAX_STATS_SHARE * head.count(b"\n")


def _finish(cand: pl.DataFrame) -> tuple[list[CandidateRow], pl.DataFrame, pl.DataFrame]:
    stats, kv, slow = extract(cand)
    rest = cand.filter(slow)
    rows = list(zip(rest["n"].to_list(), rest["line"].to_list(), rest["nxt"].to_list(), rest["prv"].to_list(),
                    strict=True))
    return rows, stats, kv


def _polars_frame(block: bytes, first_line: int) -> tuple[list[CandidateRow], pl.DataFrame, pl.DataFrame, Counts,
                                                          BlockLines]:
    """polars classifies every line; Python sees only the rare candidates."""
    try:
        df = _bulk_classify(block)
    except pl.exceptions.ComputeError:  # not UTF-8: decode as the streaming path does
        df = _bulk_classify(decode(block).encode("utf-8"))
    n = df.height
    lines, is_cand = df["line"], df["cand"]
    counts = Counts(lines=n, unclassified=n, ansi_lines=ansi_lines(lines))
    every = BlockLines(n, lines.tail(TAIL_LINES).to_list(), lambda: lines)
    if n == 0:
        return [], empty_stats(), empty_kv(), counts, every
    for a, b in classified_spans(first_line, n):
        classify_span(df.slice(a, b - a), counts)
        counts.unclassified -= b - a
    idx = is_cand.arg_true()
    counts.candidates = len(idx)
    counts.last = (lines[n - 1], bool(is_cand[n - 1]))
    nxt_i, prv_i = (idx + 1).clip(0, n - 1), (idx - 1).clip(0, n - 1)
    nxt = pl.select(pl.when(idx == n - 1).then(None).otherwise(lines.gather(nxt_i))).to_series()
    prv_ok = (idx > 0) & ~is_cand.gather(prv_i)
    prv = pl.select(pl.when(prv_ok).then(lines.gather(prv_i)).otherwise(None)).to_series()
    cand = pl.DataFrame({"n": idx.cast(pl.Int64) + first_line, "line": lines.gather(idx), "nxt": nxt, "prv": prv})
    return (*_finish(cand), counts, every)


def _text(block: bytes, start: int, stop: int) -> str:
    return block[start:stop].decode("utf-8", errors="replace").removesuffix("\r")


def _tail(block: bytes, k: int) -> list[str]:
    """The last ``k`` lines of a block, in order."""
    out: list[str] = []
    stop = len(block) - 1 if block.endswith(b"\n") else len(block)
    while stop >= 0 and len(out) < k and block:
        start = block.rfind(b"\n", 0, stop) + 1
        out.append(_text(block, start, stop))
        stop = start - 1
    return out[::-1]


def _scan_frame(block: bytes, first_line: int, bs: prefilter.BlockScan) -> tuple[
        list[CandidateRow], pl.DataFrame, pl.DataFrame, Counts, BlockLines]:
    """The prefilter's candidates: only they and their neighbours are cut out and decoded."""
    import numpy as np

    n, idx = bs.n, bs.cand
    counts = Counts(lines=n, unclassified=n, candidates=idx.size, ansi_lines=bs.ansi)
    lines = BlockLines(n, _tail(block, TAIL_LINES), bs.lines)
    if n == 0:
        return [], empty_stats(), empty_kv(), counts, lines
    for a, b in classified_spans(first_line, n):
        mask = pl.zeros(b - a, pl.Boolean, eager=True)
        inside = idx[(idx >= a) & (idx < b)] - a
        if inside.size:
            mask = mask.scatter(pl.Series(inside, dtype=pl.UInt32), True)
        classify_span(pl.DataFrame({"line": bs.line_range(a, b), "cand": mask}), counts)
        counts.unclassified -= b - a
    counts.last = (lines.tail[-1], bool(idx.size) and int(idx[-1]) == n - 1)
    k = idx.size
    after = np.flatnonzero(idx < n - 1)
    before = np.flatnonzero((idx > 0) & ~np.concatenate(([False], idx[1:] == idx[:-1] + 1)))
    nxts: list[str | None] = [None] * k
    prvs: list[str | None] = [None] * k
    for j, t in zip(after.tolist(), bs.texts(idx[after] + 1), strict=True):
        nxts[j] = t
    for j, t in zip(before.tolist(), bs.texts(idx[before] - 1), strict=True):
        prvs[j] = t
    ns, texts = (idx + first_line).tolist(), bs.texts(idx)
    cand = pl.DataFrame({"n": ns, "line": texts, "nxt": nxts, "prv": prvs},
                        schema={"n": pl.Int64, "line": pl.Utf8, "nxt": pl.Utf8, "prv": pl.Utf8})
    return (*_finish(cand), counts, lines)


TAIL_LINES = 8   # lines read back from a block's end for its last stamp, before polars searches the rest
_STAMPED = re.compile(STAMP_HINT)


def last_stamp(lines: BlockLines, parser: LineParser) -> datetime | None:
    """The time of a block's last stamped line (any line: noise is evidence of the clock too). Its
    last few lines are read in Python; only a block that ends in a long unstamped stretch (a traceback,
    progress bars) has the rest searched, in polars. Only lines with a stamp's shape are parsed, on
    both paths, so the result does not depend on where the blocks were cut."""
    for line in reversed(lines.tail):
        if line is not None and _STAMPED.search(line) and (t := parser.line_time(line)) is not None:
            return t
    n = lines.n
    if n <= TAIL_LINES:
        return None
    head = lines.head(n - TAIL_LINES)
    for i in reversed(head.str.contains(STAMP_HINT).arg_true().to_list()):
        if (t := parser.line_time(head[i])) is not None:
            return t
    return None
