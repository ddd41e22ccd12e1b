"""When a finished run's files held what: the schedule ``diag watch --replay`` releases them by, so that the
screen at virtual time t shows what a live run showed at t (:class:`diag.sources.ReplaySource`).

Each file goes by its own clock:

* a log (worker, frontend, orchestrator) up to its first line stamped after t, the lines' times as the
  parser reads them: a line without a stamp (a traceback, the rest of a torn record) goes with the stamped
  line before it, the lines before its first stamp are there from the start;
* ``benchmark.out`` in the blocks bench.sh's ``date`` lines close (a result block is printed before the
  ``date`` after it); what follows the last one (an eval's score, an error) once the run has ended;
* a result JSON once its benchmark point ended, the roll-up at its own time (else at the run's end);
* the job metadata and the recipe from the start.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from diag.parsers.benchmark import BenchmarkFormatError, bench_date, read_rollup
from diag.parsers.layout import FileInfo
from diag.parsers.lineparser import MAX_LINE, LineParser
from diag.rules.assemble import Side

from .files import file_size, open_log


@dataclass(frozen=True)
class Clock:
    """How much of a file there is as time goes on: ``head`` bytes from the start, ``cuts[i]`` bytes from
    ``times[i]`` on (both ascending)."""

    head: int
    times: tuple[datetime, ...] = ()
    cuts: tuple[int, ...] = ()

    def at(self, t: datetime) -> int:
        """Bytes of the file there at ``t``."""
        k = bisect_right(self.times, t)
        return self.cuts[k - 1] if k else self.head

    def there(self, t: datetime) -> bool:
        """Whether the file is there at ``t`` (one without times is there from the start)."""
        return self.head > 0 or not self.times or t >= self.times[0]

    @property
    def first(self) -> datetime | None:
        return self.times[0] if self.times else None

    @property
    def last(self) -> datetime | None:
        return self.times[-1] if self.times else None

    def ending(self, end: datetime, size: int) -> Clock:
        """This clock with its times held to ``end`` and the whole file (``size`` bytes) there from then."""
        times = tuple(min(t, end) for t in self.times)
        if (self.cuts[-1] if self.cuts else self.head) < size:
            return Clock(self.head, (*times, end), (*self.cuts, size))
        return Clock(self.head, times, self.cuts)


def _lines(path: Path) -> Iterator[tuple[str, int]]:
    """A file's lines (decoded, the first ``MAX_LINE`` bytes of a longer one) with their size in bytes, as
    far as it can be read (a broken gzip stream ends them: the log's reader reports it)."""
    try:
        with open_log(path) as fh:
            while line := fh.readline(MAX_LINE):
                size = len(line)
                if not line.endswith(b"\n"):   # a longer line (or the unterminated last one): its rest
                    while rest := fh.readline(MAX_LINE):
                        size += len(rest)
                        if rest.endswith(b"\n"):
                            break
                yield line.removesuffix(b"\n").decode("utf-8", errors="replace").removesuffix("\r"), size
    except (OSError, EOFError):
        return


def log_clock(path: Path, year: int | None, tz_offset_s: int) -> Clock:
    """A log's bytes by its lines' own times (``year`` and ``tz_offset_s`` as its parser has them): the
    bytes up to its first line stamped after t."""
    parser = LineParser(year, tz_offset_s)
    starts: list[int] = []
    times: list[datetime] = []
    offset = 0
    for line, size in _lines(path):
        if (t := parser.scan_time(line)) is not None:
            starts.append(offset)
            times.append(max(t, times[-1]) if times else t)  # a line out of order waits for the one before
        offset += size
    if not starts:
        return Clock(offset)
    return Clock(starts[0], tuple(times), (*starts[1:], offset))


def bench_clock(path: Path) -> Clock:
    """``benchmark.out`` by bench.sh's ``date`` lines: each block up to the ``date`` that closes it."""
    ends: list[int] = []
    times: list[datetime] = []
    offset = 0
    for line, size in _lines(path):
        offset += size
        if (t := bench_date(line)) is not None:
            ends.append(offset)
            times.append(max(t, times[-1]) if times else t)
    return Clock(0, tuple(times), tuple(ends))


def side_clocks(files: list[tuple[Path, FileInfo]], side: Side, end: datetime) -> dict[Path, Clock]:
    """The side files' clocks (``side``: what they hold, read whole), none later than the run's ``end``."""
    ended = {b.concurrency: b.ended for b in side.benchmark if b.ended is not None}
    out: dict[Path, Clock] = {}
    for path, info in files:
        size = file_size(path)
        if info.kind == "benchmark":
            out[path] = bench_clock(path).ending(end, size)
        elif info.kind == "sa-bench-result":
            out[path] = Clock(0).ending(min(ended.get(info.concurrency, end), end), size)
        elif info.kind == "rollup":
            out[path] = Clock(0).ending(min(_rollup_time(path) or end, end), size)
        else:   # job metadata, the recipe: written before the run starts
            out[path] = Clock(size)
    return out


def _rollup_time(path: Path) -> datetime | None:
    try:
        stamp = read_rollup(path).timestamp
        t = datetime.fromisoformat(stamp) if stamp else None
    except (BenchmarkFormatError, OSError, ValueError):
        return None
    return t.replace(tzinfo=UTC) if t is not None and t.tzinfo is None else t  # zone-less: UTC, as every stamp


__all__ = ["Clock", "bench_clock", "log_clock", "side_clocks"]
