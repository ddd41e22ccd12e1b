"""Where a run's records come from: one protocol for every source the pipeline reads.

A source yields parsed-log changes (``poll() -> Changes``: new records with their file, files that
appeared), keeps the :class:`ParsedLog` objects they accumulate in (``logs()``), and knows the run's
typed side facts (``side()``: job, recipe, benchmark). ``finished`` says that it will yield nothing
more (a batch read, a replay that reached its end); ``now()`` is its clock (None: the wall clock).

* :class:`BatchSource` — the files of one run read once through the bulk path (``diag tail``).
* :class:`FollowSource` — the same files followed like ``tail -F`` (``diag tail -f``, ``diag watch``).
* :class:`ReplaySource` — a finished run replayed at a speed, each file as it stood at the virtual time
  (``watch --replay``, :mod:`diag.schedule`).
* :class:`LogsSource` — logs already parsed (one-shot ``/metrics`` scrapes, a Prometheus query).
* :class:`MultiSource` — several sources as one (logs plus live metric sources).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from diag.parsers import inputs
from diag.parsers.columns import empty_kv, empty_stats
from diag.parsers.ingest import ParsedLog
from diag.parsers.layout import FileInfo
from diag.parsers.records import Fault, Lifecycle, Record

from .changes import NO_CHANGES, Changes, SourceBase
from .files import (
    LOG_KINDS,
    SIDE_KINDS,
    RunFiles,
    Side,
    check_paths,
    discover,
    not_there_yet,
    parse_log,
    parse_logs,
    read_side,
    run_root,
)
from .follow import Follower
from .schedule import log_clock, side_clocks


class Source(Protocol):
    label: str

    @property
    def root(self) -> Path | None: ...
    @property
    def skipped(self) -> Sequence[tuple[str, str]]: ...
    @property
    def errors(self) -> Sequence[str]: ...
    @property
    def finished(self) -> bool: ...
    def poll(self) -> Changes: ...
    def flush(self) -> Changes: ...
    def logs(self) -> list[ParsedLog]: ...
    def side(self) -> Side: ...
    def now(self) -> datetime | None: ...
    def due_in(self) -> float | None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def adopt(self, logs: Mapping[str, ParsedLog]) -> None: ...


def orchestrator_view(log: ParsedLog) -> ParsedLog:
    """An orchestrator log as the run model reads it: worker lines quoted in FAILURE DETAILS are not
    the orchestrator's own records (srun-labelled task lines, lifecycle and faults are)."""
    if log.kind != "orchestrator":
        return log
    return replace(log, records=[r for r in log.records if r.task is not None or isinstance(r, (Lifecycle, Fault))],
                   stats=empty_stats(), kv=empty_kv())  # extracted rows carry no srun task: not its own


def run_order(logs: list[ParsedLog]) -> list[ParsedLog]:
    """Followed logs in the batch order, as the run model reads them: orchestrators first (they date the
    workers)."""
    return [orchestrator_view(lg) for lg in logs if lg.kind == "orchestrator"] + \
        [lg for lg in logs if lg.kind != "orchestrator"]


def _run_start(orchestrators: list[ParsedLog]) -> datetime | None:
    stamps = [r.ts for src in orchestrators for r in src.records if isinstance(r, Lifecycle) and r.ts]
    return min(stamps) if stamps else None


def _metric_logs(run: RunFiles) -> list[ParsedLog]:
    """srt-slurm's Prometheus captures and saved ``/metrics`` dumps: stats even when logs have none."""
    from .prom import capture_logs, exposition_log
    from .telemetry import telemetry_logs

    logs = [lg for p, _ in run.of("prometheus-capture") for lg in capture_logs(p)]
    for kind in ("tachometer", "aiperf-metrics"):
        if found := [p for p, _ in run.of(kind)]:
            logs += telemetry_logs(found, kind)
    return logs + [exposition_log(p) for p, _ in run.of("prometheus-text")]


class BatchSource(SourceBase):
    """One run's files, read once: the first poll parses every log (orchestrator first, its start
    dates the workers' month-day stamps)."""

    def __init__(self, run: RunFiles, *, on_bytes: Callable[[int], None] | None = None) -> None:
        self.files = run
        self.root = run.root  # type: ignore[assignment]
        self.skipped = [(str(s.path), s.reason) for s in run.skipped]
        self.label = f"read {run.root}" if run.root else "read once"
        self.on_bytes = on_bytes
        self._logs: list[ParsedLog] | None = None
        self._side: Side | None = None

    @property
    def finished(self) -> bool:
        return self._logs is not None

    def poll(self) -> Changes:
        if self._logs is not None:
            return NO_CHANGES
        orch = [parse_log(p, i, on_bytes=self.on_bytes) for p, i in self.files.of("orchestrator")]
        ref = _run_start(orch)
        workers = parse_logs(self.files.of("worker", "frontend"), ref=ref, on_bytes=self.on_bytes)
        self._logs = [orchestrator_view(lg) for lg in orch] + workers + _metric_logs(self.files)
        return Changes([(lg.path, r) for lg in self._logs for r in lg.records], [lg.path for lg in self._logs],
                       [(lg.path, lg.stats, lg.kv) for lg in self._logs if lg.stats.height or lg.kv.height])

    def flush(self) -> Changes:
        return NO_CHANGES

    def logs(self) -> list[ParsedLog]:
        return list(self._logs or [])

    def side(self) -> Side:
        if self._side is None:
            self._side = read_side(self.files.of(*SIDE_KINDS))
        return self._side

    def now(self) -> datetime | None:
        return None


def _ref_of(files: list[tuple[Path, FileInfo]]) -> datetime | None:
    """The run's start by its orchestrator logs among ``files`` (it dates the workers' lines)."""
    return _run_start([parse_log(p, i) for p, i in files if i.kind == "orchestrator"])


class FollowSource(SourceBase):
    """A run followed like ``tail -F`` (:class:`diag.follow.Follower`), plus its side files and
    Prometheus captures, re-read when they change (benchmark results land at the end of a run)."""

    RESCAN_S = 10.0

    def __init__(self, paths: list[str], *, rescan_s: float = RESCAN_S, wait: bool = False) -> None:
        present = [p for p in paths if not (wait and not_there_yet(p))]  # with wait, the rest is waited for
        check_paths(present)
        files, _ = discover(present)
        self._root_of(files)
        self.follower = Follower(paths, ref=_ref_of(files), wait=wait, ref_of=_ref_of)
        self.paths = self.follower.paths
        self.label = "following " + " ".join(paths)
        self.rescan_s = rescan_s
        self._side = Side()
        self._metrics: list[ParsedLog] = []
        self._sig: tuple[Any, ...] | None = None
        self._checked = 0.0
        self._appeared = 0

    def _root_of(self, files: list[tuple[Path, FileInfo]]) -> None:
        roots = {run_root(p) for p, _ in files}
        self.root = next(iter(roots)) if len(roots) == 1 else None

    @property
    def finished(self) -> bool:
        return False

    @property
    def skipped(self) -> list[tuple[str, str]]:
        return [(str(s.path), s.reason) for s in self.follower.skipped]

    def poll(self) -> Changes:
        recs, added, rows = self.follower.poll()
        if len(self.follower.appeared) != self._appeared:  # a path waited for is there: its run and side files
            self._appeared = len(self.follower.appeared)
            self._root_of(discover(self.paths)[0])
            self._refresh(force=True)
        self._refresh()
        return Changes(recs, added, rows)

    def flush(self) -> Changes:
        recs, rows = self.follower.flush()
        return Changes(recs, [], rows)

    def logs(self) -> list[ParsedLog]:
        return run_order(self.follower.logs()) + self._metrics

    def adopt(self, logs: Mapping[str, ParsedLog]) -> None:
        self.follower.adopt(logs)

    def due_in(self) -> float | None:
        return self.follower.due_in()

    def side(self) -> Side:
        self._refresh()
        return self._side

    def now(self) -> datetime | None:
        return None

    def _refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and self._sig is not None and now - self._checked < self.rescan_s:
            return
        self._checked = now
        files, skipped = discover(self.paths)
        wanted = [(p, i) for p, i in files if i.kind in (*SIDE_KINDS, "prometheus-capture", "prometheus-text",
                                                                    "tachometer", "aiperf-metrics")]
        sig = tuple(sorted((str(p), st.st_size, st.st_mtime_ns) for p, _ in wanted if (st := _stat_of(p)) is not None))
        if sig != self._sig:
            self._sig = sig
            run = RunFiles(self.root, tuple(wanted), tuple(skipped))
            self._side = read_side(run.of(*SIDE_KINDS))
            self._metrics = _metric_logs(run)


def _stat_of(path: Path) -> os.stat_result | None:
    try:
        return inputs.stat(path)
    except OSError:
        return None


@dataclass
class _Clock:
    """Virtual time of a replay: ``start + speed × (unpaused wall seconds)``."""

    start: datetime
    speed: float
    monotonic: Any = time.monotonic
    t0: float | None = None
    paused_at: float | None = None
    paused_total: float = 0.0

    def now(self) -> datetime:
        m = self.monotonic()
        if self.t0 is None:
            self.t0 = m
        ref = self.paused_at if self.paused_at is not None else m
        return self.start + timedelta(seconds=(ref - self.t0 - self.paused_total) * self.speed)

    def pause(self) -> None:
        if self.paused_at is None:
            self.paused_at = self.monotonic()

    def resume(self) -> None:
        if self.paused_at is not None:
            self.paused_total += self.monotonic() - self.paused_at
            self.paused_at = None


class ReplaySource(SourceBase):
    """A finished run replayed at ``speed`` × real time, each file as it stood at the virtual time
    (:mod:`diag.schedule`): the logs are followed like a live run's (:class:`Follower`) as far as their
    lines' own times have come, the benchmark files and metric captures by theirs. So the run's clock is
    where the virtual time has brought its logs, as live; at the end of the run's clock it is the batch read."""

    def __init__(self, run: RunFiles, speed: float = 60.0, monotonic: Callable[[], float] = time.monotonic) -> None:
        if speed <= 0:
            raise ValueError("--speed must be > 0")
        self.files = run
        self.root = run.root  # type: ignore[assignment]
        self.skipped = [(str(s.path), s.reason) for s in run.skipped]
        self.label = f"replay ×{speed:,g}"
        logs = run.of(*LOG_KINDS)
        self._at: datetime | None = None   # the virtual time of the last poll
        self.follower = Follower([], ref=_ref_of(logs), files=logs, visible=self._visible)
        self.clocks = {key: log_clock(Path(key), f.log.year, f.tz) for key, f in self.follower.files.items()}
        metrics = _metric_logs(run)   # captures parsed whole: their records leave by their own times
        stamps = [t for c in self.clocks.values() for t in (c.first, c.last) if t is not None]
        metric_stamps = [r.ts for lg in metrics for r in lg.all_records() if r.ts is not None]
        self.start = min(stamps + metric_stamps, default=datetime(1970, 1, 1, tzinfo=UTC))
        self.end = max(stamps + metric_stamps, default=self.start)   # a capture can outlast the logs
        self._shells = {lg.path: replace(lg, records=[], stats=empty_stats(), kv=empty_kv()) for lg in metrics}
        self._events: list[tuple[datetime, int, str, Record]] = []
        for lg in metrics:
            last = self.start
            for r in lg.all_records():   # a record without a time leaves with the one before it
                last = r.ts or last
                self._events.append((min(last, self.end), len(self._events), lg.path, r))
        self._events.sort(key=lambda e: (e[0], e[1]))
        self._next = 0
        side = run.of(*SIDE_KINDS)
        self.side_clocks = side_clocks(side, read_side(side), self.end)
        self._side_key: tuple[Any, ...] | None = None
        self._side = Side()
        self._done = False
        self.clock = _Clock(self.start, speed, monotonic)

    def _visible(self, key: str) -> int:
        """Bytes of a log there at the virtual time; at the run's end the whole file, read to its end
        (a compressed log broken on the way says so there, as when it is followed)."""
        t = self._at or self.start
        return self.clocks[key].at(t) if t < self.end else sys.maxsize

    def now(self) -> datetime | None:
        """Virtual time; it stops at the end of the run's clock (the final state stays on screen)."""
        return min(self.clock.now(), self.end)

    def pause(self) -> None:
        self.clock.pause()

    def resume(self) -> None:
        self.clock.resume()

    @property
    def finished(self) -> bool:
        return self._done

    def poll(self) -> Changes:
        """What the files gained up to the virtual time; at the run's end, their unterminated last lines."""
        if self._done:
            return NO_CHANGES
        self._at = t = min(self.clock.now(), self.end)
        recs, added, rows = self.follower.poll()
        rows = list(rows)
        while self._next < len(self._events) and self._events[self._next][0] <= t:
            _, _, path, r = self._events[self._next]
            self._shells[path].records.append(r)
            recs.append((path, r))
            self._next += 1
        if t >= self.end:
            while True:   # the rest of a log larger than one poll reads, then its unterminated last line
                more, _, more_rows = self.follower.poll()
                if not more and not more_rows:
                    break
                recs += more
                rows += more_rows
            tail, last_rows = self.follower.flush()
            recs += tail
            rows += last_rows
            self._done = True
        return Changes(recs, added, rows)

    def flush(self) -> Changes:
        return NO_CHANGES

    def logs(self) -> list[ParsedLog]:
        return run_order(self.follower.logs()) + list(self._shells.values())

    def adopt(self, logs: Mapping[str, ParsedLog]) -> None:
        self.follower.adopt(logs)
        self._shells.update((p, lg) for p, lg in logs.items() if p in self._shells)

    def side(self) -> Side:
        """The side files there at the virtual time (``benchmark.out`` as far as its blocks have come)."""
        t = self._at or self.start
        there = [(p, i) for p, i in self.files.of(*SIDE_KINDS) if self.side_clocks[p].there(t)]
        upto = {p: self.side_clocks[p].at(t) for p, i in there if i.kind == "benchmark"}
        key = (tuple(p for p, _ in there), tuple(upto.values()))
        if key != self._side_key:
            self._side_key, self._side = key, read_side(there, upto)
        return self._side


class LogsSource(SourceBase):
    """Logs parsed elsewhere (one-shot scrapes, a Prometheus query), given whole at the first poll."""

    def __init__(self, logs: list[ParsedLog], label: str) -> None:
        self._logs = logs
        self.label = label
        self.root: Path | None = None
        self.skipped: list[tuple[str, str]] = []
        self._given = False

    @property
    def finished(self) -> bool:
        return self._given

    @property
    def errors(self) -> list[str]:
        return [lg.error for lg in self._logs if lg.error]

    def poll(self) -> Changes:
        if self._given:
            return NO_CHANGES
        self._given = True
        return Changes([(lg.path, r) for lg in self._logs for r in lg.records], [lg.path for lg in self._logs])

    def flush(self) -> Changes:
        return NO_CHANGES

    def logs(self) -> list[ParsedLog]:
        return list(self._logs)

    def side(self) -> Side:
        return Side()

    def now(self) -> datetime | None:
        return None


def metric_source(scrape: list[str], prom: str | None, start: datetime | None, end: datetime | None) -> LogsSource:
    """One-shot ``/metrics`` scrapes and a Prometheus server's series over [start, end] as one more
    source of a run (diag.prom). A malformed URL is an InputError; a failing source a log's error."""
    from .files import InputError
    from .prom import PromSourceError, extra_sources

    try:
        logs = extra_sources(scrape, prom, start=start, end=end)
    except PromSourceError as e:
        raise InputError(str(e)) from None
    return LogsSource(logs, "metrics")


class MultiSource(SourceBase):
    """Several sources as one: the first is the run's (its root, side facts, clock, skipped files);
    the others add metric logs (``--scrape``, ``--prom``) whose failures are ``errors``."""

    def __init__(self, sources: list[Any]) -> None:
        self.sources = sources
        self.label = " + ".join(s.label for s in sources)
        self.root = sources[0].root

    @property
    def finished(self) -> bool:
        return all(s.finished for s in self.sources)

    @property
    def skipped(self) -> list[tuple[str, str]]:
        return list(self.sources[0].skipped)

    def poll(self) -> Changes:
        recs: list[tuple[str, Record]] = []
        added: list[str] = []
        rows: list[tuple[str, pl.DataFrame, pl.DataFrame]] = []
        for s in self.sources:
            r, a, new = s.poll()
            recs += r
            added += a
            rows += new
        return Changes(recs, added, rows)

    def flush(self) -> Changes:
        flushed = [s.flush() for s in self.sources]
        return Changes([x for c in flushed for x in c.records], [], [x for c in flushed for x in c.rows])

    def logs(self) -> list[ParsedLog]:
        return [log for s in self.sources for log in s.logs()]

    def adopt(self, logs: Mapping[str, ParsedLog]) -> None:
        for s in self.sources:
            s.adopt(logs)

    def side(self) -> Side:
        return self.sources[0].side()

    def now(self) -> datetime | None:
        return self.sources[0].now()

    def due_in(self) -> float | None:
        return min((d for s in self.sources if (d := s.due_in()) is not None), default=None)

    @property
    def errors(self) -> list[str]:
        """The extra sources' last errors (a scrape that failed, a server that did not answer)."""
        return [e for s in self.sources for e in s.errors]

    def pause(self) -> None:
        self.sources[0].pause()

    def resume(self) -> None:
        self.sources[0].resume()


__all__ = ["LOG_KINDS", "BatchSource", "Changes", "FollowSource", "LogsSource", "MultiSource", "ReplaySource",
           "Source", "orchestrator_view"]
