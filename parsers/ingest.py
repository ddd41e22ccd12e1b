"""Two ways through a log's bytes, one result: the bulk path and the streaming path.

* :func:`parse_bulk` takes a file's content in blocks. The trigger vocabulary of the format registry,
  compiled into one Hyperscan database, finds the candidate lines in the raw bytes; only they and
  their neighbours are decoded (:mod:`parsers.blockframe`, :mod:`parsers.prefilter`; polars splits
  and classifies every line where Hyperscan is unavailable). Noise and ANSI lines are counted by
  polars on the sampled lines (:mod:`parsers.counts`), so no Python code runs for them.
* :class:`StreamParser` takes bytes as they are appended (follow mode), from any offset, and
  feeds the same :class:`LineParser` the same candidate lines.

Both give identical records (``tests/test_ingest.py`` checks it on every sample run).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import FrozenInstanceError, dataclass, field
from datetime import datetime
from typing import Any

import polars as pl

from . import benchmark as _benchmark
from .blockframe import block_frame, decode, last_stamp
from .columns import empty_kv, empty_stats, kv_records, stats_records
from .counts import Counts
from .formats import REGISTRY
from .lineparser import LineParser
from .records import Record
from .wraps import SAMPLE, hold_tail, unwrap, wrap_width

for _fmt in _benchmark.BENCH_OUT_FORMATS:  # whole-file formats: declared here so the format tests run them
    REGISTRY.setdefault(_fmt.name, _fmt)

MAX_LINE = 1 << 20   # a log line longer than this keeps its first MAX_LINE bytes (a record is far shorter)


class LineCap:
    """Cuts every line of a byte stream to its first ``limit`` bytes, across chunk boundaries, so a
    200 MB line costs a megabyte, not a copy of itself in every buffer. ``cut`` counts the lines cut.
    The common chunk (every newline-free stretch shorter than half the limit) passes untouched."""

    def __init__(self, limit: int = MAX_LINE) -> None:
        self.limit = limit
        self.run = 0      # bytes of the current (unterminated) line already passed
        self.cut = 0

    def __call__(self, chunk: bytes) -> bytes:
        first = chunk.find(b"\n")
        head = len(chunk) if first < 0 else first
        last = chunk.rfind(b"\n")
        after = self.run + head if last < 0 else len(chunk) - last - 1
        if self.run + head <= self.limit and after <= self.limit and self._short_inside(chunk, first, last):
            self.run = after
            return chunk
        return self._slow(chunk)

    def _short_inside(self, chunk: bytes, first: int, last: int) -> bool:
        """No line between the first and the last newline is longer than the limit: every aligned
        window of half the limit holds a newline (a longer line would contain one such window)."""
        half = max(self.limit // 2, 1)
        for a in range(-(-(first + 1) // half) * half if first >= 0 else 0, last, half):
            if chunk.find(b"\n", a, a + half) < 0:
                return False
        return True

    def _slow(self, chunk: bytes) -> bytes:
        out: list[bytes] = []
        pos, n = 0, len(chunk)
        while pos < n:
            nl = chunk.find(b"\n", pos)
            end = n if nl < 0 else nl
            room = self.limit - self.run
            if end - pos <= room:
                out.append(chunk[pos:end])
                self.run += end - pos
            else:
                if room > 0:
                    out.append(chunk[pos:pos + room])
                    self.cut += 1
                self.run = self.limit
            if nl < 0:
                break
            out.append(b"\n")
            self.run, pos = 0, nl + 1
        return b"".join(out)


@dataclass
class ParsedLog:
    """One log file after parsing: its name-derived identity, counts and records."""

    path: str
    info: Any                       # parsers.layout.FileInfo
    size: int = 0
    counts: Counts = field(default_factory=Counts)
    records: list[Record] = field(default_factory=list)   # a tuple in a frozen copy (:meth:`frozen`)
    year: int | None = None
    error: str | None = None
    stats: pl.DataFrame = field(default_factory=empty_stats)  # extracted stats rows (parsers.columns)
    kv: pl.DataFrame = field(default_factory=empty_kv)        # extracted KV-transfer rows
    engine: str | None = None       # the serving engine its head shows (diag.parsers.engines.from_text)
    clock_note: str | None = None   # how its local stamps were placed on UTC, or why they were not (infer_clock)
    clock_placed: bool = True       # False: its local stamps are kept on its own clock (not placed on UTC)
    _frozen: bool = field(default=False, init=False, repr=False, compare=False)

    def __setattr__(self, name: str, value: Any) -> None:
        if self._frozen:
            raise FrozenInstanceError(f"cannot assign to {name!r}: a run's log is read-only")
        object.__setattr__(self, name, value)

    def frozen(self) -> ParsedLog:
        """A read-only copy as of now (records a tuple, counts frozen; polars frames are never changed in
        place): what a Run holds, while the source goes on appending to this log."""
        if self._frozen:
            return self
        copy = ParsedLog(self.path, self.info, self.size, self.counts.frozen(), self.records, self.year, self.error,
                         self.stats, self.kv, self.engine, self.clock_note, self.clock_placed)
        object.__setattr__(copy, "records", tuple(self.records))
        object.__setattr__(copy, "_frozen", True)
        return copy

    @property
    def kind(self) -> str:
        return self.info.kind

    @property
    def last_ts(self) -> datetime | None:
        """The time of its last stamped line, noise included (None: no line carried a time)."""
        return self.counts.last_ts

    @property
    def n_records(self) -> int:
        return len(self.records) + self.stats.height + self.kv.height

    def all_records(self) -> list[Record]:
        """Records and extracted rows as records, in line order (materialised on demand)."""
        return merged_records(self.records, self.stats, self.kv)


class _Stamper:
    """Timestamps of a block's extracted rows, given in line order with the line parser's own
    records: the parser's year tracker sees one month-day per run of rows (a run ends at a month
    change or at a line the parser parses), so a run over New Year gets the same years as when
    every line went through the parser; the rest of a run is stamped in polars."""

    def __init__(self, parser: LineParser, tz_offset_s: int) -> None:
        self.parser = parser
        self.tz = tz_offset_s

    def block(self, stats: pl.DataFrame, kv: pl.DataFrame, slow_lines: list[int]) -> None:
        rows = pl.concat([stats.select("line", "md"), kv.select("line", "md")]).drop_nulls("md").sort("line")
        self.rows = rows
        self.runs: list[tuple[int, str, int]] = []
        self.years: list[int | None] = []
        self.fixed: dict[int, datetime | None] = {}
        self._next = 0
        if rows.height == 0:
            return
        before = pl.Series(slow_lines, dtype=pl.Int64).search_sorted(rows["line"], side="left")
        month = rows["md"].str.slice(0, 2)
        start = ((month != month.shift(1)) | (before != before.shift(1))).fill_null(True)
        self.run_id = start.cast(pl.Int64).cum_sum() - 1
        starts = start.arg_true()
        self.runs = list(zip(starts.to_list(), rows["md"].gather(starts).to_list(),
                             before.gather(starts).to_list(), strict=True))

    def until(self, slow_index: int | None) -> None:
        """Stamp the runs that come before the block's ``slow_index``-th parsed line (None: all)."""
        p = self.parser
        while self._next < len(self.runs) and (slow_index is None or self.runs[self._next][2] <= slow_index):
            i, md, _ = self.runs[self._next]
            p._resolve(md)
            if p._tracker is None:
                self.years.append(None)
            elif p._month[0] == md[:2] and p._month[1] is not None:
                self.years.append(p._month[1])
            else:  # the tracker did not take this month (an invalid date): stamp the run row by row
                self.years.append(None)
                end = self.runs[self._next + 1][0] if self._next + 1 < len(self.runs) else self.rows.height
                for j, m in enumerate(self.rows["md"].slice(i, end - i).to_list()):
                    self.fixed[i + j] = p._resolve(m)
            self._next += 1

    def stamp(self, stats: pl.DataFrame, kv: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The rows stamped: by month-day and the year tracker, or by their own full local stamp (the
        extracted ``ts``, on the log's clock)."""
        if self.tz:
            stats, kv = (df.with_columns(pl.col("ts") - pl.duration(seconds=self.tz)) for df in (stats, kv))
        if self.rows.height == 0:
            return stats, kv
        year = pl.Series(self.years, dtype=pl.Int64).gather(self.run_id)
        ts = (pl.concat_str([year.cast(pl.Utf8), pl.lit("-"), self.rows["md"]])
              .str.strptime(pl.Datetime("us"), "%Y-%m-%d %H:%M:%S", strict=False)
              .dt.replace_time_zone("UTC") - pl.duration(seconds=self.tz))
        stamped = self.rows.select("line").with_columns(ts.alias("ts"))
        if self.fixed:
            at = pl.Series(list(self.fixed), dtype=pl.Int64)
            vals = pl.Series(list(self.fixed.values()), dtype=pl.Datetime("us", "UTC"))
            stamped = stamped.with_columns(stamped["ts"].scatter(at, vals))
        cols_s, cols_k = stats.columns, kv.columns
        stats, kv = (df.join(stamped, on="line", how="left", maintain_order="left", suffix="_md")
                     .with_columns(pl.coalesce("ts_md", "ts").alias("ts")).select(cols)
                     for df, cols in ((stats, cols_s), (kv, cols_k)))
        return stats, kv


@dataclass
class Parsed:
    """A log's content after the bulk path: the line parser's records, the extracted stats and KV
    rows (in line order), and the line counts."""

    records: list[Record]
    stats: pl.DataFrame
    kv: pl.DataFrame
    counts: Counts


class BlockParser:
    """The one block function of both paths: each newline-aligned block goes through polars
    (classification, stats/KV extraction) and only its rare candidate lines through the line
    parser. A block's last candidate waits for the next block's first line (a torn record may
    continue there); :meth:`release` parses it alone."""

    def __init__(self, *, year: int | None = None, tz_offset_s: int = 0, first_line: int = 1) -> None:
        self.parser = LineParser(year, tz_offset_s)
        self._stamper = _Stamper(self.parser, tz_offset_s)
        self.counts = Counts()
        self._line0 = first_line
        self._pending: tuple[int, str, str | None] | None = None  # the last candidate, waiting for its successor
        self._before: tuple[str, bool] | None = None  # the previous block's last line, and whether a candidate
        self._skip = -1
        self._wrap: int | None = None   # the column the log was hard-wrapped at (:mod:`parsers.wraps`), 0: none
        self._held: list[bytes] = []    # the first blocks, until they show whether the log is wrapped; then the
                                        # lines a wrap may continue into the next block

    @property
    def waiting(self) -> bool:
        return self._pending is not None or bool(self._held)

    def block(self, block: bytes) -> tuple[list[Record], pl.DataFrame, pl.DataFrame]:
        """The records and stats/KV rows that one block completes (a log's first :data:`parsers.wraps.SAMPLE`
        bytes are held until they tell whether a terminal wrapped it; a wrapped log's last lines of a block
        until the next one shows whether they go on)."""
        self._held.append(block)
        if self._wrap is None and sum(map(len, self._held)) < SAMPLE:
            return [], empty_stats(), empty_kv()
        return self._parse_held(final=False)

    def set_clock(self, tz_offset_s: int) -> None:
        """Local stamps from now on are ``tz_offset_s`` ahead of UTC, in records and extracted rows alike."""
        self.parser.set_clock(tz_offset_s)
        self._stamper.tz = tz_offset_s

    def settle(self) -> tuple[list[Record], pl.DataFrame, pl.DataFrame]:
        """Decide on the bytes held so far whether the log is wrapped and parse them (a follower at the end of
        what is written: a growing log is judged on its first lines)."""
        return self._parse_held(final=False) if self._wrap is None and self._held else ([], empty_stats(), empty_kv())

    def flush(self) -> tuple[list[Record], pl.DataFrame, pl.DataFrame]:
        """Parse every block held (the input ended, or a follower stops waiting for more)."""
        return self._parse_held(final=True) if self._held else ([], empty_stats(), empty_kv())

    def _parse_held(self, *, final: bool) -> tuple[list[Record], pl.DataFrame, pl.DataFrame]:
        data, self._held = b"".join(self._held), []
        if self._wrap is None:
            self._wrap = wrap_width(data) or 0
        if self._wrap:
            data, tail = (data, b"") if final or not data.endswith(b"\n") else hold_tail(data, self._wrap)
            self._held = [tail] if tail else []
            data = unwrap(data, self._wrap)
        return self._parse(data) if data else ([], empty_stats(), empty_kv())

    def _parse(self, block: bytes) -> tuple[list[Record], pl.DataFrame, pl.DataFrame]:
        records: list[Record] = []
        frame, stats, kv, c, lines = block_frame(block, self._line0)
        line0, p = self._line0, self.parser
        if self._pending is not None:
            first_line = decode(block[: block.find(b"\n")] if b"\n" in block else block).removesuffix("\r")
            pn, praw, pprv = self._pending
            self._pending = None
            recs, consumed = p.feed(pn, praw, first_line if c.lines else None, pprv)
            records.extend(recs)
            self._skip = line0 if consumed else -1
        self._stamper.block(stats, kv, [r[0] for r in frame])
        last = line0 + c.lines - 1
        for j, (n, line, nxt, prv) in enumerate(frame):
            self._stamper.until(j)
            if n == self._skip:
                continue
            if n == line0 and self._before is not None:
                prv = None if self._before[1] else self._before[0]
            if n - 1 == self._skip:
                prv = None  # that line already completed the record before it
            if nxt is None and n == last:
                self._pending = (n, line, prv)
                continue
            recs, consumed = p.feed(n, line, nxt, prv)
            records.extend(recs)
            if consumed:
                self._skip = n + 1
        self._stamper.until(None)
        stats, kv = self._stamper.stamp(stats, kv)
        c.last_ts = last_stamp(lines, p)   # after the block's records: the year tracker has seen them
        self.counts.add(c)
        if c.lines:
            self._before = c.last
        self._line0 += c.lines
        return records, stats, kv

    def release(self) -> list[Record]:
        """Parse the waiting candidate alone (its continuation did not come)."""
        if self._pending is None:
            return []
        pn, praw, pprv = self._pending
        self._pending = None
        recs, _ = self.parser.feed(pn, praw, None, pprv)
        return recs


def parse_blocks(blocks: Iterable[bytes], *, year: int | None = None, tz_offset_s: int = 0) -> Parsed:
    """Records, stats/KV rows and counts of a whole log given as newline-aligned blocks. Each block
    is dropped once parsed: what stays is the extracted columns and the rare records."""
    bp = BlockParser(year=year, tz_offset_s=tz_offset_s)
    records: list[Record] = []
    stats_chunks: list[pl.DataFrame] = []
    kv_chunks: list[pl.DataFrame] = []
    for recs, stats, kv in (*map(bp.block, blocks), bp.flush()):
        records.extend(recs)
        if stats.height:
            stats_chunks.append(stats)
        if kv.height:
            kv_chunks.append(kv)
    records.extend([*bp.release(), *bp.parser.cut_tracebacks()])  # the end: open tracebacks were cut
    return Parsed(records, _concat(stats_chunks, empty_stats), _concat(kv_chunks, empty_kv), bp.counts)


def _concat(chunks: list[pl.DataFrame], empty: Callable[[], pl.DataFrame]) -> pl.DataFrame:
    return pl.concat(chunks) if chunks else empty()


def merged_records(records: list[Record], stats: pl.DataFrame, kv: pl.DataFrame) -> list[Record]:
    """The line parser's records and the extracted rows as one list of records in line order (the
    record path's output for the same lines)."""
    if stats.height == 0 and kv.height == 0:
        return list(records)
    rows: list[Record] = list(heapq.merge(stats_records(stats), kv_records(kv), key=lambda r: r.line))
    return list(heapq.merge(records, rows, key=lambda r: r.line))


def parse_bulk(blocks: Iterable[bytes], *, year: int | None = None,
               tz_offset_s: int = 0) -> tuple[list[Record], Counts]:
    """Every record of a whole log (extracted rows materialised) and its counts."""
    p = parse_blocks(blocks, year=year, tz_offset_s=tz_offset_s)
    return merged_records(p.records, p.stats, p.kv), p.counts


class StreamParser:
    """Incremental parsing of appended bytes (follow mode), from any offset, through the bulk
    path's block function: each feed's complete lines are one block. ``feed`` returns the line
    parser's records completed so far; stats/KV rows gather in :attr:`stats` and :attr:`kv`
    (:meth:`take_rows` hands out the ones not taken yet)."""

    def __init__(self, *, year: int | None = None, tz_offset_s: int = 0, first_line: int = 1) -> None:
        self._blocks = BlockParser(year=year, tz_offset_s=tz_offset_s, first_line=first_line)
        self._partial = b""              # bytes after the last newline
        self._cap = LineCap()
        self._stats: list[pl.DataFrame] = []
        self._kv: list[pl.DataFrame] = []
        self._new: list[tuple[pl.DataFrame, pl.DataFrame]] = []

    @property
    def counts(self) -> Counts:
        return self._blocks.counts

    @property
    def stats(self) -> pl.DataFrame:
        if len(self._stats) > 1:
            self._stats = [pl.concat(self._stats)]
        return self._stats[0] if self._stats else empty_stats()

    @property
    def kv(self) -> pl.DataFrame:
        if len(self._kv) > 1:
            self._kv = [pl.concat(self._kv)]
        return self._kv[0] if self._kv else empty_kv()

    def take_rows(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The stats and KV rows extracted since the last call."""
        new, self._new = self._new, []
        return _concat([s for s, _ in new], empty_stats), _concat([k for _, k in new], empty_kv)

    def _block(self, block: bytes | None, settle: bool = False) -> list[Record]:
        if block is not None:
            recs, stats, kv = self._blocks.block(block)
        else:
            recs, stats, kv = self._blocks.settle() if settle else self._blocks.flush()
        if stats.height or kv.height:
            if stats.height:
                self._stats.append(stats)
            if kv.height:
                self._kv.append(kv)
            self._new.append((stats, kv))
        return recs

    def feed(self, data: bytes) -> list[Record]:
        buf = self._partial + self._cap(data)
        cut = buf.rfind(b"\n")
        if cut < 0:
            self._partial = buf
            return []
        self._partial = buf[cut + 1:]
        return self._block(buf[: cut + 1])

    def set_clock(self, tz_offset_s: int) -> None:
        """Place the local stamps of the lines fed from now on ``tz_offset_s`` ahead of UTC (a follower settles a
        log's clock once its first local line shows: the lines before it had no local stamp)."""
        self._blocks.set_clock(tz_offset_s)

    def settle(self) -> list[Record]:
        """Parse the log's first lines held to tell whether it is wrapped (:meth:`BlockParser.settle`)."""
        return self._block(None, settle=True)

    @property
    def waiting(self) -> bool:
        """A complete candidate line is held back, waiting to see whether the next line continues it."""
        return self._blocks.waiting

    def release(self) -> list[Record]:
        """Parse the held-back candidate now (follow mode: its continuation did not come in time)."""
        return [*self._block(None), *self._blocks.release()]

    def finish(self) -> list[Record]:
        """Flush the last line (even without a trailing newline) and any waiting candidate."""
        out: list[Record] = []
        if self._partial:
            raw, self._partial = self._partial, b""
            out.extend(self._block(raw))
        out.extend([*self._block(None), *self._blocks.release(), *self._blocks.parser.cut_tracebacks()])
        return out


def infer_tz_offset(head: str) -> int:
    """Seconds the node's local time is ahead of UTC (:func:`infer_clock`; 0 where not settled)."""
    return infer_clock(head)[0] or 0


CLOCK_SCAN = 8 << 20   # bytes read when a log's head holds local stamps it cannot place on UTC


def settle_clock(head: str, further: Callable[[int], str]) -> tuple[int | None, str | None]:
    """Seconds a log's local stamps are ahead of UTC and the note on it (:func:`infer_clock`): from its head,
    else from its first :data:`CLOCK_SCAN` bytes (``further(n)``: the log's first ``n`` bytes as text) where the
    head's local stamps could not be placed (a dense log's head may hold no UTC line after its first). Not
    settled: None (the stamps are read on the log's own clock, as 0)."""
    tz, note = infer_clock(head)
    if tz is None:
        with suppress(OSError, EOFError):
            tz, note = infer_clock(further(CLOCK_SCAN))
    return tz, note


def infer_clock(head: str) -> tuple[int | None, str | None]:
    """Seconds the node's local time is ahead of UTC, and a note where an adapter inferred it or refused to.
    From a line that carries both a container's UTC stamp and an engine's local time (its adapter's
    ``tz_probe``), else as an adapter's ``clock_offset`` settles it from the order of the head's lines; 0 when
    neither does (engine times are then taken as UTC), None when an adapter refused to settle its stamps."""
    from . import engines
    from .timestamps import tz_offset_from

    for adapter in engines.adapters():
        m = re.search(adapter.tz_probe, head, re.M) if adapter.tz_probe else None
        if m:
            try:
                return tz_offset_from(m.group(1), m.group(2)), None
            except ValueError:
                return 0, None
    note = None
    for adapter in engines.adapters():
        if adapter.clock_offset is None:
            continue
        told = adapter.clock_offset(head)
        if told.seconds is not None:
            return int(told.seconds), told.note
        note = note or told.note or None
    return (None if note else 0), note
