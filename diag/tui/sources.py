"""Where `diag watch` gets records: a followed run, a replayed run, or a run read once.

Every source has the follower's interface (``poll() -> (new records, new files)``, ``logs()``,
``flush()``) plus ``side()`` (job metadata, recipe, benchmark results: what the header needs) and a
``label``. A replay also has ``now()`` (its virtual clock), ``pause()``/``resume()`` and ``done``.
No Textual here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from diag.parsers.ingest import ParsedLog
from diag.parsers.records import Record
from diag.rules.runmodel import Run

from ..follow import Follower, check_paths
from ..sources import discover

Polled = tuple[list[tuple[str, Record]], list[str]]
SIDE_KINDS = ("job-json", "benchmark", "sa-bench-result", "rollup", "recipe")


@dataclass(frozen=True)
class Side:
    """What a run knows besides its logs: job metadata, recipe, benchmark results."""

    job: Any = None
    recipe: Any = None
    benchmark: tuple[Any, ...] = ()
    accuracy: tuple[Any, ...] = ()
    concurrencies: tuple[int, ...] = ()
    build: str | None = None
    errors: tuple[str, ...] = ()

    @classmethod
    def of(cls, run: Run) -> Side:
        return cls(run.job, run.recipe, tuple(run.benchmark), tuple(run.accuracy), tuple(run.concurrencies),
                   run.build, tuple(run.errors))

    def apply(self, run: Run) -> None:
        run.job, run.recipe = self.job, self.recipe
        run.benchmark, run.accuracy = list(self.benchmark), list(self.accuracy)
        run.concurrencies = list(self.concurrencies)
        run.build = self.build
        for ep in run.endpoints.values():
            if not run.build and ep.facts.get("version"):
                run.build = str(ep.facts["version"])


class Source(Protocol):
    label: str

    def poll(self) -> Polled: ...
    def logs(self) -> list[ParsedLog]: ...
    def flush(self) -> list[tuple[str, Record]]: ...
    def side(self) -> Side: ...


def load_side(paths: list[str]) -> Side:
    """Side files under ``paths`` (same readers as ``diag tail``); broken ones become error lines."""
    from ..load import read_side_files

    files, _ = discover(paths)
    run = Run(None, [], [], {})
    read_side_files(run, [(p, i) for p, i in files if i.kind in SIDE_KINDS])
    return Side.of(run)


class FollowSource:
    """A :class:`diag.follow.Follower` (like ``diag tail -f``) plus the run's side files, re-read when
    they change (benchmark results land at the end of a run)."""

    def __init__(self, paths: list[str]) -> None:
        check_paths(paths)
        self.paths = paths
        self.follower = Follower(paths)
        self.label = "following " + " ".join(paths)
        self._side = Side()
        self._sig: tuple[Any, ...] | None = None
        self._checked = 0.0

    def poll(self) -> Polled:
        return self.follower.poll()

    def logs(self) -> list[ParsedLog]:
        return self.follower.logs()

    def flush(self) -> list[tuple[str, Record]]:
        return self.follower.flush()

    def side(self) -> Side:
        now = time.monotonic()
        if self._sig is not None and now - self._checked < 10.0:
            return self._side
        self._checked = now
        files, _ = discover(self.paths)
        sig = tuple(sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p, i in files
                           if i.kind in SIDE_KINDS and p.exists()))
        if sig != self._sig:
            self._sig = sig
            self._side = load_side(self.paths)
        return self._side

    @property
    def skipped(self) -> list[tuple[str, str]]:
        return [(str(s.path), s.reason) for s in self.follower.skipped]


class StaticSource:
    """A run read once (``diag watch --once``): everything arrives at the first poll."""

    def __init__(self, run: Run, label: str = "") -> None:
        self.run = run
        self.label = label or "read once"
        self._given = False
        self.skipped = list(run.skipped)

    def poll(self) -> Polled:
        if self._given:
            return [], []
        self._given = True
        return [(s.path, r) for s in self.run.sources for r in s.records], [s.path for s in self.run.sources]

    def logs(self) -> list[ParsedLog]:
        return self.run.sources

    def flush(self) -> list[tuple[str, Record]]:
        return []

    def side(self) -> Side:
        return Side.of(self.run)


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


@dataclass
class ReplaySource:
    """Replays a finished run: records leave in timestamp order at ``speed`` × real time.

    A record without a timestamp leaves with the last stamped record of its file before it.
    """

    run: Run
    speed: float = 60.0
    monotonic: Any = time.monotonic
    label: str = ""
    _events: list[tuple[datetime, int, str, Record]] = field(default_factory=list)
    _shells: dict[str, ParsedLog] = field(default_factory=dict)
    _next: int = 0

    def __post_init__(self) -> None:
        if self.speed <= 0:
            raise ValueError("--speed must be > 0")
        seq = 0
        start = self.run.start or datetime(1970, 1, 1, tzinfo=UTC)
        for src in self.run.sources:
            self._shells[src.path] = replace(src, records=[])
            last = start
            for r in src.records:
                last = r.ts or last
                self._events.append((last, seq, src.path, r))
                seq += 1
        self._events.sort(key=lambda e: (e[0], e[1]))
        first = self._events[0][0] if self._events else start
        self.clock = _Clock(first, self.speed, self.monotonic)
        self.label = self.label or f"replay ×{self.speed:g}"
        self.skipped = list(self.run.skipped)

    def now(self) -> datetime:
        """Virtual time; it stops at the last record (the final state stays on screen)."""
        t = self.clock.now()
        return min(t, self._events[-1][0]) if self._events else t

    def pause(self) -> None:
        self.clock.pause()

    def resume(self) -> None:
        self.clock.resume()

    @property
    def done(self) -> bool:
        return self._next >= len(self._events)

    def poll(self) -> Polled:
        until = self.now()
        out: list[tuple[str, Record]] = []
        added: list[str] = []
        while self._next < len(self._events) and self._events[self._next][0] <= until:
            _, _, path, r = self._events[self._next]
            shell = self._shells[path]
            if not shell.records:
                added.append(path)
            shell.records.append(r)
            out.append((path, r))
            self._next += 1
        return out, added

    def logs(self) -> list[ParsedLog]:
        return list(self._shells.values())

    def flush(self) -> list[tuple[str, Record]]:
        return []

    def side(self) -> Side:
        return Side.of(self.run)


class MultiSource:
    """Several sources as one (logs, plus the extra sources ``--scrape``/``--prom`` plug in)."""

    def __init__(self, sources: list[Any]) -> None:
        self.sources = sources
        self.label = " + ".join(s.label for s in sources)

    def poll(self) -> Polled:
        recs: list[tuple[str, Record]] = []
        added: list[str] = []
        for s in self.sources:
            r, a = s.poll()
            recs += r
            added += a
        return recs, added

    def logs(self) -> list[ParsedLog]:
        return [log for s in self.sources for log in s.logs()]

    def flush(self) -> list[tuple[str, Record]]:
        return [x for s in self.sources for x in s.flush()]

    def side(self) -> Side:
        return self.sources[0].side()

    @property
    def errors(self) -> list[str]:
        """The extra sources' last errors (a scrape that failed, a server that did not answer)."""
        return [e for s in self.sources for e in getattr(s, "errors", None) or []]

    def __getattr__(self, name: str) -> Any:  # now / pause / resume / done / skipped of the first source
        return getattr(self.sources[0], name)

