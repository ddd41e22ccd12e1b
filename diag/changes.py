"""What one poll of a source yields: new records with their file, and files that appeared."""

from __future__ import annotations

from typing import NamedTuple

from diag.parsers.records import Record


class Changes(NamedTuple):
    records: list[tuple[str, Record]]
    added: list[str]


NO_CHANGES = Changes([], [])
