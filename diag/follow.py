"""Follow a run like ``tail -F``: appended bytes by offset, new files, truncation, rotation, deletion.

Each followed file keeps a :class:`parsers.ingest.StreamParser`; a poll reads what was appended
since the last one (no busy loop: the caller sleeps between polls). A file that shrinks was
truncated and is read again from the start; a file whose inode changed was rotated and is
reopened; a deleted file keeps the records already read.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from diag.parsers.ingest import ParsedLog, StreamParser, infer_tz_offset
from diag.parsers.layout import FileInfo, classify_path
from diag.parsers.records import Record

from .files import Skipped, discover, year_of

READ_MAX = 8 << 20
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
        try:
            with path.open("rb") as fh:
                fh.seek(f.offset)
                data = fh.read(READ_MAX)
        except OSError:
            return []
        f.offset += len(data)
        f.quiet_since = time.monotonic()
        f.log.size = st.st_size
        recs = f.parser.feed(data)
        f.log.records.extend(recs)
        f.log.counts = f.parser.counts
        return recs

    def poll(self) -> tuple[list[tuple[str, Record]], list[str]]:
        """(new records with their file, newly found files)."""
        added = self._rescan()
        out: list[tuple[str, Record]] = []
        for key, f in list(self.files.items()):
            for r in self._read(key, f):
                out.append((key, r))
        return out, added

    def flush(self) -> list[tuple[str, Record]]:
        """At exit: the last unterminated lines of every file."""
        out = []
        for key, f in self.files.items():
            recs = f.parser.finish()
            f.log.records.extend(recs)
            out.extend((key, r) for r in recs)
        return out

    def logs(self) -> list[ParsedLog]:
        return [f.log for f in self.files.values()]

