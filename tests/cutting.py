"""Test helpers for live = replay = batch: a sample run's files as they stood at a time of the run, each cut
by its own stamps, and the findings a live report may open.

Written apart from the replay's schedule (``diag.schedule``), so that the tests comparing a replay with a
batch read of the cut files mean something: every log line's time through the general path of the line
parser (not the scan's fast path), bench.sh's ``date`` lines by their own pattern, a result JSON once its
point's window ended as the batch read has it, the roll-up at its own time, a Prometheus capture row by row.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

from loading import SAMPLES, report_of

from diag.files import find_runs
from diag.parsers.ingest import infer_tz_offset
from diag.parsers.lineparser import LineParser
from diag.pipeline import Update
from diag.report import Report
from diag.rules.engine import key

LOGS = ("worker", "frontend", "orchestrator")
DATE = re.compile(r"^\s*[A-Z][a-z]{2} ([A-Z][a-z]{2}) +(\d{1,2}) (\d\d:\d\d:\d\d) (?:UTC|GMT) (\d{4})\s*$")


@dataclass(frozen=True)
class Cutter:
    """A run's files and, per file, how much of it stood at a time."""

    run: Path
    logs: dict[Path, list[tuple[datetime, int]]]    # a log: (a stamped line's time, the line's start)
    bench: dict[Path, list[tuple[datetime, int]]]   # benchmark.out: (a date line's time, the end of its line)
    whens: dict[Path, datetime]                     # a file there whole from this time on
    rows: dict[Path, list[tuple[datetime, bytes]]]  # a capture's rows by their time
    start: datetime                                 # the first and last stamp of the logs
    end: datetime

    def at(self, path: Path, t: datetime) -> int:
        """Bytes of a log there at ``t``: up to its first line stamped after ``t``."""
        later = [at for ts, at in self.logs[path] if ts > t]
        return later[0] if later else path.stat().st_size

    def side(self, path: Path, t: datetime) -> bytes | None:
        """What a file other than a log held at ``t`` (None: not there yet)."""
        data = path.read_bytes()
        if path in self.bench:   # in the blocks its date lines close; the rest once the run ended
            ends = [end for ts, end in self.bench[path] if ts <= t]
            return data if t >= self.end else data[:ends[-1]] if ends else b""
        if path in self.rows:
            return b"".join(row for ts, row in self.rows[path] if ts <= t)
        return None if path in self.whens and self.whens[path] > t else data

    def cut(self, t: datetime, into: Path) -> Path:
        """The run's files as they stood at ``t``, written under ``into``."""
        for path in sorted(p for p in self.run.rglob("*") if p.is_file()):
            data = path.read_bytes()[:self.at(path, t)] if path in self.logs else self.side(path, t)
            if data is not None:
                dst = into / path.relative_to(self.run)
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_bytes(data)
        return into


def check_opened(run: str, updates: Iterable[Update], final: Report, how: str) -> None:
    """A live report (a growing run, a replay) opens only findings the batch read of the finished run
    reports, each once per identity (code, endpoint, start); its final report has the batch read's."""
    batch = report_of(SAMPLES / "runs" / run)
    opened = Counter(key(f) for u in updates for f in u.opened)
    want = Counter((f.code, f.endpoint) for f in batch.findings)
    per_code = Counter((code, endpoint) for code, endpoint, _ in opened.elements())
    extra = {k: n for k, n in per_code.items() if n > want.get(k, 0)}
    assert not extra, f"{run} ({how}): opened live more often than the batch report has them: {extra}"
    assert all(n == 1 for n in opened.values()), f"{run} ({how}): reopened: {opened}"
    assert [key(f) for f in final.findings] == [key(f) for f in batch.findings], f"{run} ({how}): final report differs"


def _line_times(path: Path, year: int | None) -> list[tuple[datetime, int]]:
    data = path.read_bytes()
    parser = LineParser(year, infer_tz_offset(data[:65536].decode("utf-8", errors="replace")))
    out, at = [], 0
    for line in data.split(b"\n"):
        t = parser.line_time(line.decode("utf-8", errors="replace").removesuffix("\r"), advance=True)
        if t is not None:
            out.append((t, at))
        at += len(line) + 1
    return out


def _date_lines(path: Path) -> list[tuple[datetime, int]]:
    out, at = [], 0
    for line in path.read_bytes().split(b"\n"):
        at += len(line) + 1
        if m := DATE.match(line.decode("utf-8", errors="replace")):
            out.append((datetime.strptime(" ".join(m.groups()), "%b %d %H:%M:%S %Y").replace(tzinfo=UTC), at))
    return out


@cache
def cutter(name: str) -> Cutter:
    """The cutter of the sample run ``name`` (once per test process)."""
    run = SAMPLES / "runs" / name
    files = find_runs([str(run)])[0]
    batch = report_of(run).run
    years = {Path(lg.path): lg.year for lg in batch.sources}
    logs = {p: _line_times(p, years.get(p)) for p, _ in files.of(*LOGS)}
    stamps = [ts for times in logs.values() for ts, _ in times]
    # a log's first line opens it: a later line stamped earlier (a clock not placed on UTC) comes after it
    start, end = min(times[0][0] for times in logs.values() if times), max(stamps)
    ended = {b.concurrency: b.ended for b in batch.benchmark}
    whens: dict[Path, datetime] = {}
    for path, info in files.of("sa-bench-result"):
        whens[path] = min(ended.get(info.concurrency) or end, end)
    for path, _ in files.of("rollup"):
        stamp = json.loads(path.read_text()).get("timestamp")
        whens[path] = min(datetime.fromisoformat(stamp), end) if stamp else end
    rows = {p: [(datetime.fromtimestamp(json.loads(row)["timestamp_ns"] / 1e9, tz=UTC), row + b"\n")
                for row in p.read_bytes().splitlines() if row.strip()] for p, _ in files.of("prometheus-capture")}
    return Cutter(run, logs, {p: _date_lines(p) for p, _ in files.of("benchmark")}, whens, rows, start, end)
