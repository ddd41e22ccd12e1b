"""Follow a run like ``tail -F``: appended bytes by offset, new files, truncation, rotation, deletion.

Each followed file keeps a :class:`parsers.ingest.StreamParser` (the bulk path's block function, so
catching up on a large existing log runs at batch speed); a poll reads what was appended since the
last one, in blocks, up to ``POLL_MAX`` bytes a file (no busy loop: the caller sleeps between polls). A file that shrinks was
truncated and is read again from the start; a file whose inode changed was rotated and is
reopened; a deleted file keeps the records already read.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import polars as pl

from diag.parsers.columns import empty_kv, empty_stats
from diag.parsers.ingest import ParsedLog, StreamParser, infer_tz_offset
from diag.parsers.layout import FileInfo, classify_path
from diag.parsers.records import Record

from .files import Skipped, discover, year_of

READ_MAX = 8 << 20     # one block (diag.files.BLOCK)
POLL_MAX = 512 << 20   # read per file and poll: a large existing log is caught up in a few polls
FOLLOWED = ("worker", "orchestrator", "frontend")
HOLD_S = 0.3  # how long a complete line may wait for a torn continuation before it is parsed alone


@dataclass
class Followed:
    log: ParsedLog
    parser: StreamParser
    offset: int = 0
    inode: int | None = None
    gone: bool = False
    resets: int = 0
    quiet_since: float = 0.0
    tz: int = 0
    new: list[Record] = field(default_factory=list)
    kept: tuple[pl.DataFrame, pl.DataFrame] = field(default_factory=lambda: (empty_stats(), empty_kv()))
    # ^ rows of the file's content before a truncation or rotation (the records stay too)

    def sync(self) -> None:
        """The log's stats/KV columns: what was kept plus what the current parser extracted."""
        stats, kv = self.parser.stats, self.parser.kv
        self.log.stats = pl.concat([self.kept[0], stats]) if self.kept[0].height else stats
        self.log.kv = pl.concat([self.kept[1], kv]) if self.kept[1].height else kv


class Follower:
    """The set of followed logs under some paths; ``poll()`` returns what changed."""

    def __init__(self, paths: list[str], *, ref: datetime | None = None) -> None:
        self.paths = paths
        self.ref = ref
        self.files: dict[str, Followed] = {}
        self.skipped: list[Skipped] = []
        self.dirs = [Path(p) for p in paths if Path(p).is_dir()]
        files, self.skipped = discover(paths)
        for path, info in files:
            self._add(path, info)

    def _add(self, path: Path, info: FileInfo) -> None:
        if info.kind not in FOLLOWED:
            return
        try:
            st = path.stat()
            with path.open("rb") as fh:
                head = fh.read(65536).decode("utf-8", errors="replace")
        except OSError:
            return
        year = year_of(path, head, self.ref)
        tz = infer_tz_offset(head)
        self.files[str(path)] = Followed(ParsedLog(str(path), info, year=year),
                                         StreamParser(year=year, tz_offset_s=tz), inode=st.st_ino, tz=tz)

    def _rescan(self) -> list[str]:
        """Pick up worker files that appeared in the followed directories."""
        added = []
        for d in self.dirs:
            for dirpath, _, names in os.walk(d):
                for name in names:
                    p = Path(dirpath) / name
                    if str(p) in self.files:
                        continue
                    info = classify_path(p)
                    if info.kind in FOLLOWED:
                        self._add(p, info)
                        added.append(str(p))
        return added

    def _reset(self, f: Followed, inode: int | None) -> None:
        f.parser.finish()
        f.sync()
        f.kept = (f.log.stats, f.log.kv)
        f.parser = StreamParser(year=f.log.year, tz_offset_s=f.tz)
        f.offset = 0
        f.inode = inode
        f.resets += 1

    def _read(self, key: str, f: Followed) -> list[Record]:
        path = Path(key)
        try:
            st = path.stat()
        except FileNotFoundError:
            f.gone = True
            return []
        if f.gone:
            f.gone = False
            self._reset(f, st.st_ino)
        elif st.st_ino != f.inode:
            self._reset(f, st.st_ino)  # rotated: a new file under the old name
        elif st.st_size < f.offset:
            self._reset(f, st.st_ino)  # truncated
        if st.st_size == f.offset:
            if f.parser.waiting and time.monotonic() - f.quiet_since >= HOLD_S:
                recs = f.parser.release()
                f.log.records.extend(recs)
                return recs
            return []
        recs: list[Record] = []
        try:
            with path.open("rb") as fh:
                fh.seek(f.offset)
                start = f.offset
                while f.offset - start < POLL_MAX and (data := fh.read(READ_MAX)):
                    f.offset += len(data)
                    recs.extend(f.parser.feed(data))
        except OSError:
            pass
        f.quiet_since = time.monotonic()
        f.log.size = st.st_size
        f.log.records.extend(recs)
        f.log.counts = f.parser.counts
        f.sync()
        return recs

    def poll(self) -> tuple[list[tuple[str, Record]], list[str], list[tuple[str, pl.DataFrame, pl.DataFrame]]]:
        """(new records with their file, newly found files, new stats/KV rows with their file)."""
        added = self._rescan()
        out: list[tuple[str, Record]] = []
        for key, f in list(self.files.items()):
            for r in self._read(key, f):
                out.append((key, r))
        return out, added, self._rows()

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
        return out, self._rows()

    def logs(self) -> list[ParsedLog]:
        return [f.log for f in self.files.values()]

