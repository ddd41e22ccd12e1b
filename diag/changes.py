"""What one poll of a source yields (new records with their file, files that appeared), and the
defaults every source shares."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from diag.parsers.records import Record


class Changes(NamedTuple):
    records: list[tuple[str, Record]]
    added: list[str]


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

    def flush(self) -> Changes:
        return NO_CHANGES

    def pause(self) -> None:
        return None

    def resume(self) -> None:
        return None
