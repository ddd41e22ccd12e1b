"""Follow a run like ``tail -F``: appended bytes by offset, new files, truncation, rotation, deletion.

Each followed file keeps a :class:`parsers.ingest.StreamParser` (the bulk path's block function, so
catching up on a large existing log runs at batch speed); a poll reads what was appended since the
last one, in blocks, up to ``POLL_MAX`` bytes a file (no busy loop: the caller sleeps between polls). A file that shrinks was
truncated and is read again from the start; a file whose inode changed was rotated and is
reopened; a deleted file keeps the records already read. With ``wait``, a named path that does not
exist yet (or a glob that matches nothing yet) is waited for and followed once it appears.
"""

from __future__ import annotations

import glob
import gzip
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO

import polars as pl

from diag.parsers import engines, inputs
from diag.parsers.columns import empty_kv, empty_stats
from diag.parsers.engines import engine_of
from diag.parsers.ingest import CLOCK_SCAN, ParsedLog, StreamParser, infer_clock
from diag.parsers.layout import FileInfo
from diag.parsers.records import Record

from .files import (
    BLOCK,
    NO_RUN_LOGS,
    PARALLEL_MIN_BYTES,
    Skipped,
    classify,
    clock_of,
    discover,
    is_dir,
    not_readable,
    not_there_yet,
    open_log,
    year_of,
)

READ_MAX = BLOCK        # one block per read
POLL_MAX = 512 << 20   # read per file and poll: a large existing log is caught up in a few polls
FOLLOWED = ("worker", "orchestrator", "frontend")
HEAD_BYTES = 64 << 10  # what the batch read tells a log's engine (and year) from
HOLD_S = 0.3  # how long a complete line may wait for a torn continuation before it is parsed alone
# literals of the engines' local-clock heads (their adapters' evidence, where an adapter places a local clock)
_LOCAL_EVIDENCE = tuple(lit.encode() for a in engines.adapters() if a.clock_offset is not None for lit in a.evidence)


@dataclass
class Followed:
    log: ParsedLog
    parser: StreamParser
    offset: int = 0
    inode: int | None = None
    gone: bool = False
    packed: bool = False   # a gzip log: read once when found
    resets: int = 0
    quiet_since: float = 0.0
    tz: int = 0
    head: bytes = b""      # the file's first HEAD_BYTES, while its engine is not known
    new: list[Record] = field(default_factory=list)
    stream: IO[bytes] | None = None   # a compressed log read as far as it is visible (a replay)
    kept: tuple[pl.DataFrame, pl.DataFrame] = field(default_factory=lambda: (empty_stats(), empty_kv()))
    # ^ rows of the file's content before a truncation or rotation (the records stay too)
    clock_open: bool = False   # its local stamps not placed on UTC yet: settled from its bytes as they come
    seen: bytes = b""          # the file's bytes read while its clock is open (the batch read's head), at most CLOCK_SCAN
    own_clock_read: bool = False   # local stamps were read on the log's own clock (not placed when read)

    def clocked(self, data: bytes) -> bool:
        """Settle the log's clock on the bytes read so far and ``data``, as the batch read of the same bytes
        settles it (:func:`~diag.parsers.ingest.settle_clock`); True when lines already parsed were read on the
        log's own clock and must be read again from the start with the offset now settled."""
        if len(self.seen) < CLOCK_SCAN:
            self.seen += data[: CLOCK_SCAN - len(self.seen)]
        if not self.own_clock_read and not any(lit in data for lit in _LOCAL_EVIDENCE):
            self.clock_open = len(self.seen) < CLOCK_SCAN
            self.log.clock_note, self.log.clock_placed = None, True
            return False   # nothing on a local clock (yet)
        tz, note = infer_clock(self.seen.decode("utf-8", errors="replace"))
        self.log.clock_note, self.log.clock_placed = note, tz is not None
        self.clock_open = tz is None and len(self.seen) < CLOCK_SCAN
        if tz is None:   # not placed (yet): read on the log's own clock, as the batch read of these bytes is
            self.own_clock_read = True
            self.parser.set_clock(0)
            self.tz = 0
            return False
        again = self.own_clock_read and tz != self.tz
        self.tz, self.own_clock_read, self.seen = tz, False, b""
        self.parser.set_clock(tz)
        return again

    def sniff(self, data: bytes) -> None:
        """Tell the log's engine from its head as the head grows (the batch read sees the same 64 KiB)."""
        if self.log.engine is not None or len(self.head) >= HEAD_BYTES:
            return
        self.head += data[: HEAD_BYTES - len(self.head)]
        self.log.engine = engine_of(self.head.decode("utf-8", errors="replace"))

    def sync(self) -> None:
        """The log's stats/KV columns: what was kept plus what the current parser extracted."""
        stats, kv = self.parser.stats, self.parser.kv
        self.log.stats = pl.concat([self.kept[0], stats]) if self.kept[0].height else stats
        self.log.kv = pl.concat([self.kept[1], kv]) if self.kept[1].height else kv


def _year_reached(log: ParsedLog) -> int | None:
    """The year a log's lines had reached: content written after a truncation or rotation starts
    there, not at the year of the file's first line (a run that crossed New Year would go back)."""
    stamps = [t for cols in (log.stats, log.kv) if cols.height and (t := cols["ts"].max()) is not None]
    stamps += [r.ts for r in log.records[-50:] if r.ts is not None]
    return max(stamps).year if stamps else log.year  # type: ignore[union-attr]


class Follower:
    """The set of followed logs under some paths; ``poll()`` returns what changed."""

    def __init__(self, paths: list[str], *, ref: datetime | None = None, wait: bool = False,
                 ref_of: Callable[[list[tuple[Path, FileInfo]]], datetime | None] | None = None,
                 files: list[tuple[Path, FileInfo]] | None = None,
                 visible: Callable[[str], int] | None = None) -> None:
        """``files``: follow these (classified) files and look for no others; ``visible``: how many bytes of
        a file (by path) there are to read so far, whatever its size (a replay: the run's files as they stood)."""
        self.waiting = [p for p in paths if wait and not_there_yet(p)]  # named, not there yet
        self.paths = [p for p in paths if p not in self.waiting]        # there (discovered)
        self.appeared: list[str] = []                                   # waited for, then found
        self.ref = ref
        self.ref_of = ref_of  # dates a path that appears later (its orchestrator log), when ref is None
        self.visible = visible
        self.files: dict[str, Followed] = {}
        self.skipped: list[Skipped] = []
        self.dirs = [Path(p) for p in self.paths if Path(p).is_dir()]
        if files is None:
            files, self.skipped = discover(self.paths)
        for path, info in files:
            self._add(path, info)

    def _arrivals(self) -> None:
        """Paths waited for that now exist: followed from here on (their files by the rescan)."""
        for arg in [a for a in self.waiting if not not_there_yet(a)]:
            self.waiting.remove(arg)
            self.paths.append(arg)
            self.appeared.append(arg)
            files, skipped = discover([arg])
            self.dirs += [Path(m) for m in (glob.glob(arg) if any(c in arg for c in "*?[") else [arg])
                          if is_dir(Path(m))]
            self.skipped += skipped
            if self.ref is None and self.ref_of is not None:
                self.ref = self.ref_of(files)
            for path, info in files:
                self._add(path, info)

    def _add(self, path: Path, info: FileInfo) -> None:
        if info.kind not in FOLLOWED or str(path) in self.files:
            return
        why = not_readable(path)  # a FIFO would block open() forever
        if why is not None:
            self.skipped.append(Skipped(path, why))
            return
        try:
            st = inputs.stat(path)
            with open_log(path) as fh:
                head = fh.read(65536).decode("utf-8", errors="replace")
                packed = isinstance(fh, gzip.GzipFile)
        except (OSError, EOFError):
            return
        year = year_of(path, head, self.ref)
        tz, note = clock_of(path, head)
        log = ParsedLog(str(path), info, year=year)
        log.clock_note, log.clock_placed = note, tz is not None
        f = Followed(log, StreamParser(year=year, tz_offset_s=tz or 0), inode=st.st_ino, tz=tz or 0)
        # a log still short of what the batch read settles its clock from: settled as its bytes come
        f.clock_open = st.st_size < CLOCK_SCAN and (note is None or tz is None)
        self.files[str(path)] = f
        self.skipped = [s for s in self.skipped if not (s.reason == NO_RUN_LOGS and s.path in path.parents)]
        if packed:  # a compressed log is a finished one: read it whole, once (offsets mean nothing in it)
            f.packed = True
            if self.visible is None:
                self._read_packed(path, f)

    def _read_packed(self, path: Path, f: Followed) -> None:
        try:
            with open_log(path) as fh:
                while data := fh.read(READ_MAX):
                    f.sniff(data)
                    f.log.records.extend(f.parser.feed(data))
        except (OSError, EOFError) as e:
            f.log.error = f"{path}: cannot read: {e}"
        f.log.size = inputs.stat(path).st_size
        f.log.counts = f.parser.counts
        f.sync()

    def _rescan(self) -> list[str]:
        """Pick up worker files that appeared in the followed directories (and paths waited for)."""
        before = set(self.files)
        self._arrivals()
        added = [k for k in self.files if k not in before]
        for d in self.dirs:
            for dirpath, _, names in os.walk(d):
                for name in names:
                    p = Path(dirpath) / name
                    if str(p) in self.files:
                        continue
                    info = classify(p)
                    if info.kind in FOLLOWED and not any(s.path == p for s in self.skipped):
                        self._add(p, info)
                        added.append(str(p))
        return added

    def _reset(self, f: Followed, inode: int | None) -> list[Record]:
        """Start the file again from offset 0; the old content's held-back last lines are records."""
        held = f.parser.finish()
        f.log.records.extend(held)
        f.sync()
        f.kept = (f.log.stats, f.log.kv)
        f.parser = StreamParser(year=_year_reached(f.log), tz_offset_s=f.tz)
        f.offset = 0
        f.inode = inode
        f.resets += 1
        return held

    def _read(self, key: str, f: Followed, st: os.stat_result | None = None) -> list[Record]:
        """What was appended to one file since the last poll (``st``: its stat, when the poll took it already)."""
        if f.packed:
            return self._read_visible_packed(key, f) if self.visible is not None else []
        path = Path(key)
        try:
            st = st or inputs.stat(path)
        except FileNotFoundError:
            f.gone = True
            return []
        size = st.st_size if self.visible is None else min(st.st_size, self.visible(key))
        recs: list[Record] = []
        if f.gone:
            f.gone = False
            recs = self._reset(f, st.st_ino)
        elif st.st_ino != f.inode:
            recs = self._reset(f, st.st_ino)  # rotated: a new file under the old name
        elif st.st_size < f.offset:
            recs = self._reset(f, st.st_ino)  # truncated
        if size == f.offset:
            if f.parser.waiting and time.monotonic() - f.quiet_since >= HOLD_S:
                released = f.parser.release()
                f.log.records.extend(released)
                f.log.counts = f.parser.counts
                f.sync()   # a held head of the log may give stats rows too (parsers.wraps)
                return recs + released
            return recs
        held, recs = recs, []
        try:
            with inputs.open_input(path) as fh:
                fh.seek(f.offset)
                recs = self._take(f, fh, size)
        except OSError:
            pass
        f.quiet_since = time.monotonic()
        f.log.size = size
        return held + self._took(f, recs)

    def _take(self, f: Followed, fh: IO[bytes], size: int) -> list[Record]:
        """Feed the parser the file's bytes from its offset to ``size`` (at most ``POLL_MAX`` a poll)."""
        recs: list[Record] = []
        start = f.offset
        while f.offset < size and f.offset - start < POLL_MAX and (data := fh.read(min(READ_MAX, size - f.offset))):
            f.offset += len(data)
            f.sniff(data)
            if f.clock_open and f.clocked(data):   # its clock settled after lines were read on its own clock
                self._reread(f)
                fh.seek(0)
                return self._take(f, fh, size)
            recs.extend(f.parser.feed(data))
        if f.offset >= size:   # all that is written: its first lines need not wait for more to be parsed
            recs.extend(f.parser.settle())
        return recs

    def _reread(self, f: Followed) -> None:
        """Read the file again from its start with its settled clock: its records and rows so far are replaced."""
        f.parser = StreamParser(year=f.log.year, tz_offset_s=f.tz)
        f.offset = 0
        f.log.records = []
        f.kept = (empty_stats(), empty_kv())
        f.sync()

    def _took(self, f: Followed, recs: list[Record]) -> list[Record]:
        """Records just read, into the log. A file read as far as it is visible stands there: its held-back
        last line is parsed now (the batch read of the file as it stands parses it at its end)."""
        if self.visible is not None and f.parser.waiting:
            recs = recs + f.parser.release()
        f.log.records.extend(recs)
        f.log.counts = f.parser.counts
        f.sync()
        return recs

    def _read_visible_packed(self, key: str, f: Followed) -> list[Record]:
        """A compressed log read as far as it is visible, on one open stream (a seek would inflate it again)."""
        assert self.visible is not None
        size = self.visible(key)
        if size <= f.offset:
            return []
        try:
            if f.stream is None:
                f.stream = open_log(Path(key))
            recs = self._take(f, f.stream, size)
        except (OSError, EOFError) as e:
            f.log.error = f"{key}: cannot read: {e}"
            return []
        f.log.size = f.offset
        return self._took(f, recs)

    def poll(self) -> tuple[list[tuple[str, Record]], list[str], list[tuple[str, pl.DataFrame, pl.DataFrame]]]:
        """(new records with their file, newly found files, new stats/KV rows with their file)."""
        added = self._rescan()
        files = list(self.files.items())
        stats = {key: self._stat(key) for key, f in files if not f.packed and self.visible is None}
        backlog = sum(max(st.st_size - f.offset, 0) for key, f in files if (st := stats.get(key)) is not None)
        read = self._read_parallel(files, stats) if len(files) > 1 and backlog >= PARALLEL_MIN_BYTES else {}
        out = [(key, r) for key, f in files for r in (read[key] if key in read else self._read(key, f, stats.get(key)))]
        return out, added, self._rows()

    @staticmethod
    def _stat(key: str) -> os.stat_result | None:
        """A plain file's stat, taken once a poll (None: gone; :meth:`_read` says so)."""
        try:
            return inputs.stat(Path(key))
        except FileNotFoundError:
            return None

    def _read_parallel(self, files: list[tuple[str, Followed]],
                       stats: dict[str, os.stat_result | None]) -> dict[str, list[Record]]:
        """A large backlog (catching up on an existing run) read as the batch read reads it: one thread per CPU,
        the files in parallel (each has its own parser; polars releases the GIL), the records kept per file."""
        from concurrent.futures import ThreadPoolExecutor

        n = min(os.cpu_count() or 1, len(files))
        if n < 2:
            return {}
        with ThreadPoolExecutor(n) as pool:
            futures = {key: pool.submit(inputs.in_context(self._read), key, f, stats.get(key)) for key, f in files}
            return {key: fut.result() for key, fut in futures.items()}

    def due_in(self) -> float | None:
        """Seconds until a held-back last line (:data:`HOLD_S`) is due to be parsed alone; None: none is held (a
        line overdue and still held, as a replay's, is not waited for)."""
        if self.visible is not None:
            return None
        now = time.monotonic()
        due = [d for f in self.files.values() if f.parser.waiting and not f.packed
               and (d := HOLD_S - (now - f.quiet_since)) > -HOLD_S]
        return max(0.0, min(due)) if due else None

    def _rows(self) -> list[tuple[str, pl.DataFrame, pl.DataFrame]]:
        rows = []
        for key, f in self.files.items():
            stats, kv = f.parser.take_rows()
            if stats.height or kv.height:
                rows.append((key, stats, kv))
        return rows

    def flush(self) -> tuple[list[tuple[str, Record]], list[tuple[str, pl.DataFrame, pl.DataFrame]]]:
        """At exit: the last unterminated lines of every file (records, rows)."""
        out = []
        for key, f in self.files.items():
            recs = f.parser.finish()
            f.log.records.extend(recs)
            f.sync()
            out.extend((key, r) for r in recs)
            if f.stream is not None:
                f.stream.close()
                f.stream = None
        return out, self._rows()

    def logs(self) -> list[ParsedLog]:
        return [f.log for f in self.files.values()]

    def adopt(self, logs: Mapping[str, ParsedLog]) -> None:
        """Append to these logs (by path) from now on (see ``SourceBase.adopt``)."""
        for path, log in logs.items():
            if (f := self.files.get(path)) is not None:
                f.log = log

