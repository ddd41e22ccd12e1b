"""What one poll of a source yields (new records with their file, files that appeared), and the
defaults every source shares."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import NamedTuple

import polars as pl

from diag.parsers.ingest import ParsedLog, merged_records
from diag.parsers.records import Record


class Changes(NamedTuple):
    records: list[tuple[str, Record]]
    added: list[str]
    rows: Sequence[tuple[str, pl.DataFrame, pl.DataFrame]] = ()   # new extracted stats/KV rows per file

    def __bool__(self) -> bool:
        return bool(self.records or self.added or self.rows)

    def each_record(self) -> Iterator[tuple[str, Record]]:
        """The new records with the new rows materialised as records (per file, in line order)."""
        rows = {path: (stats, kv) for path, stats, kv in self.rows}
        done: set[str] = set()
        by_path: dict[str, list[Record]] = {}
        for path, r in self.records:
            by_path.setdefault(path, []).append(r)
        for path, recs in by_path.items():
            stats, kv = rows.get(path, (None, None))
            merged = merged_records(recs, stats, kv) if stats is not None and kv is not None else recs
            done.add(path)
            yield from ((path, r) for r in merged)
        for path, stats, kv in self.rows:
            if path not in done:
                yield from ((path, r) for r in merged_records([], stats, kv))


NO_CHANGES = Changes([], [])


class SourceBase:
    """Defaults every source shares (see :class:`diag.sources.Source`): no run directory, nothing
    skipped, no errors, its own clock is the wall clock, pausing does nothing."""

    label = ""
    root = None
    skipped: tuple[tuple[str, str], ...] = ()
    errors: tuple[str, ...] = ()

    def now(self) -> datetime | None:
        return None

    def due_in(self) -> float | None:
        """Seconds until something held back is due to be read (a poll then shows it); None: nothing held."""
        return None

    def flush(self) -> Changes:
        return NO_CHANGES

    def pause(self) -> None:
        return None

    def adopt(self, logs: Mapping[str, ParsedLog]) -> None:
        """Hold ``logs`` (by path) instead of the logs of those paths from now on: a trimmed copy replaces a
        log (``diag watch``'s retention) so the runs built earlier keep theirs as they were."""
        return None

    def resume(self) -> None:
        return None
